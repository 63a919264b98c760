/*
 * trial/trial_iface.h — the trial layer's interface to the layers that run trials (the
 * launchers, the master, the dtrain command): a core's reporting internals, the launcher
 * watch, signal preemption and partial-checkpoint clean-up. Trial and Core API authors never
 * call these; their API is dtrain/trial.h, core.h and trialio.h.
 */
#ifndef DTRAIN_TRIAL_IFACE_H
#define DTRAIN_TRIAL_IFACE_H

#include "dtrain/core.h"
#include "dtrain/trialio.h"

/* ---- a core's reporting internals (core.c, core_local.c) ---- */
DT_API dt_status dt_core_start(dt_core *core, int64_t steps_completed);
DT_API dt_status dt_core_report_profiler_metrics(dt_core *core, const dt_core_at *at,
                                                 const dt_metrics *m);
DT_API dt_status dt_core_checkpoint_stored(dt_core *core, const dt_core_checkpoint *ck);
/* One line of a report as `dtrain train` prints it: "validation: batch 300 (epoch 0.32)
 * validation_loss=0.4701 accuracy=0.8322" (and the records/s when > 0); flushed. */
DT_API void dt_core_print_metrics(FILE *f, const char *kind, const dt_core_at *at,
                                  const dt_metrics *m, double records_per_s);
/* Open core->tb (chief, when tb_path is set and it is not open): the error of dt_tb_open. */
DT_API dt_status dt_core_tb_open(dt_core *core);
/* Scalars "<kind>/<metric>" at step `batches` (no-op without a writer); flush when asked. */
DT_API void dt_core_tb_write(dt_core *core, const char *kind, int64_t batches, const dt_metrics *m,
                             bool flush);
/* Close core->tb (NULL-safe). */
DT_API void dt_core_tb_close(dt_core *core);
/* The checkpoint name the local core's `latest` file in `dir` holds, into out (n bytes):
 * false when there is none (no file, or empty). */
DT_API bool dt_core_local_latest(const char *dir, char *out, size_t n);
/* Give `core` its Core API state. On error (DT_ERR_OOM) nothing is taken: the caller still
 * owns world. */
DT_API dt_status dt_core_api_attach(dt_core *core, const dt_core_api_init *a);

/* ---- runs and their checkpoints (launcher_watch.c, preempt_signal.c, checkpoint.c) ---- */
DT_API void dt_ckpt_remove_partial(const char *dir);
/* Under a launcher that passed its pid as DTRAIN_LAUNCHER_PID (the ranks of dt_launch_mpirun):
 * die with it (PR_SET_PDEATHSIG SIGKILL); from then on dt_ckpt_commit and dt_ckpt_remove
 * refuse with DT_ERR_STATE once it is gone. DT_OK when there is no launcher to watch;
 * DT_ERR_STATE when it is gone already. The fit loop calls it; callers may call it earlier.
 * On another host than DTRAIN_LAUNCHER_HOST the launcher watched is this process's parent, that
 * host's MPI daemon. */
DT_API dt_status dt_ckpt_watch_launcher(void);
DT_API void dt_preempt_signals_catch(dt_preempt_signals *saved);
DT_API void dt_preempt_signals_restore(const dt_preempt_signals *saved);
DT_API int dt_preempt_signal(void);

/* The wrapped engines (the reference's context.models), in wrapping order. */
DT_API int dt_trial_engine_count(const dt_trial_ctx *c);

#endif
