/* Tests for src/trial/fit.c: the fit loop end to end on a small synthetic trial (an MLP with
 * dropout on shuffled in-memory data):
 *   - exactness: N batches in one run give the same model.safetensors bytes as N/2 batches,
 *     a stop (by max_length, and by SIGTERM in the middle of training), and a resume to N;
 *   - validation metrics, the metrics-out file, checkpoint policy and the latest pointer;
 *   - a corrupted checkpoint is refused on resume and the files on disk are untouched;
 *   - a non-finite loss stops training with an error naming the batch. */
#include "dtrain/trial.h"
#include "dtrain/trialio.h"
#include "trial/trial_impl.h"
#include "fixtures/files.h"
#include "fixtures/toy_trial.h"
#include "test.h"

#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool g_fp16;       /* use_amp(FP16) in init */
static int64_t g_skipped; /* skipped steps seen at the end of the last fit */
static bool g_extras;     /* function reducers, profiler, trial-side TensorBoard scalars */
static dt_fn_reducer *g_max_loss, *g_n_val;

static double reduce_max(const double *v, int64_t n, void *user) {
    (void)user;
    double m = -INFINITY;
    for (int64_t i = 0; i < n; i++) m = v[i] > m ? v[i] : m;
    return m;
}

static double reduce_count(const double *v, int64_t n, void *user) {
    (void)v, (void)user;
    return (double)n;
}

/* the toy trial (an MLP with dropout on shuffled data, AdamW), with a step schedule, and AMP
 * or the extras when asked */
static void *fit_init(dt_trial_ctx *c) {
    toy *t = toy_init(c);
    g_max_loss = g_n_val = NULL;
    if (!t) return NULL;
    bool ok = !g_fp16 || dt_trial_use_amp(c, DT_AMP_FP16) == DT_OK;
    if (ok && g_extras) {
        g_max_loss = dt_wrap_reducer_fn(c, reduce_max, NULL, "max_loss", true);
        g_n_val = dt_wrap_reducer_fn(c, reduce_count, NULL, "val_batches", false);
        ok = g_max_loss && g_n_val && dt_trial_set_profiler(c, true, 2, 3) == DT_OK;
    }
    dt_sched_config sc = dt_sched_defaults(DT_SCHED_STEP_LR);
    sc.step_size = 3;
    sc.gamma = 0.5f;
    if (ok &&
        !dt_wrap_lr_scheduler(c, dt_sched_new(&sc, t->opt), DT_LR_STEP_EVERY_OPTIMIZER_STEP, 1))
        ok = false;
    if (!ok) toy_free(t);
    return ok ? t : NULL;
}

static void after_step(toy *t, int64_t i, double loss) {
    g_skipped = t->c->skipped_steps;
    if (g_max_loss) dt_fn_reducer_update(g_max_loss, loss);
    if (g_extras && dt_trial_tensorboard_writer(t->c))
        dt_tb_add_scalar(dt_trial_tensorboard_writer(t->c), "trial/custom", 1.f, i);
}

static void after_eval(toy *t, double loss) {
    (void)t, (void)loss;
    if (g_n_val) dt_fn_reducer_update(g_n_val, 1.0);
}

static dt_trial_def Toy;

static char g_root[256];

static dt_fit_opts opts(const char *dir, int64_t batches) {
    dt_fit_opts o = toy_fit_opts(dir, batches, 5);
    o.reporting_period = (dt_length){DT_UNIT_BATCHES, 4};
    o.save_trial_best = 1;
    return o;
}

/* The bytes of DIR/<latest>/model.safetensors. */
static char *latest_model(const char *dir, size_t *n) {
    char p[512];
    return fx_latest(dir, "model.safetensors", p, sizeof p) ? fx_slurp(p, n) : NULL;
}

static json_t *config(void) {
    json_error_t e;
    return json_loads("{\"hyperparameters\": {\"global_batch_size\": 8}}", 0, &e);
}

static void test_exact_resume(void) {
    char a[300], b[300], c2[300];
    snprintf(a, sizeof a, "%s/full", g_root);
    snprintf(b, sizeof b, "%s/halves", g_root);
    snprintf(c2, sizeof c2, "%s/signal", g_root);
    json_t *cfg = config();
    const int64_t N = 30; /* 12 batches per epoch: crosses epochs, stops mid-epoch */
    dt_fit_opts o = opts(a, N);
    CHECK(dt_trainer_fit(&Toy, cfg, 7, &o) == DT_OK);
    /* halves: stop by max_length at N/2, then resume to N */
    o = opts(b, N / 2);
    CHECK(dt_trainer_fit(&Toy, cfg, 7, &o) == DT_OK);
    char name[128], path[512];
    snprintf(path, sizeof path, "%s/latest", b);
    FILE *f = fopen(path, "r");
    CHECK(f && fgets(name, sizeof name, f));
    if (f) fclose(f);
    name[strcspn(name, "\n")] = 0;
    snprintf(path, sizeof path, "%s/%s", b, name);
    o = opts(b, N);
    o.latest_checkpoint = path;
    CHECK(dt_trainer_fit(&Toy, cfg, 7, &o) == DT_OK);
    /* stopped by SIGTERM inside batch 17, then resumed */
    toy_cfg.sigterm_at = 17;
    o = opts(c2, N);
    CHECK(dt_trainer_fit(&Toy, cfg, 7, &o) == DT_OK);
    toy_cfg.sigterm_at = -1;
    snprintf(path, sizeof path, "%s/batch_18", c2);
    struct stat st;
    CHECK_MSG(stat(path, &st) == 0, "a checkpoint at batch 18 after the signal");
    o = opts(c2, N);
    o.latest_checkpoint = path;
    CHECK(dt_trainer_fit(&Toy, cfg, 7, &o) == DT_OK);
    size_t na = 0, nb = 0, nc = 0;
    char *ma = latest_model(a, &na), *mb = latest_model(b, &nb), *mc = latest_model(c2, &nc);
    CHECK(ma && mb && mc && na > 0);
    CHECK_MSG(ma && mb && na == nb && !memcmp(ma, mb, na), "max_length stop + resume differs");
    CHECK_MSG(ma && mc && na == nc && !memcmp(ma, mc, na), "SIGTERM stop + resume differs");
    free(ma), free(mb), free(mc);
    json_decref(cfg);
}

static void test_metrics_and_policy(void) {
    char d[300], mo[320];
    snprintf(d, sizeof d, "%s/metrics", g_root);
    snprintf(mo, sizeof mo, "%s/metrics.jsonl", g_root);
    json_t *cfg = config();
    dt_fit_opts o = opts(d, 12);
    o.metrics_out = mo;
    o.checkpoint_policy = DT_CKPT_ALL;
    o.save_trial_latest = 10;
    CHECK(dt_trainer_fit(&Toy, cfg, 3, &o) == DT_OK);
    FILE *f = fopen(mo, "r");
    int ntrain = 0, nval = 0;
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        json_error_t e;
        json_t *j = json_loads(line, 0, &e);
        CHECK_MSG(j != NULL, "metrics line is JSON: %s", line);
        const char *kind = json_string_value(json_object_get(j, "kind"));
        json_t *m = json_object_get(j, "metrics");
        if (kind && !strcmp(kind, "training")) {
            ntrain++;
            CHECK(json_is_number(json_object_get(m, "loss")));
        } else if (kind && !strcmp(kind, "validation")) {
            nval++;
            CHECK(json_is_number(json_object_get(m, "validation_loss")));
        }
        json_decref(j);
    }
    if (f) fclose(f);
    CHECK_MSG(ntrain == 3 && nval == 3,
              "training lines %d (want 3), validation %d (want 3: at 5, 10, end)", ntrain, nval);
    /* policy all: a checkpoint after each validation (5, 10, 12) */
    char **names;
    int n;
    CHECK(dt_ckpt_list(d, &names, &n) == DT_OK);
    CHECK_MSG(n == 3, "%d checkpoints", n);
    dt_ckpt_list_free(names);
    char tb[400];
    snprintf(tb, sizeof tb, "%s/tensorboard", d);
    struct stat st;
    CHECK(stat(tb, &st) == 0 && S_ISDIR(st.st_mode));
    json_decref(cfg);
}

static void test_corrupt_resume(void) {
    char d[300], path[400];
    snprintf(d, sizeof d, "%s/corrupt", g_root);
    json_t *cfg = config();
    dt_fit_opts o = opts(d, 6);
    CHECK(dt_trainer_fit(&Toy, cfg, 5, &o) == DT_OK);
    snprintf(path, sizeof path, "%s/batch_6/model.safetensors", d);
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (f) {
        fseek(f, -3, SEEK_END);
        fputc('Z', f);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/batch_6", d);
    o = opts(d, 12);
    o.latest_checkpoint = path;
    CHECK(dt_trainer_fit(&Toy, cfg, 5, &o) != DT_OK);
    CHECK_MSG(strstr(dt_last_error(), "model.safetensors") != NULL, "message: %s", dt_last_error());
    /* nothing new was written */
    char **names;
    int n;
    CHECK(dt_ckpt_list(d, &names, &n) == DT_OK && n == 1);
    dt_ckpt_list_free(names);
    json_decref(cfg);
}

static void test_nan_loss(void) {
    char d[300];
    snprintf(d, sizeof d, "%s/nan", g_root);
    json_t *cfg = config();
    toy_cfg.nan_at = 4;
    dt_fit_opts o = opts(d, 10);
    CHECK(dt_trainer_fit(&Toy, cfg, 5, &o) == DT_ERR_INVALID);
    CHECK_MSG(strstr(dt_last_error(), "batch 4") != NULL, "message: %s", dt_last_error());
    toy_cfg.nan_at = -1;
    json_decref(cfg);
}

/* The largest difference between two checkpoints' weights of the same model (the float data
 * after the safetensors header). */
static double max_weight_diff(const char *a, const char *b, size_t n) {
    uint64_t hlen = 0;
    memcpy(&hlen, a, sizeof hlen);
    double m = 0;
    for (size_t off = 8 + (size_t)hlen; off + 4 <= n; off += 4) {
        float x, y;
        memcpy(&x, a + off, 4);
        memcpy(&y, b + off, 4);
        m = fmax(m, fabs((double)x - (double)y));
    }
    return m;
}

/* fp16: the matmuls round to fp16 and the loss is scaled by a power of two and divided back:
 * the run stays close to the f32 run but is not its bits. An injected Inf gradient skips
 * exactly that step, and the scaler state survives a checkpoint. */
static void test_fp16(void) {
    char a[300], b[300], c2[300];
    snprintf(a, sizeof a, "%s/fp32", g_root);
    snprintf(b, sizeof b, "%s/fp16", g_root);
    snprintf(c2, sizeof c2, "%s/fp16ovf", g_root);
    json_t *cfg = config();
    dt_fit_opts o = opts(a, 10);
    CHECK(dt_trainer_fit(&Toy, cfg, 9, &o) == DT_OK);
    g_fp16 = true;
    o = opts(b, 10);
    CHECK(dt_trainer_fit(&Toy, cfg, 9, &o) == DT_OK);
    CHECK(g_skipped == 0);
    size_t na = 0, nb = 0, nc = 0;
    char *ma = latest_model(a, &na), *mb = latest_model(b, &nb);
    CHECK_MSG(ma && mb && na == nb && memcmp(ma, mb, na), "fp16 left the f32 bits unchanged");
    double d = ma && mb && na == nb ? max_weight_diff(ma, mb, na) : 1;
    CHECK_MSG(d < 1e-2, "fp16 weights differ from f32 by %g", d);
    toy_cfg.inf_grad_at = 4;
    o = opts(c2, 10);
    CHECK(dt_trainer_fit(&Toy, cfg, 9, &o) == DT_OK);
    CHECK_MSG(g_skipped == 1, "skipped %lld steps", (long long)g_skipped);
    char *mc = latest_model(c2, &nc);
    CHECK_MSG(mc && nc == nb && memcmp(mb, mc, nb), "the overflow step must change the result");
    char sp[400];
    snprintf(sp, sizeof sp, "%s/batch_10/state.json", c2);
    json_error_t e;
    json_t *st = json_load_file(sp, 0, &e);
    CHECK(st && json_integer_value(json_object_get(st, "skipped_steps")) == 1);
    json_t *ls = json_object_get(st, "loss_scaler");
    CHECK(ls && json_integer_value(json_object_get(ls, "last_overflow_iter")) == 4);
    json_decref(st);
    toy_cfg.inf_grad_at = -1;
    g_fp16 = false;
    free(ma), free(mb), free(mc);
    json_decref(cfg);
}

/* load_from_checkpoint gives the trained weights, in evaluation mode. */
static void test_load_from_checkpoint(void) {
    char d[300], path[400];
    snprintf(d, sizeof d, "%s/load", g_root);
    json_t *cfg = config();
    dt_fit_opts o = opts(d, 7);
    CHECK(dt_trainer_fit(&Toy, cfg, 4, &o) == DT_OK);
    snprintf(path, sizeof path, "%s/batch_7", d);
    dt_trial_ctx *c = NULL;
    toy *t = dt_trial_load_from_checkpoint(&Toy, path, NULL, &c);
    CHECK(t && c);
    if (t) {
        dt_safetensors *f = NULL;
        snprintf(path, sizeof path, "%s/batch_7/model.safetensors", d);
        f = dt_safetensors_open(path);
        dt_tensor *w = dt_safetensors_get(f, dt_trial_runtime(c), "3.weight");
        dt_tensor *p = dt_module_find_param(t->net, "3.weight");
        CHECK(w && p && !memcmp(w->data, p->data, dt_nbytes(p)));
        CHECK(!dt_grad_enabled(dt_trial_runtime(c)) && !dt_ctx_training(dt_trial_runtime(c)));
        CHECK(dt_hparam_int(c, "global_batch_size", 0) == 8);
        dt_safetensors_close(f);
        toy_free(t);
        dt_trial_ctx_free(c);
    }
    CHECK(dt_trial_load_from_checkpoint(&Toy, "/nonexistent/ckpt", NULL, &c) == NULL);
    json_decref(cfg);
}

/* Function reducers, the profiler and the trial's TensorBoard writer. */
static void test_reducers_profiler(void) {
    char d[300], mo[320];
    snprintf(d, sizeof d, "%s/extras", g_root);
    snprintf(mo, sizeof mo, "%s/extras.jsonl", g_root);
    json_t *cfg = config();
    g_extras = true;
    dt_fit_opts o = opts(d, 8);
    o.metrics_out = mo;
    CHECK(dt_trainer_fit(&Toy, cfg, 3, &o) == DT_OK);
    g_extras = false;
    FILE *f = fopen(mo, "r");
    char line[4096];
    int nprof = 0, ntrain_max = 0, nval_count = 0;
    while (f && fgets(line, sizeof line, f)) {
        json_error_t e;
        json_t *j = json_loads(line, 0, &e);
        const char *kind = json_string_value(json_object_get(j, "kind"));
        json_t *m = json_object_get(j, "metrics");
        if (kind && !strcmp(kind, "profiler")) {
            nprof++;
            CHECK(json_number_value(json_object_get(m, "step_ms")) > 0);
            CHECK(json_number_value(json_object_get(m, "gflops")) > 0);
            CHECK(json_is_number(json_object_get(m, "data_ms")) &&
                  json_number_value(json_object_get(m, "data_ms")) >= 0);
        }
        if (kind && !strcmp(kind, "training")) {
            /* the window's timings: loader and train_batch, within the wall time per batch */
            double dms = json_number_value(json_object_get(j, "data_ms"));
            double tms = json_number_value(json_object_get(j, "train_batch_ms"));
            double rate = json_number_value(json_object_get(j, "records_per_s"));
            CHECK_MSG(json_is_number(json_object_get(j, "data_ms")) && dms >= 0 && tms > 0 &&
                          rate > 0 && dms + tms <= 8 / rate * 1e3 * 1.0001,
                      "training line timings: data %g ms, train_batch %g ms, %g records/s", dms,
                      tms, rate);
            double mx = json_number_value(json_object_get(m, "max_loss"));
            double mean = json_number_value(json_object_get(m, "loss"));
            ntrain_max += json_is_number(json_object_get(m, "max_loss")) && mx >= mean;
        }
        /* 40 validation samples in batches of 8 */
        if (kind && !strcmp(kind, "validation"))
            nval_count += json_number_value(json_object_get(m, "val_batches")) == 5;
        json_decref(j);
    }
    if (f) fclose(f);
    CHECK_MSG(nprof == 2, "%d profiler lines (batches 2..3)", nprof);
    CHECK_MSG(ntrain_max == 2, "max_loss in %d training lines", ntrain_max);
    CHECK_MSG(nval_count == 2, "val_batches == 5 in %d validation lines", nval_count);
    json_decref(cfg);
}

/* The "batches" values of the profiler lines in a metrics file, as a bit set (batches < 64). */
static uint64_t profiled_batches(const char *path) {
    FILE *f = fopen(path, "r");
    char line[4096];
    uint64_t set = 0;
    while (f && fgets(line, sizeof line, f)) {
        json_error_t e;
        json_t *j = json_loads(line, 0, &e);
        const char *kind = json_string_value(json_object_get(j, "kind"));
        json_int_t b = json_integer_value(json_object_get(j, "batches"));
        if (kind && !strcmp(kind, "profiler") && b >= 0 && b < 64) set |= (uint64_t)1 << b;
        json_decref(j);
    }
    if (f) fclose(f);
    return set;
}

/* The profiler from the fit options (the experiment config's profiling section): batches
 * begin..end, 0-based, in lines whose "batches" counts them from 1; a trial that sets its own
 * profiler in init overrides it. */
static void test_profiler_from_options(void) {
    char d[300], mo[320];
    snprintf(d, sizeof d, "%s/prof", g_root);
    snprintf(mo, sizeof mo, "%s/prof.jsonl", g_root);
    json_t *cfg = config();
    dt_fit_opts o = opts(d, 8);
    o.metrics_out = mo;
    o.profile = true;
    o.profile_begin = 4;
    o.profile_end = 5;
    CHECK_MSG(dt_trainer_fit(&Toy, cfg, 3, &o) == DT_OK, "%s", dt_last_error());
    uint64_t got = profiled_batches(mo);
    CHECK_MSG(got == ((1u << 5) | (1u << 6)), "profiled batches mask %#llx",
              (unsigned long long)got);
    remove(mo);
    g_extras = true; /* init calls dt_trial_set_profiler(c, true, 2, 3) */
    CHECK_MSG(dt_trainer_fit(&Toy, cfg, 3, &o) == DT_OK, "%s", dt_last_error());
    g_extras = false;
    got = profiled_batches(mo);
    CHECK_MSG(got == ((1u << 3) | (1u << 4)), "profiled batches mask %#llx",
              (unsigned long long)got);
    o.profile_begin = 6; /* end before begin: refused before training starts */
    CHECK(dt_trainer_fit(&Toy, cfg, 3, &o) == DT_ERR_INVALID);
    CHECK_MSG(strstr(dt_last_error(), "set_profiler") != NULL, "%s", dt_last_error());
    json_decref(cfg);
}

int main(void) {
    toy_cfg = toy_mlp(12, 32, 4, 96, 40);
    toy_cfg.dropout = 0.2f;
    toy_cfg.batch = 8;
    toy_cfg.shuffle = true;
    toy_cfg.workers = 1;
    toy_cfg.optim = DT_OPTIM_ADAMW;
    toy_cfg.lr = 0.01f;
    toy_cfg.after_step = after_step;
    toy_cfg.after_eval = after_eval;
    toy_data(1, toy_cfg.n_train);
    Toy = ToyPlain;
    Toy.init = fit_init;
    if (!fx_tmpdir(g_root, sizeof g_root, "test-fit")) return 1;
    TEST_RUN(test_exact_resume);
    TEST_RUN(test_metrics_and_policy);
    TEST_RUN(test_corrupt_resume);
    TEST_RUN(test_nan_loss);
    TEST_RUN(test_fp16);
    TEST_RUN(test_load_from_checkpoint);
    TEST_RUN(test_reducers_profiler);
    TEST_RUN(test_profiler_from_options);
    if (!fx_rmtree(g_root)) fprintf(stderr, "could not remove %s\n", g_root);
    TEST_END();
}
