/*
 * api_dsat.c — GET /api/v1/experiments/{id}/dsat (docs/api.md): what a dsat search found, for
 * the web UI's dsat page and any client. It gathers what the search runner (src/dsat/
 * runner.c) already keeps:
 *   - its searcher snapshot in the store: the phase, the profile (as the profile trial reported
 *     it), every trial's record (request id, kind, knobs, predicted and measured bytes, metric,
 *     result) and why the search ended;
 *   - the memory model over that profile: per ZeRO stage the model-state bytes and the
 *     approximate max micro-batch (the numbers the runner logs);
 *   - the experiment's trials, to name each record's trial id and state;
 *   - the files in the experiment's checkpoint directory: best_ds_config.json and
 *     best_ds_metrics.json (the best configuration) and the tail of dsat.log.
 * The file names are fixed here; nothing in the request names a path.
 */
#include "api_impl.h"

#include "dsat/dsat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_TAIL_BYTES (256 * 1024) /* of dsat.log: its last lines */
#define LOG_TAIL_LINES 500

static const char *const PHASES[] = {"profile", "profile", "search", "done"};

/* The profile fields the page shows, from the snapshot's profile (the profile trial's report),
 * and per stage the memory model's numbers; both NULL (json null / []) before the profile. */
static void profile_of(const json_t *saved, const dt_expconf *cfg, json_t *out) {
    const json_t *prof = json_object_get(saved, "profile"), *v;
    const char *key;
    dt_metrics pm = dt_metrics_empty();
    json_object_foreach((json_t *)prof, key, v) dt_metrics_set(&pm, key, json_number_value(v));
    dt_dsat_profile p;
    json_t *stages = json_array();
    if (!json_object_size(prof) || dt_dsat_profile_from_metrics(&pm, &p) != DT_OK) {
        dt_clear_error();
        json_object_set_new(out, "profile", json_null());
        json_object_set_new(out, "stages", stages);
        return;
    }
    json_object_set_new(
        out, "profile",
        json_pack("{sI,sI,sI,sI,sI,sI,sI,si,si}", "params", (json_int_t)p.params,
                  "trainable_params", (json_int_t)p.trainable_params, "activation_per_example",
                  (json_int_t)p.activation_per_example, "activation_base",
                  (json_int_t)p.activation_base, "device_budget", (json_int_t)p.device_budget,
                  "measured_peak", (json_int_t)p.measured_peak, "other_bytes",
                  (json_int_t)p.other_bytes, "slots", p.slots, "user_stage", p.user_stage));
    for (int s = 0; s < 4; s++) {
        bool searched = false;
        for (int i = 0; cfg && i < cfg->searcher.dsat.n_zero_stages; i++)
            searched |= cfg->searcher.dsat.zero_stages[i] == s;
        dt_dsat_knobs k = dt_dsat_knobs_default();
        k.zero_stage = s;
        json_array_append_new(
            stages, json_pack("{si,sb,sI,sI}", "stage", s, "searched", searched,
                              "model_state_bytes", (json_int_t)dt_dsat_model_state_bytes(&p, &k),
                              "approx_max_mbs", (json_int_t)dt_dsat_max_mbs(&p, &k)));
    }
    json_object_set_new(out, "stages", stages);
}

/* The trial row of `request` among the experiment's trials, or NULL. */
static const json_t *trial_of(const json_t *trials, int64_t request) {
    size_t i;
    const json_t *t;
    json_array_foreach(trials, i, t) if (json_integer_value(json_object_get(t, "request_id")) ==
                                         request) return t;
    return NULL;
}

/* The runner's records with their trial's id and state, stage and micro-batch lifted out. */
static json_t *records_of(const json_t *saved, const json_t *trials) {
    json_t *out = json_array();
    size_t i;
    const json_t *r;
    json_array_foreach(json_object_get(saved, "trials"), i, r) {
        const json_t *k = json_object_get(r, "knobs");
        const json_t *t = trial_of(trials, json_integer_value(json_object_get(r, "request_id")));
        json_t *x = json_deep_copy(r);
        json_object_set(x, "stage", json_object_get(k, "zero_stage"));
        json_object_set(x, "mbs", json_object_get(k, "mbs"));
        json_object_set(x, "trial_id", t ? json_object_get(t, "id") : json_null());
        json_object_set(x, "trial_state", t ? json_object_get(t, "state") : json_null());
        json_array_append_new(out, x);
    }
    return out;
}

/* `dir`/`name` as JSON, or NULL when it is missing or not JSON (the search has no best yet). */
static json_t *load_json(const char *dir, const char *name) {
    char p[4600];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return json_load_file(p, 0, NULL);
}

/* The last lines of dsat.log (an empty array when there is none). */
static json_t *log_tail(const char *dir) {
    json_t *lines = json_array();
    char p[4600];
    snprintf(p, sizeof p, "%s/dsat.log", dir);
    FILE *f = fopen(p, "rb");
    if (!f) return lines;
    char *buf = malloc(LOG_TAIL_BYTES + 1);
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    bool cut = size > LOG_TAIL_BYTES;
    size_t n = 0;
    if (buf && size >= 0 && fseek(f, cut ? size - LOG_TAIL_BYTES : 0, SEEK_SET) == 0)
        n = fread(buf, 1, LOG_TAIL_BYTES, f);
    fclose(f);
    if (!buf) return lines;
    buf[n] = 0;
    char *line = buf, *nl;
    if (cut && (nl = strchr(buf, '\n'))) line = nl + 1; /* a cut first line is dropped */
    for (; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (nl) *nl = 0;
        json_array_append_new(lines, json_string(line)); /* NULL (not UTF-8): skipped */
        if (!nl) break;
    }
    free(buf);
    size_t total = json_array_size(lines);
    while (total > LOG_TAIL_LINES) json_array_remove(lines, 0), total--;
    return lines;
}

/* The best configuration: best_ds_metrics.json with best_ds_config.json as ds_config and the
 * best trial's id, or null before any trial succeeded. */
static json_t *best_of(const char *dir, const json_t *trials) {
    json_t *metrics = load_json(dir, "best_ds_metrics.json");
    json_t *config = load_json(dir, "best_ds_config.json");
    if (!json_is_object(metrics) || !json_is_object(config)) {
        json_decref(metrics);
        json_decref(config);
        return json_null();
    }
    const json_t *t = trial_of(trials, json_integer_value(json_object_get(metrics, "request_id")));
    json_object_set(metrics, "trial_id", t ? json_object_get(t, "id") : json_null());
    json_object_set_new(metrics, "ds_config", config);
    return metrics;
}

static void dsat_of(master *m, int64_t id, const json_t *row, const dt_http_req *req,
                    dt_http_resp *resp) {
    (void)req;
    dt_expconf *cfg = NULL;
    if (dt_expconf_from_json(json_object_get(row, "config"), DT_EXPCONF_MAX_LENGTH_OPTIONAL,
                             &cfg) != DT_OK ||
        !cfg->searcher.name || strcmp(cfg->searcher.name, "dsat")) {
        dt_clear_error();
        dt_http_error(resp, 400,
                      "experiment %lld is not a dsat search (its searcher is %s); hint: `dtrain "
                      "dsat binary|random|asha CONFIG MODEL_DIR` runs one",
                      (long long)id, cfg && cfg->searcher.name ? cfg->searcher.name : "unknown");
        dt_expconf_free(cfg);
        return;
    }
    json_t *snap = NULL, *trials = NULL;
    dt_status st = dt_store_searcher_load(m->store, id, &snap);
    if (st == DT_OK) st = dt_store_trial_list(m->store, id, &trials);
    char *dir = st == DT_OK ? m_api_exp_dir(m, cfg, id) : NULL;
    if (st == DT_OK && !dir) st = dt_error(DT_ERR_OOM, "out of memory");
    json_t *out = NULL;
    if (st == DT_OK) {
        const json_t *saved = json_object_get(snap, "method"); /* the runner's own state */
        json_int_t phase = json_integer_value(json_object_get(saved, "phase"));
        const char *reason = json_string_value(json_object_get(saved, "reason"));
        json_t *stages = json_array();
        for (int i = 0; i < cfg->searcher.dsat.n_zero_stages; i++)
            json_array_append_new(stages, json_integer(cfg->searcher.dsat.zero_stages[i]));
        out = json_pack("{sI,sO,ss,ss,sb,ss,sb,ss?,so,so,so,so}", "experiment_id", (json_int_t)id,
                        "state", json_object_get(row, "state"), "method",
                        cfg->searcher.method ? cfg->searcher.method : "", "metric",
                        cfg->searcher.metric ? cfg->searcher.metric : "", "smaller_is_better",
                        json_is_true(json_object_get(row, "smaller_is_better")), "phase",
                        PHASES[phase >= 0 && phase < 4 ? phase : 0], "done", phase == 3, "reason",
                        reason && *reason ? reason : NULL, "zero_stages", stages, "trials",
                        records_of(saved, trials), "best", best_of(dir, trials), "log",
                        log_tail(dir));
        if (out)
            profile_of(saved, cfg, out);
        else
            st = dt_error(DT_ERR_OOM, "out of memory answering the dsat results of %lld",
                          (long long)id);
    }
    m_api_status(resp, st, out);
    free(dir);
    json_decref(snap);
    json_decref(trials);
    dt_expconf_free(cfg);
}

void m_api_experiment_dsat(void *app, const dt_http_req *req, dt_http_resp *resp) {
    m_api_read(app, req, resp, M_OWNER_EXPERIMENT, dsat_of);
}
