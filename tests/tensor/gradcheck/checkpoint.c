/* Gradient-check cases: activation checkpointing (checkpoint) over a small segment whose
 * weight comes through `user`, and a checkpoint nested inside another. */
#include "gradcheck.h"

#include <stddef.h>

static dt_tensor *seg(dt_tensor *x, void *w) {
    return dt_tanh(dt_linear(x, w, NULL));
}

static dt_tensor *seg2(dt_tensor *x, void *w) {
    return dt_mul(dt_checkpoint(seg, w, x), dt_checkpoint(seg, w, x));
}

static dt_tensor *b_ckpt(dt_ctx *c, dt_tensor **x) {
    (void)c;
    return dt_checkpoint(seg, x[1], x[0]);
}

static dt_tensor *b_ckpt_nested(dt_ctx *c, dt_tensor **x) {
    (void)c;
    return dt_checkpoint(seg2, x[1], x[0]);
}

GC_CASES(checkpoint) = {
    {.op = "checkpoint",
     .desc = "tanh((3,5)·(4,5)ᵀ)",
     .n_in = 2,
     .ndim = {2, 2},
     .shape = {{3, 5}, {4, 5}},
     .build = b_ckpt,
     .eps = 1e-3f},
    {.op = "checkpoint",
     .desc = "nested",
     .n_in = 2,
     .ndim = {2, 2},
     .shape = {{3, 4}, {4, 4}},
     .build = b_ckpt_nested,
     .eps = 1e-3f},
    {0},
};
