/* conv_winograd.h — Winograd F(2x2, 3x3) for 3x3 stride-1 convolutions: the weight transform
 * (wino_weights), the input transform (wino_input), the output transform (wino_output) and, for
 * the input gradient, the transforms of dY (wino_dout) and back to dx (wino_dinput), with
 * wino_ok / wino_tiles / wino_scratch; contracts in conv_impl.h. The GEMMs between the
 * transforms run in ops_conv.c. Sequential, no allocation: the caller passes wino_scratch()
 * floats.
 *
 * Part of cpu/conv.c, #included there once per ISA after the shared vector helpers. The
 * transforms are written once over a vector `vf` of VL tiles (16 on AVX-512, 8 on AVX2; its
 * helpers are the only per-width code); the portable table has no Winograd (wino_ok is false). */
#ifndef DT__CONV_PARTS
#error "a part of cpu/conv.c, compiled once per ISA: include it only from there"
#endif

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
#else /* DT__CONV_AVX2 */
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
#endif /* the vf helpers */

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

#else  /* the portable table: no Winograd (wino_ok is false) */
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
#endif /* __AVX512F__ || DT__CONV_AVX2 */
