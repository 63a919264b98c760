/* gemm_bf16.c — bf16 GEMM tiles on oneDNN (AMX / avx512_bf16), and the bf16 path of the process.
 *
 * bf16 tiles. The same tiles as f32 (row tiles only for a transposed A), each one a oneDNN
 * matmul primitive (AMX / avx512_bf16) running sequentially on its thread with its own stream
 * and scratchpad (user scratchpad mode: the library-managed one is malloc'ed on every
 * execution), between the prologue and the epilogue. Primitives are created with oneDNN capped
 * to one thread, so their plan never depends on the thread count.
 * Operands are rounded to bf16 in their stored orientation: B whole, up front (every tile reads
 * it); A tile by tile inside the loop while the tile's rows are hot (up front when the columns
 * are split). oneDNN's AMX kernel takes a transposed A only dense, so each tile of one is
 * copied into a per-thread K x tm block. A caller that already holds a rounded operand, or
 * wants one kept for a later GEMM, says so through opts->bf16 (linear keeps x and w from its
 * forward for its backward, and dy from its dx GEMM for its dW GEMM): no operand is rounded
 * twice.
 *
 * The path (dt__bf16_path_now, dt_bf16_path, dt_matmul_compute): native bf16 tiles with the
 * bf16 instructions, else what $DTRAIN_BF16_PATH picks (see "bf16 without bf16 instructions").
 */
#include "gemm_impl.h"

#include <omp.h>
#include <pthread.h>
#include <stdlib.h>

/* Round a stored rows x cols matrix with leading dim ld to bf16, rows x cols dense (the
 * caller's thread only). */
static void pack_rows(const float *src, int64_t rows, int64_t cols, int64_t ld, uint16_t *dst) {
    for (int64_t r = 0; r < rows; r++) dt__f32_to_bf16_seq(src + r * ld, dst + r * cols, cols);
}

/* The same, in parallel over rows. */
static void pack_bf16(const float *src, int64_t rows, int64_t cols, int64_t ld, uint16_t *dst) {
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
    for (int64_t r = 0; r < rows; r++) dt__f32_to_bf16_seq(src + r * ld, dst + r * cols, cols);
}

bool dt__gemm_bf16_tiled(dt_ctx *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                         float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                         float beta, float *C, int64_t ldc, const dt__gemm_opts *o) {
    struct dt_gemm_cache *c = dt__gemm_cache_of(ctx);
    const dt__gemm_bf16 *io = o ? &o->bf16 : NULL;
    dt__gemm_tile_fn pro = o ? o->prologue : NULL, ep = o ? o->epilogue : NULL;
    void *arg = o ? o->arg : NULL;
    if (!c || c->broken) return false;
    int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    dt__gemm_plan p = ta ? dt__gemm_plan_row_tiles(M, N, K) : dt__gemm_plan_tiles(M, N, K);
    int64_t ntiles = p.mt * p.nt;
    int nthr = omp_get_max_threads();
    if (nthr > MAX_THREADS) nthr = MAX_THREADS;
    dt__gemm_key k;
    memset(&k, 0, sizeof k);
    k.K = K, k.lda = ac, k.ldb = bc, k.ldc = ldc, k.ta = ta, k.tb = tb;
    k.alpha = alpha, k.beta = beta;
    dt__gemm_slot *ps[2][2];
    size_t scratch;
    if (!dt__gemm_tile_prims(c, &p, M, N, &k, ta, false, false, ps, &scratch)) {
        c->broken = true;
        dt_log(DT_LOG_WARN, "oneDNN bf16 matmul unavailable; bf16 autocast falls back to f32 GEMM");
        return false;
    }
    if (!dt__gemm_thread_resources(ctx, c, nthr, scratch)) return false;
    const uint16_t *b16 = io ? io->b : NULL;
    if (!b16) {
        uint16_t *dst = io && io->b_out
                            ? io->b_out
                            : dt__gemm_grow(ctx, &c->bbuf, &c->bcap, (size_t)(br * bc) * 2);
        if (!dst) return false;
        pack_bf16(B, br, bc, ldb, dst);
        b16 = dst;
    }
    /* A: a16 holds it whole (given, or rounded up front), or a_fill gets it tile by tile.
     * A transposed A's tiles are then copied dense into per-thread blocks (K x tm). The
     * prologue runs in the loop only with tile-by-tile rounding (one tile per row block). */
    const uint16_t *a16 = io ? io->a : NULL;
    uint16_t *a_dst = NULL, *a_fill = NULL, *blocks = NULL;
    if (!a16 && io && io->a_out)
        a_dst = io->a_out;
    else if (!a16 && !ta &&
             !(a_dst = dt__gemm_grow(ctx, &c->abuf, &c->acap, (size_t)(ar * ac) * 2)))
        return false;
    if (ta && !(blocks = dt__gemm_grow(ctx, &c->abuf, &c->acap, (size_t)(nthr * K * p.tm) * 2)))
        return false;
    /* nothing can fail from here on */
    bool pro_in_loop = pro && !ta && p.nt == 1 && !a16;
    if (pro && !pro_in_loop) dt__gemm_prologue_all(o, ta, &p, M, N);
    if (a_dst) {
        if (ta || p.nt > 1)
            pack_bf16(A, ar, ac, lda, a_dst);
        else
            a_fill = a_dst;
        a16 = a_dst;
    }
    bool failed = false;
#pragma omp parallel for schedule(static) if (ntiles > 1) num_threads(nthr) reduction(|| : failed)
    for (int64_t t = 0; t < ntiles; t++) {
        int64_t im = t / p.nt, jn = t % p.nt;
        int64_t r0 = im * p.tm, c0 = jn * p.tn;
        int64_t r1 = r0 + p.tm < M ? r0 + p.tm : M, c1 = c0 + p.tn < N ? c0 + p.tn : N;
        int64_t tm = r1 - r0;
        const uint16_t *a;
        if (ta) { /* stored columns r0..r1 of the K x M matrix, made a dense K x tm block */
            uint16_t *blk = blocks + (size_t)omp_get_thread_num() * (size_t)(K * p.tm);
            for (int64_t k = 0; k < K; k++) {
                if (a16)
                    memcpy(blk + k * tm, a16 + k * ac + r0, (size_t)tm * 2);
                else
                    dt__f32_to_bf16_seq(A + k * lda + r0, blk + k * tm, tm);
            }
            a = blk;
            if (jn == 0) dt__gemm_a_sums_rows(o, ta, A, lda, K, r0, r1);
        } else {
            if (pro_in_loop) pro(arg, r0, r1, 0, N);
            if (a_fill) pack_rows(A + r0 * lda, tm, K, lda, a_fill + r0 * ac);
            a = a16 + r0 * ac;
        }
        const uint16_t *b = tb ? b16 + c0 * bc : b16 + c0;
        dt__gemm_slot *s = ps[im == p.mt - 1][jn == p.nt - 1];
        int outer = omp_in_parallel() ? 1 : omp_get_max_threads();
        if (outer > 1) omp_set_num_threads(1);
        bool ok = dt__gemm_run_tile(c, s, omp_get_thread_num(), a, b, C + r0 * ldc + c0);
        if (outer > 1) omp_set_num_threads(outer);
        if (!ok) { /* not expected once the primitive exists: this tile in f32 */
            dt__gemm_sgemm_seq(ta, tb, tm, c1 - c0, K, alpha, ta ? A + r0 : A + r0 * lda, lda,
                               tb ? B + c0 * ldb : B + c0, ldb, beta, C + r0 * ldc + c0, ldc);
            failed = true;
        }
        if (ep) ep(arg, r0, r1, c0, c1);
    }
    if (failed) dt_log(DT_LOG_WARN, "oneDNN bf16 matmul failed on a tile; computed it in f32");
    return true;
}

/* ---- bf16 without bf16 instructions ----------------------------------------------------------
 * Without them bf16 autocast can keep bf16's numerics on f32 kernels (the storage path,
 * gemm_bf16_storage.c: every operand rounded once a step, about 1.5x the bytes of f32's saved
 * tensors for linear) or compute in plain f32. The rounding passes cost more than the f32 GEMM they
 * feed saves nothing of, so the storage path cannot beat f32 there; forced to AVX2 on the GPT
 * benchmark it measured a few percent behind (docs/performance.md). $DTRAIN_BF16_PATH picks one
 * (storage | f32), read once per process; the f32 fallback is announced once in the log when
 * autocast is first set to bf16 (dt_ctx_set_autocast). */
#define BF16_FALLBACK_DEFAULT DT__BF16_F32

static pthread_once_t bf16_once = PTHREAD_ONCE_INIT;
static dt__bf16_path bf16_fallback;

/* bf16 tiles need the bf16 instructions (or AMX); $DTRAIN_ISA can take them away. */
static bool cpu_has_bf16(void) {
    return dt_cpu_isa_level() >= DT_CPU_AVX512_BF16;
}

static void bf16_init(void) {
    bf16_fallback = BF16_FALLBACK_DEFAULT;
    const char *v = getenv("DTRAIN_BF16_PATH");
    if (!v || !*v) return;
    if (!strcmp(v, "storage"))
        bf16_fallback = DT__BF16_STORAGE;
    else if (!strcmp(v, "f32"))
        bf16_fallback = DT__BF16_F32;
    else
        dt_log(DT_LOG_WARN, "DTRAIN_BF16_PATH=%s is not a path (valid: storage, f32); using %s", v,
               BF16_FALLBACK_DEFAULT == DT__BF16_F32 ? "f32" : "storage");
}

dt__bf16_path dt__bf16_path_now(void) {
    if (cpu_has_bf16()) return DT__BF16_NATIVE;
    pthread_once(&bf16_once, bf16_init);
    return bf16_fallback;
}

dt__bf16_path dt__bf16_fallback_override(dt__bf16_path p) {
    pthread_once(&bf16_once, bf16_init);
    dt__bf16_path prev = bf16_fallback;
    if (p != DT__BF16_NATIVE) bf16_fallback = p;
    return prev;
}

const char *dt_bf16_path(void) {
    dt__bf16_path p = dt__bf16_path_now();
    return p == DT__BF16_NATIVE    ? "native"
           : p == DT__BF16_STORAGE ? "storage-f32-compute"
                                   : "f32-fallback";
}

const char *dt_matmul_compute(dt_dtype compute) {
    bool blas = dt__gemm_blas_path();
    if (compute == DT_DTYPE_F16) /* fp16 rounding around f32 tiles (gemm_bf16_storage.c) */
        return blas ? "f16-storage-f32-openblas" : "f16-storage-f32-onednn";
    dt__bf16_path p = compute == DT_DTYPE_BF16 ? dt__bf16_path_now() : DT__BF16_F32;
    if (p == DT__BF16_F32) return blas ? "f32-openblas" : "f32-onednn";
    if (p == DT__BF16_NATIVE) return "bf16-onednn";
    return blas ? "bf16-storage-f32-openblas" : "bf16-storage-f32-onednn";
}
