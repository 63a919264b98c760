/*
 * routes.c — the web UI's route table (dt_web_routes), served by the master after its REST
 * API's routes: the pages, their no-JS action forms, the downloads (a trial's logs, a dsat
 * search's best configuration) and the embedded files. Every path a person may type is a page
 * or leads to one: `/experiments` and `/trials` (the lists live at `/`) redirect there, and a
 * trailing slash matches the same route (the router splits on `/`).
 */
#include "web_impl.h"

#include "base/path.h"

#include <stdio.h>
#include <string.h>

/* GET /experiments, /trials: the experiments list, keeping the query (filter and sort). */
static void w_get_to_list(void *app, const dt_http_req *req, dt_http_resp *resp) {
    (void)app;
    char *loc = resp->location;
    size_t n = sizeof resp->location;
    snprintf(loc, n, "/");
    for (int i = 0; i < req->n_args; i++) {
        size_t len = strlen(loc);
        snprintf(loc + len, n - len, i ? "&" : "?");
        if (!dt_url_encode(loc, n, req->args[i][0]) || strlen(loc) + 2 > n) break;
        strcat(loc, "=");
        if (!dt_url_encode(loc, n, req->args[i][1] ? req->args[i][1] : "")) break;
    }
    if (strlen(loc) + 1 >= n) snprintf(loc, n, "/"); /* too long to keep: the plain list */
    resp->status = 302;
    resp->json = json_object();
}

static const dt_http_route ROUTES[] = {
    {"GET", "/", w_get_list},
    {"GET", "/experiments", w_get_to_list},
    {"GET", "/trials", w_get_to_list},
    {"GET", "/experiments/{}", w_get_experiment},
    {"GET", "/experiments/{}/dsat", w_get_dsat},
    {"GET", "/experiments/{}/best_ds_config.json", w_get_best_ds_config},
    {"POST", "/experiments/{}/{}", w_post_experiment_action},
    {"GET", "/trials/{}", w_get_trial},
    {"GET", "/trials/{}/logs.txt", w_get_trial_logs},
    {"GET", "/models", w_get_models},
    {"GET", "/models/{}", w_get_model},
    {"GET", "/static/{}", w_get_asset},
};

const struct dt_http_route *dt_web_routes(int *n) {
    *n = (int)(sizeof ROUTES / sizeof *ROUTES);
    return ROUTES;
}
