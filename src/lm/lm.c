/* lm.c — the model object: open a directory (config.json -> its architecture row -> the
 * family's module tree), load (build on a context of its own, then the weights), free, and the
 * accessors. */
#include "model_impl.h"

#include <stdlib.h>
#include <string.h>

/* The architecture row config.json names, or an error listing the supported ones. */
static const dt__lm_arch *arch_of(const json_t *j, const char *path) {
    const char *type = json_string_value(json_object_get(j, "model_type"));
    const dt__lm_arch *a = dt__lm_arch_find(type);
    if (!type)
        dt_error(DT_ERR_FORMAT, "%s: no 'model_type'; hint: one of %s", path, dt__lm_arch_list());
    else if (!a)
        dt_error(DT_ERR_FORMAT, "%s: model_type '%s' is not supported; supported: %s", path, type,
                 dt__lm_arch_list());
    return a;
}

dt_status dt_lm_open(dt_lm **out, const char *dir) {
    if (!out || !dir) return dt_error(DT_ERR_INVALID, "lm: open needs a directory");
    *out = NULL;
    char path[1100];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_t *j = dt__lm_read_json(path, "a Hugging Face model directory holds config.json "
                                       "(save_pretrained writes it)");
    if (!j) return dt_last_status();
    dt_lm *m = calloc(1, sizeof *m);
    if (!m) {
        json_decref(j);
        return dt_error(DT_ERR_OOM, "lm: out of memory");
    }
    m->config_json = j;
    m->dir = strdup(dir);
    m->arch = arch_of(j, path);
    dt_status st = !m->dir    ? dt_error(DT_ERR_OOM, "lm: out of memory")
                   : !m->arch ? dt_last_status()
                              : dt__lm_config_read(m->arch, j, path, &m->cfg);
    if (!st) {
        m->root = m->arch->family == DT__LM_GPT2 ? dt__gpt2_build(&m->cfg, m->arch)
                                                 : dt__llama_build(&m->cfg, m->arch);
        if (!m->root) st = dt_last_status();
    }
    if (st) {
        dt_lm_free(m);
        return st;
    }
    *out = m;
    return DT_OK;
}

dt_status dt_lm_load(dt_lm **out, const char *dir) {
    dt_status st = dt_lm_open(out, dir);
    if (st) return st;
    dt_lm *m = *out;
    m->own_ctx = dt_ctx_new(NULL, 0);
    st = !m->own_ctx ? dt_last_status() : dt_module_build(m->root, m->own_ctx, 0);
    if (!st) st = dt_lm_load_weights(m);
    if (st) {
        DT_KEEP_ERROR(dt_lm_free(m));
        *out = NULL;
    }
    return st;
}

void dt_lm_free(dt_lm *m) {
    if (!m) return;
    if (!m->module_taken) dt_module_free(m->root);
    dt_ctx_free(m->own_ctx);
    json_decref(m->config_json);
    free(m->dir);
    free(m);
}

const dt_lm_config *dt_lm_get_config(const dt_lm *m) {
    return &m->cfg;
}
dt_module *dt_lm_module(dt_lm *m) {
    return m->root;
}
const char *dt_lm_dir(const dt_lm *m) {
    return m->dir;
}

dt_module *dt_lm_take_module(dt_lm *m) {
    m->module_taken = true;
    return m->root;
}

dt_tensor *dt_lm_forward(dt_lm *m, dt_tensor *ids) {
    return dt_module_forward(m->root, ids);
}
