/* ops_attention_gqa.c — scaled dot-product attention with grouped-query heads, the attention of
 * Llama-family models (and of any model that keeps q, k and v apart, e.g. with a KV cache).
 *
 *   q (B, T, Hq, D), k and v (B, S, Hkv, D), G = Hq / Hkv query heads per kv head:
 *   query head h reads kv head h / G;  y[b, t, h] = softmax(q kᵀ / sqrt(D)) v  -> (B, T, Hq, D)
 *   causal: query t sits at position S - T + t and sees keys 0 .. S - T + t (S > T: the first
 *   S - T keys are a cache of earlier positions; S == T: plain causal self-attention).
 *
 * Blocks. The work is cut into (b, kv head, block of rb query steps) items. An item gathers the
 * G query heads of its kv head for its rb steps into one dense (M = G * rb, D) matrix, so the
 * group's keys and values are read once for all of them, and runs two GEMMs (dt__gemm_f32, f32
 * whatever the autocast): the scores (M, kend) = q kᵀ over the keys the block can see (kend =
 * S - T + t1 when causal, S else) and y = P v. rb makes M about 64: a block of a long causal
 * sequence computes at most rb - 1 masked key columns per row beyond its own limit, and a
 * decoding step (T = 1) is one item per kv head of G rows against the whole cache, with no
 * padding at all; blocks of at most FEW_ROWS rows (decoding) run on the AVX2 few-row kernels of
 * cpu/attn_rows.c instead of sgemm, which would pack all of k and v to use them once (about 2.5x
 * faster for a GPT-2 decoding step at S 512, one thread). Keys and values are read in place with
 * their row stride (views of a cache or of a fused projection need no copy when the last dim is
 * dense).
 *
 * Saved for backward: each query row's softmax max and 1/sum (B, Hq, T, 2) — O(T), not the
 * O(T S) probabilities. The backward recomputes the scores with the forward's GEMM and P with
 * the forward's bits, then per block: dP = dy vᵀ, dS = P (dP - Σ P dP) / sqrt(D), dq = dS k,
 * dk += dSᵀ q, dv += Pᵀ dy. dk and dv of a kv head gather over its G query heads and every
 * block, so the backward's items are (b, kv head) with the blocks in order inside, summing into
 * a dense per-thread (S, D) buffer written out once.
 *
 * Determinism: items write disjoint outputs, every GEMM's bits are fixed by its shape
 * (tensor_impl.h), and the softmax rows reduce in a fixed order (cpu/attn_rows.c), so the
 * bits do not depend on the thread count. With fewer items than threads the items run one by
 * one and the GEMMs use the threads instead.
 *
 * FLOPs: the forward counts the two GEMMs over all T x S scores (the causal part skipped is
 * counted too, as for causal_self_attention) plus 5 per score for the softmax; the backward its
 * five GEMMs (the scores recomputed) plus 9 per score (P recomputed, the softmax gradient).
 */
#include "tensor_impl.h"

#include "base/base_impl.h"
#include "cpu/attn_rows.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#define ROWS_PER_BLOCK 64
#define FEW_ROWS 8

/* One call's shapes: iattr [0]=B [1]=T [2]=S [3]=Hq [4]=Hkv [5]=D [6]=causal [7]=rb */
typedef struct gqa {
    int64_t B, T, S, Hq, Hkv, D, G, rb;
    bool causal;
    float scale;
    const float *q, *k, *v;      /* element (0, 0, 0, 0) */
    int64_t qs[3], ks[3], vs[3]; /* strides of b, t (or s), head; the last dim is dense */
} gqa;

static gqa gqa_of(const int64_t *ia, const dt_tensor *q, const dt_tensor *k, const dt_tensor *v) {
    gqa g = {.B = ia[0],
             .T = ia[1],
             .S = ia[2],
             .Hq = ia[3],
             .Hkv = ia[4],
             .D = ia[5],
             .G = ia[3] / ia[4],
             .rb = ia[7],
             .causal = ia[6] != 0,
             .scale = 1.f / sqrtf((float)ia[5]),
             .q = q->data,
             .k = k->data,
             .v = v->data};
    for (int d = 0; d < 3; d++)
        g.qs[d] = q->stride[d], g.ks[d] = k->stride[d], g.vs[d] = v->stride[d];
    return g;
}

/* A block: steps [t0, t1) of batch b, kv head kh; its M = G * m rows are ordered (g, t). */
typedef struct blk {
    int64_t b, kh, t0, m, M, kend;
} blk;

static blk blk_of(const gqa *g, int64_t b, int64_t kh, int64_t i) {
    blk k = {.b = b, .kh = kh, .t0 = i * g->rb};
    int64_t t1 = k.t0 + g->rb < g->T ? k.t0 + g->rb : g->T;
    k.m = t1 - k.t0;
    k.M = g->G * k.m;
    k.kend = g->causal ? g->S - g->T + t1 : g->S;
    return k;
}

/* keys visible to row r of block k */
static int64_t row_len(const gqa *g, const blk *k, int64_t r) {
    return g->causal ? g->S - g->T + k->t0 + r % k->m + 1 : g->S;
}

/* The block's rows of a (B, T, Hq, D) tensor with strides st (of b, t, head) gathered into
 * dense (M, D) dst. */
static void gather_rows(const gqa *g, const blk *k, const float *src, const int64_t *st,
                        float *dst) {
    for (int64_t gi = 0; gi < g->G; gi++)
        for (int64_t i = 0; i < k->m; i++)
            memcpy(dst + (gi * k->m + i) * g->D,
                   src + k->b * st[0] + (k->t0 + i) * st[1] + (k->kh * g->G + gi) * st[2],
                   (size_t)g->D * sizeof(float));
}

/* dense (M, D) src written (or added) to the block's rows of a contiguous (B, T, Hq, D) dst */
static void scatter_rows(const gqa *g, const blk *k, const float *src, float *dst, bool add) {
    for (int64_t gi = 0; gi < g->G; gi++)
        for (int64_t i = 0; i < k->m; i++) {
            const float *s = src + (gi * k->m + i) * g->D;
            float *d = dst + ((k->b * g->T + k->t0 + i) * g->Hq + k->kh * g->G + gi) * g->D;
            if (add)
                for (int64_t j = 0; j < g->D; j++) d[j] += s[j];
            else
                memcpy(d, s, (size_t)g->D * sizeof(float));
        }
}

/* kv head k->kh of batch k->b: row j at + j * st[1] */
static const float *kv_base(const float *x, const int64_t *st, const blk *k) {
    return x + k->b * st[0] + k->kh * st[2];
}

/* A block of at most FEW_ROWS rows (a decoding step) runs on the few-row kernels instead of
 * sgemm, which packs the whole of k and v for one or two rows. */
static bool few_rows(const blk *k) {
    return k->M <= FEW_ROWS && dt__isa_avx2();
}

/* Sc (M, kend) = scale * Qd kᵀ: the block's scores (the backward repeats this very call) */
static void block_scores(const gqa *g, const blk *k, const float *Qd, float *Sc) {
    const float *kb = kv_base(g->k, g->ks, k);
    if (few_rows(k))
        dt__attn_scores_few(Qd, k->M, g->D, kb, g->ks[1], k->kend, g->scale, Sc, k->kend);
    else
        dt__gemm_f32(false, true, k->M, k->kend, g->D, g->scale, Qd, g->D, kb, g->ks[1], 0.f, Sc,
                     k->kend);
}

/* the softmax statistics of row r of block k in the saved (B, Hq, T, 2) */
static float *row_stats(const gqa *g, const blk *k, float *stats, int64_t r) {
    int64_t h = k->kh * g->G + r / k->m, t = k->t0 + r % k->m;
    return stats + ((k->b * g->Hq + h) * g->T + t) * 2;
}

/* Forward of one block into y (contiguous (B, T, Hq, D)); stats saved when not NULL.
 * Scratch: Qd and Od (M, D), Sc (M, kend). */
static void block_forward(const gqa *g, const blk *k, float *Y, float *stats, float *Qd, float *Sc,
                          float *Od) {
    gather_rows(g, k, g->q, g->qs, Qd);
    block_scores(g, k, Qd, Sc);
    for (int64_t r = 0; r < k->M; r++) {
        float st[2];
        dt__attn_softmax_row(Sc + r * k->kend, row_len(g, k, r), k->kend, st);
        if (stats) memcpy(row_stats(g, k, stats, r), st, sizeof st);
    }
    const float *vb = kv_base(g->v, g->vs, k);
    if (few_rows(k))
        dt__attn_pv_few(Sc, k->M, k->kend, vb, g->vs[1], k->kend, g->D, Od);
    else
        dt__gemm_f32(false, false, k->M, g->D, k->kend, 1.f, Sc, k->kend, vb, g->vs[1], 0.f, Od,
                     g->D);
    scatter_rows(g, k, Od, Y, false);
}

/* What the backward computes, and where. */
typedef struct gqa_grads {
    const float *dy;          /* (B, T, Hq, D) */
    float *dq, *dk, *dv;      /* NULL: not wanted */
    bool add_q, add_k, add_v; /* add into an existing gradient (else store) */
    const float *stats;
} gqa_grads;

/* Per-thread backward scratch: Qd, dYd, dQd (M, D); P, dS (M, S); dK, dV (S, D). */
typedef struct bwd_scratch {
    float *Qd, *dYd, *dQd, *P, *dS, *dK, *dV;
} bwd_scratch;

static size_t bwd_scratch_floats(const gqa *g) {
    int64_t M = g->G * g->rb;
    return (size_t)(3 * M * g->D + 2 * M * g->S + 2 * g->S * g->D);
}

static bwd_scratch bwd_scratch_at(const gqa *g, float *base) {
    int64_t M = g->G * g->rb;
    bwd_scratch s = {.Qd = base};
    s.dYd = s.Qd + M * g->D;
    s.dQd = s.dYd + M * g->D;
    s.P = s.dQd + M * g->D;
    s.dS = s.P + M * g->S;
    s.dK = s.dS + M * g->S;
    s.dV = s.dK + g->S * g->D;
    return s;
}

/* One block's backward: dq rows written, its dk and dv terms added into s->dK, s->dV. */
static void block_backward(const gqa *g, const blk *k, const gqa_grads *gr, bwd_scratch *s) {
    bool need_ds = gr->dq || gr->dk;
    gather_rows(g, k, g->q, g->qs, s->Qd);
    gather_rows(g, k, gr->dy, (int64_t[]){g->T * g->Hq * g->D, g->Hq * g->D, g->D}, s->dYd);
    block_scores(g, k, s->Qd, s->P);
    if (need_ds) /* dP = dy vᵀ */
        dt__gemm_f32(false, true, k->M, k->kend, g->D, 1.f, s->dYd, g->D, kv_base(g->v, g->vs, k),
                     g->vs[1], 0.f, s->dS, k->kend);
    for (int64_t r = 0; r < k->M; r++)
        dt__attn_softmax_grad_row(s->P + r * k->kend, need_ds ? s->dS + r * k->kend : NULL,
                                  row_len(g, k, r), k->kend, row_stats(g, k, (float *)gr->stats, r),
                                  g->scale);
    if (gr->dq) { /* dq = dS k */
        dt__gemm_f32(false, false, k->M, g->D, k->kend, 1.f, s->dS, k->kend,
                     kv_base(g->k, g->ks, k), g->ks[1], 0.f, s->dQd, g->D);
        scatter_rows(g, k, s->dQd, gr->dq, gr->add_q);
    }
    if (gr->dk) /* dk[0:kend] += dSᵀ q */
        dt__gemm_f32(true, false, k->kend, g->D, k->M, 1.f, s->dS, k->kend, s->Qd, g->D, 1.f, s->dK,
                     g->D);
    if (gr->dv) /* dv[0:kend] += Pᵀ dy */
        dt__gemm_f32(true, false, k->kend, g->D, k->M, 1.f, s->P, k->kend, s->dYd, g->D, 1.f, s->dV,
                     g->D);
}

/* dense (S, D) src written (or added) to kv head kh of batch b of a contiguous (B, S, Hkv, D) */
static void scatter_kv(const gqa *g, int64_t b, int64_t kh, const float *src, float *dst,
                       bool add) {
    for (int64_t j = 0; j < g->S; j++) {
        const float *s = src + j * g->D;
        float *d = dst + ((b * g->S + j) * g->Hkv + kh) * g->D;
        if (add)
            for (int64_t e = 0; e < g->D; e++) d[e] += s[e];
        else
            memcpy(d, s, (size_t)g->D * sizeof(float));
    }
}

/* The backward of kv head kh of batch b: its G query heads, every block in order. */
static void group_backward(const gqa *g, int64_t b, int64_t kh, const gqa_grads *gr,
                           bwd_scratch *s) {
    size_t kv = (size_t)(g->S * g->D) * sizeof(float);
    if (gr->dk) memset(s->dK, 0, kv);
    if (gr->dv) memset(s->dV, 0, kv);
    int64_t nblk = (g->T + g->rb - 1) / g->rb;
    for (int64_t i = 0; i < nblk; i++) {
        blk k = blk_of(g, b, kh, i);
        block_backward(g, &k, gr, s);
    }
    if (gr->dk) scatter_kv(g, b, kh, s->dK, gr->dk, gr->add_k);
    if (gr->dv) scatter_kv(g, b, kh, s->dV, gr->dv, gr->add_v);
}

/* A gradient buffer for input x (NULL when not wanted); *add: add into it (else store). With
 * `shared` (two of q, k, v are one tensor) every contribution adds into a zeroed buffer. */
static float *grad_for(dt_tensor *x, bool shared, bool *add, bool *oom) {
    if (!dt__wants_grad(x)) return NULL;
    bool fresh = false;
    float *p = shared ? dt__grad_f32(x) : dt__grad_f32_fresh(x, &fresh);
    *add = !fresh;
    if (!p) *oom = true;
    return p;
}

static void attention_gqa_backward(dt_node *n) {
    dt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    gqa g = gqa_of(n->iattr, q, k, v);
    /* no queries or no keys: y was zeros whatever the inputs, every gradient is 0 */
    bool shared = q == k || q == v || k == v || g.T == 0 || g.S == 0, oom = false;
    gqa_grads gr = {.dy = n->out->grad->data, .stats = n->saved};
    gr.dq = grad_for(q, shared, &gr.add_q, &oom);
    gr.dk = grad_for(k, shared, &gr.add_k, &oom);
    gr.dv = grad_for(v, shared, &gr.add_v, &oom);
    if (oom || (!gr.dq && !gr.dk && !gr.dv)) return; /* OOM is reported by the tape walk */
    if (g.T == 0 || g.S == 0) return;                /* the zeroed gradients are the answer */
    int nt = omp_get_max_threads();
    int64_t groups = g.B * g.Hkv;
    size_t each = bwd_scratch_floats(&g);
    float *scr = dt__scratch(q->ctx, (size_t)nt * each * sizeof(float));
    if (!scr) return;
#pragma omp parallel for schedule(dynamic) if (groups >= nt)
    for (int64_t i = 0; i < groups; i++) {
        bwd_scratch s = bwd_scratch_at(&g, scr + (size_t)omp_get_thread_num() * each);
        group_backward(&g, i / g.Hkv, i % g.Hkv, &gr, &s);
    }
}

static int64_t scores_of(const dt_node *n) {
    return n->iattr[0] * n->iattr[3] * n->iattr[1] * n->iattr[2]; /* B Hq T S */
}

static int64_t attention_gqa_flops(const dt_node *n) {
    return 2 * (2 * scores_of(n) * n->iattr[5]) + 5 * scores_of(n);
}

static int64_t attention_gqa_bwd_flops(const dt_node *n) {
    return 5 * (2 * scores_of(n) * n->iattr[5]) + 9 * scores_of(n);
}

DT_OP(op_attention_gqa, "attention", attention_gqa_backward, attention_gqa_flops,
      attention_gqa_bwd_flops);

/* NULL with an error unless q, k, v have the shapes the op takes. */
static bool check_shapes(const dt_tensor *q, const dt_tensor *k, const dt_tensor *v, bool causal) {
    char a[96], b[96], c[96];
    bool ok = q->ndim == 4 && k->ndim == 4 && v->ndim == 4;
    for (int d = 0; ok && d < 4; d++) ok = k->shape[d] == v->shape[d];
    ok = ok && q->shape[0] == k->shape[0] && q->shape[3] == k->shape[3];
    if (!ok) {
        dt_error(DT_ERR_INVALID,
                 "attention: q %s, k %s, v %s must be (B, T, Hq, D), (B, S, Hkv, D), (B, S, Hkv, "
                 "D); hint: reshape the projections to (batch, seq, heads, head_dim)",
                 dt_shape_str(q, a, sizeof a), dt_shape_str(k, b, sizeof b),
                 dt_shape_str(v, c, sizeof c));
        return false;
    }
    if (k->shape[2] == 0 || q->shape[2] % k->shape[2] != 0) {
        dt_error(DT_ERR_INVALID,
                 "attention: %lld query heads are not a multiple of %lld kv heads (q %s, k %s); "
                 "hint: num_attention_heads must be a multiple of num_key_value_heads",
                 (long long)q->shape[2], (long long)k->shape[2], dt_shape_str(q, a, sizeof a),
                 dt_shape_str(k, b, sizeof b));
        return false;
    }
    if (causal && k->shape[1] < q->shape[1]) {
        dt_error(DT_ERR_INVALID,
                 "attention: causal with %lld queries but only %lld keys (q %s, k %s); hint: the "
                 "keys must include the queries' own positions (S >= T)",
                 (long long)q->shape[1], (long long)k->shape[1], dt_shape_str(q, a, sizeof a),
                 dt_shape_str(k, b, sizeof b));
        return false;
    }
    return true;
}

/* x itself when its last dim is dense and, for k and v (`rows`), its rows along dim 1 lie at
 * least D apart, as the GEMMs' leading dimension must (any other strides are read in place);
 * else a contiguous copy */
static dt_tensor *rows_dense(dt_tensor *x, bool rows) {
    bool ok = x->stride[3] == 1 || x->shape[3] <= 1;
    if (rows && x->shape[1] > 1 && x->stride[1] < x->shape[3]) ok = false;
    return ok ? x : dt_contiguous(x);
}

dt_tensor *dt_attention(dt_tensor *q, dt_tensor *k, dt_tensor *v, bool causal) {
    DT_CHECK_INPUTS(q, k, v);
    if (!dt__need_f32(q, "attention") || !dt__need_f32(k, "attention") ||
        !dt__need_f32(v, "attention") || !check_shapes(q, k, v, causal))
        return NULL;
    if (!(q = rows_dense(q, false)) || !(k = rows_dense(k, true)) || !(v = rows_dense(v, true)))
        return NULL;
    int64_t T = q->shape[1], Hq = q->shape[2], Hkv = k->shape[2], G = Hq / Hkv;
    int64_t rb = (ROWS_PER_BLOCK + G - 1) / G;
    rb = rb < T ? rb : T > 0 ? T : 1;
    dt_ctx *ctx = q->ctx;
    dt_tensor *y = dt__empty(ctx, DT_DTYPE_F32, 4, q->shape);
    dt_node *n = dt__node_new(&op_attention_gqa, y, 3, (dt_tensor *[]){q, k, v});
    if (!n) return NULL;
    const int64_t ia[8] = {q->shape[0], T, k->shape[1], Hq, Hkv, q->shape[3], causal, rb};
    memcpy(n->iattr, ia, sizeof ia);
    gqa g = gqa_of(n->iattr, q, k, v);
    if (dt_numel(y) == 0 || g.S == 0) { /* no keys: zeros (a softmax over nothing) */
        if (dt_numel(y)) memset(y->data, 0, dt_nbytes(y));
        n->saved = NULL;
        return dt__node_commit(n);
    }
    float *stats = n->record ? dt__scratch(ctx, (size_t)(g.B * Hq * T * 2) * sizeof(float)) : NULL;
    int nt = omp_get_max_threads();
    int64_t M = G * rb, nblk = (T + rb - 1) / rb, items = g.B * Hkv * nblk;
    size_t each = (size_t)(2 * M * g.D + M * g.S);
    float *scr = dt__scratch(ctx, (size_t)nt * each * sizeof(float));
    if ((n->record && !stats) || !scr) return NULL;
    n->saved = stats;
    float *Y = y->data;
#pragma omp parallel for schedule(dynamic) if (items >= nt)
    for (int64_t i = 0; i < items; i++) {
        float *mine = scr + (size_t)omp_get_thread_num() * each;
        blk b = blk_of(&g, i / nblk / Hkv, i / nblk % Hkv, i % nblk);
        block_forward(&g, &b, Y, stats, mine, mine + M * g.D, mine + M * g.D + M * g.S);
    }
    return dt__node_commit(n);
}
