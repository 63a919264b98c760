/* test_core_master.c — the master-backed core (src/master/core_master.c) driving the real fit
 * loop, against a fake master made with http.c that serves the trial-facing routes of
 * docs/api.md:
 *   - the searcher's operations are followed (6 then 12 batches, each completed with a
 *     finite validation loss), training / validation metric rows arrive, checkpoints are
 *     reported with their files and sizes, TensorBoard files go under the checkpoint dir;
 *   - preemption: the loop checkpoints at the batch it was asked, reports it and stops;
 *   - a 409 (the run was replaced) stops it without another checkpoint and the fit fails;
 *   - an unreachable master makes the core lost after its retries;
 *   - the Core API (dt_core_init) from the environment the master gives a trial, and its
 *     local fallback: operations, checkpoints stored in two steps and restored by uuid. */
#include "dtrain/core.h"
#include "master/master.h"
#include "dtrain/trialio.h"
#include "fake_master.h"
#include "master/http.h"
#include "fixtures/files.h"
#include "fixtures/toy_trial.h"
#include "test.h"
#include "trial/trial_iface.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];

/* the toy trial as a regression: y = x . w by one Linear layer without bias, SGD, 48
 * training and 12 validation records in batches of 4 */
static const dt_trial_def *const Reg = &ToyPlain;

/* Fit Reg against `f` (a server started and stopped around it) in g_dir/<name>. */
static dt_status fit(fake *f, const char *name, dt_core **core_out) {
    char url[64], dir[400];
    dt_http_server *s = fake_start(f, url);
    if (!s) return DT_ERR_IO;
    snprintf(dir, sizeof dir, "%s/%s", g_dir, name);
    dt_core_master_opts mo = {
        .url = url, .trial_id = TRIAL, .run = RUN, .chief = true, .checkpoint_dir = dir};
    dt_core *core = dt_core_master_new(&mo);
    CHECK(core != NULL);
    dt_fit_opts o = {.validation_period = {DT_UNIT_BATCHES, 4},
                     .reporting_period = {DT_UNIT_BATCHES, 2},
                     .checkpoint_policy = DT_CKPT_BEST,
                     .checkpoint_dir = dir,
                     .quiet = true,
                     .core = core};
    json_t *cfg = json_pack("{s:{s:i}}", "hyperparameters", "global_batch_size", 4);
    dt_status st = dt_trainer_fit(Reg, cfg, 11, &o);
    json_decref(cfg);
    DT_KEEP_ERROR(dt_http_stop(s));
    if (core_out)
        *core_out = core;
    else
        dt_core_free(core);
    return st;
}

static int count_ckpts(const char *name) {
    char dir[400];
    snprintf(dir, sizeof dir, "%s/%s", g_dir, name);
    char **names = NULL;
    int n = -1;
    if (dt_ckpt_list(dir, &names, &n) != DT_OK) return -1;
    dt_ckpt_list_free(names);
    return n;
}

static void test_operations_and_metrics(void) {
    fake f = {.ops = {6, 12, 0}};
    CHECK_MSG(fit(&f, "ops", NULL) == DT_OK, "%s", dt_last_error());
    /* two operations, completed with the validation loss, then none */
    CHECK(f.n_ops_given == 3);
    CHECK(f.n_completed == 2 && isfinite(f.completed[0]) && isfinite(f.completed[1]));
    /* a training row every 2 batches to 12; validations at 4, 6, 8, 12 */
    CHECK_MSG(f.n_train_rows == 6 && f.last_train_batches == 12, "%d rows, last at %lld",
              f.n_train_rows, (long long)f.last_train_batches);
    CHECK(f.n_val_rows == 4 && f.n_bad_rows == 0);
    CHECK(f.n_progress >= 1);
    /* checkpoints reported with their files; the last one at the end of training */
    CHECK(f.n_ckpt >= 2 && f.ckpt_batches[0] == 4 && f.ckpt_files[0] > 0);
    CHECK(f.ckpt_batches[f.n_ckpt - 1] == 12);
    CHECK(f.n_409 == 0 && f.stopped_at == 0);
    /* TensorBoard files under the checkpoint directory, as in local mode */
    char p[400];
    struct stat sb;
    snprintf(p, sizeof p, "%s/ops/tensorboard", g_dir);
    CHECK(stat(p, &sb) == 0 && S_ISDIR(sb.st_mode));
}

static void test_preemption(void) {
    fake f = {.ops = {12, 0, 0}, .preempt = true};
    CHECK_MSG(fit(&f, "preempt", NULL) == DT_OK, "%s", dt_last_error());
    /* asked at once: checkpointed at batch 1, reported, stopped there, not completed */
    CHECK_MSG(f.stopped_at == 1, "stopped at %lld", (long long)f.stopped_at);
    CHECK(f.n_ckpt == 1 && f.ckpt_batches[0] == 1 && f.ckpt_files[0] > 0);
    CHECK(f.n_completed == 0);
    CHECK(count_ckpts("preempt") == 1);
}

static void test_replaced(void) {
    /* the run is replaced when its batch-2 metrics arrive: the loop stops without writing */
    fake f = {.ops = {12, 0, 0}, .replace_at = 2};
    dt_core *core = NULL;
    dt_status st = fit(&f, "replaced", &core);
    CHECK(st == DT_ERR_STATE);
    CHECK_MSG(strstr(dt_last_error(), "without a checkpoint") != NULL, "%s", dt_last_error());
    CHECK(core && core->lost);
    CHECK(f.n_ckpt == 0 && f.stopped_at == 0 && f.n_409 >= 1);
    CHECK(count_ckpts("replaced") == 0);
    /* a lost core refuses to report a checkpoint */
    dt_core_checkpoint ck = {.uuid = "x", .path = "/nonexistent", .steps_completed = 2};
    CHECK(dt_core_checkpoint_stored(core, &ck) == DT_ERR_STATE);
    CHECK(dt_core_should_preempt(core));
    dt_core_free(core);
}

static void test_master_gone(void) {
    /* nothing listens: the first call retries for lost_after_s, then the core is lost */
    dt_core_master_opts mo = {.url = "http://127.0.0.1:1",
                              .trial_id = TRIAL,
                              .run = RUN,
                              .chief = true,
                              .lost_after_s = 0.3};
    dt_core *core = dt_core_master_new(&mo);
    dt_core_op op;
    double t0 = dt_now_sec();
    CHECK(dt_core_searcher_op(core, &op) == DT_ERR_COMM);
    CHECK(dt_now_sec() - t0 >= 0.3);
    CHECK(core->lost);
    CHECK(dt_core_should_preempt(core));
    dt_core_free(core);
    /* not a URL */
    mo.url = "localhost";
    CHECK(dt_core_master_new(&mo) == NULL && dt_last_status() == DT_ERR_CONFIG);
}

/* Two steps of a user's loop through the Core API: the operation, a checkpoint with a file. */
static void core_api_loop(dt_core *core, int64_t want_len, char *uuid) {
    dt_core_op op;
    CHECK(dt_core_searcher_op(core, &op) == DT_OK && op.length.n == want_len);
    dt_metrics m = dt_metrics_scalar("loss", 0.5);
    dt_core_at at = {.batches = op.length.n};
    CHECK(dt_core_report_training_metrics(core, &at, &m, NULL) == DT_OK);
    char path[DT_CORE_PATH_MAX];
    json_t *meta = json_pack("{s:I,s:s}", "steps_completed", (json_int_t)op.length.n, "note", "x");
    CHECK_MSG(dt_core_checkpoint_store_path(core, meta, path, uuid) == DT_OK, "%s",
              dt_last_error());
    /* a second one cannot open before this is done; metadata needs steps_completed */
    char p2[DT_CORE_PATH_MAX], u2[DT_CORE_UUID_MAX];
    CHECK(dt_core_checkpoint_store_path(core, meta, p2, u2) == DT_ERR_STATE);
    json_decref(meta);
    char f[DT_CORE_PATH_MAX + 16];
    snprintf(f, sizeof f, "%s/w.bin", path);
    FILE *fp = fopen(f, "wb");
    CHECK(fp && fwrite("weights", 1, 7, fp) == 7);
    if (fp) fclose(fp);
    CHECK(dt_core_checkpoint_store_done(core, "not-it") == DT_ERR_INVALID);
    CHECK_MSG(dt_core_checkpoint_store_done(core, uuid) == DT_OK, "%s", dt_last_error());
    CHECK(!strcmp(dt_core_latest_checkpoint(core), uuid));
    CHECK(dt_core_searcher_complete(core, &op, 0.5) == DT_OK);
    /* restored by uuid and as "latest": verified, with its metadata */
    json_t *back = NULL;
    CHECK(dt_core_checkpoint_restore_path(core, "latest", path, &back) == DT_OK);
    CHECK(json_integer_value(json_object_get(back, "steps_completed")) == want_len);
    CHECK(!strcmp(json_string_value(json_object_get(back, "note")), "x"));
    json_decref(back);
    snprintf(f, sizeof f, "%s/w.bin", path);
    CHECK(access(f, R_OK) == 0);
    CHECK(dt_core_checkpoint_restore_path(core, "nope", path, NULL) == DT_ERR_IO);
}

static void test_core_api_master(void) {
    char dir[400], url[64];
    snprintf(dir, sizeof dir, "%s/api_master", g_dir);
    json_t *spec = json_pack("{s:I,s:s,s:{s:f},s:n}", "trial_id", (json_int_t)TRIAL,
                             "checkpoint_dir", dir, "hparams", "lr", 0.25, "resume");
    fake f = {.ops = {7, 0, 0}, .spec = spec};
    dt_http_server *s = fake_start(&f, url);
    CHECK(s != NULL);
    if (!s) return;
    setenv("DTRAIN_MASTER", url, 1);
    setenv("DTRAIN_TRIAL_ID", "5", 1);
    setenv("DTRAIN_TRIAL_RUN", "2", 1);
    dt_core *core = NULL;
    CHECK_MSG(dt_core_init(NULL, &core) == DT_OK, "%s", dt_last_error());
    if (core) {
        CHECK(!strcmp(core->ops->name, "master") && dt_core_trial_id(core) == TRIAL);
        CHECK(json_real_value(json_object_get(dt_core_hparams(core), "lr")) == 0.25);
        CHECK(dt_core_latest_checkpoint(core) == NULL);
        CHECK(dt_dist_size(dt_core_distributed(core)) == 1);
        CHECK(!dt_core_should_preempt_all(core));
        char uuid[DT_CORE_UUID_MAX];
        core_api_loop(core, 7, uuid);
        CHECK(f.n_ckpt == 1 && f.ckpt_batches[0] == 7 && f.ckpt_files[0] == 1);
        CHECK(f.n_train_rows == 1 && f.n_completed == 1 && f.completed[0] == 0.5);
        dt_core_free(core);
    }
    /* a bad run id */
    setenv("DTRAIN_TRIAL_RUN", "x", 1);
    CHECK(dt_core_init(NULL, &core) == DT_ERR_CONFIG && core == NULL);
    CHECK(strstr(dt_last_error(), "DTRAIN_TRIAL_RUN is \"x\"") != NULL);
    unsetenv("DTRAIN_TRIAL_ID");
    unsetenv("DTRAIN_TRIAL_RUN");
    unsetenv("DTRAIN_MASTER");
    dt_http_stop(s);
    json_decref(spec);
}

static void test_core_api_local(void) {
    char dir[400];
    snprintf(dir, sizeof dir, "%s/api_local", g_dir);
    dt_core *core = NULL;
    CHECK(dt_core_init(&(dt_core_init_opts){.checkpoint_dir = dir}, &core) == DT_ERR_CONFIG);
    CHECK(strstr(dt_last_error(), "max_length is required") != NULL);
    dt_core_init_opts o = {
        .max_length = {DT_UNIT_BATCHES, 3}, .checkpoint_dir = dir, .quiet = true};
    o.resume = true; /* nothing to resume yet */
    CHECK(dt_core_init(&o, &core) == DT_ERR_CONFIG && strstr(dt_last_error(), "cannot resume"));
    o.resume = false;
    CHECK_MSG(dt_core_init(&o, &core) == DT_OK, "%s", dt_last_error());
    char uuid[DT_CORE_UUID_MAX] = "";
    if (core) {
        CHECK(!strcmp(core->ops->name, "local") && dt_core_trial_id(core) == 0);
        core_api_loop(core, 3, uuid);
        dt_core_op op;
        CHECK(dt_core_searcher_op(core, &op) == DT_OK && op.length.n == 0);
        dt_core_free(core);
    }
    /* resumed: the latest is the one stored */
    o.resume = true;
    CHECK_MSG(dt_core_init(&o, &core) == DT_OK, "%s", dt_last_error());
    CHECK(core && dt_core_latest_checkpoint(core) &&
          !strcmp(dt_core_latest_checkpoint(core), uuid));
    /* pruning keeps the latest whatever its uuid sorts as (names are not in time order) */
    for (int k = 0; core && k < 8; k++) {
        char path[DT_CORE_PATH_MAX], u[DT_CORE_UUID_MAX];
        json_t *meta = json_pack("{s:i}", "steps_completed", 10 + k);
        CHECK(dt_core_checkpoint_store_path(core, meta, path, u) == DT_OK);
        CHECK(dt_core_checkpoint_store_done(core, u) == DT_OK);
        CHECK_MSG(dt_core_checkpoint_restore_path(core, "latest", path, NULL) == DT_OK, "%s",
                  dt_last_error());
        json_decref(meta);
    }
    dt_core_free(core);
}

int main(void) {
    toy_cfg = toy_defaults();
    toy_cfg.hidden = 0;
    toy_cfg.no_bias = true;
    toy_cfg.regression = true;
    toy_cfg.n_train = 48;
    toy_cfg.n_val = 12;
    toy_cfg.batch = 4;
    toy_cfg.lr = 0.1f;
    toy_data(3, toy_cfg.n_train);
    if (!fx_tmpdir(g_dir, sizeof g_dir, "test-core-master")) return 1;
    TEST_RUN(test_operations_and_metrics);
    TEST_RUN(test_preemption);
    TEST_RUN(test_replaced);
    TEST_RUN(test_master_gone);
    TEST_RUN(test_core_api_master);
    TEST_RUN(test_core_api_local);
    if (!fx_rmtree(g_dir)) fprintf(stderr, "could not remove %s\n", g_dir);
    TEST_END();
}
