/*
 * asha.c — the adaptive_asha search method: brackets of asynchronous successive halving with
 * the stopping rule, the one the reference keeps whatever stop_once says: a trial stopped at a
 * rung never runs again (older releases paused and later promoted it when stop_once was false).
 *
 * Time metric: with searcher.time_metric naming a metric the trial reports (not batches,
 * records or epochs, which the config turns into max_length), L = max_time in that metric's
 * units; the master passes each validation's reported value as the length, so a result counts
 * at every rung that value has reached, and the VALIDATE_AFTER lengths are rung values the
 * master keeps to itself (the trial trains toward max_length until it is stopped).
 *
 * Setup (L = max_length in the unit trials train in: an epochs length becomes records with
 * records_per_epoch, and records become batches when global_batch_size is one constant — so
 * {epochs: 2} of 60000 records at 64 a batch is L = 1875 batches, rungs 117, 468, 1875 with
 * d = 4; a searched batch size keeps records, each trial converting with its own; d = divisor,
 * T = max_trials):
 *   maxRungs = min(max_rungs, ⌊log_d L⌋ + 1, ⌊log_d T⌋ + 1), the logs exact (d^k ≤ x);
 *   brackets by mode: aggressive [maxRungs]; standard [(maxRungs − 1)/2 + 1 … maxRungs];
 *   conservative [1 … maxRungs]; sorted descending;
 *   trials per bracket ∝ d^(r−1)/r (at least 1 each, the remainder to the first);
 *   max_concurrent_trials (default 16, at least one per bracket) split evenly, the remainder to
 *   the first brackets; rung i of an r-rung bracket at max(⌊L / d^(r−i−1)⌋, 1) units.
 * Each bracket starts min(its concurrency, its trials) trials: CREATE, VALIDATE_AFTER rung 0.
 * A validation at `length` is judged against every rung it reaches, from the trial's current
 * one: its metric (negated when larger is better) is inserted in the rung's sorted list; the
 * trial continues only if its index < max(⌊n/d⌋, 1); reaching the top rung closes it. A trial
 * that continues gets a VALIDATE_AFTER for the next rung it has not reached; one that stops or
 * tops out gets CLOSE. A closed trial makes room for a new one in its bracket while created −
 * invalid < the bracket's trials. A trial that exits with invalid hyperparameters leaves no
 * metric behind; any other early exit counts as the worst value in its current rung.
 * Non-finite metrics are clamped: NaN and +inf to the worst value, −inf to the best.
 * Progress per bracket: rung-0 results / (1.2 T_b), and once rung 0 holds T_b results at least
 * (closed − invalid) / T_b; averaged over brackets. SHUTDOWN once every bracket has no open
 * trial and will create no more.
 */
#include "asha_impl.h"
#include "base/confcheck.h"
#include "search/searcher.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- arithmetic ---------------------------------------------------------------------------- */

/* ⌊log_d x⌋ for x ≥ 1, by multiplying (no floating-point logarithms), at most `cap`. */
static int64_t log_floor(double d, int64_t x, int64_t cap) {
    int64_t k = 0;
    long double p = 1, dd = d, xx = (long double)x;
    while (k < cap && p * dd <= xx) {
        p *= dd;
        k++;
    }
    return k;
}

int dt__asha_max_rungs(int64_t max_rungs, double divisor, int64_t max_length, int64_t max_trials) {
    int64_t m = max_rungs < MAX_RUNGS ? max_rungs : MAX_RUNGS;
    int64_t a = log_floor(divisor, max_length, m) + 1, b = log_floor(divisor, max_trials, m) + 1;
    if (a < m) m = a;
    if (b < m) m = b;
    return m < 1 ? 1 : (int)m;
}

int dt__asha_brackets(const char *mode, int max_rungs, int *rungs) {
    int lo;
    if (!strcmp(mode, "aggressive"))
        lo = max_rungs;
    else if (!strcmp(mode, "standard"))
        lo = (max_rungs - 1) / 2 + 1;
    else if (!strcmp(mode, "conservative"))
        lo = 1;
    else
        return 0;
    int n = 0;
    for (int r = max_rungs; r >= lo; r--) rungs[n++] = r; /* descending */
    return n;
}

int dt__asha_layout(const dt_expconf *cfg, int64_t L, int cap, int *rungs, int64_t *trials,
                    int64_t *conc) {
    const dt_searcher_conf *sc = &cfg->searcher;
    int nb = 1;
    if (sc->num_rungs > 0) {
        rungs[0] = (int)(sc->num_rungs < cap ? sc->num_rungs : cap);
    } else {
        int max_rungs = dt__asha_max_rungs(sc->max_rungs > 0 ? sc->max_rungs : 5, sc->divisor, L,
                                           sc->max_trials);
        nb = dt__asha_brackets(sc->mode ? sc->mode : "standard", max_rungs < cap ? max_rungs : cap,
                               rungs);
    }
    if (nb == 0) return 0;
    dt__asha_bracket_trials(sc->max_trials, sc->divisor, nb, rungs, trials);
    dt__asha_bracket_concurrency(dt__search_max_concurrent(cfg), nb, conc);
    return nb;
}

void dt__asha_bracket_trials(int64_t max_trials, double divisor, int n, const int *rungs,
                             int64_t *trials) {
    double w[MAX_RUNGS], total = 0;
    for (int i = 0; i < n; i++) total += w[i] = pow(divisor, rungs[i] - 1) / rungs[i];
    int64_t allocated = 0;
    for (int i = 0; i < n; i++) {
        int64_t t = (int64_t)(w[i] / total * (double)max_trials);
        allocated += trials[i] = t > 1 ? t : 1;
    }
    if (max_trials > allocated) trials[0] += max_trials - allocated;
}

void dt__asha_bracket_concurrency(int64_t max_concurrent, int n, int64_t *conc) {
    int64_t c = max_concurrent > n ? max_concurrent : n;
    for (int i = 0; i < n; i++) conc[i] = c / n + (i < c % n);
}

int64_t dt__asha_rung_units(int64_t max_length, double divisor, int num_rungs, int i) {
    int64_t u = (int64_t)((double)max_length / pow(divisor, num_rungs - i - 1));
    return u > 1 ? u : 1;
}

/* ---- state (asha_impl.h) ---- */

static const char *const B_KEYS[B_N] = {"created", "invalid", "open", "closed"};

static void rungs_free(bracket *b, int nb) {
    for (int i = 0; b && i < nb; i++) {
        for (int r = 0; b[i].rungs && r < b[i].num_rungs; r++) free(b[i].rungs[r].v);
        free(b[i].rungs);
    }
    free(b);
}

static void asha_free(void *state) {
    asha *a = state;
    if (!a) return;
    rungs_free(a->b, a->nb);
    free(a->t);
    free(a);
}

/* ---- events -------------------------------------------------------------------------------- */

static dt_status asha_initial(void *state, dt_search_ctx *sc, dt_search_ops *out) {
    asha *a = state;
    dt_status st = DT_OK;
    for (int k = 0; k < a->nb && !st; k++) {
        bracket *b = &a->b[k];
        int64_t n = b->max_concurrent < b->max_trials ? b->max_concurrent : b->max_trials;
        for (int64_t i = 0; i < n && !st; i++) st = dt__asha_start(a, k, sc, out);
    }
    return st;
}

static dt_status asha_validated(void *state, dt_search_ctx *sc, int64_t id, double metric,
                                dt_length length, dt_search_ops *out) {
    asha *a = state;
    (void)sc;
    trial *t = dt__asha_trial_of(a, id);
    if (!t) return DT_ERR_STATE;
    if (t->flags & T_DONE) return DT_OK;
    double m = a->smaller_is_better ? metric : -metric;
    if (m != m || m > WORST) m = WORST;
    if (m < -WORST) m = -WORST;
    bracket *b = &a->b[t->bracket];
    bool passed = false;
    for (int r = t->rung; r < b->num_rungs; r++) {
        rung *g = &b->rungs[r];
        t->rung = r;
        if (length.n < g->units)
            return passed ? dt_search_validate_after(out, id, dt__asha_units(a, g->units)) : DT_OK;
        int64_t idx = dt__asha_rung_insert(g, id, m);
        if (idx < 0) return dt_error(DT_ERR_OOM, "out of memory recording a rung's metric");
        int64_t keep = (int64_t)((double)g->n / a->divisor);
        if (r == b->num_rungs - 1 || idx >= (keep > 1 ? keep : 1)) {
            t->flags |= T_DONE;
            return dt_search_close(out, id);
        }
        passed = true;
    }
    return DT_OK;
}

static dt_status asha_closed(void *state, dt_search_ctx *sc, int64_t id, dt_search_ops *out) {
    asha *a = state;
    trial *t = dt__asha_trial_of(a, id);
    if (!t) return DT_ERR_STATE;
    bracket *b = &a->b[t->bracket];
    t->flags |= T_DONE | T_CLOSED;
    b->c[B_OPEN]--;
    b->c[B_CLOSED]++;
    /* a close makes room for a new trial in the bracket */
    if (b->c[B_CREATED] - b->c[B_INVALID] < b->max_trials)
        return dt__asha_start(a, t->bracket, sc, out);
    for (int k = 0; k < a->nb; k++)
        if (!dt__asha_bracket_done(&a->b[k])) return DT_OK;
    return dt_search_shutdown(out, false, false);
}

static dt_status asha_exited(void *state, dt_search_ctx *sc, int64_t id, dt_search_exit why,
                             dt_search_ops *out) {
    asha *a = state;
    (void)sc, (void)out;
    trial *t = dt__asha_trial_of(a, id);
    if (!t) return DT_ERR_STATE;
    if (t->flags & T_DONE) return DT_OK;
    t->flags |= T_DONE;
    bracket *b = &a->b[t->bracket];
    if (why == DT_SEARCH_EXIT_INVALID_HP) {
        t->flags |= T_INVALID;
        b->c[B_INVALID]++;
        for (int r = 0; r <= t->rung; r++) dt__asha_rung_remove(&b->rungs[r], id);
        return DT_OK;
    }
    if (dt__asha_rung_insert(&b->rungs[t->rung], id, WORST) < 0)
        return dt_error(DT_ERR_OOM, "out of memory recording a rung's metric");
    return DT_OK;
}

static double asha_progress(void *state, dt_search_ctx *sc) {
    asha *a = state;
    (void)sc;
    double sum = 0;
    for (int k = 0; k < a->nb; k++) {
        const bracket *b = &a->b[k];
        double T = (double)b->max_trials, p = (double)b->rungs[0].n / (1.2 * T);
        if (b->rungs[0].n >= b->max_trials) {
            double q = (double)(b->c[B_CLOSED] - b->c[B_INVALID]) / T;
            if (q > p) p = q;
        }
        sum += p;
    }
    return sum / a->nb;
}

/* ---- snapshot ------------------------------------------------------------------------------ */

/* {"brackets": [{counters..., "rungs": [[id, metric, id, metric, ...], ...]}, ...],
 *  "trials": [bracket, rung, flags, bracket, rung, flags, ...]} */
static json_t *asha_save(void *state) {
    asha *a = state;
    json_t *bs = json_array(), *ts = json_array();
    bool ok = bs && ts;
    for (int k = 0; ok && k < a->nb; k++) {
        const bracket *b = &a->b[k];
        json_t *o = dt__search_counters_save(B_KEYS, b->c, B_N), *rs = json_array();
        ok = o && rs && !json_object_set(o, "rungs", rs) && !json_array_append(bs, o);
        for (int r = 0; ok && r < b->num_rungs; r++) {
            json_t *g = json_array();
            ok = g && !json_array_append_new(rs, g);
            for (int64_t i = 0; ok && i < b->rungs[r].n; i++)
                ok = !json_array_append_new(g, json_integer(b->rungs[r].v[i].id)) &&
                     !json_array_append_new(g, json_real(b->rungs[r].v[i].metric));
        }
        json_decref(o);
        json_decref(rs);
    }
    for (int64_t i = 0; ok && i < a->nt; i++)
        ok = !json_array_append_new(ts, json_integer(a->t[i].bracket)) &&
             !json_array_append_new(ts, json_integer(a->t[i].rung)) &&
             !json_array_append_new(ts, json_integer(a->t[i].flags));
    json_t *s = ok ? json_pack("{s:O, s:O}", "brackets", bs, "trials", ts) : NULL;
    json_decref(bs);
    json_decref(ts);
    return s;
}

static dt_status bad(const char *what) {
    return dt_error(DT_ERR_FORMAT,
                    "searcher snapshot: adaptive_asha's %s; hint: load it into a "
                    "searcher made from the experiment's own config",
                    what);
}

/* A copy of the configured brackets with the saved rungs and counters, or an error. */
static dt_status load_brackets(const asha *a, const json_t *bs, bracket **out) {
    if (!json_is_array(bs) || (int)json_array_size(bs) != a->nb)
        return bad("bracket count differs from this config's");
    bracket *nb = calloc((size_t)a->nb, sizeof *nb);
    if (!nb) return dt_error(DT_ERR_OOM, "out of memory loading the searcher");
    dt_status st = DT_OK;
    for (int k = 0; k < a->nb && !st; k++) {
        const json_t *o = json_array_get(bs, (size_t)k), *rs = json_object_get(o, "rungs");
        nb[k] = a->b[k];
        nb[k].rungs = calloc((size_t)a->b[k].num_rungs, sizeof *nb[k].rungs);
        if (!nb[k].rungs) {
            st = dt_error(DT_ERR_OOM, "out of memory loading the searcher");
            break;
        }
        st = dt__search_counters_load(o, "adaptive_asha", B_KEYS, nb[k].c, B_N);
        if (!st && (!json_is_array(rs) || (int)json_array_size(rs) != a->b[k].num_rungs))
            st = bad("rung count differs from this config's");
        for (int r = 0; r < a->b[k].num_rungs && !st; r++) {
            const json_t *g = json_array_get(rs, (size_t)r);
            size_t n = json_array_size(g);
            rung *ng = &nb[k].rungs[r];
            ng->units = a->b[k].rungs[r].units;
            if (!json_is_array(g) || n % 2) {
                st = bad("rung is not a list of (request, metric) pairs");
                break;
            }
            ng->cap = (int64_t)n / 2 + 1;
            if (!(ng->v = malloc((size_t)ng->cap * sizeof *ng->v))) {
                st = dt_error(DT_ERR_OOM, "out of memory loading the searcher");
                break;
            }
            for (size_t i = 0; i < n && !st; i += 2) {
                const json_t *id = json_array_get(g, i), *m = json_array_get(g, i + 1);
                if (!json_is_integer(id) || !json_is_number(m))
                    st = bad("rung is not a list of (request, metric) pairs");
                else
                    ng->v[ng->n++] = (entry){json_integer_value(id), json_number_value(m)};
            }
        }
    }
    if (st) {
        rungs_free(nb, a->nb);
        return st;
    }
    *out = nb;
    return DT_OK;
}

static dt_status asha_load(void *state, const json_t *saved) {
    asha *a = state;
    const json_t *ts = json_object_get(saved, "trials");
    size_t n = json_array_size(ts);
    if (!json_is_array(ts) || n % 3) return bad("trials are not (bracket, rung, flags) triples");
    trial *t = malloc((n / 3 + 1) * sizeof *t);
    if (!t) return dt_error(DT_ERR_OOM, "out of memory loading the searcher");
    for (size_t i = 0; i < n; i += 3) {
        const json_t *jk = json_array_get(ts, i), *jr = json_array_get(ts, i + 1),
                     *jf = json_array_get(ts, i + 2);
        json_int_t k = json_integer_value(jk), r = json_integer_value(jr),
                   f = json_integer_value(jf);
        if (!json_is_integer(jk) || !json_is_integer(jr) || !json_is_integer(jf) || k < 0 ||
            k >= a->nb || r < 0 || r >= a->b[k].num_rungs || f < 0 || f > T_ALL) {
            free(t);
            return bad("trial names a bracket or rung this config does not have");
        }
        t[i / 3] = (trial){(int32_t)k, (int32_t)r, (int32_t)f};
    }
    bracket *nb = NULL;
    dt_status st = load_brackets(a, json_object_get(saved, "brackets"), &nb);
    if (st) {
        free(t);
        return st;
    }
    rungs_free(a->b, a->nb);
    free(a->t);
    a->b = nb;
    a->t = t;
    a->nt = (int64_t)n / 3;
    a->tcap = a->nt + 1;
    return DT_OK;
}

/* ---- construction -------------------------------------------------------------------------- */

const char *dt_searcher_time_metric(const dt_expconf *cfg) {
    const char *m = cfg->searcher.time_metric;
    if (!m || cfg->searcher.max_time <= 0) return NULL;
    return strcmp(m, "batches") && strcmp(m, "records") && strcmp(m, "epochs") ? m : NULL;
}

dt_status dt__asha_length(const dt_expconf *cfg, dt_length *out) {
    dt_length L = cfg->searcher.max_length;
    if (dt_searcher_time_metric(cfg)) { /* rungs in the reported metric's own units */
        *out = (dt_length){DT_UNIT_BATCHES, cfg->searcher.max_time};
        return DT_OK;
    }
    *out = L;
    if (L.n <= 0)
        return dt_error(DT_ERR_CONFIG, "the adaptive_asha searcher needs searcher.max_length; "
                                       "hint: e.g. `max_length: {batches: 1000}`");
    if (L.unit == DT_UNIT_EPOCHS) {
        if (cfg->records_per_epoch <= 0)
            return dt_error(DT_ERR_CONFIG, "searcher.max_length is in epochs but records_per_epoch "
                                           "is not set; hint: add `records_per_epoch: N`");
        if (L.n > INT64_MAX / cfg->records_per_epoch)
            return dt_error(DT_ERR_CONFIG,
                            "searcher.max_length: %lld epochs of %lld records "
                            "overflows; hint: give a smaller length",
                            (long long)L.n, (long long)cfg->records_per_epoch);
        L = (dt_length){DT_UNIT_RECORDS, L.n * cfg->records_per_epoch};
    }
    const dt_hparam *g = dt_expconf_hparam(cfg, "global_batch_size");
    int64_t gbs;
    if (L.unit == DT_UNIT_RECORDS && g && g->type == DT_HP_CONST && dt_conf_as_int(g->val, &gbs) &&
        gbs > 0) {
        if (L.n < gbs)
            return dt_error(DT_ERR_CONFIG,
                            "searcher.max_length is %lld records, less than one "
                            "batch of %lld; hint: give a longer max_length",
                            (long long)L.n, (long long)gbs);
        L = (dt_length){DT_UNIT_BATCHES, L.n / gbs};
    }
    *out = L;
    return DT_OK;
}

dt_status dt__search_asha_new(const dt_expconf *cfg, dt_search_method *out) {
    const dt_searcher_conf *sc = &cfg->searcher;
    dt_length L;
    dt_status lst = dt__asha_length(cfg, &L);
    if (lst) return lst;
    if (sc->max_trials <= 0)
        return dt_error(DT_ERR_CONFIG, "the %s searcher needs searcher.max_trials (the number of "
                                       "trials to run)", sc->name);
    if (!(sc->divisor > 1))
        return dt_error(DT_ERR_CONFIG, "searcher.divisor must be greater than 1, got %g",
                        sc->divisor);
    int rungs[MAX_RUNGS];
    int64_t trials[MAX_RUNGS], conc[MAX_RUNGS];
    int nb = dt__asha_layout(cfg, L.n, MAX_RUNGS, rungs, trials, conc);
    if (nb == 0)
        return dt_error(DT_ERR_CONFIG,
                        "searcher.mode must be one of aggressive, standard, "
                        "conservative; got '%s'",
                        sc->mode);
    asha *a = calloc(1, sizeof *a);
    if (!a || !(a->b = calloc((size_t)nb, sizeof *a->b))) {
        free(a);
        return dt_error(DT_ERR_OOM, "out of memory creating the adaptive_asha searcher");
    }
    *a = (asha){.length = L,
                .divisor = sc->divisor,
                .smaller_is_better = sc->smaller_is_better,
                .nb = nb,
                .b = a->b};
    for (int k = 0; k < nb; k++) {
        bracket *b = &a->b[k];
        *b = (bracket){.num_rungs = rungs[k], .max_trials = trials[k], .max_concurrent = conc[k]};
        if (!(b->rungs = calloc((size_t)rungs[k], sizeof *b->rungs))) {
            asha_free(a);
            return dt_error(DT_ERR_OOM, "out of memory creating the adaptive_asha searcher");
        }
        for (int i = 0; i < rungs[k]; i++)
            b->rungs[i].units = dt__asha_rung_units(L.n, sc->divisor, rungs[k], i);
    }
    *out = (dt_search_method){.name = "adaptive_asha",
                              .state = a,
                              .initial_operations = asha_initial,
                              .on_validation_completed = asha_validated,
                              .on_trial_closed = asha_closed,
                              .on_trial_exited_early = asha_exited,
                              .progress = asha_progress,
                              .save = asha_save,
                              .load = asha_load,
                              .free = asha_free};
    return DT_OK;
}
