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
 *   - f32 and bf16 results are bit-identical with 1 and 2 threads.
 * Shapes are large enough to be cut into several row and column tiles, with ragged last
 * tiles. */
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

static const int64_t shapes[][3] = {{300, 96, 200}, {7, 5, 3}, {257, 130, 72}};

static void test_fused_equals_unfused(void) {
    for (int s = 0; s < 3; s++)
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
    for (int s = 0; s < 3; s++)
        for (int act = PLAIN; act <= RESID; act += RESID - PLAIN) {
            const int64_t *d = shapes[s];
            result f = run(act, true, false, true, d[0], d[1], d[2]);
            CHECK_MSG(f.gb && !memcmp(f.gb, f.gb_ref, (size_t)f.nb * sizeof(float)),
                      "shape %d act %d: bias gradient differs from dy's column sums", s, act);
            result_free(&f);
        }
}

static void test_bf16_close_to_f32(void) {
    for (int s = 0; s < 3; s++)
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

int main(void) {
    TEST_RUN(test_fused_equals_unfused);
    TEST_RUN(test_bias_grad_bits);
    TEST_RUN(test_bf16_close_to_f32);
    TEST_RUN(test_threads_bit_identical);
    TEST_END();
}
