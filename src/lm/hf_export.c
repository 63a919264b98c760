/* hf_export.c — a model written back as a Hugging Face directory: config.json as it was read
 * (dtype float32), model.safetensors in f32 with the family's canonical names and layouts
 * (GPT-2's Conv1D weights transposed back to (in, out), a tied head left out, as
 * save_pretrained does), and the source's tokenizer files copied. Each file is written whole or
 * not at all (durable.c). */
#include "model_impl.h"

#include "base/base_impl.h"
#include "base/durable.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Files of the source directory that travel with the model when present. */
static const char *const COPIED[] = {"tokenizer.json", "tokenizer_config.json",
                                     "special_tokens_map.json", "generation_config.json"};

typedef struct export_list {
    int n, cap;
    const char **names;
    dt_tensor **views;
    char (*canon)[256];
    const dt__lm_arch *a;
} export_list;

static dt_status add_one(void *user, int role, const char *canon, dt_tensor *p) {
    export_list *l = user;
    if (l->n == l->cap) return dt_error(DT_ERR_STATE, "lm save: more parameters than counted");
    dt_tensor *v = l->views[l->n];
    *v = *p; /* the file's layout: (in, out) for the transposed roles */
    if (l->a->transposed & (1u << role)) {
        v->shape[0] = p->shape[1], v->shape[1] = p->shape[0];
        v->stride[0] = p->stride[1], v->stride[1] = p->stride[0];
    }
    snprintf(l->canon[l->n], sizeof l->canon[0], "%s", canon);
    l->names[l->n] = l->canon[l->n];
    l->n++;
    return DT_OK;
}

static dt_status write_weights(const dt_lm *m, const char *path) {
    int n = dt_module_param_count(m->root);
    export_list l = {.cap = n, .a = m->arch};
    l.names = calloc((size_t)n + 1, sizeof *l.names);
    l.views = calloc((size_t)n + 1, sizeof *l.views);
    l.canon = calloc((size_t)n + 1, sizeof *l.canon);
    dt_tensor *store = calloc((size_t)n + 1, sizeof *store);
    dt_status st = !l.names || !l.views || !l.canon || !store
                       ? dt_error(DT_ERR_OOM, "lm save: out of memory")
                       : DT_OK;
    for (int i = 0; !st && i < n; i++) l.views[i] = &store[i];
    if (!st) st = dt__lm_each_param((dt_lm *)m, add_one, &l);
    const char *meta[] = {"format", "pt"};
    if (!st) st = dt_safetensors_write(path, l.n, l.names, l.views, 1, meta);
    free(l.names);
    free(l.views);
    free(l.canon);
    free(store);
    return st;
}

static dt_status write_config(const dt_lm *m, const char *path) {
    json_t *j = json_deep_copy(m->config_json);
    if (!j) return dt_error(DT_ERR_OOM, "lm save: out of memory");
    const char *dtype_key = json_object_get(j, "dtype") ? "dtype" : "torch_dtype";
    json_object_set_new(j, dtype_key, json_string("float32"));
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (!text) return dt_error(DT_ERR_OOM, "lm save: out of memory");
    dt_status st = dt_file_write_atomic(path, text, strlen(text));
    free(text);
    return st;
}

/* Copy src to dst whole (a missing src is not an error: the source had no such file). */
static dt_status copy_file(const char *src, const char *dst) {
    FILE *f = fopen(src, "rb");
    if (!f) return DT_OK;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    dt_status st = DT_OK;
    for (;;) {
        if (n == cap) {
            char *nb = realloc(buf, cap = cap ? cap * 2 : 1 << 16);
            if (!nb) {
                st = dt_error(DT_ERR_OOM, "lm save: out of memory copying %s", src);
                break;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (!st && ferror(f)) st = dt_error(DT_ERR_IO, "%s: read error", src);
    fclose(f);
    if (!st) st = dt_file_write_atomic(dst, buf, n);
    free(buf);
    return st;
}

dt_status dt_lm_save(const dt_lm *m, const char *dir) {
    if (!m || !dir || !dt_module_ctx(m->root))
        return dt_error(DT_ERR_INVALID, "lm save: needs a built model and a directory");
    char failed[1024], path[1200], src[1200];
    if (dt__mkdir_p(dir, failed, sizeof failed) != 0)
        return dt_error(DT_ERR_IO, "lm save: cannot create directory %s", failed);
    snprintf(path, sizeof path, "%s/config.json", dir);
    dt_status st = write_config(m, path);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (!st && remove(path) != 0 && errno != ENOENT) /* a stale index would win over the file */
        st = dt_error(DT_ERR_IO, "lm save: cannot remove %s: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (!st) st = write_weights(m, path);
    for (size_t i = 0; !st && i < sizeof COPIED / sizeof COPIED[0]; i++) {
        snprintf(src, sizeof src, "%s/%s", m->dir, COPIED[i]);
        snprintf(path, sizeof path, "%s/%s", dir, COPIED[i]);
        if (strcmp(src, path) != 0) st = copy_file(src, path);
    }
    return st;
}

dt_status dt_lm_load_checkpoint_weights(dt_lm *m, const char *path) {
    if (!m || !path || !dt_module_ctx(m->root))
        return dt_error(DT_ERR_INVALID, "lm: loading checkpoint weights needs a built model");
    dt_safetensors *f = dt_safetensors_open(path);
    if (!f) return dt_last_status();
    int n = dt_module_param_count(m->root);
    dt_status st = dt_safetensors_count(f) == n
                       ? DT_OK
                       : dt_error(DT_ERR_FORMAT,
                                  "%s: %d tensors, the %s model has %d "
                                  "parameters; hint: export a checkpoint of this model",
                                  path, dt_safetensors_count(f), m->arch->model_type, n);
    for (int i = 0; !st && i < n; i++) {
        const char *name = dt_module_param_name(m->root, i);
        if (dt_safetensors_find(f, name) < 0)
            st = dt_error(DT_ERR_FORMAT,
                          "%s: no tensor '%s'; hint: export a checkpoint of "
                          "this model",
                          path, name);
        else
            st = dt_safetensors_read_into(f, name, dt_module_param_tensor(m->root, i));
    }
    dt_safetensors_close(f);
    return st;
}
