/*
 * engine/engine_iface.h — the engine layer's interface to the layers above (not public API):
 * what the DeepSpeed trial, the autotuner and the benchmarks read from an engine beyond
 * dtrain/engine.h and dtrain/pipe.h.
 */
#ifndef DT_ENGINE_IFACE_H
#define DT_ENGINE_IFACE_H

#include "dtrain/engine.h"
#include "dtrain/pipe.h"

DT_API int64_t dt_engine_global_samples(const dt_engine *e);
DT_API int64_t dt_engine_micro_steps(const dt_engine *e);
DT_API const dt_ds_config *dt_engine_config(const dt_engine *e);
DT_API int dt_engine_zero_stage(const dt_engine *e);
DT_API dt_engine_load_opts dt_engine_load_defaults(void);
/* This stage's first layer and one past its last (global layer indices). */
DT_API void dt_pipe_stage_layers(const dt_pipe_engine *p, int *first, int *end);
/* Fraction of this stage's batch time spent waiting for other stages in the last
 * dt_pipe_train_batch (receives and the final waits for sends). */
DT_API double dt_pipe_last_wait_fraction(const dt_pipe_engine *p);

#endif
