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
 *       [--d-model 256] [--heads 4] [--layers 4] [--vocab 256] [--threads 1]
 */
#include "gpt_setup.h"

#include <omp.h>

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

int main(int argc, char **argv) {
    bench_gpt g = {.cfg = {.vocab = 256, .seq = 128, .d_model = 256, .n_head = 4, .n_layer = 4},
                   .B = 8,
                   .iters = 20,
                   .threads = "1"};
    if (bench_gpt_args(&g, argc, argv)) return 2;
    int iters = g.iters, threads = atoi(g.threads);
    omp_set_num_threads(threads);
    if (bench_gpt_setup(&g)) return 1;
    char cpu[256];
    cpu_name(cpu, sizeof cpu);
    printf("CPU: %s; kernel level %s; %d thread(s)\n", cpu, dt_cpu_isa_name(dt_cpu_isa_level()),
           threads);
    printf("GPT: B=%lld T=%lld D=%lld L=%lld V=%lld, %lld params; %d steps per mode, "
           "interleaved\n",
           (long long)g.B, (long long)g.cfg.seq, (long long)g.cfg.d_model, (long long)g.cfg.n_layer,
           (long long)g.cfg.vocab, (long long)dt_module_num_params(g.net), iters);
    double *wall = calloc((size_t)(NMODES * iters), sizeof *wall), cpu_best[NMODES];
    float loss[NMODES] = {0};
    for (int m = 0; m < NMODES; m++) cpu_best[m] = 1e9;
    for (int it = -2; it < iters; it++) /* two warm-up rounds */
        for (int m = 0; m < NMODES; m++) {
            if (dt_ctx_set_autocast(g.ctx, MODES[m]) != DT_OK) {
                fprintf(stderr, "%s: %s\n", NAMES[m], dt_last_error());
                return 1;
            }
            bench_step st;
            if (bench_gpt_step(&g, &st)) return 1;
            loss[m] = st.loss;
            if (it < 0) continue;
            wall[m * iters + it] = st.wall;
            if (st.cpu < cpu_best[m]) cpu_best[m] = st.cpu;
        }
    for (int m = 0; m < NMODES; m++) {
        double *t = wall + m * iters;
        qsort(t, (size_t)iters, sizeof *t, bench_cmp_double);
        printf("%-14s %-26s best %7.2f ms  median %7.2f ms  cpu best %7.2f ms  (%.2fx fp32's "
               "cpu best)  loss %.7f\n",
               NAMES[m], dt_matmul_compute(MODES[m]), t[0] * 1e3, t[iters / 2] * 1e3,
               cpu_best[m] * 1e3, cpu_best[m] / cpu_best[0], (double)loss[m]);
    }
    printf("bf16 path: %s\n", dt_bf16_path());
    free(wall);
    bench_gpt_free(&g);
    return 0;
}
