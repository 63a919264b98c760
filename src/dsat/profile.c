/* profile.c — what dsat's profile trial measures, read from an engine that has trained one
 * global batch at micro-batch 1: the parameter counts, the slot's device budget, and from the
 * engine's own accounting the activation bytes of one example, the optimizer's state per
 * parameter, the "other" category and the step's peak; from the module tree and the user's
 * ZeRO settings the sizes the stage 2-3 buffers depend on. The profile travels to the search
 * runner as validation metrics (dt_dsat_profile_report / _from_metrics).
 *
 * Activations: the arena charges blocks, and the first step's blocks leave tails unused, so
 * the category's peak is what the budget sees. When the step's activations spanned several
 * blocks (the arena coalesced them after the step: its capacity fell below the peak), that
 * slack grows with the micro-batch and the peak per example is the rate. When one block held
 * the whole step with room to spare, the block is a floor and the arena's high-water mark (the
 * bytes the example really used) is the rate. */
#include "dsat/dsat.h"
#include "base/base_impl.h"
#include "engine/engine_iface.h"
#include "tensor/tensor_iface.h"

#include <stddef.h>
#include <string.h>
#include <unistd.h>

static int64_t max64(int64_t a, int64_t b) {
    return a > b ? a : b;
}

static int64_t numel(const dt_param *p) {
    int64_t k = 1;
    for (int i = 0; i < p->ndim; i++) k *= p->shape[i];
    return k;
}

/* The module tree's parameter groups (modules with parameters of their own) in pre-order,
 * which is their order in the flat buffer: sizes into g[*n] (up to cap). */
static void collect(const dt_module *m, int64_t *g, int *n, int cap) {
    int64_t own = 0;
    for (int i = 0; i < m->n_params; i++) own += numel(&m->params[i]);
    if (m->n_params > 0 && *n < cap) g[(*n)++] = own;
    for (int i = 0; i < m->n_children; i++) collect(m->children[i], g, n, cap);
}

/* Stage 3: persistent groups stay gathered; any other group is gathered with the next ones in
 * the layout up to the prefetch bucket, stopping at a persistent group. */
static void group_sizes(const dt_module *root, const dt_zero_config *z, dt_dsat_profile *p) {
    enum { CAP = 4096 };
    int64_t g[CAP];
    int n = 0;
    collect(root, g, &n, CAP);
    int64_t persistent = 0, run = 0, big = 0;
    for (int i = 0; i < n; i++) {
        big = max64(big, g[i]);
        if (g[i] < z->param_persistence_threshold) {
            persistent += g[i];
            continue;
        }
        int64_t total = g[i];
        for (int j = i + 1; j < n && g[j] >= z->param_persistence_threshold &&
                            total + g[j] <= z->prefetch_bucket_size;
             j++)
            total += g[j];
        run = max64(run, total);
    }
    p->largest_group = big;
    p->stage3_live_params = persistent + run;
}

/* Host memory per slot: the budget when neither the config nor DT_DEVICE_MEMORY sets one. */
static int64_t host_per_slot(int slots) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    int64_t total = pages > 0 && size > 0 ? (int64_t)pages * size : 0;
    return total / (slots > 0 ? slots : 1);
}

dt_status dt_dsat_profile_engine(dt_engine *e, int64_t budget, dt_dsat_profile *out) {
    if (!e || !out) return dt_error(DT_ERR_INVALID, "dt_dsat_profile_engine: NULL argument");
    memset(out, 0, sizeof *out);
    const dt_ds_config *cfg = dt_engine_config(e);
    dt_module *m = dt_engine_module(e);
    dt_ctx *ctx = dt_module_ctx(m);
    dt_comm *comm = dt_engine_comm(e);
    int W = dt_comm_size(comm);
    dt_engine_memory mem;
    dt_engine_memory_stats(e, &mem);
    int64_t n = dt_module_num_params(m), mbs = dt_engine_train_micro_batch_size_per_gpu(e);
    int64_t act = mem.device.peak[DT_MEM_ACTIVATIONS];
    dt_arena *arena = dt_ctx_arena(ctx);
    int64_t hw = (int64_t)dt_arena_high_water(arena), cap = (int64_t)dt_arena_capacity(arena);
    bool one_block = cap >= act && hw < act;
    /* the largest of every rank's figures: the ranks' budgets are the same */
    int64_t v[6] = {mem.device.total_peak,
                    one_block ? hw : act,
                    one_block ? act : 0,
                    mem.device.peak[DT_MEM_OTHER],
                    act,
                    hw};
    dt_status st =
        W > 1 ? dt_comm_allreduce(comm, v, 6, DT_COMM_DTYPE_I64, DT_REDUCE_OP_MAX) : DT_OK;
    if (st != DT_OK) return st;
    act = v[4];
    hw = v[5];
    int64_t optim = mem.device.current[DT_MEM_OPTIM] + mem.host.current[DT_MEM_OPTIM];
    int stage = cfg->zero.stage;
    if (cfg->zero.offload_optimizer == DT_OFFLOAD_NVME) optim += mem.nvme_bytes;
    /* stage 0: the moments over every parameter; from stage 1 the partition holds an fp32
     * master too (rounded to whole floats: the partition is padded by a few elements) */
    int64_t per = stage == 0 ? (n ? optim / n : 0) : (n ? optim / ((n + W - 1) / W) - 4 : 0);
    out->params = out->trainable_params = n;
    out->slots = W;
    out->device_budget = budget > 0              ? budget
                         : mem.device.budget > 0 ? mem.device.budget
                                                 : host_per_slot(W);
    out->measured_peak = v[0];
    out->activation_per_example = (v[1] + mbs - 1) / (mbs > 0 ? mbs : 1);
    out->activation_floor = v[2];
    out->other_bytes = v[3];
    out->micro_batch = mbs;
    out->activation_peak = act;
    out->activation_high_water = hw;
    out->optimizer_bytes_per_param = max64(per, 0) / 4 * 4;
    out->compute = cfg->bf16 ? DT_DTYPE_BF16 : cfg->fp16.enabled ? DT_DTYPE_F16 : DT_DTYPE_F32;
    out->reduce_bucket_size = cfg->zero.reduce_bucket_size;
    out->user_stage = stage;
    group_sizes(m, &cfg->zero, out);
    return DT_OK;
}

dt_status dt_dsat_profile_refine(dt_dsat_profile *p, const dt_dsat_profile *q) {
    int64_t d = q->micro_batch - p->micro_batch;
    if (d <= 0 || p->micro_batch < 1)
        return dt_error(DT_ERR_INVALID,
                        "dsat: refining a profile at micro-batch %lld needs one at a larger "
                        "micro-batch, not %lld",
                        (long long)p->micro_batch, (long long)q->micro_batch);
    int64_t grow = max64(q->activation_peak - p->activation_peak,
                         q->activation_high_water - p->activation_high_water);
    int64_t slope = max64((grow + d - 1) / d, 0);
    p->activation_per_example = slope;
    p->activation_base = p->activation_peak - p->micro_batch * slope;
    /* the peak grew less than the bytes used: the larger step still fit in the blocks the
     * first one had, so the tails a much larger step leaves are unseen; the model bounds them
     * from the high-water mark's growth */
    bool unseen = q->activation_peak - p->activation_peak <
                  q->activation_high_water - p->activation_high_water;
    p->activation_floor = p->activation_peak;
    p->activation_hw_per_example =
        unseen ? max64((q->activation_high_water - p->activation_high_water + d - 1) / d, 0) : 0;
    p->other_per_example = max64((q->other_bytes - p->other_bytes + d - 1) / d, 0);
    p->other_bytes = max64(p->other_bytes, q->other_bytes);
    return DT_OK;
}

/* ---- as validation metrics ---- */

#define FIELD(name)                                                                                \
    { #name, offsetof(dt_dsat_profile, name) }
static const struct {
    const char *name;
    size_t off;
} fields[] = {
    FIELD(params),
    FIELD(trainable_params),
    FIELD(device_budget),
    FIELD(activation_per_example),
    FIELD(measured_peak),
    FIELD(optimizer_bytes_per_param),
    FIELD(activation_floor),
    FIELD(other_bytes),
    FIELD(largest_group),
    FIELD(reduce_bucket_size),
    FIELD(stage3_live_params),
    FIELD(activation_base),
    FIELD(micro_batch),
    FIELD(activation_peak),
    FIELD(activation_high_water),
    FIELD(activation_hw_per_example), /* the last two: optional (0), older profiles lack them */
    FIELD(other_per_example),
};
#define NOPTIONAL 2
#define NFIELDS (sizeof fields / sizeof *fields)

dt_metrics dt_dsat_profile_report(const dt_dsat_profile *p) {
    dt_metrics m = dt_metrics_empty();
    for (size_t i = 0; i < NFIELDS; i++) {
        int64_t v;
        memcpy(&v, (const char *)p + fields[i].off, sizeof v);
        dt_metrics_set(&m, fields[i].name, (double)v);
    }
    dt_metrics_set(&m, "slots", p->slots);
    dt_metrics_set(&m, "compute", p->compute);
    dt_metrics_set(&m, "user_stage", p->user_stage);
    return m;
}

dt_status dt_dsat_profile_from_metrics(const dt_metrics *m, dt_dsat_profile *out) {
    memset(out, 0, sizeof *out);
    double v[NFIELDS + 3];
    const char *extra[3] = {"slots", "compute", "user_stage"};
    for (size_t i = 0; i < NFIELDS + 3; i++) {
        const char *name = i < NFIELDS ? fields[i].name : extra[i - NFIELDS];
        bool optional = i < NFIELDS && i >= NFIELDS - NOPTIONAL;
        if (!dt_metrics_get(m, name, &v[i]) && optional)
            v[i] = 0;
        else if (!dt_metrics_get(m, name, &v[i]))
            return dt_error(DT_ERR_FORMAT,
                            "dsat: the profile trial's metrics lack '%s'; hint: the profile "
                            "trial must run dt_dsat_trial_run (hyperparameters.dsat.mode "
                            "\"profile\")",
                            name);
        if (i < NFIELDS) {
            int64_t x = (int64_t)v[i];
            memcpy((char *)out + fields[i].off, &x, sizeof x);
        }
    }
    out->slots = (int)v[NFIELDS];
    out->compute = (dt_dtype)(int)v[NFIELDS + 1];
    out->user_stage = (int)v[NFIELDS + 2];
    return DT_OK;
}
