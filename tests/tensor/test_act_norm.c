/* test_act_norm.c — forward values of the activations, norms, embedding and dropout against
 * libm / hand-computed references (PyTorch 1.13 values pasted as constants), embedding_sum
 * against its unfused ops, the accuracy of
 * the vectorised exp / tanh, dropout's RNG contract, thread-count independence of the
 * reductions, and the modules of src/nn/norm_act.c. */
#include "dtrain/nn.h"
#include "test.h"
#include "tensor/tensor_iface.h"
#include "base/base_impl.h"

#include <string.h>

/* internal, from src/tensor/ops_activation.c (the tests link the static library) */
float dt__fast_exp(float x);
float dt__fast_tanh(float x);

static dt_tensor *vec(dt_ctx *ctx, int n, const float *v) {
    return dt_tensor_from_f32(ctx, 1, (int64_t[]){n}, v);
}

static double max_rel_err_vs(dt_tensor *y, const double *ref, int n, double floor_) {
    const float *Y = y->data;
    double m = 0;
    for (int i = 0; i < n; i++) {
        double e = fabs(Y[i] - ref[i]) / fmax(fabs(ref[i]), floor_);
        if (!(e <= m)) m = e; /* NaN makes it fail */
    }
    return m;
}

static void test_fast_exp_tanh(void) {
    double worst = 0, worst_x = 0;
    for (float x = -87.3f; x <= 88.72f; x += 0.000913f) {
        double r = exp((double)x), e = fabs(dt__fast_exp(x) - r) / r;
        if (!(e <= worst)) worst = e, worst_x = x;
    }
    CHECK_MSG(worst < 2.5e-7, "fast_exp max rel err %.3g at %g", worst, worst_x);
    /* denormal results: absolute error within a denormal step or two */
    double dworst = 0;
    for (float x = -103.9f; x < -87.4f; x += 0.0137f)
        dworst = fmax(dworst, fabs(dt__fast_exp(x) - exp((double)x)));
    CHECK_MSG(dworst < 3e-45, "fast_exp denormal abs err %g", dworst);
    CHECK(isinf(dt__fast_exp(88.8f)) && isinf(dt__fast_exp(1e30f)) &&
          isinf(dt__fast_exp(INFINITY)));
    CHECK(dt__fast_exp(-110.f) == 0.f && dt__fast_exp(-INFINITY) == 0.f);
    CHECK(isnan(dt__fast_exp(NAN)));
    CHECK(dt__fast_exp(0.f) == 1.f);

    worst = 0;
    for (float x = -12.f; x <= 12.f; x += 0.0001731f) {
        double r = tanh((double)x), e = fabs(dt__fast_tanh(x) - r) / fmax(fabs(r), 1e-30);
        if (!(e <= worst)) worst = e, worst_x = x;
    }
    for (float x = 1e-30f; x < 1.f; x *= 1.37f) {
        double e = fabs(dt__fast_tanh(-x) - tanh(-(double)x)) / tanh((double)x);
        if (!(e <= worst)) worst = e, worst_x = -x;
    }
    CHECK_MSG(worst < 2.5e-7, "fast_tanh max rel err %.3g at %g", worst, worst_x);
    CHECK(dt__fast_tanh(INFINITY) == 1.f && dt__fast_tanh(-INFINITY) == -1.f);
    CHECK(dt__fast_tanh(50.f) == 1.f && dt__fast_tanh(0.f) == 0.f && isnan(dt__fast_tanh(NAN)));
}

static void test_activation_values(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    const float x7[7] = {-3.f, -1.f, -0.5f, 0.f, 0.7f, 1.f, 2.5f};
    /* PyTorch 1.13, float64 */
    const double gelu_ref[7] = {-0.004049694, -0.158655254, -0.154268769, 0.0,
                                0.530625443,  0.841344746,  2.484475837};
    const double gelu_tanh_ref[7] = {-0.003637392, -0.158808009, -0.154285990, 0.0,
                                     0.530570135,  0.841191991,  2.484915734};
    const double silu_ref[7] = {-0.142277620, -0.268941421, -0.188770334, 0.0,
                                0.467731441,  0.731058579,  2.310354550};
    const double tanh_ref[7] = {-0.995054754, -0.761594156, -0.462117157, 0.0,
                                0.604367777,  0.761594156,  0.986614298};
    const double sig_ref[7] = {0.047425873, 0.268941421, 0.377540669, 0.5,
                               0.668187772, 0.731058579, 0.924141820};
    dt_tensor *x = vec(ctx, 7, x7);
    CHECK(max_rel_err_vs(dt_gelu(x), gelu_ref, 7, 1e-6) < 1e-6);
    CHECK(max_rel_err_vs(dt_gelu_tanh(x), gelu_tanh_ref, 7, 1e-6) < 1e-6);
    CHECK(max_rel_err_vs(dt_silu(x), silu_ref, 7, 1e-6) < 1e-6);
    CHECK(max_rel_err_vs(dt_tanh(x), tanh_ref, 7, 1e-6) < 1e-6);
    CHECK(max_rel_err_vs(dt_sigmoid(x), sig_ref, 7, 1e-6) < 1e-6);

    /* a dense grid against double libm references */
    enum { N = 20001 };
    static float g[N];
    static double r_gelu[N], r_gt[N], r_silu[N], r_tanh[N], r_sig[N];
    for (int i = 0; i < N; i++) {
        float v = -10.f + 20.f * (float)i / (N - 1);
        double d = v, u = 0.7978845608028654 * (d + 0.044715 * d * d * d);
        g[i] = v;
        r_gelu[i] = 0.5 * d * erfc(-d / sqrt(2.0));
        r_gt[i] = d / (1.0 + exp(-2.0 * u)); /* = 0.5 d (1 + tanh u), without cancellation */
        r_silu[i] = d / (1.0 + exp(-d));
        r_tanh[i] = tanh(d);
        r_sig[i] = 1.0 / (1.0 + exp(-d));
    }
    x = dt_tensor_from_f32(ctx, 2, (int64_t[]){N, 1}, g);
    dt_tensor *ygt = dt_gelu_tanh(x);
    const float *Y = ygt->data;
    double worst = 0, worst_x = 0;
    for (int i = 0; i < N; i++) {
        /* u is rounded in f32 before the exp: allow for it in the far negative tail */
        double u = fabs(0.7978845608028654 * (g[i] + 0.044715 * (double)g[i] * g[i] * g[i]));
        double e = fabs(Y[i] - r_gt[i]) / fmax(fabs(r_gt[i]), 1e-37) / (1.0 + u / 2.0);
        if (!(e <= worst)) worst = e, worst_x = g[i];
    }
    CHECK_MSG(worst < 1e-6, "gelu_tanh scaled rel err %.3g at %g", worst, worst_x);
    /* on [-3, 3] plainly within 1e-6 relative, erf variant included (further out in the
     * negative tail both lose ~|x| * 1e-7 to the rounding of their f32 arguments) */
    const float *Ge = dt_gelu(x)->data;
    double core = 0, core_e = 0, tail_e = 0;
    for (int i = 7000; i <= 13000; i++) {
        core = fmax(core, fabs(Y[i] - r_gt[i]) / fmax(fabs(r_gt[i]), 1e-30));
        core_e = fmax(core_e, fabs(Ge[i] - r_gelu[i]) / fmax(fabs(r_gelu[i]), 1e-30));
    }
    for (int i = 0; i < N; i++)
        tail_e = fmax(tail_e,
                      fabs(Ge[i] - r_gelu[i]) / fmax(fabs(r_gelu[i]), 1e-37) / (1.0 + fabs(g[i])));
    CHECK_MSG(core < 1e-6, "gelu_tanh rel err on [-3,3]: %.3g", core);
    CHECK_MSG(core_e < 1e-6, "gelu rel err on [-3,3]: %.3g", core_e);
    CHECK_MSG(tail_e < 1e-6, "gelu scaled rel err on [-10,10]: %.3g", tail_e);
    CHECK_MSG(max_rel_err_vs(dt_silu(x), r_silu, N, 1e-30) < 1e-6, "silu");
    CHECK_MSG(max_rel_err_vs(dt_tanh(x), r_tanh, N, 1e-30) < 1e-6, "tanh");
    CHECK_MSG(max_rel_err_vs(dt_sigmoid(x), r_sig, N, 1e-30) < 1e-6, "sigmoid");

    /* erf vs tanh variants: close (< 1e-3) but not the same function */
    const float *A = dt_gelu(x)->data, *B = ygt->data;
    double dmax = 0;
    for (int i = 0; i < N; i++) dmax = fmax(dmax, fabs(A[i] - B[i]));
    CHECK_MSG(dmax < 1e-3 && dmax > 1e-4, "max |gelu - gelu_tanh| = %g", dmax);

    /* tails: no NaN / inf from overflow inside the kernels */
    const float ext[6] = {-1e4f, -100.f, 100.f, 1e4f, -INFINITY, INFINITY};
    dt_tensor *e = vec(ctx, 6, ext);
    const float *S = dt_sigmoid(e)->data, *T = dt_tanh(e)->data, *Si = dt_silu(e)->data;
    const float *Gt = dt_gelu_tanh(e)->data;
    CHECK(S[0] == 0.f && S[3] == 1.f && S[4] == 0.f && S[5] == 1.f);
    CHECK(T[0] == -1.f && T[3] == 1.f && T[4] == -1.f && T[5] == 1.f);
    CHECK(Si[0] == 0.f && Si[2] == 100.f && Si[3] == 1e4f);
    CHECK(Gt[0] == 0.f && Gt[1] == 0.f && Gt[2] == 100.f && Gt[3] == 1e4f && Gt[5] == INFINITY);
    const float nan1[1] = {NAN}; /* a NaN stays NaN (a non-finite loss must show) */
    CHECK(isnan(((const float *)dt_gelu_tanh(vec(ctx, 1, nan1))->data)[0]));
    const float rin[4] = {NAN, -1.f, 2.f, -0.f};
    const float *R = dt_relu(vec(ctx, 4, rin))->data;
    CHECK(isnan(R[0]) && R[1] == 0.f && R[2] == 2.f && R[3] == 0.f && !signbit(R[3]));
    /* the fused linear + relu too: a NaN input reaches every output of its row */
    dt_tensor *xr = dt_tensor_from_f32(ctx, 2, (int64_t[]){2, 2}, (float[]){NAN, 1.f, 1.f, 1.f});
    dt_tensor *wr =
        dt_tensor_from_f32(ctx, 2, (int64_t[]){3, 2}, (float[]){1.f, 0.f, -1.f, 0.f, 0.f, 1.f});
    const float *LR = dt_linear_relu(xr, wr, NULL)->data;
    CHECK(isnan(LR[0]) && isnan(LR[1]) && isnan(LR[2]) && LR[3] == 1.f && LR[4] == 0.f &&
          LR[5] == 1.f);

    /* FLOP counting: gelu_tanh counts 8 per element */
    dt_ctx_flops_reset(ctx);
    dt_gelu_tanh(x);
    CHECK(dt_ctx_flops(ctx).forward == 8 * (int64_t)N);
    /* wrong dtype is an error */
    dt_tensor *ints = dt_tensor_new(ctx, DT_DTYPE_I64, 1, (int64_t[]){3});
    CHECK(dt_gelu(ints) == NULL && dt_last_status() == DT_ERR_INVALID);
    dt_ctx_free(ctx);
}

static void test_layer_norm_values(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 2);
    const float xv[8] = {1.f, 2.f, 3.f, 4.f, -1.f, 0.5f, 0.25f, 2.f};
    const float wv[4] = {0.5f, -1.f, 2.f, 1.5f}, bv[4] = {0.1f, 0.2f, -0.3f, 0.f};
    dt_tensor *x = dt_tensor_from_f32(ctx, 2, (int64_t[]){2, 4}, xv);
    dt_tensor *w = vec(ctx, 4, wv), *b = vec(ctx, 4, bv);
    const double ln_ref[8] = {-0.570817710, 0.647211807, 0.594423613,  2.012453130,
                              -0.574138974, 0.141379220, -0.651724682, 2.198279262};
    const double rms_ref[8] = {0.182574174,  -0.730296695, 2.190890084, 2.190890084,
                               -0.433860752, -0.433860752, 0.433860752, 2.603164514};
    CHECK(max_rel_err_vs(dt_layer_norm(x, w, b, 1e-5f), ln_ref, 8, 1e-3) < 2e-6);
    CHECK(max_rel_err_vs(dt_rms_norm(x, w, 1e-6f), rms_ref, 8, 1e-3) < 2e-6);

    /* w = 1, b = 0 (and NULL): every row has mean 0 and (biased) variance 1 */
    dt_tensor *big = dt_randn(ctx, 3, (int64_t[]){3, 50, 96}, 3.f);
    dt_tensor *ones = dt_tensor_new(ctx, DT_DTYPE_F32, 1, (int64_t[]){96});
    dt_fill_(ones, 1.f);
    dt_tensor *zeros = dt_tensor_new(ctx, DT_DTYPE_F32, 1, (int64_t[]){96});
    dt_tensor *y1 = dt_layer_norm(big, ones, zeros, 1e-5f),
              *y2 = dt_layer_norm(big, NULL, NULL, 1e-5f);
    CHECK(y1 && y2 && y1->ndim == 3 && y1->shape[2] == 96);
    CHECK(memcmp(y1->data, y2->data, dt_nbytes(y1)) == 0);
    const float *Y = y1->data;
    double wm = 0, wv_ = 0;
    for (int r = 0; r < 150; r++) {
        double s = 0, ss = 0;
        for (int c = 0; c < 96; c++) s += Y[r * 96 + c];
        for (int c = 0; c < 96; c++) ss += (Y[r * 96 + c] - s / 96) * (Y[r * 96 + c] - s / 96);
        wm = fmax(wm, fabs(s / 96));
        wv_ = fmax(wv_, fabs(ss / 96 - 1.0));
    }
    CHECK_MSG(wm < 1e-6 && wv_ < 1e-5, "row mean %g, var-1 %g", wm, wv_);
    /* rms_norm without w: mean square 1 per row */
    Y = dt_rms_norm(big, NULL, 0.f)->data;
    double wr = 0;
    for (int r = 0; r < 150; r++) {
        double ss = 0;
        for (int c = 0; c < 96; c++) ss += (double)Y[r * 96 + c] * Y[r * 96 + c];
        wr = fmax(wr, fabs(ss / 96 - 1.0));
    }
    CHECK_MSG(wr < 1e-5, "rms row mean-square - 1 = %g", wr);
    /* a constant row: var 0 -> output b (no NaN) */
    const float cst[4] = {2.f, 2.f, 2.f, 2.f};
    const float *Yc = dt_layer_norm(vec(ctx, 4, cst), w, b, 1e-5f)->data;
    CHECK(Yc[0] == bv[0] && Yc[1] == bv[1] && Yc[2] == bv[2] && Yc[3] == bv[3]);
    /* shape errors */
    CHECK(dt_layer_norm(x, b, vec(ctx, 3, bv), 1e-5f) == NULL &&
          dt_last_status() == DT_ERR_INVALID);
    CHECK(strstr(dt_last_error(), "bias") != NULL);
    CHECK(dt_rms_norm(x, vec(ctx, 2, wv), 1e-5f) == NULL && dt_last_status() == DT_ERR_INVALID);
    dt_ctx_free(ctx);
}

/* The w / b gradients and the embedding gradient must not depend on the thread count. */
static void norm_grads(int threads, float *out_gw, float *out_gb, float *out_ge, float *out_gx) {
    dt_set_num_threads(threads);
    dt_ctx *ctx = dt_ctx_new(NULL, 7);
    dt_tensor *x = dt_randn(ctx, 2, (int64_t[]){333, 200}, 1.f);
    dt_tensor *w = dt_randn(ctx, 1, (int64_t[]){200}, 1.f),
              *b = dt_randn(ctx, 1, (int64_t[]){200}, 1.f);
    dt_tensor *e = dt_randn(ctx, 2, (int64_t[]){17, 200}, 1.f);
    dt_set_requires_grad(x, true);
    dt_set_requires_grad(w, true);
    dt_set_requires_grad(b, true);
    dt_set_requires_grad(e, true);
    int64_t ids[333];
    for (int i = 0; i < 333; i++) ids[i] = (i * 5) % 17;
    dt_tensor *emb = dt_embedding(dt_tensor_from_i64(ctx, 1, (int64_t[]){333}, ids), e);
    dt_tensor *y = dt_layer_norm(dt_add(x, emb), w, b, 1e-5f);
    dt_tensor *gout = dt_randn(ctx, 2, (int64_t[]){333, 200}, 1.f);
    CHECK(dt_backward_with(y, gout) == DT_OK);
    memcpy(out_gw, w->grad->data, 200 * sizeof(float));
    memcpy(out_gb, b->grad->data, 200 * sizeof(float));
    memcpy(out_ge, e->grad->data, 17 * 200 * sizeof(float));
    memcpy(out_gx, x->grad->data, 333 * 200 * sizeof(float));
    dt_ctx_free(ctx);
}

static void test_thread_independence(void) {
    int prev = dt_get_num_threads();
    static float a[4][333 * 200], c[4][333 * 200];
    norm_grads(1, a[0], a[1], a[2], a[3]);
    norm_grads(2, c[0], c[1], c[2], c[3]);
    dt_set_num_threads(prev);
    CHECK(memcmp(a[0], c[0], 200 * sizeof(float)) == 0);
    CHECK(memcmp(a[1], c[1], 200 * sizeof(float)) == 0);
    CHECK(memcmp(a[2], c[2], 17 * 200 * sizeof(float)) == 0);
    CHECK(memcmp(a[3], c[3], 333 * 200 * sizeof(float)) == 0);
}

/* cross_entropy against a double-precision reference: rows of 37 classes (a vector tail), one
 * row far out (logits past exp's range, one class 1000 below the rest: probability 0), an
 * ignored row (no loss, zero gradient); then the loss taken twice, so the second backward adds
 * into the gradient the first one stored: exactly twice the single gradient. */
static void test_cross_entropy_values(void) {
    enum { N = 4, C = 37 };
    float x[N * C];
    for (int i = 0; i < N * C; i++) x[i] = (float)sin(0.37 * i) * 3.f;
    for (int c = 0; c < C; c++) x[2 * C + c] = 100.f + (float)c;
    x[2 * C + 5] = -900.f;
    int64_t t[N] = {3, 36, 30, -100};
    double ref_loss = 0, ref_g[N * C] = {0};
    for (int r = 0; r < 3; r++) {
        double m = -INFINITY, s = 0;
        for (int c = 0; c < C; c++) m = fmax(m, x[r * C + c]);
        for (int c = 0; c < C; c++) s += exp(x[r * C + c] - m);
        double lse = m + log(s);
        ref_loss += (lse - x[r * C + t[r]]) / 3;
        for (int c = 0; c < C; c++) ref_g[r * C + c] = exp(x[r * C + c] - lse) / 3;
        ref_g[r * C + t[r]] -= 1.0 / 3;
    }
    float g1[N * C];
    for (int twice = 0; twice < 2; twice++) {
        dt_ctx *ctx = dt_ctx_new(NULL, 1);
        dt_tensor *xt = dt_tensor_from_f32(ctx, 2, (int64_t[]){N, C}, x);
        dt_set_requires_grad(xt, true);
        dt_tensor *tt = dt_tensor_from_i64(ctx, 1, (int64_t[]){N}, t);
        dt_tensor *l = dt_cross_entropy(xt, tt, -100);
        CHECK_NEAR(dt_item(l), ref_loss, 1e-6 * fabs(ref_loss) + 1e-6);
        if (twice) l = dt_add(l, dt_cross_entropy(xt, tt, -100));
        CHECK(dt_backward(l) == DT_OK);
        const float *g = xt->grad->data;
        if (!twice) {
            /* row 2: x - lse is rounded at lse's ulp (~1.5e-5 near 136), as in any f32 code */
            double worst = 0, worst_far = 0;
            for (int i = 0; i < N * C; i++) {
                double e = fabs(g[i] - ref_g[i]);
                if (i / C == 2)
                    worst_far = fmax(worst_far, e);
                else
                    worst = fmax(worst, e);
            }
            CHECK_MSG(worst < 1e-7, "cross_entropy grad max abs err %g", worst);
            CHECK_MSG(worst_far < 4e-6, "cross_entropy grad max abs err %g (far row)", worst_far);
            CHECK(g[2 * C + 5] == 0.f);
            for (int c = 0; c < C; c++) CHECK(g[3 * C + c] == 0.f);
            memcpy(g1, g, sizeof g1);
        } else {
            int same = 0;
            for (int i = 0; i < N * C; i++) same += g[i] == 2.f * g1[i];
            CHECK_MSG(same == N * C, "%d of %d gradients are twice the single one", same, N * C);
        }
        dt_ctx_free(ctx);
    }
}

static void test_embedding(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 3);
    dt_tensor *w = dt_randn(ctx, 2, (int64_t[]){5, 3}, 1.f);
    const float *W = w->data;
    int64_t ids[6] = {4, 0, 0, 2, 1, 4};
    dt_tensor *y = dt_embedding(dt_tensor_from_i64(ctx, 2, (int64_t[]){2, 3}, ids), w);
    CHECK(y && y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 3 && y->shape[2] == 3);
    bool same = true;
    for (int t = 0; t < 6; t++)
        for (int c = 0; c < 3; c++) same &= ((float *)y->data)[t * 3 + c] == W[ids[t] * 3 + c];
    CHECK(same);
    /* i32 ids, 0-dim id */
    dt_tensor *i32 = dt_tensor_new(ctx, DT_DTYPE_I32, 0, NULL);
    *(int32_t *)i32->data = 3;
    dt_tensor *y0 = dt_embedding(i32, w);
    CHECK(y0 && y0->ndim == 1 && y0->shape[0] == 3 && ((float *)y0->data)[2] == W[3 * 3 + 2]);
    /* out of range: the message names the bad id and V */
    int64_t bad[4] = {1, 2, 7, 0};
    CHECK(dt_embedding(dt_tensor_from_i64(ctx, 1, (int64_t[]){4}, bad), w) == NULL);
    CHECK(dt_last_status() == DT_ERR_INVALID);
    CHECK_MSG(strstr(dt_last_error(), "id 7") && strstr(dt_last_error(), "V = 5"), "%s",
              dt_last_error());
    int64_t neg[2] = {0, -1};
    CHECK(dt_embedding(dt_tensor_from_i64(ctx, 1, (int64_t[]){2}, neg), w) == NULL);
    CHECK(strstr(dt_last_error(), "id -1") != NULL);
    /* float ids are an error */
    CHECK(dt_embedding(w, w) == NULL && dt_last_status() == DT_ERR_INVALID);
    dt_ctx_free(ctx);
}

/* dt_embedding_sum against dt_add of two dt_embedding: the same bits forward and in both
 * tables' gradients (also with one table twice, and at 1 and 2 threads); its errors */
static void emb_sum_case(int threads, bool one_table, float **y, float **ga, float **gb) {
    int saved = dt_get_num_threads();
    dt_set_num_threads(threads);
    for (int fused = 0; fused < 2; fused++) {
        dt_ctx *ctx = dt_ctx_new(NULL, 9);
        dt_tensor *wa = dt_randn(ctx, 2, (int64_t[]){40, 96}, 1.f);
        dt_tensor *wb = one_table ? wa : dt_randn(ctx, 2, (int64_t[]){130, 96}, 1.f);
        dt_set_requires_grad(wa, true);
        dt_set_requires_grad(wb, true);
        int64_t ta[520], tb[520];
        for (int i = 0; i < 520; i++)
            ta[i] = (i * 11 + i / 7) % 40, tb[i] = i % (one_table ? 40 : 130);
        dt_tensor *ia = dt_tensor_from_i64(ctx, 2, (int64_t[]){4, 130}, ta);
        dt_tensor *ib = dt_tensor_from_i64(ctx, 2, (int64_t[]){4, 130}, tb);
        dt_tensor *out;
        if (fused) {
            out = dt_embedding_sum(ia, wa, ib, wb);
        } else { /* ia's lookup recorded first (C leaves the order of arguments open) */
            dt_tensor *ea = dt_embedding(ia, wa);
            out = dt_add(ea, dt_embedding(ib, wb));
        }
        dt_tensor *g = dt_randn(ctx, 3, (int64_t[]){4, 130, 96}, 1.f);
        CHECK(out && dt_backward_with(out, g) == DT_OK);
        y[fused] = malloc(dt_nbytes(out));
        memcpy(y[fused], out->data, dt_nbytes(out));
        ga[fused] = malloc(dt_nbytes(wa));
        memcpy(ga[fused], wa->grad->data, dt_nbytes(wa));
        gb[fused] = malloc(dt_nbytes(wb));
        memcpy(gb[fused], wb->grad->data, dt_nbytes(wb));
        dt_ctx_free(ctx);
    }
    dt_set_num_threads(saved);
}

static void test_embedding_sum(void) {
    for (int one = 0; one < 2; one++)
        for (int threads = 1; threads <= 2; threads++) {
            float *y[2], *ga[2], *gb[2];
            emb_sum_case(threads, one, y, ga, gb);
            size_t nb = (size_t)(one ? 40 : 130) * 96;
            CHECK_MSG(!memcmp(y[0], y[1], sizeof(float) * 520 * 96) &&
                          !memcmp(ga[0], ga[1], sizeof(float) * 40 * 96) &&
                          !memcmp(gb[0], gb[1], sizeof(float) * nb),
                      "one table %d, %d threads: fused and unfused bits differ", one, threads);
            for (int k = 0; k < 2; k++) free(y[k]), free(ga[k]), free(gb[k]);
        }
    dt_ctx *ctx = dt_ctx_new(NULL, 3);
    dt_tensor *wa = dt_randn(ctx, 2, (int64_t[]){5, 3}, 1.f),
              *wb = dt_randn(ctx, 2, (int64_t[]){4, 3}, 1.f);
    dt_tensor *wc = dt_randn(ctx, 2, (int64_t[]){4, 2}, 1.f);
    int64_t a[4] = {0, 4, 1, 2}, b[4] = {3, 0, 1, 2}, bad[4] = {0, 1, 4, 2};
    dt_tensor *ia = dt_tensor_from_i64(ctx, 1, (int64_t[]){4}, a);
    dt_tensor *ib = dt_tensor_from_i64(ctx, 1, (int64_t[]){4}, b);
    CHECK(dt_embedding_sum(ia, wa, dt_tensor_from_i64(ctx, 1, (int64_t[]){4}, bad), wb) == NULL);
    CHECK_MSG(strstr(dt_last_error(), "embedding_sum: id 4") && strstr(dt_last_error(), "V = 4"),
              "%s", dt_last_error());
    CHECK(dt_embedding_sum(ia, wa, dt_tensor_from_i64(ctx, 2, (int64_t[]){2, 2}, b), wb) == NULL);
    CHECK_MSG(strstr(dt_last_error(), "differ in shape"), "%s", dt_last_error());
    CHECK(dt_embedding_sum(ia, wa, ib, wc) == NULL);
    CHECK_MSG(strstr(dt_last_error(), "differ in width"), "%s", dt_last_error());
    CHECK(dt_embedding_sum(ia, wa, NULL, wb) == NULL);
    dt_ctx_free(ctx);
}

static void test_dropout(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 42);
    enum { N = 200003 };
    dt_tensor *x = dt_tensor_new(ctx, DT_DTYPE_F32, 1, (int64_t[]){N});
    dt_fill_(x, 1.f);
    const float p = 0.3f, scale = 1.f / (1.f - p);
    dt_rng before = *dt_ctx_rng(ctx);
    dt_tensor *y = dt_dropout(x, p);
    CHECK(y && y != x);
    CHECK(dt_ctx_rng(ctx)->counter == before.counter + (N + 3) / 4);
    const float *Y = y->data;
    int64_t kept = 0;
    double sum = 0;
    bool values_ok = true;
    for (int i = 0; i < N; i++) {
        kept += Y[i] != 0.f;
        sum += Y[i];
        values_ok &= Y[i] == 0.f || Y[i] == scale;
    }
    CHECK(values_ok);
    CHECK_MSG(fabs((double)kept / N - (1 - p)) < 0.005, "kept fraction %g", (double)kept / N);
    CHECK_MSG(fabs(sum / N - 1.0) < 0.01, "mean %g (expected value preserved)", sum / N);
    /* the documented mask: element i uses word i%4 of philox(seed, base + i/4) */
    bool rule = true;
    for (int i = 0; i < 1000; i++) {
        uint32_t o[4];
        dt_philox(before.seed, before.counter + (uint64_t)(i / 4), o);
        rule &= (Y[i] != 0.f) == (o[i % 4] >= (uint32_t)(0.3 * 4294967296.0));
    }
    CHECK(rule);
    /* same seed + counter -> same mask, also with another thread count */
    int prev = dt_get_num_threads();
    *dt_ctx_rng(ctx) = before;
    dt_set_num_threads(1);
    dt_tensor *y1 = dt_dropout(x, p);
    dt_set_num_threads(prev);
    CHECK(memcmp(y1->data, y->data, dt_nbytes(y)) == 0);
    /* the next call (counter advanced) draws a different mask */
    dt_tensor *y2 = dt_dropout(x, p);
    CHECK(memcmp(y2->data, y->data, dt_nbytes(y)) != 0);
    /* a different seed too */
    dt_ctx *ctx2 = dt_ctx_new(NULL, 43);
    dt_tensor *x2 = dt_tensor_new(ctx2, DT_DTYPE_F32, 1, (int64_t[]){N});
    dt_fill_(x2, 1.f);
    dt_ctx_rng(ctx2)->counter = before.counter;
    CHECK(memcmp(dt_dropout(x2, p)->data, y->data, dt_nbytes(y)) != 0);
    dt_ctx_free(ctx2);
    /* backward: the gradient is the mask times the scale */
    dt_set_requires_grad(x, true);
    *dt_ctx_rng(ctx) = before;
    dt_tensor *yg = dt_dropout(x, p);
    dt_tensor *ones = dt_tensor_new(ctx, DT_DTYPE_F32, 1, (int64_t[]){N});
    dt_fill_(ones, 1.f);
    CHECK(dt_backward_with(yg, ones) == DT_OK);
    CHECK(memcmp(x->grad->data, y->data, dt_nbytes(y)) == 0);
    dt_set_requires_grad(x, false);
    /* p == 1: all zeros; p == 0 and evaluation mode: x itself, nothing recorded */
    const float *Z = dt_dropout(x, 1.f)->data;
    bool zeros = true;
    for (int i = 0; i < N; i++) zeros &= Z[i] == 0.f;
    CHECK(zeros);
    CHECK(dt_dropout(x, 0.f) == x);
    dt_set_requires_grad(x, true);
    int64_t tape = dt_ctx_tape_len(ctx);
    uint64_t ctr = dt_ctx_rng(ctx)->counter;
    dt_ctx_set_training(ctx, false);
    CHECK(dt_dropout(x, 0.5f) == x);
    CHECK(dt_ctx_tape_len(ctx) == tape && dt_ctx_rng(ctx)->counter == ctr);
    dt_ctx_set_training(ctx, true);
    /* bad p */
    CHECK(dt_dropout(x, -0.1f) == NULL && dt_last_status() == DT_ERR_INVALID);
    CHECK(dt_dropout(x, 1.5f) == NULL && dt_dropout(x, NAN) == NULL);
    dt_ctx_free(ctx);
}

static void test_modules(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 5);
    dt_module *net =
        dt_nn_sequential(dt_nn_embedding(1000, 16), dt_nn_layer_norm(16, 1e-5f), dt_nn_gelu(true),
                         dt_nn_dropout(0.1f), dt_nn_rms_norm(16, 1e-6f), dt_nn_silu(), dt_nn_tanh(),
                         dt_nn_sigmoid(), dt_nn_gelu(false), NULL);
    CHECK(net && dt_module_build(net, ctx, 11) == DT_OK);
    CHECK(dt_module_param_count(net) == 4);
    CHECK(dt_module_num_params(net) == 1000 * 16 + 16 + 16 + 16);
    dt_tensor *emb = dt_module_find_param(net, "0.weight");
    dt_tensor *lw = dt_module_find_param(net, "1.weight"),
              *lb = dt_module_find_param(net, "1.bias");
    dt_tensor *rw = dt_module_find_param(net, "4.weight");
    CHECK(emb && lw && lb && rw);
    if (!emb || !lw || !lb || !rw) {
        dt_module_free(net);
        dt_ctx_free(ctx);
        return;
    }
    double s = 0, ss = 0;
    const float *E = emb->data;
    for (int i = 0; i < 16000; i++) s += E[i], ss += (double)E[i] * E[i];
    double mean = s / 16000, sd = sqrt(ss / 16000 - mean * mean);
    CHECK_MSG(fabs(mean) < 0.03 && fabs(sd - 1.0) < 0.03, "Embedding init mean %g std %g", mean,
              sd);
    bool init_ok = true;
    for (int i = 0; i < 16; i++)
        init_ok &= ((float *)lw->data)[i] == 1.f && ((float *)lb->data)[i] == 0.f &&
                   ((float *)rw->data)[i] == 1.f;
    CHECK(init_ok);
    CHECK(!strcmp(dt_module_child(net, 1)->type, "LayerNorm"));
    int64_t ids[6] = {0, 999, 5, 5, 17, 3};
    dt_tensor *tok = dt_tensor_from_i64(ctx, 2, (int64_t[]){2, 3}, ids);
    dt_tensor *y = dt_module_forward(net, tok);
    CHECK(y && y->ndim == 3 && y->shape[2] == 16);
    /* in evaluation mode the composition is deterministic and matches the ops */
    dt_ctx_set_training(ctx, false);
    dt_tensor *ya = dt_module_forward(net, tok);
    dt_tensor *yb = dt_gelu(dt_sigmoid(dt_tanh(dt_silu(dt_rms_norm(
        dt_gelu_tanh(dt_layer_norm(dt_embedding(tok, emb), lw, lb, 1e-5f)), rw, 1e-6f)))));
    CHECK(ya && yb && memcmp(ya->data, yb->data, dt_nbytes(ya)) == 0);
    dt_ctx_set_training(ctx, true);
    /* gradients reach every parameter */
    dt_module_zero_grad(net);
    CHECK(dt_backward(dt_sum_all(dt_module_forward(net, tok))) == DT_OK);
    CHECK(lw->grad && rw->grad && emb->grad);
    const float *GE = emb->grad->data;
    bool row_zero = true, row_nz = false;
    for (int c = 0; c < 16; c++) row_zero &= GE[1 * 16 + c] == 0.f, row_nz |= GE[5 * 16 + c] != 0.f;
    CHECK(row_zero && row_nz); /* id 1 unused, id 5 used twice */
    dt_module_free(net);
    /* bad configurations */
    CHECK(dt_nn_embedding(0, 4) == NULL && dt_last_status() == DT_ERR_INVALID);
    CHECK(dt_nn_layer_norm(8, -1.f) == NULL && dt_nn_rms_norm(0, 1e-5f) == NULL);
    CHECK(dt_nn_dropout(2.f) == NULL);
    dt_ctx_free(ctx);
}

int main(void) {
    TEST_RUN(test_fast_exp_tanh);
    TEST_RUN(test_activation_values);
    TEST_RUN(test_layer_norm_values);
    TEST_RUN(test_thread_independence);
    TEST_RUN(test_cross_entropy_values);
    TEST_RUN(test_embedding);
    TEST_RUN(test_embedding_sum);
    TEST_RUN(test_dropout);
    TEST_RUN(test_modules);
    TEST_END();
}
