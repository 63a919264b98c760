/* conv_pool.h — max and average pooling over a range [p0, p1) of planes: max_pool_fwd (with
 * the argmax index, a 2x2 stride-2 unpadded fast path max_pool_2x2), max_pool_2x2_bwd,
 * avg_pool_fwd and avg_pool_bwd; contracts in conv_impl.h. Sequential, no allocation; the max
 * takes the first maximum in window order and a NaN wins, like PyTorch.
 *
 * Part of cpu/conv.c, #included there once per ISA after the shared vector helpers. The 2x2
 * pool has an AVX-512 version (16 outputs a vector) and, under `#else`, the portable one with
 * AVX2 row kernels (8 outputs a vector); any other window runs 8 outputs a vector on AVX2
 * (POOL_BLOCK8) and one at a time elsewhere. */
#ifndef DT__CONV_PARTS
#error "a part of cpu/conv.c, compiled once per ISA: include it only from there"
#endif

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
#else /* !__AVX512F__: the portable 2x2 pool, with AVX2 row kernels */
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
#endif /* DT__CONV_AVX2 */

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
#endif /* __AVX512F__ */

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
#endif /* DT__CONV_AVX2 */

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
