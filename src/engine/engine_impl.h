/*
 * engine_impl.h — internals of the engine shared by engine.c (the API, micro-step and boundary
 * logic), zero*.c (partitions, buckets, gathers, the partitioned optimizer step) and
 * engine_ckpt.c (checkpoints).
 *
 * Flat coordinates: the module's flat buffer has n elements (nn's layout, 64-byte aligned
 * slots). The engine pads it to npad = W * block (block a multiple of 16); rank r owns
 * [r*block, (r+1)*block). Everything partitioned — master weights, optimizer state, the
 * accumulated gradient at stage >= 2, the parameter shard at stage 3 — is one block of these
 * coordinates, which is also how checkpoints store them (so another W re-slices them).
 *
 * A "group" is one module's own parameters (not its children's): a contiguous range [a, b) of
 * the flat buffer. Groups are the unit of ZeRO-3 gathers and of ZeRO-2/3 gradient reduction.
 */
#ifndef DT_ENGINE_IMPL_H
#define DT_ENGINE_IMPL_H

#include "dtrain/engine.h"
#include "engine/swap.h"

typedef struct dt_engine_group {
    dt_module *m;
    int64_t a, b;    /* flat range of the module's own parameters */
    int fwd_live;    /* forward calls whose backward has not finished yet */
    int gathered;    /* stage 3: users of the gathered parameters (forward, backward) */
    bool resident;   /* stage 3: its parameters are in the window (gathered or prefetched) */
    bool persistent; /* stage 3: numel below the persistence threshold: always gathered */
    bool reduced;    /* stage >= 2: this micro-step's gradients reduced to their owners */
    bool grads_live; /* stage >= 2: its gradient range is charged and may hold values */
    dt_module_hook old_pre, old_post; /* the hooks the module had before the engine */
    void *old_user;
} dt_engine_group;

struct dt_engine {
    dt_ds_config cfg;
    int stage;
    dt_module *model;
    dt_ctx *ctx;
    dt_device *dev;  /* the model's device (compute) */
    dt_device *host; /* offloaded state (cpu offload) */
    dt_comm *comm;
    bool own_comm;
    dt_comm *mp_comm; /* pipeline: the stages of this data-parallel slice (global norm, overflow) */
    bool pipe_stage;  /* a pipeline stage's engine: forward / backward / step only from the
                       * pipeline engine (pipe_busy), never directly */
    bool pipe_busy;
    /* pipeline: flat ranges left out of the gradient norm (tied copies counted elsewhere) */
#define DT_ENGINE_MAX_NORM_SKIP 8
    int64_t norm_skip[DT_ENGINE_MAX_NORM_SKIP][2];
    int n_norm_skip;
    int W, rank;

    int64_t n, npad, block, lo; /* lo = rank * block */
    /* full flat buffers (npad floats each, page-aligned mappings). Stage 0-2: params resident,
     * charged PARAMS by the engine. Stage 3: params is a window, only gathered groups are
     * populated and charged. Stage 0-1: grads resident (GRADS). Stage 2-3: grads is a window:
     * groups' ranges live from their backward until reduced. */
    float *params, *grads;
    size_t map_bytes;
    float *master; /* stage >= 1: fp32 master shard (block), OPTIM (host with cpu offload) */
    float *gacc;   /* stage >= 2: accumulated gradient shard (block), GRADS (or host) */
    float *pshard; /* stage 3: parameter shard (block), PARAMS (or host) */
    /* "deterministic" at stage 0-1 with gradient accumulation: the micro-batches' reduced
     * gradients, accumulated (GRADS), flat coordinates [dacc_lo, dacc_lo + dacc_n): the whole
     * buffer (stage 0, pipeline stages) or the owned block (stage 1). Made at first use. */
    float *dacc;
    int64_t dacc_lo, dacc_n;
    dt_swap *nv_master, *nv_m, *nv_v; /* nvme optimizer offload: master and the moments */
    dt_swap *nv_param;                /* nvme parameter offload (stage 3) */
    float *nv_bufs[8];                /* streaming buffers (double-buffered chunks) */
    int64_t nv_chunk;
    int64_t live_grad_elems, live_param_elems;

    dt_optimizer *opt;      /* over the whole buffer (stage 0) or one block (>= 1; a chunk: nvme) */
    dt_optimizer *opt_tail; /* nvme: the last, shorter chunk of the block */
    int n_opt_states;       /* moments the optimiser keeps (0 SGD w/o momentum, 1, 2) */
    int64_t opt_steps;      /* optimiser steps taken (nvme runs chunk by chunk) */
    dt_lr_schedule *sched;
    dt_loss_scaler *scaler; /* fp16 only */

    dt_engine_group *groups;
    int n_groups;
    /* stage >= 2: groups whose gradients are final this micro-step, waiting in the bucket */
    int *bucket;
    int n_bucket;
    int64_t bucket_elems;
    float *pack; /* COMM: packed bucket for reduce_scatterv, pack_cap floats */
    int64_t pack_cap;

    int64_t micro_steps, global_steps, skipped_steps, global_samples;
    float last_grad_norm;
    struct dt_engine_profile *profile; /* flops_profiler: active during its profile step */
    dt_status mark_err; /* first error inside backward marks (reported by dt_engine_backward) */
    char mark_msg[512];
    dt_engine_timers t;
};

/* ---- engine.c, for the pipeline engine ---- */
/* Backward from `out` with the given output gradient, without the 1/gradient_accumulation_steps
 * and loss-scale factors (a later stage's gradient already carries them). */
dt_status dt__engine_backward_from(dt_engine *e, dt_tensor *out, const dt_tensor *grad);
/* End of a global batch of `micro_batches` micro-batches run outside dt_engine_step: the
 * boundary step (reduce, overflow check, clip, update, schedule), counters, context reset. */
dt_status dt__engine_boundary(dt_engine *e, int64_t micro_batches);

/* ---- engine_ckpt.c, shared with the pipeline's checkpoints (pipe_ckpt.c) ---- */
/* *out = tag, or "global_step<steps>" formatted into buf[0 .. n) when tag is NULL.
 * DT_ERR_INVALID (message set, *out still set) when it is not one path component. */
dt_status dt__ckpt_tag(const char *tag, int64_t steps, char *buf, size_t n, const char **out);
/* out[0 .. cap) = DIR/TAG, the tag checked as above and the directory with dt_path_within (no
 * symbolic link: a tag's directory is the checkpoint's own). DT_ERR_INVALID with the message. */
dt_status dt__ckpt_tag_dir(const char *dir, const char *tag, char *out, size_t cap);
/* The tag stored in DIR/latest, trailing newlines and spaces cut. DT_ERR_IO (no file, with a
 * hint to pass the tag) or DT_ERR_FORMAT (empty, or not one path component). */
dt_status dt__ckpt_read_latest(const char *dir, char *tag, size_t n);
/* DIR/latest = tag, durably (dt_file_write_atomic). */
dt_status dt__ckpt_write_latest(const char *dir, const char *tag);
/* j encoded with json_dumps flags, written durably to path. DT_ERR_OOM (j NULL or not
 * encodable) or DT_ERR_IO; the old file stays as it was on error. */
dt_status dt__ckpt_write_json(const char *path, const json_t *j, size_t flags);

/* ---- flops_profiler.c ---- */
/* Measure every module's forward from now on (the profile step starts). */
dt_status dt__profiler_begin(dt_engine *e);
/* Print the report (rank 0, when `print`) and take the measurement out of the modules.
 * Nothing happens when no profile step is running. */
void dt__profiler_end(dt_engine *e, bool print);

/* ---- zero*.c (zero_impl.h names the files) ---- */
/* Partition the flat buffer, allocate the stage's buffers and install the module hooks. */
dt_status dt__zero_setup(dt_engine *e);
void dt__zero_teardown(dt_engine *e);
/* After dt_backward: reduce every group not reduced yet and flush the bucket (stage >= 2). */
dt_status dt__zero_after_backward(dt_engine *e);
/* Boundary: make this rank's reduced gradient available; *g points at the block's gradient
 * (stage >= 1) or the full buffer (stage 0), *gn its length. */
dt_status dt__zero_reduce(dt_engine *e, float **g, int64_t *gn);
/* The optimiser update of the owned range with gradient g, then the parameters every rank
 * needs for the next forward (allgather at stage 1-2; the shard at stage 3). */
dt_status dt__zero_update(dt_engine *e, float *g, int64_t gn);
/* Make the owned block's new weights visible for the next forward (allgather at stage 1-2,
 * persistent groups at stage 3). */
dt_status dt__zero_publish(dt_engine *e);
/* Zero the gradients after a boundary (or a skipped step). */
void dt__zero_clear_grads(dt_engine *e);
/* Deterministic sum of squares over all ranks of g (this rank's gradient of length gn). With
 * "deterministic" the additions do not depend on the ZeRO stage or the world size either. */
dt_status dt__zero_global_sumsq(dt_engine *e, const float *g, int64_t gn, double *out);
/* Where the gradient at `grad` (a pointer into the gradient window, e.g. a tied module's) is
 * accumulated when the boundary comes: `grad` itself, or its place in the deterministic
 * accumulator. */
float *dt__zero_accumulated(dt_engine *e, float *grad);
/* Stage 3: gather every parameter into the window (checkpoints, engine free); release. */
dt_status dt__zero_gather_all(dt_engine *e);
void dt__zero_release_all(dt_engine *e);
/* The owned partition's master weights and optimiser state through a callback, chunk by chunk
 * (nvme streams; memory buffers come in one piece). ptrs: master, then the optimiser states. */
typedef dt_status (*dt__zero_state_fn)(void *user, int64_t off, int64_t len, float *const *ptrs,
                                       int nptrs);
dt_status dt__zero_visit_state(dt_engine *e, dt__zero_state_fn fn, void *user, bool write);

#endif
