/* Gradient-check cases: rope over small and Llama-sized head dims, a later start position, a
 * small theta (angles of many turns) and a strided input. */
#include "gradcheck.h"

#include <stddef.h>

static dt_tensor *b_rope(dt_ctx *c, dt_tensor **x) { (void)c; return dt_rope(x[0], 0, 10000.f); }
static dt_tensor *b_rope_pos(dt_ctx *c, dt_tensor **x) { (void)c; return dt_rope(x[0], 37, 10.f); }
/* (B, H, T, D) stored, transposed to (B, T, H, D): the strided path */
static dt_tensor *b_rope_t(dt_ctx *c, dt_tensor **x) {
    (void)c;
    return dt_rope(dt_transpose(x[0], 1, 2), 3, 500000.f);
}

GC_CASES(rope) = {
    {.op = "rope", .desc = "B2 T3 H2 D4 pos0 0", .n_in = 1, .ndim = {4}, .shape = {{2, 3, 2, 4}}, .build = b_rope, .lo = -2.f, .hi = 2.f},
    {.op = "rope", .desc = "B1 T5 H1 D2 pos0 37 theta 10", .n_in = 1, .ndim = {4}, .shape = {{1, 5, 1, 2}}, .build = b_rope_pos, .lo = -2.f, .hi = 2.f},
    {.op = "rope", .desc = "B1 T4 H3 D64 pos0 0", .n_in = 1, .ndim = {4}, .shape = {{1, 4, 3, 64}}, .build = b_rope},
    {.op = "rope", .desc = "(B2 H3 T5 D6) transposed, theta 5e5", .n_in = 1, .ndim = {4}, .shape = {{2, 3, 5, 6}}, .build = b_rope_t},
    {0},
};
