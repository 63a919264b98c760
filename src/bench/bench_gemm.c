/* bench_gemm.c — the GEMM rate: an M x N x K product of uniform random matrices (n x n x n by
 * default; A or B stored transposed, as a linear layer's forward and backward products are)
 * through dt_matmul_t (the GEMM every op uses, fp32 or bf16 autocast) or OpenBLAS's
 * cblas_sgemm (the reference rate), 2 untimed then `reps` timed; the median time and its
 * GFLOP/s. */
#include "bench_impl.h"

#include <cblas.h>
#include <stdlib.h>

/* reps timed products after 2 untimed ones; the sorted times in ms. */
static void gemm_reps(const dt_bench_opts *a, dt_ctx *ctx, dt_tensor *A, dt_tensor *B, dt_tensor *C,
                      int reps, double *ms) {
    int m = (int)a->m, n = (int)a->n, k = (int)a->k;
    for (int i = -2; i < reps; i++) {
        double t0 = dt_now_sec();
        if (a->openblas) /* OpenBLAS (OpenMP build) threads follow dt_set_num_threads */
            cblas_sgemm(CblasRowMajor, a->ta ? CblasTrans : CblasNoTrans,
                        a->tb ? CblasTrans : CblasNoTrans, m, n, k, 1.f, A->data, a->ta ? m : k,
                        B->data, a->tb ? k : n, 0.f, C->data, n);
        else
            dt_matmul_t(A, B, a->ta, a->tb);
        double t1 = dt_now_sec();
        dt_ctx_reset(ctx);
        if (i >= 0) ms[i] = (t1 - t0) * 1e3;
    }
    dt__bench_sort(ms, reps);
}

dt_status dt_bench_gemm(const dt_bench_opts *opts, dt_bench_result **out) {
    *out = NULL;
    dt_bench_result *r = dt__bench_result_new(opts, DT_BENCH_GEMM);
    if (!r) return dt_last_status();
    dt_bench_opts *a = &r->opts;
    r->kind = DT_BENCH_KIND_GEMM;
    int64_t m = a->m, n = a->n, k = a->k;
    int reps = a->reps ? a->reps : 10;
    a->reps = reps;
    dt_set_num_threads(a->threads);
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    int64_t sa[2] = {a->ta ? k : m, a->ta ? m : k}, sb[2] = {a->tb ? n : k, a->tb ? k : n};
    int64_t sc[2] = {m, n};
    dt_tensor *A = ctx ? dt_tensor_new_heap(ctx, DT_DTYPE_F32, 2, sa, DT_MEM_OTHER) : NULL;
    dt_tensor *B = A ? dt_tensor_new_heap(ctx, DT_DTYPE_F32, 2, sb, DT_MEM_OTHER) : NULL;
    dt_tensor *C = NULL;
    double *ms = NULL;
    if (B) {
        dt_rng rng;
        dt_rng_init(&rng, 3);
        dt_rng_fill_uniform(&rng, A->data, m * k, -1, 1);
        dt_rng_fill_uniform(&rng, B->data, k * n, -1, 1);
        dt_ctx_set_autocast(ctx, a->dtype);
        if (a->openblas) C = dt_tensor_new_heap(ctx, DT_DTYPE_F32, 2, sc, DT_MEM_OTHER);
    }
    dt_status st = B && (C || !a->openblas) ? DT_OK : dt_last_status();
    if (st == DT_OK && !(ms = calloc((size_t)reps, sizeof(double))))
        st = dt_error(DT_ERR_OOM, "out of memory");
    if (st == DT_OK) {
        gemm_reps(a, ctx, A, B, C, reps, ms);
        r->gemm_ms_median = ms[reps / 2];
        r->gemm_gflops = 2.0 * m * n * k / (r->gemm_ms_median / 1e3) / 1e9;
        r->threads = dt_get_num_threads();
    }
    free(ms);
    dt_tensor_free(C);
    dt_tensor_free(A);
    dt_tensor_free(B);
    dt_ctx_free(ctx);
    if (st != DT_OK) {
        free(r);
        return st;
    }
    *out = r;
    return DT_OK;
}
