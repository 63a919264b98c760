/*
 * assets.c — GET /static/{name}: the files embedded at build time (generated/web_assets.c,
 * from cmake/embed.cmake). A name is looked up in that table and nowhere else, so no request
 * reaches the file system; an unknown name is a 404 JSON error. Answers carry the file's
 * content type and may be cached for a day (they change only with the binary).
 */
#include "web_impl.h"

#include <stdlib.h>
#include <string.h>

void w_get_asset(void *app, const dt_http_req *req, dt_http_resp *resp) {
    (void)app;
    const char *name = req->params[0];
    for (int i = 0; i < w_n_assets; i++) {
        if (strcmp(w_assets[i].name, name)) continue;
        char *copy = malloc(w_assets[i].size ? w_assets[i].size : 1);
        if (!copy) {
            dt_http_error(resp, 500, "out of memory serving %s", name);
            return;
        }
        memcpy(copy, w_assets[i].data, w_assets[i].size);
        json_decref(resp->json);
        resp->json = NULL;
        resp->raw = copy;
        resp->raw_len = w_assets[i].size;
        resp->content_type = w_assets[i].type;
        resp->cache_control = "public, max-age=86400";
        return;
    }
    dt_http_error(resp, 404, "no file %s; hint: the web UI serves only its own embedded files",
                  name);
}
