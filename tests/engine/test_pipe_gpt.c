/* A GPT as a pipeline layer list (dt_pipe_gpt_layers) and the pipeline's default loss:
 *   - the list is the embedding, n_layer blocks and the head, with their type names, and
 *     each layer builds from the config;
 *   - a one-stage pipeline over it with no loss function given evaluates and trains with the
 *     mean token cross-entropy: bit for bit the loss of an explicit cross-entropy over the
 *     flattened logits and targets, and (evaluation) the cross-entropy of the stage module's
 *     own forward;
 *   - errors: no config, no blocks. */
#include <dtrain/pipe.h>

#include "test.h"

#include <stdlib.h>
#include <string.h>

#define B 2
#define T 8
#define V 32

static int64_t g_x[B * T], g_y[B * T];

static dt_status data(void *user, int64_t micro, dt_ctx *ctx, bool want_in, dt_tensor **in,
                      bool want_lab, dt_tensor **lab) {
    (void)user, (void)micro;
    if (want_in) *in = dt_tensor_wrap(ctx, DT_DTYPE_I64, 2, (int64_t[]){B, T}, g_x);
    if (want_lab) *lab = dt_tensor_wrap(ctx, DT_DTYPE_I64, 2, (int64_t[]){B, T}, g_y);
    return DT_OK;
}

static dt_tensor *explicit_ce(dt_tensor *logits, dt_tensor *y, void *user) {
    (void)user;
    return dt_cross_entropy(dt_reshape(logits, 2, (int64_t[]){B * T, V}),
                            dt_reshape(y, 1, (int64_t[]){B * T}), -100);
}

static dt_pipe_engine *pipe_of(const dt_gpt_config *g, dt_pipe_loss_fn loss) {
    int n = 0;
    dt_pipe_layer *layers = dt_pipe_gpt_layers(g, &n);
    json_t *ds = json_pack("{s:i, s:i, s:{s:s, s:{s:f}}}", "train_micro_batch_size_per_gpu", B,
                           "gradient_accumulation_steps", 2, "optimizer", "type", "AdamW", "params",
                           "lr", 1e-3);
    dt_pipe_opts o = dt_pipe_defaults();
    o.num_stages = 1;
    o.loss = loss;
    o.seed = 3;
    dt_pipe_engine *p = layers ? dt_pipe_engine_init(n, layers, &o, ds) : NULL;
    json_decref(ds);
    free(layers);
    return p;
}

static void test_layers(void) {
    dt_gpt_config g = {.vocab = V, .seq = T, .d_model = 16, .n_head = 2, .n_layer = 3};
    int n = 0;
    dt_pipe_layer *l = dt_pipe_gpt_layers(&g, &n);
    CHECK(l && n == 5);
    if (!l) return;
    CHECK(!strcmp(l[0].type, "GPTEmbedding") && !strcmp(l[1].type, "GPTBlock") &&
          !strcmp(l[3].type, "GPTBlock") && !strcmp(l[4].type, "GPTHead"));
    int bad = 0;
    for (int i = 0; i < n; i++) {
        dt_module *m = l[i].build(l[i].arg);
        bad += !m || l[i].tied_key != NULL;
        dt_module_free(m);
    }
    CHECK(bad == 0);
    free(l);
    CHECK(dt_pipe_gpt_layers(NULL, &n) == NULL && dt_last_status() == DT_ERR_INVALID);
    g.n_layer = 0;
    CHECK(dt_pipe_gpt_layers(&g, &n) == NULL && strstr(dt_last_error(), "n_layer"));
}

static void test_default_loss(void) {
    for (int i = 0; i < B * T; i++) {
        g_x[i] = (i * 7 + 3) % V;
        g_y[i] = i == 5 ? -100 : (i * 11 + 1) % V; /* one ignored target */
    }
    dt_gpt_config g = {.vocab = V, .seq = T, .d_model = 16, .n_head = 2, .n_layer = 2};
    dt_pipe_engine *a = pipe_of(&g, NULL), *b = pipe_of(&g, explicit_ce);
    CHECK(a && b);
    if (!a || !b) return;
    dt_status st1, st2;
    float ea = dt_pipe_eval_batch(a, data, NULL, &st1),
          eb = dt_pipe_eval_batch(b, data, NULL, &st2);
    CHECK(st1 == DT_OK && st2 == DT_OK && ea == eb && ea > 0);
    /* the stage module's own forward, through the plain cross-entropy */
    dt_module *m = dt_pipe_stage_module(a);
    dt_ctx *ctx = dt_module_ctx(m);
    bool grad = dt_set_grad_enabled(ctx, false);
    dt_tensor *x = dt_tensor_wrap(ctx, DT_DTYPE_I64, 2, (int64_t[]){B, T}, g_x);
    dt_tensor *y = dt_tensor_wrap(ctx, DT_DTYPE_I64, 2, (int64_t[]){B, T}, g_y);
    dt_tensor *l = explicit_ce(dt_module_forward(m, x), y, NULL);
    CHECK_NEAR(l ? dt_item(l) : -1, ea, 1e-5);
    dt_set_grad_enabled(ctx, grad);
    int bad = 0;
    for (int s = 0; s < 3; s++) {
        float la = dt_pipe_train_batch(a, data, NULL, &st1);
        float lb = dt_pipe_train_batch(b, data, NULL, &st2);
        bad += st1 != DT_OK || st2 != DT_OK || la != lb;
    }
    CHECK(bad == 0);
    CHECK(dt_pipe_eval_batch(a, data, NULL, &st1) < ea); /* it learns */
    dt_pipe_engine_free(a);
    dt_pipe_engine_free(b);
}

int main(void) {
    TEST_RUN(test_layers);
    TEST_RUN(test_default_loss);
    TEST_END();
}
