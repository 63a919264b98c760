/* test_lm_decode.c — the decoding step on plain arrays (src/lm/decode.c) against the module
 * forward: after a prompt, the logits of each next token equal the forward's logits at that
 * position of the whole sequence (GPT-2 and Llama fixtures, to 1e-4 of the logits' scale);
 * and dt__gemv_rows against a double-precision product over odd shapes and both thread paths.
 * The forward itself is checked against transformers by test_lm_load. */
#include "lm/lm_fixture.h"
#include "lm/model_impl.h"
#include "tensor/tensor_iface.h"

#include <math.h>

static void test_gemv(void) {
    const int64_t Ns[] = {1, 5, 67, 130}, Ks[] = {1, 7, 16, 33, 200};
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 5; b++)
            for (int threads = 1; threads <= 2; threads++) {
                int64_t N = Ns[a], K = Ks[b];
                float *W = malloc((size_t)(N * K) * sizeof *W), *x = malloc((size_t)K * 4);
                float *bias = malloc((size_t)N * 4), *y = malloc((size_t)N * 4);
                for (int64_t i = 0; i < N * K; i++) W[i] = (float)((i * 37 % 101) - 50) / 50.f;
                for (int64_t i = 0; i < K; i++) x[i] = (float)((i * 13 % 29) - 14) / 7.f;
                for (int64_t i = 0; i < N; i++) bias[i] = (float)i / 10.f;
                dt__gemv_rows(W, N, K, x, b % 2 ? bias : NULL, y, threads);
                double worst = 0;
                for (int64_t n = 0; n < N; n++) {
                    double s = b % 2 ? bias[n] : 0;
                    for (int64_t k = 0; k < K; k++) s += (double)W[n * K + k] * x[k];
                    worst = fmax(worst, fabs(s - y[n]) / (1 + fabs(s)));
                }
                CHECK_MSG(worst < 1e-5, "gemv N %lld K %lld threads %d: rel err %g", (long long)N,
                          (long long)K, threads, worst);
                free(W), free(x), free(bias), free(y);
            }
}

/* The decoder's logits for ids[P..n) after a prompt of P, against the forward of all n. */
static void check_fixture(const char *name, dt_lm *m, json_t *exp) {
    (void)exp;
    const int64_t n = 12, P = 4, V = dt_lm_get_config(m)->vocab;
    int32_t ids[12];
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)((i * 53 + 7) % V);
    dt_ctx *ctx = dt_module_ctx(dt_lm_module(m));
    bool grad = dt_set_grad_enabled(ctx, false);
    dt_tensor *t = dt_tensor_new(ctx, DT_DTYPE_I32, 2, (int64_t[]){1, n});
    memcpy(t->data, ids, sizeof ids);
    dt_tensor *full = dt_contiguous(dt_lm_forward(m, t)); // (1, n, V)
    CHECK_MSG(full != NULL, "%s: %s", name, dt_last_error());
    float *want = full ? malloc((size_t)(n * V) * sizeof *want) : NULL;
    if (want) memcpy(want, full->data, (size_t)(n * V) * sizeof *want);
    dt_ctx_reset(ctx);
    /* the prompt through the module forward into the cache, as dt_lm_generate does */
    dt__lm_cache c = {.cap = n, .len = 0};
    const dt_lm_config *cf = dt_lm_get_config(m);
    c.k = calloc((size_t)cf->n_layer, sizeof *c.k), c.v = calloc((size_t)cf->n_layer, sizeof *c.v);
    int64_t shape[4] = {1, n, cf->n_kv_head, cf->head_dim};
    for (int64_t l = 0; l < cf->n_layer; l++) {
        c.k[l] = dt_tensor_new_heap(ctx, DT_DTYPE_F32, 4, shape, DT_MEM_ACTIVATIONS);
        c.v[l] = dt_tensor_new_heap(ctx, DT_DTYPE_F32, 4, shape, DT_MEM_ACTIVATIONS);
    }
    dt__lm_state_of(dt_lm_module(m))->cache = &c;
    dt_tensor *p = dt_tensor_new(ctx, DT_DTYPE_I32, 2, (int64_t[]){1, P});
    memcpy(p->data, ids, (size_t)P * sizeof *ids);
    CHECK(dt_lm_forward(m, p) != NULL && c.len == P);
    dt_ctx_reset(ctx);
    dt__lm_decoder *d = dt__lm_decoder_new(dt_lm_module(m), n, 1);
    CHECK_MSG(d != NULL, "%s: no decoder for a plain tree", name);
    double worst = 0;
    for (int64_t i = P; d && want && i < n; i++) {
        const float *got = dt__lm_decode(d, &c, ids[i]), *w = want + i * V;
        double scale = 0;
        for (int64_t v = 0; v < V; v++) scale = fmax(scale, fabs(w[v]));
        for (int64_t v = 0; v < V; v++) worst = fmax(worst, fabs(got[v] - w[v]) / scale);
    }
    CHECK_MSG(worst < 1e-4, "%s: decoder logits differ from the forward's by %g", name, worst);
    CHECK(c.len == n);
    dt__lm_decoder_free(d);
    dt__lm_state_of(dt_lm_module(m))->cache = NULL;
    for (int64_t l = 0; l < cf->n_layer; l++) dt_tensor_free(c.k[l]), dt_tensor_free(c.v[l]);
    free(c.k), free(c.v), free(want);
    dt_set_grad_enabled(ctx, grad);
}

static void test_gpt2(void) {
    lm_each(LM_GPT2_FIXTURES, sizeof LM_GPT2_FIXTURES / sizeof *LM_GPT2_FIXTURES, check_fixture);
}

static void test_llama(void) {
    lm_each(LM_LLAMA_FIXTURES, sizeof LM_LLAMA_FIXTURES / sizeof *LM_LLAMA_FIXTURES, check_fixture);
}

int main(void) {
    TEST_RUN(test_gemv);
    TEST_RUN(test_gpt2);
    TEST_RUN(test_llama);
    TEST_END();
}
