/* hf_dir.c — reading a Hugging Face model directory: config.json, and the weights from
 * model.safetensors or the shards model.safetensors.index.json lists, into a built module tree.
 *
 * Every parameter of the tree is found in the files by its role's template (arch.c), with or
 * without the family's prefix where the row allows both; its shape must match (transposed for
 * the roles stored (in, out)), its dtype be f32, f16 or bf16 (converted to f32). A tensor in
 * the files that no parameter took is an error unless the row names it as a buffer to skip, or
 * it is the head of a tied model. Every error names the file and the tensor. */
#include "model_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_SHARDS 4096

/* The open weight files and which of their tensors a parameter took. */
typedef struct weight_files {
    int n;
    dt_safetensors *f[MAX_SHARDS];
    bool *used[MAX_SHARDS];
    char where[1100]; /* the file or index, for messages */
} weight_files;

static void files_close(weight_files *w) {
    for (int i = 0; i < w->n; i++) {
        dt_safetensors_close(w->f[i]);
        free(w->used[i]);
    }
    w->n = 0;
}

static dt_status files_add(weight_files *w, const char *path) {
    if (w->n == MAX_SHARDS) return dt_error(DT_ERR_FORMAT, "%s: too many shards", w->where);
    dt_safetensors *f = dt_safetensors_open(path);
    if (!f) return dt_last_status();
    w->f[w->n] = f;
    w->used[w->n] = calloc((size_t)dt_safetensors_count(f) + 1, 1);
    if (!w->used[w->n++]) return dt_error(DT_ERR_OOM, "%s: out of memory", path);
    return DT_OK;
}

/* Every shard the index names, opened once; each listed tensor must be in its shard. */
static dt_status open_index(const char *dir, const char *ipath, weight_files *w) {
    json_t *j = dt__lm_read_json(ipath, "");
    if (!j) return dt_last_status();
    json_t *map = json_object_get(j, "weight_map");
    dt_status st = json_is_object(map) ? DT_OK
                                       : dt_error(DT_ERR_FORMAT,
                                                  "%s: no 'weight_map' object; "
                                                  "hint: the index maps tensor names to shard "
                                                  "files",
                                                  ipath);
    const char *name;
    json_t *v;
    json_object_foreach(map, name, v) {
        const char *shard = json_string_value(v);
        if (st) break;
        if (!shard || !*shard || strchr(shard, '/')) {
            st = dt_error(DT_ERR_FORMAT, "%s: tensor '%s' maps to an invalid shard name", ipath,
                          name);
            break;
        }
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, shard);
        int k = 0;
        while (k < w->n && strcmp(dt_safetensors_path(w->f[k]), path)) k++;
        struct stat sb;
        if (k == w->n && stat(path, &sb) != 0)
            st = dt_error(DT_ERR_IO, "%s: names shard '%s' (for tensor '%s'), which is missing",
                          ipath, shard, name);
        else if (k == w->n)
            st = files_add(w, path);
        if (!st && dt_safetensors_find(w->f[k], name) < 0)
            st = dt_error(DT_ERR_FORMAT,
                          "%s: lists tensor '%s' in shard '%s', which has no such "
                          "tensor",
                          ipath, name, shard);
    }
    json_decref(j);
    return st;
}

static dt_status files_open(const char *dir, weight_files *w) {
    char one[1100], index[1100];
    struct stat sb;
    snprintf(one, sizeof one, "%s/model.safetensors", dir);
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    if (stat(index, &sb) == 0) {
        snprintf(w->where, sizeof w->where, "%s", index);
        return open_index(dir, index, w);
    }
    snprintf(w->where, sizeof w->where, "%s", one);
    if (stat(one, &sb) != 0)
        return dt_error(DT_ERR_IO,
                        "%s: no model.safetensors or model.safetensors.index.json; "
                        "hint: save the model with safe_serialization (PyTorch .bin files are "
                        "not read)",
                        dir);
    return files_add(w, one);
}

/* The file and index of tensor `name`, or -1. */
static int files_find(const weight_files *w, const char *name, int *fi) {
    for (int k = 0; k < w->n; k++) {
        int i = dt_safetensors_find(w->f[k], name);
        if (i >= 0) {
            *fi = k;
            return i;
        }
    }
    return -1;
}

/* Does name match tmpl ("h.{i}.attn.bias") with or without prefix? */
static bool matches(const char *name, const char *prefix, const char *tmpl) {
    size_t pl = strlen(prefix);
    if (pl && !strncmp(name, prefix, pl)) name += pl;
    const char *at = strstr(tmpl, "{i}");
    if (!at) return !strcmp(name, tmpl);
    size_t head = (size_t)(at - tmpl);
    if (strncmp(name, tmpl, head)) return false;
    const char *p = name + head, *d = p;
    while (*d >= '0' && *d <= '9') d++;
    return d > p && !strcmp(d, at + 3);
}

/* One parameter: find its tensor, check dtype and shape, read it (transposed if stored so). */
static dt_status load_param(weight_files *w, const dt__lm_arch *a, int role, const char *canon,
                            dt_tensor *p) {
    int fi = 0, ti = files_find(w, canon, &fi);
    size_t pl = strlen(a->prefix);
    const char *bare = role != DT__R_HEAD && !strncmp(canon, a->prefix, pl) ? canon + pl : canon;
    if (ti < 0 && a->prefix_optional) ti = files_find(w, bare, &fi);
    if (ti < 0)
        return dt_error(DT_ERR_FORMAT,
                        "%s: tensor '%s' is missing%s%s%s; hint: the directory "
                        "must hold every weight of the model its config.json describes",
                        w->where, canon, a->prefix_optional ? " (also looked for '" : "",
                        a->prefix_optional ? bare : "", a->prefix_optional ? "')" : "");
    dt_safetensors *f = w->f[fi];
    const char *name = dt_safetensors_name(f, ti);
    dt_dtype dt = dt_safetensors_dtype(f, ti);
    if (dt != DT_DTYPE_F32 && dt != DT_DTYPE_F16 && dt != DT_DTYPE_BF16)
        return dt_error(DT_ERR_FORMAT, "%s: tensor '%s' is %s; weights must be F32, F16 or BF16",
                        dt_safetensors_path(f), name, dt_dtype_name(dt));
    dt_tensor view = *p; /* (in, out) view of an (out, in) parameter */
    if (a->transposed & (1u << role)) {
        view.shape[0] = p->shape[1], view.shape[1] = p->shape[0];
        view.stride[0] = p->stride[1], view.stride[1] = p->stride[0];
    }
    int nd = dt_safetensors_ndim(f, ti);
    const int64_t *sh = dt_safetensors_shape(f, ti);
    bool same = nd == view.ndim;
    for (int d = 0; same && d < nd; d++) same = sh[d] == view.shape[d];
    if (!same) {
        char want[96], got[96] = "[";
        for (int d = 0; d < nd; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "",
                     (long long)sh[d]);
        strcat(got, "]");
        return dt_error(DT_ERR_FORMAT,
                        "%s: tensor '%s' has shape %s but config.json makes it "
                        "%s",
                        dt_safetensors_path(f), name, got,
                        dt_shape_str(&view, want, sizeof want) + 3);
    }
    w->used[fi][ti] = true;
    return dt_safetensors_read_into(f, name, &view);
}

/* Every tensor of the files that no parameter took must be a known buffer (or a tied head). */
static dt_status check_extra(const weight_files *w, const dt__lm_arch *a, bool tied) {
    for (int k = 0; k < w->n; k++) {
        for (int i = 0; i < dt_safetensors_count(w->f[k]); i++) {
            const char *name = dt_safetensors_name(w->f[k], i);
            bool known = w->used[k][i] || (tied && matches(name, "", a->names[DT__R_HEAD]));
            for (int s = 0; !known && s < 3 && a->skip[s]; s++)
                known = matches(name, a->prefix, a->skip[s]);
            if (!known)
                return dt_error(DT_ERR_FORMAT,
                                "%s: tensor '%s' is not part of a %s model; hint: "
                                "config.json and the weights must describe the same model",
                                dt_safetensors_path(w->f[k]), name, a->model_type);
        }
    }
    return DT_OK;
}

typedef struct load_job {
    weight_files *w;
    const dt__lm_arch *a;
} load_job;

static dt_status load_one(void *user, int role, const char *canon, dt_tensor *p) {
    load_job *job = user;
    return load_param(job->w, job->a, role, canon, p);
}

dt_status dt_lm_load_weights(dt_lm *m) {
    if (!m || !dt_module_ctx(m->root))
        return dt_error(DT_ERR_STATE, "lm: load_weights needs a built module tree; hint: "
                                      "dt_module_build or dt_wrap_model first");
    weight_files *w = calloc(1, sizeof *w);
    if (!w) return dt_error(DT_ERR_OOM, "lm: out of memory");
    dt_status st = files_open(m->dir, w);
    if (!st) st = dt__lm_each_param(m, load_one, &(load_job){w, m->arch});
    if (!st) st = check_extra(w, m->arch, m->cfg.tied);
    files_close(w);
    free(w);
    return st;
}
