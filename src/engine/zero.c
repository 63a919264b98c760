/*
 * zero.c — ZeRO partitioning for the engine: who owns which block of the flat buffer, where
 * each stage keeps its state, gradient buckets reduced to their owners during backward,
 * ZeRO-3 parameter gathers around each module, and the partitioned optimiser step (in memory,
 * on the host device, or streamed from nvme files).
 *
 *   stage 0  params, grads full on every rank; allreduce at the boundary; optimiser over all.
 *   stage 1  + the fp32 master weights and optimiser state are one block per rank: reduce-
 *            scatter at the boundary, update the block, allgather the parameters.
 *   stage 2  + gradients: each module's gradients are reduced to their owners in buckets as
 *            soon as its backward is done (backward marks), added to the rank's accumulated
 *            block, and their pages released.
 *   stage 3  + parameters: each rank keeps one block; a module's parameters are gathered into
 *            the flat window before its forward and its backward and released after, except
 *            modules below the persistence threshold, which stay gathered.
 *
 * "deterministic" (dtrain's key): every stage sums the gradients in stage 2/3's order. Stages 2
 * and 3 reduce each micro-batch's gradients and add the reduced sums to the rank's block in
 * micro-batch order; stages 0 and 1 accumulate locally and reduce once at the boundary, which
 * rounds differently with gradient accumulation. In the mode, stages 0-1 reduce each micro-
 * batch as its backward ends (allreduce at stage 0 and on pipeline stages, whose tied modules
 * need their whole ranges; reduce-scatter at stage 1), add the result to an accumulator and
 * zero the window. The collectives add the ranks in rank order whatever the call (comm_mpi.c),
 * so each element gets the same bits at every stage. The gradient norm is summed over a fixed
 * tree of the flat coordinates (det_sumsq) instead of per rank.
 *
 * The flat window (params, grads) is one anonymous mapping per buffer at fixed addresses, so
 * tensors and views made in the forward stay valid across a release and a re-gather; a
 * release zeroes the range and returns its whole pages to the system (MADV_DONTNEED), and the
 * accounting follows the live ranges.
 */
#include "base/base_impl.h"
#include "engine/engine_impl.h"
#include "nn/nn_iface.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}
static int64_t max64(int64_t a, int64_t b) {
    return a > b ? a : b;
}

/* ---- the flat window ----------------------------------------------------------------------- */

static size_t page_size(void) {
    return (size_t)sysconf(_SC_PAGESIZE);
}

static float *map_floats(int64_t n, size_t *bytes) {
    size_t ps = page_size();
    *bytes = ((size_t)n * sizeof(float) + ps - 1) / ps * ps;
    if (!*bytes) *bytes = ps;
    void *p = mmap(NULL, *bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Zero floats [a, b) of base and hand the whole pages inside back to the system with
 * MADV_FREE: the kernel takes them when it needs memory (then they read as zeros), and until
 * then a later use finds them in place, zeroed, without page faults. Either way the range
 * reads as zeros afterwards, which the gradient window relies on. */
static void release_range(float *base, int64_t a, int64_t b) {
    if (b <= a) return;
    size_t ps = page_size();
    char *lo = (char *)(base + a), *hi = (char *)(base + b);
    memset(lo, 0, (size_t)(hi - lo));
    char *plo = (char *)(((uintptr_t)lo + ps - 1) / ps * ps);
    char *phi = (char *)((uintptr_t)hi / ps * ps);
    if (phi > plo) madvise(plo, (size_t)(phi - plo), MADV_FREE);
}

/* ---- groups -------------------------------------------------------------------------------- */

static int count_groups(dt_module *m) {
    int k = m->n_params > 0;
    for (int i = 0; i < m->n_children; i++) k += count_groups(m->children[i]);
    return k;
}

static int64_t numel_of(const dt_param *p) {
    int64_t k = 1;
    for (int i = 0; i < p->ndim; i++) k *= p->shape[i];
    return k;
}

static void collect_groups(dt_engine *e, dt_module *m, int *k) {
    if (m->n_params > 0) {
        dt_engine_group *g = &e->groups[(*k)++];
        g->m = m;
        g->a = m->params[0].offset;
        const dt_param *last = &m->params[m->n_params - 1];
        g->b = last->offset + numel_of(last);
        for (int i = 0; i < m->n_params; i++) {
            g->a = min64(g->a, m->params[i].offset);
            g->b = max64(g->b, m->params[i].offset + numel_of(&m->params[i]));
        }
    }
    for (int i = 0; i < m->n_children; i++) collect_groups(e, m->children[i], k);
}

static int group_of(const dt_engine *e, const dt_module *m) {
    int lo = 0, hi = e->n_groups - 1;
    int64_t a = m->params[0].offset;
    while (lo <= hi) { /* groups are in flat order: binary search by start */
        int mid = (lo + hi) / 2;
        if (e->groups[mid].a == a) return mid;
        if (e->groups[mid].a < a)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* Bytes of [a, b) that rank j owns, for allgatherv / reduce_scatterv layouts. */
static int64_t owned_part(const dt_engine *e, int j, int64_t a, int64_t b, int64_t *start) {
    int64_t s = max64(a, (int64_t)j * e->block), t = min64(b, (int64_t)(j + 1) * e->block);
    if (start) *start = s;
    return t > s ? t - s : 0;
}

/* ---- stage 3: gather / release ------------------------------------------------------------- */

/* Gather groups i0..i1 (neighbours in the flat layout) into the window with one allgatherv of
 * the owners' pieces of their union. */
static dt_status gather_groups(dt_engine *e, int i0, int i1) {
    double t0 = dt_now_sec();
    int64_t a = e->groups[i0].a, b = e->groups[i1].b, elems = 0;
    for (int i = i0; i <= i1; i++) elems += e->groups[i].b - e->groups[i].a;
    dt_status st = dt_mem_charge(e->dev, DT_MEM_PARAMS, elems * 4);
    if (st != DT_OK) return st;
    size_t counts[256], *cnt = counts;
    if (e->W > 256 && !(cnt = malloc((size_t)e->W * sizeof *cnt))) {
        dt_mem_release(e->dev, DT_MEM_PARAMS, elems * 4);
        return dt_error(DT_ERR_OOM, "engine: gather: out of memory");
    }
    for (int j = 0; j < e->W; j++) cnt[j] = (size_t)owned_part(e, j, a, b, NULL) * 4;
    int64_t s;
    int64_t mine = owned_part(e, e->rank, a, b, &s);
    const float *src = e->pshard ? e->pshard + (s - e->lo) : NULL;
    if (e->nv_param && mine > 0) {
        /* the shard lives on nvme: read this rank's piece straight into its window place */
        double t1 = dt_now_sec();
        st = dt__swap_read(e->nv_param, s - e->lo, e->params + s, mine);
        e->t.offload_s += dt_now_sec() - t1;
        src = e->params + s;
    }
    if (st == DT_OK) st = dt_comm_allgatherv(e->comm, mine ? src : NULL, e->params + a, cnt);
    if (cnt != counts) free(cnt);
    if (st != DT_OK) {
        dt_mem_release(e->dev, DT_MEM_PARAMS, elems * 4);
        return st;
    }
    for (int i = i0; i <= i1; i++) e->groups[i].resident = true;
    e->live_param_elems += elems;
    e->t.gather_s += dt_now_sec() - t0;
    return DT_OK;
}

static void release_group(dt_engine *e, dt_engine_group *g) {
    release_range(e->params, g->a, g->b);
    dt_mem_release(e->dev, DT_MEM_PARAMS, (g->b - g->a) * 4);
    e->live_param_elems -= g->b - g->a;
    g->resident = false;
}

/* Prefetch: the groups that come next in direction dir (+1 forward, -1 backward; the layout
 * follows the order modules run in) join gi's gather while they are not gathered yet and the
 * batch stays within stage3_prefetch_bucket_size and the live total within
 * stage3_max_live_parameters. Returns the far end of the batch. */
static int prefetch_end(const dt_engine *e, int gi, int dir) {
    const dt_zero_config *z = &e->cfg.zero;
    int64_t total = e->groups[gi].b - e->groups[gi].a;
    int k = gi;
    for (int nx = gi + dir; dir && nx >= 0 && nx < e->n_groups; nx += dir) {
        const dt_engine_group *h = &e->groups[nx];
        int64_t size = h->b - h->a;
        if (h->resident || h->persistent || total + size > z->prefetch_bucket_size ||
            e->live_param_elems + total + size > z->max_live_parameters)
            break;
        total += size;
        k = nx;
    }
    return k;
}

/* A user of group gi's parameters (a forward or a backward of its module): gathered unless
 * resident already, with the next groups prefetched in direction dir. */
static dt_status use_params(dt_engine *e, int gi, int dir) {
    dt_engine_group *g = &e->groups[gi];
    if (g->persistent) return DT_OK;
    g->gathered++;
    if (g->resident) return DT_OK;
    int k = prefetch_end(e, gi, dir);
    dt_status st = gather_groups(e, gi < k ? gi : k, gi < k ? k : gi);
    if (st != DT_OK) g->gathered--;
    return st;
}

static void unuse_params(dt_engine *e, dt_engine_group *g) {
    if (g->persistent || g->gathered <= 0) return;
    if (--g->gathered == 0) release_group(e, g);
}

/* Release prefetched groups nobody used (the run order left the layout's, or the pass ended). */
static void release_idle(dt_engine *e) {
    for (int i = 0; i < e->n_groups; i++) {
        dt_engine_group *g = &e->groups[i];
        if (g->resident && !g->persistent && g->gathered == 0) release_group(e, g);
    }
}

dt_status dt__zero_gather_all(dt_engine *e) {
    if (e->stage < 3) return DT_OK;
    for (int i = 0; i < e->n_groups; i++) {
        dt_status st = use_params(e, i, 1);
        if (st != DT_OK) {
            while (--i >= 0) unuse_params(e, &e->groups[i]);
            release_idle(e);
            return st;
        }
    }
    return DT_OK;
}

void dt__zero_release_all(dt_engine *e) {
    if (e->stage < 3) return;
    for (int i = 0; i < e->n_groups; i++) unuse_params(e, &e->groups[i]);
    release_idle(e);
}

/* Stage 3, after an update: copies in the window are stale. Persistent groups are gathered
 * again; prefetched ones nobody holds are dropped. */
static dt_status refresh_persistent(dt_engine *e) {
    release_idle(e);
    for (int i = 0; i < e->n_groups; i++) {
        dt_engine_group *g = &e->groups[i];
        if (!g->persistent) continue;
        dt_mem_release(e->dev, DT_MEM_PARAMS, (g->b - g->a) * 4);
        e->live_param_elems -= g->b - g->a;
        dt_status st = gather_groups(e, i, i);
        if (st != DT_OK) return st;
    }
    return DT_OK;
}

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
            int64_t s, len = owned_part(e, j, ra, rb, &s);
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
            owned_part(e, e->rank, ra, rb, &s);
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
                int64_t s, len = owned_part(e, j, g->a, g->b, &s);
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
            int64_t s, len = owned_part(e, e->rank, g->a, g->b, &s);
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
        release_range(e->grads, g->a, g->b);
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
    if (e->stage >= 3) mark_error(e, use_params(e, (int)gi, -1));
}

/* Backward passed the start of module gi's forward: its gradients are final. */
static void mark_done(void *user, int64_t gi) {
    dt_engine *e = user;
    dt_engine_group *g = &e->groups[gi];
    if (e->stage >= 3) unuse_params(e, g);
    if (g->fwd_live > 0 && --g->fwd_live > 0) return;
    if (g->reduced) return;
    e->bucket[e->n_bucket++] = (int)gi;
    e->bucket_elems += g->b - g->a;
    if (e->bucket_elems >= e->cfg.zero.reduce_bucket_size) mark_error(e, flush_bucket(e));
}

static void hook_pre(dt_module *m, void *user) {
    dt_engine *e = user;
    int gi = group_of(e, m);
    dt_engine_group *g = &e->groups[gi];
    if (g->old_pre) g->old_pre(m, g->old_user);
    bool grad = dt_grad_enabled(e->ctx);
    if (grad) {
        dt_ctx_mark_backward(e->ctx, mark_done, e, gi);
        g->fwd_live++;
    }
    if (e->stage >= 3) mark_error(e, use_params(e, gi, 1));
}

static void hook_post(dt_module *m, void *user) {
    dt_engine *e = user;
    int gi = group_of(e, m);
    dt_engine_group *g = &e->groups[gi];
    if (dt_grad_enabled(e->ctx)) dt_ctx_mark_backward(e->ctx, mark_enter, e, gi);
    if (e->stage >= 3) unuse_params(e, g);
    if (g->old_post) g->old_post(m, g->old_user);
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
    if (e->stage >= 3) release_idle(e);
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

/* ---- the mode's gradient norm: one tree of additions for every partitioning ----
 * Leaves are 16 consecutive elements of the flat buffer (elements past n and in norm_skip
 * ranges count as zero), their squares added in order (a float's square is exact in double).
 * Nodes add their two children, up a binary tree over 2^T leaves whose shape depends on n
 * only. Blocks start at multiples of 16, so each rank computes the largest whole subtrees of
 * its leaf range; the subtrees' roots of every rank are gathered and combined in the same tree
 * on every rank: the same additions at every stage and world size. */

#define DET_LEAF 16
#define DET_PAR 12        /* subtrees of 2^12 leaves are the parallel unit */
#define DET_MAX_NODES 128 /* a leaf range splits into at most 2 * 62 whole subtrees */

typedef struct det_norm {
    const dt_engine *e;
    const float *g;
    int64_t base, L; /* g[0] is flat element base; L leaves hold elements [0, n) */
} det_norm;

typedef struct det_node {
    double v;
    int64_t level, index; /* leaves [index << level, (index + 1) << level); level -1: unused */
} det_node;

static bool det_skipped(const dt_engine *e, int64_t j) {
    for (int k = 0; k < e->n_norm_skip; k++)
        if (j >= e->norm_skip[k][0] && j < e->norm_skip[k][1]) return true;
    return false;
}

static double det_leaf(const det_norm *d, int64_t i) {
    int64_t a = i * DET_LEAF, b = min64(a + DET_LEAF, d->e->n);
    double s = 0;
    for (int64_t j = a; j < b; j++) {
        if (d->e->n_norm_skip && det_skipped(d->e, j)) continue;
        double x = d->g[j - d->base];
        s += x * x;
    }
    return s;
}

static double det_subtree(const det_norm *d, int64_t level, int64_t index) {
    if ((index << level) >= d->L) return 0; /* all zeros: what the additions would give */
    if (level == 0) return det_leaf(d, index);
    int64_t k = level > DET_PAR ? (int64_t)1 << (level - DET_PAR) : 0;
    double *v = k ? malloc((size_t)k * sizeof *v) : NULL;
    if (!v) /* small, or no memory for the parallel split: the same additions in recursion */
        return det_subtree(d, level - 1, 2 * index) + det_subtree(d, level - 1, 2 * index + 1);
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t j = 0; j < k; j++)
        v[j] = det_subtree(d, DET_PAR, (index << (level - DET_PAR)) + j);
    for (int64_t w = k; w > 1; w /= 2)
        for (int64_t j = 0; j < w / 2; j++) v[j] = v[2 * j] + v[2 * j + 1];
    double r = v[0];
    free(v);
    return r;
}

/* Combine the subtree roots `nodes` (in leaf order, tiling [0, 2^T)) into the root. */
static dt_status det_combine(det_node *nodes, int count, int64_t T, double *out) {
    int k = 0; /* nodes[0..k) is the stack */
    for (int i = 0; i < count; i++) {
        if (nodes[i].level < 0) continue;
        nodes[k++] = nodes[i];
        while (k >= 2 && nodes[k - 2].level == nodes[k - 1].level && nodes[k - 2].index % 2 == 0 &&
               nodes[k - 1].index == nodes[k - 2].index + 1) {
            nodes[k - 2].v += nodes[k - 1].v;
            nodes[k - 2].level++;
            nodes[k - 2].index /= 2;
            k--;
        }
    }
    if (k != 1 || nodes[0].level != T)
        return dt_error(DT_ERR_STATE,
                        "engine: gradient norm: the ranks' subtrees do not "
                        "tile the tree (%d left)",
                        k);
    *out = nodes[0].v;
    return DT_OK;
}

static dt_status det_sumsq(dt_engine *e, const float *g, double *out) {
    det_norm d = {e, g, e->stage == 0 ? 0 : e->lo, (e->n + DET_LEAF - 1) / DET_LEAF};
    int64_t T = 0;
    while (((int64_t)1 << T) < d.L) T++;
    int64_t top = (int64_t)1 << T, la = 0, lb = top;
    bool split = e->stage >= 1 && e->W > 1;
    if (split) {
        la = min64(e->lo / DET_LEAF, top);
        lb = e->rank == e->W - 1 ? top : min64((e->lo + e->block) / DET_LEAF, top);
    }
    det_node mine[DET_MAX_NODES];
    int cnt = 0;
    for (int64_t i = la; i < lb; cnt++) { /* the largest whole subtrees, left to right */
        int64_t l = 0;
        while (l < T && i % ((int64_t)2 << l) == 0 && i + ((int64_t)2 << l) <= lb) l++;
        mine[cnt] = (det_node){det_subtree(&d, l, i >> l), l, i >> l};
        i += (int64_t)1 << l;
    }
    for (int c = cnt; c < DET_MAX_NODES; c++) mine[c] = (det_node){0, -1, 0};
    if (!split) return det_combine(mine, cnt, T, out);
    det_node *all = malloc((size_t)e->W * sizeof mine);
    if (!all) return dt_error(DT_ERR_OOM, "engine: gradient norm: out of memory");
    dt_status st = dt_comm_allgather(e->comm, mine, all, sizeof mine);
    if (st == DT_OK) st = det_combine(all, e->W * DET_MAX_NODES, T, out);
    free(all);
    return st;
}

dt_status dt__zero_global_sumsq(dt_engine *e, const float *g, int64_t gn, double *out) {
    if (e->cfg.deterministic) { /* g holds [0, n) (stage 0) or the block (stage >= 1) */
        double s = 0;
        dt_status st = det_sumsq(e, g, &s);
        /* pipeline: the stages' sums, added in stage order on every stage */
        if (st == DT_OK && e->mp_comm && dt_comm_size(e->mp_comm) > 1)
            st = dt_comm_allreduce(e->mp_comm, &s, 1, DT_COMM_DTYPE_F64, DT_REDUCE_OP_SUM);
        *out = s;
        return st;
    }
    /* fixed chunks of 4096 summed in order: the result does not depend on the thread count */
    const int64_t CH = 4096;
    int64_t nch = (gn + CH - 1) / CH;
    double *part = malloc((size_t)(nch > 0 ? nch : 1) * sizeof(double));
    if (!part) return dt_error(DT_ERR_OOM, "engine: gradient norm: out of memory");
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < nch; c++) {
        double s = 0;
        for (int64_t i = c * CH; i < min64(gn, (c + 1) * CH); i++) s += (double)g[i] * g[i];
        part[c] = s;
    }
    double s = 0;
    for (int64_t c = 0; c < nch; c++) s += part[c];
    free(part);
    /* ranges counted by another stage (pipeline tied copies) */
    int64_t base = e->stage == 0 ? 0 : e->lo;
    for (int k = 0; k < e->n_norm_skip; k++) {
        int64_t a = max64(e->norm_skip[k][0], base), b = min64(e->norm_skip[k][1], base + gn);
        for (int64_t i = a; i < b; i++) s -= (double)g[i - base] * g[i - base];
    }
    if (e->stage >= 1 && e->W > 1) {
        /* every rank's partial sum, added in rank order on every rank */
        double *all = malloc((size_t)e->W * sizeof(double));
        if (!all) return dt_error(DT_ERR_OOM, "engine: gradient norm: out of memory");
        dt_status st = dt_comm_allgather(e->comm, &s, all, sizeof s);
        if (st != DT_OK) {
            free(all);
            return st;
        }
        s = 0;
        for (int j = 0; j < e->W; j++) s += all[j];
        free(all);
    }
    /* pipeline: the stages' sums, added in stage order on every stage */
    if (e->mp_comm && dt_comm_size(e->mp_comm) > 1) {
        dt_status st = dt_comm_allreduce(e->mp_comm, &s, 1, DT_COMM_DTYPE_F64, DT_REDUCE_OP_SUM);
        if (st != DT_OK) return st;
    }
    *out = s;
    return DT_OK;
}

/* Master weights [off, off+len) of this rank's block become the parameters the next forward
 * uses: the window (stage 1-2), or the parameter shard in memory or on nvme (stage 3). */
static dt_status store_master(dt_engine *e, int64_t off, const float *src, int64_t len) {
    if (e->stage < 3)
        memcpy(e->params + e->lo + off, src, (size_t)len * sizeof(float));
    else if (e->nv_param)
        return dt__swap_write(e->nv_param, off, src, len);
    else
        memcpy(e->pshard + off, src, (size_t)len * sizeof(float));
    return DT_OK;
}

/* nvme optimiser step: state chunks streamed through the optimiser */
typedef struct nv_step {
    dt_engine *e;
    const float *g;
} nv_step;

static dt_status nv_step_chunk(void *user, int64_t off, int64_t len, float *const *p) {
    nv_step *s = user;
    dt_engine *e = s->e;
    /* full chunks use the chunk-sized optimiser, the shorter last one its own (made on first
     * use), following the first's lr and momentum */
    dt_optimizer *o = e->opt;
    if (len != e->nv_chunk) {
        if (!e->opt_tail && !(e->opt_tail = dt_optim_new(e->host, &e->cfg.optimizer, len)))
            return dt_last_status();
        o = e->opt_tail;
        const dt_optim_config *c = dt_optim_config_of(e->opt);
        dt_optim_set_lr(o, c->lr);
        dt_optim_set_momentum(o, c->type == DT_OPTIM_SGD ? c->momentum : c->beta1);
    }
    for (int k = 0; k < e->n_opt_states; k++) {
        const char *nm;
        memcpy(dt_optim_state(o, k, &nm), p[1 + k], (size_t)len * sizeof(float));
    }
    dt_optim_set_step_count(o, e->opt_steps);
    dt_status st = dt_optim_step(o, p[0], s->g + off, len);
    if (st != DT_OK) return st;
    for (int k = 0; k < e->n_opt_states; k++) {
        const char *nm;
        memcpy(p[1 + k], dt_optim_state(o, k, &nm), (size_t)len * sizeof(float));
    }
    return store_master(e, off, p[0], len); /* the new weights for the next forward */
}

static dt_swap *const *nv_stores(dt_engine *e, dt_swap **buf) {
    buf[0] = e->nv_master;
    buf[1] = e->nv_m;
    buf[2] = e->nv_v;
    return buf;
}

dt_status dt__zero_update(dt_engine *e, float *g, int64_t gn) {
    dt_status st;
    if (e->stage == 0) {
        st = dt_optim_step(e->opt, e->params, g, gn);
        e->opt_steps++;
        return st;
    }
    if (e->nv_master) {
        double t0 = dt_now_sec();
        dt_swap *stores[3];
        nv_step s = {e, g};
        st = dt__swap_stream(nv_stores(e, stores), 1 + e->n_opt_states, e->block, e->nv_chunk,
                             e->nv_bufs, nv_step_chunk, &s);
        e->t.offload_s += dt_now_sec() - t0;
        if (st != DT_OK) return st;
        e->opt_steps++;
        dt_optim_set_step_count(e->opt, e->opt_steps);
    } else {
        st = dt_optim_step(e->opt, e->master, g, gn);
        if (st != DT_OK) return st;
        e->opt_steps++;
        if ((st = store_master(e, 0, e->master, e->block)) != DT_OK) return st;
    }
    return dt__zero_publish(e);
}

dt_status dt__zero_publish(dt_engine *e) {
    if (e->stage == 0) return DT_OK;
    if (e->stage < 3) {
        double t0 = dt_now_sec();
        dt_status st = dt_comm_allgather(e->comm, e->params + e->lo, e->params,
                                         (size_t)e->block * sizeof(float));
        e->t.gather_s += dt_now_sec() - t0;
        return st;
    }
    return refresh_persistent(e);
}

void dt__zero_clear_grads(dt_engine *e) {
    if (e->stage <= 1)
        dt__zero_f32(e->grads, e->npad);
    else
        dt__zero_f32(e->gacc, e->block);
    if (e->dacc) dt__zero_f32(e->dacc, e->dacc_n);
}

/* ---- state visiting (checkpoints) ---------------------------------------------------------- */

typedef struct visit {
    dt__zero_state_fn fn;
    void *user;
    int nptrs;
} visit;

static dt_status visit_chunk(void *user, int64_t off, int64_t len, float *const *p) {
    visit *v = user;
    return v->fn(v->user, off, len, p, v->nptrs);
}

dt_status dt__zero_visit_state(dt_engine *e, dt__zero_state_fn fn, void *user, bool write) {
    int nptrs = 1 + e->n_opt_states;
    if (e->nv_master) {
        dt_swap *stores[3];
        visit v = {fn, user, nptrs};
        dt_status st = dt__swap_stream(nv_stores(e, stores), nptrs, e->block, e->nv_chunk,
                                       e->nv_bufs, visit_chunk, &v);
        /* the loaded master also becomes the parameters */
        float *tmp = e->nv_bufs[0];
        for (int64_t off = 0; st == DT_OK && write && off < e->block; off += e->nv_chunk) {
            int64_t len = min64(e->nv_chunk, e->block - off);
            st = dt__swap_read(e->nv_master, off, tmp, len);
            if (st == DT_OK) st = store_master(e, off, tmp, len);
        }
        return st;
    }
    float *ptrs[4];
    ptrs[0] = e->stage == 0 ? e->params : e->master;
    for (int k = 0; k < e->n_opt_states; k++) {
        const char *nm;
        ptrs[1 + k] = dt_optim_state(e->opt, k, &nm);
    }
    dt_status st = fn(user, 0, e->stage == 0 ? e->n : e->block, ptrs, nptrs);
    if (st != DT_OK || !write || e->stage == 0) return st;
    return store_master(e, 0, e->master, e->block);
}

/* ---- setup / teardown ---------------------------------------------------------------------- */

static dt_status state_buffer(dt_engine *e, dt_device *dev, dt_mem_category cat, float **out,
                              const char *what) {
    *out = dt_mem_alloc(dev, cat, (size_t)e->block * sizeof(float));
    if (!*out)
        return dt_error(DT_ERR_OOM,
                        "engine: no memory for the %s (%lld floats on %s): %s; hint: "
                        "use a higher ZeRO stage, offload, or raise the budget",
                        what, (long long)e->block, dt_device_name(dev), dt_last_error());
    memset(*out, 0, (size_t)e->block * sizeof(float));
    return DT_OK;
}

static dt_swap *open_swap(dt_engine *e, const char *dir, const char *what) {
    char name[64];
    snprintf(name, sizeof name, "dtrain_%s_rank%d", what, e->rank);
    return dt__swap_open(dir, name, e->block);
}

dt_status dt__zero_setup(dt_engine *e) {
    const dt_zero_config *z = &e->cfg.zero;
    e->stage = z->stage;
    e->params = map_floats(e->npad, &e->map_bytes);
    e->grads = e->params ? map_floats(e->npad, &e->map_bytes) : NULL;
    if (!e->grads)
        return dt_error(DT_ERR_OOM, "engine: cannot map %lld floats", (long long)e->npad);
    float *mp = dt_module_flat_params(e->model, NULL);
    memcpy(e->params, mp, (size_t)e->n * sizeof(float));
    dt__module_rebind(e->model, e->params, e->grads, false);
    /* the module's own buffers are gone; the engine accounts what stays resident */
    if (e->stage < 3 && dt_mem_charge(e->dev, DT_MEM_PARAMS, e->n * 4) != DT_OK) return DT_ERR_OOM;
    if (e->stage < 2 && dt_mem_charge(e->dev, DT_MEM_GRADS, e->n * 4) != DT_OK) return DT_ERR_OOM;

    e->n_groups = count_groups(e->model);
    e->groups = calloc((size_t)(e->n_groups ? e->n_groups : 1), sizeof *e->groups);
    e->bucket = calloc((size_t)(e->n_groups ? e->n_groups : 1), sizeof *e->bucket);
    if (!e->groups || !e->bucket) return dt_error(DT_ERR_OOM, "engine: groups");
    int k = 0;
    collect_groups(e, e->model, &k);

    dt_device *odev = z->offload_optimizer == DT_OFFLOAD_CPU ? e->host : e->dev;
    dt_status st = DT_OK;
    if (e->stage >= 1) {
        if (z->offload_optimizer == DT_OFFLOAD_NVME) {
            e->nv_master = open_swap(e, z->offload_optimizer_nvme_path, "master");
            if (!e->nv_master) return dt_last_status();
            st = dt__swap_write(e->nv_master, 0, e->params + e->lo, e->block);
        } else {
            st = state_buffer(e, odev, DT_MEM_OPTIM, &e->master, "fp32 master weights");
            if (st == DT_OK) memcpy(e->master, e->params + e->lo, (size_t)e->block * sizeof(float));
        }
        if (st != DT_OK) return st;
    }
    if (e->stage >= 2) {
        st = state_buffer(e, odev, DT_MEM_GRADS, &e->gacc, "gradient partition");
        if (st != DT_OK) return st;
        /* the pack buffer of a bucket: its size, or the largest group if that is larger */
        /* a bucket is flushed once it reaches reduce_bucket_size, so it holds less than that
         * plus the largest group */
        int64_t big = 0;
        for (int i = 0; i < e->n_groups; i++) big = max64(big, e->groups[i].b - e->groups[i].a);
        int64_t cap = min64(z->reduce_bucket_size + big, e->npad);
        e->pack_cap = cap;
        e->pack = dt_mem_alloc(e->dev, DT_MEM_COMM, (size_t)cap * sizeof(float));
        if (!e->pack) return dt_error(DT_ERR_OOM, "engine: reduce bucket: %s", dt_last_error());
    }
    if (e->stage >= 3) {
        if (z->offload_param == DT_OFFLOAD_NVME) {
            e->nv_param = open_swap(e, z->offload_param_nvme_path, "params");
            if (!e->nv_param) return dt_last_status();
            st = dt__swap_write(e->nv_param, 0, e->params + e->lo, e->block);
        } else {
            dt_device *pdev = z->offload_param == DT_OFFLOAD_CPU ? e->host : e->dev;
            st = state_buffer(e, pdev, DT_MEM_PARAMS, &e->pshard, "parameter partition");
            if (st == DT_OK) memcpy(e->pshard, e->params + e->lo, (size_t)e->block * sizeof(float));
        }
        if (st != DT_OK) return st;
        for (int i = 0; i < e->n_groups; i++) {
            dt_engine_group *g = &e->groups[i];
            g->persistent = g->b - g->a < z->param_persistence_threshold;
            g->resident = g->persistent;
            if (g->persistent) {
                dt_mem_charge(e->dev, DT_MEM_PARAMS, (g->b - g->a) * 4);
                e->live_param_elems += g->b - g->a;
            }
        }
        /* the window keeps only the persistent groups */
        int64_t prev = 0;
        for (int i = 0; i < e->n_groups; i++) {
            if (!e->groups[i].persistent) continue;
            release_range(e->params, prev, e->groups[i].a);
            prev = e->groups[i].b;
        }
        release_range(e->params, prev, e->npad);
    }
    if (e->nv_master) {
        for (int i = 0; i < 2 * (1 + e->n_opt_states); i++) {
            e->nv_bufs[i] =
                dt_mem_alloc(e->host, DT_MEM_OTHER, (size_t)e->nv_chunk * sizeof(float));
            if (!e->nv_bufs[i]) return dt_error(DT_ERR_OOM, "engine: nvme buffers");
        }
        dt_swap *stores[3];
        nv_stores(e, stores);
        for (int i = 1; i <= e->n_opt_states; i++) {
            stores[i] =
                open_swap(e, z->offload_optimizer_nvme_path, i == 1 ? "exp_avg" : "exp_avg_sq");
            if (!stores[i]) return dt_last_status();
        }
        e->nv_m = stores[1];
        e->nv_v = stores[2];
    }
    /* hooks: every module with parameters of its own (stage >= 2) */
    if (e->stage >= 2) {
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
    return DT_OK;
}

void dt__zero_teardown(dt_engine *e) {
    /* give the module ordinary buffers again, with the current weights */
    if (e->model && e->params && e->grads) {
        dt_status st = dt__zero_gather_all(e);
        for (int i = 0; i < e->n_groups && e->stage >= 2; i++) {
            dt_engine_group *g = &e->groups[i];
            g->m->pre_hook = g->old_pre;
            g->m->post_hook = g->old_post;
            g->m->hook_user = g->old_user;
        }
        float *p = dt_mem_alloc(e->dev, DT_MEM_PARAMS, (size_t)e->n * sizeof(float));
        float *gr = p ? dt_mem_alloc(e->dev, DT_MEM_GRADS, (size_t)e->n * sizeof(float)) : NULL;
        if (p && gr) {
            memcpy(p, e->params, (size_t)e->n * sizeof(float));
            if (st != DT_OK)
                dt_log(DT_LOG_WARN, "engine: weights not gathered at free: %s", dt_last_error());
            memset(gr, 0, (size_t)e->n * sizeof(float));
            dt__module_rebind(e->model, p, gr, true);
        } else {
            dt_log(DT_LOG_ERROR, "engine: out of memory giving the module its buffers back");
            dt_mem_free(e->dev, DT_MEM_PARAMS, p, (size_t)e->n * sizeof(float));
        }
        if (st == DT_OK) dt__zero_release_all(e);
    }
    if (e->stage < 3 && e->params) dt_mem_release(e->dev, DT_MEM_PARAMS, e->n * 4);
    if (e->stage < 2 && e->grads) dt_mem_release(e->dev, DT_MEM_GRADS, e->n * 4);
    if (e->stage >= 3) {
        for (int i = 0; i < e->n_groups; i++)
            if (e->groups[i].persistent)
                dt_mem_release(e->dev, DT_MEM_PARAMS, (e->groups[i].b - e->groups[i].a) * 4);
    }
    if (e->live_grad_elems) dt_mem_release(e->dev, DT_MEM_GRADS, e->live_grad_elems * 4);
    if (e->params) munmap(e->params, e->map_bytes);
    if (e->grads) munmap(e->grads, e->map_bytes);
    const dt_zero_config *z = &e->cfg.zero;
    dt_device *odev = z->offload_optimizer == DT_OFFLOAD_CPU ? e->host : e->dev;
    size_t bb = (size_t)e->block * sizeof(float);
    if (e->master) dt_mem_free(odev, DT_MEM_OPTIM, e->master, bb);
    if (e->gacc) dt_mem_free(odev, DT_MEM_GRADS, e->gacc, bb);
    if (e->dacc) dt_mem_free(e->dev, DT_MEM_GRADS, e->dacc, (size_t)e->dacc_n * sizeof(float));
    if (e->pshard)
        dt_mem_free(z->offload_param == DT_OFFLOAD_CPU ? e->host : e->dev, DT_MEM_PARAMS, e->pshard,
                    bb);
    if (e->pack) dt_mem_free(e->dev, DT_MEM_COMM, e->pack, (size_t)e->pack_cap * sizeof(float));
    for (int i = 0; i < 8; i++)
        if (e->nv_bufs[i])
            dt_mem_free(e->host, DT_MEM_OTHER, e->nv_bufs[i], (size_t)e->nv_chunk * 4);
    dt_optim_free(e->opt_tail);
    dt__swap_close(e->nv_master);
    dt__swap_close(e->nv_m);
    dt__swap_close(e->nv_v);
    dt__swap_close(e->nv_param);
    free(e->groups);
    free(e->bucket);
}
