/*
 * store_ingest.c — metric ingestion rate of the experiment store (src/master/store.c).
 *
 * bench_store_ingest [ROWS]: inserts ROWS (default 200 000) metric rows, shaped as a trial
 * reports them, in batches of 1 000 (one dt_store_metrics_insert each) into a store in a
 * temporary directory, and prints one JSON line:
 *   {"bench":"store_ingest","cpu":"<model name>","rows":N,"batch":1000,"rows_per_s":X}
 * The master's target through the REST API is 50 000 rows/s; the store alone must be well
 * above it. Not a test: nothing is asserted.
 */
#include "master/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BATCH 1000

static void cpu_model(char *buf, size_t n) {
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!strncmp(line, "model name", 10) && colon) {
            colon += 1 + (colon[1] == ' ');
            colon[strcspn(colon, "\n")] = 0;
            snprintf(buf, n, "%s", colon);
            break;
        }
    }
    fclose(f);
}

static int fail(const char *what) {
    fprintf(stderr, "bench_store_ingest: %s: %s\n", what, dt_last_error());
    return 1;
}

int main(int argc, char **argv) {
    long long rows = argc > 1 ? atoll(argv[1]) : 200000;
    if (rows <= 0) {
        fprintf(stderr, "usage: bench_store_ingest [ROWS > 0]\n");
        return 2;
    }
    char dir[] = "/tmp/dt_bench_store_XXXXXX", path[64];
    if (!mkdtemp(dir)) return fail("mkdtemp");
    snprintf(path, sizeof path, "%s/store.db", dir);
    dt_store *st = NULL;
    if (dt_store_open(path, &st) != DT_OK) return fail("open");
    json_t *cfg = json_pack("{s:{s:s}}", "searcher", "metric", "loss"), *hp = json_object();
    int64_t exp = 0, trial = 0;
    if (dt_store_exp_insert(st, cfg, "", "/m", &exp) != DT_OK ||
        dt_store_trial_insert(st, exp, 1, hp, 1, &trial) != DT_OK)
        return fail("setup");
    /* the batches are built before the clock starts: the store's own time is measured */
    long long n_batches = (rows + BATCH - 1) / BATCH;
    json_t **batches = calloc((size_t)n_batches, sizeof *batches);
    for (long long k = 0; k < n_batches; k++) {
        batches[k] = json_array();
        for (long long b = k * BATCH; b < rows && b < (k + 1) * BATCH; b++)
            json_array_append_new(batches[k], json_pack("{s:s,s:I,s:f,s:I,s:{s:f,s:f,s:f}}", "kind",
                                                        b % 10 == 9 ? "validation" : "training",
                                                        "batches", (json_int_t)b, "epochs",
                                                        b / 1875.0, "records", (json_int_t)(b * 32),
                                                        "metrics", "loss", 1.0 / (1.0 + (double)b),
                                                        "accuracy", 0.5, "records_per_s", 52000.0));
    }
    double t0 = dt_now_sec();
    for (long long k = 0; k < n_batches; k++) {
        int64_t nw = 0;
        if (dt_store_metrics_insert(st, trial, batches[k], &nw) != DT_OK) return fail("insert");
    }
    double secs = dt_now_sec() - t0;
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    json_t *out = json_pack("{s:s,s:s,s:I,s:i,s:f}", "bench", "store_ingest", "cpu", cpu, "rows",
                            (json_int_t)rows, "batch", BATCH, "rows_per_s",
                            secs > 0 ? (double)rows / secs : 0.0);
    char *line = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
    printf("%s\n", line);
    free(line);
    json_decref(out);
    for (long long k = 0; k < n_batches; k++) json_decref(batches[k]);
    free(batches);
    json_decref(cfg);
    json_decref(hp);
    dt_store_close(st);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 1;
}
