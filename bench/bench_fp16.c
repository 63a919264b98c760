/* bench_fp16.c — one GPT training step's forward + backward (dt_model_gpt, the GPT example's
 * shape by default) in fp32, under fp16 autocast and under bf16 autocast, side by side in one
 * process: the modes take turns step by step, so a noisy shared machine slows them alike; each
 * mode's best and median wall time and best CPU time (the figure to compare on a loaded
 * machine: it leaves out the time slices other processes took) are printed with its matmul
 * path (dt_matmul_compute) and the CPU's name.
 *
 * fp16 autocast has no fp16 GEMM kernel on x86 CPUs: it rounds every GEMM's operands and output
 * tiles to fp16 (F16C) around f32 GEMMs, so it costs more than fp32 — it is there for fp16's
 * numerics (DeepSpeed fp16 configs, overflow and loss scaling), not for speed. bf16 autocast
 * without bf16 instructions runs f32 GEMMs by default ($DTRAIN_BF16_PATH=storage rounds like
 * fp16 does).
 *
 * Not built by CMake; compile by hand against a build dir's libdtrain.so:
 *   gcc -O2 -fopenmp -Iinclude bench/bench_fp16.c -Lbuild -ldtrain -Wl,-rpath,$PWD/build \
 *       -lm -o /tmp/bench_fp16 && /tmp/bench_fp16 [--iters 20] [--batch 8] [--seq 128] \
 *       [--d-model 256] [--layers 4] [--threads 1]
 */
#include "dtrain/nn.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void cpu_name(char *out, size_t n) {
    snprintf(out, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (strncmp(line, "model name", 10) || !c) continue;
        snprintf(out, n, "%s", c + 2);
        out[strcspn(out, "\n")] = 0;
        break;
    }
    if (f) fclose(f);
}

#define NMODES 3
static const dt_dtype MODES[NMODES] = {DT_DTYPE_F32, DT_DTYPE_F16, DT_DTYPE_BF16};
static const char *const NAMES[NMODES] = {"fp32", "fp16-autocast", "bf16-autocast"};

/* One forward + backward; its wall and CPU seconds into w / c, the loss into *loss. */
static int step(dt_ctx *ctx, dt_module *net, const int64_t *tok, const int64_t *tgt, int64_t B,
                int64_t T, double *w, double *c, float *loss) {
    double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
    dt_tensor *x = dt_tensor_from_i64(ctx, 2, (int64_t[]){B, T}, tok);
    dt_tensor *y = dt_tensor_from_i64(ctx, 1, (int64_t[]){B * T}, tgt);
    dt_tensor *l = dt_cross_entropy(dt_module_forward(net, x), y, -100);
    dt_module_zero_grad(net);
    if (!l || dt_backward(l) != DT_OK) {
        fprintf(stderr, "step failed: %s\n", dt_last_error());
        return 1;
    }
    *w = now(CLOCK_MONOTONIC) - w0;
    *c = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
    *loss = (float)dt_item(l);
    dt_ctx_reset(ctx);
    return 0;
}

int main(int argc, char **argv) {
    dt_gpt_config cfg = {.vocab = 256, .seq = 128, .d_model = 256, .n_head = 4, .n_layer = 4};
    int64_t B = 8;
    int iters = 20, threads = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        long long v = atoll(argv[i + 1]);
        if (!strcmp(argv[i], "--iters"))
            iters = (int)v;
        else if (!strcmp(argv[i], "--batch"))
            B = v;
        else if (!strcmp(argv[i], "--seq"))
            cfg.seq = v;
        else if (!strcmp(argv[i], "--d-model"))
            cfg.d_model = v;
        else if (!strcmp(argv[i], "--layers"))
            cfg.n_layer = v;
        else if (!strcmp(argv[i], "--threads"))
            threads = (int)v;
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (iters < 1) iters = 1;
    omp_set_num_threads(threads);
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    dt_module *net = dt_model_gpt(&cfg);
    if (!net || dt_module_build(net, ctx, 42) != DT_OK) {
        fprintf(stderr, "GPT: %s\n", dt_last_error());
        return 1;
    }
    int64_t T = cfg.seq, ntok = B * T;
    int64_t *tok = malloc(sizeof(int64_t) * (size_t)ntok),
            *tgt = malloc(sizeof(int64_t) * (size_t)ntok);
    dt_rng r;
    dt_rng_init(&r, 7);
    for (int64_t i = 0; i < ntok; i++) {
        tok[i] = (int64_t)dt_rng_below(&r, (uint64_t)cfg.vocab);
        tgt[i] = (int64_t)dt_rng_below(&r, (uint64_t)cfg.vocab);
    }
    char cpu[256];
    cpu_name(cpu, sizeof cpu);
    printf("CPU: %s; kernel level %s; %d thread(s)\n", cpu, dt_cpu_isa_name(dt_cpu_isa_level()),
           threads);
    printf("GPT: B=%lld T=%lld D=%lld L=%lld V=%lld, %lld params; %d steps per mode, "
           "interleaved\n",
           (long long)B, (long long)T, (long long)cfg.d_model, (long long)cfg.n_layer,
           (long long)cfg.vocab, (long long)dt_module_num_params(net), iters);
    double *wall = calloc((size_t)(NMODES * iters), sizeof *wall), cpu_best[NMODES];
    float loss[NMODES] = {0};
    for (int m = 0; m < NMODES; m++) cpu_best[m] = 1e9;
    for (int it = -2; it < iters; it++) /* two warm-up rounds */
        for (int m = 0; m < NMODES; m++) {
            if (dt_ctx_set_autocast(ctx, MODES[m]) != DT_OK) {
                fprintf(stderr, "%s: %s\n", NAMES[m], dt_last_error());
                return 1;
            }
            double w, c;
            if (step(ctx, net, tok, tgt, B, T, &w, &c, &loss[m])) return 1;
            if (it < 0) continue;
            wall[m * iters + it] = w;
            if (c < cpu_best[m]) cpu_best[m] = c;
        }
    for (int m = 0; m < NMODES; m++) {
        double *t = wall + m * iters;
        qsort(t, (size_t)iters, sizeof *t, cmp_double);
        printf("%-14s %-26s best %7.2f ms  median %7.2f ms  cpu best %7.2f ms  (%.2fx fp32's "
               "cpu best)  loss %.7f\n",
               NAMES[m], dt_matmul_compute(MODES[m]), t[0] * 1e3, t[iters / 2] * 1e3,
               cpu_best[m] * 1e3, cpu_best[m] / cpu_best[0], (double)loss[m]);
    }
    printf("bf16 path: %s\n", dt_bf16_path());
    free(wall);
    free(tok);
    free(tgt);
    dt_module_free(net);
    dt_ctx_free(ctx);
    return 0;
}
