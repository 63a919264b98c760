/* gemm.c — row-major GEMM entry point for every matmul-class op.
 *
 * Tiles. C is cut into tiles that depend on the GEMM's shape only (dt__gemm_plan_tiles); each tile
 * is one sequential GEMM and the tiles run in parallel with OpenMP, so the bits never depend on the
 * thread count. A caller may hook a prologue (make a row block of A, e.g. an activation gradient,
 * right before it is read) and an epilogue (bias, activation, bias gradient on a finished tile
 * while it is in cache) into the loop: see dt__gemm_opts in tensor_impl.h.
 *
 * f32 on AVX-512 runs on oneDNN: an op's GEMM (a context is given) as one matmul primitive per
 * tile (gemm_f32_onednn.c: no memory hidden from the accounting), the others on oneDNN's
 * sgemm (dnnl_sgemm), one call per tile. At the GPT benchmark's sizes oneDNN measured 5-25%
 * faster than OpenBLAS, and tiles as fast as oneDNN's own threading, which is not usable as is:
 * it splits K for some shapes, so its bits change with the thread count. OpenBLAS stays as the
 * fallback should oneDNN report an error.
 * Below AVX-512 every f32 tile runs on OpenBLAS's sgemm instead (see "f32 below AVX-512"):
 * oneDNN 2.6 has no AVX2 brgemm, and its AVX2 matmul and sgemm tiles measured at about half of
 * OpenBLAS's rate, where OpenBLAS tiles match OpenBLAS's own threading.
 *
 * Under bf16 autocast each tile is a oneDNN matmul primitive (AMX / avx512_bf16 with f32
 * accumulation and f32 output; Debian's OpenBLAS has no bf16 GEMM) on operands rounded to
 * bf16, see gemm_bf16.c. Primitives are expensive to create, so each context keeps a cache
 * keyed by the tile's geometry (gemm_onednn.c); operand buffers and scratchpads are reused and
 * charged to DT_MEM_OTHER. Small GEMMs, GEMMs called from inside a parallel region, and CPUs
 * without bf16 instructions use sgemm on operands rounded to bf16 first (gemm_bf16_storage.c),
 * so the numerics are the same either way. Under fp16 autocast every op's GEMM runs that way
 * with fp16 rounding, C's tiles rounded too (there is no fp16 GEMM kernel for these CPUs: the
 * point is fp16's numerics, overflow included). dt__gemm_f32 ignores autocast (attention keeps its
 * per-head products in f32). The other files of the GEMM are listed in gemm_impl.h. */
#include "gemm_impl.h"

#include <cblas.h>
#include <omp.h>

#define BF16_MIN_WORK ((int64_t)48 * 48 * 48)

/* ---- f32 tiles ----------------------------------------------------------------------------
 * C (M, N) is cut into tiles of at most TILE_M rows; when that gives fewer than MIN_TILES tiles
 * the columns are halved too (down to TILE_N_MIN wide), so the two cores both get work on the
 * MLP's 128-row GEMMs. GEMMs under TILE_MIN_WORK multiply-adds are one tile. 128-row tiles
 * measured as fast as oneDNN's own threading and keep a tile's output (128 x N floats) in L2
 * for the epilogue. */
#define TILE_N_MIN 64
#define MIN_TILES 4
#define TILE_MIN_WORK ((int64_t)1 << 20)

dt__gemm_plan dt__gemm_plan_tiles(int64_t M, int64_t N, int64_t K) {
    dt__gemm_plan p = {M, N, 1, 1};
    if (M * N * K < TILE_MIN_WORK) return p;
    p.mt = (M + TILE_M - 1) / TILE_M;
    p.tm = (M + p.mt - 1) / p.mt;
    while (p.mt * p.nt < MIN_TILES && N / (2 * p.nt) >= TILE_N_MIN) p.nt *= 2;
    if (p.nt > 1) {
        p.tn = ((N + p.nt - 1) / p.nt + 15) / 16 * 16; /* whole cache lines */
        p.nt = (N + p.tn - 1) / p.tn;
    }
    return p;
}

/* Row tiles only (every tile has all N columns): the bf16 path's plan for a transposed A, whose
 * tiles are repacked dense (oneDNN's AMX kernel takes a transposed operand only when dense). */
dt__gemm_plan dt__gemm_plan_row_tiles(int64_t M, int64_t N, int64_t K) {
    dt__gemm_plan p = {M, N, 1, 1};
    if (M * N * K < TILE_MIN_WORK) return p;
    p.mt = (M + TILE_M - 1) / TILE_M;
    p.tm = (M + p.mt - 1) / p.mt;
    return p;
}

/* ---- f32 below AVX-512 ---------------------------------------------------------------------
 * Every f32 tile is one single-threaded OpenBLAS sgemm (Debian's OpenMP build runs one thread
 * inside a parallel region, and follows omp_set_num_threads outside one), so the bits depend on
 * the tile plan only, as on oneDNN. Measured forced to AVX2 on Zen 4 (docs/performance.md):
 * oneDNN's matmul primitive tiles and dnnl_sgemm tiles both ran 1024^3 at about 0.5x OpenBLAS's
 * own threading, OpenBLAS tiles at 1.0x or better. */
bool dt__gemm_blas_path(void) {
    return dt_cpu_isa_level() < DT_CPU_AVX512;
}

/* OpenBLAS packs into buffers of its own, kept for the process and reused; an op's GEMM charges
 * them to DT_MEM_OTHER as a high-water mark per context: per thread a K block (<= 512) of op(B)'s
 * columns (<= 4096) and of a row block (<= 768) of op(A). That bound was measured above the
 * resident growth of OpenBLAS 0.3.21's Haswell sgemm (1.8 MB a thread at 1024^3, 5.6 at
 * 4096^3). Over the device's budget the GEMM still runs (the buffers exist already) and the
 * charge stays where it was. */
void dt__gemm_blas_charge(dt_ctx *ctx, int64_t M, int64_t N, int64_t K) {
    struct dt_gemm_cache *c = dt__gemm_cache_of(ctx);
    if (!c) return;
    int64_t kb = K < 512 ? K : 512, nb = N < 4096 ? N : 4096, mb = M < 768 ? M : 768;
    int64_t nthr = omp_get_max_threads() < MAX_THREADS ? omp_get_max_threads() : MAX_THREADS;
    int64_t need = nthr * kb * (nb + mb) * (int64_t)sizeof(float);
#pragma omp critical(dt_blas_charge) /* called from parallel regions too */
    if (need > c->blas_charged) {
        if (dt_mem_charge(ctx->dev, DT_MEM_OTHER, need - c->blas_charged) == DT_OK)
            c->blas_charged = need;
        else
            dt_clear_error();
    }
}

/* One sequential f32 GEMM: on OpenBLAS below AVX-512, else on oneDNN (OpenBLAS should oneDNN
 * report an error). The library runs single-threaded inside an active parallel region; outside
 * one (a single tile, or one thread) its thread count is capped at 1 for the call. */
void dt__gemm_sgemm_seq(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                        float *C, int64_t ldc) {
    int outer = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (outer > 1) omp_set_num_threads(1);
    bool blas = dt__gemm_blas_path() || dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha,
                                                   A, lda, B, ldb, beta, C, ldc) != dnnl_success;
    if (blas)
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    (blasint)M, (blasint)N, (blasint)K, alpha, A, (blasint)lda, B, (blasint)ldb,
                    beta, C, (blasint)ldc);
    if (outer > 1) omp_set_num_threads(outer);
}

/* Run the prologue of every row block up front (when it cannot run inside the tile loop). */
void dt__gemm_prologue_all(const dt__gemm_opts *o, bool ta, const dt__gemm_plan *p, int64_t M,
                           int64_t N) {
    if (ta || p->mt == 1) {
        o->prologue(o->arg, 0, M, 0, N);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < p->mt; i++)
        o->prologue(o->arg, i * p->tm, (i + 1) * p->tm < M ? (i + 1) * p->tm : M, 0, N);
}

void dt__add_col_sums(float *out, const float *A, int64_t lda, int64_t rows, int64_t c0,
                      int64_t c1) {
    for (int64_t b0 = c0; b0 < c1; b0 += 64) {
        int64_t w = c1 - b0 < 64 ? c1 - b0 : 64;
        float s[64] = {0};
        for (int64_t r = 0; r < rows; r++) {
            const float *row = A + r * lda + b0;
#pragma omp simd
            for (int64_t j = 0; j < w; j++) s[j] += row[j];
        }
        for (int64_t j = 0; j < w; j++) out[b0 + j] += s[j];
    }
}

/* opts->a_sums for rows [r0, r1) of C: op(A)'s rows are the stored columns of a transposed A
 * (K x M), the stored rows of a plain one */
void dt__gemm_a_sums_rows(const dt__gemm_opts *o, bool ta, const float *A, int64_t lda, int64_t K,
                          int64_t r0, int64_t r1) {
    if (!o || !o->a_sums) return;
    if (ta) {
        dt__add_col_sums(o->a_sums, A, lda, K, r0, r1);
        return;
    }
    for (int64_t i = r0; i < r1; i++) {
        float s = 0.f;
        for (int64_t k = 0; k < K; k++) s += A[i * lda + k];
        o->a_sums[i] += s;
    }
}

void dt__gemm_f32_tiled(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                        float *C, int64_t ldc, const dt__gemm_opts *o) {
    dt__gemm_plan p = dt__gemm_plan_tiles(M, N, K);
    int64_t ntiles = p.mt * p.nt;
    dt__gemm_tile_fn pro = o ? o->prologue : NULL, ep = o ? o->epilogue : NULL;
    void *arg = o ? o->arg : NULL;
    bool pro_in_loop = pro && !ta && p.nt == 1; /* one tile per row block */
    if (pro && !pro_in_loop) dt__gemm_prologue_all(o, ta, &p, M, N);
    if (ntiles == 1) { /* no OpenMP region at all: attention makes thousands of these */
        if (pro_in_loop) pro(arg, 0, M, 0, N);
        dt__gemm_sgemm_seq(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        dt__gemm_a_sums_rows(o, ta, A, lda, K, 0, M);
        if (ep) ep(arg, 0, M, 0, N);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < ntiles; t++) {
        int64_t r0 = t / p.nt * p.tm, c0 = t % p.nt * p.tn;
        int64_t r1 = r0 + p.tm < M ? r0 + p.tm : M, c1 = c0 + p.tn < N ? c0 + p.tn : N;
        if (pro_in_loop) pro(arg, r0, r1, 0, N);
        /* A's rows r0.. are columns of the stored matrix when transposed; likewise B's cols */
        const float *a = ta ? A + r0 : A + r0 * lda, *b = tb ? B + c0 * ldb : B + c0;
        dt__gemm_sgemm_seq(ta, tb, r1 - r0, c1 - c0, K, alpha, a, lda, b, ldb, beta,
                           C + r0 * ldc + c0, ldc);
        if (c0 == 0) dt__gemm_a_sums_rows(o, ta, A, lda, K, r0, r1);
        if (ep) ep(arg, r0, r1, c0, c1);
    }
}

void dt__gemm_ex(const dt_ctx *cctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                 const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                 int64_t ldc, const dt__gemm_opts *o) {
    dt_ctx *ctx = (dt_ctx *)cctx; /* the GEMM cache is the only state touched */
    if (M == 0 || N == 0) {
        if (M > 0) /* C has no columns; op(A) still has its rows */
            dt__gemm_a_sums_rows(o, ta, A, lda, K, 0, M);
        return;
    }
    if (K == 0) {
        if (o && o->prologue) o->prologue(o->arg, 0, M, 0, N);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++)
                C[i * ldc + j] = beta == 0.f ? 0.f : beta * C[i * ldc + j];
        if (o && o->epilogue) o->epilogue(o->arg, 0, M, 0, N);
        return;
    }
    if (ctx && ctx->autocast == DT_DTYPE_F16) {
        dt__gemm_f16(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, o);
        return;
    }
    dt__bf16_path bf16 = ctx && ctx->autocast == DT_DTYPE_BF16 ? dt__bf16_path_now() : DT__BF16_F32;
    if (bf16 != DT__BF16_F32) {
        /* oneDNN only outside parallel regions (the tiles' streams and scratchpads are per
         * thread of this call). omp_get_level counts inactive regions too, so the choice never
         * depends on the thread count. */
        if (M * N * K >= BF16_MIN_WORK && bf16 == DT__BF16_NATIVE && omp_get_level() == 0 &&
            dt__gemm_bf16_tiled(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, o))
            return;
        dt__gemm_rounded(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, o);
        return;
    }
    if (ctx && dt__gemm_blas_path())
        dt__gemm_blas_charge(ctx, M, N, K);
    else if (ctx && omp_get_level() == 0 &&
             dt__gemm_f32_prim_tiled(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, o))
        return;
    dt__gemm_f32_tiled(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, o);
}

void dt__gemm(const dt_ctx *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
              int64_t ldc) {
    dt__gemm_ex(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
}

void dt__gemm_f32(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                  int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    dt__gemm(NULL, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
