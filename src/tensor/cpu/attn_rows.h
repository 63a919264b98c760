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

#endif
