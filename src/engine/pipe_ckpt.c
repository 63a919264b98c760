/*
 * pipe_ckpt.c — the pipeline engine's checkpoints.
 *
 *   DIR/TAG/stage_<s>/engine/...        each stage's engine checkpoint (engine_ckpt.c): its
 *                                       weights, optimizer shards and counters
 *   DIR/TAG/stage_<s>/rng.json          the stage's RNG (dropout masks), data-parallel rank 0
 *   DIR/TAG/layer_<i>.safetensors       layer i's weights, from its stage
 *   DIR/TAG/tied_<key>.safetensors      a tied module's weights, from its first owning stage
 *   DIR/TAG/model.safetensors           every layer consolidated (rank 0)
 *   DIR/TAG/pipe_state.json             format version, stages, layers and partition (rank 0)
 *   DIR/latest                          the tag (rank 0, last)
 *
 * Every file is written through base's durable path; the tag, "latest" and JSON helpers are
 * engine_ckpt.c's. The ranks agree (dt_comm_agree) after each phase, so a failure on one rank
 * stops them all. A load checks the layout and reads the RNG before the engines load, so a
 * checkpoint of another layout changes nothing.
 */
#include "engine/engine_impl.h"
#include "engine/pipe_impl.h"
#include "base/durable.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PIPE_CKPT_VERSION 1

/* The parameters of this stage's module whose names start with `prefix` ("<layer>." or
 * "tied_<key>."). */
static dt_status write_params(dt_pipe_engine *p, const char *prefix, const char *path) {
    int np = 0, cap = dt_module_param_count(p->module);
    const char **names = calloc((size_t)(cap ? cap : 1), sizeof *names);
    dt_tensor **ts = calloc((size_t)(cap ? cap : 1), sizeof *ts);
    if (!names || !ts) {
        free(names);
        free(ts);
        return dt_error(DT_ERR_OOM, "pipeline checkpoint");
    }
    for (int k = 0; k < cap; k++) {
        const char *nm = dt_module_param_name(p->module, k);
        if (strncmp(nm, prefix, strlen(prefix))) continue;
        names[np] = nm;
        ts[np++] = dt_module_param_tensor(p->module, k);
    }
    const char *meta[] = {"format", "pt"};
    dt_status st = dt_safetensors_write(path, np, names, ts, 1, meta);
    free(names);
    free(ts);
    return st;
}

/* Rank 0: every layer file (and tied module file) into one model.safetensors. */
static dt_status consolidate(const dt_pipe_engine *p, const char *tdir, int n_layers) {
    dt_ctx *c = dt_ctx_new(NULL, 1);
    int cap = 64, n = 0;
    const char **names = malloc((size_t)cap * sizeof *names);
    dt_tensor **ts = malloc((size_t)cap * sizeof *ts);
    int nf = n_layers + p->n_keys;
    dt_safetensors **files = calloc((size_t)nf, sizeof *files);
    dt_status st = c && names && ts && files ? DT_OK : dt_error(DT_ERR_OOM, "pipeline");
    for (int i = 0; i < nf && st == DT_OK; i++) {
        char path[4300];
        if (i < n_layers)
            snprintf(path, sizeof path, "%s/layer_%d.safetensors", tdir, i);
        else
            snprintf(path, sizeof path, "%s/tied_%s.safetensors", tdir, p->all_keys[i - n_layers]);
        if (!(files[i] = dt_safetensors_open(path))) {
            st = dt_last_status();
            break;
        }
        for (int k = 0; k < dt_safetensors_count(files[i]) && st == DT_OK; k++) {
            if (n == cap) {
                cap *= 2;
                const char **nn = realloc(names, (size_t)cap * sizeof *names);
                if (nn) names = nn;
                dt_tensor **nt = realloc(ts, (size_t)cap * sizeof *ts);
                if (nt) ts = nt;
                if (!nn || !nt) {
                    st = dt_error(DT_ERR_OOM, "pipeline checkpoint");
                    break;
                }
            }
            names[n] = dt_safetensors_name(files[i], k);
            ts[n] = dt_safetensors_get(files[i], c, names[n]);
            if (!ts[n])
                st = dt_last_status();
            else
                n++;
        }
    }
    if (st == DT_OK) {
        char path[4300];
        snprintf(path, sizeof path, "%s/model.safetensors", tdir);
        const char *meta[] = {"format", "pt"};
        st = dt_safetensors_write(path, n, names, ts, 1, meta);
    }
    for (int i = 0; files && i < nf; i++) dt_safetensors_close(files[i]);
    free(files);
    free(names);
    free(ts);
    dt_ctx_free(c);
    return st;
}

static int n_layers_of(const dt_pipe_engine *p, int64_t *parts_out) {
    /* every stage's [first, end), in stage order, from the pipe group */
    int64_t mine[2] = {p->first, p->end};
    int64_t *all = malloc((size_t)p->S * sizeof mine);
    int n = -1;
    if (all && dt_comm_allgather(p->pp, mine, all, sizeof mine) == DT_OK) {
        for (int s = 0; s < p->S; s++) parts_out[s] = all[2 * s];
        parts_out[p->S] = all[2 * p->S - 1];
        n = (int)all[2 * p->S - 1];
    }
    free(all);
    return n;
}

dt_status dt_pipe_save_checkpoint(dt_pipe_engine *p, const char *dir, const char *tag,
                                  const json_t *client_state) {
    if (!p || !dir) return dt_error(DT_ERR_INVALID, "dt_pipe_save_checkpoint: NULL argument");
    char tagbuf[64], tdir[4096] = "", sdir[4200];
    dt_status local =
        dt__ckpt_tag(tag, dt_engine_global_steps(p->eng), tagbuf, sizeof tagbuf, &tag);
    if (local == DT_OK) local = dt__ckpt_tag_dir(dir, tag, tdir, sizeof tdir);
    snprintf(sdir, sizeof sdir, "%s/stage_%d", tdir, p->stage);
    int64_t *parts = calloc((size_t)p->S + 1, sizeof *parts);
    int n_layers = parts ? n_layers_of(p, parts) : -1;
    if (local == DT_OK && n_layers < 0)
        local = dt_error(DT_ERR_COMM, "pipeline checkpoint: layout");
    dt_status st = dt_comm_agree(p->world, local, "pipeline save");
    /* each stage's engine: its weights, optimizer shards and counters */
    if (st == DT_OK) st = dt_engine_save_checkpoint(p->eng, sdir, "engine", client_state);
    /* the stage's RNG (dropout masks), so a resumed run draws the same ones */
    if (st == DT_OK && p->dp_rank == 0) {
        const dt_rng *r = dt_ctx_rng(p->ctx);
        char text[128], path[4400];
        /* as signed 64-bit values: JSON readers take those (the bits round-trip) */
        snprintf(text, sizeof text, "{\"seed\": %lld, \"counter\": %lld}\n", (long long)r->seed,
                 (long long)r->counter);
        snprintf(path, sizeof path, "%s/rng.json", sdir);
        st = dt_file_write_atomic(path, text, strlen(text));
    }
    st = dt_comm_agree(p->world, st, "pipeline save");
    /* each layer's weights from its stage */
    local = DT_OK;
    if (st == DT_OK && p->dp_rank == 0) {
        char path[4300], prefix[64];
        for (int i = p->first; i < p->end && local == DT_OK; i++) {
            snprintf(path, sizeof path, "%s/layer_%d.safetensors", tdir, i);
            snprintf(prefix, sizeof prefix, "%d.", i);
            local = write_params(p, prefix, path);
        }
        /* a tied module once, by its first owning stage */
        for (int k = 0; k < p->n_tied && local == DT_OK; k++) {
            if (dt_comm_rank(p->tied[k].owners) != 0) continue;
            snprintf(path, sizeof path, "%s/tied_%s.safetensors", tdir, p->tied[k].key);
            snprintf(prefix, sizeof prefix, "tied_%s.", p->tied[k].key);
            local = write_params(p, prefix, path);
        }
    }
    if (st == DT_OK) st = dt_comm_agree(p->world, local, "pipeline save");
    /* rank 0: the consolidated weights, the layout, then latest */
    local = DT_OK;
    if (st == DT_OK && dt_comm_rank(p->world) == 0) {
        local = consolidate(p, tdir, n_layers);
        json_t *parts_j = json_array();
        for (int s = 0; s <= p->S; s++) json_array_append_new(parts_j, json_integer(parts[s]));
        json_t *j =
            json_pack("{s:i, s:i, s:i, s:i, s:o, s:I}", "format_version", PIPE_CKPT_VERSION,
                      "num_stages", p->S, "dp_size", p->D, "n_layers", n_layers, "partition",
                      parts_j, "global_steps", (json_int_t)dt_engine_global_steps(p->eng));
        char path[4300];
        snprintf(path, sizeof path, "%s/pipe_state.json", tdir);
        if (local == DT_OK) local = dt__ckpt_write_json(path, j, JSON_INDENT(2));
        if (local == DT_OK) local = dt__ckpt_write_latest(dir, tag);
        json_decref(j);
    }
    free(parts);
    if (st == DT_OK) st = dt_comm_agree(p->world, local, "pipeline save");
    return st;
}

dt_status dt_pipe_load_checkpoint(dt_pipe_engine *p, const char *dir, const char *tag,
                                  json_t **client_state) {
    if (client_state) *client_state = NULL;
    if (!p || !dir) return dt_error(DT_ERR_INVALID, "dt_pipe_load_checkpoint: NULL argument");
    char tagbuf[256], path[4300];
    dt_status local = DT_OK;
    if (!tag) {
        local = dt__ckpt_read_latest(dir, tagbuf, sizeof tagbuf);
        tag = tagbuf;
    }
    if (local == DT_OK) local = dt__ckpt_tag_dir(dir, tag, path, sizeof path); /* contained */
    int64_t *parts = calloc((size_t)p->S + 1, sizeof *parts);
    int n_layers = parts ? n_layers_of(p, parts) : -1;
    json_t *j = NULL;
    if (local == DT_OK) {
        snprintf(path, sizeof path, "%s/%s/pipe_state.json", dir, tag);
        json_error_t jerr;
        if (!(j = json_load_file(path, 0, &jerr)))
            local = dt_error(DT_ERR_FORMAT, "%s: %s; hint: is this a pipeline checkpoint?", path,
                             jerr.text);
    }
    if (local == DT_OK) {
        json_t *pj = json_object_get(j, "partition");
        bool same = json_integer_value(json_object_get(j, "format_version")) == PIPE_CKPT_VERSION &&
                    json_integer_value(json_object_get(j, "num_stages")) == p->S &&
                    json_integer_value(json_object_get(j, "n_layers")) == n_layers &&
                    (int)json_array_size(pj) == p->S + 1;
        for (int s = 0; same && s <= p->S; s++)
            same = json_integer_value(json_array_get(pj, (size_t)s)) == parts[s];
        if (!same)
            local = dt_error(DT_ERR_FORMAT,
                             "%s: saved with another pipeline layout (%lld stages over %lld "
                             "layers, or another partition) than this engine's %d stages over %d "
                             "layers; hint: load its model.safetensors as initial weights instead "
                             "(dt_pipe_opts.init_weights)",
                             path, (long long)json_integer_value(json_object_get(j, "num_stages")),
                             (long long)json_integer_value(json_object_get(j, "n_layers")), p->S,
                             n_layers);
    }
    json_decref(j);
    free(parts);
    dt_status st = dt_comm_agree(p->world, local, "pipeline load");
    if (st != DT_OK) return st;
    char sdir[4400];
    snprintf(sdir, sizeof sdir, "%s/%s/stage_%d", dir, tag, p->stage);
    /* the RNG first (nothing changes if it is unreadable), then the engine */
    dt_rng rng = *dt_ctx_rng(p->ctx);
    char rpath[4500];
    snprintf(rpath, sizeof rpath, "%s/rng.json", sdir);
    json_error_t jerr;
    json_t *rj = json_load_file(rpath, 0, &jerr);
    json_t *seed = json_object_get(rj, "seed"), *ctr = json_object_get(rj, "counter");
    st = json_is_integer(seed) && json_is_integer(ctr)
             ? DT_OK
             : dt_error(DT_ERR_FORMAT, "%s: missing or malformed (%s)", rpath,
                        rj ? "keys" : jerr.text);
    if (st == DT_OK) {
        rng.seed = (uint64_t)json_integer_value(seed);
        rng.counter = (uint64_t)json_integer_value(ctr);
    }
    json_decref(rj);
    st = dt_comm_agree(p->world, st, "pipeline load");
    if (st != DT_OK) return st;
    st = dt_engine_load_checkpoint(p->eng, sdir, "engine", NULL, client_state);
    if (st == DT_OK) *dt_ctx_rng(p->ctx) = rng;
    return dt_comm_agree(p->world, st, "pipeline load");
}
