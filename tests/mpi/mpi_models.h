/* mpi_models.h — the small GPT the engine's multi-process tests train (vocab 32, seq 8,
 * d_model 16, 2 heads, 2 blocks), built on a context of its own, and the release of such a
 * model with its context. */
#ifndef DT_MPI_MODELS_H
#define DT_MPI_MODELS_H

#include "dtrain/nn.h"

static const dt_gpt_config MT_GPT = {
    .vocab = 32, .seq = 8, .d_model = 16, .n_head = 2, .n_layer = 2};

/* The GPT built with `seed` on a new context (one thread). */
static inline dt_module *mt_gpt(uint64_t seed) {
    dt_ctx *c = dt_ctx_new(NULL, 1);
    dt_module *m = dt_model_gpt(&MT_GPT);
    dt_module_build(m, c, seed);
    return m;
}

/* Free a model made by mt_gpt (or built likewise on its own context) and its context. */
static inline void mt_free_model(dt_module *m) {
    dt_ctx *c = dt_module_ctx(m);
    dt_module_free(m);
    dt_ctx_free(c);
}

#endif
