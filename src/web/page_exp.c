/*
 * page_exp.c — GET /experiments/{id}: the header (state, progress, searcher, the config as
 * submitted, the pause / activate / kill forms), the learning curves and hyperparameter views
 * (drawn by app.js from the API), the trials table (paged, ?page=N) and, for adaptive_asha, the
 * brackets and rungs of the searcher snapshot; for a dsat search, a link to its page
 * (page_dsat.c). POST /experiments/{id}/{action}: the no-JS form's state change through the
 * REST API, then back to the page (303).
 */
#include "web_impl.h"

#include "dtrain/config.h"
#include "base/numtext.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRIALS_PER_PAGE 50

/* The forms of the actions the experiment's state allows (the API's `actions`, from the master's
 * state table): none on an ended experiment. The page's form token stands in a form of its own,
 * always present, for scripts and tests to read. */
static void actions(w_buf *b, long long id, const json_t *allowed, const dt_http_req *req) {
    w_raw(b, "<form id=\"csrf\" hidden>");
    w_csrf_field(b, req);
    w_raw(b, "</form><div class=\"actions\" id=\"exp-actions\">");
    size_t i;
    json_t *a;
    json_array_foreach(allowed, i, a) {
        const char *act = json_string_value(a);
        if (!act) continue;
        w_rawf(b, "<form method=\"post\" action=\"/experiments/%lld/", id);
        w_esc(b, act);
        w_raw(b, "\">");
        w_csrf_field(b, req);
        w_raw(b, "<button class=\"act-");
        w_esc(b, act);
        w_raw(b, "\">");
        w_esc(b, act);
        w_raw(b, "</button></form>");
    }
    w_raw(b, "</div>\n");
}

static const char HEADER[] =
    "<h1>Experiment {{id}}: {{name}}</h1>\n"
    "<div class=\"summary\" id=\"exp\" data-exp=\"{{id}}\" data-state=\"{{state}}\" "
    "data-metric=\"{{metric}}\">"
    "<span>State {{{state_badge}}}</span> <span>Progress <progress id=\"exp-progress\" max=\"1\" "
    "value=\"{{progress}}\"></progress> <span id=\"exp-progress-text\">{{percent}}</span></span> "
    "<span>Searcher {{searcher}}</span> <span>Metric {{metric}} (best <span id=\"exp-best\">"
    "{{best}}</span>)</span> <span>Trials {{trials}}</span> <span>Started {{start}}</span>"
    "</div>\n{{{dsat}}}{{{actions}}}{{{warnings}}}"
    "<details><summary>Configuration</summary><pre class=\"config\">{{config}}</pre></details>\n";

static const char VIEWS[] =
    "<section><h2>Learning curves</h2><div class=\"controls\" id=\"curve-controls\">"
    "<label>Kind <select id=\"curve-kind\"><option>validation</option><option>training</option>"
    "</select></label> <label>Metric <select id=\"curve-metric\"></select></label> "
    "<label>x <select id=\"curve-x\"><option>batches</option><option>records</option>"
    "<option>epochs</option></select></label> <label><input type=\"checkbox\" id=\"curve-log\">"
    " log scale</label></div><div id=\"curves\" class=\"chart\" data-exp=\"{{id}}\"></div>"
    "<div id=\"curves-legend\" class=\"legend\"></div>"
    "<noscript><p>The charts need JavaScript; the tables below do not.</p></noscript></section>\n"
    "<section><h2>Hyperparameters</h2><div id=\"hp-parallel\" class=\"chart\"></div>"
    "<div id=\"hp-scatter\" class=\"scatter\"></div></section>\n";

/* The config's warnings (keys without effect here, unknown keys), as experiment create printed
 * them: the stored config text and model directory checked again by the same code. */
static void config_warnings(w_buf *b, const json_t *e) {
    const char *text = json_string_value(json_object_get(e, "config_text"));
    const char *dir = json_string_value(json_object_get(e, "model_dir"));
    dt_expconf *cfg = NULL;
    const char *name = json_string_value(json_object_get(e, "config_name")); /* as given */
    if (!text ||
        dt_expconf_load_string(text, name ? name : "config", DT_EXPCONF_MAX_LENGTH_OPTIONAL, &cfg))
        return;
    if (dir) (void)dt_expconf_check_model_dir(cfg, dir); /* its warnings; an error changes none */
    if (cfg->n_warnings) {
        w_rawf(b,
               "<details class=\"config-warnings\" id=\"config-warnings\"><summary>%d config "
               "warning%s</summary><ul>",
               cfg->n_warnings, cfg->n_warnings == 1 ? "" : "s");
        for (int i = 0; i < cfg->n_warnings; i++) {
            w_raw(b, "<li>");
            w_esc(b, cfg->warnings[i]);
            w_raw(b, "</li>");
        }
        w_raw(b, "</ul></details>\n");
    }
    dt_expconf_free(cfg);
}

/* "k=v, k=v" of a trial's hyperparameters, escaped. */
static void hparams(w_buf *b, const json_t *hp) {
    const char *k;
    json_t *v;
    bool first = true;
    json_object_foreach((json_t *)hp, k, v) {
        if (!first) w_raw(b, ", ");
        first = false;
        w_esc(b, k);
        w_raw(b, "=");
        char *s = dt_json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        w_esc(b, json_is_string(v) ? json_string_value(v) : s);
        free(s);
    }
}

static void trial_row(w_buf *b, const json_t *t) {
    long long id = json_integer_value(json_object_get(t, "id"));
    w_rawf(b, "<tr data-id=\"%lld\"><td><a href=\"/trials/%lld\">%lld</a></td><td>", id, id, id);
    w_state(b, json_string_value(json_object_get(t, "state")));
    w_raw(b, "</td><td class=\"hp\">");
    hparams(b, json_object_get(t, "hparams"));
    w_rawf(b, "</td><td>%lld</td><td>",
           (long long)json_integer_value(json_object_get(t, "batches")));
    w_num(b, json_object_get(t, "best_validation"));
    w_raw(b, "</td><td>");
    w_num(b, json_object_get(t, "latest_validation"));
    w_rawf(b, "</td><td>%lld</td><td class=\"uuid\">",
           (long long)json_integer_value(json_object_get(t, "restarts")));
    const char *ck = json_string_value(json_object_get(t, "latest_checkpoint"));
    w_esc(b, ck ? ck : "–");
    w_raw(b, "</td></tr>\n");
}

static void trials_table(w_buf *b, long long id, const json_t *ans, long long page) {
    long long total = json_integer_value(json_object_get(ans, "total"));
    long long pages = total ? (total + TRIALS_PER_PAGE - 1) / TRIALS_PER_PAGE : 1;
    w_rawf(b,
           "<section><h2>Trials (%lld)</h2><table id=\"trials\" class=\"live\"><thead><tr>"
           "<th>ID</th><th>State</th><th>Hyperparameters</th><th>Batches</th>"
           "<th>Best validation</th><th>Latest validation</th><th>Restarts</th>"
           "<th>Checkpoint</th></tr></thead><tbody>\n",
           total);
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(ans, "trials"), i, t) trial_row(b, t);
    w_raw(b, "</tbody></table>");
    if (pages > 1) {
        w_raw(b, "<nav class=\"pages\">");
        for (long long p = 1; p <= pages; p++)
            w_rawf(b,
                   p == page ? " <b>%lld</b>" : " <a href=\"/experiments/%lld?page=%lld\">%lld</a>",
                   p == page ? p : id, p, p);
        w_raw(b, "</nav>");
    }
    w_raw(b, "</section>\n");
}

/* The trial id of a searcher request id (adaptive_asha's rungs name request ids), or 0. */
static long long trial_of_request(const json_t *trials, long long request) {
    size_t i;
    json_t *t;
    json_array_foreach(trials, i,
                       t) if (json_integer_value(json_object_get(t, "request_id")) ==
                              request) return json_integer_value(json_object_get(t, "id"));
    return 0;
}

/* adaptive_asha: per bracket, per rung, the trials that reached it with their metric; those
 * that reached the next rung are marked promoted, the others stopped there. */
static void rungs(w_buf *b, const json_t *snap, const json_t *trials) {
    const json_t *brackets = json_object_get(json_object_get(snap, "method"), "brackets");
    if (!json_is_array(brackets) || !json_array_size(brackets)) return;
    w_raw(b, "<section><h2>Brackets and rungs</h2><div class=\"rungs\">");
    size_t k, r;
    json_t *br, *rung;
    json_array_foreach(brackets, k, br) {
        const json_t *rs = json_object_get(br, "rungs");
        w_rawf(b,
               "<table class=\"bracket\"><caption>Bracket %zu</caption><thead><tr><th>Rung</th>"
               "<th>Trials (metric)</th></tr></thead><tbody>",
               k);
        json_array_foreach(rs, r, rung) {
            const json_t *next = json_array_get(rs, r + 1);
            w_rawf(b, "<tr><td>%zu</td><td>", r);
            for (size_t j = 0; j + 1 < json_array_size(rung); j += 2) {
                long long req = json_integer_value(json_array_get(rung, j));
                bool promoted = false;
                for (size_t q = 0; next && q < json_array_size(next); q += 2)
                    promoted |= json_integer_value(json_array_get(next, q)) == req;
                long long tid = trial_of_request(trials, req);
                w_raw(b, promoted ? "<span class=\"promoted\" title=\"promoted\">"
                                  : "<span class=\"stopped\" title=\"stopped here\">");
                if (tid)
                    w_rawf(b, "<a href=\"/trials/%lld\">%lld</a>", tid, tid);
                else
                    w_rawf(b, "request %lld", req);
                w_raw(b, " (");
                w_num(b, json_array_get(rung, j + 1));
                w_raw(b, ")</span> ");
            }
            w_raw(b, "</td></tr>");
        }
        w_raw(b, "</tbody></table>");
    }
    w_raw(b, "</div><p class=\"hint\">Bold: promoted to the next rung; plain: stopped at the "
             "rung.</p></section>\n");
}

void w_get_experiment(void *app, const dt_http_req *req, dt_http_resp *resp) {
    (void)app;
    long long id;
    if (!w_id(req, 0, &id, resp)) return;
    long long page = 1;
    const char *ps = dt_http_query(req, "page");
    if (ps && sscanf(ps, "%lld", &page) != 1) page = 1;
    if (page < 1) page = 1;
    char target[256];
    snprintf(target, sizeof target, "/api/v1/experiments/%lld", id);
    json_t *exp = w_api(req, target, resp);
    if (!exp) return;
    snprintf(target, sizeof target, "/api/v1/experiments/%lld/trials?offset=%lld&limit=%d", id,
             (page - 1) * TRIALS_PER_PAGE, TRIALS_PER_PAGE);
    json_t *trials = w_api(req, target, resp);
    snprintf(target, sizeof target, "/api/v1/experiments/%lld/searcher", id);
    json_t *snap = trials ? w_api(req, target, resp) : NULL;
    if (!snap) {
        json_decref(exp);
        json_decref(trials);
        return;
    }
    const json_t *e = json_object_get(exp, "experiment");
    w_buf badge = {0}, acts = {0}, b = {0};
    const char *state = json_string_value(json_object_get(e, "state"));
    w_state(&badge, state);
    actions(&acts, id, json_object_get(e, "actions"), req);
    char sid[32], prog[32], pct[32], best[64], ntr[64];
    double p = json_number_value(json_object_get(e, "progress"));
    const json_t *bm = json_object_get(e, "best_metric");
    snprintf(sid, sizeof sid, "%lld", id);
    snprintf(prog, sizeof prog, "%.4f", p);
    snprintf(pct, sizeof pct, "%.0f%%", 100 * p);
    if (json_is_number(bm))
        dt_fmt_double(json_number_value(bm), best);
    else
        snprintf(best, sizeof best, "–");
    snprintf(ntr, sizeof ntr, "%lld active / %lld",
             (long long)json_integer_value(json_object_get(e, "active_trials")),
             (long long)json_integer_value(json_object_get(e, "num_trials")));
    const char *searcher = json_string_value(
        json_object_get(json_object_get(json_object_get(e, "config"), "searcher"), "name"));
    w_buf dsat = {0}; /* a dsat search: the link to its results */
    if (searcher && !strcmp(searcher, "dsat"))
        w_rawf(&dsat,
               "<p class=\"dsat-link\"><a id=\"dsat-link\" href=\"/experiments/%lld/dsat\">"
               "dsat results: the profile, every trial, the metric per ZeRO stage and the best "
               "configuration</a></p>\n",
               id);
    w_buf warn = {0};
    config_warnings(&warn, e);
    const char *kv[] = {"warnings",    warn.p ? warn.p : "",
                        "id",          sid,
                        "name",        json_string_value(json_object_get(e, "name")),
                        "state",       state,
                        "state_badge", badge.p,
                        "progress",    prog,
                        "percent",     pct,
                        "searcher",    searcher,
                        "metric",      json_string_value(json_object_get(e, "searcher_metric")),
                        "best",        best,
                        "trials",      ntr,
                        "start",       json_string_value(json_object_get(e, "start_time")),
                        "actions",     acts.p,
                        "dsat",        dsat.p,
                        "config",      json_string_value(json_object_get(e, "config_text")),
                        NULL};
    w_fill(&b, HEADER, kv);
    w_fill(&b, VIEWS, kv);
    trials_table(&b, id, trials, page);
    rungs(&b, json_object_get(snap, "searcher"), json_object_get(trials, "trials"));
    free(badge.p);
    free(acts.p);
    free(dsat.p);
    free(warn.p);
    json_decref(exp);
    json_decref(trials);
    json_decref(snap);
    w_page(resp, &b, "Experiment %lld", id);
}

void w_post_experiment_action(void *app, const dt_http_req *req, dt_http_resp *resp) {
    (void)app;
    long long id;
    if (!w_id(req, 0, &id, resp)) return;
    const char *act = req->params[1];
    if (strcmp(act, "pause") && strcmp(act, "activate") && strcmp(act, "kill") &&
        strcmp(act, "cancel")) {
        dt_http_error(resp, 404, "no action %s; hint: pause, activate, cancel or kill", act);
        return;
    }
    char target[128];
    snprintf(target, sizeof target, "/api/v1/experiments/%lld/%s", id, act);
    json_t *ans = NULL;
    int status = 0;
    dt_http_call(req->server, "POST", target, &ans, &status);
    if (status != 200) {
        const char *msg = json_string_value(json_object_get(ans, "error"));
        dt_http_error(resp, status ? status : 500, "%s", msg ? msg : "the action failed");
    } else {
        resp->status = 303;
        snprintf(resp->location, sizeof resp->location, "/experiments/%lld", id);
        resp->json = json_object();
    }
    json_decref(ans);
}
