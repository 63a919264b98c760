/* test_store_rows.c — the shape of every kind of row the store returns (member names in order
 * and JSON types, as docs/api.md shows them, before and after the optional members are set),
 * and the exact messages for rows that do not exist. */
#include "master/store_impl.h"
#include "test.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char g_path[256];
static dt_store *g_st;

/* The type letter of a JSON value: i integer, r real, s string, o object, a array, b boolean, n
 * null. */
static char type_of(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_INTEGER:
        return 'i';
    case JSON_REAL:
        return 'r';
    case JSON_STRING:
        return 's';
    case JSON_OBJECT:
        return 'o';
    case JSON_ARRAY:
        return 'a';
    case JSON_TRUE:
    case JSON_FALSE:
        return 'b';
    case JSON_NULL:
        return 'n';
    default:
        return '?';
    }
}

/* `o` has exactly the members "name:t name:t ..." in this order, of these types. */
static void check_shape(const char *what, const json_t *o, const char *want) {
    char got[512] = "";
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        size_t n = strlen(got);
        snprintf(got + n, sizeof got - n, "%s%s:%c", n ? " " : "", k, type_of(v));
    }
    CHECK_MSG(o && !strcmp(got, want), "%s\n  got  %s\n  want %s", what, got, want);
}

/* Each "name:t" of `want` is a member of `o` of that type. */
static void check_members(const char *what, const json_t *o, const char *want) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", want);
    for (char *save = NULL, *m = strtok_r(buf, " ", &save); m; m = strtok_r(NULL, " ", &save)) {
        char *colon = strchr(m, ':');
        *colon = 0;
        CHECK_MSG(type_of(json_object_get(o, m)) == colon[1], "%s: %s is not of type %c", what, m,
                  colon[1]);
    }
}

static void check_error(const char *what, dt_status status, dt_status want, const char *msg) {
    CHECK_MSG(status == want && !strcmp(dt_last_error(), msg), "%s: %d %s", what, (int)status,
              dt_last_error());
}

#define NO_ROW "; hint: list them to see which exist"

static void test_row_shapes(void) {
    dt_store *st = g_st;
    json_t *cfg =
        json_pack("{s:s,s:{s:s}}", "entrypoint", "model_def:Net", "searcher", "metric", "loss");
    json_t *hp = json_pack("{s:f}", "lr", 0.1);
    int64_t exp = 0, trial = 0;
    CHECK(dt_store_exp_insert(st, cfg, "x: 1\n", "/models/net", &exp) == DT_OK);
    CHECK(dt_store_trial_insert(st, exp, 3, hp, 7, &trial) == DT_OK);
    CHECK(dt_store_ckpt_insert(st, trial, "u-1", "/ck/u-1", 100, NULL, NULL) == DT_OK);
    const int ranks[] = {1};
    const char *const lines[] = {"hello"};
    CHECK(dt_store_logs_insert(st, trial, ranks, lines, 1) == DT_OK);

    json_t *e = NULL, *t = NULL, *c = NULL, *l = NULL, *m = NULL;
    CHECK(dt_store_exp_get(st, exp, &e) == DT_OK);
    check_shape("new experiment", e,
                "id:i name:s description:s state:s config:o config_text:s model_dir:s "
                "progress:r start_time:s end_time:n searcher_metric:s smaller_is_better:b "
                "num_trials:i best_metric:n so_path:n active_trials:i checkpoint_count:i "
                "checkpoint_bytes:i config_name:n");
    CHECK(dt_store_trial_get(st, trial, &t) == DT_OK);
    check_shape("new trial", t,
                "id:i experiment_id:i request_id:i state:s hparams:o seed:i restarts:i run_id:i "
                "pgid:i batches:i total_batches:i start_time:s end_time:n best_validation:n "
                "latest_checkpoint:s ops:n exit_reason:n latest_validation:n run_start:i");
    CHECK(dt_store_ckpt_get(st, "u-1", &c) == DT_OK);
    check_shape("checkpoint", c,
                "uuid:s trial_id:i experiment_id:i batches:i state:s path:s metadata:o "
                "resources:o report_time:s validation_metric:n");
    CHECK(dt_store_logs_query(st, exp, 0, 0, 0, &l) == DT_OK);
    CHECK(json_array_size(l) == 1);
    check_shape("log line", json_array_get(l, 0), "id:i trial_id:i rank:i time:s line:s");
    json_decref(e);
    json_decref(t);
    json_decref(c);

    /* the optional members once set; a metric row comes back as reported */
    json_t *rows = json_pack("[{s:s,s:i,s:{s:f}}]", "kind", "validation", "batches", 100, "metrics",
                             "loss", 0.5);
    json_t *ops = json_pack("[i]", 1);
    CHECK(dt_store_metrics_insert(st, trial, rows, NULL) == DT_OK);
    CHECK(dt_store_exp_set_build(st, exp, "/b/net.so") == DT_OK);
    CHECK(dt_store_exp_set_state(st, exp, "COMPLETED") == DT_OK);
    CHECK(dt_store_trial_set_best(st, trial, 0.5) == DT_OK);
    CHECK(dt_store_trial_set_ops(st, trial, ops) == DT_OK);
    CHECK(dt_store_trial_set_state(st, trial, "COMPLETED", "done") == DT_OK);
    CHECK(dt_store_exp_get(st, exp, &e) == DT_OK);
    check_members("finished experiment", e, "end_time:s best_metric:r so_path:s");
    CHECK(dt_store_trial_get(st, trial, &t) == DT_OK);
    check_members("finished trial", t, "end_time:s best_validation:r ops:a exit_reason:s");
    CHECK(dt_store_ckpt_get(st, "u-1", &c) == DT_OK);
    check_members("checkpoint", c, "validation_metric:r");
    CHECK(dt_store_metrics_query(st, trial, NULL, 0, 0, &m) == DT_OK);
    CHECK(json_equal(m, rows));
    json_t *all[] = {e, t, c, l, m, rows, ops, cfg, hp};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) json_decref(all[i]);
}

static void test_missing_rows(void) {
    dt_store *st = g_st;
    json_t *out = NULL, *rows = json_array(), *hp = json_object();
    int64_t n = 0;
    check_error("exp_get", dt_store_exp_get(st, 42, &out), DT_ERR_INVALID,
                "no experiment with id 42" NO_ROW);
    check_error("exp_set_progress", dt_store_exp_set_progress(st, 42, 0.5), DT_ERR_INVALID,
                "no experiment with id 42" NO_ROW);
    check_error("trial_insert", dt_store_trial_insert(st, 42, 0, hp, 1, NULL), DT_ERR_INVALID,
                "no experiment with id 42" NO_ROW);
    check_error("trial_get", dt_store_trial_get(st, 43, &out), DT_ERR_INVALID,
                "no trial with id 43" NO_ROW);
    check_error("trial_add_restart", dt_store_trial_add_restart(st, 43, NULL), DT_ERR_INVALID,
                "no trial with id 43" NO_ROW);
    check_error("trial_set_state", dt_store_trial_set_state(st, 43, "PAUSED", NULL), DT_ERR_INVALID,
                "no trial with id 43" NO_ROW);
    check_error("metrics_insert", dt_store_metrics_insert(st, 43, rows, NULL), DT_ERR_INVALID,
                "no trial with id 43" NO_ROW);
    check_error("metrics_count", dt_store_metrics_count(st, 43, NULL, &n), DT_ERR_INVALID,
                "no trial with id 43" NO_ROW);
    check_error("logs_query", dt_store_logs_query(st, 0, 43, 0, 0, &out), DT_ERR_INVALID,
                "no trial with id 43" NO_ROW);
    check_error("ckpt_get", dt_store_ckpt_get(st, "nope", &out), DT_ERR_INVALID,
                "no checkpoint nope" NO_ROW);
    check_error("ckpt_set_state", dt_store_ckpt_set_state(st, "nope", "DELETED"), DT_ERR_INVALID,
                "no checkpoint nope" NO_ROW);
    CHECK(out == NULL);
    json_decref(rows);
    json_decref(hp);
}

int main(void) {
    snprintf(g_path, sizeof g_path, "/tmp/dt_test_store_rows_%d.db", (int)getpid());
    dt_log_set_level(DT_LOG_ERROR);
    CHECK(dt_store_open(g_path, &g_st) == DT_OK);
    if (g_st) {
        TEST_RUN(test_row_shapes);
        TEST_RUN(test_missing_rows); /* ids 42, 43 and uuid "nope" do not exist */
        dt_store_close(g_st);
    }
    const char *suffixes[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p[300];
        snprintf(p, sizeof p, "%s%s", g_path, suffixes[i]);
        unlink(p);
    }
    TEST_END();
}
