/* gemm_f32_onednn.c — f32 GEMM tiles on oneDNN matmul primitives (AVX-512, an op's GEMM).
 *
 * f32 GEMMs of ops (a context is given, outside parallel regions) run as oneDNN matmul
 * primitives (brgemm kernels), one per tile, on operands read in place and a scratchpad from
 * our accounted per-thread buffer. Per tile they are about as fast as dnnl_sgemm, and they
 * keep no hidden memory: sgemm mallocs packing buffers on every call (kept by the worker
 * threads' malloc arenas) and JIT-builds its whole kernel family on first use, 6 MB of
 * resident memory on the MLP benchmark that the accounting cannot see.
 * brgemm takes dense operands only, and packs B on every call. Tiles are those of
 * dt__gemm_plan_tiles, except that a GEMM with several rows of tiles and B not transposed takes
 * whole rows (a column block of such a B would need copying for every row of tiles); an operand
 * block that is not dense in memory (a transposed A's tile, a column block of a plain B, a tile
 * narrower than C) goes through a dense per-thread block. On the MLP benchmark this runs as fast as
 * sgemm. B is packed once for all row tiles when there are enough of them (gemm_pack.c).
 * A GEMM whose B or C is a strided view runs on sgemm, as do the GEMMs without a context
 * (attention's per-head products, thousands per step: a primitive call costs a few µs more)
 * and GEMMs whose B per tile is too large to pack in cache (b_pack_max). Long-K GEMMs run on
 * sgemm too, a transposed A's tiles transposed into plain blocks first (see "long K on sgemm"). */
#include "gemm_impl.h"
#include "simd_transpose.h"

#include <omp.h>
#include <unistd.h>

#define PACK_MIN_ROW_TILES 4 /* at 2 (a GPT's 256-row dW GEMMs) packing once cost more */

/* brgemm packs all of a tile's B before it computes, so that must stay in the core's cache:
 * half its L2 (1 MiB here). Beyond that sgemm, which packs B in cache-sized panels as it goes,
 * measured up to 2x faster (the dX and dW GEMMs of a GPT with d_model 768; the forward of an
 * MLP with 2048-wide layers, 4 MB of W per tile, 1.07x). */
static size_t b_pack_max(void) {
    static size_t max;
    if (!max) {
        long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
        max = l2 > 0 ? (size_t)l2 / 2 : (size_t)1 << 20;
    }
    return max;
}

/* dst (m x K, dense) = the m columns of the stored K x m block at src (rows ld apart),
 * transposed, rows ldd apart (see "long-K transposed A" below). When sums is given (at most
 * TILE_M columns), each column's sum over its K rows, in row order (dt__add_col_sums' bits), is
 * added to it. */
static void transpose_block(const float *src, int64_t ld, int64_t K, int64_t m, float *dst,
                            int64_t ldd, float *sums) {
    float s[TILE_M];
    if (sums) memset(s, 0, (size_t)m * sizeof(float));
    int64_t k = 0;
    int64_t m16 = m / 16 * 16;
    for (; dt__isa_avx512() && k + 16 <= K; k += 16) {
        const float *rows[16];
        for (int i = 0; i < 16; i++) rows[i] = src + (k + i) * ld;
        for (int64_t j = 0; j < m16; j += 16) {
            const float *rj[16];
            for (int i = 0; i < 16; i++) rj[i] = rows[i] + j;
            dt__transpose16(rj, dst + j * ldd + k, ldd);
        }
        for (int64_t j = m16; j < m; j++)
            for (int i = 0; i < 16; i++) dst[j * ldd + k + i] = rows[i][j];
        if (sums)
            for (int i = 0; i < 16; i++) {
#pragma omp simd
                for (int64_t j = 0; j < m; j++) s[j] += rows[i][j];
            }
    }
    for (; k < K; k++) {
        const float *row = src + k * ld;
        for (int64_t j = 0; j < m; j++) dst[j * ldd + k] = row[j];
        if (sums) {
#pragma omp simd
            for (int64_t j = 0; j < m; j++) s[j] += row[j];
        }
    }
    if (sums)
        for (int64_t j = 0; j < m; j++) sums[j] += s[j];
}

/* ---- long K on sgemm ------------------------------------------------------------------------
 * Over a long K (>= SGEMM_MIN_K) oneDNN's sgemm, one sequential call per tile, measured faster
 * in the GPT step than the brgemm primitives: on the dW GEMMs of its linear layers (K = the
 * batch's 1024 rows) by 2.1 ms a step, on the dx GEMMs of c_fc and c_attn (K = 1024, 768) by
 * 0.8 ms (in-process A/B, 100 step pairs each; the forward's GEMMs, whose B is transposed,
 * measured slower on sgemm and stay on brgemm). sgemm mallocs its packing buffers itself,
 * outside the accounting; on the GPT benchmark peak RSS stays at 1.05x the accounted bytes.
 * Shorter K stays on the primitives: the MLP's GEMMs (K <= 512), whose accounted total is
 * small, measured 1.66x with its K = 512 dx GEMMs on sgemm, against 1.23x on the primitives. A
 * plain A (dx) goes through dt__gemm_f32_tiled; a transposed one (dW) through ta_sgemm_tiled below:
 * each row tile's A (tm columns of the stored K x M matrix) is transposed into a plain tm x K block
 * (transpose_block, which takes the a_sums on the way), and sgemm reads B in place. Tiles are
 * dt__gemm_plan_tiles' row tiles, whole rows each. */
#define SGEMM_MIN_K 768

static bool ta_sgemm_tiled(dt_ctx *ctx, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                           const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                           float *C, int64_t ldc, const dt__gemm_opts *o) {
    struct dt_gemm_cache *c = dt__gemm_cache_of(ctx);
    dt__gemm_plan p = dt__gemm_plan_tiles(M, N, K);
    /* rows padded by one cache line, so that the transpose's 16 stores do not all land in one
     * L1 set */
    int64_t ldt = K + 16;
    size_t blk = (size_t)(ldt * p.tm);
    int nthr = omp_get_max_threads();
    if (nthr > MAX_THREADS) nthr = MAX_THREADS;
    if (!c || !dt__gemm_grow(ctx, &c->tblk, &c->tcap, (size_t)nthr * blk * sizeof(float)))
        return false;
    float *sums = o && o->a_sums && p.tm <= TILE_M ? o->a_sums : NULL;
#pragma omp parallel for schedule(static) if (p.mt > 1) num_threads(nthr)
    for (int64_t im = 0; im < p.mt; im++) {
        int64_t r0 = im * p.tm, tm = r0 + p.tm < M ? p.tm : M - r0;
        float *mine = (float *)c->tblk + (size_t)omp_get_thread_num() * blk;
        transpose_block(A + r0, lda, K, tm, mine, ldt, sums ? sums + r0 : NULL);
        if (!sums) dt__gemm_a_sums_rows(o, true, A, lda, K, r0, r0 + tm);
        dt__gemm_sgemm_seq(false, tb, tm, N, K, alpha, mine, ldt, B, ldb, beta, C + r0 * ldc, ldc);
    }
    return true;
}

/* The tile a running epilogue reads when it is not in C (dt__gemm_opts.c_is_scratch): the
 * whole-row tiles of an epilogue that writes all its results elsewhere are computed into the
 * thread's block, which stays in cache, instead of into C, whose lines would first be read from
 * memory to be written (the GPT MLP's gelu saves 4 MB a layer of that traffic). */
static _Thread_local const float *tile_src;

const float *dt__gemm_tile_src(void) {
    return tile_src;
}

/* Returns false (nothing done) when the operands do not suit, or oneDNN cannot make the
 * primitive. */
bool dt__gemm_f32_prim_tiled(dt_ctx *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                             float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                             float beta, float *C, int64_t ldc, const dt__gemm_opts *o) {
    if (ldc != N || ldb != (tb ? K : N)) return false;
    if (!ta && !tb && K >= SGEMM_MIN_K) return false; /* long K on sgemm */
    dt__gemm_plan p = dt__gemm_plan_tiles(M, N, K);
    if (!(tb && !ta) && p.mt > 1) p.tn = N, p.nt = 1;                    /* whole rows */
    if ((size_t)(K * p.tn) * sizeof(float) > b_pack_max()) return false; /* a tile's B */
    struct dt_gemm_cache *c = dt__gemm_cache_of(ctx);
    if (!c || c->broken || c->f32_broken) return false;
    int64_t ntiles = p.mt * p.nt;
    bool copy_a = ta && (p.mt > 1 || lda != M); /* a tile of a transposed A is strided */
    if (copy_a && K >= SGEMM_MIN_K)
        return ta_sgemm_tiled(ctx, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, o);
    bool copy_b = !tb && p.nt > 1; /* so is a column block of a plain B */
    bool copy_c = p.nt > 1;        /* and a tile narrower than C */
    int nthr = omp_get_max_threads();
    if (nthr > MAX_THREADS) nthr = MAX_THREADS;
    dt__gemm_key k;
    memset(&k, 0, sizeof k);
    k.K = K, k.lda = lda, k.ldb = ldb, k.ldc = ldc, k.ta = ta, k.tb = tb, k.f32 = true;
    k.alpha = alpha, k.beta = copy_c ? 0.f : beta;
    /* every tile reads all of B: pack it once (the row tiles' two primitives must agree on
     * the layout, else each packs its own) */
    k.packed_b = p.mt >= PACK_MIN_ROW_TILES && p.nt == 1;
    dt__gemm_slot *ps[2][2];
    size_t scratch;
    bool made = dt__gemm_tile_prims(c, &p, M, N, &k, copy_a, copy_b, copy_c, ps, &scratch);
    if (made && k.packed_b && !dnnl_memory_desc_equal(&ps[0][0]->b_md, &ps[1][0]->b_md)) {
        k.packed_b = false;
        made = dt__gemm_tile_prims(c, &p, M, N, &k, copy_a, copy_b, copy_c, ps, &scratch);
    }
    if (!made) {
        c->f32_broken = true;
        dt_log(DT_LOG_WARN, "oneDNN f32 matmul unavailable; f32 GEMMs run on sgemm");
        return false;
    }
    if (!dt__gemm_thread_resources(ctx, c, nthr, scratch)) return false;
    /* packed B: by the tile loop's threads (the panels), else by a reorder now */
    const float *Bp = B;
    int64_t pack_units = 0;
    if (k.packed_b) {
        if (!dt__gemm_grow(ctx, &c->bpack, &c->bpcap, dnnl_memory_desc_get_size(&ps[0][0]->b_md)))
            return false;
        if (dt__gemm_is_panel_layout(&ps[0][0]->b_md, K, N))
            pack_units = dt__gemm_round_up(N, PANEL) / PANEL *
                         (dt__gemm_round_up(K, PANEL_ROWS) / PANEL_ROWS);
        else if (!dt__gemm_reorder_b(c, ps[0][0], B))
            return false;
        Bp = c->bpack;
    }
    /* a thread's block: A's tile (K x tm), B's tile (K x tn), C's tile (tm x tn), as needed;
     * C's when it is scratch to the epilogue too (see tile_src) */
    bool c_blk = o && o->epilogue && o->c_is_scratch && !copy_c && p.nt == 1 && beta == 0.f;
    size_t a_sz = copy_a ? (size_t)(K * p.tm) : 0, b_sz = copy_b ? (size_t)(K * p.tn) : 0;
    size_t blk = a_sz + b_sz + (copy_c || c_blk ? (size_t)(p.tm * p.tn) : 0);
    if (blk && !dt__gemm_grow(ctx, &c->tblk, &c->tcap, (size_t)nthr * blk * sizeof(float)))
        return false;
    /* nothing can fail from here on */
    dt__gemm_tile_fn pro = o ? o->prologue : NULL, ep = o ? o->epilogue : NULL;
    void *arg = o ? o->arg : NULL;
    bool pro_in_loop = pro && !ta && p.nt == 1; /* one tile per row block */
    if (pro && !pro_in_loop) dt__gemm_prologue_all(o, ta, &p, M, N);
    /* a row block's a_sums are taken while its A is copied (every tile of it has all columns) */
    bool sum_in_copy = copy_a && o && o->a_sums && p.nt == 1 && p.tm <= TILE_M;
    bool failed = false;
#pragma omp parallel if (ntiles > 1) num_threads(nthr)
    {
        if (pack_units) {
#pragma omp for schedule(static)
            for (int64_t u = 0; u < pack_units; u++)
                dt__gemm_pack_panel_rows(B, ldb, tb, K, N, c->bpack, u);
        }
#pragma omp for schedule(static) reduction(|| : failed)
        for (int64_t t = 0; t < ntiles; t++) {
            int64_t im = t / p.nt, jn = t % p.nt;
            int64_t r0 = im * p.tm, c0 = jn * p.tn;
            int64_t r1 = r0 + p.tm < M ? r0 + p.tm : M, c1 = c0 + p.tn < N ? c0 + p.tn : N;
            int64_t tm = r1 - r0, tn = c1 - c0;
            if (pro_in_loop) pro(arg, r0, r1, 0, N);
            float *mine = (float *)c->tblk + (size_t)omp_get_thread_num() * blk;
            const float *a = ta ? A + r0 : A + r0 * lda, *b = tb ? Bp + c0 * ldb : Bp + c0;
            if (copy_a) { /* columns r0..r1 of the stored K x M matrix, as a dense K x tm block */
                if (sum_in_copy) { /* with the a_sums of those columns (dt__add_col_sums' bits) */
                    float s[TILE_M] = {0};
                    for (int64_t k = 0; k < K; k++) {
                        const float *src = A + k * lda + r0;
                        float *d = mine + k * tm;
#pragma omp simd
                        for (int64_t j = 0; j < tm; j++) {
                            d[j] = src[j];
                            s[j] += src[j];
                        }
                    }
                    for (int64_t j = 0; j < tm; j++) o->a_sums[r0 + j] += s[j];
                } else {
                    for (int64_t k = 0; k < K; k++)
                        memcpy(mine + k * tm, A + k * lda + r0, (size_t)tm * sizeof(float));
                    if (jn == 0) dt__gemm_a_sums_rows(o, ta, A, lda, K, r0, r1);
                }
                a = mine;
            } else if (jn == 0) {
                dt__gemm_a_sums_rows(o, ta, A, lda, K, r0, r1);
            }
            if (copy_b) { /* columns c0..c1 of the K x N matrix, as a dense K x tn block */
                float *bb = mine + a_sz;
                for (int64_t k = 0; k < K; k++)
                    memcpy(bb + k * tn, B + k * ldb + c0, (size_t)tn * sizeof(float));
                b = bb;
            }
            float *ct = C + r0 * ldc + c0, *dst = copy_c || c_blk ? mine + a_sz + b_sz : ct;
            int outer = omp_in_parallel() ? 1 : omp_get_max_threads();
            if (outer > 1) omp_set_num_threads(1);
            bool ok = dt__gemm_run_tile(c, ps[im == p.mt - 1][jn == p.nt - 1], omp_get_thread_num(),
                                        a, b, dst);
            if (outer > 1) omp_set_num_threads(outer);
            if (!ok) { /* not expected once the primitive exists */
                dt__gemm_sgemm_seq(ta, tb, tm, tn, K, alpha, ta ? A + r0 : A + r0 * lda, lda,
                                   tb ? B + c0 * ldb : B + c0, ldb, beta, ct, ldc);
                failed = true;
                dst = ct;
            } else if (copy_c) {
                for (int64_t i = 0; i < tm; i++) {
                    float *cr = ct + i * ldc;
                    const float *dr = dst + i * tn;
                    if (beta == 0.f)
                        memcpy(cr, dr, (size_t)tn * sizeof(float));
                    else
                        for (int64_t j = 0; j < tn; j++) cr[j] = beta * cr[j] + dr[j];
                }
            }
            tile_src = c_blk && dst != ct ? dst : NULL;
            if (ep) ep(arg, r0, r1, c0, c1);
            tile_src = NULL;
        }
    }
    if (failed) dt_log(DT_LOG_WARN, "oneDNN f32 matmul failed on a tile; ran it on sgemm");
    return true;
}
