/* Tests for src/tensor/cpu/gemm.c: f32 GEMM against a double reference for every transpose
 * combination, alpha/beta, dense operands (oneDNN matmul primitives, tiled) and padded leading
 * dims (sgemm), the same bits at 1 and 2 threads; bf16 autocast through oneDNN (large) and the
 * rounded-sgemm fallback (small) agree with the reference computed on bf16-rounded inputs;
 * the row sums of op(A) taken along (a_sums) have the bits of a plain loop on every path; below
 * AVX-512 (OpenBLAS tiles) the packing buffers are charged to the context's device and
 * released with it. */
#include "base/base_impl.h"
#include "tensor/tensor_impl.h"
#include "test.h"

static float bf16_round(float x) {
    uint16_t h;
    float y;
    dt_f32_to_bf16(&x, &h, 1);
    dt_bf16_to_f32(&h, &y, 1);
    return y;
}

/* Reference C = alpha op(A) op(B) + beta C in double, optionally on bf16-rounded inputs. */
static void ref_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                     int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
                     bool round) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) {
                float a = ta ? A[k * lda + i] : A[i * lda + k];
                float b = tb ? B[j * ldb + k] : B[k * ldb + j];
                if (round) a = bf16_round(a), b = bf16_round(b);
                s += (double)a * b;
            }
            C[i * ldc + j] = (float)(alpha * s + beta * C[i * ldc + j]);
        }
}

static double check_case(dt_ctx *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                         float alpha, float beta, bool bf16, bool dense) {
    dt_rng r;
    dt_rng_init(&r, (uint64_t)(M * 131 + N * 7 + K));
    int64_t pad = dense ? 0 : 1;
    int64_t lda = (ta ? M : K) + 3 * pad, ldb = (tb ? K : N) + pad, ldc = N + 2 * pad;
    int64_t arows = ta ? K : M, brows = tb ? N : K;
    float *A = malloc(sizeof(float) * arows * lda), *B = malloc(sizeof(float) * brows * ldb);
    float *C = malloc(sizeof(float) * M * ldc), *R = malloc(sizeof(float) * M * ldc);
    dt_rng_fill_uniform(&r, A, arows * lda, -1, 1);
    dt_rng_fill_uniform(&r, B, brows * ldb, -1, 1);
    dt_rng_fill_uniform(&r, C, M * ldc, -1, 1);
    memcpy(R, C, sizeof(float) * M * ldc);
    dt_ctx_set_autocast(ctx, bf16 ? DT_DTYPE_BF16 : DT_DTYPE_F32);
    dt__gemm(ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    ref_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, R, ldc, bf16);
    double err = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double e = fabs((double)C[i * ldc + j] - R[i * ldc + j]) / (1.0 + sqrt((double)K));
            if (e > err) err = e;
        }
    free(A), free(B), free(C), free(R);
    return err;
}

static void test_gemm_f32_and_bf16(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    /* one tile; several tiles with ragged edges along M and N; a 128-row GEMM like the MLP's;
     * a B too large to pack per row tile (those run on sgemm); row tiles sharing a B packed
     * once, with ragged panels and K not a multiple of the panels' 16 rows, and with whole
     * 16 x 16 blocks in several panels; a long K (sgemm tiles, transposed A tiles) */
    const int64_t sizes[][3] = {{3, 5, 7},      {64, 48, 80},   {130, 70, 96},
                                {200, 300, 40}, {128, 512, 64}, {64, 1100, 300},
                                {520, 100, 37}, {520, 200, 64}, {130, 40, 780}};
    for (int s = 0; s < 9; s++)
        for (int t = 0; t < 4; t++)
            for (int bf = 0; bf < 2; bf++)
                for (int dense = 0; dense < 2; dense++) {
                    bool ta = t & 1, tb = t & 2;
                    const int64_t *d = sizes[s];
                    double e1 = check_case(ctx, ta, tb, d[0], d[1], d[2], 1.f, 0.f, bf, dense);
                    double e2 = check_case(ctx, ta, tb, d[0], d[1], d[2], 0.5f, 1.f, bf, dense);
                    /* bf16 products are exact in f32; only the accumulation order differs */
                    double tol = 1e-5;
                    CHECK_MSG(e1 < tol && e2 < tol,
                              "M=%lld N=%lld K=%lld ta=%d tb=%d bf16=%d dense=%d: %g %g",
                              (long long)d[0], (long long)d[1], (long long)d[2], ta, tb, bf, dense,
                              e1, e2);
                }
    dt_mem_stats ms;
    dt_device_stats(dt_ctx_device(ctx), &ms);
    CHECK(ms.peak[DT_MEM_OTHER] > 0); /* the primitives' scratchpads are accounted */
    dt_ctx_free(ctx);
}

/* The tile plans depend on the shape only: 1 and 2 threads give the same bits, for every
 * transpose combination, dense (primitives) and padded (sgemm), with accumulation. */
static void test_gemm_thread_invariance(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    dt_rng r;
    dt_rng_init(&r, 11);
    float *A = malloc(sizeof(float) * 600 * 400), *B = malloc(sizeof(float) * 600 * 400);
    float *C1 = malloc(sizeof(float) * 600 * 302), *C2 = malloc(sizeof(float) * 600 * 302);
    dt_rng_fill_uniform(&r, A, 600 * 400, -1, 1);
    dt_rng_fill_uniform(&r, B, 600 * 400, -1, 1);
    int threads = dt_get_num_threads(), bad = 0;
    /* tiles in both directions; row tiles sharing a packed B */
    const int64_t sizes[3][3] = {{200, 300, 72}, {520, 200, 37}, {300, 40, 790}};
    for (int s = 0; s < 3; s++)
        for (int t = 0; t < 4; t++)
            for (int dense = 0; dense < 2; dense++) {
                bool ta = t & 1, tb = t & 2;
                int64_t M = sizes[s][0], N = sizes[s][1], K = sizes[s][2], pad = dense ? 0 : 1;
                int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + 2 * pad;
                for (int i = 0; i < M * ldc; i++) C1[i] = C2[i] = (float)(i % 7) * 0.25f;
                dt_set_num_threads(1);
                dt__gemm(ctx, ta, tb, M, N, K, 1.f, A, lda, B, ldb, 1.f, C1, ldc);
                dt_set_num_threads(2);
                dt__gemm(ctx, ta, tb, M, N, K, 1.f, A, lda, B, ldb, 1.f, C2, ldc);
                bad += memcmp(C1, C2, sizeof(float) * M * ldc) != 0;
            }
    dt_set_num_threads(threads);
    CHECK_MSG(bad == 0, "%d of 16 cases differ between 1 and 2 threads", bad);
    free(A), free(B), free(C1), free(C2);
    dt_ctx_free(ctx);
}

static void test_matmul_autocast(void) {
    /* the op under autocast equals the f32 op on rounded inputs */
    dt_ctx *ctx = dt_ctx_new(NULL, 2);
    dt_tensor *a = dt_randn(ctx, 2, (int64_t[]){96, 64}, 1.f);
    dt_tensor *b = dt_randn(ctx, 2, (int64_t[]){64, 80}, 1.f);
    dt_tensor *ar = dt_to_dtype(dt_to_dtype(a, DT_DTYPE_BF16), DT_DTYPE_F32);
    dt_tensor *br = dt_to_dtype(dt_to_dtype(b, DT_DTYPE_BF16), DT_DTYPE_F32);
    dt_tensor *ref = dt_matmul(ar, br);
    dt_mem_stats s0, s;
    dt_device_stats(dt_ctx_device(ctx), &s0);
    dt_device_reset_peak(dt_ctx_device(ctx));
    dt_ctx_set_autocast(ctx, DT_DTYPE_BF16);
    dt_tensor *y = dt_matmul(a, b);
    dt_ctx_set_autocast(ctx, DT_DTYPE_F32);
    double err = 0;
    const float *Y = y->data, *R = ref->data;
    for (int64_t i = 0; i < dt_numel(y); i++) err = fmax(err, fabs(Y[i] - R[i]));
    CHECK_MSG(err < 1e-4, "max err %g", err);
    /* the bf16 operands (packed for the bf16 instructions, or rounded copies for sgemm on a
     * CPU without them) are accounted */
    dt_device_stats(dt_ctx_device(ctx), &s);
    CHECK(s.peak[DT_MEM_OTHER] > s0.current[DT_MEM_OTHER]);
    CHECK(dt_ctx_set_autocast(ctx, DT_DTYPE_I32) == DT_ERR_INVALID);
    dt_ctx_free(ctx);
}

/* The vectorised f32 -> bf16 conversion rounds exactly like the scalar definition (nearest
 * even, NaN quietened) on random values, ties, specials and a ragged tail. */
static void test_bf16_conversion(void) {
    enum { N = 1000 };
    float src[N];
    dt_rng r;
    dt_rng_init(&r, 5);
    dt_rng_fill_normal(&r, src, N, 0.f, 100.f);
    uint32_t specials[] = {0x3f808000u /* tie, even below */,
                           0x3f818000u /* tie, odd below */,
                           0x7f800000u,
                           0xff800000u,
                           0x7fc00000u,
                           0x7f800001u,
                           0x00000001u,
                           0x80000000u,
                           0x7f7fffffu};
    for (int i = 0; i < 9; i++) memcpy(&src[i * 7], &specials[i], 4);
    uint16_t vec[N];
    dt_f32_to_bf16(src, vec, N);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        uint32_t u;
        memcpy(&u, &src[i], 4);
        uint16_t want = (u & 0x7fffffffu) > 0x7f800000u
                            ? (uint16_t)((u >> 16) | 0x40)
                            : (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
        bad += vec[i] != want;
    }
    CHECK_MSG(bad == 0, "%d of %d conversions differ", bad, N);
    /* the one-pass rounding to bf16 precision in f32 (the GEMM's operand copies) */
    float wide[N];
    uint16_t kept[N];
    dt__f32_round_bf16_seq(src, wide, kept, N);
    bad = memcmp(kept, vec, sizeof vec) != 0;
    for (int i = 0; i < N; i++) {
        uint32_t u;
        memcpy(&u, &wide[i], 4);
        bad += u != (uint32_t)vec[i] << 16;
    }
    dt__f32_round_bf16_seq(src, src, NULL, N); /* in place */
    bad += memcmp(src, wide, sizeof wide) != 0;
    CHECK_MSG(bad == 0, "one-pass rounding: %d differences", bad);
}

/* opts.a_sums: the row sums of op(A), each summed from 0 in k order then added (the bits of a
 * plain loop), on every path: f32 primitives with copied tiles, sgemm (padded), bf16 (from the
 * f32 A), small GEMMs, plain A, and a C with no columns. */
static void test_gemm_a_sums(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    static const struct {
        bool ta, bf16;
        int64_t M, N, K, pad;
    } cases[] = {{true, false, 300, 96, 200, 0},  {true, false, 300, 96, 200, 1},
                 {true, false, 300, 96, 800, 0},  {true, false, 300, 96, 800, 1},
                 {true, true, 300, 96, 200, 0},   {true, false, 7, 5, 3, 0},
                 {false, false, 300, 96, 200, 0}, {true, false, 70, 0, 33, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        bool ta = cases[c].ta;
        int64_t M = cases[c].M, N = cases[c].N, K = cases[c].K;
        int64_t lda = (ta ? M : K) + 3 * cases[c].pad, ldb = N + cases[c].pad;
        int64_t arows = ta ? K : M;
        dt_rng r;
        dt_rng_init(&r, (uint64_t)c + 5);
        float *A = malloc(sizeof(float) * arows * lda), *B = malloc(sizeof(float) * (K * ldb + 1));
        float *C = calloc((size_t)(M * N + 1), sizeof(float));
        float *sums = malloc(sizeof(float) * M), *want = malloc(sizeof(float) * M);
        dt_rng_fill_uniform(&r, A, arows * lda, -1, 1);
        dt_rng_fill_uniform(&r, B, K * ldb + 1, -1, 1);
        for (int64_t i = 0; i < M; i++) {
            float s = 0.f;
            for (int64_t k = 0; k < K; k++) s += ta ? A[k * lda + i] : A[i * lda + k];
            sums[i] = 0.5f;
            want[i] = 0.5f + s;
        }
        dt_ctx_set_autocast(ctx, cases[c].bf16 ? DT_DTYPE_BF16 : DT_DTYPE_F32);
        dt__gemm_opts o = {.a_sums = sums};
        dt__gemm_ex(ctx, ta, false, M, N, K, 1.f, A, lda, B, ldb, 0.f, C, N, &o);
        CHECK_MSG(!memcmp(sums, want, sizeof(float) * M), "case %zu: a_sums differ", c);
        free(A), free(B), free(C), free(sums), free(want);
    }
    dt_ctx_free(ctx);
}

/* Below AVX-512 an op's GEMM runs on OpenBLAS tiles: its packing buffers show in DT_MEM_OTHER
 * as a high-water mark (per thread a K block of B's columns and of A's rows), grown by a larger
 * GEMM, not by a smaller one, and released when the context goes. */
static void test_gemm_blas_accounting(void) {
    dt_cpu_isa hw = dt__cpu_isa_override(DT_CPU_AVX2);
    dt_device *dev = dt_device_new("cpu", 0);
    dt_ctx *ctx = dt_ctx_new(dev, 1);
    float *A = calloc(300 * 100, sizeof(float)), *B = calloc(100 * 200, sizeof(float));
    float *C = calloc(300 * 200, sizeof(float));
    int64_t nthr = dt_get_num_threads(), small = nthr * 100 * (200 + 300) * 4;
    dt_mem_stats st;
    dt__gemm(ctx, false, false, 300, 200, 100, 1.f, A, 100, B, 200, 0.f, C, 200);
    dt_device_stats(dev, &st);
    CHECK_MSG(st.current[DT_MEM_OTHER] == small, "charged %lld, want %lld",
              (long long)st.current[DT_MEM_OTHER], (long long)small);
    dt__gemm(ctx, false, false, 30, 20, 10, 1.f, A, 10, B, 20, 0.f, C, 20);
    dt_device_stats(dev, &st);
    CHECK(st.current[DT_MEM_OTHER] == small);
    dt_ctx_free(ctx);
    dt_device_stats(dev, &st);
    CHECK(st.current[DT_MEM_OTHER] == 0);
    free(A), free(B), free(C);
    dt_device_free(dev);
    dt__cpu_isa_override(hw);
}

/* What dt_matmul_compute (shown by dtrain bench) says matches the path each level takes (the
 * bf16 storage path is forced below the bf16 instructions, see main). */
static void test_matmul_compute_names(void) {
    dt_cpu_isa hw = dt__cpu_isa_override(DT_CPU_AVX2);
    CHECK(!strcmp(dt_matmul_compute(DT_DTYPE_F32), "f32-openblas"));
    CHECK(!strcmp(dt_matmul_compute(DT_DTYPE_BF16), "bf16-storage-f32-openblas"));
    dt__bf16_fallback_override(DT__BF16_F32);
    CHECK(!strcmp(dt_matmul_compute(DT_DTYPE_BF16), "f32-openblas"));
    dt__bf16_fallback_override(DT__BF16_STORAGE);
    if (hw >= DT_CPU_AVX512) {
        dt__cpu_isa_override(DT_CPU_AVX512);
        CHECK(!strcmp(dt_matmul_compute(DT_DTYPE_F32), "f32-onednn"));
        CHECK(!strcmp(dt_matmul_compute(DT_DTYPE_BF16), "bf16-storage-f32-onednn"));
    }
    if (hw >= DT_CPU_AVX512_BF16) {
        dt__cpu_isa_override(DT_CPU_AVX512_BF16);
        CHECK(!strcmp(dt_matmul_compute(DT_DTYPE_BF16), "bf16-onednn"));
    }
    dt__cpu_isa_override(hw);
}

static dt_tensor *rounded(dt_tensor *t) {
    return dt_to_dtype(dt_to_dtype(t, DT_DTYPE_BF16), DT_DTYPE_F32);
}

static bool same_bits(const dt_tensor *a, const dt_tensor *b) {
    return a && b && dt_numel(a) == dt_numel(b) && !memcmp(a->data, b->data, dt_nbytes(a));
}

/* The path dt_bf16_path names (dtrain bench prints it) is the one that runs at the avx2 level
 * (no bf16 instructions), and the default is the f32 fallback: there a bf16 matmul and a linear
 * op, forward and backward, give the f32 bits; on the storage path the bits of the f32 ops on
 * operands rounded to bf16 (linear's backward reuses the forward's rounded x and w and rounds
 * dy once for both GEMMs), and not the f32 ones. */
static void test_bf16_path_reported(void) {
    dt_cpu_isa hw = dt__cpu_isa_override(DT_CPU_AVX2);
    CHECK(!strcmp(dt_bf16_path(), "f32-fallback"));
    for (int storage = 0; storage < 2; storage++) {
        dt__bf16_path prev = dt__bf16_fallback_override(storage ? DT__BF16_STORAGE : DT__BF16_F32);
        const char *name = dt_bf16_path();
        CHECK_MSG(!strcmp(name, storage ? "storage-f32-compute" : "f32-fallback"), "%s", name);
        dt_ctx *ctx = dt_ctx_new(NULL, 9);
        /* several row and column tiles; R x IN activations, OUT x IN weights */
        int64_t R = 300, IN = 200, OUT = 150;
        dt_tensor *x = dt_randn(ctx, 2, (int64_t[]){R, IN}, 1.f);
        dt_tensor *w = dt_randn(ctx, 2, (int64_t[]){OUT, IN}, 1.f);
        dt_tensor *g = dt_randn(ctx, 2, (int64_t[]){R, OUT}, 1.f);
        dt_tensor *xr = rounded(x), *wr = rounded(w), *gr = rounded(g);
        /* what each path must give: f32 products of the stored or of the rounded operands */
        dt_tensor *y_ref = dt_matmul_t(storage ? xr : x, storage ? wr : w, false, true);
        dt_tensor *dx_ref = dt_matmul(storage ? gr : g, storage ? wr : w);
        dt_tensor *dw_ref = dt_matmul_t(storage ? gr : g, storage ? xr : x, true, false);
        dt_tensor *y_f32 = dt_matmul_t(x, w, false, true);
        dt_ctx_set_autocast(ctx, DT_DTYPE_BF16);
        dt_tensor *y_mm = dt_matmul_t(x, w, false, true);
        dt_set_requires_grad(x, true);
        dt_set_requires_grad(w, true);
        dt_tensor *y = dt_linear(x, w, NULL);
        CHECK(y && dt_backward_with(y, g) == DT_OK);
        CHECK_MSG(same_bits(y_mm, y_ref), "%s: matmul", name);
        CHECK_MSG(same_bits(y, y_ref), "%s: linear forward", name);
        CHECK_MSG(same_bits(x->grad, dx_ref), "%s: linear dx", name);
        CHECK_MSG(same_bits(w->grad, dw_ref), "%s: linear dw", name);
        CHECK_MSG(storage == !same_bits(y_mm, y_f32), "%s: rounding %s", name,
                  storage ? "missing" : "where none belongs");
        dt_ctx_free(ctx);
        dt__bf16_fallback_override(prev);
    }
    dt__cpu_isa_override(hw);
}

int main(void) {
    unsetenv("DTRAIN_BF16_PATH"); /* the default path */
    TEST_RUN(test_bf16_path_reported);
    /* below the bf16 instructions the bf16 tests below check the storage path's numerics (the
     * f32 fallback is the f32 path) */
    dt__bf16_fallback_override(DT__BF16_STORAGE);
    TEST_RUN(test_bf16_conversion);
    TEST_RUN(test_gemm_f32_and_bf16);
    TEST_RUN(test_gemm_thread_invariance);
    TEST_RUN(test_matmul_autocast);
    TEST_RUN(test_gemm_a_sums);
    TEST_RUN(test_gemm_blas_accounting);
    TEST_RUN(test_matmul_compute_names);
    TEST_END();
}
