/* Tests for src/launch/launch.c: the mpirun command line, preparing a trial from a config
 * (checkpoint directory, resume point, seed, hyperparameters, lengths in batches), building
 * tests/e2e/toy once and running two trials of it with different hyperparameters, and the
 * errors bad inputs give. */
#define _GNU_SOURCE
#include "launch/launch.h"
#include "fixtures/files.h"
#include "test.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HAS(s, sub) (strstr((s), (sub)) != NULL)
#define CHECK_HAS(s, sub) CHECK_MSG(HAS((s), (sub)), "\"%s\" lacks \"%s\"", (s), (sub))

static char g_toy[PATH_MAX], g_tmp[PATH_MAX];

/* tests/e2e/toy/const.yaml with its first line starting with `key` replaced by `line` (NULL
 * key, or a key not found: `line` appended). */
static char *toy_config(const char *key, const char *line) {
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/const.yaml", g_toy);
    FILE *f = fopen(p, "r");
    CHECK(f != NULL);
    if (!f) return NULL;
    char *out = NULL;
    size_t n = 0;
    FILE *o = open_memstream(&out, &n);
    char buf[512];
    bool done = false;
    while (fgets(buf, sizeof buf, f)) {
        bool hit = key && !done && !strncmp(buf, key, strlen(key));
        fputs(hit ? line : buf, o);
        done |= hit;
    }
    if (!done) fputs(line, o);
    fclose(f);
    fclose(o);
    return out;
}

static dt_expconf *load(const char *text) {
    dt_expconf *c = NULL;
    dt_status st = dt_expconf_load_string(text, "const.yaml", 0, &c);
    CHECK_MSG(st == DT_OK && c, "load failed: %s", dt_last_error());
    return c;
}

static dt_expconf *load_toy(const char *key, const char *line) {
    char *text = toy_config(key, line);
    dt_expconf *c = text ? load(text) : NULL;
    free(text);
    return c;
}

static void test_mpirun_argv(void) {
    unsetenv("OMPI_COMM_WORLD_SIZE");
    CHECK(!dt_launch_needs_mpirun(1));
    CHECK(dt_launch_needs_mpirun(2));
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1); /* already a rank of mpirun */
    CHECK(!dt_launch_needs_mpirun(2));
    unsetenv("OMPI_COMM_WORLD_SIZE");

    char *args[] = {"a.yaml", "--slots", "2", "dir", "--quiet"};
    char **av = NULL;
    CHECK(dt_launch_mpirun_argv(2, "train", 5, args, &av) == DT_OK && av);
    if (!av) return;
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[k > 0 ? k : 0] = 0;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char omp[64];
    snprintf(omp, sizeof omp, "OMP_NUM_THREADS=%ld", cores / 2 > 0 ? cores / 2 : 1);
    CHECK(!strcmp(av[0], "mpirun") && !strcmp(av[1], "-np") && !strcmp(av[2], "2"));
    int i = 3;
    if (geteuid() == 0) CHECK(!strcmp(av[i++], "--allow-run-as-root"));
    if (cores < 2) CHECK(!strcmp(av[i++], "--oversubscribe"));
    CHECK(!strcmp(av[i++], "--tag-output")); /* the launcher's on_log tells ranks apart */
    CHECK(!strcmp(av[i++], "-x"));
    CHECK_MSG(!strcmp(av[i], omp), "%s, expected %s", av[i], omp);
    i++;
    /* the ranks die with mpirun, which is this process after exec */
    char lpid[64];
    snprintf(lpid, sizeof lpid, "DTRAIN_LAUNCHER_PID=%ld", (long)getpid());
    CHECK(!strcmp(av[i++], "-x"));
    CHECK_MSG(!strcmp(av[i], lpid), "%s, expected %s", av[i], lpid);
    i++;
    CHECK(!strcmp(av[i++], exe));
    const char *rest[] = {"train", "a.yaml", "dir", "--quiet"};
    for (int j = 0; j < 4; j++, i++) CHECK_MSG(av[i] && !strcmp(av[i], rest[j]), "arg %d", i);
    CHECK(av[i] == NULL);
    dt_launch_argv_free(av);

    /* more slots than cores: oversubscribed, one thread each */
    CHECK(dt_launch_mpirun_argv(4096, "bench", 0, NULL, &av) == DT_OK);
    bool over = false, one = false;
    for (i = 0; av && av[i]; i++) {
        over |= !strcmp(av[i], "--oversubscribe");
        one |= !strcmp(av[i], "OMP_NUM_THREADS=1");
    }
    CHECK(over && one);
    dt_launch_argv_free(av);
    CHECK(dt_launch_mpirun_argv(0, "train", 0, NULL, &av) == DT_ERR_INVALID && !av);
}

static void test_prepare_defaults(void) {
    dt_expconf *c = load_toy(NULL, "");
    if (!c) return;
    dt_launch_opts o = {.quiet = true};
    dt_prepared_trial *t = NULL;
    CHECK(dt_trial_prepare(c, &o, &t) == DT_OK && t);
    dt_expconf_free(c); /* the prepared trial owns everything it points to */
    if (!t) return;
    CHECK(!strcmp(t->checkpoint_dir, "checkpoints/toy"));
    CHECK(t->fit.checkpoint_dir == t->checkpoint_dir);
    CHECK(t->resume_path == NULL && t->fit.latest_checkpoint == NULL);
    CHECK(t->seed == 3); /* reproducibility.experiment_seed */
    CHECK(t->fit.max_length.unit == DT_UNIT_BATCHES && t->fit.max_length.n == 30);
    CHECK(t->fit.validation_period.n == 10 && t->fit.reporting_period.n == 5);
    CHECK(!strcmp(t->fit.searcher_metric, "validation_loss") && !t->fit.larger_is_better);
    CHECK(t->fit.quiet && !t->fit.progress && !t->fit.test_mode && !t->fit.metrics_out);
    json_t *hp = json_object_get(t->config, "hyperparameters");
    CHECK(json_real_value(json_object_get(hp, "lr")) == 0.01);
    CHECK(json_integer_value(json_object_get(hp, "global_batch_size")) == 16);
    dt_prepared_trial_free(t);
    dt_prepared_trial_free(NULL);
}

static void test_prepare_options(void) {
    dt_expconf *c = load_toy(NULL, "checkpoint_storage: {host_path: /srv/ck}\n");
    if (!c) return;
    dt_prepared_trial *t = NULL;
    dt_launch_opts o = {.has_seed = true, .seed = 0, .test_mode = true, .metrics_out = "m.jsonl"};
    CHECK(dt_trial_prepare(c, &o, &t) == DT_OK && t);
    if (t) {
        CHECK_MSG(!strcmp(t->checkpoint_dir, "/srv/ck/toy"), "%s", t->checkpoint_dir);
        CHECK(t->seed == 0 && t->fit.test_mode && !strcmp(t->fit.metrics_out, "m.jsonl"));
        CHECK(t->fit.metrics_out != o.metrics_out); /* a copy */
    }
    dt_prepared_trial_free(t);
    o = (dt_launch_opts){.checkpoint_dir = "elsewhere", .resume = "/ck/batch_4"};
    CHECK(dt_trial_prepare(c, &o, &t) == DT_OK && t);
    if (t) {
        CHECK(!strcmp(t->checkpoint_dir, "elsewhere"));
        CHECK(!strcmp(t->resume_path, "/ck/batch_4") && t->fit.latest_checkpoint == t->resume_path);
    }
    dt_prepared_trial_free(t);
    dt_expconf_free(c);
    /* the experiment name stays inside host_path (dt_path_within) */
    c = load_toy("name:", "name: ../../etc/cron.d\ncheckpoint_storage: {host_path: /srv/ck}\n");
    if (!c) return;
    t = NULL;
    o = (dt_launch_opts){0};
    CHECK(dt_trial_prepare(c, &o, &t) == DT_ERR_CONFIG && !t);
    CHECK_MSG(strstr(dt_last_error(), "\"../../etc/cron.d\" climbs out of \"/srv/ck\""), "%s",
              dt_last_error());
    dt_expconf_free(c);
}

static void test_prepare_resume_latest(void) {
    dt_expconf *c = load_toy(NULL, "");
    if (!c) return;
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/resume", g_tmp);
    CHECK(mkdir(dir, 0755) == 0);
    dt_prepared_trial *t = NULL;
    dt_launch_opts o = {.checkpoint_dir = dir, .resume = "latest"};
    CHECK(dt_trial_prepare(c, &o, &t) == DT_ERR_CONFIG && !t);
    CHECK_HAS(dt_last_error(), "no checkpoint in");
    CHECK_HAS(dt_last_error(), dir);
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/latest", dir);
    FILE *f = fopen(p, "w");
    fputs("batch_7\n", f);
    fclose(f);
    CHECK(dt_trial_prepare(c, &o, &t) == DT_OK && t);
    snprintf(p, sizeof p, "%s/batch_7", dir);
    if (t) CHECK_MSG(!strcmp(t->resume_path, p), "%s", t->resume_path);
    dt_prepared_trial_free(t);
    dt_expconf_free(c);
}

/* max_length in records, or epochs with records_per_epoch: batches of global_batch_size
 * (dt_expconf_length_batches); epochs without it stay epochs (one pass of the loader). */
static void test_prepare_lengths(void) {
    static const struct {
        const char *len, *rpe;
        dt_unit unit;
        int64_t n;
    } cases[] = {
        {"    records: 100\n", "", DT_UNIT_BATCHES, 6},
        {"    epochs: 2\n", "records_per_epoch: 160\n", DT_UNIT_BATCHES, 20},
        {"    epochs: 2\n", "", DT_UNIT_EPOCHS, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *a = toy_config("    batches: 30", cases[i].len);
        char *text = NULL;
        if (asprintf(&text, "%s%s", a, cases[i].rpe) < 0) text = NULL;
        free(a);
        dt_expconf *c = text ? load(text) : NULL;
        free(text);
        if (!c) continue;
        dt_prepared_trial *t = NULL;
        dt_launch_opts o = {0};
        CHECK(dt_trial_prepare(c, &o, &t) == DT_OK && t);
        if (t)
            CHECK_MSG(t->fit.max_length.unit == cases[i].unit && t->fit.max_length.n == cases[i].n,
                      "case %zu: %d %lld", i, (int)t->fit.max_length.unit,
                      (long long)t->fit.max_length.n);
        dt_prepared_trial_free(t);
        dt_expconf_free(c);
    }
    /* records without global_batch_size: the message names it */
    char *a = toy_config("    batches: 30", "    records: 100\n");
    char *b = a ? strdup(a) : NULL;
    char *gbs = b ? strstr(b, "  global_batch_size: 16\n") : NULL;
    if (gbs) memmove(gbs, gbs + 23, strlen(gbs + 23) + 1);
    dt_expconf *c = b ? load(b) : NULL;
    free(a);
    free(b);
    if (!c) return;
    dt_prepared_trial *t = NULL;
    dt_launch_opts o = {0};
    CHECK(dt_trial_prepare(c, &o, &t) == DT_ERR_CONFIG && !t);
    CHECK_HAS(dt_last_error(), "global_batch_size");
    dt_expconf_free(c);
}

static void test_prepare_hparams(void) {
    dt_expconf *c = load_toy("  lr:", "  lr: {type: double, minval: 0.001, maxval: 0.1}\n");
    if (!c) return;
    dt_prepared_trial *t = NULL;
    dt_launch_opts o = {0};
    CHECK(dt_trial_prepare(c, &o, &t) == DT_ERR_CONFIG && !t);
    CHECK_HAS(dt_last_error(), "lr");
    CHECK_HAS(dt_last_error(), "search");
    json_t *hp = json_pack("{s:i, s:f}", "global_batch_size", 16, "lr", 0.05);
    o.hparams = hp;
    CHECK(dt_trial_prepare(c, &o, &t) == DT_OK && t);
    json_object_set_new(hp, "lr", json_real(0.5)); /* the trial keeps its own copy */
    if (t) {
        json_t *v = json_object_get(t->config, "hyperparameters");
        CHECK(json_real_value(json_object_get(v, "lr")) == 0.05);
    }
    dt_prepared_trial_free(t);
    json_decref(hp);
    hp = json_string("lr=0.1");
    o.hparams = hp;
    CHECK(dt_trial_prepare(c, &o, &t) == DT_ERR_INVALID && !t);
    CHECK_HAS(dt_last_error(), "object");
    json_decref(hp);
    CHECK(dt_trial_prepare(c, NULL, &t) == DT_ERR_INVALID && !t);
    dt_expconf_free(c);
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *out = NULL;
    size_t n = 0;
    FILE *o = open_memstream(&out, &n);
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, k, o);
    fclose(f);
    fclose(o);
    return out;
}

/* Run a trial of `lib` with learning rate lr for 5 batches into g_tmp/<name>. */
static bool run_toy(const dt_expconf *c, const dt_trial_lib *lib, const char *name, double lr) {
    char dir[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/%s", g_tmp, name);
    json_t *hp = json_pack("{s:i, s:f}", "global_batch_size", 16, "lr", lr);
    dt_launch_opts o = {.hparams = hp, .checkpoint_dir = dir, .quiet = true};
    dt_prepared_trial *t = NULL;
    dt_status st = dt_trial_prepare(c, &o, &t);
    json_decref(hp);
    if (st == DT_OK) st = dt_trial_run_local(lib, t);
    CHECK_MSG(st == DT_OK, "%s: %s", name, dt_last_error());
    dt_prepared_trial_free(t);
    return st == DT_OK;
}

/* One build, two trials with different hyperparameters: the same library runs both and the
 * hyperparameters reach the trial (different weights); the same lr twice gives the same. */
static void test_build_once_run_twice(void) {
    dt_expconf *c = load_toy("    batches: 30", "    batches: 5\n");
    if (!c) return;
    dt_trial_lib *lib = NULL;
    CHECK_MSG(dt_trial_lib_build(c, g_toy, &lib) == DT_OK && lib, "%s", dt_last_error());
    if (!lib) {
        dt_expconf_free(c);
        return;
    }
    CHECK(dt_trial_lib_def(lib) != NULL);
    bool ok =
        run_toy(c, lib, "a", 0.01) && run_toy(c, lib, "b", 0.05) && run_toy(c, lib, "a2", 0.01);
    dt_trial_lib_free(lib);
    dt_expconf_free(c);
    if (!ok) return;
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/a/latest", g_tmp);
    char *latest = read_all(p);
    CHECK_MSG(latest && !strcmp(latest, "batch_5\n"), "[%s]", latest ? latest : "(none)");
    free(latest);
    char *w[3];
    const char *names[3] = {"a", "b", "a2"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s/batch_5/model.safetensors", g_tmp, names[i]);
        w[i] = read_all(p);
    }
    CHECK(w[0] && w[1] && w[2]);
    if (w[0] && w[1] && w[2]) {
        snprintf(p, sizeof p, "%s/a/batch_5/model.safetensors", g_tmp);
        FILE *f = fopen(p, "rb");
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fclose(f);
        CHECK(memcmp(w[0], w[2], (size_t)n) == 0);
        CHECK(memcmp(w[0], w[1], (size_t)n) != 0);
    }
    for (int i = 0; i < 3; i++) free(w[i]);
}

/* dtrain train's whole body: the config's environment reaches this process. */
static void test_launch_local(void) {
    dt_expconf *c = load_toy("    batches: 30", "    batches: 2\n"
                                                "environment:\n"
                                                "  environment_variables: [DT_LAUNCH_TEST=on]\n");
    if (!c) return;
    char dir[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/local", g_tmp);
    unsetenv("DT_LAUNCH_TEST");
    dt_launch_opts o = {.checkpoint_dir = dir, .quiet = true};
    CHECK_MSG(dt_trial_launch_local(c, g_toy, &o) == DT_OK, "%s", dt_last_error());
    const char *e = getenv("DT_LAUNCH_TEST");
    CHECK(e && !strcmp(e, "on"));
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/latest", dir);
    char *latest = read_all(p);
    CHECK_MSG(latest && !strcmp(latest, "batch_2\n"), "[%s]", latest ? latest : "(none)");
    free(latest);
    dt_expconf_free(c);
}

static void test_build_errors(void) {
    dt_expconf *c = load_toy(NULL, "");
    if (!c) return;
    dt_trial_lib *lib = NULL;
    char missing[PATH_MAX + 32];
    snprintf(missing, sizeof missing, "%s/no_such_dir", g_tmp);
    CHECK(dt_trial_lib_build(c, missing, &lib) == DT_ERR_CONFIG && !lib);
    CHECK_HAS(dt_last_error(), "no_such_dir");
    dt_expconf_free(c);

    c = load_toy("entrypoint:", "entrypoint: model_def:NoSuchTrial\n");
    if (!c) return;
    CHECK(dt_trial_lib_build(c, g_toy, &lib) == DT_ERR_CONFIG && !lib);
    CHECK_HAS(dt_last_error(), "NoSuchTrial");
    dt_launch_opts o = {.checkpoint_dir = missing};
    CHECK(dt_trial_launch_local(c, g_toy, &o) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "NoSuchTrial");
    dt_expconf_free(c);

    CHECK(dt_trial_lib_open(missing, "ToyTrial", NULL, &lib) == DT_ERR_CONFIG && !lib);
    CHECK_HAS(dt_last_error(), "no_such_dir");
    CHECK(dt_trial_lib_build(NULL, g_toy, &lib) == DT_ERR_INVALID && !lib);
    CHECK(dt_trial_run_local(NULL, NULL) == DT_ERR_INVALID);
    dt_trial_lib_free(NULL);
}

int main(void) {
    const char *src = getenv("DT_SOURCE_DIR");
    snprintf(g_toy, sizeof g_toy, "%s/tests/e2e/toy", src ? src : ".");
    if (!fx_tmpdir(g_tmp, sizeof g_tmp, "test-launch")) return 1;
    TEST_RUN(test_mpirun_argv);
    TEST_RUN(test_prepare_defaults);
    TEST_RUN(test_prepare_options);
    TEST_RUN(test_prepare_resume_latest);
    TEST_RUN(test_prepare_lengths);
    TEST_RUN(test_prepare_hparams);
    TEST_RUN(test_build_once_run_twice);
    TEST_RUN(test_launch_local);
    TEST_RUN(test_build_errors);
    if (!fx_rmtree(g_tmp)) fprintf(stderr, "could not remove %s\n", g_tmp);
    TEST_END();
}
