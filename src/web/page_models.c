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

static void model_row(w_buf *b, const json_t *m) {
    const char *name = json_string_value(json_object_get(m, "name"));
    w_raw(b, "<tr><td><a href=\"/models/");
    w_esc(b, name);
    w_raw(b, "\">");
    w_esc(b, name);
    w_rawf(b, "</a></td><td>%lld</td><td>",
           (long long)json_integer_value(json_object_get(m, "num_versions")));
    w_esc(b, json_string_value(json_object_get(m, "description")));
    w_raw(b, "</td><td>");
    cell_json(b, json_object_get(m, "labels"));
    w_raw(b, "</td><td>");
    w_esc(b, json_string_value(json_object_get(m, "last_updated")));
    w_raw(b, "</td></tr>\n");
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

static void version_row(w_buf *b, const json_t *v) {
    const json_t *exp = json_object_get(v, "experiment_id"),
                 *trial = json_object_get(v, "trial_id");
    const char *state = json_string_value(json_object_get(v, "checkpoint_state"));
    w_rawf(b, "<tr><td>%lld</td><td class=\"uuid\">",
           (long long)json_integer_value(json_object_get(v, "version")));
    w_esc(b, json_string_value(json_object_get(v, "checkpoint_uuid")));
    w_raw(b, "</td><td>");
    w_state(b, state ? state : "MISSING");
    w_raw(b, "</td><td>");
    if (json_is_integer(exp))
        w_rawf(b, "<a href=\"/experiments/%lld\">%lld</a>", (long long)json_integer_value(exp),
               (long long)json_integer_value(exp));
    else
        w_raw(b, "–");
    w_raw(b, "</td><td>");
    if (json_is_integer(trial))
        w_rawf(b, "<a href=\"/trials/%lld\">%lld</a>", (long long)json_integer_value(trial),
               (long long)json_integer_value(trial));
    else
        w_raw(b, "–");
    w_raw(b, "</td><td>");
    cell_json(b, json_object_get(v, "batches"));
    w_raw(b, "</td><td>");
    cell_json(b, json_object_get(v, "metrics"));
    w_raw(b, "</td><td>");
    w_esc(b, json_string_value(json_object_get(v, "creation_time")));
    w_raw(b, "</td></tr>\n");
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
    json_array_foreach(versions, i, v) version_row(&b, v);
    if (!json_array_size(versions))
        w_raw(&b, "<tr><td colspan=\"8\">No versions yet: <code>dtrain model register-version "
                  "NAME CHECKPOINT_UUID</code> adds one.</td></tr>");
    w_raw(&b, "</tbody></table></section>\n");
    json_decref(ans);
    w_page(resp, &b, "Model %s", name);
}
