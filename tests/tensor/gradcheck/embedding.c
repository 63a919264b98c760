/* Gradient-check cases: embedding. The build makes its own integer ids (with repeats, so the
 * backward's accumulation is checked); the checked input is the table. */
#include "gradcheck.h"

#include <stddef.h>

static dt_tensor *b_emb_i64(dt_ctx *c, dt_tensor **x) {
    int64_t ids[10] = {3, 0, 5, 3, 3, 1, 0, 5, 2, 3}; /* row 4 never used: gradient 0 */
    return dt_embedding(dt_tensor_from_i64(c, 2, (int64_t[]){2, 5}, ids), x[0]);
}
static dt_tensor *b_emb_i32(dt_ctx *c, dt_tensor **x) {
    int32_t ids[7] = {1, 1, 0, 2, 1, 0, 2};
    dt_tensor *t = dt_tensor_new(c, DT_DTYPE_I32, 1, (int64_t[]){7});
    if (t) for (int i = 0; i < 7; i++) ((int32_t *)t->data)[i] = ids[i];
    return dt_embedding(t, x[0]);
}
static dt_tensor *b_emb_big(dt_ctx *c, dt_tensor **x) {
    /* 600 tokens x 80 columns: the parallel column-chunk backward */
    int64_t ids[600];
    for (int i = 0; i < 600; i++) ids[i] = (i * 7 + i / 13) % 50;
    return dt_embedding(dt_tensor_from_i64(c, 2, (int64_t[]){4, 150}, ids), x[0]);
}

/* two tables, i64 token ids and i32 position ids (repeats in both) */
static dt_tensor *b_emb_sum(dt_ctx *c, dt_tensor **x) {
    int64_t tok[8] = {3, 0, 3, 5, 1, 1, 4, 2};
    dt_tensor *pos = dt_tensor_new(c, DT_DTYPE_I32, 2, (int64_t[]){2, 4});
    if (pos) for (int i = 0; i < 8; i++) ((int32_t *)pos->data)[i] = i % 4;
    return dt_embedding_sum(dt_tensor_from_i64(c, 2, (int64_t[]){2, 4}, tok), x[0], pos, x[1]);
}
/* one table looked up twice: both scatters reach the same gradient */
static dt_tensor *b_emb_sum_same(dt_ctx *c, dt_tensor **x) {
    int64_t a[6] = {0, 2, 2, 1, 0, 3}, b[6] = {1, 1, 3, 0, 2, 2};
    return dt_embedding_sum(dt_tensor_from_i64(c, 1, (int64_t[]){6}, a), x[0],
                            dt_tensor_from_i64(c, 1, (int64_t[]){6}, b), x[0]);
}
/* 600 tokens x 80 columns: the parallel forward and backward */
static dt_tensor *b_emb_sum_big(dt_ctx *c, dt_tensor **x) {
    int64_t tok[600], pos[600];
    for (int i = 0; i < 600; i++) tok[i] = (i * 7 + i / 13) % 50, pos[i] = i % 150;
    return dt_embedding_sum(dt_tensor_from_i64(c, 2, (int64_t[]){4, 150}, tok), x[0],
                            dt_tensor_from_i64(c, 2, (int64_t[]){4, 150}, pos), x[1]);
}

GC_CASES(embedding) = {
    {.op = "embedding", .desc = "i64 ids (2,5) into (6,4), repeats", .n_in = 1, .ndim = {2}, .shape = {{6, 4}}, .build = b_emb_i64},
    {.op = "embedding", .desc = "i32 ids (7) into (3,5)", .n_in = 1, .ndim = {2}, .shape = {{3, 5}}, .build = b_emb_i32},
    {.op = "embedding", .desc = "i64 ids (4,150) into (50,80), parallel", .n_in = 1, .ndim = {2}, .shape = {{50, 80}}, .build = b_emb_big},
    {.op = "embedding_sum", .desc = "(2,4) ids into (6,3) + (4,3)", .n_in = 2, .ndim = {2, 2}, .shape = {{6, 3}, {4, 3}}, .build = b_emb_sum},
    {.op = "embedding_sum", .desc = "one (4,5) table twice", .n_in = 1, .ndim = {2}, .shape = {{4, 5}}, .build = b_emb_sum_same},
    {.op = "embedding_sum", .desc = "(4,150) ids into (50,80) + (150,80), parallel", .n_in = 2, .ndim = {2, 2}, .shape = {{50, 80}, {150, 80}}, .build = b_emb_sum_big},
    {0},
};
