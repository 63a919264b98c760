/* conv.c — CPU kernels for convolution and pooling: im2col / col2im for the GEMM path, a
 * direct sliding kernel for single-channel (first-layer) convolutions, the Winograd F(2x2, 3x3)
 * transforms, and max / average pooling over ranges of planes. Callers (ops_conv.c) split the
 * work over threads and run the GEMMs; every kernel here is sequential and its summation order
 * is fixed (intrinsics or explicit lanes, never a compiler-vectorised reduction), so results
 * are the same bits whatever the thread count or optimisation level. The AVX-512 build
 * (__AVX512F__) and the AVX2 build (DT__CONV_AVX2, set by cpu/conv_avx2.c) get intrinsics; the
 * portable build falls back to loops (and no Winograd). */
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

/* ---- direct single-channel convolution ------------------------------------------------
 * The image is copied into a zero-padded buffer xp with row stride Wp = Wv + KW - 1, where
 * Wv = OW rounded up to 16 lanes. Output row i, columns [j, j+16) are then
 *   sum over taps (kh, kw) of w[kh][kw] * xp[(i + kh) * Wp + j + kw + lane],
 * a plain vector FMA per tap; lanes past OW compute junk that is never stored. */

typedef struct dgeom {
    int64_t Wv, Wp, Hp, KK;
} dgeom;

static dgeom direct_geom(const dt__conv_geom *g) {
    dgeom d;
    d.Wv = (g->OW + 15) / 16 * 16;
    d.Wp = d.Wv + g->KW - 1;
    d.Hp = g->OH + g->KH - 1; /* == H + 2 * pad at stride 1 */
    d.KK = g->KH * g->KW;
    return d;
}

static bool conv_direct_ok(const dt__conv_geom *g) {
    return g->C == 1 && g->stride == 1 && g->KH * g->KW <= DT__CONV_DIRECT_MAX_TAPS;
}

static int64_t conv_direct_scratch(const dt__conv_geom *g) {
    dgeom d = direct_geom(g);
    return d.Hp * d.Wp + 16 /* slack */ + d.Wv /* row buffer */ + 16;
}

static void pad_image(const dt__conv_geom *g, const dgeom *d, const float *x, float *xp) {
    memset(xp, 0, (size_t)(d->Hp * d->Wp + 16) * sizeof(float));
    for (int64_t i = 0; i < g->H; i++)
        memcpy(xp + (i + g->pad) * d->Wp + g->pad, x + i * g->W, (size_t)g->W * sizeof(float));
}

#if defined(__AVX512F__) || defined(DT__CONV_AVX2)
/* The weights and biases of output channels oc0 .. oc0+3 of the vector forward kernels; past OC
 * the last channel is recomputed, never stored. */
static inline void direct_quad(const float *w, const float *b, int64_t oc0, int64_t OC, int64_t KK,
                               const float *wo[4], float bs[4]) {
    for (int o = 0; o < 4; o++) {
        int64_t oc = oc0 + o < OC ? oc0 + o : OC - 1;
        wo[o] = w + oc * KK;
        bs[o] = b ? b[oc] : 0.f;
    }
}

static inline __attribute__((always_inline)) void
direct_row(const float *base, const int64_t *off, const float *const wo[4], const float bs[4],
           float *y, int64_t ys, int no, int64_t OW, bool spill, const int64_t KK);

/* The vector forward: four output channels share each input load (direct_row per table). KK
 * is a compile-time constant in the specialised calls. */
static inline __attribute__((always_inline)) void
direct_fwd_vec(const dt__conv_geom *g, const dgeom *d, const float *xp, const int64_t *off,
               const float *w, const float *b, float *y, const int64_t KK) {
    const int64_t OH = g->OH, OW = g->OW, OC = g->OC;
    for (int64_t oc0 = 0; oc0 < OC; oc0 += 4) {
        const float *wo[4];
        float bs[4];
        direct_quad(w, b, oc0, OC, KK, wo, bs);
        int no = OC - oc0 < 4 ? (int)(OC - oc0) : 4;
        for (int64_t i = 0; i < OH; i++)
            direct_row(xp + i * d->Wp, off, wo, bs, y + (oc0 * OH + i) * OW, OH * OW, no, OW,
                       i + 1 < OH, KK);
    }
}
#endif

#ifdef __AVX512F__
/* AVX-512: four (forward) or two (weight gradient) output channels share each input load, and
 * rows are read / written with masked accesses instead of a row buffer. */
/* Output row i (every 16 columns) of channels oc0 .. oc0+no-1 at y, planes ys apart. */
static inline __attribute__((always_inline)) void
direct_row(const float *base, const int64_t *off, const float *const wo[4], const float bs[4],
           float *y, int64_t ys, int no, int64_t OW, bool spill, const int64_t KK) {
    (void)spill;
    for (int64_t j = 0; j < OW; j += 16) {
        __m512 a0 = _mm512_set1_ps(bs[0]), a1 = _mm512_set1_ps(bs[1]);
        __m512 a2 = _mm512_set1_ps(bs[2]), a3 = _mm512_set1_ps(bs[3]);
#pragma GCC unroll 9
        for (int64_t k = 0; k < KK; k++) {
            __m512 xv = _mm512_loadu_ps(base + j + off[k]);
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(wo[0][k]), xv, a0);
            a1 = _mm512_fmadd_ps(_mm512_set1_ps(wo[1][k]), xv, a1);
            a2 = _mm512_fmadd_ps(_mm512_set1_ps(wo[2][k]), xv, a2);
            a3 = _mm512_fmadd_ps(_mm512_set1_ps(wo[3][k]), xv, a3);
        }
        __m512 acc[4] = {a0, a1, a2, a3};
        __mmask16 m = lanes(OW - j);
#pragma GCC unroll 4
        for (int o = 0; o < 4; o++)
            if (o < no) _mm512_mask_storeu_ps(y + o * ys + j, m, acc[o]);
    }
}

static inline __attribute__((always_inline)) void
direct_wgrad_512(const dt__conv_geom *g, const dgeom *d, const float *xp, const int64_t *off,
                 const float *dy, float *vw, float *vb, const int64_t KK) {
    const int64_t OH = g->OH, OW = g->OW, OC = g->OC;
    for (int64_t oc0 = 0; oc0 < OC; oc0 += 2) {
        int no = OC - oc0 < 2 ? 1 : 2;
        __m512 acc[2][DT__CONV_DIRECT_MAX_TAPS], accb[2];
#pragma GCC unroll 2
        for (int o = 0; o < 2; o++) {
            accb[o] = _mm512_setzero_ps();
#pragma GCC unroll 9
            for (int64_t k = 0; k < KK; k++) acc[o][k] = _mm512_setzero_ps();
        }
        for (int64_t i = 0; i < OH; i++) {
            const float *base = xp + i * d->Wp;
            for (int64_t j = 0; j < d->Wv; j += 16) {
                __mmask16 m = lanes(OW - j);
                __m512 dv[2];
#pragma GCC unroll 2
                for (int o = 0; o < 2; o++) { /* a missing second channel reads as zeros */
                    dv[o] = o < no ? _mm512_maskz_loadu_ps(m, dy + ((oc0 + o) * OH + i) * OW + j)
                                   : _mm512_setzero_ps();
                    accb[o] = _mm512_add_ps(accb[o], dv[o]);
                }
#pragma GCC unroll 9
                for (int64_t k = 0; k < KK; k++) {
                    __m512 xv = _mm512_loadu_ps(base + j + off[k]);
                    acc[0][k] = _mm512_fmadd_ps(dv[0], xv, acc[0][k]);
                    acc[1][k] = _mm512_fmadd_ps(dv[1], xv, acc[1][k]);
                }
            }
        }
#pragma GCC unroll 2
        for (int o = 0; o < no; o++) {
            float *v = vw + (oc0 + o) * KK * 16;
#pragma GCC unroll 9
            for (int64_t k = 0; k < KK; k++)
                _mm512_storeu_ps(v + k * 16, _mm512_add_ps(_mm512_loadu_ps(v + k * 16), acc[o][k]));
            if (vb)
                _mm512_storeu_ps(vb + (oc0 + o) * 16,
                                 _mm512_add_ps(_mm512_loadu_ps(vb + (oc0 + o) * 16), accb[o]));
        }
    }
}
#elif defined(DT__CONV_AVX2)
/* AVX2: four output channels by 16 columns (two vectors) share each input load in the forward;
 * the weight gradient keeps one channel's KK taps in registers and sums into lanes 0..7 of
 * each 16-lane partial (lanes 8..15 stay zero). */
/* Output row i (16 columns at a time) of channels oc0 .. oc0+no-1 at y, planes ys apart;
 * `spill`: stores past OW may land in the next row, written later. */
static inline __attribute__((always_inline)) void
direct_row(const float *base, const int64_t *off, const float *const wo[4], const float bs[4],
           float *y, int64_t ys, int no, int64_t OW, bool spill, const int64_t KK) {
    for (int64_t j = 0; j < OW; j += 16) {
        __m256 a[4][2];
#pragma GCC unroll 4
        for (int o = 0; o < 4; o++) a[o][0] = a[o][1] = _mm256_set1_ps(bs[o]);
#pragma GCC unroll 9
        for (int64_t k = 0; k < KK; k++) {
            __m256 x0 = _mm256_loadu_ps(base + j + off[k]);
            __m256 x1 = _mm256_loadu_ps(base + j + 8 + off[k]);
#pragma GCC unroll 4
            for (int o = 0; o < 4; o++) {
                __m256 wv = _mm256_broadcast_ss(wo[o] + k);
                a[o][0] = _mm256_fmadd_ps(wv, x0, a[o][0]);
                a[o][1] = _mm256_fmadd_ps(wv, x1, a[o][1]);
            }
        }
#pragma GCC unroll 4
        for (int o = 0; o < 4; o++)
            if (o < no) {
                store8(y + o * ys + j, a[o][0], OW - j, spill);
                store8(y + o * ys + j + 8, a[o][1], OW - j - 8, spill);
            }
    }
}

static inline __attribute__((always_inline)) void
direct_wgrad_256(const dt__conv_geom *g, const dgeom *d, const float *xp, const int64_t *off,
                 const float *dy, float *vw, float *vb, const int64_t KK) {
    const int64_t OH = g->OH, OW = g->OW;
    for (int64_t oc = 0; oc < g->OC; oc++) {
        __m256 acc[DT__CONV_DIRECT_MAX_TAPS], accb = _mm256_setzero_ps();
#pragma GCC unroll 9
        for (int64_t k = 0; k < KK; k++) acc[k] = _mm256_setzero_ps();
        const float *dyo = dy + oc * OH * OW;
        for (int64_t i = 0; i < OH; i++) {
            const float *base = xp + i * d->Wp;
            for (int64_t j = 0; j < OW; j += 8) {
                __m256 dv = load8(dyo + i * OW + j, OW - j); /* lanes past OW read as 0 */
                accb = _mm256_add_ps(accb, dv);
#pragma GCC unroll 9
                for (int64_t k = 0; k < KK; k++)
                    acc[k] = _mm256_fmadd_ps(dv, _mm256_loadu_ps(base + j + off[k]), acc[k]);
            }
        }
        float *v = vw + oc * KK * 16;
#pragma GCC unroll 9
        for (int64_t k = 0; k < KK; k++)
            _mm256_storeu_ps(v + k * 16, _mm256_add_ps(_mm256_loadu_ps(v + k * 16), acc[k]));
        if (vb) _mm256_storeu_ps(vb + oc * 16, _mm256_add_ps(_mm256_loadu_ps(vb + oc * 16), accb));
    }
}
#endif

static void conv_direct_fwd(const dt__conv_geom *g, const float *x, const float *w, const float *b,
                            float *y, float *scratch) {
    dgeom d = direct_geom(g);
    float *xp = scratch, *row = scratch + d.Hp * d.Wp + 16;
    pad_image(g, &d, x, xp);
    int64_t off[DT__CONV_DIRECT_MAX_TAPS];
    for (int64_t kh = 0; kh < g->KH; kh++)
        for (int64_t kw = 0; kw < g->KW; kw++) off[kh * g->KW + kw] = kh * d.Wp + kw;
#if defined(__AVX512F__) || defined(DT__CONV_AVX2)
    (void)row;
    if (d.KK == 9)
        direct_fwd_vec(g, &d, xp, off, w, b, y, 9);
    else
        direct_fwd_vec(g, &d, xp, off, w, b, y, d.KK);
    return;
#endif
    const int64_t OH = g->OH, OW = g->OW, KK = d.KK;
    for (int64_t oc = 0; oc < g->OC; oc++) {
        const float *wk = w + oc * KK;
        v16 bv = bcast(b ? b[oc] : 0.f);
        for (int64_t i = 0; i < OH; i++) {
            const float *base = xp + i * d.Wp;
            int64_t j = 0;
            for (; j + 32 <= d.Wv; j += 32) {
                v16 a0 = bv, a1 = bv;
                for (int64_t k = 0; k < KK; k++) {
                    v16 wv = bcast(wk[k]);
                    a0 += wv * ldu(base + j + off[k]);
                    a1 += wv * ldu(base + j + 16 + off[k]);
                }
                stu(row + j, a0);
                stu(row + j + 16, a1);
            }
            for (; j < d.Wv; j += 16) {
                v16 a0 = bv;
                for (int64_t k = 0; k < KK; k++) a0 += bcast(wk[k]) * ldu(base + j + off[k]);
                stu(row + j, a0);
            }
            memcpy(y + (oc * OH + i) * OW, row, (size_t)OW * sizeof(float));
        }
    }
}

/* One image's contribution to the lane-wise dW / db sums; KK is a compile-time constant in the
 * specialised call so the accumulators stay in registers. */
static inline __attribute__((always_inline)) void
wgrad_image(const dt__conv_geom *g, const dgeom *d, const float *xp, const float *dy, float *row,
            const int64_t *off, float *vw, float *vb, const int64_t KK) {
    const int64_t OH = g->OH, OW = g->OW;
    for (int64_t oc = 0; oc < g->OC; oc++) {
        v16 acc[DT__CONV_DIRECT_MAX_TAPS];
        for (int64_t k = 0; k < KK; k++) acc[k] = ldu(vw + (oc * KK + k) * 16);
        v16 accb = (v16){0};
        const float *dyo = dy + oc * OH * OW;
        for (int64_t i = 0; i < OH; i++) {
            memcpy(row, dyo + i * OW, (size_t)OW * sizeof(float)); /* lanes >= OW stay 0 */
            const float *base = xp + i * d->Wp;
            for (int64_t j = 0; j < d->Wv; j += 16) {
                v16 dv = ldu(row + j);
                accb += dv;
                for (int64_t k = 0; k < KK; k++) acc[k] += dv * ldu(base + j + off[k]);
            }
        }
        for (int64_t k = 0; k < KK; k++) stu(vw + (oc * KK + k) * 16, acc[k]);
        if (vb) stu(vb + oc * 16, ldu(vb + oc * 16) + accb);
    }
}

static void conv_direct_wgrad(const dt__conv_geom *g, const float *x, const float *dy, int64_t n0,
                              int64_t nb, float *vw, float *vb, float *scratch) {
    dgeom d = direct_geom(g);
    float *xp = scratch, *row = scratch + d.Hp * d.Wp + 16;
    memset(row, 0, (size_t)d.Wv * sizeof(float));
    int64_t off[DT__CONV_DIRECT_MAX_TAPS];
    for (int64_t kh = 0; kh < g->KH; kh++)
        for (int64_t kw = 0; kw < g->KW; kw++) off[kh * g->KW + kw] = kh * d.Wp + kw;
    for (int64_t n = n0; n < n0 + nb; n++) {
        pad_image(g, &d, x + n * g->H * g->W, xp);
        const float *dyn = dy + n * g->OC * g->OH * g->OW;
#ifdef __AVX512F__
        if (d.KK == 9)
            direct_wgrad_512(g, &d, xp, off, dyn, vw, vb, 9);
        else
            direct_wgrad_512(g, &d, xp, off, dyn, vw, vb, d.KK);
        continue;
#elif defined(DT__CONV_AVX2)
        if (d.KK == 9)
            direct_wgrad_256(g, &d, xp, off, dyn, vw, vb, 9);
        else
            direct_wgrad_256(g, &d, xp, off, dyn, vw, vb, d.KK);
        continue;
#endif
        if (d.KK == 9)
            wgrad_image(g, &d, xp, dyn, row, off, vw, vb, 9);
        else
            wgrad_image(g, &d, xp, dyn, row, off, vw, vb, d.KK);
    }
}

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

/* ---- pooling ----------------------------------------------------------------------------
 * Max pooling takes the first maximum in window order (row-major), like PyTorch; a NaN wins
 * over numbers. Windows are clipped to the input (padding never wins: PyTorch's -inf). */

static inline bool beats(float v, float m) {
    return v > m || (v != v && m == m);
}

#ifdef __AVX512F__
/* beats() on 16 lanes */
static inline __mmask16 beats16(__m512 v, __m512 m) {
    return _mm512_cmp_ps_mask(v, m, _CMP_GT_OQ) |
           (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) & _mm512_cmp_ps_mask(m, m, _CMP_ORD_Q));
}

/* 16 outputs at a time: the even / odd columns of two input rows come from one pair of
 * (masked) loads and a permute each. */
static void max_pool_2x2(const float *x, float *y, int32_t *idx, int64_t p0, int64_t p1, int64_t H,
                         int64_t W, int64_t OH, int64_t OW) {
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
    const __m512i wv = _mm512_set1_epi32((int)W), one = _mm512_set1_epi32(1);
    for (int64_t pl = p0; pl < p1; pl++) {
        const float *xp = x + pl * H * W;
        for (int64_t oh = 0; oh < OH; oh++) {
            const float *r0 = xp + 2 * oh * W, *r1 = r0 + W;
            float *yr = y + (pl * OH + oh) * OW;
            int32_t *ir = idx ? idx + (pl * OH + oh) * OW : NULL;
            for (int64_t o = 0; o < OW; o += 16) {
                int64_t n = OW - o < 16 ? OW - o : 16;
                __mmask16 klo = lanes(2 * n), khi = lanes(2 * n - 16), kout = lanes(n);
                __m512 l0 = _mm512_maskz_loadu_ps(klo, r0 + 2 * o);
                __m512 h0 = _mm512_maskz_loadu_ps(khi, r0 + 2 * o + 16);
                __m512 l1 = _mm512_maskz_loadu_ps(klo, r1 + 2 * o);
                __m512 h1 = _mm512_maskz_loadu_ps(khi, r1 + 2 * o + 16);
                __m512 a = _mm512_permutex2var_ps(l0, ev, h0),
                       b = _mm512_permutex2var_ps(l0, od, h0);
                __m512 e = _mm512_permutex2var_ps(l1, ev, h1),
                       f = _mm512_permutex2var_ps(l1, od, h1);
                /* first max of the top pair, of the bottom pair, then of the two */
                __mmask16 kb = beats16(b, a), kf = beats16(f, e);
                __m512 t = _mm512_mask_blend_ps(kb, a, b), u = _mm512_mask_blend_ps(kf, e, f);
                __mmask16 ku = beats16(u, t);
                _mm512_mask_storeu_ps(yr + o, kout, _mm512_mask_blend_ps(ku, t, u));
                if (ir) {
                    __m512i ct = _mm512_maskz_mov_epi32(kb, one);
                    __m512i cu = _mm512_add_epi32(wv, _mm512_maskz_mov_epi32(kf, one));
                    __m512i c = _mm512_mask_blend_epi32(ku, ct, cu);
                    __m512i base = _mm512_set1_epi32((int)(2 * oh * W + 2 * o));
                    c = _mm512_add_epi32(c, _mm512_add_epi32(base, ev));
                    _mm512_mask_storeu_epi32(ir + o, kout, c);
                }
            }
        }
    }
}

/* gx rows 2*oh, 2*oh+1 of one plane from the outputs of row oh: each input element gets its
 * window's gradient if it is the window's argmax, else 0 (written, or added when `add`). */
static void max_pool_2x2_bwd_rows(const float *gy, const int32_t *idx, float *gx, int64_t oh,
                                  int64_t H, int64_t W, int64_t OW, bool add) {
    (void)H;
    const __m512i dlo = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512i dhi = _mm512_add_epi32(dlo, _mm512_set1_epi32(8));
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int r = 0; r < 2; r++) {
        int64_t row = 2 * oh + r;
        float *gr = gx + row * W;
        for (int64_t o = 0; o < OW; o += 16) {
            int64_t n = OW - o < 16 ? OW - o : 16;
            __m512 g = _mm512_maskz_loadu_ps(lanes(n), gy + oh * OW + o);
            __m512i ix = _mm512_maskz_loadu_epi32(lanes(n), idx + oh * OW + o);
            __m512i pos = _mm512_add_epi32(_mm512_set1_epi32((int)(row * W + 2 * o)), iota);
            __m512i pos2 = _mm512_add_epi32(pos, _mm512_set1_epi32(16));
            __mmask16 klo = lanes(2 * n), khi = lanes(2 * n - 16);
            __mmask16 mlo = _mm512_cmpeq_epi32_mask(_mm512_permutexvar_epi32(dlo, ix), pos);
            __mmask16 mhi = _mm512_cmpeq_epi32_mask(_mm512_permutexvar_epi32(dhi, ix), pos2);
            __m512 vlo = _mm512_maskz_mov_ps(mlo, _mm512_permutexvar_ps(dlo, g));
            __m512 vhi = _mm512_maskz_mov_ps(mhi, _mm512_permutexvar_ps(dhi, g));
            if (add) {
                vlo = _mm512_add_ps(vlo, _mm512_maskz_loadu_ps(klo, gr + 2 * o));
                vhi = _mm512_add_ps(vhi, _mm512_maskz_loadu_ps(khi, gr + 2 * o + 16));
            }
            _mm512_mask_storeu_ps(gr + 2 * o, klo, vlo);
            _mm512_mask_storeu_ps(gr + 2 * o + 16, khi, vhi);
        }
    }
}
#else
#ifdef DT__CONV_AVX2
/* beats() on 8 lanes, as an all-ones / zero lane mask */
static inline __m256 beats8(__m256 v, __m256 m) {
    return _mm256_or_ps(
        _mm256_cmp_ps(v, m, _CMP_GT_OQ),
        _mm256_and_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), _mm256_cmp_ps(m, m, _CMP_ORD_Q)));
}

/* The OW outputs of row oh, 8 at a time (the even / odd columns of the two input rows from two
 * loads and a shuffle each; the tail with lane masks). `room`: outputs writable from yr (the
 * rest of the plane), where a tail's unused lanes may land, to be rewritten by later rows. */
static void max_pool_2x2_row8(const float *r0, const float *r1, float *yr, int32_t *ir, int64_t oh,
                              int64_t W, int64_t OW, int64_t room) {
    const __m256i ev = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    const __m256i wv = _mm256_set1_epi32((int)W), one = _mm256_set1_epi32(1);
    for (int64_t o = 0; o < OW; o += 8) {
        int64_t n = OW - o;
        bool spill = o + 8 <= room;
        __m256 a, b, e, f;
        deinterleave8(load8(r0 + 2 * o, 2 * n), load8(r0 + 2 * o + 8, 2 * n - 8), &a, &b);
        deinterleave8(load8(r1 + 2 * o, 2 * n), load8(r1 + 2 * o + 8, 2 * n - 8), &e, &f);
        /* first max of the top pair, of the bottom pair, then of the two */
        __m256 kb = beats8(b, a), kf = beats8(f, e);
        __m256 t = _mm256_blendv_ps(a, b, kb), u = _mm256_blendv_ps(e, f, kf);
        __m256 ku = beats8(u, t);
        store8(yr + o, _mm256_blendv_ps(t, u, ku), n, spill);
        if (ir) {
            __m256i ct = _mm256_and_si256(_mm256_castps_si256(kb), one);
            __m256i cu = _mm256_add_epi32(wv, _mm256_and_si256(_mm256_castps_si256(kf), one));
            __m256i c = _mm256_blendv_epi8(ct, cu, _mm256_castps_si256(ku));
            __m256i base = _mm256_set1_epi32((int)(2 * oh * W + 2 * o));
            c = _mm256_add_epi32(c, _mm256_add_epi32(base, ev));
            store8((float *)(ir + o), _mm256_castsi256_ps(c), n, spill);
        }
    }
}

/* gx row `row` (of window row oh), columns [0, 2*OW), 16 at a time. `room`: floats writable
 * from gr that later rows rewrite (0 when accumulating). */
static void max_pool_2x2_bwd_row8(const float *gy, const int32_t *idx, float *gr, int64_t row,
                                  int64_t W, int64_t OW, bool add, int64_t room) {
    const __m256i dlo = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    const __m256i dhi = _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7);
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), eight = _mm256_set1_epi32(8);
    for (int64_t o = 0; o < OW; o += 8) {
        int64_t n = OW - o; /* lanes past it: gradient 0 */
        bool spill = !add && 2 * o + 16 <= room;
        __m256 g = load8(gy + o, n);
        __m256i ix = _mm256_castps_si256(load8((const float *)(idx + o), n));
        __m256i pos = _mm256_add_epi32(_mm256_set1_epi32((int)(row * W + 2 * o)), iota);
        __m256i mlo = _mm256_cmpeq_epi32(_mm256_permutevar8x32_epi32(ix, dlo), pos);
        __m256i mhi =
            _mm256_cmpeq_epi32(_mm256_permutevar8x32_epi32(ix, dhi), _mm256_add_epi32(pos, eight));
        __m256 vlo = _mm256_and_ps(_mm256_castsi256_ps(mlo), _mm256_permutevar8x32_ps(g, dlo));
        __m256 vhi = _mm256_and_ps(_mm256_castsi256_ps(mhi), _mm256_permutevar8x32_ps(g, dhi));
        if (add) {
            vlo = _mm256_add_ps(load8(gr + 2 * o, 2 * n), vlo);
            vhi = _mm256_add_ps(load8(gr + 2 * o + 8, 2 * n - 8), vhi);
        }
        store8(gr + 2 * o, vlo, 2 * n, spill);
        store8(gr + 2 * o + 8, vhi, 2 * n - 8, spill);
    }
}
#endif

static void max_pool_2x2(const float *x, float *y, int32_t *idx, int64_t p0, int64_t p1, int64_t H,
                         int64_t W, int64_t OH, int64_t OW) {
    for (int64_t pl = p0; pl < p1; pl++) {
        const float *xp = x + pl * H * W;
        float *yp = y + pl * OH * OW;
        int32_t *ip = idx ? idx + pl * OH * OW : NULL;
        for (int64_t oh = 0; oh < OH; oh++) {
            const float *r0 = xp + 2 * oh * W, *r1 = r0 + W;
#ifdef DT__CONV_AVX2
            max_pool_2x2_row8(r0, r1, yp + oh * OW, ip ? ip + oh * OW : NULL, oh, W, OW,
                              (OH - oh) * OW);
            continue;
#endif
            for (int64_t ow = 0; ow < OW; ow++) {
                /* the first max of the top pair, of the bottom pair, then of the two: equals
                 * the first max in row-major order */
                int64_t c = 2 * ow;
                float a = r0[c], b = r0[c + 1], e = r1[c], f = r1[c + 1];
                float h0 = a, h1 = e;
                int64_t i0 = c, i1 = W + c;
                if (beats(b, a)) h0 = b, i0 = c + 1;
                if (beats(f, e)) h1 = f, i1 = W + c + 1;
                if (beats(h1, h0)) h0 = h1, i0 = i1;
                yp[oh * OW + ow] = h0;
                if (ip) ip[oh * OW + ow] = (int32_t)(2 * oh * W + i0);
            }
        }
    }
}

static void max_pool_2x2_bwd_rows(const float *gy, const int32_t *idx, float *gx, int64_t oh,
                                  int64_t H, int64_t W, int64_t OW, bool add) {
    (void)H;
    for (int r = 0; r < 2; r++) {
        int64_t row = 2 * oh + r;
        float *gr = gx + row * W;
#ifdef DT__CONV_AVX2
        max_pool_2x2_bwd_row8(gy + oh * OW, idx + oh * OW, gr, row, W, OW, add, (H - row) * W);
        continue;
#endif
        for (int64_t c = 0; c < 2 * OW; c++) {
            float v = idx[oh * OW + c / 2] == row * W + c ? gy[oh * OW + c / 2] : 0.f;
            gr[c] = add ? gr[c] + v : v;
        }
    }
}
#endif

static void max_pool_2x2_bwd(const float *gy, const int32_t *idx, float *gx, int64_t p0, int64_t p1,
                             int64_t H, int64_t W, int64_t OH, int64_t OW, bool add) {
    for (int64_t pl = p0; pl < p1; pl++) {
        float *g = gx + pl * H * W;
        const float *gp = gy + pl * OH * OW;
        const int32_t *ip = idx + pl * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++) {
            max_pool_2x2_bwd_rows(gp, ip, g, oh, H, W, OW, add);
            if (!add && 2 * OW < W) /* odd width: the last column is in no window */
                for (int r = 0; r < 2; r++) g[(2 * oh + r) * W + W - 1] = 0.f;
        }
        if (!add && 2 * OH < H) memset(g + (H - 1) * W, 0, (size_t)W * sizeof(float));
    }
}

/* The input rows (or columns) [*lo, *hi) under pooling window o (stride s, padding p, size k)
 * of an input of n rows, clipped to the input. */
static inline void pool_window(int64_t o, int s, int p, int k, int64_t n, int64_t *lo,
                               int64_t *hi) {
    *lo = o * s - p;
    *hi = *lo + k;
    if (*lo < 0) *lo = 0;
    if (*hi > n) *hi = n;
}

#ifdef DT__CONV_AVX2
/* The output columns [*lo, *hi) whose windows lie inside the W input columns: 8 of them at a
 * time run on vectors, in the windows' order (the same bits as one at a time). */
static inline void pool_inner(int64_t W, int64_t OW, int k, int s, int p, int64_t *lo,
                              int64_t *hi) {
    *lo = (p + s - 1) / s;
    *hi = W + p >= k ? (W + p - k) / s + 1 : 0;
    if (*hi > OW) *hi = OW;
    if (*hi < *lo) *hi = *lo;
}

/* xr[c0 + l*s] for the 8 lanes l */
static inline __m256 pool_ld8(const float *xr, int64_t c0, int s) {
    if (s == 1) return _mm256_loadu_ps(xr + c0);
    __m256i step =
        _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(s));
    return _mm256_i32gather_ps(xr + c0, step, 4);
}

/* max_pool_fwd's outputs ow .. ow+7 of one row (window rows [h0, h1)) */
static void max_pool8(const float *xp, int64_t W, int64_t h0, int64_t h1, int64_t ow, int k, int s,
                      int p, float *y, int32_t *idx) {
    const __m256i step =
        _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(s));
    int64_t c0 = ow * s - p;
    __m256 m = pool_ld8(xp + h0 * W, c0, s);
    __m256i best = _mm256_add_epi32(_mm256_set1_epi32((int)(h0 * W + c0)), step);
    for (int64_t ih = h0; ih < h1; ih++)
        for (int kw = 0; kw < k; kw++) {
            __m256 v = pool_ld8(xp + ih * W, c0 + kw, s), bt = beats8(v, m);
            __m256i at = _mm256_add_epi32(_mm256_set1_epi32((int)(ih * W + c0 + kw)), step);
            m = _mm256_blendv_ps(m, v, bt);
            best = _mm256_blendv_epi8(best, at, _mm256_castps_si256(bt));
        }
    _mm256_storeu_ps(y + ow, m);
    if (idx) _mm256_storeu_si256((__m256i *)(idx + ow), best);
}

/* avg_pool_fwd's outputs ow .. ow+7 of one row */
static void avg_pool8(const float *xp, int64_t W, int64_t h0, int64_t h1, int64_t ow, int k, int s,
                      int p, float inv, float *y) {
    int64_t c0 = ow * s - p;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t ih = h0; ih < h1; ih++)
        for (int kw = 0; kw < k; kw++) acc = _mm256_add_ps(acc, pool_ld8(xp + ih * W, c0 + kw, s));
    _mm256_storeu_ps(y + ow, _mm256_mul_ps(acc, _mm256_set1_ps(inv)));
}

/* avg_pool_bwd's outputs ow .. ow+7 of one row at stride 1: each window tap adds to 8
 * consecutive inputs (a fixed order, though not the one-at-a-time one) */
static void avg_pool_bwd8(const float *gy, float *gp, int64_t W, int64_t h0, int64_t h1, int64_t ow,
                          int k, int p, float inv) {
    __m256 gv = _mm256_mul_ps(_mm256_loadu_ps(gy + ow), _mm256_set1_ps(inv));
    for (int64_t ih = h0; ih < h1; ih++)
        for (int kw = 0; kw < k; kw++) {
            float *q = gp + ih * W + ow - p + kw;
            _mm256_storeu_ps(q, _mm256_add_ps(_mm256_loadu_ps(q), gv));
        }
}
#endif

/* Vector blocks of 8 outputs where the build has them: `ow` is advanced past the block and the
 * statement after the macro is skipped. */
#ifdef DT__CONV_AVX2
#define POOL_BLOCK8(cond, call)                                                                    \
    if (ow >= vlo && ow + 8 <= vhi && (cond)) {                                                    \
        call;                                                                                      \
        ow += 8;                                                                                   \
        continue;                                                                                  \
    }
#define POOL_INNER(W, OW, k, s, p) pool_inner(W, OW, k, s, p, &vlo, &vhi)
#else
#define POOL_BLOCK8(cond, call)
#define POOL_INNER(W, OW, k, s, p) (void)vlo, (void)vhi
#endif

static void max_pool_fwd(const float *x, float *y, int32_t *idx, int64_t p0, int64_t p1, int64_t H,
                         int64_t W, int64_t OH, int64_t OW, int k, int s, int p) {
    if (k == 2 && s == 2 && p == 0) {
        max_pool_2x2(x, y, idx, p0, p1, H, W, OH, OW);
        return;
    }
    int64_t vlo = 0, vhi = 0;
    POOL_INNER(W, OW, k, s, p);
    for (int64_t pl = p0; pl < p1; pl++) {
        const float *xp = x + pl * H * W;
        for (int64_t oh = 0; oh < OH; oh++) {
            int64_t h0, h1;
            pool_window(oh, s, p, k, H, &h0, &h1);
            float *yr = y + (pl * OH + oh) * OW;
            int32_t *ir = idx ? idx + (pl * OH + oh) * OW : NULL;
            for (int64_t ow = 0; ow < OW;) {
                POOL_BLOCK8(true, max_pool8(xp, W, h0, h1, ow, k, s, p, yr, ir))
                int64_t w0, w1;
                pool_window(ow, s, p, k, W, &w0, &w1);
                /* padding <= k/2 guarantees a non-empty window */
                int64_t best = h0 * W + w0;
                float m = xp[best];
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) {
                        float v = xp[ih * W + iw];
                        if (beats(v, m)) m = v, best = ih * W + iw;
                    }
                yr[ow] = m;
                if (ir) ir[ow] = (int32_t)best;
                ow++;
            }
        }
    }
}

/* count_include_pad: every window divides by k*k (windows never leave the padded input). */
static void avg_pool_fwd(const float *x, float *y, int64_t p0, int64_t p1, int64_t H, int64_t W,
                         int64_t OH, int64_t OW, int k, int s, int p) {
    const float inv = 1.f / (float)(k * k);
    int64_t vlo = 0, vhi = 0;
    POOL_INNER(W, OW, k, s, p);
    for (int64_t pl = p0; pl < p1; pl++) {
        const float *xp = x + pl * H * W;
        for (int64_t oh = 0; oh < OH; oh++) {
            int64_t h0, h1;
            pool_window(oh, s, p, k, H, &h0, &h1);
            float *yr = y + (pl * OH + oh) * OW;
            for (int64_t ow = 0; ow < OW;) {
                POOL_BLOCK8(true, avg_pool8(xp, W, h0, h1, ow, k, s, p, inv, yr))
                int64_t w0, w1;
                pool_window(ow, s, p, k, W, &w0, &w1);
                float acc = 0.f;
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) acc += xp[ih * W + iw];
                yr[ow] = acc * inv;
                ow++;
            }
        }
    }
}

static void avg_pool_bwd(const float *gy, float *gx, int64_t p0, int64_t p1, int64_t H, int64_t W,
                         int64_t OH, int64_t OW, int k, int s, int p) {
    const float inv = 1.f / (float)(k * k);
    int64_t vlo = 0, vhi = 0;
    POOL_INNER(W, OW, k, s, p);
    for (int64_t pl = p0; pl < p1; pl++) {
        float *gp = gx + pl * H * W;
        for (int64_t oh = 0; oh < OH; oh++) {
            int64_t h0, h1;
            pool_window(oh, s, p, k, H, &h0, &h1);
            const float *gr = gy + (pl * OH + oh) * OW;
            for (int64_t ow = 0; ow < OW;) {
                POOL_BLOCK8(s == 1, avg_pool_bwd8(gr, gp, W, h0, h1, ow, k, p, inv))
                int64_t w0, w1;
                pool_window(ow, s, p, k, W, &w0, &w1);
                float gv = gr[ow] * inv;
                for (int64_t ih = h0; ih < h1; ih++)
                    for (int64_t iw = w0; iw < w1; iw++) gp[ih * W + iw] += gv;
                ow++;
            }
        }
    }
}

/* ---- Winograd F(2x2, 3x3) ---------------------------------------------------------------
 * For 3x3 stride-1 convolutions: each 2x2 output tile is A^T [(G g G^T) ⊙ (B^T d B)] A of its
 * 4x4 input tile d, so with U[ξ] = (G g G^T)[ξ] (OC x C) and V[ξ] = (B^T d B)[ξ] (C x tiles)
 * the convolution is 16 GEMMs M[ξ] = U[ξ] V[ξ] over channels (2.25x fewer multiplies than
 * im2col), followed by the output transform. The input gradient runs the same algebra in
 * reverse: dM = A dY A^T, dV[ξ] = U[ξ]^T dM[ξ], dx += B dV B^T. (The weight gradient is left
 * to im2col: see conv_backward in ops_conv.c.)
 *
 * Transforms are vectorised over 16 (AVX-512) or 8 (AVX2) tiles of a tile row. Input rows are split
 * into even and odd columns (E, O) of the zero-padded image, so the 4 columns of the tiles starting
 * at 2*tw are E[tw], O[tw], E[tw+1], O[tw+1] — plain unaligned loads. */
#if defined(__AVX512F__) || defined(DT__CONV_AVX2)

typedef struct wgeom {
    int64_t TH, TW, T; /* tile rows, tile columns, tiles per image */
    int64_t R, SE;     /* rows of the padded image (2*TH + 2), row stride of E / O */
} wgeom;

static wgeom wino_geom(const dt__conv_geom *g) {
    wgeom w;
    w.TH = (g->OH + 1) / 2;
    w.TW = (g->OW + 1) / 2;
    w.T = w.TH * w.TW;
    w.R = 2 * w.TH + 2;
    w.SE = (w.TW + 1 + 15) / 16 * 16 + 16;
    return w;
}

static bool wino_ok(const dt__conv_geom *g) {
    return g->KH == 3 && g->KW == 3 && g->stride == 1 && g->pad <= 4 && g->C >= 4 && g->OC >= 4;
}

static int64_t wino_tiles(const dt__conv_geom *g) {
    return wino_geom(g).T;
}

static int64_t wino_scratch(const dt__conv_geom *g) {
    wgeom w = wino_geom(g);
    return 2 * w.R * w.SE + 4 * w.SE + 64; /* E, O, a row buffer of 2*SE (+ slack) */
}

static void wino_weights(const dt__conv_geom *g, const float *wt, float *U) {
    const int64_t OC = g->OC, C = g->C;
    for (int64_t oc = 0; oc < OC; oc++)
        for (int64_t c = 0; c < C; c++) {
            const float *k = wt + (oc * C + c) * 9;
            float t[4][3]; /* G g */
            for (int b = 0; b < 3; b++) {
                t[0][b] = k[b];
                t[1][b] = 0.5f * (k[b] + k[3 + b] + k[6 + b]);
                t[2][b] = 0.5f * (k[b] - k[3 + b] + k[6 + b]);
                t[3][b] = k[6 + b];
            }
#pragma GCC unroll 16
            for (int i = 0; i < 4; i++) { /* (G g) G^T */
                float u[4] = {t[i][0], 0.5f * (t[i][0] + t[i][1] + t[i][2]),
                              0.5f * (t[i][0] - t[i][1] + t[i][2]), t[i][2]};
#pragma GCC unroll 16
                for (int j = 0; j < 4; j++) U[((i * 4 + j) * OC + oc) * C + c] = u[j];
            }
        }
}

/* The transforms are written once over vf, a vector of VL tiles (GCC's + and - on the
 * intrinsic types, the same instructions as the intrinsics); the helpers below are all that
 * differs between the AVX-512 and the AVX2 table. */
#ifdef __AVX512F__
#define VL 16
typedef __m512 vf;
#define vzero _mm512_setzero_ps
#define vset1 _mm512_set1_ps
#define vload _mm512_loadu_ps
#define vstore _mm512_storeu_ps
static const int32_t k_even[16] = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
static const int32_t k_odd[16] = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31};
static const int32_t k_il_lo[16] = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23};
static const int32_t k_il_hi[16] = {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

/* p[0, n), the other lanes 0 */
static inline vf vload_n(const float *p, int64_t n) {
    return _mm512_maskz_loadu_ps(lanes(n), p);
}
/* p[l] for the lanes l with o + l in [lo, hi) (p is at column o), the others 0 */
static inline vf vload_range(const float *p, int64_t o, int64_t lo, int64_t hi) {
    return _mm512_maskz_loadu_ps(range_mask(o, lo, hi), p);
}
/* p[0, n) of v; masked stores are cheap here, so `spill` (see store8) is not used */
static inline void vstore_n(float *p, vf v, int64_t n, bool spill) {
    (void)spill;
    _mm512_mask_storeu_ps(p, lanes(n), v);
}
static inline void vdeinterleave(vf lo, vf hi, vf *ev, vf *od) {
    *ev = _mm512_permutex2var_ps(lo, _mm512_loadu_si512(k_even), hi);
    *od = _mm512_permutex2var_ps(lo, _mm512_loadu_si512(k_odd), hi);
}
static inline void vinterleave(vf a, vf b, vf *lo, vf *hi) {
    *lo = _mm512_permutex2var_ps(a, _mm512_loadu_si512(k_il_lo), b);
    *hi = _mm512_permutex2var_ps(a, _mm512_loadu_si512(k_il_hi), b);
}
/* the lanes moved up by one, 0 into lane 0 */
static inline vf vshift_up1(vf v) {
    return _mm512_castsi512_ps(
        _mm512_alignr_epi32(_mm512_castps_si512(v), _mm512_setzero_si512(), 15));
}
static inline float vlast(vf v) {
    return _mm512_cvtss_f32(_mm512_permutexvar_ps(_mm512_set1_epi32(15), v));
}
#else
#define VL 8
typedef __m256 vf;
#define vzero _mm256_setzero_ps
#define vset1 _mm256_set1_ps
#define vload _mm256_loadu_ps
#define vstore _mm256_storeu_ps
static inline vf vload_n(const float *p, int64_t n) {
    return load8(p, n);
}
static inline vf vload_range(const float *p, int64_t o, int64_t lo, int64_t hi) {
    return o >= lo && o + 8 <= hi ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, range8(o, lo, hi));
}
static inline void vstore_n(float *p, vf v, int64_t n, bool spill) {
    store8(p, v, n, spill);
}
static inline void vdeinterleave(vf lo, vf hi, vf *ev, vf *od) {
    deinterleave8(lo, hi, ev, od);
}
static inline void vinterleave(vf a, vf b, vf *lo, vf *hi) {
    interleave8(a, b, lo, hi);
}
static inline vf vshift_up1(vf v) {
    return _mm256_blend_ps(_mm256_permutevar8x32_ps(v, _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6)),
                           _mm256_setzero_ps(), 1);
}
static inline float vlast(vf v) {
    return _mm256_cvtss_f32(_mm256_permutevar8x32_ps(v, _mm256_set1_epi32(7)));
}
#endif

/* Stores of VL tiles from tile (th, tw) of one image's T columns may run past the tile row:
 * those columns belong to later rows of the same image, written after it (AVX2 stores them
 * plainly instead of masked). */
static inline bool wino_spill(const wgeom *w, int64_t th, int64_t tw) {
    return th * w->TW + tw + VL <= w->T;
}

/* E / O of one channel plane xc (H, W): padded row r is input row r - pad; padded column c is
 * input column c - pad. Masked loads read the input directly (no row buffer, whose narrow
 * stores would stall the wide loads that follow). */
static void wino_split(const dt__conv_geom *g, const wgeom *w, const float *xc, float *E,
                       float *O) {
    for (int64_t r = 0; r < w->R; r++) {
        int64_t ih = r - g->pad;
        float *er = E + r * w->SE, *orow = O + r * w->SE;
        if (ih < 0 || ih >= g->H) {
            for (int64_t j = 0; j < w->SE; j += VL) {
                vstore(er + j, vzero());
                vstore(orow + j, vzero());
            }
            continue;
        }
        const float *xr = xc + ih * g->W;
        for (int64_t j = 0; j < w->SE; j += VL) {
            int64_t c0 = 2 * j - g->pad; /* input column of padded column 2j */
            vf e, o;
            vdeinterleave(vload_range(xr + c0, c0, 0, g->W),
                          vload_range(xr + c0 + VL, c0 + VL, 0, g->W), &e, &o);
            vstore(er + j, e);
            vstore(orow + j, o);
        }
    }
}

static void wino_input(const dt__conv_geom *g, const float *x, float *V, int64_t ldv, float *scr) {
    wgeom w = wino_geom(g);
    float *E = scr, *O = scr + w.R * w.SE;
    const int64_t xs = g->C * ldv; /* between the 16 V matrices */
    for (int64_t c = 0; c < g->C; c++) {
        wino_split(g, &w, x + c * g->H * g->W, E, O);
        for (int64_t th = 0; th < w.TH; th++)
            for (int64_t tw = 0; tw < w.TW; tw += VL) {
                int64_t n = w.TW - tw;
                bool spill = wino_spill(&w, th, tw);
                vf t[4][4];
#pragma GCC unroll 16
                for (int k = 0; k < 4; k++) { /* B^T d, one column k of the 4x4 tiles at a time */
                    /* column k of tile tw is padded column 2*tw + k: E / O at tw + k/2 */
                    const float *src = (k & 1 ? O : E) + 2 * th * w.SE + tw + k / 2;
                    vf d0 = vload(src), d1 = vload(src + w.SE);
                    vf d2 = vload(src + 2 * w.SE), d3 = vload(src + 3 * w.SE);
                    t[0][k] = d0 - d2;
                    t[1][k] = d1 + d2;
                    t[2][k] = d2 - d1;
                    t[3][k] = d1 - d3;
                }
                float *dst = V + c * ldv + th * w.TW + tw;
#pragma GCC unroll 16
                for (int i = 0; i < 4; i++) { /* (B^T d) B */
                    vstore_n(dst + (i * 4 + 0) * xs, t[i][0] - t[i][2], n, spill);
                    vstore_n(dst + (i * 4 + 1) * xs, t[i][1] + t[i][2], n, spill);
                    vstore_n(dst + (i * 4 + 2) * xs, t[i][2] - t[i][1], n, spill);
                    vstore_n(dst + (i * 4 + 3) * xs, t[i][1] - t[i][3], n, spill);
                }
            }
    }
}

static void wino_output(const dt__conv_geom *g, const float *M, int64_t ldm, const float *b,
                        float *y) {
    wgeom w = wino_geom(g);
    const int64_t ms = g->OC * ldm, OH = g->OH, OW = g->OW;
    for (int64_t oc = 0; oc < g->OC; oc++) {
        vf bv = vset1(b ? b[oc] : 0.f);
        float *yo = y + oc * OH * OW, *yend = yo + OH * OW;
        for (int64_t th = 0; th < w.TH; th++)
            for (int64_t tw = 0; tw < w.TW; tw += VL) {
                const float *src = M + oc * ldm + th * w.TW + tw;
                vf v[16];
#pragma GCC unroll 16
                for (int x = 0; x < 16; x++) v[x] = vload_n(src + x * ms, w.TW - tw);
                vf s0[4], s1[4]; /* A^T m */
#pragma GCC unroll 16
                for (int j = 0; j < 4; j++) {
                    s0[j] = v[j] + v[4 + j] + v[8 + j];
                    s1[j] = v[4 + j] - v[8 + j] - v[12 + j];
                }
                vf r[2][2]; /* (A^T m) A + b */
#pragma GCC unroll 16
                for (int a = 0; a < 2; a++) {
                    const vf *s = a ? s1 : s0;
                    r[a][0] = s[0] + s[1] + s[2] + bv;
                    r[a][1] = s[1] - s[2] - s[3] + bv;
                }
                int64_t n = OW - 2 * tw; /* valid output columns from 2*tw */
#pragma GCC unroll 2
                for (int a = 0; a < 2; a++) {
                    if (2 * th + a >= OH) break;
                    float *yr = yo + (2 * th + a) * OW + 2 * tw;
                    /* past the row is a later row of this plane; row 2th+1 is rewritten after
                     * this store only when this is its first block */
                    bool spill = yr + 2 * VL <= yend && (a == 1 || tw == 0);
                    vf lo, hi;
                    vinterleave(r[a][0], r[a][1], &lo, &hi);
                    vstore_n(yr, lo, n, spill);
                    vstore_n(yr + VL, hi, n - VL, spill);
                }
            }
    }
}

static void wino_dout(const dt__conv_geom *g, const float *dy, float *dM, int64_t ldm) {
    wgeom w = wino_geom(g);
    const int64_t ms = g->OC * ldm, OH = g->OH, OW = g->OW;
    const vf zero = vzero();
    for (int64_t oc = 0; oc < g->OC; oc++) {
        const float *dyo = dy + oc * OH * OW;
        for (int64_t th = 0; th < w.TH; th++)
            for (int64_t tw = 0; tw < w.TW; tw += VL) {
                int64_t n = w.TW - tw, nin = OW - 2 * tw;
                bool spill = wino_spill(&w, th, tw);
                vf e[2] = {zero, zero}, o[2] = {zero, zero}; /* dy[a][0], dy[a][1] per tile */
#pragma GCC unroll 2
                for (int a = 0; a < 2; a++) {
                    if (2 * th + a >= OH) break;
                    const float *r = dyo + (2 * th + a) * OW + 2 * tw;
                    vdeinterleave(vload_n(r, nin), vload_n(r + VL, nin - VL), &e[a], &o[a]);
                }
                vf X[4][2] = {{e[0], o[0]}, /* A dy */
                              {e[0] + e[1], o[0] + o[1]},
                              {e[0] - e[1], o[0] - o[1]},
                              {zero - e[1], zero - o[1]}};
                float *dst = dM + oc * ldm + th * w.TW + tw;
#pragma GCC unroll 16
                for (int i = 0; i < 4; i++) { /* (A dy) A^T */
                    vstore_n(dst + (i * 4 + 0) * ms, X[i][0], n, spill);
                    vstore_n(dst + (i * 4 + 1) * ms, X[i][0] + X[i][1], n, spill);
                    vstore_n(dst + (i * 4 + 2) * ms, X[i][0] - X[i][1], n, spill);
                    vstore_n(dst + (i * 4 + 3) * ms, zero - X[i][1], n, spill);
                }
            }
    }
}

static void wino_dinput(const dt__conv_geom *g, const float *dV, int64_t ldv, float *dx,
                        float *scr) {
    wgeom w = wino_geom(g);
    float *E = scr, *O = scr + w.R * w.SE, *row = O + w.R * w.SE; /* row: 2*SE floats */
    const vf zero = vzero();
    const int64_t vs = g->C * ldv;
    for (int64_t c = 0; c < g->C; c++) {
        memset(E, 0, (size_t)(2 * w.R * w.SE) * sizeof(float));
        for (int64_t th = 0; th < w.TH; th++)
            for (int64_t tw = 0; tw < w.TW; tw += VL) {
                int64_t n = w.TW - tw; /* lanes past the tiles load as 0 and add nothing */
                const float *src = dV + c * ldv + th * w.TW + tw;
                vf X[4][4];
#pragma GCC unroll 16
                for (int j = 0; j < 4; j++) { /* B dV, one column j at a time */
                    vf v0 = vload_n(src + j * vs, n), v1 = vload_n(src + (4 + j) * vs, n);
                    vf v2 = vload_n(src + (8 + j) * vs, n), v3 = vload_n(src + (12 + j) * vs, n);
                    X[0][j] = v0;
                    X[1][j] = v1 - v2 + v3;
                    X[2][j] = v1 + v2 - v0;
                    X[3][j] = zero - v3;
                }
#pragma GCC unroll 16
                for (int r = 0; r < 4; r++) { /* (B dV) B^T, added at columns 2tw + k */
                    vf d0 = X[r][0], d1 = X[r][1] - X[r][2] + X[r][3];
                    vf d2 = X[r][1] + X[r][2] - X[r][0], d3 = zero - X[r][3];
                    /* k = 2, 3 land one E / O slot to the right: those lanes move up by one */
                    float *er = E + (2 * th + r) * w.SE + tw, *orr = O + (2 * th + r) * w.SE + tw;
                    vstore(er, vload(er) + (d0 + vshift_up1(d2)));
                    vstore(orr, vload(orr) + (d1 + vshift_up1(d3)));
                    if (w.TW - tw >= VL) { /* the last lane spills into the next block */
                        er[VL] += vlast(d2);
                        orr[VL] += vlast(d3);
                    }
                }
            }
        /* interleave E / O back into a padded row and add its interior into dx */
        float *dxc = dx + c * g->H * g->W;
        for (int64_t r = 0; r < w.R; r++) {
            int64_t iy = r - g->pad;
            if (iy < 0 || iy >= g->H) continue;
            const float *er = E + r * w.SE, *orr = O + r * w.SE;
            for (int64_t j = 0; 2 * j < g->pad + g->W; j += VL) {
                vf lo, hi;
                vinterleave(vload(er + j), vload(orr + j), &lo, &hi);
                vstore(row + 2 * j, lo);
                vstore(row + 2 * j + VL, hi);
            }
            const float *sr = row + g->pad; /* padded column x + pad is input column x */
            float *dr = dxc + iy * g->W;
            for (int64_t x = 0; x < g->W; x += VL) {
                int64_t n = g->W - x;
                vstore_n(dr + x, vload_n(dr + x, n) + vload_n(sr + x, n), n, false);
            }
        }
    }
}
#undef VL
#undef vzero
#undef vset1
#undef vload
#undef vstore

#else
static bool wino_ok(const dt__conv_geom *g) {
    (void)g;
    return false;
}
static int64_t wino_tiles(const dt__conv_geom *g) {
    return ((g->OH + 1) / 2) * ((g->OW + 1) / 2);
}
static int64_t wino_scratch(const dt__conv_geom *g) {
    (void)g;
    return 0;
}
static void wino_weights(const dt__conv_geom *g, const float *w, float *U) {
    (void)g, (void)w, (void)U;
}
static void wino_input(const dt__conv_geom *g, const float *x, float *V, int64_t ldv, float *scr) {
    (void)g, (void)x, (void)V, (void)ldv, (void)scr;
}
static void wino_output(const dt__conv_geom *g, const float *M, int64_t ldm, const float *b,
                        float *y) {
    (void)g, (void)M, (void)ldm, (void)b, (void)y;
}
static void wino_dout(const dt__conv_geom *g, const float *dy, float *dM, int64_t ldm) {
    (void)g, (void)dy, (void)dM, (void)ldm;
}
static void wino_dinput(const dt__conv_geom *g, const float *dV, int64_t ldv, float *dx,
                        float *scr) {
    (void)g, (void)dV, (void)ldv, (void)dx, (void)scr;
}
#endif

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
