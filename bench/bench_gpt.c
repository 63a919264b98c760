/* bench_gpt.c — micro-benchmark of one GPT training step's forward + backward (dt_model_gpt,
 * cross-entropy on fixed random tokens, fp32) with 1 and 2 threads, plus the OpenBLAS sgemm
 * rate (1024^3 through dt_matmul) as the yardstick for the step's GFLOP/s. Compare with
 * bench/bench_gpt_torch.py (same model in PyTorch).
 *
 * Not built by CMake; compile by hand against a build dir's libdtrain.so:
 *   gcc -O2 -fopenmp -Iinclude bench/bench_gpt.c -Lbuild-X -ldtrain -Wl,-rpath,$PWD/build-X \
 *       -lm -o /tmp/bench_gpt && /tmp/bench_gpt [--iters 30] [--batch 8] [--seq 128] \
 *       [--d-model 256] [--heads 4] [--layers 4] [--vocab 256] [--threads 1,2]
 */
#include "gpt_setup.h"

#include <omp.h>

/* Best-of-n GFLOP/s of a 1024^3 sgemm through dt_matmul (no autograd). The operands live on
 * the heap and the arena is reset after each product, so the output reuses warm pages. */
static double sgemm_gflops(dt_ctx *ctx) {
    int64_t n = 1024, shape[2] = {n, n};
    double best = 1e9;
    bool g = dt_set_grad_enabled(ctx, false);
    dt_tensor *a = dt_tensor_new_heap(ctx, DT_DTYPE_F32, 2, shape, DT_MEM_OTHER);
    dt_tensor *b = dt_tensor_new_heap(ctx, DT_DTYPE_F32, 2, shape, DT_MEM_OTHER);
    if (!a || !b) return 0;
    dt_rng r;
    dt_rng_init(&r, 3);
    dt_rng_fill_uniform(&r, a->data, n * n, -1.f, 1.f);
    dt_rng_fill_uniform(&r, b->data, n * n, -1.f, 1.f);
    for (int i = 0; i < 20; i++) {
        double t0 = bench_now(CLOCK_MONOTONIC);
        dt_tensor *c = dt_matmul(a, b);
        double t = bench_now(CLOCK_MONOTONIC) - t0;
        if (c && t < best) best = t;
        dt_ctx_reset(ctx);
    }
    dt_tensor_free(a);
    dt_tensor_free(b);
    dt_set_grad_enabled(ctx, g);
    return 2.0 * (double)(n * n * n) / best * 1e-9;
}

int main(int argc, char **argv) {
    bench_gpt g = {.cfg = {.vocab = 256, .seq = 128, .d_model = 256, .n_head = 4, .n_layer = 4},
                   .B = 8,
                   .iters = 30,
                   .threads = "1,2"};
    if (bench_gpt_args(&g, argc, argv)) return 2;
    if (bench_gpt_setup(&g)) return 1;
    int iters = g.iters;
    printf("dtrain GPT: B=%lld T=%lld D=%lld NH=%lld L=%lld V=%lld, %lld params\n", (long long)g.B,
           (long long)g.cfg.seq, (long long)g.cfg.d_model, (long long)g.cfg.n_head,
           (long long)g.cfg.n_layer, (long long)g.cfg.vocab,
           (long long)dt_module_num_params(g.net));
    char tl[64];
    snprintf(tl, sizeof tl, "%s", g.threads);
    for (char *s = strtok(tl, ","); s; s = strtok(NULL, ",")) {
        int nt = atoi(s);
        omp_set_num_threads(nt);
        double gemm = sgemm_gflops(g.ctx);
        double *times = malloc(sizeof(double) * (size_t)iters), fwd_best = 1e9, cpu_best = 1e9;
        bench_step st = {0};
        for (int it = 0; it < iters + 3; it++) {
            if (bench_gpt_step(&g, &st)) return 1;
            if (it >= 3) {
                times[it - 3] = st.wall;
                if (st.fwd < fwd_best) fwd_best = st.fwd;
                if (st.cpu < cpu_best) cpu_best = st.cpu;
            }
        }
        qsort(times, (size_t)iters, sizeof(double), bench_cmp_double);
        double best = times[0], med = times[iters / 2];
        double total = (double)(st.flops.forward + st.flops.backward);
        printf("dtrain threads=%d: fwd+bwd best %.2f ms, median %.2f ms (fwd best %.2f ms, "
               "cpu best %.2f ms), %.2f GFLOP/step, %.1f GFLOP/s (best) = %.0f%% of sgemm "
               "%.1f GFLOP/s; loss %.4f\n",
               nt, best * 1e3, med * 1e3, fwd_best * 1e3, cpu_best * 1e3, total * 1e-9,
               total / best * 1e-9, 100.0 * total / best * 1e-9 / gemm, gemm, (double)st.loss);
        free(times);
    }
    bench_gpt_free(&g);
    return 0;
}
