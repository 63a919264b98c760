/* fp16 autocast (src/tensor/cpu/f16.c, the fp16 path of gemm_bf16_storage.c):
 *   - the rounding to fp16 (F16C vectors and the scalar dt_f32_to_f16) gives numpy float16's
 *     bits (round to nearest even, subnormals, overflow to inf from 65520) on the GOLDEN values
 *     of tools/golden_f16.py, each value through both the vector body and the tail;
 *   - a matmul under fp16 autocast rounds its operands (1 + 2^-12 becomes 1) and its output
 *     (120000 becomes inf, as an fp16 GEMM's output on a GPU), where f32 keeps both;
 *   - its backward rounds too: a gradient scaled past 65504 overflows to inf;
 *   - a process without F16C (kernel level generic) refuses fp16 autocast with a hint. */
#include "test.h"

#include "base/base_impl.h"
#include "dtrain/tensor.h"
#include "tensor/tensor_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* {f32 bits, numpy float16 bits}: build/venv/bin/python3 tools/golden_f16.py */
static const struct {
    uint32_t x;
    uint16_t h;
} GOLDEN[] = {
    {0x00000000u, 0x0000}, {0x80000000u, 0x8000}, {0x3f800000u, 0x3c00}, {0xbf800000u, 0xbc00},
    {0x3dcccccdu, 0x2e66}, {0x3eaaaaabu, 0x3555}, {0x477fe000u, 0x7bff}, {0xc77fe000u, 0xfbff},
    {0x477fef00u, 0x7bff}, {0x477fefffu, 0x7bff}, {0x477ff000u, 0x7c00}, {0xc77ff000u, 0xfc00},
    {0x47800000u, 0x7c00}, {0x47c35000u, 0x7c00}, {0x501502f9u, 0x7c00}, {0x7f61b1e6u, 0x7c00},
    {0x7f800000u, 0x7c00}, {0xff800000u, 0xfc00}, {0x38800000u, 0x0400}, {0x387fe000u, 0x0400},
    {0x33800000u, 0x0001}, {0x33000000u, 0x0000}, {0x33000347u, 0x0001}, {0x33c00000u, 0x0002},
    {0x34200000u, 0x0002}, {0x32800000u, 0x0000}, {0xb3800000u, 0x8001}, {0x322bcc77u, 0x0000},
    {0x3380d959u, 0x0001}, {0x0da24260u, 0x0000}, {0x00000001u, 0x0000}, {0x3f801000u, 0x3c00},
    {0x3f803000u, 0x3c02}, {0x3f801008u, 0x3c01}, {0x45001000u, 0x6800}, {0x45003000u, 0x6802},
    {0x457ff800u, 0x6c00}, {0x47001000u, 0x7800}, {0x47003000u, 0x7802}, {0x3f801000u, 0x3c00},
    {0x3f802000u, 0x3c01}, {0xc81c9fecu, 0xfc00}, {0x3bd20ae8u, 0x1e90}, {0x339f1aeeu, 0x0001},
    {0x3fc35a42u, 0x3e1b}, {0x33b97cd3u, 0x0001}, {0x3b3ee9b2u, 0x19f7}, {0xbe176e78u, 0xb0bb},
    {0x371e9fc1u, 0x009f}, {0xc1854a74u, 0xcc2a}, {0x47064675u, 0x7832}, {0xb856ef39u, 0x835c},
    {0x4304603bu, 0x5823}, {0xb71054c1u, 0x8090}, {0x3baa3a40u, 0x1d52}, {0xb259599cu, 0x8000},
    {0xbb0d8057u, 0x986c}, {0x408b1d68u, 0x4459}, {0x432d5435u, 0x596b}, {0x36ae872fu, 0x0057},
    {0xc47a8a9cu, 0xe3d4}, {0x3b2fdce9u, 0x197f}, {0x3700b5e7u, 0x0081}, {0x359fe3ccu, 0x0014},
    {0xc1392f8cu, 0xc9c9}, {0x3be42826u, 0x1f21}, {0x43afb11du, 0x5d7e}, {0xc04f74dfu, 0xc27c},
    {0x4303d0d8u, 0x581f}, {0xb53655b4u, 0x800b}, {0xb02a920fu, 0x8000}, {0x3aae7c23u, 0x1574},
    {0x3b29a1e5u, 0x194d}, {0xc09a132au, 0xc4d1}, {0xc01f797bu, 0xc0fc}, {0xc10c400du, 0xc862},
    {0xb6a99ee7u, 0x8055}, {0xb25c709eu, 0x8000}, {0xbaae5e6au, 0x9573}, {0x355db9c7u, 0x000e},
    {0xbb2203ccu, 0x9910}, {0xbfd98ff8u, 0xbecc}, {0xc80262d2u, 0xfc00}, {0xc1efb60bu, 0xcf7e},
    {0x309937c8u, 0x0000}, {0xbfc0d201u, 0xbe07}, {0x35d56bd6u, 0x001b}, {0xb9ff7faeu, 0x8ffc},
    {0xb5e5a906u, 0x801d}, {0xc6ae2f72u, 0xf571}, {0xc77473bau, 0xfba4}, {0xc6bdc58bu, 0xf5ee},
    {0xc724f5dau, 0xf928}, {0x47340a16u, 0x79a0}, {0x4695fa0eu, 0x74b0}, {0xc762b64cu, 0xfb16},
    {0xc719098au, 0xf8c8}, {0x46c62948u, 0x7631}, {0xc747ee96u, 0xfa3f}, {0x4779a7ebu, 0x7bcd},
    {0xc746c6a5u, 0xfa36}, {0x4722ce4du, 0x7916}, {0xc36ee827u, 0xdb77}, {0xc6d599d6u, 0xf6ad},
    {0xc7115b27u, 0xf88b}, {0x38649c2fu, 0x0392}, {0x37c14c77u, 0x0183}, {0x369c5b01u, 0x004e},
    {0x360a790eu, 0x0023}, {0x37ec5895u, 0x01d9}, {0x385fb2edu, 0x037f}, {0x37b38316u, 0x0167},
    {0x3852d23eu, 0x034b}, {0x38727ba3u, 0x03ca}, {0x36894ca4u, 0x0045}, {0x37987e7fu, 0x0131},
    {0x381e8156u, 0x027a}, {0x379a7ff3u, 0x0135}, {0x37330af3u, 0x00b3}, {0x37fdb2dbu, 0x01fb},
    {0x3842b4beu, 0x030b}, {0x7fc00000u, 0x7e00},
};
#define NG ((int64_t)(sizeof GOLDEN / sizeof *GOLDEN))

static float f_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t u_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* got (a float) is the golden half h widened: same bits, or both NaN */
static bool same_as_half(float got, uint16_t h) {
    float want;
    dt_f16_to_f32(&h, &want, 1);
    return isnan(want) ? isnan(got) : u_of(got) == u_of(want);
}

static void test_round_golden(void) {
    int bad = 0;
    for (int64_t i = 0; i < NG; i++) {
        float x = f_of(GOLDEN[i].x);
        uint16_t h;
        dt_f32_to_f16(&x, &h, 1);
        bool nan = (GOLDEN[i].h & 0x7c00) == 0x7c00 && (GOLDEN[i].h & 0x3ff);
        bool ok = nan ? (h & 0x7c00) == 0x7c00 && (h & 0x3ff) : h == GOLDEN[i].h;
        if (!ok && bad++ < 5)
            fprintf(stderr, "  scalar %a: %04x, numpy %04x\n", (double)x, h, GOLDEN[i].h);
    }
    CHECK_MSG(bad == 0, "%d scalar roundings differ from numpy", bad);
    /* the vector rounding at every offset: each value once in the 8-wide body, once in the tail */
    float *src = malloc(NG * sizeof *src), *dst = malloc(NG * sizeof *dst);
    for (int64_t i = 0; i < NG; i++) src[i] = f_of(GOLDEN[i].x);
    bad = 0;
    for (int64_t k = 0; k < 8; k++) {
        dt__f32_round_f16_seq(src + k, dst + k, NG - k);
        for (int64_t i = k; i < NG; i++)
            if (!same_as_half(dst[i], GOLDEN[i].h) && bad++ < 5)
                fprintf(stderr, "  offset %lld: %a -> %a, numpy %04x\n", (long long)k,
                        (double)src[i], (double)dst[i], GOLDEN[i].h);
    }
    CHECK_MSG(bad == 0, "%d vector roundings differ from numpy", bad);
    /* in place, as the GEMM rounds its output tiles */
    memcpy(dst, src, NG * sizeof *dst);
    dt__f32_round_f16_rows(dst, 1, 0, NG, 0, 1);
    bad = 0;
    for (int64_t i = 0; i < NG; i++) bad += !same_as_half(dst[i], GOLDEN[i].h);
    CHECK_MSG(bad == 0, "%d in-place roundings differ", bad);
    free(src);
    free(dst);
}

/* y = a (M, K) @ b (K, N) with every element of a = av, of b = bv, under autocast t */
static float matmul_const(dt_dtype t, int64_t K, float av, float bv) {
    dt_ctx *c = dt_ctx_new(NULL, 1);
    CHECK(dt_ctx_set_autocast(c, t) == DT_OK);
    dt_tensor *a = dt_tensor_new(c, DT_DTYPE_F32, 2, (int64_t[]){3, K});
    dt_tensor *b = dt_tensor_new(c, DT_DTYPE_F32, 2, (int64_t[]){K, 5});
    dt_fill_(a, av);
    dt_fill_(b, bv);
    dt_tensor *y = dt_matmul(a, b);
    float r = y ? ((float *)y->data)[7] : NAN;
    dt_ctx_free(c);
    return r;
}

static void test_matmul_rounds(void) {
    float tiny = 1.0f + 0x1p-12f; /* not an fp16: rounds to 1 */
    CHECK(matmul_const(DT_DTYPE_F32, 1, tiny, 1.0f) == tiny);
    CHECK(matmul_const(DT_DTYPE_F16, 1, tiny, 1.0f) == 1.0f);
    /* 4 x 300 x 100 = 120000: past fp16's range, inf as an fp16 output; f32 keeps it */
    CHECK(matmul_const(DT_DTYPE_F32, 4, 300.f, 100.f) == 120000.f);
    CHECK(isinf(matmul_const(DT_DTYPE_F16, 4, 300.f, 100.f)));
    /* a large GEMM (the tiled loop, several tiles): every output an fp16 value */
    float v = matmul_const(DT_DTYPE_F16, 300, 0.1f, 0.3f), r;
    dt__f32_round_f16_seq(&v, &r, 1);
    CHECK(v == r && fabsf(v - 9.0f) < 0.02f);
}

/* The backward's GEMMs round too: dy = 2e4 on w = 4 gives dx = 4 * 2e4 * 1 = 8e4 -> inf. */
static void test_backward_overflows(void) {
    for (int f16 = 0; f16 < 2; f16++) {
        dt_ctx *c = dt_ctx_new(NULL, 1);
        CHECK(dt_ctx_set_autocast(c, f16 ? DT_DTYPE_F16 : DT_DTYPE_F32) == DT_OK);
        dt_tensor *x = dt_tensor_new(c, DT_DTYPE_F32, 2, (int64_t[]){2, 4});
        dt_tensor *w = dt_tensor_new(c, DT_DTYPE_F32, 2, (int64_t[]){4, 4});
        dt_fill_(x, 0.5f);
        dt_fill_(w, 1.0f);
        dt_set_requires_grad(x, true);
        dt_tensor *y = dt_matmul(x, w);
        dt_tensor *g = dt_tensor_new(c, DT_DTYPE_F32, 2, (int64_t[]){2, 4});
        dt_fill_(g, 2e4f);
        CHECK(y && dt_backward_with(y, g) == DT_OK);
        float dx = x->grad ? ((float *)x->grad->data)[0] : NAN;
        if (f16)
            CHECK_MSG(isinf(dx), "fp16 dx %g", (double)dx);
        else
            CHECK_MSG(dx == 8e4f, "f32 dx %g", (double)dx);
        dt_ctx_free(c);
    }
}

static void test_refused_without_f16c(void) {
    dt_ctx *c = dt_ctx_new(NULL, 1);
    CHECK(dt_ctx_set_autocast(c, DT_DTYPE_F16) == DT_OK);
    CHECK(strcmp(dt_matmul_compute(DT_DTYPE_F16), "f16-storage-f32-openblas") == 0 ||
          strcmp(dt_matmul_compute(DT_DTYPE_F16), "f16-storage-f32-onednn") == 0);
    CHECK(dt_ctx_set_autocast(c, DT_DTYPE_F32) == DT_OK);
    dt_cpu_isa prev = dt__cpu_isa_override(DT_CPU_GENERIC);
    CHECK(dt_ctx_set_autocast(c, DT_DTYPE_F16) == DT_ERR_CONFIG);
    CHECK_MSG(strstr(dt_last_error(), "F16C") && strstr(dt_last_error(), "hint: train in bf16"),
              "%s", dt_last_error());
    CHECK(dt_ctx_autocast(c) == DT_DTYPE_F32);
    /* the rounding itself still gives numpy's bits without F16C (the scalar path) */
    float x = 65519.0f, r;
    dt__f32_round_f16_seq(&x, &r, 1);
    CHECK(r == 65504.0f);
    dt__cpu_isa_override(prev);
    CHECK(dt_ctx_set_autocast(c, DT_DTYPE_I32) == DT_ERR_INVALID);
    dt_ctx_free(c);
}

int main(void) {
    TEST_RUN(test_round_golden);
    TEST_RUN(test_matmul_rounds);
    TEST_RUN(test_backward_overflows);
    TEST_RUN(test_refused_without_f16c);
    TEST_END();
}
