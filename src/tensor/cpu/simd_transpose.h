/* simd_transpose.h — a 16 x 16 f32 transpose in AVX-512 registers, shared by the GEMM's B
 * packing and attention's per-head key / value transposes. */
#ifndef DT_SIMD_TRANSPOSE_H
#define DT_SIMD_TRANSPOSE_H

#include <immintrin.h>
#include <stdint.h>

#include "base/base_impl.h"

DT__AVX512_BEGIN
/* 16 rows r[0..15] of 16 floats each, written transposed: column i to d + i * ldd. */
static inline void dt__transpose16(const float *const r[16], float *d, int64_t ldd) {
    __m512 a[16], b[16];
    for (int i = 0; i < 16; i++) a[i] = _mm512_loadu_ps(r[i]);
    for (int i = 0; i < 16; i += 2) {
        b[i] = _mm512_unpacklo_ps(a[i], a[i + 1]);
        b[i + 1] = _mm512_unpackhi_ps(a[i], a[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        __m512d b0 = _mm512_castps_pd(b[i]), b1 = _mm512_castps_pd(b[i + 1]);
        __m512d b2 = _mm512_castps_pd(b[i + 2]), b3 = _mm512_castps_pd(b[i + 3]);
        a[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(b0, b2));
        a[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(b0, b2));
        a[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b1, b3));
        a[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b1, b3));
    }
    for (int i = 0; i < 4; i++) {
        b[i] = _mm512_shuffle_f32x4(a[i], a[4 + i], 0x88);
        b[4 + i] = _mm512_shuffle_f32x4(a[i], a[4 + i], 0xdd);
        b[8 + i] = _mm512_shuffle_f32x4(a[8 + i], a[12 + i], 0x88);
        b[12 + i] = _mm512_shuffle_f32x4(a[8 + i], a[12 + i], 0xdd);
    }
    for (int i = 0; i < 4; i++) {
        a[i] = _mm512_shuffle_f32x4(b[i], b[8 + i], 0x88);
        a[8 + i] = _mm512_shuffle_f32x4(b[i], b[8 + i], 0xdd);
        a[4 + i] = _mm512_shuffle_f32x4(b[4 + i], b[12 + i], 0x88);
        a[12 + i] = _mm512_shuffle_f32x4(b[4 + i], b[12 + i], 0xdd);
    }
    for (int i = 0; i < 16; i++) _mm512_storeu_ps(d + i * ldd, a[i]);
}
DT__ISA_END

#endif
