/* conv.c — CPU kernels for convolution and pooling, one table per instruction set. Callers
 * (ops_conv.c) split the work over threads and run the GEMMs; every kernel here is sequential
 * and its summation order is fixed (intrinsics or explicit lanes, never a compiler-vectorised
 * reduction), so results are the same bits whatever the thread count or optimisation level.
 *
 * This file is compiled three times: on its own (the portable table dt__conv_generic: loops, no
 * Winograd), through conv_avx2.c (DT__CONV_AVX2, 256-bit intrinsics: dt__conv_avx2) and through
 * conv_avx512.c (__AVX512F__: dt__conv_avx512). It holds what the kernels share — the vector
 * helpers and lane masks, im2col / col2im for the GEMM path, the fixed-order sums — and the
 * table; the kernels of one job each are #included below, so they are compiled once per ISA too:
 *   conv_direct.h    the direct sliding kernel for single-channel (first-layer) convolutions
 *   conv_pool.h      max / average pooling (the 2x2 stride-2 max pool and any window)
 *   conv_winograd.h  Winograd F(2x2, 3x3): weight, input, output and gradient transforms
 * Each of them takes its ISA's path with the same #if structure: `#ifdef __AVX512F__`, then
 * `#elif defined(DT__CONV_AVX2)`, then the portable code. */
#include "conv_impl.h"

#include <math.h>
#include <string.h>

#if defined(__AVX512F__) || defined(DT__CONV_AVX2)
#include <immintrin.h>
#endif
#ifndef __AVX512F__
/* the 64-byte vector helpers below are static inline: no ABI is crossed */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

/* ---- shared vector helpers ------------------------------------------------------------- */

/* GCC vector extensions: 16 floats (one AVX-512 register; lowered to narrower units on other
 * targets). The unaligned type is for loads/stores at any float address. */
typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4), may_alias));

static inline v16 ldu(const float *p) {
    return *(const v16u *)p;
}
static inline void stu(float *p, v16 v) {
    *(v16u *)p = v;
}
static inline v16 bcast(float s) {
    return (v16){0} + s;
}

/* Lane masks (and, on AVX2, 8-lane loads, stores and shuffles) for row ends and tails. */
#ifdef __AVX512F__
/* The first n of 16 lanes. */
static inline __mmask16 lanes(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* Lanes [lo, hi) of the 16 starting at column o. */
static inline __mmask16 range_mask(int64_t o, int64_t lo, int64_t hi) {
    int64_t a = lo - o, b = hi - o;
    if (a < 0) a = 0;
    if (b > 16) b = 16;
    if (b <= a) return 0;
    return (__mmask16)(((1u << (b - a)) - 1) << a);
}
#elif defined(DT__CONV_AVX2)
static const int32_t k_mask8[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

/* The first n of 8 lanes, as a maskload / maskstore mask (masked-out lanes never fault). */
static inline __m256i lanes8(int64_t n) {
    n = n < 0 ? 0 : n > 8 ? 8 : n;
    return _mm256_loadu_si256((const __m256i *)(k_mask8 + 8 - n));
}

/* Lanes [lo, hi) of the 8 starting at column o. */
static inline __m256i range8(int64_t o, int64_t lo, int64_t hi) {
    __m256i c =
        _mm256_add_epi32(_mm256_set1_epi32((int)o), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_and_si256(_mm256_cmpgt_epi32(c, _mm256_set1_epi32((int)lo - 1)),
                            _mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), c));
}

/* p[0, n) of v's 8 lanes, n <= 0 stores nothing. With `spill` the lanes past n may be written
 * too (a plain store: the caller rewrites them later), which is cheaper than a masked store. */
static inline void store8(float *p, __m256 v, int64_t n, bool spill) {
    if (n >= 8 || (spill && n > 0))
        _mm256_storeu_ps(p, v);
    else if (n > 0)
        _mm256_maskstore_ps(p, lanes8(n), v);
}

/* p[0, n) into 8 lanes, the others 0 */
static inline __m256 load8(const float *p, int64_t n) {
    return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lanes8(n));
}

/* The even / odd elements of the 16 floats lo, hi. */
static inline void deinterleave8(__m256 lo, __m256 hi, __m256 *ev, __m256 *od) {
    __m256 e = _mm256_shuffle_ps(lo, hi, 0x88), o = _mm256_shuffle_ps(lo, hi, 0xDD);
    *ev = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8));
    *od = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xD8));
}

/* a0 b0 a1 b1 ... a7 b7 as two vectors */
static inline void interleave8(__m256 a, __m256 b, __m256 *lo, __m256 *hi) {
    __m256 u = _mm256_unpacklo_ps(a, b), v = _mm256_unpackhi_ps(a, b);
    *lo = _mm256_permute2f128_ps(u, v, 0x20);
    *hi = _mm256_permute2f128_ps(u, v, 0x31);
}
#endif

/* ---- im2col / col2im ------------------------------------------------------------------- */

/* Output columns ow in [*lo, *hi) read input column ow*s - p + kw inside [0, W). */
static void valid_range(int64_t W, int64_t OW, int64_t s, int64_t p, int64_t kw, int64_t *lo,
                        int64_t *hi) {
    int64_t a = p - kw; /* ow*s >= a */
    int64_t l = a > 0 ? (a + s - 1) / s : 0;
    int64_t b = W - 1 + p - kw; /* ow*s <= b */
    int64_t h = b < 0 ? 0 : b / s + 1;
    if (h > OW) h = OW;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

static void im2col(const dt__conv_geom *g, const float *x, float *col, int64_t ldcol) {
    const int64_t H = g->H, W = g->W, OH = g->OH, OW = g->OW, s = g->stride, p = g->pad;
    for (int64_t c = 0; c < g->C; c++) {
        const float *xc = x + c * H * W;
        for (int64_t kh = 0; kh < g->KH; kh++)
            for (int64_t kw = 0; kw < g->KW; kw++) {
                float *row = col + ((c * g->KH + kh) * g->KW + kw) * ldcol;
                int64_t lo, hi;
                valid_range(W, OW, s, p, kw, &lo, &hi);
                for (int64_t oh = 0; oh < OH; oh++) {
                    float *r = row + oh * OW;
                    int64_t ih = oh * s - p + kh;
                    if (ih < 0 || ih >= H) {
                        memset(r, 0, (size_t)OW * sizeof(float));
                        continue;
                    }
                    const float *xr = xc + ih * W - p + kw; /* xr[ow*s] is input column ow*s-p+kw */
#ifdef __AVX512F__
                    if (s == 1) { /* masked loads never touch the lanes outside [lo, hi) */
                        for (int64_t o = 0; o < OW; o += 16)
                            _mm512_mask_storeu_ps(
                                r + o, lanes(OW - o),
                                _mm512_maskz_loadu_ps(range_mask(o, lo, hi), xr + o));
                        continue;
                    }
#elif defined(DT__CONV_AVX2)
                    if (s == 1) { /* stores past OW land in the next row, written after this one */
                        for (int64_t o = 0; o < OW; o += 8) {
                            __m256 v = o >= lo && o + 8 <= hi
                                           ? _mm256_loadu_ps(xr + o)
                                           : _mm256_maskload_ps(xr + o, range8(o, lo, hi));
                            store8(r + o, v, OW - o, oh * OW + o + 8 <= OH * OW);
                        }
                        continue;
                    }
#endif
                    for (int64_t ow = 0; ow < lo; ow++) r[ow] = 0.f;
                    if (s == 1)
                        memcpy(r + lo, xr + lo, (size_t)(hi - lo) * sizeof(float));
                    else
                        for (int64_t ow = lo; ow < hi; ow++) r[ow] = xr[ow * s];
                    for (int64_t ow = hi; ow < OW; ow++) r[ow] = 0.f;
                }
            }
    }
}

static void col2im_add(const dt__conv_geom *g, const float *col, int64_t ldcol, float *x) {
    const int64_t H = g->H, W = g->W, OH = g->OH, OW = g->OW, s = g->stride, p = g->pad;
    for (int64_t c = 0; c < g->C; c++) {
        float *xc = x + c * H * W;
        for (int64_t kh = 0; kh < g->KH; kh++)
            for (int64_t kw = 0; kw < g->KW; kw++) {
                const float *row = col + ((c * g->KH + kh) * g->KW + kw) * ldcol;
                int64_t lo, hi;
                valid_range(W, OW, s, p, kw, &lo, &hi);
                for (int64_t oh = 0; oh < OH; oh++) {
                    int64_t ih = oh * s - p + kh;
                    if (ih < 0 || ih >= H) continue;
                    const float *r = row + oh * OW;
                    float *xr = xc + ih * W - p + kw;
#ifdef __AVX512F__
                    if (s == 1) {
                        for (int64_t o = lo - lo % 16; o < hi; o += 16) {
                            __mmask16 m = range_mask(o, lo, hi);
                            __m512 v = _mm512_maskz_loadu_ps(m, xr + o);
                            v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, r + o));
                            _mm512_mask_storeu_ps(xr + o, m, v);
                        }
                        continue;
                    }
#elif defined(DT__CONV_AVX2)
                    if (s == 1) {
                        for (int64_t o = lo - lo % 8; o < hi; o += 8) {
                            if (o >= lo && o + 8 <= hi) {
                                _mm256_storeu_ps(xr + o, _mm256_add_ps(_mm256_loadu_ps(xr + o),
                                                                       _mm256_loadu_ps(r + o)));
                                continue;
                            }
                            __m256i m = range8(o, lo, hi);
                            _mm256_maskstore_ps(xr + o, m,
                                                _mm256_add_ps(_mm256_maskload_ps(xr + o, m),
                                                              _mm256_maskload_ps(r + o, m)));
                        }
                        continue;
                    }
#endif
                    if (s == 1) {
#pragma omp simd
                        for (int64_t ow = lo; ow < hi; ow++) xr[ow] += r[ow];
                    } else {
                        for (int64_t ow = lo; ow < hi; ow++) xr[ow * s] += r[ow];
                    }
                }
            }
    }
}

/* ---- fixed-order sums (the bias gradient, the direct kernel's lane partials) ------------ */

static float sum_f32(const float *p, int64_t n) {
    float lane[16];
    int64_t i = 0;
#ifdef DT__CONV_AVX2 /* the v16 loop's lanes, in two registers (GCC spills the v16 one) */
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    }
    _mm256_storeu_ps(lane, a0);
    _mm256_storeu_ps(lane + 8, a1);
#else
    v16 acc = (v16){0};
    for (; i + 16 <= n; i += 16) acc += ldu(p + i);
    stu(lane, acc);
#endif
    float s = 0.f;
    for (int l = 0; l < 16; l++) s += lane[l];
    for (; i < n; i++) s += p[i];
    return s;
}

static void conv_lanes_reduce(const float *v, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i++) {
        float s = 0.f;
        for (int l = 0; l < 16; l++) s += v[i * 16 + l];
        out[i] = s;
    }
}

/* ---- the kernels of one job each, compiled here for this ISA ---------------------------- */

#define DT__CONV_PARTS 1 /* the parts below check it: they compile only inside conv.c */
#include "conv_direct.h"
#include "conv_pool.h"
#include "conv_winograd.h"
#undef DT__CONV_PARTS

#ifndef DT__CONV_TABLE
#define DT__CONV_TABLE dt__conv_generic
#endif
const dt__conv_kernels DT__CONV_TABLE = {
    .im2col = im2col,
    .col2im_add = col2im_add,
    .conv_direct_ok = conv_direct_ok,
    .conv_direct_scratch = conv_direct_scratch,
    .conv_direct_fwd = conv_direct_fwd,
    .conv_direct_wgrad = conv_direct_wgrad,
    .sum_f32 = sum_f32,
    .conv_lanes_reduce = conv_lanes_reduce,
    .wino_ok = wino_ok,
    .wino_tiles = wino_tiles,
    .wino_scratch = wino_scratch,
    .wino_weights = wino_weights,
    .wino_input = wino_input,
    .wino_output = wino_output,
    .wino_dout = wino_dout,
    .wino_dinput = wino_dinput,
    .max_pool_fwd = max_pool_fwd,
    .max_pool_2x2_bwd = max_pool_2x2_bwd,
    .avg_pool_fwd = avg_pool_fwd,
    .avg_pool_bwd = avg_pool_bwd,
};
