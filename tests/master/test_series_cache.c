/* test_series_cache.c — the chart series' down-sampling (first and last kept, each bucket's
 * minimum and maximum, short series whole) and encoding: numbers written byte for byte as jansson
 * writes a real (so values round-trip and answers read as before), a series object equal to the
 * one jansson encodes, an entry's kept encoding renewed when it gets points or is asked for
 * another count, and a store's chart text equal to a fresh handle's (a restarted master's) while
 * rows arrive for one trial, on upserts and after a rollback; numbers picked out of a row's text
 * as SQLite's json_extract reads them, or a plain "cannot tell". */
#include "master/series_cache.h"
#include "base/numtext.h"
#include "master/store_impl.h"
#include "fixtures/files.h"
#include "test.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <jansson.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static char g_dir[64];

/* jansson's text for v as a real. */
/* The shortest %.pg of a non-integral v that strtod reads back, p = 1..17 tried in order. */
static void shortest(double v, char *buf, size_t n) {
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (strtod(buf, NULL) == v) return;
    }
}

static void check_real(double v) {
    char got[32], fmt[32], want[40];
    int n = dt__real_text(v, got);
    CHECK_MSG(n == (int)strlen(got), "%a: length %d of %s", v, n, got);
    CHECK_MSG(strtod(got, NULL) == v, "%s does not read back as %a", got, v);
    /* jansson, the API's parser, reads it back as the same real */
    json_t *j = json_loads(got, JSON_DECODE_ANY, NULL);
    CHECK_MSG(json_is_real(j) && json_real_value(j) == v, "%s: jansson reads another value", got);
    json_decref(j);
    /* the same text as the API's one encoder, and the shortest digits */
    j = json_real(v);
    char *api = dt_json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    CHECK_MSG(api && !strcmp(api, got), "%a: series %s, API %s", v, got, api ? api : "");
    free(api);
    json_decref(j);
    dt_fmt_double(v, fmt);
    if (v == trunc(v) && fabs(v) < 1e16) {
        snprintf(want, sizeof want, "%.0f", v);
    } else {
        shortest(v, want, sizeof want);
    }
    CHECK_MSG(!strcmp(fmt, want), "%a: %s, the shortest is %s", v, fmt, want);
}

static void test_real_text(void) {
    static const double fixed[] = {0.0,     -0.0,
                                   1.0,     -1.0,
                                   0.1,     -0.1,
                                   1e15,    9e15,
                                   1e16,    -1e16,
                                   1e17,    1e22,
                                   1e-5,    1.5e-7,
                                   1e300,   -1e-300,
                                   5e-324,  DBL_MAX,
                                   DBL_MIN, 0.5,
                                   2.5e10,  9007199254740993.0,
                                   123.456, 1e21};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) check_real(fixed[i]);
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 20000; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        double v;
        uint64_t bits = r;
        memcpy(&v, &bits, sizeof v);
        if (isfinite(v)) check_real(v);
        check_real((double)(int64_t)(r >> 11) - (double)(1ll << 52)); /* integers */
        check_real((double)(r % 100000) / 1000.0);                    /* epochs-like */
        check_real((float)((double)(r % 1000003) / 997.0));           /* float losses */
    }
}

/* The series object for `points` as the API encodes it, built point by point (the points
 * dt__series_sample picks, checked on their own in test_sample). */
static char *jansson_series(const dt__series *s, int64_t points) {
    json_t *data = json_array();
    size_t *idx = malloc((s->n + 2) * sizeof *idx);
    size_t m = dt__series_sample(s->xs, s->ys, s->n, points, idx);
    for (size_t j = 0; j < m; j++)
        json_array_append_new(data, json_pack("[ff]", s->xs[idx[j]], s->ys[idx[j]]));
    free(idx);
    json_t *o = json_pack("{sIsIsbso}", "trial_id", (json_int_t)s->trial_id, "total",
                          (json_int_t)s->n, "sampled", (int)((int64_t)s->n > points), "data", data);
    char *txt = dt_json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return txt;
}

/* dt__series_sample's picks from xs/ys (n points) for `points`: ascending, the first and the
 * last kept, at most 2 x buckets + 2 of them, and in each bucket (an equal span of the x range,
 * worked out here on its own) the smallest and the largest y among the interior points sent. */
static void check_sample(const double *xs, const double *ys, size_t n, int64_t points) {
    size_t *idx = malloc((n + 2) * sizeof *idx);
    size_t m = dt__series_sample(xs, ys, n, points, idx), buckets = (size_t)(points - 2) / 2;
    CHECK_MSG(m <= 2 * buckets + 2 && m <= (size_t)points, "n %zu points %lld: %zu sent", n,
              (long long)points, m);
    CHECK(m >= 2 && idx[0] == 0 && idx[m - 1] == n - 1);
    for (size_t j = 1; j < m; j++) CHECK(idx[j] > idx[j - 1]);
    double *lo = malloc(buckets * sizeof *lo), *hi = malloc(buckets * sizeof *hi);
    for (size_t k = 0; k < buckets; k++) lo[k] = INFINITY, hi[k] = -INFINITY;
    double span = xs[n - 1] - xs[0];
    for (size_t i = 1; buckets && i + 1 < n; i++) {
        size_t k = span > 0 ? (size_t)((xs[i] - xs[0]) / span * (double)buckets) : 0;
        if (k >= buckets) k = buckets - 1;
        lo[k] = fmin(lo[k], ys[i]);
        hi[k] = fmax(hi[k], ys[i]);
    }
    CHECK(buckets > 0 || m == 2);
    for (size_t j = 1; buckets && j + 1 < m; j++) { /* sent interior points: bucket extremes */
        size_t i = idx[j], k = span > 0 ? (size_t)((xs[i] - xs[0]) / span * (double)buckets) : 0;
        if (k >= buckets) k = buckets - 1;
        if (ys[i] == lo[k]) lo[k] = NAN; /* seen */
        if (ys[i] == hi[k]) hi[k] = NAN;
    }
    size_t missed = 0;
    for (size_t k = 0; k < buckets; k++) missed += !isnan(lo[k]) && isfinite(lo[k]);
    for (size_t k = 0; k < buckets; k++) missed += !isnan(hi[k]) && isfinite(hi[k]);
    CHECK_MSG(missed == 0, "n %zu points %lld: %zu bucket extremes not sent", n, (long long)points,
              missed);
    free(lo);
    free(hi);
    free(idx);
}

/* Down-sampling for a chart: spikes survive, short series are sent whole. */
static void test_sample(void) {
    enum { N = 100000 };
    double *xs = malloc(N * sizeof *xs), *ys = malloc(N * sizeof *ys);
    for (size_t i = 0; i < N; i++) xs[i] = (double)(i + 1), ys[i] = 0.5;
    ys[54321] = 7.25; /* one spike up and one down among flat points */
    ys[77] = -3.0;
    size_t *idx = malloc((N + 2) * sizeof *idx);
    size_t m = dt__series_sample(xs, ys, N, 1000, idx);
    bool up = false, down = false;
    for (size_t j = 0; j < m; j++) up |= idx[j] == 54321, down |= idx[j] == 77;
    CHECK_MSG(up && down && m <= 1000, "spikes %d %d, %zu points", up, down, m);
    check_sample(xs, ys, N, 1000);
    check_sample(xs, ys, N, 2);
    check_sample(xs, ys, N, 3);
    check_sample(xs, ys, N, 7);
    /* noisy values, x with gaps and repeats (a bucket may be empty) */
    uint64_t r = 88172645463325252u;
    double x = 0;
    for (size_t i = 0; i < N; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        x += (i / 1000) % 3 == 0 ? 0 : (double)(r % 5);
        xs[i] = x;
        ys[i] = (double)(r >> 11) / 9007199254740992.0 - 0.5;
    }
    check_sample(xs, ys, N, 1000);
    check_sample(xs, ys, N, 501);
    check_sample(xs, ys, 2000, 999);
    /* every x the same: one bucket */
    for (size_t i = 0; i < 50; i++) xs[i] = 3.0;
    check_sample(xs, ys, 50, 10);
    /* a short series is sent whole, in order */
    m = dt__series_sample(xs, ys, 500, 1000, idx);
    bool whole = m == 500;
    for (size_t j = 0; whole && j < m; j++) whole = idx[j] == j;
    CHECK(whole);
    m = dt__series_sample(xs, ys, 1000, 1000, idx);
    CHECK(m == 1000 && idx[999] == 999);
    free(idx);
    free(xs);
    free(ys);
}

/* dt__series_text's object for `points` equals jansson's. */
static void check_series(dt__series *s, int64_t points) {
    dt__buf t = {0};
    CHECK(dt__series_text(s, points, &t));
    char *want = jansson_series(s, points);
    CHECK_MSG(t.p && want && !strcmp(t.p, want), "n %zu points %lld:\n got %.200s\nwant %.200s",
              s->n, (long long)points, t.p ? t.p : "", want ? want : "");
    free(want);
    free(t.p);
}

static void test_series_text(void) {
    dt__series_cache *c = dt__series_cache_new(1 << 20);
    dt__series *s = dt__series_cache_get(c, 7, "training", "loss", "epochs");
    CHECK(s != NULL);
    if (!s) return;
    check_series(s, 10); /* no points */
    for (int i = 1; i <= 1000; i++) {
        CHECK(dt__series_push(s, i / 100.0, 1.0 / i + (i % 7) * 0.013));
        if (i == 3 || i == 10 || i == 11 || i == 999 || i == 1000) {
            check_series(s, 10); /* kept encoding renewed as points arrive */
            check_series(s, 10); /* ... and reused as it is */
            check_series(s, 2);  /* another count */
            check_series(s, 1000);
        }
    }
    dt__series_cache_free(c);
    /* a kept encoding counts against the budget: 60 points fit 100, not with their text */
    c = dt__series_cache_new(100);
    s = dt__series_cache_get(c, 1, "training", "loss", "batches");
    for (int i = 1; s && i <= 60; i++) CHECK(dt__series_push(s, i, 1.0 / 3 + i));
    dt__series_cache_trim(c);
    CHECK(dt__series_cache_get(c, 1, "training", "loss", "batches")->n == 60);
    dt__buf t = {0};
    CHECK(dt__series_text(s, 100, &t));
    free(t.p);
    dt__series_cache_trim(c);
    CHECK(dt__series_cache_get(c, 1, "training", "loss", "batches")->n == 0);
    dt__series_cache_free(c);
}

/* dt__row_number agrees with json_extract (or says it cannot tell). */
static void check_row(sqlite3 *db, const char *body, const char *key, const char *sub, int want) {
    double got = 0;
    int r = dt__row_number(body, strlen(body), key, sub, &got);
    char path[128];
    snprintf(path, sizeof path, sub ? "$.\"%s\".\"%s\"" : "$.\"%s\"", key, sub);
    sqlite3_stmt *s = NULL;
    CHECK(sqlite3_prepare_v2(db, "SELECT json_extract(?1, ?2)", -1, &s, NULL) == SQLITE_OK);
    sqlite3_bind_text(s, 1, body, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, path, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    CHECK(rc == SQLITE_ROW || want == -1); /* SQLite refuses malformed text */
    int type = sqlite3_column_type(s, 0);
    bool number = rc == SQLITE_ROW && (type == SQLITE_INTEGER || type == SQLITE_FLOAT);
    CHECK_MSG(r == want, "%s %s in %s: %d, want %d", key, sub ? sub : "", body, r, want);
    if (r == 1)
        CHECK_MSG(number && sqlite3_column_double(s, 0) == got, "%s: %s %.17g", body, path, got);
    if (r == 0) CHECK_MSG(!number, "%s: %s is a number", body, path);
    sqlite3_finalize(s);
}

static void test_row_number(void) {
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(":memory:", &db) == SQLITE_OK);
    const char *plain = "{\"kind\":\"training\",\"batches\":3,\"epochs\":0.0030000000000000001,"
                        "\"records\":96,\"metrics\":{\"loss\":2.0540179461615158,\"a.b\":-1e-7,"
                        "\"n\":null,\"big\":1.7976931348623157e308}}";
    check_row(db, plain, "metrics", "loss", 1);
    check_row(db, plain, "metrics", "a.b", 1);
    check_row(db, plain, "metrics", "big", 1);
    check_row(db, plain, "metrics", "n", 0);
    check_row(db, plain, "metrics", "missing", 0);
    check_row(db, plain, "epochs", NULL, 1);
    check_row(db, plain, "records", NULL, 1);
    check_row(db, plain, "loss", NULL, 0); /* only inside "metrics" */
    /* members before it holding strings with braces, quotes and escapes, nested objects,
     * a "metrics" that is not the top one, white space */
    const char *busy = " { \"note\" : \"}{\\\"metrics\\\":{\\\"loss\\\":1}\" , \"x\":{\"metrics\":"
                       "{\"loss\":7}},\"arr\":[1,[2,{\"loss\":3}],\"]\"], \"metrics\" : { \"acc\""
                       " : 0.5 , \"loss\" : 4.25E+2 } } ";
    check_row(db, busy, "metrics", "loss", 1);
    check_row(db, busy, "metrics", "acc", 1);
    check_row(db, busy, "x", NULL, 0);
    /* a name written with escapes, or text cut short: cannot tell */
    check_row(db, "{\"metrics\":{\"lo\\u0073s\":1.5}}", "metrics", "loss", -1);
    check_row(db, "{\"no\\u0074e\":1,\"metrics\":{\"loss\":1.5}}", "metrics", "loss", -1);
    check_row(db, "{\"metrics\":{\"loss\":", "metrics", "loss", -1);
    check_row(db, "{\"metrics\":{\"acc\":1", "metrics", "loss", -1);
    /* random doubles as jansson writes them read as json_extract reads them */
    uint64_t r = 0x2545f4914f6cdd1dull;
    for (int i = 0; i < 20000; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        double v;
        memcpy(&v, &r, sizeof v);
        if (!isfinite(v)) continue;
        char num[32], body[96];
        dt__real_text(v, num);
        snprintf(body, sizeof body, "{\"metrics\":{\"loss\":%s}}", num);
        check_row(db, body, "metrics", "loss", 1);
    }
    sqlite3_close(db);
}

static json_t *row(int64_t b, double loss) {
    return json_pack("{s:s,s:I,s:f,s:I,s:{s:f}}", "kind", "training", "batches", (json_int_t)b,
                     "epochs", b / 100.0, "records", (json_int_t)(b * 32), "metrics", "loss", loss);
}

static void put(dt_store *st, int64_t t, int64_t lo, int64_t hi, double base) {
    json_t *rows = json_array();
    for (int64_t b = lo; b <= hi; b++) json_array_append_new(rows, row(b, base + 1.0 / (double)b));
    CHECK(dt_store_metrics_insert(st, t, rows, NULL) == DT_OK);
    json_decref(rows);
}

static int count_of(dt_store *st, const char *sql) {
    sqlite3_stmt *s = NULL;
    int n = -1;
    if (sqlite3_prepare_v2(dt__store_db(st), sql, -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        n = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    return n;
}

/* The chart text of st equals a fresh handle's for every x and a few point counts; st is left
 * holding the first count's encodings, so the next check starts from kept ones. */
static void check_same_as_fresh(dt_store *st, const char *path, int64_t exp, const char *when) {
    dt_store *fresh = NULL;
    CHECK(dt_store_open(path, &fresh) == DT_OK);
    static const char *const xs[] = {"batches", "epochs", "records"};
    static const int64_t counts[] = {4, 50, 1000};
    for (int i = 0; fresh && i < 3; i++) {
        for (int k = 0; k < 6; k++) { /* each count as JSON, then in binary */
            dt_series_format f = k < 3 ? DT_SERIES_JSON : DT_SERIES_F64;
            char *a = NULL, *b = NULL;
            size_t na = 0, nb = 0;
            CHECK(dt_store_metric_series_text(st, exp, 0, "training", "loss", xs[i], counts[k % 3],
                                              f, &a, &na) == DT_OK);
            CHECK(dt_store_metric_series_text(fresh, exp, 0, "training", "loss", xs[i],
                                              counts[k % 3], f, &b, &nb) == DT_OK);
            CHECK_MSG(a && b && na == nb && !memcmp(a, b, na), "%s: x %s points %lld format %d",
                      when, xs[i], (long long)counts[k % 3], f);
            free(a);
            free(b);
        }
        char *a = NULL;
        size_t na = 0;
        CHECK(dt_store_metric_series_text(st, exp, 0, "training", "loss", xs[i], counts[0],
                                          DT_SERIES_JSON, &a, &na) == DT_OK);
        free(a);
    }
    dt_store_close(fresh);
}

/* The packed series (series_packed.c) give the answer the rows give: a fresh handle reads the
 * chart from them, another one from the rows (their packing hidden inside a transaction rolled
 * back), for every point and a few counts. `packed`: the (trial, kind)s expected packed. */
static void check_packed_as_rows(const char *path, int64_t exp, int packed, const char *when) {
    dt_store *a = NULL, *b = NULL;
    CHECK(dt_store_open(path, &a) == DT_OK && dt_store_open(path, &b) == DT_OK);
    if (!a || !b) return;
    CHECK_MSG(count_of(a, "SELECT count(*) FROM metric_series_ok") == packed, "%s: %d packed", when,
              count_of(a, "SELECT count(*) FROM metric_series_ok"));
    CHECK(sqlite3_exec(dt__store_db(b), "BEGIN; DELETE FROM metric_series_ok", NULL, NULL, NULL) ==
          SQLITE_OK);
    static const int64_t counts[] = {4, 50, 100000};
    for (int k = 0; k < 3; k++) {
        char *x = NULL, *y = NULL;
        size_t nx = 0, ny = 0;
        CHECK(dt_store_metric_series_text(a, exp, 0, "training", "loss", "batches", counts[k],
                                          DT_SERIES_JSON, &x, &nx) == DT_OK);
        CHECK(dt_store_metric_series_text(b, exp, 0, "training", "loss", "batches", counts[k],
                                          DT_SERIES_JSON, &y, &ny) == DT_OK);
        CHECK_MSG(x && y && nx == ny && !memcmp(x, y, nx), "%s: points %lld:\n%.300s\n%.300s", when,
                  (long long)counts[k], x ? x : "", y ? y : "");
        free(x);
        free(y);
    }
    CHECK(sqlite3_exec(dt__store_db(b), "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK);
    dt_store_close(a);
    dt_store_close(b);
}

static void test_store_text(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/store.db", g_dir);
    dt_store *st = NULL;
    CHECK(dt_store_open(path, &st) == DT_OK);
    if (!st) return;
    json_t *cfg = json_pack("{s:s,s:s,s:{s:s,s:s,s:b}}", "name", "s", "entrypoint", "m:T",
                            "searcher", "name", "random", "metric", "loss", "smaller_is_better", 1);
    json_t *hp = json_pack("{s:i}", "units", 8);
    int64_t exp = 0, t[3] = {0};
    CHECK(dt_store_exp_insert(st, cfg, "text", "/m", &exp) == DT_OK);
    for (int i = 0; i < 3; i++)
        CHECK(dt_store_trial_insert(st, exp, i + 1, hp, (uint64_t)i, &t[i]) == DT_OK);
    for (int i = 0; i < 3; i++) put(st, t[i], 1, 200, i);
    check_same_as_fresh(st, path, exp, "first read");
    check_packed_as_rows(path, exp, 3, "first read");
    /* rows arrive for one trial only: the others' kept encodings stay, its own is renewed; the
     * packed series fill a chunk and go on in new ones */
    put(st, t[1], 201, 2500, 1);
    check_same_as_fresh(st, path, exp, "rows for one trial");
    check_packed_as_rows(path, exp, 3, "rows for one trial");
    CHECK(count_of(st, "SELECT count(*) FROM metric_series WHERE trial_id = 2") == 3);
    put(st, t[2], 261, 261, 2);
    check_same_as_fresh(st, path, exp, "one row after a gap");
    check_packed_as_rows(path, exp, 3, "one row after a gap");
    /* an upsert of a row already read replaces its point; its trial's series are read from the
     * rows from then on */
    put(st, t[0], 100, 100, 9);
    check_same_as_fresh(st, path, exp, "upsert");
    check_packed_as_rows(path, exp, 2, "upsert");
    put(st, t[0], 201, 210, 0);
    check_packed_as_rows(path, exp, 2, "rows after an upsert");
    /* rows read inside a rolled-back group are forgotten */
    CHECK(dt_store_begin(st) == DT_OK);
    put(st, t[0], 201, 400, 0);
    char *a = NULL;
    size_t na = 0;
    CHECK(dt_store_metric_series_text(st, exp, 0, "training", "loss", "batches", 50,
                                      DT_SERIES_JSON, &a, &na) == DT_OK);
    free(a);
    dt_store_rollback(st);
    check_same_as_fresh(st, path, exp, "rollback");
    /* a row the scanner cannot read (a member name written with an escape) is read by SQLite */
    CHECK(sqlite3_exec(dt__store_db(st),
                       "UPDATE metrics SET body = '{\"batches\":5,\"epochs\":0.05,"
                       "\"no\\u0074e\":1,\"records\":160,\"metrics\":{\"loss\":42.5}}'"
                       " WHERE batches = 5",
                       NULL, NULL, NULL) == SQLITE_OK);
    dt_store *fresh = NULL;
    CHECK(dt_store_open(path, &fresh) == DT_OK);
    json_t *e = NULL;
    if (fresh)
        CHECK(dt_store_metric_series(fresh, exp, t[2], "training", "loss", "epochs", 1000, &e) ==
              DT_OK);
    json_t *p5 = json_array_get(json_object_get(json_array_get(e, 0), "data"), 4);
    CHECK(json_real_value(json_array_get(p5, 0)) == 0.05 &&
          json_real_value(json_array_get(p5, 1)) == 42.5);
    json_decref(e);
    dt_store_close(fresh);
    /* the JSON form reads the text */
    json_t *j = NULL;
    CHECK(dt_store_metric_series(st, exp, t[1], "training", "loss", "batches", 100000, &j) ==
          DT_OK);
    CHECK(json_array_size(j) == 1 &&
          json_array_size(json_object_get(json_array_get(j, 0), "data")) == 2500);
    json_decref(j);
    dt_store_close(st);
    json_decref(hp);
    json_decref(cfg);
}

int main(void) {
    if (!fx_tmpdir(g_dir, sizeof g_dir, "test-series")) return 1;
    dt_log_set_level(DT_LOG_ERROR);
    TEST_RUN(test_real_text);
    TEST_RUN(test_series_text);
    TEST_RUN(test_sample);
    TEST_RUN(test_row_number);
    TEST_RUN(test_store_text);
    if (!fx_rmtree(g_dir)) fprintf(stderr, "could not remove %s\n", g_dir);
    TEST_END();
}
