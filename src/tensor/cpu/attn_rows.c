/* attn_rows.c — softmax rows for the grouped-query attention: the forward row (max, exp, sum,
 * scale; the max and 1/sum kept as the row's statistics) and the backward row (P recomputed from
 * the statistics with the forward's bits, then the softmax gradient).
 *
 * Every reduction runs in one fixed order (vector lanes in index order, then a fixed lane
 * tree), so the bits depend on the row alone, never on the thread that runs it. The AVX-512 and
 * AVX2 variants use the vector exp of simd_exp.h; the portable one libm's expf. */
#include "attn_rows.h"

#include <math.h>
#include <string.h>

#include "simd_exp.h"

static void zero_tail(float *s, int64_t len, int64_t end) {
    if (end > len) memset(s + len, 0, (size_t)(end - len) * sizeof(float));
}

DT__AVX512_BEGIN
static void softmax_row_512(float *s, int64_t len, float *st) {
    __m512 vm = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < len; j += 16) {
        __mmask16 k = dt__tail_mask16(len - j);
        vm = _mm512_mask_max_ps(vm, k, vm, _mm512_maskz_loadu_ps(k, s + j));
    }
    float mx = _mm512_reduce_max_ps(vm);
    __m512 vmx = _mm512_set1_ps(mx), sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < len; j += 16) {
        __mmask16 k = dt__tail_mask16(len - j);
        __m512 e = dt__exp512_nonpos(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), vmx));
        e = _mm512_maskz_mov_ps(k, e);
        sum = _mm512_add_ps(sum, e);
        _mm512_mask_storeu_ps(s + j, k, e);
    }
    float inv = 1.f / _mm512_reduce_add_ps(sum);
    __m512 vi = _mm512_set1_ps(inv);
    for (int64_t j = 0; j < len; j += 16) {
        __mmask16 k = dt__tail_mask16(len - j);
        _mm512_mask_storeu_ps(s + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + j), vi));
    }
    st[0] = mx;
    st[1] = inv;
}

static void softmax_grad_row_512(float *s, float *d, int64_t len, const float *st, float scale) {
    __m512 vmx = _mm512_set1_ps(st[0]), vi = _mm512_set1_ps(st[1]), acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < len; j += 16) {
        __mmask16 k = dt__tail_mask16(len - j);
        __m512 e = dt__exp512_nonpos(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), vmx));
        __m512 p = _mm512_mul_ps(_mm512_maskz_mov_ps(k, e), vi);
        _mm512_mask_storeu_ps(s + j, k, p);
        if (d) acc = _mm512_fmadd_ps(p, _mm512_maskz_loadu_ps(k, d + j), acc);
    }
    if (!d) return;
    __m512 D = _mm512_set1_ps(_mm512_reduce_add_ps(acc)), sc = _mm512_set1_ps(scale);
    for (int64_t j = 0; j < len; j += 16) {
        __mmask16 k = dt__tail_mask16(len - j);
        __m512 p = _mm512_maskz_loadu_ps(k, s + j), dv = _mm512_maskz_loadu_ps(k, d + j);
        _mm512_mask_storeu_ps(d + j, k, _mm512_mul_ps(_mm512_mul_ps(p, _mm512_sub_ps(dv, D)), sc));
    }
}
DT__ISA_END

DT__AVX2_BEGIN
static void softmax_row_256(float *s, int64_t len, float *st) {
    float mx = dt__max_row256(s, len);
    __m256 vmx = _mm256_set1_ps(mx), sum = _mm256_setzero_ps();
    for (int64_t j = 0; j < len; j += 8) {
        __m256i k = dt__tail_mask8(len - j);
        __m256 e = dt__exp256_nonpos(_mm256_sub_ps(_mm256_maskload_ps(s + j, k), vmx));
        e = _mm256_and_ps(_mm256_castsi256_ps(k), e);
        sum = _mm256_add_ps(sum, e);
        _mm256_maskstore_ps(s + j, k, e);
    }
    float inv = 1.f / dt__hsum256(sum);
    __m256 vi = _mm256_set1_ps(inv);
    for (int64_t j = 0; j < len; j += 8) {
        __m256i k = dt__tail_mask8(len - j);
        _mm256_maskstore_ps(s + j, k, _mm256_mul_ps(_mm256_maskload_ps(s + j, k), vi));
    }
    st[0] = mx;
    st[1] = inv;
}

static void softmax_grad_row_256(float *s, float *d, int64_t len, const float *st, float scale) {
    __m256 vmx = _mm256_set1_ps(st[0]), vi = _mm256_set1_ps(st[1]), acc = _mm256_setzero_ps();
    for (int64_t j = 0; j < len; j += 8) {
        __m256i k = dt__tail_mask8(len - j);
        __m256 e = dt__exp256_nonpos(_mm256_sub_ps(_mm256_maskload_ps(s + j, k), vmx));
        __m256 p = _mm256_mul_ps(_mm256_and_ps(_mm256_castsi256_ps(k), e), vi);
        _mm256_maskstore_ps(s + j, k, p);
        if (d) acc = _mm256_fmadd_ps(p, _mm256_maskload_ps(d + j, k), acc);
    }
    if (!d) return;
    __m256 D = _mm256_set1_ps(dt__hsum256(acc)), sc = _mm256_set1_ps(scale);
    for (int64_t j = 0; j < len; j += 8) {
        __m256i k = dt__tail_mask8(len - j);
        __m256 p = _mm256_maskload_ps(s + j, k), dv = _mm256_maskload_ps(d + j, k);
        _mm256_maskstore_ps(d + j, k, _mm256_mul_ps(_mm256_mul_ps(p, _mm256_sub_ps(dv, D)), sc));
    }
}

/* ---- few-row products ---- */

/* 8 floats at p, of which rem (>= 1) are wanted; zeros past them */
static inline __m256 ld8(const float *p, int64_t rem) {
    return rem >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, dt__tail_mask8(rem));
}

/* the scores of row q against nk (1 or 4) keys from k0, ldk apart */
static inline __attribute__((always_inline)) void scores_keys(int nk, const float *q, int64_t D,
                                                              const float *k0, int64_t ldk,
                                                              float scale, float *out) {
    __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
    for (int64_t d = 0; d < D; d += 8) {
        __m256 qv = ld8(q + d, D - d);
#pragma GCC unroll 4
        for (int c = 0; c < nk; c++) a[c] = _mm256_fmadd_ps(qv, ld8(k0 + c * ldk + d, D - d), a[c]);
    }
#pragma GCC unroll 4
    for (int c = 0; c < nk; c++) out[c] = scale * dt__hsum256(a[c]);
}

/* Key and value rows sit Hkv * D floats apart (4 KiB at Hkv 8, D 128), too far apart for the
 * hardware prefetchers: the rows PF_AHEAD ahead are prefetched by hand. */
#define PF_AHEAD 8
static inline void prefetch_row(const float *p, int64_t D) {
    for (int64_t d = 0; d < D; d += 16) _mm_prefetch((const char *)(p + d), _MM_HINT_T0);
}

void dt__attn_scores_few(const float *Q, int64_t M, int64_t D, const float *K, int64_t ldk,
                         int64_t n, float scale, float *Sc, int64_t lds) {
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        for (int64_t c = PF_AHEAD; c < PF_AHEAD + 4 && j + c < n; c++)
            prefetch_row(K + (j + c) * ldk, D);
        for (int64_t r = 0; r < M; r++)
            scores_keys(4, Q + r * D, D, K + j * ldk, ldk, scale, Sc + r * lds + j);
    }
    for (; j < n; j++)
        for (int64_t r = 0; r < M; r++)
            scores_keys(1, Q + r * D, D, K + j * ldk, ldk, scale, Sc + r * lds + j);
}

/* columns [0, 8 nv) (nv <= 8) of one output row over values [0, n), the last vector holding rem
 * (1..8) of them, continuing the sums in o when `more` (each element stays one FMA chain over
 * all the values in order, cut where o is stored and reloaded) */
static inline __attribute__((always_inline)) void pv_chunk(int nv, const float *p, const float *V,
                                                           int64_t ldv, int64_t n, int64_t rem,
                                                           bool more, float *o) {
    __m256 acc[8];
    __m256i km = dt__tail_mask8(rem);
#pragma GCC unroll 8
    for (int v = 0; v < nv; v++)
        acc[v] = !more        ? _mm256_setzero_ps()
                 : v < nv - 1 ? _mm256_loadu_ps(o + 8 * v)
                              : _mm256_maskload_ps(o + 8 * v, km);
    for (int64_t j = 0; j < n; j++) {
        __m256 pj = _mm256_broadcast_ss(p + j);
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++)
            acc[v] = _mm256_fmadd_ps(pj, ld8(V + j * ldv + 8 * v, v == nv - 1 ? rem : 8), acc[v]);
    }
#pragma GCC unroll 8
    for (int v = 0; v < nv - 1; v++) _mm256_storeu_ps(o + 8 * v, acc[v]);
    _mm256_maskstore_ps(o + 8 * (nv - 1), km, acc[nv - 1]);
}

/* Values in chunks of PV_KEYS rows (32 KiB at D 128), each chunk read by every row while it is in
 * cache, the rows' sums carried in O from chunk to chunk. */
#define PV_KEYS 64

static void pv_rows(const float *P, int64_t M, int64_t lds, const float *V, int64_t ldv, int64_t j0,
                    int64_t n, int64_t D, float *O) {
    for (int64_t d0 = 0; d0 < D; d0 += 64) {
        int64_t nd = D - d0 < 64 ? D - d0 : 64, nv = (nd + 7) / 8, rem = nd - 8 * (nv - 1);
        for (int64_t r = 0; r < M; r++) {
            const float *p = P + r * lds + j0, *v = V + j0 * ldv + d0;
            float *o = O + r * D + d0;
            bool more = j0 > 0;
            if (nv == 8) /* D a multiple of 64: constants, accumulators in registers */
                pv_chunk(8, p, v, ldv, n, rem, more, o);
            else if (nv == 4)
                pv_chunk(4, p, v, ldv, n, rem, more, o);
            else /* other head sizes: the same code with loops */
                pv_chunk((int)nv, p, v, ldv, n, rem, more, o);
        }
    }
}

void dt__attn_pv_few(const float *P, int64_t M, int64_t lds, const float *V, int64_t ldv, int64_t n,
                     int64_t D, float *O) {
    for (int64_t j0 = 0; j0 < n; j0 += PV_KEYS) {
        int64_t nj = n - j0 < PV_KEYS ? n - j0 : PV_KEYS;
        for (int64_t j = j0 + nj; j < j0 + nj + PV_KEYS && j < n; j++) /* the next chunk */
            prefetch_row(V + j * ldv, D);
        pv_rows(P, M, lds, V, ldv, j0, nj, D, O);
    }
}
DT__ISA_END

static void softmax_row_gen(float *s, int64_t len, float *st) {
    float mx = s[0], sum = 0.f;
    for (int64_t j = 1; j < len; j++) mx = s[j] > mx ? s[j] : mx;
    for (int64_t j = 0; j < len; j++) sum += (s[j] = expf(s[j] - mx));
    float inv = 1.f / sum;
    for (int64_t j = 0; j < len; j++) s[j] *= inv;
    st[0] = mx;
    st[1] = inv;
}

static void softmax_grad_row_gen(float *s, float *d, int64_t len, const float *st, float scale) {
    float D = 0.f;
    for (int64_t j = 0; j < len; j++) {
        s[j] = expf(s[j] - st[0]) * st[1];
        if (d) D += s[j] * d[j];
    }
    if (d)
        for (int64_t j = 0; j < len; j++) d[j] = s[j] * (d[j] - D) * scale;
}

void dt__attn_softmax_row(float *s, int64_t len, int64_t end, float *st) {
    if (dt__isa_avx512())
        softmax_row_512(s, len, st);
    else if (dt__isa_avx2())
        softmax_row_256(s, len, st);
    else
        softmax_row_gen(s, len, st);
    zero_tail(s, len, end);
}

void dt__attn_softmax_grad_row(float *s, float *d, int64_t len, int64_t end, const float *st,
                               float scale) {
    if (dt__isa_avx512())
        softmax_grad_row_512(s, d, len, st, scale);
    else if (dt__isa_avx2())
        softmax_grad_row_256(s, d, len, st, scale);
    else
        softmax_grad_row_gen(s, d, len, st, scale);
    zero_tail(s, len, end);
    if (d) zero_tail(d, len, end);
}
