/* Tests for the fused linear ops (src/tensor/ops_matmul.c) and the tiled GEMM under them
 * (src/tensor/cpu/gemm.c):
 *   - linear_gelu_tanh / linear_relu give the same bits as dt_linear followed by the
 *     activation, forward and backward (same kernels, bias and activation in the epilogue);
 *   - linear_residual gives the same bits as dt_add(res, dt_linear(...)), forward and
 *     backward, also when res has other uses before and after it (its gradient is taken over
 *     or added to);
 *   - under bf16 autocast, forward and backward (which reuse the forward's rounded x and w and
 *     round dy once for both backward GEMMs) stay close to f32;
 *   - without an activation the bias gradient has the bits of dy's in-order column sums;
 *   - f32 and bf16 results are bit-identical with 1 and 2 threads;
 *   - chained activation: a linear op fed by linear_gelu_tanh / linear_relu, whose dx epilogue
 *     makes the producer's dh, gives the bits of the unfused ops, f32 and bf16, 1 and 2
 *     threads, also when the activation's output has another use recorded between the two
 *     ops or after them (the chain must then not be taken).
 * Shapes are large enough to be cut into several row and column tiles, with ragged last
 * tiles. */
#include "tensor/tensor_impl.h"
#include "test.h"

#include "dtrain/tensor.h"

#include <omp.h>
#include <string.h>

enum { PLAIN, GELU, RELU, RESID };

typedef struct result {
    float *y, *gx, *gw, *gb, *gr;
    float *gb_ref; /* without activation: dy's column sums, each from 0 in row order */
    int64_t ny, nx, nw, nb, nr;
} result;

static float *copy_of(const dt_tensor *t) {
    float *p = malloc(dt_nbytes(t));
    memcpy(p, t->data, dt_nbytes(t));
    return p;
}

static void result_free(result *r) {
    free(r->y), free(r->gx), free(r->gw), free(r->gb), free(r->gr), free(r->gb_ref);
}

/* y = act(x w^T + b) with x (R, IN), w (OUT, IN), b (OUT); backward with a fixed random dy.
 * fused: the fused op, else dt_linear then the activation op. */
static result run(int act, bool fused, bool bf16, bool bias, int64_t R, int64_t IN, int64_t OUT) {
    dt_ctx *ctx = dt_ctx_new(NULL, 21);
    dt_tensor *x = dt_rand_uniform(ctx, 2, (int64_t[]){R, IN}, -1.f, 1.f);
    dt_tensor *w = dt_rand_uniform(ctx, 2, (int64_t[]){OUT, IN}, -0.3f, 0.3f);
    dt_tensor *b = dt_rand_uniform(ctx, 1, (int64_t[]){OUT}, -0.5f, 0.5f);
    dt_tensor *g = dt_rand_uniform(ctx, 2, (int64_t[]){R, OUT}, -1.f, 1.f);
    dt_tensor *res = dt_rand_uniform(ctx, 2, (int64_t[]){R, OUT}, -1.f, 1.f);
    dt_set_requires_grad(x, true);
    dt_set_requires_grad(w, true);
    dt_set_requires_grad(b, true);
    dt_set_requires_grad(res, true);
    if (bf16) dt_ctx_set_autocast(ctx, DT_DTYPE_BF16);
    dt_tensor *bb = bias ? b : NULL, *y;
    /* RESID with bias off: res is also used before (relu) and after (an add): its gradient
     * gets other parts on both sides of the residual's */
    bool reuse = act == RESID && !bias;
    dt_tensor *pre = reuse ? dt_relu(res) : NULL;
    if (act == RESID)
        y = fused ? dt_linear_residual(x, w, bb, res) : dt_add(res, dt_linear(x, w, bb));
    else if (fused)
        y = act == GELU   ? dt_linear_gelu_tanh(x, w, bb)
            : act == RELU ? dt_linear_relu(x, w, bb)
                          : dt_linear(x, w, bb);
    else {
        y = dt_linear(x, w, bb);
        y = act == GELU ? dt_gelu_tanh(y) : act == RELU ? dt_relu(y) : y;
    }
    if (reuse) y = dt_add(dt_add(y, res), pre);
    result r = {0};
    if (!y || dt_backward_with(y, g) != DT_OK || !x->grad || !w->grad || (bias && !b->grad) ||
        (act == RESID && !res->grad)) {
        CHECK_MSG(false, "forward/backward failed: %s", dt_last_error());
        dt_ctx_free(ctx);
        return r;
    }
    r.y = copy_of(y), r.ny = dt_numel(y);
    r.gx = copy_of(x->grad), r.nx = dt_numel(x);
    r.gw = copy_of(w->grad), r.nw = dt_numel(w);
    r.gb = bias ? copy_of(b->grad) : calloc(1, sizeof(float)), r.nb = bias ? OUT : 0;
    r.gr = act == RESID ? copy_of(res->grad) : calloc(1, sizeof(float));
    r.gb_ref = calloc((size_t)OUT + 1, sizeof(float));
    for (int64_t j = 0; j < OUT; j++) {
        float s = 0.f;
        for (int64_t i = 0; i < R; i++) s += ((const float *)g->data)[i * OUT + j];
        r.gb_ref[j] = s;
    }
    r.nr = act == RESID ? R * OUT : 0;
    dt_ctx_free(ctx);
    return r;
}

static bool same_bits(const result *a, const result *b) {
    return a->y && b->y && !memcmp(a->y, b->y, (size_t)a->ny * 4) &&
           !memcmp(a->gx, b->gx, (size_t)a->nx * 4) && !memcmp(a->gw, b->gw, (size_t)a->nw * 4) &&
           !memcmp(a->gb, b->gb, (size_t)a->nb * 4) && !memcmp(a->gr, b->gr, (size_t)a->nr * 4);
}

/* max |a - b| / (1 + max |b|) over one array */
static double rel_err(const float *a, const float *b, int64_t n) {
    double md = 0, mb = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > md) md = d;
        if (fabs(b[i]) > mb) mb = fabs(b[i]);
    }
    return md / (1.0 + mb);
}

/* R, IN, OUT; the last has a long K in the dx (OUT) and dW (R) GEMMs, which run on sgemm */
static const int64_t shapes[][3] = {{300, 96, 200}, {7, 5, 3}, {257, 130, 72}, {770, 24, 770}};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

static void test_fused_equals_unfused(void) {
    for (int s = 0; s < NSHAPES; s++)
        for (int act = GELU; act <= RESID; act++)
            for (int bias = 0; bias < 2; bias++) {
                const int64_t *d = shapes[s];
                result f = run(act, true, false, bias, d[0], d[1], d[2]);
                result u = run(act, false, false, bias, d[0], d[1], d[2]);
                CHECK_MSG(same_bits(&f, &u), "shape %d act %d bias %d", s, act, bias);
                result_free(&f), result_free(&u);
            }
}

/* Without an activation the bias gradient is dy's column sums, taken by the dW GEMM as it
 * copies or reads dy's columns (one tile, row tiles with copies, sgemm): the bits of a plain
 * in-order sum. */
static void test_bias_grad_bits(void) {
    for (int s = 0; s < NSHAPES; s++)
        for (int act = PLAIN; act <= RESID; act += RESID - PLAIN) {
            const int64_t *d = shapes[s];
            result f = run(act, true, false, true, d[0], d[1], d[2]);
            CHECK_MSG(f.gb && !memcmp(f.gb, f.gb_ref, (size_t)f.nb * sizeof(float)),
                      "shape %d act %d: bias gradient differs from dy's column sums", s, act);
            result_free(&f);
        }
}

static void test_bf16_close_to_f32(void) {
    for (int s = 0; s < NSHAPES; s++)
        for (int act = PLAIN; act <= RELU; act++) {
            const int64_t *d = shapes[s];
            result h = run(act, true, true, true, d[0], d[1], d[2]);
            result f = run(act, true, false, true, d[0], d[1], d[2]);
            if (h.y && f.y) {
                double e[4] = {rel_err(h.y, f.y, f.ny), rel_err(h.gx, f.gx, f.nx),
                               rel_err(h.gw, f.gw, f.nw), rel_err(h.gb, f.gb, f.nb)};
                /* bf16 keeps 8 bits: a few 1e-3 relative to the largest value. Without an
                 * activation the bias gradient never meets bf16; with relu, rounding flips
                 * the sign of a few pre-activations near 0, each moving a whole dy. */
                double tol = act == RELU ? 0.2 : 1e-2, tol_b = act == PLAIN ? 1e-5 : tol;
                CHECK_MSG(e[0] < tol && e[1] < tol && e[2] < tol && e[3] < tol_b,
                          "shape %d act %d: y %g gx %g gw %g gb %g", s, act, e[0], e[1], e[2],
                          e[3]);
            }
            result_free(&h), result_free(&f);
        }
}

static void test_threads_bit_identical(void) {
    int nt0 = omp_get_max_threads();
    for (int bf16 = 0; bf16 < 2; bf16++)
        for (int act = PLAIN; act <= RESID; act++) {
            const int64_t *d = shapes[0];
            omp_set_num_threads(1);
            result one = run(act, true, bf16, true, d[0], d[1], d[2]);
            omp_set_num_threads(2);
            result two = run(act, true, bf16, true, d[0], d[1], d[2]);
            CHECK_MSG(same_bits(&one, &two), "bf16 %d act %d", bf16, act);
            result_free(&one), result_free(&two);
        }
    omp_set_num_threads(nt0);
}

/* h = act(x w1^T + b1) (R, MID), then y = res + h w2^T + b2 (resid) or h w2^T + b2, with an
 * optional other use of h: z = h w3^T recorded before the consumer (other = 1) or after it
 * (other = 2), y += z. fused: the fused ops, else dt_linear, the activation op and dt_add.
 * Returns y and the gradients of x, w1, b1, w2, b2, res (and w3) concatenated. */
static float *run_chain(int act, bool resid, int other, bool fused, bool bf16, int64_t R,
                        int64_t IN, int64_t MID, int64_t OUT, int64_t *len) {
    dt_ctx *ctx = dt_ctx_new(NULL, 33);
    dt_tensor *x = dt_rand_uniform(ctx, 2, (int64_t[]){R, IN}, -1.f, 1.f);
    dt_tensor *w1 = dt_rand_uniform(ctx, 2, (int64_t[]){MID, IN}, -0.3f, 0.3f);
    dt_tensor *b1 = dt_rand_uniform(ctx, 1, (int64_t[]){MID}, -0.5f, 0.5f);
    dt_tensor *w2 = dt_rand_uniform(ctx, 2, (int64_t[]){OUT, MID}, -0.3f, 0.3f);
    dt_tensor *b2 = dt_rand_uniform(ctx, 1, (int64_t[]){OUT}, -0.5f, 0.5f);
    dt_tensor *w3 = dt_rand_uniform(ctx, 2, (int64_t[]){OUT, MID}, -0.3f, 0.3f);
    dt_tensor *res = dt_rand_uniform(ctx, 2, (int64_t[]){R, OUT}, -1.f, 1.f);
    dt_tensor *g = dt_rand_uniform(ctx, 2, (int64_t[]){R, OUT}, -1.f, 1.f);
    dt_tensor *leaves[] = {x, w1, b1, w2, b2, res, w3};
    for (int i = 0; i < 7; i++) dt_set_requires_grad(leaves[i], true);
    if (bf16) dt_ctx_set_autocast(ctx, DT_DTYPE_BF16);
    dt_tensor *h;
    if (fused)
        h = act == GELU ? dt_linear_gelu_tanh(x, w1, b1) : dt_linear_relu(x, w1, b1);
    else
        h = act == GELU ? dt_gelu_tanh(dt_linear(x, w1, b1)) : dt_relu(dt_linear(x, w1, b1));
    dt_tensor *z = other == 1 ? dt_linear(h, w3, NULL) : NULL, *y;
    if (resid)
        y = fused ? dt_linear_residual(h, w2, b2, res) : dt_add(res, dt_linear(h, w2, b2));
    else
        y = dt_linear(h, w2, b2);
    if (other == 2) z = dt_linear(h, w3, NULL);
    if (z) y = dt_add(y, z);
    float *out = NULL;
    *len = 0;
    if (!y || dt_backward_with(y, g) != DT_OK) {
        CHECK_MSG(false, "chain forward/backward failed: %s", dt_last_error());
        dt_ctx_free(ctx);
        return NULL;
    }
    int nl = other ? 7 : resid ? 6 : 5;
    if (!resid && other) leaves[5] = w3, nl = 6;
    int64_t n = dt_numel(y);
    for (int i = 0; i < nl; i++) n += dt_numel(leaves[i]);
    out = malloc((size_t)n * sizeof(float));
    memcpy(out, y->data, dt_nbytes(y));
    int64_t at = dt_numel(y);
    for (int i = 0; i < nl; i++) {
        CHECK_MSG(leaves[i]->grad, "leaf %d has no gradient", i);
        if (leaves[i]->grad) memcpy(out + at, leaves[i]->grad->data, dt_nbytes(leaves[i]));
        at += dt_numel(leaves[i]);
    }
    *len = n;
    dt_ctx_free(ctx);
    return out;
}

static void test_chained_activation(void) {
    static const int64_t dims[][4] = {
        {300, 96, 200, 72}, {7, 5, 3, 4}, {257, 130, 72, 96}, {770, 24, 770, 16}};
    int nt0 = omp_get_max_threads();
    for (int s = 0; s < 4; s++)
        for (int act = GELU; act <= RELU; act++)
            for (int resid = 0; resid < 2; resid++)
                for (int other = 0; other < 3; other++)
                    for (int bf16 = 0; bf16 < 2; bf16++) {
                        const int64_t *d = dims[s];
                        int64_t nf, nu, n1;
                        omp_set_num_threads(2);
                        float *f =
                            run_chain(act, resid, other, true, bf16, d[0], d[1], d[2], d[3], &nf);
                        float *u =
                            run_chain(act, resid, other, false, bf16, d[0], d[1], d[2], d[3], &nu);
                        omp_set_num_threads(1);
                        float *o =
                            run_chain(act, resid, other, true, bf16, d[0], d[1], d[2], d[3], &n1);
                        CHECK_MSG(f && u && o && nf == nu && nf == n1 &&
                                      !memcmp(f, u, (size_t)nf * 4) &&
                                      !memcmp(f, o, (size_t)nf * 4),
                                  "shape %d act %d resid %d other %d bf16 %d", s, act, resid, other,
                                  bf16);
                        free(f), free(u), free(o);
                    }
    omp_set_num_threads(nt0);
}

int main(void) {
    /* below the bf16 instructions bf16 autocast runs the storage path here (the default f32
     * fallback is the f32 path, tested as such) */
    dt__bf16_fallback_override(DT__BF16_STORAGE);
    TEST_RUN(test_fused_equals_unfused);
    TEST_RUN(test_bias_grad_bits);
    TEST_RUN(test_bf16_close_to_f32);
    TEST_RUN(test_threads_bit_identical);
    TEST_RUN(test_chained_activation);
    TEST_END();
}
