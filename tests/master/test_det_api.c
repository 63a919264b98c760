/* test_det_api.c — the reference client's door over real HTTP (docs/det-client.md): a master on
 * a free loopback port whose store holds a finished experiment (a trial with metrics, logs and
 * a checkpoint with files); every route of the contract answers with the fields the reference's
 * client requires (so a missing field fails here even where the client is not installed), the
 * login token is required, dtrain's own answers stay as they were on the shared paths, bad
 * input gets the reference's error shape and never creates an experiment, and on a
 * non-loopback bind only the master's token logs in (as the client hashes passwords), and the
 * login's token opens dtrain's routes as the master's token does. */
#define _GNU_SOURCE
#include "master_thread.h"
#include "fixtures/files.h"
#include "test.h"

#include "master/master.h"
#include "master/det_pack.h"
#include "master/http.h"
#include "master/store.h"
#include "master/store_impl.h"
#include "master/store_modeldef.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_home[256], g_host[32], g_token[80], g_uuid[] = "5e1f0a2b-1111-4222-8333-944455556666",
                                                  g_best[] = "5e1f0a2b-2222-4222-8333-944455556666";
static int g_port;
static char g_ans[1 << 20];

/* METHOD path with extra header lines and a body; the whole answer into g_ans. */
static void http(const char *method, const char *path, const char *headers, const char *body) {
    fx_http(g_host, g_port, method, path, headers, body, g_ans, sizeof g_ans);
}

static int status(void) {
    return fx_http_status(g_ans);
}

/* The answer's body, de-chunked when it was sent chunked (in place). */
static char *body(void) {
    char *b = strstr(g_ans, "\r\n\r\n");
    if (!b) return g_ans + strlen(g_ans);
    b += 4;
    if (!strcasestr(g_ans, "Transfer-Encoding: chunked")) return b;
    char *o = b, *p = b;
    for (;;) {
        unsigned long n = strtoul(p, &p, 16);
        p = strstr(p, "\r\n");
        if (!n || !p) break;
        memmove(o, p + 2, n);
        o += n;
        p += 2 + n + 2;
    }
    *o = 0;
    return b;
}

static json_t *as_json(void) {
    return json_loads(body(), 0, NULL);
}

/* A request with the login token `tok` (NULL: none), no Content-Type (as the client sends). */
static json_t *det(const char *method, const char *path, const char *tok, const char *b) {
    char hdr[200] = "";
    if (tok) snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", tok);
    http(method, path, hdr, b);
    return as_json();
}

/* Does obj have the fields of `spec` ("name:t,..."; t: s string, i integer, b bool, o object,
 * a array, e a STATE_ enum, n number)? Names the first missing one on stderr. */
static bool has(const json_t *obj, const char *spec) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *f = strtok_r(buf, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(f, ':');
        *colon = 0;
        json_t *v = json_object_get(obj, f);
        bool ok = false;
        switch (colon[1]) {
        case 's':
            ok = json_is_string(v);
            break;
        case 'i':
            ok = json_is_integer(v);
            break;
        case 'b':
            ok = json_is_boolean(v);
            break;
        case 'o':
            ok = json_is_object(v);
            break;
        case 'a':
            ok = json_is_array(v);
            break;
        case 'n':
            ok = json_is_number(v);
            break;
        case 'e':
            ok = json_is_string(v) && !strncmp(json_string_value(v), "STATE_", 6);
            break;
        }
        if (!ok) {
            fprintf(stderr, "  field %s (%c) missing or of another type\n", f, colon[1]);
            return false;
        }
    }
    return true;
}

#define USER "username:s,admin:b,active:b,id:i"
#define EXPERIMENT                                                                                 \
    "id:i,name:s,state:e,archived:b,config:o,originalConfig:s,jobId:s,numTrials:i,projectId:i,"    \
    "projectOwnerId:i,searcherType:s,startTime:s,username:s"
#define TRIAL "id:i,experimentId:i,hparams:o,restarts:i,startTime:s,state:e,totalBatchesProcessed:i"
#define CHECKPOINT "uuid:s,state:e,metadata:o,resources:o,training:o"
#define PAGINATION "offset:i,limit:i,startIndex:i,endIndex:i,total:i"

/* The reference's error shape with `status`, its message containing `text`. */
static bool det_error(int want, const char *text) {
    json_t *j = as_json();
    const char *msg = json_string_value(json_object_get(j, "message"));
    const char *inner = json_string_value(json_object_get(json_object_get(j, "error"), "error"));
    bool ok = status() == want && json_is_integer(json_object_get(j, "code")) && msg && inner &&
              strstr(msg, text) && !strcmp(msg, inner);
    if (!ok) fprintf(stderr, "  wanted %d \"%s\", got: %.300s\n", want, text, g_ans);
    json_decref(j);
    return ok;
}

/* ---- the master in a thread, its store filled first ---- */

static master_thread g_master;

static bool start(const char *host) {
    snprintf(g_host, sizeof g_host, "%s", host);
    dt_master_opts o = {.host = g_host, .slots = 1, .home = g_home, .quiet = true};
    if (!master_thread_start(&g_master, &o)) return false;
    g_port = g_master.port;
    return true;
}

static void stop(void) {
    master_thread_stop(&g_master, g_token);
}

/* A finished experiment: a trial with training and validation rows, two log lines and one
 * checkpoint (its directory holds w.bin), its model definition kept. */
static bool fill_store(void) {
    char p[512], ck[512];
    snprintf(p, sizeof p, "%s/store.db", g_home);
    snprintf(ck, sizeof ck, "%s/ckpt", g_home);
    mkdir(ck, 0755);
    char file[600];
    snprintf(file, sizeof file, "%s/w.bin", ck);
    FILE *f = fopen(file, "w");
    if (!f || fputs("weights", f) < 0 || fclose(f)) return false;
    dt_store *st = NULL;
    if (dt_store_open(p, &st) != DT_OK) return false;
    json_t *cfg =
        json_pack("{s:s,s:s,s:{s:s,s:s,s:b},s:{s:s}}", "name", "toy", "entrypoint", "model_def:T",
                  "searcher", "name", "single", "metric", "validation_loss", "smaller_is_better", 1,
                  "checkpoint_storage", "host_path", ck);
    json_t *hp = json_pack("{s:f}", "lr", 0.1);
    json_t *rows = json_pack("[{s:s,s:i,s:i,s:{s:f}},{s:s,s:i,s:i,s:{s:f}},{s:s,s:i,s:i,s:{s:f}}]",
                             "kind", "training", "batches", 10, "records", 160, "metrics", "loss",
                             0.9, "kind", "validation", "batches", 10, "records", 160, "metrics",
                             "validation_loss", 0.4, "kind", "validation", "batches", 20, "records",
                             320, "metrics", "validation_loss", 0.2);
    json_t *meta = json_pack("{s:i}", "steps_completed", 10), *res = json_pack("{s:i}", "w.bin", 7);
    int64_t exp = 0, trial = 0;
    int ranks[2] = {0, 0};
    const char *lines[2] = {"training: batch 10 loss=0.9", "validation: batch 10"};
    dt__buf tar = {0};
    json_t *up = json_pack("[{s:s,s:i,s:s,s:i}]", "path", "model_def.c", "type", 48, "content",
                           "aW50IHggPSAxOwo=", "mode", 33188);
    bool ok = dt_store_exp_insert(st, cfg, "name: toy\n", "/m", &exp) == DT_OK &&
              dt_store_trial_insert(st, exp, 1, hp, 1, &trial) == DT_OK &&
              dt_store_metrics_insert(st, trial, rows, NULL) == DT_OK &&
              dt_store_logs_insert(st, trial, ranks, lines, 2) == DT_OK &&
              dt_store_ckpt_insert(st, trial, g_uuid, ck, 10, meta, res) == DT_OK &&
              dt_store_ckpt_insert(st, trial, g_best, ck, 20, meta, res) == DT_OK &&
              dt_store_trial_set_state(st, trial, "COMPLETED", NULL) == DT_OK &&
              dt_store_exp_set_state(st, exp, "COMPLETED") == DT_OK &&
              dt__tar_from_upload(up, 1 << 20, &tar) == DT_OK &&
              dt_store_modeldef_put(st, exp, tar.p, tar.len) == DT_OK;
    dt__buf_free(&tar);
    json_decref(up);
    json_decref(cfg);
    json_decref(hp);
    json_decref(rows);
    json_decref(meta);
    json_decref(res);
    dt_store_close(st);
    return ok;
}

static char g_login[80];

/* ---- the tests ---- */

static void test_info_and_auth(void) {
    json_t *j = det("GET", "/info", NULL, NULL);
    CHECK(status() == 200 && !strcmp(json_string_value(json_object_get(j, "version")), "0.38.1"));
    json_decref(j);
    json_decref(det("GET", "/api/v1/me", NULL, NULL));
    CHECK(det_error(401, "no token"));
    json_decref(det("GET", "/api/v1/me",
                    "0123456789012345678901234567890123456789012345678901234567890123", NULL));
    CHECK(det_error(401, "not valid"));
    json_decref(det("POST", "/api/v1/auth/login", NULL,
                    "{\"username\":\"admin\",\"password\":\"x\",\"isHashed\":true}"));
    CHECK(det_error(403, "invalid credentials"));
    j = det("POST", "/api/v1/auth/login", NULL,
            "{\"username\":\"determined\",\"password\":\"\",\"isHashed\":true}");
    const char *tok = json_string_value(json_object_get(j, "token"));
    CHECK(status() == 200 && tok && strlen(tok) == 64 && has(json_object_get(j, "user"), USER));
    snprintf(g_login, sizeof g_login, "%s", tok ? tok : "");
    json_decref(j);
    j = det("GET", "/api/v1/me", g_login, NULL);
    CHECK(status() == 200 && has(json_object_get(j, "user"), USER) &&
          !strcmp(json_string_value(json_object_get(json_object_get(j, "user"), "username")),
                  "determined"));
    json_decref(j);
    j = det("GET", "/api/v1/master", g_login, NULL);
    CHECK(status() == 200 &&
          has(j, "version:s,masterId:s,clusterId:s,clusterName:s,hasCustomLogo:b,"
                 "strictJobQueueControl:b"));
    json_decref(j);
    j = det("GET", "/api/v1/master", NULL, NULL); /* dtrain's own answer */
    CHECK(status() == 200 && has(j, "pid:i,slots:i") && !json_object_get(j, "masterId"));
    json_decref(j);
}

static void test_experiments(void) {
    json_t *j = det("GET", "/api/v1/experiments?archived=false&limit=200&offset=0&users=determined",
                    g_login, NULL);
    json_t *e = json_array_get(json_object_get(j, "experiments"), 0);
    CHECK(status() == 200 && has(e, EXPERIMENT) &&
          has(json_object_get(j, "pagination"), PAGINATION));
    CHECK(!strcmp(json_string_value(json_object_get(e, "state")), "STATE_COMPLETED"));
    CHECK(json_integer_value(json_object_get(json_object_get(j, "pagination"), "endIndex")) == 1);
    json_decref(j);
    j = det("GET", "/api/v1/experiments", NULL, NULL); /* dtrain's own shape */
    e = json_array_get(json_object_get(j, "experiments"), 0);
    CHECK(json_is_integer(json_object_get(j, "total")) &&
          !strcmp(json_string_value(json_object_get(e, "state")), "COMPLETED"));
    json_decref(j);
    j = det("GET", "/api/v1/experiments/1", g_login, NULL);
    CHECK(status() == 200 && has(json_object_get(j, "experiment"), EXPERIMENT));
    json_decref(j);
    json_decref(det("GET", "/api/v1/experiments/99", g_login, NULL));
    CHECK(det_error(404, "experiment 99 not found"));
    j = det("GET", "/api/v1/experiments/1/trials?offset=0&orderBy=ORDER_BY_ASC&sortBy=SORT_BY_ID",
            g_login, NULL);
    CHECK(status() == 200 && has(json_array_get(json_object_get(j, "trials"), 0), TRIAL) &&
          has(json_object_get(j, "pagination"), PAGINATION));
    json_decref(j);
    json_decref(det("PATCH", "/api/v1/experiments/1", g_login,
                    "{\"id\":1,\"description\":\"new words\",\"labels\":null,\"name\":\"toy\"}"));
    CHECK(status() == 200);
    j = det("GET", "/api/v1/experiments/1", g_login, NULL);
    CHECK(
        !strcmp(json_string_value(json_object_get(json_object_get(j, "experiment"), "description")),
                "new words"));
    json_decref(j);
    json_decref(
        det("POST", "/api/v1/experiments/1/kill", g_login, NULL)); /* ended: nothing to do */
    CHECK(status() == 200);
    json_decref(det("POST", "/api/v1/experiments/1/pause", g_login, NULL));
    CHECK(det_error(409, "has ended"));
    j = det("GET", "/api/v1/experiments/1/model_def", g_login, NULL);
    dt__buf gz = {0};
    const char *b64 = json_string_value(json_object_get(j, "b64Tgz"));
    CHECK(status() == 200 && b64 && dt__base64_decode(b64, &gz) && gz.len > 2 &&
          (unsigned char)gz.p[0] == 0x1f && (unsigned char)gz.p[1] == 0x8b &&
          memmem(gz.p, gz.len, "int x = 1;", 10));
    dt__buf_free(&gz);
    json_decref(j);
}

/* The log answer's lines: each {"result": LOG} with the fields the client reads. */
static int log_lines(void) {
    int n = 0;
    char *b = body(), *save = NULL;
    for (char *line = strtok_r(b, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_t *j = json_loads(line, 0, NULL);
        json_t *r = json_object_get(j, "result");
        const char *msg = json_string_value(json_object_get(r, "message"));
        if (has(r, "id:s,trialId:i,message:s,timestamp:s,level:s") && msg &&
            msg[strlen(msg) - 1] == '\n')
            n++;
        json_decref(j);
    }
    return n;
}

static void test_trials_and_checkpoints(void) {
    json_t *j = det("GET", "/api/v1/trials/1", g_login, NULL);
    CHECK(status() == 200 && has(json_object_get(j, "trial"), TRIAL));
    json_decref(j);
    j = det("GET", "/api/v1/trials/1/workloads?limit=500&offset=0", g_login, NULL);
    json_t *w = json_object_get(j, "workloads"), *x;
    size_t i;
    int kinds = 0;
    json_array_foreach(w, i, x) {
        json_t *m = json_object_get(x, "training") ? json_object_get(x, "training")
                                                   : json_object_get(x, "validation");
        if (m) kinds += has(m, "totalBatches:i,numInputs:i,metrics:o,endTime:s");
        if (json_object_get(x, "checkpoint"))
            kinds += has(json_object_get(x, "checkpoint"), "totalBatches:i,state:e,uuid:s");
    }
    CHECK(status() == 200 && kinds == 5 && has(json_object_get(j, "pagination"), PAGINATION));
    json_decref(j);
    http("GET", "/api/v1/trials/1/logs?follow=false", NULL, NULL); /* dtrain's own */
    CHECK(status() == 200 && strstr(body(), "\"logs\""));
    char auth[200];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", g_login);
    http("GET", "/api/v1/trials/1/logs?follow=false", auth, NULL);
    CHECK(status() == 200 && log_lines() == 2);
    http("GET", "/api/v1/trials/1/logs?follow=true", auth, NULL); /* ends: the trial is done */
    CHECK(status() == 200 && log_lines() == 2);
    const char *paths[] = {
        "/api/v1/experiments/1/"
        "checkpoints?limit=1&sortByAttr=SORT_BY_SEARCHER_METRIC&states=STATE_COMPLETED",
        "/api/v1/trials/1/checkpoints?limit=1&offset=0&sortByAttr=SORT_BY_SEARCHER_METRIC"};
    for (int k = 0; k < 2; k++) {
        j = det("GET", paths[k], g_login, NULL);
        json_t *c = json_array_get(json_object_get(j, "checkpoints"), 0);
        json_t *t = json_object_get(c, "training"), *ec = json_object_get(t, "experimentConfig");
        /* the best validation first: batch 20's, though the store lists batch 10 first */
        CHECK(!strcmp(json_string_value(json_object_get(c, "uuid")), g_best));
        CHECK(status() == 200 && has(c, CHECKPOINT) && has(t, "trialId:i,experimentId:i") &&
              has(json_object_get(ec, "checkpoint_storage"), "type:s") &&
              has(json_object_get(ec, "searcher"), "metric:s") &&
              has(json_object_get(json_object_get(t, "validationMetrics"), "avgMetrics"),
                  "validation_loss:n") &&
              has(json_object_get(c, "metadata"), "steps_completed:i"));
        json_decref(j);
    }
    char p[200];
    snprintf(p, sizeof p, "/api/v1/checkpoints/%s", g_uuid);
    j = det("GET", p, g_login, NULL);
    CHECK(status() == 200 && has(json_object_get(j, "checkpoint"), CHECKPOINT));
    json_decref(j);
    snprintf(p, sizeof p, "/checkpoints/%s", g_uuid);
    json_decref(det("GET", p, NULL, NULL));
    CHECK(status() == 401);
    char hdr[200];
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\nAccept: application/gzip\r\n", g_login);
    http("GET", p, hdr, NULL);
    char *b = strstr(g_ans, "\r\n\r\n");
    CHECK(status() == 200 && strstr(g_ans, "application/gzip") && b &&
          (unsigned char)b[4] == 0x1f && (unsigned char)b[5] == 0x8b);
    json_decref(det("GET", "/checkpoints/no-such-uuid", g_login, NULL));
    CHECK(det_error(404, "checkpoint no-such-uuid not found"));
}

/* A create as the client sends it (the config text, the files in walk order, activate): the
 * answer's fields, the files unpacked with their modes, and the same files back from
 * model_def. The model is a command (a script that exits), so nothing is compiled. */
static int n_contexts(void);

static void test_create(void) {
    const char *run = "IyEvYmluL3NoCmV4aXQgMAo="; /* "#!/bin/sh\nexit 0\n" */
    char req[1024];
    snprintf(req, sizeof req,
             "{\"config\":\"name: cmd\\nentrypoint: ./run.sh\\nsearcher:\\n  name: single\\n"
             "  metric: loss\\n  max_length: {batches: 1}\\n\",\"modelDefinition\":["
             "{\"path\":\"sub\",\"type\":53,\"content\":\"\",\"mode\":16877,\"mtime\":\"1\","
             "\"uid\":0,\"gid\":0},"
             "{\"path\":\"sub/run.sh\",\"type\":48,\"content\":\"%s\",\"mode\":33261},"
             "{\"path\":\"run.sh\",\"type\":48,\"content\":\"%s\",\"mode\":33261}],"
             "\"activate\":false,\"parentId\":null,\"projectId\":null,\"template\":null,"
             "\"validateOnly\":false}",
             run, run);
    json_t *j = det("POST", "/api/v1/experiments", g_login, req);
    json_t *e = json_object_get(j, "experiment");
    CHECK_MSG(status() == 200 && has(e, EXPERIMENT) && json_is_object(json_object_get(j, "config")),
              "%.400s", g_ans);
    CHECK(!strcmp(json_string_value(json_object_get(e, "state"))
                      ? json_string_value(json_object_get(e, "state"))
                      : "",
                  "STATE_PAUSED"));
    int64_t id = json_integer_value(json_object_get(e, "id"));
    json_decref(j);
    char p[600];
    snprintf(p, sizeof p, "%s/contexts", g_home);
    CHECK(n_contexts() == 1);
    j = det("GET", "/api/v1/experiments", g_login, NULL);
    CHECK(json_integer_value(json_object_get(json_object_get(j, "pagination"), "total")) == 2);
    json_decref(j);
    snprintf(p, sizeof p, "/api/v1/experiments/%lld/model_def", (long long)id);
    j = det("GET", p, g_login, NULL);
    dt__buf gz = {0};
    const char *b64 = json_string_value(json_object_get(j, "b64Tgz"));
    CHECK(b64 && dt__base64_decode(b64, &gz) && memmem(gz.p, gz.len, "sub/run.sh", 10) &&
          memmem(gz.p, gz.len, "exit 0", 6));
    dt__buf_free(&gz);
    json_decref(j);
    snprintf(p, sizeof p, "/api/v1/experiments/%lld/kill", (long long)id);
    json_decref(det("POST", p, g_login, NULL));
    CHECK(status() == 200);
}

static int n_contexts(void) {
    char p[600];
    int n = 0;
    for (int i = 0; i < 1; i++) {
        snprintf(p, sizeof p, "ls -d %s/contexts/ctx-* 2>/dev/null | wc -l", g_home);
        FILE *f = popen(p, "r");
        if (f && fscanf(f, "%d", &n) != 1) n = -1;
        if (f) pclose(f);
    }
    return n;
}

static void test_bad_input(void) {
    /* a config the loader refuses: the reason, nothing created, no directory left */
    json_decref(det("POST", "/api/v1/experiments", g_login,
                    "{\"config\":\"name: bad\\nentrypoint: model_def:T\\nsearcher:\\n  name: "
                    "single\\n  metric: loss\\n  "
                    "max_length: {batches: -3}\\n\",\"modelDefinition\":[],\"activate\":true}"));
    CHECK(det_error(400, "config:6:") && det_error(400, "max_length"));
    json_decref(det("POST", "/api/v1/experiments", g_login,
                    "{\"config\":\"name: x\\n\",\"modelDefinition\":[{\"path\":\"../evil.c\","
                    "\"type\":48,\"content\":\"\",\"mode\":33188}]}"));
    CHECK(det_error(400, "not a relative path"));
    json_decref(det("POST", "/api/v1/experiments", g_login, "{\"modelDefinition\":[]}"));
    CHECK(det_error(400, "config"));
    json_t *j = det("GET", "/api/v1/experiments", g_login, NULL);
    CHECK(json_integer_value(json_object_get(json_object_get(j, "pagination"), "total")) == 2);
    CHECK(n_contexts() == 1); /* test_create's */
    json_decref(j);
    json_decref(det("GET", "/api/v1/experiments/x1", g_login, NULL));
    CHECK(det_error(400, "not an experiment id"));
    json_decref(det("GET", "/api/v1/templates", g_login, NULL)); /* a route dtrain lacks */
    CHECK(det_error(404, "does not implement"));
    json_decref(det("DELETE", "/api/v1/trials/1", g_login, NULL));
    CHECK(det_error(405, "does not implement"));
    /* over the size limit */
    dt__buf tar = {0};
    json_t *up = json_pack("[{s:s,s:i,s:s}]", "path", "big.bin", "type", 48, "content",
                           "QUJDREVGR0hJSktMTU5PUA==");
    CHECK(dt__tar_from_upload(up, 8, &tar) == DT_ERR_INVALID && strstr(dt_last_error(), "over"));
    json_decref(up);
    dt__buf_free(&tar);
    /* a body over the master's limit, as a too large model directory would be */
    size_t big = DT_HTTP_MAX_BODY + 16;
    char *huge = malloc(big + 1);
    if (huge) {
        memset(huge, 'x', big);
        huge[big] = 0;
        json_decref(det("POST", "/api/v1/experiments", g_login, huge));
        CHECK(det_error(413, ".detignore"));
        free(huge);
    }
    /* logged out: the token is gone */
    json_decref(det("POST", "/api/v1/auth/logout", g_login, NULL));
    CHECK(status() == 200);
    json_decref(det("GET", "/api/v1/me", g_login, NULL));
    CHECK(det_error(401, "not valid"));
}

/* Bound elsewhere than loopback: a login (open without a token) with the master's token as the
 * password gives a token that opens dtrain's own routes too; without one, 401. */
static void test_token_elsewhere(void) {
    json_decref(det("GET", "/info", NULL, NULL));
    CHECK(status() == 200);
    /* the empty password opens only a loopback master; here the password is the master's
     * token, hashed as the client hashes passwords, or as is */
    json_decref(det("POST", "/api/v1/auth/login", NULL,
                    "{\"username\":\"admin\",\"password\":\"\",\"isHashed\":true}"));
    CHECK(det_error(403, "master's token as the password"));
    char salted[200], hex[129], login[400];
    int n = snprintf(salted, sizeof salted, "GubPEmmotfiK9TMD6Zdw%s", g_token);
    dt__sha512_hex(salted, (size_t)n, hex);
    snprintf(login, sizeof login, "{\"username\":\"admin\",\"password\":\"%s\",\"isHashed\":false}",
             g_token);
    json_decref(det("POST", "/api/v1/auth/login", NULL, login));
    CHECK(status() == 200);
    snprintf(login, sizeof login,
             "{\"username\":\"determined\",\"password\":\"%s\",\"isHashed\":true}", hex);
    json_t *j = det("POST", "/api/v1/auth/login", NULL, login);
    const char *tok = json_string_value(json_object_get(j, "token"));
    CHECK(status() == 200 && tok);
    char t[80];
    snprintf(t, sizeof t, "%s", tok ? tok : "");
    json_decref(j);
    json_decref(det("GET", "/api/v1/experiments", NULL, NULL));
    CHECK(status() == 401);
    json_decref(det("GET", "/api/v1/experiments/1/searcher", t, NULL)); /* a dtrain-only route */
    CHECK(status() == 200);
    json_decref(det("GET", "/api/v1/me", g_token, NULL)); /* the master's token: the admin */
    CHECK(status() == 200);
}

/* SHA-512 against Python's hashlib (hashlib.sha512(...).hexdigest()): empty, short, a message
 * whose padding just fits one block (111 bytes), and one of two blocks and more. */
static void test_sha512(void) {
    static const struct {
        char ch;
        size_t n;
        const char *hex;
    } cases[] = {
        {'a', 0,
         "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2"
         "877eec2f63b931bd47417a81a538327af927da3e"},
        {'x', 111,
         "9a2a120825c2319867758ec277924f6faa254968bf752046dacdd948d8ad299b10359fd04bfd7d3810b5fa1b"
         "16a294236138baff981cbb85248478053ac4d3dd"},
        {'a', 200,
         "4b11459c33f52a22ee8236782714c150a3b2c60994e9acee17fe68947a3e6789f31e7668394592da7bef827c"
         "ddca88c4e6f86e4df7ed1ae6cba71f3e98faee9f"},
    };
    char buf[256], hex[129];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        memset(buf, cases[i].ch, cases[i].n);
        dt__sha512_hex(buf, cases[i].n, hex);
        CHECK_MSG(!strcmp(hex, cases[i].hex), "%zu bytes: %s", cases[i].n, hex);
    }
    dt__sha512_hex("abc", 3, hex);
    CHECK(!strcmp(hex, "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a"
                       "274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"));
}

/* Schema 4 over a store of schema 3: the experiment stays, a model definition goes in and
 * comes back byte for byte, and it goes with its experiment. */
static void test_migration(void) {
    char p[512];
    snprintf(p, sizeof p, "%s/old.db", g_home);
    dt_store *st = NULL;
    CHECK(dt__store_open_at_version(p, 3, &st) == DT_OK);
    json_t *cfg = json_pack("{s:s,s:{s:s,s:s}}", "name", "old", "searcher", "name", "single",
                            "metric", "loss");
    int64_t exp = 0;
    CHECK(st && dt_store_exp_insert(st, cfg, "name: old\n", "/m", &exp) == DT_OK);
    dt_store_close(st);
    st = NULL;
    CHECK(dt_store_open(p, &st) == DT_OK && st);
    if (!st) return;
    void *back = NULL;
    size_t len = 0;
    CHECK(dt_store_modeldef_get(st, exp, &back, &len) == DT_ERR_INVALID);
    CHECK(dt_store_modeldef_put(st, exp, "tar\0bytes", 9) == DT_OK);
    CHECK(dt_store_modeldef_get(st, exp, &back, &len) == DT_OK && len == 9 &&
          !memcmp(back, "tar\0bytes", 9));
    free(back);
    CHECK(dt_store_modeldef_put(st, exp + 7, "x", 1) == DT_ERR_INVALID);
    CHECK(dt_store_exp_delete(st, exp) == DT_OK);
    CHECK(dt_store_modeldef_get(st, exp, &back, &len) == DT_ERR_INVALID);
    dt_store_close(st);
    json_decref(cfg);
}

int main(void) {
    if (!fx_tmpdir(g_home, sizeof g_home, "det")) return 1;
    TEST_RUN(test_sha512);
    TEST_RUN(test_migration);
    CHECK(fill_store());
    CHECK(dt_master_token(g_home, g_token, sizeof g_token) == DT_OK);
    if (start("127.0.0.1")) {
        TEST_RUN(test_info_and_auth);
        TEST_RUN(test_experiments);
        TEST_RUN(test_trials_and_checkpoints);
        TEST_RUN(test_create);
        TEST_RUN(test_bad_input);
        stop();
    } else {
        CHECK_MSG(0, "the master did not start on 127.0.0.1");
    }
    if (start("127.0.0.2")) {
        TEST_RUN(test_token_elsewhere);
        stop();
    } else {
        CHECK_MSG(0, "the master did not start on 127.0.0.2");
    }
    dt__tree_remove(g_home);
    TEST_END();
}
