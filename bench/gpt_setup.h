/* gpt_setup.h — what the GPT step benchmarks (bench_gpt.c, bench_fp16.c) share: their command
 * line, the model (dt_model_gpt, seed 42) with fixed random tokens and targets (seed 7), and
 * one timed forward + backward with its loss and FLOPs. Header-only, so each benchmark stays
 * one file to compile by hand. */
#ifndef BENCH_GPT_SETUP_H
#define BENCH_GPT_SETUP_H

#include "bench_clock.h"
#include "dtrain/nn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct bench_gpt {
    dt_gpt_config cfg;
    int64_t B;
    int iters;
    const char *threads; /* --threads as given: one count or a list "1,2" */
    dt_ctx *ctx;
    dt_module *net;
    int64_t *tok, *tgt; /* (B, T) inputs and their targets */
} bench_gpt;

/* One step's figures: wall and CPU seconds (CPU time of the whole process: on a noisy shared
 * machine the step without the time slices other processes took), the forward's wall
 * seconds, the loss and the FLOPs. */
typedef struct bench_step {
    double wall, cpu, fwd;
    float loss;
    dt_flops flops;
} bench_step;

/* --iters --batch --seq --d-model --heads --layers --vocab --threads over g's defaults; 2 (and
 * a message) for an unknown option. */
static int bench_gpt_args(bench_gpt *g, int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i];
        long long v = atoll(argv[i + 1]);
        if (!strcmp(k, "--iters"))
            g->iters = (int)v;
        else if (!strcmp(k, "--batch"))
            g->B = v;
        else if (!strcmp(k, "--seq"))
            g->cfg.seq = v;
        else if (!strcmp(k, "--d-model"))
            g->cfg.d_model = v;
        else if (!strcmp(k, "--heads"))
            g->cfg.n_head = v;
        else if (!strcmp(k, "--layers"))
            g->cfg.n_layer = v;
        else if (!strcmp(k, "--vocab"))
            g->cfg.vocab = v;
        else if (!strcmp(k, "--threads"))
            g->threads = argv[i + 1];
        else {
            fprintf(stderr, "unknown option %s\n", k);
            return 2;
        }
    }
    if (g->iters < 1) g->iters = 1;
    return 0;
}

/* The model built in a new context and the tokens drawn; 1 (and a message) on error. */
static int bench_gpt_setup(bench_gpt *g) {
    g->ctx = dt_ctx_new(NULL, 1);
    g->net = dt_model_gpt(&g->cfg);
    if (!g->net || dt_module_build(g->net, g->ctx, 42) != DT_OK) {
        fprintf(stderr, "GPT: %s\n", dt_last_error());
        return 1;
    }
    int64_t ntok = g->B * g->cfg.seq;
    g->tok = malloc(sizeof(int64_t) * (size_t)ntok);
    g->tgt = malloc(sizeof(int64_t) * (size_t)ntok);
    dt_rng r;
    dt_rng_init(&r, 7);
    for (int64_t i = 0; i < ntok; i++) {
        g->tok[i] = (int64_t)dt_rng_below(&r, (uint64_t)g->cfg.vocab);
        g->tgt[i] = (int64_t)dt_rng_below(&r, (uint64_t)g->cfg.vocab);
    }
    return 0;
}

/* One forward + backward (cross-entropy against the targets); 1 (and a message) on error. */
static int bench_gpt_step(bench_gpt *g, bench_step *s) {
    int64_t B = g->B, T = g->cfg.seq;
    dt_ctx_flops_reset(g->ctx);
    double c0 = bench_now(CLOCK_PROCESS_CPUTIME_ID), t0 = bench_now(CLOCK_MONOTONIC);
    dt_tensor *x = dt_tensor_from_i64(g->ctx, 2, (int64_t[]){B, T}, g->tok);
    dt_tensor *y = dt_tensor_from_i64(g->ctx, 1, (int64_t[]){B * T}, g->tgt);
    dt_tensor *loss = dt_cross_entropy(dt_module_forward(g->net, x), y, -100);
    double t1 = bench_now(CLOCK_MONOTONIC);
    dt_module_zero_grad(g->net);
    if (!loss || dt_backward(loss) != DT_OK) {
        fprintf(stderr, "step failed: %s\n", dt_last_error());
        return 1;
    }
    double t2 = bench_now(CLOCK_MONOTONIC), c2 = bench_now(CLOCK_PROCESS_CPUTIME_ID);
    *s = (bench_step){.wall = t2 - t0, .cpu = c2 - c0, .fwd = t1 - t0};
    s->loss = (float)dt_item(loss);
    s->flops = dt_ctx_flops(g->ctx);
    dt_ctx_reset(g->ctx);
    return 0;
}

static void bench_gpt_free(bench_gpt *g) {
    free(g->tok);
    free(g->tgt);
    dt_module_free(g->net);
    dt_ctx_free(g->ctx);
}

#endif
