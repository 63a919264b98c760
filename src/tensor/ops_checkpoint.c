/*
 * ops_checkpoint.c — activation checkpointing: y = fn(x) without keeping fn's activations.
 *
 * Forward: fn runs with gradients off; its output is copied out and everything fn allocated is
 * given back to the arena (dt_arena_rewind), so only x, y and the op's record stay. The record
 * keeps fn, its argument and the context RNG as it was, so dropout inside fn draws the same
 * masks again.
 *
 * Backward: the RNG is set back, fn runs again with gradients on from a view of x that collects
 * x's gradient, the recomputed segment is backpropagated from y's gradient (a nested backward
 * over just the new tape nodes), parameters inside fn accumulate their gradients as usual, x's
 * gradient is added, and the tape, the backward marks, the gradient pool, the RNG and the arena
 * are put back as they were.
 */
#include "tensor_impl.h"
#include "base/base_impl.h"

#include <stdlib.h>
#include <string.h>

typedef struct ckpt_saved {
    dt_checkpoint_fn fn;
    void *user;
    dt_rng rng; /* the RNG when fn first ran */
} ckpt_saved;

/* A gradient carried over the rewind of the recomputed segment's memory. */
typedef struct moved {
    dt_tensor *t;
    float *g;
} moved;

/* Tensors from outside the segment (leaves such as weights passed in `user`) whose first
 * gradient was made during the recompute: their gradient lives in memory about to be
 * rewound, so it is copied out (to *out, malloc'd) and t->grad cleared. Candidates: the
 * recomputed ops' inputs (tape[tape0..]), and the tensors a checkpoint nested in this one
 * carried already. Returns how many. */
static int take_new_grads(dt_ctx *c, int64_t tape0, dt_arena_mark mark, const dt_tensor *xd,
                          moved **out) {
    int n_moved = 0, cap = 0;
    moved *mv = NULL;
    for (int64_t i = tape0; i < c->tape_len + c->n_carry; i++) {
        dt_node *r = i < c->tape_len ? c->tape[i] : NULL;
        int nin = r ? r->n_in : 1;
        for (int k = 0; k < nin; k++) {
            dt_tensor *t = r ? r->ins[k] : c->carry[i - c->tape_len];
            if (t == xd || !t->grad || dt_arena_allocated_since(c->arena, mark, t)) continue;
            if (!dt_arena_allocated_since(c->arena, mark, t->grad)) continue;
            if (n_moved == cap) {
                cap = cap ? 2 * cap : 8;
                moved *nm = realloc(mv, (size_t)cap * sizeof *mv);
                if (!nm) break;
                mv = nm;
            }
            size_t b = (size_t)dt_numel(t) * sizeof(float);
            if (!(mv[n_moved].g = malloc(b ? b : 1))) continue;
            mv[n_moved].t = t;
            memcpy(mv[n_moved].g, t->grad->data, b);
            t->grad = NULL; /* also marks it seen */
            n_moved++;
        }
    }
    *out = mv;
    return n_moved;
}

/* After the rewind: each carried gradient back into a fresh gradient of its tensor, and the
 * tensor on the context's carry list (an enclosing checkpoint must look at it too). Frees mv. */
static void give_back_grads(dt_ctx *c, moved *mv, int n_moved) {
    for (int q = 0; q < n_moved; q++) {
        float *g = dt__grad_f32(mv[q].t);
        if (g) memcpy(g, mv[q].g, (size_t)dt_numel(mv[q].t) * sizeof(float));
        free(mv[q].g);
        bool known = false;
        for (int k = 0; k < c->n_carry && !known; k++) known = c->carry[k] == mv[q].t;
        if (known) continue;
        if (c->n_carry == c->cap_carry) {
            int nc = c->cap_carry ? 2 * c->cap_carry : 8;
            dt_tensor **p = realloc(c->carry, (size_t)nc * sizeof *p);
            if (!p) continue;
            c->carry = p;
            c->cap_carry = nc;
        }
        c->carry[c->n_carry++] = mv[q].t;
    }
    free(mv);
}

static void checkpoint_backward(dt_node *n) {
    dt_ctx *c = n->out->ctx;
    const ckpt_saved *sv = n->saved;
    dt_tensor *x = n->in[0];
    const float *dy = n->out->grad->data;
    float *gx = dt__wants_grad(x) ? dt__grad_f32(x) : NULL; /* before the mark: it stays */
    if (dt__wants_grad(x) && !gx) return;
    /* everything below is undone at the end */
    int64_t tape0 = c->tape_len, marks0 = c->n_marks;
    __typeof__(c->grad_pool) pool0 = c->grad_pool;
    dt_rng rng_now = c->rng;
    bool grad0 = c->grad_enabled;
    dt_arena_mark mark = dt_arena_get_mark(c->arena);
    c->rng = sv->rng;
    c->grad_enabled = true;
    dt_tensor *xd = x;
    if (gx && (xd = dt__view_of(x))) xd->flags |= DT_TENSOR_REQUIRES_GRAD;
    dt_tensor *y = xd ? sv->fn(xd, sv->user) : NULL;
    if (y && dt_numel(y) == dt_numel(n->out) && y->node &&
        dt__backward_range(y, dy, tape0, marks0) == DT_OK && gx && xd->grad) {
        const float *g = xd->grad->data;
        int64_t k = dt_numel(x);
        for (int64_t i = 0; i < k; i++) gx[i] += g[i];
    } else if (!y || dt_numel(y) != dt_numel(n->out)) {
        dt_error(DT_ERR_STATE,
                 "checkpoint: recomputing the segment failed or changed its "
                 "output size: %s",
                 dt_last_error());
    }
    moved *mv;
    int n_moved = take_new_grads(c, tape0, mark, xd, &mv);
    /* carried tensors that live in this region go with it */
    int kept = 0;
    for (int k = 0; k < c->n_carry; k++)
        if (!dt_arena_allocated_since(c->arena, mark, c->carry[k])) c->carry[kept++] = c->carry[k];
    c->n_carry = kept;
    c->tape_len = tape0;
    c->n_marks = marks0;
    c->grad_pool = pool0;
    c->rng = rng_now;
    c->grad_enabled = grad0;
    dt_arena_rewind(c->arena, mark);
    give_back_grads(c, mv, n_moved);
}

static int64_t checkpoint_flops(const dt_node *n) {
    return n->iattr[0]; /* fn's forward FLOPs (the backward recomputes them and more) */
}

static int64_t checkpoint_bwd_flops(const dt_node *n) {
    return 3 * n->iattr[0];
}

DT_OP(op_checkpoint, "checkpoint", checkpoint_backward, checkpoint_flops, checkpoint_bwd_flops);

dt_tensor *dt_checkpoint(dt_checkpoint_fn fn, void *user, dt_tensor *x) {
    if (!x) return NULL;
    if (!fn) {
        dt_error(DT_ERR_INVALID, "dt_checkpoint: fn is NULL");
        return NULL;
    }
    dt_ctx *c = x->ctx;
    if (!c->grad_enabled) return fn(x, user); /* nothing to keep anyway */
    ckpt_saved *sv = dt_arena_alloc(c->arena, sizeof *sv);
    if (!sv) return NULL;
    sv->fn = fn;
    sv->user = user;
    sv->rng = c->rng;
    int64_t f0 = c->flops_fwd;
    dt_arena_mark mark = dt_arena_get_mark(c->arena);
    c->grad_enabled = false;
    dt_tensor *y0 = fn(x, user);
    c->grad_enabled = true;
    if (!y0) {
        dt_arena_rewind(c->arena, mark);
        return NULL;
    }
    /* keep y alone: copy it out, give fn's memory back, put y at the mark */
    dt_dtype dt = y0->dtype;
    int ndim = y0->ndim;
    int64_t shape[DT_MAX_DIMS];
    memcpy(shape, y0->shape, sizeof shape);
    dt_tensor *yc = dt_is_contiguous(y0) ? y0 : dt_contiguous(y0);
    size_t bytes = yc ? dt_nbytes(yc) : 0;
    void *tmp = yc ? malloc(bytes ? bytes : 1) : NULL;
    if (tmp) memcpy(tmp, yc->data, bytes);
    dt_arena_rewind(c->arena, mark);
    dt_tensor *y = tmp ? dt__empty(c, dt, ndim, shape) : NULL;
    if (y) memcpy(y->data, tmp, bytes);
    free(tmp);
    if (!y) {
        dt_error(DT_ERR_OOM, "dt_checkpoint: no memory for the output");
        return NULL;
    }
    dt_node *n = dt__node_new(&op_checkpoint, y, 1, (dt_tensor *[]){x});
    if (!n) return NULL;
    n->record = true; /* fn's parameters need the backward even when x needs no gradient */
    n->saved = sv;
    n->iattr[0] = c->flops_fwd - f0;
    c->flops_fwd = f0; /* counted once, by the op */
    return dt__node_commit(n);
}
