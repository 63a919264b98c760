/*
 * expconf_searcher.c — lengths ({batches|epochs|records: N}, or a bare integer of batches where
 * the reference reads one) and the searcher section: every searcher the reference has, its
 * optional fields and defaults, and the combinations that cannot run.
 */
#include "config_impl.h"

/* ---- lengths --------------------------------------------------------------------------------- */

static const char *const UNIT_KEYS[] = {"batches", "epochs", "records", NULL};

dt_status dt__cfg_get_length(const dt_conf_sec *s, const char *key, bool allow_zero, bool bare_ok,
                             dt_length *out) {
    const json_t *x = dt_conf_get(s, key);
    *out = (dt_length){DT_UNIT_BATCHES, 0};
    if (!x) return DT_OK;
    char full[256], d[64];
    dt_conf_path(s, key, full, sizeof full);
    int64_t bare;
    if (bare_ok && dt_conf_as_int(x, &bare)) { /* the reference reads a bare N as N batches */
        if (bare < 0) return dt_conf_expected(s, key, "a non-negative integer (batches)", NULL);
        *out = (dt_length){DT_UNIT_BATCHES, bare};
        return DT_OK;
    }
    if (!json_is_object(x) || json_object_size(x) != 1) {
        if (json_is_object(x) && json_object_size(x) > 1)
            return dt_conf_error(s, key,
                                 "%s must have exactly one of batches, epochs, records; got %zu "
                                 "keys",
                                 full, json_object_size(x));
        return dt_conf_error(s, key,
                             "%s must be a mapping like {batches: N}, {epochs: N} or {records: "
                             "N}; got %s",
                             full, dt_conf_describe(s->conf, x, d, sizeof d));
    }
    dt_conf_sec len = {.conf = s->conf, .obj = x};
    snprintf(len.path, sizeof len.path, "%s", full);
    const char *unit = json_object_iter_key(json_object_iter((json_t *)x));
    int u = 0;
    while (UNIT_KEYS[u] && strcmp(UNIT_KEYS[u], unit)) u++;
    if (!UNIT_KEYS[u]) {
        const char *sug = dt_conf_suggest(unit, UNIT_KEYS);
        return dt_conf_error_at(s->conf, dt_yaml_key_pos(s->conf->doc, x, unit),
                                "%s: unknown unit '%s' (valid: batches, epochs, records)%s%s%s",
                                full, unit, sug ? "; did you mean '" : "", sug ? sug : "",
                                sug ? "'?" : "");
    }
    int64_t lo = allow_zero ? 0 : 1, val = -1;
    TRY(dt_conf_int(&len, unit, lo, INT64_MAX, &val));
    if (val < 0)
        return dt_conf_expected(&len, unit, lo ? "a positive integer" : "a non-negative integer",
                                NULL);
    *out = (dt_length){(dt_unit)u, val};
    return DT_OK;
}

/* ---- sections -------------------------------------------------------------------------------- */

static const char *const SEARCHERS[] = {"single", "grid", "random", "adaptive_asha", "async_halving",
                                        "custom", "dsat", NULL};
static const char *const DSAT_METHODS[] = {"binary", "random", "asha", NULL};
static const char *const ASHA_MODES[] = {"aggressive", "standard", "conservative", NULL};

/* searcher.dsat (the autotuner's options; every key optional, the reference's defaults). */
static dt_status parse_dsat(vctx *v, const dt_conf_sec *searcher, dt_dsat_searcher_conf *d) {
    static const char *const known[] = {"zero_stages",
                                        "start_profile_step",
                                        "end_profile_step",
                                        "random_seed",
                                        "search_range_factor",
                                        "trials_per_random_config",
                                        "early_stopping",
                                        "max_rungs",
                                        "min_binary_search_trials",
                                        "asha_early_stopping",
                                        "divisor",
                                        NULL};
    *d = (dt_dsat_searcher_conf){.zero_stages = {1, 2, 3},
                                 .n_zero_stages = 3,
                                 .start_profile_step = 3,
                                 .end_profile_step = 5,
                                 .random_seed = 42,
                                 .search_range_factor = 1.0,
                                 .trials_per_random_config = 5,
                                 .max_rungs = 5,
                                 .min_binary_search_trials = 3,
                                 .divisor = 2};
    dt_conf_sec o;
    TRY(dt__cfg_section(v, searcher, "dsat", known, NULL, &o));
    const json_t *zs = NULL, *z;
    TRY(dt_conf_list(&o, "zero_stages", &zs));
    if (zs) {
        size_t i;
        d->n_zero_stages = 0;
        if (json_array_size(zs) < 1 || json_array_size(zs) > 4)
            return dt_conf_expected(&o, "zero_stages", "a list of 1 to 4 distinct stages 0..3",
                                    "e.g. zero_stages: [1, 2, 3]");
        json_array_foreach(zs, i, z) {
            int64_t st;
            bool dup = false;
            for (int k = 0; dt_conf_as_int(z, &st) && k < d->n_zero_stages; k++)
                dup |= d->zero_stages[k] == st;
            if (!dt_conf_as_int(z, &st) || st < 0 || st > 3 || dup)
                return dt_conf_expected(&o, "zero_stages", "a list of 1 to 4 distinct stages 0..3",
                                        "e.g. zero_stages: [1, 2, 3]");
            d->zero_stages[d->n_zero_stages++] = (int)st;
        }
    }
    TRY(dt_conf_int(&o, "start_profile_step", 1, 1000000, &d->start_profile_step));
    TRY(dt_conf_int(&o, "end_profile_step", 1, 1000000, &d->end_profile_step));
    if (d->end_profile_step < d->start_profile_step)
        return dt_conf_error(&o, "end_profile_step",
                             "searcher.dsat.end_profile_step (%lld) is below start_profile_step "
                             "(%lld); hint: profile steps start..end, inclusive",
                             (long long)d->end_profile_step, (long long)d->start_profile_step);
    TRY(dt_conf_int(&o, "random_seed", 0, INT64_MAX, &d->random_seed));
    TRY(dt_conf_real(&o, "search_range_factor", 0, true, &d->search_range_factor));
    TRY(dt_conf_int(&o, "trials_per_random_config", 1, INT64_MAX, &d->trials_per_random_config));
    TRY(dt_conf_int(&o, "early_stopping", 0, INT64_MAX, &d->early_stopping));
    TRY(dt_conf_int(&o, "max_rungs", 1, 64, &d->max_rungs));
    TRY(dt_conf_int(&o, "min_binary_search_trials", 1, INT64_MAX, &d->min_binary_search_trials));
    TRY(dt_conf_int(&o, "asha_early_stopping", 0, 64, &d->asha_early_stopping));
    TRY(dt_conf_int(&o, "divisor", 2, 1024, &d->divisor));
    return DT_OK;
}

/* Keys that belong to some searchers only: the reference refuses them under the others. */
static const struct {
    const char *key, *searchers;
} ONLY_FOR[] = {
    {"max_trials", " random adaptive_asha async_halving "},
    {"max_concurrent_trials", " random grid adaptive_asha async_halving "},
    {"mode", " adaptive_asha "},
    {"divisor", " adaptive_asha async_halving "},
    {"max_rungs", " adaptive_asha "},
    {"bracket_rungs", " adaptive_asha "},
    {"num_rungs", " async_halving "},
    {"stop_once", " adaptive_asha async_halving "},
    {"time_metric", " adaptive_asha async_halving "},
    {"max_time", " adaptive_asha async_halving "},
};

static dt_status check_searcher_keys(const dt_conf_sec *obj, const char *name) {
    char pad[40];
    snprintf(pad, sizeof pad, " %s ", name);
    if (!strcmp(name, "custom") || !strcmp(name, "dsat")) return DT_OK; /* dtrain's own */
    for (size_t i = 0; i < sizeof ONLY_FOR / sizeof *ONLY_FOR; i++)
        if (dt_conf_get(obj, ONLY_FOR[i].key) && !strstr(ONLY_FOR[i].searchers, pad))
            return dt_conf_error(obj, ONLY_FOR[i].key,
                                 "searcher.%s is not a setting of the %s searcher (only of "
                                 "%.*s); hint: remove it, or choose a searcher that has it",
                                 ONLY_FOR[i].key, name, (int)strlen(ONLY_FOR[i].searchers) - 2,
                                 ONLY_FOR[i].searchers + 1);
    return DT_OK;
}

/* searcher.max_time with time_metric (adaptive_asha): rungs counted in a metric the trial
 * reports. Both or neither. A time metric that is one of the trial's own units (batches,
 * records, epochs) is that length: it becomes max_length (a different max_length beside it is a
 * contradiction). Any other metric (seconds, records_seen, ...) is read from the trial's
 * validation metrics; max_length is then the most a trial trains before the searcher stops it
 * (required unless a command entrypoint decides its own length). */
static dt_status searcher_time(vctx *v, const dt_conf_sec *obj) {
    dt_searcher_conf *s = &v->cfg->searcher;
    TRY(dt__cfg_get_str(obj, "time_metric", false, true, NULL, &s->time_metric));
    TRY(dt_conf_int(obj, "max_time", 1, INT64_MAX, &s->max_time));
    if (!s->time_metric && !s->max_time) return DT_OK;
    if (!s->time_metric)
        return dt_conf_missing(obj, "time_metric",
                               "the metric max_time counts in, reported by the trial in its "
                               "validation metrics, e.g. `time_metric: batches` or `seconds`");
    if (!s->max_time)
        return dt_conf_missing(obj, "max_time",
                               "the top rung in time_metric's units, e.g. `max_time: 1000`");
    int u = 0;
    while (UNIT_KEYS[u] && strcmp(UNIT_KEYS[u], s->time_metric)) u++;
    if (!UNIT_KEYS[u]) return DT_OK;
    if (s->max_length.n && (s->max_length.unit != (dt_unit)u || s->max_length.n != s->max_time))
        return dt_conf_error(obj, "max_length",
                             "searcher.max_length contradicts max_time: %lld %s (time_metric is "
                             "the trial's own unit, so max_time is its length); hint: remove "
                             "max_length",
                             (long long)s->max_time, s->time_metric);
    s->max_length = (dt_length){(dt_unit)u, s->max_time};
    return DT_OK;
}

/* searcher.max_length: optional where the reference allows it (a command entrypoint decides its
 * own length; the CLI may give one); adaptive_asha plans its rungs with it (or with max_time). */
static dt_status searcher_length(vctx *v, const dt_conf_sec *obj, unsigned flags) {
    dt_searcher_conf *s = &v->cfg->searcher;
    TRY(dt__cfg_get_length(obj, "max_length", false, true, &s->max_length));
    TRY(searcher_time(v, obj));
    bool asha = dt_searcher_is_asha(s),
         reported = s->time_metric && s->max_length.n == 0;
    /* a trial learns an epoch's length from its data loader; adaptive_asha places its rungs
     * before any trial runs, so it needs the number here */
    if (asha && s->max_length.unit == DT_UNIT_EPOCHS && v->cfg->records_per_epoch <= 0)
        return dt_conf_error(obj, s->time_metric ? "max_time" : "max_length",
                             "searcher.%s is in epochs but records_per_epoch is not set, "
                             "and adaptive_asha places its rungs in batches before any trial "
                             "runs; hint: add `records_per_epoch: N` (the records in one epoch "
                             "of the training data), or count in batches",
                             s->time_metric ? "max_time" : "max_length");
    bool optional = (flags & DT_EXPCONF_MAX_LENGTH_OPTIONAL) ||
                    (v->cfg->entry_command && (!asha || reported)) || !strcmp(s->name, "custom") ||
                    !strcmp(s->name, "dsat");
    if (s->max_length.n == 0 && !optional)
        return dt_conf_missing(obj, "max_length",
                               reported ? "the most a trial trains (the searcher stops it earlier "
                                          "by the time metric it reports), e.g. `max_length: "
                                          "{batches: 1000}`"
                               : asha   ? "adaptive_asha places its rungs along it, e.g. "
                                          "`max_length: {batches: 1000}` (or {epochs: N}, "
                                          "{records: N}; or max_time with time_metric)"
                                        : "how long a trial trains, e.g. `max_length: {batches: "
                                          "1000}` (or {epochs: N}, {records: N}); a command "
                                          "entrypoint may leave it out");
    return DT_OK;
}

/* searcher.stop_once: accepted; false is warned about, since adaptive_asha, like the
 * reference's current searcher, stops a trial at a rung and never resumes it either way. */
static dt_status stop_once(vctx *v, const dt_conf_sec *obj, dt_searcher_conf *s) {
    dt_status st = dt_conf_bool(obj, "stop_once", &s->stop_once);
    if (st == DT_OK && json_is_false(dt_conf_get(obj, "stop_once")))
        st = dt__cfg_warn(v, dt_conf_pos(obj, "stop_once"),
                          "searcher.stop_once: false has no effect: adaptive_asha stops a trial "
                          "that falls behind at a rung and never resumes it, as the reference's "
                          "current searcher does whatever stop_once says");
    return st;
}

/* The searcher section's keys (each searcher accepts its own subset: check_searcher_keys). */
static const char *const SEARCHER_KEYS[] = {"name",
                                            "metric",
                                            "smaller_is_better",
                                            "max_length",
                                            "max_trials",
                                            "max_concurrent_trials",
                                            "mode",
                                            "divisor",
                                            "max_rungs",
                                            "num_rungs",
                                            "stop_once",
                                            "time_metric",
                                            "max_time",
                                            "source_trial_id",
                                            "source_checkpoint_uuid",
                                            "method",
                                            "dsat",
                                            NULL};

dt_status dt__cfg_searcher(vctx *v, const dt_conf_sec *root, unsigned flags) {
    static const char *const accepted[] = {"bracket_rungs", NULL};
    dt_searcher_conf *s = &v->cfg->searcher;
    dt_conf_sec obj;
    TRY(dt__cfg_section(v, root, "searcher", SEARCHER_KEYS, accepted, &obj));
    if (!obj.obj)
        return dt_conf_missing(root, "searcher",
                               "searcher: {name: single, metric: validation_loss, max_length: "
                               "{batches: 1000}}");
    int name_i = 0, mode_i = 1;
    TRY(dt_conf_enum(&obj, "name", SEARCHERS, NULL, &name_i));
    if (!(s->name = strdup(SEARCHERS[name_i]))) return OOM();
    TRY(dt__cfg_get_str(&obj, "metric", true, true,
                        "the name of the validation metric to judge trials by, e.g. `metric: "
                        "validation_loss`",
                        &s->metric));
    s->smaller_is_better = true;
    TRY(dt_conf_bool(&obj, "smaller_is_better", &s->smaller_is_better));
    TRY(check_searcher_keys(&obj, s->name));
    TRY(searcher_length(v, &obj, flags));
    TRY(dt_conf_int(&obj, "max_trials", 1, INT64_MAX, &s->max_trials));
    if (s->max_trials == 0 && (!strcmp(s->name, "random") || dt_searcher_is_asha(s))) {
        char hint[80];
        snprintf(hint, sizeof hint, "the %s searcher needs the number of trials to run", s->name);
        return dt_conf_missing(&obj, "max_trials", hint);
    }
    TRY(dt_conf_int(&obj, "max_concurrent_trials", 0, INT64_MAX, &s->max_concurrent_trials));
    TRY(dt_conf_enum(&obj, "mode", ASHA_MODES, NULL, &mode_i));
    if (!(s->mode = strdup(ASHA_MODES[mode_i]))) return OOM();
    s->divisor = 4;
    TRY(dt_conf_real(&obj, "divisor", 1, true, &s->divisor));
    s->max_rungs = 5;
    TRY(dt_conf_int(&obj, "max_rungs", 1, INT64_MAX, &s->max_rungs));
    TRY(dt_conf_int(&obj, "num_rungs", 1, 1000, &s->num_rungs));
    if (!s->num_rungs && !strcmp(s->name, "async_halving"))
        return dt_conf_missing(&obj, "num_rungs",
                               "async_halving runs one bracket of num_rungs rungs, e.g. "
                               "`num_rungs: 3`");
    TRY(stop_once(v, &obj, s));
    TRY(dt_conf_int(&obj, "source_trial_id", 1, INT64_MAX, &s->source_trial_id));
    TRY(dt__cfg_get_str(&obj, "source_checkpoint_uuid", false, true, NULL,
                        &s->source_checkpoint_uuid));
    bool custom = !strcmp(s->name, "custom");
    if (!strcmp(s->name, "dsat")) {
        int m = 0;
        TRY(dt_conf_enum(&obj, "method", DSAT_METHODS, NULL, &m));
        if (!(s->method = strdup(DSAT_METHODS[m]))) return OOM();
        TRY(parse_dsat(v, &obj, &s->dsat));
    } else {
        TRY(dt__cfg_get_str(
            &obj, "method", custom, true,
            "the function the model directory exports that makes the search method, "
            "e.g. `method: my_search` for `dt_status my_search(const dt_expconf *, "
            "dt_search_method *)`",
            &s->method));
    }
    /* grid needs a count for every range hyperparameter */
    if (!strcmp(s->name, "grid")) {
        for (int i = 0; i < v->cfg->n_hparams; i++) {
            const dt_hparam *h = &v->cfg->hparams[i];
            if (h->type == DT_HP_CONST || h->type == DT_HP_CATEGORICAL || h->count > 0) continue;
            return dt_conf_error_at(&v->conf, h->pos,
                                    "hyperparameters.%s needs `count` with the grid searcher (how "
                                    "many values to take from [minval, maxval])",
                                    h->name);
        }
    }
    return DT_OK;
}
