/*
 * ops_activation.c — element-wise activations: gelu (exact, erf), gelu_tanh, silu, tanh,
 * sigmoid, and the gated swiglu(gate, up) = silu(gate) * up of Llama's MLP, forward and backward.
 *
 * Speed. gelu_tanh sits on the GPT hot path, so every activation except the exact gelu is
 * written as branch-free `#pragma omp simd` loops over a vectorisable exp of our own
 * (fast_exp below: Cody-Waite range reduction plus a degree-6 polynomial fitted for minimum
 * relative error on [-ln2/2, ln2/2]; max relative error vs libm ~1.2e-7 wherever the result
 * is a normal float, checked in tests/tensor/test_act_norm.c). The forms used keep relative
 * accuracy in the tails:
 *     gelu_tanh(x) = 0.5 x (1 + tanh(u)) = x * sigmoid(2u),  u = sqrt(2/pi) (x + 0.044715 x^3)
 *     silu(x)      = x * sigmoid(x),  sigmoid(x) = 1 / (1 + exp(-x))
 *     tanh(x)      = odd polynomial for |x| < 0.625, else sign(x) (1 - 2 / (1 + exp(2|x|)))
 * The exact gelu uses libm's erfcf (0.5 x erfc(-x/sqrt2), accurate in the negative tail too).
 * gelu_tanh is within 1e-6 relative of the exact-arithmetic value on [-3, 3]; further out in
 * the negative tail the f32 rounding of u adds ~|u| * 2e-7 (the erf variant behaves alike),
 * where PyTorch's f32 0.5 x (1 + tanh u) cancels to 0.
 * Where AVX-512 is available gelu_tanh (forward and backward, also run by the fused linear in
 * ops_matmul.c) is written in intrinsics with explicit FMAs instead (dt__exp512 in cpu/simd_exp.h:
 * the same range reduction, a Taylor polynomial, relative error ~2e-7): 2.5x faster than the
 * auto-vectorised loop, which GCC emits 256 bits wide and, under -ffp-contract=off, without FMA.
 * On AVX2 machines the same kernels run 8 lanes wide (dt__exp256); the fused linear's epilogue
 * (forward and derivative in one pass), a scalar loop in the portable variant, was 15-17% of a
 * GPT step there.
 *
 * Determinism. Work is cut into fixed blocks of BLK elements (parallel over blocks), so which
 * elements go through the vector body or the scalar tail never depends on the thread count
 * (the AVX-512 gelu_tanh masks its tail lanes: every element takes the same path). Backwards
 * store into a fresh gradient buffer instead of zeroing it first.
 *
 * FLOPs per element (a transcendental counts as one): gelu 8, gelu_tanh 8, silu 4, tanh 4,
 * sigmoid 3, swiglu 5; backward: the default 2 x forward.
 */
#include "tensor_impl.h"

#include <math.h>

#define PAR_MIN 32768
#define BLK 4096

/* ---- vectorisable exp / tanh -------------------------------------------------------------- */

static inline float bits_to_f32(int32_t i) {
    union {
        int32_t i;
        float f;
    } u = {.i = i};
    return u.f;
}

/* exp(x) for all float x, denormal results included; +inf above ln(FLT_MAX), NaN for NaN.
 * Branch-free (two clamps, no other selects), so loops calling it vectorise. */
static inline __attribute__((always_inline)) float fast_exp(float x) {
    /* beyond 89 the result overflows to +inf by itself; below -104 it rounds to 0 */
    float xc = x > 89.0f ? 89.0f : x;
    xc = xc < -104.0f ? -104.0f : xc;
    /* n = round(x / ln2) with the 1.5 * 2^23 trick (exact at -O2: no reassociation) */
    float t = xc * 1.44269504f + 12582912.0f;
    float n = t - 12582912.0f;
    /* r = x - n ln2 in two steps (ln2_hi has 16 significant bits: n * ln2_hi is exact) */
    float r = xc - n * 0.693145751953125f;
    r = r - n * 1.42860682e-6f;
    float p = 1.3814613e-03f;
    p = p * r + 8.368709961e-03f;
    p = p * r + 4.166838737e-02f;
    p = p * r + 1.666652069e-01f;
    p = p * r + 4.999999345e-01f;
    p = 1.0f + r + (r * r) * p;
    /* scale by 2^n, n in [-150, 129], as 2^n1 * 2^n2 with both exponents normal */
    int32_t ni = (int32_t)n;
    int32_t n1 = ni >> 1, n2 = ni - n1;
    return (p * bits_to_f32((int32_t)((uint32_t)(n1 + 127) << 23))) *
           bits_to_f32((int32_t)((uint32_t)(n2 + 127) << 23));
}

static inline __attribute__((always_inline)) float fast_sigmoid(float x) {
    return 1.0f / (1.0f + fast_exp(-x));
}

static inline __attribute__((always_inline)) float fast_tanh(float x) {
    float ax = fabsf(x);
    float big = 1.0f - 2.0f / (1.0f + fast_exp(2.0f * ax));
    big = copysignf(big, x);
    float z = x * x;
    float q = -5.704984161e-03f;
    q = q * z + 2.063908471e-02f;
    q = q * z - 5.373971430e-02f;
    q = q * z + 1.333144219e-01f;
    q = q * z - 3.333328194e-01f;
    float small = x + (x * z) * q;
    return ax < 0.625f ? small : big;
}

/* For the accuracy test (tests/tensor/test_act_norm.c, linked statically); not public API. */
float dt__fast_exp(float x);
float dt__fast_tanh(float x);
float dt__fast_exp(float x) {
    return fast_exp(x);
}
float dt__fast_tanh(float x) {
    return fast_tanh(x);
}

/* ---- kernels: forward y = f(x); backward gx (+)= g * f'(x) (from x and/or y) --------------
 * A backward stores into a fresh (uninitialised) gradient buffer and adds into an existing
 * one: STORE_OR_ADD writes both loops so neither reads gx needlessly. */

#define STORE_OR_ADD(acc, n, d_i)                                                                  \
    do {                                                                                           \
        if (acc) {                                                                                 \
            _Pragma("omp simd") for (int64_t i = 0; i < (n); i++) gx[i] += (d_i);                  \
        } else {                                                                                   \
            _Pragma("omp simd") for (int64_t i = 0; i < (n); i++) gx[i] = (d_i);                   \
        }                                                                                          \
    } while (0)

#define GELU_K0 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_K1 0.044715f
#define INV_SQRT2 0.7071067811865476f
#define INV_SQRT2PI 0.3989422804014327f

static void gelu_fwd(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * erfcf(-x[i] * INV_SQRT2);
}
static inline float gelu_grad(float v) {
    float cdf = 0.5f * erfcf(-v * INV_SQRT2);
    float pdf = INV_SQRT2PI * fast_exp(-0.5f * v * v);
    return cdf + v * pdf;
}
static void gelu_bwd(const float *x, const float *y, const float *g, float *gx, int64_t n,
                     bool acc) {
    (void)y;
    if (acc)
        for (int64_t i = 0; i < n; i++) gx[i] += g[i] * gelu_grad(x[i]);
    else
        for (int64_t i = 0; i < n; i++) gx[i] = g[i] * gelu_grad(x[i]);
}

/* gelu_tanh in AVX-512 with explicit FMAs: it runs on every GPT MLP activation (the fused
 * linear's epilogue and backward), where the auto-vectorised loop below (256-bit, no FMA
 * under -ffp-contract=off) cost as much as the AMX GEMM it follows. Tails use masked lanes,
 * so every element takes the same path and the bits do not depend on where it sits. */
#include <immintrin.h>

#include "cpu/simd_exp.h"

DT__AVX512_BEGIN

/* s = sigmoid(2u) = (1 + tanh(u)) / 2, u = sqrt(2/pi) (v + 0.044715 v^3) */
static inline __m512 gelu_tanh_s512(__m512 v, __m512 v2) {
    __m512 u = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(GELU_K0), v),
                             _mm512_fmadd_ps(_mm512_set1_ps(GELU_K1), v2, _mm512_set1_ps(1.f)));
    __m512 e = dt__exp512(_mm512_mul_ps(_mm512_set1_ps(-2.f), u));
    return _mm512_div_ps(_mm512_set1_ps(1.f), _mm512_add_ps(_mm512_set1_ps(1.f), e));
}

/* x[i], plus bias[i] when bias is given (lanes k) */
static inline __m512 load_biased(__mmask16 k, const float *x, const float *bias, int64_t i) {
    __m512 v = _mm512_maskz_loadu_ps(k, x + i);
    return bias ? _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, bias + i)) : v;
}

static void gelu_tanh_fwd_b_512(const float *x, const float *bias, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        __m512 v = load_biased(k, x, bias, i);
        __m512 s = gelu_tanh_s512(v, _mm512_mul_ps(v, v));
        _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(v, s));
    }
}

/* gelu_tanh'(v) given s = gelu_tanh_s512(v, v2):
 * s + 2 v s (1 - s) du, du = sqrt(2/pi) (1 + 3 * 0.044715 v^2) */
static inline __m512 gelu_tanh_grad512(__m512 v, __m512 v2, __m512 s) {
    __m512 du =
        _mm512_mul_ps(_mm512_set1_ps(GELU_K0),
                      _mm512_fmadd_ps(_mm512_set1_ps(3.f * GELU_K1), v2, _mm512_set1_ps(1.f)));
    __m512 t =
        _mm512_mul_ps(_mm512_mul_ps(_mm512_add_ps(v, v), s), _mm512_sub_ps(_mm512_set1_ps(1.f), s));
    return _mm512_fmadd_ps(t, du, s);
}

static void gelu_tanh_bwd_512(const float *x, const float *y, const float *g, float *gx, int64_t n,
                              bool acc) {
    (void)y;
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        __m512 v = _mm512_maskz_loadu_ps(k, x + i), v2 = _mm512_mul_ps(v, v);
        __m512 s = gelu_tanh_s512(v, v2);
        __m512 d = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, g + i), gelu_tanh_grad512(v, v2, s));
        if (acc) d = _mm512_add_ps(_mm512_maskz_loadu_ps(k, gx + i), d);
        _mm512_mask_storeu_ps(gx + i, k, d);
    }
}

/* stream: d goes to memory with non-temporal stores where its lines are aligned (it is read
 * again only by the backward, long after the cache has moved on) */
static void gelu_tanh_fwd_grad_b_512(const float *x, const float *bias, float *y, float *d,
                                     int64_t n, bool stream) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        __m512 v = load_biased(k, x, bias, i), v2 = _mm512_mul_ps(v, v);
        __m512 s = gelu_tanh_s512(v, v2);
        _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(v, s));
        __m512 g = gelu_tanh_grad512(v, v2, s);
        if (stream && k == (__mmask16)0xFFFF && !((uintptr_t)(d + i) & 63))
            _mm512_stream_ps(d + i, g);
        else
            _mm512_mask_storeu_ps(d + i, k, g);
    }
    if (stream) _mm_sfence();
}

DT__ISA_END

/* The same kernels in AVX2 + FMA, 8 lanes (dt__exp256): tails use maskload / maskstore, so
 * again every element takes the same path. */
DT__AVX2_BEGIN

static inline __m256 gelu_tanh_s256(__m256 v, __m256 v2) {
    __m256 u = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(GELU_K0), v),
                             _mm256_fmadd_ps(_mm256_set1_ps(GELU_K1), v2, _mm256_set1_ps(1.f)));
    __m256 e = dt__exp256(_mm256_mul_ps(_mm256_set1_ps(-2.f), u));
    return _mm256_div_ps(_mm256_set1_ps(1.f), _mm256_add_ps(_mm256_set1_ps(1.f), e));
}

static inline __m256 gelu_tanh_grad256(__m256 v, __m256 v2, __m256 s) {
    __m256 du =
        _mm256_mul_ps(_mm256_set1_ps(GELU_K0),
                      _mm256_fmadd_ps(_mm256_set1_ps(3.f * GELU_K1), v2, _mm256_set1_ps(1.f)));
    __m256 t =
        _mm256_mul_ps(_mm256_mul_ps(_mm256_add_ps(v, v), s), _mm256_sub_ps(_mm256_set1_ps(1.f), s));
    return _mm256_fmadd_ps(t, du, s);
}

static inline __m256 load_biased256(__m256i k, const float *x, const float *bias, int64_t i) {
    __m256 v = _mm256_maskload_ps(x + i, k);
    return bias ? _mm256_add_ps(v, _mm256_maskload_ps(bias + i, k)) : v;
}

static void gelu_tanh_fwd_b_256(const float *x, const float *bias, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 8) {
        __m256i k = dt__tail_mask8(n - i);
        __m256 v = load_biased256(k, x, bias, i);
        __m256 s = gelu_tanh_s256(v, _mm256_mul_ps(v, v));
        _mm256_maskstore_ps(y + i, k, _mm256_mul_ps(v, s));
    }
}

static void gelu_tanh_bwd_256(const float *x, const float *y, const float *g, float *gx, int64_t n,
                              bool acc) {
    (void)y;
    for (int64_t i = 0; i < n; i += 8) {
        __m256i k = dt__tail_mask8(n - i);
        __m256 v = _mm256_maskload_ps(x + i, k), v2 = _mm256_mul_ps(v, v);
        __m256 s = gelu_tanh_s256(v, v2);
        __m256 d = _mm256_mul_ps(_mm256_maskload_ps(g + i, k), gelu_tanh_grad256(v, v2, s));
        if (acc) d = _mm256_add_ps(_mm256_maskload_ps(gx + i, k), d);
        _mm256_maskstore_ps(gx + i, k, d);
    }
}

static void gelu_tanh_fwd_grad_b_256(const float *x, const float *bias, float *y, float *d,
                                     int64_t n, bool stream) {
    for (int64_t i = 0; i < n; i += 8) {
        __m256i k = dt__tail_mask8(n - i);
        __m256 v = load_biased256(k, x, bias, i), v2 = _mm256_mul_ps(v, v);
        __m256 s = gelu_tanh_s256(v, v2);
        _mm256_maskstore_ps(y + i, k, _mm256_mul_ps(v, s));
        __m256 g = gelu_tanh_grad256(v, v2, s);
        if (stream && n - i >= 8 && !((uintptr_t)(d + i) & 31))
            _mm256_stream_ps(d + i, g);
        else
            _mm256_maskstore_ps(d + i, k, g);
    }
    if (stream) _mm_sfence();
}

DT__ISA_END

/* portable variants */

static inline __attribute__((always_inline)) float gelu_tanh_val(float v) {
    float u = GELU_K0 * v * (1.0f + GELU_K1 * v * v);
    return v / (1.0f + fast_exp(-2.0f * u));
}
static void gelu_tanh_fwd_b_gen(const float *x, const float *bias, float *y, int64_t n) {
    if (bias) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) y[i] = gelu_tanh_val(x[i] + bias[i]);
    } else {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) y[i] = gelu_tanh_val(x[i]);
    }
}
static inline __attribute__((always_inline)) float gelu_tanh_grad(float v) {
    float v2 = v * v;
    float u = GELU_K0 * v * (1.0f + GELU_K1 * v2);
    float s = 1.0f / (1.0f + fast_exp(-2.0f * u)); /* = (1 + tanh(u)) / 2 */
    float du = GELU_K0 * (1.0f + 3.0f * GELU_K1 * v2);
    return s + 2.0f * v * s * (1.0f - s) * du;
}
static void gelu_tanh_bwd_gen(const float *x, const float *y, const float *g, float *gx, int64_t n,
                              bool acc) {
    (void)y;
    STORE_OR_ADD(acc, n, g[i] * gelu_tanh_grad(x[i]));
}
static void gelu_tanh_fwd_grad_b_gen(const float *x, const float *bias, float *y, float *d,
                                     int64_t n, bool stream) {
    (void)stream;
    for (int64_t i = 0; i < n; i++) {
        float v = bias ? x[i] + bias[i] : x[i];
        d[i] = gelu_tanh_grad(v); /* d may be x: v is read first */
        y[i] = gelu_tanh_val(v);
    }
}

/* the variant of the CPU's level */
static void gelu_tanh_fwd_b(const float *x, const float *bias, float *y, int64_t n) {
    (dt__isa_avx512() ? gelu_tanh_fwd_b_512
     : dt__isa_avx2() ? gelu_tanh_fwd_b_256
                      : gelu_tanh_fwd_b_gen)(x, bias, y, n);
}
static void gelu_tanh_bwd(const float *x, const float *y, const float *g, float *gx, int64_t n,
                          bool acc) {
    (dt__isa_avx512() ? gelu_tanh_bwd_512
     : dt__isa_avx2() ? gelu_tanh_bwd_256
                      : gelu_tanh_bwd_gen)(x, y, g, gx, n, acc);
}
static void gelu_tanh_fwd_grad_b(const float *x, const float *bias, float *y, float *d, int64_t n,
                                 bool stream) {
    (dt__isa_avx512() ? gelu_tanh_fwd_grad_b_512
     : dt__isa_avx2() ? gelu_tanh_fwd_grad_b_256
                      : gelu_tanh_fwd_grad_b_gen)(x, bias, y, d, n, stream);
}

static void gelu_tanh_fwd(const float *x, float *y, int64_t n) {
    gelu_tanh_fwd_b(x, NULL, y, n);
}

void dt__gelu_tanh_fwd(const float *x, const float *bias, float *y, int64_t n) {
    gelu_tanh_fwd_b(x, bias, y, n);
}
void dt__gelu_tanh_fwd_grad(const float *x, const float *bias, float *y, float *d, int64_t n,
                            bool stream) {
    gelu_tanh_fwd_grad_b(x, bias, y, d, n, stream);
}

static void silu_fwd(const float *x, float *y, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + fast_exp(-x[i]));
}
static inline __attribute__((always_inline)) float silu_grad(float v) {
    float s = fast_sigmoid(v);
    return s * (1.0f + v * (1.0f - s));
}
static void silu_bwd(const float *x, const float *y, const float *g, float *gx, int64_t n,
                     bool acc) {
    (void)y;
    STORE_OR_ADD(acc, n, g[i] * silu_grad(x[i]));
}

static void tanh_fwd(const float *x, float *y, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = fast_tanh(x[i]);
}
static void tanh_bwd(const float *x, const float *y, const float *g, float *gx, int64_t n,
                     bool acc) {
    (void)x;
    STORE_OR_ADD(acc, n, g[i] * (1.0f - y[i] * y[i]));
}

static void sigmoid_fwd(const float *x, float *y, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = fast_sigmoid(x[i]);
}
static void sigmoid_bwd(const float *x, const float *y, const float *g, float *gx, int64_t n,
                        bool acc) {
    (void)x;
    STORE_OR_ADD(acc, n, g[i] * (y[i] * (1.0f - y[i])));
}

/* ---- the op table ------------------------------------------------------------------------- */

enum { ACT_GELU, ACT_GELU_TANH, ACT_SILU, ACT_TANH, ACT_SIGMOID, ACT_COUNT };

typedef void (*act_fwd_fn)(const float *x, float *y, int64_t n);
typedef void (*act_bwd_fn)(const float *x, const float *y, const float *g, float *gx, int64_t n,
                           bool acc);

static const struct {
    act_fwd_fn fwd;
    act_bwd_fn bwd;
    int64_t flops; /* per element, forward */
} act_kinds[ACT_COUNT] = {
    [ACT_GELU] = {gelu_fwd, gelu_bwd, 8},
    [ACT_GELU_TANH] = {gelu_tanh_fwd, gelu_tanh_bwd, 8},
    [ACT_SILU] = {silu_fwd, silu_bwd, 4},
    [ACT_TANH] = {tanh_fwd, tanh_bwd, 4},
    [ACT_SIGMOID] = {sigmoid_fwd, sigmoid_bwd, 3},
};

/* iattr[0] = kind */
static void act_backward(dt_node *n) {
    dt_tensor *x = n->in[0];
    if (!dt__wants_grad(x)) return;
    bool fresh;
    float *gx = dt__grad_f32_fresh(x, &fresh); /* every element is written */
    if (!gx) return;
    act_bwd_fn bwd = act_kinds[n->iattr[0]].bwd;
    const float *X = x->data, *Y = n->out->data, *G = n->out->grad->data;
    int64_t N = dt_numel(x), nb = (N + BLK - 1) / BLK;
#pragma omp parallel for schedule(static) if (N > PAR_MIN)
    for (int64_t b = 0; b < nb; b++) {
        int64_t lo = b * BLK, len = N - lo < BLK ? N - lo : BLK;
        bwd(X + lo, Y + lo, G + lo, gx + lo, len, !fresh);
    }
}

static int64_t act_flops(const dt_node *n) {
    return act_kinds[n->iattr[0]].flops * dt_numel(n->out);
}

DT_OP(op_gelu, "gelu", act_backward, act_flops, NULL);
DT_OP(op_gelu_tanh, "gelu_tanh", act_backward, act_flops, NULL);
DT_OP(op_silu, "silu", act_backward, act_flops, NULL);
DT_OP(op_tanh, "tanh", act_backward, act_flops, NULL);
DT_OP(op_sigmoid, "sigmoid", act_backward, act_flops, NULL);

static dt_tensor *activation(dt_tensor *x, int kind, const dt_op_def *op) {
    DT_CHECK_INPUTS(x);
    if (!dt__need_f32(x, op->name) || !(x = dt__contig(x))) return NULL;
    dt_tensor *y = dt__empty_like(x);
    dt_node *n = dt__node_new(op, y, 1, &x);
    if (!n) return NULL;
    n->iattr[0] = kind;
    act_fwd_fn fwd = act_kinds[kind].fwd;
    const float *X = x->data;
    float *Y = y->data;
    int64_t N = dt_numel(x), nb = (N + BLK - 1) / BLK;
#pragma omp parallel for schedule(static) if (N > PAR_MIN)
    for (int64_t b = 0; b < nb; b++) {
        int64_t lo = b * BLK, len = N - lo < BLK ? N - lo : BLK;
        fwd(X + lo, Y + lo, len);
    }
    return dt__node_commit(n);
}

dt_tensor *dt_gelu(dt_tensor *x) {
    return activation(x, ACT_GELU, &op_gelu);
}
dt_tensor *dt_gelu_tanh(dt_tensor *x) {
    return activation(x, ACT_GELU_TANH, &op_gelu_tanh);
}
dt_tensor *dt_silu(dt_tensor *x) {
    return activation(x, ACT_SILU, &op_silu);
}
dt_tensor *dt_tanh(dt_tensor *x) {
    return activation(x, ACT_TANH, &op_tanh);
}
dt_tensor *dt_sigmoid(dt_tensor *x) {
    return activation(x, ACT_SIGMOID, &op_sigmoid);
}

/* ---- swiglu: y = silu(g) * u (Llama's gated MLP) -----------------------------------------
 * Backward: dg = dy * u * silu'(g), du = dy * silu(g), recomputed from g (nothing saved). Each
 * gradient is stored into a fresh buffer and added into an existing one; when gate and up are
 * one tensor the second contribution finds the buffer taken and adds. */

static void swiglu_fwd(const float *g, const float *u, float *y, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = g[i] / (1.0f + fast_exp(-g[i])) * u[i];
}

/* dg (+)= dy u silu'(g) when dg, du (+)= dy silu(g) when du; add_* say add or store */
static void swiglu_bwd(const float *g, const float *u, const float *dy, float *dg, bool add_g,
                       float *du, bool add_u, int64_t n) {
    if (dg) {
        float *gx = dg;
        STORE_OR_ADD(add_g, n, dy[i] * u[i] * silu_grad(g[i]));
    }
    if (du) {
        float *gx = du;
        STORE_OR_ADD(add_u, n, dy[i] * (g[i] / (1.0f + fast_exp(-g[i]))));
    }
}

static void swiglu_backward(dt_node *n) {
    dt_tensor *gate = n->in[0], *up = n->in[1];
    bool fresh_g = false, fresh_u = false;
    float *dg = dt__wants_grad(gate) ? dt__grad_f32_fresh(gate, &fresh_g) : NULL;
    float *du = dt__wants_grad(up) ? dt__grad_f32_fresh(up, &fresh_u) : NULL;
    if ((dt__wants_grad(gate) && !dg) || (dt__wants_grad(up) && !du)) return; /* OOM */
    const float *G = gate->data, *U = up->data, *DY = n->out->grad->data;
    int64_t N = dt_numel(gate), nb = (N + BLK - 1) / BLK;
#pragma omp parallel for schedule(static) if (N > PAR_MIN)
    for (int64_t b = 0; b < nb; b++) {
        int64_t lo = b * BLK, len = N - lo < BLK ? N - lo : BLK;
        swiglu_bwd(G + lo, U + lo, DY + lo, dg ? dg + lo : NULL, !fresh_g, du ? du + lo : NULL,
                   !fresh_u, len);
    }
}

static int64_t swiglu_flops(const dt_node *n) {
    return 5 * dt_numel(n->out);
}

DT_OP(op_swiglu, "swiglu", swiglu_backward, swiglu_flops, NULL);

dt_tensor *dt_swiglu(dt_tensor *gate, dt_tensor *up) {
    DT_CHECK_INPUTS(gate, up);
    if (!dt__need_f32(gate, "swiglu") || !dt__need_f32(up, "swiglu")) return NULL;
    bool same = gate->ndim == up->ndim;
    for (int d = 0; same && d < gate->ndim; d++) same = gate->shape[d] == up->shape[d];
    if (!same) {
        char a[96], b[96];
        dt_error(DT_ERR_INVALID,
                 "swiglu: gate %s and up %s must have one shape; hint: both come from "
                 "projections of the same input to the MLP's hidden size",
                 dt_shape_str(gate, a, sizeof a), dt_shape_str(up, b, sizeof b));
        return NULL;
    }
    if (!(gate = dt__contig(gate)) || !(up = dt__contig(up))) return NULL;
    dt_tensor *y = dt__empty_like(gate);
    dt_node *n = dt__node_new(&op_swiglu, y, 2, (dt_tensor *[]){gate, up});
    if (!n) return NULL;
    const float *G = gate->data, *U = up->data;
    float *Y = y->data;
    int64_t N = dt_numel(gate), nb = (N + BLK - 1) / BLK;
#pragma omp parallel for schedule(static) if (N > PAR_MIN)
    for (int64_t b = 0; b < nb; b++) {
        int64_t lo = b * BLK, len = N - lo < BLK ? N - lo : BLK;
        swiglu_fwd(G + lo, U + lo, Y + lo, len);
    }
    return dt__node_commit(n);
}
