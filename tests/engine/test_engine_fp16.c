/* The engine with fp16.enabled trains in fp16 (fp16-rounded GEMMs over fp32 masters, DeepSpeed's
 * dynamic loss scaling), never in f32 in silence:
 *   - an MLP's and a small GPT's losses track fp32's within a tolerance, and are not fp32's bits;
 *   - a loss scale too large for fp16 overflows the backward's fp16 GEMMs (finite in f32): each
 *     such step is skipped, counted, leaves the weights alone and halves the scale;
 *   - huge activations overflow the forward to inf: the step is skipped, the scale lowered;
 *   - the scale doubles after loss_scale_window good steps, as DeepSpeed's scaler does; a static
 *     loss_scale never moves, its overflows are skipped all the same;
 *   - a checkpoint resumes the scaler exactly (the same scales, skips and weights afterwards);
 *   - a process without F16C refuses fp16 at engine init with a hint. */
#include "base/base_impl.h"
#include "dtrain/engine.h"
#include "fixtures/files.h"
#include "fixtures/toy_trial.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_tmp[256];

/* A config of 8 samples a step, optimizer section `opt` and fp16 section `fp16` ("" for fp32). */
static json_t *config(const char *opt, const char *fp16) {
    char buf[512];
    snprintf(buf, sizeof buf,
             "{\"train_batch_size\": 8, \"steps_per_print\": 1000000, \"optimizer\": %s%s%s}", opt,
             *fp16 ? ", \"fp16\": " : "", fp16);
    json_t *j = dt_ds_config_load(buf);
    CHECK_MSG(j != NULL, "%s", dt_last_error());
    return j;
}

/* An MLP 8 -> 32 -> 32 -> 3 under Adam with the given fp16 section ("" for fp32); the engine
 * owns nothing of the model. */
static dt_engine *make(const char *fp16, dt_module **m) {
    json_t *j = config("{\"type\": \"Adam\", \"params\": {\"lr\": 0.01}}", fp16);
    *m = toy_model_built(dt_model_mlp(8, 32, 2, 3), 7);
    dt_engine *e = j ? dt_engine_init(*m, j) : NULL;
    if (dt_cpu_isa_level() >= DT_CPU_AVX2) /* below, fp16 is refused (the last test) */
        CHECK_MSG(e != NULL, "%s", dt_last_error());
    json_decref(j);
    return e;
}

static void drop(dt_engine *e, dt_module *m) {
    dt_engine_free(e);
    toy_model_free(m);
}

/* One step on batch `step` (inputs times `gain`); returns the loss (unscaled). */
static float train_step(dt_engine *e, int64_t step, float gain) {
    dt_ctx *c = dt_module_ctx(dt_engine_module(e));
    float x[8 * 8];
    int64_t y[8];
    for (int b = 0; b < 8; b++) {
        for (int k = 0; k < 8; k++)
            x[b * 8 + k] = gain * cosf(0.37f * (float)((step % 16 * 8 + b) * (k + 1)));
        y[b] = (x[b * 8] > 0) + (x[b * 8 + 1] > 0.5f * gain);
    }
    dt_tensor *l =
        dt_cross_entropy(dt_engine_forward(e, dt_tensor_from_f32(c, 2, (int64_t[]){8, 8}, x)),
                         dt_tensor_from_i64(c, 1, (int64_t[]){8}, y), -100);
    float loss = l ? (float)dt_item(l) : NAN;
    CHECK(dt_engine_backward(e, l) == DT_OK);
    CHECK_MSG(dt_engine_step(e) == DT_OK, "%s", dt_last_error());
    return loss;
}

static void test_tracks_fp32(void) {
    dt_module *m32, *m16;
    dt_engine *e32 = make("", &m32),
              *e16 = make("{\"enabled\": true, \"initial_scale_power\": 10}", &m16);
    if (e32 && e16) {
        double worst = 0, first = 0, last = 0;
        int differ = 0;
        for (int s = 0; s < 40; s++) {
            float a = train_step(e32, s, 1.0f), b = train_step(e16, s, 1.0f);
            worst = fmax(worst, fabs(a - b) / (0.02 + 0.02 * fabs(a)));
            differ += a != b;
            if (s < 4) first += b;
            if (s >= 36) last += b;
        }
        CHECK_MSG(worst <= 1.0, "fp16 loss off fp32's by %g of the tolerance", worst);
        CHECK_MSG(differ > 0, "fp16 losses are fp32's bits: fp16 did not round anything");
        CHECK_MSG(last < 0.7 * first, "fp16 did not learn: %g -> %g", first / 4, last / 4);
        CHECK(dt_engine_skipped_steps(e16) == 0 && dt_engine_loss_scale(e16) == 1024.0);
    }
    drop(e32, m32);
    drop(e16, m16);
}

/* The mean loss of steps 25-29 of a small GPT (attention, layer norms, the LM head) learning
 * a fixed next-token map, under the given fp16 section ("" for fp32) */
static double gpt_final_loss(const char *fp16, int64_t *skipped) {
    dt_gpt_config g = {.vocab = 64, .seq = 16, .d_model = 64, .n_head = 4, .n_layer = 2};
    json_t *j = config("{\"type\": \"AdamW\", \"params\": {\"lr\": 0.003}}", fp16);
    dt_ctx *c = dt_ctx_new(NULL, 1);
    dt_module *m = dt_model_gpt(&g);
    dt_module_build(m, c, 9);
    dt_engine *e = j ? dt_engine_init(m, j) : NULL;
    CHECK_MSG(e != NULL, "%s", dt_last_error());
    json_decref(j);
    int64_t tok[8 * 16], next[8 * 16];
    double sum = 0;
    for (int s = 0; e && s < 30; s++) {
        for (int64_t i = 0; i < 8 * 16; i++) {
            tok[i] = (i * 5 + s * 11) % 64;
            next[i] = (tok[i] * 7 + 3) % 64;
        }
        dt_tensor *y = dt_engine_forward(e, dt_tensor_from_i64(c, 2, (int64_t[]){8, 16}, tok));
        dt_tensor *l = dt_cross_entropy(dt_reshape(y, 2, (int64_t[]){8 * 16, 64}),
                                        dt_tensor_from_i64(c, 1, (int64_t[]){8 * 16}, next), -100);
        if (s >= 25) sum += dt_item(l);
        CHECK(dt_engine_backward(e, l) == DT_OK && dt_engine_step(e) == DT_OK);
    }
    *skipped = e ? dt_engine_skipped_steps(e) : -1;
    dt_engine_free(e);
    dt_module_free(m);
    dt_ctx_free(c);
    return sum / 5;
}

/* DeepSpeed's default fp16 section (scale 2^16) on a GPT: it learns as fp32 does, but not with
 * fp32's bits (its matmuls round to fp16) */
static void test_gpt_tracks_fp32(void) {
    int64_t sk32, sk16;
    double f32 = gpt_final_loss("", &sk32), f16 = gpt_final_loss("{\"enabled\": true}", &sk16);
    CHECK_MSG(f32 < 0.5 * log(64.0), "fp32 loss %.4f did not fall", f32);
    CHECK_MSG(fabs(f16 - f32) <= 0.02 * f32 + 0.005 && f16 != f32,
              "fp16 %.7f vs fp32 %.7f (%lld skipped)", f16, f32, (long long)sk16);
    fprintf(stderr, "  GPT: fp32 %.7f, fp16 %.7f, %lld fp16 steps skipped\n", f32, f16,
            (long long)sk16);
    CHECK(sk32 == 0 && sk16 >= 0);
}

/* scale 2^24: the scaled gradients pass 65504 in the backward's fp16 GEMMs (f32 would hold
 * them, the loss is finite): skip, count, keep the weights, halve the scale (hysteresis 1) */
static void test_scale_overflow(void) {
    dt_module *m;
    dt_engine *e = make("{\"enabled\": true, \"initial_scale_power\": 24, \"hysteresis\": 1}", &m);
    if (e) {
        int64_t n;
        float *p = dt_module_flat_params(m, &n), *prev = malloc((size_t)n * sizeof *prev);
        int skips = 0;
        for (int s = 0; s < 12; s++) {
            double scale = dt_engine_loss_scale(e);
            CHECK(scale == ldexp(1.0, 24 - skips));
            memcpy(prev, p, (size_t)n * sizeof *prev);
            float loss = train_step(e, s, 1.0f);
            CHECK(isfinite(loss));
            bool skipped = dt_engine_skipped_steps(e) > skips;
            CHECK((memcmp(prev, p, (size_t)n * sizeof *prev) == 0) == skipped);
            if (skipped) CHECK(dt_engine_loss_scale(e) == scale / 2);
            skips += skipped;
        }
        CHECK_MSG(skips >= 2, "only %d skipped steps at scale 2^24", skips);
        CHECK(dt_engine_skipped_steps(e) == skips && dt_engine_global_steps(e) == 12);
        /* and the scale settled where the gradients fit: the last steps trained */
        CHECK(skips < 10);
        free(prev);
    }
    drop(e, m);
}

/* inputs 1e5: the first layer's outputs pass 65504 and become inf in the forward */
static void test_huge_activation(void) {
    dt_module *m;
    dt_engine *e = make("{\"enabled\": true, \"initial_scale_power\": 8, \"hysteresis\": 1}", &m);
    if (e) {
        CHECK(isfinite(train_step(e, 0, 1.0f)) && dt_engine_skipped_steps(e) == 0);
        float loss = train_step(e, 1, 1e5f);
        CHECK_MSG(!isfinite(loss), "loss %g with activations past fp16's range", (double)loss);
        CHECK(dt_engine_skipped_steps(e) == 1 && dt_engine_loss_scale(e) == 128.0);
        CHECK(isfinite(train_step(e, 2, 1.0f)) && dt_engine_skipped_steps(e) == 1);
    }
    drop(e, m);
}

/* a static loss_scale: an overflow still skips the step (and counts it), the scale never moves */
static void test_static_scale(void) {
    dt_module *m;
    dt_engine *e = make("{\"enabled\": true, \"loss_scale\": 512}", &m);
    for (int s = 0; e && s < 4; s++) {
        float loss = train_step(e, s, s == 2 ? 1e5f : 1.0f);
        CHECK(isfinite(loss) == (s != 2));
        CHECK(dt_engine_loss_scale(e) == 512.0 && dt_engine_skipped_steps(e) == (s >= 2));
    }
    drop(e, m);
}

/* window 3: the scale doubles on the 4th good update, then every 3 (DeepSpeed's indexing) */
static void test_scale_rises(void) {
    dt_module *m;
    dt_engine *e =
        make("{\"enabled\": true, \"initial_scale_power\": 4, \"loss_scale_window\": 3}", &m);
    static const double want[] = {16, 16, 16, 16, 32, 32, 32, 64, 64, 64, 128};
    for (int s = 0; e && s < (int)(sizeof want / sizeof *want); s++) {
        CHECK_MSG(dt_engine_loss_scale(e) == want[s], "step %d: scale %g, want %g", s,
                  dt_engine_loss_scale(e), want[s]);
        train_step(e, s, 1.0f);
    }
    CHECK(e && dt_engine_skipped_steps(e) == 0);
    drop(e, m);
}

static json_t *saved_scaler(const char *dir, const char *tag) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s/engine_state.json", dir, tag);
    json_t *s = json_load_file(path, 0, NULL);
    json_t *ls = s ? json_incref(json_object_get(s, "loss_scaler")) : NULL;
    json_decref(s);
    return ls;
}

/* A run with overflows (scale 2^20, window 2: the scale keeps climbing into overflow) saved
 * mid-way: the resumed engine must take the same steps — scales, skips, weights — as the
 * original, and save the same scaler state. */
static void test_resume_exact(void) {
    const char *fp16 = "{\"enabled\": true, \"initial_scale_power\": 20, \"loss_scale_window\": 2,"
                       " \"hysteresis\": 2}";
    dt_module *ma, *mb;
    dt_engine *a = make(fp16, &ma), *b = make(fp16, &mb);
    char dir[400];
    snprintf(dir, sizeof dir, "%s/ck", g_tmp);
    if (a && b) {
        for (int s = 0; s < 9; s++) train_step(a, s, 1.0f);
        int64_t skips = dt_engine_skipped_steps(a);
        CHECK_MSG(skips > 0, "no overflow before the save");
        CHECK(dt_engine_save_checkpoint(a, dir, "t1", NULL) == DT_OK);
        CHECK_MSG(dt_engine_load_checkpoint(b, dir, "t1", NULL, NULL) == DT_OK, "%s",
                  dt_last_error());
        CHECK(dt_engine_loss_scale(b) == dt_engine_loss_scale(a));
        CHECK(dt_engine_skipped_steps(b) == skips);
        int64_t n;
        float *pa = dt_module_flat_params(ma, &n), *pb = dt_module_flat_params(mb, NULL);
        int diverged = -1;
        for (int s = 9; s < 24; s++) {
            train_step(a, s, 1.0f);
            train_step(b, s, 1.0f);
            if (diverged < 0 && (dt_engine_loss_scale(a) != dt_engine_loss_scale(b) ||
                                 dt_engine_skipped_steps(a) != dt_engine_skipped_steps(b) ||
                                 memcmp(pa, pb, (size_t)n * sizeof *pa)))
                diverged = s;
        }
        CHECK_MSG(diverged < 0, "the resumed run left the original at step %d", diverged);
        CHECK_MSG(dt_engine_skipped_steps(a) > skips, "no overflow after the resume");
        CHECK(dt_engine_save_checkpoint(a, dir, "a2", NULL) == DT_OK);
        CHECK(dt_engine_save_checkpoint(b, dir, "b2", NULL) == DT_OK);
        json_t *la = saved_scaler(dir, "a2"), *lb = saved_scaler(dir, "b2");
        CHECK(la && lb && json_equal(la, lb));
        json_decref(la);
        json_decref(lb);
    }
    drop(a, ma);
    drop(b, mb);
}

static void test_refused_without_f16c(void) {
    dt_cpu_isa prev = dt__cpu_isa_override(DT_CPU_GENERIC);
    dt_module *m;
    dt_engine *e = make("{\"enabled\": true}", &m);
    CHECK(e == NULL && dt_last_status() == DT_ERR_CONFIG);
    const char *msg = dt_last_error();
    CHECK_MSG(strstr(msg, "fp16.enabled") && strstr(msg, "F16C") && strstr(msg, "bf16"), "%s", msg);
    CHECK(dt_ctx_autocast(dt_module_ctx(m)) == DT_DTYPE_F32);
    dt__cpu_isa_override(prev);
    drop(e, m);
}

int main(void) {
    if (!fx_tmpdir(g_tmp, sizeof g_tmp, "test-engine-fp16")) return 1;
    TEST_RUN(test_tracks_fp32);
    TEST_RUN(test_gpt_tracks_fp32);
    TEST_RUN(test_scale_overflow);
    TEST_RUN(test_huge_activation);
    TEST_RUN(test_static_scale);
    TEST_RUN(test_scale_rises);
    TEST_RUN(test_resume_exact);
    TEST_RUN(test_refused_without_f16c);
    if (!fx_rmtree(g_tmp)) fprintf(stderr, "could not remove %s\n", g_tmp);
    TEST_END();
}
