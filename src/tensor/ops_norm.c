/*
 * ops_norm.c — layer_norm and rms_norm over the last dim, forward and backward.
 *
 *   layer_norm: y = (x - mean) * rstd * w + b,  rstd = 1 / sqrt(var + eps), var biased (/C)
 *   rms_norm:   y = x * rstd * w,               rstd = 1 / sqrt(mean(x^2) + eps)
 * w and b have shape (C) and may be NULL (then 1 and 0). The forward saves the per-row
 * statistics (mean and rstd, or rstd) in arena scratch for the backward.
 *
 * Parallel over rows. The w / b gradients are sums over rows: each fixed block of ROW_BLK rows
 * writes its own partial sums, and the partials are then added in block order (parallel over
 * the C columns), so the result has the same bits whatever the thread count.
 *
 * Node inputs are compacted: in[0] = x, then w if given, then b if given (iattr[2], iattr[3]
 * say which are present).
 */
#include "tensor_impl.h"

#include <math.h>

#define PAR_MIN 32768
#define ROW_BLK 32

typedef struct norm_args {
    dt_tensor *x, *w, *b; /* contiguous f32; w, b may be NULL */
    int64_t N, C;         /* rows, row length */
} norm_args;

/* Check and normalise the inputs of a norm op. Returns false with an error set. */
static bool norm_prepare(const char *op, dt_tensor *x, dt_tensor *w, dt_tensor *b, norm_args *a) {
    char s1[96], s2[96];
    if (!dt__need_f32(x, op) || (w && !dt__need_f32(w, op)) || (b && !dt__need_f32(b, op)))
        return false;
    if (x->ndim < 1 || x->shape[x->ndim - 1] <= 0) {
        dt_error(DT_ERR_INVALID, "%s: input %s needs a non-empty last dim to normalise over", op,
                 dt_shape_str(x, s1, sizeof s1));
        return false;
    }
    int64_t C = x->shape[x->ndim - 1];
    dt_tensor *pv[2] = {w, b};
    const char *pn[2] = {"weight", "bias"};
    for (int i = 0; i < 2; i++) {
        if (pv[i] && dt_numel(pv[i]) != C) {
            dt_error(DT_ERR_INVALID,
                     "%s: %s %s does not match the last dim of the input %s; "
                     "hint: it must have shape (%lld)",
                     op, pn[i], dt_shape_str(pv[i], s1, sizeof s1), dt_shape_str(x, s2, sizeof s2),
                     (long long)C);
            return false;
        }
    }
    a->x = dt__contig(x);
    a->w = w ? dt__contig(w) : NULL;
    a->b = b ? dt__contig(b) : NULL;
    if (!a->x || (w && !a->w) || (b && !a->b)) return false;
    a->C = C;
    a->N = dt_numel(x) / C;
    return true;
}

/* Add the per-block partial sums part[nblk][C] into dst[C] in block order (parallel over
 * chunks of columns; each column is summed over blocks 0, 1, 2, ... whatever the chunking). */
static void reduce_partials(float *dst, const float *part, int64_t nblk, int64_t C) {
    const int64_t CH = 256;
    int64_t nch = (C + CH - 1) / CH;
#pragma omp parallel for schedule(static) if (nblk * C > PAR_MIN)
    for (int64_t j = 0; j < nch; j++) {
        int64_t c0 = j * CH, len = C - c0 < CH ? C - c0 : CH;
        float acc[256];
        memset(acc, 0, sizeof acc);
        for (int64_t k = 0; k < nblk; k++) {
            const float *pk = part + k * C + c0;
#pragma omp simd
            for (int64_t c = 0; c < len; c++) acc[c] += pk[c];
        }
#pragma omp simd
        for (int64_t c = 0; c < len; c++) dst[c0 + c] += acc[c];
    }
}

/* y[c] = t[c] * w[c] + b[c] for whichever of w, b is present (t may alias y). */
static void affine_row(float *y, const float *w, const float *b, int64_t C) {
    if (w && b) {
#pragma omp simd
        for (int64_t c = 0; c < C; c++) y[c] = y[c] * w[c] + b[c];
    } else if (w) {
#pragma omp simd
        for (int64_t c = 0; c < C; c++) y[c] = y[c] * w[c];
    } else if (b) {
#pragma omp simd
        for (int64_t c = 0; c < C; c++) y[c] = y[c] + b[c];
    }
}

/* y[c] = ((x[c] - m) * rs) * w[c] + b[c], w and b as in affine_row, in one pass: the bits of
 * the normalisation followed by affine_row */
static void norm_affine_row(float *y, const float *x, float m, float rs, const float *w,
                            const float *b, int64_t C) {
    if (w && b) {
#pragma omp simd
        for (int64_t c = 0; c < C; c++) y[c] = ((x[c] - m) * rs) * w[c] + b[c];
    } else if (w) {
#pragma omp simd
        for (int64_t c = 0; c < C; c++) y[c] = ((x[c] - m) * rs) * w[c];
    } else if (b) {
#pragma omp simd
        for (int64_t c = 0; c < C; c++) y[c] = ((x[c] - m) * rs) + b[c];
    } else {
#pragma omp simd
        for (int64_t c = 0; c < C; c++) y[c] = (x[c] - m) * rs;
    }
}

/* ---- layer_norm: iattr [0]=N [1]=C [2]=has_w [3]=has_b; fattr[0]=eps;
 *      saved = float[2N]: mean[0..N), rstd[N..2N) ---- */

static void layer_norm_backward(dt_node *n) {
    int64_t N = n->iattr[0], C = n->iattr[1];
    dt_tensor *x = n->in[0];
    dt_tensor *w = n->iattr[2] ? n->in[1] : NULL;
    dt_tensor *b = n->iattr[3] ? n->in[1 + (int)n->iattr[2]] : NULL;
    bool gx_on = dt__wants_grad(x), gw_on = dt__wants_grad(w), gb_on = dt__wants_grad(b);
    const float *X = x->data, *W = w ? w->data : NULL, *G = n->out->grad->data;
    const float *mean = n->saved, *rstd = mean + N;
    float *gx = gx_on ? dt__grad_f32(x) : NULL;
    float *gw = gw_on ? dt__grad_f32(w) : NULL;
    float *gb = gb_on ? dt__grad_f32(b) : NULL;
    if ((gx_on && !gx) || (gw_on && !gw) || (gb_on && !gb)) return;
    int64_t nblk = (N + ROW_BLK - 1) / ROW_BLK;
    float *pw = NULL, *pb = NULL;
    if (gw_on && !(pw = dt__scratch(x->ctx, (size_t)(nblk ? nblk : 1) * C * sizeof(float)))) return;
    if (gb_on && !(pb = dt__scratch(x->ctx, (size_t)(nblk ? nblk : 1) * C * sizeof(float)))) return;
    float invC = 1.0f / (float)C;
#pragma omp parallel for schedule(static) if (N * C > PAR_MIN)
    for (int64_t k = 0; k < nblk; k++) {
        float *bw = pw ? pw + k * C : NULL, *bb = pb ? pb + k * C : NULL;
        if (bw) memset(bw, 0, (size_t)C * sizeof(float));
        if (bb) memset(bb, 0, (size_t)C * sizeof(float));
        int64_t r1 = (k + 1) * ROW_BLK < N ? (k + 1) * ROW_BLK : N;
        for (int64_t r = k * ROW_BLK; r < r1; r++) {
            // x, g rows are (C)
            const float *xr = X + r * C, *gr = G + r * C;
            float m = mean[r], rs = rstd[r];
            /* dxhat = g * w; dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) */
            float s1 = 0.f, s2 = 0.f;
            if (bw && bb && W && gx) { /* the usual case: both partials and the sums in one pass */
#pragma omp simd reduction(+ : s1, s2)
                for (int64_t c = 0; c < C; c++) {
                    float xh = (xr[c] - m) * rs, d = gr[c] * W[c];
                    bw[c] += gr[c] * xh;
                    bb[c] += gr[c];
                    s1 += d;
                    s2 += d * xh;
                }
            } else {
                if (bw) {
#pragma omp simd
                    for (int64_t c = 0; c < C; c++) bw[c] += gr[c] * ((xr[c] - m) * rs);
                }
                if (bb) {
#pragma omp simd
                    for (int64_t c = 0; c < C; c++) bb[c] += gr[c];
                }
                if (!gx) continue;
                if (W) {
#pragma omp simd reduction(+ : s1, s2)
                    for (int64_t c = 0; c < C; c++) {
                        float d = gr[c] * W[c];
                        s1 += d;
                        s2 += d * ((xr[c] - m) * rs);
                    }
                } else {
#pragma omp simd reduction(+ : s1, s2)
                    for (int64_t c = 0; c < C; c++) {
                        s1 += gr[c];
                        s2 += gr[c] * ((xr[c] - m) * rs);
                    }
                }
            }
            float a1 = s1 * invC, a2 = s2 * invC;
            float *gxr = gx + r * C;
            if (W) {
#pragma omp simd
                for (int64_t c = 0; c < C; c++)
                    gxr[c] += rs * (gr[c] * W[c] - a1 - ((xr[c] - m) * rs) * a2);
            } else {
#pragma omp simd
                for (int64_t c = 0; c < C; c++)
                    gxr[c] += rs * (gr[c] - a1 - ((xr[c] - m) * rs) * a2);
            }
        }
    }
    if (gw) reduce_partials(gw, pw, nblk, C);
    if (gb) reduce_partials(gb, pb, nblk, C);
}

static int64_t layer_norm_flops(const dt_node *n) {
    return 8 * n->iattr[0] * n->iattr[1];
}

DT_OP(op_layer_norm, "layer_norm", layer_norm_backward, layer_norm_flops, NULL);

dt_tensor *dt_layer_norm(dt_tensor *x, dt_tensor *w, dt_tensor *b, float eps) {
    DT_CHECK_INPUTS(x);
    norm_args a;
    if (!norm_prepare("layer_norm", x, w, b, &a)) return NULL;
    int64_t N = a.N, C = a.C;
    dt_tensor *y = dt__empty_like(a.x);
    dt_tensor *ins[3] = {a.x};
    int n_in = 1;
    if (a.w) ins[n_in++] = a.w;
    if (a.b) ins[n_in++] = a.b;
    dt_node *n = dt__node_new(&op_layer_norm, y, n_in, ins);
    if (!n) return NULL;
    float *stats = dt__scratch(a.x->ctx, (size_t)(N ? 2 * N : 1) * sizeof(float));
    if (!stats) return NULL;
    float *mean = stats, *rstd = stats + N;
    const float *X = a.x->data, *W = a.w ? a.w->data : NULL, *B = a.b ? a.b->data : NULL;
    float *Y = y->data;
    float invC = 1.0f / (float)C;
#pragma omp parallel for schedule(static) if (N * C > PAR_MIN)
    for (int64_t r = 0; r < N; r++) {
        // x, y rows are (C)
        const float *xr = X + r * C;
        float *yr = Y + r * C;
        float s = 0.f;
#pragma omp simd reduction(+ : s)
        for (int64_t c = 0; c < C; c++) s += xr[c];
        float m = s * invC, v = 0.f;
#pragma omp simd reduction(+ : v)
        for (int64_t c = 0; c < C; c++) v += (xr[c] - m) * (xr[c] - m);
        float rs = 1.0f / sqrtf(v * invC + eps);
        norm_affine_row(yr, xr, m, rs, W, B, C);
        mean[r] = m;
        rstd[r] = rs;
    }
    n->iattr[0] = N;
    n->iattr[1] = C;
    n->iattr[2] = a.w != NULL;
    n->iattr[3] = a.b != NULL;
    n->fattr[0] = eps;
    n->saved = stats;
    return dt__node_commit(n);
}

/* ---- rms_norm: iattr [0]=N [1]=C [2]=has_w; fattr[0]=eps; saved = float[N] rstd ---- */

static void rms_norm_backward(dt_node *n) {
    int64_t N = n->iattr[0], C = n->iattr[1];
    dt_tensor *x = n->in[0], *w = n->iattr[2] ? n->in[1] : NULL;
    bool gx_on = dt__wants_grad(x), gw_on = dt__wants_grad(w);
    const float *X = x->data, *W = w ? w->data : NULL, *G = n->out->grad->data;
    const float *rstd = n->saved;
    float *gx = gx_on ? dt__grad_f32(x) : NULL;
    float *gw = gw_on ? dt__grad_f32(w) : NULL;
    if ((gx_on && !gx) || (gw_on && !gw)) return;
    int64_t nblk = (N + ROW_BLK - 1) / ROW_BLK;
    float *pw = NULL;
    if (gw_on && !(pw = dt__scratch(x->ctx, (size_t)(nblk ? nblk : 1) * C * sizeof(float)))) return;
    float invC = 1.0f / (float)C;
#pragma omp parallel for schedule(static) if (N * C > PAR_MIN)
    for (int64_t k = 0; k < nblk; k++) {
        float *bw = pw ? pw + k * C : NULL;
        if (bw) memset(bw, 0, (size_t)C * sizeof(float));
        int64_t r1 = (k + 1) * ROW_BLK < N ? (k + 1) * ROW_BLK : N;
        for (int64_t r = k * ROW_BLK; r < r1; r++) {
            // x, g rows are (C)
            const float *xr = X + r * C, *gr = G + r * C;
            float rs = rstd[r];
            if (bw) {
#pragma omp simd
                for (int64_t c = 0; c < C; c++) bw[c] += gr[c] * (xr[c] * rs);
            }
            if (!gx) continue;
            /* dxhat = g * w; dx = rstd * (dxhat - xhat * mean(dxhat * xhat)) */
            float s2 = 0.f;
            if (W) {
#pragma omp simd reduction(+ : s2)
                for (int64_t c = 0; c < C; c++) s2 += gr[c] * W[c] * (xr[c] * rs);
            } else {
#pragma omp simd reduction(+ : s2)
                for (int64_t c = 0; c < C; c++) s2 += gr[c] * (xr[c] * rs);
            }
            float a2 = s2 * invC;
            float *gxr = gx + r * C;
            if (W) {
#pragma omp simd
                for (int64_t c = 0; c < C; c++) gxr[c] += rs * (gr[c] * W[c] - (xr[c] * rs) * a2);
            } else {
#pragma omp simd
                for (int64_t c = 0; c < C; c++) gxr[c] += rs * (gr[c] - (xr[c] * rs) * a2);
            }
        }
    }
    if (gw) reduce_partials(gw, pw, nblk, C);
}

static int64_t rms_norm_flops(const dt_node *n) {
    return 5 * n->iattr[0] * n->iattr[1];
}

DT_OP(op_rms_norm, "rms_norm", rms_norm_backward, rms_norm_flops, NULL);

dt_tensor *dt_rms_norm(dt_tensor *x, dt_tensor *w, float eps) {
    DT_CHECK_INPUTS(x);
    norm_args a;
    if (!norm_prepare("rms_norm", x, w, NULL, &a)) return NULL;
    int64_t N = a.N, C = a.C;
    dt_tensor *y = dt__empty_like(a.x);
    dt_tensor *ins[2] = {a.x, a.w};
    dt_node *n = dt__node_new(&op_rms_norm, y, a.w ? 2 : 1, ins);
    if (!n) return NULL;
    float *rstd = dt__scratch(a.x->ctx, (size_t)(N ? N : 1) * sizeof(float));
    if (!rstd) return NULL;
    const float *X = a.x->data, *W = a.w ? a.w->data : NULL;
    float *Y = y->data;
    float invC = 1.0f / (float)C;
#pragma omp parallel for schedule(static) if (N * C > PAR_MIN)
    for (int64_t r = 0; r < N; r++) {
        // x, y rows are (C)
        const float *xr = X + r * C;
        float *yr = Y + r * C;
        float ss = 0.f;
#pragma omp simd reduction(+ : ss)
        for (int64_t c = 0; c < C; c++) ss += xr[c] * xr[c];
        float rs = 1.0f / sqrtf(ss * invC + eps);
#pragma omp simd
        for (int64_t c = 0; c < C; c++) yr[c] = xr[c] * rs;
        affine_row(yr, W, NULL, C);
        rstd[r] = rs;
    }
    n->iattr[0] = N;
    n->iattr[1] = C;
    n->iattr[2] = a.w != NULL;
    n->fattr[0] = eps;
    n->saved = rstd;
    return dt__node_commit(n);
}
