/* Tests for src/trial/ds_trial.c (engine-based trials) through the fit loop, at one process:
 *   - train_batch is called gradient_accumulation_steps times per global batch (once when auto
 *     accumulation is disabled), the engine steps once per global batch, records follow the
 *     engine's train_batch_size, epoch / batch indices count global batches;
 *   - checkpoint + resume gives the same engine files bit for bit as an uninterrupted run
 *     (stages 0 and 2, dropout, a warmup schedule, a micro-batch stream that crosses epochs of
 *     the loader in the middle of a global batch);
 *   - several engines, custom save / load hooks, load_from_checkpoint;
 *   - the DeepSpeed config from hyperparameters (path relative to the model directory, object
 *     form, overwrite_deepspeed_args) and its errors;
 *   - clear errors for a trial that wraps no engine, mixed or missing callbacks, loaders with
 *     the wrong batch size, engines on another context. */
#include "dtrain/engine.h"
#include "dtrain/trial.h"
#include "dtrain/trialio.h"
#include "trial/trial_impl.h"
#include "fixtures/files.h"
#include "fixtures/toy_trial.h"
#include "test.h"
#include "engine/engine_iface.h"
#include "trial/trial_iface.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void dt__ds_set_model_dir(dt_trial_ctx *c, const char *dir); /* ds_trial.c */

#define N_TRAIN 60 /* 15 micro-batches of 4: the stream crosses epochs inside global batches */
#define N_VAL 22   /* 6 validation batches, the last of 2 records */

static char g_root[256];

/* knobs of the toy trial */
static int g_stage;
static int g_gas = 2;
static bool g_no_auto, g_two, g_no_engine, g_wrong_batch;
/* what it saw */
static int64_t g_calls, g_evals, g_steps, g_micro, g_last_batch_idx, g_last_epoch_idx;
static int64_t g_saves, g_loads;
static bool g_fail_save; /* the save hook fails after writing the engines */
static bool g_batch_idx_ok;

static bool err_has(const char *s) { return strstr(dt_last_error(), s) != NULL; }

/* the engine-based toy trial (an 8 -> 24 -> 4 MLP with dropout), and a second engine when
 * asked */
typedef struct ds_toy {
    toy t;
    dt_engine *e2;
} ds_toy;

static void *toy_init_ds(dt_trial_ctx *c) {
    ds_toy *t = calloc(1, sizeof *t);
    t->t.c = c;
    if (g_no_engine) return t;
    if (!toy_build_engine(&t->t, c)) {
        free(t);
        return NULL;
    }
    if (g_two) {
        /* a second engine with its own batch sizes: accounting follows the first */
        json_t *c2 = dt_ds_config_load("{\"train_micro_batch_size_per_gpu\": 4, "
                                       "\"gradient_accumulation_steps\": 1, \"steps_per_print\": 100000,"
                                       " \"optimizer\": {\"type\": \"SGD\", \"params\": "
                                       "{\"lr\": 0.05, \"momentum\": 0.9}}}");
        dt_module *n2 = toy_net();
        if (n2 && dt_module_build(n2, dt_trial_runtime(c), dt_trial_seed(c) + 99) != DT_OK) {
            dt_module_free(n2);
            n2 = NULL;
        }
        dt_engine *e2 = dt_engine_init(n2, c2);
        if (!e2) dt_module_free(n2);
        t->e2 = dt_wrap_model_engine(c, e2);
        json_decref(c2);
        if (!t->e2) {
            free(t);
            return NULL;
        }
    }
    if (g_no_auto) dt_disable_auto_grad_accumulation(c);
    return t;
}

static dt_loader *toy_train_loader_ds(void *s) {
    toy *t = s;
    int64_t bs = g_no_engine ? 4 : dt_trial_train_micro_batch_size(t->c);
    return toy_loader(dt_trial_runtime(t->c), dt_trial_seed(t->c), N_TRAIN, true,
                      g_wrong_batch ? 2 * bs : bs);
}

static dt_metrics toy_train(void *s, dt_batch_iter *it, int64_t epoch, int64_t batch) {
    ds_toy *t = s;
    /* every call of one global batch sees the same batch_idx */
    int64_t per = g_no_auto ? 1 : g_gas;
    if (batch != g_calls / per) g_batch_idx_ok = false;
    g_calls++;
    g_last_batch_idx = batch;
    g_last_epoch_idx = epoch;
    int n = g_no_auto ? g_gas : 1;
    double loss = 0, l;
    for (int k = 0; k < n; k++) {
        dt_batch *b = dt_batch_iter_next(it);
        if (toy_engine_micro(t->t.e, b, &l) != DT_OK) return dt_metrics_error();
        loss += l / n;
        if (t->e2 && toy_engine_micro(t->e2, b, &l) != DT_OK) return dt_metrics_error();
    }
    g_steps = dt_engine_global_steps(t->t.e);
    g_micro = dt_engine_micro_steps(t->t.e);
    return dt_metrics_scalar("loss", loss);
}

static dt_metrics toy_eval(void *s, dt_batch_iter *it, int64_t batch) {
    g_evals++;
    return toy_ds_eval_batch(s, it, batch);
}

static dt_status toy_save(void *s, const char *dir) {
    toy *t = s;
    g_saves++;
    char p[1024];
    snprintf(p, sizeof p, "%s/extra.txt", dir);
    FILE *f = fopen(p, "w");
    if (!f) return dt_error(DT_ERR_IO, "extra.txt");
    fprintf(f, "%lld\n", (long long)dt_engine_global_steps(t->e));
    fclose(f);
    dt_status st = dt_save_model_engines(t->c, dir);
    if (st == DT_OK && g_fail_save) st = dt_error(DT_ERR_IO, "disk full (injected)");
    return st;
}

static dt_status toy_load(void *s, const char *dir) {
    toy *t = s;
    g_loads++;
    char p[1024];
    snprintf(p, sizeof p, "%s/extra.txt", dir);
    FILE *f = fopen(p, "r");
    if (!f) return dt_error(DT_ERR_IO, "no extra.txt in %s", dir);
    fclose(f);
    return dt_load_model_engines(t->c, dir);
}

static const dt_trial_def Toy = {
    .name = "DsToy", .init = toy_init_ds, .build_training_data_loader = toy_train_loader_ds,
    .build_validation_data_loader = toy_val_loader, .ds_train_batch = toy_train,
    .ds_evaluate_batch = toy_eval, .free = toy_free,
};

static const dt_trial_def ToyHooks = {
    .name = "DsToyHooks", .init = toy_init_ds, .build_training_data_loader = toy_train_loader_ds,
    .build_validation_data_loader = toy_val_loader, .ds_train_batch = toy_train,
    .ds_evaluate_batch = toy_eval, .save = toy_save, .load = toy_load, .free = toy_free,
};

/* ---- helpers ---- */

static void write_ds_config(void) {
    char p[512];
    snprintf(p, sizeof p, "%s/model/ds_config.json", g_root);
    FILE *f = fopen(p, "w");
    fprintf(f, "{\n  \"train_micro_batch_size_per_gpu\": 4,\n  \"gradient_accumulation_steps\": 2,\n"
               "  \"steps_per_print\": 100000,\n"
               "  \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, "
               "\"weight_decay\": 0.01}},\n"
               "  \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_min_lr\": 0, "
               "\"warmup_max_lr\": 0.01, \"warmup_num_steps\": 4}},\n"
               "  \"zero_optimization\": {\"stage\": 0}\n}\n");
    fclose(f);
}

/* hyperparameters: the config file, the knobs as overwrite_deepspeed_args */
static json_t *config(void) {
    json_t *over = json_pack("{s:i, s:{s:i}}", "gradient_accumulation_steps", g_gas,
                             "zero_optimization", "stage", g_stage);
    return json_pack("{s:{s:s, s:o}}", "hyperparameters", "deepspeed_config", "ds_config.json",
                     "overwrite_deepspeed_args", over);
}

static char g_model_dir[300];

static dt_fit_opts opts(const char *dir, int64_t batches) {
    dt_fit_opts o = toy_fit_opts(dir, batches, 4);
    o.reporting_period = (dt_length){DT_UNIT_BATCHES, 2};
    o.save_trial_best = 1;
    o.model_dir = g_model_dir;
    return o;
}

static void reset_counters(void) {
    g_calls = g_evals = g_steps = g_micro = g_saves = g_loads = 0;
    g_batch_idx_ok = true;
}

static bool same_latest(const char *d1, const char *d2, const char *rel) {
    char a[700], b[700];
    return fx_latest(d1, rel, a, sizeof a) && fx_latest(d2, rel, b, sizeof b) && fx_same_file(a, b);
}

/* the last line of kind `kind` in a metrics file: its batches and records */
static bool last_line(const char *file, const char *kind, int64_t *batches, int64_t *records) {
    char *s = fx_slurp(file, NULL);
    if (!s) return false;
    bool found = false;
    char key[64];
    snprintf(key, sizeof key, "\"kind\":\"%s\"", kind);
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strstr(line, key)) continue;
        json_error_t e;
        json_t *j = json_loads(line, 0, &e);
        if (!j) continue;
        *batches = json_integer_value(json_object_get(j, "batches"));
        *records = json_integer_value(json_object_get(j, "records"));
        found = true;
        json_decref(j);
    }
    free(s);
    return found;
}

/* ---- tests ---- */

static void test_accumulation_calls(void) {
    char dir[300], mf[320];
    snprintf(dir, sizeof dir, "%s/acc", g_root);
    snprintf(mf, sizeof mf, "%s/acc.jsonl", g_root);
    g_gas = 2;
    reset_counters();
    json_t *cfg = config();
    dt_fit_opts o = opts(dir, 9); /* 15 micro-batches per epoch: 7 global batches per epoch */
    o.metrics_out = mf;
    CHECK_MSG(dt_trainer_fit(&Toy, cfg, 5, &o) == DT_OK, "%s", dt_last_error());
    CHECK_MSG(g_calls == 18, "train_batch calls %lld, expected 9 x gas 2", (long long)g_calls);
    CHECK_MSG(g_steps == 9 && g_micro == 18, "engine steps %lld micro %lld", (long long)g_steps,
              (long long)g_micro);
    CHECK(g_batch_idx_ok);
    CHECK(g_last_batch_idx == 8 && g_last_epoch_idx == 1);
    /* validations at 4, 8 and the end: 6 batches each (the last one partial) */
    CHECK_MSG(g_evals == 18, "evaluate_batch calls %lld", (long long)g_evals);
    int64_t b = 0, r = 0;
    CHECK(last_line(mf, "training", &b, &r) && b == 9 && r == 9 * 8);
    CHECK(last_line(mf, "validation", &b, &r) && b == 9);

    /* gas 4 through overwrite_deepspeed_args: 3 global batches per epoch */
    g_gas = 4;
    reset_counters();
    json_decref(cfg);
    cfg = config();
    snprintf(dir, sizeof dir, "%s/acc4", g_root);
    o = opts(dir, 3);
    o.metrics_out = mf;
    CHECK_MSG(dt_trainer_fit(&Toy, cfg, 5, &o) == DT_OK, "%s", dt_last_error());
    CHECK(g_calls == 12 && g_steps == 3 && g_micro == 12);
    CHECK(last_line(mf, "training", &b, &r) && b == 3 && r == 3 * 16);
    g_gas = 2;

    /* disabled: once per global batch, the trial pulls gas micro-batches itself */
    g_no_auto = true;
    reset_counters();
    json_decref(cfg);
    cfg = config();
    snprintf(dir, sizeof dir, "%s/noauto", g_root);
    o = opts(dir, 5);
    CHECK_MSG(dt_trainer_fit(&Toy, cfg, 5, &o) == DT_OK, "%s", dt_last_error());
    CHECK_MSG(g_calls == 5 && g_steps == 5 && g_micro == 10, "calls %lld steps %lld micro %lld",
              (long long)g_calls, (long long)g_steps, (long long)g_micro);
    g_no_auto = false;

    /* records as the length: 40 records = 5 global batches of 8 */
    reset_counters();
    snprintf(dir, sizeof dir, "%s/records", g_root);
    o = opts(dir, 0);
    o.max_length = (dt_length){DT_UNIT_RECORDS, 40};
    CHECK_MSG(dt_trainer_fit(&Toy, cfg, 5, &o) == DT_OK, "%s", dt_last_error());
    CHECK(g_steps == 5);
    /* a partial global batch is dropped (dt_length_batches): 47 records = 5 batches too */
    reset_counters();
    snprintf(dir, sizeof dir, "%s/records47", g_root);
    o.max_length = (dt_length){DT_UNIT_RECORDS, 47};
    CHECK_MSG(dt_trainer_fit(&Toy, cfg, 5, &o) == DT_OK, "%s", dt_last_error());
    CHECK(g_steps == 5);
    json_decref(cfg);
}

/* N batches in one run == N/2, stop, resume to N (and a stop at a batch inside an epoch) */
static void resume_case(int stage, const char *tag) {
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/full_%s", g_root, tag);
    snprintf(b, sizeof b, "%s/half_%s", g_root, tag);
    g_stage = stage;
    json_t *cfg = config();
    const int64_t N = 11; /* 7 per epoch: crosses an epoch; the stream crosses loader epochs */
    dt_fit_opts o = opts(a, N);
    CHECK_MSG(dt_trainer_fit(&Toy, cfg, 11, &o) == DT_OK, "%s", dt_last_error());
    o = opts(b, 5);
    CHECK_MSG(dt_trainer_fit(&Toy, cfg, 11, &o) == DT_OK, "%s", dt_last_error());
    char path[512];
    CHECK(fx_latest(b, "", path, sizeof path));
    path[strlen(path) - 1] = 0; /* the trailing '/' */
    char resume[512];
    snprintf(resume, sizeof resume, "%s", path);
    o = opts(b, N);
    o.latest_checkpoint = resume;
    reset_counters();
    CHECK_MSG(dt_trainer_fit(&Toy, cfg, 11, &o) == DT_OK, "%s", dt_last_error());
    CHECK_MSG(g_calls == 2 * (N - 5), "resumed run trained %lld calls", (long long)g_calls);
    CHECK_MSG(g_steps == N, "engine steps after resume %lld", (long long)g_steps);
    CHECK_MSG(same_latest(a, b, "model0/model.safetensors"), "stage %d: weights differ", stage);
    char shard[64];
    snprintf(shard, sizeof shard, "model0/optim_shard_0_of_1.safetensors");
    CHECK_MSG(same_latest(a, b, shard), "stage %d: optimizer state differs", stage);
    CHECK_MSG(same_latest(a, b, "model0/engine_state.json"), "stage %d: engine state differs", stage);
    /* the engine checkpoint sits inside the verified trial checkpoint */
    CHECK(fx_latest(a, "", path, sizeof path));
    dt_ckpt *ck = dt_ckpt_open(path);
    CHECK_MSG(ck && dt_ckpt_path(ck, "model0/model.safetensors") &&
                  dt_ckpt_path(ck, "model0/engine_state.json") && dt_ckpt_path(ck, "state.json"),
              "engine files listed in metadata.json");
    dt_ckpt_close(ck);
    json_decref(cfg);
    g_stage = 0;
}

static void test_resume_exact(void) {
    resume_case(0, "s0");
    resume_case(2, "s2");
}

static void test_two_engines_and_hooks(void) {
    char a[300], b[300], mf[320];
    snprintf(a, sizeof a, "%s/two_full", g_root);
    snprintf(b, sizeof b, "%s/two_half", g_root);
    snprintf(mf, sizeof mf, "%s/two.jsonl", g_root);
    g_two = true;
    json_t *cfg = config();
    dt_fit_opts o = opts(a, 6);
    o.metrics_out = mf;
    reset_counters();
    CHECK_MSG(dt_trainer_fit(&ToyHooks, cfg, 3, &o) == DT_OK, "%s", dt_last_error());
    int64_t nb = 0, r = 0;
    CHECK(last_line(mf, "training", &nb, &r) && nb == 6 && r == 6 * 8);
    CHECK_MSG(g_saves == 1 && g_loads == 0, "save hook %lld load hook %lld", (long long)g_saves,
              (long long)g_loads);
    char path[512];
    CHECK(fx_latest(a, "model1/engine_state.json", path, sizeof path));
    struct stat sb;
    CHECK(stat(path, &sb) == 0);
    CHECK(fx_latest(a, "extra.txt", path, sizeof path) && stat(path, &sb) == 0);
    /* halves through the hooks */
    o = opts(b, 3);
    CHECK(dt_trainer_fit(&ToyHooks, cfg, 3, &o) == DT_OK);
    char resume[512];
    CHECK(fx_latest(b, "", resume, sizeof resume));
    resume[strlen(resume) - 1] = 0;
    o = opts(b, 6);
    o.latest_checkpoint = resume;
    reset_counters();
    CHECK_MSG(dt_trainer_fit(&ToyHooks, cfg, 3, &o) == DT_OK, "%s", dt_last_error());
    CHECK(g_loads == 1);
    CHECK_MSG(same_latest(a, b, "model0/model.safetensors"), "two engines: engine 0 differs");
    CHECK_MSG(same_latest(a, b, "model1/model.safetensors"), "two engines: engine 1 differs");
    /* a trial with one engine refuses the checkpoint of two */
    g_two = false;
    CHECK(fx_latest(b, "", resume, sizeof resume));
    resume[strlen(resume) - 1] = 0;
    o = opts(b, 8);
    o.latest_checkpoint = resume;
    CHECK_MSG(dt_trainer_fit(&Toy, cfg, 3, &o) == DT_ERR_FORMAT && err_has("engines"), "%s",
              dt_last_error());
    json_decref(cfg);
}

/* A failing save leaves no checkpoint and no temporary directory; test mode trains one
 * global batch (gas calls) and validates one batch. */
static void test_failed_save_and_test_mode(void) {
    char dir[300];
    snprintf(dir, sizeof dir, "%s/failsave", g_root);
    json_t *cfg = config();
    dt_fit_opts o = opts(dir, 2);
    g_fail_save = true;
    CHECK(dt_trainer_fit(&ToyHooks, cfg, 3, &o) == DT_ERR_IO && err_has("injected") &&
          err_has("batch_2"));
    g_fail_save = false;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A %s | grep -v tensorboard)\"", dir);
    CHECK_MSG(system(cmd) == 0, "files left in %s after a failed checkpoint", dir);
    reset_counters();
    snprintf(dir, sizeof dir, "%s/testmode", g_root);
    o = opts(dir, 50);
    o.test_mode = true;
    CHECK(dt_trainer_fit(&Toy, cfg, 3, &o) == DT_OK);
    CHECK_MSG(g_calls == 2 && g_steps == 1 && g_evals == 1, "test mode: %lld calls, %lld steps, "
              "%lld evaluations", (long long)g_calls, (long long)g_steps, (long long)g_evals);
    json_decref(cfg);
}

static void test_load_from_checkpoint(void) {
    char a[300], path[512];
    snprintf(a, sizeof a, "%s/full_s0", g_root); /* written by test_resume_exact */
    CHECK(fx_latest(a, "", path, sizeof path));
    path[strlen(path) - 1] = 0;
    json_t *cfg = config();
    dt_trial_ctx *c = NULL;
    /* hparams come from the config here: the saved ones carry a relative path */
    toy *t = NULL;
    {
        char prev[512];
        CHECK(getcwd(prev, sizeof prev) != NULL);
        CHECK(chdir(g_model_dir) == 0); /* relative deepspeed_config without a model dir */
        t = dt_trial_load_from_checkpoint(&Toy, path, cfg, &c);
        CHECK(chdir(prev) == 0);
    }
    CHECK_MSG(t && c, "%s", dt_last_error());
    if (t) {
        CHECK(dt_trial_engine_count(c) == 1 && dt_trial_engine(c, 0) == t->e);
        CHECK(dt_engine_global_steps(t->e) == 11);
        /* the weights are the checkpoint's */
        char mp[600];
        snprintf(mp, sizeof mp, "%s/model0/model.safetensors", path);
        dt_safetensors *f = dt_safetensors_open(mp);
        dt_module *m = dt_engine_module(t->e);
        dt_tensor *w = dt_safetensors_get(f, dt_trial_runtime(c), dt_module_param_name(m, 0));
        dt_tensor *p = dt_module_param_tensor(m, 0);
        CHECK(w && !memcmp(w->data, p->data, (size_t)dt_numel(p) * 4));
        dt_safetensors_close(f);
        Toy.free(t);
        dt_trial_ctx_free(c);
    }
    json_decref(cfg);
}

static void test_hparams_config(void) {
    dt_trial_ctx *c = dt_trial_ctx_new(NULL, 1);
    json_t *j = dt_ds_config_from_hparams(c);
    CHECK(!j && dt_last_status() == DT_ERR_CONFIG && err_has("deepspeed_config"));
    dt_trial_ctx_free(c);

    /* a path relative to the model directory, with overrides merged in */
    json_t *cfg = json_pack("{s:{s:s, s:{s:i, s:i, s:{s:{s:f}}, s:{s:i}}}}", "hyperparameters",
                            "deepspeed_config", "ds_config.json", "overwrite_deepspeed_args",
                            "train_batch_size", 16, "gradient_accumulation_steps", 4, "optimizer",
                            "params", "lr", 0.005, "zero_optimization", "stage", 2);
    c = dt_trial_ctx_new(cfg, 1);
    dt__ds_set_model_dir(c, g_model_dir);
    CHECK(dt_trial_model_dir(c) && !strcmp(dt_trial_model_dir(c), g_model_dir));
    j = dt_ds_config_from_hparams(c);
    CHECK_MSG(j, "%s", dt_last_error());
    json_t *opt = json_object_get(j, "optimizer");
    CHECK(json_integer_value(json_object_get(j, "train_batch_size")) == 16);
    CHECK(json_integer_value(json_object_get(j, "train_micro_batch_size_per_gpu")) == 4);
    CHECK(!strcmp(json_string_value(json_object_get(opt, "type")), "AdamW"));
    CHECK_NEAR(json_number_value(json_object_get(json_object_get(opt, "params"), "lr")), 0.005, 1e-12);
    CHECK_NEAR(json_number_value(json_object_get(json_object_get(opt, "params"), "weight_decay")),
               0.01, 1e-12);
    CHECK(json_integer_value(json_object_get(json_object_get(j, "zero_optimization"), "stage")) == 2);
    dt_ds_config cfgp;
    CHECK(dt_ds_config_parse(j, 1, &cfgp) == DT_OK && cfgp.gradient_accumulation_steps == 4);
    json_decref(j);
    dt_trial_ctx_free(c);
    json_decref(cfg);

    /* a missing file names the path and the model directory */
    cfg = json_pack("{s:{s:s}}", "hyperparameters", "deepspeed_config", "nope.json");
    c = dt_trial_ctx_new(cfg, 1);
    dt__ds_set_model_dir(c, g_model_dir);
    CHECK(!dt_ds_config_from_hparams(c) && dt_last_status() == DT_ERR_IO && err_has("nope.json") &&
          err_has("model directory"));
    dt_trial_ctx_free(c);
    json_decref(cfg);

    /* overwrite_deepspeed_args must be an object */
    cfg = json_pack("{s:{s:s, s:[i]}}", "hyperparameters", "deepspeed_config", "ds_config.json",
                    "overwrite_deepspeed_args", 3);
    c = dt_trial_ctx_new(cfg, 1);
    dt__ds_set_model_dir(c, g_model_dir);
    CHECK(!dt_ds_config_from_hparams(c) && dt_last_status() == DT_ERR_CONFIG &&
          err_has("overwrite_deepspeed_args"));
    dt_trial_ctx_free(c);
    json_decref(cfg);

    /* the config itself as an object (a const hyperparameter {type: const, val: {...}}) */
    cfg = json_pack("{s:{s:{s:s, s:{s:i, s:{s:s}}}}}", "hyperparameters", "deepspeed_config",
                    "type", "const", "val", "train_batch_size", 8, "optimizer", "type", "SGD");
    c = dt_trial_ctx_new(cfg, 1);
    j = dt_ds_config_from_hparams(c);
    CHECK(j && json_integer_value(json_object_get(j, "train_batch_size")) == 8);
    json_decref(j);
    dt_trial_ctx_free(c);
    json_decref(cfg);
}

static dt_metrics plain_train(void *s, dt_batch *b, int64_t e, int64_t i) {
    (void)s, (void)b, (void)e, (void)i;
    return dt_metrics_empty();
}

static void test_errors(void) {
    char dir[300];
    snprintf(dir, sizeof dir, "%s/err", g_root);
    json_t *cfg = config();
    dt_fit_opts o = opts(dir, 2);
    /* init that never wraps an engine */
    g_no_engine = true;
    CHECK(dt_trainer_fit(&Toy, cfg, 1, &o) == DT_ERR_STATE && err_has("dt_wrap_model_engine") &&
          err_has("DsToy"));
    g_no_engine = false;
    /* mixed and missing callbacks */
    dt_trial_def mixed = Toy;
    mixed.train_batch = plain_train;
    CHECK(dt_trainer_fit(&mixed, cfg, 1, &o) == DT_ERR_INVALID && err_has("train_batch"));
    dt_trial_def noeval = Toy;
    noeval.ds_evaluate_batch = NULL;
    CHECK(dt_trainer_fit(&noeval, cfg, 1, &o) == DT_ERR_INVALID && err_has("ds_evaluate_batch"));
    /* a loader not built with the micro batch size */
    g_wrong_batch = true;
    CHECK(dt_trainer_fit(&Toy, cfg, 1, &o) == DT_ERR_CONFIG &&
          err_has("train_micro_batch_size_per_gpu"));
    g_wrong_batch = false;
    /* a bad engine config: the engine's error comes through init */
    json_t *bad = json_pack("{s:{s:s, s:{s:i}}}", "hyperparameters", "deepspeed_config",
                            "ds_config.json", "overwrite_deepspeed_args", "train_batch_size", 7);
    CHECK(dt_trainer_fit(&Toy, bad, 1, &o) == DT_ERR_CONFIG && err_has("init failed"));
    json_decref(bad);
    /* more global batches per epoch than the loader holds */
    bad = json_pack("{s:{s:s, s:{s:i}}}", "hyperparameters", "deepspeed_config", "ds_config.json",
                    "overwrite_deepspeed_args", "gradient_accumulation_steps", 16);
    CHECK(dt_trainer_fit(&Toy, bad, 1, &o) == DT_ERR_CONFIG && err_has("gradient_accumulation_steps"));
    json_decref(bad);

    /* wrapping errors */
    dt_trial_ctx *c = dt_trial_ctx_new(cfg, 1);
    CHECK(dt_wrap_model_engine(c, NULL) == NULL);
    CHECK(dt_trial_train_micro_batch_size(c) == 0 && dt_last_status() == DT_ERR_STATE);
    CHECK(dt_batch_iter_next(NULL) == NULL && dt_last_status() == DT_ERR_STATE);
    dt_ctx *other = dt_ctx_new(NULL, 1);
    dt_module *m = dt_nn_linear(4, 2, true);
    dt_module_build(m, other, 1);
    json_t *ec = dt_ds_config_load("{\"train_batch_size\": 4, \"steps_per_print\": 100000, "
                                   "\"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 0.1}}}");
    dt_engine *e = dt_engine_init(m, ec);
    CHECK(e != NULL);
    CHECK(dt_wrap_model_engine(c, e) == NULL && err_has("dt_trial_runtime")); /* e and m freed */
    dt_ctx_free(other);
    /* on the runtime: wrapped, twice refused */
    m = dt_nn_linear(4, 2, true);
    dt_module_build(m, dt_trial_runtime(c), 1);
    e = dt_engine_init(m, ec);
    CHECK(dt_wrap_model_engine(c, e) == e && dt_trial_engine_count(c) == 1);
    CHECK(dt_trial_train_micro_batch_size(c) == 4 && dt_trial_global_batch_size(c) == 4);
    CHECK(dt_wrap_model_engine(c, e) == NULL && err_has("already wrapped"));
    CHECK(dt_trial_engine_count(c) == 1);
    dt_model_parallel_unit bad_mpu = {0};
    CHECK(dt_set_mpu(c, &bad_mpu) == DT_OK);
    json_decref(ec);
    dt_trial_ctx_free(c); /* frees the engine and its model */
    json_decref(cfg);
}

int main(void) {
    if (!fx_tmpdir(g_root, sizeof g_root, "test-ds-trial")) return 1;
    snprintf(g_model_dir, sizeof g_model_dir, "%s/model", g_root);
    mkdir(g_model_dir, 0755);
    write_ds_config();
    toy_cfg = toy_mlp(8, 24, 4, N_TRAIN, N_VAL);
    toy_cfg.dropout = 0.2f;
    toy_cfg.shuffle = true;
    toy_data(4, N_TRAIN);
    dt_log_set_level(DT_LOG_ERROR);
    TEST_RUN(test_hparams_config);
    TEST_RUN(test_accumulation_calls);
    TEST_RUN(test_resume_exact);
    TEST_RUN(test_two_engines_and_hooks);
    TEST_RUN(test_load_from_checkpoint);
    TEST_RUN(test_failed_save_and_test_mode);
    TEST_RUN(test_errors);
    if (!fx_rmtree(g_root)) fprintf(stderr, "could not remove %s\n", g_root);
    TEST_END();
}
