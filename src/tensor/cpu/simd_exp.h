/* simd_exp.h — the vectorised exp shared by the activation and attention kernels (AVX-512).
 *
 * exp(x) = 2^n e^r, n = round(x / ln2), |r| <= ln2/2, degree-6 Taylor polynomial with explicit
 * FMAs (relative error ~2e-7, like expf); inf above ~88.7 (scalef overflows). Below -87 the
 * result is clamped to exp(-87) ~ 1.6e-38 instead of going denormal (denormal arithmetic is
 * ~100x slower); callers that need an exact 0 there mask it. NaN passes through the clamps
 * (min/max return their second operand on NaN). */
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

#endif
