/*
 * webui_latency.c — the web UI's data at scale: API latency for what the experiment page asks
 * for, with 100 trials x 10 000 metric points, and the pages' weight.
 *
 * bench_webui_latency [TRIALS] [POINTS] [REPEATS] [RESTARTS] [CHART]: fills a store in a temporary
 * DTRAIN_HOME with one finished experiment of TRIALS trials (default 100), each with POINTS
 * training rows (default 10 000, every batch) and POINTS/10 validation rows, starts the master on a
 * free loopback port in this process, then times REPEATS (default 30) rounds of the requests the
 * experiment page makes (the page itself, the experiment, its trials, its searcher, the
 * learning curves of training and of validation at CHART points a trial, default 500, in the
 * binary form the page reads, format=f64), each round followed by the two curves as JSON (what
 * other API clients read, parsed here), and prints one JSON line:
 *   {"bench":"webui_latency","trials":T,"points":P,"requests":{"<path>":{"p50_ms","p95_ms",
 *    "first_ms","bytes"},...},"page_p95_ms":X,"reencoded":{"p50_ms","p95_ms"},
 *    "reencoded_json":{...},"page_weight_bytes":{"html","assets"},"first_after_start":{...},
 *    "first_after_start_json":{...}}
 * page_p95_ms is the p95 of a whole round of the page's requests; first_ms the first round's
 * time (the master's caches empty). reencoded times REPEATS training-curve requests each with
 * another point count, so no answer is kept for it: the cost while trials report (series in
 * memory, the answer built again). Then the master is started RESTARTS times more (default 10)
 * on the same store, and the first training and validation curve requests after each start are
 * timed, then RESTARTS times again with the curves as JSON:
 *   "first_after_start":{"training":{"p50_ms","p95_ms","cpu_p50_ms","cpu_p95_ms"},
 *   "validation":{...}} (cpu: the process's CPU time for the request, server and client: less
 *   moved by other load on the machine than the wall time).
 * The targets: a first chart after a start p95 <= 100 ms, a warm one <= 30 ms. Not a test:
 * nothing is asserted.
 */
#include "bench_clock.h"
#include "master/master.h"
#include "web/web.h"
#include "master/store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fill(const char *home, int trials, int points) {
    char p[512];
    snprintf(p, sizeof p, "%s/store.db", home);
    dt_store *st;
    if (dt_store_open(p, &st) != DT_OK) return 1;
    json_t *cfg =
        json_pack("{s:s,s:s,s:{s:s,s:s,s:b}}", "name", "bench", "entrypoint", "m:T", "searcher",
                  "name", "random", "metric", "validation_loss", "smaller_is_better", 1);
    int64_t exp;
    if (dt_store_exp_insert(st, cfg, "name: bench\n", "/m", &exp) != DT_OK) return 1;
    json_decref(cfg);
    for (int t = 0; t < trials; t++) {
        json_t *hp = json_pack("{s:f,s:i}", "lr", 1e-3 * (t + 1), "hidden", 64 + t % 4 * 32);
        int64_t tid;
        if (dt_store_trial_insert(st, exp, t + 1, hp, (uint64_t)t, &tid) != DT_OK) return 1;
        json_decref(hp);
        json_t *rows = json_array();
        for (int b = 1; b <= points; b++) {
            double loss = 2.0 / (1 + b * 1e-3 * (1 + t % 7)) + 0.01 * ((b * 7919) % 13);
            json_array_append_new(rows, json_pack("{s:s,s:i,s:f,s:i,s:{s:f}}", "kind", "training",
                                                  "batches", b, "epochs", b / 1000.0, "records",
                                                  b * 32, "metrics", "loss", loss));
            if (b % 10 == 0)
                json_array_append_new(rows,
                                      json_pack("{s:s,s:i,s:f,s:i,s:{s:f}}", "kind", "validation",
                                                "batches", b, "epochs", b / 1000.0, "records",
                                                b * 32, "metrics", "validation_loss", loss * 1.1));
            if (json_array_size(rows) >= 2000 || b == points) {
                if (dt_store_metrics_insert(st, tid, rows, NULL) != DT_OK) return 1;
                json_array_clear(rows);
            }
        }
        json_decref(rows);
        dt_store_trial_set_state(st, tid, "COMPLETED", NULL);
    }
    dt_store_exp_set_state(st, exp, "COMPLETED");
    dt_store_close(st);
    return 0;
}

/* GET path, timed (wall and process CPU seconds into t[0], t[1]): JSON parsed, as any API
 * client would, or with f64 the chart's binary form with its blocks walked, as the page makes
 * a typed-array view of each. Its size into *bytes (measured after the timing). */
static dt_status timed_get(dt_client *c, const char *path, bool f64, long *bytes, double t[2]) {
    char p[256], *body = NULL;
    size_t len = 0;
    json_t *ans = NULL;
    snprintf(p, sizeof p, "%s&format=f64", path);
    double s = bench_wall(), u = bench_cpu();
    dt_status st = f64 ? dt__client_get_bytes(c, p, &body, &len)
                       : dt_client_call(c, "GET", path, NULL, &ans, NULL);
    if (f64 && st == DT_OK && (len < 16 || memcmp(body, "DTCHART1", 8)))
        st = dt_error(DT_ERR_IO, "%s: not a binary chart", p);
    uint32_t hl = 0;
    if (f64 && st == DT_OK) memcpy(&hl, body + 8, 4);
    for (size_t off = 16 + hl; f64 && st == DT_OK && off < len;) {
        double h[4];
        memcpy(h, body + off, sizeof h);
        off += 32 + 16 * (size_t)h[2];
        if (off > len) st = dt_error(DT_ERR_IO, "%s: a series past the end", p);
    }
    t[0] = bench_wall() - s, t[1] = bench_cpu() - u;
    char *txt = ans ? json_dumps(ans, JSON_COMPACT) : NULL;
    *bytes = f64 ? (long)len : txt ? (long)strlen(txt) : 0;
    free(txt);
    json_decref(ans);
    free(body);
    return st;
}

static void *serve(void *arg) {
    if (dt_master_run(arg) != DT_OK) fprintf(stderr, "master: %s\n", dt_last_error());
    return NULL;
}

/* Start a master on home (a free loopback port) in thread *th; its URL into url. */
static int start(dt_master_opts *o, pthread_t *th, const char *home, char *url, size_t n) {
    char pf[512];
    snprintf(pf, sizeof pf, "%s/master.port", home);
    unlink(pf);
    pthread_create(th, NULL, serve, o);
    int port = 0;
    for (int i = 0; i < 500 && !port; i++) {
        FILE *f = fopen(pf, "r");
        if (f) {
            if (fscanf(f, "%d", &port) != 1) port = 0;
            fclose(f);
        }
        if (!port) usleep(20000);
    }
    snprintf(url, n, "http://127.0.0.1:%d", port);
    return port ? 0 : 1;
}

/* RESTARTS starts of the master on the filled store, the first curve requests (JSON, or the
 * page's binary form) after each. */
static void first_after_start(dt_master_opts *o, const char *home, int restarts, int chart,
                              bool f64) {
    static const char *const kinds[] = {"training", "validation"};
    double *lat[4];
    for (int k = 0; k < 4; k++) lat[k] = calloc((size_t)restarts, sizeof(double));
    for (int r = 0; r < restarts; r++) {
        pthread_t th;
        char url[128];
        if (start(o, &th, home, url, sizeof url)) break;
        dt_client *c = dt_client_new(url);
        for (int k = 0; k < 2; k++) {
            char path[160];
            snprintf(path, sizeof path,
                     "/api/v1/experiments/1/metrics?kind=%s&name=%s&x=batches&points=%d", kinds[k],
                     k ? "validation_loss" : "loss", chart);
            long bytes;
            double t[2];
            if (timed_get(c, path, f64, &bytes, t) != DT_OK)
                fprintf(stderr, "%s: %s\n", path, dt_last_error());
            lat[k][r] = t[0];
            lat[k + 2][r] = t[1];
        }
        dt_client_call(c, "POST", "/api/v1/master/shutdown", NULL, NULL, NULL);
        pthread_join(th, NULL);
        dt_client_free(c);
    }
    printf(",\"first_after_start%s\":{\"restarts\":%d", f64 ? "" : "_json", restarts);
    for (int k = 0; k < 2; k++) {
        printf(",\"%s\":{\"p50_ms\":%.2f,\"p95_ms\":%.2f,\"cpu_p50_ms\":%.2f,\"cpu_p95_ms\":%.2f}",
               kinds[k], bench_pct(lat[k], restarts, 0.5) * 1e3, bench_pct(lat[k], restarts, 0.95) * 1e3,
               bench_pct(lat[k + 2], restarts, 0.5) * 1e3, bench_pct(lat[k + 2], restarts, 0.95) * 1e3);
    }
    for (int k = 0; k < 4; k++) free(lat[k]);
    printf("}");
}

/* long: the bench's steps in order (fill, serve, time the rounds, weigh, restart), one report */
int main(int argc, char **argv) {
    int trials = argc > 1 ? atoi(argv[1]) : 100, points = argc > 2 ? atoi(argv[2]) : 10000,
        reps = argc > 3 ? atoi(argv[3]) : 30, restarts = argc > 4 ? atoi(argv[4]) : 10,
        chart = argc > 5 ? atoi(argv[5]) : 500;
    if (restarts < 1) restarts = 1;
    char home[] = "/tmp/dtrain_webbench_XXXXXX";
    if (!mkdtemp(home)) return 1;
    double t0 = bench_wall();
    if (fill(home, trials, points)) {
        fprintf(stderr, "bench_webui_latency: filling the store: %s\n", dt_last_error());
        return 1;
    }
    fprintf(stderr, "store filled in %.1f s\n", bench_wall() - t0);
    dt_master_opts o = {.host = "127.0.0.1", .port = 0, .slots = 1, .home = home, .quiet = true};
    o.routes = dt_web_routes(&o.n_routes);
    pthread_t th;
    char url[128];
    if (start(&o, &th, home, url, sizeof url)) return 1;
    setenv("DTRAIN_HOME", home, 1);
    dt_client *c = dt_client_new(url);
    char curves[2][128];
    snprintf(curves[0], sizeof curves[0],
             "/api/v1/experiments/1/metrics?kind=validation&name=validation_loss&x=batches"
             "&points=%d",
             chart);
    snprintf(curves[1], sizeof curves[1],
             "/api/v1/experiments/1/metrics?kind=training&name=loss&x=batches&points=%d", chart);
    /* the page's requests (its charts in the binary form), then the charts as JSON */
    const char *const paths[] = {"/experiments/1",
                                 "/api/v1/experiments/1",
                                 "/api/v1/experiments/1/trials",
                                 "/api/v1/experiments/1/searcher",
                                 curves[0],
                                 curves[1],
                                 curves[0],
                                 curves[1]};
    enum { NP = 8, PAGE = 6 };
    double *lat[NP], *round = calloc((size_t)reps, sizeof *round);
    long bytes[NP] = {0};
    for (int k = 0; k < NP; k++) lat[k] = calloc((size_t)reps, sizeof *lat[k]);
    for (int r = 0; r < reps; r++) {
        double rs = bench_wall();
        for (int k = 0; k < NP; k++) {
            if (k == PAGE) round[r] = bench_wall() - rs;
            double t[2];
            dt_status st = timed_get(c, paths[k], k >= 4 && k < PAGE, &bytes[k], t);
            if (k == 0) dt_clear_error(), st = DT_OK; /* HTML is not JSON: timed all the same */
            lat[k][r] = t[0];
            if (st != DT_OK) fprintf(stderr, "%s: %s\n", paths[k], dt_last_error());
        }
    }
    /* training curves with another point count each time: no kept answer fits */
    double *again[2] = {calloc((size_t)reps, sizeof(double)), calloc((size_t)reps, sizeof(double))};
    for (int r = 0; r < reps; r++) {
        for (int f = 0; f < 2; f++) { /* the page's form, then JSON */
            char path[160];
            snprintf(path, sizeof path,
                     "/api/v1/experiments/1/metrics?kind=training&name=loss&x=batches&points=%d",
                     chart - 100 + 2 * r + f);
            long b;
            double t[2];
            if (timed_get(c, path, f == 0, &b, t) != DT_OK)
                fprintf(stderr, "%s: %s\n", path, dt_last_error());
            again[f][r] = t[0];
        }
    }
    printf("{\"bench\":\"webui_latency\",\"trials\":%d,\"points\":%d,\"repeats\":%d,"
           "\"chart_points\":%d,\"requests\":{",
           trials, points, reps, chart);
    for (int k = 0; k < NP; k++) {
        double first = lat[k][0], p50 = bench_pct(lat[k], reps, 0.5), p95 = bench_pct(lat[k], reps, 0.95);
        printf("%s\"%s%s\":{\"p50_ms\":%.2f,\"p95_ms\":%.2f,\"first_ms\":%.2f,\"bytes\":%ld}",
               k ? "," : "", paths[k], k >= 4 && k < PAGE ? "&format=f64" : "", p50 * 1e3,
               p95 * 1e3, first * 1e3, bytes[k]);
    }
    printf("},\"page_p95_ms\":%.2f", bench_pct(round, reps, 0.95) * 1e3);
    for (int f = 0; f < 2; f++)
        printf(",\"reencoded%s\":{\"p50_ms\":%.2f,\"p95_ms\":%.2f}", f ? "_json" : "",
               bench_pct(again[f], reps, 0.5) * 1e3, bench_pct(again[f], reps, 0.95) * 1e3);
    /* page weight: the HTML page and the embedded files it loads */
    char cmd[1024];
    long html = 0, assets = 0;
    static const char *const files[] = {"/experiments/1",          "/static/dygraph.min.js",
                                        "/static/dygraph.min.css", "/static/d3.min.js",
                                        "/static/app.css",         "/static/app.js"};
    for (int k = 0; k < 6; k++) {
        snprintf(cmd, sizeof cmd,
                 "curl -s --noproxy '*' -o /dev/null -w '%%{size_download}' '%s%s'", url, files[k]);
        FILE *p = popen(cmd, "r");
        long n = 0;
        if (p) {
            if (fscanf(p, "%ld", &n) != 1) n = 0;
            pclose(p);
        }
        if (k == 0)
            html = n;
        else
            assets += n;
    }
    printf(",\"page_weight_bytes\":{\"html\":%ld,\"assets\":%ld}", html, assets);
    dt_client_call(c, "POST", "/api/v1/master/shutdown", NULL, NULL, NULL);
    pthread_join(th, NULL);
    dt_client_free(c);
    first_after_start(&o, home, restarts, chart, true);
    first_after_start(&o, home, restarts, chart, false);
    printf("}\n");
    for (int k = 0; k < NP; k++) free(lat[k]);
    free(round);
    free(again[0]);
    free(again[1]);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", home);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", home);
    return 0;
}
