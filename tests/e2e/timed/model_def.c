/* A trial that reports a time metric, for the end-to-end test of adaptive_asha timed by it
 * (tests/e2e/test_asha_time.sh): a linear classifier on a fixed synthetic dataset whose
 * validation metrics carry records_seen, the training records of this run so far. Its
 * validation_loss is hparam x plus a term that shrinks with training, so a trial's rank is its
 * x. Hyperparameters: global_batch_size, x, batch_ms (sleep that long in every batch). */
#include <dtrain/dtrain.h>

#include <stdlib.h>
#include <unistd.h>

#define N 64
#define D 4

typedef struct timed {
    dt_trial_ctx *c;
    dt_module *net;
    dt_optimizer *opt;
    float x[N * D];
    int64_t y[N];
    int64_t seen; /* training records of this run */
} timed;

static void *timed_init(dt_trial_ctx *c) {
    timed *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->c = c;
    dt_rng r;
    dt_rng_init(&r, 7);
    dt_rng_fill_normal(&r, t->x, N * D, 0, 1);
    for (int i = 0; i < N; i++) t->y[i] = t->x[i * D] > 0;
    t->net = dt_wrap_model(c, dt_nn_linear(D, 2, true));
    dt_optim_config oc = dt_optim_defaults(DT_OPTIM_SGD);
    oc.lr = 0.01f;
    t->opt = dt_wrap_optimizer(c, dt_optim_new_for_module(&oc, t->net), t->net);
    if (!t->opt) {
        free(t);
        return NULL;
    }
    return t;
}

static dt_loader *timed_loader(void *s) {
    timed *t = s;
    dt_array_field f[2] = {
        {.field = {.name = "x", .dtype = DT_DTYPE_F32, .ndim = 1, .shape = {D}}, .data = t->x},
        {.field = {.name = "y", .dtype = DT_DTYPE_I64, .ndim = 0}, .data = t->y},
    };
    dt_loader_opts o = {.batch_size = dt_trial_per_slot_batch_size(t->c),
                        .seed = dt_trial_seed(t->c),
                        .take_dataset = true};
    return dt_loader_new(dt_trial_runtime(t->c), dt_dataset_from_arrays(2, f, N, false), &o);
}

static dt_metrics timed_train(void *s, dt_batch *b, int64_t e, int64_t i) {
    (void)e, (void)i;
    timed *t = s;
    int64_t ms = dt_hparam_int(t->c, "batch_ms", 0);
    if (ms > 0) usleep((useconds_t)(ms * 1000));
    dt_tensor *x = dt_batch_get(b, "x");
    dt_tensor *loss = dt_cross_entropy(dt_module_forward(t->net, x), dt_batch_get(b, "y"), -100);
    if (dt_trial_backward(t->c, loss) || dt_step_optimizer(t->c, t->opt, NULL))
        return dt_metrics_error();
    t->seen += x->shape[0]; /* one slot */
    return dt_metrics_scalar("loss", dt_item(loss));
}

static dt_metrics timed_eval(void *s, dt_batch *b, int64_t i) {
    (void)b, (void)i;
    timed *t = s;
    dt_metrics m = dt_metrics_scalar("validation_loss", dt_hparam_double(t->c, "x", 0) +
                                                            100.0 / (100.0 + (double)t->seen));
    if (!dt_metrics_set(&m, "records_seen", (double)t->seen)) return dt_metrics_error();
    return m;
}

static void timed_free(void *s) {
    free(s);
}

const dt_trial_def TimedTrial = {
    .name = "TimedTrial",
    .init = timed_init,
    .build_training_data_loader = timed_loader,
    .build_validation_data_loader = timed_loader,
    .train_batch = timed_train,
    .evaluate_batch = timed_eval,
    .free = timed_free,
};
