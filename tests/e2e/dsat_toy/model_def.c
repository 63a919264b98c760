/* A small engine-based trial for the end-to-end test of `dtrain dsat` (tests/e2e/test_dsat.sh)
 * and bench/dsat_quality.sh, on a fixed synthetic dataset (no files needed), its DeepSpeed
 * config from hyperparameters.deepspeed_config. Hyperparameters:
 *   model               "mlp" (default: 64 -> 256 -> 256 -> 10 on float features) or "gpt"
 *                       (the benchmark gpt: vocab 256, sequence 128, d_model 256, 4 heads,
 *                       4 layers, 3.3 M parameters; next-token prediction);
 *   workspace_from_mbs  (0: off) from that micro-batch on, each step also holds a 64 MiB
 *                       workspace the memory model cannot see, as a kernel's scratch might: an
 *                       OOM the search must take as a result, on any CPU;
 *   batch_ms            (0: off) sleep that long in each step, so that a test can act while a
 *                       search runs;
 *   read_file           (none) a file the trial must find in its model directory (dtrain dsat
 *                       --include puts it there): without it the trial fails at its start. */
#include <dtrain/dtrain.h>
#include <dtrain/engine.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 2048 /* mlp examples */
#define D 64
#define NS 512 /* gpt sequences */
#define T 128
#define V 256

typedef struct toy {
    dt_trial_ctx *c;
    dt_engine *e;
    bool gpt;
    float x[N * D];
    int64_t y[N];
    int64_t tok[NS * T], next[NS * T];
} toy;

/* The read_file hyperparameter's file is in the model directory (true when none is asked). */
static bool has_read_file(dt_trial_ctx *c) {
    const char *name = dt_hparam_str(c, "read_file", NULL), *dir = dt_trial_model_dir(c);
    if (!name) return true;
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir ? dir : ".", name);
    FILE *f = fopen(p, "r");
    char line[64] = "";
    bool ok = f && fgets(line, sizeof line, f) && !strncmp(line, "included", 8);
    if (f) fclose(f);
    if (!ok) fprintf(stderr, "dsat_toy: cannot read %s (read_file)\n", p);
    return ok;
}

static void *toy_init(dt_trial_ctx *c) {
    if (!has_read_file(c)) return NULL;
    toy *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->c = c;
    t->gpt = !strcmp(dt_hparam_str(c, "model", "mlp"), "gpt");
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < D; k++) t->x[i * D + k] = (float)((i * 31 + k * 17) % 97) / 97.f;
        t->y[i] = i % 10;
    }
    for (int i = 0; i < NS * T; i++) {
        t->tok[i] = (i * 7 + i / T * 13) % V;
        t->next[i] = ((i + 1) * 7 + i / T * 13) % V;
    }
    dt_gpt_config g = {.vocab = V, .seq = T, .d_model = 256, .n_head = 4, .n_layer = 4};
    json_t *cfg = dt_ds_config_from_hparams(c);
    dt_module *net = !cfg     ? NULL
                     : t->gpt ? dt_model_gpt(&g)
                              : dt_nn_sequential(dt_nn_linear(D, 256, true), dt_nn_relu(),
                                                 dt_nn_linear(256, 256, true), dt_nn_relu(),
                                                 dt_nn_linear(256, 10, true), NULL);
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
    dt_array_field mlp[2] = {
        {.field = {.name = "x", .dtype = DT_DTYPE_F32, .ndim = 1, .shape = {D}}, .data = t->x},
        {.field = {.name = "y", .dtype = DT_DTYPE_I64, .ndim = 0}, .data = t->y},
    };
    dt_array_field gpt[2] = {
        {.field = {.name = "x", .dtype = DT_DTYPE_I64, .ndim = 1, .shape = {T}}, .data = t->tok},
        {.field = {.name = "y", .dtype = DT_DTYPE_I64, .ndim = 1, .shape = {T}}, .data = t->next},
    };
    dt_dataset *ds = dt_dataset_from_arrays(2, t->gpt ? gpt : mlp, t->gpt ? NS : N, false);
    dt_loader_opts o = {.batch_size = dt_trial_train_micro_batch_size(t->c),
                        .shuffle = true,
                        .drop_last = true,
                        .seed = dt_trial_seed(t->c),
                        .take_dataset = true};
    return dt_loader_new(dt_trial_runtime(t->c), ds, &o);
}

static dt_tensor *toy_loss(toy *t, dt_batch *b) {
    return dt_cross_entropy(dt_engine_forward(t->e, dt_batch_get(b, "x")), dt_batch_get(b, "y"),
                            -100);
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
    dt_tensor *l = toy_loss(t, b);
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
    dt_tensor *l = b ? toy_loss(t, b) : NULL;
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
