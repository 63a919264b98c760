/* test_gc.c — checkpoint GC (src/master/gc.c): the selection on a table of policies and
 * metric cases written from Determined's rule, and dt_gc_run removing exactly those
 * directories from a real store (and refusing paths outside the storage root). */
#define _GNU_SOURCE
#include "master/gc.h"
#include "master/store_impl.h"
#include "fixtures/files.h"
#include "fixtures/store_rows.h"
#include "test.h"

#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- selection ---- */

typedef struct gc_row {
    int trial;
    int batches;
    double metric; /* NAN: no validation at the checkpoint's batches */
    const char *uuid;
    const char *state; /* NULL: COMPLETED */
} gc_row;

typedef struct gc_case {
    const char *name;
    dt_gc_policy p;
    gc_row rows[8];
    const char *deleted; /* the uuids selected, space-separated, in input order */
} gc_case;

#define POLICY(e, t, l, sib)                                                                       \
    {                                                                                              \
        .save_experiment_best = e, .save_trial_best = t, .save_trial_latest = l,                   \
        .smaller_is_better = sib                                                                   \
    }

static const gc_case CASES[] = {
    {"defaults: keep each trial's latest and best",
     POLICY(0, 1, 1, true),
     {{1, 100, 0.5, "a", 0}, {1, 200, 0.3, "b", 0}, {1, 300, 0.4, "c", 0}},
     "a"},
    {"larger is better",
     POLICY(0, 1, 1, false),
     {{1, 100, 0.5, "a", 0}, {1, 200, 0.3, "b", 0}, {1, 300, 0.4, "c", 0}},
     "b"},
    {"the latest is also the best: one kept",
     POLICY(0, 1, 1, true),
     {{1, 100, 0.5, "a", 0}, {1, 200, 0.4, "b", 0}, {1, 300, 0.1, "c", 0}},
     "a b"},
    {"all counts 0: everything goes",
     POLICY(0, 0, 0, true),
     {{1, 100, 0.5, "a", 0}, {1, 200, 0.3, "b", 0}, {2, 100, 0.1, "c", 0}},
     "a b c"},
    {"fewer checkpoints than the counts: all kept",
     POLICY(3, 5, 5, true),
     {{1, 100, 0.5, "a", 0}, {1, 200, NAN, "b", 0}, {2, 100, 0.1, "c", 0}},
     ""},
    {"no validation metrics: only the latest are kept",
     POLICY(2, 2, 1, true),
     {{1, 100, NAN, "a", 0}, {1, 200, NAN, "b", 0}, {2, 100, NAN, "c", 0}, {2, 300, NAN, "d", 0}},
     "a c"},
    {"equal metrics: the one listed first is the best",
     POLICY(0, 1, 1, true),
     {{1, 100, 0.3, "a", 0}, {1, 200, 0.3, "b", 0}, {1, 300, 0.9, "c", 0}},
     "b"},
    {"experiment best across trials only",
     POLICY(1, 0, 0, true),
     {{1, 100, 0.5, "a", 0}, {2, 100, 0.2, "b", 0}, {2, 200, 0.4, "c", 0}, {3, 50, NAN, "d", 0}},
     "a c d"},
    {"experiment best 2, trial latest 1",
     POLICY(2, 0, 1, true),
     {{1, 100, 0.1, "a", 0},
      {1, 200, 0.6, "b", 0},
      {2, 100, 0.2, "c", 0},
      {2, 200, 0.7, "d", 0},
      {3, 100, 0.3, "e", 0},
      {3, 200, 0.8, "f", 0}},
     "e"},
    {"trial best 2 per trial",
     POLICY(0, 2, 0, true),
     {{1, 100, 0.4, "a", 0}, {1, 200, 0.3, "b", 0}, {1, 300, 0.2, "c", 0}, {2, 100, 0.9, "d", 0}},
     "a"},
    {"deleted rows neither count nor are selected",
     POLICY(0, 1, 1, true),
     {{1, 100, 0.5, "a", 0}, {1, 200, 0.6, "b", 0}, {1, 300, 0.1, "c", "DELETED"}},
     ""},
    {"equal batches share the latest rank",
     POLICY(0, 0, 1, true),
     {{1, 100, NAN, "a", 0}, {1, 200, NAN, "b", 0}, {1, 200, NAN, "c", 0}},
     "a"},
    {"latest 2 of each trial",
     POLICY(0, 0, 2, true),
     {{1, 300, 0.1, "a", 0}, {1, 100, 0.2, "b", 0}, {1, 200, 0.3, "c", 0}, {2, 100, 0.1, "d", 0}},
     "b"},
};

static json_t *rows_json(const gc_row *rows) {
    json_t *arr = json_array();
    for (int i = 0; i < 8 && rows[i].uuid; i++) {
        json_t *m = isnan(rows[i].metric) ? json_null() : json_real(rows[i].metric);
        json_array_append_new(arr, json_pack("{s:s,s:i,s:i,s:s,s:o,s:s}", "uuid", rows[i].uuid,
                                             "trial_id", rows[i].trial, "batches", rows[i].batches,
                                             "state", rows[i].state ? rows[i].state : "COMPLETED",
                                             "validation_metric", m, "path", "/nowhere"));
    }
    return arr;
}

static void test_select_table(void) {
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        const gc_case *c = &CASES[k];
        json_t *rows = rows_json(c->rows), *del = NULL;
        CHECK_MSG(dt_gc_select(rows, &c->p, &del) == DT_OK, "%s: %s", c->name, dt_last_error());
        char got[128] = "";
        for (size_t i = 0; i < json_array_size(del); i++) {
            if (i) strcat(got, " ");
            strcat(got, json_string_value(json_array_get(del, i)));
        }
        CHECK_MSG(!strcmp(got, c->deleted), "%s: deleted \"%s\", expected \"%s\"", c->name, got,
                  c->deleted);
        json_decref(rows);
        json_decref(del);
    }
}

static void test_select_errors(void) {
    json_t *del = (json_t *)1;
    dt_gc_policy p = POLICY(0, 1, 1, true);
    CHECK(dt_gc_select(NULL, &p, &del) == DT_ERR_INVALID && del == NULL);
    json_t *rows = json_pack("[{s:i,s:i}]", "trial_id", 1, "batches", 2); /* no uuid */
    CHECK(dt_gc_select(rows, &p, &del) == DT_ERR_INVALID && del == NULL);
    CHECK(strstr(dt_last_error(), "row 0") != NULL);
    json_decref(rows);
    rows = json_array();
    p.save_trial_latest = -1;
    CHECK(dt_gc_select(rows, &p, &del) == DT_ERR_INVALID);
    p.save_trial_latest = 1;
    CHECK(dt_gc_select(rows, &p, &del) == DT_OK && json_array_size(del) == 0); /* none */
    json_decref(del);
    json_decref(rows);
}

/* ---- dt_gc_run on a store ---- */

static char g_dir[64];

/* A checkpoint-looking directory (with metadata.json) at g_dir/rel. */
static void make_ckpt_dir(const char *rel) {
    char path[256], cmd[1024];
    snprintf(path, sizeof path, "%s/%s", g_dir, rel);
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s' && echo '{}' > '%s/metadata.json' && "
             "echo x > '%s/model.safetensors'",
             path, path, path);
    CHECK(system(cmd) == 0);
}

static bool exists(const char *rel) {
    return fx_exists(fx_path(g_dir, rel));
}

static void test_run(void) {
    char path[512], root[512];
    snprintf(path, sizeof path, "%s/store.db", g_dir);
    snprintf(root, sizeof root, "%s/storage", g_dir);
    dt_store *st = NULL;
    CHECK(dt_store_open(path, &st) == DT_OK);
    if (!st) return;
    json_t *cfg = json_pack("{s:{s:s}}", "searcher", "metric", "loss"), *hp = json_object();
    int64_t exp = 0, t1 = 0, t2 = 0, nw = 0;
    CHECK(dt_store_exp_insert(st, cfg, "", "/m", &exp) == DT_OK);
    CHECK(dt_store_trial_insert(st, exp, 1, hp, 1, &t1) == DT_OK);
    CHECK(dt_store_trial_insert(st, exp, 2, hp, 2, &t2) == DT_OK);
    /* validations: trial 1 best at 200; trial 2 best at 300, its latest */
    json_t *v1 = json_pack("[{s:s,s:i,s:{s:f}},{s:s,s:i,s:{s:f}},{s:s,s:i,s:{s:f}}]", "kind",
                           "validation", "batches", 100, "metrics", "loss", 0.5, "kind",
                           "validation", "batches", 200, "metrics", "loss", 0.2, "kind",
                           "validation", "batches", 300, "metrics", "loss", 0.4);
    json_t *v2 = json_pack("[{s:s,s:i,s:{s:f}},{s:s,s:i,s:{s:f}},{s:s,s:i,s:{s:f}}]", "kind",
                           "validation", "batches", 100, "metrics", "loss", 0.1, "kind",
                           "validation", "batches", 200, "metrics", "loss", 0.3, "kind",
                           "validation", "batches", 300, "metrics", "loss", 0.05);
    CHECK(dt_store_metrics_insert(st, t1, v1, &nw) == DT_OK);
    CHECK(dt_store_metrics_insert(st, t2, v2, &nw) == DT_OK);
    /* trial 1: 100 (delete), 200 (best), 300 (validated, deleted), 400 (latest) */
    static const char *const dirs1[] = {"storage/t1-100", "storage/t1-200", "storage/t1-300",
                                        "storage/t1-400"};
    static const int b1[] = {100, 200, 300, 400};
    for (int i = 0; i < 4; i++) {
        char uuid[16], full[512];
        make_ckpt_dir(dirs1[i]);
        snprintf(uuid, sizeof uuid, "t1-%d", b1[i]);
        snprintf(full, sizeof full, "%s/%s", g_dir, dirs1[i]);
        CHECK(dt_store_ckpt_insert(st, t1, uuid, full, b1[i], NULL, NULL) == DT_OK);
    }
    /* trial 2: 100 outside the root (refused), 150 already gone (marked), 175 the storage root
     * itself (refused), 200 a relative path under the root (deleted), 250 a relative path
     * climbing out (refused), 300 latest and best */
    make_ckpt_dir("outside/t2-100");
    char full[512];
    snprintf(full, sizeof full, "%s/outside/t2-100", g_dir);
    CHECK(dt_store_ckpt_insert(st, t2, "t2-100", full, 100, NULL, NULL) == DT_OK);
    snprintf(full, sizeof full, "%s/storage/t2-150", g_dir);
    CHECK(dt_store_ckpt_insert(st, t2, "t2-150", full, 150, NULL, NULL) == DT_OK);
    CHECK(dt_store_ckpt_insert(st, t2, "t2-175", root, 175, NULL, NULL) == DT_OK);
    make_ckpt_dir("storage/t2-200");
    CHECK(dt_store_ckpt_insert(st, t2, "t2-200", "t2-200", 200, NULL, NULL) == DT_OK);
    make_ckpt_dir("storage/t2-300");
    snprintf(full, sizeof full, "%s/storage/t2-300", g_dir);
    CHECK(dt_store_ckpt_insert(st, t2, "t2-300", full, 300, NULL, NULL) == DT_OK);
    /* a path that climbs out of the root */
    make_ckpt_dir("outside/t2-250");
    CHECK(dt_store_ckpt_insert(st, t2, "t2-250", "../outside/t2-250", 250, NULL, NULL) == DT_OK);

    dt_gc_policy p = POLICY(0, 1, 1, true);
    json_t *ck = NULL, *sel = NULL;
    CHECK(dt_store_ckpt_list(st, exp, 0, &ck) == DT_OK);
    CHECK(dt_gc_select(ck, &p, &sel) == DT_OK);
    CHECK(json_array_size(sel) == 7); /* t1-100 t1-300 t2-100 t2-150 t2-175 t2-200 t2-250 */
    json_decref(ck);
    json_decref(sel);
    CHECK_MSG(dt_gc_run(st, exp, &p, root) == DT_OK, "%s", dt_last_error());

    CHECK(!exists("storage/t1-100") && !strcmp(fx_ckpt_state(st, "t1-100"), "DELETED"));
    CHECK(exists("storage/t1-200") && !strcmp(fx_ckpt_state(st, "t1-200"), "COMPLETED"));
    CHECK(!exists("storage/t1-300") && !strcmp(fx_ckpt_state(st, "t1-300"), "DELETED"));
    CHECK(exists("storage/t1-400") && !strcmp(fx_ckpt_state(st, "t1-400"), "COMPLETED"));
    CHECK(exists("outside/t2-100") && !strcmp(fx_ckpt_state(st, "t2-100"), "COMPLETED"));
    CHECK(!strcmp(fx_ckpt_state(st, "t2-150"), "DELETED"));
    CHECK(exists("storage") && !strcmp(fx_ckpt_state(st, "t2-175"), "COMPLETED"));
    CHECK(!exists("storage/t2-200") && !strcmp(fx_ckpt_state(st, "t2-200"), "DELETED"));
    CHECK(exists("outside/t2-250") && !strcmp(fx_ckpt_state(st, "t2-250"), "COMPLETED"));
    CHECK(exists("storage/t2-300") && !strcmp(fx_ckpt_state(st, "t2-300"), "COMPLETED"));

    /* a second run changes nothing more; all zeros then removes what is inside the root */
    CHECK(dt_gc_run(st, exp, &p, root) == DT_OK);
    CHECK(exists("storage/t1-200") && exists("storage/t1-400") && exists("storage/t2-300"));
    dt_gc_policy none = POLICY(0, 0, 0, true);
    CHECK(dt_gc_run(st, exp, &none, root) == DT_OK);
    CHECK(!exists("storage/t1-200") && !exists("storage/t1-400") && !exists("storage/t2-300"));
    CHECK(exists("storage") && exists("outside/t2-100") && exists("outside/t2-250"));
    CHECK(dt_gc_run(st, 999, &p, root) == DT_ERR_INVALID);

    json_decref(v1);
    json_decref(v2);
    json_decref(cfg);
    json_decref(hp);
    dt_store_close(st);
}

static void test_policy_of_config(void) {
    dt_expconf *cfg = NULL;
    const char *yaml = "entrypoint: model_def:T\n"
                       "searcher: {name: single, metric: acc, smaller_is_better: false,"
                       " max_length: {batches: 10}}\n"
                       "checkpoint_storage: {save_trial_best: 2, save_experiment_best: 3}\n";
    CHECK_MSG(dt_expconf_load_string(yaml, "cfg", 0, &cfg) == DT_OK, "%s", dt_last_error());
    if (!cfg) return;
    dt_gc_policy p = dt_gc_policy_of(cfg);
    CHECK(p.save_experiment_best == 3 && p.save_trial_best == 2 && p.save_trial_latest == 1);
    CHECK(!p.smaller_is_better);
    dt_expconf_free(cfg);
}

int main(void) {
    if (!fx_tmpdir(g_dir, sizeof g_dir, "test-gc")) return 1;
    dt_log_set_level(DT_LOG_ERROR);
    TEST_RUN(test_select_table);
    TEST_RUN(test_select_errors);
    TEST_RUN(test_run);
    TEST_RUN(test_policy_of_config);
    if (!fx_rmtree(g_dir)) fprintf(stderr, "could not remove %s\n", g_dir);
    TEST_END();
}
