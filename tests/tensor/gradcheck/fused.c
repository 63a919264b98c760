/* Gradient-check cases: the fused linear + activation ops (linear_gelu_tanh, linear_relu) and
 * linear + residual (linear_residual, also with the residual being the input itself), with and
 * without bias, and ones large enough for the tiled GEMM and its epilogues. */
#include "gradcheck.h"

#include <stddef.h>

static dt_tensor *b_lin_gelu(dt_ctx *c, dt_tensor **x) {
    (void)c;
    return dt_linear_gelu_tanh(x[0], x[1], x[2]);
}
static dt_tensor *b_lin_gelu_nb(dt_ctx *c, dt_tensor **x) {
    (void)c;
    return dt_linear_gelu_tanh(x[0], x[1], NULL);
}
static dt_tensor *b_lin_relu(dt_ctx *c, dt_tensor **x) {
    (void)c;
    return dt_linear_relu(x[0], x[1], x[2]);
}
static dt_tensor *b_lin_relu_nb(dt_ctx *c, dt_tensor **x) {
    (void)c;
    return dt_linear_relu(x[0], x[1], NULL);
}

static dt_tensor *b_lin_res(dt_ctx *c, dt_tensor **x) {
    (void)c;
    return dt_linear_residual(x[0], x[1], x[2], x[3]);
}
static dt_tensor *b_lin_res_nb(dt_ctx *c, dt_tensor **x) {
    (void)c;
    return dt_linear_residual(x[0], x[1], NULL, x[2]);
}
/* y = x + x·wᵀ + b: x's gradient has both parts */
static dt_tensor *b_lin_res_self(dt_ctx *c, dt_tensor **x) {
    (void)c;
    return dt_linear_residual(x[0], x[1], x[2], x[0]);
}

GC_CASES(fused) = {
    {.op = "linear_gelu_tanh", .desc = "(2,3,6)·(4,6)ᵀ+b", .n_in = 3, .ndim = {3, 2, 1}, .shape = {{2, 3, 6}, {4, 6}, {4}}, .build = b_lin_gelu, .eps = 1e-3f},
    {.op = "linear_gelu_tanh", .desc = "no bias", .n_in = 2, .ndim = {2, 2}, .shape = {{5, 6}, {4, 6}}, .build = b_lin_gelu_nb, .eps = 1e-3f},
    {.op = "linear_gelu_tanh", .desc = "(160,40)·(72,40)ᵀ+b tiled", .n_in = 3, .ndim = {2, 2, 1}, .shape = {{160, 40}, {72, 40}, {72}}, .build = b_lin_gelu, .eps = 1e-3f},
    {.op = "linear_relu", .desc = "(2,3,6)·(4,6)ᵀ+b", .n_in = 3, .ndim = {3, 2, 1}, .shape = {{2, 3, 6}, {4, 6}, {4}}, .build = b_lin_relu, .eps = 1e-3f},
    {.op = "linear_relu", .desc = "no bias", .n_in = 2, .ndim = {2, 2}, .shape = {{5, 6}, {4, 6}}, .build = b_lin_relu_nb, .eps = 1e-3f},
    {.op = "linear_residual", .desc = "(2,3,6)·(4,6)ᵀ+b+r", .n_in = 4, .ndim = {3, 2, 1, 3}, .shape = {{2, 3, 6}, {4, 6}, {4}, {2, 3, 4}}, .build = b_lin_res, .eps = 1e-3f},
    {.op = "linear_residual", .desc = "no bias", .n_in = 3, .ndim = {2, 2, 2}, .shape = {{5, 6}, {4, 6}, {5, 4}}, .build = b_lin_res_nb, .eps = 1e-3f},
    {.op = "linear_residual", .desc = "x + x·wᵀ+b", .n_in = 3, .ndim = {2, 2, 1}, .shape = {{5, 6}, {6, 6}, {6}}, .build = b_lin_res_self, .eps = 1e-3f},
    {.op = "linear_residual", .desc = "(160,40)·(72,40)ᵀ+b+r tiled", .n_in = 4, .ndim = {2, 2, 1, 2}, .shape = {{160, 40}, {72, 40}, {72}, {160, 72}}, .build = b_lin_res, .eps = 1e-3f},
    {0},
};
