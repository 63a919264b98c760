/* test_rope.c — dt_rope at long positions against the formula evaluated directly in double
 * precision (the op steps its angles by angle addition: the drift must stay below f32's
 * rounding), a decoding step's rows equal to the full sequence's, and the shape errors. */
#include "dtrain/tensor.h"
#include "test.h"

#include <string.h>

/* max |dt_rope - formula| over x = ones (so y = cos - sin, cos + sin) at T positions */
static double long_positions(int64_t T, int64_t D, int64_t pos0, float theta) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    int64_t shape[4] = {1, T, 1, D};
    dt_tensor *x = dt_tensor_new(ctx, DT_DTYPE_F32, 4, shape);
    float *X = x->data;
    for (int64_t i = 0; i < T * D; i++) X[i] = 1.f;
    dt_tensor *y = dt_rope(x, pos0, theta);
    double worst = y ? 0 : INFINITY;
    for (int64_t t = 0; y && t < T; t++)
        for (int64_t i = 0; i < D / 2; i++) {
            double a = (double)(pos0 + t) * pow((double)theta, -2.0 * (double)i / (double)D);
            const float *row = (const float *)y->data + t * D;
            worst = fmax(worst, fabs(row[i] - (cos(a) - sin(a))));
            worst = fmax(worst, fabs(row[i + D / 2] - (cos(a) + sin(a))));
        }
    dt_ctx_free(ctx);
    return worst;
}

static void test_long_positions(void) {
    double e1 = long_positions(8192, 128, 0, 10000.f),
           e2 = long_positions(4096, 64, 30000, 500000.f);
    double e3 = long_positions(2048, 8, 7, 10.f);
    CHECK_MSG(e1 < 5e-7 && e2 < 5e-7 && e3 < 5e-7, "max |err| %.3g %.3g %.3g", e1, e2, e3);
}

/* rope of one step at position p is row p of the whole sequence's */
static void test_step(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 2);
    dt_tensor *x = dt_rand_uniform(ctx, 4, (int64_t[]){2, 50, 3, 16}, -1.f, 1.f);
    dt_tensor *full = dt_rope(x, 0, 10000.f);
    dt_tensor *one = dt_rope(dt_contiguous(dt_slice(x, 1, 37, 38)), 37, 10000.f);
    dt_tensor *row = dt_contiguous(dt_slice(full, 1, 37, 38));
    CHECK(one && row && memcmp(one->data, row->data, dt_nbytes(one)) == 0);
    dt_ctx_free(ctx);
}

static void test_errors(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 3);
    dt_tensor *odd = dt_rand_uniform(ctx, 4, (int64_t[]){1, 2, 1, 5}, -1.f, 1.f);
    CHECK(dt_rope(odd, 0, 10000.f) == NULL && strstr(dt_last_error(), "D even"));
    dt_tensor *x3 = dt_rand_uniform(ctx, 3, (int64_t[]){1, 2, 4}, -1.f, 1.f);
    CHECK(dt_rope(x3, 0, 10000.f) == NULL && strstr(dt_last_error(), "(B, T, H, D)"));
    dt_tensor *x = dt_rand_uniform(ctx, 4, (int64_t[]){1, 2, 1, 4}, -1.f, 1.f);
    CHECK(dt_rope(x, -1, 10000.f) == NULL && strstr(dt_last_error(), "pos0"));
    CHECK(dt_rope(x, 0, 0.f) == NULL && strstr(dt_last_error(), "theta"));
    dt_ctx_free(ctx);
}

int main(void) {
    TEST_RUN(test_long_positions);
    TEST_RUN(test_step);
    TEST_RUN(test_errors);
    TEST_END();
}
