/*
 * routes.c — the web UI's route table (dt_web_routes), served by the master after its REST
 * API's routes: the pages, their no-JS action forms, the downloads (a trial's logs, a dsat
 * search's best configuration) and the embedded files.
 */
#include "web_impl.h"

static const dt_http_route ROUTES[] = {
    {"GET", "/", w_get_list},
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
