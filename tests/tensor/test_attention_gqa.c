/* test_attention_gqa.c — dt_attention beyond the gradient check and the PyTorch goldens: a
 * float64 reference at model sizes (GQA, a cache, D 64 and 128), decoding one step at a time
 * against a growing cache, k and v that need no gradient (the cached-generation case), the same
 * bits with gradients off and with 1 or 2 threads, and the shape errors. */
#include "dtrain/tensor.h"
#include "test.h"

#include <omp.h>
#include <string.h>

static dt_tensor *randt(dt_ctx *ctx, int64_t b, int64_t t, int64_t h, int64_t d) {
    return dt_rand_uniform(ctx, 4, (int64_t[]){b, t, h, d}, -2.f, 2.f);
}

/* float64 attention of contiguous q (B, T, Hq, D), k, v (B, S, Hkv, D) into ref */
static void reference(const dt_tensor *q, const dt_tensor *k, const dt_tensor *v, bool causal,
                      double *ref) {
    int64_t B = q->shape[0], T = q->shape[1], Hq = q->shape[2], D = q->shape[3];
    int64_t S = k->shape[1], Hkv = k->shape[2], G = Hq / Hkv;
    const float *Q = q->data, *K = k->data, *V = v->data;
    double *p = malloc((size_t)S * sizeof(double));
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < Hq; h++) {
                const float *qr = Q + ((b * T + t) * Hq + h) * D;
                int64_t len = causal ? S - T + t + 1 : S, kh = h / G;
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < len; j++) {
                    const float *kr = K + ((b * S + j) * Hkv + kh) * D;
                    double s = 0;
                    for (int64_t e = 0; e < D; e++) s += (double)qr[e] * kr[e];
                    p[j] = s / sqrt((double)D);
                    mx = fmax(mx, p[j]);
                }
                for (int64_t j = 0; j < len; j++) sum += (p[j] = exp(p[j] - mx));
                double *o = ref + ((b * T + t) * Hq + h) * D;
                for (int64_t e = 0; e < D; e++) o[e] = 0;
                for (int64_t j = 0; j < len; j++)
                    for (int64_t e = 0; e < D; e++)
                        o[e] += p[j] / sum * V[((b * S + j) * Hkv + kh) * D + e];
            }
    free(p);
}

static void check_vs_reference(int64_t B, int64_t T, int64_t S, int64_t Hq, int64_t Hkv, int64_t D,
                               bool causal) {
    dt_ctx *ctx = dt_ctx_new(NULL, 11);
    dt_tensor *q = randt(ctx, B, T, Hq, D), *k = randt(ctx, B, S, Hkv, D);
    dt_tensor *v = randt(ctx, B, S, Hkv, D);
    dt_tensor *y = dt_attention(q, k, v, causal);
    CHECK_MSG(y != NULL, "attention: %s", dt_last_error());
    if (y) {
        int64_t n = dt_numel(y), bad = 0;
        double *ref = malloc((size_t)n * sizeof(double)), worst = 0;
        reference(q, k, v, causal, ref);
        const float *Y = y->data;
        for (int64_t i = 0; i < n; i++) {
            double e = fabs(Y[i] - ref[i]) / (1e-5 + 1e-4 * fabs(ref[i]));
            bad += !(e <= 1.0);
            worst = fmax(worst, e);
        }
        CHECK_MSG(bad == 0,
                  "B%lld T%lld S%lld Hq%lld Hkv%lld D%lld causal %d: %lld off, worst %.2f",
                  (long long)B, (long long)T, (long long)S, (long long)Hq, (long long)Hkv,
                  (long long)D, causal, (long long)bad, worst);
        free(ref);
    }
    dt_ctx_free(ctx);
}

static void test_reference(void) {
    check_vs_reference(1, 200, 200, 8, 2, 64, true); /* 4 heads a group, several blocks */
    check_vs_reference(2, 33, 300, 4, 4, 128, true); /* a cache before the queries */
    check_vs_reference(1, 1, 700, 8, 1, 64, true);   /* one decoding step, G = 8 */
    check_vs_reference(2, 17, 40, 6, 3, 16, false);
    check_vs_reference(1, 1, 300, 4, 2, 80, true);  /* few-row kernels, D in two chunks */
    check_vs_reference(2, 3, 100, 4, 4, 128, true); /* few rows, each its own causal limit */
}

/* Feeding the sequence one step at a time against the cache so far gives the full causal
 * attention's rows. */
static void test_decode_steps(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 12);
    int64_t T = 9, Hq = 4, Hkv = 2, D = 64;
    dt_tensor *q = randt(ctx, 2, T, Hq, D), *k = randt(ctx, 2, T, Hkv, D);
    dt_tensor *v = randt(ctx, 2, T, Hkv, D);
    dt_tensor *full = dt_attention(q, k, v, true);
    double worst = 0;
    for (int64_t t = 0; full && t < T; t++) {
        dt_tensor *y = dt_attention(dt_slice(q, 1, t, t + 1), dt_slice(k, 1, 0, t + 1),
                                    dt_slice(v, 1, 0, t + 1), true);
        dt_tensor *row = dt_contiguous(dt_slice(full, 1, t, t + 1));
        CHECK(y && row);
        if (!y || !row) break;
        const float *a = y->data, *b = row->data;
        for (int64_t i = 0; i < dt_numel(y); i++) worst = fmax(worst, fabs(a[i] - b[i]));
    }
    CHECK_MSG(full && worst < 1e-5, "step by step vs full: max |diff| %g", worst);
    dt_ctx_free(ctx);
}

/* q's gradient when k and v need none (a cache), S > T: the same as with all three wanting one */
static void test_cache_without_grad(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 13);
    dt_tensor *q = randt(ctx, 1, 5, 4, 8), *k = randt(ctx, 1, 12, 2, 8);
    dt_tensor *v = randt(ctx, 1, 12, 2, 8), *w = randt(ctx, 1, 5, 4, 8);
    dt_set_requires_grad(q, true);
    CHECK(dt_backward_with(dt_attention(q, k, v, true), w) == DT_OK);
    CHECK(q->grad && !k->grad && !v->grad);
    dt_tensor *gq = q->grad ? dt_contiguous(q->grad) : NULL;
    float *first = gq ? malloc((size_t)dt_nbytes(gq)) : NULL;
    if (first) memcpy(first, gq->data, dt_nbytes(gq));
    q->grad = NULL;
    dt_set_requires_grad(k, true);
    dt_set_requires_grad(v, true);
    CHECK(dt_backward_with(dt_attention(q, k, v, true), w) == DT_OK);
    CHECK(first && q->grad && k->grad && v->grad &&
          memcmp(first, q->grad->data, dt_nbytes(q->grad)) == 0);
    free(first);
    dt_ctx_free(ctx);
}

/* forward and gradients of one case with `threads` threads and grad on or off; B * hkv below
 * the thread count runs the groups one by one with threaded GEMMs */
static float *run_bits(int threads, bool grad, int64_t B, int64_t hkv, size_t *nfloats) {
    int was = omp_get_max_threads();
    omp_set_num_threads(threads);
    dt_ctx *ctx = dt_ctx_new(NULL, 14);
    dt_tensor *x[3] = {randt(ctx, B, 150, 8, 64), randt(ctx, B, 170, hkv, 64),
                       randt(ctx, B, 170, hkv, 64)};
    dt_tensor *w = randt(ctx, B, 150, 8, 64);
    for (int i = 0; i < 3; i++) dt_set_requires_grad(x[i], grad);
    dt_tensor *y = dt_attention(x[0], x[1], x[2], true);
    size_t ny = (size_t)dt_numel(y), n = ny;
    for (int i = 0; grad && i < 3; i++) n += (size_t)dt_numel(x[i]);
    float *out = calloc(n, sizeof(float));
    memcpy(out, y->data, ny * sizeof(float));
    if (grad && dt_backward_with(y, w) == DT_OK) {
        size_t at = ny;
        for (int i = 0; i < 3; i++) {
            memcpy(out + at, x[i]->grad->data, dt_nbytes(x[i]->grad));
            at += (size_t)dt_numel(x[i]);
        }
    }
    *nfloats = n;
    dt_ctx_free(ctx);
    omp_set_num_threads(was);
    return out;
}

static void test_bits(void) {
    const int64_t shapes[2][2] = {{2, 2}, {1, 1}}; /* (B, Hkv) */
    for (int s = 0; s < 2; s++) {
        int64_t B = shapes[s][0], hkv = shapes[s][1];
        size_t n1, n2, n3;
        float *a = run_bits(1, true, B, hkv, &n1), *b = run_bits(2, true, B, hkv, &n2);
        float *c = run_bits(2, false, B, hkv, &n3);
        CHECK_MSG(n1 == n2 && memcmp(a, b, n1 * sizeof(float)) == 0,
                  "B%lld Hkv%lld: 1 vs 2 threads differ", (long long)B, (long long)hkv);
        CHECK_MSG(memcmp(a, c, n3 * sizeof(float)) == 0, "B%lld Hkv%lld: grad on vs off differ",
                  (long long)B, (long long)hkv);
        free(a);
        free(b);
        free(c);
    }
}

static void test_errors(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 15);
    dt_tensor *q = randt(ctx, 1, 4, 6, 8), *k = randt(ctx, 1, 4, 4, 8);
    CHECK(dt_attention(q, k, k, true) == NULL && strstr(dt_last_error(), "kv heads"));
    dt_tensor *q2 = randt(ctx, 1, 5, 4, 8), *k2 = randt(ctx, 1, 3, 2, 8);
    CHECK(dt_attention(q2, k2, k2, true) == NULL && strstr(dt_last_error(), "S >= T"));
    CHECK(dt_attention(q2, k2, k2, false) != NULL); /* not causal: fewer keys are fine */
    /* no keys (not causal): zeros, and zero gradients */
    dt_tensor *q0 = randt(ctx, 1, 2, 2, 4), *k0 = randt(ctx, 1, 0, 1, 4);
    dt_set_requires_grad(q0, true);
    dt_tensor *y0 = dt_attention(q0, k0, k0, false);
    CHECK(y0 && dt_backward_with(y0, q0) == DT_OK && q0->grad);
    for (int64_t i = 0; y0 && q0->grad && i < dt_numel(y0); i++)
        CHECK(((float *)y0->data)[i] == 0.f && ((float *)q0->grad->data)[i] == 0.f);
    dt_tensor *k3 = randt(ctx, 1, 5, 2, 4);
    CHECK(dt_attention(q2, k3, k3, true) == NULL && strstr(dt_last_error(), "(B, T, Hq, D)"));
    dt_ctx_free(ctx);
}

int main(void) {
    TEST_RUN(test_reference);
    TEST_RUN(test_decode_steps);
    TEST_RUN(test_cache_without_grad);
    TEST_RUN(test_bits);
    TEST_RUN(test_errors);
    TEST_END();
}
