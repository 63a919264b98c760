/* The engine's "deterministic" mode under mpirun (2 and 4 ranks, one thread each):
 *  - with it, ZeRO stages 0, 1, 2, 3 and cpu offload give bit-identical weights after 20 steps
 *    with gradient_accumulation_steps 1, 2 and 3, with clipping active and without, on a small
 *    CNN and a small GPT;
 *  - the plain trial API's data parallelism with optimizations.deterministic and an
 *    aggregation_frequency of 2 and 3 gives the engine's bits (stage 0 and stage 2, same
 *    optimiser, no clipping);
 *  - without it, the difference stage 2 vs stage 0 with accumulation is printed (measured, not
 *    asserted: it is what the mode removes; test_zero.c keeps today's tolerances). */
#define _GNU_SOURCE
#include "dtrain/engine.h"
#include "dtrain/trial.h"
#include "mpi_models.h"
#include "fixtures/toy_trial.h"
#include "mpi_test.h"
#include "trial/trial_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GLOBAL 24 /* a multiple of W * gas for W 2, 4 and gas 1, 2, 3 */
#define STEPS 20
#define IMG 8
#define CLASSES 4
#define CLIP 0.05 /* below the gradient norm of these models: clipping scales every step */

static dt_comm *g_world;

#define GPT MT_GPT

/* conv3x3(1->4) ReLU maxpool2, conv3x3(4->8) ReLU maxpool2, flatten, linear 32->16 ReLU,
 * linear 16->4 on (N, 1, 8, 8): dt_model_cnn's shape, small enough for 84 runs of 20 steps. */
static dt_module *cnn(void) {
    dt_module *m = dt_nn_sequential(
        dt_nn_conv2d(1, 4, 3, 1, 1, true), dt_nn_relu(), dt_nn_max_pool2d(2, 2, 0),
        dt_nn_conv2d(4, 8, 3, 1, 1, true), dt_nn_relu(), dt_nn_max_pool2d(2, 2, 0), dt_nn_flatten(),
        dt_nn_linear(8 * 2 * 2, 16, true), dt_nn_relu(), dt_nn_linear(16, CLASSES, true), NULL);
    return toy_model_built(m, 3);
}

static dt_module *gpt(void) {
    return mt_gpt(5);
}

/* Loss of samples [first, first+count) of global step s. */
static dt_tensor *loss_of(dt_engine *e, bool is_gpt, int64_t s, int64_t first, int64_t count) {
    dt_ctx *c = dt_module_ctx(dt_engine_module(e));
    int64_t T = GPT.seq, per = is_gpt ? T : IMG * IMG;
    float *x = malloc((size_t)(count * per) * sizeof *x);
    int64_t *in = malloc((size_t)(count * per) * sizeof *in);
    int64_t *y = malloc((size_t)(count * per) * sizeof *y);
    for (int64_t b = 0; b < count; b++) {
        int64_t id = s * GLOBAL + first + b;
        for (int64_t t = 0; t < per; t++) {
            if (is_gpt) {
                in[b * T + t] = (id * 5 + t * t) % GPT.vocab;
                y[b * T + t] = (id * 5 + (t + 1) * (t + 1)) % GPT.vocab;
            } else {
                x[b * per + t] = sinf(0.37f * (float)(id + 1) * (float)(t + 1));
            }
        }
        if (!is_gpt) y[b] = (id * 7 + (x[b * per] > 0)) % CLASSES;
    }
    dt_tensor *logits, *yt;
    if (is_gpt) {
        dt_tensor *xt = dt_tensor_from_i64(c, 2, (int64_t[]){count, T}, in);
        yt = dt_tensor_from_i64(c, 1, (int64_t[]){count * T}, y);
        logits = dt_reshape(dt_engine_forward(e, xt), 2, (int64_t[]){count * T, GPT.vocab});
    } else {
        dt_tensor *xt = dt_tensor_from_f32(c, 4, (int64_t[]){count, 1, IMG, IMG}, x);
        yt = dt_tensor_from_i64(c, 1, (int64_t[]){count}, y);
        logits = dt_engine_forward(e, xt);
    }
    free(x);
    free(in);
    free(y);
    return dt_cross_entropy(logits, yt, -100);
}

/* The engine's config of run() as text. */
static void config_text(char *cfg, size_t size, const char *zero, int gas, double clip, bool det) {
    snprintf(cfg, size,
             "{\"train_batch_size\": %d, \"gradient_accumulation_steps\": %d,"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01,"
             " \"weight_decay\": 0.01}}, \"gradient_clipping\": %g,"
             " \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 5,"
             " \"warmup_max_lr\": 0.01}},"
             " \"zero_optimization\": %s, \"deterministic\": %s, \"steps_per_print\": 1000000}",
             GLOBAL, gas, clip, zero, det ? "true" : "false");
}

/* `steps` global steps of one config on a fresh model: the final weights (NULL on failure);
 * *clipped: some step's gradient norm was above `clip` (so clipping scaled it). */
static float *run(const char *zero, int gas, double clip, bool det, bool is_gpt, int64_t *n,
                  bool *clipped) {
    char cfg[1024];
    config_text(cfg, sizeof cfg, zero, gas, clip, det);
    json_t *j = dt_ds_config_load(cfg);
    dt_module *m = is_gpt ? gpt() : cnn();
    dt_engine_opts o = {.comm = g_world};
    dt_engine *e = j ? dt_engine_init_opts(m, j, &o) : NULL;
    json_decref(j);
    CHECK_MSG(e != NULL, "engine %s: %s", zero, dt_last_error());
    float *w = NULL;
    if (e) {
        int W = dt_comm_size(g_world), r = dt_comm_rank(g_world);
        int64_t mb = dt_engine_train_micro_batch_size_per_gpu(e);
        bool ok = true;
        *clipped = false;
        for (int64_t s = 0; s < STEPS && ok; s++) {
            for (int64_t k = 0; k < gas && ok; k++) {
                dt_tensor *loss = loss_of(e, is_gpt, s, (k * W + r) * mb, mb);
                ok = dt_engine_backward(e, loss) == DT_OK && dt_engine_step(e) == DT_OK;
            }
            *clipped |= clip > 0 && dt_engine_grad_norm(e) > clip;
        }
        CHECK_MSG(ok, "%s gas %d: %s", zero, gas, dt_last_error());
        dt_engine_free(e);
        float *p = dt_module_flat_params(m, n);
        w = malloc((size_t)*n * sizeof *w);
        memcpy(w, p, (size_t)*n * sizeof *w);
        if (!ok) {
            free(w);
            w = NULL;
        }
    }
    toy_model_free(m);
    return w;
}

/* max over elements of |a - b| / max |b| */
static double max_rel(const float *a, const float *b, int64_t n) {
    double d = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        s = fmax(s, fabs((double)b[i]));
    }
    return d / (s > 0 ? s : 1);
}

static const char *const STAGES[] = {
    "{\"stage\": 1}",
    "{\"stage\": 2, \"reduce_bucket_size\": 500}",
    "{\"stage\": 2, \"offload_optimizer\": {\"device\": \"cpu\"}}",
    "{\"stage\": 3, \"reduce_bucket_size\": 700, \"stage3_param_persistence_threshold\": 100}",
    "{\"stage\": 3, \"offload_param\": {\"device\": \"cpu\"},"
    " \"offload_optimizer\": {\"device\": \"cpu\"}}",
};

static void check_model(bool is_gpt) {
    const char *name = is_gpt ? "gpt" : "cnn";
    for (int gas = 1; gas <= 3; gas++)
        for (int c = 0; c < 2; c++) {
            double clip = c ? CLIP : 0;
            int64_t n = 0, k = 0;
            bool clipped = false, cl = false;
            float *ref = run("{\"stage\": 0}", gas, clip, true, is_gpt, &n, &clipped);
            if (!ref) continue;
            CHECK_MSG(clipped == (clip > 0), "%s gas %d clip %g: clipping %s", name, gas, clip,
                      clipped ? "active" : "never active");
            for (size_t z = 0; z < sizeof STAGES / sizeof *STAGES; z++) {
                float *w = run(STAGES[z], gas, clip, true, is_gpt, &k, &cl);
                if (!w) continue;
                CHECK_MSG(k == n && !memcmp(w, ref, (size_t)n * sizeof *w),
                          "%s %s gas %d clip %g: not bit-identical to stage 0 (max rel %.3g)", name,
                          STAGES[z], gas, clip, max_rel(w, ref, n));
                free(w);
            }
            free(ref);
        }
}

static void test_cnn_stages_bit_identical(void) {
    check_model(false);
}

static void test_gpt_stages_bit_identical(void) {
    check_model(true);
}

/* The plain trial: the same model, data, optimiser (the engine config's, constant lr) and
 * split of each global batch over slots and batches, through dt_trial_backward and
 * dt_step_optimizer with optimizations {aggregation_frequency: agg, deterministic: det}. */
static float *run_trial(int agg, bool det, int64_t *n) {
    char js[160], cfg[1024];
    snprintf(js, sizeof js,
             "{\"optimizations\": {\"aggregation_frequency\": %d, "
             "\"deterministic\": %s}}",
             agg, det ? "true" : "false");
    json_t *tc = json_loads(js, 0, NULL);
    dt_trial_ctx *c = dt_trial_ctx_new(tc, 1);
    json_decref(tc);
    config_text(cfg, sizeof cfg, "{\"stage\": 0}", agg, 0, det);
    json_t *j = dt_ds_config_load(cfg);
    dt_ds_config ds;
    CHECK(c && j && dt_ds_config_parse(j, dt_comm_size(g_world), &ds) == DT_OK);
    json_decref(j);
    if (!c) return NULL;
    /* the engine's model, built on the trial's runtime with the same seed */
    dt_module *m = dt_model_gpt(&GPT);
    if (m && dt_module_build(m, dt_trial_runtime(c), 5) == DT_OK) m = dt_wrap_model(c, m);
    dt_optimizer *o = m ? dt_wrap_optimizer(c, dt_optim_new_for_module(&ds.optimizer, m), m) : NULL;
    CHECK_MSG(o != NULL, "trial: %s", dt_last_error());
    int W = dt_comm_size(g_world), r = dt_comm_rank(g_world);
    int64_t mb = ds.train_micro_batch_size_per_gpu;
    bool ok = o != NULL;
    for (int64_t s = 0; s < STEPS && ok; s++)
        for (int64_t k = 0; k < agg && ok; k++) {
            c->batches_trained = s * agg + k;
            int64_t T = GPT.seq, first = (k * W + r) * mb;
            int64_t *in = malloc((size_t)(mb * T) * sizeof *in),
                    *y = malloc((size_t)(mb * T) * sizeof *y);
            for (int64_t b = 0; b < mb; b++) {
                int64_t id = s * GLOBAL + first + b;
                for (int64_t t = 0; t < T; t++) {
                    in[b * T + t] = (id * 5 + t * t) % GPT.vocab;
                    y[b * T + t] = (id * 5 + (t + 1) * (t + 1)) % GPT.vocab;
                }
            }
            dt_ctx *rt = dt_trial_runtime(c);
            dt_tensor *xt = dt_tensor_from_i64(rt, 2, (int64_t[]){mb, T}, in);
            dt_tensor *yt = dt_tensor_from_i64(rt, 1, (int64_t[]){mb * T}, y);
            free(in);
            free(y);
            dt_tensor *logits =
                dt_reshape(dt_module_forward(m, xt), 2, (int64_t[]){mb * T, GPT.vocab});
            ok = dt_trial_backward(c, dt_cross_entropy(logits, yt, -100)) == DT_OK &&
                 dt_step_optimizer(c, o, NULL) == DT_OK;
            dt_ctx_reset(rt);
        }
    CHECK_MSG(ok, "trial agg %d: %s", agg, dt_last_error());
    float *p = dt_module_flat_params(m, n), *w = malloc((size_t)*n * sizeof *w);
    memcpy(w, p, (size_t)*n * sizeof *w);
    dt_trial_ctx_free(c);
    return w;
}

/* The engine without its LR schedule (the trial's optimiser keeps a constant lr). */
static float *run_engine_const_lr(const char *zero, int gas, int64_t *n) {
    char cfg[1024];
    config_text(cfg, sizeof cfg, zero, gas, 0, true);
    json_t *j = dt_ds_config_load(cfg);
    json_object_del(j, "scheduler");
    dt_module *m = gpt();
    dt_engine_opts o = {.comm = g_world};
    dt_engine *e = dt_engine_init_opts(m, j, &o);
    json_decref(j);
    CHECK_MSG(e != NULL, "engine: %s", dt_last_error());
    float *w = NULL;
    if (e) {
        int W = dt_comm_size(g_world), r = dt_comm_rank(g_world);
        int64_t mb = dt_engine_train_micro_batch_size_per_gpu(e);
        bool ok = true;
        for (int64_t s = 0; s < STEPS && ok; s++)
            for (int64_t k = 0; k < gas && ok; k++)
                ok = dt_engine_backward(e, loss_of(e, true, s, (k * W + r) * mb, mb)) == DT_OK &&
                     dt_engine_step(e) == DT_OK;
        CHECK(ok);
        dt_engine_free(e);
        float *p = dt_module_flat_params(m, n);
        w = malloc((size_t)*n * sizeof *w);
        memcpy(w, p, (size_t)*n * sizeof *w);
    }
    toy_model_free(m);
    return w;
}

static void test_plain_trial_same_order(void) {
    for (int agg = 2; agg <= 3; agg++) {
        int64_t n = 0, k = 0, k2 = 0;
        float *t = run_trial(agg, true, &n);
        float *e0 = run_engine_const_lr("{\"stage\": 0}", agg, &k);
        float *e2 = run_engine_const_lr("{\"stage\": 2, \"reduce_bucket_size\": 500}", agg, &k2);
        if (t && e0 && e2) {
            CHECK_MSG(n == k && !memcmp(t, e0, (size_t)n * sizeof *t),
                      "trial agg %d vs engine stage 0: max rel %.3g", agg, max_rel(t, e0, n));
            CHECK_MSG(n == k2 && !memcmp(t, e2, (size_t)n * sizeof *t),
                      "trial agg %d vs engine stage 2: max rel %.3g", agg, max_rel(t, e2, n));
        }
        float *plain = run_trial(agg, false, &n);
        if (plain && e2 && mt_rank == 0)
            fprintf(stderr, "  without the mode, trial agg %d vs engine stage 2: max rel %.3g\n",
                    agg, max_rel(plain, e2, n));
        free(plain);
        free(t);
        free(e0);
        free(e2);
    }
}

/* What the mode removes: without it, stage 2 accumulates in another order than stage 0. */
static void test_measure_without(void) {
    for (int gp = 0; gp < 2; gp++)
        for (int c = 0; c < 2; c++) {
            int64_t n = 0, k = 0;
            bool cl;
            float *ref = run("{\"stage\": 0}", 2, c ? CLIP : 0, false, gp, &n, &cl);
            float *w = run("{\"stage\": 2}", 2, c ? CLIP : 0, false, gp, &k, &cl);
            if (ref && w && mt_rank == 0)
                fprintf(stderr, "  without the mode, %s gas 2 clip %g: stage 2 vs 0 max rel %.3g\n",
                        gp ? "gpt" : "cnn", c ? CLIP : 0.0, max_rel(w, ref, n));
            free(ref);
            free(w);
        }
}

int main(void) {
    if (!mt_begin(&g_world)) return 1;
    MT_RUN(test_measure_without);
    MT_RUN(test_cnn_stages_bit_identical);
    MT_RUN(test_gpt_stages_bit_identical);
    MT_RUN(test_plain_trial_same_order);
    return mt_finish(g_world, NULL);
}
