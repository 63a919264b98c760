/*
 * expconf.c — the experiment config: parse and validate a Determined-style config into
 * dt_expconf (lengths as {unit: N} mappings; their conversion is src/trial/length.c's),
 * hyperparameter helpers.
 *
 * Validation walks the tree in a fixed order and stops at the first error, a DT_ERR_CONFIG
 * whose message starts with the source position ("config.yaml:7:14: searcher.max_length.batches
 * must be a positive integer, got \"ten\""). An optional key that is absent or null takes its
 * default. Unknown keys are not errors: each becomes a warning (kept in cfg->warnings and sent
 * to dt_log) with the closest known key as a suggestion; when a required key is missing and an
 * unknown sibling is close to it, the error names that sibling too. Keys Determined has but
 * local dtrain does not use (workspace, profiling, ...) are accepted silently.
 * docs/config.md documents every key and default.
 */
#include "dtrain/config.h"
#include "base/base_impl.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers ----------------------------------------------------------------------- */

/* The candidate closest to `key` if it is close enough to be a typo, else NULL. */
static const char *suggest(const char *key, const char *const *cands) {
    const char *best = NULL;
    int best_d = INT_MAX;
    for (; cands && *cands; cands++) {
        int d = dt_edit_distance(key, *cands);
        if (d < best_d) best_d = d, best = *cands;
    }
    /* short words allow one edit, longer ones len/3 clamped to [2, 3] ("batch" → "batches") */
    int len = (int)strlen(key);
    int limit = len <= 3 ? 1 : len / 3 < 2 ? 2 : len / 3 > 3 ? 3 : len / 3;
    return best && best_d <= limit ? best : NULL;
}

static bool in_list(const char *s, const char *const *list) {
    for (; list && *list; list++)
        if (!strcmp(s, *list)) return true;
    return false;
}

static void join_list(const char *const *list, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; list[i] && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", list[i]);
}

static const char *describe(const json_t *v, char *buf, size_t n) {
    return dt__json_describe(v, true, buf, n);
}

/* ---- validation context -------------------------------------------------------------------- */

typedef struct vctx {
    dt_expconf *cfg;
    const dt_yaml_doc *doc; /* NULL: no positions */
} vctx;

/* "file:line:col: " / "file: " / "" */
static const char *prefix(const vctx *v, dt_yaml_pos pos, char *buf, size_t n) {
    if (!v->doc) {
        buf[0] = 0;
        return buf;
    }
    char w[512];
    snprintf(buf, n, "%s: ", dt_yaml_where(v->doc, pos, w, sizeof w));
    return buf;
}

__attribute__((format(printf, 3, 4))) static dt_status cerr(const vctx *v, dt_yaml_pos pos,
                                                            const char *fmt, ...) {
    char msg[900], pre[560];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return dt_error(DT_ERR_CONFIG, "%s%s", prefix(v, pos, pre, sizeof pre), msg);
}

__attribute__((format(printf, 3, 4))) static dt_status warn(const vctx *v, dt_yaml_pos pos,
                                                            const char *fmt, ...) {
    char msg[900], pre[560], full[1500];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(full, sizeof full, "%s%s", prefix(v, pos, pre, sizeof pre), msg);
    dt_expconf *c = v->cfg;
    char **w = realloc(c->warnings, (size_t)(c->n_warnings + 1) * sizeof *w);
    if (!w) return dt_error(DT_ERR_OOM, "out of memory recording a config warning");
    c->warnings = w;
    if (!(w[c->n_warnings] = strdup(full)))
        return dt_error(DT_ERR_OOM, "out of memory recording a config warning");
    c->n_warnings++;
    dt_log(DT_LOG_WARN, "%s", full);
    return DT_OK;
}

static dt_yaml_pos vpos(const vctx *v, const json_t *obj, const char *key) {
    return dt_yaml_value_pos(v->doc, obj, key);
}

/* Position of a node for "required key missing" errors: the mapping itself, none for the root
 * (its 1:1 would point at whatever key comes first). */
static dt_yaml_pos obj_pos(const vctx *v, const json_t *obj) {
    if (obj == v->cfg->json) return (dt_yaml_pos){0, 0};
    return dt_yaml_node_pos(v->doc, obj);
}

/* "a.b" from a parent path and a key (path "" → key). */
static const char *join(const char *path, const char *key, char *buf, size_t n) {
    /* by hand: a truncated path is fine in a message, and snprintf would warn about it */
    size_t i = 0;
    for (const char *p = path; *p && i + 1 < n; p++) buf[i++] = *p;
    if (*path && i + 1 < n) buf[i++] = '.';
    for (const char *p = key; *p && i + 1 < n; p++) buf[i++] = *p;
    buf[i] = 0;
    return buf;
}

/* Warn about each key of `obj` not in known[] or accepted[]. */
static dt_status check_keys(const vctx *v, const json_t *obj, const char *path,
                            const char *const *known, const char *const *accepted) {
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)obj, k, val) {
        if (in_list(k, known) || in_list(k, accepted)) continue;
        char full[256];
        join(path, k, full, sizeof full);
        const char *s = suggest(k, known);
        dt_status st =
            s ? warn(v, dt_yaml_key_pos(v->doc, obj, k),
                     "unknown key '%s' (ignored); did you mean '%s'?", full, s)
              : warn(v, dt_yaml_key_pos(v->doc, obj, k), "unknown key '%s' (ignored)", full);
        if (st) return st;
    }
    return DT_OK;
}

/* For a missing required key: an unknown sibling that looks like a typo of it. */
static const char *typo_of(const json_t *obj, const char *key, const char *const *known) {
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)obj, k, val) {
        if (in_list(k, known)) continue;
        const char *one[] = {key, NULL};
        if (suggest(k, one)) return k;
    }
    return NULL;
}

static dt_status missing(const vctx *v, const json_t *obj, const char *path, const char *key,
                         const char *const *known, const char *hint) {
    char full[256];
    join(path, key, full, sizeof full);
    const char *t = typo_of(obj, key, known);
    dt_yaml_pos tp = t ? dt_yaml_key_pos(v->doc, obj, t) : (dt_yaml_pos){0, 0};
    if (t && tp.line > 0)
        return cerr(v, obj_pos(v, obj), "%s is required (is '%s' on line %d a typo?)%s%s", full, t,
                    tp.line, hint ? "; hint: " : "", hint ? hint : "");
    if (t)
        return cerr(v, obj_pos(v, obj), "%s is required (is '%s' a typo?)%s%s", full, t,
                    hint ? "; hint: " : "", hint ? hint : "");
    return cerr(v, obj_pos(v, obj), "%s is required%s%s", full, hint ? "; hint: " : "",
                hint ? hint : "");
}

/* The member, or NULL when absent or null (optional keys treat null as absent). */
static json_t *member(const json_t *obj, const char *key) {
    json_t *x = json_object_get(obj, key);
    return json_is_null(x) ? NULL : x;
}

static dt_status get_obj(const vctx *v, const json_t *obj, const char *path, const char *key,
                         json_t **out) {
    json_t *x = member(obj, key);
    *out = NULL;
    if (!x) return DT_OK;
    if (!json_is_object(x)) {
        char full[256], d[64];
        return cerr(v, vpos(v, obj, key), "%s must be a mapping, got %s",
                    join(path, key, full, sizeof full), describe(x, d, sizeof d));
    }
    *out = x;
    return DT_OK;
}

/* A string member: *out = strdup (NULL when absent and !required). */
static dt_status get_str(const vctx *v, const json_t *obj, const char *path, const char *key,
                         bool required, bool nonempty, const char *const *known, const char *hint,
                         char **out) {
    json_t *x = member(obj, key);
    char full[256], d[64];
    join(path, key, full, sizeof full);
    if (!x) {
        *out = NULL;
        return required ? missing(v, obj, path, key, known, hint) : DT_OK;
    }
    if (!json_is_string(x))
        return cerr(
            v, vpos(v, obj, key), "%s must be a string, got %s%s", full, describe(x, d, sizeof d),
            json_is_number(x) || json_is_boolean(x) ? " (quote it to make it a string)" : "");
    if (nonempty && !*json_string_value(x))
        return cerr(v, vpos(v, obj, key), "%s must not be empty", full);
    if (!(*out = strdup(json_string_value(x)))) return dt_error(DT_ERR_OOM, "out of memory");
    return DT_OK;
}

/* An integer value (integral reals such as 6e4 count). */
static bool as_int(const json_t *x, int64_t *out) {
    if (json_is_integer(x)) {
        *out = json_integer_value(x);
        return true;
    }
    if (json_is_real(x)) {
        double r = json_real_value(x);
        if (r == floor(r) && fabs(r) < 9.0e18) {
            *out = (int64_t)r;
            return true;
        }
    }
    return false;
}

static const char *int_kind(int64_t min) {
    return min == 1 ? "a positive integer" : min == 0 ? "a non-negative integer" : "an integer";
}

static dt_status check_int(const vctx *v, const json_t *x, dt_yaml_pos pos, const char *full,
                           int64_t min, int64_t max, int64_t *out) {
    char d[64];
    int64_t n;
    if (!as_int(x, &n) || n < min || n > max) {
        if (max < INT64_MAX && as_int(x, &n) && n > max)
            return cerr(v, pos, "%s must be at most %lld, got %s", full, (long long)max,
                        describe(x, d, sizeof d));
        return cerr(v, pos, "%s must be %s, got %s", full, int_kind(min), describe(x, d, sizeof d));
    }
    *out = n;
    return DT_OK;
}

static dt_status get_int(const vctx *v, const json_t *obj, const char *path, const char *key,
                         int64_t min, int64_t dflt, int64_t *out) {
    json_t *x = member(obj, key);
    if (!x) {
        *out = dflt;
        return DT_OK;
    }
    char full[256];
    return check_int(v, x, vpos(v, obj, key), join(path, key, full, sizeof full), min, INT64_MAX,
                     out);
}

static dt_status get_bool(const vctx *v, const json_t *obj, const char *path, const char *key,
                          bool dflt, bool *out) {
    json_t *x = member(obj, key);
    if (!x) {
        *out = dflt;
        return DT_OK;
    }
    if (json_is_boolean(x)) {
        *out = json_is_true(x);
        return DT_OK;
    }
    char full[256], d[64];
    static const char *const yaml11[] = {"yes", "no",  "on",  "off", "y",  "n",   "Yes", "No",
                                         "On",  "Off", "YES", "NO",  "ON", "OFF", NULL};
    bool old = json_is_string(x) && in_list(json_string_value(x), yaml11);
    return cerr(v, vpos(v, obj, key), "%s must be true or false, got %s%s",
                join(path, key, full, sizeof full), describe(x, d, sizeof d),
                old ? " (YAML 1.2 reads yes/no/on/off as strings; write true or false)" : "");
}

/* A string member that must be one of valid[]; *out = its index (dflt when absent). */
static dt_status get_enum(const vctx *v, const json_t *obj, const char *path, const char *key,
                          const char *const *valid, int dflt, int *out) {
    json_t *x = member(obj, key);
    if (!x) {
        *out = dflt;
        return DT_OK;
    }
    char full[256], d[64], list[256];
    join(path, key, full, sizeof full);
    join_list(valid, list, sizeof list);
    if (json_is_string(x)) {
        for (int i = 0; valid[i]; i++)
            if (!strcmp(json_string_value(x), valid[i])) {
                *out = i;
                return DT_OK;
            }
        const char *s = suggest(json_string_value(x), valid);
        if (s)
            return cerr(v, vpos(v, obj, key), "%s must be one of %s; got %s (did you mean '%s'?)",
                        full, list, describe(x, d, sizeof d), s);
    }
    return cerr(v, vpos(v, obj, key), "%s must be one of %s; got %s", full, list,
                describe(x, d, sizeof d));
}

/* ---- lengths --------------------------------------------------------------------------------- */

static const char *const UNIT_KEYS[] = {"batches", "epochs", "records", NULL};

/* A length mapping {batches|epochs|records: N}. allow_zero: N = 0 means "not set". */
static dt_status get_length(const vctx *v, const json_t *obj, const char *path, const char *key,
                            bool allow_zero, dt_length *out) {
    json_t *x = member(obj, key);
    *out = (dt_length){DT_UNIT_BATCHES, 0};
    if (!x) return DT_OK;
    char full[256], d[64];
    join(path, key, full, sizeof full);
    if (!json_is_object(x) || json_object_size(x) != 1) {
        if (json_is_object(x) && json_object_size(x) > 1)
            return cerr(v, vpos(v, obj, key),
                        "%s must have exactly one of batches, epochs, records; got %zu keys", full,
                        json_object_size(x));
        return cerr(v, vpos(v, obj, key),
                    "%s must be a mapping like {batches: N}, {epochs: N} or {records: N}; got %s",
                    full, describe(x, d, sizeof d));
    }
    const char *unit = json_object_iter_key(json_object_iter(x));
    json_t *n = json_object_get(x, unit);
    int u = 0;
    while (UNIT_KEYS[u] && strcmp(UNIT_KEYS[u], unit)) u++;
    if (!UNIT_KEYS[u]) {
        const char *s = suggest(unit, UNIT_KEYS);
        return cerr(v, dt_yaml_key_pos(v->doc, x, unit),
                    "%s: unknown unit '%s' (valid: batches, epochs, records)%s%s%s", full, unit,
                    s ? "; did you mean '" : "", s ? s : "", s ? "'?" : "");
    }
    char sub[300];
    snprintf(sub, sizeof sub, "%s.%s", full, unit);
    int64_t val;
    dt_status st = check_int(v, n, vpos(v, x, unit), sub, allow_zero ? 0 : 1, INT64_MAX, &val);
    if (st) return st;
    *out = (dt_length){(dt_unit)u, val};
    return DT_OK;
}

/* ---- hyperparameters ------------------------------------------------------------------------- */

static const char *const HP_TYPES[] = {"const", "int", "double", "log", "categorical", NULL};

const char *dt_hp_type_name(dt_hp_type t) {
    return (unsigned)t <= DT_HP_CATEGORICAL ? HP_TYPES[t] : "?";
}

static dt_status hp_push(vctx *v, dt_hparam hp) {
    dt_expconf *c = v->cfg;
    dt_hparam *t = realloc(c->hparams, (size_t)(c->n_hparams + 1) * sizeof *t);
    if (!t) {
        free(hp.name);
        return dt_error(DT_ERR_OOM, "out of memory");
    }
    c->hparams = t;
    c->hparams[c->n_hparams++] = hp;
    return DT_OK;
}

/* A finite number member (required). */
static dt_status hp_number(const vctx *v, const json_t *def, const char *path, const char *key,
                           bool integral, double *out) {
    json_t *x = json_object_get(def, key);
    char full[300], d[64];
    join(path, key, full, sizeof full);
    if (!x) return cerr(v, obj_pos(v, def), "%s is required", full);
    double r;
    int64_t n;
    if (integral) {
        if (!as_int(x, &n))
            return cerr(v, vpos(v, def, key), "%s must be an integer, got %s", full,
                        describe(x, d, sizeof d));
        *out = (double)n;
        return DT_OK;
    }
    if (!dt_json_number(x, &r) || !isfinite(r))
        return cerr(v, vpos(v, def, key), "%s must be a finite number, got %s", full,
                    describe(x, d, sizeof d));
    *out = r;
    return DT_OK;
}

/* A definition: a mapping with a `type` key. */
static dt_status hp_definition(vctx *v, const json_t *parent, const char *key, const json_t *def,
                               const char *path, char *name) {
    static const char *const k_const[] = {"type", "val", NULL};
    static const char *const k_range[] = {"type", "minval", "maxval", "count", NULL};
    static const char *const k_log[] = {"type", "minval", "maxval", "base", "count", NULL};
    static const char *const k_cat[] = {"type", "vals", NULL};
    dt_hparam hp = {.name = name, .base = 10, .pos = vpos(v, parent, key)};
    int t;
    char full[300], d[64];
    dt_status st;
    json_t *type = json_object_get(def, "type");
    if (!json_is_string(type) || !in_list(json_string_value(type), HP_TYPES)) {
        char list[128];
        join_list(HP_TYPES, list, sizeof list);
        const char *s = json_is_string(type) ? suggest(json_string_value(type), HP_TYPES) : NULL;
        st = cerr(v, vpos(v, def, "type"),
                  "%s.type must be one of %s; got %s%s%s%s (a mapping with a 'type' key defines "
                  "a hyperparameter; to pass a mapping as a constant write {type: const, val: "
                  "{...}})",
                  path, list, describe(type, d, sizeof d), s ? " (did you mean '" : "", s ? s : "",
                  s ? "'?)" : "");
        free(name);
        return st;
    }
    for (t = 0; strcmp(HP_TYPES[t], json_string_value(type)); t++) {
    }
    hp.type = (dt_hp_type)t;
    const char *const *known = t == DT_HP_CONST         ? k_const
                               : t == DT_HP_CATEGORICAL ? k_cat
                               : t == DT_HP_LOG         ? k_log
                                                        : k_range;
    if ((st = check_keys(v, def, path, known, NULL))) goto fail;
    switch (hp.type) {
    case DT_HP_CONST:
        hp.val = json_object_get(def, "val");
        if (!hp.val) {
            st = cerr(v, obj_pos(v, def), "%s.val is required for a const hyperparameter", path);
            goto fail;
        }
        break;
    case DT_HP_CATEGORICAL:
        hp.vals = json_object_get(def, "vals");
        if (!json_is_array(hp.vals) || json_array_size(hp.vals) == 0) {
            st = hp.vals
                     ? cerr(v, vpos(v, def, "vals"), "%s.vals must be a non-empty list, got %s",
                            path, describe(hp.vals, d, sizeof d))
                     : cerr(v, obj_pos(v, def), "%s.vals is required (the list of values)", path);
            goto fail;
        }
        break;
    case DT_HP_INT:
    case DT_HP_DOUBLE:
    case DT_HP_LOG: {
        bool integral = hp.type == DT_HP_INT;
        if ((st = hp_number(v, def, path, "minval", integral, &hp.minval))) goto fail;
        if ((st = hp_number(v, def, path, "maxval", integral, &hp.maxval))) goto fail;
        if (hp.minval > hp.maxval) {
            st =
                cerr(v, vpos(v, def, "maxval"), "%s: maxval (%g) must not be less than minval (%g)",
                     path, hp.maxval, hp.minval);
            goto fail;
        }
        if (hp.type == DT_HP_LOG && json_object_get(def, "base")) {
            if ((st = hp_number(v, def, path, "base", false, &hp.base))) goto fail;
            if (hp.base <= 0 || hp.base == 1) {
                st = cerr(v, vpos(v, def, "base"), "%s.base must be positive and not 1, got %g",
                          path, hp.base);
                goto fail;
            }
        }
        json_t *cnt = member(def, "count");
        if (cnt &&
            (st = check_int(v, cnt, vpos(v, def, "count"), join(path, "count", full, sizeof full),
                            1, INT64_MAX, &hp.count)))
            goto fail;
        break;
    }
    }
    return hp_push(v, hp);
fail:
    free(name);
    return st;
}

/* Every member of `obj` (the hyperparameters mapping or a nested group). */
static dt_status parse_hparams(vctx *v, const json_t *obj, const char *path, const char *prefix) {
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)obj, k, x) {
        size_t nlen = strlen(prefix) + strlen(k) + 2;
        char *name = malloc(nlen);
        char sub[512];
        if (!name) return dt_error(DT_ERR_OOM, "out of memory");
        snprintf(name, nlen, "%s%s%s", prefix, *prefix ? "." : "", k);
        join(path, k, sub, sizeof sub);
        dt_status st;
        if (json_is_object(x) && json_object_get(x, "type")) {
            st = hp_definition(v, obj, k, x, sub, name);
        } else if (json_is_object(x) && json_object_size(x) > 0) {
            st = parse_hparams(v, x, sub, name); /* a nested group */
            free(name);
        } else {
            st = hp_push(v, (dt_hparam){.name = name,
                                        .type = DT_HP_CONST,
                                        .val = x,
                                        .base = 10,
                                        .pos = vpos(v, obj, k)});
        }
        if (st) return st;
    }
    return DT_OK;
}

const dt_hparam *dt_expconf_hparam(const dt_expconf *cfg, const char *name) {
    for (int i = 0; cfg && i < cfg->n_hparams; i++)
        if (!strcmp(cfg->hparams[i].name, name)) return &cfg->hparams[i];
    return NULL;
}

static const char *where_of(const dt_expconf *cfg, dt_yaml_pos pos, char *buf, size_t n) {
    if (!cfg->doc || pos.line <= 0) {
        buf[0] = 0;
        return buf;
    }
    char w[512];
    snprintf(buf, n, " (%s)", dt_yaml_where(cfg->doc, pos, w, sizeof w));
    return buf;
}

dt_status dt_expconf_require_const(const dt_expconf *cfg) {
    for (int i = 0; i < cfg->n_hparams; i++) {
        const dt_hparam *h = &cfg->hparams[i];
        if (h->type == DT_HP_CONST) continue;
        char w[600];
        return dt_error(DT_ERR_CONFIG,
                        "hyperparameters.%s%s has type '%s', but local training (dtrain "
                        "train) runs one trial with constant hyperparameters; hint: give it a "
                        "constant value, or use the experiment runner (dtrain experiment "
                        "create), which searches it",
                        h->name, where_of(cfg, h->pos, w, sizeof w), dt_hp_type_name(h->type));
    }
    return DT_OK;
}

static json_t *values_of(const json_t *obj) {
    json_t *out = json_object();
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)obj, k, x) {
        json_t *val;
        if (json_is_object(x) && json_object_get(x, "type"))
            val = json_deep_copy(json_object_get(x, "val"));
        else if (json_is_object(x))
            val = values_of(x);
        else
            val = json_deep_copy(x);
        if (!out || !val || json_object_set_new(out, k, val)) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

dt_status dt_expconf_hparam_values(const dt_expconf *cfg, json_t **out) {
    *out = NULL;
    dt_status st = dt_expconf_require_const(cfg);
    if (st) return st;
    json_t *hp = json_object_get(cfg->json, "hyperparameters");
    *out = json_is_object(hp) ? values_of(hp) : json_object();
    return *out ? DT_OK : dt_error(DT_ERR_OOM, "out of memory copying hyperparameters");
}

dt_status dt_expconf_global_batch_size(const dt_expconf *cfg, const char *for_what, int64_t *out) {
    const dt_hparam *h = dt_expconf_hparam(cfg, "global_batch_size");
    char w[600], d[64];
    if (!for_what) for_what = "this";
    if (!h)
        return dt_error(DT_ERR_CONFIG,
                        "hyperparameters.global_batch_size is required: %s needs it; hint: add "
                        "`global_batch_size: 32` under hyperparameters",
                        for_what);
    if (h->type != DT_HP_CONST)
        return dt_error(DT_ERR_CONFIG,
                        "hyperparameters.global_batch_size%s has type '%s', but %s needs one "
                        "value; hint: make it const, or convert with each trial's own value "
                        "(dt_length_to_batches)",
                        where_of(cfg, h->pos, w, sizeof w), dt_hp_type_name(h->type), for_what);
    int64_t n;
    if (!as_int(h->val, &n) || n <= 0)
        return dt_error(DT_ERR_CONFIG,
                        "hyperparameters.global_batch_size%s must be a positive integer, got %s",
                        where_of(cfg, h->pos, w, sizeof w), describe(h->val, d, sizeof d));
    *out = n;
    return DT_OK;
}

dt_status dt_expconf_length_batches(const dt_expconf *cfg, dt_length len, const char *what,
                                    int64_t *out) {
    int64_t gbs = 0;
    if (len.n > 0 && len.unit != DT_UNIT_BATCHES) {
        char why[200], f[64];
        snprintf(why, sizeof why, "converting %s (%s) to batches", what ? what : "a length",
                 dt_length_format(len, f, sizeof f));
        dt_status st = dt_expconf_global_batch_size(cfg, why, &gbs);
        if (st) return st;
    }
    return dt_length_to_batches(len, gbs, cfg->records_per_epoch, what, out);
}

/* ---- sections -------------------------------------------------------------------------------- */

static const char *const SEARCHERS[] = {"single",        "grid",   "random",
                                        "adaptive_asha", "custom", NULL};
static const char *const ASHA_MODES[] = {"aggressive", "standard", "conservative", NULL};

static dt_status parse_searcher(vctx *v, const json_t *root, unsigned flags) {
    static const char *const known[] = {"name",       "metric",          "smaller_is_better",
                                        "max_length", "max_trials",      "max_concurrent_trials",
                                        "mode",       "divisor",         "max_rungs",
                                        "stop_once",  "source_trial_id", "source_checkpoint_uuid",
                                        NULL};
    static const char *const accepted[] = {"bracket_rungs", "time_metric", "max_time", NULL};
    static const char *const top_known[] = {"searcher", NULL};
    dt_searcher_conf *s = &v->cfg->searcher;
    json_t *obj;
    dt_status st;
    if ((st = get_obj(v, root, "", "searcher", &obj))) return st;
    if (!obj)
        return missing(v, root, "", "searcher", top_known,
                       "searcher: {name: single, metric: validation_loss, max_length: {batches: "
                       "1000}}");
    if ((st = check_keys(v, obj, "searcher", known, accepted))) return st;
    int name_i;
    if ((st = get_enum(v, obj, "searcher", "name", SEARCHERS, 0, &name_i))) return st;
    if (!(s->name = strdup(SEARCHERS[name_i]))) return dt_error(DT_ERR_OOM, "out of memory");
    if ((st = get_str(v, obj, "searcher", "metric", true, true, known,
                      "the name of the validation metric to judge trials by, e.g. "
                      "`metric: validation_loss`",
                      &s->metric)))
        return st;
    if ((st = get_bool(v, obj, "searcher", "smaller_is_better", true, &s->smaller_is_better)))
        return st;
    if ((st = get_length(v, obj, "searcher", "max_length", false, &s->max_length))) return st;
    if (s->max_length.n == 0 && !(flags & DT_EXPCONF_MAX_LENGTH_OPTIONAL))
        return missing(v, obj, "searcher", "max_length", known,
                       "how long to train, e.g. `max_length: {batches: 1000}` (or {epochs: N}, "
                       "{records: N})");
    if ((st = get_int(v, obj, "searcher", "max_trials", 1, 0, &s->max_trials))) return st;
    if (s->max_trials == 0 && (!strcmp(s->name, "random") || !strcmp(s->name, "adaptive_asha"))) {
        char hint[80];
        snprintf(hint, sizeof hint, "the %s searcher needs the number of trials to run", s->name);
        return missing(v, obj, "searcher", "max_trials", known, hint);
    }
    if ((st =
             get_int(v, obj, "searcher", "max_concurrent_trials", 0, 0, &s->max_concurrent_trials)))
        return st;
    int mode_i;
    if ((st = get_enum(v, obj, "searcher", "mode", ASHA_MODES, 1, &mode_i))) return st;
    if (!(s->mode = strdup(ASHA_MODES[mode_i]))) return dt_error(DT_ERR_OOM, "out of memory");
    s->divisor = 4;
    json_t *dv = member(obj, "divisor");
    if (dv && (!dt_json_number(dv, &s->divisor) || !isfinite(s->divisor) || s->divisor <= 1)) {
        char d[64];
        return cerr(v, vpos(v, obj, "divisor"), "searcher.divisor must be a number > 1, got %s",
                    describe(dv, d, sizeof d));
    }
    if ((st = get_int(v, obj, "searcher", "max_rungs", 1, 5, &s->max_rungs))) return st;
    if ((st = get_bool(v, obj, "searcher", "stop_once", false, &s->stop_once))) return st;
    if ((st = get_int(v, obj, "searcher", "source_trial_id", 1, 0, &s->source_trial_id))) return st;
    if ((st = get_str(v, obj, "searcher", "source_checkpoint_uuid", false, true, known, NULL,
                      &s->source_checkpoint_uuid)))
        return st;
    /* grid needs a count for every range hyperparameter */
    if (!strcmp(s->name, "grid")) {
        for (int i = 0; i < v->cfg->n_hparams; i++) {
            const dt_hparam *h = &v->cfg->hparams[i];
            if (h->type == DT_HP_CONST || h->type == DT_HP_CATEGORICAL || h->count > 0) continue;
            return cerr(v, h->pos,
                        "hyperparameters.%s needs `count` with the grid searcher (how many "
                        "values to take from [minval, maxval])",
                        h->name);
        }
    }
    return DT_OK;
}

static dt_status parse_storage(vctx *v, const json_t *root) {
    static const char *const known[] = {"type",
                                        "host_path",
                                        "storage_path",
                                        "save_trial_best",
                                        "save_trial_latest",
                                        "save_experiment_best",
                                        NULL};
    static const char *const accepted[] = {"propagation", NULL};
    static const char *const types[] = {"shared_fs", NULL};
    dt_ckpt_storage_conf *cs = &v->cfg->checkpoint_storage;
    json_t *obj;
    dt_status st;
    cs->save_trial_best = 1;
    cs->save_trial_latest = 1;
    if ((st = get_obj(v, root, "", "checkpoint_storage", &obj))) return st;
    if (obj) {
        if ((st = check_keys(v, obj, "checkpoint_storage", known, accepted))) return st;
        json_t *t = member(obj, "type");
        if (json_is_string(t) &&
            in_list(json_string_value(t),
                    (const char *const[]){"s3", "gcs", "azure", "directory", NULL}))
            return cerr(v, vpos(v, obj, "type"),
                        "checkpoint_storage.type '%s' is not supported by dtrain (valid: "
                        "shared_fs); hint: use shared_fs with a host_path",
                        json_string_value(t));
        int ti;
        if ((st = get_enum(v, obj, "checkpoint_storage", "type", types, 0, &ti))) return st;
        if ((st = get_str(v, obj, "checkpoint_storage", "host_path", false, true, known, NULL,
                          &cs->host_path)))
            return st;
        if ((st = get_str(v, obj, "checkpoint_storage", "storage_path", false, true, known, NULL,
                          &cs->storage_path)))
            return st;
        if (cs->storage_path && cs->storage_path[0] == '/' && cs->host_path) {
            size_t hl = strlen(cs->host_path);
            while (hl > 1 && cs->host_path[hl - 1] == '/') hl--;
            if (strncmp(cs->storage_path, cs->host_path, hl) ||
                (cs->storage_path[hl] != '/' && cs->storage_path[hl] != 0))
                return cerr(v, vpos(v, obj, "storage_path"),
                            "checkpoint_storage.storage_path \"%s\" is absolute but not under "
                            "host_path \"%s\"; hint: make it relative to host_path",
                            cs->storage_path, cs->host_path);
        }
        if ((st = get_int(v, obj, "checkpoint_storage", "save_trial_best", 0, 1,
                          &cs->save_trial_best)) ||
            (st = get_int(v, obj, "checkpoint_storage", "save_trial_latest", 0, 1,
                          &cs->save_trial_latest)) ||
            (st = get_int(v, obj, "checkpoint_storage", "save_experiment_best", 0, 0,
                          &cs->save_experiment_best)))
            return st;
    }
    if (!(cs->type = strdup("shared_fs"))) return dt_error(DT_ERR_OOM, "out of memory");
    return DT_OK;
}

static dt_status parse_env_list(vctx *v, const json_t *list, const json_t *parent, const char *key,
                                const char *path, bool keep) {
    char d[64];
    if (!json_is_array(list))
        return cerr(v, vpos(v, parent, key), "%s must be a list of \"NAME=value\" strings, got %s",
                    path, describe(list, d, sizeof d));
    dt_expconf *c = v->cfg;
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *e = json_array_get(list, i);
        dt_yaml_pos pos = dt_yaml_item_pos(v->doc, list, i);
        const char *s = json_string_value(e);
        const char *eq = s ? strchr(s, '=') : NULL;
        if (!eq)
            return cerr(v, pos, "%s[%zu] must be a \"NAME=value\" string, got %s%s", path, i,
                        describe(e, d, sizeof d),
                        json_is_object(e) ? " (write `- NAME=value`, not `- NAME: value`)" : "");
        size_t kl = (size_t)(eq - s);
        bool ok = kl > 0 && !(s[0] >= '0' && s[0] <= '9');
        for (size_t j = 0; j < kl && ok; j++) {
            char ch = s[j];
            ok = ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                 (ch >= '0' && ch <= '9');
        }
        if (!ok)
            return cerr(v, pos,
                        "%s[%zu]: \"%.*s\" is not a valid environment variable name (letters, "
                        "digits and _, not starting with a digit)",
                        path, i, (int)kl, s);
        if (!keep) continue;
        char *k = strndup(s, kl), *val = strdup(eq + 1);
        if (!k || !val) {
            free(k);
            free(val);
            return dt_error(DT_ERR_OOM, "out of memory");
        }
        int j = 0;
        while (j < c->n_env && strcmp(c->env_keys[j], k)) j++;
        if (j < c->n_env) { /* a later entry for the same name wins, as in a shell */
            free(k);
            free(c->env_values[j]);
            c->env_values[j] = val;
            continue;
        }
        char **nk = realloc(c->env_keys, (size_t)(c->n_env + 1) * sizeof *nk);
        if (nk) c->env_keys = nk;
        char **nv = nk ? realloc(c->env_values, (size_t)(c->n_env + 1) * sizeof *nv) : NULL;
        if (nv) c->env_values = nv;
        if (!nk || !nv) {
            free(k);
            free(val);
            return dt_error(DT_ERR_OOM, "out of memory");
        }
        c->env_keys[c->n_env] = k;
        c->env_values[c->n_env] = val;
        c->n_env++;
    }
    return DT_OK;
}

static dt_status parse_environment(vctx *v, const json_t *root) {
    static const char *const known[] = {"environment_variables", NULL};
    static const char *const accepted[] = {"image",    "force_pull_image", "registry_auth",
                                           "pod_spec", "add_capabilities", "drop_capabilities",
                                           "ports",    "proxy_ports",      NULL};
    static const char *const devices[] = {"cpu", "cuda", "gpu", "rocm", NULL};
    json_t *obj;
    dt_status st;
    if ((st = get_obj(v, root, "", "environment", &obj)) || !obj) return st;
    if ((st = check_keys(v, obj, "environment", known, accepted))) return st;
    json_t *ev = member(obj, "environment_variables");
    if (!ev) return DT_OK;
    if (!json_is_object(ev))
        return parse_env_list(v, ev, obj, "environment_variables",
                              "environment.environment_variables", true);
    /* the per-device form: {cpu: [...], cuda: [...], rocm: [...]}; dtrain runs on the CPU */
    if ((st = check_keys(v, ev, "environment.environment_variables", devices, NULL))) return st;
    for (int i = 0; devices[i]; i++) {
        json_t *l = member(ev, devices[i]);
        if (!l) continue;
        char path[96];
        snprintf(path, sizeof path, "environment.environment_variables.%s", devices[i]);
        if ((st = parse_env_list(v, l, ev, devices[i], path, i == 0))) return st;
    }
    return DT_OK;
}

static dt_status parse_entrypoint(vctx *v, const json_t *root, const char *const *known) {
    dt_expconf *c = v->cfg;
    dt_status st = get_str(v, root, "", "entrypoint", true, true, known,
                           "`entrypoint: model_def:MyTrial` compiles model_def.c from the model "
                           "directory and runs its `const dt_trial_def MyTrial`",
                           &c->entrypoint);
    if (st) return st;
    const char *s = c->entrypoint, *colon = strchr(s, ':');
    bool ok = colon && colon > s && !strchr(colon + 1, ':');
    for (const char *p = s; ok && p < colon; p++)
        ok = *p == '_' || *p == '-' || *p == '.' || (*p >= 'a' && *p <= 'z') ||
             (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
    ok = ok && s[0] != '.' && colon[-1] != '.' && !strstr(s, "..");
    const char *sym = ok ? colon + 1 : "";
    ok = ok && ((*sym >= 'a' && *sym <= 'z') || (*sym >= 'A' && *sym <= 'Z') || *sym == '_');
    for (const char *p = sym; ok && *p; p++)
        ok = *p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
             (*p >= '0' && *p <= '9');
    if (!ok) {
        char d[64];
        return cerr(v, vpos(v, root, "entrypoint"),
                    "entrypoint must be \"<file stem>:<trial symbol>\" such as "
                    "\"model_def:MyTrial\" (model_def.c defines `const dt_trial_def MyTrial`); "
                    "got %s",
                    describe(json_object_get(root, "entrypoint"), d, sizeof d));
    }
    if (!(c->entry_module = strndup(s, (size_t)(colon - s))) ||
        !(c->entry_symbol = strdup(colon + 1)))
        return dt_error(DT_ERR_OOM, "out of memory");
    return DT_OK;
}

static dt_status parse_list_of(const vctx *v, const json_t *root, const char *key, bool strings) {
    json_t *x = member(root, key);
    char d[64];
    if (!x) return DT_OK;
    if (!json_is_array(x))
        return cerr(v, vpos(v, root, key), "%s must be a list, got %s", key,
                    describe(x, d, sizeof d));
    for (size_t i = 0; i < json_array_size(x); i++) {
        json_t *e = json_array_get(x, i);
        if (strings ? !json_is_string(e) : !json_is_object(e))
            return cerr(v, dt_yaml_item_pos(v->doc, x, i), "%s[%zu] must be %s, got %s", key, i,
                        strings ? "a string" : "a mapping", describe(e, d, sizeof d));
    }
    return DT_OK;
}

static const char *const TOP_KNOWN[] = {"name",
                                        "description",
                                        "entrypoint",
                                        "hyperparameters",
                                        "searcher",
                                        "min_validation_period",
                                        "min_checkpoint_period",
                                        "records_per_epoch",
                                        "scheduling_unit",
                                        "perform_initial_validation",
                                        "checkpoint_policy",
                                        "checkpoint_storage",
                                        "optimizations",
                                        "reproducibility",
                                        "environment",
                                        "resources",
                                        "data",
                                        "max_restarts",
                                        "bind_mounts",
                                        "labels",
                                        "profiling",
                                        NULL};
/* Determined keys that have no effect in dtrain (accepted so configs carry over) */
static const char *const TOP_ACCEPTED[] = {"workspace",    "project",
                                           "debug",        "tensorboard_storage",
                                           "log_policies", "retention_policy",
                                           "integrations", "pbs",
                                           "slurm",        NULL};

static dt_status validate(vctx *v, unsigned flags) {
    dt_expconf *c = v->cfg;
    json_t *root = c->json;
    char d[64];
    dt_status st;
    if (!json_is_object(root)) {
        if (json_is_null(root))
            return cerr(v, (dt_yaml_pos){0, 0},
                        "the config is empty; hint: see docs/config.md for an example");
        return cerr(v, dt_yaml_node_pos(v->doc, root),
                    "the experiment config must be a mapping (entrypoint:, hyperparameters:, "
                    "searcher:, ...), got %s",
                    describe(root, d, sizeof d));
    }
    if ((st = check_keys(v, root, "", TOP_KNOWN, TOP_ACCEPTED))) return st;

    if ((st = parse_entrypoint(v, root, TOP_KNOWN))) return st;
    if ((st = get_str(v, root, "", "name", false, true, TOP_KNOWN, NULL, &c->name))) return st;
    if (!c->name && !(c->name = strdup(c->entry_symbol)))
        return dt_error(DT_ERR_OOM, "out of memory");
    if ((st = get_str(v, root, "", "description", false, false, TOP_KNOWN, NULL, &c->description)))
        return st;

    json_t *hp;
    if ((st = get_obj(v, root, "", "hyperparameters", &hp))) return st;
    if (hp && (st = parse_hparams(v, hp, "hyperparameters", ""))) return st;

    if ((st = parse_searcher(v, root, flags))) return st;
    if ((st = get_length(v, root, "", "min_validation_period", true, &c->min_validation_period)) ||
        (st = get_length(v, root, "", "min_checkpoint_period", true, &c->min_checkpoint_period)))
        return st;
    if ((st = get_int(v, root, "", "records_per_epoch", 0, 0, &c->records_per_epoch)) ||
        (st = get_int(v, root, "", "scheduling_unit", 1, 100, &c->scheduling_unit)) ||
        (st = get_bool(v, root, "", "perform_initial_validation", false,
                       &c->perform_initial_validation)))
        return st;
    static const char *const policies[] = {"best", "all", "none", NULL};
    int pol;
    if ((st = get_enum(v, root, "", "checkpoint_policy", policies, 0, &pol))) return st;
    c->checkpoint_policy = pol == 0 ? DT_CKPT_BEST : pol == 1 ? DT_CKPT_ALL : DT_CKPT_NONE;
    if ((st = parse_storage(v, root))) return st;

    json_t *obj;
    static const char *const opt_known[] = {"aggregation_frequency", "average_aggregated_gradients",
                                            "average_training_metrics", NULL};
    static const char *const opt_accepted[] = {"gradient_compression",
                                               "mixed_precision",
                                               "tensor_fusion_threshold",
                                               "tensor_fusion_cycle_time",
                                               "auto_tune_tensor_fusion",
                                               "grad_updates_size_file",
                                               NULL};
    c->aggregation_frequency = 1;
    c->average_aggregated_gradients = true;
    c->average_training_metrics = true;
    if ((st = get_obj(v, root, "", "optimizations", &obj))) return st;
    if (obj && ((st = check_keys(v, obj, "optimizations", opt_known, opt_accepted)) ||
                (st = get_int(v, obj, "optimizations", "aggregation_frequency", 1, 1,
                              &c->aggregation_frequency)) ||
                (st = get_bool(v, obj, "optimizations", "average_aggregated_gradients", true,
                               &c->average_aggregated_gradients)) ||
                (st = get_bool(v, obj, "optimizations", "average_training_metrics", true,
                               &c->average_training_metrics))))
        return st;

    /* profiling: the fit loop's per-batch timings (profiler lines) for a range of batches */
    static const char *const prof_known[] = {"enabled", "begin_on_batch", "end_after_batch",
                                             "sync_timings", NULL};
    c->profiling_end = INT64_MAX;
    if ((st = get_obj(v, root, "", "profiling", &obj))) return st;
    if (obj) {
        bool sync;
        if ((st = check_keys(v, obj, "profiling", prof_known, NULL)) ||
            (st = get_bool(v, obj, "profiling", "enabled", false, &c->profiling_enabled)) ||
            (st = get_int(v, obj, "profiling", "begin_on_batch", 0, 0, &c->profiling_begin)) ||
            (st = get_bool(v, obj, "profiling", "sync_timings", true, &sync)))
            return st;
        json_t *x = member(obj, "end_after_batch");
        if (x && !json_is_null(x)) {
            if ((st = check_int(v, x, vpos(v, obj, "end_after_batch"), "profiling.end_after_batch",
                                0, INT64_MAX, &c->profiling_end)))
                return st;
            if (c->profiling_end < c->profiling_begin)
                return cerr(v, vpos(v, obj, "end_after_batch"),
                            "profiling.end_after_batch (%lld) is before begin_on_batch (%lld); "
                            "hint: the range is inclusive, end_after_batch >= begin_on_batch",
                            (long long)c->profiling_end, (long long)c->profiling_begin);
        }
    }

    static const char *const repro_known[] = {"experiment_seed", NULL};
    if ((st = get_obj(v, root, "", "reproducibility", &obj))) return st;
    if (obj) {
        if ((st = check_keys(v, obj, "reproducibility", repro_known, NULL))) return st;
        json_t *x = member(obj, "experiment_seed");
        int64_t seed;
        if (x) {
            if ((st = check_int(v, x, vpos(v, obj, "experiment_seed"),
                                "reproducibility.experiment_seed", 0, INT32_MAX, &seed)))
                return st;
            c->has_experiment_seed = true;
            c->experiment_seed = (uint32_t)seed;
        }
    }

    if ((st = parse_environment(v, root))) return st;

    static const char *const res_known[] = {"slots_per_trial", NULL};
    static const char *const res_accepted[] = {
        "max_slots", "weight",  "native_parallel", "shm_size",       "resource_pool",
        "priority",  "devices", "agent_label",     "is_single_node", NULL};
    c->slots_per_trial = 1;
    if ((st = get_obj(v, root, "", "resources", &obj))) return st;
    if (obj && ((st = check_keys(v, obj, "resources", res_known, res_accepted)) ||
                (st = get_int(v, obj, "resources", "slots_per_trial", 1, 1, &c->slots_per_trial))))
        return st;

    json_t *data;
    if ((st = get_obj(v, root, "", "data", &data))) return st;
    if (!data) {
        if (json_object_set_new(root, "data", json_object()))
            return dt_error(DT_ERR_OOM, "out of memory");
        data = json_object_get(root, "data");
    }
    c->data = data;
    if ((st = get_int(v, root, "", "max_restarts", 0, 5, &c->max_restarts))) return st;
    if ((st = parse_list_of(v, root, "bind_mounts", false)) ||
        (st = parse_list_of(v, root, "labels", true)))
        return st;
    return DT_OK;
}

/* ---- construction ---------------------------------------------------------------------------- */

void dt_expconf_free(dt_expconf *c) {
    if (!c) return;
    for (int i = 0; i < c->n_hparams; i++) free(c->hparams[i].name);
    free(c->hparams);
    free(c->name);
    free(c->description);
    free(c->entrypoint);
    free(c->entry_module);
    free(c->entry_symbol);
    free(c->searcher.name);
    free(c->searcher.metric);
    free(c->searcher.mode);
    free(c->searcher.source_checkpoint_uuid);
    free(c->checkpoint_storage.type);
    free(c->checkpoint_storage.host_path);
    free(c->checkpoint_storage.storage_path);
    for (int i = 0; i < c->n_env; i++) {
        free(c->env_keys[i]);
        free(c->env_values[i]);
    }
    free(c->env_keys);
    free(c->env_values);
    for (int i = 0; i < c->n_warnings; i++) free(c->warnings[i]);
    free(c->warnings);
    json_decref(c->json);
    dt_yaml_free(c->doc);
    free(c);
}

/* Takes ownership of json (a reference) and doc. */
static dt_status build(json_t *json, dt_yaml_doc *doc, unsigned flags, dt_expconf **out) {
    *out = NULL;
    dt_expconf *c = calloc(1, sizeof *c);
    if (!c) {
        json_decref(json);
        dt_yaml_free(doc);
        return dt_error(DT_ERR_OOM, "out of memory");
    }
    c->json = json;
    c->doc = doc;
    vctx v = {c, doc};
    dt_status st = validate(&v, flags);
    if (st) {
        dt_expconf_free(c);
        return st;
    }
    *out = c;
    return DT_OK;
}

dt_status dt_expconf_from_doc(dt_yaml_doc *doc, unsigned flags, dt_expconf **out) {
    if (!doc) {
        *out = NULL;
        return dt_error(DT_ERR_INVALID, "dt_expconf_from_doc: doc is NULL");
    }
    return build(json_incref(dt_yaml_root(doc)), doc, flags, out);
}

dt_status dt_expconf_from_json(const json_t *json, unsigned flags, dt_expconf **out) {
    json_t *copy = json ? json_deep_copy(json) : json_null();
    if (!copy) {
        *out = NULL;
        return dt_error(DT_ERR_OOM, "out of memory copying the config");
    }
    return build(copy, NULL, flags, out);
}

dt_status dt_expconf_load_file(const char *path, unsigned flags, dt_expconf **out) {
    *out = NULL;
    dt_yaml_doc *doc = dt_yaml_load_file(path);
    if (!doc) return dt_last_status();
    return dt_expconf_from_doc(doc, flags, out);
}

dt_status dt_expconf_load_string(const char *text, const char *name, unsigned flags,
                                 dt_expconf **out) {
    *out = NULL;
    if (!text) return dt_error(DT_ERR_INVALID, "dt_expconf_load_string: text is NULL");
    dt_yaml_doc *doc = dt_yaml_load_string(text, strlen(text), name);
    if (!doc) return dt_last_status();
    return dt_expconf_from_doc(doc, flags, out);
}

dt_status dt_expconf_set_max_length(dt_expconf *cfg, dt_length len) {
    char f[64];
    if (len.n <= 0 || (unsigned)len.unit > DT_UNIT_RECORDS)
        return dt_error(DT_ERR_CONFIG, "searcher.max_length must be positive, got %s",
                        dt_length_format(len, f, sizeof f));
    json_t *s = json_object_get(cfg->json, "searcher");
    if (!json_is_object(s))
        return dt_error(DT_ERR_STATE, "dt_expconf_set_max_length: the config has no searcher");
    json_t *l = json_object();
    if (!l || json_object_set_new(l, dt_unit_name(len.unit), json_integer(len.n)) ||
        json_object_set_new(s, "max_length", l)) {
        return dt_error(DT_ERR_OOM, "out of memory setting searcher.max_length");
    }
    cfg->searcher.max_length = len;
    return DT_OK;
}
