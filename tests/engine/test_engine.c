/* The engine in one process: accumulation boundaries and counters, fp16 overflow skipping with
 * DeepSpeed's scale sequence, bf16 against fp32 on the GPT model, timers and FLOPs, nvme
 * offload files, checkpoint errors that leave the engine unchanged, configuration errors. */
#include "dtrain/engine.h"
#include "fixtures/files.h"
#include "fixtures/toy_trial.h"
#include "test.h"
#include "engine/engine_iface.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_tmp[256];

static bool err_has(const char *s) {
    return strstr(dt_last_error(), s) != NULL;
}

static dt_module *mlp(void) {
    return toy_model_built(dt_model_mlp(8, 24, 2, 3), 3);
}

/* One micro-batch of 4 samples; `boost` multiplies the loss (1e38 overflows fp16 scaling). */
static dt_tensor *mlp_loss(dt_engine *e, int64_t step, float boost) {
    dt_ctx *c = dt_module_ctx(dt_engine_module(e));
    float x[4 * 8];
    int64_t y[4];
    for (int b = 0; b < 4; b++) {
        for (int k = 0; k < 8; k++) x[b * 8 + k] = cosf(0.3f * (float)((step * 4 + b) * (k + 2)));
        y[b] = (step + b) % 3;
    }
    dt_tensor *l =
        dt_cross_entropy(dt_engine_forward(e, dt_tensor_from_f32(c, 2, (int64_t[]){4, 8}, x)),
                         dt_tensor_from_i64(c, 1, (int64_t[]){4}, y), -100);
    return boost == 1.0f ? l : dt_mul(l, dt_scalar(c, boost));
}

static void test_boundaries_and_counters(void) {
    json_t *j =
        toy_ds_config("{\"train_micro_batch_size_per_gpu\": 4, \"gradient_accumulation_steps\": 3,"
                      " \"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 0.1}},"
                      " \"steps_per_print\": 1000000}");
    dt_module *m = mlp();
    dt_engine *e = dt_engine_init(m, j);
    json_decref(j);
    CHECK(e != NULL);
    if (!e) return toy_model_free(m);
    CHECK(dt_engine_train_batch_size(e) == 12);
    CHECK(dt_engine_gradient_accumulation_steps(e) == 3);
    float before = dt_module_flat_params(m, NULL)[0];
    for (int k = 0; k < 3; k++) {
        CHECK(dt_engine_is_gradient_accumulation_boundary(e) == (k == 2));
        CHECK(dt_engine_backward(e, mlp_loss(e, k, 1.0f)) == DT_OK);
        if (k < 2) CHECK(dt_module_flat_params(m, NULL)[0] == before);
        CHECK(dt_engine_step(e) == DT_OK);
    }
    CHECK(dt_module_flat_params(m, NULL)[0] != before);
    CHECK(dt_engine_global_steps(e) == 1 && dt_engine_micro_steps(e) == 3);
    CHECK(dt_engine_global_samples(e) == 12);
    CHECK(dt_engine_get_lr(e) == 0.1f);
    dt_engine_timers t;
    dt_engine_get_timers(e, &t);
    CHECK(t.micro_steps == 3 && t.steps == 1 && t.forward_s > 0 && t.backward_s > 0);
    CHECK(t.flops_fwd > 0 && t.flops_bwd > 0);
    dt_engine_reset_timers(e);
    dt_engine_get_timers(e, &t);
    CHECK(t.micro_steps == 0 && t.flops_fwd == 0);
    CHECK(dt_engine_backward(e, NULL) == DT_ERR_INVALID);
    dt_engine_free(e);
    /* the module keeps working without the engine */
    CHECK(dt_module_flat_params(m, NULL)[0] != before);
    toy_model_free(m);
}

/* fp16: losses boosted to overflow on chosen steps; the engine's scale must follow a reference
 * scaler fed the same overflow pattern, skipped steps must leave the weights alone. */
static void test_fp16_overflow_skips(void) {
    json_t *j =
        toy_ds_config("{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"Adam\", \"params\":"
                      " {\"lr\": 0.001}}, \"fp16\": {\"enabled\": true, \"initial_scale_power\": 8,"
                      " \"loss_scale_window\": 3, \"hysteresis\": 2, \"min_loss_scale\": 1},"
                      " \"zero_optimization\": {\"stage\": 2}, \"steps_per_print\": 1000000}");
    dt_module *m = mlp();
    dt_engine *e = dt_engine_init(m, j);
    CHECK_MSG(e != NULL, "%s", dt_last_error());
    if (!e) {
        json_decref(j);
        return toy_model_free(m);
    }
    dt_loss_scaler_config lc = dt_loss_scaler_defaults();
    lc.initial_scale_power = 8;
    lc.loss_scale_window = 3;
    lc.hysteresis = 2;
    dt_loss_scaler *ref = dt_loss_scaler_new(&lc);
    const bool overflow[] = {0, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 0};
    int skipped = 0;
    int64_t n;
    float *p = dt_module_flat_params(m, &n), *prev = malloc((size_t)n * sizeof *prev);
    for (int s = 0; s < (int)(sizeof overflow); s++) {
        CHECK(dt_engine_loss_scale(e) == dt_loss_scaler_scale(ref));
        memcpy(prev, p, (size_t)n * sizeof *prev);
        CHECK(dt_engine_backward(e, mlp_loss(e, s, overflow[s] ? 1e38f : 1.0f)) == DT_OK);
        CHECK(dt_engine_step(e) == DT_OK);
        bool skip;
        dt_loss_scaler_update(ref, overflow[s], &skip);
        skipped += skip;
        CHECK_MSG((memcmp(prev, p, (size_t)n * sizeof *prev) == 0) == overflow[s],
                  "step %d: weights %s", s, overflow[s] ? "changed on overflow" : "unchanged");
    }
    CHECK(dt_engine_skipped_steps(e) == skipped && skipped == 5);
    CHECK(dt_engine_global_steps(e) == (int64_t)sizeof overflow);
    CHECK(dt_engine_loss_scale(e) == dt_loss_scaler_scale(ref));
    free(prev);
    dt_loss_scaler_free(ref);
    dt_engine_free(e);
    toy_model_free(m);
    json_decref(j);
}

/* Mean loss of the last 5 of `steps` steps of a GPT learning next = (cur * 3 + b) % V. */
static double gpt_loss_after(const dt_gpt_config *g, int64_t B, bool bf16, int steps) {
    const int64_t T = g->seq, V = g->vocab;
    dt_ctx *c = dt_ctx_new(NULL, 1);
    dt_module *m = dt_model_gpt(g);
    dt_module_build(m, c, 9);
    json_t *j = toy_ds_config(
        "{\"train_batch_size\": %lld, \"optimizer\": {\"type\": \"AdamW\", \"params\":"
        " {\"lr\": 0.003}}, \"bf16\": {\"enabled\": %s}, \"steps_per_print\": 1000000}",
        (long long)B, bf16 ? "true" : "false");
    dt_engine *e = dt_engine_init(m, j);
    json_decref(j);
    int64_t *in = malloc((size_t)(B * T) * sizeof *in), *tg = malloc((size_t)(B * T) * sizeof *tg);
    double last = NAN;
    for (int s = 0; e && s < steps; s++) {
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++) {
                int64_t cur = (b * 7 + t * 3 + (s % 4)) % V;
                in[b * T + t] = cur;
                tg[b * T + t] = (cur * 3 + b) % V;
            }
        dt_tensor *logits = dt_engine_forward(e, dt_tensor_from_i64(c, 2, (int64_t[]){B, T}, in));
        dt_tensor *loss = dt_cross_entropy(dt_reshape(logits, 2, (int64_t[]){B * T, V}),
                                           dt_tensor_from_i64(c, 1, (int64_t[]){B * T}, tg), -100);
        if (s >= steps - 5) last = (isnan(last) ? 0 : last) + dt_item(loss) / 5;
        if (dt_engine_backward(e, loss) != DT_OK || dt_engine_step(e) != DT_OK) break;
    }
    free(in);
    free(tg);
    dt_engine_free(e);
    dt_module_free(m);
    dt_ctx_free(c);
    return last;
}

static void test_bf16_tracks_fp32(void) {
    /* a small GPT over 60 steps, and the benchmark GPT (dtrain bench train --model gpt) */
    dt_gpt_config small = {.vocab = 64, .seq = 16, .d_model = 64, .n_head = 4, .n_layer = 2};
    dt_gpt_config bench = {.vocab = 256, .seq = 128, .d_model = 256, .n_head = 4, .n_layer = 4};
    struct {
        const dt_gpt_config *g;
        int64_t B;
        int steps;
        double below;
    } cases[] = {{&small, 8, 60, 3.0}, {&bench, 4, 20, 4.0}};
    for (int k = 0; k < 2; k++) {
        double f32 = gpt_loss_after(cases[k].g, cases[k].B, false, cases[k].steps);
        double b16 = gpt_loss_after(cases[k].g, cases[k].B, true, cases[k].steps);
        CHECK_MSG(isfinite(f32) && f32 < cases[k].below, "fp32 loss %.4f (ln V = %.2f)", f32,
                  log((double)cases[k].g->vocab));
        CHECK_MSG(fabs(b16 - f32) <= 0.02 * f32, "d_model %lld: bf16 %.4f vs fp32 %.4f",
                  (long long)cases[k].g->d_model, b16, f32);
    }
}

static void test_nvme_files(void) {
    char nv[400];
    snprintf(nv, sizeof nv, "%s/nvme", g_tmp);
    json_t *j =
        toy_ds_config("{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"AdamW\"},"
                      " \"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\":"
                      " \"nvme\", \"nvme_path\": \"%s\"}, \"offload_param\": {\"device\": \"nvme\","
                      " \"nvme_path\": \"%s\"}}, \"steps_per_print\": 1000000}",
                      nv, nv);
    dt_module *m = mlp();
    int64_t n;
    dt_module_flat_params(m, &n);
    dt_engine *e = dt_engine_init(m, j);
    json_decref(j);
    CHECK_MSG(e != NULL, "%s", dt_last_error());
    if (!e) return toy_model_free(m);
    dt_engine_memory mem;
    dt_engine_memory_stats(e, &mem);
    /* master + two moments + the parameter shard, each n floats (one rank) */
    CHECK_MSG(mem.nvme_bytes >= 16 * n, "nvme bytes %lld for n %lld", (long long)mem.nvme_bytes,
              (long long)n);
    CHECK(mem.device.current[DT_MEM_OPTIM] == 0);
    for (int s = 0; s < 3; s++) {
        CHECK(dt_engine_backward(e, mlp_loss(e, s, 1.0f)) == DT_OK);
        CHECK(dt_engine_step(e) == DT_OK);
    }
    dt_engine_free(e);
    toy_model_free(m);
    /* the files are removed with the engine */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", nv);
    CHECK(system(cmd) == 0);
}

static void test_config_errors(void) {
    dt_module *m = mlp();
    json_t *j = toy_ds_config("{\"train_batch_size\": 4}");
    CHECK(dt_engine_init(m, j) == NULL && err_has("optimizer"));
    json_decref(j);
    j = toy_ds_config("{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"Lamb\"},"
                      " \"zero_optimization\": {\"stage\": 2}}");
    CHECK(dt_engine_init(m, j) == NULL && err_has("Lamb") && err_has("stage 0"));
    json_decref(j);
    CHECK(dt_engine_init(NULL, NULL) == NULL && dt_last_status() == DT_ERR_INVALID);
    CHECK(dt_engine_init_file(m, "/nonexistent/ds_config.json") == NULL &&
          dt_last_status() == DT_ERR_IO && err_has("/nonexistent/ds_config.json"));
    CHECK(dt_engine_init_file(m, "{\"train_batch_size\": 4,}") == NULL &&
          dt_last_status() == DT_ERR_CONFIG && err_has("malformed JSON"));
    dt_engine *ef =
        dt_engine_init_file(m, "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"SGD\"}}");
    CHECK(ef != NULL && dt_engine_train_batch_size(ef) == 4);
    dt_engine_free(ef);
    j = toy_ds_config("{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"Adam\"},"
                      " \"zero_optimization\": {\"stage\": 2}}");
    dt_engine_opts po = {.pipeline_stages = 2};
    CHECK(dt_engine_init_opts(m, j, &po) == NULL && err_has("stage 0 or 1"));
    json_decref(j);
    dt_module *unbuilt = dt_model_mlp(4, 4, 1, 2);
    j = toy_ds_config("{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"SGD\"}}");
    CHECK(dt_engine_init(unbuilt, j) == NULL && err_has("dt_module_build"));
    dt_module_free(unbuilt);
    /* after a failed init the module is as it was and still trains */
    float w0 = dt_module_flat_params(m, NULL)[0];
    dt_engine *e = dt_engine_init(m, j);
    json_decref(j);
    CHECK(e != NULL && dt_module_flat_params(m, NULL)[0] == w0);
    dt_engine_free(e);
    toy_model_free(m);
}

static void test_checkpoint_errors(void) {
    json_t *j =
        toy_ds_config("{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"AdamW\"},"
                      " \"zero_optimization\": {\"stage\": 1}, \"steps_per_print\": 1000000}");
    dt_module *m = mlp();
    dt_engine *e = dt_engine_init(m, j);
    CHECK(e != NULL);
    if (!e) {
        json_decref(j);
        return toy_model_free(m);
    }
    char dir[400], path[600];
    snprintf(dir, sizeof dir, "%s/ck", g_tmp);
    CHECK(dt_engine_load_checkpoint(e, dir, NULL, NULL, NULL) == DT_ERR_IO && err_has("latest"));
    for (int s = 0; s < 2; s++) {
        dt_engine_backward(e, mlp_loss(e, s, 1.0f));
        dt_engine_step(e);
    }
    CHECK_MSG(dt_engine_save_checkpoint(e, dir, NULL, NULL) == DT_OK, "%s", dt_last_error());
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *f = fopen(path, "r");
    char tag[64] = {0};
    CHECK(f && fgets(tag, sizeof tag, f) && strcmp(tag, "global_step2") == 0);
    if (f) fclose(f);
    CHECK(dt_engine_save_checkpoint(e, dir, "bad/tag", NULL) == DT_ERR_INVALID);
    /* damage the shard: the load refuses and the engine keeps its weights and counters */
    dt_engine_backward(e, mlp_loss(e, 5, 1.0f));
    dt_engine_step(e);
    int64_t n;
    float *p = dt_module_flat_params(m, &n), *keep = malloc((size_t)n * sizeof *keep);
    memcpy(keep, p, (size_t)n * sizeof *keep);
    snprintf(path, sizeof path, "%s/global_step2/optim_shard_0_of_1.safetensors", dir);
    f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (f) {
        fseek(f, -8, SEEK_END);
        fputc(0x55, f);
        fclose(f);
    }
    CHECK(dt_engine_load_checkpoint(e, dir, NULL, NULL, NULL) == DT_ERR_FORMAT &&
          err_has("checksum"));
    CHECK(memcmp(keep, p, (size_t)n * sizeof *keep) == 0 && dt_engine_global_steps(e) == 3);
    /* weights only still load (the damaged shard is not read) */
    dt_engine_load_opts o = dt_engine_load_defaults();
    o.load_module_only = true;
    CHECK_MSG(dt_engine_load_checkpoint(e, dir, "global_step2", &o, NULL) == DT_OK, "%s",
              dt_last_error());
    CHECK(dt_engine_global_steps(e) == 3 && memcmp(keep, p, (size_t)n * sizeof *keep) != 0);
    /* another model refuses */
    dt_ctx *c2 = dt_ctx_new(NULL, 1);
    dt_module *other = dt_model_mlp(8, 20, 2, 3);
    dt_module_build(other, c2, 1);
    dt_engine *e2 = dt_engine_init(other, j);
    CHECK(e2 && dt_engine_load_checkpoint(e2, dir, NULL, &o, NULL) == DT_ERR_FORMAT &&
          err_has("another model"));
    dt_engine_free(e2);
    dt_module_free(other);
    dt_ctx_free(c2);
    /* tags and shard names stay inside the checkpoint directory (dt_path_within) */
    CHECK(dt_engine_load_checkpoint(e, dir, "../ck", &o, NULL) == DT_ERR_INVALID &&
          err_has("checkpoint tag '../ck' is not one path component"));
    char link[600];
    snprintf(link, sizeof link, "%s/alias", dir);
    snprintf(path, sizeof path, "%s/global_step2", dir);
    CHECK(symlink(path, link) == 0);
    CHECK(dt_engine_load_checkpoint(e, dir, "alias", &o, NULL) == DT_ERR_INVALID &&
          err_has("checkpoint tag 'alias'") && err_has("is a symbolic link"));
    CHECK(dt_engine_save_checkpoint(e, dir, "alias", NULL) == DT_ERR_INVALID);
    CHECK_MSG(dt_engine_save_checkpoint(e, dir, "t3", NULL) == DT_OK, "%s", dt_last_error());
    snprintf(path, sizeof path, "%s/latest", dir);
    f = fopen(path, "w");
    if (f) {
        fputs("../../etc\n", f);
        fclose(f);
    }
    CHECK(dt_engine_load_checkpoint(e, dir, NULL, &o, NULL) == DT_ERR_FORMAT &&
          err_has("names '../../etc', which is not a tag"));
    snprintf(path, sizeof path, "%s/t3/engine_state.json", dir);
    json_t *st = json_load_file(path, 0, NULL);
    json_t *sh = json_array_get(json_object_get(st, "shards"), 0);
    json_object_set_new(sh, "file", json_string("../global_step2/optim_shard_0_of_1.safetensors"));
    CHECK(st && json_dump_file(st, path, 0) == 0);
    json_decref(st);
    memcpy(keep, p, (size_t)n * sizeof *keep);
    CHECK(dt_engine_load_checkpoint(e, dir, "t3", NULL, NULL) == DT_ERR_FORMAT &&
          err_has("engine_state.json: shard 0 names '../global_step2/") &&
          err_has("climbs out of"));
    CHECK(memcmp(keep, p, (size_t)n * sizeof *keep) == 0);
    free(keep);
    dt_engine_free(e);
    toy_model_free(m);
    json_decref(j);
}

/* Save after 3 steps, load into a fresh engine, train 3 more: the same weights (bit for bit)
 * and loss scale as 6 uninterrupted steps, for configs with state outside plain memory. */
static void resume_config(const char *cfg_text, const char *what) {
    char dir[400];
    snprintf(dir, sizeof dir, "%s/resume_%s", g_tmp, what);
    float *ref = NULL, *got = NULL;
    double ref_scale = 0, got_scale = 0;
    int64_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        dt_ctx *c = dt_ctx_new(NULL, 1);
        dt_module *m = dt_model_mlp(8, 64, 2, 3);
        dt_module_build(m, c, 4);
        json_t *j = dt_ds_config_load(cfg_text);
        dt_engine *e = dt_engine_init(m, j);
        json_decref(j);
        CHECK_MSG(e != NULL, "%s: %s", what, dt_last_error());
        if (!e) {
            toy_model_free(m);
            return;
        }
        int s = 0;
        if (pass == 1) {
            CHECK_MSG(dt_engine_load_checkpoint(e, dir, NULL, NULL, NULL) == DT_OK, "%s: load: %s",
                      what, dt_last_error());
            s = 3;
        }
        for (; s < 6; s++) {
            /* step 1 overflows under fp16: the scale moves and the step is skipped */
            CHECK(dt_engine_backward(e, mlp_loss(e, s, s == 1 ? 1e38f : 1.0f)) == DT_OK);
            CHECK(dt_engine_step(e) == DT_OK);
            if (pass == 0 && s == 2)
                CHECK_MSG(dt_engine_save_checkpoint(e, dir, NULL, NULL) == DT_OK, "%s: save: %s",
                          what, dt_last_error());
        }
        (pass ? &got_scale : &ref_scale)[0] = dt_engine_loss_scale(e);
        dt_engine_free(e);
        float *p = dt_module_flat_params(m, &n), *w = malloc((size_t)n * sizeof *w);
        memcpy(w, p, (size_t)n * sizeof *w);
        if (pass)
            got = w;
        else
            ref = w;
        toy_model_free(m);
    }
    CHECK_MSG(ref && got && memcmp(ref, got, (size_t)n * sizeof *ref) == 0,
              "%s: resumed weights differ", what);
    CHECK_MSG(ref_scale == got_scale, "%s: loss scale %g vs %g", what, ref_scale, got_scale);
    free(ref);
    free(got);
}

static void test_resume_exact(void) {
    char nv[300], cfg[1200];
    resume_config(
        "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"AdamW\"},"
        " \"fp16\": {\"enabled\": true, \"initial_scale_power\": 10, \"loss_scale_window\": 2},"
        " \"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"total_num_steps\": 10,"
        " \"warmup_num_steps\": 2}}, \"zero_optimization\": {\"stage\": 1},"
        " \"steps_per_print\": 1000000}",
        "fp16_stage1");
    snprintf(nv, sizeof nv, "%s/nvme_resume", g_tmp);
    snprintf(cfg, sizeof cfg,
             "{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"Adam\"},"
             " \"zero_optimization\": {\"stage\": 3, \"stage3_param_persistence_threshold\": 0,"
             " \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"},"
             " \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"}},"
             " \"steps_per_print\": 1000000}",
             nv, nv);
    resume_config(cfg, "nvme_stage3");
    resume_config("{\"train_batch_size\": 4, \"optimizer\": {\"type\": \"SGD\", \"params\":"
                  " {\"lr\": 0.05, \"momentum\": 0.9}}, \"zero_optimization\": {\"stage\": 2,"
                  " \"offload_optimizer\": {\"device\": \"cpu\"}}, \"steps_per_print\": 1000000}",
                  "sgd_cpu_stage2");
}

/* flops_profiler: step 2 is measured and reported to output_file, with the model's parameter
 * count and its modules by depth; the hooks are gone afterwards (the next steps train on). */
static void test_flops_profiler(void) {
    char out[400];
    snprintf(out, sizeof out, "%s/profile.txt", g_tmp);
    json_t *j = toy_ds_config(
        "{\"train_batch_size\": 8, \"gradient_accumulation_steps\": 2,"
        " \"optimizer\": {\"type\": \"AdamW\"}, \"zero_optimization\": {\"stage\": 2},"
        " \"flops_profiler\": {\"enabled\": true, \"profile_step\": 2, \"top_modules\": 3,"
        " \"output_file\": \"%s\"}, \"steps_per_print\": 1000000}",
        out);
    dt_module *m = mlp();
    dt_engine *e = dt_engine_init(m, j);
    json_decref(j);
    CHECK(e != NULL);
    if (!e) return toy_model_free(m);
    for (int s = 0; s < 8; s++) {
        CHECK(dt_engine_backward(e, mlp_loss(e, s, 1.0f)) == DT_OK);
        CHECK(dt_engine_step(e) == DT_OK);
        if (s == 1) CHECK(access(out, F_OK) != 0); /* not yet: step 1 */
    }
    CHECK(dt_engine_global_steps(e) == 4);
    FILE *f = fopen(out, "r");
    char text[8192] = {0};
    size_t k = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[k] = 0;
    char want[64];
    snprintf(want, sizeof want, "parameters:                     %lld",
             (long long)dt_module_num_params(m));
    CHECK_MSG(strstr(text, want) != NULL, "profile:\n%s", text);
    CHECK(strstr(text, "depth 1") && strstr(text, "Linear") && strstr(text, "2 calls"));
    CHECK(strstr(text, "profile step:                   2"));
    /* the modules' hooks are the engine's again */
    for (int i = 0; i < m->n_children; i++)
        CHECK(m->children[i]->n_params == 0 || m->children[i]->hook_user == (void *)e);
    dt_engine_free(e);
    toy_model_free(m);
}

int main(void) {
    if (!fx_tmpdir(g_tmp, sizeof g_tmp, "test-engine")) return 1;
    dt_log_set_level(DT_LOG_WARN);
    TEST_RUN(test_boundaries_and_counters);
    TEST_RUN(test_fp16_overflow_skips);
    TEST_RUN(test_bf16_tracks_fp32);
    TEST_RUN(test_nvme_files);
    TEST_RUN(test_config_errors);
    TEST_RUN(test_checkpoint_errors);
    TEST_RUN(test_resume_exact);
    TEST_RUN(test_flops_profiler);
    if (!fx_rmtree(g_tmp)) fprintf(stderr, "could not remove %s\n", g_tmp);
    TEST_END();
}
