/*
 * search_snapshot.c — a dsat search method's state as JSON and back, so a restarted search
 * runner continues the same search (the same next configurations).
 *
 *   {"version": 1,
 *    "check": {"method", "seed" (decimal string), "opts": [max_trials, smaller_is_better,
 *              trials_per_random_config, early_stopping, max_rungs, min_binary_search_trials,
 *              asha_early_stopping, divisor], "stages", "approx", "factor"},
 *    "rng": counter,
 *    "trials": [[stage, mbs, reduce, allgather, overlap, reduce_scatter, contiguous,
 *                allgather_partitions, offload, lineage, rung, lo, hi, outcome, metric|null]],
 *    "lineages": [[stage, reduce, allgather, overlap, reduce_scatter, contiguous,
 *                  allgather_partitions, offload, lo, hi, rung, last, n_done, failed]],
 *    "pending": [lineage...], "counts": [since_best, skipped, discarded, ok_stages],
 *    "stop": "" or why the search stopped}
 *
 * "check" must equal the loading method's own (same method, seed, options and space); the
 * feasible knob sets are derived from the space, not saved. dt__dsat_load checks everything
 * before it changes anything.
 */
#include "dsat_search_impl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SNAPSHOT_VERSION 1
#define TRIAL_INTS 14 /* then the metric */
#define LINEAGE_INTS 14

static json_t *check_of(const dt__dsat_method *m) {
    char seed[24];
    snprintf(seed, sizeof seed, "%" PRIu64, m->sp.seed);
    const dt__dsat_opts *o = &m->o;
    json_t *stages = json_array(), *approx = json_array();
    for (int i = 0; i < m->sp.n_stages; i++)
        json_array_append_new(stages, json_integer(m->sp.zero_stages[i]));
    for (int s = 0; s < 4; s++)
        json_array_append_new(approx, json_integer(m->sp.approx_max_mbs[s]));
    return json_pack("{s:s, s:s, s:[I,b,I,I,I,I,I,I], s:o, s:o, s:f}", "method", m->rules->name,
                     "seed", seed, "opts", (json_int_t)o->max_trials, o->smaller_is_better,
                     (json_int_t)o->trials_per_random_config, (json_int_t)o->early_stopping,
                     (json_int_t)o->max_rungs, (json_int_t)o->min_binary_search_trials,
                     (json_int_t)o->asha_early_stopping, (json_int_t)o->divisor, "stages", stages,
                     "approx", approx, "factor", m->sp.search_range_factor);
}

/* A row of integers (and what follows them) as a JSON array. */
static json_t *row(const int64_t *v, int n, json_t *tail) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) json_array_append_new(a, json_integer(v[i]));
    if (tail) json_array_append_new(a, tail);
    return a;
}

/* The knob fields, in the snapshot's order (8 integers). */
static void knobs_out(const dt_dsat_knobs *k, int64_t *v) {
    v[0] = k->zero_stage, v[1] = k->reduce_bucket_size, v[2] = k->allgather_bucket_size;
    v[3] = k->overlap_comm, v[4] = k->reduce_scatter, v[5] = k->contiguous_gradients;
    v[6] = k->allgather_partitions, v[7] = k->offload_optimizer;
}

json_t *dt__dsat_save(const dt__dsat_method *m) {
    json_t *trials = json_array(), *lineages = json_array(), *pending = json_array();
    for (int64_t i = 0; trials && i < m->nt; i++) {
        const dt__dsat_trial *t = &m->t[i];
        int64_t v[TRIAL_INTS];
        knobs_out(&t->k, v);
        memmove(v + 2, v + 1, 7 * sizeof *v); /* mbs after the stage */
        v[1] = t->k.mbs;
        v[9] = t->lineage, v[10] = t->rung, v[11] = t->lo, v[12] = t->hi, v[13] = t->outcome;
        json_array_append_new(
            trials,
            row(v, TRIAL_INTS, t->outcome == DT__T_OK ? json_real(t->metric) : json_null()));
    }
    for (int32_t i = 0; lineages && i < m->nl; i++) {
        const dt__dsat_lineage *l = &m->l[i];
        int64_t v[LINEAGE_INTS];
        knobs_out(&l->k, v);
        v[8] = l->lo, v[9] = l->hi, v[10] = l->rung, v[11] = l->last, v[12] = l->n_done;
        v[13] = l->failed;
        json_array_append_new(lineages, row(v, LINEAGE_INTS, NULL));
    }
    for (int64_t i = m->head; pending && i < m->tail; i++)
        json_array_append_new(pending, json_integer(m->pending[i]));
    int64_t counts[4] = {m->since_best, m->skipped, m->discarded, m->ok_stages};
    json_t *s =
        json_pack("{s:i, s:o, s:I, s:o, s:o, s:o, s:o, s:s}", "version", SNAPSHOT_VERSION, "check",
                  check_of(m), "rng", (json_int_t)m->rng.counter, "trials", trials, "lineages",
                  lineages, "pending", pending, "counts", row(counts, 4, NULL), "stop", m->stop);
    /* a failed append leaves an array short: compare the sizes */
    if (!s || json_array_size(trials) != (size_t)m->nt ||
        json_array_size(lineages) != (size_t)m->nl ||
        json_array_size(pending) != (size_t)(m->tail - m->head)) {
        json_decref(s);
        dt_error(DT_ERR_OOM, "out of memory saving the dsat %s search", m->rules->name);
        return NULL;
    }
    return s;
}

/* ---- load ---------------------------------------------------------------------------------- */

static dt_status bad(const char *what) {
    return dt_error(DT_ERR_FORMAT, "dsat snapshot: %s", what);
}

/* The first n entries of array a as integers within [lo, hi]; false otherwise. */
static bool ints(const json_t *a, int n, int64_t *v, int64_t lo, int64_t hi) {
    if (!json_is_array(a) || json_array_size(a) < (size_t)n) return false;
    for (int i = 0; i < n; i++) {
        const json_t *x = json_array_get(a, (size_t)i);
        if (!json_is_integer(x)) return false;
        v[i] = json_integer_value(x);
        if (v[i] < lo || v[i] > hi) return false;
    }
    return true;
}

/* Knobs from the snapshot's 8 integers; false when out of range. */
static bool knobs_in(const int64_t *v, dt_dsat_knobs *k) {
    for (int i = 3; i < 7; i++)
        if (v[i] < -1 || v[i] > 1) return false;
    if (v[0] < 0 || v[0] > 3 || v[1] < 0 || v[2] < 0 || v[7] < 0 || v[7] > 1) return false;
    *k = (dt_dsat_knobs){.zero_stage = (int)v[0],
                         .reduce_bucket_size = v[1],
                         .allgather_bucket_size = v[2],
                         .overlap_comm = (int)v[3],
                         .reduce_scatter = (int)v[4],
                         .contiguous_gradients = (int)v[5],
                         .allgather_partitions = (int)v[6],
                         .offload_optimizer = v[7]};
    return true;
}

typedef struct loaded {
    dt__dsat_trial *t;
    dt__dsat_lineage *l;
    dt__dsat_ranked *rank;
    int32_t *pending;
    int64_t nt, nl, np, running;
} loaded;

static void loaded_free(loaded *x) {
    free(x->t);
    free(x->l);
    free(x->rank);
    free(x->pending);
}

static dt_status load_rows(loaded *x, const json_t *trials, const json_t *lineages,
                           const json_t *pending) {
    if (!json_is_array(trials) || !json_is_array(lineages) || !json_is_array(pending))
        return bad("trials, lineages and pending must be arrays");
    x->nt = (int64_t)json_array_size(trials);
    x->nl = (int64_t)json_array_size(lineages);
    x->np = (int64_t)json_array_size(pending);
    if (x->nl > x->nt || x->np > x->nt) return bad("more lineages or decisions than trials");
    size_t cap = (size_t)(x->nt > 16 ? x->nt : 16);
    x->t = malloc(cap * sizeof *x->t);
    x->l = malloc((cap + 1) * sizeof *x->l);
    x->rank = malloc((cap + 1) * sizeof *x->rank);
    x->pending = malloc(cap * sizeof *x->pending);
    if (!x->t || !x->l || !x->rank || !x->pending)
        return dt_error(DT_ERR_OOM, "out of memory loading dsat");
    int64_t v[TRIAL_INTS];
    for (int64_t i = 0; i < x->nl; i++) {
        dt__dsat_lineage *l = &x->l[i];
        if (!ints(json_array_get(lineages, (size_t)i), LINEAGE_INTS, v, INT64_MIN, INT64_MAX) ||
            !knobs_in(v, &l->k) || v[10] < 0 || v[10] > 64 || v[11] < 0 || v[11] >= x->nt ||
            v[12] < 0 || v[13] < 0 || v[13] > 1)
            return bad("a lineage is not [stage, 7 knobs, lo, hi, rung, last, n_done, failed]");
        l->lo = v[8], l->hi = v[9], l->rung = (int32_t)v[10], l->last = (int32_t)v[11];
        l->n_done = v[12], l->failed = v[13];
    }
    for (int64_t i = 0; i < x->nt; i++) {
        dt__dsat_trial *t = &x->t[i];
        const json_t *r = json_array_get(trials, (size_t)i);
        int64_t k[8];
        if (!ints(r, TRIAL_INTS, v, INT64_MIN, INT64_MAX)) return bad("a trial is not a row");
        memcpy(k, v, sizeof k);
        memmove(k + 1, v + 2, 7 * sizeof *k); /* without the mbs */
        const json_t *metric = json_array_get(r, TRIAL_INTS);
        if (!knobs_in(k, &t->k) || v[1] < 1 || v[9] < 0 || v[9] >= x->nl || v[10] < 0 ||
            v[10] > 64 || v[13] < DT__T_RUNNING || v[13] > DT__T_ERROR ||
            (v[13] == DT__T_OK && !json_is_number(metric)))
            return bad("a trial is not [stage, mbs, 7 knobs, lineage, rung, lo, hi, outcome, "
                       "metric]");
        t->k.mbs = v[1];
        t->lineage = (int32_t)v[9], t->rung = (int32_t)v[10], t->lo = v[11], t->hi = v[12];
        t->outcome = (int)v[13];
        t->metric = t->outcome == DT__T_OK ? json_number_value(metric) : 0;
        x->running += t->outcome == DT__T_RUNNING;
    }
    for (int64_t i = 0; i < x->nl; i++) {
        dt__dsat_lineage *l = &x->l[i];
        if (x->t[l->last].lineage != i) return bad("a lineage's last trial is not its own");
        l->running = x->t[l->last].outcome == DT__T_RUNNING;
    }
    for (int64_t i = 0; i < x->np; i++) {
        json_int_t p = json_integer_value(json_array_get(pending, (size_t)i));
        if (!json_is_integer(json_array_get(pending, (size_t)i)) || p < 0 || p >= x->nl)
            return bad("pending holds something other than lineages");
        x->pending[i] = (int32_t)p;
    }
    return DT_OK;
}

dt_status dt__dsat_load(dt__dsat_method *m, const json_t *saved) {
    json_int_t version = 0, counter = -1;
    json_t *check = NULL, *trials = NULL, *lineages = NULL, *pending = NULL, *counts = NULL;
    const char *stop = NULL;
    if (!json_is_object(saved) ||
        json_unpack((json_t *)saved, "{s:I, s:o, s:I, s:o, s:o, s:o, s:o, s:s}", "version",
                    &version, "check", &check, "rng", &counter, "trials", &trials, "lineages",
                    &lineages, "pending", &pending, "counts", &counts, "stop", &stop))
        return bad("not a dsat search snapshot (expected version, check, rng, trials, "
                   "lineages, pending, counts and stop)");
    if (version != SNAPSHOT_VERSION)
        return dt_error(DT_ERR_FORMAT,
                        "dsat snapshot: version %lld is not supported (this dtrain reads version "
                        "%d); hint: continue the search with the dtrain that started it",
                        (long long)version, SNAPSHOT_VERSION);
    json_t *mine = check_of(m);
    bool same = mine && json_equal(mine, check);
    json_decref(mine);
    if (!same)
        return dt_error(DT_ERR_FORMAT,
                        "dsat snapshot: it is of another search (method, seed, options or space "
                        "differ from this %s search's); hint: restore it with the flags and "
                        "profile it was started with",
                        m->rules->name);
    int64_t c[4];
    if (counter < 0 || !ints(counts, 4, c, 0, INT64_MAX) || c[3] > 15 ||
        strlen(stop) >= sizeof m->stop)
        return bad("rng, counts or stop is out of range");
    loaded x = {0};
    dt_status st = load_rows(&x, trials, lineages, pending);
    if (st) {
        loaded_free(&x);
        return st;
    }
    free(m->t);
    free(m->l);
    free(m->rank);
    free(m->pending);
    m->t = x.t, m->l = x.l, m->rank = x.rank, m->pending = x.pending;
    m->nt = x.nt, m->nl = (int32_t)x.nl, m->head = 0, m->tail = x.np, m->running = x.running;
    m->tcap = x.nt > 16 ? x.nt : 16;
    m->lcap = (int32_t)m->tcap + 1;
    m->rng.counter = (uint64_t)counter;
    m->since_best = c[0], m->skipped = c[1], m->discarded = c[2], m->ok_stages = (unsigned)c[3];
    snprintf(m->stop, sizeof m->stop, "%s", stop);
    return DT_OK;
}
