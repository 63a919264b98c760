/* A small engine-based trial for the end-to-end test of `dtrain dsat` (tests/e2e/test_dsat.sh):
 * an MLP (64 -> 256 -> 256 -> 10) on a fixed synthetic dataset (no files needed), its
 * DeepSpeed config from hyperparameters.deepspeed_config. Large micro-batches run out of the
 * device budget the test sets (DT_DEVICE_MEMORY). Hyperparameter `workspace_from_mbs` (0: off):
 * from that micro-batch on, each step also holds a 64 MiB workspace the memory model cannot
 * see, as a kernel's scratch might — an OOM the search must take as a result, on any CPU.
 * Hyperparameter `batch_ms` (0: off) sleeps that long in each step, so that a test can act
 * while a search runs. */
#include <dtrain/dtrain.h>
#include <dtrain/engine.h>

#include <stdlib.h>
#include <unistd.h>

#define N 2048
#define D 64

typedef struct toy {
    dt_trial_ctx *c;
    dt_engine *e;
    float x[N * D];
    int64_t y[N];
} toy;

static void *toy_init(dt_trial_ctx *c) {
    toy *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->c = c;
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < D; k++) t->x[i * D + k] = (float)((i * 31 + k * 17) % 97) / 97.f;
        t->y[i] = i % 10;
    }
    json_t *cfg = dt_ds_config_from_hparams(c);
    dt_module *net = cfg ? dt_nn_sequential(dt_nn_linear(D, 256, true), dt_nn_relu(),
                                            dt_nn_linear(256, 256, true), dt_nn_relu(),
                                            dt_nn_linear(256, 10, true), NULL)
                         : NULL;
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

static dt_loader *toy_loader(void *s) {
    toy *t = s;
    dt_array_field f[2] = {
        {.field = {.name = "x", .dtype = DT_DTYPE_F32, .ndim = 1, .shape = {D}}, .data = t->x},
        {.field = {.name = "y", .dtype = DT_DTYPE_I64, .ndim = 0}, .data = t->y},
    };
    dt_dataset *ds = dt_dataset_from_arrays(2, f, N, false);
    dt_loader_opts o = {.batch_size = dt_trial_train_micro_batch_size(t->c),
                        .shuffle = true,
                        .drop_last = true,
                        .seed = dt_trial_seed(t->c),
                        .take_dataset = true};
    return dt_loader_new(dt_trial_runtime(t->c), ds, &o);
}

static dt_metrics toy_train(void *s, dt_batch_iter *it, int64_t epoch, int64_t batch) {
    (void)epoch, (void)batch;
    toy *t = s;
    dt_batch *b = dt_batch_iter_next(it);
    if (!b) return dt_metrics_error();
    int64_t from = dt_hparam_int(t->c, "workspace_from_mbs", 0);
    if (from > 0 && dt_trial_train_micro_batch_size(t->c) >= from) {
        dt_device *dev = dt_ctx_device(dt_trial_runtime(t->c));
        if (dt_mem_charge(dev, DT_MEM_OTHER, 64 << 20) != DT_OK) return dt_metrics_error();
        dt_mem_release(dev, DT_MEM_OTHER, 64 << 20);
    }
    int64_t ms = dt_hparam_int(t->c, "batch_ms", 0);
    if (ms > 0) usleep((useconds_t)(ms * 1000));
    dt_tensor *l =
        dt_cross_entropy(dt_engine_forward(t->e, dt_batch_get(b, "x")), dt_batch_get(b, "y"), -100);
    if (!l) return dt_metrics_error();
    double loss = dt_item(l);
    if (dt_engine_backward(t->e, l) != DT_OK || dt_engine_step(t->e) != DT_OK)
        return dt_metrics_error();
    return dt_metrics_scalar("loss", loss);
}

static dt_metrics toy_eval(void *s, dt_batch_iter *it, int64_t batch) {
    (void)batch;
    toy *t = s;
    dt_batch *b = dt_batch_iter_next(it);
    if (!b) return dt_metrics_error();
    dt_tensor *l =
        dt_cross_entropy(dt_engine_forward(t->e, dt_batch_get(b, "x")), dt_batch_get(b, "y"), -100);
    return l ? dt_metrics_scalar("validation_loss", dt_item(l)) : dt_metrics_error();
}

static void toy_free(void *s) {
    free(s);
}

const dt_trial_def DsatToyTrial = {
    .name = "DsatToyTrial",
    .init = toy_init,
    .build_training_data_loader = toy_loader,
    .build_validation_data_loader = toy_loader,
    .ds_train_batch = toy_train,
    .ds_evaluate_batch = toy_eval,
    .free = toy_free,
};
