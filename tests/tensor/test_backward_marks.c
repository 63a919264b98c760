/* Backward marks (dt_ctx_mark_backward): the engine's hook points inside a backward pass run
 * between the right ops, in reverse recording order, and marks after the output are skipped.
 * The op profile (dt_ctx_set_profile) counts each op's forward and backward calls while on. */
#include "dtrain/tensor.h"
#include "test.h"
#include "tensor/tensor_iface.h"

#include <string.h>

typedef struct {
    char log[64];
    int n;
    dt_tensor *watch; /* a tensor whose gradient tells which backward ops have run */
    float seen[8];
} trace;

static void mark(void *user, int64_t arg) {
    trace *t = user;
    t->log[t->n] = (char)('A' + arg);
    t->seen[t->n] = t->watch && t->watch->grad ? ((float *)t->watch->grad->data)[0] : -1.0f;
    t->n++;
}

static void test_marks_order(void) {
    dt_ctx *c = dt_ctx_new(NULL, 1);
    trace tr = {0};
    dt_tensor *x = dt_tensor_from_f32(c, 1, (int64_t[]){1}, (float[]){3});
    dt_set_requires_grad(x, true);
    CHECK(dt_ctx_mark_backward(c, mark, &tr, 0) == DT_OK); /* before everything: runs last */
    dt_tensor *y = dt_mul(x, x);                           /* y = x^2 */
    CHECK(dt_ctx_mark_backward(c, mark, &tr, 1) == DT_OK);
    dt_tensor *z = dt_mul(y, y); /* z = y^2 */
    tr.watch = y;
    CHECK(dt_ctx_mark_backward(c, mark, &tr, 2) == DT_OK); /* after z's op: runs first */
    dt_tensor *later = dt_mul(z, z);
    CHECK(later != NULL);
    CHECK(dt_ctx_mark_backward(c, mark, &tr, 3) == DT_OK);
    /* the loss is recorded after mark 3, so the backward starts above every mark */
    CHECK(dt_backward(dt_sum_all(z)) == DT_OK);
    tr.log[tr.n] = 0;
    CHECK_MSG(strcmp(tr.log, "DCBA") == 0, "order %s", tr.log);
    /* mark 1 ran after z's backward wrote y's gradient (2y = 18), mark 2 before it */
    CHECK(tr.seen[1] == -1.0f);
    CHECK(tr.seen[2] == 18.0f);
    CHECK(((float *)x->grad->data)[0] == 4.0f * 27.0f); /* d(x^4)/dx = 4x^3 */
    dt_ctx_reset(c);
    dt_ctx_free(c);
}

static void test_marks_skipped_after_output(void) {
    dt_ctx *c = dt_ctx_new(NULL, 1);
    trace tr = {0};
    dt_tensor *x = dt_tensor_from_f32(c, 1, (int64_t[]){1}, (float[]){2});
    dt_set_requires_grad(x, true);
    dt_tensor *loss = dt_sum_all(dt_mul(x, x));
    CHECK(dt_ctx_mark_backward(c, mark, &tr, 0) == DT_OK);
    dt_tensor *other = dt_sum_all(dt_mul(x, x)); /* later forward work */
    CHECK(dt_ctx_mark_backward(c, mark, &tr, 1) == DT_OK);
    CHECK(other != NULL);
    CHECK(dt_backward(loss) == DT_OK);
    CHECK(tr.n == 0);
    CHECK(dt_backward(other) == DT_OK); /* from the later output: only the mark before it */
    CHECK(tr.n == 1 && tr.log[0] == 'A');
    dt_ctx_reset(c); /* marks forgotten */
    tr.n = 0;
    x = dt_tensor_from_f32(c, 1, (int64_t[]){1}, (float[]){2});
    dt_set_requires_grad(x, true);
    dt_tensor *l2 = dt_sum_all(dt_mul(x, x));
    CHECK(dt_backward(l2) == DT_OK);
    CHECK(tr.n == 0);
    CHECK(dt_ctx_mark_backward(NULL, mark, &tr, 0) == DT_ERR_INVALID);
    CHECK(dt_ctx_mark_backward(c, NULL, &tr, 0) == DT_ERR_INVALID);
    dt_ctx_free(c);
}

static const dt_op_time *row(const dt_op_time *t, int n, const char *op) {
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].op, op)) return &t[i];
    return NULL;
}

static void test_op_profile(void) {
    dt_ctx *c = dt_ctx_new(NULL, 1);
    dt_tensor *x = dt_randn(c, 2, (int64_t[]){8, 4}, 1.f);
    dt_tensor *w = dt_randn(c, 2, (int64_t[]){3, 4}, 1.f);
    dt_set_requires_grad(w, true);
    dt_op_time t[64];
    CHECK(dt_ctx_op_times(c, t, 64) == 0); /* never on: no rows */
    dt_relu(dt_linear(x, w, NULL));        /* before the profile: not counted */
    CHECK(dt_ctx_set_profile(c, true) == DT_OK);
    for (int k = 0; k < 2; k++) {
        dt_tensor *loss = dt_sum_all(dt_relu(dt_linear(x, w, NULL)));
        CHECK(dt_backward(loss) == DT_OK);
    }
    dt_relu(x); /* forward only: x needs no gradient */
    int n = dt_ctx_op_times(c, t, 64);
    const dt_op_time *lin = row(t, n, "linear"), *relu = row(t, n, "relu");
    CHECK(lin && lin->fwd_calls == 2 && lin->bwd_calls == 2);
    CHECK(relu && relu->fwd_calls == 3 && relu->bwd_calls == 2);
    CHECK(lin && lin->fwd_sec > 0 && lin->bwd_sec > 0);
    CHECK(dt_ctx_op_times(c, t, 1) == n); /* the count, whatever fits */
    CHECK(dt_ctx_set_profile(c, false) == DT_OK);
    dt_relu(x); /* off: rows kept, not added to */
    CHECK(dt_ctx_op_times(c, t, 64) == n && row(t, n, "relu")->fwd_calls == 3);
    CHECK(dt_ctx_set_profile(c, true) == DT_OK); /* on again: cleared */
    CHECK(dt_ctx_op_times(c, t, 64) == 0);
    dt_ctx_free(c);
}

int main(void) {
    TEST_RUN(test_marks_order);
    TEST_RUN(test_marks_skipped_after_output);
    TEST_RUN(test_op_profile);
    TEST_END();
}
