/* mpi_models.h — the small GPT the engine's multi-process tests train (vocab 32, seq 8,
 * d_model 16, 2 heads, 2 blocks), built on a context of its own (fixtures/toy_trial.h). */
#ifndef DT_MPI_MODELS_H
#define DT_MPI_MODELS_H

#include "dtrain/nn.h"
#include "fixtures/toy_trial.h"

static const dt_gpt_config MT_GPT = {
    .vocab = 32, .seq = 8, .d_model = 16, .n_head = 2, .n_layer = 2};

/* The GPT built with `seed` on a new context (one thread); free it with toy_model_free. */
static inline dt_module *mt_gpt(uint64_t seed) {
    return toy_model_built(dt_model_gpt(&MT_GPT), seed);
}

#endif
