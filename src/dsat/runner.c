/*
 * runner.c — the dsat search runner: the search method (dtrain/search.h) the master runs for
 * `searcher: {name: dsat, method: binary | random | asha, ...}`.
 *
 * It runs the profile trials first (micro-batch 1, then 2 to refine the activation term; one
 * global batch at the user's ZeRO settings), reads the profile from their validation metrics
 * (dt_search_trial_metrics), builds the space from the memory model (the approximate max
 * micro-batch per stage, `fits` from dt_dsat_predict_bytes against the device budget), then
 * asks the method (dsat_search.h) for configurations, creates a trial for each with
 * dt_dsat_trial_hparams, and feeds each result (metric, OOM, failure) back. After every result
 * it rewrites best_ds_config.json, best_ds_metrics.json and dsat_summary.json in its output
 * directory (the experiment's checkpoint directory) and appends what it decided to dsat.log
 * there. It shuts the search down, logging why, once the method is done; a failed first
 * profile ends it in ERROR with its cause and a hint.
 *
 * Its state (the phase, the profile, every trial's record, the method's snapshot) is the
 * searcher snapshot the master stores after every event: a restarted master continues it.
 */
#define _GNU_SOURCE
#include "dsat_search.h"

#include "dsat/dsat.h"
#include "base/durable.h"
#include "dtrain/search.h"
#include "base/yaml.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PH_PROFILE1, PH_PROFILE2, PH_SEARCH, PH_DONE };
enum { K_PROFILE1, K_PROFILE2, K_TRIAL };
enum { R_RUNNING, R_OK, R_OOM, R_ERROR };
static const char *const RESULT[] = {"running", "ok", "oom", "error"};

typedef struct rec { /* one trial of the search */
    int64_t rid, cfg_id;
    int kind, result;
    dt_dsat_knobs k;
    int64_t predicted, measured;
    double metric;
} rec;

typedef struct runner {
    const dt_expconf *cfg; /* borrowed (the searcher's) */
    json_t *user_hp, *user_ds;
    char *out_dir;
    dt__dsat_opts opts;
    int phase;
    dt_dsat_profile prof;
    dt__dsat_method *method;
    rec *recs;
    int n, cap;
    char reason[2048]; /* why the search ended */
} runner;

/* ---- output -------------------------------------------------------------------------------- */

/* A line in dsat.log and the master's log. */
static void say(runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(runner *r, const char *fmt, ...) {
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    dt_log(DT_LOG_INFO, "%s", line);
    char p[4200];
    snprintf(p, sizeof p, "%s/dsat.log", r->out_dir);
    FILE *f = fopen(p, "a");
    if (f) fprintf(f, "%s\n", line), fclose(f);
}

static void write_json(runner *r, const char *name, json_t *j) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", r->out_dir, name);
    char *s = j ? json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    if (!s || dt_file_write_atomic(p, s, strlen(s)) != DT_OK)
        dt_log(DT_LOG_ERROR, "dsat: cannot write %s: %s", p, dt_last_error());
    free(s);
    json_decref(j);
}

static json_t *knobs_json(const dt_dsat_knobs *k) {
    return json_pack("{si,sI,sI,sI,si,si,si,si,sb}", "zero_stage", k->zero_stage, "mbs",
                     (json_int_t)k->mbs, "reduce_bucket_size", (json_int_t)k->reduce_bucket_size,
                     "allgather_bucket_size", (json_int_t)k->allgather_bucket_size, "overlap_comm",
                     k->overlap_comm, "reduce_scatter", k->reduce_scatter, "contiguous_gradients",
                     k->contiguous_gradients, "allgather_partitions", k->allgather_partitions,
                     "offload_optimizer", k->offload_optimizer);
}

static bool knobs_from_json(const json_t *j, dt_dsat_knobs *k) {
    int oo = 0;
    json_int_t mbs = 0, rb = 0, ab = 0;
    if (json_unpack((json_t *)j, "{si,sI,sI,sI,si,si,si,si,sb}", "zero_stage", &k->zero_stage,
                    "mbs", &mbs, "reduce_bucket_size", &rb, "allgather_bucket_size", &ab,
                    "overlap_comm", &k->overlap_comm, "reduce_scatter", &k->reduce_scatter,
                    "contiguous_gradients", &k->contiguous_gradients, "allgather_partitions",
                    &k->allgather_partitions, "offload_optimizer", &oo))
        return false;
    k->mbs = mbs, k->reduce_bucket_size = rb, k->allgather_bucket_size = ab;
    k->offload_optimizer = oo;
    return true;
}

static json_t *rec_json(const rec *t) {
    return json_pack("{sI,sI,ss,ss,so,sI,sI,so}", "request_id", (json_int_t)t->rid, "config_id",
                     (json_int_t)t->cfg_id, "kind", t->kind == K_TRIAL ? "trial" : "profile",
                     "result", RESULT[t->result], "knobs", knobs_json(&t->k), "predicted_bytes",
                     (json_int_t)t->predicted, "measured_bytes", (json_int_t)t->measured, "metric",
                     isfinite(t->metric) ? json_real(t->metric) : json_null());
}

/* best_ds_config.json, best_ds_metrics.json and dsat_summary.json, as they stand now. */
static void write_outputs(runner *r) {
    int64_t id;
    dt_dsat_knobs k;
    double metric;
    json_t *trials = json_array();
    for (int i = 0; i < r->n; i++) json_array_append_new(trials, rec_json(&r->recs[i]));
    bool best = r->method && dt__dsat_best(r->method, &id, &k, &metric);
    const rec *b = NULL;
    for (int i = 0; best && i < r->n; i++)
        if (r->recs[i].kind == K_TRIAL && r->recs[i].cfg_id == id) b = &r->recs[i];
    if (b) {
        write_json(r, "best_ds_config.json",
                   dt_dsat_ds_config(r->user_ds, &k, (int)r->cfg->slots_per_trial));
        write_json(r, "best_ds_metrics.json",
                   json_pack("{ss,sf,sI,sI,sI,so}", "metric", r->cfg->searcher.metric, "value",
                             metric, "request_id", (json_int_t)b->rid, "predicted_bytes",
                             (json_int_t)b->predicted, "measured_bytes", (json_int_t)b->measured,
                             "knobs", knobs_json(&k)));
    }
    write_json(r, "dsat_summary.json",
               json_pack("{ss,ss,so,ss?,so}", "method", r->cfg->searcher.method, "metric",
                         r->cfg->searcher.metric, "done", json_boolean(r->phase == PH_DONE),
                         "reason", r->reason[0] ? r->reason : NULL, "trials", trials));
}

/* ---- trials -------------------------------------------------------------------------------- */

static rec *find(runner *r, int64_t rid) {
    for (int i = 0; i < r->n; i++)
        if (r->recs[i].rid == rid) return &r->recs[i];
    return NULL;
}

static rec *add_rec(runner *r) {
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        rec *v = realloc(r->recs, (size_t)cap * sizeof *v);
        if (!v) return NULL;
        r->recs = v, r->cap = cap;
    }
    rec *t = &r->recs[r->n++];
    *t = (rec){.metric = NAN};
    return t;
}

static int running(const runner *r) {
    int n = 0;
    for (int i = 0; i < r->n; i++) n += r->recs[i].result == R_RUNNING;
    return n;
}

/* Create a trial of knob set k (a profile: mode profile, one batch), with its operations. */
static dt_status launch(runner *r, dt_search_ctx *sc, dt_search_ops *out, int kind,
                        const dt_dsat_knobs *k, int64_t cfg_id, int64_t predicted) {
    const dt_dsat_searcher_conf *d = &r->cfg->searcher.dsat;
    dt_dsat_run run = {.mode = kind == K_TRIAL ? DT_DSAT_TRIAL : DT_DSAT_PROFILE,
                       .start_profile_step = (int)d->start_profile_step,
                       .end_profile_step = (int)d->end_profile_step,
                       .predicted_bytes = predicted};
    json_t *hp =
        dt_dsat_trial_hparams(r->user_hp, r->user_ds, k, (int)r->cfg->slots_per_trial, &run);
    if (!hp) return dt_last_status();
    int64_t rid = 0;
    dt_status st = dt_search_create_with(sc, hp, out, &rid);
    json_decref(hp);
    int64_t len = kind == K_TRIAL ? d->end_profile_step : 1;
    if (st == DT_OK) st = dt_search_validate_after(out, rid, (dt_length){DT_UNIT_BATCHES, len});
    if (st == DT_OK) st = dt_search_close(out, rid);
    rec *t = st == DT_OK ? add_rec(r) : NULL;
    if (st == DT_OK && !t) st = dt_error(DT_ERR_OOM, "out of memory");
    if (st != DT_OK) return st;
    *t = (rec){
        .rid = rid, .cfg_id = cfg_id, .kind = kind, .k = *k, .predicted = predicted, .metric = NAN};
    return DT_OK;
}

static dt_status launch_profile(runner *r, dt_search_ctx *sc, dt_search_ops *out, int kind) {
    dt_dsat_knobs k = dt_dsat_knobs_default();
    k.zero_stage = r->prof.user_stage;
    k.mbs = kind == K_PROFILE1 ? 1 : 2;
    return launch(r, sc, out, kind, &k, kind == K_PROFILE1 ? -1 : -2, 0);
}

/* ---- the search ---------------------------------------------------------------------------- */

static bool fits(void *arg, const dt_dsat_knobs *k) {
    const dt_dsat_profile *p = arg;
    return dt_dsat_predict_bytes(p, k) <= p->device_budget;
}

/* The method over the profile's space (also on load, to restore into). */
static dt_status make_method(runner *r) {
    const dt_dsat_searcher_conf *d = &r->cfg->searcher.dsat;
    dt_dsat_space sp = {.n_stages = d->n_zero_stages,
                        .search_range_factor = d->search_range_factor,
                        .fits = fits,
                        .arg = &r->prof,
                        .seed = (uint64_t)d->random_seed};
    for (int i = 0; i < 4; i++) {
        sp.zero_stages[i] = d->zero_stages[i];
        dt_dsat_knobs k = dt_dsat_knobs_default();
        k.zero_stage = i;
        sp.approx_max_mbs[i] = dt_dsat_max_mbs(&r->prof, &k);
    }
    return dt__dsat_method_new(r->cfg->searcher.method, &r->opts, &sp, &r->method);
}

/* The method's max_trials: the search's less the profile trials. Returns those. */
static int set_budget(runner *r) {
    int profiles = 0;
    for (int i = 0; i < r->n; i++) profiles += r->recs[i].kind != K_TRIAL;
    r->opts.max_trials = r->cfg->searcher.max_trials - profiles;
    return profiles;
}

/* The profile is in: say what it found, make the method. */
static dt_status start_search(runner *r) {
    const dt_dsat_profile *p = &r->prof;
    say(r,
        "dsat: model %lld parameters (%lld trainable), device memory %lld bytes per slot, "
        "activations %lld bytes per example (+%lld), measured peak %lld bytes at micro-batch 1",
        (long long)p->params, (long long)p->trainable_params, (long long)p->device_budget,
        (long long)p->activation_per_example, (long long)p->activation_base,
        (long long)p->measured_peak);
    for (int i = 0; i < 4; i++) {
        dt_dsat_knobs k = dt_dsat_knobs_default();
        k.zero_stage = i;
        say(r, "dsat: ZeRO stage %d: model states %lld bytes, approximate max micro-batch %lld", i,
            (long long)dt_dsat_model_state_bytes(p, &k), (long long)dt_dsat_max_mbs(p, &k));
    }
    int profiles = set_budget(r);
    if (r->opts.max_trials < 1) {
        snprintf(r->reason, sizeof r->reason,
                 "max_trials (%lld) was spent on the %d profile trials; hint: raise "
                 "--max-trials",
                 (long long)r->cfg->searcher.max_trials, profiles);
        r->phase = PH_DONE;
        return DT_OK;
    }
    r->phase = PH_SEARCH;
    return make_method(r);
}

/* Start what may start; shut down when the method is done and nothing runs. */
static dt_status schedule(runner *r, dt_search_ctx *sc, dt_search_ops *out) {
    if (r->phase == PH_SEARCH) {
        int64_t cap = r->cfg->searcher.max_concurrent_trials ?: 16;
        if (r->cfg->max_slots)
            cap = cap < r->cfg->max_slots / r->cfg->slots_per_trial
                      ? cap
                      : r->cfg->max_slots / r->cfg->slots_per_trial;
        if (cap < 1) cap = 1;
        int want = (int)(cap - running(r));
        if (want > 0) {
            dt__dsat_config *c = calloc((size_t)want, sizeof *c);
            int got = 0;
            if (!c) return dt_error(DT_ERR_OOM, "out of memory");
            dt_status st = dt__dsat_next(r->method, want, c, &got);
            for (int i = 0; st == DT_OK && i < got; i++) {
                int64_t pred = dt_dsat_predict_bytes(&r->prof, &c[i].knobs);
                st = launch(r, sc, out, K_TRIAL, &c[i].knobs, c[i].id, pred);
            }
            free(c);
            if (st != DT_OK) return st;
        }
        if (dt__dsat_done(r->method) && !running(r)) {
            const char *why = dt__dsat_done_reason(r->method);
            snprintf(r->reason, sizeof r->reason, "%s", why ? why : "the method has finished");
            r->phase = PH_DONE;
        }
    }
    if (r->phase != PH_DONE || running(r)) return DT_OK;
    say(r, "dsat: the search is over: %s", r->reason);
    write_outputs(r);
    return dt_search_shutdown(out, false, false);
}

/* Fail the search (the experiment ends in ERROR) saying why. */
static dt_status fail(runner *r, dt_search_ops *out, const char *why) {
    snprintf(r->reason, sizeof r->reason, "%s", why);
    r->phase = PH_DONE;
    say(r, "dsat: the search failed: %s", why);
    write_outputs(r);
    return dt_search_shutdown(out, false, true);
}

static dt_status read_profile(dt_search_ctx *sc, int64_t rid, dt_dsat_profile *p) {
    json_t *m = dt_search_trial_metrics(sc, rid), *v;
    const char *key;
    dt_metrics dm = {0};
    json_object_foreach(m, key, v) if (json_is_number(v))
        dt_metrics_set(&dm, key, json_number_value(v));
    json_decref(m);
    return dt_dsat_profile_from_metrics(&dm, p);
}

static dt_status on_result(runner *r, dt_search_ctx *sc, rec *t, int result, double metric,
                           dt_search_ops *out) {
    char msg[1400];
    t->result = result;
    t->metric = metric;
    if (t->kind == K_PROFILE1 && result != R_OK) {
        snprintf(msg, sizeof msg,
                 "the profile trial (request %lld: micro-batch 1, one step, the configured ZeRO "
                 "settings) failed; its log says why (dtrain experiment logs); hint: check that "
                 "the trial runs with `dtrain train`, and that its model states fit the device "
                 "budget (offload_optimizer, ZeRO stage 3, more slots or a larger budget)",
                 (long long)t->rid);
        return fail(r, out, msg);
    }
    if (t->kind == K_PROFILE1) {
        dt_status st = read_profile(sc, t->rid, &r->prof);
        if (st != DT_OK) {
            snprintf(msg, sizeof msg, "the profile trial's metrics are not a profile: %s",
                     dt_last_error());
            return fail(r, out, msg);
        }
        r->phase = PH_PROFILE2;
        return launch_profile(r, sc, out, K_PROFILE2);
    }
    if (t->kind == K_PROFILE2) {
        dt_dsat_profile q;
        if (result == R_OK && read_profile(sc, t->rid, &q) == DT_OK &&
            dt_dsat_profile_refine(&r->prof, &q) == DT_OK)
            say(r, "dsat: the profile at micro-batch 2 refined the activation model");
        else
            say(r, "dsat: the profile at micro-batch 2 %s; the model uses micro-batch 1 alone",
                result == R_OOM ? "ran out of memory" : "failed");
        dt_status st = start_search(r);
        if (st != DT_OK) return st;
        return schedule(r, sc, out);
    }
    dt_dsat_result res = {.oom = result == R_OOM, .error = result == R_ERROR, .metric = metric};
    dt_status st = dt__dsat_report(r->method, t->cfg_id, res);
    if (st != DT_OK) return st;
    say(r,
        "dsat: trial request %lld (stage %d, micro-batch %lld): %s, %s %g, predicted %lld "
        "bytes, measured %lld",
        (long long)t->rid, t->k.zero_stage, (long long)t->k.mbs, RESULT[result],
        r->cfg->searcher.metric, metric, (long long)t->predicted, (long long)t->measured);
    write_outputs(r);
    return schedule(r, sc, out);
}

/* ---- the method's handlers ----------------------------------------------------------------- */

static dt_status h_initial(void *state, dt_search_ctx *sc, dt_search_ops *out) {
    runner *r = state;
    say(r, "dsat: %s search on %s; the profile trial runs first", r->cfg->searcher.method,
        r->cfg->searcher.metric);
    return launch_profile(r, sc, out, K_PROFILE1);
}

static dt_status h_validated(void *state, dt_search_ctx *sc, int64_t rid, double metric,
                             dt_length len, dt_search_ops *out) {
    (void)len;
    runner *r = state;
    rec *t = find(r, rid);
    if (!t || t->result != R_RUNNING) return DT_OK;
    json_t *m = dt_search_trial_metrics(sc, rid);
    double oom = 0, peak = 0;
    dt_json_number(json_object_get(m, "oom"), &oom);
    if (dt_json_number(json_object_get(m, "peak_bytes"), &peak)) t->measured = (int64_t)peak;
    json_decref(m);
    int result = oom > 0 ? R_OOM : t->kind != K_TRIAL || isfinite(metric) ? R_OK : R_ERROR;
    return on_result(r, sc, t, result, metric, out);
}

static dt_status h_exited(void *state, dt_search_ctx *sc, int64_t rid, dt_search_exit why,
                          dt_search_ops *out) {
    (void)why;
    runner *r = state;
    rec *t = find(r, rid);
    if (!t || t->result != R_RUNNING) return DT_OK;
    return on_result(r, sc, t, R_ERROR, NAN, out);
}

static dt_status h_closed(void *state, dt_search_ctx *sc, int64_t rid, dt_search_ops *out) {
    runner *r = state;
    rec *t = find(r, rid);
    /* a trial that ended without its result is a failure */
    if (t && t->result == R_RUNNING) return on_result(r, sc, t, R_ERROR, NAN, out);
    return DT_OK;
}

static double h_progress(void *state, dt_search_ctx *sc) {
    (void)sc;
    runner *r = state;
    if (r->phase == PH_DONE) return 1;
    return r->method ? dt__dsat_progress(r->method) : 0;
}

static json_t *h_save(void *state) {
    runner *r = state;
    json_t *trials = json_array(), *prof = json_object();
    for (int i = 0; i < r->n; i++) json_array_append_new(trials, rec_json(&r->recs[i]));
    dt_metrics pm = dt_dsat_profile_report(&r->prof);
    for (int i = 0; r->phase >= PH_PROFILE2 && i < pm.n; i++)
        json_object_set_new(prof, pm.m[i].name, json_real(pm.m[i].value));
    json_t *ms = r->method ? dt__dsat_save(r->method) : json_null();
    return json_pack("{si,so,so,so,ss}", "phase", r->phase, "profile", prof, "trials", trials,
                     "method", ms ? ms : json_null(), "reason", r->reason);
}

static dt_status h_load(void *state, const json_t *saved) {
    runner *r = state;
    const json_t *trials = json_object_get(saved, "trials"), *t;
    json_int_t phase = -1;
    if (json_unpack((json_t *)saved, "{sI}", "phase", &phase) || phase < PH_PROFILE1 ||
        phase > PH_DONE || !json_is_array(trials))
        return dt_error(DT_ERR_FORMAT, "dsat: the searcher snapshot is not the search runner's");
    r->n = 0;
    size_t i;
    json_array_foreach(trials, i, t) {
        rec *x = add_rec(r);
        if (!x) return dt_error(DT_ERR_OOM, "out of memory");
        const char *kind = json_string_value(json_object_get(t, "kind"));
        const char *res = json_string_value(json_object_get(t, "result"));
        x->rid = json_integer_value(json_object_get(t, "request_id"));
        x->cfg_id = json_integer_value(json_object_get(t, "config_id"));
        x->kind = kind && !strcmp(kind, "trial") ? K_TRIAL : x->cfg_id == -2 ? K_PROFILE2 : 0;
        for (int k = 0; res && k < 4; k++)
            if (!strcmp(res, RESULT[k])) x->result = k;
        x->predicted = json_integer_value(json_object_get(t, "predicted_bytes"));
        x->measured = json_integer_value(json_object_get(t, "measured_bytes"));
        dt_json_number(json_object_get(t, "metric"), &x->metric);
        if (!knobs_from_json(json_object_get(t, "knobs"), &x->k))
            return dt_error(DT_ERR_FORMAT, "dsat: a trial in the searcher snapshot is malformed");
    }
    r->phase = (int)phase;
    snprintf(r->reason, sizeof r->reason, "%s",
             json_string_value(json_object_get(saved, "reason")) ?: "");
    const json_t *prof = json_object_get(saved, "profile"), *v;
    const char *key;
    if (json_object_size(prof)) {
        dt_metrics pm = {0};
        json_object_foreach((json_t *)prof, key, v) dt_metrics_set(&pm, key, json_number_value(v));
        dt_status st = dt_dsat_profile_from_metrics(&pm, &r->prof);
        if (st != DT_OK) return st;
    }
    const json_t *ms = json_object_get(saved, "method");
    if (json_is_object(ms)) {
        set_budget(r); /* as start_search set it, or the method's options differ */
        dt_status st = make_method(r);
        if (st == DT_OK) st = dt__dsat_load(r->method, ms);
        if (st != DT_OK) return st;
    }
    return DT_OK;
}

static void h_free(void *state) {
    runner *r = state;
    if (!r) return;
    dt__dsat_method_free(r->method);
    json_decref(r->user_hp);
    json_decref(r->user_ds);
    free(r->out_dir);
    free(r->recs);
    free(r);
}

/* ---- construction -------------------------------------------------------------------------- */

/* The user's DeepSpeed config: hyperparameters.deepspeed_config (a path relative to the model
 * directory, or the object) with overwrite_deepspeed_args merged in. */
static json_t *user_ds_config(const json_t *hp, const char *model_dir) {
    const json_t *src = json_object_get(hp, "deepspeed_config");
    json_t *base = NULL;
    if (json_is_object(src)) {
        base = json_incref((json_t *)src);
    } else if (json_is_string(src)) {
        const char *s = json_string_value(src);
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", s[0] == '/' || !model_dir ? "" : model_dir, s);
        base = dt_ds_config_load(s[0] == '/' || !model_dir ? s : p);
        if (!base) return NULL;
    } else {
        dt_error(DT_ERR_CONFIG, "dsat needs hyperparameters.deepspeed_config, the DeepSpeed "
                                "config of the trial; hint: add `deepspeed_config: "
                                "ds_config.json` (a file in the model directory) under "
                                "hyperparameters");
        return NULL;
    }
    json_t *ds = dt_overwrite_config(base, json_object_get(hp, "overwrite_deepspeed_args"));
    json_decref(base);
    return ds;
}

dt_status dt_dsat_runner_new(const dt_expconf *cfg, const char *model_dir, const char *out_dir,
                             dt_search_method *out) {
    if (!cfg || !out_dir || !out || !cfg->searcher.method)
        return dt_error(DT_ERR_INVALID, "dt_dsat_runner_new: a dsat config and an output "
                                        "directory are required");
    runner *r = calloc(1, sizeof *r);
    if (!r || !(r->out_dir = strdup(out_dir))) {
        free(r);
        return dt_error(DT_ERR_OOM, "out of memory");
    }
    r->cfg = cfg;
    const dt_dsat_searcher_conf *d = &cfg->searcher.dsat;
    dt__dsat_opts_default(&r->opts);
    r->opts.max_trials = cfg->searcher.max_trials ?: 50;
    r->opts.trials_per_random_config = d->trials_per_random_config;
    r->opts.early_stopping = d->early_stopping;
    r->opts.max_rungs = d->max_rungs;
    r->opts.min_binary_search_trials = d->min_binary_search_trials;
    r->opts.asha_early_stopping = d->asha_early_stopping;
    r->opts.divisor = d->divisor;
    dt_status st = dt__dsat_metric_smaller(cfg->searcher.metric, &r->opts.smaller_is_better);
    if (st == DT_OK) st = dt_expconf_hparam_values(cfg, &r->user_hp);
    if (st == DT_OK && !(r->user_ds = user_ds_config(r->user_hp, model_dir))) st = dt_last_status();
    dt_ds_config dc;
    if (st == DT_OK &&
        (st = dt_ds_config_parse(r->user_ds, (int)cfg->slots_per_trial, &dc)) == DT_OK)
        r->prof.user_stage = dc.zero.stage;
    json_t *probe = NULL;
    if (st == DT_OK) {
        /* the knob sets' configs must parse too: fail now, not in every trial */
        dt_dsat_knobs k = dt_dsat_knobs_default();
        k.zero_stage = r->prof.user_stage;
        if (!(probe = dt_dsat_ds_config(r->user_ds, &k, (int)cfg->slots_per_trial)))
            st = dt_last_status();
        json_decref(probe);
    }
    if (st != DT_OK) {
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", dt_last_error());
        h_free(r);
        return dt_error(st, "dsat: %s", msg);
    }
    *out = (dt_search_method){.name = "dsat",
                              .state = r,
                              .initial_operations = h_initial,
                              .on_validation_completed = h_validated,
                              .on_trial_closed = h_closed,
                              .on_trial_exited_early = h_exited,
                              .progress = h_progress,
                              .save = h_save,
                              .load = h_load,
                              .free = h_free};
    return DT_OK;
}
