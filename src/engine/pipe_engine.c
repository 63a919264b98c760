/*
 * pipe_engine.c — the pipeline engine: stages over a pipe-major grid of ranks, each an engine
 * over its layers, running the instruction streams of pipe_schedule.c.
 *
 * Per global batch every micro-batch's tensors live in the stage's context until the batch
 * ends (its arena is reset with the optimizer step), so activation memory grows with the number
 * of micro-batches rather than with the schedule's in-flight bound; sends are posted with
 * dt_comm_isend and completed before the step. Activations travel as a small header (rank and
 * shape) followed by the f32 data; gradients have the shape of the activation they belong to.
 * Checkpoints are in pipe_ckpt.c.
 */
#include "engine/engine_impl.h"
#include "engine/pipe_impl.h"
#include "tensor/tensor_iface.h"
#include "dtrain/pipe.h"
#include "base/base_impl.h"
#include "engine/engine_iface.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_ACT = 1, TAG_GRAD = 2 };
#define HDR_LEN (1 + DT_MAX_DIMS)

/* How the stage runs layer i: the module (its own, or a tied module shared by several layers)
 * and, for tied layers, the function using it. Kept in the stage module's impl. */
typedef struct layer_run {
    dt_module *m;
    dt_pipe_tied_fn tied;
    void *arg;
} layer_run;

typedef struct stage_impl {
    int n;
    layer_run run[];
} stage_impl;

dt_pipe_opts dt_pipe_defaults(void) {
    return (dt_pipe_opts){.num_stages = 1, .partition_method = "parameters", .seed = 1};
}

typedef struct segment {
    dt_module *m;
    int lo, hi;
} segment;

static dt_tensor *run_layer(const layer_run *r, dt_tensor *x) {
    return r->tied ? r->tied(r->m, x, r->arg) : dt_module_forward(r->m, x);
}

static dt_tensor *run_segment(dt_tensor *x, void *user) {
    const segment *s = user;
    const stage_impl *im = s->m->impl;
    for (int i = s->lo; i < s->hi && x; i++) x = run_layer(&im->run[i], x);
    return x;
}

/* The stage's layers in order; with activation checkpointing (iconf[0] = k > 0) in segments of
 * k layers whose activations are recomputed in the backward. */
static dt_tensor *stage_forward(dt_module *m, dt_tensor *x) {
    int k = (int)m->iconf[0], n = ((const stage_impl *)m->impl)->n;
    if (k <= 0 || !dt_grad_enabled(x->ctx)) {
        segment all = {m, 0, n};
        return run_segment(x, &all);
    }
    for (int lo = 0; lo < n && x; lo += k) {
        segment *s = dt_arena_alloc(dt_ctx_arena(x->ctx), sizeof *s); /* lives until the step */
        if (!s) return NULL;
        *s = (segment){m, lo, lo + k < n ? lo + k : n};
        x = dt_checkpoint(run_segment, s, x);
    }
    return x;
}

static void stage_destroy(dt_module *m) {
    free(m->impl);
}

/* Parameters of each layer, building and freeing it (for the "parameters" method). */
static dt_status count_params(int n, const dt_pipe_layer *layers, int64_t *out) {
    for (int i = 0; i < n; i++) {
        dt_module *m = layers[i].build ? layers[i].build(layers[i].arg) : NULL;
        if (!m)
            return dt_error(DT_ERR_CONFIG, "pipeline: layer %d (%s) could not be built: %s", i,
                            layers[i].type ? layers[i].type : "?", dt_last_error());
        out[i] = dt_module_num_params(m);
        dt_module_free(m);
    }
    return DT_OK;
}

static dt_status load_weights(dt_pipe_engine *p, const char *path) {
    dt_safetensors *f = dt_safetensors_open(path);
    if (!f) return dt_last_status();
    dt_status st = DT_OK;
    for (int i = 0; i < dt_module_param_count(p->module) && st == DT_OK; i++)
        st = dt_safetensors_read_into(f, dt_module_param_name(p->module, i),
                                      dt_module_param_tensor(p->module, i));
    dt_safetensors_close(f);
    dt_ctx_reset(p->ctx);
    return st;
}

static dt_status build_stage(dt_pipe_engine *p, const dt_pipe_layer *layers, uint64_t seed) {
    p->module = dt_module_new("PipelineStage", stage_forward);
    if (!p->module) return dt_last_status();
    int n = p->end - p->first;
    stage_impl *im = calloc(1, sizeof *im + (size_t)(n ? n : 1) * sizeof(layer_run));
    p->tied = calloc((size_t)(n ? n : 1), sizeof *p->tied);
    if (!im || !p->tied) {
        free(im);
        return dt_error(DT_ERR_OOM, "pipeline stage");
    }
    im->n = n;
    p->module->impl = im;
    p->module->destroy = stage_destroy;
    for (int i = p->first; i < p->end; i++) {
        const dt_pipe_layer *L = &layers[i];
        layer_run *r = &im->run[i - p->first];
        r->tied = L->tied_key ? L->tied_forward : NULL;
        r->arg = L->arg;
        if (L->tied_key) { /* the stage's copy of a shared module: built by its first layer */
            dt__pipe_tied *t = NULL;
            for (int k = 0; k < p->n_tied && !t; k++)
                if (!strcmp(p->tied[k].key, L->tied_key)) t = &p->tied[k];
            if (t) {
                r->m = t->m;
                continue;
            }
            t = &p->tied[p->n_tied++];
            snprintf(t->key, sizeof t->key, "%s", L->tied_key);
        }
        dt_module *m = L->build ? L->build(L->arg) : NULL;
        char name[64];
        if (L->tied_key)
            snprintf(name, sizeof name, "tied_%s", L->tied_key);
        else
            snprintf(name, sizeof name, "%d", i);
        if (!m || dt_module_add_child(p->module, name, m) < 0)
            return dt_error(DT_ERR_CONFIG, "pipeline: layer %d (%s) could not be built: %s", i,
                            L->type ? L->type : "?", dt_last_error());
        r->m = m;
        if (L->tied_key) p->tied[p->n_tied - 1].m = m;
    }
    if (!(p->ctx = dt_ctx_new(NULL, seed))) return dt_last_status();
    return dt_module_build(p->module, p->ctx, seed + (uint64_t)p->stage);
}

/* One communicator per tied key of the model (every rank takes part in each split, in the same
 * order): the stages owning the key, at this data-parallel rank. The copies start as the first
 * owner's. */
static dt_status setup_tied(dt_pipe_engine *p, int n_layers, const dt_pipe_layer *layers) {
    p->all_keys = calloc((size_t)n_layers, sizeof *p->all_keys);
    if (!p->all_keys) return dt_error(DT_ERR_OOM, "pipeline");
    for (int i = 0; i < n_layers; i++) {
        if (!layers[i].tied_key) continue;
        if (strlen(layers[i].tied_key) >= sizeof p->all_keys[0])
            return dt_error(DT_ERR_CONFIG,
                            "pipeline: tied key '%s' is too long (at most %zu "
                            "characters)",
                            layers[i].tied_key, sizeof p->all_keys[0] - 1);
        bool seen = false;
        for (int k = 0; k < p->n_keys && !seen; k++)
            seen = !strcmp(p->all_keys[k], layers[i].tied_key);
        if (!seen)
            snprintf(p->all_keys[p->n_keys++], sizeof p->all_keys[0], "%s", layers[i].tied_key);
    }
    for (int k = 0; k < p->n_keys; k++) {
        dt__pipe_tied *t = NULL;
        for (int q = 0; q < p->n_tied && !t; q++)
            if (!strcmp(p->tied[q].key, p->all_keys[k])) t = &p->tied[q];
        dt_comm *c = NULL;
        dt_status st = dt_comm_split(p->world, t ? p->dp_rank : DT_COMM_UNDEFINED, p->stage, &c);
        if (st != DT_OK) return st;
        if (!t) continue;
        t->owners = c;
        for (int i = 0; i < t->m->n_params && st == DT_OK; i++) {
            dt_tensor *w = t->m->params[i].t;
            st = dt_comm_broadcast(c, w->data, dt_nbytes(w), 0);
        }
        if (st != DT_OK) return st;
    }
    return DT_OK;
}

/* The flat range of a module's own parameters inside the stage's flat buffer. */
static void flat_range(const dt_pipe_engine *p, const dt_module *m, int64_t *a, int64_t *b) {
    const float *base = dt_module_flat_params(p->module, NULL);
    *a = INT64_MAX;
    *b = 0;
    for (int i = 0; i < m->n_params; i++) {
        int64_t o = (const float *)m->params[i].t->data - base;
        *a = o < *a ? o : *a;
        *b = o + dt_numel(m->params[i].t) > *b ? o + dt_numel(m->params[i].t) : *b;
    }
}

dt_pipe_engine *dt_pipe_engine_init(int n_layers, const dt_pipe_layer *layers,
                                    const dt_pipe_opts *opts, const json_t *ds_config) {
    dt_pipe_opts o = opts ? *opts : dt_pipe_defaults();
    if (!o.partition_method) o.partition_method = "parameters";
    if (!o.loss) o.loss = dt__pipe_class_loss;
    if (n_layers < 1 || !layers || !ds_config) {
        dt_error(DT_ERR_INVALID, "dt_pipe_engine_init: %s",
                 n_layers < 1 || !layers ? "no layers" : "no DeepSpeed config");
        return NULL;
    }
    dt_pipe_engine *p = calloc(1, sizeof *p);
    int64_t *params = calloc((size_t)n_layers, sizeof *params);
    const char **types = calloc((size_t)n_layers, sizeof *types);
    int *parts = calloc((size_t)(o.num_stages > 0 ? o.num_stages + 1 : 1), sizeof *parts);
    dt_status st = p && params && types && parts ? DT_OK : dt_error(DT_ERR_OOM, "pipeline");
    if (st == DT_OK) {
        p->loss = o.loss;
        p->loss_user = o.loss_user;
        if (o.world) {
            p->world = o.world;
        } else {
            st = dt_comm_init(&p->world);
            p->own_world = st == DT_OK;
        }
    }
    if (st == DT_OK) {
        int P = dt_comm_size(p->world), r = dt_comm_rank(p->world);
        if (o.num_stages < 1 || P % o.num_stages)
            st = dt_error(DT_ERR_CONFIG,
                          "pipeline: %d ranks cannot form %d stages; hint: run a "
                          "multiple of num_stages ranks (stages x data-parallel)",
                          P, o.num_stages);
        else {
            p->S = o.num_stages;
            p->D = P / p->S;
            p->stage = r / p->D;
            p->dp_rank = r % p->D;
        }
    }
    /* the data-parallel group of this stage, and the stages of this data-parallel slice */
    if (st == DT_OK) st = dt_comm_split(p->world, p->stage, p->dp_rank, &p->dp);
    if (st == DT_OK) st = dt_comm_split(p->world, p->dp_rank, p->stage, &p->pp);
    if (st == DT_OK) {
        for (int i = 0; i < n_layers; i++) types[i] = layers[i].type;
        if (!strcmp(o.partition_method, "parameters")) st = count_params(n_layers, layers, params);
        if (st == DT_OK)
            st = dt__pipe_partition(o.partition_method, n_layers, params, types, p->S, parts);
    }
    if (st == DT_OK) {
        p->first = parts[p->stage];
        p->end = parts[p->stage + 1];
        dt_ds_config c;
        st = dt_ds_config_parse(ds_config, p->D, &c);
        if (st == DT_OK && c.zero.stage >= 2)
            st = dt_error(DT_ERR_CONFIG,
                          "pipeline: ZeRO stage %d cannot run with pipeline parallelism (stage 2 "
                          "and 3 partition gradients and parameters across the data-parallel "
                          "ranks while each pipeline stage accumulates its own micro-batches); "
                          "hint: set zero_optimization.stage to 0 or 1",
                          c.zero.stage);
    }
    if (st == DT_OK && o.activation_checkpoint_interval < 0)
        st = dt_error(DT_ERR_CONFIG,
                      "pipeline: activation_checkpoint_interval %d is negative; "
                      "hint: 0 turns checkpointing off",
                      o.activation_checkpoint_interval);
    if (st == DT_OK) st = build_stage(p, layers, o.seed ? o.seed : 1);
    if (st == DT_OK) p->module->iconf[0] = o.activation_checkpoint_interval;
    if (st == DT_OK && o.init_weights) st = load_weights(p, o.init_weights);
    st = dt_comm_agree(p->world, st, "pipeline set-up");
    if (st == DT_OK) st = setup_tied(p, n_layers, layers);
    if (st == DT_OK) {
        dt_engine_opts eo = {.comm = p->dp};
        if (!(p->eng = dt_engine_init_opts(p->module, ds_config, &eo)))
            st = dt_last_status();
        else {
            p->eng->mp_comm = p->pp; /* global gradient norm and overflow over the stages */
            p->eng->pipe_stage = true;
        }
    }
    /* a tied module's gradient is counted in the norm by its first owning stage only */
    for (int k = 0; st == DT_OK && k < p->n_tied; k++) {
        if (dt_comm_rank(p->tied[k].owners) == 0) continue;
        if (p->eng->n_norm_skip == DT_ENGINE_MAX_NORM_SKIP) {
            st = dt_error(DT_ERR_CONFIG, "pipeline: more than %d tied modules on one stage",
                          DT_ENGINE_MAX_NORM_SKIP);
            break;
        }
        int64_t a, b;
        flat_range(p, p->tied[k].m, &a, &b);
        p->eng->norm_skip[p->eng->n_norm_skip][0] = a;
        p->eng->norm_skip[p->eng->n_norm_skip++][1] = b;
    }
    free(params);
    free(types);
    free(parts);
    if (st != DT_OK) {
        DT_KEEP_ERROR(dt_pipe_engine_free(p));
        return NULL;
    }
    return p;
}

void dt_pipe_engine_free(dt_pipe_engine *p) {
    if (!p) return;
    for (int k = 0; k < p->n_slot_arena; k++) dt_arena_free(p->slot_arena[k]);
    free(p->slot_arena);
    for (int k = 0; k < p->n_tied; k++) dt_comm_free(p->tied[k].owners);
    free(p->tied);
    free(p->all_keys);
    dt_engine_free(p->eng);
    dt_module_free(p->module);
    dt_ctx_free(p->ctx);
    dt_comm_free(p->dp);
    dt_comm_free(p->pp);
    if (p->own_world) dt_comm_finalize(p->world);
    free(p);
}

/* ---- running the streams ------------------------------------------------------------------ */

typedef struct run {
    dt_pipe_engine *p;
    int M;
    dt_tensor **in, **out, **labels, **gout;
    double *loss;
    int64_t (*hdr)[HDR_LEN];
    dt_comm_req **reqs;
    int *req_micro; /* the micro-batch of each send, -1 once completed */
    int nreq;
    int *owner; /* per slot: the micro-batch whose tensors are in its arena, -1 none */
    double wait_s;
} run;

static dt_status post(run *r, int micro, const void *buf, size_t bytes, int peer, int tag) {
    dt_comm_req *q = NULL;
    dt_status st = dt_comm_isend(r->p->pp, buf, bytes, peer, tag, &q);
    if (st == DT_OK) {
        r->req_micro[r->nreq] = micro;
        r->reqs[r->nreq++] = q;
    }
    return st;
}

/* Complete the sends of micro-batch m (all of them for m < 0). */
static dt_status wait_sends(run *r, int m) {
    double t0 = dt_now_sec();
    dt_status st = DT_OK;
    for (int i = 0; i < r->nreq; i++) {
        if (r->req_micro[i] < 0 || (m >= 0 && r->req_micro[i] != m)) continue;
        st = dt_status_first(st, dt_comm_wait(r->p->pp, r->reqs[i]));
        r->req_micro[i] = -1;
    }
    r->wait_s += dt_now_sec() - t0;
    return st;
}

/* Slot k's arena, emptied of its previous micro-batch (its sends completed, its nodes off the
 * tape) when micro-batch m moves in. */
static dt_status take_slot(run *r, int k, int m, dt_arena **out) {
    dt_pipe_engine *p = r->p;
    if (k >= p->n_slot_arena) {
        dt_arena **a = realloc(p->slot_arena, (size_t)(k + 1) * sizeof *a);
        if (!a) return dt_error(DT_ERR_OOM, "pipeline: slot arenas");
        p->slot_arena = a;
        for (; p->n_slot_arena <= k; p->n_slot_arena++) {
            a[p->n_slot_arena] = dt_arena_new(dt_ctx_device(p->ctx), DT_MEM_ACTIVATIONS, 0);
            if (!a[p->n_slot_arena]) return dt_last_status();
        }
    }
    dt_status st = DT_OK;
    if (r->owner[k] != m) {
        if (r->owner[k] >= 0) {
            st = wait_sends(r, r->owner[k]);
            dt__ctx_forget_arena(p->ctx, p->slot_arena[k]);
            dt_arena_reset(p->slot_arena[k]);
        }
        r->owner[k] = m;
    }
    *out = p->slot_arena[k];
    return st;
}

static dt_status recv_tensor(run *r, int peer, int tag, const dt_tensor *like, dt_tensor **out) {
    double t0 = dt_now_sec();
    int64_t hdr[HDR_LEN];
    dt_status st = DT_OK;
    if (!like) {
        st = dt_comm_recv(r->p->pp, hdr, sizeof hdr, peer, tag);
        if (st == DT_OK && (hdr[0] < 0 || hdr[0] > DT_MAX_DIMS))
            st = dt_error(DT_ERR_COMM, "pipeline: stage %d sent a tensor header with %lld dims",
                          peer, (long long)hdr[0]);
    } else {
        hdr[0] = like->ndim;
        for (int d = 0; d < like->ndim; d++) hdr[1 + d] = like->shape[d];
    }
    if (st == DT_OK) {
        *out = dt_tensor_new(r->p->ctx, DT_DTYPE_F32, (int)hdr[0], hdr + 1);
        if (!*out) st = dt_last_status();
    }
    if (st == DT_OK) st = dt_comm_recv(r->p->pp, (*out)->data, dt_nbytes(*out), peer, tag);
    r->wait_s += dt_now_sec() - t0;
    return st;
}

static dt_status exec(run *r, const dt_pipe_instr *in, dt_pipe_data_fn data, void *user,
                      bool train) {
    dt_pipe_engine *p = r->p;
    const int m = in->micro;
    const bool last = p->stage == p->S - 1;
    dt_status st = DT_OK;
    switch (in->kind) {
    case DT_PIPE_LOAD:
        st = data(user, m, p->ctx, in->load & DT_PIPE_INPUTS, &r->in[m], in->load & DT_PIPE_LABELS,
                  &r->labels[m]);
        if (st == DT_OK && (in->load & DT_PIPE_INPUTS) && !r->in[m])
            st = dt_error(DT_ERR_INVALID,
                          "pipeline: the data function gave no inputs for "
                          "micro-batch %d",
                          m);
        break;
    case DT_PIPE_RECV_ACT:
        st = recv_tensor(r, in->peer, TAG_ACT, NULL, &r->in[m]);
        if (st == DT_OK && train) dt_set_requires_grad(r->in[m], true);
        break;
    case DT_PIPE_FORWARD: {
        dt_tensor *y = dt_engine_forward(p->eng, r->in[m]);
        if (y && last) {
            dt_tensor *l = p->loss(y, r->labels[m], p->loss_user);
            if (l && dt_numel(l) != 1)
                return dt_error(DT_ERR_INVALID,
                                "pipeline: the loss of micro-batch %d has %lld "
                                "elements; hint: return a one-element tensor",
                                m, (long long)dt_numel(l));
            if (l) r->loss[m] = dt_item(l);
            y = l;
        } else if (y && !dt_is_contiguous(y)) {
            y = dt_contiguous(y);
        }
        if (!y)
            return dt_error(dt_last_status() ? dt_last_status() : DT_ERR_STATE,
                            "pipeline: forward of micro-batch %d on stage %d: %s", m, p->stage,
                            dt_last_error());
        r->out[m] = y;
        break;
    }
    case DT_PIPE_SEND_ACT: {
        dt_tensor *y = r->out[m];
        r->hdr[m][0] = y->ndim;
        for (int d = 0; d < y->ndim; d++) r->hdr[m][1 + d] = y->shape[d];
        st = post(r, m, r->hdr[m], sizeof r->hdr[m], in->peer, TAG_ACT);
        if (st == DT_OK) st = post(r, m, y->data, dt_nbytes(y), in->peer, TAG_ACT);
        break;
    }
    case DT_PIPE_RECV_GRAD:
        st = recv_tensor(r, in->peer, TAG_GRAD, r->out[m], &r->gout[m]);
        break;
    case DT_PIPE_BACKWARD:
        st = last ? dt_engine_backward(p->eng, r->out[m])
                  : dt__engine_backward_from(p->eng, r->out[m], r->gout[m]);
        break;
    case DT_PIPE_SEND_GRAD: {
        dt_tensor *x = r->in[m];
        if (!x->grad)
            return dt_error(DT_ERR_STATE,
                            "pipeline: stage %d's input of micro-batch %d got no "
                            "gradient; hint: the stage's first layer must use "
                            "its input",
                            p->stage, m);
        st = post(r, m, x->grad->data, dt_nbytes(x->grad), in->peer, TAG_GRAD);
        break;
    }
    case DT_PIPE_REDUCE_TIED:
        /* the copies of each tied module: gradients summed over the owning stages */
        for (int k = 0; k < p->n_tied && st == DT_OK; k++) {
            if (!train || dt_comm_size(p->tied[k].owners) == 1) continue;
            dt_module *tm = p->tied[k].m;
            for (int i = 0; i < tm->n_params && st == DT_OK; i++) {
                /* where the micro-batches' gradients are accumulated ("deterministic" sums
                 * each one over the data-parallel group first) */
                dt_tensor *g = tm->params[i].t->grad;
                st = dt_comm_allreduce(p->tied[k].owners, dt__zero_accumulated(p->eng, g->data),
                                       dt_numel(g), DT_COMM_DTYPE_F32, DT_REDUCE_OP_SUM);
            }
        }
        break;
    case DT_PIPE_REDUCE_GRADS:
        break; /* the data-parallel reduction is part of the step */
    case DT_PIPE_STEP:
        break; /* after the sends complete (dt_pipe_train_batch) */
    case DT_PIPE_NOPS:
        break;
    }
    return st;
}

static float run_batch(dt_pipe_engine *p, dt_pipe_data_fn data, void *user, dt_status *stp,
                       bool train) {
    double t0 = dt_now_sec();
    int M = (int)dt_engine_gradient_accumulation_steps(p->eng);
    dt_pipe_instr *ins = NULL;
    int count = 0;
    dt_status st = train ? dt__pipe_train_schedule(p->S, p->stage, M, &ins, &count)
                         : dt__pipe_infer_schedule(p->S, p->stage, M, &ins, &count);
    run r = {.p = p, .M = M};
    if (st == DT_OK) {
        r.in = calloc((size_t)M, sizeof *r.in);
        r.out = calloc((size_t)M, sizeof *r.out);
        r.labels = calloc((size_t)M, sizeof *r.labels);
        r.gout = calloc((size_t)M, sizeof *r.gout);
        r.loss = calloc((size_t)M, sizeof *r.loss);
        r.hdr = calloc((size_t)M, sizeof *r.hdr);
        r.reqs = calloc((size_t)(4 * M + 4), sizeof *r.reqs);
        r.req_micro = calloc((size_t)(4 * M + 4), sizeof *r.req_micro);
        r.owner = malloc((size_t)(M + 2) * sizeof *r.owner);
        if (!r.in || !r.out || !r.labels || !r.gout || !r.loss || !r.hdr || !r.reqs ||
            !r.req_micro || !r.owner)
            st = dt_error(DT_ERR_OOM, "pipeline: batch state");
        for (int k = 0; r.owner && k < M + 2; k++) r.owner[k] = -1;
    }
    /* evaluation: no gradients and evaluation mode (dropout off), as the caller had it after */
    bool grad = dt_set_grad_enabled(p->ctx, train), training = dt_ctx_training(p->ctx);
    if (!train) dt_ctx_set_training(p->ctx, false);
    p->eng->pipe_busy = true;
    dt_arena *own = dt_ctx_arena(p->ctx);
    for (int i = 0; i < count && st == DT_OK; i++) {
        /* a micro-batch's tensors live in its slot's arena, freed when the slot is reused */
        dt_arena *a = own;
        if (ins[i].micro >= 0) st = take_slot(&r, ins[i].buf, ins[i].micro, &a);
        if (st != DT_OK) break;
        dt__ctx_swap_arena(p->ctx, a);
        st = exec(&r, &ins[i], data, user, train);
        dt__ctx_swap_arena(p->ctx, own);
    }
    p->eng->pipe_busy = false;
    dt_set_grad_enabled(p->ctx, grad);
    dt_ctx_set_training(p->ctx, training);
    /* every posted send completes before its data goes (also after an error) */
    st = dt_status_first(st, wait_sends(&r, -1));
    for (int k = 0; r.owner && k < p->n_slot_arena; k++) {
        if (r.owner[k] < 0) continue;
        dt__ctx_forget_arena(p->ctx, p->slot_arena[k]);
        dt_arena_reset(p->slot_arena[k]);
    }
    if (st == DT_OK && train)
        st = dt__engine_boundary(p->eng, M);
    else
        dt_ctx_reset(p->ctx);
    /* the loss: mean over micro-batches and data-parallel ranks, from the last stage to all */
    double loss = 0;
    for (int m = 0; m < M && r.loss; m++) loss += r.loss[m] / M;
    if (st == DT_OK && p->D > 1)
        st = dt_comm_allreduce(p->dp, &loss, 1, DT_COMM_DTYPE_F64, DT_REDUCE_OP_AVG);
    if (st == DT_OK && p->S > 1) st = dt_comm_broadcast(p->pp, &loss, sizeof loss, p->S - 1);
    free(ins);
    free(r.in);
    free(r.out);
    free(r.labels);
    free(r.gout);
    free(r.loss);
    free(r.hdr);
    free(r.reqs);
    free(r.req_micro);
    free(r.owner);
    double total = dt_now_sec() - t0;
    if (train) p->wait_frac = total > 0 ? r.wait_s / total : 0;
    if (stp) *stp = st;
    return st == DT_OK ? (float)loss : NAN;
}

static float batch_checked(dt_pipe_engine *p, dt_pipe_data_fn data, void *user, dt_status *st,
                           bool train, const char *fn) {
    if (!p || !data) {
        dt_status s = dt_error(DT_ERR_INVALID, "%s: NULL argument", fn);
        if (st) *st = s;
        return NAN;
    }
    return run_batch(p, data, user, st, train);
}

float dt_pipe_train_batch(dt_pipe_engine *p, dt_pipe_data_fn data, void *user, dt_status *st) {
    return batch_checked(p, data, user, st, true, "dt_pipe_train_batch");
}

float dt_pipe_eval_batch(dt_pipe_engine *p, dt_pipe_data_fn data, void *user, dt_status *st) {
    return batch_checked(p, data, user, st, false, "dt_pipe_eval_batch");
}

int dt_pipe_stage_id(const dt_pipe_engine *p) {
    return p->stage;
}
int dt_pipe_num_stages(const dt_pipe_engine *p) {
    return p->S;
}
int dt_pipe_dp_rank(const dt_pipe_engine *p) {
    return p->dp_rank;
}
int dt_pipe_dp_size(const dt_pipe_engine *p) {
    return p->D;
}
void dt_pipe_stage_layers(const dt_pipe_engine *p, int *first, int *end) {
    if (first) *first = p->first;
    if (end) *end = p->end;
}
dt_module *dt_pipe_stage_module(const dt_pipe_engine *p) {
    return p->module;
}
dt_engine *dt_pipe_stage_engine(const dt_pipe_engine *p) {
    return p->eng;
}
double dt_pipe_last_wait_fraction(const dt_pipe_engine *p) {
    return p->wait_frac;
}
