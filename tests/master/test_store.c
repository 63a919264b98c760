/* test_store.c — the experiment store (src/master/store.c, store_schema.c): every function's
 * round trip and its errors, migration from schemas 1 and 2, the chart series cache, foreign and
 * newer files left untouched, 8 threads writing metrics at once, and a writer killed mid-batch. */
#define _GNU_SOURCE
#include "master/store_impl.h"
#include "fixtures/files.h"
#include "test.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_dir[64];

static void path_in(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", g_dir, name);
}

static json_t *test_config(void) {
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:b},s:{s:i,s:i,s:i}}", "name", "mnist", "entrypoint",
                     "model_def:Mnist", "searcher", "name", "random", "metric", "loss",
                     "smaller_is_better", 1, "checkpoint_storage", "save_trial_best", 1,
                     "save_trial_latest", 1, "save_experiment_best", 0);
}

/* A metric row of `kind` at `batches` with loss = value. */
static json_t *mrow(const char *kind, int64_t batches, double value) {
    return json_pack("{s:s,s:I,s:f,s:I,s:{s:f,s:f},s:f}", "kind", kind, "batches",
                     (json_int_t)batches, "epochs", batches / 100.0, "records",
                     (json_int_t)(batches * 32), "metrics", "loss", value, "accuracy", 1 - value,
                     "records_per_s", 1234.5);
}

static int64_t count_rows(dt_store *st, const char *sql) {
    sqlite3_stmt *s = NULL;
    int64_t n = -1;
    if (sqlite3_prepare_v2(dt__store_db(st), sql, -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return n;
}

/* The bytes of a file (malloc'd; *n its size), or NULL. */
static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    *n = buf ? fread(buf, 1, (size_t)len, f) : 0;
    fclose(f);
    return buf;
}

static void test_experiments(void) {
    char path[512];
    path_in(path, sizeof path, "sub/dir/exp.db"); /* the directory is made */
    dt_store *st = NULL;
    CHECK(dt_store_open(path, &st) == DT_OK);
    if (!st) return;
    CHECK(dt_store_check(st) == DT_OK);
    CHECK(count_rows(st, "PRAGMA user_version") == dt_store_schema_version());
    json_t *cfg = test_config();
    int64_t id = 0, id2 = 0;
    CHECK(dt_store_exp_insert(st, cfg, "name: mnist\n", "/models/mnist", &id) == DT_OK);
    CHECK(dt_store_exp_insert(st, cfg, "name: mnist\n", "/models/mnist", &id2) == DT_OK);
    CHECK(id > 0 && id2 == id + 1);

    json_t *e = NULL;
    CHECK(dt_store_exp_get(st, id, &e) == DT_OK);
    CHECK(json_integer_value(json_object_get(e, "id")) == id);
    CHECK(!strcmp(json_string_value(json_object_get(e, "name")), "mnist"));
    CHECK(!strcmp(json_string_value(json_object_get(e, "state")), "ACTIVE"));
    CHECK(json_equal(json_object_get(e, "config"), cfg));
    CHECK(!strcmp(json_string_value(json_object_get(e, "config_text")), "name: mnist\n"));
    CHECK(!strcmp(json_string_value(json_object_get(e, "model_dir")), "/models/mnist"));
    CHECK(!strcmp(json_string_value(json_object_get(e, "searcher_metric")), "loss"));
    CHECK(json_is_true(json_object_get(e, "smaller_is_better")));
    CHECK(json_integer_value(json_object_get(e, "num_trials")) == 0);
    CHECK(json_is_null(json_object_get(e, "best_metric")));
    CHECK(json_is_null(json_object_get(e, "end_time")));
    const char *t0 = json_string_value(json_object_get(e, "start_time"));
    CHECK(t0 && strlen(t0) == 24 && t0[10] == 'T' && t0[23] == 'Z'); /* 2024-05-01T12:00:00.000Z */
    json_decref(e);

    CHECK(dt_store_exp_set_state(st, id, "PAUSED") == DT_OK);
    CHECK(dt_store_exp_set_progress(st, id, 0.25) == DT_OK);
    CHECK(dt_store_exp_set_build(st, id, "/tmp/build/mnist.so") == DT_OK);
    CHECK(dt_store_exp_get(st, id, &e) == DT_OK);
    CHECK(!strcmp(json_string_value(json_object_get(e, "state")), "PAUSED"));
    CHECK(json_real_value(json_object_get(e, "progress")) == 0.25);
    CHECK(!strcmp(json_string_value(json_object_get(e, "so_path")), "/tmp/build/mnist.so"));
    CHECK(json_is_null(json_object_get(e, "end_time")));
    json_decref(e);
    CHECK(dt_store_exp_set_state(st, id, "COMPLETED") == DT_OK);
    CHECK(dt_store_exp_get(st, id, &e) == DT_OK);
    CHECK(json_is_string(json_object_get(e, "end_time"))); /* a terminal state ends it */
    json_decref(e);

    json_t *list = NULL;
    CHECK(dt_store_exp_list(st, &list) == DT_OK);
    CHECK(json_array_size(list) == 2);
    CHECK(json_integer_value(json_object_get(json_array_get(list, 0), "id")) == id2); /* newest */
    json_decref(list);

    const char *states[] = {"COMPLETED", "PAUSED"};
    int64_t *ids = NULL;
    int n = -1;
    CHECK(dt_store_exp_ids(st, states, 2, &ids, &n) == DT_OK);
    CHECK(n == 1 && ids && ids[0] == id);
    free(ids);
    CHECK(dt_store_exp_ids(st, states + 1, 1, &ids, &n) == DT_OK && n == 0);
    free(ids);
    const char *active[] = {"ACTIVE"};
    CHECK(dt_store_exp_ids(st, active, 1, &ids, &n) == DT_OK && n == 1 && ids[0] == id2);
    free(ids);

    /* searcher snapshots */
    json_t *snap = NULL;
    CHECK(dt_store_searcher_load(st, id, &snap) == DT_OK && snap == NULL);
    json_t *s1 = json_pack("{s:i,s:[i,i]}", "rung", 1, "pending", 3, 4);
    json_t *s2 = json_pack("{s:i}", "rung", 2);
    CHECK(dt_store_searcher_save(st, id, s1) == DT_OK);
    CHECK(dt_store_searcher_save(st, id, s2) == DT_OK); /* replaces */
    CHECK(dt_store_searcher_load(st, id, &snap) == DT_OK && json_equal(snap, s2));
    json_decref(snap);

    /* errors: unknown ids, bad states, a config without a searcher metric */
    CHECK(dt_store_exp_get(st, 999, &e) == DT_ERR_INVALID && e == NULL);
    CHECK(strstr(dt_last_error(), "999") != NULL);
    CHECK(dt_store_exp_set_state(st, 999, "PAUSED") == DT_ERR_INVALID);
    CHECK(dt_store_exp_set_state(st, id, "RUNNING") == DT_ERR_INVALID);
    CHECK(dt_store_exp_set_progress(st, 999, 0.5) == DT_ERR_INVALID);
    CHECK(dt_store_exp_set_build(st, 999, "/x.so") == DT_ERR_INVALID);
    CHECK(dt_store_exp_delete(st, 999) == DT_ERR_INVALID);
    CHECK(dt_store_searcher_save(st, 999, s1) == DT_ERR_INVALID);
    CHECK(dt_store_searcher_load(st, 999, &snap) == DT_ERR_INVALID);
    json_t *bad = json_pack("{s:s}", "name", "x");
    CHECK(dt_store_exp_insert(st, bad, "", "/m", &id2) == DT_ERR_INVALID);
    json_decref(bad);
    json_decref(s1);
    json_decref(s2);
    json_decref(cfg);
    CHECK(dt_store_check(st) == DT_OK);
    dt_store_close(st);
}

static void test_trials_metrics_ckpts_logs(void) {
    char path[512];
    path_in(path, sizeof path, "trials.db");
    dt_store *st = NULL;
    CHECK(dt_store_open(path, &st) == DT_OK);
    if (!st) return;
    json_t *cfg = test_config();
    int64_t exp = 0, t1 = 0, t2 = 0;
    CHECK(dt_store_exp_insert(st, cfg, "", "/m", &exp) == DT_OK);
    json_t *hp = json_pack("{s:f,s:{s:i}}", "lr", 0.01, "net", "width", 64);
    CHECK(dt_store_trial_insert(st, exp, 7, hp, 42, &t1) == DT_OK);
    CHECK(dt_store_trial_insert(st, exp, 8, hp, (uint64_t)1 << 40, &t2) == DT_OK);
    CHECK(dt_store_trial_insert(st, exp, 9, hp, UINT64_MAX, NULL) == DT_ERR_INVALID);
    CHECK(dt_store_trial_insert(st, 999, 9, hp, 1, NULL) == DT_ERR_INVALID);

    json_t *t = NULL;
    CHECK(dt_store_trial_get(st, t1, &t) == DT_OK);
    CHECK(json_integer_value(json_object_get(t, "experiment_id")) == exp);
    CHECK(json_integer_value(json_object_get(t, "request_id")) == 7);
    CHECK(json_equal(json_object_get(t, "hparams"), hp));
    CHECK(json_integer_value(json_object_get(t, "seed")) == 42);
    CHECK(!strcmp(json_string_value(json_object_get(t, "state")), "ACTIVE"));
    CHECK(json_is_null(json_object_get(t, "latest_checkpoint")));
    CHECK(json_is_null(json_object_get(t, "best_validation")));
    CHECK(json_is_null(json_object_get(t, "ops")));
    CHECK(json_is_null(json_object_get(t, "exit_reason")));
    json_decref(t);

    int64_t restarts = 0;
    json_t *ops = json_pack("{s:[{s:I}]}", "pending", "batches", (json_int_t)500);
    CHECK(dt_store_trial_set_run(st, t1, 3, 12345) == DT_OK);
    CHECK(dt_store_trial_add_restart(st, t1, &restarts) == DT_OK && restarts == 1);
    CHECK(dt_store_trial_add_restart(st, t1, &restarts) == DT_OK && restarts == 2);
    CHECK(dt_store_trial_set_progress(st, t1, 300, 1000) == DT_OK);
    CHECK(dt_store_trial_set_ops(st, t1, ops) == DT_OK);
    CHECK(dt_store_trial_set_best(st, t1, 0.125) == DT_OK);
    CHECK(dt_store_trial_set_state(st, t1, "PAUSED", "preempted") == DT_OK);
    CHECK(dt_store_trial_get(st, t1, &t) == DT_OK);
    CHECK(json_integer_value(json_object_get(t, "run_id")) == 3);
    CHECK(json_integer_value(json_object_get(t, "pgid")) == 12345);
    CHECK(json_integer_value(json_object_get(t, "restarts")) == 2);
    CHECK(json_integer_value(json_object_get(t, "batches")) == 300);
    CHECK(json_integer_value(json_object_get(t, "total_batches")) == 1000);
    CHECK(json_equal(json_object_get(t, "ops"), ops));
    CHECK(json_real_value(json_object_get(t, "best_validation")) == 0.125);
    CHECK(!strcmp(json_string_value(json_object_get(t, "exit_reason")), "preempted"));
    CHECK(json_is_null(json_object_get(t, "end_time")));
    json_decref(t);
    CHECK(dt_store_trial_set_state(st, t1, "COMPLETED", NULL) == DT_OK); /* reason unchanged */
    CHECK(dt_store_trial_get(st, t1, &t) == DT_OK);
    CHECK(!strcmp(json_string_value(json_object_get(t, "exit_reason")), "preempted"));
    CHECK(json_is_string(json_object_get(t, "end_time")));
    json_decref(t);

    json_t *list = NULL;
    CHECK(dt_store_trial_list(st, exp, &list) == DT_OK && json_array_size(list) == 2);
    CHECK(json_integer_value(json_object_get(json_array_get(list, 1), "seed")) == (json_int_t)1
                                                                                      << 40);
    json_decref(list);

    CHECK(dt_store_trial_get(st, 999, &t) == DT_ERR_INVALID);
    CHECK(dt_store_trial_list(st, 999, &list) == DT_ERR_INVALID);
    CHECK(dt_store_trial_set_state(st, 999, "ERROR", NULL) == DT_ERR_INVALID);
    CHECK(dt_store_trial_set_state(st, t1, "DONE", NULL) == DT_ERR_INVALID);
    CHECK(dt_store_trial_set_run(st, 999, 1, 1) == DT_ERR_INVALID);
    CHECK(dt_store_trial_add_restart(st, 999, &restarts) == DT_ERR_INVALID);
    CHECK(dt_store_trial_set_progress(st, 999, 1, 2) == DT_ERR_INVALID);
    CHECK(dt_store_trial_set_ops(st, 999, ops) == DT_ERR_INVALID);
    CHECK(dt_store_trial_set_best(st, 999, 1) == DT_ERR_INVALID);
    json_decref(ops);

    /* metrics: upsert, extra members kept, query and count by kind */
    json_t *rows = json_array();
    for (int b = 100; b <= 500; b += 100) json_array_append_new(rows, mrow("training", b, 1.0 / b));
    json_array_append_new(rows, mrow("validation", 200, 0.5));
    json_array_append_new(rows, mrow("validation", 400, 0.25));
    int64_t nw = 0;
    CHECK(dt_store_metrics_insert(st, t1, rows, &nw) == DT_OK && nw == 7);
    CHECK(dt_store_metrics_insert(st, t1, rows, &nw) == DT_OK && nw == 7); /* replay */
    int64_t cnt = 0;
    CHECK(dt_store_metrics_count(st, t1, NULL, &cnt) == DT_OK && cnt == 7);
    CHECK(dt_store_metrics_count(st, t1, "validation", &cnt) == DT_OK && cnt == 2);
    json_t *q = NULL;
    CHECK(dt_store_metrics_query(st, t1, "training", 200, 2, &q) == DT_OK);
    CHECK(json_array_size(q) == 2);
    CHECK(json_equal(json_array_get(q, 0), json_array_get(rows, 2))); /* batches 300, as sent */
    CHECK(json_real_value(json_object_get(json_array_get(q, 0), "records_per_s")) == 1234.5);
    json_decref(q);
    CHECK(dt_store_metrics_query(st, t1, NULL, 0, 0, &q) == DT_OK && json_array_size(q) == 7);
    int64_t last = -1;
    bool ordered = true;
    for (size_t i = 0; i < json_array_size(q); i++) {
        int64_t b = json_integer_value(json_object_get(json_array_get(q, i), "batches"));
        ordered = ordered && b >= last;
        last = b;
    }
    CHECK(ordered);
    json_decref(q);
    /* a replacement row changes the stored values */
    json_t *fix = json_pack("[o]", mrow("validation", 400, 0.2));
    CHECK(dt_store_metrics_insert(st, t1, fix, &nw) == DT_OK && nw == 1);
    json_decref(fix);
    CHECK(dt_store_metrics_count(st, t1, "validation", &cnt) == DT_OK && cnt == 2);

    /* a malformed row refuses the whole batch */
    json_t *mixed = json_array();
    json_array_append_new(mixed, mrow("training", 1000, 0.1));
    json_array_append_new(mixed, mrow("training", 1100, 0.1));
    json_array_append_new(mixed, json_pack("{s:s,s:i,s:{s:s}}", "kind", "training", "batches", 1200,
                                           "metrics", "loss", "high"));
    nw = -1;
    CHECK(dt_store_metrics_insert(st, t1, mixed, &nw) == DT_ERR_INVALID && nw == 0);
    CHECK(strstr(dt_last_error(), "row 2") != NULL);
    CHECK(dt_store_metrics_count(st, t1, NULL, &cnt) == DT_OK && cnt == 7);
    json_array_set_new(mixed, 2,
                       json_pack("{s:s,s:i,s:{}}", "kind", "loss", "batches", 1200, "metrics"));
    CHECK(dt_store_metrics_insert(st, t1, mixed, &nw) == DT_ERR_INVALID);
    json_array_set_new(mixed, 2,
                       json_pack("{s:s,s:i,s:{}}", "kind", "training", "batches", -1, "metrics"));
    CHECK(dt_store_metrics_insert(st, t1, mixed, &nw) == DT_ERR_INVALID);
    json_array_set_new(mixed, 2, json_pack("{s:s,s:i}", "kind", "training", "batches", 5));
    CHECK(dt_store_metrics_insert(st, t1, mixed, &nw) == DT_ERR_INVALID);
    json_array_set_new(mixed, 2, json_string("row"));
    CHECK(dt_store_metrics_insert(st, t1, mixed, &nw) == DT_ERR_INVALID);
    CHECK(dt_store_metrics_count(st, t1, NULL, &cnt) == DT_OK && cnt == 7);
    CHECK(dt_store_metrics_insert(st, 999, rows, &nw) == DT_ERR_INVALID);
    CHECK(dt_store_metrics_query(st, 999, NULL, 0, 0, &q) == DT_ERR_INVALID);
    CHECK(dt_store_metrics_query(st, t1, "loss", 0, 0, &q) == DT_ERR_INVALID);
    CHECK(dt_store_metrics_count(st, 999, NULL, &cnt) == DT_ERR_INVALID);
    json_decref(mixed);

    /* the experiment's best metric comes from the validation rows */
    json_t *e = NULL;
    CHECK(dt_store_exp_get(st, exp, &e) == DT_OK);
    CHECK(json_real_value(json_object_get(e, "best_metric")) == 0.2);
    CHECK(json_integer_value(json_object_get(e, "num_trials")) == 2);
    json_decref(e);

    /* checkpoints */
    json_t *md = json_pack("{s:s}", "framework", "dtrain");
    json_t *res = json_pack("{s:i,s:i}", "model.safetensors", 4096, "metadata.json", 120);
    CHECK(dt_store_ckpt_insert(st, t1, "uuid-a", "/ck/a", 200, md, res) == DT_OK);
    CHECK(dt_store_ckpt_insert(st, t1, "uuid-b", "/ck/b", 400, md, res) == DT_OK);
    CHECK(dt_store_ckpt_insert(st, t1, "uuid-c", "/ck/c", 500, md, NULL) == DT_OK);
    CHECK(dt_store_ckpt_insert(st, t2, "uuid-d", "/ck/d", 100, NULL, NULL) == DT_OK);
    CHECK(dt_store_ckpt_insert(st, t1, "uuid-b", "/ck/b", 400, md, res) == DT_OK); /* a retry */
    CHECK(dt_store_ckpt_insert(st, t2, "uuid-b", "/ck/b", 400, md, res) == DT_ERR_INVALID);
    CHECK(dt_store_ckpt_insert(st, 999, "uuid-z", "/ck/z", 1, md, res) == DT_ERR_INVALID);
    json_t *bad_res = json_pack("{s:s}", "x", "big");
    CHECK(dt_store_ckpt_insert(st, t1, "uuid-y", "/ck/y", 1, md, bad_res) == DT_ERR_INVALID);
    json_decref(bad_res);
    json_t *c = NULL;
    CHECK(dt_store_ckpt_get(st, "uuid-b", &c) == DT_OK);
    CHECK(json_integer_value(json_object_get(c, "trial_id")) == t1);
    CHECK(json_integer_value(json_object_get(c, "experiment_id")) == exp);
    CHECK(json_integer_value(json_object_get(c, "batches")) == 400);
    CHECK(!strcmp(json_string_value(json_object_get(c, "state")), "COMPLETED"));
    CHECK(!strcmp(json_string_value(json_object_get(c, "path")), "/ck/b"));
    CHECK(json_equal(json_object_get(c, "metadata"), md));
    CHECK(json_equal(json_object_get(c, "resources"), res));
    CHECK(json_real_value(json_object_get(c, "validation_metric")) == 0.2);
    CHECK(json_is_string(json_object_get(c, "report_time")));
    json_decref(c);
    CHECK(dt_store_ckpt_get(st, "uuid-c", &c) == DT_OK);
    CHECK(json_is_null(json_object_get(c, "validation_metric"))); /* no validation at 500 */
    json_decref(c);
    CHECK(dt_store_ckpt_get(st, "nope", &c) == DT_ERR_INVALID && c == NULL);
    CHECK(strstr(dt_last_error(), "nope") != NULL);

    CHECK(dt_store_ckpt_list(st, exp, 0, &list) == DT_OK && json_array_size(list) == 4);
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(list, 3), "uuid")), "uuid-d"));
    json_decref(list);
    CHECK(dt_store_ckpt_list(st, 0, t1, &list) == DT_OK && json_array_size(list) == 3);
    json_decref(list);
    CHECK(dt_store_ckpt_list(st, 999, 0, &list) == DT_ERR_INVALID);
    CHECK(dt_store_ckpt_list(st, 0, 999, &list) == DT_ERR_INVALID);
    CHECK(dt_store_trial_get(st, t1, &t) == DT_OK);
    CHECK(!strcmp(json_string_value(json_object_get(t, "latest_checkpoint")), "uuid-c"));
    json_decref(t);
    CHECK(dt_store_ckpt_set_state(st, "uuid-c", "DELETED") == DT_OK);
    CHECK(dt_store_ckpt_set_state(st, "uuid-c", "GONE") == DT_ERR_INVALID);
    CHECK(dt_store_ckpt_set_state(st, "nope", "DELETED") == DT_ERR_INVALID);
    CHECK(dt_store_trial_get(st, t1, &t) == DT_OK); /* the latest kept one now */
    CHECK(!strcmp(json_string_value(json_object_get(t, "latest_checkpoint")), "uuid-b"));
    json_decref(t);
    json_decref(md);
    json_decref(res);

    /* logs */
    const char *lines[] = {"epoch 1", "epoch 2", "rank 1 says hi"};
    int ranks[] = {0, 0, 1};
    CHECK(dt_store_logs_insert(st, t1, ranks, lines, 3) == DT_OK);
    CHECK(dt_store_logs_insert(st, t2, NULL, lines, 1) == DT_OK);
    CHECK(dt_store_logs_insert(st, 999, NULL, lines, 1) == DT_ERR_INVALID);
    json_t *logs = NULL;
    CHECK(dt_store_logs_query(st, 0, t1, 0, 0, &logs) == DT_OK && json_array_size(logs) == 3);
    json_t *l2 = json_array_get(logs, 2);
    CHECK(!strcmp(json_string_value(json_object_get(l2, "line")), "rank 1 says hi"));
    CHECK(json_integer_value(json_object_get(l2, "rank")) == 1);
    CHECK(json_integer_value(json_object_get(l2, "trial_id")) == t1);
    CHECK(json_is_string(json_object_get(l2, "time")));
    int64_t first_id = json_integer_value(json_object_get(json_array_get(logs, 0), "id"));
    json_decref(logs);
    CHECK(dt_store_logs_query(st, 0, t1, first_id, 1, &logs) == DT_OK);
    CHECK(json_array_size(logs) == 1 &&
          !strcmp(json_string_value(json_object_get(json_array_get(logs, 0), "line")), "epoch 2"));
    json_decref(logs);
    CHECK(dt_store_logs_query(st, exp, 0, 0, 0, &logs) == DT_OK && json_array_size(logs) == 4);
    json_decref(logs);
    CHECK(dt_store_logs_query(st, 999, 0, 0, 0, &logs) == DT_ERR_INVALID);

    /* a group: writes of several calls commit together, or not at all */
    CHECK(dt_store_begin(st) == DT_OK);
    CHECK(dt_store_begin(st) == DT_ERR_STATE);
    CHECK(dt_store_trial_set_progress(st, t2, 10, 20) == DT_OK);
    CHECK(dt_store_trial_set_progress(st, 999, 10, 20) == DT_ERR_INVALID); /* group goes on */
    CHECK(dt_store_exp_set_progress(st, exp, 0.5) == DT_OK);
    dt_store_rollback(st);
    CHECK(dt_store_trial_get(st, t2, &t) == DT_OK);
    CHECK(json_integer_value(json_object_get(t, "batches")) == 0);
    json_decref(t);
    CHECK(dt_store_begin(st) == DT_OK);
    CHECK(dt_store_trial_set_progress(st, t2, 10, 20) == DT_OK);
    CHECK(dt_store_trial_set_progress(st, 999, 10, 20) == DT_ERR_INVALID);
    CHECK(dt_store_commit(st) == DT_OK);
    CHECK(dt_store_commit(st) == DT_ERR_STATE);
    CHECK(dt_store_trial_get(st, t2, &t) == DT_OK);
    CHECK(json_integer_value(json_object_get(t, "batches")) == 10);
    json_decref(t);

    /* deleting the experiment removes everything of it */
    CHECK(dt_store_searcher_save(st, exp, hp) == DT_OK);
    CHECK(dt_store_exp_delete(st, exp) == DT_OK);
    CHECK(dt_store_exp_get(st, exp, &e) == DT_ERR_INVALID);
    static const char *const tables[] = {"trials", "metrics", "checkpoints", "logs",
                                         "searcher_snapshots"};
    for (int i = 0; i < 5; i++) {
        char sql[80];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", tables[i]);
        CHECK_MSG(count_rows(st, sql) == 0, "%s left", tables[i]);
    }
    CHECK(dt_store_check(st) == DT_OK);
    json_decref(rows);
    json_decref(hp);
    json_decref(cfg);
    dt_store_close(st);
}

/* ---- migration, foreign and newer files ---- */

/* A new store `name` (its path into path[512]) built at schema `version`, or NULL. */
static dt_store *old_store(char *path, const char *name, int version) {
    path_in(path, 512, name);
    dt_store *st = NULL;
    CHECK(dt__store_open_at_version(path, version, &st) == DT_OK);
    if (st) CHECK(count_rows(st, "PRAGMA user_version") == version);
    return st;
}

/* Close `st` and open `path` again: migrated to this build's schema, intact; or NULL. */
static dt_store *reopen_migrated(dt_store *st, const char *path) {
    dt_store_close(st);
    st = NULL;
    CHECK(dt_store_open(path, &st) == DT_OK);
    if (!st) return NULL;
    CHECK(count_rows(st, "PRAGMA user_version") == dt_store_schema_version());
    CHECK(dt_store_check(st) == DT_OK);
    return st;
}

static void test_migration(void) {
    char path[512];
    dt_store *st = old_store(path, "v1.db", 1);
    if (!st) return;
    CHECK(count_rows(st, "SELECT count(*) FROM sqlite_master WHERE name = 'logs'") == 0);
    json_t *cfg = test_config();
    json_t *hp = json_pack("{s:i}", "units", 32);
    int64_t exp = 0, trial = 0, nw = 0;
    CHECK(dt_store_exp_insert(st, cfg, "text", "/m", &exp) == DT_OK);
    CHECK(dt_store_trial_insert(st, exp, 1, hp, 5, &trial) == DT_OK);
    json_t *rows = json_pack("[o,o]", mrow("training", 100, 0.9), mrow("validation", 100, 0.7));
    CHECK(dt_store_metrics_insert(st, trial, rows, &nw) == DT_OK && nw == 2);
    /* a version-1 checkpoint row (no resources column yet) */
    CHECK(sqlite3_exec(dt__store_db(st),
                       "INSERT INTO checkpoints (uuid, trial_id, batches, state, path, metadata,"
                       " report_time) VALUES ('old-ck', 1, 100, 'COMPLETED', '/ck/old', '{}',"
                       " '2024-01-01T00:00:00.000Z')",
                       NULL, NULL, NULL) == SQLITE_OK);
    st = reopen_migrated(st, path);
    if (!st) return;
    json_t *e = NULL, *q = NULL, *c = NULL;
    CHECK(dt_store_exp_get(st, exp, &e) == DT_OK);
    CHECK(json_equal(json_object_get(e, "config"), cfg));
    CHECK(json_real_value(json_object_get(e, "best_metric")) == 0.7);
    json_decref(e);
    CHECK(dt_store_metrics_query(st, trial, NULL, 0, 0, &q) == DT_OK);
    CHECK(json_equal(q, rows));
    json_decref(q);
    CHECK(dt_store_ckpt_get(st, "old-ck", &c) == DT_OK);
    CHECK(json_is_object(json_object_get(c, "resources")) &&
          json_object_size(json_object_get(c, "resources")) == 0);
    CHECK(json_real_value(json_object_get(c, "validation_metric")) == 0.7);
    json_decref(c);
    /* the version-2 features work on the migrated store */
    const char *line = "after the migration";
    json_t *logs = NULL;
    CHECK(dt_store_logs_insert(st, trial, NULL, &line, 1) == DT_OK);
    CHECK(dt_store_logs_query(st, 0, trial, 0, 0, &logs) == DT_OK && json_array_size(logs) == 1);
    json_decref(logs);
    json_t *res = json_pack("{s:i}", "model.safetensors", 10);
    CHECK(dt_store_ckpt_insert(st, trial, "new-ck", "/ck/new", 200, NULL, res) == DT_OK);
    CHECK(dt_store_ckpt_get(st, "new-ck", &c) == DT_OK);
    CHECK(json_equal(json_object_get(c, "resources"), res));
    json_decref(c);
    json_decref(res);
    dt_store_close(st);
    /* an up-to-date store opens as it is */
    CHECK(dt_store_open(path, &st) == DT_OK);
    dt_store_close(st);
    CHECK(dt__store_open_at_version(path, dt_store_schema_version() + 1, &st) == DT_ERR_INVALID);
    json_decref(rows);
    json_decref(hp);
    json_decref(cfg);
}

/* The query plan of `sql` as one line ("SEARCH m USING ... | ..."). */
static void query_plan(dt_store *st, const char *sql, char *out, size_t n) {
    char q[1024];
    snprintf(q, sizeof q, "EXPLAIN QUERY PLAN %s", sql);
    sqlite3_stmt *s = NULL;
    size_t len = 0;
    out[0] = 0;
    if (sqlite3_prepare_v2(dt__store_db(st), q, -1, &s, NULL) != SQLITE_OK) return;
    while (sqlite3_step(s) == SQLITE_ROW && len + 1 < n)
        len += (size_t)snprintf(out + len, n - len, "%s | ", sqlite3_column_text(s, 3));
    sqlite3_finalize(s);
}

/* Schema 2 -> 3: the best-metric index gains kind; best values read the same after it. */
static void test_migration_v2(void) {
    char path[512];
    dt_store *st = old_store(path, "v2.db", 2);
    if (!st) return;
    json_t *cfg = test_config();
    json_t *hp = json_pack("{s:i}", "units", 32);
    int64_t small = 0, large = 0, t[3] = {0}, nw = 0;
    CHECK(dt_store_exp_insert(st, cfg, "text", "/m", &small) == DT_OK);
    CHECK(dt_store_exp_insert(st, cfg, "text", "/m", &large) == DT_OK);
    CHECK(sqlite3_exec(dt__store_db(st),
                       "UPDATE experiments SET smaller_is_better = 0 WHERE id = 2", NULL, NULL,
                       NULL) == SQLITE_OK);
    CHECK(dt_store_trial_insert(st, small, 1, hp, 1, &t[0]) == DT_OK);
    CHECK(dt_store_trial_insert(st, small, 2, hp, 2, &t[1]) == DT_OK);
    CHECK(dt_store_trial_insert(st, large, 1, hp, 3, &t[2]) == DT_OK);
    /* training rows hold the searcher metric too: only validation rows count */
    json_t *r0 = json_pack("[o,o,o]", mrow("validation", 10, 0.5), mrow("validation", 20, 0.3),
                           mrow("training", 20, 0.01));
    json_t *r1 = json_pack("[o,o]", mrow("validation", 10, 0.4), mrow("validation", 20, 0.45));
    json_t *r2 = json_pack("[o,o,o]", mrow("validation", 10, 0.2), mrow("validation", 20, 0.6),
                           mrow("training", 20, 0.9));
    CHECK(dt_store_metrics_insert(st, t[0], r0, &nw) == DT_OK && nw == 3);
    CHECK(dt_store_metrics_insert(st, t[1], r1, &nw) == DT_OK && nw == 2);
    CHECK(dt_store_metrics_insert(st, t[2], r2, &nw) == DT_OK && nw == 3);
    st = reopen_migrated(st, path);
    if (!st) return;
    CHECK(count_rows(st, "SELECT count(*) FROM sqlite_master WHERE name = 'metrics_kind_value'") ==
          1);
    CHECK(count_rows(st, "SELECT count(*) FROM sqlite_master WHERE name = 'metrics_validation'") ==
          0);
    json_t *e = NULL, *tr = NULL;
    CHECK(dt_store_exp_get(st, small, &e) == DT_OK);
    CHECK(json_real_value(json_object_get(e, "best_metric")) == 0.3);
    json_decref(e);
    CHECK(dt_store_exp_get(st, large, &e) == DT_OK);
    CHECK(json_real_value(json_object_get(e, "best_metric")) == 0.6);
    json_decref(e);
    CHECK(dt_store_trial_get(st, t[1], &tr) == DT_OK);
    CHECK(json_real_value(json_object_get(tr, "latest_validation")) == 0.45);
    json_decref(tr);
    /* a trial's best validation is read from the index alone */
    char plan[1024];
    query_plan(st,
               "SELECT min(searcher_value) FROM metrics WHERE trial_id = 1 AND kind = 'validation'",
               plan, sizeof plan);
    CHECK_MSG(strstr(plan, "COVERING INDEX metrics_kind_value"), "plan: %s", plan);
    /* a new experiment with no validation yet has no best */
    int64_t none = 0;
    CHECK(dt_store_exp_insert(st, cfg, "text", "/m", &none) == DT_OK);
    CHECK(dt_store_exp_get(st, none, &e) == DT_OK);
    CHECK(json_is_null(json_object_get(e, "best_metric")));
    json_decref(e);
    dt_store_close(st);
    json_decref(r0);
    json_decref(r1);
    json_decref(r2);
    json_decref(hp);
    json_decref(cfg);
}

/* The loss series of the experiment's trials, x = batches, at most `points` points a trial. */
static json_t *loss_series(dt_store *st, int64_t exp, int64_t points) {
    json_t *out = NULL;
    CHECK(dt_store_metric_series(st, exp, 0, "training", "loss", "batches", points, &out) == DT_OK);
    return out;
}

/* y of trial index i's point at batches b in a series (every point kept), or -1. */
static double y_at(const json_t *series, size_t i, int64_t b) {
    size_t k;
    json_t *p;
    json_array_foreach(json_object_get(json_array_get(series, i), "data"), k, p) {
        if (json_number_value(json_array_get(p, 0)) == (double)b)
            return json_number_value(json_array_get(p, 1));
    }
    return -1;
}

/* Rows of trial `t` at batches lo..hi with loss = base + batches / 1000. */
static void put_rows(dt_store *st, int64_t t, int64_t lo, int64_t hi, double base) {
    json_t *rows = json_array();
    for (int64_t b = lo; b <= hi; b++)
        json_array_append_new(rows, mrow("training", b, base + (double)b / 1000));
    CHECK(dt_store_metrics_insert(st, t, rows, NULL) == DT_OK);
    json_decref(rows);
}

/* Chart series come from the store's cache, extended with the rows that arrive after it was
 * read: they read the same as a fresh handle's after new rows, upserts of rows already read and
 * a rolled-back group; the metrics generation moves with every change of the rows. */
static void test_series_cache(void) {
    char path[512];
    path_in(path, sizeof path, "series.db");
    dt_store *st = NULL, *fresh = NULL;
    CHECK(dt_store_open(path, &st) == DT_OK);
    if (!st) return;
    json_t *cfg = test_config(), *hp = json_pack("{s:i}", "units", 8);
    int64_t exp = 0, t1 = 0, t2 = 0;
    CHECK(dt_store_exp_insert(st, cfg, "text", "/m", &exp) == DT_OK);
    CHECK(dt_store_trial_insert(st, exp, 1, hp, 1, &t1) == DT_OK);
    CHECK(dt_store_trial_insert(st, exp, 2, hp, 2, &t2) == DT_OK);
    uint64_t gen = dt_store_metrics_generation(st);
    put_rows(st, t1, 1, 100, 0);
    CHECK(dt_store_metrics_generation(st) != gen);
    gen = dt_store_metrics_generation(st);
    json_t *a = loss_series(st, exp, 1000);        /* t2 has no rows: not listed */
    CHECK(dt_store_metrics_generation(st) == gen); /* reads change nothing */
    CHECK(json_array_size(a) == 1 && y_at(a, 0, 100) == 0.1);
    json_decref(a);
    /* rows after the ones read: appended */
    put_rows(st, t1, 101, 150, 0);
    put_rows(st, t2, 1, 10, 1);
    a = loss_series(st, exp, 1000);
    CHECK(json_array_size(a) == 2);
    CHECK(json_integer_value(json_object_get(json_array_get(a, 0), "total")) == 150);
    CHECK(y_at(a, 0, 150) == 0.15 && y_at(a, 1, 10) == 1.01);
    json_decref(a);
    /* an upsert of a row already read (a resumed trial reporting again) replaces its point */
    put_rows(st, t1, 40, 40, 5);
    a = loss_series(st, exp, 1000);
    CHECK(y_at(a, 0, 40) == 5.04 && y_at(a, 0, 39) == 0.039);
    CHECK(json_integer_value(json_object_get(json_array_get(a, 0), "total")) == 150);
    json_decref(a);
    /* a group's rows read before its rollback are forgotten with it */
    CHECK(dt_store_begin(st) == DT_OK);
    put_rows(st, t1, 151, 160, 0);
    a = loss_series(st, exp, 1000);
    CHECK(y_at(a, 0, 160) == 0.16);
    json_decref(a);
    gen = dt_store_metrics_generation(st);
    dt_store_rollback(st);
    CHECK(dt_store_metrics_generation(st) != gen);
    a = loss_series(st, exp, 1000);
    CHECK(y_at(a, 0, 160) == -1 &&
          json_integer_value(json_object_get(json_array_get(a, 0), "total")) == 150);
    json_decref(a);
    /* downsampled (min and max per bucket) and whole, the same as a handle that read nothing */
    CHECK(dt_store_open(path, &fresh) == DT_OK);
    for (int64_t points = 10; fresh && points <= 1000; points *= 10) {
        json_t *warm = loss_series(st, exp, points), *cold = loss_series(fresh, exp, points);
        CHECK_MSG(json_equal(warm, cold), "points %lld", (long long)points);
        json_decref(warm);
        json_decref(cold);
    }
    dt_store_close(fresh);
    gen = dt_store_metrics_generation(st);
    CHECK(dt_store_exp_delete(st, exp) == DT_OK);
    CHECK(dt_store_metrics_generation(st) != gen);
    dt_store_close(st);
    json_decref(hp);
    json_decref(cfg);
}

static void test_foreign_files(void) {
    char path[512];
    size_t n0 = 0, n1 = 0;
    /* not SQLite at all */
    path_in(path, sizeof path, "notes.db");
    FILE *f = fopen(path, "wb");
    for (int i = 0; i < 200; i++) fprintf(f, "line %d of something that is not a database\n", i);
    fclose(f);
    char *before = slurp(path, &n0);
    dt_store *st = (dt_store *)1;
    CHECK(dt_store_open(path, &st) == DT_ERR_FORMAT && st == NULL);
    CHECK(strstr(dt_last_error(), path) && strstr(dt_last_error(), "not a SQLite database") &&
          strstr(dt_last_error(), "hint:"));
    char *after = slurp(path, &n1);
    CHECK(before && after && n0 == n1 && !memcmp(before, after, n0));
    free(before);
    free(after);

    /* a newer dtrain's store (in WAL mode, as ours are) */
    path_in(path, sizeof path, "newer.db");
    CHECK(dt_store_open(path, &st) == DT_OK);
    if (!st) return;
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %d", dt_store_schema_version() + 5);
    CHECK(sqlite3_exec(dt__store_db(st), sql, NULL, NULL, NULL) == SQLITE_OK);
    dt_store_close(st);
    before = slurp(path, &n0);
    CHECK(dt_store_open(path, &st) == DT_ERR_FORMAT && st == NULL);
    char want[128];
    snprintf(want, sizeof want, "newer dtrain (schema %d, this one knows %d)",
             dt_store_schema_version() + 5, dt_store_schema_version());
    CHECK_MSG(strstr(dt_last_error(), want) != NULL, "%s", dt_last_error());
    CHECK(strstr(dt_last_error(), "hint: upgrade dtrain or point DTRAIN_HOME elsewhere"));
    after = slurp(path, &n1);
    CHECK(before && after && n0 == n1 && !memcmp(before, after, n0));
    free(before);
    free(after);

    /* some other program's SQLite database */
    path_in(path, sizeof path, "other.db");
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "CREATE TABLE notes (x TEXT)", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    before = slurp(path, &n0);
    CHECK(dt_store_open(path, &st) == DT_ERR_FORMAT && st == NULL);
    after = slurp(path, &n1);
    CHECK(before && after && n0 == n1 && !memcmp(before, after, n0));
    free(before);
    free(after);

    /* a directory where the store's directory should be */
    path_in(path, sizeof path, "notes.db/store.db");
    CHECK(dt_store_open(path, &st) == DT_ERR_IO);
}

/* ---- concurrency: 8 writers on one store ---- */

#define N_THREADS 8
#define ROWS_PER_THREAD 20000
#define BATCH 500

typedef struct writer {
    dt_store *st;
    int64_t trial;
    int failures;
} writer;

static void *write_metrics(void *arg) {
    writer *w = arg;
    for (int b0 = 0; b0 < ROWS_PER_THREAD; b0 += BATCH) {
        json_t *rows = json_array();
        for (int b = b0; b < b0 + BATCH; b++)
            json_array_append_new(rows, mrow(b % 10 == 9 ? "validation" : "training", b, 1.0));
        int64_t nw = 0;
        if (dt_store_metrics_insert(w->st, w->trial, rows, &nw) != DT_OK || nw != BATCH)
            w->failures++;
        json_decref(rows);
    }
    return NULL;
}

static void run_writers(dt_store *st, int64_t *trials) {
    pthread_t th[N_THREADS];
    writer w[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        w[i] = (writer){st, trials[i], 0};
        pthread_create(&th[i], NULL, write_metrics, &w[i]);
    }
    int failures = 0;
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(th[i], NULL);
        failures += w[i].failures;
    }
    CHECK(failures == 0);
}

static void test_concurrent_writers(void) {
    char path[512];
    path_in(path, sizeof path, "concurrent.db");
    dt_store *st = NULL;
    CHECK(dt_store_open(path, &st) == DT_OK);
    if (!st) return;
    json_t *cfg = test_config(), *hp = json_object();
    int64_t exp = 0, trials[N_THREADS];
    CHECK(dt_store_exp_insert(st, cfg, "", "/m", &exp) == DT_OK);
    for (int i = 0; i < N_THREADS; i++)
        CHECK(dt_store_trial_insert(st, exp, i, hp, (uint64_t)i, &trials[i]) == DT_OK);
    run_writers(st, trials);
    CHECK(count_rows(st, "SELECT count(*) FROM metrics") == N_THREADS * ROWS_PER_THREAD);
    int64_t n = 0;
    CHECK(dt_store_metrics_count(st, trials[3], NULL, &n) == DT_OK && n == ROWS_PER_THREAD);
    run_writers(st, trials); /* the same batches again: replaced, not added */
    CHECK(count_rows(st, "SELECT count(*) FROM metrics") == N_THREADS * ROWS_PER_THREAD);
    CHECK(dt_store_check(st) == DT_OK);
    json_decref(cfg);
    json_decref(hp);
    dt_store_close(st);
}

/* ---- a writer killed mid-stream ---- */

static void crash_child(const char *path, int fd) {
    dt_store *st = NULL;
    if (dt_store_open(path, &st) != DT_OK) _exit(2);
    int64_t acked = 0;
    for (int64_t b0 = 0;; b0 += BATCH) {
        json_t *rows = json_array();
        for (int64_t b = b0; b < b0 + BATCH; b++)
            json_array_append_new(rows, mrow("training", b, 0.5));
        int64_t nw = 0;
        if (dt_store_metrics_insert(st, 1, rows, &nw) != DT_OK) _exit(3);
        json_decref(rows);
        acked += nw;
        if (write(fd, &acked, sizeof acked) != (ssize_t)sizeof acked) _exit(4);
    }
}

static void test_killed_writer(void) {
    char path[512];
    path_in(path, sizeof path, "crash.db");
    dt_store *st = NULL;
    CHECK(dt_store_open(path, &st) == DT_OK);
    if (!st) return;
    json_t *cfg = test_config(), *hp = json_object();
    int64_t exp = 0, trial = 0;
    CHECK(dt_store_exp_insert(st, cfg, "", "/m", &exp) == DT_OK);
    CHECK(dt_store_trial_insert(st, exp, 1, hp, 1, &trial) == DT_OK && trial == 1);
    json_decref(cfg);
    json_decref(hp);
    dt_store_close(st);

    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        crash_child(path, fds[1]);
    }
    close(fds[1]);
    int64_t acked = 0, v;
    /* let it commit a good number of batches, then kill it wherever it is */
    while (acked < 40 * BATCH && read(fds[0], &v, sizeof v) == (ssize_t)sizeof v) acked = v;
    kill(pid, SIGKILL);
    while (read(fds[0], &v, sizeof v) == (ssize_t)sizeof v) acked = v; /* acks sent before */
    close(fds[0]);
    int wst = 0;
    waitpid(pid, &wst, 0);
    CHECK(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL);
    CHECK(acked >= 40 * BATCH);

    CHECK(dt_store_open(path, &st) == DT_OK);
    if (!st) return;
    CHECK(dt_store_check(st) == DT_OK);
    int64_t n = 0;
    CHECK(dt_store_metrics_count(st, trial, NULL, &n) == DT_OK);
    CHECK_MSG(n >= acked && n <= acked + BATCH, "rows %lld, acknowledged %lld", (long long)n,
              (long long)acked);
    dt_store_close(st);
}

int main(void) {
    if (!fx_tmpdir(g_dir, sizeof g_dir, "test-store")) return 1;
    dt_log_set_level(DT_LOG_ERROR);
    TEST_RUN(test_experiments);
    TEST_RUN(test_trials_metrics_ckpts_logs);
    TEST_RUN(test_migration);
    TEST_RUN(test_migration_v2);
    TEST_RUN(test_series_cache);
    TEST_RUN(test_foreign_files);
    TEST_RUN(test_concurrent_writers);
    TEST_RUN(test_killed_writer);
    if (!fx_rmtree(g_dir)) fprintf(stderr, "could not remove %s\n", g_dir);
    TEST_END();
}
