/* param_files.c — a checkpoint's weights and optimiser states as safetensors files, written and
 * read alike by the trial checkpoint (trial_ckpt.c) and the Core API's module checkpoints
 * (core_api.c):
 *
 *   model.safetensors (model_<i>.safetensors for i > 0)  each module's named parameters
 *   optimizer.safetensors                                every optimiser's state buffers as
 *                                                        "opt<i>.<state>", with each one's
 *                                                        step count and lr in the metadata
 */
#include "trial_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dt__params_model_file(int i, char *buf, size_t n) {
    if (i == 0)
        snprintf(buf, n, "model.safetensors");
    else
        snprintf(buf, n, "model_%d.safetensors", i);
}

static dt_status save_model(const char *dir, int i, dt_module *m) {
    int np = dt_module_param_count(m);
    const char **names = malloc(sizeof *names * (size_t)(np ? np : 1));
    dt_tensor **ts = malloc(sizeof *ts * (size_t)(np ? np : 1));
    if (!names || !ts) {
        free(names), free(ts);
        return dt_error(DT_ERR_OOM, "saving model %d: out of memory", i);
    }
    for (int k = 0; k < np; k++) {
        names[k] = dt_module_param_name(m, k);
        ts[k] = dt_module_param_tensor(m, k);
    }
    char rel[64], path[4096];
    dt__params_model_file(i, rel, sizeof rel);
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    const char *meta[2] = {"format", "pt"};
    dt_status st = dt_safetensors_write(path, np, names, ts, 1, meta);
    free(names);
    free(ts);
    return st;
}

/* Every optimiser's buffers wrapped as tensors of `rt` with their "opt<i>.<state>" names
 * (names[k] owned: free them), and the per-optimiser metadata pairs. */
static int optim_tensors(dt_ctx *rt, int n_optims, dt_optimizer *const *optims, char **names,
                         dt_tensor **ts) {
    int k = 0;
    for (int i = 0; i < n_optims; i++) {
        int64_t n = dt_optim_numel(optims[i]);
        for (int s = 0; s < dt_optim_state_count(optims[i]); s++) {
            const char *sn;
            float *buf = dt_optim_state(optims[i], s, &sn);
            names[k] = malloc(96);
            if (names[k]) snprintf(names[k], 96, "opt%d.%s", i, sn);
            ts[k++] = dt_tensor_wrap(rt, DT_DTYPE_F32, 1, &n, buf);
        }
    }
    return k;
}

static int optim_state_total(int n_optims, dt_optimizer *const *optims) {
    int total = 0;
    for (int i = 0; i < n_optims; i++) total += dt_optim_state_count(optims[i]);
    return total;
}

static dt_status save_optims(const char *dir, dt_ctx *rt, int n_optims,
                             dt_optimizer *const *optims) {
    int total = optim_state_total(n_optims, optims);
    char **names = calloc((size_t)total + 1, sizeof *names);
    dt_tensor **ts = calloc((size_t)total + 1, sizeof *ts);
    char(*kv)[2][48] = calloc((size_t)n_optims * 2 + 1, sizeof *kv);
    const char **meta = calloc((size_t)n_optims * 4 + 1, sizeof *meta);
    dt_status st = names && ts && kv && meta ? DT_OK : dt_error(DT_ERR_OOM, "out of memory");
    int k = st == DT_OK ? optim_tensors(rt, n_optims, optims, names, ts) : 0;
    for (int i = 0; st == DT_OK && i < k; i++)
        if (!names[i] || !ts[i]) st = dt_error(DT_ERR_OOM, "saving optimiser state: out of memory");
    for (int i = 0; st == DT_OK && i < n_optims; i++) {
        snprintf(kv[2 * i][0], 48, "opt%d.steps", i);
        snprintf(kv[2 * i][1], 48, "%lld", (long long)dt_optim_step_count(optims[i]));
        snprintf(kv[2 * i + 1][0], 48, "opt%d.lr", i);
        snprintf(kv[2 * i + 1][1], 48, "%.9g", (double)dt_optim_lr(optims[i]));
        for (int j = 0; j < 2; j++) {
            meta[4 * i + 2 * j] = kv[2 * i + j][0];
            meta[4 * i + 2 * j + 1] = kv[2 * i + j][1];
        }
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/optimizer.safetensors", dir);
    if (st == DT_OK)
        st = dt_safetensors_write(path, k, (const char *const *)names, ts, 2 * n_optims, meta);
    for (int i = 0; i < k; i++) free(names[i]);
    free(names), free(ts), free(kv), free(meta);
    return st;
}

dt_status dt__params_save(const char *dir, dt_ctx *rt, int n_models, dt_module *const *models,
                          int n_optims, dt_optimizer *const *optims) {
    dt_status st = DT_OK;
    for (int i = 0; st == DT_OK && i < n_models; i++) st = save_model(dir, i, models[i]);
    if (st == DT_OK && n_optims) st = save_optims(dir, rt, n_optims, optims);
    dt_ctx_reset(rt);
    return st;
}

static dt_status load_model(const char *dir, int i, dt_module *m) {
    char rel[64], path[4096];
    dt__params_model_file(i, rel, sizeof rel);
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    dt_safetensors *f = dt_safetensors_open(path);
    if (!f) return dt_last_status();
    dt_status st = DT_OK;
    for (int k = 0; st == DT_OK && k < dt_module_param_count(m); k++)
        st = dt_safetensors_read_into(f, dt_module_param_name(m, k), dt_module_param_tensor(m, k));
    dt_safetensors_close(f);
    return st;
}

static dt_status load_optims(const char *dir, dt_ctx *rt, int n_optims,
                             dt_optimizer *const *optims) {
    char path[4096];
    snprintf(path, sizeof path, "%s/optimizer.safetensors", dir);
    dt_safetensors *f = dt_safetensors_open(path);
    if (!f) return dt_last_status();
    int total = optim_state_total(n_optims, optims);
    char **names = calloc((size_t)total + 1, sizeof *names);
    dt_tensor **ts = calloc((size_t)total + 1, sizeof *ts);
    dt_status st = names && ts ? DT_OK : dt_error(DT_ERR_OOM, "out of memory");
    int k = st == DT_OK ? optim_tensors(rt, n_optims, optims, names, ts) : 0;
    for (int i = 0; st == DT_OK && i < k; i++)
        st = names[i] && ts[i] ? dt_safetensors_read_into(f, names[i], ts[i])
                               : dt_error(DT_ERR_OOM, "out of memory");
    for (int i = 0; st == DT_OK && i < n_optims; i++) {
        char key[48];
        snprintf(key, sizeof key, "opt%d.steps", i);
        const char *steps = dt_safetensors_metadata(f, key);
        snprintf(key, sizeof key, "opt%d.lr", i);
        const char *lr = dt_safetensors_metadata(f, key);
        if (steps) dt_optim_set_step_count(optims[i], strtoll(steps, NULL, 10));
        if (lr) dt_optim_set_lr(optims[i], strtof(lr, NULL));
    }
    for (int i = 0; i < k; i++) free(names[i]);
    free(names), free(ts);
    dt_safetensors_close(f);
    return st;
}

dt_status dt__params_load(const char *dir, dt_ctx *rt, int n_models, dt_module *const *models,
                          int n_optims, dt_optimizer *const *optims) {
    dt_status st = DT_OK;
    for (int i = 0; st == DT_OK && i < n_models; i++) st = load_model(dir, i, models[i]);
    if (st == DT_OK && n_optims) st = load_optims(dir, rt, n_optims, optims);
    dt_ctx_reset(rt);
    return st;
}
