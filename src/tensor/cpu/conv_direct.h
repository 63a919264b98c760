/* conv_direct.h — the direct convolution for single-channel inputs (a network's first layer):
 * C == 1, stride 1, at most DT__CONV_DIRECT_MAX_TAPS taps, where a GEMM over so few rows does
 * not pay. Table entries: conv_direct_ok, conv_direct_scratch, conv_direct_fwd (y = conv(x, w)
 * + b for one image) and conv_direct_wgrad (lane-wise partial sums of dW and db over a range of
 * images, folded by conv_lanes_reduce in conv.c); contracts in conv_impl.h. Sequential, fixed
 * summation order, no allocation: the caller passes conv_direct_scratch() floats.
 *
 * Part of cpu/conv.c, #included there once per ISA after the shared vector helpers (v16, lanes,
 * store8 / load8). The forward shares each input load among four output channels on AVX-512 and
 * AVX2 (direct_fwd_vec over that ISA's direct_row); the weight gradient is direct_wgrad_512 or
 * direct_wgrad_256; the portable build runs both on v16 (wgrad_image). */
#ifndef DT__CONV_PARTS
#error "a part of cpu/conv.c, compiled once per ISA: include it only from there"
#endif

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

/* off[kh * KW + kw]: where tap (kh, kw) reads in the padded image, relative to the output's
 * top-left input element. */
static void tap_offsets(const dt__conv_geom *g, const dgeom *d, int64_t *off) {
    for (int64_t kh = 0; kh < g->KH; kh++)
        for (int64_t kw = 0; kw < g->KW; kw++) off[kh * g->KW + kw] = kh * d->Wp + kw;
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
#endif /* __AVX512F__ || DT__CONV_AVX2 */

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
#endif /* __AVX512F__, DT__CONV_AVX2 */

static void conv_direct_fwd(const dt__conv_geom *g, const float *x, const float *w, const float *b,
                            float *y, float *scratch) {
    dgeom d = direct_geom(g);
    float *xp = scratch, *row = scratch + d.Hp * d.Wp + 16;
    pad_image(g, &d, x, xp);
    int64_t off[DT__CONV_DIRECT_MAX_TAPS];
    tap_offsets(g, &d, off);
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
    tap_offsets(g, &d, off);
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
