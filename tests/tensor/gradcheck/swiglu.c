/* Gradient-check cases: swiglu(gate, up) = silu(gate) * up, over a range reaching both tails of
 * the sigmoid, a strided gate, one tensor as both gate and up, and a size large enough for the
 * parallel blocks. */
#include "gradcheck.h"

#include <stddef.h>

static dt_tensor *b_swiglu(dt_ctx *c, dt_tensor **x) { (void)c; return dt_swiglu(x[0], x[1]); }
static dt_tensor *b_swiglu_t(dt_ctx *c, dt_tensor **x) {
    (void)c;
    return dt_swiglu(dt_transpose(x[0], 0, 1), x[1]); /* strided gate */
}
static dt_tensor *b_swiglu_same(dt_ctx *c, dt_tensor **x) { (void)c; return dt_swiglu(x[0], x[0]); }

GC_CASES(swiglu) = {
    {.op = "swiglu", .desc = "(3,11) in [-6,6)", .n_in = 2, .ndim = {2, 2}, .shape = {{3, 11}, {3, 11}}, .build = b_swiglu, .lo = -6.f, .hi = 6.f, .eps = 1e-3f},
    {.op = "swiglu", .desc = "gate (5,3)ᵀ strided", .n_in = 2, .ndim = {2, 2}, .shape = {{5, 3}, {3, 5}}, .build = b_swiglu_t, .lo = -3.f, .hi = 3.f, .eps = 1e-3f},
    {.op = "swiglu", .desc = "gate == up (2,2,5)", .n_in = 1, .ndim = {3}, .shape = {{2, 2, 5}}, .build = b_swiglu_same, .lo = -3.f, .hi = 3.f, .eps = 1e-3f},
    {.op = "swiglu", .desc = "(64,600) parallel blocks", .n_in = 2, .ndim = {2, 2}, .shape = {{64, 600}, {64, 600}}, .build = b_swiglu, .lo = -3.f, .hi = 3.f, .eps = 1e-3f},
    {0},
};
