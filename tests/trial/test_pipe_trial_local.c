/* Pipeline engines in engine-based trials (ds_trial.c, dt_wrap_pipe_engine) at one process,
 * one stage, through the fit loop (tests/mpi/test_pipe_trial.c runs 2 and 4 stages):
 *   - a one-stage pipeline trial trains the same weights as the plain engine-based trial over
 *     the same layers and micro-batches, with one ds_train_batch call per global batch
 *     (gradient_accumulation_steps for the plain one) and the same records;
 *   - the stage's context is in evaluation mode during validation, in training mode during
 *     training; the pipeline checkpoint is the trial's "model0" and loads back through
 *     dt_trial_load_from_checkpoint;
 *   - dt_batch_iter_pipe_data falls back to the first / second field, and fails cleanly
 *     without an iterator;
 *   - errors: a validation loader shorter than one pipeline evaluation, a pipeline wrapped
 *     twice or after a plain engine, a stage engine given to dt_wrap_model_engine. */
#include "dtrain/engine.h"
#include "dtrain/pipe.h"
#include "dtrain/trial.h"
#include "dtrain/trialio.h"
#include "fixtures/files.h"
#include "fixtures/toy_trial.h"
#include "test.h"
#include "trial/trial_iface.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIM 6
#define HID 12
#define N 52 /* 13 micro-batches of 4: not a multiple of GAS */
#define N_VAL 24
#define MB 4
#define GAS 3

static char g_root[256], g_init[300];

static bool g_pipe = true; /* the trial wraps a pipeline (else a plain engine) */
static bool g_dropout;     /* a dropout layer (evaluation mode check) */
static int64_t g_n_val = N_VAL;
static int64_t g_calls, g_evals, g_bad_mode;

static bool err_has(const char *s) {
    return strstr(dt_last_error(), s) != NULL;
}

static dt_module *lin_in(void *a) {
    (void)a;
    return dt_nn_linear(DIM, HID, true);
}
static dt_module *lin_out(void *a) {
    (void)a;
    return dt_nn_linear(HID, 3, true);
}
static dt_module *relu(void *a) {
    (void)a;
    return dt_nn_relu();
}
static dt_module *drop(void *a) {
    (void)a;
    return dt_nn_dropout(g_dropout ? 0.3f : 0.f);
}

static const dt_pipe_layer LAYERS[] = {
    {.type = "Linear", .build = lin_in},
    {.type = "ReLU", .build = relu},
    {.type = "Dropout", .build = drop},
    {.type = "Linear", .build = lin_out},
};
#define NL 4

static dt_tensor *ce(dt_tensor *out, dt_tensor *labels, void *user) {
    (void)user;
    return dt_cross_entropy(out, labels, -100);
}

static dt_pipe_engine *make_pipe(dt_trial_ctx *c) {
    json_t *cfg = dt_ds_config_from_hparams(c);
    dt_pipe_opts o = dt_pipe_defaults();
    o.num_stages = 1;
    o.loss = ce;
    o.init_weights = g_init;
    dt_pipe_engine *p = cfg ? dt_pipe_engine_init(NL, LAYERS, &o, cfg) : NULL;
    json_decref(cfg);
    return p;
}

typedef struct lt {
    dt_trial_ctx *c;
    dt_pipe_engine *p;
    dt_engine *e;
} lt;

static void *lt_init(dt_trial_ctx *c) {
    lt *t = calloc(1, sizeof *t);
    t->c = c;
    if (g_pipe) {
        t->p = dt_wrap_pipe_engine(c, make_pipe(c));
        if (!t->p) {
            free(t);
            return NULL;
        }
        return t;
    }
    /* the same layers as one Sequential from the same weights */
    dt_module *net = dt_nn_sequential(lin_in(NULL), relu(NULL), drop(NULL), lin_out(NULL), NULL);
    dt_module_build(net, dt_trial_runtime(c), 1);
    dt_safetensors *f = dt_safetensors_open(g_init);
    for (int i = 0; f && i < dt_module_param_count(net); i++)
        dt_safetensors_read_into(f, dt_module_param_name(net, i), dt_module_param_tensor(net, i));
    dt_safetensors_close(f);
    dt_ctx_reset(dt_trial_runtime(c));
    json_t *cfg = dt_ds_config_from_hparams(c);
    dt_engine *e = cfg ? dt_engine_init(net, cfg) : NULL;
    json_decref(cfg);
    if (!e) dt_module_free(net);
    t->e = dt_wrap_model_engine(c, e);
    if (!t->e) {
        free(t);
        return NULL;
    }
    return t;
}

static dt_loader *lt_loader(lt *t, int64_t n, bool train) {
    return toy_loader(dt_trial_runtime(t->c), dt_trial_seed(t->c), n, train,
                      dt_trial_train_micro_batch_size(t->c));
}

static dt_loader *lt_train_loader(void *s) {
    return lt_loader(s, N, true);
}
static dt_loader *lt_val_loader(void *s) {
    return lt_loader(s, g_n_val, false);
}

static dt_ctx *stage_ctx(lt *t) {
    return dt_module_ctx(dt_pipe_stage_module(t->p));
}

static dt_metrics lt_train(void *s, dt_batch_iter *it, int64_t e, int64_t i) {
    (void)e, (void)i;
    lt *t = s;
    g_calls++;
    if (t->p) {
        g_bad_mode += !dt_ctx_training(stage_ctx(t));
        dt_status st;
        float l = dt_pipe_train_batch(t->p, dt_batch_iter_pipe_data, it, &st);
        if (st != DT_OK) return dt_metrics_error();
        return dt_metrics_scalar("loss", l);
    }
    double l;
    if (toy_engine_micro(t->e, dt_batch_iter_next(it), &l) != DT_OK) return dt_metrics_error();
    return dt_metrics_scalar("loss", l);
}

static dt_metrics lt_eval(void *s, dt_batch_iter *it, int64_t i) {
    (void)i;
    lt *t = s;
    g_evals++;
    if (t->p) {
        g_bad_mode += dt_ctx_training(stage_ctx(t));
        dt_status st;
        float l = dt_pipe_eval_batch(t->p, dt_batch_iter_pipe_data, it, &st);
        if (st != DT_OK) return dt_metrics_error();
        return dt_metrics_scalar("validation_loss", l);
    }
    return toy_ds_eval_batch(&(toy){.c = t->c, .e = t->e}, it, i);
}

static void lt_free(void *s) {
    free(s);
}

static const dt_trial_def LT = {
    .name = "PipeLocal",
    .init = lt_init,
    .build_training_data_loader = lt_train_loader,
    .build_validation_data_loader = lt_val_loader,
    .ds_train_batch = lt_train,
    .ds_evaluate_batch = lt_eval,
    .free = lt_free,
};

static json_t *config(void) {
    char buf[512];
    snprintf(buf, sizeof buf,
             "{\"train_micro_batch_size_per_gpu\": %d, \"gradient_accumulation_steps\": %d,"
             " \"steps_per_print\": 100000,"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.02}},"
             " \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 3}},"
             " \"gradient_clipping\": 1.0}",
             MB, GAS);
    return json_pack("{s:{s:o}}", "hyperparameters", "deepspeed_config", dt_ds_config_load(buf));
}

static dt_fit_opts fit_opts(const char *dir, int64_t batches, const char *metrics) {
    dt_fit_opts o = toy_fit_opts(dir, batches, 4);
    o.metrics_out = metrics;
    return o;
}

static dt_status run(const char *name, int64_t batches, bool pipe) {
    char dir[400], met[400];
    snprintf(dir, sizeof dir, "%s/%s", g_root, name);
    snprintf(met, sizeof met, "%s/%s.jsonl", g_root, name);
    g_pipe = pipe;
    g_calls = g_evals = g_bad_mode = 0;
    json_t *cfg = config();
    dt_fit_opts o = fit_opts(dir, batches, met);
    dt_status st = dt_trainer_fit(&LT, cfg, 5, &o);
    json_decref(cfg);
    return st;
}

/* One stage against the plain engine over the same layers (the stream crosses epochs). */
static void test_matches_plain_engine(void) {
    const int B = 10;
    CHECK_MSG(run("plain", B, false) == DT_OK, "plain: %s", dt_last_error());
    CHECK(g_calls == (int64_t)B * GAS);
    CHECK_MSG(run("pipe", B, true) == DT_OK, "pipe: %s", dt_last_error());
    CHECK_MSG(g_calls == B, "pipeline: %lld calls for %d batches", (long long)g_calls, B);
    /* validations at 4, 8 and 10, each floor(6 / 3) = 2 calls of GAS micro-batches */
    CHECK_MSG(g_evals == 3 * 2, "pipeline: %lld evaluation calls", (long long)g_evals);
    CHECK(g_bad_mode == 0);
    char pa[600], pb[600];
    snprintf(pa, sizeof pa, "%s/plain/batch_%d/model0/model.safetensors", g_root, B);
    snprintf(pb, sizeof pb, "%s/pipe/batch_%d/model0/model.safetensors", g_root, B);
    static const char *const names[] = {"0.weight", "0.bias", "3.weight", "3.bias"};
    int64_t n;
    double worst = fx_floats_rel_diff(pa, pb, 4, names, &n);
    CHECK_MSG(n == HID * DIM + HID + 3 * HID + 3, "%lld weights", (long long)n);
    CHECK_MSG(worst <= 1e-6, "one-stage pipeline vs plain engine: %g relative", worst);
    /* the same records: B global batches of MB x GAS */
    char ma[400], mb[400], rec[64];
    snprintf(ma, sizeof ma, "%s/plain.jsonl", g_root);
    snprintf(mb, sizeof mb, "%s/pipe.jsonl", g_root);
    snprintf(rec, sizeof rec, "\"batches\":%d,\"epochs\"", B);
    CHECK(fx_file_has(mb, rec));
    snprintf(rec, sizeof rec, "\"records\":%d,", B * MB * GAS);
    CHECK(fx_file_has(ma, rec) && fx_file_has(mb, rec));
    /* the pipeline checkpoint is the trial's model0 */
    snprintf(pb, sizeof pb, "%s/pipe/batch_%d", g_root, B);
    dt_ckpt *ck = dt_ckpt_open(pb);
    CHECK_MSG(ck != NULL, "%s", dt_last_error());
    CHECK(ck && dt_ckpt_path(ck, "model0/pipe_state.json") &&
          dt_ckpt_path(ck, "model0/stage_0/engine/optim_shard_0_of_1.safetensors"));
    dt_ckpt_close(ck);
}

/* Dropout in the stage: evaluation mode during validation; load_from_checkpoint. */
static void test_eval_mode_and_load(void) {
    g_dropout = true;
    CHECK_MSG(run("drop", 5, true) == DT_OK, "%s", dt_last_error());
    CHECK(g_bad_mode == 0 && g_evals > 0);
    char path[600];
    snprintf(path, sizeof path, "%s/drop/batch_5", g_root);
    json_t *cfg = config();
    dt_trial_ctx *c = NULL;
    lt *t = dt_trial_load_from_checkpoint(&LT, path, cfg, &c);
    json_decref(cfg);
    CHECK_MSG(t && c, "load_from_checkpoint: %s", dt_last_error());
    if (t) {
        CHECK(dt_trial_pipe_engine(c, 0) == t->p);
        CHECK(dt_engine_global_steps(dt_pipe_stage_engine(t->p)) == 5);
        snprintf(path, sizeof path, "%s/drop/batch_5/model0/model.safetensors", g_root);
        dt_safetensors *f = dt_safetensors_open(path);
        dt_ctx *x = dt_ctx_new(NULL, 0);
        dt_tensor *w = f ? dt_safetensors_get(f, x, "3.weight") : NULL;
        dt_tensor *mine = dt_module_find_param(dt_pipe_stage_module(t->p), "3.weight");
        CHECK(w && mine && !memcmp(w->data, mine->data, dt_nbytes(w)));
        dt_safetensors_close(f);
        dt_ctx_free(x);
        LT.free(t);
        dt_trial_ctx_free(c);
    }
    g_dropout = false;
}

/* Fields named otherwise: the first is the inputs, the second the labels. */
static void test_field_fallback(void) {
    toy_cfg.x_name = "in"; /* instead of "x" / "y" */
    toy_cfg.y_name = "target";
    CHECK_MSG(run("names", 2, true) == DT_OK, "%s", dt_last_error());
    toy_cfg.x_name = toy_cfg.y_name = NULL;
    dt_ctx *c = dt_ctx_new(NULL, 0);
    dt_tensor *in = NULL, *lab = NULL;
    CHECK(dt_batch_iter_pipe_data(NULL, 0, c, true, &in, true, &lab) == DT_ERR_STATE &&
          err_has("no data loader") && !in && !lab);
    dt_ctx_free(c);
}

static void test_errors(void) {
    /* a validation loader of GAS - 1 micro-batches */
    g_n_val = (int64_t)MB * (GAS - 1);
    CHECK(run("short", 2, true) == DT_ERR_CONFIG &&
          err_has("validation loader has 2 micro-batches") &&
          err_has("gradient_accumulation_steps"));
    CHECK(g_calls == 0);
    g_n_val = N_VAL;
    /* wrapping */
    json_t *cfg = config();
    dt_trial_ctx *c = dt_trial_ctx_new(cfg, 1);
    dt_pipe_engine *p = make_pipe(c);
    CHECK(p && dt_wrap_pipe_engine(c, p) == p);
    CHECK(dt_trial_engine_count(c) == 1 && dt_trial_pipe_engine(c, 0) == p &&
          dt_trial_engine(c, 0) == dt_pipe_stage_engine(p));
    CHECK(dt_trial_train_micro_batch_size(c) == MB && dt_trial_global_batch_size(c) == MB * GAS);
    CHECK(dt_wrap_pipe_engine(c, p) == NULL && err_has("already wrapped")); /* not freed */
    CHECK(dt_wrap_model_engine(c, dt_pipe_stage_engine(p)) == NULL &&
          err_has("dt_wrap_pipe_engine")); /* left to its pipeline */
    CHECK(dt_trial_engine_count(c) == 1 && dt_trial_pipe_engine(c, 1) == NULL);
    dt_trial_ctx_free(c); /* frees the pipeline */
    /* a pipeline after a plain engine: refused and freed */
    c = dt_trial_ctx_new(cfg, 1);
    dt_module *m = dt_nn_linear(DIM, 3, true);
    dt_module_build(m, dt_trial_runtime(c), 1);
    json_t *ec = dt_ds_config_from_hparams(c);
    CHECK(dt_wrap_model_engine(c, dt_engine_init(m, ec)) != NULL);
    json_decref(ec);
    CHECK(dt_wrap_pipe_engine(c, make_pipe(c)) == NULL && err_has("first engine"));
    CHECK(dt_trial_engine_count(c) == 1 && dt_trial_pipe_engine(c, 0) == NULL);
    CHECK(dt_wrap_pipe_engine(c, NULL) == NULL);
    dt_trial_ctx_free(c);
    json_decref(cfg);
}

int main(void) {
    if (!fx_tmpdir(g_root, sizeof g_root, "test-pipe-trial")) return 1;
    toy_cfg = toy_defaults(); /* the toy dataset: 6 features, 3 classes */
    toy_cfg.dim = DIM;
    toy_cfg.shuffle = toy_cfg.drop_last = true;
    toy_data(5, N);
    /* the initial weights both trials start from */
    snprintf(g_init, sizeof g_init, "%s/init.safetensors", g_root);
    dt_ctx *c = dt_ctx_new(NULL, 1);
    dt_module *net = dt_nn_sequential(lin_in(NULL), relu(NULL), drop(NULL), lin_out(NULL), NULL);
    dt_module_build(net, c, 9);
    CHECK(dt_module_param_count(net) == 4 && fx_save_params(g_init, net));
    dt_module_free(net);
    dt_ctx_free(c);
    dt_log_set_level(DT_LOG_ERROR);
    TEST_RUN(test_matches_plain_engine);
    TEST_RUN(test_eval_mode_and_load);
    TEST_RUN(test_field_fallback);
    TEST_RUN(test_errors);
    if (!fx_rmtree(g_root)) fprintf(stderr, "could not remove %s\n", g_root);
    TEST_END();
}
