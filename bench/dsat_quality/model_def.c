/* The benchmark gpt (dtrain bench's: vocab 256, sequence 128, d_model 256, 4 heads, 4 layers,
 * 3.3 M parameters) as an engine-based trial for bench/dsat_quality.sh: next-token prediction
 * on a fixed synthetic token stream (no files needed), its DeepSpeed config from
 * hyperparameters.deepspeed_config. */
#include <dtrain/dtrain.h>
#include <dtrain/engine.h>

#include <stdlib.h>

#define N 512
#define T 128
#define V 256

typedef struct gpt {
    dt_trial_ctx *c;
    dt_engine *e;
    int64_t x[N * T], y[N * T];
} gpt;

static void *gpt_init(dt_trial_ctx *c) {
    gpt *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->c = c;
    for (int i = 0; i < N * T; i++) {
        t->x[i] = (i * 7 + i / T * 13) % V;
        t->y[i] = ((i + 1) * 7 + i / T * 13) % V;
    }
    dt_gpt_config g = {.vocab = V, .seq = T, .d_model = 256, .n_head = 4, .n_layer = 4};
    json_t *cfg = dt_ds_config_from_hparams(c);
    dt_module *net = cfg ? dt_model_gpt(&g) : NULL;
    if (net && dt_module_build(net, dt_trial_runtime(c), dt_trial_seed(c)) != DT_OK) {
        dt_module_free(net);
        net = NULL;
    }
    dt_engine *e = net ? dt_engine_init(net, cfg) : NULL;
    if (net && !e) dt_module_free(net);
    json_decref(cfg);
    t->e = dt_wrap_model_engine(c, e);
    if (!t->e) {
        free(t);
        return NULL;
    }
    return t;
}

static dt_loader *gpt_loader(void *s) {
    gpt *t = s;
    dt_array_field f[2] = {
        {.field = {.name = "x", .dtype = DT_DTYPE_I64, .ndim = 1, .shape = {T}}, .data = t->x},
        {.field = {.name = "y", .dtype = DT_DTYPE_I64, .ndim = 1, .shape = {T}}, .data = t->y},
    };
    dt_dataset *ds = dt_dataset_from_arrays(2, f, N, false);
    dt_loader_opts o = {.batch_size = dt_trial_train_micro_batch_size(t->c),
                        .shuffle = true,
                        .drop_last = true,
                        .seed = dt_trial_seed(t->c),
                        .take_dataset = true};
    return dt_loader_new(dt_trial_runtime(t->c), ds, &o);
}

static dt_tensor *gpt_loss(gpt *t, dt_batch *b) {
    return dt_cross_entropy(dt_engine_forward(t->e, dt_batch_get(b, "x")), dt_batch_get(b, "y"),
                            -100);
}

static dt_metrics gpt_train(void *s, dt_batch_iter *it, int64_t epoch, int64_t batch) {
    (void)epoch, (void)batch;
    gpt *t = s;
    dt_batch *b = dt_batch_iter_next(it);
    dt_tensor *l = b ? gpt_loss(t, b) : NULL;
    if (!l) return dt_metrics_error();
    double loss = dt_item(l);
    if (dt_engine_backward(t->e, l) != DT_OK || dt_engine_step(t->e) != DT_OK)
        return dt_metrics_error();
    return dt_metrics_scalar("loss", loss);
}

static dt_metrics gpt_eval(void *s, dt_batch_iter *it, int64_t batch) {
    (void)batch;
    gpt *t = s;
    dt_batch *b = dt_batch_iter_next(it);
    dt_tensor *l = b ? gpt_loss(t, b) : NULL;
    return l ? dt_metrics_scalar("validation_loss", dt_item(l)) : dt_metrics_error();
}

static void gpt_free(void *s) {
    free(s);
}

const dt_trial_def DsatGptTrial = {
    .name = "DsatGptTrial",
    .init = gpt_init,
    .build_training_data_loader = gpt_loader,
    .build_validation_data_loader = gpt_loader,
    .ds_train_batch = gpt_train,
    .ds_evaluate_batch = gpt_eval,
    .free = gpt_free,
};
