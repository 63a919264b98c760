/*
 * zero_step.c — the partitioned optimiser step: this rank's block updated in memory, on the
 * host device, or streamed from nvme files chunk by chunk; the new weights published to every
 * rank (allgather, or stage 3's shards); and the state visited for checkpoints.
 */
#include "engine/zero_impl.h"

#include <string.h>

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

dt_swap *const *dt__zero_nv_stores(dt_engine *e, dt_swap **buf) {
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
        st = dt__swap_stream(dt__zero_nv_stores(e, stores), 1 + e->n_opt_states, e->block,
                             e->nv_chunk, e->nv_bufs, nv_step_chunk, &s);
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
    return dt__zero_refresh_persistent(e);
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
        dt_status st = dt__swap_stream(dt__zero_nv_stores(e, stores), nptrs, e->block, e->nv_chunk,
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
