/* bench_attention.c — times dt_attention (grouped-query, forward and forward + backward) at
 * language-model shapes, a decoding step against a long cache, and the GPT's fused
 * causal_self_attention at the same shape for comparison; median of 10 runs after 2 warm-up
 * runs, with the threads OpenMP gives (OMP_NUM_THREADS). The times are the process's CPU time
 * (all threads), steadier than wall time on a shared machine; divide by the threads for the
 * wall time of a busy-free machine. Compare with
 * bench/bench_attention_torch.py. Not built by CMake:
 *
 *   cmake --build build --target dtrain && gcc -O2 -fopenmp -I include -I src \
 *       bench/bench_attention.c -L build -ldtrain -Wl,-rpath,$PWD/build -lm -o /tmp/bench_att \
 *       && /tmp/bench_att
 */
#include "dtrain/tensor.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define WARMUP 2
#define RUNS 10

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static void die(const char *what) {
    fprintf(stderr, "bench_attention: %s: %s\n", what, dt_last_error());
    exit(1);
}

/* median ms of attention (backward too when `bwd`) at one shape; fused: the GPT's op on qkv */
static double run(int64_t B, int64_t T, int64_t S, int64_t Hq, int64_t Hkv, int64_t D, bool bwd,
                  bool fused) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    double t[WARMUP + RUNS];
    for (int i = 0; i < WARMUP + RUNS; i++) {
        dt_tensor *q, *k = NULL, *v = NULL, *y;
        if (fused) {
            q = dt_rand_uniform(ctx, 3, (int64_t[]){B, T, 3 * Hq * D}, -1.f, 1.f);
        } else {
            q = dt_rand_uniform(ctx, 4, (int64_t[]){B, T, Hq, D}, -1.f, 1.f);
            k = dt_rand_uniform(ctx, 4, (int64_t[]){B, S, Hkv, D}, -1.f, 1.f);
            v = dt_rand_uniform(ctx, 4, (int64_t[]){B, S, Hkv, D}, -1.f, 1.f);
        }
        dt_tensor *all[3] = {q, k, v};
        for (int j = 0; j < 3 && bwd; j++)
            if (all[j]) dt_set_requires_grad(all[j], true);
        double t0 = cpu_ms();
        y = fused ? dt_causal_self_attention(q, (int)Hq) : dt_attention(q, k, v, true);
        if (!y) die("forward");
        if (bwd && dt_backward_with(y, y) != DT_OK) die("backward");
        t[i] = cpu_ms() - t0;
        dt_ctx_reset(ctx);
    }
    dt_ctx_free(ctx);
    qsort(t + WARMUP, RUNS, sizeof(double), cmp_double);
    return 0.5 * (t[WARMUP + RUNS / 2 - 1] + t[WARMUP + RUNS / 2]);
}

int main(void) {
    static const struct {
        const char *what;
        int64_t B, T, S, Hq, Hkv, D;
    } shapes[] = {
        {"GPT-2 124M layer (MHA)", 4, 256, 256, 12, 12, 64},
        {"Llama GQA 4, T 512", 1, 512, 512, 32, 8, 64},
        {"GQA 4, T 1024, D 128", 1, 1024, 1024, 8, 2, 128},
        {"GPT-2 decode T 1, S 512 (MHA)", 1, 1, 512, 12, 12, 64},
        {"decode T 1, S 2048, GQA 8", 1, 1, 2048, 32, 4, 64},
        {"decode T 1, S 2048, GQA 4, D 128", 1, 1, 2048, 32, 8, 128},
    };
    printf("threads %d\n%-34s %10s %10s %12s\n", omp_get_max_threads(), "shape", "fwd ms",
           "fwd+bwd ms", "fwd GFLOP/s");
    printf("(CPU ms of all threads; GFLOP/s per thread, over the scores a causal mask keeps)\n");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int64_t B = shapes[i].B, T = shapes[i].T, S = shapes[i].S, Hq = shapes[i].Hq;
        int64_t Hkv = shapes[i].Hkv, D = shapes[i].D;
        double f = run(B, T, S, Hq, Hkv, D, false, false);
        double fb = T > 1 ? run(B, T, S, Hq, Hkv, D, true, false) : 0;
        /* visible scores only: causal T x S minus the masked triangle */
        double scores = (double)B * Hq * ((double)T * (S - T) + 0.5 * T * (T + 1));
        printf("%-34s %10.3f %10.3f %12.1f\n", shapes[i].what, f, fb, 4 * scores * D / f / 1e6);
        if (Hq == Hkv && S == T)
            printf("%-34s %10.3f %10.3f\n", "  causal_self_attention (fused)",
                   run(B, T, S, Hq, Hkv, D, false, true), run(B, T, S, Hq, Hkv, D, true, true));
    }
    return 0;
}
