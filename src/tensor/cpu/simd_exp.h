/* simd_exp.h — the vectorised exp shared by the activation, attention and loss kernels, in an
 * AVX-512 (dt__exp512) and an AVX2 + FMA (dt__exp256) variant, with the tail masks and the
 * fixed-order lane reductions their callers use.
 *
 * exp(x) = 2^n e^r, n = round(x / ln2), |r| <= ln2/2, degree-6 Taylor polynomial with explicit
 * FMAs (relative error ~2e-7, like expf); inf above ~88.7 (scalef overflows). Below -87 the
 * result is clamped to exp(-87) ~ 1.6e-38 instead of going denormal (denormal arithmetic is
 * ~100x slower); callers that need an exact 0 there mask it. NaN passes through the clamps
 * (min/max return their second operand on NaN). dt__exp256 is the same computation 8 lanes wide;
 * AVX2 has no scalef, so 2^n is built in the exponent field, as 2^n1 * 2^n2 (n1 = n >> 1) so
 * that both factors stay normal over the whole clamped range. */
#ifndef DT_SIMD_EXP_H
#define DT_SIMD_EXP_H

#include <immintrin.h>
#include <stdint.h>

#include "base/base_impl.h"

DT__AVX512_BEGIN

static inline __m512 dt__exp512(__m512 x) {
    __m512 xc = _mm512_min_ps(_mm512_set1_ps(89.f), x);
    xc = _mm512_max_ps(_mm512_set1_ps(-87.f), xc);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723212e-6f), r);
    __m512 p = _mm512_set1_ps(1.f / 720.f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 120.f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 24.f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 6.f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
    return _mm512_scalef_ps(p, n);
}

/* exp(x) for x <= 0 (max-subtracted softmax arguments): dt__exp512 with an exact 0 below -87. */
static inline __m512 dt__exp512_nonpos(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.f);
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ), dt__exp512(x));
}

/* The lanes of a 16-wide step with `rem` elements left. */
static inline __mmask16 dt__tail_mask16(int64_t rem) {
    return rem >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << rem) - 1u);
}
DT__ISA_END

DT__AVX2_BEGIN

static inline __m256 dt__exp256(__m256 x) {
    __m256 xc = _mm256_min_ps(_mm256_set1_ps(89.f), x);
    xc = _mm256_max_ps(_mm256_set1_ps(-87.f), xc);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723212e-6f), r);
    __m256 p = _mm256_set1_ps(1.f / 720.f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 120.f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 24.f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 6.f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
    /* n in [-126, 128] (NaN converts to INT_MIN: the NaN in p carries through) */
    __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1);
    __m256i n2 = _mm256_sub_epi32(ni, n1), bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* exp(x) for x <= 0: dt__exp256 with an exact 0 below -87. */
static inline __m256 dt__exp256_nonpos(__m256 x) {
    __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(-87.f), _CMP_GE_OQ);
    return _mm256_and_ps(keep, dt__exp256(x));
}

/* The lanes of an 8-wide step with `rem` elements left, for maskload / maskstore. */
static inline __m256i dt__tail_mask8(int64_t rem) {
    int r = rem >= 8 ? 8 : (int)rem;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The sum and the max of the 8 lanes, in one fixed tree (halves, then pairs). */
static inline float dt__hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
static inline float dt__hmax256(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}

/* max of x[0 .. n), n >= 1: 8 lanes, then dt__hmax256's tree */
static inline float dt__max_row256(const float *x, int64_t n) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 vm = ninf;
    for (int64_t j = 0; j < n; j += 8) {
        __m256i k = dt__tail_mask8(n - j);
        __m256 v = _mm256_blendv_ps(ninf, _mm256_maskload_ps(x + j, k), _mm256_castsi256_ps(k));
        vm = _mm256_max_ps(vm, v);
    }
    return dt__hmax256(vm);
}
DT__ISA_END

#endif
