/* test_web.c — the web UI and the master's request guards over real HTTP: a master on a free
 * loopback port (its own DTRAIN_HOME) whose store holds an experiment named with <script> and a
 * trial that logged one and reported 50 training rows, a finished dsat search (its searcher
 * snapshot and the files its runner writes, with markup in them) and one with nothing yet;
 * escaping on every page, the dsat results and their download, traversal attempts on the
 * embedded files, unknown and malformed ids, the CSRF rule, oversized and malformed requests, and
 * the token on a non-loopback bind (127.0.0.2: any address but the loopback default needs it). */
#define _GNU_SOURCE
#include "master_thread.h"
#include "fixtures/files.h"
#include "test.h"

#include "dsat/dsat.h"
#include "web/web.h"
#include "master/store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_home[256], g_host[32], g_token[80];
static int g_port;

/* One request written as is; the whole answer into `ans` (NUL-ended); its length. */
static size_t raw(const char *req, size_t req_len, char *ans, size_t n) {
    return fx_http_raw(g_host, g_port, req, req_len, ans, n);
}

/* METHOD path with extra header lines (each ending \r\n) and a body; the answer's length. */
static size_t http(const char *method, const char *path, const char *headers, const char *body,
                   char *ans, size_t n) {
    return fx_http(g_host, g_port, method, path, headers, body, ans, n);
}

static int status_of(const char *ans) {
    return fx_http_status(ans);
}

static bool json_error(const char *ans) {
    return strstr(ans, "application/json") && strstr(ans, "{\"error\":");
}

/* ---- the master in a thread ---- */

static master_thread g_master;

static bool start(const char *host) {
    snprintf(g_host, sizeof g_host, "%s", host);
    dt_master_opts o = {.host = g_host, .slots = 1, .home = g_home, .quiet = true};
    o.routes = dt_web_routes(&o.n_routes);
    if (!master_thread_start(&g_master, &o)) return false;
    g_port = g_master.port;
    return true;
}

static void stop(void) {
    master_thread_stop(&g_master, g_token);
}

/* Write `text` to g_home/checkpoints/exp-2/`name` (the dsat runner's output directory). */
static bool put_file(const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/checkpoints/exp-2/%s", g_home, name);
    FILE *f = fopen(p, "w");
    bool ok = f && fputs(text, f) >= 0;
    if (f) ok &= fclose(f) == 0;
    return ok;
}

#define DSAT_PARAMS 85002

/* Experiment 2: a finished dsat search, as its runner leaves it: a searcher snapshot with the
 * profile and two trials (request 3 ok at stage 1, request 4 out of memory at stage 2; their
 * trials are 2 and 3), best_ds_config.json / best_ds_metrics.json and dsat.log, with markup in
 * the reason, the config and the log. Experiment 3: a dsat search with nothing yet. */
static bool fill_dsat(dt_store *st) {
    json_t *cfg = json_pack("{s:s,s:s,s:{s:{s:i}},s:{s:s,s:s,s:s,s:{s:i},s:{s:[ii]}}}", "name",
                            "dsat search", "entrypoint", "model_def:T", "hyperparameters",
                            "deepspeed_config", "train_micro_batch_size_per_gpu", 1, "searcher",
                            "name", "dsat", "method", "binary", "metric", "FLOPS_per_gpu",
                            "max_length", "batches", 5, "dsat", "zero_stages", 1, 2);
    dt_dsat_profile prof = {.params = DSAT_PARAMS,
                            .trainable_params = DSAT_PARAMS,
                            .device_budget = 4 << 20,
                            .activation_per_example = 4224,
                            .measured_peak = 2841424,
                            .optimizer_bytes_per_param = 8,
                            .slots = 1,
                            .user_stage = 1,
                            .micro_batch = 1};
    dt_metrics pm = dt_dsat_profile_report(&prof);
    json_t *pj = json_object();
    for (int i = 0; i < pm.n; i++) json_object_set_new(pj, pm.m[i].name, json_real(pm.m[i].value));
    const char *knobs = "{s:i,s:I,s:I,s:I,s:i,s:i,s:i,s:i,s:b}";
    json_t *t1 = json_pack(knobs, "zero_stage", 1, "mbs", (json_int_t)4, "reduce_bucket_size",
                           (json_int_t)50000000, "allgather_bucket_size", (json_int_t)5000000,
                           "overlap_comm", -1, "reduce_scatter", -1, "contiguous_gradients", -1,
                           "allgather_partitions", -1, "offload_optimizer", 0);
    json_t *t2 =
        json_pack(knobs, "zero_stage", 2, "mbs", (json_int_t)8, "reduce_bucket_size", (json_int_t)0,
                  "allgather_bucket_size", (json_int_t)0, "overlap_comm", 1, "reduce_scatter", 0,
                  "contiguous_gradients", -1, "allgather_partitions", -1, "offload_optimizer", 1);
    json_t *snap = json_pack(
        "{s:s,s:{s:i,s:s,s:o,s:[{s:I,s:I,s:s,s:s,s:O,s:I,s:I,s:f},"
        "{s:I,s:I,s:s,s:s,s:O,s:I,s:I,s:n}]}}",
        "searcher", "dsat", "method", "phase", 3, "reason", "done <script>alert(3)</script>",
        "profile", pj, "trials", "request_id", (json_int_t)3, "config_id", (json_int_t)0, "kind",
        "trial", "result", "ok", "knobs", t1, "predicted_bytes", (json_int_t)3000000,
        "measured_bytes", (json_int_t)2900000, "metric", 7.5e10, "request_id", (json_int_t)4,
        "config_id", (json_int_t)1, "kind", "trial", "result", "oom", "knobs", t2,
        "predicted_bytes", (json_int_t)3900000, "measured_bytes", (json_int_t)0, "metric");
    json_t *best =
        json_pack("{s:s,s:f,s:I,s:I,s:I,s:O}", "metric", "FLOPS_per_gpu", "value", 7.5e10,
                  "request_id", (json_int_t)3, "predicted_bytes", (json_int_t)3000000,
                  "measured_bytes", (json_int_t)2900000, "knobs", t1);
    json_t *hp = json_object();
    int64_t exp = 0, other = 0, trial = 0;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/checkpoints", g_home);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/checkpoints/exp-2", g_home);
    char *best_text = best ? json_dumps(best, 0) : NULL;
    bool ok = cfg && snap && best_text &&
              dt_store_exp_insert(st, cfg, "name: d\n", "/m", &exp) == DT_OK && exp == 2 &&
              dt_store_trial_insert(st, exp, 3, hp, 1, &trial) == DT_OK &&
              dt_store_trial_insert(st, exp, 4, hp, 2, &trial) == DT_OK &&
              dt_store_searcher_save(st, exp, snap) == DT_OK &&
              dt_store_exp_set_state(st, exp, "COMPLETED") == DT_OK &&
              dt_store_exp_insert(st, cfg, "name: e\n", "/m", &other) == DT_OK &&
              dt_store_exp_set_state(st, other, "COMPLETED") == DT_OK && mkdir(dir, 0755) == 0 &&
              put_file("best_ds_config.json", "{\"train_micro_batch_size_per_gpu\": 4, \"note\": "
                                              "\"</pre><script>alert(5)</script>\"}") &&
              put_file("best_ds_metrics.json", best_text) &&
              put_file("dsat.log", "dsat: one\n<script>alert(4)</script>\n");
    free(best_text);
    json_decref(cfg);
    json_decref(snap);
    json_decref(best);
    json_decref(t1);
    json_decref(t2);
    json_decref(hp);
    return ok;
}

/* The value of the long series' point at batch b: a slow curve, one spike up and one down. */
static double long_loss(int b) {
    return b == 12345 ? 1e6 + 0.1 : b == 77 ? -1e6 : 1.0 / 3 + 1.0 / b;
}

/* A second experiment whose one trial has LONG_POINTS training points (a chart down-samples it). */
enum { LONG_POINTS = 20000 };
static int64_t g_long_exp;
static bool fill_long(dt_store *st) {
    json_t *cfg = json_pack("{s:s,s:s,s:{s:s,s:s,s:b}}", "name", "long", "entrypoint", "m:T",
                            "searcher", "name", "single", "metric", "loss", "smaller_is_better", 1);
    json_t *hp = json_pack("{s:f}", "lr", 0.1), *rows = json_array();
    int64_t exp = 0, trial = 0;
    bool ok = dt_store_exp_insert(st, cfg, "name: long\n", "/m", &exp) == DT_OK &&
              dt_store_trial_insert(st, exp, 1, hp, 1, &trial) == DT_OK;
    for (int b = 1; ok && b <= LONG_POINTS; b++) {
        json_array_append_new(rows, json_pack("{s:s,s:i,s:{s:f}}", "kind", "training", "batches", b,
                                              "metrics", "loss", long_loss(b)));
        if (b % 5000 == 0) {
            ok = dt_store_metrics_insert(st, trial, rows, NULL) == DT_OK;
            json_array_clear(rows);
        }
    }
    ok = ok && dt_store_trial_set_state(st, trial, "COMPLETED", NULL) == DT_OK &&
         dt_store_exp_set_state(st, exp, "COMPLETED") == DT_OK;
    g_long_exp = exp;
    json_decref(cfg);
    json_decref(hp);
    json_decref(rows);
    return ok;
}

/* The store before the master starts: a finished experiment named with markup, a trial that
 * logged markup. */
static bool fill_store(void) {
    char p[512];
    snprintf(p, sizeof p, "%s/store.db", g_home);
    dt_store *st = NULL;
    if (dt_store_open(p, &st) != DT_OK) return false;
    json_t *cfg = json_pack("{s:s,s:s,s:{s:s,s:s,s:b}}", "name", "<script>alert('x')</script>",
                            "entrypoint", "model_def:T", "searcher", "name", "single", "metric",
                            "loss", "smaller_is_better", 1);
    json_t *hp = json_pack("{s:f}", "lr", 0.1);
    int64_t exp = 0, trial = 0;
    int ranks[2] = {0, 1};
    const char *lines[2] = {"<script>alert(2)</script>", "plain & simple"};
    json_t *rows = json_array();
    for (int b = 1; b <= 50; b++)
        json_array_append_new(rows, json_pack("{s:s,s:i,s:{s:f}}", "kind", "training", "batches", b,
                                              "metrics", "loss", 1.0 / b));
    bool ok = dt_store_exp_insert(st, cfg, "name: x\n", "/m", &exp) == DT_OK &&
              dt_store_trial_insert(st, exp, 1, hp, 1, &trial) == DT_OK &&
              dt_store_metrics_insert(st, trial, rows, NULL) == DT_OK &&
              dt_store_logs_insert(st, trial, ranks, lines, 2) == DT_OK &&
              dt_store_trial_set_state(st, trial, "COMPLETED", NULL) == DT_OK &&
              dt_store_exp_set_state(st, exp, "COMPLETED") == DT_OK;
    json_decref(cfg);
    json_decref(hp);
    json_decref(rows);
    ok = ok && fill_dsat(st) && fill_long(st);
    dt_store_close(st);
    return ok;
}

/* ---- the tests ---- */

static char g_ans[1 << 20];

static void test_escaping(void) {
    /* each page, with a piece it must hold: the markup in the store shown as text */
    static const char *const pages[][3] = {
        {"/", "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;", "text/html"},
        {"/experiments/1", "Experiment 1: &lt;script&gt;", "text/html"},
        {"/trials/1", "[rank 0] &lt;script&gt;alert(2)&lt;/script&gt;", "[rank 1] plain &amp; "}};
    for (size_t i = 0; i < sizeof pages / sizeof *pages; i++) {
        http("GET", pages[i][0], NULL, NULL, g_ans, sizeof g_ans);
        CHECK_MSG(status_of(g_ans) == 200, "%s: %.300s", pages[i][0], g_ans);
        CHECK_MSG(strstr(g_ans, pages[i][1]) && strstr(g_ans, pages[i][2]), "%s", pages[i][0]);
        CHECK_MSG(!strstr(g_ans, "<script>alert"), "%s: markup from the store", pages[i][0]);
    }
    /* the filter echoes its input escaped */
    http("GET", "/?name=%22%3E%3Cscript%3E", NULL, NULL, g_ans, sizeof g_ans);
    CHECK(strstr(g_ans, "value=\"&quot;&gt;&lt;script&gt;\"") != NULL);
    CHECK(strstr(g_ans, "\"><script>") == NULL);
    /* the download is plain text, as an attachment */
    http("GET", "/trials/1/logs.txt", NULL, NULL, g_ans, sizeof g_ans);
    CHECK(status_of(g_ans) == 200 && strstr(g_ans, "text/plain") && strstr(g_ans, "attachment") &&
          strstr(g_ans, "nosniff"));
}

/* The JSON body of a GET (after the headers), parsed; NULL when the answer is not 200. */
static json_t *get_json(const char *path) {
    http("GET", path, NULL, NULL, g_ans, sizeof g_ans);
    const char *body = strstr(g_ans, "\r\n\r\n");
    return status_of(g_ans) == 200 && body ? json_loads(body + 4, 0, NULL) : NULL;
}

/* The points of the first series of a metrics answer, or -1. */
static int64_t first_series_points(const json_t *ans) {
    const json_t *s = json_array_get(json_object_get(ans, "series"), 0);
    return s ? (int64_t)json_array_size(json_object_get(s, "data")) : -1;
}

/* Chart answers are kept encoded by their query: asking again gives the same answer, and
 * another query (each argument) its own. */
static void test_chart_answers(void) {
    const char *base = "/api/v1/experiments/1/metrics?kind=training&name=loss&x=batches";
    char path[256];
    snprintf(path, sizeof path, "%s&points=10", base);
    json_t *a = get_json(path), *b = get_json(path);
    CHECK(a && json_equal(a, b) && first_series_points(a) == 10);
    json_decref(b);
    snprintf(path, sizeof path, "%s&points=100", base);
    b = get_json(path);
    CHECK(first_series_points(b) == 50);
    json_decref(b);
    snprintf(path, sizeof path, "%s&points=10&trial=999", base); /* not one of its trials */
    b = get_json(path);
    CHECK(b && json_array_size(json_object_get(b, "series")) == 0);
    json_decref(b);
    b = get_json("/api/v1/experiments/1/metrics?kind=validation&name=loss&x=batches&points=10");
    CHECK(b && json_array_size(json_object_get(b, "series")) == 0);
    json_decref(b);
    b = get_json("/api/v1/experiments/1/metrics?kind=training&name=nope&x=batches&points=10");
    CHECK(first_series_points(b) == 0);
    json_decref(b);
    b = get_json("/api/v1/experiments/1/metrics?kind=training&name=loss&x=records&points=10");
    CHECK(first_series_points(b) == 0); /* the rows have no records */
    json_decref(b);
    json_decref(a);
}

/* A long series comes back down-sampled to max_points (else 1000), the first and last points and
 * both spikes kept, every value sent the one stored (read back by jansson); a short one whole. */
static void test_chart_sampled(void) {
    char paths[3][200];
    snprintf(paths[0], sizeof paths[0],
             "/api/v1/experiments/%lld/metrics?kind=training&name=loss&x=batches&max_points=200",
             (long long)g_long_exp);
    snprintf(paths[1], sizeof paths[1], "/api/v1/experiments/%lld/metrics?kind=training&name=loss",
             (long long)g_long_exp);
    snprintf(paths[2], sizeof paths[2], "%.150s&points=100", paths[1]);
    for (int k = 0; k < 2; k++) {
        json_t *a = get_json(paths[k]), *s = json_array_get(json_object_get(a, "series"), 0),
               *data = json_object_get(s, "data");
        size_t n = json_array_size(data), want = k ? 1000 : 200;
        CHECK_MSG(json_integer_value(json_object_get(a, "max_points")) == (json_int_t)want &&
                      json_is_true(json_object_get(s, "sampled")) &&
                      json_integer_value(json_object_get(s, "total")) == LONG_POINTS &&
                      n > want / 2 && n <= want,
                  "%s: %zu points", paths[k], n);
        bool exact = true, up = false, down = false;
        double last = 0;
        for (size_t i = 0; i < n; i++) {
            json_t *p = json_array_get(data, i);
            double x = json_number_value(json_array_get(p, 0)),
                   y = json_number_value(json_array_get(p, 1));
            exact = exact && x > last && y == long_loss((int)x);
            up |= x == 12345, down |= x == 77;
            last = x;
        }
        double x0 = json_number_value(json_array_get(json_array_get(data, 0), 0));
        CHECK_MSG(exact && up && down && x0 == 1 && last == LONG_POINTS,
                  "%s: exact %d spikes %d %d, x %g..%g", paths[k], exact, up, down, x0, last);
        json_decref(a);
    }
    /* the older name `points` still counts; a series that fits is sent whole */
    json_t *a = get_json(paths[2]),
           *b = get_json("/api/v1/experiments/1/metrics?kind=training&name=loss&max_points=100");
    CHECK_MSG(first_series_points(a) == 100 && first_series_points(b) == 50, "%lld %lld",
              (long long)first_series_points(a), (long long)first_series_points(b));
    CHECK(json_is_false(json_object_get(json_array_get(json_object_get(b, "series"), 0), "sampled")));
    json_decref(a);
    json_decref(b);
}

/* Each series of a binary chart answer (body, len bytes after the headers) checked against the
 * JSON answer of the same query (ans): the same header members, and per series the same
 * trial, total, sampled flag and points, bit for bit. */
static bool binary_matches(const char *body, size_t len, const json_t *ans, const char *what) {
    uint32_t hl = 0;
    if (len < 16 || memcmp(body, "DTCHART1", 8)) {
        CHECK_MSG(0, "%s: no magic", what);
        return false;
    }
    memcpy(&hl, body + 8, 4);
    json_t *head = hl % 8 == 0 && 16 + hl <= len ? json_loadb(body + 16, hl, 0, NULL) : NULL;
    bool ok = head != NULL;
    static const char *const keys[] = {"kind", "name", "x", "max_points", "names"};
    for (int k = 0; ok && k < 5; k++)
        ok = json_equal(json_object_get(head, keys[k]), json_object_get(ans, keys[k]));
    json_decref(head);
    const json_t *series = json_object_get(ans, "series");
    size_t off = 16 + hl, i = 0;
    for (; ok && off < len; i++) {
        double h[4];
        memcpy(h, body + off, sizeof h);
        const json_t *s = json_array_get(series, i), *data = json_object_get(s, "data");
        size_t m = (size_t)h[2];
        ok = s && off + 32 + 16 * m <= len &&
             h[0] == (double)json_integer_value(json_object_get(s, "trial_id")) &&
             h[1] == (double)json_integer_value(json_object_get(s, "total")) &&
             m == json_array_size(data) && (h[3] != 0) == json_is_true(json_object_get(s, "sampled"));
        for (size_t j = 0; ok && j < m; j++) {
            double x, y, jx = json_number_value(json_array_get(json_array_get(data, j), 0)),
                         jy = json_number_value(json_array_get(json_array_get(data, j), 1));
            memcpy(&x, body + off + 32 + 8 * j, 8);
            memcpy(&y, body + off + 32 + 8 * (m + j), 8);
            ok = !memcmp(&x, &jx, 8) && !memcmp(&y, &jy, 8);
        }
        off += 32 + 16 * m;
    }
    ok = ok && off == len && i == json_array_size(series);
    CHECK_MSG(ok, "%s: the binary answer differs from the JSON one (series %zu)", what, i);
    return ok;
}

/* format=f64: the page's binary form of a chart holds what the JSON answer holds, kept answers
 * keep their content type, and another format is refused. */
static void test_chart_binary(void) {
    char paths[4][200];
    snprintf(paths[0], sizeof paths[0],
             "/api/v1/experiments/%lld/metrics?kind=training&name=loss&max_points=200",
             (long long)g_long_exp);
    snprintf(paths[1], sizeof paths[1], "/api/v1/experiments/1/metrics?kind=training&points=10");
    snprintf(paths[2], sizeof paths[2], "/api/v1/experiments/1/metrics?kind=validation");
    snprintf(paths[3], sizeof paths[3], "/api/v1/experiments/1/metrics?kind=training&name=none");
    for (int k = 0; k < 4; k++) {
        json_t *ans = get_json(paths[k]);
        char path[260];
        snprintf(path, sizeof path, "%.200s&format=f64", paths[k]);
        for (int again = 0; again < 2; again++) { /* made, then kept */
            size_t n = http("GET", path, NULL, NULL, g_ans, sizeof g_ans);
            const char *b = strstr(g_ans, "\r\n\r\n");
            CHECK_MSG(status_of(g_ans) == 200 && strstr(g_ans, "application/octet-stream") && b,
                      "%s: %.200s", path, g_ans);
            if (b && ans) binary_matches(b + 4, n - (size_t)(b + 4 - g_ans), ans, path);
        }
        /* series of many points, no series (no validation rows), a series of no points */
        int64_t want = k < 2 ? 1 : k == 2 ? -1 : 0, got = first_series_points(ans);
        CHECK_MSG(ans && (want > 0 ? got > 0 : got == want), "%s: %lld", paths[k], (long long)got);
        json_decref(ans);
    }
    http("GET", "/api/v1/experiments/1/metrics?kind=training&format=xml", NULL, NULL, g_ans,
         sizeof g_ans);
    CHECK_MSG(status_of(g_ans) == 400 && json_error(g_ans) && strstr(g_ans, "json or f64"),
              "%.300s", g_ans);
}

/* The body of the last answer (after the headers), or "". */
static const char *body_of(const char *ans) {
    const char *b = strstr(ans, "\r\n\r\n");
    return b ? b + 4 : "";
}

/* GET /api/v1/experiments/{id}/dsat: the runner's snapshot and files, joined with the trials. */
static void test_dsat_api(void) {
    json_t *d = get_json("/api/v1/experiments/2/dsat");
    CHECK_MSG(d != NULL, "%.300s", g_ans);
    const json_t *p = json_object_get(d, "profile"), *st = json_object_get(d, "stages");
    CHECK(json_integer_value(json_object_get(p, "params")) == DSAT_PARAMS);
    CHECK(json_integer_value(json_object_get(p, "device_budget")) == 4 << 20);
    CHECK(json_array_size(st) == 4);
    CHECK(json_is_true(json_object_get(json_array_get(st, 1), "searched")) &&
          !json_is_true(json_object_get(json_array_get(st, 3), "searched")));
    CHECK(json_integer_value(json_object_get(json_array_get(st, 1), "approx_max_mbs")) >= 1);
    const json_t *tr = json_object_get(d, "trials");
    CHECK(json_array_size(tr) == 2);
    const json_t *t0 = json_array_get(tr, 0), *t1 = json_array_get(tr, 1);
    CHECK(json_integer_value(json_object_get(t0, "trial_id")) == 2 &&
          json_integer_value(json_object_get(t0, "stage")) == 1 &&
          json_integer_value(json_object_get(t0, "mbs")) == 4);
    CHECK(json_integer_value(json_object_get(t1, "trial_id")) == 3 &&
          !strcmp(json_string_value(json_object_get(t1, "result")), "oom") &&
          json_is_null(json_object_get(t1, "metric")));
    const json_t *best = json_object_get(d, "best");
    CHECK(json_integer_value(json_object_get(best, "trial_id")) == 2);
    CHECK(json_integer_value(json_object_get(json_object_get(best, "ds_config"),
                                             "train_micro_batch_size_per_gpu")) == 4);
    CHECK(json_is_true(json_object_get(d, "done")) &&
          !strcmp(json_string_value(json_object_get(d, "phase")), "done"));
    CHECK(json_array_size(json_object_get(d, "log")) == 2);
    json_decref(d);
    /* nothing yet: no profile, no best, no log */
    d = get_json("/api/v1/experiments/3/dsat");
    CHECK(d && json_is_null(json_object_get(d, "profile")) &&
          json_is_null(json_object_get(d, "best")) &&
          !json_array_size(json_object_get(d, "trials")) &&
          !json_array_size(json_object_get(d, "log")));
    json_decref(d);
    /* an unknown id, an experiment of another searcher, a bad id */
    http("GET", "/api/v1/experiments/999/dsat", NULL, NULL, g_ans, sizeof g_ans);
    CHECK_MSG(status_of(g_ans) == 404 && json_error(g_ans), "%.300s", g_ans);
    http("GET", "/api/v1/experiments/1/dsat", NULL, NULL, g_ans, sizeof g_ans);
    CHECK_MSG(status_of(g_ans) == 400 && json_error(g_ans) &&
                  strstr(g_ans, "not a dsat search (its searcher is single)") &&
                  strstr(g_ans, "hint:"),
              "%.300s", g_ans);
    http("GET", "/api/v1/experiments/x/dsat", NULL, NULL, g_ans, sizeof g_ans);
    CHECK(status_of(g_ans) == 400 && json_error(g_ans));
}

/* The dsat page: the tables without JavaScript, every value escaped, the download. */
static void test_dsat_page(void) {
    http("GET", "/experiments/2/dsat", NULL, NULL, g_ans, sizeof g_ans);
    CHECK_MSG(status_of(g_ans) == 200 && strstr(g_ans, "text/html"), "%.300s", g_ans);
    CHECK(strstr(g_ans, "<tr data-request=\"3\" class=\"best\">") &&
          strstr(g_ans, "<tr data-request=\"4\">") && strstr(g_ans, "rb=5e+07 ab=5e+06"));
    CHECK(strstr(g_ans, "oc=1 rs=0 offload") && strstr(g_ans, "id=\"dsat-chart\""));
    CHECK(strstr(g_ans, "done &lt;script&gt;alert(3)") && strstr(g_ans, "&lt;script&gt;alert(4)") &&
          strstr(g_ans, "&lt;/pre&gt;&lt;script&gt;alert(5)"));
    CHECK_MSG(!strstr(g_ans, "<script>alert") && !strstr(g_ans, "</pre><script>"),
              "markup from the store or the files on the dsat page");
    http("GET", "/experiments/2", NULL, NULL, g_ans, sizeof g_ans);
    CHECK(strstr(g_ans, "href=\"/experiments/2/dsat\"") != NULL);
    http("GET", "/experiments/1", NULL, NULL, g_ans, sizeof g_ans);
    CHECK(strstr(g_ans, "/dsat\"") == NULL); /* not a dsat search: no link */
    http("GET", "/experiments/3/dsat", NULL, NULL, g_ans, sizeof g_ans);
    CHECK(status_of(g_ans) == 200 && strstr(g_ans, "has not reported yet") &&
          strstr(g_ans, "No trial has succeeded yet"));
    /* the download: the file's config as an attachment */
    http("GET", "/experiments/2/best_ds_config.json", NULL, NULL, g_ans, sizeof g_ans);
    json_t *c = json_loads(body_of(g_ans), 0, NULL);
    CHECK_MSG(status_of(g_ans) == 200 && strstr(g_ans, "application/json") &&
                  strstr(g_ans, "attachment; filename=\"best_ds_config.json\"") &&
                  json_integer_value(json_object_get(c, "train_micro_batch_size_per_gpu")) == 4,
              "%.400s", g_ans);
    json_decref(c);
    static const char *const errs[][2] = {{"/experiments/3/best_ds_config.json", "404"},
                                          {"/experiments/999/best_ds_config.json", "404"},
                                          {"/experiments/999/dsat", "404"},
                                          {"/experiments/1/dsat", "400"},
                                          {"/experiments/1/best_ds_config.json", "400"},
                                          {"/experiments/x/dsat", "400"}};
    for (size_t i = 0; i < sizeof errs / sizeof *errs; i++) {
        http("GET", errs[i][0], NULL, NULL, g_ans, sizeof g_ans);
        CHECK_MSG(status_of(g_ans) == atoi(errs[i][1]) && json_error(g_ans), "%s: %.300s",
                  errs[i][0], g_ans);
    }
}

static void test_assets(void) {
    http("GET", "/static/app.js", NULL, NULL, g_ans, sizeof g_ans);
    CHECK(status_of(g_ans) == 200 && strstr(g_ans, "text/javascript") && strstr(g_ans, "max-age="));
    http("GET", "/static/dygraph.min.js", NULL, NULL, g_ans, sizeof g_ans);
    CHECK(status_of(g_ans) == 200 && strstr(g_ans, "Dygraph"));
    http("GET", "/static/d3.min.js", NULL, NULL, g_ans, sizeof g_ans);
    CHECK(status_of(g_ans) == 200 && strstr(g_ans, "d3"));
    static const char *const bad[] = {"/static/../../../etc/passwd",
                                      "/static/..%2f..%2f..%2fetc%2fpasswd",
                                      "/static/%2e%2e/%2e%2e/etc/passwd",
                                      "/static/app.js/../../../etc/passwd",
                                      "/static//etc/passwd",
                                      "/static/..",
                                      "/../../etc/passwd",
                                      "/static/app.js%00.png"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        http("GET", bad[i], NULL, NULL, g_ans, sizeof g_ans);
        CHECK_MSG(status_of(g_ans) == 404 && json_error(g_ans) && !strstr(g_ans, "root:"),
                  "%s: %.200s", bad[i], g_ans);
    }
}

static void test_ids(void) {
    static const char *const unknown[] = {"/experiments/999",
                                          "/trials/999",
                                          "/trials/999/logs.txt",
                                          "/api/v1/experiments/999/metrics",
                                          "/api/v1/experiments/999/searcher",
                                          "/nowhere"};
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
        http("GET", unknown[i], NULL, NULL, g_ans, sizeof g_ans);
        CHECK_MSG(status_of(g_ans) == 404 && json_error(g_ans), "%s: %.200s", unknown[i], g_ans);
    }
    static const char *const bad[] = {"/experiments/abc", "/trials/-1", "/experiments/1e3",
                                      "/trials/99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        http("GET", bad[i], NULL, NULL, g_ans, sizeof g_ans);
        CHECK_MSG(status_of(g_ans) == 400 && json_error(g_ans), "%s: %.200s", bad[i], g_ans);
    }
    http("GET", "/api/v1/experiments/1/metrics?kind=nope", NULL, NULL, g_ans, sizeof g_ans);
    CHECK(status_of(g_ans) == 400 && json_error(g_ans));
    http("GET", "/api/v1/experiments/1/metrics?points=1", NULL, NULL, g_ans, sizeof g_ans);
    CHECK(status_of(g_ans) == 400 && json_error(g_ans));
    http("GET", "/api/v1/experiments/1/metrics?max_points=100001", NULL, NULL, g_ans, sizeof g_ans);
    CHECK_MSG(status_of(g_ans) == 400 && strstr(g_ans, "max_points must be"), "%.300s", g_ans);
}

/* Paths a person types: a page, or a redirect to one; the JSON API stays under /api/v1. */
static void test_typed_paths(void) {
    static const char *const pages[] = {"/experiments/1/", "/trials/1/", "/experiments/1//"};
    for (size_t i = 0; i < sizeof pages / sizeof *pages; i++) {
        http("GET", pages[i], NULL, NULL, g_ans, sizeof g_ans);
        CHECK_MSG(status_of(g_ans) == 200 && strstr(g_ans, "text/html") && strstr(g_ans, "<h1>"),
                  "%s: %.200s", pages[i], g_ans);
    }
    static const char *const lists[][2] = {
        {"/experiments", "Location: /\r\n"},
        {"/experiments/", "Location: /\r\n"},
        {"/trials", "Location: /\r\n"},
        {"/experiments?state=COMPLETED&name=a%20b", "Location: /?state=COMPLETED&name=a%20b\r\n"}};
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++) {
        http("GET", lists[i][0], NULL, NULL, g_ans, sizeof g_ans);
        CHECK_MSG(status_of(g_ans) == 302 && strstr(g_ans, lists[i][1]), "%s: %.300s", lists[i][0],
                  g_ans);
    }
    http("GET", "/api/v1/experiments/", NULL, NULL, g_ans, sizeof g_ans);
    CHECK_MSG(status_of(g_ans) == 200 && strstr(g_ans, "application/json"), "%.200s", g_ans);
}

static void test_csrf(void) {
    /* a form post from another site: no JSON type, no header, no form token */
    http("POST", "/api/v1/experiments/1/pause", "Content-Type: text/plain\r\n", "x", g_ans,
         sizeof g_ans);
    CHECK_MSG(status_of(g_ans) == 403 && json_error(g_ans), "%.300s", g_ans);
    http("POST", "/experiments/1/kill", "Content-Type: application/x-www-form-urlencoded\r\n",
         "csrf=wrong", g_ans, sizeof g_ans);
    CHECK_MSG(status_of(g_ans) == 403 && json_error(g_ans), "%.300s", g_ans);
    http("DELETE", "/api/v1/experiments/1", NULL, NULL, g_ans, sizeof g_ans);
    CHECK_MSG(status_of(g_ans) == 403, "%.300s", g_ans);
    /* JSON, but the browser says it comes from another site */
    http("POST", "/api/v1/experiments/1/pause",
         "Content-Type: application/json\r\nSec-Fetch-Site: cross-site\r\n", NULL, g_ans,
         sizeof g_ans);
    CHECK_MSG(status_of(g_ans) == 403, "%.300s", g_ans);
    /* the page's own form token passes the guard (a finished experiment cannot pause: 409) */
    http("GET", "/experiments/1", NULL, NULL, g_ans, sizeof g_ans);
    char tok[80] = "", body[128];
    /* the page-level token: a form of its own, there whatever actions the state allows */
    const char *v =
        strstr(g_ans, "<form id=\"csrf\" hidden><input type=\"hidden\" name=\"csrf\" value=\"");
    if (v) sscanf(strstr(v, "value=\"") + 7, "%64[0-9a-f]", tok);
    CHECK(strlen(tok) == 64);
    /* a finished experiment offers no action: the state table allows none */
    CHECK_MSG(!strstr(g_ans, "class=\"act-"), "%.300s", strstr(g_ans, "class=\"act-"));
    snprintf(body, sizeof body, "csrf=%s", tok);
    http("POST", "/experiments/1/pause", "Content-Type: application/x-www-form-urlencoded\r\n",
         body, g_ans, sizeof g_ans);
    CHECK_MSG(status_of(g_ans) == 409 && json_error(g_ans), "%.300s", g_ans);
    http("POST", "/api/v1/experiments/1/pause", "X-Dtrain-Csrf: 1\r\n", NULL, g_ans, sizeof g_ans);
    CHECK_MSG(status_of(g_ans) == 409, "%.300s", g_ans);
    /* reads need nothing */
    http("GET", "/api/v1/experiments", NULL, NULL, g_ans, sizeof g_ans);
    CHECK(status_of(g_ans) == 200);
}

static void test_bad_requests(void) {
    /* a body over the limit: 413, and the master still answers */
    size_t big = (64u << 20) + 16;
    char *req = malloc(big + 256);
    if (req) {
        int h = snprintf(req, 256,
                         "POST /api/v1/experiments HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                         "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                         big);
        memset(req + h, ' ', big);
        raw(req, (size_t)h + big, g_ans, sizeof g_ans);
        CHECK_MSG(status_of(g_ans) == 413 && json_error(g_ans), "%.300s", g_ans);
        free(req);
    }
    http("POST", "/api/v1/experiments", "Content-Type: application/json\r\n", "{\"a\": [1,", g_ans,
         sizeof g_ans);
    CHECK(status_of(g_ans) == 400 && json_error(g_ans));
    const char *junk = "GARBAGE\r\n\r\n";
    raw(junk, strlen(junk), g_ans, sizeof g_ans);
    CHECK_MSG(status_of(g_ans) == 0 || status_of(g_ans) >= 400, "%.200s", g_ans);
    const char *nul = "GET /\0/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    raw(nul, 50, g_ans, sizeof g_ans);
    CHECK(status_of(g_ans) == 0 || status_of(g_ans) >= 200);
    /* a huge header and a huge URL */
    char *hdr = malloc(200000);
    if (hdr) {
        memset(hdr, 'a', 199990);
        memcpy(hdr, "X-Big: ", 7);
        strcpy(hdr + 199990, "\r\n");
        http("GET", "/", hdr, NULL, g_ans, sizeof g_ans);
        CHECK_MSG(status_of(g_ans) == 0 || status_of(g_ans) >= 400, "%.200s", g_ans);
        http("GET", "/api/v1/master", NULL, NULL, g_ans, sizeof g_ans);
        CHECK_MSG(status_of(g_ans) == 200, "after a big header: %.200s", g_ans);
        memset(hdr, 'a', 100000);
        hdr[0] = '/';
        hdr[100000] = 0;
        http("GET", hdr, NULL, NULL, g_ans, sizeof g_ans);
        CHECK_MSG(status_of(g_ans) == 0 || status_of(g_ans) >= 400, "%.200s", g_ans);
        free(hdr);
    }
    http("GET", "/api/v1/master", NULL, NULL, g_ans, sizeof g_ans);
    CHECK_MSG(status_of(g_ans) == 200, "the master stopped answering: %.200s", g_ans);
    /* too many query arguments */
    http("GET", "/?a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&i=9&j=10&k=11&l=12&m=13&n=14&o=15&p=16&q=17",
         NULL, NULL, g_ans, sizeof g_ans);
    CHECK(status_of(g_ans) == 400 && json_error(g_ans));
    http("GET", "/api/v1/master", NULL, NULL, g_ans, sizeof g_ans);
    CHECK_MSG(status_of(g_ans) == 200, "the master stopped answering: %.200s", g_ans);
}

static void test_token(void) {
    /* no token, a wrong one: 401 on every route, pages and assets included */
    static const char *const paths[] = {"/", "/api/v1/experiments", "/static/app.js", "/trials/1"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        http("GET", paths[i], NULL, NULL, g_ans, sizeof g_ans);
        CHECK_MSG(status_of(g_ans) == 401 && json_error(g_ans), "%s: %.200s", paths[i], g_ans);
        http("GET", paths[i], "Authorization: Bearer 0123\r\n", NULL, g_ans, sizeof g_ans);
        CHECK_MSG(status_of(g_ans) == 401, "%s: %.200s", paths[i], g_ans);
    }
    http("GET", "/?token=nope", NULL, NULL, g_ans, sizeof g_ans);
    CHECK(status_of(g_ans) == 401);
    http("GET", "/", "Cookie: dtrain_token=nope\r\n", NULL, g_ans, sizeof g_ans);
    CHECK(status_of(g_ans) == 401);
    char hdr[200], path[200];
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", g_token);
    http("GET", "/api/v1/experiments", hdr, NULL, g_ans, sizeof g_ans);
    CHECK_MSG(status_of(g_ans) == 200, "%.300s", g_ans);
    /* the browser's way in: ?token= once, then the cookie */
    snprintf(path, sizeof path, "/experiments/1?token=%s", g_token);
    http("GET", path, NULL, NULL, g_ans, sizeof g_ans);
    CHECK_MSG(status_of(g_ans) == 303 && strstr(g_ans, "Set-Cookie: dtrain_token=") &&
                  strstr(g_ans, "HttpOnly") && strstr(g_ans, "Location: /experiments/1"),
              "%.400s", g_ans);
    snprintf(hdr, sizeof hdr, "Cookie: dtrain_token=%s\r\n", g_token);
    http("GET", "/experiments/1", hdr, NULL, g_ans, sizeof g_ans);
    CHECK_MSG(status_of(g_ans) == 200, "%.300s", g_ans);
    /* the token passes the gate, not the CSRF check */
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\nContent-Type: text/plain\r\n", g_token);
    http("POST", "/api/v1/experiments/1/pause", hdr, "x", g_ans, sizeof g_ans);
    CHECK(status_of(g_ans) == 403);
    /* the token file is private */
    char p[512];
    struct stat sb;
    snprintf(p, sizeof p, "%s/master.token", g_home);
    CHECK(stat(p, &sb) == 0 && (sb.st_mode & 0777) == 0600);
}

int main(void) {
    if (!fx_tmpdir(g_home, sizeof g_home, "web")) return 1;
    CHECK(fill_store());
    CHECK(dt_master_token(g_home, g_token, sizeof g_token) == DT_OK);
    if (start("127.0.0.1")) {
        TEST_RUN(test_escaping);
        TEST_RUN(test_assets);
        TEST_RUN(test_chart_answers);
        TEST_RUN(test_chart_sampled);
        TEST_RUN(test_chart_binary);
        TEST_RUN(test_dsat_api);
        TEST_RUN(test_dsat_page);
        TEST_RUN(test_ids);
        TEST_RUN(test_typed_paths);
        TEST_RUN(test_csrf);
        TEST_RUN(test_bad_requests);
        stop();
    } else {
        CHECK_MSG(0, "the master did not start on 127.0.0.1");
    }
    if (start("127.0.0.2")) {
        TEST_RUN(test_token);
        stop();
    } else {
        CHECK_MSG(0, "the master did not start on 127.0.0.2");
    }
    if (!fx_rmtree(g_home)) fprintf(stderr, "could not remove %s\n", g_home);
    TEST_END();
}
