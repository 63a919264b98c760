/*
 * page_dsat.c — GET /experiments/{id}/dsat: what a dsat search found, from
 * GET /api/v1/experiments/{id}/dsat. The header (state, method, metric, why it ended), the
 * profile (parameters, activation memory per example, device budget; per ZeRO stage the model
 * states and the approximate max micro-batch), the metric against micro-batch per stage (drawn
 * by app.js with d3), every trial of the search in a table, the best configuration to copy and
 * download, and the runner's log. The tables work without JavaScript; with it, app.js redraws
 * the chart and refreshes the tables while the search runs.
 * GET /experiments/{id}/best_ds_config.json: the best configuration as a download; 404 JSON
 * before any trial succeeded.
 */
#include "web_impl.h"

#include "base/numtext.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The dsat answer of experiment `id`, or NULL with resp set to the API's error. */
static json_t *dsat_api(const dt_http_req *req, long long id, dt_http_resp *resp) {
    char target[96];
    snprintf(target, sizeof target, "/api/v1/experiments/%lld/dsat", id);
    return w_api(req, target, resp);
}

static long long int_of(const json_t *o, const char *key) {
    return (long long)json_integer_value(json_object_get(o, key));
}

/* Bytes as "3.2 MiB" or "–" when the runner has no number (0). */
static void bytes_cell(w_buf *b, const json_t *o, const char *key) {
    long long v = int_of(o, key);
    if (v > 0)
        w_bytes(b, (double)v);
    else
        w_raw(b, "–");
}

/* The knobs the search set, short as in `dtrain dsat`'s summary (docs/dsat.md, KNOBS); "–" for
 * none (the user's settings). */
static void knobs(w_buf *b, const json_t *k) {
    static const char *const flags[][2] = {{"overlap_comm", "oc"},
                                           {"reduce_scatter", "rs"},
                                           {"contiguous_gradients", "cg"},
                                           {"allgather_partitions", "ap"}};
    size_t start = b->len;
    long long rb = int_of(k, "reduce_bucket_size"), ab = int_of(k, "allgather_bucket_size");
    if (rb > 0) w_escf(b, "rb=%.0e", (double)rb);
    if (ab > 0) w_escf(b, "%sab=%.0e", b->len > start ? " " : "", (double)ab);
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
        long long v = int_of(k, flags[i][0]);
        if (v >= 0) w_escf(b, "%s%s=%lld", b->len > start ? " " : "", flags[i][1], v);
    }
    if (json_is_true(json_object_get(k, "offload_optimizer")))
        w_raw(b, b->len > start ? " offload" : "offload");
    if (b->len == start) w_raw(b, "–");
}

/* A row of the profile table: the name (and a hint) escaped, then the value's markup (built
 * with the w_ functions), which it frees. */
static void kv_row(w_buf *b, const char *name, const char *hint, w_buf *val) {
    w_raw(b, "<tr><th>");
    w_esc(b, name);
    if (hint) {
        w_raw(b, " <span class=\"hint\">");
        w_esc(b, hint);
        w_raw(b, "</span>");
    }
    w_raw(b, "</th><td>");
    w_raw(b, val->p ? val->p : "");
    w_raw(b, "</td></tr>");
    b->oom |= val->oom;
    free(val->p);
    *val = (w_buf){0};
}

static void profile(w_buf *b, const json_t *d) {
    const json_t *p = json_object_get(d, "profile");
    w_raw(b, "<section><h2>Profile</h2>");
    if (!json_is_object(p)) {
        w_raw(b, "<table id=\"dsat-profile\"><tbody><tr><td>The profile trial has not reported "
                 "yet.</td></tr></tbody></table>");
    } else {
        w_buf v = {0};
        w_raw(b, "<table id=\"dsat-profile\" class=\"kv\"><tbody>");
        w_escf(&v, "%lld (%lld trainable)", int_of(p, "params"), int_of(p, "trainable_params"));
        kv_row(b, "Parameters", NULL, &v);
        w_bytes(&v, (double)int_of(p, "activation_per_example"));
        w_raw(&v, " per example + ");
        w_bytes(&v, (double)int_of(p, "activation_base"));
        w_raw(&v, " per micro-batch");
        kv_row(b, "Activation memory", NULL, &v);
        w_bytes(&v, (double)int_of(p, "device_budget"));
        w_escf(&v, " × %lld slot(s)", int_of(p, "slots"));
        kv_row(b, "Device memory budget", "per slot", &v);
        w_bytes(&v, (double)int_of(p, "measured_peak"));
        kv_row(b, "Measured peak", "micro-batch 1", &v);
        w_escf(&v, "ZeRO stage %lld", int_of(p, "user_stage"));
        kv_row(b, "Profiled at", NULL, &v);
        w_raw(b, "</tbody></table>");
    }
    w_raw(b, "<table id=\"dsat-stages\"><thead><tr><th>ZeRO stage</th><th>Searched</th>"
             "<th>Model states</th><th>Approx. max micro-batch</th></tr></thead><tbody>");
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(d, "stages"), i, s) {
        w_rawf(b, "<tr><td>%lld</td><td>%s</td><td>", int_of(s, "stage"),
               json_is_true(json_object_get(s, "searched")) ? "yes" : "no");
        w_bytes(b, (double)int_of(s, "model_state_bytes"));
        w_rawf(b, "</td><td>%lld</td></tr>", int_of(s, "approx_max_mbs"));
    }
    w_raw(b, "</tbody></table></section>\n");
}

static void trial_row(w_buf *b, const json_t *t, long long best) {
    long long rid = int_of(t, "request_id"), tid = int_of(t, "trial_id");
    const char *result = json_string_value(json_object_get(t, "result"));
    w_rawf(b, "<tr data-request=\"%lld\"%s><td>%lld</td><td>", rid,
           rid == best ? " class=\"best\"" : "", rid);
    if (tid)
        w_rawf(b, "<a href=\"/trials/%lld\">%lld</a>", tid, tid);
    else
        w_raw(b, "–");
    w_raw(b, "</td><td>");
    w_esc(b, json_string_value(json_object_get(t, "kind")));
    w_rawf(b, "</td><td>%lld</td><td>%lld</td><td class=\"hp\">", int_of(t, "stage"),
           int_of(t, "mbs"));
    knobs(b, json_object_get(t, "knobs"));
    w_raw(b, "</td><td>");
    bytes_cell(b, t, "predicted_bytes");
    w_raw(b, "</td><td>");
    bytes_cell(b, t, "measured_bytes");
    w_raw(b, "</td><td>");
    w_num(b, json_object_get(t, "metric"));
    w_raw(b, "</td><td><span class=\"result ");
    w_esc(b, result);
    w_raw(b, "\">");
    w_esc(b, result);
    w_raw(b, "</span></td></tr>\n");
}

static void trials(w_buf *b, const json_t *d, long long best) {
    const json_t *list = json_object_get(d, "trials");
    w_rawf(b,
           "<section><h2>Trials (%zu)</h2><table id=\"dsat-trials\" class=\"live\"><thead><tr>"
           "<th>Request</th><th>Trial</th><th>Kind</th><th>Stage</th><th>Micro-batch</th>"
           "<th>Knobs</th><th>Predicted</th><th>Measured</th><th>",
           json_array_size(list));
    w_esc(b, json_string_value(json_object_get(d, "metric")));
    w_raw(b, "</th><th>Result</th></tr></thead><tbody>\n");
    size_t i;
    json_t *t;
    json_array_foreach(list, i, t) trial_row(b, t, best);
    if (!json_array_size(list)) w_raw(b, "<tr><td colspan=\"10\">No trial yet.</td></tr>");
    w_raw(b, "</tbody></table><p class=\"hint\">Knobs: rb / ab reduce / allgather bucket sizes, "
             "oc overlap_comm, rs reduce_scatter, cg contiguous_gradients, ap "
             "allgather_partitions (1 on, 0 off), offload: the optimizer offloaded; the others "
             "keep the user's settings. Predicted: the memory model's peak; measured: the "
             "device's peak the trial saw.</p></section>\n");
}

static void best_config(w_buf *b, long long id, const json_t *best) {
    w_raw(b, "<section id=\"dsat-best\"><h2>Best configuration</h2>");
    if (!json_is_object(best)) {
        w_raw(b, "<p>No trial has succeeded yet.</p></section>\n");
        return;
    }
    const json_t *k = json_object_get(best, "knobs");
    long long tid = int_of(best, "trial_id");
    w_rawf(b, "<p>Request %lld", int_of(best, "request_id"));
    if (tid) w_rawf(b, " (<a href=\"/trials/%lld\">trial %lld</a>)", tid, tid);
    w_raw(b, ": ");
    w_esc(b, json_string_value(json_object_get(best, "metric")));
    w_raw(b, " ");
    w_num(b, json_object_get(best, "value"));
    w_rawf(b, " at ZeRO stage %lld, micro-batch %lld. ", int_of(k, "zero_stage"), int_of(k, "mbs"));
    w_rawf(b,
           "<a id=\"best-download\" href=\"/experiments/%lld/best_ds_config.json\" "
           "download>download best_ds_config.json</a> <button type=\"button\" id=\"best-copy\">"
           "copy</button> <span id=\"best-copied\" class=\"hint\"></span></p>",
           id);
    char *s = dt_json_dumps(json_object_get(best, "ds_config"), JSON_INDENT(2) | JSON_SORT_KEYS);
    if (!s) b->oom = true;
    w_raw(b, "<pre id=\"best-config\" class=\"config\">");
    w_esc(b, s);
    w_raw(b, "</pre></section>\n");
    free(s);
}

static void runner_log(w_buf *b, const json_t *d) {
    w_raw(b, "<section><h2>The search runner's log</h2><pre id=\"dsat-log\" class=\"logs\">");
    size_t i;
    json_t *l;
    json_array_foreach(json_object_get(d, "log"), i, l) {
        w_esc(b, json_string_value(l));
        w_raw(b, "\n");
    }
    w_raw(b, "</pre></section>\n");
}

static const char HEADER[] =
    "<h1>dsat search {{id}}: {{name}} <small><a href=\"/experiments/{{id}}\">the experiment"
    "</a></small></h1>\n<div class=\"summary\" id=\"dsat\" data-exp=\"{{id}}\" "
    "data-state=\"{{state}}\"><span>State {{{badge}}}</span> <span>Method {{method}}</span> "
    "<span>Metric {{metric}} ({{direction}})</span> <span>Stages {{stages}}</span> "
    "<span id=\"dsat-reason\">{{reason}}</span></div>\n";

static const char CHART[] =
    "<section><h2>{{metric}} against micro-batch, per ZeRO stage</h2><div id=\"dsat-chart\" "
    "class=\"chart\" data-exp=\"{{id}}\"></div><noscript><p>The chart needs JavaScript; the "
    "tables do not.</p></noscript><p class=\"hint\">Lines join a stage's successful trials; "
    "crosses on the axis are trials that ran out of memory or failed.</p></section>\n";

void w_get_dsat(void *app, const dt_http_req *req, dt_http_resp *resp) {
    (void)app;
    long long id;
    if (!w_id(req, 0, &id, resp)) return;
    char target[96];
    snprintf(target, sizeof target, "/api/v1/experiments/%lld", id);
    json_t *exp = w_api(req, target, resp);
    json_t *d = exp ? dsat_api(req, id, resp) : NULL;
    if (!d) {
        json_decref(exp);
        return;
    }
    const json_t *e = json_object_get(exp, "experiment"), *best = json_object_get(d, "best");
    const char *state = json_string_value(json_object_get(d, "state"));
    const char *reason = json_string_value(json_object_get(d, "reason"));
    w_buf badge = {0}, b = {0};
    w_state(&badge, state);
    char sid[32], stages[32] = "";
    snprintf(sid, sizeof sid, "%lld", id);
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(d, "zero_stages"), i, s) {
        size_t n = strlen(stages);
        snprintf(stages + n, sizeof stages - n, "%s%lld", i ? " " : "",
                 (long long)json_integer_value(s));
    }
    char why[2200];
    snprintf(why, sizeof why, "%s%s",
             json_is_true(json_object_get(d, "done")) ? "The search is over: " : "Searching",
             json_is_true(json_object_get(d, "done")) && reason ? reason : "");
    const char *kv[] = {"id",
                        sid,
                        "name",
                        json_string_value(json_object_get(e, "name")),
                        "state",
                        state,
                        "badge",
                        badge.p,
                        "method",
                        json_string_value(json_object_get(d, "method")),
                        "metric",
                        json_string_value(json_object_get(d, "metric")),
                        "direction",
                        json_is_true(json_object_get(d, "smaller_is_better")) ? "smaller is better"
                                                                              : "larger is better",
                        "stages",
                        stages,
                        "reason",
                        why,
                        NULL};
    w_fill(&b, HEADER, kv);
    profile(&b, d);
    w_fill(&b, CHART, kv);
    trials(&b, d, json_is_object(best) ? int_of(best, "request_id") : 0);
    best_config(&b, id, best);
    runner_log(&b, d);
    free(badge.p);
    json_decref(exp);
    json_decref(d);
    w_page(resp, &b, "dsat search %lld", id);
}

void w_get_best_ds_config(void *app, const dt_http_req *req, dt_http_resp *resp) {
    (void)app;
    long long id;
    if (!w_id(req, 0, &id, resp)) return;
    json_t *d = dsat_api(req, id, resp);
    if (!d) return;
    const json_t *config = json_object_get(json_object_get(d, "best"), "ds_config");
    char *s = config ? dt_json_dumps(config, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    json_decref(d);
    if (!config) {
        dt_http_error(resp, 404,
                      "experiment %lld has no best configuration yet; hint: it appears once a "
                      "trial of the search has succeeded",
                      id);
        return;
    }
    if (!s) {
        dt_http_error(resp, 500, "out of memory writing the best configuration of %lld", id);
        return;
    }
    size_t n = strlen(s);
    json_decref(resp->json);
    resp->json = NULL;
    resp->raw = s;
    resp->raw_len = n;
    resp->content_type = "application/json";
    resp->disposition = "attachment; filename=\"best_ds_config.json\"";
}
