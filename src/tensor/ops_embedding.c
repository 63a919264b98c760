/*
 * ops_embedding.c — embedding lookup: idx (any shape, i32 or i64) into w (V, C) gives
 * (idx..., C), and its backward, which scatters the output gradient into w's gradient; and
 * embedding_sum, two lookups added in one op (a GPT's token + position embeddings).
 *
 * Every id is checked before anything is computed: an id outside [0, V) is an error naming
 * the id, its position and V. When the op is recorded the ids are copied (as i64) into arena
 * scratch, so the backward does not depend on the caller keeping idx unchanged.
 *
 * Determinism: the backward runs in parallel over fixed chunks of the C columns; inside a
 * chunk the tokens are added in order, so repeated ids accumulate in the same order whatever
 * the thread count (no atomics).
 *
 * FLOPs: the forward is a copy (0); the backward counts one add per output element.
 */
#include "tensor_impl.h"

#define PAR_MIN 32768
#define COL_CHUNK 64

static inline int64_t id_at(const dt_tensor *t, int64_t i) {
    return t->dtype == DT_DTYPE_I32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
}

/* gw[ids[t]] += G[t] for every token t, in parallel over fixed column chunks, tokens in order
 * inside a chunk */
static void scatter_rows(float *gw, const int64_t *ids, const float *G, int64_t ntok, int64_t C) {
    int64_t nch = (C + COL_CHUNK - 1) / COL_CHUNK;
#pragma omp parallel for schedule(static) if (ntok * C > PAR_MIN)
    for (int64_t j = 0; j < nch; j++) {
        int64_t c0 = j * COL_CHUNK, len = C - c0 < COL_CHUNK ? C - c0 : COL_CHUNK;
        for (int64_t t = 0; t < ntok; t++) {
            float *dst = gw + ids[t] * C + c0;
            const float *src = G + t * C + c0;
#pragma omp simd
            for (int64_t c = 0; c < len; c++) dst[c] += src[c];
        }
    }
}

/* iattr: [0]=number of tokens [1]=V [2]=C; saved = int64 ids (tokens) */
static void embedding_backward(dt_node *n) {
    dt_tensor *w = n->in[1];
    if (!dt__wants_grad(w)) return;
    float *gw = dt__grad_f32(w);
    if (!gw) return;
    scatter_rows(gw, n->saved, n->out->grad->data, n->iattr[0], n->iattr[2]);
}

static int64_t embedding_flops(const dt_node *n) {
    (void)n;
    return 0;
}
static int64_t embedding_bwd_flops(const dt_node *n) {
    return n->iattr[0] * n->iattr[2];
}

DT_OP(op_embedding, "embedding", embedding_backward, embedding_flops, embedding_bwd_flops);

/* The checks of a lookup of idx in table w (the message names op): integer ids, a (V, C)
 * table, every id in [0, V). Returns idx contiguous (a copy if it was not), NULL on error. */
static dt_tensor *checked_ids(const char *op, dt_tensor *idx, dt_tensor *w) {
    char s1[96], s2[96];
    if (idx->dtype != DT_DTYPE_I32 && idx->dtype != DT_DTYPE_I64) {
        dt_error(DT_ERR_INVALID,
                 "%s: ids must be i32 or i64, got %s; hint: token ids are "
                 "integer tensors",
                 op, dt_shape_str(idx, s1, sizeof s1));
        return NULL;
    }
    if (!dt__need_f32(w, op)) return NULL;
    if (w->ndim != 2) {
        dt_error(DT_ERR_INVALID, "%s: the table must be (V, C), got %s", op,
                 dt_shape_str(w, s1, sizeof s1));
        return NULL;
    }
    if (idx->ndim + 1 > DT_MAX_DIMS) {
        dt_error(DT_ERR_INVALID,
                 "%s: ids %s have too many dims (the output may have at "
                 "most %d)",
                 op, dt_shape_str(idx, s1, sizeof s1), DT_MAX_DIMS);
        return NULL;
    }
    idx = dt_is_contiguous(idx) ? idx : dt_to_dtype(idx, idx->dtype);
    if (!idx) return NULL;
    int64_t V = w->shape[0], ntok = dt_numel(idx);
    for (int64_t i = 0; i < ntok; i++) {
        int64_t id = id_at(idx, i);
        if (id < 0 || id >= V) {
            dt_error(DT_ERR_INVALID,
                     "%s: id %lld at position %lld of the ids %s is out of "
                     "range for a table of V = %lld rows %s; hint: ids must be in "
                     "[0, %lld) (check the vocabulary size)",
                     op, (long long)id, (long long)i, dt_shape_str(idx, s1, sizeof s1),
                     (long long)V, dt_shape_str(w, s2, sizeof s2), (long long)V);
            return NULL;
        }
    }
    return idx;
}

/* The ids of idx as i64 into dst. */
static void copy_ids(const dt_tensor *idx, int64_t *dst) {
    for (int64_t t = 0, ntok = dt_numel(idx); t < ntok; t++) dst[t] = id_at(idx, t);
}

/* The output of a lookup: idx's shape with C appended. */
static dt_tensor *lookup_out(const dt_tensor *idx, dt_ctx *ctx, int64_t C) {
    int64_t shape[DT_MAX_DIMS];
    for (int d = 0; d < idx->ndim; d++) shape[d] = idx->shape[d];
    shape[idx->ndim] = C;
    return dt__empty(ctx, DT_DTYPE_F32, idx->ndim + 1, shape);
}

dt_tensor *dt_embedding(dt_tensor *idx, dt_tensor *w) {
    DT_CHECK_INPUTS(idx, w);
    if (!(idx = checked_ids("embedding", idx, w)) || !(w = dt__contig(w))) return NULL;
    int64_t V = w->shape[0], C = w->shape[1], ntok = dt_numel(idx);
    dt_tensor *y = lookup_out(idx, w->ctx, C);
    dt_node *n = dt__node_new(&op_embedding, y, 2, (dt_tensor *[]){idx, w});
    if (!n) return NULL;
    const float *W = w->data; // (V, C)
    float *Y = y->data;       // (ntok, C)
#pragma omp parallel for schedule(static) if (ntok * C > PAR_MIN)
    for (int64_t t = 0; t < ntok; t++)
        memcpy(Y + t * C, W + id_at(idx, t) * C, (size_t)C * sizeof(float));
    if (n->record) {
        int64_t *ids = dt__scratch(w->ctx, (size_t)(ntok ? ntok : 1) * sizeof(int64_t));
        if (!ids) return NULL;
        copy_ids(idx, ids);
        n->saved = ids;
    }
    n->iattr[0] = ntok;
    n->iattr[1] = V;
    n->iattr[2] = C;
    return dt__node_commit(n);
}

/* ---- embedding_sum: y = wa[ia] + wb[ib] ------------------------------------------------------
 * Two lookups added (a GPT's token and position embeddings), as one op: each output row is
 * written once, where the two lookups and the add wrote three rows and read two. The bits are
 * those of dt_add(dt_embedding(ia, wa), dt_embedding(ib, wb)) with ia's lookup recorded first,
 * forward and backward (the same sum per element; each table gets the output gradient
 * scattered in token order, wb's first as that backward walk would, which matters only when wa
 * and wb are one table).
 * iattr: [0]=number of tokens [2]=C; saved = int64 ids, ia's then ib's. */
static void embedding_sum_backward(dt_node *n) {
    int64_t ntok = n->iattr[0], C = n->iattr[2];
    const int64_t *ids = n->saved;
    const float *G = n->out->grad->data;
    for (int k = 1; k >= 0; k--) { /* wb, then wa */
        dt_tensor *w = n->in[2 * k + 1];
        if (!dt__wants_grad(w)) continue;
        float *gw = dt__grad_f32(w);
        if (!gw) return;
        scatter_rows(gw, ids + k * ntok, G, ntok, C);
    }
}

static int64_t embedding_sum_flops(const dt_node *n) {
    return n->iattr[0] * n->iattr[2];
}
static int64_t embedding_sum_bwd_flops(const dt_node *n) {
    return 2 * n->iattr[0] * n->iattr[2];
}

DT_OP(op_embedding_sum, "embedding_sum", embedding_sum_backward, embedding_sum_flops,
      embedding_sum_bwd_flops);

dt_tensor *dt_embedding_sum(dt_tensor *ia, dt_tensor *wa, dt_tensor *ib, dt_tensor *wb) {
    DT_CHECK_INPUTS(ia, wa, ib, wb);
    char s1[96], s2[96];
    if (!(ia = checked_ids("embedding_sum", ia, wa)) ||
        !(ib = checked_ids("embedding_sum", ib, wb)))
        return NULL;
    bool same = ia->ndim == ib->ndim;
    for (int d = 0; same && d < ia->ndim; d++) same = ia->shape[d] == ib->shape[d];
    if (!same) {
        dt_error(DT_ERR_INVALID, "embedding_sum: the two id tensors differ in shape, %s and %s",
                 dt_shape_str(ia, s1, sizeof s1), dt_shape_str(ib, s2, sizeof s2));
        return NULL;
    }
    if (wa->shape[1] != wb->shape[1]) {
        dt_error(DT_ERR_INVALID,
                 "embedding_sum: tables %s and %s differ in width; hint: both "
                 "need the same C",
                 dt_shape_str(wa, s1, sizeof s1), dt_shape_str(wb, s2, sizeof s2));
        return NULL;
    }
    if (!(wa = dt__contig(wa)) || !(wb = dt__contig(wb))) return NULL;
    int64_t C = wa->shape[1], ntok = dt_numel(ia);
    dt_tensor *y = lookup_out(ia, wa->ctx, C);
    dt_node *n = dt__node_new(&op_embedding_sum, y, 4, (dt_tensor *[]){ia, wa, ib, wb});
    if (!n) return NULL;
    const float *A = wa->data, *B = wb->data;
    float *Y = y->data;
#pragma omp parallel for schedule(static) if (ntok * C > PAR_MIN)
    for (int64_t t = 0; t < ntok; t++) {
        const float *a = A + id_at(ia, t) * C, *b = B + id_at(ib, t) * C;
        float *yr = Y + t * C;
#pragma omp simd
        for (int64_t c = 0; c < C; c++) yr[c] = a[c] + b[c];
    }
    if (n->record) {
        int64_t *ids = dt__scratch(wa->ctx, (size_t)(2 * ntok + 1) * sizeof(int64_t));
        if (!ids) return NULL;
        copy_ids(ia, ids);
        copy_ids(ib, ids + ntok);
        n->saved = ids;
    }
    n->iattr[0] = ntok;
    n->iattr[2] = C;
    return dt__node_commit(n);
}
