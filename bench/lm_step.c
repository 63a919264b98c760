/* lm_step.c — dtrain's side of bench/lm_step.py: on a Hugging Face model directory, either
 * AdamW fine-tuning steps (forward, cross-entropy, backward, optimizer) on fixed random tokens,
 * or greedy generation with the KV cache. Prints one JSON line: the median step time (or the
 * generation's tokens/s) and the process's peak RSS.
 *
 * Not built by CMake; bench/lm_step.py compiles it against a build directory's libdtrain.so:
 *   gcc -O2 -Iinclude bench/lm_step.c -Lbuild -ldtrain -Wl,-rpath,$PWD/build -lm -o /tmp/lm_step
 *   /tmp/lm_step step MODEL_DIR BATCH SEQ ITERS THREADS
 *   /tmp/lm_step generate MODEL_DIR PROMPT_LEN NEW_TOKENS THREADS
 */
#include "bench_clock.h"

#include <dtrain/lm.h>
#include <dtrain/optim.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static long peak_rss_mb(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss / 1024;
}

static int fail(const char *what) {
    fprintf(stderr, "lm_step: %s: %s\n", what, dt_last_error());
    return 1;
}

static int run_step(dt_lm *m, int64_t B, int64_t T, int iters) {
    dt_module *root = dt_lm_module(m);
    dt_ctx *ctx = dt_module_ctx(root);
    int64_t V = dt_lm_get_config(m)->vocab;
    dt_optim_config oc = dt_optim_defaults(DT_OPTIM_ADAMW);
    oc.lr = 1e-4f;
    dt_optimizer *opt = dt_optim_new_for_module(&oc, root);
    int64_t *x = malloc((size_t)(B * T) * sizeof *x), *y = malloc((size_t)(B * T) * sizeof *y);
    uint64_t s = 1;
    for (int64_t i = 0; i < B * T; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (int64_t)((s >> 33) % (uint64_t)V);
        y[i] = (int64_t)((s >> 13) % (uint64_t)V);
    }
    double *times = malloc((size_t)iters * sizeof *times), loss = 0, cpu0 = 0;
    for (int it = -2; it < iters; it++) { /* two warm-up steps */
        if (it == 0) cpu0 = bench_cpu();
        double t0 = bench_wall();
        dt_module_zero_grad_lazy(root);
        dt_tensor *ids = dt_tensor_from_i64(ctx, 2, (int64_t[]){B, T}, x);
        dt_tensor *tg = dt_tensor_from_i64(ctx, 1, (int64_t[]){B * T}, y);
        dt_tensor *logits = dt_lm_forward(m, ids); // (B, T, V)
        dt_tensor *l = dt_cross_entropy(dt_reshape(logits, 2, (int64_t[]){B * T, V}), tg, -100);
        if (!l || dt_backward(l) != DT_OK || dt_optim_step_module(opt, root) != DT_OK)
            return fail("step");
        loss = dt_item(l);
        dt_ctx_reset(ctx);
        if (it >= 0) times[it] = bench_wall() - t0;
    }
    double cpu = (bench_cpu() - cpu0) / iters;
    qsort(times, (size_t)iters, sizeof *times, bench_cmp_double);
    printf("{\"impl\": \"dtrain\", \"what\": \"step\", \"batch\": %lld, \"seq\": %lld, "
           "\"step_ms\": %.1f, \"cpu_s_per_step\": %.2f, \"tokens_per_s\": %.0f, "
           "\"loss\": %.4f, \"peak_rss_mb\": %ld}\n",
           (long long)B, (long long)T, times[iters / 2] * 1e3, cpu,
           (double)(B * T) / times[iters / 2], loss, peak_rss_mb());
    dt_optim_free(opt);
    free(x), free(y), free(times);
    return 0;
}

static int run_generate(dt_lm *m, size_t prompt_len, size_t n) {
    int32_t *prompt = malloc(prompt_len * sizeof *prompt);
    for (size_t i = 0; i < prompt_len; i++) prompt[i] = (int32_t)((i * 7919 + 13) % 50000);
    dt_lm_gen_opts o = dt_lm_gen_defaults(); /* greedy, no EOS stop: n tokens exactly */
    int32_t *out = NULL;
    size_t got = 0;
    if (dt_lm_generate(m, prompt, prompt_len, 8, &o, &out, &got) != DT_OK) return fail("warm-up");
    free(out);
    double t0 = bench_wall(), c0 = bench_cpu();
    if (dt_lm_generate(m, prompt, prompt_len, n, &o, &out, &got) != DT_OK) return fail("generate");
    double dt = bench_wall() - t0, cpu = bench_cpu() - c0;
    printf("{\"impl\": \"dtrain\", \"what\": \"generate\", \"prompt\": %zu, \"new_tokens\": %zu, "
           "\"seconds\": %.3f, \"cpu_s\": %.3f, \"tokens_per_s\": %.1f, \"peak_rss_mb\": %ld}\n",
           prompt_len, got - prompt_len, dt, cpu, (double)(got - prompt_len) / dt, peak_rss_mb());
    free(out), free(prompt);
    return 0;
}

int main(int argc, char **argv) {
    bool step = argc == 7 && !strcmp(argv[1], "step");
    if (!step && !(argc == 6 && !strcmp(argv[1], "generate"))) {
        fprintf(stderr, "usage: lm_step step DIR B T ITERS THREADS | generate DIR P N THREADS\n");
        return 2;
    }
    dt_set_num_threads(atoi(argv[argc - 1]));
    dt_lm *m = NULL;
    if (dt_lm_load(&m, argv[2]) != DT_OK) return fail("load");
    int rc = step ? run_step(m, atoll(argv[3]), atoll(argv[4]), atoi(argv[5]))
                  : run_generate(m, (size_t)atoll(argv[3]), (size_t)atoll(argv[4]));
    dt_lm_free(m);
    return rc;
}
