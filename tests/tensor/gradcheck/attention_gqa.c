/* Gradient-check cases: attention(q, k, v, causal) — plain multi-head (Hq = Hkv), grouped-query
 * with Hq / Hkv = 2 and 4, more keys than queries (a cache) causal and not, one query step
 * against a cache, odd T, D = 64 and small D, several row blocks, strided inputs, one tensor
 * as q, k and v, and a k whose gradient another op has started. */
#include "gradcheck.h"

#include <stddef.h>

static dt_tensor *b_causal(dt_ctx *c, dt_tensor **x) { (void)c; return dt_attention(x[0], x[1], x[2], true); }
static dt_tensor *b_full(dt_ctx *c, dt_tensor **x) { (void)c; return dt_attention(x[0], x[1], x[2], false); }
/* q stored (B, Hq, T, D) and k (B, Hkv, S, D), transposed to the op's layout: read in place */
static dt_tensor *b_heads_first(dt_ctx *c, dt_tensor **x) {
    (void)c;
    return dt_attention(dt_transpose(x[0], 1, 2), dt_transpose(x[1], 1, 2), x[2], true);
}
/* v stored (B, S, Hkv, D) with its last two dims swapped: the copied path */
static dt_tensor *b_v_swapped(dt_ctx *c, dt_tensor **x) {
    (void)c;
    return dt_attention(x[0], x[1], dt_transpose(x[2], 2, 3), true);
}
static dt_tensor *b_self(dt_ctx *c, dt_tensor **x) { (void)c; return dt_attention(x[0], x[0], x[0], true); }
/* k also feeds another op recorded later, whose gradient reaches k first */
static dt_tensor *b_k_shared(dt_ctx *c, dt_tensor **x) {
    (void)c;
    dt_tensor *y = dt_attention(x[0], x[1], x[2], true);
    return dt_add(y, dt_mul(x[1], x[1]));
}

#define QKV(b, t, s, hq, hkv, d) .n_in = 3, .ndim = {4, 4, 4}, .shape = {{b, t, hq, d}, {b, s, hkv, d}, {b, s, hkv, d}}

GC_CASES(attention_gqa) = {
    {.op = "attention", .desc = "MHA B2 T5 H2 D3 causal", QKV(2, 5, 5, 2, 2, 3), .build = b_causal, .lo = -2.f, .hi = 2.f},
    {.op = "attention", .desc = "GQA 2 B1 T7 Hq4 Hkv2 D4 causal", QKV(1, 7, 7, 4, 2, 4), .build = b_causal, .lo = -2.f, .hi = 2.f},
    {.op = "attention", .desc = "GQA 4 B2 T5 Hq4 Hkv1 D8 causal", QKV(2, 5, 5, 4, 1, 8), .build = b_causal, .lo = -2.f, .hi = 2.f},
    {.op = "attention", .desc = "GQA 2 cache T3 S8 Hq4 Hkv2 D4 causal", QKV(2, 3, 8, 4, 2, 4), .build = b_causal, .lo = -2.f, .hi = 2.f},
    {.op = "attention", .desc = "GQA 4 T3 S6 Hq8 Hkv2 D2 not causal", QKV(1, 3, 6, 8, 2, 2), .build = b_full, .lo = -2.f, .hi = 2.f},
    {.op = "attention", .desc = "B2 T5 H3 D3 not causal (S == T)", QKV(2, 5, 5, 3, 3, 3), .build = b_full, .lo = -2.f, .hi = 2.f},
    {.op = "attention", .desc = "decode T1 S9 Hq4 Hkv2 D4 causal", QKV(2, 1, 9, 4, 2, 4), .build = b_causal, .lo = -2.f, .hi = 2.f},
    {.op = "attention", .desc = "D64 B1 T5 Hq2 Hkv1 causal", QKV(1, 5, 5, 2, 1, 64), .build = b_causal},
    {.op = "attention", .desc = "GQA 4 T37 (3 row blocks) Hq4 Hkv1 D2", QKV(1, 37, 37, 4, 1, 2), .build = b_causal, .lo = -2.f, .hi = 2.f},
    {.op = "attention", .desc = "T70 S75 (2 row blocks) H1 D3 causal", QKV(1, 70, 75, 1, 1, 3), .build = b_causal, .lo = -2.f, .hi = 2.f},
    {.op = "attention", .desc = "q, k heads-first transposed (B2 T4 S6 Hq4 Hkv2 D3)", .n_in = 3, .ndim = {4, 4, 4}, .shape = {{2, 4, 4, 3}, {2, 2, 6, 3}, {2, 6, 2, 3}}, .build = b_heads_first, .lo = -2.f, .hi = 2.f},
    {.op = "attention", .desc = "v last dims swapped (B1 T3 S5 Hq2 Hkv1 D4)", .n_in = 3, .ndim = {4, 4, 4}, .shape = {{1, 3, 2, 4}, {1, 5, 1, 4}, {1, 5, 4, 1}}, .build = b_v_swapped, .lo = -2.f, .hi = 2.f},
    {.op = "attention", .desc = "q = k = v (B2 T6 H2 D3)", .n_in = 1, .ndim = {4}, .shape = {{2, 6, 2, 3}}, .build = b_self, .lo = -2.f, .hi = 2.f},
    {.op = "attention", .desc = "k shared with another op (T4 S4 H2 D3)", QKV(1, 4, 4, 2, 2, 3), .build = b_k_shared, .lo = -2.f, .hi = 2.f},
    {0},
};
