/* Tests for the kernel variants (src/base/cpu.c, docs/performance.md "One binary for every
 * x86-64 CPU"): every instruction-set level this CPU can run (generic, avx2, avx512,
 * avx512_bf16) runs the ops that have hand-written kernels — convolution on its three paths
 * (Winograd, direct, im2col), pooling, cross-entropy, gelu_tanh (plain and as the fused linear's
 * epilogue), attention, the tiled GEMM's packed-B and long-K transposed-A paths, bf16 rounding
 * — forward and backward, in one process (dt__cpu_isa_override); at avx2 that runs the AVX2
 * exp, gelu_tanh, softmax, cross-entropy, attention tiles, 8x8 transposes and the conv table
 * (Winograd, direct, masked im2col, pooling; test_conv_tables checks which table runs). Each
 * variant must give the same bits twice, and the same values as the generic variant within the
 * parity tolerance of docs/parity.md (|a - b| <= 1e-5 + 1e-4 |b|); bf16 rounding must give
 * the same bits. The golden-file tests run once per DTRAIN_ISA level as ctest's
 * isa_<level>_<test>. */
#include "test.h"

#include "base/base_impl.h"
#include "dtrain/tensor.h"
#include "tensor/cpu/conv_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct vec {
    float *v;
    int64_t n;
} vec;

static void take(vec *r, const dt_tensor *t) {
    if (!t) { /* a missing output or gradient shows as a NaN, never as a match */
        r->v = realloc(r->v, (size_t)(r->n + 1) * sizeof(float));
        r->v[r->n++] = NAN;
        return;
    }
    int64_t n = dt_numel(t);
    r->v = realloc(r->v, (size_t)(r->n + n) * sizeof(float));
    memcpy(r->v + r->n, t->data, (size_t)n * sizeof(float));
    r->n += n;
}

static dt_tensor *leaf(dt_ctx *ctx, int ndim, const int64_t *shape) {
    dt_tensor *t = dt_randn(ctx, ndim, shape, 1.f);
    dt_set_requires_grad(t, true);
    return t;
}

/* y's values, then the gradients of `ins` after a backward from a random dy */
static void fwd_bwd(dt_ctx *ctx, dt_tensor *y, dt_tensor **ins, int nin, vec *r) {
    take(r, y);
    if (!y) return;
    dt_tensor *g = dt_randn(ctx, y->ndim, y->shape, 1.f);
    CHECK(dt_backward_with(y, g) == DT_OK);
    for (int i = 0; i < nin; i++) take(r, ins[i]->grad);
}

static void conv_case(dt_ctx *ctx, vec *r, int64_t C, int64_t H, int64_t OC, int64_t K, int stride,
                      int pad) {
    dt_tensor *x = leaf(ctx, 4, (int64_t[]){2, C, H, H + 1});
    dt_tensor *w = leaf(ctx, 4, (int64_t[]){OC, C, K, K}), *b = leaf(ctx, 1, (int64_t[]){OC});
    fwd_bwd(ctx, dt_conv2d(x, w, b, stride, pad), (dt_tensor *[]){x, w, b}, 3, r);
}

/* Sizes chosen for the vector kernels' edges: partial blocks of 8 / 16 lanes, several blocks per
 * row, odd outputs, two images per chunk. Inputs are (2, C, H, H + 1). */
static void case_conv(dt_ctx *ctx, vec *r) {
    conv_case(ctx, r, 8, 12, 8, 3, 1, 1); /* Winograd: 7x7 tiles, one partial block per row */
    conv_case(ctx, r, 4, 22, 6, 3, 1, 2); /* Winograd: OW 25, 13 tile columns (8 + 5), pad 2 */
    conv_case(ctx, r, 5, 15, 4, 3, 1, 1); /* Winograd: OW 16, 8 tile columns (one full block) */
    conv_case(ctx, r, 4, 7, 4, 3, 1, 0);  /* Winograd: 5x6 output, 3x3 tiles, no padding */
    conv_case(ctx, r, 1, 13, 6, 5, 1, 2); /* direct */
    conv_case(ctx, r, 1, 22, 7, 3, 1, 1); /* direct: OW 23 (16 + 7), 7 channels */
    conv_case(ctx, r, 1, 5, 3, 3, 1, 0);  /* direct: 3x4 output */
    conv_case(ctx, r, 3, 11, 4, 3, 2, 1); /* im2col, stride 2 */
    conv_case(ctx, r, 2, 19, 5, 3, 1, 1); /* im2col stride 1: masked edges, OW 20 */
    conv_case(ctx, r, 3, 9, 4, 5, 1, 2);  /* im2col stride 1: 5x5, pad 2 */
}

static void case_pool(dt_ctx *ctx, vec *r) {
    dt_tensor *x = leaf(ctx, 4, (int64_t[]){2, 4, 10, 18});
    fwd_bwd(ctx, dt_max_pool2d(x, 2, 2, 0), &x, 1, r);
    dt_tensor *o = leaf(ctx, 4, (int64_t[]){2, 3, 15, 35}); /* odd H and W, OW 17 = 8 + 8 + 1 */
    fwd_bwd(ctx, dt_relu_max_pool2d(o, 2, 2, 0), &o, 1, r);
    dt_tensor *t = leaf(ctx, 4, (int64_t[]){3, 2, 6, 7}); /* OW 3; the second gradient adds */
    fwd_bwd(ctx, dt_add(dt_max_pool2d(t, 2, 2, 0), dt_relu_max_pool2d(t, 2, 2, 0)), &t, 1, r);
    dt_tensor *z = leaf(ctx, 4, (int64_t[]){2, 3, 9, 11});
    fwd_bwd(ctx, dt_max_pool2d(z, 3, 2, 1), &z, 1, r);
    dt_tensor *a = leaf(ctx, 4, (int64_t[]){2, 3, 9, 11});
    fwd_bwd(ctx, dt_avg_pool2d(a, 3, 2, 1), &a, 1, r);
    /* windows inside the row 8 at a time: OW 21 at stride 1, 19 at stride 2 (and edges) */
    for (int s = 1; s <= 2; s++) {
        dt_tensor *m = leaf(ctx, 4, (int64_t[]){2, 2, 8, s == 1 ? 21 : 37});
        fwd_bwd(ctx, dt_max_pool2d(m, 3, s, 1), &m, 1, r);
        dt_tensor *v = leaf(ctx, 4, (int64_t[]){2, 2, 8, s == 1 ? 21 : 37});
        fwd_bwd(ctx, dt_avg_pool2d(v, 3, s, 1), &v, 1, r);
    }
}

static void case_cross_entropy(dt_ctx *ctx, vec *r) {
    enum { N = 37, C = 75 };
    int64_t tg[N];
    for (int i = 0; i < N; i++) tg[i] = i % 5 == 3 ? -100 : (i * 7) % C;
    dt_tensor *x = leaf(ctx, 2, (int64_t[]){N, C});
    dt_tensor *t = dt_tensor_from_i64(ctx, 1, (int64_t[]){N}, tg);
    dt_tensor *l = dt_cross_entropy(x, t, -100);
    take(r, l);
    CHECK(l && dt_backward(l) == DT_OK);
    take(r, x->grad);
}

static void case_gelu(dt_ctx *ctx, vec *r) {
    dt_tensor *x = leaf(ctx, 1, (int64_t[]){1031});
    fwd_bwd(ctx, dt_gelu_tanh(x), &x, 1, r);
    dt_tensor *a = leaf(ctx, 2, (int64_t[]){33, 70});
    dt_tensor *w = leaf(ctx, 2, (int64_t[]){90, 70}), *b = leaf(ctx, 1, (int64_t[]){90});
    fwd_bwd(ctx, dt_linear_gelu_tanh(a, w, b), (dt_tensor *[]){a, w, b}, 3, r);
}

static void case_attention(dt_ctx *ctx, vec *r) {
    dt_tensor *q = leaf(ctx, 3, (int64_t[]){2, 70, 3 * 64}); /* T 70, 2 heads of 32 */
    fwd_bwd(ctx, dt_causal_self_attention(q, 2), &q, 1, r);
}

static void case_gemm(dt_ctx *ctx, vec *r) {
    dt_tensor *a = leaf(ctx, 2, (int64_t[]){260, 300}), *b = leaf(ctx, 2, (int64_t[]){90, 300});
    fwd_bwd(ctx, dt_matmul_t(a, b, false, true), (dt_tensor *[]){a, b}, 2, r);
    dt_tensor *c = leaf(ctx, 2, (int64_t[]){800, 40}), *d = leaf(ctx, 2, (int64_t[]){800, 50});
    fwd_bwd(ctx, dt_matmul_t(c, d, true, false), (dt_tensor *[]){c, d}, 2, r);
}

typedef void (*case_fn)(dt_ctx *ctx, vec *r);

static vec run(case_fn fn) {
    vec r = {0};
    dt_ctx *ctx = dt_ctx_new(NULL, 5);
    fn(ctx, &r);
    dt_ctx_free(ctx);
    return r;
}

static void check_case(const char *name, case_fn fn) {
    dt_cpu_isa hw = dt_cpu_isa_level();
    dt__cpu_isa_override(DT_CPU_GENERIC);
    vec ref = run(fn);
    CHECK_MSG(ref.n > 0, "%s: no results", name);
    for (int isa = DT_CPU_GENERIC; isa <= (int)hw; isa++) {
        dt__cpu_isa_override((dt_cpu_isa)isa);
        vec a = run(fn), b = run(fn);
        CHECK_MSG(a.n == ref.n && b.n == ref.n, "%s %s: %lld / %lld results, generic %lld", name,
                  dt_cpu_isa_name((dt_cpu_isa)isa), (long long)a.n, (long long)b.n,
                  (long long)ref.n);
        if (a.n == ref.n && b.n == ref.n) {
            CHECK_MSG(!memcmp(a.v, b.v, (size_t)a.n * sizeof(float)), "%s %s: not deterministic",
                      name, dt_cpu_isa_name((dt_cpu_isa)isa));
            int64_t bad = 0, first = -1;
            for (int64_t i = 0; i < a.n; i++) {
                bool ok = fabsf(a.v[i] - ref.v[i]) <= 1e-5f + 1e-4f * fabsf(ref.v[i]);
                if (!ok && first < 0) first = i;
                bad += !ok;
            }
            CHECK_MSG(bad == 0, "%s %s: %lld of %lld past the tolerance, first [%lld] %.9g vs %.9g",
                      name, dt_cpu_isa_name((dt_cpu_isa)isa), (long long)bad, (long long)a.n,
                      (long long)first, first < 0 ? 0. : (double)a.v[first],
                      first < 0 ? 0. : (double)ref.v[first]);
        }
        free(a.v), free(b.v);
    }
    free(ref.v);
    dt__cpu_isa_override(hw);
}

static void test_variants(void) {
    check_case("conv2d", case_conv);
    check_case("pool", case_pool);
    check_case("cross_entropy", case_cross_entropy);
    check_case("gelu_tanh", case_gelu);
    check_case("attention", case_attention);
    check_case("gemm", case_gemm);
}

/* Each level runs its own conv / pooling table, with Winograd wherever it has vector kernels
 * (so case_conv's Winograd shapes really take that path at avx2 and up). */
static void test_conv_tables(void) {
    const dt__conv_kernels *want[] = {&dt__conv_generic, &dt__conv_avx2, &dt__conv_avx512,
                                      &dt__conv_avx512};
    /* N C H W, OC KH KW, OH OW, stride pad: case_conv's first Winograd shape */
    dt__conv_geom g = {2, 8, 12, 13, 8, 3, 3, 12, 13, 1, 1};
    dt_cpu_isa hw = dt_cpu_isa_level();
    for (int isa = DT_CPU_GENERIC; isa <= (int)hw; isa++) {
        dt__cpu_isa_override((dt_cpu_isa)isa);
        CHECK_MSG(dt__conv() == want[isa], "conv table of %s", dt_cpu_isa_name((dt_cpu_isa)isa));
        CHECK_MSG(dt__conv()->wino_ok(&g) == (isa >= DT_CPU_AVX2), "Winograd at %s",
                  dt_cpu_isa_name((dt_cpu_isa)isa));
    }
    dt__cpu_isa_override(hw);
}

/* bf16 rounding: the same bits from every variant (nearest even, NaN quieted) */
static void test_bf16_bits(void) {
    enum { N = 1000 };
    float x[N];
    uint16_t ref[N], got[N];
    for (int i = 0; i < N; i++) x[i] = (float)sin(i * 0.37) * powf(2.f, (float)(i % 40 - 20));
    x[5] = NAN, x[6] = INFINITY, x[7] = -0.f, x[8] = 1.00390625f; /* a tie: to even */
    dt_cpu_isa hw = dt_cpu_isa_level();
    dt__cpu_isa_override(DT_CPU_GENERIC);
    dt_f32_to_bf16(x, ref, N);
    for (int isa = DT_CPU_GENERIC; isa <= (int)hw; isa++) {
        dt__cpu_isa_override((dt_cpu_isa)isa);
        dt_f32_to_bf16(x, got, N);
        CHECK_MSG(!memcmp(got, ref, sizeof ref), "bf16 %s", dt_cpu_isa_name((dt_cpu_isa)isa));
    }
    dt__cpu_isa_override(hw);
}

int main(void) {
    unsetenv("DTRAIN_ISA"); /* every level the CPU has */
    fprintf(stderr, "CPU level %s: variants generic..%s\n", dt_cpu_isa_name(dt_cpu_isa_level()),
            dt_cpu_isa_name(dt_cpu_isa_level()));
    TEST_RUN(test_variants);
    TEST_RUN(test_conv_tables);
    TEST_RUN(test_bf16_bits);
    TEST_END();
}
