/* A small trial for the end-to-end tests of `dtrain train`: an MLP with dropout on a fixed
 * synthetic dataset (no files needed). Hyperparameters: global_batch_size, lr, sigterm_at
 * (raise SIGTERM inside that batch, to test a stop by signal), batch_ms (sleep that long in
 * every batch, so a test can act while a trial runs), hang_at (never return from that batch:
 * a hung run, for the master's silence check; only in runs up to hang_runs when given). Its
 * save hook writes
 * probe.json with the first values of every parameter, which tests/e2e/st_read.py compares
 * with what the safetensors package loads from model.safetensors.
 * TimedTrial (tests/e2e/test_asha_time.sh, adaptive_asha timed by a metric the trial reports)
 * trains the same way; its validation metrics carry records_seen, the training records of this
 * run so far, and its validation_loss is hparam x plus a term that shrinks with training, so a
 * trial's rank is its x. */
#include <dtrain/dtrain.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define N 160
#define D 10

typedef struct toy {
    dt_trial_ctx *c;
    dt_module *net;
    dt_optimizer *opt;
    float x[N * D];
    int64_t y[N];
    int64_t seen; /* training records of this run (one slot) */
} toy;

static void *toy_init(dt_trial_ctx *c) {
    if (!(dt_hparam_double(c, "lr", 0.01) > 0)) { /* the searcher is told (no restart) */
        dt_error(DT_ERR_INVALID_HP, "lr must be positive");
        return NULL;
    }
    toy *t = calloc(1, sizeof *t);
    t->c = c;
    dt_rng r;
    dt_rng_init(&r, 123);
    dt_rng_fill_normal(&r, t->x, N * D, 0, 1);
    for (int i = 0; i < N; i++) t->y[i] = (t->x[i * D] > 0) + 2 * (t->x[i * D + 1] > 0);
    t->net =
        dt_wrap_model(c, dt_nn_sequential(dt_nn_linear(D, 24, true), dt_nn_relu(),
                                          dt_nn_dropout(0.1f), dt_nn_linear(24, 4, true), NULL));
    dt_optim_config oc = dt_optim_defaults(DT_OPTIM_ADAMW);
    oc.lr = (float)dt_hparam_double(c, "lr", 0.01);
    t->opt = dt_wrap_optimizer(c, dt_optim_new_for_module(&oc, t->net), t->net);
    if (!t->opt) {
        free(t);
        return NULL;
    }
    return t;
}

static dt_loader *loader(toy *t, int64_t n, bool shuffle) {
    dt_array_field f[2] = {
        {.field = {.name = "x", .dtype = DT_DTYPE_F32, .ndim = 1, .shape = {D}}, .data = t->x},
        {.field = {.name = "y", .dtype = DT_DTYPE_I64, .ndim = 0}, .data = t->y},
    };
    dt_loader_opts o = {.batch_size = dt_trial_per_slot_batch_size(t->c),
                        .shuffle = shuffle,
                        .seed = dt_trial_seed(t->c),
                        .take_dataset = true};
    return dt_loader_new(dt_trial_runtime(t->c), dt_dataset_from_arrays(2, f, n, false), &o);
}

static dt_loader *toy_train_loader(void *s) {
    return loader(s, N, true);
}
static dt_loader *toy_val_loader(void *s) {
    return loader(s, 48, false);
}

static dt_metrics toy_train(void *s, dt_batch *b, int64_t e, int64_t i) {
    (void)e;
    toy *t = s;
    if (i == dt_hparam_int(t->c, "sigterm_at", -1)) raise(SIGTERM);
    int64_t ms = dt_hparam_int(t->c, "batch_ms", 0);
    if (ms > 0) usleep((useconds_t)(ms * 1000));
    const char *run = getenv("DTRAIN_TRIAL_RUN");
    if (i == dt_hparam_int(t->c, "hang_at", -1) &&
        (run ? atoll(run) : 1) <= dt_hparam_int(t->c, "hang_runs", INT32_MAX))
        for (;;) pause();
    dt_tensor *x = dt_batch_get(b, "x");
    dt_tensor *loss = dt_cross_entropy(dt_module_forward(t->net, x), dt_batch_get(b, "y"), -100);
    if (dt_trial_backward(t->c, loss) || dt_step_optimizer(t->c, t->opt, NULL))
        return dt_metrics_error();
    t->seen += x->shape[0];
    return dt_metrics_scalar("loss", dt_item(loss));
}

static dt_metrics toy_eval(void *s, dt_batch *b, int64_t i) {
    (void)i;
    toy *t = s;
    dt_tensor *loss = dt_cross_entropy(dt_module_forward(t->net, dt_batch_get(b, "x")),
                                       dt_batch_get(b, "y"), -100);
    return loss ? dt_metrics_scalar("validation_loss", dt_item(loss)) : dt_metrics_error();
}

static dt_status toy_save(void *s, const char *dir) {
    toy *t = s;
    char p[1024];
    snprintf(p, sizeof p, "%s/probe.json", dir);
    FILE *f = fopen(p, "w");
    if (!f) return dt_error(DT_ERR_IO, "cannot write %s", p);
    fprintf(f, "{");
    for (int i = 0; i < dt_module_param_count(t->net); i++) {
        dt_tensor *w = dt_module_param_tensor(t->net, i);
        fprintf(f, "%s\"%s\": {\"shape\": [", i ? ", " : "", dt_module_param_name(t->net, i));
        for (int d = 0; d < w->ndim; d++)
            fprintf(f, "%s%lld", d ? ", " : "", (long long)w->shape[d]);
        fprintf(f, "], \"first\": [");
        for (int k = 0; k < 3; k++)
            fprintf(f, "%s%.9g", k ? ", " : "", ((const float *)w->data)[k]);
        fprintf(f, "]}");
    }
    fprintf(f, "}\n");
    return fclose(f) == 0 ? DT_OK : dt_error(DT_ERR_IO, "cannot write %s", p);
}

static void toy_free(void *s) {
    free(s);
}

const dt_trial_def ToyTrial = {
    .name = "ToyTrial",
    .init = toy_init,
    .build_training_data_loader = toy_train_loader,
    .build_validation_data_loader = toy_val_loader,
    .train_batch = toy_train,
    .evaluate_batch = toy_eval,
    .save = toy_save,
    .free = toy_free,
};

static dt_metrics timed_eval(void *s, dt_batch *b, int64_t i) {
    (void)b, (void)i;
    toy *t = s;
    dt_metrics m = dt_metrics_scalar("validation_loss", dt_hparam_double(t->c, "x", 0) +
                                                            100.0 / (100.0 + (double)t->seen));
    if (!dt_metrics_set(&m, "records_seen", (double)t->seen)) return dt_metrics_error();
    return m;
}

const dt_trial_def TimedTrial = {
    .name = "TimedTrial",
    .init = toy_init,
    .build_training_data_loader = toy_train_loader,
    .build_validation_data_loader = toy_val_loader,
    .train_batch = toy_train,
    .evaluate_batch = timed_eval,
    .free = toy_free,
};

/* A custom search method (`searcher: {name: custom, method: toy_search}`): two trials, lr 0.01
 * and 0.02, each trained to max_length, then the search ends. */
#include <dtrain/search.h>

typedef struct toy_search_state {
    int created, closed;
} toy_search_state;

static dt_status toy_search_initial(void *state, dt_search_ctx *sc, dt_search_ops *out) {
    toy_search_state *s = state;
    const dt_expconf *cfg = dt_search_config(sc);
    for (int i = 0; i < 2; i++) {
        json_t *hp = json_pack("{s:I,s:f,s:I}", "global_batch_size", (json_int_t)16, "lr",
                               0.01 * (i + 1), "batch_ms", (json_int_t)0);
        int64_t id = 0;
        dt_status st = dt_search_create_with(sc, hp, out, &id);
        json_decref(hp);
        if (st == DT_OK) st = dt_search_validate_after(out, id, cfg->searcher.max_length);
        if (st != DT_OK) return st;
        s->created++;
    }
    return DT_OK;
}

static dt_status toy_search_validated(void *state, dt_search_ctx *sc, int64_t id, double metric,
                                      dt_length len, dt_search_ops *out) {
    (void)state, (void)sc, (void)metric, (void)len;
    return dt_search_close(out, id);
}

static dt_status toy_search_closed(void *state, dt_search_ctx *sc, int64_t id, dt_search_ops *out) {
    (void)sc, (void)id;
    toy_search_state *s = state;
    return ++s->closed == s->created ? dt_search_shutdown(out, false, false) : DT_OK;
}

static double toy_search_progress(void *state, dt_search_ctx *sc) {
    (void)sc;
    return ((toy_search_state *)state)->closed / 2.0;
}

static json_t *toy_search_save(void *state) {
    toy_search_state *s = state;
    return json_pack("{s:i,s:i}", "created", s->created, "closed", s->closed);
}

static dt_status toy_search_load(void *state, const json_t *saved) {
    toy_search_state *s = state;
    s->created = (int)json_integer_value(json_object_get(saved, "created"));
    s->closed = (int)json_integer_value(json_object_get(saved, "closed"));
    return DT_OK;
}

dt_status toy_search(const dt_expconf *cfg, dt_search_method *out) {
    (void)cfg;
    toy_search_state *s = calloc(1, sizeof *s);
    if (!s) return dt_error(DT_ERR_OOM, "out of memory");
    *out = (dt_search_method){.name = "toy_search",
                              .state = s,
                              .initial_operations = toy_search_initial,
                              .on_validation_completed = toy_search_validated,
                              .on_trial_closed = toy_search_closed,
                              .progress = toy_search_progress,
                              .save = toy_search_save,
                              .load = toy_search_load,
                              .free = free};
    return DT_OK;
}
