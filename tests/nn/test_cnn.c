/* test_cnn.c — conv2d / pooling values against naive references written here (forward and
 * backward, several configurations, both kernel paths and the chunk-parallel path), bitwise
 * equality across thread counts, error messages, FLOP counts, relu_max_pool2d against the
 * unfused relu → max_pool2d (bits, forward and backward; a Sequential fuses the pair), and the
 * benchmark CNN: parameter count and names, output shape, and a few SGD steps lowering the loss
 * on a fixed batch. */
#include "dtrain/nn.h"
#include "test.h"

#include <string.h>

/* ---- naive references (double accumulation) ---- */

typedef struct cfg {
    int64_t N, C, H, W, OC, KH, KW;
    int s, p;
    bool bias;
} cfg;

static int64_t out_dim(int64_t n, int64_t k, int s, int p) {
    return (n + 2 * p - k) / s + 1;
}

static float xat(const float *x, const cfg *c, int64_t n, int64_t ch, int64_t i, int64_t j) {
    if (i < 0 || j < 0 || i >= c->H || j >= c->W) return 0.f;
    return x[((n * c->C + ch) * c->H + i) * c->W + j];
}

static void ref_conv(const cfg *c, const float *x, const float *w, const float *b, float *y) {
    int64_t OH = out_dim(c->H, c->KH, c->s, c->p), OW = out_dim(c->W, c->KW, c->s, c->p);
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t o = 0; o < c->OC; o++)
            for (int64_t i = 0; i < OH; i++)
                for (int64_t j = 0; j < OW; j++) {
                    double acc = b ? b[o] : 0.0;
                    for (int64_t ch = 0; ch < c->C; ch++)
                        for (int64_t kh = 0; kh < c->KH; kh++)
                            for (int64_t kw = 0; kw < c->KW; kw++)
                                acc += (double)w[((o * c->C + ch) * c->KH + kh) * c->KW + kw] *
                                       xat(x, c, n, ch, i * c->s - c->p + kh, j * c->s - c->p + kw);
                    y[((n * c->OC + o) * OH + i) * OW + j] = (float)acc;
                }
}

/* gradients of sum(y * gy) */
static void ref_conv_bwd(const cfg *c, const float *x, const float *w, const float *gy, double *gx,
                         double *gw, double *gb) {
    int64_t OH = out_dim(c->H, c->KH, c->s, c->p), OW = out_dim(c->W, c->KW, c->s, c->p);
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t o = 0; o < c->OC; o++)
            for (int64_t i = 0; i < OH; i++)
                for (int64_t j = 0; j < OW; j++) {
                    double g = gy[((n * c->OC + o) * OH + i) * OW + j];
                    gb[o] += g;
                    for (int64_t ch = 0; ch < c->C; ch++)
                        for (int64_t kh = 0; kh < c->KH; kh++)
                            for (int64_t kw = 0; kw < c->KW; kw++) {
                                int64_t ii = i * c->s - c->p + kh, jj = j * c->s - c->p + kw;
                                if (ii < 0 || jj < 0 || ii >= c->H || jj >= c->W) continue;
                                int64_t wi = ((o * c->C + ch) * c->KH + kh) * c->KW + kw;
                                int64_t xi = ((n * c->C + ch) * c->H + ii) * c->W + jj;
                                gw[wi] += g * x[xi];
                                gx[xi] += g * w[wi];
                            }
                }
}

static double max_rel_err_f(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (1.0 + fabs((double)b[i]));
        if (e > m) m = e;
    }
    return m;
}

static double max_rel_err_d(const float *a, const double *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (1.0 + fabs(b[i]));
        if (e > m) m = e;
    }
    return m;
}

static void check_conv(const cfg *c) {
    dt_ctx *ctx = dt_ctx_new(NULL, 42);
    int64_t xs[4] = {c->N, c->C, c->H, c->W}, ws[4] = {c->OC, c->C, c->KH, c->KW};
    dt_tensor *x = dt_rand_uniform(ctx, 4, xs, -1.f, 1.f);
    dt_tensor *w = dt_rand_uniform(ctx, 4, ws, -1.f, 1.f);
    dt_tensor *b = c->bias ? dt_rand_uniform(ctx, 1, &c->OC, -1.f, 1.f) : NULL;
    dt_set_requires_grad(x, true);
    dt_set_requires_grad(w, true);
    if (b) dt_set_requires_grad(b, true);
    dt_tensor *y = dt_conv2d(x, w, b, c->s, c->p);
    CHECK_MSG(y != NULL, "conv2d failed: %s", dt_last_error());
    if (!y) {
        dt_ctx_free(ctx);
        return;
    }
    int64_t OH = out_dim(c->H, c->KH, c->s, c->p), OW = out_dim(c->W, c->KW, c->s, c->p);
    CHECK(y->ndim == 4 && y->shape[0] == c->N && y->shape[1] == c->OC && y->shape[2] == OH &&
          y->shape[3] == OW);
    int64_t ny = dt_numel(y), nx = dt_numel(x), nw = dt_numel(w);
    float *ref = malloc((size_t)ny * sizeof(float));
    ref_conv(c, x->data, w->data, b ? b->data : NULL, ref);
    double e = max_rel_err_f(y->data, ref, ny);
    CHECK_MSG(e < 1e-4, "forward N%lld C%lld %lldx%lld OC%lld k%lldx%lld s%d p%d: max err %g",
              (long long)c->N, (long long)c->C, (long long)c->H, (long long)c->W, (long long)c->OC,
              (long long)c->KH, (long long)c->KW, c->s, c->p, e);
    dt_tensor *gy = dt_rand_uniform(ctx, 4, y->shape, -1.f, 1.f);
    CHECK(dt_backward_with(y, gy) == DT_OK);
    double *gx = calloc((size_t)nx, sizeof(double)), *gw = calloc((size_t)nw, sizeof(double));
    double *gb = calloc((size_t)c->OC, sizeof(double));
    ref_conv_bwd(c, x->data, w->data, gy->data, gx, gw, gb);
    CHECK_MSG(x->grad && max_rel_err_d(x->grad->data, gx, nx) < 1e-4, "dx s%d p%d", c->s, c->p);
    CHECK_MSG(w->grad && max_rel_err_d(w->grad->data, gw, nw) < 1e-4, "dw s%d p%d C%lld", c->s,
              c->p, (long long)c->C);
    if (b) CHECK_MSG(b->grad && max_rel_err_d(b->grad->data, gb, c->OC) < 1e-4, "db");
    free(ref);
    free(gx);
    free(gw);
    free(gb);
    dt_ctx_free(ctx);
}

static void test_conv_values(void) {
    const cfg cases[] = {
        {2, 3, 7, 9, 4, 3, 3, 1, 1, true},     /* GEMM path, one chunk */
        {2, 3, 7, 9, 4, 3, 3, 2, 1, true},     /* stride 2 + padding */
        {3, 2, 8, 6, 5, 5, 3, 2, 2, false},    /* stride 2, pad 2, non-square kernel */
        {2, 4, 6, 6, 3, 1, 1, 1, 0, true},     /* 1x1 */
        {1, 2, 5, 7, 2, 5, 5, 1, 0, false},    /* kernel as big as the input's height */
        {5, 1, 28, 28, 8, 3, 3, 1, 1, true},   /* direct path (C = 1), 28 wide: 16 + 12 lanes */
        {3, 1, 9, 40, 3, 5, 5, 1, 2, true},    /* direct path, 5x5, 40 wide */
        {3, 1, 9, 10, 3, 3, 3, 2, 1, true},    /* C = 1 with stride 2: GEMM path */
        {40, 8, 14, 14, 16, 3, 3, 1, 1, true}, /* many chunks: chunk-parallel path */
        {40, 1, 12, 12, 8, 3, 3, 1, 1, true},  /* direct path, many chunks */
        /* Winograd path (3x3, stride 1, C and OC >= 4): odd sizes, pads 0..2, wide rows */
        {2, 4, 5, 7, 4, 3, 3, 1, 1, true},
        {3, 5, 6, 9, 6, 3, 3, 1, 0, false},
        {2, 4, 7, 4, 5, 3, 3, 1, 2, true},
        {2, 4, 3, 3, 4, 3, 3, 1, 1, true},
        {2, 4, 6, 32, 4, 3, 3, 1, 1, true},    /* 16 tiles per row: one full block */
        {2, 4, 5, 37, 4, 3, 3, 1, 1, true},    /* 19 tiles per row: two blocks */
        {2, 6, 9, 70, 5, 3, 3, 1, 0, true},    /* 34 tiles per row: three blocks */
        {30, 8, 14, 14, 16, 3, 3, 1, 1, true}, /* many chunks */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_conv(&cases[i]);
}

/* Forward and backward give the same bits with 1 and 2 threads. */
typedef struct det_out {
    float *y, *gw, *gx;
    int64_t ny, nw, nx;
} det_out;

static det_out run_det(int threads, int64_t N, int64_t C, int64_t H) {
    dt_set_num_threads(threads);
    dt_ctx *ctx = dt_ctx_new(NULL, 9);
    int64_t OC = 16;
    dt_tensor *x = dt_rand_uniform(ctx, 4, (int64_t[]){N, C, H, H}, -1.f, 1.f);
    dt_tensor *w = dt_rand_uniform(ctx, 4, (int64_t[]){OC, C, 3, 3}, -1.f, 1.f);
    dt_tensor *b = dt_rand_uniform(ctx, 1, &OC, -1.f, 1.f);
    dt_set_requires_grad(x, true);
    dt_set_requires_grad(w, true);
    dt_set_requires_grad(b, true);
    dt_tensor *y = dt_max_pool2d(dt_conv2d(x, w, b, 1, 1), 2, 2, 0);
    dt_tensor *gy = dt_rand_uniform(ctx, 4, y->shape, -1.f, 1.f);
    CHECK(dt_backward_with(y, gy) == DT_OK);
    det_out o = {malloc(dt_nbytes(y)), malloc(dt_nbytes(w)), malloc(dt_nbytes(x)),
                 dt_numel(y),          dt_numel(w),          dt_numel(x)};
    memcpy(o.y, y->data, dt_nbytes(y));
    memcpy(o.gw, w->grad->data, dt_nbytes(w));
    memcpy(o.gx, x->grad->data, dt_nbytes(x));
    dt_ctx_free(ctx);
    return o;
}

static void test_conv_deterministic(void) {
    int saved = dt_get_num_threads();
    /* direct (C = 1) and Winograd paths with many chunks; one big image (a single chunk: the
     * GEMMs themselves run threaded) */
    const int64_t cases[][3] = {{48, 1, 14}, {48, 8, 14}, {1, 8, 48}, {1, 1, 64}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        det_out a = run_det(1, cases[i][0], cases[i][1], cases[i][2]);
        det_out b = run_det(2, cases[i][0], cases[i][1], cases[i][2]);
        CHECK_MSG(!memcmp(a.y, b.y, (size_t)a.ny * sizeof(float)), "forward bits, case %zu", i);
        CHECK_MSG(!memcmp(a.gw, b.gw, (size_t)a.nw * sizeof(float)), "dw bits, case %zu", i);
        CHECK_MSG(!memcmp(a.gx, b.gx, (size_t)a.nx * sizeof(float)), "dx bits, case %zu", i);
        free(a.y), free(a.gw), free(a.gx), free(b.y), free(b.gw), free(b.gx);
    }
    dt_set_num_threads(saved);
}

/* A weight whose every product meets a zero (a dead input channel, padding) gets exactly 0,
 * not rounding noise: AdamW's m / (sqrt(v) + eps) would turn noise into a real step. */
static void test_conv_exact_zero_grads(void) {
    const int64_t shapes[][4] = {{16, 8, 14, 14}, {3, 1, 12, 12}, {4, 6, 9, 9}}; /* N C H OC=C */
    const int strides[] = {1, 1, 2};
    for (int k = 0; k < 3; k++) {
        dt_ctx *ctx = dt_ctx_new(NULL, 4);
        int64_t N = shapes[k][0], C = shapes[k][1], H = shapes[k][2], OC = 8;
        dt_tensor *x = dt_rand_uniform(ctx, 4, (int64_t[]){N, C, H, H}, -1.f, 1.f);
        dt_tensor *w = dt_rand_uniform(ctx, 4, (int64_t[]){OC, C, 3, 3}, -1.f, 1.f);
        float *X = x->data;
        for (int64_t n = 0; n < N; n++) /* input channel C-1 is dead */
            memset(X + (n * C + C - 1) * H * H, 0, (size_t)(H * H) * sizeof(float));
        dt_set_requires_grad(x, true);
        dt_set_requires_grad(w, true);
        dt_tensor *y = dt_conv2d(x, w, NULL, strides[k], 1);
        dt_tensor *gy = dt_rand_uniform(ctx, 4, y->shape, -1.f, 1.f);
        int64_t per = y->shape[2] * y->shape[3], ow = y->shape[3];
        for (int64_t n = 0; n < N; n++) { /* output channel 2: gradient on the top row only */
            float *g2 = (float *)gy->data + (n * OC + 2) * per;
            memset(g2 + ow, 0, (size_t)(per - ow) * sizeof(float));
        }
        CHECK(dt_backward_with(y, gy) == DT_OK);
        const float *G = w->grad->data;
        int bad = 0;
        for (int64_t o = 0; o < OC; o++)
            for (int64_t c = 0; c < C; c++)
                for (int t = 0; t < 9; t++) {
                    float v = G[(o * C + c) * 9 + t];
                    /* channel 2's top row only meets padding through the kernel's top row */
                    if (((o == 2 && t < 3) || c == C - 1) && v != 0.f) bad++;
                }
        CHECK_MSG(bad == 0, "case %d: %d weight gradients should be exactly 0", k, bad);
        dt_ctx_free(ctx);
    }
}

/* Under bf16 autocast the GEMMs round their operands to bf16 (calls from inside the chunk
 * loop's parallel region included): results stay within bf16 accuracy of f32. */
static void test_conv_autocast(void) {
    const int64_t cs[][2] = {{1, 28}, {8, 14}, {3, 9}}; /* direct, Winograd, im2col (C=3) */
    for (int k = 0; k < 3; k++) {
        dt_ctx *ctx = dt_ctx_new(NULL, 6);
        int64_t C = cs[k][0], H = cs[k][1], N = 24, OC = 16;
        dt_tensor *x = dt_rand_uniform(ctx, 4, (int64_t[]){N, C, H, H}, -1.f, 1.f);
        dt_tensor *w = dt_rand_uniform(ctx, 4, (int64_t[]){OC, C, 3, 3}, -0.3f, 0.3f);
        dt_tensor *y32 = dt_conv2d(x, w, NULL, 1, 1);
        dt_ctx_set_autocast(ctx, DT_DTYPE_BF16);
        dt_tensor *y16 = dt_conv2d(x, w, NULL, 1, 1);
        double num = 0, den = 0;
        for (int64_t i = 0; i < dt_numel(y32); i++) {
            double d = (double)((float *)y16->data)[i] - ((float *)y32->data)[i];
            num += d * d;
            den += (double)((float *)y32->data)[i] * ((float *)y32->data)[i];
        }
        CHECK_MSG(sqrt(num / den) < 2e-2, "case %d: bf16 relative error %g", k, sqrt(num / den));
        dt_ctx_free(ctx);
    }
}

static void test_pool_values(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    /* ties: the first maximum in row-major window order receives the gradient */
    float xv[16] = {1, 5, 2, 2, /**/ 5, 0, 2, 2, /**/ -3, -4, 7, 1, /**/ -2, -1, 1, 7};
    dt_tensor *x = dt_tensor_from_f32(ctx, 4, (int64_t[]){1, 1, 4, 4}, xv);
    dt_set_requires_grad(x, true);
    dt_tensor *y = dt_max_pool2d(x, 2, 2, 0);
    const float *Y = y->data;
    CHECK(Y[0] == 5 && Y[1] == 2 && Y[2] == -1 && Y[3] == 7);
    CHECK(dt_backward_with(y, dt_tensor_from_f32(ctx, 4, y->shape, (float[]){1, 2, 3, 4})) ==
          DT_OK);
    const float *G = x->grad->data;
    float want[16] = {0, 1, 2, 0, /**/ 0, 0, 0, 0, /**/ 0, 0, 4, 0, /**/ 0, 3, 0, 0};
    CHECK(!memcmp(G, want, sizeof want));

    /* padding counts as -inf for max, as 0 (included in the count) for avg */
    float nv[4] = {-1, -2, -3, -4};
    dt_tensor *xn = dt_tensor_from_f32(ctx, 4, (int64_t[]){1, 1, 2, 2}, nv);
    dt_tensor *mp = dt_max_pool2d(xn, 3, 1, 1);
    CHECK(mp && mp->shape[2] == 2 && mp->shape[3] == 2);
    CHECK(((float *)mp->data)[0] == -1 && ((float *)mp->data)[3] == -1);
    dt_tensor *ap = dt_avg_pool2d(xn, 3, 1, 1);
    CHECK_NEAR(((float *)ap->data)[0], -10.0 / 9.0, 1e-6);
    dt_tensor *ap2 = dt_avg_pool2d(xn, 2, 2, 0);
    CHECK(ap2 && ap2->shape[2] == 1 && ap2->shape[3] == 1);
    CHECK_NEAR(((float *)ap2->data)[0], -2.5, 1e-6);
    /* odd sizes: the last row / column is dropped (floor) */
    dt_tensor *odd = dt_max_pool2d(dt_randn(ctx, 4, (int64_t[]){2, 3, 7, 5}, 1.f), 2, 2, 0);
    CHECK(odd && odd->shape[2] == 3 && odd->shape[3] == 2);
    /* FLOPs: k*k per output element */
    dt_ctx_flops_reset(ctx);
    dt_max_pool2d(dt_randn(ctx, 4, (int64_t[]){2, 3, 8, 8}, 1.f), 2, 2, 0);
    CHECK(dt_ctx_flops(ctx).forward == 2 * 3 * 16 * 4);
    dt_ctx_free(ctx);
}

static void test_errors(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    dt_tensor *x = dt_randn(ctx, 4, (int64_t[]){2, 3, 5, 5}, 1.f);
    dt_tensor *w = dt_randn(ctx, 4, (int64_t[]){4, 3, 3, 3}, 1.f);
    dt_tensor *x3 = dt_randn(ctx, 3, (int64_t[]){3, 5, 5}, 1.f);
    CHECK(dt_conv2d(x3, w, NULL, 1, 0) == NULL && strstr(dt_last_error(), "(N, C, H, W)"));
    dt_tensor *w2 = dt_randn(ctx, 4, (int64_t[]){4, 2, 3, 3}, 1.f);
    CHECK(dt_conv2d(x, w2, NULL, 1, 0) == NULL && strstr(dt_last_error(), "channels"));
    dt_tensor *wbig = dt_randn(ctx, 4, (int64_t[]){4, 3, 7, 7}, 1.f);
    CHECK(dt_conv2d(x, wbig, NULL, 1, 0) == NULL && strstr(dt_last_error(), "empty"));
    CHECK(dt_conv2d(x, wbig, NULL, 1, 1) != NULL); /* 5 + 2 >= 7: a 1x1 output */
    dt_tensor *bad_b = dt_randn(ctx, 1, (int64_t[]){3}, 1.f);
    CHECK(dt_conv2d(x, w, bad_b, 1, 0) == NULL && strstr(dt_last_error(), "bias"));
    CHECK(dt_conv2d(x, w, NULL, 0, 0) == NULL && strstr(dt_last_error(), "stride"));
    CHECK(dt_conv2d(NULL, w, NULL, 1, 0) == NULL);
    CHECK(dt_max_pool2d(x3, 2, 2, 0) == NULL && strstr(dt_last_error(), "(N, C, H, W)"));
    CHECK(dt_max_pool2d(x, 2, 2, 2) == NULL && strstr(dt_last_error(), "padding"));
    CHECK(dt_avg_pool2d(x, 7, 1, 0) == NULL && strstr(dt_last_error(), "empty"));
    CHECK(dt_nn_conv2d(0, 4, 3, 1, 1, true) == NULL);
    CHECK(dt_nn_max_pool2d(2, 0, 0) == NULL);
    /* an empty batch is fine, forward and backward */
    dt_tensor *x0 = dt_randn(ctx, 4, (int64_t[]){0, 3, 5, 5}, 1.f);
    dt_set_requires_grad(x0, true);
    dt_tensor *y0 = dt_max_pool2d(dt_conv2d(x0, w, NULL, 1, 1), 2, 2, 0);
    CHECK(y0 && y0->shape[0] == 0 && y0->shape[1] == 4 && y0->shape[2] == 2);
    if (y0) CHECK(dt_backward_with(y0, dt_randn(ctx, 4, y0->shape, 1.f)) == DT_OK);
    /* FLOPs of conv forward: 2*N*OC*OH*OW*C*KH*KW */
    dt_ctx_flops_reset(ctx);
    dt_conv2d(x, w, NULL, 1, 1);
    CHECK(dt_ctx_flops(ctx).forward == 2 * 2 * 4 * 5 * 5 * 3 * 3 * 3);
    dt_ctx_free(ctx);
}

/* ---- the benchmark CNN ---- */

/* y = chain(x) and x's gradient for the gradient g: fused (relu_max_pool2d) or unfused. */
static void relu_pool_run(bool fused, const float *xs, const float *gs, const int64_t *shape, int k,
                          int st, int pad, float **y, int64_t *ny, float **gx) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    dt_tensor *x = dt_tensor_from_f32(ctx, 4, shape, xs);
    dt_set_requires_grad(x, true);
    dt_tensor *out =
        fused ? dt_relu_max_pool2d(x, k, st, pad) : dt_max_pool2d(dt_relu(x), k, st, pad);
    *y = NULL;
    if (!out) {
        CHECK_MSG(false, "%s", dt_last_error());
        dt_ctx_free(ctx);
        return;
    }
    *ny = dt_numel(out);
    dt_tensor *g = dt_tensor_from_f32(ctx, out->ndim, out->shape, gs);
    CHECK(dt_backward_with(out, g) == DT_OK && x->grad);
    *y = malloc(dt_nbytes(out));
    memcpy(*y, out->data, dt_nbytes(out));
    *gx = malloc(dt_nbytes(x));
    memcpy(*gx, x->grad->data, dt_nbytes(x));
    dt_ctx_free(ctx);
}

static void count_hook(dt_module *m, void *user) {
    (void)m;
    ++*(int *)user;
}

static void test_relu_max_pool(void) {
    /* inputs with many windows entirely <= 0 (ties at 0 after relu) and exact ties */
    const int cfg[3][3] = {{2, 2, 0}, {3, 1, 0}, {3, 2, 1}};
    const int64_t shape[4] = {3, 4, 11, 10};
    int64_t n = 3 * 4 * 11 * 10;
    float *xs = malloc((size_t)n * sizeof(float)), *gs = malloc((size_t)n * sizeof(float));
    dt_rng r;
    dt_rng_init(&r, 17);
    dt_rng_fill_uniform(&r, xs, n, -1.f, 0.05f);
    dt_rng_fill_uniform(&r, gs, n, -1.f, 1.f);
    for (int64_t i = 0; i < n; i += 23) xs[i] = 0.25f; /* ties among positive values */
    xs[5] = xs[222] = xs[223] = NAN; /* a NaN wins its windows and stays NaN in both chains */
    for (int c = 0; c < 3; c++) {
        float *y1, *g1, *y2, *g2;
        int64_t ny1 = 0, ny2 = 0;
        relu_pool_run(true, xs, gs, shape, cfg[c][0], cfg[c][1], cfg[c][2], &y1, &ny1, &g1);
        relu_pool_run(false, xs, gs, shape, cfg[c][0], cfg[c][1], cfg[c][2], &y2, &ny2, &g2);
        if (!y1 || !y2) continue;
        int zero_windows = 0;
        for (int64_t i = 0; i < ny1; i++) zero_windows += y1[i] == 0.f;
        CHECK_MSG(zero_windows > ny1 / 10, "config %d: %d of %lld windows <= 0", c, zero_windows,
                  (long long)ny1);
        CHECK_MSG(ny1 == ny2 && !memcmp(y1, y2, (size_t)ny1 * sizeof(float)) &&
                      !memcmp(g1, g2, (size_t)n * sizeof(float)),
                  "config %d: fused and unfused differ", c);
        free(y1), free(g1), free(y2), free(g2);
    }
    free(xs);
    free(gs);

    /* a Sequential runs ReLU → MaxPool2d as the fused op: no full-size ReLU output in the
     * arena (the activations peak drops by the relu output's bytes) */
    size_t peak[2];
    for (int hooked = 0; hooked < 2; hooked++) {
        dt_ctx *ctx = dt_ctx_new(NULL, 1);
        dt_module *net = dt_nn_sequential(dt_nn_relu(), dt_nn_max_pool2d(2, 2, 0), NULL);
        CHECK(net && dt_module_build(net, ctx, 1) == DT_OK);
        int calls = 0;
        if (hooked) {
            net->children[0]->pre_hook = count_hook;
            net->children[0]->hook_user = &calls;
        }
        dt_tensor *x = dt_randn(ctx, 4, (int64_t[]){8, 16, 32, 32}, 1.f);
        dt_set_requires_grad(x, true);
        dt_mem_stats st;
        dt_device_reset_peak(dt_ctx_device(ctx));
        dt_device_stats(dt_ctx_device(ctx), &st);
        int64_t before = st.current[DT_MEM_ACTIVATIONS];
        CHECK(dt_module_forward(net, x) != NULL);
        CHECK(calls == hooked); /* a hooked ReLU runs as its own module */
        dt_device_stats(dt_ctx_device(ctx), &st);
        peak[hooked] = (size_t)(st.peak[DT_MEM_ACTIVATIONS] - before);
        dt_module_free(net);
        dt_ctx_free(ctx);
    }
    CHECK_MSG(peak[1] >= peak[0] + (size_t)8 * 16 * 32 * 32 * 4,
              "activations: fused %zu bytes, with a hook (unfused) %zu", peak[0], peak[1]);
}

static void test_cnn_model(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 5);
    dt_module *net = dt_model_cnn();
    CHECK(net != NULL);
    CHECK(dt_module_build(net, ctx, 1) == DT_OK);
    CHECK(dt_module_num_params(net) == 421642);
    const char *names[] = {"0.weight", "0.bias", "3.weight", "3.bias",
                           "7.weight", "7.bias", "9.weight", "9.bias"};
    CHECK(dt_module_param_count(net) == 8);
    for (int i = 0; i < 8 && i < dt_module_param_count(net); i++)
        CHECK_MSG(!strcmp(dt_module_param_name(net, i), names[i]), "param %d is %s", i,
                  dt_module_param_name(net, i));
    dt_tensor *w0 = dt_module_find_param(net, "0.weight");
    CHECK(w0 && w0->ndim == 4 && w0->shape[0] == 32 && w0->shape[1] == 1 && w0->shape[2] == 3);
    /* PyTorch's init bound 1/sqrt(fan_in): fan_in = 32*3*3 for "3.weight" */
    dt_tensor *w3 = dt_module_find_param(net, "3.weight");
    float bound = 1.f / sqrtf(288.f), mx = 0.f;
    for (int64_t i = 0; i < dt_numel(w3); i++) {
        float a = fabsf(((float *)w3->data)[i]);
        if (a > mx) mx = a;
    }
    CHECK(mx <= bound && mx > 0.9f * bound);

    /* fixed batch, a few SGD steps */
    const int64_t B = 8;
    float *xs = malloc((size_t)B * 784 * sizeof(float));
    dt_rng r;
    dt_rng_init(&r, 3);
    dt_rng_fill_uniform(&r, xs, B * 784, 0.f, 1.f);
    int64_t ys[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    double first = 0, last = 0;
    for (int it = 0; it < 8; it++) {
        dt_tensor *x = dt_tensor_from_f32(ctx, 4, (int64_t[]){B, 1, 28, 28}, xs);
        dt_tensor *logits = dt_module_forward(net, x);
        CHECK(logits && logits->ndim == 2 && logits->shape[0] == B && logits->shape[1] == 10);
        dt_tensor *loss = dt_cross_entropy(logits, dt_tensor_from_i64(ctx, 1, &B, ys), -100);
        CHECK(loss && dt_backward(loss) == DT_OK);
        if (!loss) break;
        double l = dt_item(loss);
        if (it == 0) first = l;
        last = l;
        int64_t np, ng;
        float *p = dt_module_flat_params(net, &np), *g = dt_module_flat_grads(net, &ng);
        CHECK(np == ng);
        for (int64_t i = 0; i < np; i++) p[i] -= 0.1f * g[i];
        dt_module_zero_grad(net);
        dt_ctx_reset(ctx);
    }
    CHECK_MSG(last < first - 0.1, "loss %g -> %g", first, last);

    dt_tensor *x4 = dt_randn(ctx, 4, (int64_t[]){4, 1, 28, 28}, 1.f);
    dt_tensor *y4 = dt_module_forward(net, x4);
    CHECK(y4 && y4->ndim == 2 && y4->shape[0] == 4 && y4->shape[1] == 10);
    free(xs);
    dt_module_free(net);
    dt_ctx_free(ctx);
}

int main(void) {
    TEST_RUN(test_conv_values);
    TEST_RUN(test_conv_deterministic);
    TEST_RUN(test_conv_exact_zero_grads);
    TEST_RUN(test_conv_autocast);
    TEST_RUN(test_pool_values);
    TEST_RUN(test_errors);
    TEST_RUN(test_relu_max_pool);
    TEST_RUN(test_cnn_model);
    TEST_END();
}
