/*
 * loss_scaler.c — fp16 loss scaling as DeepSpeed does it (deepspeed/runtime/fp16/loss_scaler.py):
 * a dynamic scaler (DynamicLossScaler) or a static one (LossScaler), the Inf/NaN check of the
 * gradients, and unscaling.
 *
 * The config is the engine's "fp16" section. loss_scale = 0 selects dynamic scaling, which
 * starts at 2^initial_scale_power; loss_scale > 0 is a static scale that never changes;
 * enabled = false is DeepSpeed's inert scaler for bf16/fp32 (static, scale 1).
 *
 * The dynamic rule, step for step (h = hysteresis, DeepSpeed's delayed_shift; the factor is 2,
 * fixed in DeepSpeed too), run once per optimiser step by dt_loss_scaler_update(overflow):
 *
 *   if overflow:                                   the optimiser step is skipped
 *       if h == 1 or cur_hysteresis == 1:
 *           if scale == min_loss_scale and raise_error_at_min_scale:
 *               error, and nothing changes (cur_iter is not advanced either)
 *           scale = max(scale / 2, min_loss_scale)    (cur_hysteresis is NOT refilled here)
 *       else:
 *           cur_hysteresis -= 1                       (the scale stays)
 *       last_overflow_iter = cur_iter
 *   else:
 *       if consecutive_hysteresis: cur_hysteresis = h
 *       stable = cur_iter - last_overflow_iter - 1
 *       if stable > 0 and stable % loss_scale_window == 0:
 *           if not consecutive_hysteresis: cur_hysteresis = h
 *           scale *= 2
 *   cur_iter += 1
 *
 * Indexing: cur_iter starts at 0 and last_overflow_iter at -1, so from the start the scale
 * doubles on the update with cur_iter == window, i.e. on the (window+1)-th good update; after
 * an overflow at iteration k it doubles at k + 1 + window, k + 1 + 2 window, ... — again the
 * (window+1)-th good update after the overflow, then every window good updates. Without
 * consecutive_hysteresis the hysteresis is refilled only when the scale grows, so overflows
 * spread out over a window still use it up; with it, any good update refills it.
 *
 * A static scaler keeps no counters (DeepSpeed's LossScaler has none): update only reports
 * the skip. The scaler does not log: the caller (the engine) knows the rank and logs
 * DeepSpeed's "OVERFLOW! Skipping step" line on rank 0.
 *
 * dt_grads_have_inf_or_nan is an exact bit test (exponent all ones), not DeepSpeed's sum —
 * the sum can overflow to Inf on finite fp32 gradients and call an overflow that is not
 * there; on fp16 gradients converted to f32 the two agree. It is a max-reduction over the
 * magnitude bits, so its answer is the same for every thread count.
 */
#include "dtrain/optim.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PAR_MIN 32768 /* elements below which the loops stay on one thread */

struct dt_loss_scaler {
    dt_loss_scaler_config cfg;
    bool dynamic;
    dt_loss_scaler_state st;
};

dt_loss_scaler_config dt_loss_scaler_defaults(void) {
    dt_loss_scaler_config c;
    memset(&c, 0, sizeof c);
    c.enabled = true;
    c.loss_scale = 0.0;
    c.initial_scale_power = 16;
    c.loss_scale_window = 1000;
    c.hysteresis = 2;
    c.consecutive_hysteresis = false;
    c.min_loss_scale = 1.0;
    c.raise_error_at_min_scale = true;
    return c;
}

/* DT_OK or DT_ERR_CONFIG with a message naming the fp16 field. */
static dt_status check_config(const dt_loss_scaler_config *c) {
    const char *who = "dt_loss_scaler_new";
    if (!c->enabled) return DT_OK; /* nothing of the section is used */
    if (!isfinite(c->loss_scale) || c->loss_scale < 0)
        return dt_error(DT_ERR_CONFIG,
                        "%s: fp16.loss_scale must be a finite number >= 0 (got %g); hint: 0 "
                        "selects dynamic loss scaling, a positive value a static scale",
                        who, c->loss_scale);
    if (c->loss_scale > 0) {
        if (c->loss_scale > FLT_MAX)
            return dt_error(DT_ERR_CONFIG,
                            "%s: fp16.loss_scale %g does not fit in f32; hint: use a power of "
                            "two such as 65536",
                            who, c->loss_scale);
        return DT_OK; /* static: the dynamic fields are not used */
    }
    if (c->initial_scale_power < -126 || c->initial_scale_power > 127)
        return dt_error(DT_ERR_CONFIG,
                        "%s: fp16.initial_scale_power must be in [-126, 127] so that the first "
                        "scale is a finite f32 (got %d); hint: DeepSpeed's default is 16",
                        who, c->initial_scale_power);
    if (c->loss_scale_window < 1)
        return dt_error(DT_ERR_CONFIG,
                        "%s: fp16.loss_scale_window must be > 0 (got %lld); hint: DeepSpeed's "
                        "default is 1000",
                        who, (long long)c->loss_scale_window);
    if (c->hysteresis < 1)
        return dt_error(DT_ERR_CONFIG,
                        "%s: fp16.hysteresis must be >= 1 (got %d); hint: 1 lowers the scale "
                        "on every overflow, DeepSpeed's default is 2",
                        who, c->hysteresis);
    if (!isfinite(c->min_loss_scale) || c->min_loss_scale <= 0)
        return dt_error(DT_ERR_CONFIG,
                        "%s: fp16.min_loss_scale must be a finite number > 0 (got %g); hint: "
                        "DeepSpeed's default is 1",
                        who, c->min_loss_scale);
    return DT_OK;
}

dt_loss_scaler *dt_loss_scaler_new(const dt_loss_scaler_config *cfg) {
    dt_loss_scaler_config c = cfg ? *cfg : dt_loss_scaler_defaults();
    if (check_config(&c) != DT_OK) return NULL;
    dt_loss_scaler *ls = calloc(1, sizeof *ls);
    if (!ls) {
        dt_error(DT_ERR_OOM, "dt_loss_scaler_new: out of memory");
        return NULL;
    }
    ls->cfg = c;
    ls->dynamic = c.enabled && c.loss_scale == 0;
    if (!c.enabled)
        ls->st.scale = 1.0;
    else if (ls->dynamic)
        ls->st.scale = ldexp(1.0, c.initial_scale_power);
    else
        ls->st.scale = c.loss_scale;
    ls->st.cur_iter = 0;
    ls->st.last_overflow_iter = -1;
    /* a static scaler has no hysteresis; 1 keeps the state valid for set_state */
    ls->st.cur_hysteresis = ls->dynamic ? c.hysteresis : 1;
    return ls;
}

void dt_loss_scaler_free(dt_loss_scaler *ls) {
    free(ls);
}

float dt_loss_scaler_scale(const dt_loss_scaler *ls) {
    return ls ? (float)ls->st.scale : 1.0f;
}

const dt_loss_scaler_config *dt_loss_scaler_config_of(const dt_loss_scaler *ls) {
    return ls ? &ls->cfg : NULL;
}

bool dt_grads_have_inf_or_nan(const float *g, int64_t n) {
    if (!g || n <= 0) return false;
    /* the largest magnitude bit pattern: >= 0x7f800000 exactly when some element is Inf/NaN
     * (sign dropped, so -Inf and negative NaNs count). max is order-free: deterministic. */
    uint32_t m = 0;
#pragma omp parallel for simd schedule(static) reduction(max : m) if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &g[i], sizeof u);
        u &= 0x7fffffffu;
        m = u > m ? u : m;
    }
    return m >= 0x7f800000u;
}

void dt_loss_scaler_unscale(float *g, int64_t n, float scale) {
    if (!g || n <= 0) return;
    const float inv = (float)(1.0 / (double)scale);
#pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++) g[i] *= inv;
}

dt_status dt_loss_scaler_update(dt_loss_scaler *ls, bool overflow, bool *skip) {
    if (skip) *skip = overflow;
    if (!ls) return dt_error(DT_ERR_INVALID, "dt_loss_scaler_update: scaler is NULL");
    if (!ls->dynamic) return DT_OK; /* static: the scale never changes, nothing is counted */

    const dt_loss_scaler_config *c = &ls->cfg;
    dt_loss_scaler_state *s = &ls->st;
    if (overflow) {
        if (c->hysteresis == 1 || s->cur_hysteresis == 1) {
            if (s->scale == c->min_loss_scale && c->raise_error_at_min_scale)
                return dt_error(DT_ERR_STATE,
                                "dt_loss_scaler_update: gradient overflow at iteration %lld with "
                                "the loss scale already at its minimum (%g): it cannot be "
                                "lowered any more; hint: the model produces Inf/NaN gradients "
                                "at any scale (check the learning rate and the data), or lower "
                                "fp16.min_loss_scale, or use bf16",
                                (long long)s->cur_iter, c->min_loss_scale);
            double next = s->scale / 2.0;
            s->scale = next > c->min_loss_scale ? next : c->min_loss_scale;
        } else {
            s->cur_hysteresis -= 1;
        }
        s->last_overflow_iter = s->cur_iter;
    } else {
        if (c->consecutive_hysteresis) s->cur_hysteresis = c->hysteresis;
        int64_t stable = s->cur_iter - s->last_overflow_iter - 1;
        if (stable > 0 && stable % c->loss_scale_window == 0) {
            if (!c->consecutive_hysteresis) s->cur_hysteresis = c->hysteresis;
            s->scale *= 2.0;
        }
    }
    s->cur_iter += 1;
    return DT_OK;
}

void dt_loss_scaler_get_state(const dt_loss_scaler *ls, dt_loss_scaler_state *out) {
    if (!ls || !out) return;
    *out = ls->st;
}

dt_status dt_loss_scaler_set_state(dt_loss_scaler *ls, const dt_loss_scaler_state *st) {
    const char *who = "dt_loss_scaler_set_state";
    if (!ls || !st) return dt_error(DT_ERR_INVALID, "%s: %s is NULL", who, ls ? "state" : "scaler");
    if (!isfinite(st->scale) || st->scale <= 0)
        return dt_error(DT_ERR_INVALID,
                        "%s: scale must be finite and > 0 (got %g); hint: is the checkpoint's "
                        "loss scaler state corrupted?",
                        who, st->scale);
    if (st->cur_iter < 0 || st->last_overflow_iter < -1 || st->last_overflow_iter >= st->cur_iter)
        return dt_error(DT_ERR_INVALID,
                        "%s: iterations out of range (cur_iter %lld, last_overflow_iter %lld; "
                        "need cur_iter >= 0 and -1 <= last_overflow_iter < cur_iter)",
                        who, (long long)st->cur_iter, (long long)st->last_overflow_iter);
    if (st->cur_hysteresis < 1)
        return dt_error(DT_ERR_INVALID, "%s: cur_hysteresis must be >= 1 (got %d)", who,
                        st->cur_hysteresis);
    ls->st = *st;
    return DT_OK;
}
