/*
 * expconf_legacy.c — keys the reference removed, refused with the key and value to write now.
 *
 * Old configs counted training in steps of `batches_per_step` batches (100 unless given), named
 * searchers the reference dropped (adaptive, adaptive_simple, sync_halving) and listed metrics
 * with their own smaller_is_better. Each is an error at the key, and the hint is the migrated
 * form with its numbers worked out (`min_validation_period: {steps: 5}` → `{batches: 500}`).
 * Runs before the unknown-key check, so a removed key is explained, not called unknown.
 */
#include "config_impl.h"

/* batches_per_step as an old config gave it (100 by default). */
static int64_t batches_per_step(const dt_conf_sec *top) {
    int64_t b = 100;
    if (!dt_conf_as_int(dt_conf_get(top, "batches_per_step"), &b) || b < 1) b = 100;
    return b;
}

/* s.key = {steps: N} (a length in steps) → refused with {batches: N × batches_per_step}. */
static dt_status steps_length(const dt_conf_sec *s, const char *key, int64_t bps) {
    const json_t *len = dt_conf_get(s, key);
    int64_t n;
    if (!json_is_object(len) || !json_object_get(len, "steps")) return DT_OK;
    char full[300];
    dt_conf_path(s, key, full, sizeof full);
    dt_yaml_pos pos = dt_yaml_key_pos(s->conf->doc, len, "steps");
    if (!dt_conf_as_int(json_object_get(len, "steps"), &n) || n < 0) n = 1;
    return dt_conf_error_at(s->conf, pos,
                            "%s.steps was removed (lengths are no longer counted in steps); hint: "
                            "write `%s: {batches: %lld}` (%lld steps of %lld batches)",
                            full, key, (long long)(n * bps), (long long)n, (long long)bps);
}

/* Searchers the reference no longer has, and what to use instead. */
static const struct {
    const char *name, *why, *hint;
} OLD_SEARCHERS[] = {
    {"adaptive", "was removed by the reference", "`name: adaptive_asha` with max_trials and mode"},
    {"adaptive_simple", "was removed by the reference",
     "`name: adaptive_asha` with max_trials (mode: standard)"},
    {"sync_halving", "was removed by the reference",
     "`name: adaptive_asha` with `mode: aggressive` (one bracket of successive halving)"},
    {"pbt", "(population-based training) is not available in dtrain",
     "use `name: adaptive_asha` or `random`"},
};

/* Searcher keys that went with the removed searchers and step counting. */
static const struct {
    const char *key, *hint;
} OLD_SEARCHER_KEYS[] = {
    {"step_budget", "adaptive_asha budgets with max_trials and max_length"},
    {"budget", "adaptive_asha budgets with max_trials and max_length"},
    {"target_trial_steps", "write max_length: {batches: N} (steps × batches_per_step)"},
    {"train_stride", "adaptive_asha places its rungs from max_length and divisor"},
    {"metrics", "write `metric: NAME` and `smaller_is_better: true|false` for the one metric "
                "that judges trials"},
};

static dt_status legacy_searcher(const dt_conf_sec *top, int64_t bps) {
    dt_conf_sec s;
    TRY(dt_conf_section(top, "searcher", 0, NULL, &s));
    if (!s.obj) return DT_OK;
    const char *name = json_string_value(dt_conf_get(&s, "name"));
    for (size_t i = 0; name && i < sizeof OLD_SEARCHERS / sizeof *OLD_SEARCHERS; i++)
        if (!strcmp(name, OLD_SEARCHERS[i].name))
            return dt_conf_error(&s, "name", "the %s searcher %s; hint: %s", name,
                                 OLD_SEARCHERS[i].why, OLD_SEARCHERS[i].hint);
    const json_t *ms = dt_conf_get(&s, "max_steps");
    int64_t n;
    if (ms) {
        if (!dt_conf_as_int(ms, &n) || n < 0) n = 1;
        return dt_conf_error(&s, "max_steps",
                             "searcher.max_steps was removed; hint: write `max_length: {batches: "
                             "%lld}` (%lld steps of %lld batches)",
                             (long long)(n * bps), (long long)n, (long long)bps);
    }
    TRY(steps_length(&s, "max_length", bps));
    for (size_t i = 0; i < sizeof OLD_SEARCHER_KEYS / sizeof *OLD_SEARCHER_KEYS; i++)
        if (dt_conf_get(&s, OLD_SEARCHER_KEYS[i].key))
            return dt_conf_error(&s, OLD_SEARCHER_KEYS[i].key,
                                 "searcher.%s was removed by the reference; hint: %s",
                                 OLD_SEARCHER_KEYS[i].key, OLD_SEARCHER_KEYS[i].hint);
    const json_t *m = dt_conf_get(&s, "metric");
    if (json_is_object(m)) /* {name: x, smaller_is_better: y}: the old per-metric form */
        return dt_conf_error(&s, "metric",
                             "searcher.metric must be the metric's name; the mapping with its own "
                             "smaller_is_better was removed; hint: write `metric: %s` and "
                             "`smaller_is_better: %s` in the searcher",
                             json_string_value(json_object_get(m, "name"))
                                 ? json_string_value(json_object_get(m, "name"))
                                 : "NAME",
                             json_is_false(json_object_get(m, "smaller_is_better")) ? "false"
                                                                                    : "true");
    return DT_OK;
}

/* Top-level keys the reference removed. */
static const struct {
    const char *key, *hint;
} OLD_TOP[] = {
    {"data_layer", "remove it: dtrain reads data where `data:` says (the data layer cache is "
                   "gone from the reference)"},
    {"internal", "remove it (it was the reference's own bookkeeping)"},
    {"security", "remove it (Kerberos settings are gone from the reference)"},
    {"max_steps", "write `searcher.max_length: {batches: N}`"},
};

dt_status dt__cfg_legacy(vctx *v) {
    dt_conf_sec top = dt_conf_root(&v->conf, 0, NULL);
    if (!json_is_object(top.obj)) return DT_OK;
    int64_t bps = batches_per_step(&top);
    if (dt_conf_get(&top, "batches_per_step"))
        return dt_conf_error(&top, "batches_per_step",
                             "batches_per_step was removed (the reference renamed it); hint: write "
                             "`scheduling_unit: %lld`, and lengths in batches",
                             (long long)bps);
    for (size_t i = 0; i < sizeof OLD_TOP / sizeof *OLD_TOP; i++)
        if (dt_conf_get(&top, OLD_TOP[i].key))
            return dt_conf_error(&top, OLD_TOP[i].key, "%s was removed by the reference; hint: %s",
                                 OLD_TOP[i].key, OLD_TOP[i].hint);
    TRY(steps_length(&top, "min_validation_period", bps));
    TRY(steps_length(&top, "min_checkpoint_period", bps));
    return legacy_searcher(&top, bps);
}
