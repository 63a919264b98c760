/* ops_attention.c — fused causal multi-head self-attention (the core of GPT-2's
 * CausalSelfAttention between c_attn and c_proj).
 *
 *   qkv (B, T, 3C) = [q | k | v] along the last dim, C = NH * HD
 *   per batch b and head h:  S = q kᵀ / sqrt(HD) (T, T), P = softmax(S + causal mask) row-wise,
 *                            y[b, :, h*HD:(h+1)*HD] = P v
 *   y (B, T, C): heads concatenated along C.
 *
 * Kernels. Work is split over the B*NH (batch, head) pairs with OpenMP; each pair runs its own
 * single-threaded products (head_gemm below: AVX-512 or AVX2 register tiles of our own,
 * dt__gemm_f32 at the generic level; attention stays f32 under bf16 autocast) and writes disjoint
 * columns of y / of the gradient, so there are no atomics and the bits do not depend on the thread
 * count. Per pair, kᵀ (vᵀ in the backward) is laid out once as the right-hand operand of q kᵀ, and
 * the other right-hand operands (v; dy, k, q) are copied dense out of their strided rows. Rows are
 * processed in blocks of ROW_BLOCK (block [r0, r1) needs key columns [0, r1) only) and, inside
 * a block, each 4-row tile of a product skips the masked upper triangle (about 57% of the full
 * T x T work is done at T = 128, against 75% with whole 64-row blocks; measured 12% off the
 * forward and 19% off the backward). The softmax rows (the forward's in cpu/attn_rows.c, shared
 * with the grouped-query attention) use an AVX-512 or AVX2 exp of our own
 * (portable expf fallback at the generic level).
 *
 * Saved for backward: the attention probabilities P (B, NH, T, T) f32 in arena scratch —
 * B*NH*T*T*4 bytes per call (2 MiB for B=8, NH=4, T=128). Only the lower triangle (j <= i) of
 * each row block's columns [0, r1) is meaningful. Storing P (instead of a flash-style per-row
 * logsumexp + recompute) spares the backward one more q kᵀ GEMM (+25% attention GEMM FLOPs)
 * and the exponentials; at GPT-benchmark sizes P is small (64 KiB per head). For long
 * sequences the T^2 term dominates activation memory (B=8, NH=12, T=1024: 384 MiB per layer);
 * the arena charges it to the device budget, so exceeding it is a clean DT_ERR_OOM.
 * With gradients off, P lives in a per-thread (ROW_BLOCK, T) scratch instead.
 * Scratch per thread: kᵀ and v (forward); dS (ROW_BLOCK, T), vᵀ, dy, k and q (backward).
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

/* causal skipping in the per-head products (see head_gemm) */
enum { GM_COLS = 1, GM_KROWS, GM_KFROM };

#include <immintrin.h>

#include "cpu/attn_rows.h"
#include "cpu/simd_exp.h"
#include "cpu/simd_transpose.h"

DT__AVX512_BEGIN

/* Softmax gradient of one row in place: d[j] = p[j] * (d[j] - Σ p d) * scale for j < len,
 * 0 for len <= j < end. */
static inline void softmax_grad_row_512(const float *p, float *d, int64_t len, int64_t end,
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

/* ---- per-head products ---------------------------------------------------------------------
 * C (m x n, ldc) = alpha op(A) B (+ C when acc), B (K x n) row-major, op(A) (m x K) read as
 * A[i * ars + k * aks]: a row-major A (ars = lda, aks = 1) or a transposed one (ars = 1,
 * aks = lda). Every element of C is one FMA chain over its k in order, then scaled and added:
 * the bits do not depend on where the element sits in a tile. These products are small
 * (64 x 128 x 64 at the GPT benchmark) and there are a dozen per head; a library call costs
 * more around each one than the arithmetic inside, and cannot skip the causal triangle finer
 * than per call. Tiles of 4 rows x up to 64 columns keep 16 accumulators in registers.
 *
 * Causal skipping, per 4-row tile whose first row is row `co` + i0 of the sequence:
 *   GM_COLS  (q kᵀ, dy vᵀ): columns past the tile's last row, rounded up to 16, are not
 *            computed (the softmax and its gradient zero them);
 *   GM_KROWS (P v, dS k): k runs up to the tile's last row only (op(A) is zero beyond it);
 *   GM_KFROM (Pᵀ dy, dSᵀ q; output rows are keys): k starts at the tile's first key, as the
 *            rows of P before it are zero there.
 * The terms skipped are exact zeros, so the sums are those of the full products for finite
 * inputs. */
#define GM_MR 4

static inline void gm_store(float *c, __m512 v, __m512 al, bool acc, __mmask16 k) {
    v = _mm512_mul_ps(v, al);
    if (acc) v = _mm512_add_ps(_mm512_maskz_loadu_ps(k, c), v);
    _mm512_mask_storeu_ps(c, k, v);
}

/* 4 rows x 16 nv columns (nv a constant after inlining) */
static inline __attribute__((always_inline)) void
gm_tile_4(int nv, int64_t K, const float *A, int64_t ars, int64_t aks, const float *B, int64_t ldb,
          float alpha, bool acc, float *C, int64_t ldc) {
    __m512 c[4][4], b[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) c[i][v] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        const float *bk = B + k * ldb, *a = A + k * aks;
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) b[v] = _mm512_loadu_ps(bk + 16 * v);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            __m512 ai = _mm512_set1_ps(a[i * ars]);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) c[i][v] = _mm512_fmadd_ps(ai, b[v], c[i][v]);
        }
    }
    __m512 al = _mm512_set1_ps(alpha);
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) gm_store(C + i * ldc + v * 16, c[i][v], al, acc, 0xFFFF);
}

/* the ragged edges: mr <= 4 rows, up to 16 columns at a time */
static void gm_tile_edge(int64_t mr, int64_t nc, int64_t K, const float *A, int64_t ars,
                         int64_t aks, const float *B, int64_t ldb, float alpha, bool acc, float *C,
                         int64_t ldc) {
    __m512 al = _mm512_set1_ps(alpha);
    for (int64_t j = 0; j < nc; j += 16) {
        __mmask16 km = dt__tail_mask16(nc - j);
        __m512 c[GM_MR];
        for (int i = 0; i < GM_MR; i++) c[i] = _mm512_setzero_ps();
        for (int64_t k = 0; k < K; k++) {
            __m512 bv = _mm512_maskz_loadu_ps(km, B + k * ldb + j);
            for (int64_t i = 0; i < mr; i++)
                c[i] = _mm512_fmadd_ps(_mm512_set1_ps(A[i * ars + k * aks]), bv, c[i]);
        }
        for (int64_t i = 0; i < mr; i++) gm_store(C + i * ldc + j, c[i], al, acc, km);
    }
}

/* Rows [0, mr) x columns [0, nn) of a product (see head_gemm), mr <= GM_MR. */
static void gm_panel_512(int64_t mr, int64_t nn, int64_t K, const float *a, int64_t ars,
                         int64_t aks, const float *b, int64_t ldb, float alpha, bool acc, float *c,
                         int64_t ldc) {
    int64_t j = 0;
    if (mr == GM_MR)
        for (; j + 16 <= nn; j += 64) {
            int64_t nv = (nn - j) / 16 < 4 ? (nn - j) / 16 : 4;
            switch (nv) {
            case 4:
                gm_tile_4(4, K, a, ars, aks, b + j, ldb, alpha, acc, c + j, ldc);
                break;
            case 3:
                gm_tile_4(3, K, a, ars, aks, b + j, ldb, alpha, acc, c + j, ldc);
                break;
            case 2:
                gm_tile_4(2, K, a, ars, aks, b + j, ldb, alpha, acc, c + j, ldc);
                break;
            default:
                gm_tile_4(1, K, a, ars, aks, b + j, ldb, alpha, acc, c + j, ldc);
            }
            if (nv < 4) {
                j += 16 * nv;
                break;
            }
        }
    if (j < nn) gm_tile_edge(mr, nn - j, K, a, ars, aks, b + j, ldb, alpha, acc, c + j, ldc);
}

/* head_copy for HD a multiple of 16 (rows of a few vectors: a memcpy call per row cost more,
 * 0.1 ms a step) */
static void head_copy_512(const float *src, int64_t ld, int64_t T, int64_t HD, float *dst) {
    for (int64_t t = 0; t < T && t < 8; t++)
        for (int64_t d = 0; d < HD; d += 16)
            _mm_prefetch((const char *)(src + t * ld + d), _MM_HINT_T0);
    for (int64_t t = 0; t < T; t++) {
        if (t + 8 < T)
            for (int64_t d = 0; d < HD; d += 16)
                _mm_prefetch((const char *)(src + (t + 8) * ld + d), _MM_HINT_T0);
        for (int64_t d = 0; d < HD; d += 16)
            _mm512_storeu_ps(dst + t * HD + d, _mm512_loadu_ps(src + t * ld + d));
    }
}
DT__ISA_END

/* the softmax rows in AVX2 + FMA: 8 lanes, then dt__hmax256 / dt__hsum256's fixed trees; the
 * products' tiles 4 rows x 16 columns (8 accumulators), each element again one FMA chain over
 * its k in order */
DT__AVX2_BEGIN

/* full: all 8 lanes (plain loads and stores; masked ones are slow on AMD) */
static inline __attribute__((always_inline)) void gm_store256(float *c, __m256 v, __m256 al,
                                                              bool acc, bool full, __m256i k) {
    v = _mm256_mul_ps(v, al);
    if (acc) v = _mm256_add_ps(full ? _mm256_loadu_ps(c) : _mm256_maskload_ps(c, k), v);
    if (full)
        _mm256_storeu_ps(c, v);
    else
        _mm256_maskstore_ps(c, k, v);
}

/* mr <= 4 rows x up to 16 columns (nc), masked past nc; mr and nc constants after inlining
 * for the full tiles, so the accumulators stay in registers */
static inline __attribute__((always_inline)) void
gm_tile256(int64_t mr, int64_t nc, int64_t K, const float *A, int64_t ars, int64_t aks,
           const float *B, int64_t ldb, float alpha, bool acc, float *C, int64_t ldc) {
    const bool full = nc == 16;
    __m256i k0 = dt__tail_mask8(nc), k1 = dt__tail_mask8(nc - 8);
    __m256 c[GM_MR][2];
#pragma GCC unroll 4
    for (int i = 0; i < GM_MR; i++) c[i][0] = c[i][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        const float *bk = B + k * ldb, *a = A + k * aks;
        __m256 b0 = full ? _mm256_loadu_ps(bk) : _mm256_maskload_ps(bk, k0);
        __m256 b1 = full ? _mm256_loadu_ps(bk + 8) : _mm256_maskload_ps(bk + 8, k1);
#pragma GCC unroll 4
        for (int64_t i = 0; i < mr; i++) {
            __m256 ai = _mm256_broadcast_ss(a + i * ars);
            c[i][0] = _mm256_fmadd_ps(ai, b0, c[i][0]);
            c[i][1] = _mm256_fmadd_ps(ai, b1, c[i][1]);
        }
    }
    __m256 al = _mm256_set1_ps(alpha);
#pragma GCC unroll 4
    for (int64_t i = 0; i < mr; i++) {
        gm_store256(C + i * ldc, c[i][0], al, acc, full, k0);
        if (nc > 8) gm_store256(C + i * ldc + 8, c[i][1], al, acc, full, k1);
    }
}

static void gm_panel_256(int64_t mr, int64_t nn, int64_t K, const float *a, int64_t ars,
                         int64_t aks, const float *b, int64_t ldb, float alpha, bool acc, float *c,
                         int64_t ldc) {
    int64_t j = 0;
    if (mr == GM_MR)
        for (; j + 16 <= nn; j += 16)
            gm_tile256(GM_MR, 16, K, a, ars, aks, b + j, ldb, alpha, acc, c + j, ldc);
    for (; j < nn; j += 16)
        gm_tile256(mr, nn - j, K, a, ars, aks, b + j, ldb, alpha, acc, c + j, ldc);
}

static inline void softmax_grad_row_256(const float *p, float *d, int64_t len, int64_t end,
                                        float scale) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t j = 0; j < len; j += 8) {
        __m256i k = dt__tail_mask8(len - j);
        acc = _mm256_fmadd_ps(_mm256_maskload_ps(p + j, k), _mm256_maskload_ps(d + j, k), acc);
    }
    __m256 D = _mm256_set1_ps(dt__hsum256(acc)), sc = _mm256_set1_ps(scale);
    for (int64_t j = 0; j < len; j += 8) {
        __m256i k = dt__tail_mask8(len - j);
        __m256 pv = _mm256_maskload_ps(p + j, k), dv = _mm256_maskload_ps(d + j, k);
        _mm256_maskstore_ps(d + j, k, _mm256_mul_ps(_mm256_mul_ps(pv, _mm256_sub_ps(dv, D)), sc));
    }
    if (end > len) memset(d + len, 0, (size_t)(end - len) * sizeof(float));
}

DT__ISA_END

/* portable variants */

static inline void softmax_grad_row_gen(const float *p, float *d, int64_t len, int64_t end,
                                        float scale) {
    float D = 0.f;
    for (int64_t j = 0; j < len; j++) D += p[j] * d[j];
    for (int64_t j = 0; j < len; j++) d[j] = p[j] * (d[j] - D) * scale;
    if (end > len) memset(d + len, 0, (size_t)(end - len) * sizeof(float));
}

/* the variant of the CPU's level (the forward rows are cpu/attn_rows.c's, shared with the
 * grouped-query attention) */
static void softmax_grad_row(const float *p, float *d, int64_t len, int64_t end, float scale) {
    if (dt__isa_avx512())
        softmax_grad_row_512(p, d, len, end, scale);
    else if (dt__isa_avx2())
        softmax_grad_row_256(p, d, len, end, scale);
    else
        softmax_grad_row_gen(p, d, len, end, scale);
}
typedef void (*gm_panel_fn)(int64_t mr, int64_t nn, int64_t K, const float *a, int64_t ars,
                            int64_t aks, const float *b, int64_t ldb, float alpha, bool acc,
                            float *c, int64_t ldc);

/* The register tiles of the CPU's level, row tile by row tile with the causal skipping; the
 * generic level runs the full products on dt__gemm_f32 (the hints only skip exact zeros). */
static void head_gemm(bool ta, int64_t m, int64_t n, int64_t K, float alpha, const float *A,
                      int64_t lda, const float *B, int64_t ldb, bool acc, float *C, int64_t ldc,
                      int causal, int64_t co) {
    if (!dt__isa_avx2()) {
        dt__gemm_f32(ta, false, m, n, K, alpha, A, lda, B, ldb, acc ? 1.f : 0.f, C, ldc);
        return;
    }
    gm_panel_fn panel = dt__isa_avx512() ? gm_panel_512 : gm_panel_256;
    int64_t ars = ta ? 1 : lda, aks = ta ? lda : 1;
    for (int64_t i = 0; i < m; i += GM_MR) {
        int64_t mr = m - i < GM_MR ? m - i : GM_MR, last = co + i + mr; /* one past */
        int64_t nn = n, k0 = 0, k1 = K;
        if (causal == GM_COLS && (last + 15) / 16 * 16 < n) nn = (last + 15) / 16 * 16;
        if (causal == GM_KROWS && last < K) k1 = last;
        if (causal == GM_KFROM && i > co) k0 = i - co;
        if (k0 >= k1) { /* nothing but zeros in op(A) for these rows */
            if (!acc)
                for (int64_t r = 0; r < mr; r++)
                    memset(C + (i + r) * ldc, 0, (size_t)nn * sizeof(float));
            continue;
        }
        panel(mr, nn, k1 - k0, A + i * ars + k0 * aks, ars, aks, B + k0 * ldb, ldb, alpha, acc,
              C + i * ldc, ldc);
    }
}

/* Geometry of one call. iattr: [0]=B [1]=T [2]=NH [3]=HD */
typedef struct att_geom {
    int64_t B, T, NH, HD, C;
} att_geom;

static att_geom geom_of(const dt_node *n) {
    att_geom g = {n->iattr[0], n->iattr[1], n->iattr[2], n->iattr[3], n->iattr[2] * n->iattr[3]};
    return g;
}

/* dst (HD, T) = src (T, HD)ᵀ, src rows ld apart: the keys (or values) of one head laid out
 * as the right-hand operand of q kᵀ (dy vᵀ). */
static void head_transpose(const float *src, int64_t ld, int64_t T, int64_t HD, float *dst) {
    int64_t t = 0;
    const int w = dt__transpose_width();
    for (; w && t + w <= T; t += w) {
        if (t + 2 * w <= T) /* the next w rows (see head_copy) */
            for (int i = 0; i < w; i++)
                for (int64_t d = 0; d < HD; d += 16)
                    _mm_prefetch((const char *)(src + (t + w + i) * ld + d), _MM_HINT_T0);
        int64_t d = 0;
        for (; d + w <= HD; d += w) {
            const float *rows[16];
            for (int i = 0; i < w; i++) rows[i] = src + (t + i) * ld + d;
            dt__transpose_w(w, rows, dst + d * T + t, T);
        }
        for (; d < HD; d++)
            for (int64_t i = t; i < t + w; i++) dst[d * T + i] = src[i * ld + d];
    }
    for (; t < T; t++)
        for (int64_t d = 0; d < HD; d++) dst[d * T + t] = src[t * ld + d];
}

/* dst (T, HD) dense = src (T, HD) with rows ld apart. The right-hand operands of the per-head
 * products are read row after row; at ld = 3C (q, k, v inside qkv) or C (dy) those rows map
 * onto a few L1 sets and evict each other, which cost more than this copy. Rows that far apart
 * defeat the hardware prefetchers (a few lines per 4 KiB page), so the rows a few ahead are
 * prefetched here and in head_transpose: 0.3 ms off a GPT benchmark step. */
static void head_copy(const float *src, int64_t ld, int64_t T, int64_t HD, float *dst) {
    if (HD % 16 == 0 && dt__isa_avx512()) {
        head_copy_512(src, ld, T, HD, dst);
        return;
    }
    for (int64_t t = 0; t < T; t++) memcpy(dst + t * HD, src + t * ld, (size_t)HD * sizeof(float));
}

/* Forward of one (b, h) pair. P points at a (T, T) block (ldp = T) when saving, or at a
 * per-thread (ROW_BLOCK, T) buffer (then `ring` is true and rows are reused per block). */
static void head_forward(const att_geom *g, const float *X, float *Y, int64_t b, int64_t h,
                         float *P, bool ring, float *kT) {
    int64_t T = g->T, HD = g->HD, C = g->C, ld = 3 * C;
    float scale = 1.f / sqrtf((float)HD);
    /* q, k, v are (T, HD) with row stride 3C; y is (T, HD) with row stride C */
    const float *q = X + b * T * ld + h * HD, *k = q + C, *v = q + 2 * C;
    float *y = Y + b * T * C + h * HD;
    float *vc = kT + HD * T; /* v, dense */
    head_transpose(k, ld, T, HD, kT);
    head_copy(v, ld, T, HD, vc);
    for (int64_t r0 = 0; r0 < T; r0 += ROW_BLOCK) {
        int64_t r1 = r0 + ROW_BLOCK < T ? r0 + ROW_BLOCK : T, m = r1 - r0;
        float *Pb = ring ? P : P + r0 * T; /* rows [r0, r1) x cols [0, r1), ld T */
        /* S[r0:r1, 0:r1] = scale * q[r0:r1] k[0:r1]ᵀ */
        head_gemm(false, m, r1, HD, scale, q + r0 * ld, ld, kT, T, false, Pb, T, GM_COLS, r0);
        float st[2];                    /* the row's statistics, not needed here */
        for (int64_t i = 0; i < m; i++) /* causal: row r0+i sees keys 0..r0+i */
            dt__attn_softmax_row(Pb + i * T, r0 + i + 1, r1, st);
        /* y[r0:r1] = P[r0:r1, 0:r1] v[0:r1] */
        head_gemm(false, m, HD, r1, 1.f, Pb, T, vc, HD, false, y + r0 * C, C, GM_KROWS, r0);
    }
}

/* Backward of one (b, h) pair, accumulating into its dq/dk/dv columns of dX. `fresh`: dX was
 * just allocated uninitialised, so the first product to reach each of its elements stores
 * instead of adding (no memset of dX at all). */
static void head_backward(const att_geom *g, const float *X, const float *dY, const float *Pall,
                          float *dX, bool fresh, float *dS, float *vT, int64_t b, int64_t h) {
    int64_t T = g->T, HD = g->HD, C = g->C, ld = 3 * C;
    float scale = 1.f / sqrtf((float)HD);
    const float *q = X + b * T * ld + h * HD, *k = q + C, *v = q + 2 * C;
    float *dq = dX + b * T * ld + h * HD, *dk = dq + C, *dv = dq + 2 * C;
    const float *dy = dY + b * T * C + h * HD; /* (T, HD), row stride C */
    const float *P = Pall + (b * g->NH + h) * T * T;
    /* dense copies of the right-hand operands, after vᵀ in the thread's scratch */
    float *dyc = vT + HD * T, *kc = dyc + T * HD, *qc = kc + T * HD;
    head_transpose(v, ld, T, HD, vT);
    head_copy(dy, C, T, HD, dyc);
    head_copy(k, ld, T, HD, kc);
    head_copy(q, ld, T, HD, qc);
    /* Last row block first: it reaches every row of dk and dv, and each block has dq rows of
     * its own, so a fresh gradient is stored by the first product that reaches it (no zeroing
     * pass) and added to after. */
    int64_t nblk = (T + ROW_BLOCK - 1) / ROW_BLOCK;
    for (int64_t blk = nblk - 1; blk >= 0; blk--) {
        int64_t r0 = blk * ROW_BLOCK, r1 = r0 + ROW_BLOCK < T ? r0 + ROW_BLOCK : T, m = r1 - r0;
        bool add_kv = !fresh || blk < nblk - 1;
        const float *Pb = P + r0 * T;
        /* dP[r0:r1, 0:r1] = dy[r0:r1] v[0:r1]ᵀ into dS (m, r1), ld T */
        head_gemm(false, m, r1, HD, 1.f, dy + r0 * C, C, vT, T, false, dS, T, GM_COLS, r0);
        for (int64_t i = 0; i < m; i++) /* dS = P * (dP - D) * scale, zero above the diagonal */
            softmax_grad_row(Pb + i * T, dS + i * T, r0 + i + 1, r1, scale);
        /* dv[0:r1] += P[r0:r1, 0:r1]ᵀ dy[r0:r1] */
        head_gemm(true, r1, HD, m, 1.f, Pb, T, dyc + r0 * HD, HD, add_kv, dv, ld, GM_KFROM, r0);
        /* dq[r0:r1] += dS k[0:r1] */
        head_gemm(false, m, HD, r1, 1.f, dS, T, kc, HD, !fresh, dq + r0 * ld, ld, GM_KROWS, r0);
        /* dk[0:r1] += dSᵀ q[r0:r1] */
        head_gemm(true, r1, HD, m, 1.f, dS, T, qc + r0 * HD, HD, add_kv, dk, ld, GM_KFROM, r0);
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
    size_t each = (size_t)(rb * g.T + 4 * g.HD * g.T); /* a thread's dS block, vᵀ, dy, k, q */
    float *dS = dt__scratch(ctx, (size_t)nt * each * sizeof(float));
    if (!dX || !dS) return; /* OOM is reported by the tape walk */
    const float *X = x->data, *dY = n->out->grad->data, *P = n->saved;
    int64_t pairs = g.B * g.NH;
#pragma omp parallel for schedule(static) if (pairs > 1 && pairs * g.T * g.T >= PAR_MIN_SCORES)
    for (int64_t bh = 0; bh < pairs; bh++) {
        float *mine = dS + (size_t)thread_id() * each;
        head_backward(&g, X, dY, P, dX, fresh, mine, mine + rb * g.T, bh / g.NH, bh % g.NH);
    }
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
    float *kT = dt__scratch(ctx, (size_t)nt * (size_t)(2 * g.HD * g.T) * sizeof(float));
    if (!P || !kT) return NULL;
    n->saved = n->record ? P : NULL;
    const float *X = qkv->data;
    float *Y = y->data;
    bool ring = !n->record;
#pragma omp parallel for schedule(static) if (pairs > 1 && pairs * g.T * g.T >= PAR_MIN_SCORES)
    for (int64_t bh = 0; bh < pairs; bh++) {
        float *Pb = ring ? P + (size_t)thread_id() * (size_t)(rb * g.T) : P + bh * g.T * g.T;
        head_forward(&g, X, Y, bh / g.NH, bh % g.NH, Pb, ring,
                     kT + (size_t)thread_id() * (size_t)(2 * g.HD * g.T));
    }
    return dt__node_commit(n);
}
