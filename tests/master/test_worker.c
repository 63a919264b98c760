/* test_worker.c — `dtrain worker` (dt_worker_main, src/master/worker.c) in this process
 * (the real binary, in a child process) against a fake master (fake_master.h) serving the spec of
 * the toy trial (tests/e2e/toy, built once here):
 *   - it runs the trial to its searcher operation, reporting metrics and checkpoints, exit 0;
 *   - resumed from the spec's checkpoint, it goes on from there;
 *   - a trial whose init calls its hyperparameters invalid exits 3 after early_exit
 *     invalid_hp, writing no checkpoint;
 *   - a replaced run (409 on the spec) exits 1; no DTRAIN_TRIAL_ID exits 1. */
#include "master/master.h"
#include "launch/launch.h"
#include "fake_master.h"
#include "fixtures/files.h"
#include "test.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_dir[256], g_so[1024];
static json_t *g_config;

/* The spec of the toy trial with `lr`, checkpoints in g_dir/<name>, resuming `resume`. */
static json_t *spec(const char *name, double lr, const char *resume) {
    char dir[400];
    snprintf(dir, sizeof dir, "%s/%s", g_dir, name);
    const char *src = getenv("DT_SOURCE_DIR");
    char model[1024];
    snprintf(model, sizeof model, "%s/tests/e2e/toy", src ? src : ".");
    return json_pack("{s:I,s:I,s:I,s:O,s:{s:i,s:f},s:i,s:s,s:s?,s:s,s:s,s:i}", "experiment_id",
                     (json_int_t)1, "trial_id", (json_int_t)TRIAL, "run", (json_int_t)RUN, "config",
                     g_config, "hparams", "global_batch_size", 16, "lr", lr, "seed", 3,
                     "checkpoint_dir", dir, "resume", resume, "so_path", g_so, "model_dir", model,
                     "slots", 1);
}

/* Run `dtrain worker` (the binary beside this test) against `f`; its exit status. */
static int work(fake *f) {
    char url[64], exe[1024], bin[1100];
    dt_http_server *s = fake_start(f, url);
    if (!s) return -1;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    snprintf(bin, sizeof bin, "%s/dtrain", exe);
    setenv("DTRAIN_MASTER", url, 1);
    pid_t pid = fork();
    if (pid == 0) {
        execl(bin, "dtrain", "worker", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    dt_http_stop(s);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void test_runs_the_trial(void) {
    fake f = {.ops = {20, 0, 0}, .spec = spec("w", 0.01, NULL)};
    CHECK(work(&f) == 0);
    CHECK(f.n_ops_given == 2 && f.n_completed == 1 && isfinite(f.completed[0]));
    CHECK(f.n_train_rows >= 1 && f.n_val_rows >= 1 && f.n_bad_rows == 0);
    CHECK_MSG(f.n_ckpt >= 1 && f.ckpt_batches[f.n_ckpt - 1] == 20 && f.ckpt_files[0] > 0,
              "%d checkpoints", f.n_ckpt);
    json_decref(f.spec);

    /* resumed from batch 20's checkpoint, to 30 */
    char ck[512];
    snprintf(ck, sizeof ck, "%s/w/batch_20", g_dir);
    fake g = {.ops = {30, 0, 0}, .spec = spec("w", 0.01, ck)};
    CHECK(work(&g) == 0);
    CHECK(g.n_completed == 1 && g.n_ckpt >= 1 && g.ckpt_batches[g.n_ckpt - 1] == 30);
    CHECK_MSG(g.n_train_rows >= 1 && g.n_train_rows <= 3, "%d training rows after resuming",
              g.n_train_rows);
    json_decref(g.spec);
}

static void test_invalid_hp(void) {
    fake f = {.ops = {20, 0, 0}, .spec = spec("bad", -1, NULL)};
    CHECK(work(&f) == 3);
    CHECK_MSG(!strcmp(f.early_exit, "invalid_hp"), "early_exit \"%s\"", f.early_exit);
    CHECK(f.n_ckpt == 0 && f.n_completed == 0);
    json_decref(f.spec);
}

static void test_failures(void) {
    fake f = {.ops = {20, 0, 0}, .spec = spec("gone", 0.01, NULL), .replaced = true};
    CHECK(work(&f) == 1);
    CHECK(f.n_409 == 1 && f.n_ckpt == 0);
    json_decref(f.spec);
    unsetenv("DTRAIN_TRIAL_ID");
    CHECK(work(&f) == 1);
    CHECK(dt_worker_main() == 1);
    CHECK(strstr(dt_last_error(), "needs DTRAIN_TRIAL_ID") != NULL);
}

int main(void) {
    if (!fx_tmpdir(g_dir, sizeof g_dir, "test-worker")) return 1;
    const char *src = getenv("DT_SOURCE_DIR");
    char model[1024], cfgp[1100];
    snprintf(model, sizeof model, "%s/tests/e2e/toy", src ? src : ".");
    snprintf(cfgp, sizeof cfgp, "%s/const.yaml", model);
    dt_expconf *cfg = NULL;
    CHECK_MSG(dt_expconf_load_file(cfgp, 0, &cfg) == DT_OK, "%s", dt_last_error());
    CHECK_MSG(dt_modeldir_build(model, "model_def", g_dir, g_so, sizeof g_so) == DT_OK, "%s",
              dt_last_error());
    if (cfg && g_so[0]) {
        g_config = json_incref(cfg->json);
        setenv("DTRAIN_TRIAL_ID", "5", 1);
        setenv("DTRAIN_TRIAL_RUN", "2", 1);
        TEST_RUN(test_runs_the_trial);
        TEST_RUN(test_invalid_hp);
        TEST_RUN(test_failures);
        json_decref(g_config);
    }
    dt_expconf_free(cfg);
    if (!fx_rmtree(g_dir)) fprintf(stderr, "could not remove %s\n", g_dir);
    TEST_END();
}
