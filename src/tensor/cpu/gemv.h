/* gemv.h — the matrix-vector product of a decoding step (gemv.c). */
#ifndef DT_TENSOR_CPU_GEMV_H
#define DT_TENSOR_CPU_GEMV_H

#include <stdint.h>

/* y[n] = dot(W[n, 0..K), x) + (bias ? bias[n] : 0) for n < N: W (N, K) row-major f32, one
 * pass over W with AVX2 FMA, rows split over `threads` OpenMP threads (1: this thread only, no
 * parallel region). No allocation. */
void dt__gemv_rows(const float *W, int64_t N, int64_t K, const float *x, const float *bias,
                   float *y, int threads);

#endif
