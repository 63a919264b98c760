/* autograd.c — the tape: recording nodes, FLOP counting, reverse-mode backward, op registry. */
#include "tensor_impl.h"

#include "base/base_impl.h"

#include <stdlib.h>

dt_node *dt__node_new(const dt_op_def *op, dt_tensor *out, int n_in, dt_tensor *const *ins) {
    if (!out) return NULL;
    dt_ctx *ctx = out->ctx;
    dt_node *n = dt_arena_alloc(ctx->arena, sizeof *n);
    if (!n) return NULL;
    n->op = op;
    n->out = out;
    n->n_in = n_in;
    if (n_in <= DT_NODE_MAX_IN) {
        n->ins = n->in;
    } else {
        n->ins = dt_arena_alloc_raw(ctx->arena, (size_t)n_in * sizeof(dt_tensor *));
        if (!n->ins) return NULL;
    }
    bool any = false;
    for (int i = 0; i < n_in; i++) {
        n->ins[i] = ins[i];
        if (i < DT_NODE_MAX_IN) n->in[i] = ins[i];
        if (dt_requires_grad(ins[i])) any = true;
    }
    n->record = any && ctx->grad_enabled;
    if (ctx->profile) n->t0 = dt_now_sec();
    return n;
}

static dt_status tape_push(dt_ctx *ctx, dt_node *n) {
    if (ctx->tape_len == ctx->tape_cap) {
        int64_t cap = ctx->tape_cap ? ctx->tape_cap * 2 : 256;
        dt_node **t = dt_mem_alloc(ctx->dev, DT_MEM_OTHER, (size_t)cap * sizeof *t);
        if (!t) return DT_ERR_OOM;
        if (ctx->tape) memcpy(t, ctx->tape, (size_t)ctx->tape_len * sizeof *t);
        dt_mem_free(ctx->dev, DT_MEM_OTHER, ctx->tape, (size_t)ctx->tape_cap * sizeof *t);
        ctx->tape = t;
        ctx->tape_cap = cap;
    }
    ctx->tape[ctx->tape_len++] = n;
    return DT_OK;
}

dt_tensor *dt__node_commit(dt_node *n) {
    if (!n) return NULL;
    dt_ctx *ctx = n->out->ctx;
    if (ctx->profile) {
        dt_op_time *r = dt__prof_row(ctx, n->op);
        if (r) r->fwd_calls++, r->fwd_sec += dt_now_sec() - n->t0;
    }
    if (n->op->flops) ctx->flops_fwd += n->op->flops(n);
    if (n->record) {
        if (tape_push(ctx, n) != DT_OK) return NULL;
        n->out->node = n;
        n->out->flags |= DT_TENSOR_REQUIRES_GRAD;
    }
    return n->out;
}

/* ---- gradient buffers -----------------------------------------------------------------------
 * An intermediate tensor's gradient is dropped once its node's backward has run (run_backward).
 * Its buffer goes to a small per-context pool, and the next gradient of the same size takes it
 * (most recently dropped first), so the backward keeps reusing a few cache-warm buffers instead
 * of writing every activation gradient to new arena memory (the arena only grows within a
 * step). dt_ctx_reset empties the pool. */

static void pool_put(dt_ctx *c, void *data, size_t bytes) {
    if (c->grad_pool.n == (int)(sizeof c->grad_pool.data / sizeof c->grad_pool.data[0])) return;
    c->grad_pool.data[c->grad_pool.n] = data;
    c->grad_pool.bytes[c->grad_pool.n++] = bytes;
}

/* A new gradient tensor for t: a pooled buffer of the right size, or new arena memory. */
static dt_tensor *new_grad(dt_tensor *t, bool zero) {
    dt_ctx *c = t->ctx;
    size_t bytes = (size_t)dt_numel(t) * sizeof(float);
    for (int i = c->grad_pool.n - 1; i >= 0; i--) {
        if (c->grad_pool.bytes[i] != bytes) continue;
        dt_tensor *g = dt_tensor_wrap(c, DT_DTYPE_F32, t->ndim, t->shape, c->grad_pool.data[i]);
        if (!g) return NULL;
        for (int j = i; j + 1 < c->grad_pool.n; j++) { /* keep the order: newest last */
            c->grad_pool.data[j] = c->grad_pool.data[j + 1];
            c->grad_pool.bytes[j] = c->grad_pool.bytes[j + 1];
        }
        c->grad_pool.n--;
        if (zero) memset(g->data, 0, bytes);
        return g;
    }
    return zero ? dt_tensor_new(c, DT_DTYPE_F32, t->ndim, t->shape)
                : dt__empty(c, DT_DTYPE_F32, t->ndim, t->shape);
}

float *dt__grad_f32(dt_tensor *t) {
    if (!t->grad) {
        dt_tensor *g = new_grad(t, true);
        if (!g) return NULL;
        t->grad = g;
    } else if (t->flags & DT__TENSOR_GRAD_STALE) {
        dt__zero_f32(t->grad->data, dt_numel(t));
        t->flags &= ~DT__TENSOR_GRAD_STALE;
    }
    return t->grad->data;
}

float *dt__grad_f32_fresh(dt_tensor *t, bool *fresh) {
    *fresh = t->grad == NULL || (t->flags & DT__TENSOR_GRAD_STALE);
    if (!t->grad) {
        dt_tensor *g = new_grad(t, false);
        if (!g) return NULL;
        t->grad = g;
    }
    t->flags &= ~DT__TENSOR_GRAD_STALE;
    return t->grad->data;
}

bool dt__ctx_add_settle(dt_ctx *ctx, dt__settle_fn fn, void *arg) {
    for (int i = 0; i < ctx->n_settle; i++)
        if (ctx->settle[i].fn == fn && ctx->settle[i].arg == arg) return true;
    if (ctx->n_settle == DT__MAX_SETTLE) return false;
    ctx->settle[ctx->n_settle++] = (struct dt_settle){fn, arg};
    return true;
}

void dt__ctx_remove_settle(dt_ctx *ctx, dt__settle_fn fn, void *arg) {
    int k = 0;
    for (int i = 0; i < ctx->n_settle; i++)
        if (ctx->settle[i].fn != fn || ctx->settle[i].arg != arg) ctx->settle[k++] = ctx->settle[i];
    ctx->n_settle = k;
}

/* the end of a top-level backward: every stale gradient it did not reach becomes a zeroed one */
static dt_status settle_all(dt_ctx *ctx, dt_status st) {
    for (int i = 0; i < ctx->n_settle; i++) ctx->settle[i].fn(ctx->settle[i].arg);
    ctx->n_settle = 0;
    return st;
}

bool dt__grad_take_over(dt_node *n, dt_tensor *t) {
    if (t->grad || !n->out->grad || dt_numel(t) != dt_numel(n->out)) return false;
    dt_tensor *g = dt__view_of(n->out->grad);
    if (!g) return false;
    g->ndim = t->ndim;
    memcpy(g->shape, t->shape, sizeof g->shape);
    dt__set_contiguous_strides(g);
    t->grad = g;
    n->out->grad = NULL; /* handed over: not for the tape's buffer pool */
    return true;
}

dt_status dt_ctx_mark_backward(dt_ctx *ctx, dt_backward_mark_fn fn, void *user, int64_t arg) {
    if (!ctx || !fn) return dt_error(DT_ERR_INVALID, "dt_ctx_mark_backward: NULL argument");
    if (ctx->n_marks == ctx->cap_marks) {
        int64_t cap = ctx->cap_marks ? ctx->cap_marks * 2 : 64;
        struct dt_bwd_mark *m = dt_mem_alloc(ctx->dev, DT_MEM_OTHER, (size_t)cap * sizeof *m);
        if (!m) return dt_error(DT_ERR_OOM, "dt_ctx_mark_backward: out of memory");
        if (ctx->marks) memcpy(m, ctx->marks, (size_t)ctx->n_marks * sizeof *m);
        dt_mem_free(ctx->dev, DT_MEM_OTHER, ctx->marks, (size_t)ctx->cap_marks * sizeof *m);
        ctx->marks = m;
        ctx->cap_marks = cap;
    }
    ctx->marks[ctx->n_marks++] = (struct dt_bwd_mark){ctx->tape_len, fn, user, arg};
    return DT_OK;
}

/* Backward from out's node down to tape index lo (the nodes below lo are not visited), running
 * the marks from index kbase on. */
static dt_status run_backward_from(dt_tensor *out, int64_t lo, int64_t kbase) {
    dt_ctx *ctx = out->ctx;
    if (!out->node)
        return dt_error(DT_ERR_STATE,
                        "backward: the tensor was not produced by a recorded op; hint: make sure a "
                        "parameter or input requires grad and gradients are enabled");
    /* Walk the tape from the output's own node down to the first node. Nodes after it cannot
     * contribute to its gradient. */
    int64_t i = ctx->tape_len - 1;
    while (i >= 0 && ctx->tape[i] != out->node) i--;
    if (i < 0)
        return dt_error(DT_ERR_STATE, "backward: the tape was reset since this tensor was made");
    /* marks at positions past the output's node belong to later forward work: skipped */
    int64_t k = ctx->n_marks - 1;
    while (k >= 0 && ctx->marks[k].pos > i) k--;
    int64_t outer_pos = ctx->bwd_pos, outer_lo = ctx->bwd_lo; /* a checkpoint nests walks */
    for (; i >= lo; i--) {
        for (; k >= kbase && ctx->marks[k].pos > i; k--)
            ctx->marks[k].fn(ctx->marks[k].user, ctx->marks[k].arg);
        dt_node *n = ctx->tape[i];
        if (!n->out->grad) continue; /* no gradient reached this node */
        if (dt_last_status() == DT_ERR_OOM) return DT_ERR_OOM;
        double t0 = ctx->profile ? dt_now_sec() : 0;
        ctx->bwd_pos = i;
        ctx->bwd_lo = lo;
        n->op->backward(n);
        ctx->bwd_pos = outer_pos;
        ctx->bwd_lo = outer_lo;
        if (ctx->profile) {
            dt_op_time *r = dt__prof_row(ctx, n->op);
            if (r) r->bwd_calls++, r->bwd_sec += dt_now_sec() - t0;
        }
        /* The gradient has been passed on: drop it, so a later backward through the same
         * graph (a second loss) adds only its own contribution instead of replaying this
         * one, and recycle its buffer (unless the op handed it to an input and cleared it).
         * Leaves (parameters, inputs) keep their accumulated gradients. */
        dt_tensor *g = n->out->grad;
        n->out->grad = NULL;
        if (g) pool_put(ctx, g->data, dt_nbytes(g));
        ctx->flops_bwd +=
            n->op->bwd_flops ? n->op->bwd_flops(n) : (n->op->flops ? 2 * n->op->flops(n) : 0);
    }
    for (; k >= kbase; k--) ctx->marks[k].fn(ctx->marks[k].user, ctx->marks[k].arg);
    return dt_last_status() == DT_ERR_OOM ? DT_ERR_OOM : DT_OK;
}

bool dt__sole_consumer(const dt_node *n, const dt_tensor *t) {
    const dt_ctx *ctx = t->ctx;
    const dt_node *p = t->node;
    int64_t i = ctx->bwd_pos;
    if (!p || !p->record || i < 0 || i >= ctx->tape_len || ctx->tape[i] != n) return false;
    for (i--; i >= ctx->bwd_lo; i--) {
        const dt_node *m = ctx->tape[i];
        if (m == p) return true;
        for (int j = 0; j < m->n_in; j++)
            if (m->ins[j] == t) return false;
    }
    return false; /* the producer lies below this walk (or is not on the tape) */
}

static dt_status run_backward(dt_tensor *out) {
    return run_backward_from(out, 0, 0);
}

dt_status dt__backward_range(dt_tensor *out, const float *grad, int64_t lo, int64_t kbase) {
    float *g = dt__grad_f32(out);
    if (!g) return DT_ERR_OOM;
    int64_t n = dt_numel(out);
    for (int64_t i = 0; i < n; i++) g[i] += grad[i];
    return run_backward_from(out, lo, kbase);
}

dt_status dt_backward(dt_tensor *loss) {
    if (!loss)
        return dt_error(DT_ERR_INVALID, "backward: loss is NULL (an earlier op failed: %s)",
                        dt_last_error());
    if (dt_numel(loss) != 1) {
        char b[96];
        return dt_error(DT_ERR_INVALID,
                        "backward: the loss must have one element, got %s; hint: reduce it with "
                        "dt_mean_all or use dt_backward_with",
                        dt_shape_str(loss, b, sizeof b));
    }
    dt_clear_error();
    float *g = dt__grad_f32(loss);
    if (!g) return settle_all(loss->ctx, DT_ERR_OOM);
    g[0] += 1.0f;
    return settle_all(loss->ctx, run_backward(loss));
}

dt_status dt_backward_with(dt_tensor *out, const dt_tensor *grad_out) {
    if (!out || !grad_out) return dt_error(DT_ERR_INVALID, "backward: NULL tensor");
    if (dt_numel(out) != dt_numel(grad_out))
        return dt_error(DT_ERR_INVALID, "backward: gradient has %lld elements, output %lld",
                        (long long)dt_numel(grad_out), (long long)dt_numel(out));
    dt_clear_error();
    float *g = dt__grad_f32(out);
    if (!g) return settle_all(out->ctx, DT_ERR_OOM);
    dt_tensor *src = dt_to_dtype((dt_tensor *)grad_out, DT_DTYPE_F32);
    if (!src) return settle_all(out->ctx, DT_ERR_OOM);
    const float *s = src->data;
    int64_t n = dt_numel(out);
    for (int64_t i = 0; i < n; i++) g[i] += s[i];
    return settle_all(out->ctx, run_backward(out));
}

/* ---- op registry: the "dt_ops" section holds one pointer per DT_OP ---- */

extern const dt_op_def *const __start_dt_ops[];
extern const dt_op_def *const __stop_dt_ops[];

int dt_op_count(void) {
    return (int)(__stop_dt_ops - __start_dt_ops);
}

const char *dt_op_name(int i) {
    if (i < 0 || i >= dt_op_count()) return NULL;
    return __start_dt_ops[i]->name;
}

/* ---- op profile ------------------------------------------------------------------------- */

dt_op_time *dt__prof_row(dt_ctx *ctx, const dt_op_def *op) {
    if (!ctx->prof) return NULL;
    for (int i = 0; i < dt_op_count(); i++)
        if (__start_dt_ops[i] == op) return &ctx->prof[i];
    return NULL;
}

dt_status dt_ctx_set_profile(dt_ctx *ctx, bool on) {
    if (on) {
        size_t bytes = (size_t)dt_op_count() * sizeof(dt_op_time);
        if (!ctx->prof && !(ctx->prof = dt_mem_alloc(ctx->dev, DT_MEM_OTHER, bytes)))
            return dt_last_status();
        memset(ctx->prof, 0, bytes);
        for (int i = 0; i < dt_op_count(); i++) ctx->prof[i].op = __start_dt_ops[i]->name;
    }
    ctx->profile = on;
    return DT_OK;
}

int dt_ctx_op_times(const dt_ctx *ctx, dt_op_time *out, int cap) {
    int n = 0;
    for (int i = 0; ctx->prof && i < dt_op_count(); i++) {
        const dt_op_time *r = &ctx->prof[i];
        if (!r->fwd_calls && !r->bwd_calls) continue;
        if (n < cap) out[n] = *r;
        n++;
    }
    return n;
}
