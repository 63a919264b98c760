/* gemm.c — row-major GEMM entry point for every matmul-class op.
 *
 * Tiles. C is cut into tiles that depend on the GEMM's shape only (plan_tiles); each tile is
 * one sequential GEMM and the tiles run in parallel with OpenMP, so the bits never depend on
 * the thread count. A caller may hook a prologue (make a row block of A, e.g. an activation
 * gradient, right before it is read) and an epilogue (bias, activation, bias gradient on a
 * finished tile while it is in cache) into the loop: see dt__gemm_opts in tensor_impl.h.
 *
 * f32 on AVX-512 runs on oneDNN: an op's GEMM (a context is given) as one matmul primitive per
 * tile (see "f32 primitive tiles": no memory hidden from the accounting), the others on oneDNN's
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
 * bf16, see "bf16 tiles". Primitives are expensive to create, so each context keeps a cache
 * keyed by the tile's geometry; operand buffers and scratchpads are reused and charged to
 * DT_MEM_OTHER. Small GEMMs, GEMMs called from inside a parallel region, and CPUs without
 * bf16 instructions use sgemm on operands rounded to bf16 first, so the numerics are the same
 * either way. dt__gemm_f32 ignores autocast (attention keeps its per-head products in f32). */
#include "../tensor_impl.h"
#include "simd_transpose.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define CACHE_SLOTS 96
#define BF16_MIN_WORK ((int64_t)48 * 48 * 48)
#define MAX_THREADS 64

/* the geometry of one tile GEMM: lda / ldb are the strides of the bf16 operand buffers */
typedef struct prim_key {
    int64_t M, N, K, lda, ldb, ldc;
    bool ta, tb;
    bool f32;      /* operands f32 (else bf16); C is always f32 */
    bool packed_b; /* B comes in the primitive's own blocked layout ("B packed once") */
    float alpha, beta;
} prim_key;

typedef struct prim_slot {
    prim_key key;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a_md, b_md, c_md, s_md;
    dnnl_memory_t (*mem)[4]; /* per thread: a, b, c, scratchpad; pointed at each tile's data */
    size_t scratch_bytes;
    /* packed_b: B as stored (b_md is then the blocked layout), and the reorder between them,
     * made on first use, with its two memory objects */
    dnnl_memory_desc_t bp_md;
    dnnl_primitive_t reorder;
    dnnl_memory_t rmem[2];
    bool used;
} prim_slot;

struct dt_gemm_cache {
    dnnl_engine_t engine;
    dnnl_stream_t stream[MAX_THREADS]; /* one per thread: a stream is not thread-safe */
    prim_slot slot[CACHE_SLOTS];
    int next; /* round-robin eviction */
    /* work buffers, grown on demand (grow); capacities in bytes */
    void *abuf, *bbuf; /* bf16 operands */
    void *tblk;        /* f32 primitives: per-thread dense copies of A, B and C tiles */
    void *bpack;       /* f32 primitives: B packed once for all tiles ("B packed once") */
    size_t acap, bcap, tcap, bpcap;
    /* user-managed scratchpads, one per thread (library-managed ones are malloc'ed per
     * execution and cannot be shared by two threads running one primitive) */
    char *scratch;
    size_t scratch_each, scratch_cap;
    int64_t blas_charged; /* bytes charged for OpenBLAS's packing buffers (blas_charge) */
    bool broken;          /* oneDNN matmul unusable: stay on the f32 path */
    bool f32_broken;      /* oneDNN f32 matmul unusable: f32 GEMMs on sgemm */
};

static void slot_release(prim_slot *s) {
    dnnl_primitive_destroy(s->prim);
    if (s->mem)
        for (int t = 0; t < MAX_THREADS; t++)
            for (int j = 0; j < 4; j++)
                if (s->mem[t][j]) dnnl_memory_destroy(s->mem[t][j]);
    free(s->mem);
    s->mem = NULL;
    if (s->reorder) dnnl_primitive_destroy(s->reorder);
    for (int j = 0; j < 2; j++)
        if (s->rmem[j]) dnnl_memory_destroy(s->rmem[j]);
    s->reorder = NULL;
    s->rmem[0] = s->rmem[1] = NULL;
    s->used = false;
}

/* bf16 tiles need the bf16 instructions (or AMX); $DTRAIN_ISA can take them away. */
static bool cpu_has_bf16(void) {
    return dt_cpu_isa_level() >= DT_CPU_AVX512_BF16;
}

void dt__gemm_cache_free(dt_ctx *ctx) {
    struct dt_gemm_cache *c = ctx->gemm_cache;
    if (!c) return;
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (c->slot[i].used) slot_release(&c->slot[i]);
    for (int i = 0; i < MAX_THREADS; i++)
        if (c->stream[i]) dnnl_stream_destroy(c->stream[i]);
    if (c->engine) dnnl_engine_destroy(c->engine);
    dt_mem_free(ctx->dev, DT_MEM_OTHER, c->abuf, c->acap);
    dt_mem_free(ctx->dev, DT_MEM_OTHER, c->bbuf, c->bcap);
    dt_mem_free(ctx->dev, DT_MEM_OTHER, c->tblk, c->tcap);
    dt_mem_free(ctx->dev, DT_MEM_OTHER, c->bpack, c->bpcap);
    dt_mem_free(ctx->dev, DT_MEM_OTHER, c->scratch, c->scratch_cap);
    dt_mem_release(ctx->dev, DT_MEM_OTHER, c->blas_charged);
    free(c);
    ctx->gemm_cache = NULL;
}

/* Made once per context; threads of a parallel region (a convolution's per-image GEMMs on
 * OpenBLAS) may ask for it at the same time, so the first one makes it under a lock. */
static struct dt_gemm_cache *cache_of(dt_ctx *ctx) {
    struct dt_gemm_cache *c;
#pragma omp atomic read
    c = ctx->gemm_cache;
    if (c) return c;
#pragma omp critical(dt_gemm_cache_make)
    {
        c = ctx->gemm_cache;
        if (!c && (c = calloc(1, sizeof *c)) != NULL) {
            if (dnnl_engine_create(&c->engine, dnnl_cpu, 0) != dnnl_success) c->broken = true;
#pragma omp atomic write
            ctx->gemm_cache = c;
        }
    }
    return c;
}

/* *buf with room for `need` bytes (*cap bytes now); what it held is not kept. NULL when out of
 * memory (the old buffer stays). */
static void *grow(dt_ctx *ctx, void **buf, size_t *cap, size_t need) {
    if (need <= *cap) return *buf;
    void *nb = dt_mem_alloc(ctx->dev, DT_MEM_OTHER, need);
    if (!nb) return NULL;
    dt_mem_free(ctx->dev, DT_MEM_OTHER, *buf, *cap);
    *buf = nb;
    *cap = need;
    return nb;
}

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

/* The primitive for one tile geometry, made on first use. It is created with oneDNN capped to
 * one thread, so its plan (blocking, no split of K across threads) is the same whatever the
 * thread count, and it runs sequentially inside the tile loop's parallel region. */
static prim_slot *get_prim(struct dt_gemm_cache *c, const prim_key *k) {
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (c->slot[i].used && !memcmp(&c->slot[i].key, k, sizeof *k)) return &c->slot[i];
    prim_slot *s = &c->slot[c->next];
    c->next = (c->next + 1) % CACHE_SLOTS;
    if (s->used) slot_release(s);
    dnnl_data_type_t ot = k->f32 ? dnnl_f32 : dnnl_bf16;
    dnnl_dims_t ad = {k->M, k->K}, bd = {k->K, k->N}, cd = {k->M, k->N};
    /* a stored row-major operand, or its transpose read in place */
    dnnl_dims_t as = {k->ta ? 1 : k->lda, k->ta ? k->lda : 1};
    dnnl_dims_t bs = {k->tb ? 1 : k->ldb, k->tb ? k->ldb : 1}, cs = {k->ldc, 1};
    dnnl_memory_desc_init_by_strides(&s->a_md, 2, ad, ot, as);
    dnnl_memory_desc_init_by_strides(&s->b_md, 2, bd, ot, bs);
    s->bp_md = s->b_md;
    if (k->packed_b) dnnl_memory_desc_init_by_tag(&s->b_md, 2, bd, ot, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_strides(&s->c_md, 2, cd, dnnl_f32, cs);
    dnnl_matmul_desc_t md;
    dnnl_primitive_attr_t attr;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    bool ok = dnnl_matmul_desc_init(&md, &s->a_md, &s->b_md, NULL, &s->c_md) == dnnl_success &&
              dnnl_primitive_attr_create(&attr) == dnnl_success;
    if (!ok) return NULL;
    dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (k->alpha != 1.f) dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha);
    if (k->beta != 0.f) {
        dnnl_post_ops_create(&po);
        dnnl_post_ops_append_sum(po, k->beta);
        dnnl_primitive_attr_set_post_ops(attr, po);
    }
    int outer = omp_get_max_threads();
    omp_set_num_threads(1);
    ok = dnnl_primitive_desc_create(&pd, &md, attr, c->engine, NULL) == dnnl_success &&
         dnnl_primitive_create(&s->prim, pd) == dnnl_success;
    omp_set_num_threads(outer);
    if (ok) {
        if (k->packed_b) s->b_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        s->s_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        s->scratch_bytes = dnnl_memory_desc_get_size(&s->s_md);
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    if (ok && !(s->mem = calloc(MAX_THREADS, sizeof *s->mem))) {
        dnnl_primitive_destroy(s->prim);
        ok = false;
    }
    if (!ok) return NULL;
    s->key = *k;
    s->used = true;
    return s;
}

/* Per-thread streams and scratchpads of at least `bytes` for nthr threads. */
static bool thread_resources(dt_ctx *ctx, struct dt_gemm_cache *c, int nthr, size_t bytes) {
    for (int t = 0; t < nthr; t++)
        if (!c->stream[t] &&
            dnnl_stream_create(&c->stream[t], c->engine, dnnl_stream_default_flags) != dnnl_success)
            return false;
    bytes = (bytes + 4095) / 4096 * 4096;
    if (bytes > c->scratch_each || (size_t)nthr * c->scratch_each > c->scratch_cap) {
        size_t each = bytes > c->scratch_each ? bytes : c->scratch_each;
        char *nb = dt_mem_alloc(ctx->dev, DT_MEM_OTHER, (size_t)nthr * each);
        if (!nb) return false;
        dt_mem_free(ctx->dev, DT_MEM_OTHER, c->scratch, c->scratch_cap);
        c->scratch = nb;
        c->scratch_each = each;
        c->scratch_cap = (size_t)nthr * each;
    }
    return true;
}

/* One tile GEMM on thread `tid`'s stream and scratchpad. The slot's memory objects of this
 * thread are made on first use and re-pointed after (creating four per tile cost more than
 * small tiles' arithmetic). */
static bool run_tile(struct dt_gemm_cache *c, prim_slot *s, int tid, const void *a, const void *b,
                     float *C) {
    dnnl_memory_t *m = s->mem[tid];
    const dnnl_memory_desc_t *md[4] = {&s->a_md, &s->b_md, &s->c_md, &s->s_md};
    void *h[4] = {(void *)a, (void *)b, C, c->scratch + (size_t)tid * c->scratch_each};
    for (int j = 0; j < 4; j++) {
        if (!m[j] && dnnl_memory_create(&m[j], md[j], c->engine, h[j]) != dnnl_success) {
            m[j] = NULL;
            return false;
        }
        if (dnnl_memory_set_data_handle(m[j], h[j]) != dnnl_success) return false;
    }
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, m[0]},
                               {DNNL_ARG_WEIGHTS, m[1]},
                               {DNNL_ARG_DST, m[2]},
                               {DNNL_ARG_SCRATCHPAD, m[3]}};
    return dnnl_primitive_execute(s->prim, c->stream[tid], 4, args) == dnnl_success &&
           dnnl_stream_wait(c->stream[tid]) == dnnl_success;
}

/* ---- B packed once per GEMM ----------------------------------------------------------------
 * A primitive whose B is described as "any" takes it in its own blocked layout, and a GEMM
 * whose tiles all read the whole of B (several row tiles, one column tile) packs it once for
 * all of them, where each tile's primitive would otherwise pack B again: 6-18% faster per GEMM
 * measured alone at the GPT benchmark's sizes, about 2% of its step (there the tiles'
 * epilogues evict part of the packed B between tiles). Packing only moves values, so the tiles'
 * bits are those of the unpacked primitive, whatever the thread count. The layout oneDNN picks for
 * f32 on AVX-512 is panels of 64 columns, each Kp x 64 row-major (K padded to 16 and N to 64 with
 * zeros; its "BA16a64b"). The tile loop's own threads pack that one, 16 rows of a panel at a time,
 * before the tiles start; any other layout goes through a oneDNN reorder first (slower: 100 µs per
 * GEMM of the GPT step, against 75). */
#define PANEL 64
#define PANEL_ROWS 16
#define PACK_MIN_ROW_TILES 4 /* at 2 (a GPT's 256-row dW GEMMs) packing once cost more */

static int64_t round_up(int64_t x, int64_t m) {
    return (x + m - 1) / m * m;
}

static bool is_panel_layout(const dnnl_memory_desc_t *md, int64_t K, int64_t N) {
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    int64_t Kp = round_up(K, PANEL_ROWS), Np = round_up(N, PANEL);
    return md->ndims == 2 && md->format_kind == dnnl_blocked && md->data_type == dnnl_f32 &&
           md->offset0 == 0 && md->extra.flags == 0 && md->padded_dims[0] == Kp &&
           md->padded_dims[1] == Np && md->padded_offsets[0] == 0 && md->padded_offsets[1] == 0 &&
           b->inner_nblks == 2 && b->inner_blks[0] == PANEL_ROWS && b->inner_blks[1] == PANEL &&
           b->inner_idxs[0] == 0 && b->inner_idxs[1] == 1 && b->strides[0] == PANEL_ROWS * PANEL &&
           b->strides[1] == Kp * PANEL;
}

/* Unit u of the panel layout (panel u / (Kp / 16), its 16 rows u % (Kp / 16)) from B, stored
 * K x N (ldb) or, when tb, N x K. */
static void pack_panel_rows(const float *B, int64_t ldb, bool tb, int64_t K, int64_t N, float *P,
                            int64_t u) {
    int64_t Kp = round_up(K, PANEL_ROWS), kb = Kp / PANEL_ROWS;
    int64_t n0 = u / kb * PANEL, k0 = u % kb * PANEL_ROWS;
    float *d = P + n0 * Kp + k0 * PANEL;
    int64_t nw = N - n0 < PANEL ? N - n0 : PANEL, kh = K - k0 < PANEL_ROWS ? K - k0 : PANEL_ROWS;
    if (!tb) {
        for (int64_t r = 0; r < PANEL_ROWS; r++) {
            float *dr = d + r * PANEL;
            int64_t w = r < kh ? nw : 0;
            if (w) memcpy(dr, B + (k0 + r) * ldb + n0, (size_t)w * sizeof(float));
            memset(dr + w, 0, (size_t)(PANEL - w) * sizeof(float));
        }
        return;
    }
    const bool avx512 = dt__isa_avx512();
    for (int64_t j = 0; j < PANEL; j += 16) {
        if (avx512 && kh == PANEL_ROWS && nw - j >= 16) {
            const float *rows[16];
            for (int i = 0; i < 16; i++) rows[i] = B + (n0 + j + i) * ldb + k0;
            dt__transpose16(rows, d + j, PANEL);
            continue;
        }
        for (int64_t r = 0; r < PANEL_ROWS; r++)
            for (int64_t i = j; i < j + 16; i++)
                d[r * PANEL + i] = r < kh && i < nw ? B[(n0 + i) * ldb + k0 + r] : 0.f;
    }
}

/* B in slot s's layout through a oneDNN reorder into c->bpack (the fallback for layouts other
 * than the panels). Returns false when oneDNN says no. */
static bool reorder_b(struct dt_gemm_cache *c, prim_slot *s, const void *B) {
    if (!s->reorder) {
        dnnl_primitive_desc_t rpd = NULL;
        bool ok = dnnl_reorder_primitive_desc_create(&rpd, &s->bp_md, c->engine, &s->b_md,
                                                     c->engine, NULL) == dnnl_success &&
                  dnnl_primitive_create(&s->reorder, rpd) == dnnl_success;
        if (rpd) dnnl_primitive_desc_destroy(rpd);
        ok = ok &&
             dnnl_memory_create(&s->rmem[0], &s->bp_md, c->engine, (void *)B) == dnnl_success &&
             dnnl_memory_create(&s->rmem[1], &s->b_md, c->engine, c->bpack) == dnnl_success;
        if (!ok) return false; /* what was made is released with the slot */
    }
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, s->rmem[0]}, {DNNL_ARG_TO, s->rmem[1]}};
    return dnnl_memory_set_data_handle(s->rmem[0], (void *)B) == dnnl_success &&
           dnnl_memory_set_data_handle(s->rmem[1], c->bpack) == dnnl_success &&
           dnnl_primitive_execute(s->reorder, c->stream[0], 2, args) == dnnl_success &&
           dnnl_stream_wait(c->stream[0]) == dnnl_success;
}

/* ---- f32 tiles ----------------------------------------------------------------------------
 * C (M, N) is cut into tiles of at most TILE_M rows; when that gives fewer than MIN_TILES tiles
 * the columns are halved too (down to TILE_N_MIN wide), so the two cores both get work on the
 * MLP's 128-row GEMMs. GEMMs under TILE_MIN_WORK multiply-adds are one tile. 128-row tiles
 * measured as fast as oneDNN's own threading and keep a tile's output (128 x N floats) in L2
 * for the epilogue. */
#define TILE_M 128
#define TILE_N_MIN 64
#define MIN_TILES 4
#define TILE_MIN_WORK ((int64_t)1 << 20)

typedef struct tile_plan {
    int64_t tm, tn; /* tile size */
    int64_t mt, nt; /* tiles along M and N */
} tile_plan;

static tile_plan plan_tiles(int64_t M, int64_t N, int64_t K) {
    tile_plan p = {M, N, 1, 1};
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
static tile_plan plan_row_tiles(int64_t M, int64_t N, int64_t K) {
    tile_plan p = {M, N, 1, 1};
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
static bool blas_path(void) {
    return dt_cpu_isa_level() < DT_CPU_AVX512;
}

/* OpenBLAS packs into buffers of its own, kept for the process and reused; an op's GEMM charges
 * them to DT_MEM_OTHER as a high-water mark per context: per thread a K block (<= 512) of op(B)'s
 * columns (<= 4096) and of a row block (<= 768) of op(A). That bound was measured above the
 * resident growth of OpenBLAS 0.3.21's Haswell sgemm (1.8 MB a thread at 1024^3, 5.6 at
 * 4096^3). Over the device's budget the GEMM still runs (the buffers exist already) and the
 * charge stays where it was. */
static void blas_charge(dt_ctx *ctx, int64_t M, int64_t N, int64_t K) {
    struct dt_gemm_cache *c = cache_of(ctx);
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
static void sgemm_seq(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                      float *C, int64_t ldc) {
    int outer = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (outer > 1) omp_set_num_threads(1);
    bool blas = blas_path() || dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B,
                                          ldb, beta, C, ldc) != dnnl_success;
    if (blas)
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    (blasint)M, (blasint)N, (blasint)K, alpha, A, (blasint)lda, B, (blasint)ldb,
                    beta, C, (blasint)ldc);
    if (outer > 1) omp_set_num_threads(outer);
}

/* Run the prologue of every row block up front (when it cannot run inside the tile loop). */
static void prologue_all(const dt__gemm_opts *o, bool ta, const tile_plan *p, int64_t M,
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
static void a_sums_rows(const dt__gemm_opts *o, bool ta, const float *A, int64_t lda, int64_t K,
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

static void gemm_f32_tiled(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                           const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                           float *C, int64_t ldc, const dt__gemm_opts *o) {
    tile_plan p = plan_tiles(M, N, K);
    int64_t ntiles = p.mt * p.nt;
    dt__gemm_tile_fn pro = o ? o->prologue : NULL, ep = o ? o->epilogue : NULL;
    void *arg = o ? o->arg : NULL;
    bool pro_in_loop = pro && !ta && p.nt == 1; /* one tile per row block */
    if (pro && !pro_in_loop) prologue_all(o, ta, &p, M, N);
    if (ntiles == 1) { /* no OpenMP region at all: attention makes thousands of these */
        if (pro_in_loop) pro(arg, 0, M, 0, N);
        sgemm_seq(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        a_sums_rows(o, ta, A, lda, K, 0, M);
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
        sgemm_seq(ta, tb, r1 - r0, c1 - c0, K, alpha, a, lda, b, ldb, beta, C + r0 * ldc + c0, ldc);
        if (c0 == 0) a_sums_rows(o, ta, A, lda, K, r0, r1);
        if (ep) ep(arg, r0, r1, c0, c1);
    }
}

/* The primitives of a tile plan's (up to four) tile shapes: full or last along each dim.
 * `base` (memset before it was filled: padding takes part in the lookup's memcmp) gives K,
 * the strides, transposes, scales and dtype; each shape sets M and N, and lda / ldb / ldc
 * become the tile's own size when that operand is copied to a dense per-thread block. Also
 * returns the largest scratchpad. */
static bool tile_prims(struct dt_gemm_cache *c, const tile_plan *p, int64_t M, int64_t N,
                       const prim_key *base, bool lda_is_tm, bool ldb_is_tn, bool ldc_is_tn,
                       prim_slot *ps[2][2], size_t *scratch) {
    *scratch = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            prim_key k;
            memcpy(&k, base, sizeof k);
            k.M = i ? M - (p->mt - 1) * p->tm : p->tm;
            k.N = j ? N - (p->nt - 1) * p->tn : p->tn;
            if (lda_is_tm) k.lda = k.M;
            if (ldb_is_tn) k.ldb = k.N;
            if (ldc_is_tn) k.ldc = k.N;
            if (!(ps[i][j] = get_prim(c, &k))) return false;
            if (ps[i][j]->scratch_bytes > *scratch) *scratch = ps[i][j]->scratch_bytes;
        }
    return true;
}

/* ---- f32 primitive tiles -------------------------------------------------------------------
 * f32 GEMMs of ops (a context is given, outside parallel regions) run as oneDNN matmul
 * primitives (brgemm kernels), one per tile, on operands read in place and a scratchpad from
 * our accounted per-thread buffer. Per tile they are about as fast as dnnl_sgemm, and they
 * keep no hidden memory: sgemm mallocs packing buffers on every call (kept by the worker
 * threads' malloc arenas) and JIT-builds its whole kernel family on first use, 6 MB of
 * resident memory on the MLP benchmark that the accounting cannot see.
 * brgemm takes dense operands only, and packs B on every call. Tiles are those of plan_tiles,
 * except that a GEMM with several rows of tiles and B not transposed takes whole rows (a
 * column block of such a B would need copying for every row of tiles); an operand block that
 * is not dense in memory (a transposed A's tile, a column block of a plain B, a tile narrower
 * than C) goes through a dense per-thread block. On the MLP benchmark this runs as fast as
 * sgemm.
 * A GEMM whose B or C is a strided view runs on sgemm, as do the GEMMs without a context
 * (attention's per-head products, thousands per step: a primitive call costs a few µs more)
 * and GEMMs whose B per tile is too large to pack in cache (b_pack_max). */
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
 * plain A (dx) goes through gemm_f32_tiled; a transposed one (dW) through ta_sgemm_tiled below:
 * each row tile's A (tm columns of the stored K x M matrix) is transposed into a plain tm x K block
 * (transpose_block, which takes the a_sums on the way), and sgemm reads B in place. Tiles are
 * plan_tiles' row tiles, whole rows each. */
#define SGEMM_MIN_K 768

static bool ta_sgemm_tiled(dt_ctx *ctx, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                           const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                           float *C, int64_t ldc, const dt__gemm_opts *o) {
    struct dt_gemm_cache *c = cache_of(ctx);
    tile_plan p = plan_tiles(M, N, K);
    /* rows padded by one cache line, so that the transpose's 16 stores do not all land in one
     * L1 set */
    int64_t ldt = K + 16;
    size_t blk = (size_t)(ldt * p.tm);
    int nthr = omp_get_max_threads();
    if (nthr > MAX_THREADS) nthr = MAX_THREADS;
    if (!c || !grow(ctx, &c->tblk, &c->tcap, (size_t)nthr * blk * sizeof(float))) return false;
    float *sums = o && o->a_sums && p.tm <= TILE_M ? o->a_sums : NULL;
#pragma omp parallel for schedule(static) if (p.mt > 1) num_threads(nthr)
    for (int64_t im = 0; im < p.mt; im++) {
        int64_t r0 = im * p.tm, tm = r0 + p.tm < M ? p.tm : M - r0;
        float *mine = (float *)c->tblk + (size_t)omp_get_thread_num() * blk;
        transpose_block(A + r0, lda, K, tm, mine, ldt, sums ? sums + r0 : NULL);
        if (!sums) a_sums_rows(o, true, A, lda, K, r0, r0 + tm);
        sgemm_seq(false, tb, tm, N, K, alpha, mine, ldt, B, ldb, beta, C + r0 * ldc, ldc);
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
static bool gemm_f32_prim_tiled(dt_ctx *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                                float alpha, const float *A, int64_t lda, const float *B,
                                int64_t ldb, float beta, float *C, int64_t ldc,
                                const dt__gemm_opts *o) {
    if (ldc != N || ldb != (tb ? K : N)) return false;
    if (!ta && !tb && K >= SGEMM_MIN_K) return false; /* long K on sgemm */
    tile_plan p = plan_tiles(M, N, K);
    if (!(tb && !ta) && p.mt > 1) p.tn = N, p.nt = 1;                    /* whole rows */
    if ((size_t)(K * p.tn) * sizeof(float) > b_pack_max()) return false; /* a tile's B */
    struct dt_gemm_cache *c = cache_of(ctx);
    if (!c || c->broken || c->f32_broken) return false;
    int64_t ntiles = p.mt * p.nt;
    bool copy_a = ta && (p.mt > 1 || lda != M); /* a tile of a transposed A is strided */
    if (copy_a && K >= SGEMM_MIN_K)
        return ta_sgemm_tiled(ctx, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, o);
    bool copy_b = !tb && p.nt > 1; /* so is a column block of a plain B */
    bool copy_c = p.nt > 1;        /* and a tile narrower than C */
    int nthr = omp_get_max_threads();
    if (nthr > MAX_THREADS) nthr = MAX_THREADS;
    prim_key k;
    memset(&k, 0, sizeof k);
    k.K = K, k.lda = lda, k.ldb = ldb, k.ldc = ldc, k.ta = ta, k.tb = tb, k.f32 = true;
    k.alpha = alpha, k.beta = copy_c ? 0.f : beta;
    /* every tile reads all of B: pack it once (the row tiles' two primitives must agree on
     * the layout, else each packs its own) */
    k.packed_b = p.mt >= PACK_MIN_ROW_TILES && p.nt == 1;
    prim_slot *ps[2][2];
    size_t scratch;
    bool made = tile_prims(c, &p, M, N, &k, copy_a, copy_b, copy_c, ps, &scratch);
    if (made && k.packed_b && !dnnl_memory_desc_equal(&ps[0][0]->b_md, &ps[1][0]->b_md)) {
        k.packed_b = false;
        made = tile_prims(c, &p, M, N, &k, copy_a, copy_b, copy_c, ps, &scratch);
    }
    if (!made) {
        c->f32_broken = true;
        dt_log(DT_LOG_WARN, "oneDNN f32 matmul unavailable; f32 GEMMs run on sgemm");
        return false;
    }
    if (!thread_resources(ctx, c, nthr, scratch)) return false;
    /* packed B: by the tile loop's threads (the panels), else by a reorder now */
    const float *Bp = B;
    int64_t pack_units = 0;
    if (k.packed_b) {
        if (!grow(ctx, &c->bpack, &c->bpcap, dnnl_memory_desc_get_size(&ps[0][0]->b_md)))
            return false;
        if (is_panel_layout(&ps[0][0]->b_md, K, N))
            pack_units = round_up(N, PANEL) / PANEL * (round_up(K, PANEL_ROWS) / PANEL_ROWS);
        else if (!reorder_b(c, ps[0][0], B))
            return false;
        Bp = c->bpack;
    }
    /* a thread's block: A's tile (K x tm), B's tile (K x tn), C's tile (tm x tn), as needed;
     * C's when it is scratch to the epilogue too (see tile_src) */
    bool c_blk = o && o->epilogue && o->c_is_scratch && !copy_c && p.nt == 1 && beta == 0.f;
    size_t a_sz = copy_a ? (size_t)(K * p.tm) : 0, b_sz = copy_b ? (size_t)(K * p.tn) : 0;
    size_t blk = a_sz + b_sz + (copy_c || c_blk ? (size_t)(p.tm * p.tn) : 0);
    if (blk && !grow(ctx, &c->tblk, &c->tcap, (size_t)nthr * blk * sizeof(float))) return false;
    /* nothing can fail from here on */
    dt__gemm_tile_fn pro = o ? o->prologue : NULL, ep = o ? o->epilogue : NULL;
    void *arg = o ? o->arg : NULL;
    bool pro_in_loop = pro && !ta && p.nt == 1; /* one tile per row block */
    if (pro && !pro_in_loop) prologue_all(o, ta, &p, M, N);
    /* a row block's a_sums are taken while its A is copied (every tile of it has all columns) */
    bool sum_in_copy = copy_a && o && o->a_sums && p.nt == 1 && p.tm <= TILE_M;
    bool failed = false;
#pragma omp parallel if (ntiles > 1) num_threads(nthr)
    {
        if (pack_units) {
#pragma omp for schedule(static)
            for (int64_t u = 0; u < pack_units; u++) pack_panel_rows(B, ldb, tb, K, N, c->bpack, u);
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
                    if (jn == 0) a_sums_rows(o, ta, A, lda, K, r0, r1);
                }
                a = mine;
            } else if (jn == 0) {
                a_sums_rows(o, ta, A, lda, K, r0, r1);
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
            bool ok =
                run_tile(c, ps[im == p.mt - 1][jn == p.nt - 1], omp_get_thread_num(), a, b, dst);
            if (outer > 1) omp_set_num_threads(outer);
            if (!ok) { /* not expected once the primitive exists */
                sgemm_seq(ta, tb, tm, tn, K, alpha, ta ? A + r0 : A + r0 * lda, lda,
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

/* ---- bf16 tiles ------------------------------------------------------------------------
 * The same tiles as f32 (row tiles only for a transposed A), each one a oneDNN matmul
 * primitive (AMX / avx512_bf16) running sequentially on its thread with its own stream and
 * scratchpad (user scratchpad mode: the library-managed one is malloc'ed on every execution),
 * between the prologue and the epilogue. Primitives are created with oneDNN capped to one
 * thread, so their plan never depends on the thread count.
 * Operands are rounded to bf16 in their stored orientation: B whole, up front (every tile reads
 * it); A tile by tile inside the loop while the tile's rows are hot (up front when the columns
 * are split). oneDNN's AMX kernel takes a transposed A only dense, so each tile of one is
 * copied into a per-thread K x tm block. A caller that already holds a rounded operand, or
 * wants one kept for a later GEMM, says so through opts->bf16 (linear keeps x and w from its
 * forward for its backward, and dy from its dx GEMM for its dW GEMM): no operand is rounded
 * twice. */

static bool gemm_bf16_tiled(dt_ctx *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                            float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                            float beta, float *C, int64_t ldc, const dt__gemm_opts *o) {
    struct dt_gemm_cache *c = cache_of(ctx);
    const dt__gemm_bf16 *io = o ? &o->bf16 : NULL;
    dt__gemm_tile_fn pro = o ? o->prologue : NULL, ep = o ? o->epilogue : NULL;
    void *arg = o ? o->arg : NULL;
    if (!c || c->broken) return false;
    int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    tile_plan p = ta ? plan_row_tiles(M, N, K) : plan_tiles(M, N, K);
    int64_t ntiles = p.mt * p.nt;
    int nthr = omp_get_max_threads();
    if (nthr > MAX_THREADS) nthr = MAX_THREADS;
    prim_key k;
    memset(&k, 0, sizeof k);
    k.K = K, k.lda = ac, k.ldb = bc, k.ldc = ldc, k.ta = ta, k.tb = tb;
    k.alpha = alpha, k.beta = beta;
    prim_slot *ps[2][2];
    size_t scratch;
    if (!tile_prims(c, &p, M, N, &k, ta, false, false, ps, &scratch)) {
        c->broken = true;
        dt_log(DT_LOG_WARN, "oneDNN bf16 matmul unavailable; bf16 autocast falls back to f32 GEMM");
        return false;
    }
    if (!thread_resources(ctx, c, nthr, scratch)) return false;
    const uint16_t *b16 = io ? io->b : NULL;
    if (!b16) {
        uint16_t *dst =
            io && io->b_out ? io->b_out : grow(ctx, &c->bbuf, &c->bcap, (size_t)(br * bc) * 2);
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
    else if (!a16 && !ta && !(a_dst = grow(ctx, &c->abuf, &c->acap, (size_t)(ar * ac) * 2)))
        return false;
    if (ta && !(blocks = grow(ctx, &c->abuf, &c->acap, (size_t)(nthr * K * p.tm) * 2)))
        return false;
    /* nothing can fail from here on */
    bool pro_in_loop = pro && !ta && p.nt == 1 && !a16;
    if (pro && !pro_in_loop) prologue_all(o, ta, &p, M, N);
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
            if (jn == 0) a_sums_rows(o, ta, A, lda, K, r0, r1);
        } else {
            if (pro_in_loop) pro(arg, r0, r1, 0, N);
            if (a_fill) pack_rows(A + r0 * lda, tm, K, lda, a_fill + r0 * ac);
            a = a16 + r0 * ac;
        }
        const uint16_t *b = tb ? b16 + c0 * bc : b16 + c0;
        prim_slot *s = ps[im == p.mt - 1][jn == p.nt - 1];
        int outer = omp_in_parallel() ? 1 : omp_get_max_threads();
        if (outer > 1) omp_set_num_threads(1);
        bool ok = run_tile(c, s, omp_get_thread_num(), a, b, C + r0 * ldc + c0);
        if (outer > 1) omp_set_num_threads(outer);
        if (!ok) { /* not expected once the primitive exists: this tile in f32 */
            sgemm_seq(ta, tb, tm, c1 - c0, K, alpha, ta ? A + r0 : A + r0 * lda, lda,
                      tb ? B + c0 * ldb : B + c0, ldb, beta, C + r0 * ldc + c0, ldc);
            failed = true;
        }
        if (ep) ep(arg, r0, r1, c0, c1);
    }
    if (failed) dt_log(DT_LOG_WARN, "oneDNN bf16 matmul failed on a tile; computed it in f32");
    return true;
}

/* ---- bf16 storage, f32 compute --------------------------------------------------------------
 * Small GEMMs, GEMMs inside parallel regions and CPUs without bf16 instructions (when that path
 * is chosen, see "bf16 without bf16 instructions"): the operands rounded to bf16 precision into
 * dense f32 copies, then the f32 tiles (bf16 products are exact in f32, so the numerics are
 * those of the bf16 tiles up to the order of the sums). B is rounded up front in parallel; a
 * plain A row block by row block in the tile loop, by a prologue of our own right after the
 * caller's made those rows, while they are hot; a transposed A up front.
 * A caller that shares operands between GEMMs (linear: x and w from its forward for its
 * backward, dy from its dx GEMM for its dW GEMM) gets them kept as f32 copies on CPUs without
 * bf16 instructions (opts->bf16.af_out / bf_out, read back through af / bf): the GEMM rounds
 * straight into the kept copy and reads it there, and a later GEMM reads it as is, so every
 * operand is rounded once a step and never widened back from bf16 bits.
 * Outside parallel regions the other copies live in the context's work buffers (grown once, no
 * fresh zeroed pages per GEMM); inside one, where other threads may use the same context, they
 * are allocated per call. */
typedef struct rounded_gemm {
    const dt__gemm_opts *o; /* the caller's (may be NULL) */
    const float *A;         /* stored M x K, not transposed */
    int64_t lda, K;
    const uint16_t *have; /* the caller's rounding of A in bf16 bits, or NULL */
    uint16_t *keep;       /* where to keep A's rounding in bf16 bits, or NULL */
    float *a;             /* where A's rows are rounded to, K wide (NULL: given rounded) */
} rounded_gemm;

/* Rows [r0, r1) of a stored matrix (cols wide, leading dim ld) rounded to bf16 precision into
 * dst (dense, cols wide): from `have` when the caller holds the rounded operand, else from src,
 * keeping the bf16 values in `keep` when asked. */
static void round_rows(const float *src, int64_t ld, int64_t cols, const uint16_t *have,
                       uint16_t *keep, float *dst, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        if (have)
            dt_bf16_to_f32(have + r * cols, dst + r * cols, cols);
        else
            dt__f32_round_bf16_seq(src + r * ld, dst + r * cols, keep ? keep + r * cols : NULL,
                                   cols);
    }
}

/* The same for all rows, in parallel when large. */
static void round_all(const float *src, int64_t ld, int64_t rows, int64_t cols,
                      const uint16_t *have, uint16_t *keep, float *dst) {
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
    for (int64_t r = 0; r < rows; r++) round_rows(src, ld, cols, have, keep, dst, r, r + 1);
}

/* The tile loop's prologue for a plain A: the caller's, the row sums from the f32 A, then the
 * rows' rounding (none when the caller gave A rounded in f32). */
static void rounded_prologue(void *arg, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    rounded_gemm *g = arg;
    if (g->o && g->o->prologue) g->o->prologue(g->o->arg, r0, r1, c0, c1);
    if (g->o) a_sums_rows(g->o, false, g->A, g->lda, g->K, r0, r1);
    if (g->a) round_rows(g->A, g->lda, g->K, g->have, g->keep, g->a, r0, r1);
}

static void rounded_epilogue(void *arg, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    rounded_gemm *g = arg;
    g->o->epilogue(g->o->arg, r0, r1, c0, c1);
}

/* opts->a_sums of a transposed A (K x M stored) for all M rows of C, in parallel over blocks of
 * 64 columns (dt__add_col_sums' bits however the columns are cut). */
static void a_sums_all_ta(const dt__gemm_opts *o, const float *A, int64_t lda, int64_t K,
                          int64_t M) {
    if (!o || !o->a_sums) return;
    int64_t nb = (M + 63) / 64;
#pragma omp parallel for schedule(static) if (nb > 1 && K * M > 65536)
    for (int64_t b = 0; b < nb; b++)
        dt__add_col_sums(o->a_sums, A, lda, K, b * 64, (b + 1) * 64 < M ? (b + 1) * 64 : M);
}

/* C = alpha op(A) op(B) + beta C on operands rounded to bf16 precision. Out of memory for the
 * copies it computes in f32 rather than fail. */
static void gemm_rounded(dt_ctx *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                         float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                         float beta, float *C, int64_t ldc, const dt__gemm_opts *o) {
    const dt__gemm_bf16 *io = o ? &o->bf16 : NULL;
    int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    /* the operands' f32 copies: the caller's (given rounded, or to keep), else work buffers */
    const float *a_in = io ? io->af : NULL, *b_in = io ? io->bf : NULL;
    float *a_keep = io && !a_in ? io->af_out : NULL, *b_keep = io && !b_in ? io->bf_out : NULL;
    size_t asz = a_in || a_keep ? 0 : (size_t)(ar * ac) * sizeof(float);
    size_t bsz = b_in || b_keep ? 0 : (size_t)(br * bc) * sizeof(float);
    struct dt_gemm_cache *c = omp_get_level() == 0 ? cache_of(ctx) : NULL;
    float *a = NULL, *b = NULL;
    if (c) {
        a = asz ? grow(ctx, &c->abuf, &c->acap, asz) : NULL;
        b = bsz ? grow(ctx, &c->bbuf, &c->bcap, bsz) : NULL;
    } else {
        a = asz ? dt_mem_alloc(ctx->dev, DT_MEM_OTHER, asz) : NULL;
        b = bsz && (a || !asz) ? dt_mem_alloc(ctx->dev, DT_MEM_OTHER, bsz) : NULL;
    }
    float *ad = a_keep ? a_keep : a, *bd = b_keep ? b_keep : b;
    if ((a_in || ad) && (b_in || bd)) {
        if (blas_path()) blas_charge(ctx, M, N, K);
        rounded_gemm g = {o, A, lda, K, io ? io->a : NULL, io ? io->a_out : NULL, a_in ? NULL : ad};
        dt__gemm_opts rest = {0};
        rest.arg = &g;
        rest.epilogue = o && o->epilogue ? rounded_epilogue : NULL;
        if (ta) { /* the caller's prologue and sums see all of A first, then it is rounded */
            if (o && o->prologue) o->prologue(o->arg, 0, M, 0, N);
            a_sums_all_ta(o, A, lda, K, M);
            if (!a_in) round_all(A, lda, ar, ac, g.have, g.keep, ad);
        } else {
            rest.prologue = rounded_prologue;
        }
        if (!b_in) round_all(B, ldb, br, bc, io ? io->b : NULL, io ? io->b_out : NULL, bd);
        gemm_f32_tiled(ta, tb, M, N, K, alpha, a_in ? a_in : ad, ac, b_in ? b_in : bd, bc, beta, C,
                       ldc, &rest);
    } else { /* the copies to keep are still made: a later GEMM reads them */
        dt_clear_error();
        if (a_keep) round_all(A, lda, ar, ac, NULL, NULL, a_keep);
        if (b_keep) round_all(B, ldb, br, bc, NULL, NULL, b_keep);
        gemm_f32_tiled(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, o);
    }
    if (!c) {
        dt_mem_free(ctx->dev, DT_MEM_OTHER, a, asz);
        dt_mem_free(ctx->dev, DT_MEM_OTHER, b, bsz);
    }
}

void dt__gemm_ex(const dt_ctx *cctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                 const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                 int64_t ldc, const dt__gemm_opts *o) {
    dt_ctx *ctx = (dt_ctx *)cctx; /* the GEMM cache is the only state touched */
    if (M == 0 || N == 0) {
        if (M > 0)
            a_sums_rows(o, ta, A, lda, K, 0, M); /* C has no columns; op(A) still has its rows */
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
    dt__bf16_path bf16 = ctx && ctx->autocast == DT_DTYPE_BF16 ? dt__bf16_path_now() : DT__BF16_F32;
    if (bf16 != DT__BF16_F32) {
        /* oneDNN only outside parallel regions (the tiles' streams and scratchpads are per
         * thread of this call). omp_get_level counts inactive regions too, so the choice never
         * depends on the thread count. */
        if (M * N * K >= BF16_MIN_WORK && bf16 == DT__BF16_NATIVE && omp_get_level() == 0 &&
            gemm_bf16_tiled(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, o))
            return;
        gemm_rounded(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, o);
        return;
    }
    if (ctx && blas_path())
        blas_charge(ctx, M, N, K);
    else if (ctx && omp_get_level() == 0 &&
             gemm_f32_prim_tiled(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, o))
        return;
    gemm_f32_tiled(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, o);
}

/* ---- bf16 without bf16 instructions ----------------------------------------------------------
 * Without them bf16 autocast can keep bf16's numerics on f32 kernels (the storage path above:
 * every operand rounded once a step, about 1.5x the bytes of f32's saved tensors for linear)
 * or compute in plain f32. The rounding passes cost more than the f32 GEMM they feed saves
 * nothing of, so the storage path cannot beat f32 there; forced to AVX2 on the GPT benchmark
 * it measured a few percent behind (docs/performance.md). $DTRAIN_BF16_PATH picks one (storage
 * | f32), read once per process; the f32 fallback is announced once in the log when autocast
 * is first set to bf16 (dt_ctx_set_autocast). */
#define BF16_FALLBACK_DEFAULT DT__BF16_F32

static pthread_once_t bf16_once = PTHREAD_ONCE_INIT;
static dt__bf16_path bf16_fallback;

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
    bool blas = blas_path();
    dt__bf16_path p = compute == DT_DTYPE_BF16 ? dt__bf16_path_now() : DT__BF16_F32;
    if (p == DT__BF16_F32) return blas ? "f32-openblas" : "f32-onednn";
    if (p == DT__BF16_NATIVE) return "bf16-onednn";
    return blas ? "bf16-storage-f32-openblas" : "bf16-storage-f32-onednn";
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
