/*
 * engine_ckpt.c — engine checkpoints in DeepSpeed's shape, re-sliced on load.
 *
 *   DIR/TAG/model.safetensors               consolidated weights by parameter name (rank 0)
 *   DIR/TAG/optim_shard_<r>_of_<W>.safetensors
 *                                           rank r's fp32 master weights and optimiser state
 *                                           over flat elements [lo, lo+len) ("master",
 *                                           "exp_avg", ...); stage 0 writes one shard (rank 0)
 *   DIR/TAG/engine_state.json               counters, LR schedule, loss scaler, world size,
 *                                           stage, the model's layout hash, each shard's range,
 *                                           size and crc32c, the client state (rank 0, last)
 *   DIR/latest                              the tag (rank 0, after every rank finished)
 *
 * Every file goes through base's durable write path (dtrain/durable.h: a temporary name,
 * fsync, rename, directory fsync). The tag, "latest" and JSON helpers are shared with the
 * pipeline engine's checkpoints (pipe_ckpt.c). A load first checks everything it
 * will read (format version, layout, shapes, shard sizes and checksums) on every rank, agrees
 * on the result across ranks, and only then changes the engine, so a bad checkpoint leaves the
 * engine as it was. Because shards are ranges of the flat coordinates, an engine with another
 * data-parallel size or ZeRO stage reads the pieces that overlap its own range.
 */
#include "engine/engine_impl.h"
#include "base/base_impl.h"
#include "base/durable.h"
#include "base/path.h"
#include "engine/engine_iface.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ENGINE_CKPT_VERSION 1

static int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}
static int64_t max64(int64_t a, int64_t b) {
    return a > b ? a : b;
}

/* A hash of the parameter names, offsets and sizes: the flat coordinates of two engines agree
 * exactly when this and n agree. */
static uint32_t layout_hash(const dt_engine *e) {
    uint32_t h = 0;
    float *base = dt_module_flat_params(e->model, NULL);
    for (int i = 0; i < dt_module_param_count(e->model); i++) {
        const char *nm = dt_module_param_name(e->model, i);
        dt_tensor *t = dt_module_param_tensor(e->model, i);
        int64_t v[2] = {(int64_t)((float *)t->data - base), dt_numel(t)};
        h = dt_crc32c(h, nm, strlen(nm) + 1);
        h = dt_crc32c(h, v, sizeof v);
    }
    return h;
}

static dt_status mkdirs(const char *path) {
    char failed[4096];
    int err = dt__mkdir_p(path, failed, sizeof failed);
    if (err)
        return dt_error(DT_ERR_IO, "cannot create %s: %s; hint: check the checkpoint directory",
                        failed,
                        err == ENOTDIR ? "a file of that name is in the way" : strerror(err));
    return DT_OK;
}

static dt_status file_crc(const char *path, uint32_t *crc, int64_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return dt_error(DT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    unsigned char buf[1 << 16];
    uint32_t c = 0;
    int64_t n = 0;
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) {
        c = dt_crc32c(c, buf, k);
        n += (int64_t)k;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) return dt_error(DT_ERR_IO, "cannot read %s", path);
    *crc = c;
    *size = n;
    return DT_OK;
}

static dt_status agree(dt_engine *e, dt_status local, const char *what) {
    return dt_comm_agree(e->comm, local, what);
}

static bool one_component(const char *tag) {
    return *tag && !strchr(tag, '/') && strcmp(tag, ".") && strcmp(tag, "..");
}

static dt_status not_one_component(const char *tag) {
    return dt_error(DT_ERR_INVALID,
                    "checkpoint tag '%s' is not one path component; hint: a tag names a "
                    "directory directly under the checkpoint directory (no '/', not '.' or '..')",
                    tag);
}

dt_status dt__ckpt_tag(const char *tag, int64_t steps, char *buf, size_t n, const char **out) {
    if (!tag) {
        snprintf(buf, n, "global_step%lld", (long long)steps);
        tag = buf;
    }
    *out = tag;
    return one_component(tag) ? DT_OK : not_one_component(tag);
}

dt_status dt__ckpt_tag_dir(const char *dir, const char *tag, char *out, size_t cap) {
    if (!one_component(tag)) return not_one_component(tag);
    dt_status st = dt_path_within(dir, tag, DT_PATH_NOFOLLOW, out, cap);
    return st == DT_OK ? st : dt_error(st, "checkpoint tag '%s': %s", tag, dt_last_error());
}

dt_status dt__ckpt_write_latest(const char *dir, const char *tag) {
    char path[4200];
    snprintf(path, sizeof path, "%s/latest", dir);
    return dt_file_write_atomic(path, tag, strlen(tag));
}

dt_status dt__ckpt_write_json(const char *path, const json_t *j, size_t flags) {
    char *text = j ? json_dumps(j, flags) : NULL;
    dt_status st = text ? dt_file_write_atomic(path, text, strlen(text))
                        : dt_error(DT_ERR_OOM, "checkpoint: %s: json", path);
    free(text);
    return st;
}

static const char *state_name(const dt_engine *e, int k) {
    if (k == 0) return "master";
    const char *nm;
    dt_optim_state((dt_optimizer *)e->opt, k - 1, &nm);
    return nm;
}

/* ---- save ---------------------------------------------------------------------------------- */

typedef struct save_ctx {
    dt_engine *e;
    float **copy;   /* nvme: whole-block copies filled chunk by chunk */
    float *ptrs[4]; /* in memory: the state buffers themselves */
    int64_t len;
} save_ctx;

static dt_status collect_chunk(void *user, int64_t off, int64_t len, float *const *p, int np) {
    save_ctx *s = user;
    if (s->copy) {
        for (int k = 0; k < np; k++) memcpy(s->copy[k] + off, p[k], (size_t)len * sizeof(float));
        return DT_OK;
    }
    for (int k = 0; k < np; k++) s->ptrs[k] = p[k];
    s->len = len;
    return DT_OK;
}

static dt_status write_shard(dt_engine *e, const char *dir, char *fname, size_t fname_len) {
    int shards = e->stage == 0 ? 1 : e->W;
    snprintf(fname, fname_len, "optim_shard_%d_of_%d.safetensors", e->rank, shards);
    int np = 1 + e->n_opt_states;
    save_ctx s = {e, NULL, {0}, 0};
    float *copies[4] = {0};
    if (e->nv_master) {
        for (int k = 0; k < np; k++)
            if (!(copies[k] = malloc((size_t)e->block * sizeof(float)))) {
                for (int j = 0; j < k; j++) free(copies[j]);
                return dt_error(DT_ERR_OOM, "checkpoint: out of memory for the nvme state");
            }
        s.copy = copies;
        s.len = e->block;
    }
    dt_status st = dt__zero_visit_state(e, collect_chunk, &s, false);
    if (st == DT_OK) {
        dt_tensor *ts[4];
        const char *names[4];
        int64_t shape[1] = {s.len};
        for (int k = 0; k < np && st == DT_OK; k++) {
            ts[k] = dt_tensor_wrap(e->ctx, DT_DTYPE_F32, 1, shape, s.copy ? copies[k] : s.ptrs[k]);
            names[k] = state_name(e, k);
            if (!ts[k]) st = dt_last_status();
        }
        char lo[32], len[32], path[4300];
        snprintf(lo, sizeof lo, "%lld", (long long)(e->stage == 0 ? 0 : e->lo));
        snprintf(len, sizeof len, "%lld", (long long)s.len);
        const char *meta[] = {"lo", lo, "len", len, "format", "dtrain-engine-shard"};
        snprintf(path, sizeof path, "%s/%s", dir, fname);
        if (st == DT_OK) st = dt_safetensors_write(path, np, names, ts, 3, meta);
    }
    for (int k = 0; k < 4; k++) free(copies[k]);
    return st;
}

dt_status dt_engine_save_checkpoint(dt_engine *e, const char *dir, const char *tag,
                                    const json_t *client_state) {
    if (!e || !dir) return dt_error(DT_ERR_INVALID, "dt_engine_save_checkpoint: NULL argument");
    char tagbuf[64];
    dt_status local = dt__ckpt_tag(tag, e->global_steps, tagbuf, sizeof tagbuf, &tag);
    char tdir[4096];
    if (local == DT_OK) local = dt__ckpt_tag_dir(dir, tag, tdir, sizeof tdir);
    if (local == DT_OK) local = mkdirs(tdir);
    dt_status st = agree(e, local, "save_checkpoint");
    if (st != DT_OK) return st;

    /* consolidated weights: stage 3 gathers every module first */
    st = dt__zero_gather_all(e);
    local = st;
    if (st == DT_OK && e->rank == 0) {
        int np = dt_module_param_count(e->model);
        const char **names = malloc((size_t)(np ? np : 1) * sizeof *names);
        dt_tensor **ts = malloc((size_t)(np ? np : 1) * sizeof *ts);
        if (!names || !ts) {
            local = dt_error(DT_ERR_OOM, "checkpoint: out of memory");
        } else {
            for (int i = 0; i < np; i++) {
                names[i] = dt_module_param_name(e->model, i);
                ts[i] = dt_module_param_tensor(e->model, i);
            }
            char path[4200];
            snprintf(path, sizeof path, "%s/model.safetensors", tdir);
            const char *meta[] = {"format", "pt"};
            local = dt_safetensors_write(path, np, names, ts, 1, meta);
        }
        free(names);
        free(ts);
    }
    if (st == DT_OK) dt__zero_release_all(e);

    /* optimizer shards */
    char fname[128];
    uint32_t crc = 0;
    int64_t size = 0;
    bool writes_shard = e->stage > 0 || e->rank == 0;
    if (local == DT_OK && writes_shard) {
        local = write_shard(e, tdir, fname, sizeof fname);
        char path[4300];
        snprintf(path, sizeof path, "%s/%s", tdir, fname);
        if (local == DT_OK) local = file_crc(path, &crc, &size);
    }
    st = agree(e, local, "save_checkpoint");
    if (st != DT_OK) return st;
    /* every shard's description, in rank order */
    int64_t mine[4] = {e->stage == 0 ? 0 : e->lo, e->stage == 0 ? e->n : e->block, size, crc};
    int64_t *all = malloc((size_t)e->W * sizeof mine);
    if (!all) return dt_error(DT_ERR_OOM, "checkpoint: out of memory");
    st = dt_comm_allgather(e->comm, mine, all, sizeof mine);
    if (st != DT_OK) {
        free(all);
        return st;
    }
    local = DT_OK;
    if (e->rank == 0) {
        json_t *j = json_object(), *shards = json_array();
        int ns = e->stage == 0 ? 1 : e->W;
        for (int r = 0; r < ns; r++) {
            char nm[128];
            snprintf(nm, sizeof nm, "optim_shard_%d_of_%d.safetensors", r, ns);
            json_array_append_new(shards, json_pack("{s:s, s:I, s:I, s:I, s:I}", "file", nm, "lo",
                                                    all[4 * r], "len", all[4 * r + 1], "bytes",
                                                    all[4 * r + 2], "crc32c", all[4 * r + 3]));
        }
        json_object_set_new(j, "format_version", json_integer(ENGINE_CKPT_VERSION));
        json_object_set_new(j, "global_steps", json_integer(e->global_steps));
        json_object_set_new(j, "global_samples", json_integer(e->global_samples));
        json_object_set_new(j, "micro_steps", json_integer(e->micro_steps));
        json_object_set_new(j, "skipped_steps", json_integer(e->skipped_steps));
        json_object_set_new(j, "optimizer_steps", json_integer(e->opt_steps));
        json_object_set_new(j, "optimizer_type", json_integer(e->cfg.optimizer.type));
        json_object_set_new(j, "lr_scheduler_last_step",
                            e->sched ? json_integer(dt_sched_last_step(e->sched)) : json_null());
        if (e->scaler) {
            dt_loss_scaler_state ls;
            dt_loss_scaler_get_state(e->scaler, &ls);
            json_object_set_new(j, "loss_scaler",
                                json_pack("{s:f, s:I, s:I, s:i}", "cur_scale", ls.scale, "cur_iter",
                                          ls.cur_iter, "last_overflow_iter", ls.last_overflow_iter,
                                          "cur_hysteresis", ls.cur_hysteresis));
        }
        json_object_set_new(j, "dp_world_size", json_integer(e->W));
        json_object_set_new(j, "zero_stage", json_integer(e->stage));
        json_object_set_new(j, "flat_numel", json_integer(e->n));
        json_object_set_new(j, "layout_hash", json_integer(layout_hash(e)));
        json_object_set_new(j, "shards", shards);
        if (client_state) json_object_set(j, "client_state", (json_t *)client_state);
        char path[4200];
        snprintf(path, sizeof path, "%s/engine_state.json", tdir);
        local = dt__ckpt_write_json(path, j, JSON_INDENT(2) | JSON_SORT_KEYS);
        json_decref(j);
    }
    free(all);
    st = agree(e, local, "save_checkpoint");
    if (st != DT_OK) return st;
    if (e->rank == 0) local = dt__ckpt_write_latest(dir, tag);
    return agree(e, local, "save_checkpoint");
}

/* ---- load ---------------------------------------------------------------------------------- */

dt_status dt__ckpt_read_latest(const char *dir, char *tag, size_t n) {
    char path[4200];
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return dt_error(DT_ERR_IO,
                        "cannot open %s: %s; hint: pass the tag explicitly or check "
                        "the checkpoint directory",
                        path, strerror(errno));
    size_t k = fread(tag, 1, n - 1, f);
    fclose(f);
    tag[k] = 0;
    while (k > 0 && (tag[k - 1] == '\n' || tag[k - 1] == ' ')) tag[--k] = 0;
    if (!k) return dt_error(DT_ERR_FORMAT, "%s is empty", path);
    if (!one_component(tag))
        return dt_error(DT_ERR_FORMAT,
                        "%s names '%s', which is not a tag (one path component under %s): the "
                        "file was modified; hint: write the tag of a checkpoint in it, or pass "
                        "the tag explicitly",
                        path, tag, dir);
    return DT_OK;
}

typedef struct load_plan {
    json_t *state;
    dt_safetensors *model;
    int n_shards;
    json_t *shards;
    char tdir[4096];
} load_plan;

static void plan_free(load_plan *p) {
    json_decref(p->state);
    dt_safetensors_close(p->model);
}

/* Everything that can be wrong with the checkpoint, checked before anything changes. */
static dt_status check_plan(dt_engine *e, const char *dir, const char *tag,
                            const dt_engine_load_opts *o, load_plan *p) {
    char tagbuf[256];
    dt_status st;
    if (!tag) {
        if ((st = dt__ckpt_read_latest(dir, tagbuf, sizeof tagbuf)) != DT_OK) return st;
        tag = tagbuf;
    }
    if ((st = dt__ckpt_tag_dir(dir, tag, p->tdir, sizeof p->tdir)) != DT_OK) return st;
    char path[4300];
    snprintf(path, sizeof path, "%s/engine_state.json", p->tdir);
    json_error_t jerr;
    p->state = json_load_file(path, 0, &jerr);
    if (!p->state)
        return dt_error(DT_ERR_FORMAT,
                        "%s: %s (line %d); hint: is %s a complete engine "
                        "checkpoint?",
                        path, jerr.text, jerr.line, p->tdir);
    json_int_t ver = json_integer_value(json_object_get(p->state, "format_version"));
    if (ver != ENGINE_CKPT_VERSION)
        return dt_error(DT_ERR_FORMAT, "%s: format_version %lld, this dtrain reads %d", path,
                        (long long)ver, ENGINE_CKPT_VERSION);
    json_int_t n = json_integer_value(json_object_get(p->state, "flat_numel"));
    json_int_t h = json_integer_value(json_object_get(p->state, "layout_hash"));
    if (n != e->n || (uint32_t)h != layout_hash(e))
        return dt_error(DT_ERR_FORMAT,
                        "%s: the checkpoint is of another model (%lld flat "
                        "elements, this model %lld, or different parameter "
                        "names/shapes); hint: build the same model before loading",
                        path, (long long)n, (long long)e->n);
    snprintf(path, sizeof path, "%s/model.safetensors", p->tdir);
    if (!(p->model = dt_safetensors_open(path))) return dt_last_status();
    for (int i = 0; i < dt_module_param_count(e->model); i++) {
        const char *nm = dt_module_param_name(e->model, i);
        dt_tensor *t = dt_module_param_tensor(e->model, i);
        int k = dt_safetensors_find(p->model, nm);
        if (k < 0) return dt_error(DT_ERR_FORMAT, "%s: no tensor '%s'", path, nm);
        int64_t numel = 1;
        for (int d = 0; d < dt_safetensors_ndim(p->model, k); d++)
            numel *= dt_safetensors_shape(p->model, k)[d];
        if (numel != dt_numel(t) || dt_safetensors_ndim(p->model, k) != t->ndim)
            return dt_error(DT_ERR_FORMAT, "%s: tensor '%s' has another shape", path, nm);
    }
    if (o->load_module_only || !o->load_optimizer_states) return DT_OK;
    json_int_t otype = json_integer_value(json_object_get(p->state, "optimizer_type"));
    if (otype != (json_int_t)e->cfg.optimizer.type)
        return dt_error(DT_ERR_FORMAT,
                        "%s/engine_state.json: the optimizer state is of another "
                        "optimizer type; hint: load with "
                        "load_optimizer_states = false to keep only the weights",
                        p->tdir);
    p->shards = json_object_get(p->state, "shards");
    p->n_shards = (int)json_array_size(p->shards);
    if (p->n_shards < 1) return dt_error(DT_ERR_FORMAT, "%s: no optimizer shards listed", p->tdir);
    /* every shard's file is one the checkpoint holds: no "..", no absolute name, no link */
    for (int s = 0; s < p->n_shards; s++) {
        const char *f = json_string_value(json_object_get(json_array_get(p->shards, s), "file"));
        if (!f || dt_path_within(p->tdir, f, DT_PATH_NOFOLLOW, path, sizeof path) != DT_OK)
            return dt_error(DT_ERR_FORMAT,
                            "%s/engine_state.json: shard %d names %s%s%s, not a file inside the "
                            "checkpoint%s%s%s: the file was modified",
                            p->tdir, s, f ? "'" : "no file", f ? f : "", f ? "'" : "",
                            f ? " (" : "", f ? dt_last_error() : "", f ? ")" : "");
    }
    /* verify the shards this rank will read */
    int64_t my_lo = e->stage == 0 ? 0 : e->lo, my_len = e->stage == 0 ? e->n : e->block;
    for (int s = 0; s < p->n_shards; s++) {
        json_t *d = json_array_get(p->shards, s);
        int64_t lo = json_integer_value(json_object_get(d, "lo"));
        int64_t len = json_integer_value(json_object_get(d, "len"));
        if (min64(lo + len, my_lo + my_len) <= max64(lo, my_lo)) continue;
        snprintf(path, sizeof path, "%s/%s", p->tdir,
                 json_string_value(json_object_get(d, "file")) ?: "?");
        uint32_t crc;
        int64_t size;
        if ((st = file_crc(path, &crc, &size)) != DT_OK) return st;
        if (size != json_integer_value(json_object_get(d, "bytes")) ||
            crc != (uint32_t)json_integer_value(json_object_get(d, "crc32c")))
            return dt_error(DT_ERR_FORMAT,
                            "%s: size or checksum differs from engine_state.json: "
                            "the file is damaged or from another save",
                            path);
    }
    return DT_OK;
}

typedef struct reslice {
    dt_engine *e;
    load_plan *p;
    int64_t base; /* flat coordinate of element 0 of the state being visited */
} reslice;

/* Fill [off, off+len) of this rank's state from every saved shard that overlaps it. */
static dt_status reslice_chunk(void *user, int64_t off, int64_t len, float *const *ptrs, int np) {
    reslice *r = user;
    int64_t lo = r->base + off, hi = lo + len;
    for (int k = 0; k < np; k++) memset(ptrs[k], 0, (size_t)len * sizeof(float));
    for (int s = 0; s < r->p->n_shards; s++) {
        json_t *d = json_array_get(r->p->shards, s);
        int64_t slo = json_integer_value(json_object_get(d, "lo"));
        int64_t slen = json_integer_value(json_object_get(d, "len"));
        int64_t a = max64(lo, slo), b = min64(hi, slo + slen);
        if (b <= a) continue;
        char path[4300];
        snprintf(path, sizeof path, "%s/%s", r->p->tdir,
                 json_string_value(json_object_get(d, "file")));
        dt_safetensors *f = dt_safetensors_open(path);
        if (!f) return dt_last_status();
        for (int k = 0; k < np; k++) {
            const char *nm = state_name(r->e, k);
            dt_tensor *t = dt_safetensors_get(f, r->e->ctx, nm);
            if (!t || dt_numel(t) != slen) {
                dt_safetensors_close(f);
                return t ? dt_error(DT_ERR_FORMAT, "%s: '%s' has %lld elements, expected %lld",
                                    path, nm, (long long)dt_numel(t), (long long)slen)
                         : dt_error(DT_ERR_FORMAT,
                                    "%s: no state '%s' (%s); hint: the "
                                    "optimizer differs",
                                    path, nm, dt_last_error());
            }
            memcpy(ptrs[k] + (a - lo), (const float *)t->data + (a - slo),
                   (size_t)(b - a) * sizeof(float));
        }
        dt_safetensors_close(f);
        dt_ctx_reset(r->e->ctx); /* the arena copies of this shard */
    }
    return DT_OK;
}

dt_status dt_engine_load_checkpoint(dt_engine *e, const char *dir, const char *tag,
                                    const dt_engine_load_opts *opts, json_t **client_state) {
    if (client_state) *client_state = NULL;
    if (!e || !dir) return dt_error(DT_ERR_INVALID, "dt_engine_load_checkpoint: NULL argument");
    dt_engine_load_opts o = opts ? *opts : dt_engine_load_defaults();
    load_plan p = {0};
    dt_status st = agree(e, check_plan(e, dir, tag, &o, &p), "load_checkpoint");
    if (st != DT_OK) {
        plan_free(&p);
        return st;
    }
    /* weights: into the window (stage 3 gathers first so every page is live) */
    dt_status local = dt__zero_gather_all(e);
    bool gathered = local == DT_OK;
    for (int i = 0; local == DT_OK && i < dt_module_param_count(e->model); i++)
        local = dt_safetensors_read_into(p.model, dt_module_param_name(e->model, i),
                                         dt_module_param_tensor(e->model, i));
    dt_ctx_reset(e->ctx);
    if (local == DT_OK && e->stage >= 1) {
        /* the master weights follow the loaded weights (replaced below by the saved master
         * when optimizer states are loaded: the same values) */
        if (e->master) memcpy(e->master, e->params + e->lo, (size_t)e->block * sizeof(float));
        if (e->nv_master) local = dt__swap_write(e->nv_master, 0, e->params + e->lo, e->block);
        if (local == DT_OK && e->stage == 3) {
            if (e->pshard)
                memcpy(e->pshard, e->params + e->lo, (size_t)e->block * sizeof(float));
            else if (e->nv_param)
                local = dt__swap_write(e->nv_param, 0, e->params + e->lo, e->block);
        }
    }
    if (gathered) dt__zero_release_all(e);
    if (local == DT_OK && !o.load_module_only && o.load_optimizer_states) {
        reslice r = {e, &p, e->stage == 0 ? 0 : e->lo};
        local = dt__zero_visit_state(e, reslice_chunk, &r, true);
    }
    st = agree(e, local, "load_checkpoint");
    if (st == DT_OK && !o.load_module_only && o.load_optimizer_states) st = dt__zero_publish(e);
    if (st == DT_OK && !o.load_module_only) {
        json_t *s = p.state;
        e->global_steps = json_integer_value(json_object_get(s, "global_steps"));
        e->global_samples = json_integer_value(json_object_get(s, "global_samples"));
        e->micro_steps = json_integer_value(json_object_get(s, "micro_steps"));
        e->skipped_steps = json_integer_value(json_object_get(s, "skipped_steps"));
        if (o.load_optimizer_states) {
            e->opt_steps = json_integer_value(json_object_get(s, "optimizer_steps"));
            dt_optim_set_step_count(e->opt, e->opt_steps);
        }
        json_t *ls = json_object_get(s, "loss_scaler");
        if (e->scaler && ls) {
            dt_loss_scaler_state st2 = {
                json_real_value(json_object_get(ls, "cur_scale")),
                json_integer_value(json_object_get(ls, "cur_iter")),
                json_integer_value(json_object_get(ls, "last_overflow_iter")),
                (int)json_integer_value(json_object_get(ls, "cur_hysteresis"))};
            st = dt_loss_scaler_set_state(e->scaler, &st2);
        }
        json_t *lr = json_object_get(s, "lr_scheduler_last_step");
        if (st == DT_OK && e->sched && o.load_lr_scheduler_states && json_is_integer(lr))
            dt_sched_set_last_step(e->sched, json_integer_value(lr));
    }
    if (st == DT_OK && client_state) {
        json_t *cs = json_object_get(p.state, "client_state");
        if (cs) *client_state = json_incref(cs);
    }
    dt__zero_clear_grads(e);
    plan_free(&p);
    return st;
}
