/*
 * asha_promote.c — adaptive_asha's promotion rule (stop_once: false, the default): a trial
 * that reaches a rung and is not among its best 1/divisor pauses (it gets no operation, its
 * run checkpoints and ends); a later result in that rung may make room and continue it from
 * its checkpoint. With stop_once: true (asha.c) a trial stopped at a rung never runs again.
 *
 * At rung r (n results so far, d = divisor) a new result is inserted in the sorted list.
 * ⌊(n + 1)/d⌋ trials of the rung may now be promoted: the new one is if its index is below
 * that; otherwise, when that count grew, the result at index ⌊n/d⌋ is, if its trial was not
 * promoted already (a paused trial resumes). A promoted trial gets VALIDATE_AFTER the next
 * rung; one that exited early is judged there at once as the worst value. A result in the top
 * rung closes its trial. A result that promotes nobody makes room for a new trial while
 * created − invalid < the bracket's trials. Once the bracket has all its trials and no trial is
 * still training toward rung 0, every rung from the bottom with none training toward it closes
 * its paused trials: they will not be promoted any more. Early exits count as the worst value
 * at the trial's rung; invalid hyperparameters leave no value and are replaced.
 */
#include "asha_impl.h"

/* Trials of bracket k training toward rung r (not paused there, not ended). */
static int64_t outstanding(const asha *a, int k, int r) {
    int64_t n = 0;
    for (int64_t i = 0; i < a->nt; i++)
        n += a->t[i].bracket == k && a->t[i].rung == r &&
             !(a->t[i].flags & (T_WAIT | T_EXITED | T_SHUT));
    return n;
}

static dt_status close_trial(trial *t, int64_t id, dt_search_ops *out) {
    bool exited = t->flags & T_EXITED;
    t->flags |= T_DONE | T_SHUT;
    return exited ? DT_OK : dt_search_close(out, id);
}

/* The result m of trial `id` at `len`, judged at each rung it reaches from its current one.
 * *trains: some trial was given more training. */
static dt_status judge(asha *a, int64_t id, double m, int64_t len, dt_search_ops *out,
                       bool *trains) {
    trial *t = &a->t[id - 1];
    bracket *b = &a->b[t->bracket];
    for (;;) {
        int r = t->rung;
        rung *g = &b->rungs[r];
        if (len < g->units) return DT_OK; /* below its rung: nothing to judge yet */
        int64_t before = (int64_t)((double)g->n / a->divisor);
        int64_t idx = dt__asha_rung_insert(g, id, m);
        if (idx < 0) return dt_error(DT_ERR_OOM, "out of memory recording a rung's metric");
        if (r == b->num_rungs - 1) return close_trial(t, id, out);
        int64_t now = (int64_t)((double)g->n / a->divisor);
        t->flags |= T_WAIT;
        int64_t pid = idx < now ? id : now != before ? g->v[before].id : 0;
        trial *p = pid ? &a->t[pid - 1] : NULL;
        if (!p || p->rung != r) return DT_OK; /* nobody to promote, or promoted already */
        p->rung++;
        p->flags &= ~T_WAIT;
        int64_t next = b->rungs[r + 1].units;
        if (p->flags & T_EXITED) { /* as if it trained on and reported the worst value */
            id = pid, t = p, m = WORST, len = next;
            continue;
        }
        *trains = true;
        if (p == t && len >= next) continue; /* one validation passes several rungs */
        return dt_search_validate_after(out, pid, dt__asha_units(a, next));
    }
}

/* A new trial when nothing trains on and the bracket has room; then the close-out. */
static dt_status refill(asha *a, int k, bool trains, dt_search_ctx *sc, dt_search_ops *out) {
    bracket *b = &a->b[k];
    if (!trains && b->c[B_CREATED] - b->c[B_INVALID] < b->max_trials)
        return dt__asha_start(a, k, sc, out);
    if (b->c[B_CREATED] - b->c[B_INVALID] < b->max_trials) return DT_OK;
    for (int r = 0; r < b->num_rungs - 1 && outstanding(a, k, r) == 0; r++)
        for (int64_t i = 0; i < b->rungs[r].n; i++) {
            int64_t id = b->rungs[r].v[i].id;
            trial *t = &a->t[id - 1];
            if (t->rung != r || (t->flags & T_SHUT)) continue;
            dt_status st = close_trial(t, id, out);
            if (st) return st;
        }
    return DT_OK;
}

dt_status dt__asha_promote_validated(asha *a, dt_search_ctx *sc, int64_t id, double m,
                                     dt_length length, dt_search_ops *out) {
    trial *t = &a->t[id - 1];
    if (t->flags & T_WAIT) return DT_OK; /* a paused trial's repeated report */
    bool trains = false;
    int r = t->rung;
    dt_status st = judge(a, id, m, length.n, out, &trains);
    if (st || (r == t->rung && !(t->flags & (T_WAIT | T_SHUT)))) return st; /* below its rung */
    return refill(a, t->bracket, trains, sc, out);
}

dt_status dt__asha_promote_exited(asha *a, dt_search_ctx *sc, int64_t id, dt_search_exit why,
                                  dt_search_ops *out) {
    trial *t = &a->t[id - 1];
    bracket *b = &a->b[t->bracket];
    bool waiting = t->flags & T_WAIT; /* its result is in already */
    t->flags |= T_DONE | T_EXITED;
    if (why == DT_SEARCH_EXIT_INVALID_HP) {
        t->flags |= T_INVALID;
        b->c[B_INVALID]++;
        for (int r = 0; r <= t->rung; r++) dt__asha_rung_remove(&b->rungs[r], id);
        return refill(a, t->bracket, false, sc, out);
    }
    if (waiting) return DT_OK;
    bool trains = false;
    dt_status st = judge(a, id, WORST, b->rungs[t->rung].units, out, &trains);
    return st ? st : refill(a, t->bracket, trains, sc, out);
}
