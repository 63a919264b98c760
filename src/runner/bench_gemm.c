/* bench_gemm.c — the GEMM rate: an n x n x n product of uniform random matrices through
 * dt_matmul (the GEMM every op uses, fp32 or bf16 autocast) or OpenBLAS's cblas_sgemm (the
 * reference rate), 2 untimed then `reps` timed; the median time and its GFLOP/s. */
#include "bench_impl.h"

#include <cblas.h>
#include <stdlib.h>

/* reps timed products after 2 untimed ones; the sorted times in ms. */
static void gemm_reps(const dt_bench_opts *a, dt_ctx *ctx, int64_t n, dt_tensor *A, dt_tensor *B,
                      dt_tensor *C, int reps, double *ms) {
    for (int i = -2; i < reps; i++) {
        double t0 = dt_now_sec();
        if (a->openblas) /* OpenBLAS (OpenMP build) threads follow dt_set_num_threads */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.f,
                        A->data, (int)n, B->data, (int)n, 0.f, C->data, (int)n);
        else
            dt_matmul(A, B);
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
    int64_t n = a->size ? a->size : 1024;
    int reps = a->reps ? a->reps : 10;
    a->size = n;
    a->reps = reps;
    dt_set_num_threads(a->threads);
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    int64_t shape[2] = {n, n};
    dt_tensor *A = ctx ? dt_tensor_new_heap(ctx, DT_DTYPE_F32, 2, shape, DT_MEM_OTHER) : NULL;
    dt_tensor *B = A ? dt_tensor_new_heap(ctx, DT_DTYPE_F32, 2, shape, DT_MEM_OTHER) : NULL;
    dt_tensor *C = NULL;
    double *ms = NULL;
    if (B) {
        dt_rng rng;
        dt_rng_init(&rng, 3);
        dt_rng_fill_uniform(&rng, A->data, n * n, -1, 1);
        dt_rng_fill_uniform(&rng, B->data, n * n, -1, 1);
        dt_ctx_set_autocast(ctx, a->dtype);
        if (a->openblas) C = dt_tensor_new_heap(ctx, DT_DTYPE_F32, 2, shape, DT_MEM_OTHER);
    }
    dt_status st = B && (C || !a->openblas) ? DT_OK : dt_last_status();
    if (st == DT_OK && !(ms = calloc((size_t)reps, sizeof(double))))
        st = dt_error(DT_ERR_OOM, "out of memory");
    if (st == DT_OK) {
        gemm_reps(a, ctx, n, A, B, C, reps, ms);
        r->gemm_ms_median = ms[reps / 2];
        r->gemm_gflops = 2.0 * n * n * n / (r->gemm_ms_median / 1e3) / 1e9;
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
