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
 * docs/config.md documents every key and default. Typed reads, positions, messages and
 * suggestions are base's config toolkit (base/confcheck.h) in its YAML dialect.
 */
#include "dtrain/config.h"
#include "base/confcheck.h"
#include "base/path.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- validation context -------------------------------------------------------------------- */

/* Typed reads, positions, messages and unknown keys are base's config toolkit
 * (base/confcheck.h) in its YAML dialect; unknown keys become cfg->warnings at the end. */
typedef struct vctx {
    dt_expconf *cfg;
    dt_conf conf;
} vctx;

#define TRY(x)                                                                                     \
    do {                                                                                           \
        dt_status st_ = (x);                                                                       \
        if (st_ != DT_OK) return st_;                                                              \
    } while (0)

static const char *describe(const vctx *v, const json_t *x, char *buf, size_t n) {
    return dt_conf_describe(&v->conf, x, buf, n);
}

/* A string member: *out = strdup (NULL when absent and !required). */
static dt_status get_str(const dt_conf_sec *s, const char *key, bool required, bool nonempty,
                         const char *hint, char **out) {
    const char *p = NULL;
    *out = NULL;
    if (required && !dt_conf_get(s, key)) return dt_conf_missing(s, key, hint);
    TRY(dt_conf_str(s, key, nonempty, &p));
    if (p && !(*out = strdup(p))) return dt_error(DT_ERR_OOM, "out of memory");
    return DT_OK;
}

/* The section s.key (absent: obj NULL) with its keys checked against known and accepted. */
static dt_status section(vctx *v, const dt_conf_sec *parent, const char *key,
                         const char *const *known, const char *const *accepted, dt_conf_sec *out) {
    TRY(dt_conf_section(parent, key, 0, known, out));
    return out->obj ? dt_conf_check_keys(&v->conf, out->obj, out->path, known, accepted) : DT_OK;
}

/* ---- lengths --------------------------------------------------------------------------------- */

static const char *const UNIT_KEYS[] = {"batches", "epochs", "records", NULL};

/* A length mapping {batches|epochs|records: N}. allow_zero: N = 0 means "not set". */
static dt_status get_length(const dt_conf_sec *s, const char *key, bool allow_zero,
                            dt_length *out) {
    const json_t *x = dt_conf_get(s, key);
    *out = (dt_length){DT_UNIT_BATCHES, 0};
    if (!x) return DT_OK;
    char full[256], d[64];
    dt_conf_path(s, key, full, sizeof full);
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

/* A required number member: an integer when `integral`, else any finite number. */
static dt_status hp_number(const dt_conf_sec *def, const char *key, bool integral, double *out) {
    if (!json_object_get(def->obj, key)) return dt_conf_missing(def, key, NULL);
    if (!integral) {
        *out = NAN;
        TRY(dt_conf_real(def, key, -INFINITY, false, out));
        return isnan(*out) ? dt_conf_expected(def, key, "a finite number", NULL) : DT_OK;
    }
    int64_t n;
    if (!dt_conf_as_int(json_object_get(def->obj, key), &n))
        return dt_conf_expected(def, key, "an integer", NULL);
    *out = (double)n;
    return DT_OK;
}

/* A definition: a mapping with a `type` key; `def` is that mapping as a section. */
static dt_status hp_definition(vctx *v, const dt_conf_sec *def, dt_yaml_pos pos, char *name) {
    static const char *const k_const[] = {"type", "val", NULL};
    static const char *const k_range[] = {"type", "minval", "maxval", "count", NULL};
    static const char *const k_log[] = {"type", "minval", "maxval", "base", "count", NULL};
    static const char *const k_cat[] = {"type", "vals", NULL};
    static const char *const type_hint =
        "a mapping with a 'type' key defines a hyperparameter; to pass a mapping as a constant "
        "write {type: const, val: {...}}";
    dt_hparam hp = {.name = name, .base = 10, .pos = pos};
    const char *path = def->path;
    char d[64];
    dt_status st;
    int t = -1;
    if ((st = dt_conf_enum(def, "type", HP_TYPES, type_hint, &t))) goto fail;
    if (t < 0) { /* type: null */
        st =
            dt_conf_expected(def, "type", "one of const, int, double, log, categorical", type_hint);
        goto fail;
    }
    hp.type = (dt_hp_type)t;
    const char *const *known = t == DT_HP_CONST         ? k_const
                               : t == DT_HP_CATEGORICAL ? k_cat
                               : t == DT_HP_LOG         ? k_log
                                                        : k_range;
    dt_conf_sec s = *def;
    s.known = known;
    if ((st = dt_conf_check_keys(&v->conf, s.obj, path, known, NULL))) goto fail;
    switch (hp.type) {
    case DT_HP_CONST:
        hp.val = json_object_get(s.obj, "val");
        if (!hp.val) {
            st = dt_conf_error_at(&v->conf, dt_conf_sec_pos(&s),
                                  "%s.val is required for a const hyperparameter", path);
            goto fail;
        }
        break;
    case DT_HP_CATEGORICAL:
        hp.vals = json_object_get(s.obj, "vals");
        if (!json_is_array(hp.vals) || json_array_size(hp.vals) == 0) {
            st = hp.vals ? dt_conf_error(&s, "vals", "%s.vals must be a non-empty list, got %s",
                                         path, describe(v, hp.vals, d, sizeof d))
                         : dt_conf_error_at(&v->conf, dt_conf_sec_pos(&s),
                                            "%s.vals is required (the list of values)", path);
            goto fail;
        }
        break;
    case DT_HP_INT:
    case DT_HP_DOUBLE:
    case DT_HP_LOG: {
        bool integral = hp.type == DT_HP_INT;
        if ((st = hp_number(&s, "minval", integral, &hp.minval))) goto fail;
        if ((st = hp_number(&s, "maxval", integral, &hp.maxval))) goto fail;
        if (hp.minval > hp.maxval) {
            st = dt_conf_error(&s, "maxval", "%s: maxval (%g) must not be less than minval (%g)",
                               path, hp.maxval, hp.minval);
            goto fail;
        }
        if (hp.type == DT_HP_LOG && json_object_get(s.obj, "base")) {
            if ((st = hp_number(&s, "base", false, &hp.base))) goto fail;
            if (hp.base <= 0 || hp.base == 1) {
                st = dt_conf_error(&s, "base", "%s.base must be positive and not 1, got %g", path,
                                   hp.base);
                goto fail;
            }
        }
        if ((st = dt_conf_int(&s, "count", 1, INT64_MAX, &hp.count))) goto fail;
        break;
    }
    }
    return hp_push(v, hp);
fail:
    free(name);
    return st;
}

/* Names given by the hyperparameters' keys: a hyperparameter's full name ('optimizer.lr'), or a
 * group's (a nested mapping, or the part of a key before a '.'). Each key's name must be its
 * own: a hyperparameter's name is given once and is no group's, so `{a.b: 1, a: {b: 2}}` (two
 * hyperparameters named a.b) and `{a.b: 1, a: {b: {c: 2}}}` are refused. */
typedef struct hp_key {
    const json_t *grp; /* the mapping holding the key */
    const char *key;   /* borrowed from the tree */
    char *in;          /* the name of the group the key is in ("" at the top), owned */
    bool is_group;
} hp_key;

typedef struct hp_names {
    json_t *seen; /* name → index into keys of its first key */
    hp_key *keys;
    size_t n;
} hp_names;

/* "prefix.key" (or "key" at the top), malloc'd; NULL when out of memory. */
static char *hp_join(const char *prefix, const char *key) {
    size_t n = strlen(prefix) + strlen(key) + 2;
    char *name = malloc(n);
    if (name) snprintf(name, n, "%s%s%s", prefix, *prefix ? "." : "", key);
    return name;
}

/* "the key 'b' under 'a' (t.yaml:3:5)" into buf, for key `key` of `grp` in the group `in`. */
static const char *hp_key_desc(const vctx *v, const json_t *grp, const char *key, const char *in,
                               char *buf, size_t n) {
    char w[512] = "";
    dt_yaml_pos pos = dt_yaml_key_pos(v->conf.doc, grp, key);
    if (v->conf.doc && pos.line > 0) {
        char at[480];
        snprintf(w, sizeof w, " (%s)", dt_yaml_where(v->conf.doc, pos, at, sizeof at));
    }
    snprintf(buf, n, "the key '%s'%s%s%s%s", key, *in ? " under '" : "", in, *in ? "'" : "", w);
    return buf;
}

/* Record that key `key` of `grp` (in the group named `in`) gives `name`. DT_ERR_CONFIG naming
 * both keys if the name is already given and either is a hyperparameter's. */
static dt_status hp_name_add(vctx *v, hp_names *t, const char *name, const json_t *grp,
                             const char *key, const char *in, bool is_group) {
    json_t *i = json_object_get(t->seen, name);
    if (i) {
        const hp_key *first = &t->keys[json_integer_value(i)];
        if (first->is_group && is_group) return DT_OK; /* a group may be filled from several keys */
        char a[700], b[700];
        hp_key_desc(v, first->grp, first->key, first->in, a, sizeof a);
        hp_key_desc(v, grp, key, in, b, sizeof b);
        const char *hint = "hint: rename one of them (a '.' in a key nests the name as a group "
                           "does)";
        if (!first->is_group && !is_group)
            return dt_conf_error_at(&v->conf, dt_yaml_key_pos(v->conf.doc, grp, key),
                                    "hyperparameters.%s is defined twice: by %s and by %s; %s",
                                    name, a, b, hint);
        return dt_conf_error_at(&v->conf, dt_yaml_key_pos(v->conf.doc, grp, key),
                                "hyperparameters.%s names both a hyperparameter, by %s, and a "
                                "group of them, by %s; %s",
                                name, first->is_group ? b : a, first->is_group ? a : b, hint);
    }
    hp_key *nk = realloc(t->keys, (t->n + 1) * sizeof *nk);
    if (!nk) return dt_error(DT_ERR_OOM, "out of memory");
    t->keys = nk;
    char *own = strdup(in);
    if (!own || json_object_set_new(t->seen, name, json_integer((json_int_t)t->n))) {
        free(own);
        return dt_error(DT_ERR_OOM, "out of memory");
    }
    t->keys[t->n++] = (hp_key){grp, key, own, is_group};
    return DT_OK;
}

/* Check the names the members of `grp` (named `prefix`) give, as parse_hparams reads them. */
static dt_status hp_check_names(vctx *v, hp_names *t, const json_t *grp, const char *prefix) {
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)grp, k, x) {
        char *name = hp_join(prefix, k);
        if (!name) return dt_error(DT_ERR_OOM, "out of memory");
        size_t plen = strlen(prefix) + (*prefix ? 1 : 0);
        bool group = json_is_object(x) && !json_object_get(x, "type") && json_object_size(x) > 0;
        dt_status st = DT_OK;
        /* the groups a '.' in the key opens: "b.c.d" under "a" → a.b, a.b.c */
        for (const char *dot = strchr(k, '.'); !st && dot; dot = strchr(dot + 1, '.')) {
            name[plen + (size_t)(dot - k)] = 0;
            st = hp_name_add(v, t, name, grp, k, prefix, true);
            name[plen + (size_t)(dot - k)] = '.';
        }
        if (!st) st = hp_name_add(v, t, name, grp, k, prefix, group);
        if (!st && group) st = hp_check_names(v, t, x, name);
        free(name);
        if (st) return st;
    }
    return DT_OK;
}

/* Every member of `grp` (the hyperparameters mapping or a nested group). */
static dt_status parse_hparams(vctx *v, const dt_conf_sec *grp, const char *prefix) {
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)grp->obj, k, x) {
        char *name = hp_join(prefix, k);
        if (!name) return dt_error(DT_ERR_OOM, "out of memory");
        dt_conf_sec sub = {.conf = &v->conf, .obj = x};
        dt_conf_path(grp, k, sub.path, sizeof sub.path);
        dt_status st;
        if (json_is_object(x) && json_object_get(x, "type")) {
            st = hp_definition(v, &sub, dt_conf_pos(grp, k), name);
        } else if (json_is_object(x) && json_object_size(x) > 0) {
            st = parse_hparams(v, &sub, name); /* a nested group */
            free(name);
        } else {
            st = hp_push(v, (dt_hparam){.name = name,
                                        .type = DT_HP_CONST,
                                        .val = x,
                                        .base = 10,
                                        .pos = dt_conf_pos(grp, k)});
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
    static const dt_conf yaml_words = {.dialect = DT_CONF_YAML};
    if (!dt_conf_as_int(h->val, &n) || n <= 0)
        return dt_error(
            DT_ERR_CONFIG, "hyperparameters.global_batch_size%s must be a positive integer, got %s",
            where_of(cfg, h->pos, w, sizeof w), dt_conf_describe(&yaml_words, h->val, d, sizeof d));
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

static const char *const SEARCHERS[] = {"single", "grid", "random", "adaptive_asha",
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
    TRY(section(v, searcher, "dsat", known, NULL, &o));
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

static dt_status parse_searcher(vctx *v, const dt_conf_sec *root, unsigned flags) {
    static const char *const known[] = {"name",
                                        "metric",
                                        "smaller_is_better",
                                        "max_length",
                                        "max_trials",
                                        "max_concurrent_trials",
                                        "mode",
                                        "divisor",
                                        "max_rungs",
                                        "stop_once",
                                        "source_trial_id",
                                        "source_checkpoint_uuid",
                                        "method",
                                        "dsat",
                                        NULL};
    static const char *const accepted[] = {"bracket_rungs", "time_metric", "max_time", NULL};
    dt_searcher_conf *s = &v->cfg->searcher;
    dt_conf_sec obj;
    TRY(section(v, root, "searcher", known, accepted, &obj));
    if (!obj.obj)
        return dt_conf_missing(root, "searcher",
                               "searcher: {name: single, metric: validation_loss, max_length: "
                               "{batches: 1000}}");
    int name_i = 0, mode_i = 1;
    TRY(dt_conf_enum(&obj, "name", SEARCHERS, NULL, &name_i));
    if (!(s->name = strdup(SEARCHERS[name_i]))) return dt_error(DT_ERR_OOM, "out of memory");
    TRY(get_str(&obj, "metric", true, true,
                "the name of the validation metric to judge trials by, e.g. `metric: "
                "validation_loss`",
                &s->metric));
    s->smaller_is_better = true;
    TRY(dt_conf_bool(&obj, "smaller_is_better", &s->smaller_is_better));
    TRY(get_length(&obj, "max_length", false, &s->max_length));
    if (s->max_length.n == 0 && !(flags & DT_EXPCONF_MAX_LENGTH_OPTIONAL))
        return dt_conf_missing(&obj, "max_length",
                               "how long to train, e.g. `max_length: {batches: 1000}` (or "
                               "{epochs: N}, {records: N})");
    TRY(dt_conf_int(&obj, "max_trials", 1, INT64_MAX, &s->max_trials));
    if (s->max_trials == 0 && (!strcmp(s->name, "random") || !strcmp(s->name, "adaptive_asha"))) {
        char hint[80];
        snprintf(hint, sizeof hint, "the %s searcher needs the number of trials to run", s->name);
        return dt_conf_missing(&obj, "max_trials", hint);
    }
    TRY(dt_conf_int(&obj, "max_concurrent_trials", 0, INT64_MAX, &s->max_concurrent_trials));
    TRY(dt_conf_enum(&obj, "mode", ASHA_MODES, NULL, &mode_i));
    if (!(s->mode = strdup(ASHA_MODES[mode_i]))) return dt_error(DT_ERR_OOM, "out of memory");
    s->divisor = 4;
    TRY(dt_conf_real(&obj, "divisor", 1, true, &s->divisor));
    s->max_rungs = 5;
    TRY(dt_conf_int(&obj, "max_rungs", 1, INT64_MAX, &s->max_rungs));
    TRY(dt_conf_bool(&obj, "stop_once", &s->stop_once));
    TRY(dt_conf_int(&obj, "source_trial_id", 1, INT64_MAX, &s->source_trial_id));
    TRY(get_str(&obj, "source_checkpoint_uuid", false, true, NULL, &s->source_checkpoint_uuid));
    bool custom = !strcmp(s->name, "custom");
    if (!strcmp(s->name, "dsat")) {
        int m = 0;
        TRY(dt_conf_enum(&obj, "method", DSAT_METHODS, NULL, &m));
        if (!(s->method = strdup(DSAT_METHODS[m]))) return dt_error(DT_ERR_OOM, "out of memory");
        TRY(parse_dsat(v, &obj, &s->dsat));
    } else {
        TRY(get_str(&obj, "method", custom, true,
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

/* storage_path must name a directory inside host_path: checked on the string alone (dt_path_within,
 * lexically), since neither need exist yet; whoever creates or opens the directory checks the
 * file system then. Without host_path the runner's default root applies and storage_path must be
 * relative. DT_ERR_CONFIG at storage_path. */
static dt_status check_storage_path(const dt_conf_sec *obj, const dt_ckpt_storage_conf *cs) {
    const char *sp = cs->storage_path, *hp = cs->host_path;
    if (!sp) return DT_OK;
    if (!hp && sp[0] == '/')
        return dt_conf_error(obj, "storage_path",
                             "checkpoint_storage.storage_path \"%s\" is absolute but no host_path "
                             "is given; hint: give host_path, or make storage_path relative (it is "
                             "then under the default checkpoint directory)",
                             sp);
    size_t cap = (hp ? strlen(hp) : 1) + strlen(sp) + 2; /* the resolved path always fits */
    char *out = malloc(cap);
    if (!out) return dt_error(DT_ERR_OOM, "out of memory");
    dt_status st = dt_path_within(hp ? hp : ".", sp, DT_PATH_LEXICAL, out, cap);
    free(out);
    if (st == DT_OK) return DT_OK;
    if (st == DT_ERR_OOM) return st;
    if (hp && sp[0] == '/' && hp[0] == '/')
        return dt_conf_error(obj, "storage_path",
                             "checkpoint_storage.storage_path \"%s\" is absolute but not under "
                             "host_path \"%s\"; hint: make it relative to host_path, or an "
                             "absolute path inside it",
                             sp, hp);
    if (hp && sp[0] == '/')
        return dt_conf_error(obj, "storage_path",
                             "checkpoint_storage.storage_path \"%s\" is absolute but host_path "
                             "\"%s\" is relative, so it cannot be checked; hint: make "
                             "storage_path relative to host_path",
                             sp, hp);
    return dt_conf_error(obj, "storage_path",
                         "checkpoint_storage.storage_path \"%s\" climbs out of %s%s%s with "
                         "\"..\"; hint: storage_path names a directory inside host_path (\"..\" "
                         "may not leave it)",
                         sp, hp ? "host_path \"" : "the checkpoint directory", hp ? hp : "",
                         hp ? "\"" : "");
}

static dt_status parse_storage(vctx *v, const dt_conf_sec *root) {
    static const char *const known[] = {"type",
                                        "host_path",
                                        "storage_path",
                                        "save_trial_best",
                                        "save_trial_latest",
                                        "save_experiment_best",
                                        NULL};
    static const char *const accepted[] = {"propagation", NULL};
    static const char *const types[] = {"shared_fs", NULL};
    static const char *const elsewhere[] = {"s3", "gcs", "azure", "directory", NULL};
    dt_ckpt_storage_conf *cs = &v->cfg->checkpoint_storage;
    dt_conf_sec obj;
    cs->save_trial_best = 1;
    cs->save_trial_latest = 1;
    TRY(section(v, root, "checkpoint_storage", known, accepted, &obj));
    if (obj.obj) {
        const json_t *t = dt_conf_get(&obj, "type");
        if (json_is_string(t) && dt_conf_in_list(json_string_value(t), elsewhere))
            return dt_conf_error(&obj, "type",
                                 "checkpoint_storage.type '%s' is not supported by dtrain (valid: "
                                 "shared_fs); hint: use shared_fs with a host_path",
                                 json_string_value(t));
        int ti;
        TRY(dt_conf_enum(&obj, "type", types, NULL, &ti));
        TRY(get_str(&obj, "host_path", false, true, NULL, &cs->host_path));
        TRY(get_str(&obj, "storage_path", false, true, NULL, &cs->storage_path));
        TRY(check_storage_path(&obj, cs));
        TRY(dt_conf_int(&obj, "save_trial_best", 0, INT64_MAX, &cs->save_trial_best));
        TRY(dt_conf_int(&obj, "save_trial_latest", 0, INT64_MAX, &cs->save_trial_latest));
        TRY(dt_conf_int(&obj, "save_experiment_best", 0, INT64_MAX, &cs->save_experiment_best));
    }
    if (!(cs->type = strdup("shared_fs"))) return dt_error(DT_ERR_OOM, "out of memory");
    return DT_OK;
}

/* s.key: a list of "NAME=value" strings, kept in cfg->env_* when `keep`. */
static dt_status parse_env_list(vctx *v, const dt_conf_sec *s, const char *key, bool keep) {
    const json_t *list = dt_conf_get(s, key);
    char path[300], d[64];
    dt_conf_path(s, key, path, sizeof path);
    if (!json_is_array(list))
        return dt_conf_expected(s, key, "a list of \"NAME=value\" strings", NULL);
    dt_expconf *c = v->cfg;
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *e = json_array_get(list, i);
        dt_yaml_pos pos = dt_yaml_item_pos(v->conf.doc, list, i);
        const char *str = json_string_value(e);
        const char *eq = str ? strchr(str, '=') : NULL;
        if (!eq)
            return dt_conf_error_at(
                &v->conf, pos, "%s[%zu] must be a \"NAME=value\" string, got %s%s", path, i,
                describe(v, e, d, sizeof d),
                json_is_object(e) ? " (write `- NAME=value`, not `- NAME: value`)" : "");
        size_t kl = (size_t)(eq - str);
        bool ok = kl > 0 && !(str[0] >= '0' && str[0] <= '9');
        for (size_t j = 0; j < kl && ok; j++) {
            char ch = str[j];
            ok = ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                 (ch >= '0' && ch <= '9');
        }
        if (!ok)
            return dt_conf_error_at(&v->conf, pos,
                                    "%s[%zu]: \"%.*s\" is not a valid environment variable name "
                                    "(letters, digits and _, not starting with a digit)",
                                    path, i, (int)kl, str);
        if (!keep) continue;
        char *k = strndup(str, kl), *val = strdup(eq + 1);
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

static dt_status parse_environment(vctx *v, const dt_conf_sec *root) {
    static const char *const known[] = {"environment_variables", NULL};
    static const char *const accepted[] = {"image",    "force_pull_image", "registry_auth",
                                           "pod_spec", "add_capabilities", "drop_capabilities",
                                           "ports",    "proxy_ports",      NULL};
    static const char *const devices[] = {"cpu", "cuda", "gpu", "rocm", NULL};
    dt_conf_sec obj, ev;
    TRY(section(v, root, "environment", known, accepted, &obj));
    const json_t *x = dt_conf_get(&obj, "environment_variables");
    if (!x) return DT_OK;
    if (!json_is_object(x)) return parse_env_list(v, &obj, "environment_variables", true);
    /* the per-device form: {cpu: [...], cuda: [...], rocm: [...]}; dtrain runs on the CPU */
    TRY(section(v, &obj, "environment_variables", devices, NULL, &ev));
    for (int i = 0; devices[i]; i++)
        if (dt_conf_get(&ev, devices[i])) TRY(parse_env_list(v, &ev, devices[i], i == 0));
    return DT_OK;
}

static dt_status parse_entrypoint(vctx *v, const dt_conf_sec *root) {
    dt_expconf *c = v->cfg;
    TRY(get_str(root, "entrypoint", true, true,
                "`entrypoint: model_def:MyTrial` compiles model_def.c from the model directory "
                "and runs its `const dt_trial_def MyTrial`",
                &c->entrypoint));
    const char *s = c->entrypoint, *colon = strchr(s, ':');
    if (strchr(s, '/') || strchr(s, ' ')) {
        /* a command ("./train --fast"): run in the model directory, it uses the Core API */
        c->entry_command = strdup(s);
        return c->entry_command ? DT_OK : dt_error(DT_ERR_OOM, "out of memory");
    }
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
        return dt_conf_error(root, "entrypoint",
                             "entrypoint must be \"<file stem>:<trial symbol>\" such as "
                             "\"model_def:MyTrial\" (model_def.c defines `const dt_trial_def "
                             "MyTrial`), or a command such as \"./train\" (a program using "
                             "the Core API); got %s",
                             describe(v, json_object_get(root->obj, "entrypoint"), d, sizeof d));
    }
    if (!(c->entry_module = strndup(s, (size_t)(colon - s))) ||
        !(c->entry_symbol = strdup(colon + 1)))
        return dt_error(DT_ERR_OOM, "out of memory");
    return DT_OK;
}

/* s.key: a list of strings, or of mappings. */
static dt_status parse_list_of(const dt_conf_sec *s, const char *key, bool strings) {
    const json_t *x;
    char d[64];
    TRY(dt_conf_list(s, key, &x));
    for (size_t i = 0; x && i < json_array_size(x); i++) {
        json_t *e = json_array_get(x, i);
        if (strings ? !json_is_string(e) : !json_is_object(e))
            return dt_conf_error_at(
                s->conf, dt_yaml_item_pos(s->conf->doc, x, i), "%s[%zu] must be %s, got %s", key, i,
                strings ? "a string" : "a mapping", dt_conf_describe(s->conf, e, d, sizeof d));
    }
    return DT_OK;
}

/* The slurm section (dt_slurm_conf). Determined's gpu_type is accepted and unused. */
static dt_status parse_slurm(vctx *v, const dt_conf_sec *top) {
    static const char *const known[] = {"partition",      "account",       "time", "sbatch_args",
                                        "slots_per_node", "cpus_per_slot", NULL};
    static const char *const accepted[] = {"gpu_type", NULL};
    dt_slurm_conf *sc = &v->cfg->slurm;
    dt_conf_sec obj;
    sc->cpus_per_slot = 1;
    TRY(section(v, top, "slurm", known, accepted, &obj));
    TRY(get_str(&obj, "partition", false, true, NULL, &sc->partition));
    TRY(get_str(&obj, "account", false, true, NULL, &sc->account));
    TRY(get_str(&obj, "time", false, true, NULL, &sc->time));
    TRY(dt_conf_int(&obj, "slots_per_node", 1, 1 << 20, &sc->slots_per_node));
    TRY(dt_conf_int(&obj, "cpus_per_slot", 1, 1 << 20, &sc->cpus_per_slot));
    TRY(parse_list_of(&obj, "sbatch_args", true));
    const json_t *args = NULL;
    TRY(dt_conf_list(&obj, "sbatch_args", &args));
    size_t n = json_array_size(args);
    if (n > 60)
        return dt_conf_error(&obj, "sbatch_args",
                             "slurm.sbatch_args has %zu items, more than 60; "
                             "hint: put options in an sbatch script's "
                             "defaults (SBATCH_* variables) instead",
                             n);
    if (n && !(sc->sbatch_args = calloc(n, sizeof *sc->sbatch_args)))
        return dt_error(DT_ERR_OOM, "out of memory");
    for (size_t i = 0; i < n; i++, sc->n_sbatch_args++)
        if (!(sc->sbatch_args[i] = strdup(json_string_value(json_array_get(args, i)))))
            return dt_error(DT_ERR_OOM, "out of memory");
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
                                        "slurm",
                                        NULL};
/* Determined keys that have no effect in dtrain (accepted so configs carry over) */
static const char *const TOP_ACCEPTED[] = {
    "workspace",    "project", "debug", "tensorboard_storage", "log_policies", "retention_policy",
    "integrations", "pbs",     NULL};

static dt_status validate(vctx *v, unsigned flags) {
    dt_expconf *c = v->cfg;
    json_t *root = c->json;
    if (!json_is_object(root)) {
        char d[64];
        if (json_is_null(root))
            return dt_conf_error_at(&v->conf, (dt_yaml_pos){0, 0},
                                    "the config is empty; hint: see docs/config.md for an example");
        return dt_conf_error_at(&v->conf, dt_yaml_node_pos(v->conf.doc, root),
                                "the experiment config must be a mapping (entrypoint:, "
                                "hyperparameters:, searcher:, ...), got %s",
                                describe(v, root, d, sizeof d));
    }
    dt_conf_sec top = dt_conf_root(&v->conf, 0, TOP_KNOWN), obj;
    TRY(dt_conf_check_keys(&v->conf, root, "", TOP_KNOWN, TOP_ACCEPTED));

    TRY(parse_entrypoint(v, &top));
    TRY(get_str(&top, "name", false, true, NULL, &c->name));
    if (!c->name && !(c->name = strdup(c->entry_symbol ? c->entry_symbol : c->entry_command)))
        return dt_error(DT_ERR_OOM, "out of memory");
    TRY(get_str(&top, "description", false, false, NULL, &c->description));

    TRY(dt_conf_section(&top, "hyperparameters", 0, NULL, &obj));
    if (obj.obj) {
        hp_names names = {.seen = json_object()};
        dt_status st = names.seen ? hp_check_names(v, &names, obj.obj, "")
                                  : dt_error(DT_ERR_OOM, "out of memory");
        for (size_t i = 0; i < names.n; i++) free(names.keys[i].in);
        free(names.keys);
        json_decref(names.seen);
        TRY(st);
        TRY(parse_hparams(v, &obj, ""));
    }

    TRY(parse_searcher(v, &top, flags));
    TRY(get_length(&top, "min_validation_period", true, &c->min_validation_period));
    TRY(get_length(&top, "min_checkpoint_period", true, &c->min_checkpoint_period));
    c->scheduling_unit = 100;
    TRY(dt_conf_int(&top, "records_per_epoch", 0, INT64_MAX, &c->records_per_epoch));
    TRY(dt_conf_int(&top, "scheduling_unit", 1, INT64_MAX, &c->scheduling_unit));
    TRY(dt_conf_bool(&top, "perform_initial_validation", &c->perform_initial_validation));
    static const char *const policies[] = {"best", "all", "none", NULL};
    int pol = 0;
    TRY(dt_conf_enum(&top, "checkpoint_policy", policies, NULL, &pol));
    c->checkpoint_policy = pol == 0 ? DT_CKPT_BEST : pol == 1 ? DT_CKPT_ALL : DT_CKPT_NONE;
    TRY(parse_storage(v, &top));

    static const char *const opt_known[] = {"aggregation_frequency", "average_aggregated_gradients",
                                            "average_training_metrics", "deterministic", NULL};
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
    TRY(section(v, &top, "optimizations", opt_known, opt_accepted, &obj));
    TRY(dt_conf_int(&obj, "aggregation_frequency", 1, INT64_MAX, &c->aggregation_frequency));
    TRY(dt_conf_bool(&obj, "average_aggregated_gradients", &c->average_aggregated_gradients));
    TRY(dt_conf_bool(&obj, "average_training_metrics", &c->average_training_metrics));
    bool deterministic = false; /* checked here, read by the trial context */
    TRY(dt_conf_bool(&obj, "deterministic", &deterministic));

    /* profiling: the fit loop's per-batch timings (profiler lines) for a range of batches */
    static const char *const prof_known[] = {"enabled", "begin_on_batch", "end_after_batch",
                                             "sync_timings", NULL};
    bool sync = true;
    c->profiling_end = INT64_MAX;
    TRY(section(v, &top, "profiling", prof_known, NULL, &obj));
    TRY(dt_conf_bool(&obj, "enabled", &c->profiling_enabled));
    TRY(dt_conf_int(&obj, "begin_on_batch", 0, INT64_MAX, &c->profiling_begin));
    TRY(dt_conf_bool(&obj, "sync_timings", &sync));
    TRY(dt_conf_int(&obj, "end_after_batch", 0, INT64_MAX, &c->profiling_end));
    if (c->profiling_end < c->profiling_begin)
        return dt_conf_error(&obj, "end_after_batch",
                             "profiling.end_after_batch (%lld) is before begin_on_batch (%lld); "
                             "hint: the range is inclusive, end_after_batch >= begin_on_batch",
                             (long long)c->profiling_end, (long long)c->profiling_begin);

    static const char *const repro_known[] = {"experiment_seed", NULL};
    int64_t seed = -1;
    TRY(section(v, &top, "reproducibility", repro_known, NULL, &obj));
    TRY(dt_conf_int(&obj, "experiment_seed", 0, INT32_MAX, &seed));
    c->has_experiment_seed = seed >= 0;
    c->experiment_seed = seed >= 0 ? (uint32_t)seed : 0;

    TRY(parse_environment(v, &top));

    static const char *const res_known[] = {"slots_per_trial", "max_slots", "launcher", NULL};
    static const char *const res_accepted[] = {"weight",        "native_parallel", "shm_size",
                                               "resource_pool", "priority",        "devices",
                                               "agent_label",   "is_single_node",  NULL};
    c->slots_per_trial = 1;
    TRY(section(v, &top, "resources", res_known, res_accepted, &obj));
    TRY(dt_conf_int(&obj, "slots_per_trial", 1, INT64_MAX, &c->slots_per_trial));
    TRY(dt_conf_int(&obj, "max_slots", 1, INT64_MAX, &c->max_slots));
    if (c->max_slots && c->max_slots < c->slots_per_trial) {
        char full[256];
        dt_conf_path(&obj, "max_slots", full, sizeof full);
        return dt_conf_error(&obj, "max_slots",
                             "%s is %lld, less than slots_per_trial (%lld): no trial could run; "
                             "hint: raise max_slots or lower slots_per_trial",
                             full, (long long)c->max_slots, (long long)c->slots_per_trial);
    }

    static const char *const LAUNCHERS[] = {"local", "slurm", NULL};
    int launcher = -1;
    TRY(dt_conf_enum(&obj, "launcher", LAUNCHERS,
                     "the master's default is `dtrain master --launcher`", &launcher));
    if (launcher >= 0 && !(c->launcher = strdup(LAUNCHERS[launcher])))
        return dt_error(DT_ERR_OOM, "out of memory");
    TRY(parse_slurm(v, &top));

    TRY(dt_conf_section(&top, "data", 0, NULL, &obj));
    if (!obj.obj && json_object_set_new(root, "data", json_object()))
        return dt_error(DT_ERR_OOM, "out of memory");
    c->data = json_object_get(root, "data");
    c->max_restarts = 5;
    TRY(dt_conf_int(&top, "max_restarts", 0, INT64_MAX, &c->max_restarts));
    TRY(parse_list_of(&top, "bind_mounts", false));
    TRY(parse_list_of(&top, "labels", true));
    return DT_OK;
}

/* Validate, then turn the unknown keys (in validation order) into cfg->warnings, each also sent
 * to dt_log — after an error too, to explain it. */
static dt_status validate_and_warn(vctx *v, unsigned flags) {
    dt_status st = validate(v, flags);
    dt_expconf *c = v->cfg;
    for (int i = 0; i < v->conf.n_unknown; i++) {
        char w[1500];
        dt_conf_unknown_warning(&v->conf, i, w, sizeof w);
        dt_log(DT_LOG_WARN, "%s", w);
        char **ws = realloc(c->warnings, (size_t)(c->n_warnings + 1) * sizeof *ws);
        if (ws) c->warnings = ws;
        if (!ws || !(ws[c->n_warnings] = strdup(w))) {
            if (st == DT_OK) st = dt_error(DT_ERR_OOM, "out of memory recording a config warning");
            break;
        }
        c->n_warnings++;
    }
    dt_conf_clear(&v->conf);
    return st;
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
    free(c->entry_command);
    free(c->searcher.name);
    free(c->searcher.metric);
    free(c->searcher.mode);
    free(c->searcher.source_checkpoint_uuid);
    free(c->searcher.method);
    free(c->checkpoint_storage.type);
    free(c->checkpoint_storage.host_path);
    free(c->checkpoint_storage.storage_path);
    free(c->launcher);
    free(c->slurm.partition);
    free(c->slurm.account);
    free(c->slurm.time);
    for (int i = 0; i < c->slurm.n_sbatch_args; i++) free(c->slurm.sbatch_args[i]);
    free(c->slurm.sbatch_args);
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
    vctx v = {c, {.dialect = DT_CONF_YAML, .doc = doc, .root = json}};
    dt_status st = validate_and_warn(&v, flags);
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
