/* prog.c — a program built against an installed dtrain (tests/e2e/test_install.sh): the
 * umbrella header, one matmul through libdtrain, one jansson call (the headers' dependency).
 * Prints "dtrain ok 11" and exits 0. */
#include <dtrain/dtrain.h>

#include <stdio.h>

int main(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    if (!ctx) return fprintf(stderr, "dt_ctx_new: %s\n", dt_last_error()), 1;
    const float a[] = {1, 2}, b[] = {3, 4};
    dt_tensor *x = dt_tensor_from_f32(ctx, 2, (int64_t[]){1, 2}, a);
    dt_tensor *w = dt_tensor_from_f32(ctx, 2, (int64_t[]){2, 1}, b);
    dt_tensor *y = x && w ? dt_matmul(x, w) : NULL; /* (1, 2) @ (2, 1): 1*3 + 2*4 */
    if (!y) return fprintf(stderr, "dt_matmul: %s\n", dt_last_error()), 1;
    json_t *v = json_integer((json_int_t)dt_item(y));
    printf("dtrain ok %lld\n", (long long)json_integer_value(v));
    json_decref(v);
    dt_ctx_free(ctx);
    return 0;
}
