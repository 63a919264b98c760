/* Tests for the fused causal self-attention op (src/tensor/ops_attention.c) and the GPT
 * builder (src/nn/gpt.c): attention forward and backward against a naive double-precision
 * reference, the causal property, thread-count determinism, the GPT's parameter count and
 * PyTorch-style names, forward shapes, a short training run and error cases. */
#include "dtrain/nn.h"
#include "dtrain/optim.h"
#include "test.h"

#include <omp.h>
#include <string.h>

/* ---- naive reference ---------------------------------------------------------------------- */

/* y (B, T, C) and, if dy is given, dqkv (B, T, 3C) in double from qkv (B, T, 3C). */
static void ref_attention(const float *qkv, const float *dy, int64_t B, int64_t T, int64_t NH,
                          int64_t HD, double *y, double *dqkv) {
    int64_t C = NH * HD, ld = 3 * C;
    double scale = 1.0 / sqrt((double)HD);
    double *p = malloc(sizeof(double) * (size_t)(T * T));
    double *dp = malloc(sizeof(double) * (size_t)(T * T));
    if (dqkv) memset(dqkv, 0, sizeof(double) * (size_t)(B * T * ld));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < NH; h++) {
            const float *q = qkv + b * T * ld + h * HD, *k = q + C, *v = q + 2 * C;
            for (int64_t i = 0; i < T; i++) {
                double mx = -1e300;
                for (int64_t j = 0; j <= i; j++) {
                    double s = 0;
                    for (int64_t d = 0; d < HD; d++) s += (double)q[i * ld + d] * k[j * ld + d];
                    p[i * T + j] = s * scale;
                    if (p[i * T + j] > mx) mx = p[i * T + j];
                }
                double sum = 0;
                for (int64_t j = 0; j <= i; j++) sum += (p[i * T + j] = exp(p[i * T + j] - mx));
                for (int64_t j = 0; j <= i; j++) p[i * T + j] /= sum;
                for (int64_t d = 0; d < HD; d++) {
                    double s = 0;
                    for (int64_t j = 0; j <= i; j++) s += p[i * T + j] * v[j * ld + d];
                    y[(b * T + i) * C + h * HD + d] = s;
                }
            }
            if (!dqkv) continue;
            const float *g = dy + b * T * C + h * HD;
            double *dq = dqkv + b * T * ld + h * HD, *dk = dq + C, *dv = dq + 2 * C;
            for (int64_t i = 0; i < T; i++) {
                double D = 0;
                for (int64_t j = 0; j <= i; j++) {
                    double s = 0;
                    for (int64_t d = 0; d < HD; d++) s += (double)g[i * C + d] * v[j * ld + d];
                    dp[i * T + j] = s;
                    D += s * p[i * T + j];
                }
                for (int64_t j = 0; j <= i; j++) {
                    double ds = p[i * T + j] * (dp[i * T + j] - D) * scale;
                    for (int64_t d = 0; d < HD; d++) {
                        dq[i * ld + d] += ds * k[j * ld + d];
                        dk[j * ld + d] += ds * q[i * ld + d];
                        dv[j * ld + d] += p[i * T + j] * g[i * C + d];
                    }
                }
            }
        }
    free(p);
    free(dp);
}

/* max |a - ref| / (1 + max |ref|) */
static double rel_err(const float *a, const double *ref, int64_t n) {
    double md = 0, mr = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(a[i] - ref[i]);
        if (d > md || d != d) md = d;
        if (fabs(ref[i]) > mr) mr = fabs(ref[i]);
    }
    return md / (1 + mr);
}

static void check_attention_case(int64_t B, int64_t T, int64_t NH, int64_t HD) {
    dt_ctx *ctx = dt_ctx_new(NULL, 7);
    int64_t C = NH * HD;
    dt_tensor *x = dt_rand_uniform(ctx, 3, (int64_t[]){B, T, 3 * C}, -2.f, 2.f);
    dt_tensor *g = dt_rand_uniform(ctx, 3, (int64_t[]){B, T, C}, -1.f, 1.f);
    dt_set_requires_grad(x, true);
    dt_tensor *y = dt_causal_self_attention(x, (int)NH);
    CHECK(y && y->ndim == 3 && y->shape[0] == B && y->shape[1] == T && y->shape[2] == C);
    if (!y) {
        dt_ctx_free(ctx);
        return;
    }
    CHECK(dt_backward_with(y, g) == DT_OK);
    double *ry = malloc(sizeof(double) * (size_t)(B * T * C));
    double *rg = malloc(sizeof(double) * (size_t)(B * T * 3 * C));
    ref_attention(x->data, g->data, B, T, NH, HD, ry, rg);
    double ey = rel_err(y->data, ry, B * T * C);
    double eg = x->grad ? rel_err(x->grad->data, rg, B * T * 3 * C) : 1e9;
    CHECK_MSG(ey < 2e-6, "forward B%lld T%lld NH%lld HD%lld: rel err %g", (long long)B,
              (long long)T, (long long)NH, (long long)HD, ey);
    CHECK_MSG(eg < 1e-5, "backward B%lld T%lld NH%lld HD%lld: rel err %g", (long long)B,
              (long long)T, (long long)NH, (long long)HD, eg);
    free(ry);
    free(rg);
    dt_ctx_free(ctx);
}

static void test_attention_reference(void) {
    check_attention_case(2, 5, 2, 3);
    check_attention_case(1, 1, 1, 8);
    check_attention_case(3, 64, 2, 16);
    check_attention_case(2, 100, 4, 8);
    check_attention_case(1, 193, 1, 5); /* four row blocks, last one partial */
}

/* Two uses of one qkv: the first backward gets a fresh gradient buffer, the second adds into
 * it, so the result is twice the single-use gradient. */
static void test_attention_accumulate(void) {
    int64_t B = 2, T = 70, NH = 2, HD = 4, C = NH * HD;
    dt_ctx *ctx = dt_ctx_new(NULL, 17);
    dt_tensor *x = dt_rand_uniform(ctx, 3, (int64_t[]){B, T, 3 * C}, -2.f, 2.f);
    dt_tensor *g = dt_rand_uniform(ctx, 3, (int64_t[]){B, T, C}, -1.f, 1.f);
    dt_set_requires_grad(x, true);
    dt_tensor *s =
        dt_add(dt_causal_self_attention(x, (int)NH), dt_causal_self_attention(x, (int)NH));
    CHECK(s && dt_backward_with(s, g) == DT_OK && x->grad);
    double *ry = malloc(sizeof(double) * (size_t)(B * T * C));
    double *rg = malloc(sizeof(double) * (size_t)(B * T * 3 * C));
    ref_attention(x->data, g->data, B, T, NH, HD, ry, rg);
    for (int64_t i = 0; i < B * T * 3 * C; i++) rg[i] *= 2;
    double eg = x->grad ? rel_err(x->grad->data, rg, B * T * 3 * C) : 1e9;
    CHECK_MSG(eg < 1e-5, "accumulated gradient rel err %g", eg);
    free(ry);
    free(rg);
    dt_ctx_free(ctx);
}

/* Without gradients the op uses a per-thread scratch instead of saving P: same values. */
static void test_attention_no_grad(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 3);
    dt_tensor *x = dt_rand_uniform(ctx, 3, (int64_t[]){2, 90, 48}, -2.f, 2.f);
    dt_tensor *y1 = dt_causal_self_attention(x, 4); /* x needs no grad: not recorded */
    dt_set_requires_grad(x, true);
    dt_tensor *y2 = dt_causal_self_attention(x, 4);
    CHECK(y1 && y2 && memcmp(y1->data, y2->data, dt_nbytes(y1)) == 0);
    CHECK(y2 && y2->node != NULL);
    CHECK(y1 && y1->node == NULL);
    dt_ctx_free(ctx);
}

/* Changing the q, k, v of tokens t0.. never changes outputs before t0 (bit for bit). */
static void test_attention_causal(void) {
    int64_t B = 2, T = 77, NH = 2, HD = 8, C = NH * HD;
    int64_t cuts[] = {1, 30, 64, 70, 76};
    dt_ctx *ctx = dt_ctx_new(NULL, 5);
    dt_tensor *x = dt_rand_uniform(ctx, 3, (int64_t[]){B, T, 3 * C}, -2.f, 2.f);
    dt_tensor *y1 = dt_causal_self_attention(x, (int)NH);
    float *X = x->data;
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        int64_t t0 = cuts[c];
        dt_tensor *x2 = dt_tensor_from_f32(ctx, 3, x->shape, X);
        float *X2 = x2->data;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = t0; t < T; t++)
                for (int64_t j = 0; j < 3 * C; j++) X2[(b * T + t) * 3 * C + j] *= -3.f;
        dt_tensor *y2 = dt_causal_self_attention(x2, (int)NH);
        const float *a = y1->data, *b2 = y2->data;
        bool same_before = true, diff_after = false;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t j = 0; j < C; j++) {
                    int64_t i = (b * T + t) * C + j;
                    if (t < t0 && a[i] != b2[i]) same_before = false;
                    if (t >= t0 && a[i] != b2[i]) diff_after = true;
                }
        CHECK_MSG(same_before, "outputs before t0=%lld changed", (long long)t0);
        CHECK_MSG(diff_after, "outputs from t0=%lld on did not change", (long long)t0);
    }
    dt_ctx_free(ctx);
}

/* Same bits with 1 and 2 threads, forward and backward. */
static void test_attention_threads(void) {
    int64_t shape[3] = {4, 100, 3 * 32};
    float *out[2], *grad[2];
    int nt0 = omp_get_max_threads();
    for (int r = 0; r < 2; r++) {
        omp_set_num_threads(r + 1);
        dt_ctx *ctx = dt_ctx_new(NULL, 11);
        dt_tensor *x = dt_rand_uniform(ctx, 3, shape, -2.f, 2.f);
        dt_tensor *g = dt_rand_uniform(ctx, 3, (int64_t[]){4, 100, 32}, -1.f, 1.f);
        dt_set_requires_grad(x, true);
        dt_tensor *y = dt_causal_self_attention(x, 4);
        CHECK(y && dt_backward_with(y, g) == DT_OK);
        out[r] = malloc(dt_nbytes(y));
        grad[r] = malloc(dt_nbytes(x));
        memcpy(out[r], y->data, dt_nbytes(y));
        memcpy(grad[r], x->grad->data, dt_nbytes(x));
        dt_ctx_free(ctx);
    }
    omp_set_num_threads(nt0);
    CHECK(memcmp(out[0], out[1], sizeof(float) * 4 * 100 * 32) == 0);
    CHECK(memcmp(grad[0], grad[1], sizeof(float) * 4 * 100 * 96) == 0);
    for (int r = 0; r < 2; r++) free(out[r]), free(grad[r]);
}

/* Under bf16 autocast attention keeps its per-head products in f32 (the projections around
 * it are what autocast speeds up): the result equals the f32 op and the backward runs. */
static void test_attention_bf16(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 13);
    dt_tensor *x = dt_rand_uniform(ctx, 3, (int64_t[]){2, 70, 3 * 64}, -1.f, 1.f);
    dt_set_requires_grad(x, true);
    dt_tensor *y32 = dt_causal_self_attention(x, 2);
    CHECK(dt_ctx_set_autocast(ctx, DT_DTYPE_BF16) == DT_OK);
    dt_tensor *y16 = dt_causal_self_attention(x, 2);
    CHECK(y32 && y16);
    if (y32 && y16) {
        double md = 0;
        for (int64_t i = 0; i < dt_numel(y32); i++) {
            double d = fabs(((float *)y32->data)[i] - ((float *)y16->data)[i]);
            if (d > md) md = d;
        }
        CHECK_MSG(md == 0, "bf16 vs f32 max diff %g", md);
        CHECK(dt_backward(dt_sum_all(y16)) == DT_OK && x->grad != NULL);
    }
    dt_ctx_free(ctx);
}

static void test_attention_errors(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    dt_tensor *x = dt_rand_uniform(ctx, 3, (int64_t[]){2, 4, 12}, -1.f, 1.f);
    CHECK(dt_causal_self_attention(x, 3) == NULL); /* C = 4 not divisible by 3 */
    CHECK(strstr(dt_last_error(), "heads") != NULL);
    CHECK(dt_causal_self_attention(x, 0) == NULL);
    dt_tensor *bad = dt_rand_uniform(ctx, 3, (int64_t[]){2, 4, 10}, -1.f, 1.f);
    CHECK(dt_causal_self_attention(bad, 1) == NULL); /* 10 not a multiple of 3 */
    dt_tensor *flat = dt_rand_uniform(ctx, 2, (int64_t[]){4, 12}, -1.f, 1.f);
    CHECK(dt_causal_self_attention(flat, 1) == NULL);
    CHECK(dt_causal_self_attention(NULL, 1) == NULL);
    /* FLOPs: two full T x T matmuls + 5 per score forward */
    dt_ctx_flops_reset(ctx);
    CHECK(dt_causal_self_attention(x, 2) != NULL);
    int64_t scores = 2 * 2 * 4 * 4;
    CHECK(dt_ctx_flops(ctx).forward == 2 * 2 * scores * 2 + 5 * scores);
    dt_ctx_free(ctx);
}

/* ---- GPT ----------------------------------------------------------------------------------- */

static const dt_gpt_config small_cfg = {
    .vocab = 11, .seq = 9, .d_model = 12, .n_head = 3, .n_layer = 2, .dropout = 0.f};

static int64_t expected_params(const dt_gpt_config *c) {
    int64_t V = c->vocab, S = c->seq, D = c->d_model, L = c->n_layer;
    int64_t block = 2 * D               /* ln_1 */
                    + 3 * D * D + 3 * D /* attn.c_attn */
                    + D * D + D         /* attn.c_proj */
                    + 2 * D             /* ln_2 */
                    + 4 * D * D + 4 * D /* mlp.c_fc */
                    + 4 * D * D + D;    /* mlp.c_proj */
    return V * D + S * D + L * block + 2 * D + V * D;
}

static void test_gpt_build(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    dt_module *net = dt_model_gpt(&small_cfg);
    CHECK(net != NULL);
    if (!net) {
        dt_ctx_free(ctx);
        return;
    }
    CHECK(dt_module_num_params(net) == expected_params(&small_cfg));
    CHECK(dt_module_build(net, ctx, 3) == DT_OK);
    CHECK(dt_module_num_params(net) == expected_params(&small_cfg));
    const char *per_block[] = {"ln_1.weight",      "ln_1.bias",          "attn.c_attn.weight",
                               "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
                               "ln_2.weight",      "ln_2.bias",          "mlp.c_fc.weight",
                               "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
    char want[40][64];
    int nw = 0;
    snprintf(want[nw++], 64, "wte.weight");
    snprintf(want[nw++], 64, "wpe.weight");
    for (int l = 0; l < small_cfg.n_layer; l++)
        for (int j = 0; j < 12; j++) snprintf(want[nw++], 64, "h.%d.%s", l, per_block[j]);
    snprintf(want[nw++], 64, "ln_f.weight");
    snprintf(want[nw++], 64, "ln_f.bias");
    snprintf(want[nw++], 64, "lm_head.weight");
    CHECK(dt_module_param_count(net) == nw);
    for (int i = 0; i < nw && i < dt_module_param_count(net); i++)
        CHECK_MSG(!strcmp(dt_module_param_name(net, i), want[i]), "param %d is '%s', want '%s'", i,
                  dt_module_param_name(net, i), want[i]);
    /* shapes: Linear weights are (out, in) */
    int64_t D = small_cfg.d_model;
    dt_tensor *w = dt_module_find_param(net, "h.1.attn.c_attn.weight");
    CHECK(w && w->shape[0] == 3 * D && w->shape[1] == D);
    w = dt_module_find_param(net, "h.0.mlp.c_proj.weight");
    CHECK(w && w->shape[0] == D && w->shape[1] == 4 * D);
    w = dt_module_find_param(net, "lm_head.weight");
    CHECK(w && w->shape[0] == small_cfg.vocab && w->shape[1] == D);
    w = dt_module_find_param(net, "wpe.weight");
    CHECK(w && w->shape[0] == small_cfg.seq && w->shape[1] == D);
    /* init: LayerNorm ones / zeros; embeddings ~N(0, 1) (not all equal, std near 1) */
    dt_tensor *lnw = dt_module_find_param(net, "h.0.ln_2.weight"),
              *lnb = dt_module_find_param(net, "ln_f.bias");
    CHECK(lnw && ((float *)lnw->data)[5] == 1.f && lnb && ((float *)lnb->data)[3] == 0.f);
    dt_tensor *wte = dt_module_find_param(net, "wte.weight");
    double ss = 0;
    for (int64_t i = 0; i < dt_numel(wte); i++)
        ss += (double)((float *)wte->data)[i] * ((float *)wte->data)[i];
    double sd = sqrt(ss / (double)dt_numel(wte));
    CHECK_MSG(sd > 0.8 && sd < 1.2, "wte std %g", sd);
    dt_module_free(net);
    dt_ctx_free(ctx);
}

static void test_gpt_forward(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    dt_module *net = dt_model_gpt(&small_cfg);
    CHECK(net && dt_module_build(net, ctx, 3) == DT_OK);
    /* (B=2, T'=5) i32 and full-length i64 */
    int32_t t32[10] = {0, 1, 2, 3, 4, 10, 9, 8, 7, 6};
    dt_tensor *x = dt_tensor_wrap(ctx, DT_DTYPE_I32, 2, (int64_t[]){2, 5}, t32);
    dt_tensor *y = dt_module_forward(net, x);
    CHECK(y && y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 5 &&
          y->shape[2] == small_cfg.vocab);
    int64_t t64[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    dt_tensor *y2 = dt_module_forward(net, dt_tensor_from_i64(ctx, 2, (int64_t[]){1, 9}, t64));
    CHECK(y2 && y2->shape[1] == 9 && y2->shape[2] == small_cfg.vocab);
    /* causal through the whole model: the first 4 logits rows of [1..4, x] do not depend on x */
    int64_t a[5] = {1, 2, 3, 4, 5}, b[5] = {1, 2, 3, 4, 10};
    dt_tensor *ya = dt_module_forward(net, dt_tensor_from_i64(ctx, 2, (int64_t[]){1, 5}, a));
    dt_tensor *yb = dt_module_forward(net, dt_tensor_from_i64(ctx, 2, (int64_t[]){1, 5}, b));
    int64_t V = small_cfg.vocab;
    CHECK(ya && yb && memcmp(ya->data, yb->data, sizeof(float) * 4 * V) == 0);
    CHECK(ya && yb &&
          memcmp((float *)ya->data + 4 * V, (float *)yb->data + 4 * V, sizeof(float) * V) != 0);
    /* the gradient reaches every parameter, wpe included */
    dt_module_zero_grad(net);
    dt_tensor *loss = dt_mean_all(y);
    CHECK(dt_backward(loss) == DT_OK);
    dt_tensor *gw = dt_module_find_param(net, "wpe.weight")->grad;
    double gsum = 0;
    for (int64_t i = 0; i < 5 * small_cfg.d_model; i++) gsum += fabs(((float *)gw->data)[i]);
    CHECK(gsum > 0);
    double grow = 0; /* rows >= 5 of wpe were not used */
    for (int64_t i = 5 * small_cfg.d_model; i < dt_numel(gw); i++)
        grow += fabs(((float *)gw->data)[i]);
    CHECK(grow == 0);
    dt_module_free(net);
    dt_ctx_free(ctx);
}

static void test_gpt_errors(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    dt_module *net = dt_model_gpt(&small_cfg);
    CHECK(net && dt_module_build(net, ctx, 3) == DT_OK);
    int64_t t[20] = {0};
    CHECK(dt_module_forward(net, dt_tensor_from_i64(ctx, 2, (int64_t[]){2, 10}, t)) == NULL);
    CHECK(strstr(dt_last_error(), "context length 9") != NULL);
    t[3] = small_cfg.vocab; /* id == V */
    CHECK(dt_module_forward(net, dt_tensor_from_i64(ctx, 2, (int64_t[]){1, 4}, t)) == NULL);
    t[3] = -1;
    CHECK(dt_module_forward(net, dt_tensor_from_i64(ctx, 2, (int64_t[]){1, 4}, t)) == NULL);
    CHECK(dt_module_forward(net, dt_rand_uniform(ctx, 2, (int64_t[]){1, 4}, 0.f, 1.f)) == NULL);
    CHECK(dt_module_forward(net, dt_tensor_from_i64(ctx, 1, (int64_t[]){4}, t)) == NULL);
    dt_module_free(net);
    dt_gpt_config bad = small_cfg;
    bad.n_head = 5; /* 12 % 5 != 0 */
    CHECK(dt_model_gpt(&bad) == NULL);
    bad = small_cfg;
    bad.vocab = 0;
    CHECK(dt_model_gpt(&bad) == NULL);
    bad = small_cfg;
    bad.dropout = 1.f;
    CHECK(dt_model_gpt(&bad) == NULL);
    CHECK(dt_model_gpt(NULL) == NULL);
    dt_ctx_free(ctx);
}

/* A tiny model learns a repeated sequence: SGD over the flat buffers lowers the loss clearly.
 * Also runs with dropout > 0 in training mode to exercise those paths. */
static double train_run(float dropout, int steps, double *first) {
    dt_gpt_config cfg = {
        .vocab = 8, .seq = 16, .d_model = 32, .n_head = 4, .n_layer = 2, .dropout = dropout};
    dt_ctx *ctx = dt_ctx_new(NULL, 5);
    dt_module *net = dt_model_gpt(&cfg);
    CHECK(net && dt_module_build(net, ctx, 9) == DT_OK);
    int64_t B = 4, T = 16, tok[64], tgt[64];
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            tok[b * T + t] = (b + t) % 5;     /* 0 1 2 3 4 0 1 ... */
            tgt[b * T + t] = (b + t + 1) % 5; /* next token */
        }
    int64_t n;
    float *p = dt_module_flat_params(net, &n), *g = dt_module_flat_grads(net, NULL);
    double last = 0;
    for (int s = 0; s < steps; s++) {
        dt_tensor *x = dt_tensor_from_i64(ctx, 2, (int64_t[]){B, T}, tok);
        dt_tensor *y = dt_tensor_from_i64(ctx, 1, (int64_t[]){B * T}, tgt);
        dt_tensor *loss = dt_cross_entropy(dt_module_forward(net, x), y, -100);
        dt_module_zero_grad(net);
        CHECK(loss && dt_backward(loss) == DT_OK);
        if (!loss) break;
        last = dt_item(loss);
        if (s == 0) *first = last;
        for (int64_t i = 0; i < n; i++) p[i] -= 0.1f * g[i];
        dt_ctx_reset(ctx);
    }
    dt_module_free(net);
    dt_ctx_free(ctx);
    return last;
}

static void test_gpt_train(void) {
    double first = 0, last = train_run(0.f, 60, &first);
    CHECK_MSG(last < 0.3 * first, "loss %g -> %g", first, last);
    fprintf(stderr, "  loss %.4f -> %.4f\n", first, last);
    last = train_run(0.1f, 60, &first);
    CHECK_MSG(last < 0.5 * first, "with dropout: loss %g -> %g", first, last);
}

/* The same bits for the loss and every parameter gradient with 1 and 2 threads. */
static void test_gpt_threads(void) {
    dt_gpt_config cfg = {.vocab = 64, .seq = 80, .d_model = 64, .n_head = 4, .n_layer = 2};
    int64_t B = 4, T = 80, tok[320], tgt[320];
    for (int64_t i = 0; i < B * T; i++) tok[i] = (i * 7) % 64, tgt[i] = (i * 5 + 3) % 64;
    float *grads[2] = {NULL, NULL};
    double loss[2] = {0, 0};
    int64_t n = 0;
    int nt0 = omp_get_max_threads();
    for (int r = 0; r < 2; r++) {
        omp_set_num_threads(r + 1);
        dt_ctx *ctx = dt_ctx_new(NULL, 5);
        dt_module *net = dt_model_gpt(&cfg);
        CHECK(net && dt_module_build(net, ctx, 9) == DT_OK);
        dt_tensor *x = dt_tensor_from_i64(ctx, 2, (int64_t[]){B, T}, tok);
        dt_tensor *y = dt_tensor_from_i64(ctx, 1, (int64_t[]){B * T}, tgt);
        dt_tensor *l = dt_cross_entropy(dt_module_forward(net, x), y, -100);
        CHECK(l && dt_backward(l) == DT_OK);
        loss[r] = l ? dt_item(l) : -1;
        float *g = dt_module_flat_grads(net, &n);
        grads[r] = malloc(sizeof(float) * (size_t)n);
        memcpy(grads[r], g, sizeof(float) * (size_t)n);
        dt_module_free(net);
        dt_ctx_free(ctx);
    }
    omp_set_num_threads(nt0);
    CHECK(loss[0] == loss[1]);
    CHECK(memcmp(grads[0], grads[1], sizeof(float) * (size_t)n) == 0);
    free(grads[0]);
    free(grads[1]);
}

/* dt_module_zero_grad_lazy (and dt_optim_step_module_zero_grad, which ends with it): the same
 * bits as zeroing the gradients for real, over AdamW steps of a GPT; a parameter used twice
 * in a graph accumulates its second contribution onto the stored first; a module the backward
 * does not reach reads zero afterwards, even through a pointer taken before. Each buffer is
 * filled with garbage first, so a backward that added to a stale gradient would show. */
static void test_zero_grad_lazy(void) {
    dt_gpt_config cfg = {.vocab = 32, .seq = 40, .d_model = 32, .n_head = 4, .n_layer = 2};
    int64_t B = 3, T = 40, tok[120], tgt[120];
    for (int64_t i = 0; i < B * T; i++) tok[i] = (i * 7) % 32, tgt[i] = (i * 5 + 3) % 32;
    float *params[2] = {NULL, NULL}, *grads[2] = {NULL, NULL};
    int64_t n = 0;
    for (int lazy = 0; lazy < 2; lazy++) {
        dt_ctx *ctx = dt_ctx_new(NULL, 5);
        dt_module *net = dt_model_gpt(&cfg);
        CHECK(net && dt_module_build(net, ctx, 9) == DT_OK);
        dt_optim_config oc = dt_optim_defaults(DT_OPTIM_ADAMW);
        dt_optimizer *opt = dt_optim_new_for_module(&oc, net);
        CHECK(opt != NULL);
        float *g = dt_module_flat_grads(net, &n);
        for (int64_t i = 0; i < n; i++) g[i] = 1e3f + (float)i; /* garbage */
        if (lazy) dt_module_zero_grad_lazy(net);
        for (int s = 0; s < 3; s++) {
            if (!lazy) dt_module_zero_grad(net);
            dt_tensor *x = dt_tensor_from_i64(ctx, 2, (int64_t[]){B, T}, tok);
            dt_tensor *y = dt_tensor_from_i64(ctx, 1, (int64_t[]){B * T}, tgt);
            dt_tensor *l = dt_cross_entropy(dt_module_forward(net, x), y, -100);
            CHECK(l && dt_backward(l) == DT_OK);
            if (s == 2) { /* the last gradients, read through the pointer taken at the start */
                grads[lazy] = malloc(sizeof(float) * (size_t)n);
                memcpy(grads[lazy], g, sizeof(float) * (size_t)n);
            }
            CHECK((lazy ? dt_optim_step_module_zero_grad(opt, net)
                        : dt_optim_step_module(opt, net)) == DT_OK);
            dt_ctx_reset(ctx);
        }
        params[lazy] = malloc(sizeof(float) * (size_t)n);
        memcpy(params[lazy], dt_module_flat_params(net, NULL), sizeof(float) * (size_t)n);
        if (lazy) { /* zero through the accessors after the fused step */
            dt_tensor *w = dt_module_find_param(net, "h.0.mlp.c_fc.weight");
            CHECK(w && ((float *)w->grad->data)[5] == 0.f);
            int left = 0;
            g = dt_module_flat_grads(net, NULL);
            for (int64_t i = 0; i < n; i++) left += g[i] != 0.f;
            CHECK(left == 0);
        }
        dt_optim_free(opt);
        dt_module_free(net);
        dt_ctx_free(ctx);
    }
    CHECK(grads[0] && grads[1] && memcmp(grads[0], grads[1], sizeof(float) * (size_t)n) == 0);
    CHECK(params[0] && params[1] && memcmp(params[0], params[1], sizeof(float) * (size_t)n) == 0);
    for (int i = 0; i < 2; i++) free(grads[i]), free(params[i]);

    /* a weight used twice, and a module out of the graph */
    dt_ctx *ctx = dt_ctx_new(NULL, 2);
    dt_module *m = dt_model_mlp(16, 16, 1, 16), *other = dt_model_mlp(4, 8, 1, 2);
    CHECK(m && other && dt_module_build(m, ctx, 1) == DT_OK &&
          dt_module_build(other, ctx, 2) == DT_OK);
    int64_t nm, no;
    float *gm = dt_module_flat_grads(m, &nm), *go = dt_module_flat_grads(other, &no);
    float *want = malloc(sizeof(float) * (size_t)nm);
    dt_tensor *w = dt_module_param_tensor(m, 0);
    dt_tensor *x = dt_rand_uniform(ctx, 2, (int64_t[]){8, 16}, -1.f, 1.f);
    CHECK(w && w->ndim == 2 && w->shape[0] == 16 && w->shape[1] == 16);
    for (int lazy = 0; lazy < 2; lazy++) {
        for (int64_t i = 0; i < nm; i++) gm[i] = -7.f;
        for (int i = 0; i < dt_module_param_count(other); i++) { /* the padding stays 0 */
            dt_tensor *t = dt_module_param_tensor(other, i);
            for (int64_t j = 0; j < dt_numel(t); j++) ((float *)t->grad->data)[j] = 3.f;
        }
        if (lazy) {
            dt_module_zero_grad_lazy(m);
            dt_module_zero_grad_lazy(other);
        } else {
            dt_module_zero_grad(m);
        }
        dt_tensor *l = dt_mean_all(dt_linear(dt_linear(x, w, NULL), w, NULL));
        CHECK(l && dt_backward(l) == DT_OK);
        if (!lazy) memcpy(want, gm, sizeof(float) * (size_t)nm);
    }
    CHECK(memcmp(want, gm, sizeof(float) * (size_t)nm) == 0);
    int left = 0;
    for (int64_t i = 0; i < no; i++) left += go[i] != 0.f;
    CHECK_MSG(left == 0, "%d gradients of the unreached module are not zero", left);
    CHECK(go[0] == 0.f && dt_module_flat_grads(other, NULL) == go);
    free(want);
    dt_module_free(other);
    dt_module_free(m);
    dt_ctx_free(ctx);
}

/* The pipeline pieces chained (embedding, blocks, head) compute the model's forward: same
 * flat layout, so the same weights give the same logits bit for bit. */
static void test_gpt_pieces(void) {
    dt_gpt_config g = {.vocab = 20, .seq = 6, .d_model = 16, .n_head = 2, .n_layer = 2};
    dt_ctx *c = dt_ctx_new(NULL, 1);
    dt_module *full = dt_model_gpt(&g);
    dt_module *chain = dt_nn_sequential(dt_gpt_embedding(&g), dt_gpt_block(&g), dt_gpt_block(&g),
                                        dt_gpt_head(&g), NULL);
    CHECK(full && chain);
    CHECK(dt_module_build(full, c, 5) == DT_OK && dt_module_build(chain, c, 6) == DT_OK);
    int64_t n1, n2;
    float *p1 = dt_module_flat_params(full, &n1), *p2 = dt_module_flat_params(chain, &n2);
    CHECK(n1 == n2 && dt_module_num_params(full) == dt_module_num_params(chain));
    if (n1 == n2) memcpy(p2, p1, (size_t)n1 * sizeof(float));
    CHECK(strcmp(dt_module_param_name(chain, 0), "0.wte.weight") == 0);
    int64_t tok[12];
    for (int i = 0; i < 12; i++) tok[i] = (i * 7) % 20;
    dt_tensor *x = dt_tensor_from_i64(c, 2, (int64_t[]){2, 6}, tok);
    dt_tensor *a = dt_module_forward(full, x), *b = dt_module_forward(chain, x);
    CHECK(a && b && dt_numel(a) == dt_numel(b) &&
          memcmp(a->data, b->data, (size_t)dt_numel(a) * sizeof(float)) == 0);
    CHECK(dt_gpt_block(NULL) == NULL && dt_gpt_head(NULL) == NULL);
    g.n_head = 3;
    CHECK(dt_gpt_embedding(&g) == NULL && strstr(dt_last_error(), "n_head"));
    dt_module_free(full);
    dt_module_free(chain);
    dt_ctx_free(c);
}

int main(void) {
    TEST_RUN(test_attention_reference);
    TEST_RUN(test_attention_accumulate);
    TEST_RUN(test_attention_no_grad);
    TEST_RUN(test_attention_causal);
    TEST_RUN(test_attention_threads);
    TEST_RUN(test_attention_bf16);
    TEST_RUN(test_attention_errors);
    TEST_RUN(test_gpt_build);
    TEST_RUN(test_gpt_forward);
    TEST_RUN(test_gpt_errors);
    TEST_RUN(test_gpt_threads);
    TEST_RUN(test_gpt_train);
    TEST_RUN(test_gpt_pieces);
    TEST_RUN(test_zero_grad_lazy);
    TEST_END();
}
