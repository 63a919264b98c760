/* gemv.c — y = W x + b for one vector (the M = 1 products of a decoding step), without the
 * packing and tiling a GEMM does: the step is bound by reading W once, so each row is streamed
 * once and dotted with x (held in cache) four rows at a time, two FMA chains per row. */
#include "tensor/tensor_iface.h"

#include <immintrin.h>
#include <omp.h>

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Rows [n0, n1) of the product. */
static void rows(const float *W, int64_t n0, int64_t n1, int64_t K, const float *x,
                 const float *bias, float *y) {
    int64_t K16 = K & ~(int64_t)15, n = n0;
    for (; n + 4 <= n1; n += 4) {
        const float *w0 = W + n * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
        __m256 a[8];
        for (int i = 0; i < 8; i++) a[i] = _mm256_setzero_ps();
        for (int64_t k = 0; k < K16; k += 16) {
            __m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
            a[0] = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + k), x0, a[0]);
            a[1] = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + k + 8), x1, a[1]);
            a[2] = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + k), x0, a[2]);
            a[3] = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + k + 8), x1, a[3]);
            a[4] = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + k), x0, a[4]);
            a[5] = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + k + 8), x1, a[5]);
            a[6] = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + k), x0, a[6]);
            a[7] = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + k + 8), x1, a[7]);
        }
        const float *w[4] = {w0, w1, w2, w3};
        for (int r = 0; r < 4; r++) {
            float s = hsum(_mm256_add_ps(a[2 * r], a[2 * r + 1]));
            for (int64_t k = K16; k < K; k++) s += w[r][k] * x[k];
            y[n + r] = s + (bias ? bias[n + r] : 0.f);
        }
    }
    for (; n < n1; n++) {
        const float *w = W + n * K;
        __m256 a = _mm256_setzero_ps();
        int64_t k = 0;
        for (; k + 8 <= K; k += 8)
            a = _mm256_fmadd_ps(_mm256_loadu_ps(w + k), _mm256_loadu_ps(x + k), a);
        float s = hsum(a);
        for (; k < K; k++) s += w[k] * x[k];
        y[n] = s + (bias ? bias[n] : 0.f);
    }
}

void dt__gemv_rows(const float *W, int64_t N, int64_t K, const float *x, const float *bias,
                   float *y, int threads) {
    if (threads <= 1 || N < 64) {
        rows(W, 0, N, K, x, bias, y);
        return;
    }
    /* blocks of 4 rows, split evenly */
    int64_t blocks = (N + 3) / 4;
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t b0 = blocks * t / nt, b1 = blocks * (t + 1) / nt;
        int64_t n0 = b0 * 4, n1 = b1 * 4 < N ? b1 * 4 : N;
        if (n0 < n1) rows(W, n0, n1, K, x, bias, y);
    }
}
