/* test_metrics.c — the metrics map and the classification helpers (src/trial/metrics.c): top-1
 * and top-k accuracy against a hand-counted table (ties to the lower index, as an argmax),
 * labels outside the classes, refused shapes; and dt_nn_sequential_of's ownership rules. */
#include "dtrain/nn.h"
#include "dtrain/trial.h"
#include "test.h"

#include <math.h>
#include <string.h>

static void test_accuracy(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    /* 4 rows, 3 classes */
    const float L[12] = {0.1f, 0.9f, 0.0f,   /* argmax 1 */
                         0.5f, 0.5f, 0.2f,   /* tie 0/1: argmax 0 */
                         0.3f, 0.2f, 0.1f,   /* argmax 0, label 2 is last */
                         -1.f, -2.f, -0.5f}; /* argmax 2 */
    const int64_t Y[4] = {1, 1, 2, 7};       /* 7 is outside the classes: never a hit */
    dt_tensor *logits = dt_tensor_from_f32(ctx, 2, (int64_t[]){4, 3}, L);
    dt_tensor *y = dt_tensor_from_i64(ctx, 1, (int64_t[]){4}, Y);
    CHECK(logits && y);
    CHECK(dt_accuracy(logits, y) == 0.25);         /* row 0 only */
    CHECK(dt_topk_accuracy(logits, y, 2) == 0.5);  /* + row 1 (label 1 is second) */
    CHECK(dt_topk_accuracy(logits, y, 3) == 0.75); /* + row 2; row 3 never */
    CHECK(isnan(dt_topk_accuracy(logits, y, 0)) && dt_last_status() == DT_ERR_INVALID);
    CHECK(isnan(dt_accuracy(y, y))); /* labels are not logits */
    dt_ctx_free(ctx);
}

static void test_sequential_of(void) {
    dt_module *mods[3] = {dt_nn_linear(4, 8, true), dt_nn_relu(), dt_nn_linear(8, 2, true)};
    dt_module *net = dt_nn_sequential_of(mods, 3);
    CHECK(net && dt_module_child(net, 2) != NULL);
    dt_module_free(net);
    /* a failed constructor in the middle: everything is freed (ASan checks), the index named */
    dt_module *bad[3] = {dt_nn_linear(4, 8, true), NULL, dt_nn_relu()};
    CHECK(dt_nn_sequential_of(bad, 3) == NULL && dt_last_status() == DT_ERR_INVALID);
    CHECK(strstr(dt_last_error(), "child 1") != NULL);
}

int main(void) {
    TEST_RUN(test_accuracy);
    TEST_RUN(test_sequential_of);
    TEST_END();
}
