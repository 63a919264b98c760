/* gemm_bf16_storage.c — bf16 autocast on f32 kernels: operands rounded to bf16 precision.
 *
 * Small GEMMs, GEMMs inside parallel regions and CPUs without bf16 instructions (when that path
 * is chosen, see "bf16 without bf16 instructions" in gemm_bf16.c): the operands rounded to bf16
 * precision into dense f32 copies, then the f32 tiles (bf16 products are exact in f32, so the
 * numerics are those of the bf16 tiles up to the order of the sums). B is rounded up front in
 * parallel; a plain A row block by row block in the tile loop, by a prologue of our own right
 * after the caller's made those rows, while they are hot; a transposed A up front.
 * A caller that shares operands between GEMMs (linear: x and w from its forward for its
 * backward, dy from its dx GEMM for its dW GEMM) gets them kept as f32 copies on CPUs without
 * bf16 instructions (opts->bf16.af_out / bf_out, read back through af / bf): the GEMM rounds
 * straight into the kept copy and reads it there, and a later GEMM reads it as is, so every
 * operand is rounded once a step and never widened back from bf16 bits.
 * Outside parallel regions the other copies live in the context's work buffers (grown once, no
 * fresh zeroed pages per GEMM); inside one, where other threads may use the same context, they
 * are allocated per call. */
#include "gemm_impl.h"
#include "base/base_impl.h"

#include <omp.h>

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
    if (g->o) dt__gemm_a_sums_rows(g->o, false, g->A, g->lda, g->K, r0, r1);
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
void dt__gemm_rounded(dt_ctx *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                      float *C, int64_t ldc, const dt__gemm_opts *o) {
    const dt__gemm_bf16 *io = o ? &o->bf16 : NULL;
    int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    /* the operands' f32 copies: the caller's (given rounded, or to keep), else work buffers */
    const float *a_in = io ? io->af : NULL, *b_in = io ? io->bf : NULL;
    float *a_keep = io && !a_in ? io->af_out : NULL, *b_keep = io && !b_in ? io->bf_out : NULL;
    size_t asz = a_in || a_keep ? 0 : (size_t)(ar * ac) * sizeof(float);
    size_t bsz = b_in || b_keep ? 0 : (size_t)(br * bc) * sizeof(float);
    struct dt_gemm_cache *c = omp_get_level() == 0 ? dt__gemm_cache_of(ctx) : NULL;
    float *a = NULL, *b = NULL;
    if (c) {
        a = asz ? dt__gemm_grow(ctx, &c->abuf, &c->acap, asz) : NULL;
        b = bsz ? dt__gemm_grow(ctx, &c->bbuf, &c->bcap, bsz) : NULL;
    } else {
        a = asz ? dt_mem_alloc(ctx->dev, DT_MEM_OTHER, asz) : NULL;
        b = bsz && (a || !asz) ? dt_mem_alloc(ctx->dev, DT_MEM_OTHER, bsz) : NULL;
    }
    float *ad = a_keep ? a_keep : a, *bd = b_keep ? b_keep : b;
    if ((a_in || ad) && (b_in || bd)) {
        if (dt__gemm_blas_path()) dt__gemm_blas_charge(ctx, M, N, K);
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
        dt__gemm_f32_tiled(ta, tb, M, N, K, alpha, a_in ? a_in : ad, ac, b_in ? b_in : bd, bc, beta,
                           C, ldc, &rest);
    } else { /* the copies to keep are still made: a later GEMM reads them */
        dt_clear_error();
        if (a_keep) round_all(A, lda, ar, ac, NULL, NULL, a_keep);
        if (b_keep) round_all(B, ldb, br, bc, NULL, NULL, b_keep);
        dt__gemm_f32_tiled(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, o);
    }
    if (!c) {
        dt_mem_free(ctx->dev, DT_MEM_OTHER, a, asz);
        dt_mem_free(ctx->dev, DT_MEM_OTHER, b, bsz);
    }
}
