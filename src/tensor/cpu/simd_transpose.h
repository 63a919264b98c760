/* simd_transpose.h — a 16 x 16 f32 transpose in AVX-512 registers, shared by the GEMM's B
 * packing and long-K A transposes (oneDNN tiles, AVX-512 only) and attention's per-head key /
 * value transposes, and an 8 x 8 one in AVX2 registers for the latter at the avx2 level. */
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

DT__AVX2_BEGIN
/* 8 rows r[0..7] of 8 floats each, written transposed: column i to d + i * ldd. */
static inline void dt__transpose8(const float *const r[8], float *d, int64_t ldd) {
    __m256 a[8], b[8];
    for (int i = 0; i < 8; i++) a[i] = _mm256_loadu_ps(r[i]);
    for (int i = 0; i < 8; i += 2) {
        b[i] = _mm256_unpacklo_ps(a[i], a[i + 1]);
        b[i + 1] = _mm256_unpackhi_ps(a[i], a[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        a[i] = _mm256_shuffle_ps(b[i], b[i + 2], 0x44);
        a[i + 1] = _mm256_shuffle_ps(b[i], b[i + 2], 0xee);
        a[i + 2] = _mm256_shuffle_ps(b[i + 1], b[i + 3], 0x44);
        a[i + 3] = _mm256_shuffle_ps(b[i + 1], b[i + 3], 0xee);
    }
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_ps(d + i * ldd, _mm256_permute2f128_ps(a[i], a[4 + i], 0x20));
        _mm256_storeu_ps(d + (4 + i) * ldd, _mm256_permute2f128_ps(a[i], a[4 + i], 0x31));
    }
}
DT__ISA_END

/* The square transpose of the CPU's level: its width (16 at avx512, 8 at avx2, 0 below, where
 * callers copy element by element), and the transpose of that width. */
static inline int dt__transpose_width(void) {
    return dt__isa_avx512() ? 16 : dt__isa_avx2() ? 8 : 0;
}
static inline void dt__transpose_w(int w, const float *const r[], float *d, int64_t ldd) {
    if (w == 16)
        dt__transpose16(r, d, ldd);
    else
        dt__transpose8(r, d, ldd);
}

#endif
