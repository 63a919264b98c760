/* dsat_compare.h — the memory model against the engine's measured peak, shared by
 * tests/dsat/test_dsat_model.c (one slot) and tests/mpi/test_dsat_memory.c (every rank of the
 * MPI world): the benchmark models (dtrain bench's gpt and mlp at their default sizes), one
 * engine step of a fixed batch per configuration, the device's peak over the whole run
 * (building the model included) against dt_dsat_predict_bytes of a profile taken at
 * micro-batch 1, ZeRO stage 0, refined with one at micro-batch 2. */
#ifndef DT_DSAT_COMPARE_H
#define DT_DSAT_COMPARE_H

#include "dsat/dsat.h"
#include "dtrain/nn.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The engine's peak of one step: *peak (largest over the ranks); with `profile` non-NULL the
 * profile of that engine too. DT_ERR_OOM never happens here (no budget). */
static dt_status cmp_run(const char *model, int stage, int64_t mbs, bool bf16, bool offload,
                         int64_t *peak, dt_dsat_profile *profile) {
    bool gpt = !strcmp(model, "gpt");
    dt_ctx *ctx = dt_ctx_new(NULL, 1234);
    dt_gpt_config g = {.vocab = 256, .seq = 128, .d_model = 256, .n_head = 4, .n_layer = 4};
    dt_module *net = gpt ? dt_model_gpt(&g) : dt_model_mlp(784, 512, 2, 10);
    dt_status st = ctx && net ? dt_module_build(net, ctx, 42) : DT_ERR_OOM;
    dt_tensor *x = NULL, *y = NULL;
    if (st == DT_OK) {
        int64_t xs[2] = {mbs, gpt ? g.seq : 784}, ys[2] = {mbs, g.seq};
        x = dt_tensor_new_heap(ctx, gpt ? DT_DTYPE_I64 : DT_DTYPE_F32, 2, xs, DT_MEM_OTHER);
        y = dt_tensor_new_heap(ctx, DT_DTYPE_I64, gpt ? 2 : 1, ys, DT_MEM_OTHER);
        for (int64_t i = 0; x && y && i < dt_numel(x); i++) {
            if (gpt)
                ((int64_t *)x->data)[i] = (i * 7) % g.vocab;
            else
                ((float *)x->data)[i] = (float)((i * 7) % 13) / 13.f;
        }
        for (int64_t i = 0; x && y && i < dt_numel(y); i++) ((int64_t *)y->data)[i] = (i * 5) % 10;
        if (!x || !y) st = DT_ERR_OOM;
    }
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "{\"train_micro_batch_size_per_gpu\": %lld, \"optimizer\": {\"type\": \"AdamW\"},"
             " \"bf16\": {\"enabled\": %s}, \"zero_optimization\": {\"stage\": %d%s}}",
             (long long)mbs, bf16 ? "true" : "false", stage,
             offload ? ", \"offload_optimizer\": {\"device\": \"cpu\"}" : "");
    json_t *j = st == DT_OK ? dt_ds_config_load(cfg) : NULL;
    dt_engine *e = j ? dt_engine_init(net, j) : NULL;
    json_decref(j);
    if (st == DT_OK && !e) st = dt_last_status();
    if (st == DT_OK) {
        dt_tensor *l = dt_cross_entropy(dt_engine_forward(e, x), y, -100);
        st = l ? dt_engine_backward(e, l) : dt_last_status();
        if (st == DT_OK) st = dt_engine_step(e);
    }
    if (st == DT_OK && profile) st = dt_dsat_profile_engine(e, 1, profile);
    if (st == DT_OK) {
        dt_mem_stats ms;
        dt_device_stats(dt_ctx_device(ctx), &ms);
        *peak = ms.total_peak;
        dt_comm *comm = dt_engine_comm(e);
        if (dt_comm_size(comm) > 1)
            st = dt_comm_allreduce(comm, peak, 1, DT_COMM_DTYPE_I64, DT_REDUCE_OP_MAX);
    }
    dt_engine_free(e);
    dt_tensor_free(x);
    dt_tensor_free(y);
    dt_module_free(net);
    dt_ctx_free(ctx);
    return st;
}

/* Every stage x micro-batch x precision x offload of `model`: prints each relative error
 * (predicted / measured - 1) on rank 0 and returns the largest under-prediction (the unsafe
 * side: a config predicted to fit that does not) as a positive number; *worst_over gets the
 * largest over-prediction (the safe side: a config skipped that would have fitted); *over10
 * counts the cases beyond 10% either way. */
static double cmp_model(const char *model, const int64_t *mbs, int n_mbs, int rank, int *over10,
                        int *cases, double *worst_over) {
    double worst = 0;
    *worst_over = 0;
    for (int prec = 0; prec < 2; prec++) {
        dt_dsat_profile p;
        int64_t pk;
        dt_dsat_profile p2;
        if (cmp_run(model, 0, 1, prec == 1, false, &pk, &p) != DT_OK ||
            cmp_run(model, 0, 2, prec == 1, false, &pk, &p2) != DT_OK ||
            dt_dsat_profile_refine(&p, &p2) != DT_OK) {
            fprintf(stderr, "profile failed: %s\n", dt_last_error());
            return 1e9;
        }
        for (int stage = 0; stage <= 3; stage++)
            for (int off = 0; off <= (stage > 0); off++)
                for (int i = 0; i < n_mbs; i++) {
                    dt_dsat_knobs k = dt_dsat_knobs_default();
                    k.zero_stage = stage;
                    k.mbs = mbs[i];
                    k.offload_optimizer = off;
                    int64_t measured = 0, predicted = dt_dsat_predict_bytes(&p, &k);
                    if (cmp_run(model, stage, mbs[i], prec == 1, off, &measured, NULL) != DT_OK) {
                        fprintf(stderr, "run failed: %s\n", dt_last_error());
                        return 1e9;
                    }
                    double err = (double)predicted / (double)measured - 1;
                    if (err < 0 && -err > worst) worst = -err;
                    if (err > *worst_over) *worst_over = err;
                    *over10 += fabs(err) > 0.10;
                    ++*cases;
                    if (rank == 0)
                        printf("%s %s W=%d stage %d offload %d mbs %3lld: predicted %10lld "
                               "measured %10lld error %+6.1f%%\n",
                               model, prec ? "bf16" : "f32 ", p.slots, stage, off,
                               (long long)mbs[i], (long long)predicted, (long long)measured,
                               100 * err);
                }
    }
    return worst;
}

/* Under-prediction (the unsafe side: a config predicted to fit that does not) is held to 10%
 * everywhere, extrapolated 256x (mlp at 512, from profiles at 1 and 2) included: the arena's
 * first-step block tails and the GEMM scratch that grow with the batch are in the model
 * (docs/dsat.md, "How close it is"). Over-prediction (the safe side: a config skipped that
 * would have fitted) is held to 10% on the gpt. */
#define TOLERANCE 0.10 /* either way */
/* mlp over-predictions reach 12% at stage 3 with offload (the gather estimate is 1.3 MB high)
 * and 18.5% in bf16 with offload on an AVX2 machine's kernels; at micro-batch 512 in bf16 up
 * to 20% (the block-tail bound, twice the bytes used, is reached in f32 only) */
#define TOLERANCE_MLP_OVER 0.25

/* Every case of both models in this process's world (one slot, or every rank of an MPI job),
 * held to the tolerances above; rank 0 prints each error and the largest. */
static void cmp_check_all(int rank) {
    const int64_t gpt_mbs[] = {1, 2, 4}, mlp_mbs[] = {1, 16, 64}, far[] = {512};
    int over = 0, cases = 0;
    double go, mo, fo;
    double g = cmp_model("gpt", gpt_mbs, 3, rank, &over, &cases, &go);
    double m = cmp_model("mlp", mlp_mbs, 3, rank, &over, &cases, &mo);
    double f = cmp_model("mlp", far, 1, rank, &over, &cases, &fo);
    if (rank == 0)
        printf("largest under / over-prediction: gpt %.1f%% / %.1f%%, mlp %.1f%% / %.1f%%, mlp "
               "at 512 %.1f%% / %.1f%%; %d of %d cases beyond 10%%\n",
               100 * g, 100 * go, 100 * m, 100 * mo, 100 * f, 100 * fo, over, cases);
    CHECK_MSG(g <= TOLERANCE && go <= TOLERANCE, "gpt: under %.3f over %.3f", g, go);
    CHECK_MSG(m <= TOLERANCE && mo <= TOLERANCE_MLP_OVER, "mlp: under %.3f over %.3f", m, mo);
    CHECK_MSG(f <= TOLERANCE && fo <= TOLERANCE_MLP_OVER, "mlp at 512: under %.3f over %.3f", f,
              fo);
}

#endif
