/* dt_loader_next_step: the batch of a global step, across epochs. Read step by step it is the
 * sequence of dt_loader_start_epoch + dt_loader_next over epochs 0, 1, 2; a fresh loader asked
 * for any step first (a resumed loop) gets that same batch; a step backwards restarts there. */
#include <dtrain/data.h>

#include "test.h"

#include <string.h>

#define N 11
#define B 3

static dt_loader *make(dt_ctx *ctx, dt_dataset *ds) {
    dt_loader_opts o = {.batch_size = B, .shuffle = true, .seed = 5};
    return dt_loader_new(ctx, ds, &o);
}

/* The batch's indices as one number (base 16), to compare batches. */
static int64_t key(const dt_batch *b) {
    int64_t k = 0;
    for (int64_t i = 0; b && i < b->n_indices; i++) k = k * 16 + b->indices[i];
    return b ? k : -1;
}

static void test_steps(void) {
    float v[N];
    for (int i = 0; i < N; i++) v[i] = (float)i;
    dt_array_field f = {{.name = "x", .dtype = DT_DTYPE_F32}, v};
    dt_dataset *ds = dt_dataset_from_arrays(1, &f, N, true);
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    dt_loader *ref = make(ctx, ds), *l = make(ctx, ds);
    int64_t nb = dt_loader_num_batches(ref), want[3 * 4];
    CHECK(nb == 4); /* 11 samples in batches of 3, the last one of 2 */
    dt_batch *b = NULL;
    for (int e = 0; e < 3; e++) {
        CHECK(dt_loader_start_epoch(ref, e, 0) == DT_OK);
        for (int k = 0; k < nb; k++) {
            CHECK(dt_loader_next(ref, &b) == DT_OK && b);
            want[e * nb + k] = key(b);
        }
    }
    CHECK(want[0] != want[nb]); /* epochs are shuffled differently */
    int bad = 0;
    for (int64_t s = 0; s < 3 * nb; s++)
        bad += dt_loader_next_step(l, s, &b) != DT_OK || key(b) != want[s];
    CHECK(bad == 0);
    /* resumed: fresh loaders asked for step 6 (epoch 1, batch 2) first, or going back */
    for (int64_t s = 0; s < 3 * nb; s++) {
        dt_loader *r = make(ctx, ds);
        CHECK(dt_loader_next_step(r, s, &b) == DT_OK && key(b) == want[s]);
        CHECK(dt_loader_next_step(r, s == 0 ? 1 : s - 1, &b) == DT_OK &&
              key(b) == want[s == 0 ? 1 : s - 1]);
        dt_loader_free(r);
    }
    CHECK(dt_loader_next_step(l, -1, &b) == DT_ERR_INVALID && b == NULL);
    dt_loader_free(ref);
    dt_loader_free(l);
    dt_dataset_free(ds);
    dt_ctx_free(ctx);
}

int main(void) {
    TEST_RUN(test_steps);
    TEST_END();
}
