/* attn_rows.h — the per-row softmax kernels of the grouped-query attention (ops_attention_gqa.c),
 * in AVX-512, AVX2 and portable variants chosen at each call (cpu/attn_rows.c). */
#ifndef DT_ATTN_ROWS_H
#define DT_ATTN_ROWS_H

#include <stdint.h>

/* Softmax of s[0, len) in place (len >= 1), s[len, end) zeroed; st[0] = the row's max,
 * st[1] = 1 / sum of exp(s - max): p = exp(s - st[0]) * st[1] with these bits. */
void dt__attn_softmax_row(float *s, int64_t len, int64_t end, float *st);
/* The backward of one row: s (scores) becomes P = exp(s - st[0]) * st[1] on [0, len), the
 * bits of the forward's; then, when d (dP = dy vᵀ) is given, d becomes
 * dS = P * (d - Σ P d) * scale. Both are zeroed on [len, end). */
void dt__attn_softmax_grad_row(float *s, float *d, int64_t len, int64_t end, const float *st,
                               float scale);

/* A few query rows against many keys (a decoding step), AVX2 + FMA (on AVX-512 CPUs too: these
 * are bound by reading the cache); callers use dt__gemm_f32 below AVX2.
 * Sc[r * lds + j] = scale * Q[r] · K[j] for r < M, j < n; Q dense (M, D), key j at K + j * ldk.
 * Each score is one FMA chain over D in order, then a fixed lane tree. */
void dt__attn_scores_few(const float *Q, int64_t M, int64_t D, const float *K, int64_t ldk,
                         int64_t n, float scale, float *Sc, int64_t lds);
/* O (M, D) dense = P (M, n) (rows lds apart) · V (n, D), value row j at V + j * ldv: each output
 * one FMA chain over j in order. */
void dt__attn_pv_few(const float *P, int64_t M, int64_t lds, const float *V, int64_t ldv,
                     int64_t n, int64_t D, float *O);

#endif
