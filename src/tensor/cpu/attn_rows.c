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
