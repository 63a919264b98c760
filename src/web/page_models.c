/*
 * page_models.c — the model registry's pages: GET /models, every model from
 * GET /api/v1/models; GET /models/{name}, one model and its versions from
 * GET /api/v1/models/{name}, each version linked to its checkpoint's trial and experiment.
 */
#include "web_impl.h"

#include <stdio.h>
#include <string.h>

/* A JSON value's compact text, escaped ("–" for null or missing). */
static void cell_json(w_buf *b, const json_t *v) {
    if (!v || json_is_null(v)) {
        w_raw(b, "–");
        return;
    }
    if (json_is_string(v)) {
        w_esc(b, json_string_value(v));
        return;
    }
    w_esc_json(b, v);
}

/* How a cell shows its member: escaped text, compact JSON, a link to the page of the id, a
 * state badge (MISSING when absent). */
typedef enum { C_TEXT, C_JSON, C_EXP, C_TRIAL, C_STATE } cell_kind;
typedef struct cell {
    const char *key;
    cell_kind kind;
} cell;

/* The cells of `obj` that `cols` name, then the end of the row. */
static void cells(w_buf *b, const json_t *obj, const cell *cols, int n) {
    for (int k = 0; k < n; k++) {
        const json_t *v = json_object_get(obj, cols[k].key);
        long long id = json_integer_value(v);
        w_raw(b, "<td>");
        if (cols[k].kind == C_TEXT)
            w_esc(b, json_string_value(v));
        else if (cols[k].kind == C_STATE)
            w_state(b, json_is_string(v) ? json_string_value(v) : "MISSING");
        else if (cols[k].kind == C_JSON || !json_is_integer(v))
            cell_json(b, v);
        else if (cols[k].kind == C_EXP)
            w_rawf(b, "<a href=\"/experiments/%lld\">%lld</a>", id, id);
        else
            w_rawf(b, "<a href=\"/trials/%lld\">%lld</a>", id, id);
        w_raw(b, "</td>");
    }
    w_raw(b, "</tr>\n");
}

static const cell MODEL_COLS[] = {{"num_versions", C_JSON},
                                  {"description", C_TEXT},
                                  {"labels", C_JSON},
                                  {"last_updated", C_TEXT}};
static const cell VERSION_COLS[] = {{"version", C_JSON},           {"checkpoint_uuid", C_TEXT},
                                    {"checkpoint_state", C_STATE}, {"experiment_id", C_EXP},
                                    {"trial_id", C_TRIAL},         {"batches", C_JSON},
                                    {"metrics", C_JSON},           {"creation_time", C_TEXT}};

/* A model's row: its name linked to its page, then MODEL_COLS. */
static void model_row(w_buf *b, const json_t *m) {
    const char *name = json_string_value(json_object_get(m, "name"));
    w_raw(b, "<tr><td><a href=\"/models/");
    w_esc(b, name);
    w_raw(b, "\">");
    w_esc(b, name);
    w_raw(b, "</a></td>");
    cells(b, m, MODEL_COLS, (int)(sizeof MODEL_COLS / sizeof *MODEL_COLS));
}

void w_get_models(void *app, const dt_http_req *req, dt_http_resp *resp) {
    (void)app;
    json_t *ans = w_api(req, "/api/v1/models", resp);
    if (!ans) return;
    const json_t *models = json_object_get(ans, "models");
    w_buf b = {0};
    w_raw(&b, "<h1>Models</h1>\n<table id=\"models\"><thead><tr><th>Name</th><th>Versions</th>"
              "<th>Description</th><th>Labels</th><th>Updated</th></tr></thead><tbody>\n");
    size_t i;
    json_t *m;
    json_array_foreach(models, i, m) model_row(&b, m);
    if (!json_array_size(models))
        w_raw(&b, "<tr><td colspan=\"5\">No models yet: <code>dtrain model create NAME</code> "
                  "makes one.</td></tr>");
    w_raw(&b, "</tbody></table>\n");
    json_decref(ans);
    w_page(resp, &b, "Models");
}

void w_get_model(void *app, const dt_http_req *req, dt_http_resp *resp) {
    (void)app;
    const char *name = req->params[0];
    /* the registry's names are letters, digits, '.', '_' and '-': anything else is no model,
     * and what is asked of the API is never more than such a name */
    if (!*name ||
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
            strlen(name) ||
        strlen(name) > 128) {
        dt_http_error(resp, 404, "no such model; hint: /models lists them");
        return;
    }
    char target[200];
    snprintf(target, sizeof target, "/api/v1/models/%s", name);
    json_t *ans = w_api(req, target, resp);
    if (!ans) return;
    const json_t *m = json_object_get(ans, "model"), *versions = json_object_get(ans, "versions");
    w_buf b = {0};
    w_raw(&b, "<h1>Model ");
    w_esc(&b, name);
    w_raw(&b, " <small><a href=\"/models\">all models</a></small></h1>\n<p>");
    w_esc(&b, json_string_value(json_object_get(m, "description")));
    w_raw(&b, "</p>\n<div class=\"summary\"><span>Labels ");
    cell_json(&b, json_object_get(m, "labels"));
    w_raw(&b, "</span> <span>Created ");
    w_esc(&b, json_string_value(json_object_get(m, "creation_time")));
    w_raw(&b,
          "</span></div>\n<section><h2>Versions</h2><table id=\"versions\"><thead><tr>"
          "<th>Version</th><th>Checkpoint</th><th>State</th><th>Experiment</th><th>Trial</th>"
          "<th>Batches</th><th>Validation metrics</th><th>Registered</th></tr></thead><tbody>\n");
    size_t i;
    json_t *v;
    json_array_foreach(versions, i, v) {
        w_raw(&b, "<tr>");
        cells(&b, v, VERSION_COLS, (int)(sizeof VERSION_COLS / sizeof *VERSION_COLS));
    }
    if (!json_array_size(versions))
        w_raw(&b, "<tr><td colspan=\"8\">No versions yet: <code>dtrain model register-version "
                  "NAME CHECKPOINT_UUID</code> adds one.</td></tr>");
    w_raw(&b, "</tbody></table></section>\n");
    json_decref(ans);
    w_page(resp, &b, "Model %s", name);
}
