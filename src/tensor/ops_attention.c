/* ops_attention.c — fused causal multi-head self-attention (the core of GPT-2's
 * CausalSelfAttention between c_attn and c_proj).
 *
 *   qkv (B, T, 3C) = [q | k | v] along the last dim, C = NH * HD
 *   per batch b and head h:  S = q kᵀ / sqrt(HD) (T, T), P = softmax(S + causal mask) row-wise,
 *                            y[b, :, h*HD:(h+1)*HD] = P v
 *   y (B, T, C): heads concatenated along C.
 *
 * Kernels. Work is split over the B*NH (batch, head) pairs with OpenMP; each pair runs its own
 * single-threaded f32 GEMMs (dt__gemm_f32 inside a parallel region; attention stays f32 under
 * bf16 autocast) directly on the strided q/k/v rows
 * of qkv (leading dim 3C) and writes disjoint columns of y / of the gradient, so there are no
 * atomics and the bits do not depend on the thread count. Rows are processed in blocks of
 * ROW_BLOCK: block [r0, r1) only needs key columns [0, r1), which skips the masked upper
 * triangle block-wise (3/4 of the full T x T work at T = 2 * ROW_BLOCK, 5/8 at 4 * ROW_BLOCK;
 * measured: 64-row blocks beat both 32 and one full T x T GEMM at the benchmark's T = 128).
 * The softmax rows use an AVX-512 exp of our own (portable expf fallback without AVX-512).
 *
 * Saved for backward: the attention probabilities P (B, NH, T, T) f32 in arena scratch —
 * B*NH*T*T*4 bytes per call (2 MiB for B=8, NH=4, T=128). Only the lower triangle (j <= i) of
 * each row block's columns [0, r1) is meaningful. Storing P (instead of a flash-style per-row
 * logsumexp + recompute) spares the backward one more q kᵀ GEMM (+25% attention GEMM FLOPs)
 * and the exponentials; at GPT-benchmark sizes P is small (64 KiB per head). For long
 * sequences the T^2 term dominates activation memory (B=8, NH=12, T=1024: 384 MiB per layer);
 * the arena charges it to the device budget, so exceeding it is a clean DT_ERR_OOM.
 * With gradients off, P lives in a per-thread (ROW_BLOCK, T) scratch instead.
 * Backward scratch: dS, one (ROW_BLOCK, T) block per thread.
 *
 * Backward (dy given):  dP = dy vᵀ,  D_i = Σ_j P_ij dP_ij,  dS = P ⊙ (dP - D) / sqrt(HD),
 *                       dq = dS k,  dk = dSᵀ q,  dv = Pᵀ dy   (all accumulated into dqkv).
 *
 * FLOPs: forward counts the two GEMMs as 2*B*NH*T*T*HD each over the FULL T x T (the causal
 * half we skip is still counted, the usual "model FLOPs" convention) plus 5 per score for the
 * softmax (scale, max, subtract, exp, normalise). Backward: four GEMMs (8*B*NH*T*T*HD) plus
 * 4 per score for the softmax gradient.
 */
#include "tensor_impl.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define ROW_BLOCK 64
/* parallelise over (b, h) pairs when a call has at least this many score elements */
#define PAR_MIN_SCORES 4096

static int max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static int thread_id(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* ---- row kernels: AVX-512 when compiled for it, portable C otherwise ----------------------
 * Each row's reductions run in a fixed order (16 lanes, then a fixed lane tree), so results
 * do not depend on the thread count. */

#ifdef __AVX512F__
#include <immintrin.h>

#include "cpu/simd_exp.h"

/* Softmax of row s[0..len) in place (len >= 1); then zero s[len..end). */
static inline void softmax_row(float *s, int64_t len, int64_t end) {
    __m512 vmx = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < len; j += 16) {
        __mmask16 k = dt__tail_mask16(len - j);
        vmx = _mm512_mask_max_ps(vmx, k, vmx, _mm512_maskz_loadu_ps(k, s + j));
    }
    __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(vmx));
    __m512 vs = _mm512_setzero_ps();
    for (int64_t j = 0; j < len; j += 16) {
        __mmask16 k = dt__tail_mask16(len - j);
        __m512 e = dt__exp512_nonpos(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), mx));
        e = _mm512_maskz_mov_ps(k, e);
        vs = _mm512_add_ps(vs, e);
        _mm512_mask_storeu_ps(s + j, k, e);
    }
    __m512 inv = _mm512_set1_ps(1.f / _mm512_reduce_add_ps(vs));
    for (int64_t j = 0; j < len; j += 16) {
        __mmask16 k = dt__tail_mask16(len - j);
        _mm512_mask_storeu_ps(s + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + j), inv));
    }
    if (end > len) memset(s + len, 0, (size_t)(end - len) * sizeof(float));
}

/* Softmax gradient of one row in place: d[j] = p[j] * (d[j] - Σ p d) * scale for j < len,
 * 0 for len <= j < end. */
static inline void softmax_grad_row(const float *p, float *d, int64_t len, int64_t end,
                                    float scale) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < len; j += 16) {
        __mmask16 k = dt__tail_mask16(len - j);
        acc =
            _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, p + j), _mm512_maskz_loadu_ps(k, d + j), acc);
    }
    __m512 D = _mm512_set1_ps(_mm512_reduce_add_ps(acc)), sc = _mm512_set1_ps(scale);
    for (int64_t j = 0; j < len; j += 16) {
        __mmask16 k = dt__tail_mask16(len - j);
        __m512 pv = _mm512_maskz_loadu_ps(k, p + j), dv = _mm512_maskz_loadu_ps(k, d + j);
        _mm512_mask_storeu_ps(d + j, k, _mm512_mul_ps(_mm512_mul_ps(pv, _mm512_sub_ps(dv, D)), sc));
    }
    if (end > len) memset(d + len, 0, (size_t)(end - len) * sizeof(float));
}

#else /* portable */

static inline void softmax_row(float *s, int64_t len, int64_t end) {
    float mx = s[0];
    for (int64_t j = 1; j < len; j++) mx = s[j] > mx ? s[j] : mx;
    float sum = 0.f;
    for (int64_t j = 0; j < len; j++) sum += (s[j] = expf(s[j] - mx));
    float inv = 1.f / sum;
    for (int64_t j = 0; j < len; j++) s[j] *= inv;
    if (end > len) memset(s + len, 0, (size_t)(end - len) * sizeof(float));
}

static inline void softmax_grad_row(const float *p, float *d, int64_t len, int64_t end,
                                    float scale) {
    float D = 0.f;
    for (int64_t j = 0; j < len; j++) D += p[j] * d[j];
    for (int64_t j = 0; j < len; j++) d[j] = p[j] * (d[j] - D) * scale;
    if (end > len) memset(d + len, 0, (size_t)(end - len) * sizeof(float));
}

#endif

/* Geometry of one call. iattr: [0]=B [1]=T [2]=NH [3]=HD */
typedef struct att_geom {
    int64_t B, T, NH, HD, C;
} att_geom;

static att_geom geom_of(const dt_node *n) {
    att_geom g = {n->iattr[0], n->iattr[1], n->iattr[2], n->iattr[3], n->iattr[2] * n->iattr[3]};
    return g;
}

/* Forward of one (b, h) pair. P points at a (T, T) block (ldp = T) when saving, or at a
 * per-thread (ROW_BLOCK, T) buffer (then `ring` is true and rows are reused per block). */
static void head_forward(const att_geom *g, const float *X, float *Y, int64_t b, int64_t h,
                         float *P, bool ring) {
    int64_t T = g->T, HD = g->HD, C = g->C, ld = 3 * C;
    float scale = 1.f / sqrtf((float)HD);
    /* q, k, v are (T, HD) with row stride 3C; y is (T, HD) with row stride C */
    const float *q = X + b * T * ld + h * HD, *k = q + C, *v = q + 2 * C;
    float *y = Y + b * T * C + h * HD;
    for (int64_t r0 = 0; r0 < T; r0 += ROW_BLOCK) {
        int64_t r1 = r0 + ROW_BLOCK < T ? r0 + ROW_BLOCK : T, m = r1 - r0;
        float *Pb = ring ? P : P + r0 * T; /* rows [r0, r1) x cols [0, r1), ld T */
        /* S[r0:r1, 0:r1] = scale * q[r0:r1] k[0:r1]ᵀ */
        dt__gemm_f32(false, true, m, r1, HD, scale, q + r0 * ld, ld, k, ld, 0.f, Pb, T);
        for (int64_t i = 0; i < m; i++) /* causal: row r0+i sees keys 0..r0+i */
            softmax_row(Pb + i * T, r0 + i + 1, r1);
        /* y[r0:r1] = P[r0:r1, 0:r1] v[0:r1] */
        dt__gemm_f32(false, false, m, HD, r1, 1.f, Pb, T, v, ld, 0.f, y + r0 * C, C);
    }
}

/* Backward of one (b, h) pair, accumulating into its dq/dk/dv columns of dX. `fresh`: dX was
 * just allocated uninitialised, so this pair first zeroes its own columns (in parallel across
 * pairs, and cache-hot for the GEMMs that follow) instead of a serial memset of all of dX. */
static void head_backward(const att_geom *g, const float *X, const float *dY, const float *Pall,
                          float *dX, bool fresh, float *dS, int64_t b, int64_t h) {
    int64_t T = g->T, HD = g->HD, C = g->C, ld = 3 * C;
    float scale = 1.f / sqrtf((float)HD);
    const float *q = X + b * T * ld + h * HD, *k = q + C, *v = q + 2 * C;
    float *dq = dX + b * T * ld + h * HD, *dk = dq + C, *dv = dq + 2 * C;
    const float *dy = dY + b * T * C + h * HD; /* (T, HD), row stride C */
    const float *P = Pall + (b * g->NH + h) * T * T;
    if (fresh)
        for (int64_t t = 0; t < T; t++)
            for (int part = 0; part < 3; part++)
                memset(dq + t * ld + part * C, 0, (size_t)HD * sizeof(float));
    for (int64_t r0 = 0; r0 < T; r0 += ROW_BLOCK) {
        int64_t r1 = r0 + ROW_BLOCK < T ? r0 + ROW_BLOCK : T, m = r1 - r0;
        const float *Pb = P + r0 * T;
        /* dP[r0:r1, 0:r1] = dy[r0:r1] v[0:r1]ᵀ into dS (m, r1), ld T */
        dt__gemm_f32(false, true, m, r1, HD, 1.f, dy + r0 * C, C, v, ld, 0.f, dS, T);
        for (int64_t i = 0; i < m; i++) /* dS = P * (dP - D) * scale, zero above the diagonal */
            softmax_grad_row(Pb + i * T, dS + i * T, r0 + i + 1, r1, scale);
        /* dv[0:r1] += P[r0:r1, 0:r1]ᵀ dy[r0:r1] */
        dt__gemm_f32(true, false, r1, HD, m, 1.f, Pb, T, dy + r0 * C, C, 1.f, dv, ld);
        /* dq[r0:r1] += dS k[0:r1] */
        dt__gemm_f32(false, false, m, HD, r1, 1.f, dS, T, k, ld, 1.f, dq + r0 * ld, ld);
        /* dk[0:r1] += dSᵀ q[r0:r1] */
        dt__gemm_f32(true, false, r1, HD, m, 1.f, dS, T, q + r0 * ld, ld, 1.f, dk, ld);
    }
}

static void attention_backward(dt_node *n) {
    dt_tensor *x = n->in[0];
    if (!dt__wants_grad(x)) return;
    att_geom g = geom_of(n);
    dt_ctx *ctx = x->ctx;
    /* Every element of dX belongs to exactly one (b, h) pair's q, k or v columns, so a new
     * gradient buffer need not be zeroed up front (see head_backward). */
    bool fresh;
    float *dX = dt__grad_f32_fresh(x, &fresh);
    int nt = max_threads();
    int64_t rb = g.T < ROW_BLOCK ? g.T : ROW_BLOCK;
    float *dS = dt__scratch(ctx, (size_t)nt * (size_t)(rb * g.T) * sizeof(float));
    if (!dX || !dS) return; /* OOM is reported by the tape walk */
    const float *X = x->data, *dY = n->out->grad->data, *P = n->saved;
    int64_t pairs = g.B * g.NH;
#pragma omp parallel for schedule(static) if (pairs > 1 && pairs * g.T * g.T >= PAR_MIN_SCORES)
    for (int64_t bh = 0; bh < pairs; bh++)
        head_backward(&g, X, dY, P, dX, fresh, dS + (size_t)thread_id() * (size_t)(rb * g.T),
                      bh / g.NH, bh % g.NH);
}

static int64_t attention_flops(const dt_node *n) {
    att_geom g = geom_of(n);
    int64_t scores = g.B * g.NH * g.T * g.T;
    return 2 * (2 * scores * g.HD) + 5 * scores;
}

static int64_t attention_bwd_flops(const dt_node *n) {
    att_geom g = geom_of(n);
    int64_t scores = g.B * g.NH * g.T * g.T;
    return 4 * (2 * scores * g.HD) + 4 * scores;
}

DT_OP(op_attention, "causal_self_attention", attention_backward, attention_flops,
      attention_bwd_flops);

dt_tensor *dt_causal_self_attention(dt_tensor *qkv, int n_head) {
    DT_CHECK_INPUTS(qkv);
    if (!dt__need_f32(qkv, "causal_self_attention")) return NULL;
    char s[96];
    if (qkv->ndim != 3 || qkv->shape[2] % 3 != 0) {
        dt_error(DT_ERR_INVALID,
                 "causal_self_attention: qkv must be (B, T, 3C) with [q | k | v] along the last "
                 "dim, got %s",
                 dt_shape_str(qkv, s, sizeof s));
        return NULL;
    }
    int64_t C = qkv->shape[2] / 3;
    if (n_head <= 0 || C % n_head != 0) {
        dt_error(DT_ERR_INVALID,
                 "causal_self_attention: %d heads do not divide C = %lld (qkv %s); hint: "
                 "d_model must be a multiple of n_head",
                 n_head, (long long)C, dt_shape_str(qkv, s, sizeof s));
        return NULL;
    }
    qkv = dt__contig(qkv);
    if (!qkv) return NULL;
    att_geom g = {qkv->shape[0], qkv->shape[1], n_head, C / n_head, C};
    dt_ctx *ctx = qkv->ctx;
    dt_tensor *y = dt__empty(ctx, DT_DTYPE_F32, 3, (int64_t[]){g.B, g.T, C});
    dt_node *n = dt__node_new(&op_attention, y, 1, &qkv);
    if (!n) return NULL;
    n->iattr[0] = g.B;
    n->iattr[1] = g.T;
    n->iattr[2] = g.NH;
    n->iattr[3] = g.HD;
    int64_t pairs = g.B * g.NH;
    if (pairs == 0 || g.T == 0 || g.HD == 0) {
        memset(y->data, 0, dt_nbytes(y));
        return dt__node_commit(n);
    }
    int64_t rb = g.T < ROW_BLOCK ? g.T : ROW_BLOCK;
    int nt = max_threads();
    /* recording: P (B, NH, T, T) is saved for backward; else a ring of (rb, T) per thread */
    size_t pbytes = n->record ? (size_t)(pairs * g.T * g.T) * sizeof(float)
                              : (size_t)nt * (size_t)(rb * g.T) * sizeof(float);
    float *P = dt__scratch(ctx, pbytes);
    if (!P) return NULL;
    n->saved = n->record ? P : NULL;
    const float *X = qkv->data;
    float *Y = y->data;
    bool ring = !n->record;
#pragma omp parallel for schedule(static) if (pairs > 1 && pairs * g.T * g.T >= PAR_MIN_SCORES)
    for (int64_t bh = 0; bh < pairs; bh++) {
        float *Pb = ring ? P + (size_t)thread_id() * (size_t)(rb * g.T) : P + bh * g.T * g.T;
        head_forward(&g, X, Y, bh / g.NH, bh % g.NH, Pb, ring);
    }
    return dt__node_commit(n);
}
