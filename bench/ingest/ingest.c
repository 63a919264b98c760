/* ingest.c — one trial of bench/master_ingest.sh: posts ROWS training-metric rows in batches
 * of BATCH to the master it runs under (POST /api/v1/trials/ID/metrics, each answered once the
 * rows are in the store), completes its searcher operation, and prints one JSON line with its
 * start and end times. Hyperparameters come from the spec: rows, batch. */
#include "dtrain/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

static double now(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

static int fail(const char *what) {
    fprintf(stderr, "ingest: %s: %s\n", what, dt_last_error());
    return 1;
}

int main(void) {
    const char *id = getenv("DTRAIN_TRIAL_ID"), *run = getenv("DTRAIN_TRIAL_RUN");
    if (!id || !run) {
        fprintf(stderr, "ingest: run me under the master (bench/master_ingest.sh)\n");
        return 2;
    }
    dt_client *c = dt_client_new(NULL);
    if (!c) return fail("client");
    char path[256];
    json_t *spec = NULL, *op = NULL;
    snprintf(path, sizeof path, "/api/v1/trials/%s/spec?run=%s", id, run);
    if (dt_client_call(c, "GET", path, NULL, &spec, NULL) != DT_OK) return fail("spec");
    json_t *hp = json_object_get(spec, "hparams");
    long rows = (long)json_integer_value(json_object_get(hp, "rows"));
    long batch = (long)json_integer_value(json_object_get(hp, "batch"));
    if (rows <= 0 || batch <= 0) {
        fprintf(stderr, "ingest: hyperparameters rows and batch must be positive\n");
        return 2;
    }
    snprintf(path, sizeof path, "/api/v1/trials/%s/metrics", id);
    double t0 = now();
    for (long done = 0; done < rows;) {
        json_t *arr = json_array();
        for (long i = 0; i < batch && done < rows; i++, done++)
            json_array_append_new(arr,
                                  json_pack("{ss,sI,sf,sI,s{sf,sf}}", "kind", "training", "batches",
                                            (json_int_t)(done + 1), "epochs", done / 1000.0,
                                            "records", (json_int_t)(done * 64), "metrics", "loss",
                                            1.0 / (double)(done + 1), "accuracy", 0.5));
        json_t *body = json_pack("{sI,so}", "run", (json_int_t)atoll(run), "rows", arr);
        dt_status st = dt_client_call(c, "POST", path, body, NULL, NULL);
        json_decref(body);
        if (st != DT_OK) return fail("metrics");
    }
    double t1 = now();
    /* the searcher operation: done, with a metric */
    snprintf(path, sizeof path, "/api/v1/trials/%s/searcher/operation?run=%s", id, run);
    if (dt_client_call(c, "GET", path, NULL, &op, NULL) != DT_OK) return fail("operation");
    json_t *len = json_object_get(json_object_get(op, "op"), "length");
    if (len) {
        json_t *body =
            json_pack("{sI,sO,sf}", "run", (json_int_t)atoll(run), "length", len, "metric", 1.0);
        snprintf(path, sizeof path, "/api/v1/trials/%s/searcher/completed", id);
        dt_status st = dt_client_call(c, "POST", path, body, NULL, NULL);
        json_decref(body);
        if (st != DT_OK) return fail("completed");
    }
    printf("{\"ingest\":{\"rows\":%ld,\"batch\":%ld,\"t0\":%.6f,\"t1\":%.6f}}\n", rows, batch, t0,
           t1);
    fflush(stdout);
    json_decref(op);
    json_decref(spec);
    dt_client_free(c);
    return 0;
}
