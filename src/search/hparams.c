/*
 * hparams.c — a trial's hyperparameter values from the config's definitions: random samples
 * (random, single, adaptive_asha) and grid points (grid).
 *
 * The definitions are dt_expconf's flattened dt_hparam list, in file order; values are drawn in
 * that fixed order so a seed always gives the same trials. A trial's values are built into an
 * object shaped like `hyperparameters` by walking the config's own tree in the same order the
 * config parser flattened it: nested groups stay nested, a definition becomes its value, and a
 * constant (a plain value or {type: const, val: ...}, objects and strings included) is copied
 * as given.
 *
 * Grid axes: int: min(count, max − min + 1) points round(min + i·(max − min)/(count − 1));
 * double: linear; log: base^(linear in the exponent); count 1: the midpoint; categorical:
 * every value; const: its value. The grid is the cartesian product, enumerated lazily (point
 * i decodes as a mixed-radix number, the first hyperparameter varying slowest).
 */
#include "search_impl.h"
#include "base/base_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- building the values object ------------------------------------------------------------ */

typedef struct hp_walk {
    const dt_expconf *cfg;
    json_t **vals; /* one value per cfg->hparams entry (stolen as they are placed) */
    int next;      /* the next cfg->hparams entry */
} hp_walk;

/* "prefix.key" (or "key" at the top) into buf; false when it does not fit. */
static bool hp_join(const char *prefix, const char *key, char *buf, size_t n) {
    int w = snprintf(buf, n, "%s%s%s", prefix, *prefix ? "." : "", key);
    return w >= 0 && (size_t)w < n;
}

/* The next definition's value, checked to be the one named `name` (the walk and the parser's
 * flattening must agree). NULL with DT_ERR_STATE otherwise. */
static json_t *hp_take(hp_walk *w, const char *name) {
    if (w->next >= w->cfg->n_hparams || strcmp(w->cfg->hparams[w->next].name, name)) {
        dt_error(DT_ERR_STATE,
                 "hyperparameters.%s: the config's hyperparameter list does not match its "
                 "tree (was the config changed after it was validated?)",
                 name);
        return NULL;
    }
    json_t *v = w->vals[w->next];
    w->vals[w->next++] = NULL;
    return v;
}

/* The object of values for the group `grp` named `prefix`; NULL with the error set. */
static json_t *hp_build_group(hp_walk *w, const json_t *grp, const char *prefix) {
    json_t *out = json_object();
    if (!out) {
        dt_error(DT_ERR_OOM, "out of memory building hyperparameter values");
        return NULL;
    }
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)grp, k, x) {
        char name[1024];
        if (!hp_join(prefix, k, name, sizeof name)) {
            dt_error(DT_ERR_CONFIG, "hyperparameters.%s.%s: the name is too long", prefix, k);
            json_decref(out);
            return NULL;
        }
        json_t *val;
        if (json_is_object(x) && !json_object_get(x, "type") && json_object_size(x) > 0)
            val = hp_build_group(w, x, name);
        else
            val = hp_take(w, name);
        if (!val) {
            json_decref(out);
            return NULL;
        }
        if (json_object_set_new(out, k, val)) {
            json_decref(out);
            dt_error(DT_ERR_OOM, "out of memory building hyperparameter values");
            return NULL;
        }
    }
    return out;
}

/* The values object from one value per definition (`vals`, all released here). */
static dt_status hp_build(const dt_expconf *cfg, json_t **vals, json_t **out) {
    *out = NULL;
    hp_walk w = {cfg, vals, 0};
    const json_t *root = json_object_get(cfg->json, "hyperparameters");
    json_t *obj = json_is_object(root) ? hp_build_group(&w, root, "") : json_object();
    dt_status st = DT_OK;
    if (!obj) {
        st = json_is_object(root) ? dt_last_status()
                                  : dt_error(DT_ERR_OOM, "out of memory building hyperparameters");
    } else if (w.next != cfg->n_hparams) {
        json_decref(obj);
        obj = NULL;
        st = dt_error(DT_ERR_STATE, "the config's hyperparameter list does not match its tree");
    }
    for (int i = 0; i < cfg->n_hparams; i++) json_decref(vals[i]);
    *out = obj;
    return st;
}

/* ---- random samples -------------------------------------------------------------------------- */

/* A value drawn for h (a new reference; NULL when out of memory). */
static json_t *hp_draw(const dt_hparam *h, dt_rng *rng) {
    switch (h->type) {
    case DT_HP_CONST:
        return json_deep_copy(h->val);
    case DT_HP_INT: {
        int64_t lo = (int64_t)h->minval, hi = (int64_t)h->maxval;
        uint64_t span = (uint64_t)hi - (uint64_t)lo + 1; /* 0: the whole int64 range */
        uint64_t r = span ? dt_rng_below(rng, span) : dt_rng_u64(rng);
        return json_integer((json_int_t)((uint64_t)lo + r));
    }
    case DT_HP_DOUBLE:
        return json_real(h->minval + dt_rng_uniform(rng) * (h->maxval - h->minval));
    case DT_HP_LOG:
        return json_real(pow(h->base, h->minval + dt_rng_uniform(rng) * (h->maxval - h->minval)));
    case DT_HP_CATEGORICAL: {
        size_t n = json_array_size(h->vals);
        return json_deep_copy(json_array_get(h->vals, (size_t)dt_rng_below(rng, n)));
    }
    }
    return NULL;
}

/* One value per definition from `pick` (NULL entries: out of memory), then built. */
static dt_status hp_values(const dt_expconf *cfg, json_t **vals, json_t **out) {
    for (int i = 0; i < cfg->n_hparams; i++) {
        if (vals[i]) continue;
        for (int j = 0; j < cfg->n_hparams; j++) json_decref(vals[j]);
        return dt_error(DT_ERR_OOM, "out of memory drawing hyperparameters.%s",
                        cfg->hparams[i].name);
    }
    return hp_build(cfg, vals, out);
}

dt_status dt__hp_sample(const dt_expconf *cfg, dt_rng *rng, json_t **out) {
    *out = NULL;
    json_t **vals = calloc((size_t)cfg->n_hparams + 1, sizeof *vals);
    if (!vals) return dt_error(DT_ERR_OOM, "out of memory drawing hyperparameters");
    for (int i = 0; i < cfg->n_hparams; i++) vals[i] = hp_draw(&cfg->hparams[i], rng);
    dt_status st = hp_values(cfg, vals, out);
    free(vals);
    return st;
}

/* ---- the grid ---------------------------------------------------------------------------- */

/* The number of points on h's axis; DT_ERR_CONFIG when a range has no count. */
static dt_status grid_axis(const dt_hparam *h, int64_t *n) {
    switch (h->type) {
    case DT_HP_CONST:
        *n = 1;
        return DT_OK;
    case DT_HP_CATEGORICAL:
        *n = (int64_t)json_array_size(h->vals);
        return DT_OK;
    case DT_HP_INT:
    case DT_HP_DOUBLE:
    case DT_HP_LOG:
        break;
    }
    if (h->count <= 0)
        return dt_error(DT_ERR_CONFIG,
                        "hyperparameters.%s needs `count` with the grid searcher (how many "
                        "values to take from [minval, maxval])",
                        h->name);
    *n = h->count;
    if (h->type == DT_HP_INT) {
        double range = h->maxval - h->minval + 1; /* exact up to 2^53, larger is no limit */
        if ((double)*n > range) *n = (int64_t)range;
    }
    return DT_OK;
}

/* Point i of h's axis (n points); a new reference, NULL when out of memory. */
static json_t *grid_value(const dt_hparam *h, int64_t i, int64_t n) {
    double lo = h->minval, hi = h->maxval;
    double x = n == 1 ? (lo + hi) / 2.0 : lo + (double)i * (hi - lo) / (double)(n - 1);
    switch (h->type) {
    case DT_HP_CONST:
        return json_deep_copy(h->val);
    case DT_HP_CATEGORICAL:
        return json_deep_copy(json_array_get(h->vals, (size_t)i));
    case DT_HP_INT:
        return json_integer((json_int_t)llround(x));
    case DT_HP_DOUBLE:
        return json_real(x);
    case DT_HP_LOG:
        return json_real(pow(h->base, x));
    }
    return NULL;
}

dt_status dt__hp_grid_size(const dt_expconf *cfg, int64_t *out) {
    int64_t total = 1;
    for (int i = 0; i < cfg->n_hparams; i++) {
        int64_t n = 1;
        dt_status st = grid_axis(&cfg->hparams[i], &n);
        if (st) return st;
        if (n > DT__GRID_MAX / total)
            return dt_error(DT_ERR_CONFIG,
                            "the grid has more than %d points (at hyperparameters.%s); hint: "
                            "lower the counts or use the random or adaptive_asha searcher",
                            DT__GRID_MAX, cfg->hparams[i].name);
        total *= n;
    }
    *out = total;
    return DT_OK;
}

dt_status dt__hp_grid_point(const dt_expconf *cfg, int64_t index, json_t **out) {
    *out = NULL;
    json_t **vals = calloc((size_t)cfg->n_hparams + 1, sizeof *vals);
    if (!vals) return dt_error(DT_ERR_OOM, "out of memory building a grid point");
    dt_status st = DT_OK;
    for (int i = cfg->n_hparams - 1; i >= 0 && !st; i--) { /* the last varies fastest */
        int64_t n = 1;
        st = grid_axis(&cfg->hparams[i], &n);
        if (!st) {
            vals[i] = grid_value(&cfg->hparams[i], index % n, n);
            index /= n;
        }
    }
    if (st) {
        for (int i = 0; i < cfg->n_hparams; i++) json_decref(vals[i]);
    } else {
        st = hp_values(cfg, vals, out);
    }
    free(vals);
    return st;
}
