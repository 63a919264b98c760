/*
 * pipe_impl.h — the communication-free parts of pipeline parallelism: the per-stage
 * instruction streams (pipe_schedule.c) and the assignment of layers to stages
 * (pipe_partition.c). The pipeline engine interprets the streams; nothing in those talks to a
 * communicator or touches a tensor. At the end: the engine's state, for its checkpoints.
 *
 * ---- Instruction streams ---------------------------------------------------------------
 *
 * A batch is `micro_batches` (M) micro-batches pushed through `stages` (S) stages. Each stage
 * gets its own flat stream of instructions and runs it in order; micro-batch m of the stage
 * lives in activation buffer slot `buf` (0 <= buf < the stage's number of buffers) from the
 * first instruction naming m until the last one. A slot holds everything the stage keeps for
 * that micro-batch: its input (loaded or received), its output, the gradient received for the
 * output and the gradient computed for the input.
 *
 * Execution model the streams are built for (and tested against):
 *   - SEND_ACT / SEND_GRAD never block: the engine posts the send (MPI_Isend-style) and goes
 *     on. The data sent stays untouched until the send completes: before an instruction writes
 *     into a slot again, the engine completes the slot's outstanding sends (MPI_Wait). The
 *     streams stay deadlock-free under this rule as well as under fully buffered sends.
 *   - RECV_ACT / RECV_GRAD block until the peer has executed the matching send (MPI_Recv).
 *     Messages between two stages of one kind arrive in the order they were sent, and the
 *     receive order of each kind equals the peer's send order, so a receive always gets the
 *     micro-batch it names.
 *   - REDUCE_TIED and REDUCE_GRADS are collectives (over the stages sharing a tied weight, and
 *     over the data-parallel group of the stage); they come after every send and receive of
 *     the batch, so they never wait on a point-to-point message of the same batch.
 * Activations flow from stage s to s+1 (SEND_ACT / RECV_ACT), gradients from s+1 to s
 * (SEND_GRAD / RECV_GRAD); `peer` names the other stage of a transfer.
 *
 * Training (1F1B, the order of DeepSpeed's TrainSchedule): stage s runs
 * w = min(S - s - 1, M) warm-up forwards, then alternates one forward and one backward while
 * forwards remain, then the remaining backwards (cool-down), then REDUCE_TIED, REDUCE_GRADS
 * and STEP. In DeepSpeed's lock-step clock, forward(m) on stage s runs at tick 2m + s and
 * backward(m) at tick 2m + 2S - 1 - s; each stream computes in that order. At most
 * min(S - s, M) micro-batches are in flight on stage s (forwarded, not yet backwarded), so
 * that is its number of buffers (DeepSpeed allocates at least 2 because its sends trail the
 * forward by one step; here a send follows its forward at once, so 1 is enough).
 *
 * Inference (eval): forwards only, in micro-batch order, each followed by its send; 2 buffers
 * per stage, so a forward can fill one slot while the previous slot's send is in flight.
 *
 * Loads: only the first stage loads inputs and only the last stage loads labels (the loss is
 * computed in the last stage's forward). A LOAD carries DT_PIPE_INPUTS and/or DT_PIPE_LABELS
 * in `load`; with one stage a single LOAD carries both (one item from the data iterator).
 */
#ifndef DT_ENGINE_PIPE_IMPL_H
#define DT_ENGINE_PIPE_IMPL_H

#include "dtrain/base.h"

#include <stdint.h>

typedef enum dt_pipe_op {
    DT_PIPE_LOAD = 0,     /* read micro-batch `micro` from the data iterator into slot `buf` */
    DT_PIPE_RECV_ACT,     /* receive the input activation of `micro` from stage `peer` */
    DT_PIPE_FORWARD,      /* forward `micro` (the last stage also computes its loss) */
    DT_PIPE_SEND_ACT,     /* post the output activation of `micro` to stage `peer` */
    DT_PIPE_RECV_GRAD,    /* receive the gradient of `micro`'s output from stage `peer` */
    DT_PIPE_BACKWARD,     /* backward `micro`, accumulating parameter gradients */
    DT_PIPE_SEND_GRAD,    /* post the gradient of `micro`'s input to stage `peer` */
    DT_PIPE_REDUCE_TIED,  /* sum the gradients of tied weights across their owning stages */
    DT_PIPE_REDUCE_GRADS, /* reduce gradients over the stage's data-parallel group */
    DT_PIPE_STEP,         /* optimizer step */
    DT_PIPE_NOPS
} dt_pipe_op;

/* Bits of dt_pipe_instr.load. */
enum { DT_PIPE_INPUTS = 1, DT_PIPE_LABELS = 2 };

typedef struct dt_pipe_instr {
    dt_pipe_op kind;
    int micro; /* micro-batch index, -1 for REDUCE_TIED / REDUCE_GRADS / STEP */
    int buf;   /* activation buffer slot, -1 where micro is -1 */
    int peer;  /* the other stage of a SEND / RECV, -1 otherwise */
    int load;  /* LOAD only: DT_PIPE_INPUTS | DT_PIPE_LABELS; 0 otherwise */
} dt_pipe_instr;

/* "load", "recv_act", ... for logs and test messages; "?" for an out-of-range value. */
const char *dt__pipe_op_name(dt_pipe_op op);

/* The training stream of stage `stage` of `stages` for `micro_batches` micro-batches.
 * On success *out is a malloc'd array of *count instructions that the caller frees with
 * free(). On error returns DT_ERR_INVALID (stages < 1, stage outside [0, stages),
 * micro_batches < 1) or DT_ERR_OOM with a message, and sets *out = NULL, *count = 0. */
dt_status dt__pipe_train_schedule(int stages, int stage, int micro_batches, dt_pipe_instr **out,
                                  int *count);

/* The inference (eval) stream; same contract as dt__pipe_train_schedule. */
dt_status dt__pipe_infer_schedule(int stages, int stage, int micro_batches, dt_pipe_instr **out,
                                  int *count);

/* Buffer slots the training stream of `stage` uses: min(stages - stage, micro_batches).
 * 0 for arguments dt__pipe_train_schedule rejects. */
int dt__pipe_num_buffers(int stages, int stage, int micro_batches);

/* Buffer slots the inference stream uses: 2 (0 for rejected arguments). */
int dt__pipe_infer_num_buffers(int stages, int stage, int micro_batches);

/* The 1F1B bubble with equal stage times: (S - 1) / (M + S - 1), the idle share of each
 * stage's time in a batch. NAN when S < 1 or M < 1. */
double dt__pipe_ideal_bubble(int stages, int micro_batches);

/* ---- Partitioning ----------------------------------------------------------------------
 *
 * Stage i owns layers [parts[i], parts[i+1]) of an ordered list of n layers; parts has
 * num_stages + 1 entries, parts[0] = 0 and parts[num_stages] = n. Methods (DeepSpeed's
 * PipelineModule partition_method; the name is matched case-insensitively):
 *   "uniform"     layer counts differ by at most one; the first n % num_stages stages get the
 *                 extra layer.
 *   "parameters"  balance the trainable parameter counts (see dt__pipe_partition_balanced).
 *   "type:REGEX"  balance the number of layers whose type name matches REGEX (POSIX extended,
 *                 case-insensitive, matching anywhere in the name); the layers in between are
 *                 placed by the same balancing with weight 0.
 */

/* Fill parts[0..num_parts] with the uniform split of n items. Needs n >= 0, num_parts >= 1;
 * when n <= num_parts, part i gets one item while items last. No errors. */
void dt__pipe_partition_uniform(int n, int num_parts, int *parts);

/* Fill parts[0..num_parts] with contiguous, non-empty parts of the n weights (n > num_parts;
 * n <= num_parts falls back to the uniform split) chosen as DeepSpeed's partition_balanced
 * does: a dynamic program over (prefix i, parts j) that keeps, for each state, the split whose
 * spread (largest part sum minus smallest part sum) is smallest, preferring the latest cut on
 * ties. Weights must be >= 0 (not checked here). Returns DT_OK or DT_ERR_OOM (parts
 * unchanged). */
dt_status dt__pipe_partition_balanced(const int64_t *weights, int n, int num_parts, int *parts);

/* Partition n_layers layers into num_stages stages with `method`. params[i] is layer i's
 * trainable parameter count (needed by "parameters", may be NULL otherwise); types[i] its type
 * name (needed by "type:", may be NULL otherwise; a NULL entry never matches). parts must hold
 * num_stages + 1 ints. Errors (message set, parts unspecified): DT_ERR_INVALID for
 * num_stages < 1, n_layers < 0, missing params / types / parts, a negative parameter count;
 * DT_ERR_CONFIG for more stages than layers, an unknown method (the message lists the valid
 * ones), an empty or malformed regex, a regex matching no layer; DT_ERR_OOM. */
dt_status dt__pipe_partition(const char *method, int n_layers, const int64_t *params,
                             const char *const *types, int num_stages, int *parts);

/* ---- The engine ------------------------------------------------------------------------
 *
 * The state of a dt_pipe_engine, shared by the engine (pipe_engine.c) and its checkpoints
 * (pipe_ckpt.c).
 */
#include "dtrain/pipe.h"

/* The default loss (pipe_gpt.c): mean cross-entropy of logits (..., C) against class ids
 * (...), -100 ignored. */
dt_tensor *dt__pipe_class_loss(dt_tensor *logits, dt_tensor *targets, void *user);

/* A tied key this stage owns: its module, the stages owning it (same data-parallel rank), and
 * whether this stage is the first owner (it alone counts the key in the gradient norm). */
typedef struct dt__pipe_tied {
    char key[48];
    dt_module *m;
    dt_comm *owners;
} dt__pipe_tied;

struct dt_pipe_engine {
    dt_comm *world, *dp, *pp;
    dt__pipe_tied *tied;
    int n_tied;
    char (*all_keys)[48]; /* every tied key of the model, in first-use order */
    int n_keys;
    bool own_world;
    int S, D, stage, dp_rank;
    int first, end;
    dt_ctx *ctx;
    dt_module *module;
    dt_engine *eng;
    dt_pipe_loss_fn loss;
    void *loss_user;
    double wait_frac;
    /* one activation arena per buffer slot of the schedule (micro-batch in flight), made on
     * first use; a slot's arena is reset when the slot takes its next micro-batch */
    dt_arena **slot_arena;
    int n_slot_arena;
};

#endif
