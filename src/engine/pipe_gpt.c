/* pipe_gpt.c — the GPT of dt_model_gpt as a pipeline's layer list (its token + position
 * embedding, its blocks, its final norm + LM head), and the default pipeline loss: the
 * cross-entropy of the last stage's logits against class ids, as a GPT's next-token targets
 * or a classifier's labels need. */
#include "pipe_impl.h"

#include <stdlib.h>

static dt_module *build_embedding(void *cfg) {
    return dt_gpt_embedding(cfg);
}
static dt_module *build_block(void *cfg) {
    return dt_gpt_block(cfg);
}
static dt_module *build_head(void *cfg) {
    return dt_gpt_head(cfg);
}

dt_pipe_layer *dt_pipe_gpt_layers(const dt_gpt_config *cfg, int *n_layers) {
    if (!cfg || !n_layers || cfg->n_layer < 1) {
        dt_error(DT_ERR_INVALID, "dt_pipe_gpt_layers: needs a GPT config with n_layer >= 1");
        return NULL;
    }
    int n = (int)cfg->n_layer + 2;
    dt_pipe_layer *l = calloc((size_t)n, sizeof *l);
    if (!l) {
        dt_error(DT_ERR_OOM, "dt_pipe_gpt_layers: %d layers", n);
        return NULL;
    }
    void *arg = (void *)cfg; /* the builders only read it */
    l[0] = (dt_pipe_layer){.type = "GPTEmbedding", .build = build_embedding, .arg = arg};
    for (int i = 1; i < n - 1; i++)
        l[i] = (dt_pipe_layer){.type = "GPTBlock", .build = build_block, .arg = arg};
    l[n - 1] = (dt_pipe_layer){.type = "GPTHead", .build = build_head, .arg = arg};
    *n_layers = n;
    return l;
}

dt_tensor *dt__pipe_class_loss(dt_tensor *logits, dt_tensor *targets, void *user) {
    (void)user;
    int64_t C = logits->shape[logits->ndim - 1];
    return dt_cross_entropy(dt_reshape(logits, 2, (int64_t[]){dt_numel(logits) / C, C}),
                            dt_reshape(targets, 1, (int64_t[]){dt_numel(targets)}), -100);
}
