/*
 * step.c — the optimiser step at the end of a gradient accumulation window, the one sequence
 * both the trial context (dt_step_optimizer) and the engine (dt_engine_step, every ZeRO stage,
 * the pipeline's stages) run:
 *
 *   reduce          the window's gradients over the data-parallel ranks (caller's collective)
 *   fp16 overflow?  Inf/NaN anywhere in this rank's reduced gradient (exact bit test), made
 *                   every rank's answer by agree_overflow when ranks hold different parts;
 *                   the scaler moves by DeepSpeed's rule; on overflow the update is skipped
 *                   and the gradients discarded
 *   unscale         g *= 1/scale (f32), only when a scaler is given
 *   clip            the caller's norm / clipping of the unscaled gradient
 *   update          the caller's optimiser update, which leaves the gradients ready for the
 *                   next window (zeroed, or kept)
 *
 * What differs between callers is a callback, so each caller keeps its own arithmetic bit for
 * bit: the trial averages with one AVG allreduce and clips with the user's function; the engine
 * reduces per ZeRO stage with DeepSpeed's pre/post scaling, agrees on overflow across shards,
 * clips by the global norm over all shards and updates its partition. Counters, logging and
 * LR schedules stay with the caller: they differ too (a skipped engine step still counts as a
 * global step, a skipped trial step does not).
 */
#include "dtrain/optim.h"

dt_status dt_boundary_step(const dt_boundary_ops *ops, void *self, dt_loss_scaler *scaler,
                           bool *skipped) {
    if (skipped) *skipped = false;
    if (!ops || !ops->reduce || !ops->update || (scaler && !ops->discard))
        return dt_error(DT_ERR_INVALID, "dt_boundary_step: reduce and update are required, and "
                                        "discard with a loss scaler");
    float *g = NULL;
    int64_t n = 0;
    dt_status st = ops->reduce(self, &g, &n);
    if (st != DT_OK) return st;
    if (scaler) {
        double flag = dt_grads_have_inf_or_nan(g, n) ? 1.0 : 0.0;
        if (ops->agree_overflow && (st = ops->agree_overflow(self, &flag)) != DT_OK) return st;
        bool skip = false;
        /* an overflow at the minimum scale is an error, and the step is skipped all the same */
        st = dt_loss_scaler_update(scaler, flag > 0, &skip);
        if (skip) {
            if (skipped) *skipped = true;
            ops->discard(self);
            return st;
        }
        dt_loss_scaler_unscale(g, n, dt_loss_scaler_scale(scaler));
    }
    if (ops->clip && (st = ops->clip(self, g, n)) != DT_OK) return st;
    return ops->update(self, g, n);
}
