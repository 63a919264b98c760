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
 *
 * This file sets the engine up for its stage and takes it down again; the jobs have files of
 * their own (zero_impl.h): zero_layout.c (the window and the groups), zero_gather.c (stage 3),
 * zero_grads.c (reduction), zero_norm.c (the gradient norm), zero_step.c (the optimiser step).
 */
#include "engine/zero_impl.h"
#include "nn/nn_iface.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

/* The flat window: params and grads mapped, the module's weights copied in and the module
 * pointed at them; the engine accounts what stays resident. */
static dt_status setup_window(dt_engine *e) {
    e->params = dt__zero_map_floats(e->npad, &e->map_bytes);
    e->grads = e->params ? dt__zero_map_floats(e->npad, &e->map_bytes) : NULL;
    if (!e->grads)
        return dt_error(DT_ERR_OOM, "engine: cannot map %lld floats", (long long)e->npad);
    float *mp = dt_module_flat_params(e->model, NULL);
    memcpy(e->params, mp, (size_t)e->n * sizeof(float));
    dt__module_rebind(e->model, e->params, e->grads, false);
    /* the module's own buffers are gone; the engine accounts what stays resident */
    if (e->stage < 3 && dt_mem_charge(e->dev, DT_MEM_PARAMS, e->n * 4) != DT_OK) return DT_ERR_OOM;
    if (e->stage < 2 && dt_mem_charge(e->dev, DT_MEM_GRADS, e->n * 4) != DT_OK) return DT_ERR_OOM;
    return DT_OK;
}

/* The groups, one per module with parameters of its own, in flat order; the bucket list. */
static dt_status setup_groups(dt_engine *e) {
    e->n_groups = dt__zero_count_groups(e->model);
    e->groups = calloc((size_t)(e->n_groups ? e->n_groups : 1), sizeof *e->groups);
    e->bucket = calloc((size_t)(e->n_groups ? e->n_groups : 1), sizeof *e->bucket);
    if (!e->groups || !e->bucket) return dt_error(DT_ERR_OOM, "engine: groups");
    int k = 0;
    dt__zero_collect_groups(e, e->model, &k);
    return DT_OK;
}

/* Stage >= 1: this rank's block of fp32 master weights, on odev or in an nvme file. */
static dt_status setup_master(dt_engine *e, dt_device *odev) {
    const dt_zero_config *z = &e->cfg.zero;
    dt_status st = DT_OK;
    if (z->offload_optimizer == DT_OFFLOAD_NVME) {
        e->nv_master = open_swap(e, z->offload_optimizer_nvme_path, "master");
        if (!e->nv_master) return dt_last_status();
        st = dt__swap_write(e->nv_master, 0, e->params + e->lo, e->block);
    } else {
        st = state_buffer(e, odev, DT_MEM_OPTIM, &e->master, "fp32 master weights");
        if (st == DT_OK) memcpy(e->master, e->params + e->lo, (size_t)e->block * sizeof(float));
    }
    return st;
}

/* Stage >= 2: the accumulated gradient partition and the bucket's pack buffer. */
static dt_status setup_buckets(dt_engine *e, dt_device *odev) {
    const dt_zero_config *z = &e->cfg.zero;
    dt_status st = state_buffer(e, odev, DT_MEM_GRADS, &e->gacc, "gradient partition");
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
    return DT_OK;
}

/* Stage 3: this rank's parameter partition (on the device, the host or nvme); the window keeps
 * only the groups under the persistence threshold. */
static dt_status setup_param_shard(dt_engine *e) {
    const dt_zero_config *z = &e->cfg.zero;
    dt_status st = DT_OK;
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
        dt__zero_release_range(e->params, prev, e->groups[i].a);
        prev = e->groups[i].b;
    }
    dt__zero_release_range(e->params, prev, e->npad);
    return DT_OK;
}

/* nvme optimiser offload: the streaming buffers and the moments' files. */
static dt_status setup_nvme_optimizer(dt_engine *e) {
    const dt_zero_config *z = &e->cfg.zero;
    for (int i = 0; i < 2 * (1 + e->n_opt_states); i++) {
        e->nv_bufs[i] = dt_mem_alloc(e->host, DT_MEM_OTHER, (size_t)e->nv_chunk * sizeof(float));
        if (!e->nv_bufs[i]) return dt_error(DT_ERR_OOM, "engine: nvme buffers");
    }
    dt_swap *stores[3];
    dt__zero_nv_stores(e, stores);
    for (int i = 1; i <= e->n_opt_states; i++) {
        stores[i] = open_swap(e, z->offload_optimizer_nvme_path, i == 1 ? "exp_avg" : "exp_avg_sq");
        if (!stores[i]) return dt_last_status();
    }
    e->nv_m = stores[1];
    e->nv_v = stores[2];
    return DT_OK;
}

dt_status dt__zero_setup(dt_engine *e) {
    const dt_zero_config *z = &e->cfg.zero;
    e->stage = z->stage;
    dt_status st = setup_window(e);
    if (st == DT_OK) st = setup_groups(e);
    if (st != DT_OK) return st;
    dt_device *odev = z->offload_optimizer == DT_OFFLOAD_CPU ? e->host : e->dev;
    if (e->stage >= 1 && (st = setup_master(e, odev)) != DT_OK) return st;
    if (e->stage >= 2 && (st = setup_buckets(e, odev)) != DT_OK) return st;
    if (e->stage >= 3 && (st = setup_param_shard(e)) != DT_OK) return st;
    if (e->nv_master && (st = setup_nvme_optimizer(e)) != DT_OK) return st;
    /* hooks: every module with parameters of its own (stage >= 2) */
    if (e->stage >= 2) dt__zero_hook_modules(e);
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
