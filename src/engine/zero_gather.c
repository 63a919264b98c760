/*
 * zero_gather.c — ZeRO stage 3's parameters: each rank keeps one block, and a module's
 * parameters are gathered into the flat window (one allgatherv, with the next groups
 * prefetched) before its forward and its backward and released after, except the persistent
 * groups under the threshold, which stay gathered.
 */
#include "engine/zero_impl.h"

#include <stdlib.h>

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
    for (int j = 0; j < e->W; j++) cnt[j] = (size_t)dt__zero_owned_part(e, j, a, b, NULL) * 4;
    int64_t s;
    int64_t mine = dt__zero_owned_part(e, e->rank, a, b, &s);
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
    dt__zero_release_range(e->params, g->a, g->b);
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

dt_status dt__zero_use_params(dt_engine *e, int gi, int dir) {
    dt_engine_group *g = &e->groups[gi];
    if (g->persistent) return DT_OK;
    g->gathered++;
    if (g->resident) return DT_OK;
    int k = prefetch_end(e, gi, dir);
    dt_status st = gather_groups(e, gi < k ? gi : k, gi < k ? k : gi);
    if (st != DT_OK) g->gathered--;
    return st;
}

void dt__zero_unuse_params(dt_engine *e, dt_engine_group *g) {
    if (g->persistent || g->gathered <= 0) return;
    if (--g->gathered == 0) release_group(e, g);
}

void dt__zero_release_idle(dt_engine *e) {
    for (int i = 0; i < e->n_groups; i++) {
        dt_engine_group *g = &e->groups[i];
        if (g->resident && !g->persistent && g->gathered == 0) release_group(e, g);
    }
}

dt_status dt__zero_gather_all(dt_engine *e) {
    if (e->stage < 3) return DT_OK;
    for (int i = 0; i < e->n_groups; i++) {
        dt_status st = dt__zero_use_params(e, i, 1);
        if (st != DT_OK) {
            while (--i >= 0) dt__zero_unuse_params(e, &e->groups[i]);
            dt__zero_release_idle(e);
            return st;
        }
    }
    return DT_OK;
}

void dt__zero_release_all(dt_engine *e) {
    if (e->stage < 3) return;
    for (int i = 0; i < e->n_groups; i++) dt__zero_unuse_params(e, &e->groups[i]);
    dt__zero_release_idle(e);
}

dt_status dt__zero_refresh_persistent(dt_engine *e) {
    dt__zero_release_idle(e);
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
