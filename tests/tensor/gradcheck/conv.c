/* Gradient-check cases: conv2d (GEMM and direct single-channel paths, stride, padding, bias),
 * max_pool2d, relu_max_pool2d and avg_pool2d (with and without padding). */
#include "gradcheck.h"

#include <stddef.h>

static dt_tensor *b_conv_s1p1(dt_ctx *c, dt_tensor **x) { (void)c; return dt_conv2d(x[0], x[1], x[2], 1, 1); }
static dt_tensor *b_conv_s2p1(dt_ctx *c, dt_tensor **x) { (void)c; return dt_conv2d(x[0], x[1], x[2], 2, 1); }
static dt_tensor *b_conv_s1p0_nb(dt_ctx *c, dt_tensor **x) { (void)c; return dt_conv2d(x[0], x[1], NULL, 1, 0); }
static dt_tensor *b_conv_s2p0_nb(dt_ctx *c, dt_tensor **x) { (void)c; return dt_conv2d(x[0], x[1], NULL, 2, 0); }
static dt_tensor *b_conv_s1p2(dt_ctx *c, dt_tensor **x) { (void)c; return dt_conv2d(x[0], x[1], x[2], 1, 2); }
static dt_tensor *b_max_2(dt_ctx *c, dt_tensor **x) { (void)c; return dt_max_pool2d(x[0], 2, 2, 0); }
static dt_tensor *b_max_3s2p1(dt_ctx *c, dt_tensor **x) { (void)c; return dt_max_pool2d(x[0], 3, 2, 1); }
static dt_tensor *b_max_3s1(dt_ctx *c, dt_tensor **x) { (void)c; return dt_max_pool2d(x[0], 3, 1, 0); }
static dt_tensor *b_rmax_2(dt_ctx *c, dt_tensor **x) { (void)c; return dt_relu_max_pool2d(x[0], 2, 2, 0); }
static dt_tensor *b_rmax_3s1(dt_ctx *c, dt_tensor **x) { (void)c; return dt_relu_max_pool2d(x[0], 3, 1, 0); }
static dt_tensor *b_rmax_3s2p1(dt_ctx *c, dt_tensor **x) { (void)c; return dt_relu_max_pool2d(x[0], 3, 2, 1); }
static dt_tensor *b_avg_2(dt_ctx *c, dt_tensor **x) { (void)c; return dt_avg_pool2d(x[0], 2, 2, 0); }
static dt_tensor *b_avg_3s2p1(dt_ctx *c, dt_tensor **x) { (void)c; return dt_avg_pool2d(x[0], 3, 2, 1); }
static dt_tensor *b_avg_3s1p1(dt_ctx *c, dt_tensor **x) { (void)c; return dt_avg_pool2d(x[0], 3, 1, 1); }

GC_CASES(conv) = {
    {.op = "conv2d", .desc = "C=3 stride 1 pad 1 bias (2,3,5,6)", .n_in = 3, .ndim = {4, 4, 1}, .shape = {{2, 3, 5, 6}, {4, 3, 3, 3}, {4}}, .build = b_conv_s1p1},
    {.op = "conv2d", .desc = "C=2 stride 2 pad 1 bias non-square (3,2,7,5)", .n_in = 3, .ndim = {4, 4, 1}, .shape = {{3, 2, 7, 5}, {3, 2, 3, 3}, {3}}, .build = b_conv_s2p1},
    {.op = "conv2d", .desc = "C=3 stride 1 pad 0 no bias 2x3 kernel", .n_in = 2, .ndim = {4, 4}, .shape = {{2, 3, 6, 5}, {2, 3, 2, 3}}, .build = b_conv_s1p0_nb},
    {.op = "conv2d", .desc = "C=2 stride 2 pad 0 no bias (2,2,7,8)", .n_in = 2, .ndim = {4, 4}, .shape = {{2, 2, 7, 8}, {3, 2, 3, 3}}, .build = b_conv_s2p0_nb},
    {.op = "conv2d", .desc = "C=1 direct path stride 1 pad 1 bias (3,1,6,5)", .n_in = 3, .ndim = {4, 4, 1}, .shape = {{3, 1, 6, 5}, {4, 1, 3, 3}, {4}}, .build = b_conv_s1p1},
    {.op = "conv2d", .desc = "C=1 direct path 5x5 pad 2 wide (2,1,4,19)", .n_in = 3, .ndim = {4, 4, 1}, .shape = {{2, 1, 4, 19}, {2, 1, 5, 5}, {2}}, .build = b_conv_s1p2},
    {.op = "conv2d", .desc = "C=1 stride 2 (GEMM path) pad 1", .n_in = 3, .ndim = {4, 4, 1}, .shape = {{2, 1, 7, 6}, {3, 1, 3, 3}, {3}}, .build = b_conv_s2p1},
    {.op = "conv2d", .desc = "Winograd C=4 pad 1 odd sizes (2,4,5,7)", .n_in = 3, .ndim = {4, 4, 1}, .shape = {{2, 4, 5, 7}, {4, 4, 3, 3}, {4}}, .build = b_conv_s1p1},
    {.op = "conv2d", .desc = "Winograd C=5 pad 0 no bias (2,5,6,7)", .n_in = 2, .ndim = {4, 4}, .shape = {{2, 5, 6, 7}, {4, 5, 3, 3}}, .build = b_conv_s1p0_nb},
    {.op = "max_pool2d", .desc = "2x2 stride 2 (2,3,6,5)", .n_in = 1, .ndim = {4}, .shape = {{2, 3, 6, 5}}, .build = b_max_2, .eps = 1e-3f},
    {.op = "max_pool2d", .desc = "3x3 stride 2 pad 1 (2,2,7,6)", .n_in = 1, .ndim = {4}, .shape = {{2, 2, 7, 6}}, .build = b_max_3s2p1, .eps = 1e-3f},
    {.op = "max_pool2d", .desc = "3x3 stride 1 overlapping (1,2,5,6)", .n_in = 1, .ndim = {4}, .shape = {{1, 2, 5, 6}}, .build = b_max_3s1, .eps = 1e-3f},
    {.op = "relu_max_pool2d", .desc = "2x2 stride 2 (2,3,6,5)", .n_in = 1, .ndim = {4}, .shape = {{2, 3, 6, 5}}, .build = b_rmax_2, .eps = 1e-3f},
    {.op = "relu_max_pool2d", .desc = "3x3 stride 1 overlapping (1,2,5,6)", .n_in = 1, .ndim = {4}, .shape = {{1, 2, 5, 6}}, .build = b_rmax_3s1, .eps = 1e-3f},
    {.op = "relu_max_pool2d", .desc = "3x3 stride 2 pad 1 (2,2,7,6)", .n_in = 1, .ndim = {4}, .shape = {{2, 2, 7, 6}}, .build = b_rmax_3s2p1, .eps = 1e-3f},
    {.op = "avg_pool2d", .desc = "2x2 stride 2 (2,3,6,5)", .n_in = 1, .ndim = {4}, .shape = {{2, 3, 6, 5}}, .build = b_avg_2},
    {.op = "avg_pool2d", .desc = "3x3 stride 2 pad 1 (2,2,7,6)", .n_in = 1, .ndim = {4}, .shape = {{2, 2, 7, 6}}, .build = b_avg_3s2p1},
    {.op = "avg_pool2d", .desc = "3x3 stride 1 pad 1 (1,2,5,4)", .n_in = 1, .ndim = {4}, .shape = {{1, 2, 5, 4}}, .build = b_avg_3s1p1},
    {0},
};
