/* ops_matmul.c — matmul (batched, transposed operands, broadcast batch dims) and linear, plain
 * or fused with its activation (linear_gelu_tanh, linear_relu). */
#include "tensor_impl.h"

#include <stdio.h>

#define PAR_MIN 32768
/* a saved gelu_tanh derivative larger than this goes to memory with non-temporal stores */
#define STREAM_MIN_BYTES ((int64_t)2 << 20)

/* ---- matmul ------------------------------------------------------------------------------
 * iattr: [0]=ta [1]=tb [2]=M [3]=N [4]=K [5]=batch count
 * Batch offsets are recomputed in backward from the broadcast batch shape of out. */

typedef struct mm_geom {
    int64_t M, N, K, batch;
    int nb;                                   /* batch dims of out */
    int64_t bshape[DT_MAX_DIMS];              /* broadcast batch shape */
    int64_t sa[DT_MAX_DIMS], sb[DT_MAX_DIMS]; /* element strides per batch dim (0 = broadcast) */
} mm_geom;

static void batch_offsets(const mm_geom *g, int64_t bi, int64_t *oa, int64_t *ob) {
    int64_t a = 0, b = 0;
    for (int d = g->nb - 1; d >= 0; d--) {
        int64_t i = bi % g->bshape[d];
        bi /= g->bshape[d];
        a += i * g->sa[d];
        b += i * g->sb[d];
    }
    *oa = a;
    *ob = b;
}

static bool mm_geometry(const dt_tensor *a, const dt_tensor *b, bool ta, bool tb, mm_geom *g) {
    int64_t am = a->shape[a->ndim - 2], ak = a->shape[a->ndim - 1];
    int64_t bk = b->shape[b->ndim - 2], bn = b->shape[b->ndim - 1];
    if (ta) {
        int64_t t = am;
        am = ak;
        ak = t;
    }
    if (tb) {
        int64_t t = bk;
        bk = bn;
        bn = t;
    }
    if (ak != bk) {
        char x[96], y[96];
        dt_error(DT_ERR_INVALID, "matmul: inner dims differ: %s%s @ %s%s (%lld vs %lld)",
                 dt_shape_str(a, x, 96), ta ? "ᵀ" : "", dt_shape_str(b, y, 96), tb ? "ᵀ" : "",
                 (long long)ak, (long long)bk);
        return false;
    }
    g->M = am;
    g->N = bn;
    g->K = ak;
    int na = a->ndim - 2, nbb = b->ndim - 2;
    g->nb = na > nbb ? na : nbb;
    g->batch = 1;
    int64_t amat = a->shape[a->ndim - 2] * a->shape[a->ndim - 1];
    int64_t bmat = b->shape[b->ndim - 2] * b->shape[b->ndim - 1];
    int64_t acc_a = amat, acc_b = bmat;
    for (int d = g->nb - 1; d >= 0; d--) {
        int ia = na - g->nb + d, ib = nbb - g->nb + d;
        int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            char x[96], y[96];
            dt_error(DT_ERR_INVALID, "matmul: batch dims of %s and %s do not broadcast",
                     dt_shape_str(a, x, 96), dt_shape_str(b, y, 96));
            return false;
        }
        g->bshape[d] = sa > sb ? sa : sb;
        g->sa[d] = sa == 1 ? 0 : acc_a;
        g->sb[d] = sb == 1 ? 0 : acc_b;
        acc_a *= sa;
        acc_b *= sb;
        g->batch *= g->bshape[d];
    }
    return true;
}

static void mm_geom_from_node(const dt_node *n, mm_geom *g) {
    mm_geometry(n->in[0], n->in[1], n->iattr[0], n->iattr[1], g);
}

static void matmul_backward(dt_node *n) {
    dt_tensor *a = n->in[0], *b = n->in[1];
    bool ta = n->iattr[0], tb = n->iattr[1];
    mm_geom g;
    mm_geom_from_node(n, &g);
    const float *A = a->data, *B = b->data, *dC = n->out->grad->data;
    int64_t lda = ta ? g.M : g.K, ldb = tb ? g.K : g.N;
    dt_ctx *ctx = n->out->ctx;
    /* an operand that is not broadcast over the batch gets each of its elements written by
     * exactly one GEMM: a new gradient buffer can be stored into instead of zeroed first */
    bool bcast_a = false, bcast_b = false, fa = false, fb = false;
    for (int d = 0; d < g.nb; d++) {
        bcast_a |= g.sa[d] == 0 && g.bshape[d] > 1;
        bcast_b |= g.sb[d] == 0 && g.bshape[d] > 1;
    }
    if (a == b) bcast_a = bcast_b = true; /* x @ x: both gradients go to one buffer */
    float *dA = !dt__wants_grad(a) ? NULL : bcast_a ? dt__grad_f32(a) : dt__grad_f32_fresh(a, &fa);
    float *dB = !dt__wants_grad(b) ? NULL : bcast_b ? dt__grad_f32(b) : dt__grad_f32_fresh(b, &fb);
    float betaA = fa ? 0.f : 1.f, betaB = fb ? 0.f : 1.f;
    for (int64_t bi = 0; bi < g.batch; bi++) {
        int64_t oa, ob;
        batch_offsets(&g, bi, &oa, &ob);
        const float *dCb = dC + bi * g.M * g.N;
        if (dA) {
            if (!ta) /* dA (M,K) = dC (M,N) · op(B)ᵀ */
                dt__gemm(ctx, false, !tb, g.M, g.K, g.N, 1.f, dCb, g.N, B + ob, ldb, betaA, dA + oa,
                         lda);
            else /* dA (K,M) = op(B) (K,N) · dCᵀ */
                dt__gemm(ctx, tb, true, g.K, g.M, g.N, 1.f, B + ob, ldb, dCb, g.N, betaA, dA + oa,
                         lda);
        }
        if (dB) {
            if (!tb) /* dB (K,N) = op(A)ᵀ · dC */
                dt__gemm(ctx, !ta, false, g.K, g.N, g.M, 1.f, A + oa, lda, dCb, g.N, betaB, dB + ob,
                         ldb);
            else /* dB (N,K) = dCᵀ · op(A) */
                dt__gemm(ctx, true, ta, g.N, g.K, g.M, 1.f, dCb, g.N, A + oa, lda, betaB, dB + ob,
                         ldb);
        }
    }
}

static int64_t matmul_flops(const dt_node *n) {
    return 2 * n->iattr[2] * n->iattr[3] * n->iattr[4] * n->iattr[5];
}

DT_OP(op_matmul, "matmul", matmul_backward, matmul_flops, NULL);

dt_tensor *dt_matmul_t(dt_tensor *a, dt_tensor *b, bool ta, bool tb) {
    DT_CHECK_INPUTS(a, b);
    if (!dt__need_f32(a, "matmul") || !dt__need_f32(b, "matmul")) return NULL;
    if (a->ndim < 2 || b->ndim < 2) {
        char x[96], y[96];
        dt_error(DT_ERR_INVALID, "matmul: operands need at least 2 dims, got %s and %s",
                 dt_shape_str(a, x, 96), dt_shape_str(b, y, 96));
        return NULL;
    }
    a = dt__contig(a);
    b = dt__contig(b);
    if (!a || !b) return NULL;
    mm_geom g;
    if (!mm_geometry(a, b, ta, tb, &g)) return NULL;
    int64_t shape[DT_MAX_DIMS];
    for (int d = 0; d < g.nb; d++) shape[d] = g.bshape[d];
    shape[g.nb] = g.M;
    shape[g.nb + 1] = g.N;
    dt_tensor *y = dt__empty(a->ctx, DT_DTYPE_F32, g.nb + 2, shape);
    dt_node *n = dt__node_new(&op_matmul, y, 2, (dt_tensor *[]){a, b});
    if (!n) return NULL;
    n->iattr[0] = ta;
    n->iattr[1] = tb;
    n->iattr[2] = g.M;
    n->iattr[3] = g.N;
    n->iattr[4] = g.K;
    n->iattr[5] = g.batch;
    int64_t lda = ta ? g.M : g.K, ldb = tb ? g.K : g.N;
    const float *A = a->data, *B = b->data;
    float *C = y->data;
    if (!ta && g.batch > 1 && g.sb[g.nb - 1] == 0 && b->ndim == 2 && a->ndim == g.nb + 2) {
        /* b shared by every batch: one tall GEMM */
        dt__gemm(a->ctx, false, tb, g.M * g.batch, g.N, g.K, 1.f, A, lda, B, ldb, 0.f, C, g.N);
    } else {
        for (int64_t bi = 0; bi < g.batch; bi++) {
            int64_t oa, ob;
            batch_offsets(&g, bi, &oa, &ob);
            dt__gemm(a->ctx, ta, tb, g.M, g.N, g.K, 1.f, A + oa, lda, B + ob, ldb, 0.f,
                     C + bi * g.M * g.N, g.N);
        }
    }
    return dt__node_commit(n);
}

dt_tensor *dt_matmul(dt_tensor *a, dt_tensor *b) {
    return dt_matmul_t(a, b, false, false);
}

/* ---- linear: y (R, OUT) = act(x (R, IN) · w (OUT, IN)ᵀ + b (OUT)) --------------------------
 * act is the identity (dt_linear), gelu_tanh (dt_linear_gelu_tanh, the GPT MLP's c_fc) or relu
 * (dt_linear_relu, the MLP's hidden layers); each is its own op in the table.
 * iattr: [0]=R [1]=IN [2]=OUT [3]=act [4]=residual [5]=its output gradient is already dh
 * (chained activation, below); n->saved is a linear_saved when recording: gelu_tanh's
 * derivative at the pre-activation, gelu_tanh'(h) (R, OUT), taken in the forward's epilogue
 * along with y (relu's backward reads the output instead), and under bf16 autocast the
 * rounded x and w of the forward GEMM, which the backward GEMMs reuse (bf16 bits with the bf16
 * instructions, f32 values on the storage path; none on the f32 fallback).
 *
 * Fusion. The forward GEMM runs in tiles (cpu/gemm.c) and each finished tile gets its bias and
 * activation in its epilogue while it is still in cache, instead of a bias copy before the GEMM
 * and an activation pass over the whole output after it. The backward turns dy into
 * dh = dy * act'(h) in one pass (stored into fresh scratch, nothing zeroed; for gelu_tanh a
 * product with the saved derivative, where recomputing it from h cost twice the forward's
 * activation), then the dW GEMM
 * sums the bias gradient from the dy/dh columns as it copies them for its tiles (a_sums).
 * The numbers are those of the unfused ops: the same activation kernels (ops_activation.c) on
 * the same pre-activations; the bias is added to the finished product.
 *
 * Chained activation. When a linear op's input x was made by a linear op with an activation
 * (the GPT MLP's c_proj after c_fc, an MLP's hidden layers) and nothing else will add to x's
 * gradient (dt__sole_consumer, and the dx buffer is fresh), the dx GEMM's epilogue multiplies
 * each finished tile by the producer's act'(h) while it is in cache, and marks the producer
 * (iattr[5]), whose backward then takes its output gradient as dh: the producer's own pass
 * over dy, the saved derivative and a dh scratch is gone. Same products, same bits.
 *
 * Residual. dt_linear_residual (y = res + x·wᵀ + b, the projections that close a transformer
 * block's attention and MLP branches) adds res in the same epilogue, so the branch output is
 * never written and read back by a separate add. Its backward reads dy for the two GEMMs and
 * then hands dy to res (res's gradient is exactly dy): res takes the buffer over when it has no
 * gradient yet, as the add's backward does, instead of a copy. iattr[4] = 1 marks it; its
 * inputs are x, w, res and then b if any. The bits are the unfused ones: (x·wᵀ + b) + res is
 * the add's res + (x·wᵀ + b). */

enum { ACT_NONE, ACT_GELU_TANH, ACT_RELU };

typedef struct linear_saved {
    float *H;          /* gelu_tanh: gelu_tanh'(pre-activation), else NULL */
    uint16_t *xb, *wb; /* bf16 x (R, IN) and w (OUT, IN), or NULL */
    float *xf, *wf;    /* the same as f32 values on the bf16 storage path, or NULL */
} linear_saved;

typedef struct linear_fwd_ep {
    float *Y;          /* output (R, OUT) */
    float *H;          /* where the GEMM wrote (= Y, or the saved gelu_tanh' buffer) */
    bool stream;       /* the saved gelu_tanh' goes to memory with non-temporal stores */
    const float *bias; /* NULL: none */
    const float *res;  /* (R, OUT) added last (dt_linear_residual), or NULL */
    int64_t OUT;
    int act;
} linear_fwd_ep;

/* One pass over each row of the tile: ((h + bias) + res) with no activation, else the
 * activation of (h + bias), the sums rounded as the separate adds would round them. */
static void linear_fwd_epilogue(void *arg, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    const linear_fwd_ep *e = arg;
    int64_t w = c1 - c0;
    const float *bb = e->bias ? e->bias + c0 : NULL;
    const float *src = dt__gemm_tile_src(); /* the tile, when the GEMM kept it in cache */
    for (int64_t r = r0; r < r1; r++) {
        float *h = e->H + r * e->OUT + c0, *y = e->Y + r * e->OUT + c0;
        const float *rr = e->res ? e->res + r * e->OUT + c0 : NULL; /* act is none: h is y */
        if (e->act == ACT_GELU_TANH) {
            if (y == h) /* not recording */
                dt__gelu_tanh_fwd(h, bb, y, w);
            else /* the backward's factor goes where the GEMM would have written h */
                dt__gelu_tanh_fwd_grad(src ? src + (r - r0) * e->OUT + c0 : h, bb, y, h, w,
                                       e->stream);
        } else if (e->act == ACT_RELU) {
            if (bb) {
#pragma omp simd
                for (int64_t j = 0; j < w; j++) {
                    float v = h[j] + bb[j];
                    y[j] = !(v <= 0.f) ? v : 0.f; /* NaN stays NaN */
                }
            } else {
#pragma omp simd
                for (int64_t j = 0; j < w; j++) y[j] = !(h[j] <= 0.f) ? h[j] : 0.f;
            }
        } else if (bb && rr) {
#pragma omp simd
            for (int64_t j = 0; j < w; j++) h[j] = (h[j] + bb[j]) + rr[j];
        } else if (bb) {
#pragma omp simd
            for (int64_t j = 0; j < w; j++) h[j] += bb[j];
        } else if (rr) {
#pragma omp simd
            for (int64_t j = 0; j < w; j++) h[j] += rr[j];
        }
    }
}

/* dh (R, OUT) = dy * act'(h) over rows [r0, r1), in blocks of 4096 elements */
typedef struct act_grad_pro {
    float *dh;
    const float *dy, *H, *Y; /* H: gelu_tanh'(h) from the forward; Y: relu's output */
    int64_t OUT;
    int act;
} act_grad_pro;

/* dh[i] = dy[i] * act'(h[i]) for i in [lo, hi): from the saved gelu_tanh' D, or relu's output
 * Y (dh may be dy) */
static void act_grad_span(int act, const float *dy, const float *D, const float *Y, float *dh,
                          int64_t lo, int64_t hi) {
    if (act == ACT_GELU_TANH) {
#pragma omp simd
        for (int64_t i = lo; i < hi; i++) dh[i] = dy[i] * D[i];
    } else {
#pragma omp simd
        for (int64_t i = lo; i < hi; i++) dh[i] = Y[i] > 0.f ? dy[i] : 0.f;
    }
}

static void act_grad_rows(void *arg, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    (void)c0, (void)c1;
    const act_grad_pro *e = arg;
    for (int64_t lo = r0 * e->OUT, end = r1 * e->OUT; lo < end; lo += 4096)
        act_grad_span(e->act, e->dy, e->H, e->Y, e->dh, lo, lo + 4096 < end ? lo + 4096 : end);
}

/* Chained activation: the epilogue of a dx GEMM whose x came from a linear op with an
 * activation (see linear_backward) turns each finished tile of dx into that op's dh, in
 * place (act_grad_span). */
typedef struct dx_hooks {
    act_grad_pro ag; /* this op's own activation (the prologue), if any */
    float *dx;
    const float *pD, *pY; /* the producer's gelu_tanh' (R, IN) or relu output (R, IN) */
    int64_t IN;
    int pact;
} dx_hooks;

static void dx_prologue(void *arg, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    act_grad_rows(&((dx_hooks *)arg)->ag, r0, r1, c0, c1);
}

static void dx_epilogue(void *arg, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    const dx_hooks *h = arg;
    for (int64_t r = r0; r < r1; r++)
        act_grad_span(h->pact, h->dx, h->pD, h->pY, h->dx, r * h->IN + c0, r * h->IN + c1);
}

/* dt_linear_residual's res gets dy: the buffer itself when res has no gradient yet and is not
 * one of the other inputs (whose gradients the GEMMs just wrote), else added in. */
static void residual_grad(dt_node *n) {
    dt_tensor *res = n->in[2];
    if (!dt__wants_grad(res)) return;
    if (res != n->in[0] && res != n->in[1] && (n->n_in < 4 || res != n->in[3]) &&
        dt__grad_take_over(n, res))
        return;
    bool fresh;
    float *gr = dt__grad_f32_fresh(res, &fresh);
    if (!gr) return;
    const float *G = n->out->grad->data;
    int64_t N = dt_numel(res);
#pragma omp parallel for simd schedule(static) if (N > PAR_MIN)
    for (int64_t i = 0; i < N; i++) gr[i] = fresh ? G[i] : gr[i] + G[i];
}

static void linear_backward(dt_node *n);

/* dh = dy * act'(h) for all R rows, in a pass of its own (not in the dx GEMM's prologue). */
static void act_grad_pass(act_grad_pro *ag, int64_t R, int64_t OUT) {
    int64_t nb = (R + 31) / 32;
#pragma omp parallel for schedule(static) if (R * OUT > PAR_MIN)
    for (int64_t k = 0; k < nb; k++)
        act_grad_rows(ag, k * 32, (k + 1) * 32 < R ? (k + 1) * 32 : R, 0, OUT);
}

/* db (OUT) += the column sums of dy (R, OUT), in a pass of its own (not in the dw GEMM). */
static void bias_grad_pass(float *db, const float *dy, int64_t R, int64_t OUT) {
    int64_t nblk = (OUT + 63) / 64;
#pragma omp parallel for schedule(static) if (R * OUT > PAR_MIN)
    for (int64_t k = 0; k < nblk; k++)
        dt__add_col_sums(db, dy, OUT, R, k * 64, (k + 1) * 64 < OUT ? (k + 1) * 64 : OUT);
}

/* x made by a linear op (R, hk->IN) with an activation, and this node's dx is all of x's
 * gradient: the dx GEMM's epilogue can make it that op's dh (chained activation). Fills the
 * producer's part of *hk and marks the producer (iattr[5]) when it can. */
static bool chain_epilogue(dt_node *n, dt_tensor *x, dx_hooks *hk) {
    dt_node *p = x->node;
    bool chain = p && p->out == x && p->op->backward == linear_backward &&
                 p->iattr[3] != ACT_NONE && p->iattr[0] == n->iattr[0] && p->iattr[2] == hk->IN;
    const linear_saved *psv = chain ? p->saved : NULL;
    if (!chain || (p->iattr[3] == ACT_GELU_TANH && !(psv && psv->H)) || !dt__sole_consumer(n, x))
        return false;
    hk->pact = (int)p->iattr[3];
    hk->pD = psv->H;
    hk->pY = x->data;
    p->iattr[5] = 1;
    return true;
}

static void linear_backward(dt_node *n) {
    bool residual = n->iattr[4] != 0;
    int bi = residual ? 3 : 2; /* where the bias sits among the inputs */
    dt_tensor *x = n->in[0], *w = n->in[1], *b = n->n_in > bi ? n->in[bi] : NULL;
    int64_t R = n->iattr[0], IN = n->iattr[1], OUT = n->iattr[2];
    int act = (int)n->iattr[3];
    if (n->iattr[5]) { /* the consumer's dx epilogue already made dy into dh */
        act = ACT_NONE;
        n->iattr[5] = 0;
    }
    const float *dy = n->out->grad->data;
    dt_ctx *ctx = n->out->ctx;
    const linear_saved *sv = n->saved;
    bool gx = dt__wants_grad(x), gw = dt__wants_grad(w), gb = b && dt__wants_grad(b);
    /* the fused paths need every GEMM to run: degenerate shapes take the plain passes */
    bool fuse = R > 0 && IN > 0 && OUT > 0;
    /* activation: dh = dy * act'(h) replaces dy. It is computed row block by row block in the
     * dx GEMM's prologue, right before the GEMM reads it; else in a pass of its own. */
    act_grad_pro ag = {NULL, dy, sv ? sv->H : NULL, n->out->data, OUT, act};
    if (act != ACT_NONE) {
        ag.dh = dt__scratch(ctx, (size_t)(R * OUT) * sizeof(float));
        if (!ag.dh) return; /* OOM is reported by the tape walk */
        if (!(gx && fuse)) act_grad_pass(&ag, R, OUT);
        dy = ag.dh;
    }
    /* bf16: dy is rounded once, by the dx GEMM, for both GEMMs; x and w come from the forward
     * (in bf16 bits, or as f32 values on the storage path) */
    bool bf16 = ctx->autocast == DT_DTYPE_BF16 && sv && (sv->xb || sv->xf);
    bool wide = bf16 && sv->xf;
    void *dyb = bf16 && gx && fuse ? dt__scratch(ctx, (size_t)(R * OUT) * (wide ? 4 : 2)) : NULL;
    dt__gemm_bf16 dx_io = {0}, dw_io = {0};
    if (bf16 && wide)
        dx_io.bf = sv->wf, dx_io.af_out = dyb, dw_io.af = dyb, dw_io.bf = sv->xf;
    else if (bf16)
        dx_io.b = sv->wb, dx_io.a_out = dyb, dw_io.a = dyb, dw_io.b = sv->xb;
    if (gx) { /* dx (R, IN) += dy (R, OUT) · w (OUT, IN) */
        bool fresh;
        float *dx = dt__grad_f32_fresh(x, &fresh);
        dt__gemm_opts o = {.bf16 = dx_io};
        dx_hooks hk = {.ag = ag, .dx = dx, .IN = IN};
        if (act != ACT_NONE && fuse) {
            o.prologue = dx_prologue;
            o.arg = &hk;
        }
        if (dx && fresh && fuse && chain_epilogue(n, x, &hk)) {
            o.epilogue = dx_epilogue;
            o.arg = &hk;
        }
        if (!dx) return;
        dt__gemm_ex(ctx, false, false, R, IN, OUT, 1.f, dy, OUT, w->data, IN, fresh ? 0.f : 1.f, dx,
                    IN, &o);
    }
    float *db = gb ? dt__grad_f32(b) : NULL;
    if (gb && !db) return;
    if (gw) { /* dw (OUT, IN) += dyᵀ · x (= when stale), the bias gradient summed as the GEMM
               * reads dy */
        bool fresh;
        float *dw = dt__grad_f32_fresh(w, &fresh);
        dt__gemm_opts o = {.a_sums = fuse ? db : NULL, .bf16 = dw_io};
        if (!dw) return;
        dt__gemm_ex(ctx, true, false, OUT, IN, R, 1.f, dy, OUT, x->data, IN, fresh ? 0.f : 1.f, dw,
                    IN, &o);
    }
    if (db && !(gw && fuse)) bias_grad_pass(db, dy, R, OUT);
    if (residual) residual_grad(n); /* last: it may take dy's buffer */
}

/* FLOPs per output element of the activation (as the unfused ops count them) */
static int64_t act_flops(int act) {
    return act == ACT_GELU_TANH ? 8 : act == ACT_RELU ? 1 : 0;
}

/* the residual counts as the unfused add does: 1 per element forward, 2 backward */
static int64_t linear_flops(const dt_node *n) {
    int64_t R = n->iattr[0], IN = n->iattr[1], OUT = n->iattr[2], res = n->iattr[4] != 0;
    bool bias = n->n_in > 2 + res;
    return 2 * R * IN * OUT + (bias ? R * OUT : 0) + act_flops((int)n->iattr[3]) * R * OUT +
           res * R * OUT;
}
static int64_t linear_bwd_flops(const dt_node *n) {
    int64_t R = n->iattr[0], IN = n->iattr[1], OUT = n->iattr[2], res = n->iattr[4] != 0;
    bool bias = n->n_in > 2 + res;
    return 4 * R * IN * OUT + (bias ? R * OUT : 0) + 2 * act_flops((int)n->iattr[3]) * R * OUT +
           2 * res * R * OUT;
}

DT_OP(op_linear, "linear", linear_backward, linear_flops, linear_bwd_flops);
DT_OP(op_linear_residual, "linear_residual", linear_backward, linear_flops, linear_bwd_flops);
DT_OP(op_linear_gelu_tanh, "linear_gelu_tanh", linear_backward, linear_flops, linear_bwd_flops);
DT_OP(op_linear_relu, "linear_relu", linear_backward, linear_flops, linear_bwd_flops);

static dt_tensor *linear_act(dt_tensor *x, dt_tensor *w, dt_tensor *b, dt_tensor *res, int act,
                             const dt_op_def *op) {
    DT_CHECK_INPUTS(x, w);
    if (!dt__need_f32(x, op->name) || !dt__need_f32(w, op->name)) return NULL;
    if (b && !dt__need_f32(b, op->name)) return NULL;
    if (res && !dt__need_f32(res, op->name)) return NULL;
    char s1[96], s2[96];
    if (w->ndim != 2 || x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1]) {
        dt_error(DT_ERR_INVALID, "%s: input %s does not fit weight %s (want (..., %lld))", op->name,
                 dt_shape_str(x, s1, 96), dt_shape_str(w, s2, 96),
                 (long long)(w->ndim == 2 ? w->shape[1] : -1));
        return NULL;
    }
    if (b && (b->ndim != 1 || b->shape[0] != w->shape[0])) {
        dt_error(DT_ERR_INVALID, "%s: bias %s does not fit weight %s", op->name,
                 dt_shape_str(b, s1, 96), dt_shape_str(w, s2, 96));
        return NULL;
    }
    int64_t shape[DT_MAX_DIMS];
    for (int d = 0; d < x->ndim - 1; d++) shape[d] = x->shape[d];
    shape[x->ndim - 1] = w->shape[0];
    if (res) {
        bool same = res->ndim == x->ndim;
        for (int d = 0; same && d < x->ndim; d++) same = res->shape[d] == shape[d];
        if (!same) {
            char s3[96];
            dt_error(DT_ERR_INVALID,
                     "%s: residual %s is not the shape of the output (input %s, weight %s); "
                     "hint: res must match x with its last dim replaced by w's rows",
                     op->name, dt_shape_str(res, s3, 96), dt_shape_str(x, s1, 96),
                     dt_shape_str(w, s2, 96));
            return NULL;
        }
        if (!(res = dt__contig(res))) return NULL;
    }
    x = dt__contig(x);
    w = dt__contig(w);
    if (!x || !w) return NULL;
    int64_t IN = w->shape[1], OUT = w->shape[0], R = dt_numel(x) / (IN ? IN : 1);
    dt_tensor *y = dt__empty(x->ctx, DT_DTYPE_F32, x->ndim, shape);
    dt_tensor *ins[4] = {x, w, res ? res : b, res ? b : NULL};
    dt_node *n = dt__node_new(op, y, 2 + (b != NULL) + (res != NULL), ins);
    if (!n) return NULL;
    n->iattr[0] = R;
    n->iattr[1] = IN;
    n->iattr[2] = OUT;
    n->iattr[3] = act;
    n->iattr[4] = res != NULL;
    dt_ctx *ctx = x->ctx;
    /* gelu's backward needs its derivative at the pre-activation: the GEMM writes h to
     * scratch, the epilogue writes y from it and then the derivative over it; otherwise
     * everything happens in place in y */
    float *H = y->data;
    dt__gemm_bf16 io = {0};
    if (n->record) {
        linear_saved *sv = dt__scratch(ctx, sizeof *sv);
        if (!sv) return NULL;
        memset(sv, 0, sizeof *sv);
        n->saved = sv;
        if (act == ACT_GELU_TANH &&
            !(H = sv->H = dt__scratch(ctx, (size_t)(R * OUT) * sizeof(float))))
            return NULL;
        dt__bf16_path path = dt__bf16_path_now();
        if (ctx->autocast == DT_DTYPE_BF16 && path == DT__BF16_NATIVE) {
            sv->xb = dt__scratch(ctx, (size_t)(R * IN) * sizeof(uint16_t));
            sv->wb = dt__scratch(ctx, (size_t)(OUT * IN) * sizeof(uint16_t));
            if (!sv->xb || !sv->wb) return NULL;
            io.a_out = sv->xb;
            io.b_out = sv->wb;
        } else if (ctx->autocast == DT_DTYPE_BF16 && path == DT__BF16_STORAGE) {
            sv->xf = dt__scratch(ctx, (size_t)(R * IN) * sizeof(float));
            sv->wf = dt__scratch(ctx, (size_t)(OUT * IN) * sizeof(float));
            if (!sv->xf || !sv->wf) return NULL;
            io.af_out = sv->xf;
            io.bf_out = sv->wf;
        }
    }
    /* recording gelu: the epilogue writes y and the saved derivative from h, so h itself
     * needs no memory (c_is_scratch), and a derivative larger than the caches is streamed */
    bool saving = H != y->data;
    linear_fwd_ep e = {.Y = y->data,
                       .H = H,
                       .stream = saving && R * OUT * (int64_t)sizeof(float) > STREAM_MIN_BYTES,
                       .bias = b ? b->data : NULL,
                       .res = res ? res->data : NULL,
                       .OUT = OUT,
                       .act = act};
    dt__gemm_opts o = {.epilogue = b || res || act != ACT_NONE ? linear_fwd_epilogue : NULL,
                       .arg = &e,
                       .bf16 = io,
                       .c_is_scratch = saving};
    dt__gemm_ex(ctx, false, true, R, OUT, IN, 1.f, x->data, IN, w->data, IN, 0.f, H, OUT, &o);
    return dt__node_commit(n);
}

dt_tensor *dt_linear(dt_tensor *x, dt_tensor *w, dt_tensor *b) {
    return linear_act(x, w, b, NULL, ACT_NONE, &op_linear);
}
dt_tensor *dt_linear_gelu_tanh(dt_tensor *x, dt_tensor *w, dt_tensor *b) {
    return linear_act(x, w, b, NULL, ACT_GELU_TANH, &op_linear_gelu_tanh);
}
dt_tensor *dt_linear_relu(dt_tensor *x, dt_tensor *w, dt_tensor *b) {
    return linear_act(x, w, b, NULL, ACT_RELU, &op_linear_relu);
}
dt_tensor *dt_linear_residual(dt_tensor *x, dt_tensor *w, dt_tensor *b, dt_tensor *res) {
    if (!res) {
        dt_error(DT_ERR_INVALID, "linear_residual: res is NULL (an earlier op failed? %s)",
                 dt_last_error());
        return NULL;
    }
    return linear_act(x, w, b, res, ACT_NONE, &op_linear_residual);
}
