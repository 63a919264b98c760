/* ops_rope.c — rotary position embedding (RoPE) in Hugging Face's rotate_half convention, as
 * Llama, Mistral and Qwen2 apply it to q and k.
 *
 *   x (B, T, H, D), D even, h = D / 2; position p = pos0 + t; for i < h:
 *     a_i = p * theta^(-2i/D)
 *     y[i]     = x[i] cos a_i - x[i + h] sin a_i
 *     y[i + h] = x[i + h] cos a_i + x[i] sin a_i
 *   i.e. y = x * cat(cos, cos) + rotate_half(x) * cat(sin, sin), rotate_half(x) = cat(-x2, x1).
 *
 * The angle table (T, h) of cos and sin is computed once per call in double precision (the
 * angle p * inv_freq reaches thousands of radians at long positions, where an f32 angle would
 * be off by ~1e-4), by angle addition along the positions (rope_table), and rounded to f32; it is
 * saved for the backward, which applies the inverse rotation: dx[i] = dy[i] cos + dy[i + h] sin,
 * dx[i + h] = dy[i + h] cos - dy[i] sin. Rows (b, t, head) are independent: parallel over rows, no
 * reductions, so the bits do not depend on the thread count. FLOPs: 3 per element (two products and
 * a sum), backward 2x.
 */
#include "tensor_impl.h"

#include <math.h>

#define PAR_MIN 32768

/* iattr: [0]=B [1]=T [2]=H [3]=D; saved: the table, cos (T, h) then sin (T, h) */

/* out = rotation of in by the angles (cos c, sin s) of one row, forward (sign 1) or inverse
 * (sign -1); out may not alias in. */
static void rope_row(const float *in, float *out, const float *c, const float *s, int64_t h,
                     float sign, bool add) {
    const float *x1 = in, *x2 = in + h;
    float *y1 = out, *y2 = out + h;
    if (add) {
#pragma omp simd
        for (int64_t i = 0; i < h; i++) {
            y1[i] += x1[i] * c[i] - sign * (x2[i] * s[i]);
            y2[i] += x2[i] * c[i] + sign * (x1[i] * s[i]);
        }
    } else {
#pragma omp simd
        for (int64_t i = 0; i < h; i++) {
            y1[i] = x1[i] * c[i] - sign * (x2[i] * s[i]);
            y2[i] = x2[i] * c[i] + sign * (x1[i] * s[i]);
        }
    }
}

/* in (rows of D floats) rotated into out, row r at position r / H % T */
static void rope_apply(const float *in, float *out, const float *tab, const int64_t *g, float sign,
                       bool add) {
    int64_t B = g[0], T = g[1], H = g[2], D = g[3], h = D / 2, rows = B * T * H;
    const float *cs = tab, *sn = tab + T * h;
#pragma omp parallel for schedule(static) if (rows * D > PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t t = r / H % T;
        rope_row(in + r * D, out + r * D, cs + t * h, sn + t * h, h, sign, add);
    }
}

static void rope_backward(dt_node *n) {
    dt_tensor *x = n->in[0];
    if (!dt__wants_grad(x)) return;
    bool fresh;
    float *gx = dt__grad_f32_fresh(x, &fresh); /* every element is written */
    if (!gx) return;
    rope_apply(n->out->grad->data, gx, n->saved, n->iattr, -1.f, !fresh);
}

static int64_t rope_flops(const dt_node *n) {
    return 3 * dt_numel(n->out);
}

DT_OP(op_rope, "rope", rope_backward, rope_flops, NULL);

/* The (T, D/2) cos table then the sin table, for positions pos0 .. pos0 + T - 1. Each column
 * i starts from cos and sin of pos0 * w_i and steps by the rotation of w_i in double precision
 * (angle addition: 4 multiply-adds a position instead of a cos and a sin; the rounding drift
 * after 10^5 steps is ~1e-11, far below f32's). A column is one sequential chain: the same
 * bits whatever the thread count. */
static float *rope_table(dt_ctx *ctx, int64_t T, int64_t D, int64_t pos0, float theta) {
    int64_t h = D / 2;
    float *tab = dt__scratch(ctx, (size_t)(2 * T * h) * sizeof(float));
    if (!tab) return NULL;
#pragma omp parallel for schedule(static) if (T * h > 16384)
    for (int64_t i = 0; i < h; i++) {
        double w = pow((double)theta, -2.0 * (double)i / (double)D);
        double cw = cos(w), sw = sin(w), a = (double)pos0 * w, c = cos(a), s = sin(a);
        for (int64_t t = 0; t < T; t++) {
            tab[t * h + i] = (float)c;
            tab[T * h + t * h + i] = (float)s;
            double cn = c * cw - s * sw;
            s = s * cw + c * sw;
            c = cn;
        }
    }
    return tab;
}

dt_tensor *dt_rope(dt_tensor *x, int64_t pos0, float theta) {
    DT_CHECK_INPUTS(x);
    if (!dt__need_f32(x, "rope")) return NULL;
    char s[96];
    if (x->ndim != 4 || x->shape[3] % 2 != 0) {
        dt_error(DT_ERR_INVALID,
                 "rope: x must be (B, T, H, D) with D even, got %s; hint: apply it to q or k "
                 "reshaped to (batch, seq, heads, head_dim)",
                 dt_shape_str(x, s, sizeof s));
        return NULL;
    }
    if (pos0 < 0 || !(theta > 0.f) || isinf(theta)) {
        dt_error(DT_ERR_INVALID,
                 "rope: pos0 %lld and theta %g must be >= 0 and > 0 (finite); hint: theta is "
                 "the config's rope_theta, 10000 for Llama 2",
                 (long long)pos0, (double)theta);
        return NULL;
    }
    if (!(x = dt__contig(x))) return NULL;
    dt_tensor *y = dt__empty_like(x);
    dt_node *n = dt__node_new(&op_rope, y, 1, &x);
    if (!n) return NULL;
    for (int d = 0; d < 4; d++) n->iattr[d] = x->shape[d];
    if (dt_numel(x) == 0) return dt__node_commit(n);
    float *tab = rope_table(x->ctx, x->shape[1], x->shape[3], pos0, theta);
    if (!tab) return NULL;
    n->saved = tab;
    rope_apply(x->data, y->data, tab, n->iattr, 1.f, false);
    return dt__node_commit(n);
}
