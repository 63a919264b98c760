/* gemm_impl.h — what the GEMM's files share; internal to src/tensor/cpu/gemm*.c.
 *
 * The GEMM (dt__gemm_ex, tensor_impl.h) is split by job:
 *   gemm.c               the entry point: the path of each call, the tile plans, the f32 tile
 *                        loop on sgemm (OpenBLAS below AVX-512, oneDNN's sgemm above), the
 *                        prologue / epilogue / a_sums helpers every tile loop uses
 *   gemm_onednn.c        the per-context cache: oneDNN primitives per tile geometry, per-thread
 *                        streams and scratchpads, work buffers; one tile run on a primitive
 *   gemm_pack.c          B packed once per GEMM into a primitive's blocked layout
 *   gemm_f32_onednn.c    f32 tiles as oneDNN matmul primitives (AVX-512, an op's GEMM), and
 *                        long-K transposed-A GEMMs on sgemm over tiles transposed into blocks
 *   gemm_bf16.c          bf16 tiles (oneDNN bf16 / AMX) and the bf16 path of the process
 *   gemm_bf16_storage.c  bf16 storage, f32 compute: operands rounded to bf16 precision, f32 tiles;
 *                        the same loop with fp16 rounding for fp16 autocast (and f16.c's rounding)
 */
#ifndef DT_GEMM_IMPL_H
#define DT_GEMM_IMPL_H

#include <oneapi/dnnl/dnnl.h>

#include "../tensor_impl.h"

#define CACHE_SLOTS 96
#define MAX_THREADS 64
#define TILE_M 128 /* rows of a full tile (see "f32 tiles" in gemm.c) */

/* the geometry of one tile GEMM: lda / ldb are the strides of the bf16 operand buffers */
typedef struct dt__gemm_key {
    int64_t M, N, K, lda, ldb, ldc;
    bool ta, tb;
    bool f32;      /* operands f32 (else bf16); C is always f32 */
    bool packed_b; /* B comes in the primitive's own blocked layout (gemm_pack.c) */
    float alpha, beta;
} dt__gemm_key;

typedef struct dt__gemm_slot {
    dt__gemm_key key;
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
} dt__gemm_slot;

struct dt_gemm_cache {
    dnnl_engine_t engine;
    dnnl_stream_t stream[MAX_THREADS]; /* one per thread: a stream is not thread-safe */
    dt__gemm_slot slot[CACHE_SLOTS];
    int next; /* round-robin eviction */
    /* work buffers, grown on demand (dt__gemm_grow); capacities in bytes */
    void *abuf, *bbuf; /* bf16 operands */
    void *tblk;        /* f32 primitives: per-thread dense copies of A, B and C tiles */
    void *bpack;       /* f32 primitives: B packed once for all tiles (gemm_pack.c) */
    size_t acap, bcap, tcap, bpcap;
    /* user-managed scratchpads, one per thread (library-managed ones are malloc'ed per
     * execution and cannot be shared by two threads running one primitive) */
    char *scratch;
    size_t scratch_each, scratch_cap;
    int64_t blas_charged; /* bytes charged for OpenBLAS's packing buffers (dt__gemm_blas_charge) */
    bool broken;          /* oneDNN matmul unusable: stay on the f32 path */
    bool f32_broken;      /* oneDNN f32 matmul unusable: f32 GEMMs on sgemm */
};

/* A tile plan: C (M, N) in mt x nt tiles of tm x tn (the last ones along each dim smaller). */
typedef struct dt__gemm_plan {
    int64_t tm, tn; /* tile size */
    int64_t mt, nt; /* tiles along M and N */
} dt__gemm_plan;

/* ---- gemm.c ---- */
/* The tiles of an (M, N, K) GEMM, fixed by its shape alone. */
dt__gemm_plan dt__gemm_plan_tiles(int64_t M, int64_t N, int64_t K);
/* Row tiles only (every tile has all N columns). */
dt__gemm_plan dt__gemm_plan_row_tiles(int64_t M, int64_t N, int64_t K);
/* Whether f32 tiles run on OpenBLAS (below AVX-512) rather than oneDNN. */
bool dt__gemm_blas_path(void);
/* Charges OpenBLAS's packing buffers for an M x N x K GEMM to the context (never fails). */
void dt__gemm_blas_charge(dt_ctx *ctx, int64_t M, int64_t N, int64_t K);
/* One sequential f32 GEMM on the calling thread (never fails). */
void dt__gemm_sgemm_seq(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                        float *C, int64_t ldc);
/* The prologue of every row block of plan p, run up front. */
void dt__gemm_prologue_all(const dt__gemm_opts *o, bool ta, const dt__gemm_plan *p, int64_t M,
                           int64_t N);
/* opts->a_sums for rows [r0, r1) of C (nothing without opts or a_sums). */
void dt__gemm_a_sums_rows(const dt__gemm_opts *o, bool ta, const float *A, int64_t lda, int64_t K,
                          int64_t r0, int64_t r1);
/* The f32 tile loop on sgemm, with o's callbacks (o may be NULL; never fails). */
void dt__gemm_f32_tiled(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                        float *C, int64_t ldc, const dt__gemm_opts *o);

/* ---- gemm_onednn.c ---- */
/* The context's cache, made on first use; NULL when out of memory. */
struct dt_gemm_cache *dt__gemm_cache_of(dt_ctx *ctx);
/* *buf with room for `need` bytes; NULL when out of memory (the old buffer stays). */
void *dt__gemm_grow(dt_ctx *ctx, void **buf, size_t *cap, size_t need);
/* Per-thread streams and scratchpads; false when oneDNN or memory fails. */
bool dt__gemm_thread_resources(dt_ctx *ctx, struct dt_gemm_cache *c, int nthr, size_t bytes);
/* One tile GEMM on slot s for thread tid; false when oneDNN fails (C then unspecified). */
bool dt__gemm_run_tile(struct dt_gemm_cache *c, dt__gemm_slot *s, int tid, const void *a,
                       const void *b, float *C);
/* The primitives of plan p's tile shapes into ps, and the largest scratchpad; false when oneDNN
 * cannot make one. */
bool dt__gemm_tile_prims(struct dt_gemm_cache *c, const dt__gemm_plan *p, int64_t M, int64_t N,
                         const dt__gemm_key *base, bool lda_is_tm, bool ldb_is_tn, bool ldc_is_tn,
                         dt__gemm_slot *ps[2][2], size_t *scratch);

/* ---- gemm_pack.c ---- */
#define PANEL 64
#define PANEL_ROWS 16

static inline int64_t dt__gemm_round_up(int64_t x, int64_t m) {
    return (x + m - 1) / m * m;
}

/* Whether md is oneDNN's f32 panel layout of a K x N B (packed by dt__gemm_pack_panel_rows). */
bool dt__gemm_is_panel_layout(const dnnl_memory_desc_t *md, int64_t K, int64_t N);
/* Unit u of the panel layout, from B into P. */
void dt__gemm_pack_panel_rows(const float *B, int64_t ldb, bool tb, int64_t K, int64_t N, float *P,
                              int64_t u);
/* B into c->bpack in slot s's layout by a oneDNN reorder; false when oneDNN says no. */
bool dt__gemm_reorder_b(struct dt_gemm_cache *c, dt__gemm_slot *s, const void *B);

/* ---- gemm_f32_onednn.c ---- */
/* f32 tiles on oneDNN primitives; false (nothing done) when the operands do not suit or oneDNN
 * cannot make the primitive. */
bool dt__gemm_f32_prim_tiled(dt_ctx *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                             float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                             float beta, float *C, int64_t ldc, const dt__gemm_opts *o);

/* ---- gemm_bf16.c ---- */
/* bf16 tiles on oneDNN primitives; false (nothing done) when oneDNN or memory fails. */
bool dt__gemm_bf16_tiled(dt_ctx *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                         float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                         float beta, float *C, int64_t ldc, const dt__gemm_opts *o);

/* ---- gemm_bf16_storage.c ---- */
/* The GEMM on operands rounded to bf16 precision (in f32 when out of memory; never fails). */
void dt__gemm_rounded(dt_ctx *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                      float *C, int64_t ldc, const dt__gemm_opts *o);
/* The same with fp16 rounding (fp16 autocast): operands rounded to fp16 precision and each tile
 * of C rounded to fp16 before the caller's epilogue (never fails). */
void dt__gemm_f16(dt_ctx *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                  const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                  int64_t ldc, const dt__gemm_opts *o);

#endif
