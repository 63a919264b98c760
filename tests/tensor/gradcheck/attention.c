/* Gradient-check cases: causal_self_attention over several (B, T, NH, HD), including T = 1,
 * NH = 1, T spanning more than one 64-row block without being a multiple of it, and a qkv
 * whose gradient another op has started. */
#include "gradcheck.h"

#include <stddef.h>

static dt_tensor *b_att1(dt_ctx *c, dt_tensor **x) { (void)c; return dt_causal_self_attention(x[0], 1); }
static dt_tensor *b_att2(dt_ctx *c, dt_tensor **x) { (void)c; return dt_causal_self_attention(x[0], 2); }
static dt_tensor *b_att3(dt_ctx *c, dt_tensor **x) { (void)c; return dt_causal_self_attention(x[0], 3); }
/* a non-contiguous qkv (transposed back from (T, B, 3C)) goes through a contiguous copy */
static dt_tensor *b_att_strided(dt_ctx *c, dt_tensor **x) {
    (void)c;
    return dt_causal_self_attention(dt_transpose(x[0], 0, 1), 2);
}

/* qkv also feeds another op whose gradient arrives first: attention adds into an existing one */
static dt_tensor *b_att_shared(dt_ctx *c, dt_tensor **x) {
    (void)c;
    int64_t C = x[0]->shape[2] / 3;
    dt_tensor *y = dt_causal_self_attention(x[0], 2); /* recorded first, so its backward runs last */
    dt_tensor *k = dt_mul(dt_slice(x[0], 2, C, 2 * C), dt_slice(x[0], 2, C, 2 * C));
    return dt_add(y, k);
}

/* qkv shapes are (B, T, 3 * NH * HD) */
GC_CASES(attention) = {
    {.op = "causal_self_attention", .desc = "B2 T5 NH2 HD3", .n_in = 1, .ndim = {3}, .shape = {{2, 5, 18}}, .build = b_att2, .lo = -2.f, .hi = 2.f},
    {.op = "causal_self_attention", .desc = "T=1 (B3 NH2 HD2)", .n_in = 1, .ndim = {3}, .shape = {{3, 1, 12}}, .build = b_att2},
    {.op = "causal_self_attention", .desc = "NH=1 B1 T7 HD4", .n_in = 1, .ndim = {3}, .shape = {{1, 7, 12}}, .build = b_att1, .lo = -2.f, .hi = 2.f},
    {.op = "causal_self_attention", .desc = "B1 T70 NH3 HD2 (two row blocks)", .n_in = 1, .ndim = {3}, .shape = {{1, 70, 18}}, .build = b_att3, .lo = -2.f, .hi = 2.f},
    {.op = "causal_self_attention", .desc = "B2 T131 NH1 HD3 (three row blocks)", .n_in = 1, .ndim = {3}, .shape = {{2, 131, 9}}, .build = b_att1, .lo = -2.f, .hi = 2.f},
    {.op = "causal_self_attention", .desc = "strided qkv (T4,B2)->(B2,T4) NH2 HD2", .n_in = 1, .ndim = {3}, .shape = {{4, 2, 12}}, .build = b_att_strided},
    {.op = "causal_self_attention", .desc = "qkv shared with another op (B2 T70 NH2 HD2)", .n_in = 1, .ndim = {3}, .shape = {{2, 70, 12}}, .build = b_att_shared, .lo = -2.f, .hi = 2.f},
    {0},
};
