/* hparams.c — a trial's hyperparameters as the experiment config gives them: plain values or
 * {type: const, val}, nested groups reached with dotted names, typed getters with defaults. */
#include "trial_impl.h"

#include <math.h>
#include <string.h>

const json_t *dt_hparams(const dt_trial_ctx *c) {
    return json_object_get(c->config, "hyperparameters");
}

/* The member of `obj` named `name` as the experiment config names hyperparameters: the key as
 * written, else a '.' steps into a nested group ("optimizer.lr" is optimizer → lr; each '.'
 * tried from the left). The config refuses names that could resolve two ways. NULL if none. */
static const json_t *hparam_find(const json_t *obj, const char *name) {
    const json_t *h = json_object_get(obj, name);
    for (const char *dot = strchr(name, '.'); !h && dot; dot = strchr(dot + 1, '.')) {
        const json_t *g = json_object_getn(obj, name, (size_t)(dot - name));
        if (json_is_object(g)) h = hparam_find(g, dot + 1);
    }
    return h;
}

/* A hyperparameter's value: a plain value, or {type: const, val: X}. */
const json_t *dt__hparam_lookup(const json_t *hparams, const char *name) {
    const json_t *h = hparam_find(hparams, name);
    if (json_is_object(h) && json_object_get(h, "val")) return json_object_get(h, "val");
    return h;
}

const json_t *dt_hparam_json(const dt_trial_ctx *c, const char *name) {
    return dt__hparam_lookup(dt_hparams(c), name);
}

int64_t dt_hparam_int(const dt_trial_ctx *c, const char *name, int64_t dflt) {
    const json_t *v = dt_hparam_json(c, name);
    if (json_is_integer(v)) return json_integer_value(v);
    if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)))
        return (int64_t)json_real_value(v);
    if (v)
        dt_log(DT_LOG_WARN, "hyperparameter %s is not an integer; using %lld", name,
               (long long)dflt);
    return dflt;
}

double dt_hparam_double(const dt_trial_ctx *c, const char *name, double dflt) {
    const json_t *v = dt_hparam_json(c, name);
    if (json_is_number(v)) return json_number_value(v);
    if (v) dt_log(DT_LOG_WARN, "hyperparameter %s is not a number; using %g", name, dflt);
    return dflt;
}

const char *dt_hparam_str(const dt_trial_ctx *c, const char *name, const char *dflt) {
    const json_t *v = dt_hparam_json(c, name);
    if (json_is_string(v)) return json_string_value(v);
    if (v) dt_log(DT_LOG_WARN, "hyperparameter %s is not a string; using '%s'", name, dflt);
    return dflt;
}

bool dt_hparam_bool(const dt_trial_ctx *c, const char *name, bool dflt) {
    const json_t *v = dt_hparam_json(c, name);
    if (json_is_boolean(v)) return json_is_true(v);
    if (v)
        dt_log(DT_LOG_WARN, "hyperparameter %s is not a boolean; using %s", name,
               dflt ? "true" : "false");
    return dflt;
}
