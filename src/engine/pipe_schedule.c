/*
 * pipe_schedule.c — per-stage instruction streams of the pipeline engine: the 1F1B training
 * schedule and the forward-only inference schedule. Pure functions of (stages, stage,
 * micro_batches); the execution model they assume is described in pipe_impl.h.
 */
#include "engine/pipe_impl.h"

#include <math.h>
#include <stdlib.h>

static const char *const op_names[DT_PIPE_NOPS] = {
    [DT_PIPE_LOAD] = "load",
    [DT_PIPE_RECV_ACT] = "recv_act",
    [DT_PIPE_FORWARD] = "forward",
    [DT_PIPE_SEND_ACT] = "send_act",
    [DT_PIPE_RECV_GRAD] = "recv_grad",
    [DT_PIPE_BACKWARD] = "backward",
    [DT_PIPE_SEND_GRAD] = "send_grad",
    [DT_PIPE_REDUCE_TIED] = "reduce_tied",
    [DT_PIPE_REDUCE_GRADS] = "reduce_grads",
    [DT_PIPE_STEP] = "step",
};

const char *dt__pipe_op_name(dt_pipe_op op) {
    return (op >= 0 && op < DT_PIPE_NOPS) ? op_names[op] : "?";
}

static dt_status check_args(const char *fn, int stages, int stage, int micro_batches) {
    if (stages < 1)
        return dt_error(DT_ERR_INVALID,
                        "%s: stages must be >= 1 (got %d); hint: set the pipeline module's "
                        "num_stages to a positive number",
                        fn, stages);
    if (stage < 0 || stage >= stages)
        return dt_error(DT_ERR_INVALID, "%s: stage %d is out of range [0, %d)", fn, stage, stages);
    if (micro_batches < 1)
        return dt_error(DT_ERR_INVALID,
                        "%s: micro_batches must be >= 1 (got %d); hint: the pipeline runs "
                        "gradient_accumulation_steps micro-batches per batch",
                        fn, micro_batches);
    return DT_OK;
}

int dt__pipe_num_buffers(int stages, int stage, int micro_batches) {
    if (stages < 1 || stage < 0 || stage >= stages || micro_batches < 1) return 0;
    int in_flight = stages - stage;
    return in_flight < micro_batches ? in_flight : micro_batches;
}

int dt__pipe_infer_num_buffers(int stages, int stage, int micro_batches) {
    if (stages < 1 || stage < 0 || stage >= stages || micro_batches < 1) return 0;
    return 2;
}

double dt__pipe_ideal_bubble(int stages, int micro_batches) {
    if (stages < 1 || micro_batches < 1) return NAN;
    return (double)(stages - 1) / (double)(micro_batches + stages - 1);
}

/* A stream under construction: `ops` has room for every instruction (sized up front). */
typedef struct stream {
    dt_pipe_instr *ops;
    int n;
    int stage, last; /* last = stages - 1 */
    int nbuf;
} stream;

static void emit(stream *st, dt_pipe_op kind, int micro, int peer, int load) {
    dt_pipe_instr *in = &st->ops[st->n++];
    in->kind = kind;
    in->micro = micro;
    in->buf = micro >= 0 ? micro % st->nbuf : -1;
    in->peer = peer;
    in->load = load;
}

/* Receive or load micro-batch m, forward it, pass its output on. */
static void emit_forward(stream *st, int m) {
    if (st->stage > 0) emit(st, DT_PIPE_RECV_ACT, m, st->stage - 1, 0);
    int load = (st->stage == 0 ? DT_PIPE_INPUTS : 0) | (st->stage == st->last ? DT_PIPE_LABELS : 0);
    if (load) emit(st, DT_PIPE_LOAD, m, -1, load);
    emit(st, DT_PIPE_FORWARD, m, -1, 0);
    if (st->stage < st->last) emit(st, DT_PIPE_SEND_ACT, m, st->stage + 1, 0);
}

static void emit_backward(stream *st, int m) {
    if (st->stage < st->last) emit(st, DT_PIPE_RECV_GRAD, m, st->stage + 1, 0);
    emit(st, DT_PIPE_BACKWARD, m, -1, 0);
    if (st->stage > 0) emit(st, DT_PIPE_SEND_GRAD, m, st->stage - 1, 0);
}

static dt_status alloc_stream(stream *st, int cap, dt_pipe_instr **out, int *count) {
    st->ops = malloc((size_t)cap * sizeof *st->ops);
    if (!st->ops) {
        *out = NULL;
        *count = 0;
        return dt_error(DT_ERR_OOM, "pipeline schedule: out of memory for %d instructions", cap);
    }
    st->n = 0;
    return DT_OK;
}

dt_status dt__pipe_train_schedule(int stages, int stage, int micro_batches, dt_pipe_instr **out,
                                  int *count) {
    *out = NULL;
    *count = 0;
    dt_status rc = check_args("dt__pipe_train_schedule", stages, stage, micro_batches);
    if (rc) return rc;
    const int M = micro_batches;
    stream st = {.stage = stage,
                 .last = stages - 1,
                 .nbuf = dt__pipe_num_buffers(stages, stage, micro_batches)};
    /* per micro-batch: at most 4 forward-side + 3 backward-side instructions; 3 at the end */
    rc = alloc_stream(&st, 7 * M + 3, out, count);
    if (rc) return rc;

    /* warm-up: fill the pipe below this stage; then one forward, one backward (1F1B) while
     * forwards remain; then drain the backwards */
    int warm = stages - stage - 1 < M ? stages - stage - 1 : M;
    int f = 0, b = 0;
    for (; f < warm; f++) emit_forward(&st, f);
    for (; f < M; f++, b++) {
        emit_forward(&st, f);
        emit_backward(&st, b);
    }
    for (; b < M; b++) emit_backward(&st, b);

    emit(&st, DT_PIPE_REDUCE_TIED, -1, -1, 0);
    emit(&st, DT_PIPE_REDUCE_GRADS, -1, -1, 0);
    emit(&st, DT_PIPE_STEP, -1, -1, 0);
    *out = st.ops;
    *count = st.n;
    return DT_OK;
}

dt_status dt__pipe_infer_schedule(int stages, int stage, int micro_batches, dt_pipe_instr **out,
                                  int *count) {
    *out = NULL;
    *count = 0;
    dt_status rc = check_args("dt__pipe_infer_schedule", stages, stage, micro_batches);
    if (rc) return rc;
    stream st = {.stage = stage,
                 .last = stages - 1,
                 .nbuf = dt__pipe_infer_num_buffers(stages, stage, micro_batches)};
    rc = alloc_stream(&st, 4 * micro_batches, out, count);
    if (rc) return rc;
    for (int m = 0; m < micro_batches; m++) emit_forward(&st, m);
    *out = st.ops;
    *count = st.n;
    return DT_OK;
}
