/*
 * zero_grads.c — ZeRO's gradient reduction: DeepSpeed's scaling around the sum, stage 2/3's
 * buckets reduced to their owners as each module's backward ends (backward marks set by the
 * modules' hooks), the deterministic mode's per-micro-batch reduction at stages 0-1, and the
 * reduction at the boundary.
 */
#include "engine/zero_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- gradient averaging over the data-parallel group ----
 * DeepSpeed's scaling around the sum-reduction: prescale_gradients multiplies by 1/W before it;
 * otherwise gradient_predivide_factor f divides by f before and multiplies by f/W after (f = 1:
 * only the multiplication by 1/W after). */

static void scale(float *g, int64_t n, float k) {
    if (k == 1.0f) return;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; i++) g[i] *= k;
}

static void prescale(const dt_engine *e, float *g, int64_t n) {
    if (e->cfg.prescale_gradients)
        scale(g, n, 1.0f / (float)e->W);
    else
        scale(g, n, (float)(1.0 / e->cfg.gradient_predivide_factor));
}

static void postscale(const dt_engine *e, float *g, int64_t n) {
    if (!e->cfg.prescale_gradients) scale(g, n, (float)(e->cfg.gradient_predivide_factor / e->W));
}

/* ---- stage 2/3: gradient buckets ----------------------------------------------------------- */

/* The bucket's groups as one flat range [*a, *b) when nothing outside the bucket lies in it
 * (then the range, already in rank order, is the reduce-scatterv send buffer as it is). */
static bool bucket_range(const dt_engine *e, int64_t *a, int64_t *b) {
    int64_t lo = INT64_MAX, hi = 0, inside = 0;
    for (int q = 0; q < e->n_bucket; q++) {
        const dt_engine_group *g = &e->groups[e->bucket[q]];
        lo = g->a < lo ? g->a : lo;
        hi = g->b > hi ? g->b : hi;
        inside += g->b - g->a;
    }
    /* every group overlapping [lo, hi) must be in the bucket */
    int64_t covered = 0;
    for (int i = 0; i < e->n_groups; i++) {
        const dt_engine_group *g = &e->groups[i];
        if (g->b > lo && g->a < hi) covered += g->b - g->a;
    }
    *a = lo;
    *b = hi;
    return covered == inside;
}

static dt_status flush_bucket(dt_engine *e) {
    if (e->n_bucket == 0) return DT_OK;
    double t0 = dt_now_sec();
    int64_t counts_s[256], *counts = counts_s;
    if (e->W > 256 && !(counts = malloc((size_t)e->W * sizeof *counts)))
        return dt_error(DT_ERR_OOM, "engine: bucket: out of memory");
    int64_t ra, rb, mine_at = 0;
    const float *send;
    float *recv;
    dt_status st;
    if (bucket_range(e, &ra, &rb)) {
        /* contiguous: the gradients themselves are the send buffer (padding between groups
         * is zero and reduces to zero) */
        for (int j = 0; j < e->W; j++) {
            int64_t s, len = dt__zero_owned_part(e, j, ra, rb, &s);
            counts[j] = len;
            if (j == e->rank) mine_at = len ? s - ra : 0;
        }
        send = e->grads + ra;
        recv = e->grads + ra + mine_at;
        prescale(e, e->grads + ra, rb - ra);
        st = dt_comm_reduce_scatterv(e->comm, send, recv, counts, DT_REDUCE_OP_SUM);
        if (st == DT_OK) postscale(e, recv, counts[e->rank]);
        if (st == DT_OK && counts[e->rank] > 0) {
            int64_t s;
            dt__zero_owned_part(e, e->rank, ra, rb, &s);
            float *acc = e->gacc + (s - e->lo);
            const int64_t len = counts[e->rank];
#pragma omp parallel for schedule(static) if (len > 65536)
            for (int64_t i = 0; i < len; i++) acc[i] += recv[i];
        }
    } else {
        /* pack: for each owner j, the pieces of every bucketed group it owns, in bucket order */
        int64_t k = 0;
        for (int j = 0; j < e->W; j++) {
            if (j == e->rank) mine_at = k;
            int64_t c0 = k;
            for (int q = 0; q < e->n_bucket; q++) {
                dt_engine_group *g = &e->groups[e->bucket[q]];
                int64_t s, len = dt__zero_owned_part(e, j, g->a, g->b, &s);
                if (len) memcpy(e->pack + k, e->grads + s, (size_t)len * sizeof(float));
                k += len;
            }
            counts[j] = k - c0;
        }
        prescale(e, e->pack, k);
        st = dt_comm_reduce_scatterv(e->comm, e->pack, e->pack + mine_at, counts, DT_REDUCE_OP_SUM);
        if (st == DT_OK) postscale(e, e->pack + mine_at, counts[e->rank]);
        /* add this rank's reduced pieces into its accumulated block */
        k = mine_at;
        for (int q = 0; st == DT_OK && q < e->n_bucket; q++) {
            dt_engine_group *g = &e->groups[e->bucket[q]];
            int64_t s, len = dt__zero_owned_part(e, e->rank, g->a, g->b, &s);
            float *acc = e->gacc + (s - e->lo);
            const float *r = e->pack + k;
            for (int64_t i = 0; i < len; i++) acc[i] += r[i];
            k += len;
        }
    }
    if (counts != counts_s) free(counts);
    if (st != DT_OK) return st;
    for (int q = 0; q < e->n_bucket; q++) {
        dt_engine_group *g = &e->groups[e->bucket[q]];
        dt__zero_release_range(e->grads, g->a, g->b);
        if (g->grads_live) {
            dt_mem_release(e->dev, DT_MEM_GRADS, (g->b - g->a) * 4);
            e->live_grad_elems -= g->b - g->a;
            g->grads_live = false;
        }
        g->reduced = true;
    }
    e->n_bucket = 0;
    e->bucket_elems = 0;
    e->t.reduce_s += dt_now_sec() - t0;
    return DT_OK;
}

/* Marks run inside dt_backward and cannot return a status: the first error is kept in
 * e->mark_err and dt_engine_backward reports it. */
static void mark_error(dt_engine *e, dt_status st) {
    if (st != DT_OK && e->mark_err == DT_OK) {
        e->mark_err = st;
        snprintf(e->mark_msg, sizeof e->mark_msg, "%s", dt_last_error());
    }
}

static void grads_live(dt_engine *e, dt_engine_group *g) {
    if (g->grads_live) return;
    g->grads_live = true;
    e->live_grad_elems += g->b - g->a;
    mark_error(e, dt_mem_charge(e->dev, DT_MEM_GRADS, (g->b - g->a) * 4));
}

/* Backward reached the end of module gi's forward: its backward is about to run. */
static void mark_enter(void *user, int64_t gi) {
    dt_engine *e = user;
    dt_engine_group *g = &e->groups[gi];
    if (e->stage >= 2) grads_live(e, g);
    if (e->stage >= 3) mark_error(e, dt__zero_use_params(e, (int)gi, -1));
}

/* Backward passed the start of module gi's forward: its gradients are final. */
static void mark_done(void *user, int64_t gi) {
    dt_engine *e = user;
    dt_engine_group *g = &e->groups[gi];
    if (e->stage >= 3) dt__zero_unuse_params(e, g);
    if (g->fwd_live > 0 && --g->fwd_live > 0) return;
    if (g->reduced) return;
    e->bucket[e->n_bucket++] = (int)gi;
    e->bucket_elems += g->b - g->a;
    if (e->bucket_elems >= e->cfg.zero.reduce_bucket_size) mark_error(e, flush_bucket(e));
}

static void hook_pre(dt_module *m, void *user) {
    dt_engine *e = user;
    int gi = dt__zero_group_of(e, m);
    dt_engine_group *g = &e->groups[gi];
    if (g->old_pre) g->old_pre(m, g->old_user);
    bool grad = dt_grad_enabled(e->ctx);
    if (grad) {
        dt_ctx_mark_backward(e->ctx, mark_done, e, gi);
        g->fwd_live++;
    }
    if (e->stage >= 3) mark_error(e, dt__zero_use_params(e, gi, 1));
}

static void hook_post(dt_module *m, void *user) {
    dt_engine *e = user;
    int gi = dt__zero_group_of(e, m);
    dt_engine_group *g = &e->groups[gi];
    if (dt_grad_enabled(e->ctx)) dt_ctx_mark_backward(e->ctx, mark_enter, e, gi);
    if (e->stage >= 3) dt__zero_unuse_params(e, g);
    if (g->old_post) g->old_post(m, g->old_user);
}

void dt__zero_hook_modules(dt_engine *e) {
    for (int i = 0; i < e->n_groups; i++) {
        dt_engine_group *g = &e->groups[i];
        g->old_pre = g->m->pre_hook;
        g->old_post = g->m->post_hook;
        g->old_user = g->m->hook_user;
        g->m->pre_hook = hook_pre;
        g->m->post_hook = hook_post;
        g->m->hook_user = e;
    }
}

/* The mode's accumulator is in use: stage 0-1 with more than one micro-batch per step (with
 * one, the boundary's single reduction is already stage 2/3's order). */
static bool det_accumulates(const dt_engine *e) {
    return e->cfg.deterministic && e->stage <= 1 && e->cfg.gradient_accumulation_steps > 1;
}

/* Stage 0-1 gradients over the data-parallel group, with DeepSpeed's scaling: the whole buffer
 * (allreduce; `whole`) or this rank's block (reduce-scatter). *g, *gn: the reduced range. */
static dt_status reduce_window(dt_engine *e, bool whole, float **g, int64_t *gn) {
    dt_status st = DT_OK;
    if (whole) {
        if (e->W > 1) {
            prescale(e, e->grads, e->n);
            st = dt_comm_allreduce(e->comm, e->grads, e->n, DT_COMM_DTYPE_F32, DT_REDUCE_OP_SUM);
            if (st == DT_OK) postscale(e, e->grads, e->n);
        }
        *g = e->grads;
        *gn = e->n;
    } else {
        prescale(e, e->grads, e->npad);
        st =
            dt_comm_reduce_scatter(e->comm, e->grads, e->grads + e->lo, e->block, DT_REDUCE_OP_SUM);
        if (st == DT_OK) postscale(e, e->grads + e->lo, e->block);
        *g = e->grads + e->lo;
        *gn = e->block;
    }
    return st;
}

/* The mode at stage 0-1: this micro-batch's gradients reduced, added to the accumulator, the
 * window zeroed for the next micro-batch. DT_ERR_OOM (the accumulator) or the collective's
 * error. */
static dt_status det_reduce_micro(dt_engine *e) {
    double t0 = dt_now_sec();
    bool whole = e->stage == 0 || e->pipe_stage;
    if (!e->dacc) {
        e->dacc_lo = whole ? 0 : e->lo;
        e->dacc_n = whole ? e->npad : e->block;
        e->dacc = dt_mem_alloc(e->dev, DT_MEM_GRADS, (size_t)e->dacc_n * sizeof(float));
        if (!e->dacc)
            return dt_error(DT_ERR_OOM,
                            "engine: no memory for the deterministic mode's gradient "
                            "accumulator (%lld floats): %s; hint: raise the budget, use ZeRO "
                            "stage 2, or turn \"deterministic\" off",
                            (long long)e->dacc_n, dt_last_error());
        memset(e->dacc, 0, (size_t)e->dacc_n * sizeof(float));
    }
    float *r;
    int64_t len;
    dt_status st = reduce_window(e, whole, &r, &len);
    if (st == DT_OK) {
        float *acc = e->dacc + (r - e->grads) - e->dacc_lo;
#pragma omp parallel for schedule(static) if (len > 65536)
        for (int64_t i = 0; i < len; i++) acc[i] += r[i];
    }
    dt__zero_f32(e->grads, e->npad);
    e->t.reduce_s += dt_now_sec() - t0;
    return st;
}

float *dt__zero_accumulated(dt_engine *e, float *grad) {
    if (!e->dacc || grad < e->grads || grad >= e->grads + e->npad) return grad;
    return e->dacc + (grad - e->grads) - e->dacc_lo;
}

dt_status dt__zero_after_backward(dt_engine *e) {
    if (det_accumulates(e)) return det_reduce_micro(e);
    if (e->stage < 2) return DT_OK;
    /* groups the backward did not reach (unused in the forward): their gradients are zero or
     * whatever the user added; reduce them too so every rank runs the same collectives */
    for (int i = 0; i < e->n_groups; i++) {
        dt_engine_group *g = &e->groups[i];
        g->fwd_live = 0;
        if (g->reduced) continue;
        bool queued = false;
        for (int q = 0; q < e->n_bucket; q++) queued |= e->bucket[q] == i;
        if (queued) continue;
        e->bucket[e->n_bucket++] = i;
        e->bucket_elems += g->b - g->a;
        if (e->bucket_elems >= e->cfg.zero.reduce_bucket_size) {
            dt_status st = flush_bucket(e);
            if (st != DT_OK) return st;
        }
    }
    dt_status st = flush_bucket(e);
    for (int i = 0; i < e->n_groups; i++) e->groups[i].reduced = false;
    if (e->stage >= 3) dt__zero_release_idle(e);
    return st;
}

/* ---- the boundary -------------------------------------------------------------------------- */

dt_status dt__zero_reduce(dt_engine *e, float **g, int64_t *gn) {
    double t0 = dt_now_sec();
    dt_status st = DT_OK;
    if (e->stage >= 2) {
        *g = e->gacc;
        *gn = e->block;
    } else if (det_accumulates(e) && e->dacc) {
        /* reduced micro-batch by micro-batch already */
        *g = e->dacc + (e->stage == 0 ? 0 : e->lo - e->dacc_lo);
        *gn = e->stage == 0 ? e->n : e->block;
    } else {
        st = reduce_window(e, e->stage == 0, g, gn);
    }
    e->t.reduce_s += dt_now_sec() - t0;
    return st;
}
