/* Activation checkpointing (dt_checkpoint, recompute in backward): the same loss and
 * bit-identical parameter gradients as the plain forward, dropout masks replayed, less arena
 * memory held after the forward, and the context left as it was; also for fused linear ops
 * whose backward chains into the producer's (linear's chained activation), inside the
 * recomputed segments and across their boundary. */
#include "dtrain/nn.h"
#include "test.h"
#include "tensor/tensor_iface.h"
#include "base/base_impl.h"

#include <stdlib.h>
#include <string.h>

typedef struct seg {
    dt_module *net;
    int lo, hi;
} seg;

static dt_tensor *run_seg(dt_tensor *x, void *user) {
    const seg *s = user;
    for (int i = s->lo; i < s->hi && x; i++) x = dt_module_forward(s->net->children[i], x);
    return x;
}

/* loss of one batch through net; with ckpt the layers run as two checkpointed segments */
static double step(dt_module *net, bool ckpt, size_t *arena_after_fwd, float *grads, int64_t n) {
    dt_ctx *c = dt_module_ctx(net);
    dt_ctx_reset(c);
    dt_module_zero_grad(net);
    float xs[8 * 16];
    int64_t ys[8];
    for (int i = 0; i < 8 * 16; i++) xs[i] = (float)((i * 37) % 17) / 8.0f - 1.0f;
    for (int i = 0; i < 8; i++) ys[i] = i % 4;
    dt_tensor *x = dt_tensor_from_f32(c, 2, (int64_t[]){8, 16}, xs);
    seg a = {net, 0, net->n_children / 2}, b = {net, net->n_children / 2, net->n_children};
    dt_tensor *y = ckpt ? dt_checkpoint(run_seg, &b, dt_checkpoint(run_seg, &a, x))
                        : run_seg(run_seg(x, &a), &b);
    dt_tensor *loss = dt_cross_entropy(y, dt_tensor_from_i64(c, 1, (int64_t[]){8}, ys), -100);
    *arena_after_fwd = dt_arena_used(dt_ctx_arena(c));
    double l = dt_item(loss);
    CHECK(dt_backward(loss) == DT_OK);
    memcpy(grads, dt_module_flat_grads(net, NULL), (size_t)n * sizeof(float));
    return l;
}

static void test_same_gradients(void) {
    dt_ctx *c = dt_ctx_new(NULL, 7);
    dt_module *net =
        dt_nn_sequential(dt_nn_linear(16, 256, true), dt_nn_relu(), dt_nn_dropout(0.3f),
                         dt_nn_linear(256, 256, true), dt_nn_gelu(true), dt_nn_dropout(0.2f),
                         dt_nn_linear(256, 4, true), NULL);
    CHECK(dt_module_build(net, c, 1) == DT_OK);
    dt_ctx_set_training(c, true);
    int64_t n;
    dt_module_flat_params(net, &n);
    float *g0 = malloc((size_t)n * sizeof *g0), *g1 = malloc((size_t)n * sizeof *g1);
    size_t mem0, mem1;
    dt_rng r0 = *dt_ctx_rng(c);
    double l0 = step(net, false, &mem0, g0, n);
    dt_rng after_plain = *dt_ctx_rng(c);
    *dt_ctx_rng(c) = r0; /* the same dropout masks */
    double l1 = step(net, true, &mem1, g1, n);
    CHECK(l0 == l1);
    CHECK_MSG(memcmp(g0, g1, (size_t)n * sizeof *g0) == 0, "checkpointed gradients differ");
    CHECK_MSG(mem1 < mem0 / 2, "arena after the forward: %zu checkpointed vs %zu plain", mem1,
              mem0);
    /* the RNG ends where the plain run left it (the recompute does not consume it) */
    CHECK(memcmp(dt_ctx_rng(c), &after_plain, sizeof after_plain) == 0);
    /* with gradients off it is just fn */
    dt_set_grad_enabled(c, false);
    dt_ctx_reset(c);
    seg all = {net, 0, net->n_children};
    dt_tensor *x = dt_tensor_new(c, DT_DTYPE_F32, 2, (int64_t[]){2, 16});
    dt_tensor *y = dt_checkpoint(run_seg, &all, x);
    CHECK(y && dt_ctx_tape_len(c) == 0);
    CHECK(dt_checkpoint(NULL, &all, x) == NULL && dt_last_status() == DT_ERR_INVALID);
    CHECK(dt_checkpoint(run_seg, &all, NULL) == NULL);
    free(g0);
    free(g1);
    dt_module_free(net);
    dt_ctx_free(c);
}

/* a GPT-like MLP block and an MLP pair on fused ops: x + c_proj(gelu(c_fc(x))), then
 * lin2(relu(lin1(.))) */
typedef struct fused_w {
    dt_tensor *w1, *b1, *w2, *b2, *w3, *b3, *w4, *b4;
} fused_w;

static dt_tensor *fused_seg(dt_tensor *x, void *user) {
    const fused_w *w = user;
    dt_tensor *h = dt_linear_gelu_tanh(x, w->w1, w->b1);
    dt_tensor *y = dt_linear_residual(h, w->w2, w->b2, x);
    return dt_linear(dt_linear_relu(y, w->w3, w->b3), w->w4, w->b4);
}

/* gradients of x and the weights after two segments, plain or checkpointed */
static float *fused_run(bool ckpt, int64_t *len) {
    enum { R = 200, C = 48, H = 160 };
    dt_ctx *c = dt_ctx_new(NULL, 5);
    dt_tensor *x = dt_rand_uniform(c, 2, (int64_t[]){R, C}, -1.f, 1.f);
    dt_tensor *g = dt_rand_uniform(c, 2, (int64_t[]){R, C}, -1.f, 1.f);
    fused_w w[2];
    dt_tensor *leaves[17] = {x};
    for (int s = 0; s < 2; s++) {
        dt_tensor **t = &w[s].w1;
        int64_t shapes[8][2] = {{H, C}, {H, 0}, {C, H}, {C, 0}, {H, C}, {H, 0}, {C, H}, {C, 0}};
        for (int i = 0; i < 8; i++) {
            t[i] = shapes[i][1] ? dt_rand_uniform(c, 2, shapes[i], -0.2f, 0.2f)
                                : dt_rand_uniform(c, 1, shapes[i], -0.2f, 0.2f);
            leaves[1 + 8 * s + i] = t[i];
        }
    }
    for (int i = 0; i < 17; i++) dt_set_requires_grad(leaves[i], true);
    dt_tensor *y = ckpt ? dt_checkpoint(fused_seg, &w[1], dt_checkpoint(fused_seg, &w[0], x))
                        : fused_seg(fused_seg(x, &w[0]), &w[1]);
    CHECK(y && dt_backward_with(y, g) == DT_OK);
    int64_t n = 0;
    for (int i = 0; i < 17; i++) n += dt_numel(leaves[i]);
    float *out = calloc((size_t)n, sizeof(float));
    int64_t at = 0;
    for (int i = 0; i < 17; i++) {
        CHECK(leaves[i]->grad != NULL);
        if (leaves[i]->grad) memcpy(out + at, leaves[i]->grad->data, dt_nbytes(leaves[i]));
        at += dt_numel(leaves[i]);
    }
    *len = n;
    dt_ctx_free(c);
    return out;
}

static void test_fused_chain_checkpointed(void) {
    int64_t n0, n1;
    float *plain = fused_run(false, &n0), *ckpt = fused_run(true, &n1);
    CHECK_MSG(n0 == n1 && !memcmp(plain, ckpt, (size_t)n0 * sizeof(float)),
              "checkpointed fused-op gradients differ from the plain run");
    free(plain);
    free(ckpt);
}

int main(void) {
    TEST_RUN(test_same_gradients);
    TEST_RUN(test_fused_chain_checkpointed);
    TEST_END();
}
