/*
 * ops_dropout.c — inverted dropout.
 *
 * In training mode (dt_ctx_training) with p > 0 each element is kept with probability 1 - p
 * and scaled by 1 / (1 - p); p == 1 gives all zeros (as PyTorch). Otherwise (evaluation mode
 * or p == 0) dt_dropout returns x itself and records nothing.
 *
 * The mask comes from the context RNG (Philox, see dtrain/base.h): with base = the context
 * counter at the call, element i is kept when word i % 4 of dt_philox(seed, base + i / 4) is
 * >= p * 2^32. The mask therefore depends only on (seed, counter, i), never on the thread
 * count; each call advances the counter by ceil(n / 4), so consecutive calls draw fresh masks
 * and saving/restoring the RNG reproduces them.
 *
 * Backward: the forward keeps the mask as 1 byte per element in arena scratch (only when the
 * op is recorded) — cheaper than regenerating Philox blocks in the backward, at a quarter of
 * the activation's memory.
 */
#include "tensor_impl.h"
#include "base/base_impl.h"

#define PAR_MIN 32768

/* fattr[0] = scale (1 / (1 - p), or 0 for p == 1); iattr[0] = base counter; saved = mask */
static void dropout_backward(dt_node *n) {
    dt_tensor *x = n->in[0];
    if (!dt__wants_grad(x)) return;
    float *gx = dt__grad_f32(x);
    if (!gx) return;
    const uint8_t *mask = n->saved;
    const float *G = n->out->grad->data;
    float scale = (float)n->fattr[0];
    int64_t N = dt_numel(x);
#pragma omp parallel for simd schedule(static) if (N > PAR_MIN)
    for (int64_t i = 0; i < N; i++) gx[i] += G[i] * ((float)mask[i] * scale);
}

static int64_t dropout_flops(const dt_node *n) { return dt_numel(n->out); }

DT_OP(op_dropout, "dropout", dropout_backward, dropout_flops, NULL);

dt_tensor *dt_dropout(dt_tensor *x, float p) {
    DT_CHECK_INPUTS(x);
    if (!(p >= 0.f && p <= 1.f)) {
        dt_error(DT_ERR_INVALID, "dropout: p = %g is not a probability; hint: p must be in [0, 1)",
                 (double)p);
        return NULL;
    }
    if (!dt__need_f32(x, "dropout")) return NULL;
    dt_ctx *ctx = x->ctx;
    if (!ctx->training || p == 0.f) return x;
    if (!(x = dt__contig(x))) return NULL;
    dt_tensor *y = dt__empty_like(x);
    dt_node *n = dt__node_new(&op_dropout, y, 1, &x);
    if (!n) return NULL;
    int64_t N = dt_numel(x), nb = (N + 3) / 4;
    uint8_t *mask = NULL;
    if (n->record && !(mask = dt__scratch(ctx, (size_t)(N ? N : 1)))) return NULL;
    uint64_t seed = ctx->rng.seed, base = ctx->rng.counter;
    ctx->rng.counter = base + (uint64_t)nb;
    /* keep iff word >= thr: P(keep) = (2^32 - thr) / 2^32 = 1 - p */
    double tf = (double)p * 4294967296.0;
    uint32_t thr = tf >= 4294967295.0 ? UINT32_MAX : (uint32_t)tf;
    bool all_drop = p >= 1.f;
    float scale = all_drop ? 0.f : 1.0f / (1.0f - p);
    const float *X = x->data;
    float *Y = y->data;
#pragma omp parallel for schedule(static) if (N > PAR_MIN)
    for (int64_t b = 0; b < nb; b++) {
        uint32_t o[4];
        dt_philox(seed, base + (uint64_t)b, o);
        for (int j = 0; j < 4 && b * 4 + j < N; j++) {
            int64_t i = b * 4 + j;
            bool keep = !all_drop && o[j] >= thr;
            Y[i] = keep ? X[i] * scale : 0.f;
            if (mask) mask[i] = keep;
        }
    }
    n->fattr[0] = scale;
    n->iattr[0] = (int64_t)base;
    n->saved = mask;
    return dt__node_commit(n);
}
