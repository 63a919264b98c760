/*
 * page_trial.c — GET /trials/{id}: hyperparameters, a chart per reported metric (drawn by
 * app.js from the API), the checkpoints with their state after GC, restarts, and the logs
 * (rank-prefixed; app.js follows them while the trial runs). GET /trials/{id}/logs.txt: every
 * line as a text download.
 */
#include "web_impl.h"

#include "base/numtext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_LOG_LINES 2000
#define LOG_CHUNK 100000

static void kv_table(w_buf *b, const json_t *obj) {
    w_raw(b, "<table class=\"kv\"><tbody>");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v) {
        w_raw(b, "<tr><th>");
        w_esc(b, k);
        w_raw(b, "</th><td>");
        char *s = dt_json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        w_esc(b, json_is_string(v) ? json_string_value(v) : s);
        free(s);
        w_raw(b, "</td></tr>");
    }
    w_raw(b, "</tbody></table>\n");
}

static void checkpoints(w_buf *b, const json_t *list) {
    w_raw(b, "<section><h2>Checkpoints</h2><table id=\"checkpoints\"><thead><tr><th>UUID</th>"
             "<th>Batches</th><th>Validation metric</th><th>Size</th><th>State</th></tr></thead>"
             "<tbody>");
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c) {
        double size = 0;
        const char *f;
        json_t *v;
        json_object_foreach(json_object_get(c, "resources"), f, v) size += json_number_value(v);
        w_raw(b, "<tr><td class=\"uuid\">");
        w_esc(b, json_string_value(json_object_get(c, "uuid")));
        w_rawf(b, "</td><td>%lld</td><td>",
               (long long)json_integer_value(json_object_get(c, "batches")));
        w_num(b, json_object_get(c, "validation_metric"));
        w_raw(b, "</td><td>");
        w_bytes(b, size);
        w_raw(b, "</td><td>");
        w_state(b, json_string_value(json_object_get(c, "state")));
        w_raw(b, "</td></tr>");
    }
    if (!json_array_size(list)) w_raw(b, "<tr><td colspan=\"5\">None yet.</td></tr>");
    w_raw(b, "</tbody></table></section>\n");
}

/* One log line as the page and the download show it: "[rank N] line". */
static void log_line(w_buf *b, const json_t *l, bool html) {
    char pre[48];
    snprintf(pre, sizeof pre, "[rank %lld] ",
             (long long)json_integer_value(json_object_get(l, "rank")));
    const char *line = json_string_value(json_object_get(l, "line"));
    if (html) {
        w_esc(b, pre);
        w_esc(b, line);
    } else {
        w_raw(b, pre);
        w_raw(b, line ? line : ""); /* text/plain: the bytes as printed */
    }
    w_raw(b, "\n");
}

static const char HEADER[] =
    "<h1>Trial {{id}} <small>of <a href=\"/experiments/{{exp}}\">experiment {{exp}}</a></small>"
    "</h1>\n<div class=\"summary\" id=\"trial\" data-trial=\"{{id}}\" data-exp=\"{{exp}}\" "
    "data-state=\"{{state}}\"><span>State {{{badge}}}</span> <span>Batches {{batches}}</span> "
    "<span>Best validation {{best}}</span> <span>Restarts {{restarts}}</span> <span>Exit "
    "{{exit}}</span></div>\n<section><h2>Hyperparameters</h2>{{{hparams}}}</section>\n"
    "<section><h2>Metrics</h2><div id=\"trial-charts\"></div><noscript><p>The charts need "
    "JavaScript.</p></noscript></section>\n";

void w_get_trial(void *app, const dt_http_req *req, dt_http_resp *resp) {
    (void)app;
    long long id;
    if (!w_id(req, 0, &id, resp)) return;
    char target[160];
    snprintf(target, sizeof target, "/api/v1/trials/%lld", id);
    json_t *tr = w_api(req, target, resp);
    if (!tr) return;
    snprintf(target, sizeof target, "/api/v1/trials/%lld/checkpoints", id);
    json_t *ck = w_api(req, target, resp);
    snprintf(target, sizeof target, "/api/v1/trials/%lld/logs?limit=%d", id, PAGE_LOG_LINES);
    json_t *logs = ck ? w_api(req, target, resp) : NULL;
    if (!logs) {
        json_decref(tr);
        json_decref(ck);
        return;
    }
    const json_t *t = json_object_get(tr, "trial");
    w_buf badge = {0}, hp = {0}, b = {0};
    w_state(&badge, json_string_value(json_object_get(t, "state")));
    kv_table(&hp, json_object_get(t, "hparams"));
    char sid[32], exp[32], batches[64], best[64], restarts[32];
    const json_t *bv = json_object_get(t, "best_validation");
    snprintf(sid, sizeof sid, "%lld", id);
    snprintf(exp, sizeof exp, "%lld",
             (long long)json_integer_value(json_object_get(t, "experiment_id")));
    snprintf(batches, sizeof batches, "%lld / %lld",
             (long long)json_integer_value(json_object_get(t, "batches")),
             (long long)json_integer_value(json_object_get(t, "total_batches")));
    if (json_is_number(bv))
        dt_fmt_double(json_number_value(bv), best);
    else
        snprintf(best, sizeof best, "–");
    snprintf(restarts, sizeof restarts, "%lld",
             (long long)json_integer_value(json_object_get(t, "restarts")));
    const char *exit = json_string_value(json_object_get(t, "exit_reason"));
    const char *kv[] = {"id",       sid,
                        "exp",      exp,
                        "state",    json_string_value(json_object_get(t, "state")),
                        "badge",    badge.p,
                        "batches",  batches,
                        "best",     best,
                        "restarts", restarts,
                        "exit",     exit ? exit : "–",
                        "hparams",  hp.p,
                        NULL};
    w_fill(&b, HEADER, kv);
    checkpoints(&b, json_object_get(ck, "checkpoints"));
    const json_t *lines = json_object_get(logs, "logs");
    size_t n = json_array_size(lines);
    long long last =
        n ? json_integer_value(json_object_get(json_array_get(lines, n - 1), "id")) : 0;
    w_rawf(&b,
           "<section><h2>Logs</h2><p><a href=\"/trials/%lld/logs.txt\" download>download</a>"
           " <label><input type=\"checkbox\" id=\"log-follow\" checked> follow</label></p>"
           "<pre id=\"logs\" class=\"logs\" data-trial=\"%lld\" data-after=\"%lld\" "
           "data-done=\"%s\">",
           id, id, last, json_is_true(json_object_get(logs, "done")) ? "true" : "false");
    size_t i;
    json_t *l;
    json_array_foreach(lines, i, l) log_line(&b, l, true);
    w_raw(&b, "</pre>");
    if (n == PAGE_LOG_LINES)
        w_raw(&b, "<p class=\"hint\">The first lines only: download for all.</p>");
    w_raw(&b, "</section>\n");
    free(badge.p);
    free(hp.p);
    json_decref(tr);
    json_decref(ck);
    json_decref(logs);
    w_page(resp, &b, "Trial %lld", id);
}

void w_get_trial_logs(void *app, const dt_http_req *req, dt_http_resp *resp) {
    (void)app;
    long long id;
    if (!w_id(req, 0, &id, resp)) return;
    w_buf b = {0};
    long long after = 0;
    for (;;) {
        char target[160];
        snprintf(target, sizeof target, "/api/v1/trials/%lld/logs?after=%lld&limit=%d", id, after,
                 LOG_CHUNK);
        json_t *ans = w_api(req, target, resp);
        if (!ans) {
            free(b.p);
            return;
        }
        const json_t *lines = json_object_get(ans, "logs");
        size_t i, n = json_array_size(lines);
        json_t *l;
        json_array_foreach(lines, i, l) log_line(&b, l, false);
        if (n) after = json_integer_value(json_object_get(json_array_get(lines, n - 1), "id"));
        json_decref(ans);
        if (n < LOG_CHUNK) break;
    }
    if (b.oom) {
        free(b.p);
        dt_http_error(resp, 500, "out of memory gathering the logs of trial %lld", id);
        return;
    }
    resp->raw = b.p ? b.p : calloc(1, 1);
    resp->raw_len = b.len;
    resp->content_type = "text/plain; charset=utf-8";
    resp->disposition = "attachment; filename=\"trial-logs.txt\"";
}
