/*
 * expconf_hparams.c — the experiment config's hyperparameters: definitions (const, int, double,
 * log, categorical; nested groups flattened to dotted names), the check that every name is given
 * once, and the helpers that read them (values for a trial, global_batch_size, lengths in
 * batches).
 */
#include "config_impl.h"

#include <math.h>

static const char *const HP_TYPES[] = {"const", "int", "double", "log", "categorical", NULL};

/* "const", "int", "double", "log", "categorical". */
static const char *hp_type_name(dt_hp_type t) {
    return (unsigned)t <= DT_HP_CATEGORICAL ? HP_TYPES[t] : "?";
}

static dt_status hp_push(vctx *v, dt_hparam hp) {
    dt_expconf *c = v->cfg;
    dt_hparam *t = realloc(c->hparams, (size_t)(c->n_hparams + 1) * sizeof *t);
    if (!t) {
        free(hp.name);
        return OOM();
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
                                         path, dt__cfg_describe(v, hp.vals, d, sizeof d))
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
    if (!nk) return OOM();
    t->keys = nk;
    char *own = strdup(in);
    if (!own || json_object_set_new(t->seen, name, json_integer((json_int_t)t->n))) {
        free(own);
        return OOM();
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
        if (!name) return OOM();
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
        if (!name) return OOM();
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

/* hyperparameters: every name given once, then every definition. */
dt_status dt__cfg_hparams(vctx *v, const dt_conf_sec *top) {
    dt_conf_sec obj;
    TRY(dt_conf_section(top, "hyperparameters", 0, NULL, &obj));
    if (!obj.obj) return DT_OK;
    hp_names names = {.seen = json_object()};
    dt_status st = names.seen ? hp_check_names(v, &names, obj.obj, "") : OOM();
    for (size_t i = 0; i < names.n; i++) free(names.keys[i].in);
    free(names.keys);
    json_decref(names.seen);
    TRY(st);
    return parse_hparams(v, &obj, "");
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
                        h->name, where_of(cfg, h->pos, w, sizeof w), hp_type_name(h->type));
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
                        where_of(cfg, h->pos, w, sizeof w), hp_type_name(h->type), for_what);
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
