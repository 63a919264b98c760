/*
 * search_method.c — the driver every dsat search method runs on: trials, lineages, the
 * decisions queue, the budget check, stopping and the best trial.
 *
 * report() records a result, moves the lineage's range (the method's update rule) and queues
 * the lineage for a decision, and keeps the global counts (the best trial, trials since it, the
 * stages that succeeded). next() takes the queued lineages first, in the order their results
 * came, each continuing (the method's cont rule) or giving way to the method's fresh lineage;
 * slots left over go to fresh lineages. Before a configuration is proposed, `fits` checks it:
 * one that does not fit is counted as skipped and taken as an OOM of the lineage (hi =
 * mbs − 1), so it costs no trial. All randomness comes from one counter RNG seeded with the
 * space's seed, drawn only inside next(): a snapshot between calls holds all of it.
 *
 * Stopping: max_trials proposed; early_stopping trials without a new best (the random
 * method's option); no stage fits at micro-batch 1; STUCK proposals in a row skipped or
 * discarded (nothing left worth trying). Done once stopped and nothing runs.
 * The snapshot is search_snapshot.c's.
 */
#include "dsat_search_impl.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SNAPSHOT_VERSION 1
#define STUCK 512 /* proposals in a row skipped or discarded before the search gives up */

void dt__dsat_opts_default(dt__dsat_opts *o) {
    *o = (dt__dsat_opts){.max_trials = 50,
                         .trials_per_random_config = 5,
                         .max_rungs = 5,
                         .min_binary_search_trials = 3,
                         .divisor = 2};
}

dt_status dt__dsat_metric_smaller(const char *metric, bool *smaller) {
    static const char *const NAMES[] = {"FLOPS_per_gpu", "throughput", "forward", "backward",
                                        "latency"};
    for (int i = 0; i < 5; i++)
        if (metric && !strcmp(metric, NAMES[i])) {
            *smaller = i >= 2;
            return DT_OK;
        }
    return dt_error(DT_ERR_CONFIG,
                    "dsat: unknown metric '%s'; hint: use one of FLOPS_per_gpu, throughput "
                    "(larger is better), forward, backward, latency (smaller is better)",
                    metric ? metric : "(none)");
}

/* ---- construction -------------------------------------------------------------------------- */

static dt_status check_opts(const dt__dsat_opts *o) {
    const struct {
        const char *name;
        int64_t v, min;
    } c[] = {{"max_trials", o->max_trials, 1},
             {"trials_per_random_config", o->trials_per_random_config, 1},
             {"early_stopping", o->early_stopping, 0},
             {"max_rungs", o->max_rungs, 1},
             {"min_binary_search_trials", o->min_binary_search_trials, 1},
             {"asha_early_stopping", o->asha_early_stopping, 0},
             {"divisor", o->divisor, 2}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        if (c[i].v < c[i].min)
            return dt_error(DT_ERR_CONFIG, "dsat: %s is %lld; hint: give an integer >= %lld",
                            c[i].name, (long long)c[i].v, (long long)c[i].min);
    if (o->max_trials > INT32_MAX || o->max_rungs > 64)
        return dt_error(DT_ERR_CONFIG,
                        "dsat: max_trials (%lld) or max_rungs (%lld) is too "
                        "large; hint: at most %d trials and 64 rungs",
                        (long long)o->max_trials, (long long)o->max_rungs, INT32_MAX);
    return DT_OK;
}

static dt_status check_space(const dt_dsat_space *sp) {
    if (!sp->fits) return dt_error(DT_ERR_INVALID, "dsat: the search space has no fits check");
    if (sp->n_stages < 1 || sp->n_stages > 4)
        return dt_error(DT_ERR_CONFIG, "dsat: %d zero stages; hint: give 1 to 4 of 0 1 2 3",
                        sp->n_stages);
    unsigned seen = 0;
    for (int i = 0; i < sp->n_stages; i++) {
        int s = sp->zero_stages[i];
        if (s < 0 || s > 3 || (seen >> s & 1))
            return dt_error(DT_ERR_CONFIG,
                            "dsat: zero stage %d is %s; hint: list distinct stages from 0 1 2 3", s,
                            s < 0 || s > 3 ? "not a ZeRO stage" : "listed twice");
        seen |= 1u << s;
        if (sp->approx_max_mbs[s] < 1)
            return dt_error(DT_ERR_INVALID, "dsat: approx_max_mbs of stage %d is %lld (< 1)", s,
                            (long long)sp->approx_max_mbs[s]);
    }
    if (!(sp->search_range_factor > 0) || !isfinite(sp->search_range_factor))
        return dt_error(DT_ERR_CONFIG,
                        "dsat: search_range_factor is %g; hint: give a number > 0 (1.0 searches "
                        "up to the memory model's estimate)",
                        sp->search_range_factor);
    return DT_OK;
}

static const dt__dsat_rules *rules_of(const char *name) {
    const dt__dsat_rules *all[] = {&dt__dsat_binary_rules, &dt__dsat_random_rules,
                                   &dt__dsat_asha_rules};
    for (int i = 0; i < 3; i++)
        if (name && !strcmp(name, all[i]->name)) return all[i];
    return NULL;
}

/* Room for `n` more trials (and their lineages and decisions), or DT_ERR_OOM unchanged. */
static dt_status reserve(dt__dsat_method *m, int64_t n) {
    if (m->nt + n > m->tcap) {
        int64_t cap = m->tcap ? m->tcap : 16;
        while (cap < m->nt + n) cap *= 2;
        dt__dsat_trial *t = realloc(m->t, (size_t)cap * sizeof *t);
        if (t) m->t = t;
        int32_t *p = t ? realloc(m->pending, (size_t)cap * sizeof *p) : NULL;
        if (p) m->pending = p;
        if (!p) return dt_error(DT_ERR_OOM, "out of memory adding dsat trials");
        m->tcap = cap;
    }
    if (m->nl + n + 1 > m->lcap) { /* + 1: the lineage being started */
        int64_t cap = m->lcap ? m->lcap : 16;
        while (cap < m->nl + n + 1) cap *= 2;
        dt__dsat_lineage *l = realloc(m->l, (size_t)cap * sizeof *l);
        if (l) m->l = l;
        dt__dsat_ranked *r = l ? realloc(m->rank, (size_t)cap * sizeof *r) : NULL;
        if (r) m->rank = r;
        if (!r) return dt_error(DT_ERR_OOM, "out of memory adding dsat lineages");
        m->lcap = (int32_t)cap;
    }
    return DT_OK;
}

static int cmp_int(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

dt_status dt__dsat_method_new(const char *name, const dt__dsat_opts *opts,
                              const dt_dsat_space *space, dt__dsat_method **out) {
    const dt__dsat_rules *r = rules_of(name);
    if (!r)
        return dt_error(DT_ERR_CONFIG,
                        "dsat: unknown search method '%s'; hint: use binary, random or asha",
                        name ? name : "(none)");
    dt_status st = check_opts(opts);
    if (!st) st = check_space(space);
    if (st) return st;
    dt__dsat_method *m = calloc(1, sizeof *m);
    if (!m) return dt_error(DT_ERR_OOM, "out of memory creating the dsat %s method", name);
    m->rules = r;
    m->o = *opts;
    m->sp = *space;
    qsort(m->sp.zero_stages, (size_t)m->sp.n_stages, sizeof(int), cmp_int);
    dt_rng_init(&m->rng, space->seed);
    st = dt__dsat_feasible_init(m);
    if (!st) st = reserve(m, 16);
    if (st) {
        dt__dsat_method_free(m);
        return st;
    }
    if (dt__dsat_draw_stage(m, 0) < 0) {
        int n = 0;
        char stages[16] = "";
        for (int i = 0; i < m->sp.n_stages; i++)
            n += snprintf(stages + n, sizeof stages - (size_t)n, "%s%d", i ? " " : "",
                          m->sp.zero_stages[i]);
        snprintf(m->stop, sizeof m->stop,
                 "nothing fits: at micro-batch 1 every configuration of ZeRO stage(s) %s "
                 "(with the optimizer offloaded from stage 2) exceeds the device memory budget; "
                 "hint: add stage 3 to --zero-stages, use more slots, or raise the budget "
                 "(DT_DEVICE_MEMORY)",
                 stages);
    }
    *out = m;
    return DT_OK;
}

void dt__dsat_method_free(dt__dsat_method *m) {
    if (!m) return;
    dt__dsat_feasible_free(m);
    free(m->t);
    free(m->l);
    free(m->rank);
    free(m->pending);
    free(m);
}

const char *dt__dsat_method_name(const dt__dsat_method *m) {
    return m->rules->name;
}

/* ---- the loop ------------------------------------------------------------------------------ */

/* A fresh lineage, or -1 after setting the stop reason. */
static int32_t fresh(dt__dsat_method *m) {
    int32_t L = m->rules->fresh(m);
    if (L < 0)
        snprintf(m->stop, sizeof m->stop,
                 "the %s search has no stage left that fits at micro-batch 1", m->rules->name);
    return L;
}

dt_status dt__dsat_next(dt__dsat_method *m, int n, dt__dsat_config *out, int *got) {
    *got = 0;
    if (n > m->o.max_trials - m->nt) n = (int)(m->o.max_trials - m->nt);
    if (n <= 0 || m->stop[0]) return DT_OK;
    dt_status st = reserve(m, n);
    if (st) return st;
    int64_t misses = 0; /* proposals in a row skipped or discarded */
    while (*got < n) {
        int32_t L = -1;
        if (m->head < m->tail) {
            int32_t q = m->pending[m->head++];
            if (m->rules->cont(m, q)) L = q;
        }
        if (L < 0 && (L = fresh(m)) < 0) break;
        int64_t mbs = 0;
        while (L >= 0) { /* until a proposal passes the budget and the method's rules */
            if (misses++ >= STUCK) {
                snprintf(m->stop, sizeof m->stop,
                         "the %s search stopped: %d configurations in a row were predicted "
                         "to exceed the device memory budget or ruled out by its rules",
                         m->rules->name, STUCK);
                L = -1;
                break;
            }
            dt__dsat_lineage *l = &m->l[L];
            dt_dsat_knobs k = l->k;
            k.mbs = mbs = m->rules->pick(m, l);
            if (!dt__dsat_fits(m, &k)) {
                m->skipped++;
                l->hi = mbs - 1; /* as an OOM, without a trial */
                if (l->lo <= l->hi) continue;
            } else if (m->rules->discard && m->rules->discard(m, L, mbs)) {
                m->discarded++;
            } else {
                break;
            }
            L = fresh(m);
        }
        if (L < 0) break;
        misses = 0;
        dt__dsat_lineage *l = &m->l[L];
        if (L == m->nl) m->nl++; /* commit the new lineage */
        dt__dsat_trial *t = &m->t[m->nt];
        *t = (dt__dsat_trial){.k = l->k, .lineage = L, .rung = l->rung, .lo = l->lo, .hi = l->hi};
        t->k.mbs = mbs;
        l->last = (int32_t)m->nt;
        l->running = true;
        m->running++;
        out[*got] = (dt__dsat_config){.id = m->nt, .knobs = t->k};
        m->nt++;
        (*got)++;
    }
    return DT_OK;
}

dt_status dt__dsat_report(dt__dsat_method *m, int64_t id, dt_dsat_result r) {
    if (id < 0 || id >= m->nt || m->t[id].outcome != DT__T_RUNNING)
        return dt_error(DT_ERR_STATE, "dsat: trial %lld %s", (long long)id,
                        id < 0 || id >= m->nt ? "was never proposed" : "was already reported");
    dt__dsat_trial *t = &m->t[id];
    t->outcome = r.oom ? DT__T_OOM : r.error || !isfinite(r.metric) ? DT__T_ERROR : DT__T_OK;
    t->metric = t->outcome == DT__T_OK ? r.metric : 0;
    dt__dsat_lineage *l = &m->l[t->lineage];
    l->running = false;
    l->n_done++;
    m->running--;
    if (t->outcome == DT__T_OK) {
        m->ok_stages |= 1u << t->k.zero_stage;
        m->since_best = dt__dsat_best_of(m, -1, -1, -1) == id ? 0 : m->since_best + 1;
    } else {
        l->failed = true;
        if (dt__dsat_best_of(m, -1, -1, -1) >= 0) m->since_best++;
    }
    m->rules->update(m, l, t);
    m->pending[m->tail++] = t->lineage;
    if (!m->stop[0] && m->o.early_stopping > 0 && m->since_best >= m->o.early_stopping)
        snprintf(m->stop, sizeof m->stop,
                 "early stopping: %lld trials in a row without a better result",
                 (long long)m->since_best);
    return DT_OK;
}

/* ---- state --------------------------------------------------------------------------------- */

bool dt__dsat_done(const dt__dsat_method *m) {
    return m->running == 0 && (m->stop[0] || m->nt >= m->o.max_trials);
}

const char *dt__dsat_done_reason(dt__dsat_method *m) {
    if (!m->stop[0] && m->nt < m->o.max_trials) return NULL;
    dt__dsat_stats s;
    dt__dsat_get_stats(m, &s);
    const char *why = m->stop[0] ? m->stop : "max_trials reached";
    if (s.succeeded)
        snprintf(m->msg, sizeof m->msg, "%s (%lld trials: %lld succeeded, %lld OOM, %lld failed)",
                 why, (long long)s.proposed, (long long)s.succeeded, (long long)s.oom,
                 (long long)s.errors);
    else if (s.proposed)
        snprintf(m->msg, sizeof m->msg,
                 "%s; no trial succeeded (%lld OOM, %lld failed otherwise)%s", why,
                 (long long)s.oom, (long long)s.errors,
                 s.errors ? ": the trials' logs say why they failed" : "");
    else
        snprintf(m->msg, sizeof m->msg, "%s", why);
    return m->msg;
}

double dt__dsat_progress(const dt__dsat_method *m) {
    if (dt__dsat_done(m)) return 1.0;
    return (double)(m->nt - m->running) / (double)m->o.max_trials;
}

bool dt__dsat_best(const dt__dsat_method *m, int64_t *id, dt_dsat_knobs *knobs, double *metric) {
    int64_t b = dt__dsat_best_of(m, -1, -1, -1);
    if (b < 0) return false;
    if (id) *id = b;
    if (knobs) *knobs = m->t[b].k;
    if (metric) *metric = m->t[b].metric;
    return true;
}

void dt__dsat_get_stats(const dt__dsat_method *m, dt__dsat_stats *s) {
    *s = (dt__dsat_stats){.proposed = m->nt,
                          .running = m->running,
                          .lineages = m->nl,
                          .skipped = m->skipped,
                          .discarded = m->discarded};
    for (int64_t i = 0; i < m->nt; i++) {
        int o = m->t[i].outcome;
        s->succeeded += o == DT__T_OK;
        s->oom += o == DT__T_OOM;
        s->errors += o == DT__T_ERROR;
    }
}
