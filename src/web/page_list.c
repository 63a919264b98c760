/*
 * page_list.c — GET /: the experiments table from GET /api/v1/experiments. Filter by state and
 * name and sort by any column through the query string (state, name, sort, order), so a link
 * keeps the view and the page works without JavaScript; app.js refreshes the table in place.
 */
#define _GNU_SOURCE
#include "web_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const COLUMNS[][2] = {{"id", "ID"},
                                         {"name", "Name"},
                                         {"state", "State"},
                                         {"searcher", "Searcher"},
                                         {"best", "Best"},
                                         {"trials", "Trials"},
                                         {"progress", "Progress"},
                                         {"start", "Started"},
                                         {"duration", "Duration"},
                                         {"checkpoints", "Checkpoints"}};
#define N_COLUMNS (int)(sizeof COLUMNS / sizeof *COLUMNS)
static const char *const STATES[] = {"ACTIVE", "PAUSED", "COMPLETED", "CANCELED", "ERROR"};

static const char *searcher_name(const json_t *e) {
    const char *s = json_string_value(
        json_object_get(json_object_get(json_object_get(e, "config"), "searcher"), "name"));
    return s ? s : "";
}

/* The sort key: a number (numeric columns) or a string. */
static double num_key(const json_t *e, const char *col) {
    const char *k = !strcmp(col, "best")          ? "best_metric"
                    : !strcmp(col, "trials")      ? "num_trials"
                    : !strcmp(col, "progress")    ? "progress"
                    : !strcmp(col, "checkpoints") ? "checkpoint_bytes"
                                                  : "id";
    const json_t *v = json_object_get(e, k);
    return json_is_number(v) ? json_number_value(v) : -INFINITY;
}

static const char *str_key(const json_t *e, const char *col) {
    if (!strcmp(col, "searcher")) return searcher_name(e);
    const char *k = !strcmp(col, "name") ? "name" : !strcmp(col, "state") ? "state" : "start_time";
    const char *s = json_string_value(json_object_get(e, k));
    return s ? s : "";
}

static bool string_column(const char *col) {
    return !strcmp(col, "name") || !strcmp(col, "state") || !strcmp(col, "searcher") ||
           !strcmp(col, "start") || !strcmp(col, "duration");
}

typedef struct sort_ctx {
    const char *col;
    int dir;
} sort_ctx;

static int cmp(const void *a, const void *b, void *ctx) {
    const sort_ctx *o = ctx;
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int c;
    if (string_column(o->col)) {
        c = strcmp(str_key(x, o->col), str_key(y, o->col));
    } else {
        double u = num_key(x, o->col), v = num_key(y, o->col);
        c = u < v ? -1 : u > v;
    }
    return c * o->dir;
}

static bool known_column(const char *col) {
    for (int i = 0; i < N_COLUMNS; i++)
        if (!strcmp(col, COLUMNS[i][0])) return true;
    return false;
}

/* A link to this page with the filters kept and `sort` / `order` set. */
static void sort_link(w_buf *b, const char *state, const char *name, const char *col,
                      const char *order) {
    w_raw(b, "?sort=");
    w_esc(b, col);
    w_raw(b, "&amp;order=");
    w_esc(b, order);
    if (state && *state) w_raw(b, "&amp;state="), w_esc(b, state);
    if (name && *name) w_raw(b, "&amp;name="), w_esc(b, name);
}

static void row(w_buf *b, const json_t *e) {
    long long id = json_integer_value(json_object_get(e, "id"));
    const json_t *best = json_object_get(e, "best_metric");
    w_rawf(b, "<tr data-id=\"%lld\"><td><a href=\"/experiments/%lld\">%lld</a></td><td>", id, id,
           id);
    w_rawf(b, "<a href=\"/experiments/%lld\">", id);
    w_esc(b, json_string_value(json_object_get(e, "name")));
    w_raw(b, "</a></td><td>");
    w_state(b, json_string_value(json_object_get(e, "state")));
    w_raw(b, "</td><td>");
    w_esc(b, searcher_name(e));
    w_raw(b, "</td><td>");
    w_esc(b, json_string_value(json_object_get(e, "searcher_metric")));
    w_raw(b, " ");
    w_num(b, best);
    w_rawf(b, "</td><td>%lld / %lld</td><td>",
           (long long)json_integer_value(json_object_get(e, "active_trials")),
           (long long)json_integer_value(json_object_get(e, "num_trials")));
    double p = json_number_value(json_object_get(e, "progress"));
    w_rawf(b, "<progress max=\"1\" value=\"%.4f\"></progress> %.0f%%</td><td>", p, 100 * p);
    w_esc(b, json_string_value(json_object_get(e, "start_time")));
    w_raw(b, "</td><td>");
    w_span(b, json_string_value(json_object_get(e, "start_time")),
           json_string_value(json_object_get(e, "end_time")));
    w_rawf(b, "</td><td>%lld · ",
           (long long)json_integer_value(json_object_get(e, "checkpoint_count")));
    w_bytes(b, json_number_value(json_object_get(e, "checkpoint_bytes")));
    w_raw(b, "</td></tr>\n");
}

void w_get_list(void *app, const dt_http_req *req, dt_http_resp *resp) {
    (void)app;
    const char *state = dt_http_query(req, "state"), *name = dt_http_query(req, "name"),
               *sort = dt_http_query(req, "sort"), *order = dt_http_query(req, "order");
    if (!sort || !known_column(sort)) sort = "id";
    bool asc = order && !strcmp(order, "asc");
    json_t *ans = w_api(req, "/api/v1/experiments", resp);
    if (!ans) return;
    json_t *all = json_object_get(ans, "experiments");
    size_t n = 0, i;
    json_t *e, **rows = calloc(json_array_size(all) + 1, sizeof *rows);
    if (!rows) {
        json_decref(ans);
        dt_http_error(resp, 500, "out of memory listing experiments");
        return;
    }
    json_array_foreach(all, i, e) {
        const char *s = json_string_value(json_object_get(e, "state")),
                   *nm = json_string_value(json_object_get(e, "name"));
        if (state && *state && (!s || strcmp(s, state))) continue;
        if (name && *name && (!nm || !strcasestr(nm, name))) continue;
        rows[n++] = e;
    }
    sort_ctx sc = {sort, asc ? 1 : -1};
    qsort_r(rows, n, sizeof *rows, cmp, &sc);

    w_buf b = {0};
    w_raw(&b, "<h1>Experiments</h1>\n<form class=\"filters\" method=\"get\" action=\"/\">"
              "<label>State <select name=\"state\"><option value=\"\">any</option>");
    for (int k = 0; k < (int)(sizeof STATES / sizeof *STATES); k++) {
        w_raw(&b, "<option");
        if (state && !strcmp(state, STATES[k])) w_raw(&b, " selected");
        w_raw(&b, ">");
        w_esc(&b, STATES[k]);
        w_raw(&b, "</option>");
    }
    w_raw(&b, "</select></label> <label>Name <input name=\"name\" value=\"");
    w_esc(&b, name);
    w_raw(&b, "\"></label><input type=\"hidden\" name=\"sort\" value=\"");
    w_esc(&b, sort);
    w_raw(&b, "\"><input type=\"hidden\" name=\"order\" value=\"");
    w_esc(&b, asc ? "asc" : "desc");
    w_raw(&b, "\"> <button>Filter</button></form>\n"
              "<table id=\"experiments\" class=\"live\" data-live=\"experiments\"><thead><tr>");
    for (int k = 0; k < N_COLUMNS; k++) {
        bool on = !strcmp(sort, COLUMNS[k][0]);
        w_raw(&b, "<th><a href=\"");
        sort_link(&b, state, name, COLUMNS[k][0], on && !asc ? "asc" : "desc");
        w_raw(&b, "\">");
        w_esc(&b, COLUMNS[k][1]);
        if (on) w_raw(&b, asc ? " ▲" : " ▼");
        w_raw(&b, "</a></th>");
    }
    w_raw(&b, "</tr></thead><tbody>\n");
    for (size_t k = 0; k < n; k++) row(&b, rows[k]);
    if (!n)
        w_rawf(&b, "<tr><td colspan=\"%d\">No experiments%s.</td></tr>", N_COLUMNS,
               (state && *state) || (name && *name) ? " match the filter" : " yet");
    w_raw(&b, "</tbody></table>\n");
    free(rows);
    json_decref(ans);
    w_page(resp, &b, "Experiments");
}
