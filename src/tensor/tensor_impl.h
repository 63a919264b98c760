/*
 * tensor_impl.h — internals shared by the op files: the context, tape nodes, the op table
 * and the helpers every op uses.
 *
 * Writing an op (one file per family, see ops_basic.c):
 *
 *   static void relu_backward(dt_node *n) {            // n->out->grad is set
 *       dt_tensor *x = n->in[0];
 *       if (dt__wants_grad(x)) { float *gx = dt__grad_f32(x); ... gx[i] += ...; }
 *   }
 *   static int64_t relu_flops(const dt_node *n) { return dt_numel(n->out); }
 *   DT_OP(op_relu, "relu", relu_backward, relu_flops, NULL);   // registers the op
 *
 *   dt_tensor *dt_relu(dt_tensor *x) {
 *       DT_CHECK_INPUTS(x);                         // NULL in -> NULL out
 *       x = dt__need_f32(x, "relu");               // error for non-f32
 *       dt_tensor *y = dt__empty_like(x);          // contiguous f32 arena tensor
 *       dt_node *n = dt__node_new(&op_relu, y, 1, (dt_tensor *[]){x});
 *       ... compute y ...                          // n->record says if backward will run
 *       return dt__node_commit(n);                 // counts FLOPs, records, returns y
 *   }
 *
 * Backward functions read inputs from n->in, saved data from n->saved / n->attr, and add
 * into the input gradients obtained with dt__grad_f32(in) (allocated zeroed on first use,
 * contiguous). They only touch inputs for which dt__wants_grad(in) is true. Backward FLOPs
 * are counted from the op's bwd_flops (default: 2 x forward).
 */
#ifndef DT_TENSOR_IMPL_H
#define DT_TENSOR_IMPL_H

#include "dtrain/tensor.h"
#include "tensor/tensor_iface.h"

#include <string.h>

#define DT_NODE_MAX_IN 4

typedef struct dt_op_def {
    const char *name;
    void (*backward)(dt_node *n);
    int64_t (*flops)(const dt_node *n);     /* forward FLOPs */
    int64_t (*bwd_flops)(const dt_node *n); /* NULL: 2 x forward */
} dt_op_def;

/* Register an op in the "dt_ops" linker section so dt_op_count/dt_op_name can list it. */
#define DT_OP(var, name_, bwd, fl, bfl)                                                            \
    static const dt_op_def var = {name_, bwd, fl, bfl};                                            \
    static const dt_op_def *const var##_reg                                                        \
        __attribute__((used, section("dt_ops"), aligned(sizeof(void *)))) = &var

struct dt_node {
    const dt_op_def *op;
    dt_tensor *out;
    int n_in;
    bool record;                   /* on the tape: the backward will run */
    dt_tensor *in[DT_NODE_MAX_IN]; /* first inputs */
    dt_tensor **ins;               /* all n_in inputs (== in when n_in <= DT_NODE_MAX_IN) */
    int64_t iattr[8];
    double fattr[4];
    void *saved; /* arena memory owned by the op (masks, statistics) */
    double t0;   /* op profile on: when the node was made */
};

struct dt_ctx {
    dt_device *dev;
    bool own_dev;
    dt_arena *arena;
    dt_rng rng;
    bool grad_enabled;
    bool training;
    dt_dtype autocast;
    dt_node **tape;
    int64_t tape_len, tape_cap; /* tape array is heap memory (OTHER), reused across steps */
    int64_t flops_fwd, flops_bwd;
    struct dt_gemm_cache *gemm_cache; /* GEMM primitives (cpu/gemm_onednn.c), made on first use */
    /* gradient buffers dropped by the backward, for the next gradient of the same size
     * (autograd.c); arena memory, emptied by dt_ctx_reset */
    struct {
        void *data[16];
        size_t bytes[16];
        int n;
    } grad_pool;
    /* backward marks (dt_ctx_mark_backward): tape positions in recording order; heap memory
     * (OTHER) reused across steps, emptied by dt_ctx_reset */
    struct dt_bwd_mark {
        int64_t pos;
        dt_backward_mark_fn fn;
        void *user;
        int64_t arg;
    } * marks;
    int64_t n_marks, cap_marks;
    /* leaves whose gradient a checkpoint backward moved out of its recomputed region
     * (ops_checkpoint.c): an enclosing checkpoint checks them too; heap, emptied by reset */
    dt_tensor **carry;
    int n_carry, cap_carry;
    /* op profile (dt_ctx_set_profile): one row per registered op, heap (OTHER), or NULL */
    bool profile;
    dt_op_time *prof;
    /* the running backward walk: the tape position of the node whose backward runs, and the
     * lowest position the walk will reach (dt__sole_consumer) */
    int64_t bwd_pos, bwd_lo;
    /* owners of stale parameter gradients (dt__ctx_add_settle): settled when a backward ends */
    struct dt_settle {
        dt__settle_fn fn;
        void *arg;
    } settle[DT__MAX_SETTLE];
    int n_settle;
};
/* the op profile's row for op, or NULL (autograd.c) */
dt_op_time *dt__prof_row(dt_ctx *ctx, const dt_op_def *op);

/* ---- helpers for op files ---- */

#define DT_CHECK_INPUTS(...)                                                                       \
    do {                                                                                           \
        dt_tensor *dt__chk[] = {__VA_ARGS__};                                                      \
        for (size_t dt__i = 0; dt__i < sizeof dt__chk / sizeof dt__chk[0]; dt__i++)                \
            if (!dt__chk[dt__i]) return NULL;                                                      \
    } while (0)

/* NULL with an error unless t is f32 (op name in the message). */
dt_tensor *dt__need_f32(dt_tensor *t, const char *op);
/* t itself if contiguous, else a recorded contiguous copy. */
static inline dt_tensor *dt__contig(dt_tensor *t) {
    return dt_is_contiguous(t) ? t : dt_contiguous(t);
}
/* Uninitialised contiguous arena tensor (not zeroed: the op overwrites it). */
dt_tensor *dt__empty(dt_ctx *ctx, dt_dtype dtype, int ndim, const int64_t *shape);
dt_tensor *dt__empty_like(const dt_tensor *x);
/* A view struct sharing x's data (shape/stride filled by the caller). */
dt_tensor *dt__view_of(dt_tensor *x);
/* Set contiguous strides for the current shape. */
void dt__set_contiguous_strides(dt_tensor *t);

dt_node *dt__node_new(const dt_op_def *op, dt_tensor *out, int n_in, dt_tensor *const *ins);
dt_tensor *dt__node_commit(dt_node *n);

/* During backward: does t want a gradient? */
static inline bool dt__wants_grad(const dt_tensor *t) {
    return t && (t->flags & DT_TENSOR_REQUIRES_GRAD);
}
/* From inside n's backward: t (an input of n) was made by a recorded op that this backward
 * walk will still run, and no other op between t's and n's has t as an input. If no gradient
 * had reached t before n's (the caller knows: its gradient buffer was fresh), n's contribution
 * is t's whole gradient, and n's backward may fold the first step of t's producer's backward
 * into its own (see linear's "Chained activation"). */
bool dt__sole_consumer(const dt_node *n, const dt_tensor *t);
/* t's gradient buffer (f32, contiguous, numel(t) floats), allocated zeroed on first use (and
 * zeroed when stale).
 * A backward that hands its output's gradient buffer over to an input (x->grad sharing
 * n->out->grad's data) must set n->out->grad = NULL: the tape recycles the buffers of the
 * gradients it drops. */
float *dt__grad_f32(dt_tensor *t);
/* Backward of `out` with output gradient `grad` (numel(out) floats, added to its gradient)
 * over the tape nodes from out's down to index lo, running the backward marks from index kbase
 * on: a nested backward over a recomputed segment (ops_checkpoint.c). */
dt_status dt__backward_range(dt_tensor *out, const float *grad, int64_t lo, int64_t kbase);
/* Like dt__grad_f32, for a backward that writes EVERY element: when the buffer is new it is
 * left uninitialised and *fresh is set, and the op must store (=) instead of add (+=). This
 * saves zeroing every activation gradient, and a stale parameter gradient (DT__TENSOR_GRAD_STALE)
 * is fresh too. */
float *dt__grad_f32_fresh(dt_tensor *t, bool *fresh);
/* Input t's gradient IS n's output gradient (an add's operand, a residual): with no gradient
 * of its own yet, t takes the output gradient's buffer over instead of a copy, and later
 * contributions add into it as usual. The data stays readable for the rest of n's backward
 * as long as nothing adds to t's gradient meanwhile: only for a t that is none of n's other
 * inputs. Returns false (nothing done) when t already has a gradient or the sizes differ. */
bool dt__grad_take_over(dt_node *n, dt_tensor *t);
/* Arena scratch memory (not zeroed). NULL sets DT_ERR_OOM. The arena is not thread-safe:
 * never call this (or create tensors) inside an OpenMP parallel region. */
void *dt__scratch(dt_ctx *ctx, size_t bytes);

/* Broadcast the shapes of a and b into out (returns ndim, or -1 with an error set). */
int dt__broadcast_shape(const dt_tensor *a, const dt_tensor *b, int64_t *out, const char *op);
/* Normalise a possibly negative dim; -1 with an error when out of range. */
int dt__norm_dim(int dim, int ndim, const char *op);

/* GEMM on row-major f32: C = alpha * op(A) op(B) + beta * C, op = transpose when t*.
 * Uses the context's autocast dtype (bf16 via oneDNN when available). */
void dt__gemm(const dt_ctx *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
              int64_t ldc);
/* The same in f32 whatever the autocast setting. */
void dt__gemm_f32(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                  int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
void dt__gemm_cache_free(dt_ctx *ctx);

/* dt_f32_to_bf16 on the calling thread only (no OpenMP region: for short rows and callers
 * inside parallel regions). */
void dt__f32_to_bf16_seq(const float *src, uint16_t *dst, int64_t n);
/* dst[i] = src[i] rounded to bf16 precision (dt_f32_to_bf16's bits, widened back to f32), and
 * keep[i] its bf16 bits when keep is not NULL; one pass, on the caller's thread. dst may be src. */
void dt__f32_round_bf16_seq(const float *src, float *dst, uint16_t *keep, int64_t n);
/* fp16 autocast (cpu/f16.c): whether this process can run it (F16C at an AVX2 kernel level);
 * dst[i] = src[i] rounded to fp16 precision (dt_f32_to_f16's bits widened back; 65520 and up
 * become inf), on the caller's thread, dst may be src; the same in place on rows [r0, r1),
 * columns [c0, c1) of a matrix with leading dimension ldc. */
bool dt__f16_autocast_ok(void);
void dt__f32_round_f16_seq(const float *src, float *dst, int64_t n);
void dt__f32_round_f16_rows(float *C, int64_t ldc, int64_t r0, int64_t r1, int64_t c0,
                            int64_t c1);

/* The gelu_tanh kernels of ops_activation.c, shared with the fused linear (ops_matmul.c):
 * y = gelu_tanh(v) (y may be x); with d = gelu_tanh'(v) too (d may be x), the factor the
 * gelu's backward multiplies the incoming gradient by, with the same bits; v = x + bias when a
 * bias is given (rounded to f32 first, as a separate add would), else x. */
void dt__gelu_tanh_fwd(const float *x, const float *bias, float *y, int64_t n);
void dt__gelu_tanh_fwd_grad(const float *x, const float *bias, float *y, float *d, int64_t n,
                            bool stream); /* stream: d with non-temporal stores */

/* A tile callback: rows [r0, r1), columns [c0, c1) of C, run by the thread that computes the
 * tile. Tiles are disjoint. */
typedef void (*dt__gemm_tile_fn)(void *arg, int64_t r0, int64_t r1, int64_t c0, int64_t c1);
/* Rounded operands shared between GEMMs under bf16 autocast (ignored in f32). A buffer holds
 * an operand rounded to bf16 in its stored orientation, dense (stored rows x stored cols): in
 * bf16 bits with the bf16 instructions (DT__BF16_NATIVE), as f32 values rounded to bf16
 * precision on the storage path (DT__BF16_STORAGE; af / bf win over a / b when both are set). */
typedef struct dt__gemm_bf16 {
    const uint16_t *a, *b;   /* A / B already rounded (NULL: round them from the f32 data) */
    uint16_t *a_out, *b_out; /* when a / b are NULL: keep the rounded operand here (or NULL) */
    const float *af, *bf;    /* the same as f32 values */
    float *af_out, *bf_out;
} dt__gemm_bf16;
/* How bf16 autocast computes matmuls in this process (cpu/gemm_bf16.c; docs/performance.md):
 * oneDNN's bf16 kernels (the CPU has bf16 instructions); operands rounded to bf16 precision with
 * f32 products and sums; or plain f32 matmuls (no rounding at all). Without bf16 instructions
 * the last two are chosen by $DTRAIN_BF16_PATH (storage | f32). */
typedef enum dt__bf16_path { DT__BF16_NATIVE, DT__BF16_STORAGE, DT__BF16_F32 } dt__bf16_path;
dt__bf16_path dt__bf16_path_now(void);
/* For tests: the path taken without bf16 instructions (DT__BF16_STORAGE or DT__BF16_F32) from
 * now on, in the whole process; returns the previous one. Not thread-safe. */
dt__bf16_path dt__bf16_fallback_override(dt__bf16_path p);
/* The extras of dt__gemm_ex; zero-initialise and set what is needed. */
typedef struct dt__gemm_opts {
    /* Before the GEMMs of rows [r0, r1) of C (columns 0, N): make those rows of A ready, e.g.
     * compute them, so they are hot when the GEMM reads them. Called once per row block; for a
     * transposed A, once for all rows before any GEMM. */
    dt__gemm_tile_fn prologue;
    /* After a tile's GEMM, on the finished tile while it is still in that core's cache: the
     * place for fused elementwise work (bias, activation, bias gradient). */
    dt__gemm_tile_fn epilogue;
    void *arg; /* passed to both */
    /* When set, a_sums[i] += sum over k of op(A)[i][k] for every row i of C, each summed from
     * 0 in k order and then added (dt__add_col_sums' bits): the bias gradient of a dW GEMM,
     * whose op(A) is dyᵀ, taken from f32 A (never from a bf16 rounding) while the GEMM copies
     * or reads those columns anyway (fused into the copy of a transposed A's tiles). */
    float *a_sums;
    dt__gemm_bf16 bf16;
    /* Set for an epilogue that reads its tile of the product and writes every result
     * elsewhere, so that C is only scratch to it (beta 0): the f32 tile loop may then compute a
     * whole-row tile into a per-thread block that stays in cache instead of C, leaving C's rows
     * unwritten, and the epilogue finds the tile through dt__gemm_tile_src. */
    bool c_is_scratch;
} dt__gemm_opts;
/* Inside an epilogue: the tile's rows [r0, r1) when the GEMM computed them into its own block
 * (row r at src + (r - r0) * N), or NULL when they are in C as usual. */
const float *dt__gemm_tile_src(void);
/* out[j] += sum over rows r of A[r * lda + j] for columns [c0, c1): each column summed from 0
 * in row order, then added to out (vectorised across columns; the same bits however the
 * columns are cut). */
void dt__add_col_sums(float *out, const float *A, int64_t lda, int64_t rows, int64_t c0,
                      int64_t c1);
/* dt__gemm with extras (opts may be NULL). C is cut into tiles fixed by (M, N, K) alone, each
 * one sequential GEMM, in parallel over tiles, so the bits never depend on the thread count.
 * With M, N or K zero the callbacks see the degenerate shape: prologue and epilogue run once
 * over all of C when M and N are non-zero, not at all otherwise. */
void dt__gemm_ex(const dt_ctx *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                 const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                 int64_t ldc, const dt__gemm_opts *opts);

#endif
