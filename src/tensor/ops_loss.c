/* ops_loss.c — cross_entropy (with ignore_index) and mse. */
#include "tensor_impl.h"

#include <math.h>

/* Read target i of an i32/i64 tensor. */
static int64_t target_at(const dt_tensor *t, int64_t i) {
    return t->dtype == DT_DTYPE_I32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
}

/* ---- cross_entropy: logits (N, C), targets (N) -> mean over non-ignored rows --------------
 * iattr: [0]=N [1]=C [2]=ignore_index [3]=valid count; saved = per-row logsumexp (N floats)
 * The row kernels use the shared AVX-512 or AVX2 exp at those levels (a GPT's LM head feeds
 * 1024 x vocab logits per step through them): each row's max and sum run over 16 (8) lanes and
 * then one fixed lane tree, so the bits do not depend on the thread count. */

#include <immintrin.h>

#include "cpu/simd_exp.h"

DT__AVX512_BEGIN

/* log(sum(exp(x))) of one row of C >= 1 elements */
static float row_lse_512(const float *x, int64_t C) {
    __m512 vm = _mm512_set1_ps(-INFINITY);
    for (int64_t c = 0; c < C; c += 16) {
        __mmask16 k = dt__tail_mask16(C - c);
        vm = _mm512_mask_max_ps(vm, k, vm, _mm512_maskz_loadu_ps(k, x + c));
    }
    float m = _mm512_reduce_max_ps(vm);
    __m512 vs = _mm512_setzero_ps(), mm = _mm512_set1_ps(m);
    for (int64_t c = 0; c < C; c += 16) {
        __mmask16 k = dt__tail_mask16(C - c);
        __m512 e = dt__exp512_nonpos(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + c), mm));
        vs = _mm512_add_ps(vs, _mm512_maskz_mov_ps(k, e));
    }
    return m + logf(_mm512_reduce_add_ps(vs));
}

/* gr = g * softmax(x) (= g * exp(x - lse)), stored or added */
static void row_grad_512(const float *x, float lse, float g, float *gr, int64_t C, bool add) {
    __m512 l = _mm512_set1_ps(lse), gv = _mm512_set1_ps(g);
    for (int64_t c = 0; c < C; c += 16) {
        __mmask16 k = dt__tail_mask16(C - c);
        __m512 p = dt__exp512_nonpos(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + c), l));
        __m512 d = _mm512_mul_ps(gv, p);
        if (add) d = _mm512_add_ps(_mm512_maskz_loadu_ps(k, gr + c), d);
        _mm512_mask_storeu_ps(gr + c, k, d);
    }
}

DT__ISA_END

/* the same in AVX2 + FMA: 8 lanes, then dt__hmax256 / dt__hsum256's fixed trees */
DT__AVX2_BEGIN

static float row_lse_256(const float *x, int64_t C) {
    float m = dt__max_row256(x, C);
    __m256 vs = _mm256_setzero_ps(), mm = _mm256_set1_ps(m);
    for (int64_t c = 0; c < C; c += 8) {
        __m256i k = dt__tail_mask8(C - c);
        __m256 e = dt__exp256_nonpos(_mm256_sub_ps(_mm256_maskload_ps(x + c, k), mm));
        vs = _mm256_add_ps(vs, _mm256_and_ps(_mm256_castsi256_ps(k), e));
    }
    return m + logf(dt__hsum256(vs));
}

static void row_grad_256(const float *x, float lse, float g, float *gr, int64_t C, bool add) {
    __m256 l = _mm256_set1_ps(lse), gv = _mm256_set1_ps(g);
    for (int64_t c = 0; c < C; c += 8) {
        __m256i k = dt__tail_mask8(C - c);
        __m256 p = dt__exp256_nonpos(_mm256_sub_ps(_mm256_maskload_ps(x + c, k), l));
        __m256 d = _mm256_mul_ps(gv, p);
        if (add) d = _mm256_add_ps(_mm256_maskload_ps(gr + c, k), d);
        _mm256_maskstore_ps(gr + c, k, d);
    }
}

DT__ISA_END

/* portable variants */

static float row_lse_gen(const float *x, int64_t C) {
    float m = -INFINITY;
    for (int64_t c = 0; c < C; c++) m = x[c] > m ? x[c] : m;
    float s = 0.f;
    for (int64_t c = 0; c < C; c++) s += expf(x[c] - m);
    return m + logf(s);
}

static void row_grad_gen(const float *x, float lse, float g, float *gr, int64_t C, bool add) {
    for (int64_t c = 0; c < C; c++) gr[c] = (add ? gr[c] : 0.f) + g * expf(x[c] - lse);
}

/* the variant of the CPU's level */
static float row_lse(const float *x, int64_t C) {
    return (dt__isa_avx512() ? row_lse_512 : dt__isa_avx2() ? row_lse_256 : row_lse_gen)(x, C);
}
static void row_grad(const float *x, float lse, float g, float *gr, int64_t C, bool add) {
    (dt__isa_avx512() ? row_grad_512
     : dt__isa_avx2() ? row_grad_256
                      : row_grad_gen)(x, lse, g, gr, C, add);
}

static void ce_backward(dt_node *n) {
    dt_tensor *x = n->in[0], *t = n->in[1];
    if (!dt__wants_grad(x)) return;
    int64_t N = n->iattr[0], C = n->iattr[1], ign = n->iattr[2], valid = n->iattr[3];
    const float *X = x->data, *lse = n->saved;
    float g = ((const float *)n->out->grad->data)[0] / (float)valid;
    bool fresh;
    float *gx = dt__grad_f32_fresh(x, &fresh);
    if (!gx) return;
#pragma omp parallel for schedule(static) if (N * C > 32768)
    for (int64_t r = 0; r < N; r++) {
        int64_t tr = target_at(t, r);
        float *gr = gx + r * C;
        if (tr == ign) { /* no gradient from an ignored row */
            if (fresh) memset(gr, 0, (size_t)C * sizeof(float));
            continue;
        }
        row_grad(X + r * C, lse[r], g, gr, C, !fresh);
        gr[tr] -= g;
    }
}

static int64_t ce_flops(const dt_node *n) {
    return 4 * n->iattr[0] * n->iattr[1];
}

DT_OP(op_cross_entropy, "cross_entropy", ce_backward, ce_flops, NULL);

dt_tensor *dt_cross_entropy(dt_tensor *logits, dt_tensor *targets, int64_t ignore_index) {
    DT_CHECK_INPUTS(logits, targets);
    if (!dt__need_f32(logits, "cross_entropy")) return NULL;
    char s1[96], s2[96];
    if (targets->dtype != DT_DTYPE_I32 && targets->dtype != DT_DTYPE_I64) {
        dt_error(DT_ERR_INVALID, "cross_entropy: targets must be i32 or i64 class ids, got %s",
                 dt_shape_str(targets, s1, 96));
        return NULL;
    }
    if (logits->ndim < 1) {
        dt_error(DT_ERR_INVALID, "cross_entropy: logits need a class dim");
        return NULL;
    }
    int64_t C = logits->shape[logits->ndim - 1], N = C ? dt_numel(logits) / C : 0;
    if (dt_numel(targets) != N) {
        dt_error(DT_ERR_INVALID,
                 "cross_entropy: %lld targets for %lld rows of logits (%s vs %s); hint: targets "
                 "hold one class id per row",
                 (long long)dt_numel(targets), (long long)N, dt_shape_str(logits, s1, 96),
                 dt_shape_str(targets, s2, 96));
        return NULL;
    }
    logits = dt__contig(logits);
    targets = dt_is_contiguous(targets) ? targets : dt_to_dtype(targets, targets->dtype);
    if (!logits || !targets) return NULL;
    int64_t valid = 0;
    for (int64_t r = 0; r < N; r++) {
        int64_t tr = target_at(targets, r);
        if (tr == ignore_index) continue;
        if (tr < 0 || tr >= C) {
            dt_error(DT_ERR_INVALID,
                     "cross_entropy: target %lld in row %lld is not a class id in "
                     "[0, %lld) nor ignore_index (%lld)",
                     (long long)tr, (long long)r, (long long)C, (long long)ignore_index);
            return NULL;
        }
        valid++;
    }
    dt_tensor *y = dt__empty(logits->ctx, DT_DTYPE_F32, 0, NULL);
    dt_node *n = dt__node_new(&op_cross_entropy, y, 2, (dt_tensor *[]){logits, targets});
    if (!n) return NULL;
    float *lse = dt__scratch(logits->ctx, (size_t)(N ? N : 1) * sizeof(float));
    double *rowloss = dt__scratch(logits->ctx, (size_t)(N ? N : 1) * sizeof(double));
    if (!lse || !rowloss) return NULL;
    const float *X = logits->data;
#pragma omp parallel for schedule(static) if (N * C > 32768)
    for (int64_t r = 0; r < N; r++) {
        const float *xr = X + r * C;
        lse[r] = row_lse(xr, C);
        int64_t tr = target_at(targets, r);
        rowloss[r] = tr == ignore_index ? 0.0 : (double)lse[r] - xr[tr];
    }
    double total = 0;
    for (int64_t r = 0; r < N; r++) total += rowloss[r]; /* fixed order: deterministic */
    *(float *)y->data = (float)(total / (double)valid);  /* 0/0 = NaN as in PyTorch */
    n->iattr[0] = N;
    n->iattr[1] = C;
    n->iattr[2] = ignore_index;
    n->iattr[3] = valid;
    n->saved = lse;
    return dt__node_commit(n);
}

/* ---- mse: mean((pred - target)^2) ---- */

static void mse_backward(dt_node *n) {
    dt_tensor *p = n->in[0], *t = n->in[1];
    int64_t N = dt_numel(p);
    float g = ((const float *)n->out->grad->data)[0] * 2.f / (float)N;
    const float *P = p->data, *T = t->data;
    if (dt__wants_grad(p)) {
        float *gp = dt__grad_f32(p);
        for (int64_t i = 0; i < N; i++) gp[i] += g * (P[i] - T[i]);
    }
    if (dt__wants_grad(t)) {
        float *gt = dt__grad_f32(t);
        for (int64_t i = 0; i < N; i++) gt[i] -= g * (P[i] - T[i]);
    }
}

static int64_t mse_flops(const dt_node *n) {
    return 3 * dt_numel(n->in[0]);
}

DT_OP(op_mse, "mse", mse_backward, mse_flops, NULL);

dt_tensor *dt_mse(dt_tensor *pred, dt_tensor *target) {
    DT_CHECK_INPUTS(pred, target);
    if (!dt__need_f32(pred, "mse") || !dt__need_f32(target, "mse")) return NULL;
    if (dt_numel(pred) != dt_numel(target)) {
        char s1[96], s2[96];
        dt_error(DT_ERR_INVALID, "mse: prediction %s and target %s differ in size",
                 dt_shape_str(pred, s1, 96), dt_shape_str(target, s2, 96));
        return NULL;
    }
    pred = dt__contig(pred);
    target = dt__contig(target);
    if (!pred || !target) return NULL;
    dt_tensor *y = dt__empty(pred->ctx, DT_DTYPE_F32, 0, NULL);
    dt_node *n = dt__node_new(&op_mse, y, 2, (dt_tensor *[]){pred, target});
    if (!n) return NULL;
    int64_t N = dt_numel(pred);
    const float *P = pred->data, *T = target->data;
    double s = 0;
    for (int64_t i = 0; i < N; i++) {
        double d = (double)P[i] - T[i];
        s += d * d;
    }
    *(float *)y->data = (float)(s / (double)N);
    return dt__node_commit(n);
}
