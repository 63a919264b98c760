/*
 * test_pipe_schedule.c — pipeline instruction streams (src/engine/pipe_schedule.c).
 *
 * For every (stages, micro-batches) in 1..6 x 1..12 the streams of all stages are run by an
 * interpreter with one FIFO queue per (source, destination, kind) under the execution model of
 * pipe_impl.h (sends never block, a receive waits for its send, REDUCE_TIED is a collective
 * of all stages). The interpreter picks the next stage in several orders (round-robin one
 * instruction at a time, reversed, run-until-blocked, pseudo-random) and also runs a strict
 * variant in which a send stays outstanding until its receive ran and a slot with an
 * outstanding send cannot be taken by another micro-batch. Every run must finish, and on the
 * way it checks:
 *   - every send has exactly one receive of the same kind and micro-batch (nothing left over);
 *   - forward(m) after recv_act(m) (stage > 0) and after loading inputs (first stage) /
 *     labels (last stage); backward(m) after forward(m) and recv_grad(m) (stage < last);
 *     sends after the computation that produced their data;
 *   - each micro-batch is loaded, received, forwarded, backwarded and sent exactly once per
 *     stage; reduce_tied, reduce_grads, step exactly once, last, in that order;
 *   - a slot belongs to one micro-batch from its first instruction to its last (so never while
 *     it is live elsewhere), slots are < the stage's number of buffers, and the number of live
 *     micro-batches never exceeds dt__pipe_num_buffers (and reaches it);
 *   - peers, load flags and the -1 conventions.
 * The training streams are also checked against DeepSpeed's TrainSchedule order: in its
 * lock-step clock stage s runs forward(m) at tick 2m + s and backward(m) at tick
 * 2m + 2S - 1 - s (derived from its step-to-micro-batch mapping), so each stage's computations
 * must come in the order of those ticks; a few streams are written out in full. With unit-time
 * computations and instant transfers the streams finish in 2(M + S - 1) ticks, which is the
 * ideal bubble (S - 1) / (M + S - 1) of dt__pipe_ideal_bubble.
 */
#include "engine/pipe_impl.h"
#include "test.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_S 6
#define MAX_M 12

enum { K_ACT = 0, K_GRAD = 1 };

/* ---- rendering --------------------------------------------------------------------------- */

static void render(const dt_pipe_instr *ops, int n, int compute_only, char *out, size_t cap) {
    static const char *const tok[DT_PIPE_NOPS] = {"L", "RA", "F",    "SA",     "RG",
                                                  "B", "SG", "TIED", "REDUCE", "STEP"};
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        dt_pipe_op k = ops[i].kind;
        if (compute_only && k != DT_PIPE_FORWARD && k != DT_PIPE_BACKWARD) continue;
        char one[32];
        if (ops[i].micro >= 0)
            snprintf(one, sizeof one, "%s%s%d", len ? " " : "", tok[k], ops[i].micro);
        else
            snprintf(one, sizeof one, "%s%s", len ? " " : "", tok[k]);
        size_t l = strlen(one);
        if (len + l + 1 > cap) break;
        memcpy(out + len, one, l + 1);
        len += l;
    }
}

/* ---- the interpreter --------------------------------------------------------------------- */

typedef struct fifo {
    int micro[MAX_M], buf[MAX_M]; /* the message's micro-batch and the sender's slot */
    int head, tail;
} fifo;

typedef struct sim_stage {
    dt_pipe_instr *ops;
    int n, pc, nbuf;
    int last_use[MAX_M]; /* index of the last instruction naming m */
    int owner[MAX_M];    /* slot -> live micro-batch or -1 */
    int live, max_live;
    int n_load[MAX_M], n_ra[MAX_M], n_f[MAX_M], n_sa[MAX_M], n_rg[MAX_M], n_b[MAX_M], n_sg[MAX_M];
    int n_tail[3];
    int at_barrier;
    int pending[MAX_M]; /* strict: sends outstanding from each slot */
} sim_stage;

typedef struct sim {
    int S, M, train, strict;
    sim_stage st[MAX_S];
    fifo q[MAX_S][MAX_S][2];
    int arrived; /* stages that reached REDUCE_TIED */
    int errors;
    int quiet; /* count errors in `errors` only (for streams broken on purpose) */
} sim;

/* Count a failure of the instruction at `pc` of stage s, with its context. */
__attribute__((format(printf, 4, 5))) static void sim_fail(sim *sm, int s, int pc, const char *fmt,
                                                           ...) {
    const dt_pipe_instr *in = &sm->st[s].ops[pc];
    sm->errors++;
    if (sm->quiet) return;
    t_fail++;
    fprintf(stderr, "%s S=%d M=%d stage %d pc %d (%s %d): ", sm->train ? "train" : "infer", sm->S,
            sm->M, s, pc, dt__pipe_op_name(in->kind), in->micro);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static int sim_init(sim *sm, int S, int M, int train, int strict) {
    memset(sm, 0, sizeof *sm);
    sm->S = S;
    sm->M = M;
    sm->train = train;
    sm->strict = strict;
    for (int s = 0; s < S; s++) {
        sim_stage *st = &sm->st[s];
        dt_status rc = train ? dt__pipe_train_schedule(S, s, M, &st->ops, &st->n)
                             : dt__pipe_infer_schedule(S, s, M, &st->ops, &st->n);
        if (rc != DT_OK) {
            CHECK_MSG(0, "S=%d M=%d s=%d: schedule failed: %s", S, M, s, dt_last_error());
            return -1;
        }
        st->nbuf = train ? dt__pipe_num_buffers(S, s, M) : dt__pipe_infer_num_buffers(S, s, M);
        for (int m = 0; m < MAX_M; m++) st->last_use[m] = -1;
        for (int k = 0; k < MAX_M; k++) st->owner[k] = -1;
        for (int i = 0; i < st->n; i++) {
            int m = st->ops[i].micro;
            if (m >= 0 && m < M) st->last_use[m] = i;
        }
    }
    return 0;
}

static void sim_free(sim *sm) {
    for (int s = 0; s < sm->S; s++) free(sm->st[s].ops);
}

/* Whether stage s can execute its next instruction now. */
static int can_run(sim *sm, int s) {
    sim_stage *st = &sm->st[s];
    if (st->pc >= st->n) return 0;
    const dt_pipe_instr *in = &st->ops[st->pc];
    if (in->kind == DT_PIPE_RECV_ACT || in->kind == DT_PIPE_RECV_GRAD) {
        if (in->peer < 0 || in->peer >= sm->S) return 1; /* reported when executed */
        int kind = in->kind == DT_PIPE_RECV_ACT ? K_ACT : K_GRAD;
        fifo *f = &sm->q[in->peer][s][kind];
        if (f->head == f->tail) return 0;
    }
    if (in->kind == DT_PIPE_REDUCE_TIED) {
        if (!st->at_barrier) {
            st->at_barrier = 1;
            sm->arrived++;
        }
        if (sm->arrived < sm->S) return 0;
    }
    if (sm->strict && in->micro >= 0 && in->buf >= 0 && in->buf < st->nbuf) {
        int k = in->buf;
        if (st->owner[k] != in->micro && st->pending[k] > 0) return 0;
    }
    return 1;
}

/* Execute stage s's next instruction, checking it. */
static void step(sim *sm, int s) {
    sim_stage *st = &sm->st[s];
    const int S = sm->S, M = sm->M, last = S - 1;
    const int pc = st->pc++;
    const dt_pipe_instr *in = &st->ops[pc];
    const int m = in->micro;

    int is_tail = in->kind == DT_PIPE_REDUCE_TIED || in->kind == DT_PIPE_REDUCE_GRADS ||
                  in->kind == DT_PIPE_STEP;
    if (is_tail) {
        if (!sm->train) sim_fail(sm, s, pc, "unexpected");
        if (m != -1 || in->buf != -1 || in->peer != -1) sim_fail(sm, s, pc, "unexpected");
        int t = in->kind - DT_PIPE_REDUCE_TIED;
        st->n_tail[t]++;
        /* in order, after every micro-batch */
        for (int u = 0; u < t; u++)
            if (st->n_tail[u] != 1) sim_fail(sm, s, pc, "unexpected");
        for (int mm = 0; mm < M; mm++)
            if (st->last_use[mm] > pc) sim_fail(sm, s, pc, "unexpected");
        return;
    }
    if (m < 0 || m >= M) {
        sim_fail(sm, s, pc, "unexpected");
        return;
    }
    if (in->kind != DT_PIPE_LOAD && in->load != 0) sim_fail(sm, s, pc, "unexpected");

    /* slot ownership */
    int k = in->buf;
    if (k < 0 || k >= st->nbuf) {
        sim_fail(sm, s, pc, "slot %d outside [0, %d)", k, st->nbuf);
        return;
    }
    if (st->owner[k] == -1) {
        int taken = 0;
        for (int u = 0; u < st->nbuf; u++) taken |= st->owner[u] == m;
        if (taken) sim_fail(sm, s, pc, "micro-batch in two slots");
        st->owner[k] = m;
        st->live++;
        if (st->live > st->max_live) st->max_live = st->live;
        if (st->live > st->nbuf) sim_fail(sm, s, pc, "%d live > %d buffers", st->live, st->nbuf);
    } else if (st->owner[k] != m) {
        sim_fail(sm, s, pc, "slot %d still holds micro-batch %d", k, st->owner[k]);
    }

    switch (in->kind) {
    case DT_PIPE_LOAD: {
        int want = (s == 0 ? DT_PIPE_INPUTS : 0) | (s == last ? DT_PIPE_LABELS : 0);
        if (in->load != want || in->peer != -1) sim_fail(sm, s, pc, "load flags %d", in->load);
        if (st->n_f[m]) sim_fail(sm, s, pc, "load after forward");
        st->n_load[m]++;
        break;
    }
    case DT_PIPE_RECV_ACT:
    case DT_PIPE_RECV_GRAD: {
        int act = in->kind == DT_PIPE_RECV_ACT;
        int want_peer = act ? s - 1 : s + 1;
        if (in->peer != want_peer || want_peer < 0 || want_peer > last) {
            sim_fail(sm, s, pc, "peer %d", in->peer);
            break;
        }
        if (!act && !sm->train) sim_fail(sm, s, pc, "unexpected");
        fifo *f = &sm->q[in->peer][s][act ? K_ACT : K_GRAD];
        int got = f->micro[f->head], src_buf = f->buf[f->head];
        f->head++;
        if (got != m) sim_fail(sm, s, pc, "received micro-batch %d", got);
        if (sm->strict) sm->st[in->peer].pending[src_buf]--; /* the peer's send completes */
        if (act) {
            if (st->n_f[m]) sim_fail(sm, s, pc, "recv_act after forward");
            st->n_ra[m]++;
        } else {
            if (!st->n_f[m] || st->n_b[m]) sim_fail(sm, s, pc, "recv_grad out of order");
            st->n_rg[m]++;
        }
        break;
    }
    case DT_PIPE_SEND_ACT:
    case DT_PIPE_SEND_GRAD: {
        int act = in->kind == DT_PIPE_SEND_ACT;
        int want_peer = act ? s + 1 : s - 1;
        if (in->peer != want_peer || want_peer < 0 || want_peer > last) {
            sim_fail(sm, s, pc, "peer %d", in->peer);
            break;
        }
        if (!act && !sm->train) sim_fail(sm, s, pc, "unexpected");
        if (act ? !st->n_f[m] : !st->n_b[m]) sim_fail(sm, s, pc, "send before its data");
        fifo *f = &sm->q[s][in->peer][act ? K_ACT : K_GRAD];
        if (f->tail >= MAX_M) {
            sim_fail(sm, s, pc, "too many sends");
            break;
        }
        f->micro[f->tail] = m;
        f->buf[f->tail] = k;
        f->tail++;
        (act ? st->n_sa : st->n_sg)[m]++;
        if (sm->strict) st->pending[k]++;
        break;
    }
    case DT_PIPE_FORWARD:
        if (in->peer != -1) sim_fail(sm, s, pc, "unexpected");
        if (s > 0 && !st->n_ra[m]) sim_fail(sm, s, pc, "forward before recv_act");
        if ((s == 0 || s == last) && !st->n_load[m]) sim_fail(sm, s, pc, "forward before load");
        st->n_f[m]++;
        break;
    case DT_PIPE_BACKWARD:
        if (in->peer != -1 || !sm->train) sim_fail(sm, s, pc, "unexpected");
        if (!st->n_f[m]) sim_fail(sm, s, pc, "backward before forward");
        if (s < last && !st->n_rg[m]) sim_fail(sm, s, pc, "backward before recv_grad");
        st->n_b[m]++;
        break;
    default:
        sim_fail(sm, s, pc, "unknown op");
        break;
    }

    if (pc == st->last_use[m]) { /* the slot is free again */
        st->owner[k] = -1;
        st->live--;
    }
}

enum { POL_ROUND_ROBIN, POL_REVERSE, POL_UNTIL_BLOCKED, POL_RANDOM, POL_N };

/* Run to the end; returns 1 when every stream finished. */
static int sim_run(sim *sm, int policy) {
    const int S = sm->S;
    uint32_t rng = 12345u + (uint32_t)(S * 131 + sm->M);
    for (;;) {
        int done = 1, progressed = 0;
        for (int s = 0; s < S; s++) done &= sm->st[s].pc >= sm->st[s].n;
        if (done) return 1;
        for (int i = 0; i < S; i++) {
            int s = policy == POL_REVERSE ? S - 1 - i : i;
            if (policy == POL_RANDOM) {
                rng = rng * 1664525u + 1013904223u;
                s = (int)((rng >> 16) % (uint32_t)S);
            }
            if (policy == POL_UNTIL_BLOCKED) {
                while (can_run(sm, s)) {
                    step(sm, s);
                    progressed = 1;
                }
            } else if (can_run(sm, s)) {
                step(sm, s);
                progressed = 1;
            }
            if (sm->errors > 20) return 0;
        }
        if (!progressed && policy == POL_RANDOM) { /* random picks may miss: try everyone */
            for (int s = 0; s < S && !progressed; s++) {
                if (can_run(sm, s)) {
                    step(sm, s);
                    progressed = 1;
                }
            }
        }
        if (!progressed) return 0;
    }
}

static void sim_final_checks(sim *sm, const char *what) {
    const int S = sm->S, M = sm->M, last = S - 1;
    for (int a = 0; a < S; a++)
        for (int b = 0; b < S; b++)
            for (int k = 0; k < 2; k++)
                CHECK_MSG(sm->q[a][b][k].head == sm->q[a][b][k].tail,
                          "%s S=%d M=%d: unreceived messages %d->%d kind %d", what, S, M, a, b, k);
    for (int s = 0; s < S; s++) {
        sim_stage *st = &sm->st[s];
        int ok = 1;
        for (int m = 0; m < M; m++) {
            ok &= st->n_f[m] == 1;
            ok &= st->n_load[m] == ((s == 0 || s == last) ? 1 : 0);
            ok &= st->n_ra[m] == (s > 0);
            ok &= st->n_sa[m] == (s < last);
            ok &= st->n_b[m] == (sm->train ? 1 : 0);
            ok &= st->n_rg[m] == (sm->train && s < last);
            ok &= st->n_sg[m] == (sm->train && s > 0);
        }
        for (int t = 0; t < 3; t++) ok &= st->n_tail[t] == (sm->train ? 1 : 0);
        if (sm->train) {
            ok &= st->n >= 3 && st->ops[st->n - 3].kind == DT_PIPE_REDUCE_TIED &&
                  st->ops[st->n - 2].kind == DT_PIPE_REDUCE_GRADS &&
                  st->ops[st->n - 1].kind == DT_PIPE_STEP;
        }
        CHECK_MSG(ok, "%s S=%d M=%d stage %d: wrong instruction counts", what, S, M, s);
        CHECK_MSG(st->live == 0, "%s S=%d M=%d stage %d: %d slots still live", what, S, M, s,
                  st->live);
        /* training reaches the bound (the buffers are not oversized); inference keeps one
         * micro-batch live at a time, the second slot covers its send in flight */
        int want_max = sm->train ? st->nbuf : 1;
        CHECK_MSG(st->max_live == want_max, "%s S=%d M=%d stage %d: max live %d, want %d", what, S,
                  M, s, st->max_live, want_max);
        for (int k = 0; k < st->nbuf; k++)
            CHECK_MSG(st->pending[k] == 0,
                      "%s S=%d M=%d stage %d: slot %d has %d sends "
                      "outstanding",
                      what, S, M, s, k, st->pending[k]);
    }
}

static void test_simulate_all(void) {
    static const char *const pol_names[POL_N] = {"round-robin", "reverse", "until-blocked",
                                                 "random"};
    int runs = 0, finished = 0;
    for (int train = 1; train >= 0; train--)
        for (int strict = 0; strict <= 1; strict++)
            for (int S = 1; S <= MAX_S; S++)
                for (int M = 1; M <= MAX_M; M++)
                    for (int pol = 0; pol < POL_N; pol++) {
                        sim sm;
                        if (sim_init(&sm, S, M, train, strict) != 0) {
                            sim_free(&sm);
                            continue;
                        }
                        char what[96];
                        snprintf(what, sizeof what, "%s %s %s", train ? "train" : "infer",
                                 strict ? "strict" : "buffered", pol_names[pol]);
                        int ok = sim_run(&sm, pol);
                        runs++;
                        finished += ok;
                        CHECK_MSG(ok, "%s S=%d M=%d: deadlock or too many errors", what, S, M);
                        if (ok) sim_final_checks(&sm, what);
                        sim_free(&sm);
                    }
    CHECK(runs == 2 * 2 * MAX_S * MAX_M * POL_N);
    CHECK(finished == runs);
}

/* A broken stream must be caught: a stage that receives micro-batches out of order, and a
 * pair of stages that both receive before they send, deadlock or fail in the interpreter. */
static void test_interpreter_catches_errors(void) {
    sim sm;
    CHECK(sim_init(&sm, 2, 2, 1, 0) == 0);
    sm.quiet = 1;
    /* stage 1 receives the activations' micro-batches in the wrong order */
    for (int i = 0; i < sm.st[1].n; i++)
        if (sm.st[1].ops[i].kind == DT_PIPE_RECV_ACT) sm.st[1].ops[i].micro ^= 1;
    int ok = sim_run(&sm, POL_ROUND_ROBIN);
    CHECK_MSG(!ok || sm.errors > 0, "out-of-order receive not detected");
    sim_free(&sm);

    /* stage 0 waits for the gradient before sending the activation: a deadlock */
    CHECK(sim_init(&sm, 2, 1, 1, 0) == 0);
    sm.quiet = 1;
    dt_pipe_instr *o = sm.st[0].ops;
    int isend = -1, irecv = -1;
    for (int i = 0; i < sm.st[0].n; i++) {
        if (o[i].kind == DT_PIPE_SEND_ACT) isend = i;
        if (o[i].kind == DT_PIPE_RECV_GRAD) irecv = i;
    }
    CHECK(isend >= 0 && irecv > isend);
    dt_pipe_instr t = o[isend];
    o[isend] = o[irecv];
    o[irecv] = t;
    CHECK_MSG(!sim_run(&sm, POL_ROUND_ROBIN), "deadlock not detected");
    sim_free(&sm);

    /* one buffer too few on stage 0 of 3 (3 in flight): a live slot is taken */
    CHECK(sim_init(&sm, 3, 4, 1, 0) == 0);
    sm.quiet = 1;
    sm.st[0].nbuf = 2;
    for (int i = 0; i < sm.st[0].n; i++)
        if (sm.st[0].ops[i].micro >= 0) sm.st[0].ops[i].buf = sm.st[0].ops[i].micro % 2;
    ok = sim_run(&sm, POL_ROUND_ROBIN);
    CHECK_MSG(!ok || sm.errors > 0, "slot reuse while live not detected");
    sim_free(&sm);

    /* stage 0 runs a backward before receiving its gradient */
    CHECK(sim_init(&sm, 2, 2, 1, 0) == 0);
    sm.quiet = 1;
    o = sm.st[0].ops;
    for (int i = 0; i + 1 < sm.st[0].n; i++)
        if (o[i].kind == DT_PIPE_RECV_GRAD && o[i + 1].kind == DT_PIPE_BACKWARD) {
            t = o[i];
            o[i] = o[i + 1];
            o[i + 1] = t;
            break;
        }
    ok = sim_run(&sm, POL_ROUND_ROBIN);
    CHECK_MSG(!ok || sm.errors > 0, "backward before recv_grad not detected");
    sim_free(&sm);
}

/* ---- DeepSpeed's order and explicit shapes ---------------------------------------------- */

static void test_lockstep_order(void) {
    int mismatches = 0;
    for (int S = 1; S <= MAX_S; S++)
        for (int M = 1; M <= MAX_M; M++)
            for (int s = 0; s < S; s++) {
                dt_pipe_instr *ops;
                int n;
                if (dt__pipe_train_schedule(S, s, M, &ops, &n) != DT_OK) {
                    mismatches++;
                    continue;
                }
                /* expected: F(m) at 2m + s, B(m) at 2m + 2S - 1 - s, sorted by tick */
                dt_pipe_op exp_kind[2 * MAX_M];
                int exp_m[2 * MAX_M], ne = 0;
                for (int tick = 0; tick < 2 * (M + S - 1); tick++) {
                    if ((tick - s) % 2 == 0 && (tick - s) / 2 >= 0 && (tick - s) / 2 < M) {
                        exp_kind[ne] = DT_PIPE_FORWARD;
                        exp_m[ne++] = (tick - s) / 2;
                    }
                    int bt = tick - (2 * S - 1 - s);
                    if (bt >= 0 && bt % 2 == 0 && bt / 2 < M) {
                        exp_kind[ne] = DT_PIPE_BACKWARD;
                        exp_m[ne++] = bt / 2;
                    }
                }
                int j = 0, bad = ne != 2 * M;
                for (int i = 0; i < n && !bad; i++) {
                    if (ops[i].kind != DT_PIPE_FORWARD && ops[i].kind != DT_PIPE_BACKWARD) continue;
                    if (j >= ne || ops[i].kind != exp_kind[j] || ops[i].micro != exp_m[j]) bad = 1;
                    j++;
                }
                bad |= j != ne;
                if (bad) {
                    char got[512];
                    render(ops, n, 1, got, sizeof got);
                    CHECK_MSG(0, "S=%d M=%d stage %d: not DeepSpeed's order: %s", S, M, s, got);
                    mismatches++;
                }
                /* warm-up length */
                int warm = 0;
                for (int i = 0; i < n && ops[i].kind != DT_PIPE_BACKWARD; i++)
                    warm += ops[i].kind == DT_PIPE_FORWARD;
                int want = S - s < M ? S - s : M;
                CHECK_MSG(warm == want,
                          "S=%d M=%d stage %d: %d forwards before the first "
                          "backward, want %d",
                          S, M, s, warm, want);
                free(ops);
            }
    CHECK(mismatches == 0);
}

static void expect_stream(int train, int S, int s, int M, int compute_only, const char *want) {
    dt_pipe_instr *ops;
    int n;
    dt_status rc = train ? dt__pipe_train_schedule(S, s, M, &ops, &n)
                         : dt__pipe_infer_schedule(S, s, M, &ops, &n);
    CHECK(rc == DT_OK);
    if (rc != DT_OK) return;
    char got[1024];
    render(ops, n, compute_only, got, sizeof got);
    CHECK_MSG(strcmp(got, want) == 0, "%s S=%d stage %d M=%d:\n  got  %s\n  want %s",
              train ? "train" : "infer", S, s, M, got, want);
    free(ops);
}

static void test_shapes(void) {
    /* 2 stages, 4 micro-batches: one warm-up forward on stage 0 */
    expect_stream(1, 2, 0, 4, 1, "F0 F1 B0 F2 B1 F3 B2 B3");
    expect_stream(1, 2, 1, 4, 1, "F0 B0 F1 B1 F2 B2 F3 B3");
    expect_stream(1, 4, 0, 8, 1, "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
    expect_stream(1, 4, 1, 8, 1, "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
    expect_stream(1, 4, 3, 8, 1, "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
    /* fewer micro-batches than stages: all forwards, then all backwards */
    expect_stream(1, 4, 0, 2, 1, "F0 F1 B0 B1");
    /* full streams */
    expect_stream(1, 2, 0, 2, 0, "L0 F0 SA0 L1 F1 SA1 RG0 B0 RG1 B1 TIED REDUCE STEP");
    expect_stream(1, 2, 1, 2, 0, "RA0 L0 F0 B0 SG0 RA1 L1 F1 B1 SG1 TIED REDUCE STEP");
    expect_stream(1, 3, 1, 3, 0,
                  "RA0 F0 SA0 RA1 F1 SA1 RG0 B0 SG0 RA2 F2 SA2 RG1 B1 SG1 RG2 B2 SG2 "
                  "TIED REDUCE STEP");
    expect_stream(1, 1, 0, 3, 0, "L0 F0 B0 L1 F1 B1 L2 F2 B2 TIED REDUCE STEP");
    expect_stream(0, 3, 0, 3, 0, "L0 F0 SA0 L1 F1 SA1 L2 F2 SA2");
    expect_stream(0, 3, 1, 3, 0, "RA0 F0 SA0 RA1 F1 SA1 RA2 F2 SA2");
    expect_stream(0, 3, 2, 3, 0, "RA0 L0 F0 RA1 L1 F1 RA2 L2 F2");
    expect_stream(0, 1, 0, 2, 0, "L0 F0 L1 F1");

    /* slots and flags of one stream: stage 0 of 3 with 4 micro-batches cycles 3 slots */
    dt_pipe_instr *ops;
    int n;
    CHECK(dt__pipe_train_schedule(3, 0, 4, &ops, &n) == DT_OK);
    int ok = 1;
    for (int i = 0; i < n; i++) {
        if (ops[i].micro >= 0) ok &= ops[i].buf == ops[i].micro % 3;
        if (ops[i].kind == DT_PIPE_LOAD) ok &= ops[i].load == DT_PIPE_INPUTS;
    }
    CHECK(ok);
    free(ops);
    CHECK(dt__pipe_train_schedule(1, 0, 2, &ops, &n) == DT_OK);
    CHECK(n > 0 && ops[0].kind == DT_PIPE_LOAD && ops[0].load == (DT_PIPE_INPUTS | DT_PIPE_LABELS));
    free(ops);
}

static void test_num_buffers(void) {
    CHECK(dt__pipe_num_buffers(4, 0, 8) == 4);
    CHECK(dt__pipe_num_buffers(4, 1, 8) == 3);
    CHECK(dt__pipe_num_buffers(4, 3, 8) == 1);
    CHECK(dt__pipe_num_buffers(4, 0, 2) == 2);
    CHECK(dt__pipe_num_buffers(1, 0, 5) == 1);
    CHECK(dt__pipe_num_buffers(6, 0, 1) == 1);
    CHECK(dt__pipe_num_buffers(0, 0, 1) == 0);
    CHECK(dt__pipe_num_buffers(2, 2, 1) == 0);
    CHECK(dt__pipe_num_buffers(2, 0, 0) == 0);
    CHECK(dt__pipe_infer_num_buffers(3, 1, 5) == 2);
    CHECK(dt__pipe_infer_num_buffers(3, -1, 5) == 0);
}

/* ---- bubble ------------------------------------------------------------------------------ */

/* Unit-time forwards and backwards, instant transfers, each stage as early as its stream and
 * its inputs allow: the last computation ends at tick 2(M + S - 1). */
static int makespan(int S, int M) {
    dt_pipe_instr *ops[MAX_S];
    int n[MAX_S], pos[MAX_S], clock[MAX_S];
    int fend[MAX_S][MAX_M], bend[MAX_S][MAX_M];
    for (int s = 0; s < S; s++) {
        if (dt__pipe_train_schedule(S, s, M, &ops[s], &n[s]) != DT_OK) return -1;
        pos[s] = clock[s] = 0;
        for (int m = 0; m < M; m++) fend[s][m] = bend[s][m] = -1;
    }
    int progressed = 1, end = 0;
    while (progressed) {
        progressed = 0;
        for (int s = 0; s < S; s++)
            while (pos[s] < n[s]) {
                const dt_pipe_instr *in = &ops[s][pos[s]];
                int m = in->micro, ready = clock[s];
                if (in->kind == DT_PIPE_FORWARD && s > 0) {
                    if (fend[s - 1][m] < 0) break;
                    if (fend[s - 1][m] > ready) ready = fend[s - 1][m];
                }
                if (in->kind == DT_PIPE_BACKWARD && s < S - 1) {
                    if (bend[s + 1][m] < 0) break;
                    if (bend[s + 1][m] > ready) ready = bend[s + 1][m];
                }
                if (in->kind == DT_PIPE_FORWARD) fend[s][m] = clock[s] = ready + 1;
                if (in->kind == DT_PIPE_BACKWARD) bend[s][m] = clock[s] = ready + 1;
                if (clock[s] > end) end = clock[s];
                pos[s]++;
                progressed = 1;
            }
    }
    int done = 1;
    for (int s = 0; s < S; s++) {
        done &= pos[s] == n[s];
        free(ops[s]);
    }
    return done ? end : -1;
}

static void test_bubble(void) {
    CHECK_NEAR(dt__pipe_ideal_bubble(1, 8), 0.0, 0);
    CHECK_NEAR(dt__pipe_ideal_bubble(2, 8), 1.0 / 9.0, 1e-15);
    CHECK_NEAR(dt__pipe_ideal_bubble(4, 4), 3.0 / 7.0, 1e-15);
    CHECK_NEAR(dt__pipe_ideal_bubble(2, 1), 0.5, 1e-15);
    CHECK_NEAR(dt__pipe_ideal_bubble(8, 1), 7.0 / 8.0, 1e-15);
    CHECK(isnan(dt__pipe_ideal_bubble(0, 4)));
    CHECK(isnan(dt__pipe_ideal_bubble(2, 0)));
    int bad = 0;
    for (int S = 1; S <= MAX_S; S++)
        for (int M = 1; M <= MAX_M; M++) {
            int t = makespan(S, M);
            if (t != 2 * (M + S - 1)) {
                CHECK_MSG(0, "S=%d M=%d: makespan %d, want %d", S, M, t, 2 * (M + S - 1));
                bad++;
                continue;
            }
            /* each stage computes 2M of t ticks: the idle share is the ideal bubble */
            double idle = 1.0 - 2.0 * M / t;
            if (fabs(idle - dt__pipe_ideal_bubble(S, M)) > 1e-12) bad++;
        }
    CHECK(bad == 0);
}

/* ---- errors ------------------------------------------------------------------------------ */

static void expect_error(int train, int S, int s, int M, const char *needle) {
    dt_pipe_instr *ops = (dt_pipe_instr *)&ops; /* must come back NULL */
    int n = 7;
    dt_clear_error();
    dt_status rc = train ? dt__pipe_train_schedule(S, s, M, &ops, &n)
                         : dt__pipe_infer_schedule(S, s, M, &ops, &n);
    CHECK(rc == DT_ERR_INVALID);
    CHECK(ops == NULL && n == 0);
    CHECK_MSG(strstr(dt_last_error(), needle) != NULL, "message \"%s\" lacks \"%s\"",
              dt_last_error(), needle);
}

static void test_errors(void) {
    for (int train = 0; train <= 1; train++) {
        expect_error(train, 0, 0, 4, "stages must be >= 1 (got 0)");
        expect_error(train, -3, 0, 4, "stages must be >= 1 (got -3)");
        expect_error(train, 2, 2, 4, "stage 2 is out of range [0, 2)");
        expect_error(train, 2, -1, 4, "stage -1 is out of range");
        expect_error(train, 2, 0, 0, "micro_batches must be >= 1 (got 0)");
        expect_error(train, 2, 1, -5, "gradient_accumulation_steps");
    }
    CHECK(strcmp(dt__pipe_op_name(DT_PIPE_SEND_GRAD), "send_grad") == 0);
    CHECK(strcmp(dt__pipe_op_name(DT_PIPE_STEP), "step") == 0);
    CHECK(strcmp(dt__pipe_op_name((dt_pipe_op)99), "?") == 0);
}

int main(void) {
    TEST_RUN(test_simulate_all);
    TEST_RUN(test_interpreter_catches_errors);
    TEST_RUN(test_lockstep_order);
    TEST_RUN(test_shapes);
    TEST_RUN(test_num_buffers);
    TEST_RUN(test_bubble);
    TEST_RUN(test_errors);
    TEST_END();
}
