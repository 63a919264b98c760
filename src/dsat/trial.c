/* trial.c — how a dsat trial runs and measures itself.
 *
 * A dsat trial is the user's engine-based trial, run by the fit loop unchanged but for an
 * observer (dt_fit_opts.on_batch_end) that, after every global batch, reads the first wrapped
 * engine's timers and FLOP counter (then resets them), so each global batch is one
 * dt_dsat_step. After end_profile_step batches (a profile trial: one) it asks the loop to
 * stop; the loop skips the user's validation and writes its checkpoint. Then the steps
 * start..end become the metrics (10% trimmed means), reported as validation metrics with the
 * searcher operation completed on the metric the experiment searches. An OOM anywhere (the
 * engine's model states at init, a step's activations) is a result, not an error. A trial
 * run again always measures from its first step: it never resumes from its checkpoint. */
#include "dtrain/core.h"
#include "dsat/dsat.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The mean of v[0..n) without its lowest and highest 10% (sorts v). */
static double trimmed_mean(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int cut = n / 10;
    double s = 0;
    for (int i = cut; i < n - cut; i++) s += v[i];
    return s / (n - 2 * cut);
}

dt_status dt_dsat_metrics_compute(const dt_dsat_step *steps, int n, int start, int end, int64_t gas,
                                  int64_t train_batch_size, dt_dsat_metrics *out) {
    if (!steps || !out || start < 1 || end < start || end > n || gas < 1 || train_batch_size < 1)
        return dt_error(DT_ERR_INVALID,
                        "dsat: cannot measure steps %d..%d of %d (gas %lld, batch %lld); hint: "
                        "1 <= start_profile_step <= end_profile_step <= the steps trained",
                        start, end, n, (long long)gas, (long long)train_batch_size);
    int k = end - start + 1;
    double *v = malloc(sizeof(double) * (size_t)k * 5);
    if (!v) return dt_error(DT_ERR_OOM, "dsat: out of memory");
    double *f = v, *b = v + k, *s = v + 2 * k, *lat = v + 3 * k, *fl = v + 4 * k;
    for (int i = 0; i < k; i++) {
        const dt_dsat_step *st = &steps[start - 1 + i];
        f[i] = st->forward_s;
        b[i] = st->backward_s;
        s[i] = st->step_s;
        lat[i] = st->forward_s + st->backward_s + st->step_s;
        fl[i] = lat[i] > 0 ? (double)st->flops / lat[i] : 0;
    }
    out->forward_ms = trimmed_mean(f, k) * 1e3 / (double)gas;
    out->backward_ms = trimmed_mean(b, k) * 1e3 / (double)gas;
    out->step_ms = trimmed_mean(s, k) * 1e3 / (double)gas;
    out->latency_ms = trimmed_mean(lat, k) * 1e3;
    out->throughput = out->latency_ms > 0 ? (double)train_batch_size / (out->latency_ms / 1e3) : 0;
    out->flops_per_slot = trimmed_mean(fl, k);
    free(v);
    return DT_OK;
}

dt_metrics dt_dsat_metrics_report(const dt_dsat_metrics *m, int64_t predicted_bytes) {
    dt_metrics r = dt_metrics_empty();
    dt_metrics_set(&r, "oom", m->oom ? 1 : 0);
    dt_metrics_set(&r, "peak_bytes", (double)m->peak_bytes);
    if (predicted_bytes > 0) dt_metrics_set(&r, "predicted_bytes", (double)predicted_bytes);
    if (m->oom) return r;
    dt_metrics_set(&r, "forward", m->forward_ms);
    dt_metrics_set(&r, "backward", m->backward_ms);
    dt_metrics_set(&r, "step", m->step_ms);
    dt_metrics_set(&r, "latency", m->latency_ms);
    dt_metrics_set(&r, "throughput", m->throughput);
    dt_metrics_set(&r, "FLOPS_per_gpu", m->flops_per_slot);
    return r;
}

/* ---- the run ---- */

typedef struct recorder {
    dt_dsat_run run;
    int n, cap;
    dt_dsat_step *steps;
    int64_t gas, tbs, peak;
    dt_dsat_profile profile;
    bool profiled;
} recorder;

static dt_status observe(void *user, dt_trial_ctx *c) {
    recorder *r = user;
    dt_engine *e = dt_trial_engine(c, 0);
    if (!e || dt_trial_pipe_engine(c, 0))
        return dt_error(DT_ERR_CONFIG,
                        "dsat tunes engine-based trials: the trial wraps %s; hint: "
                        "build the engine with dt_ds_config_from_hparams and wrap "
                        "it with dt_wrap_model_engine",
                        e ? "a pipeline engine" : "no engine");
    dt_engine_timers t;
    dt_engine_get_timers(e, &t);
    dt_engine_reset_timers(e);
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 8;
        dt_dsat_step *s = realloc(r->steps, sizeof *s * (size_t)cap);
        if (!s) return dt_error(DT_ERR_OOM, "dsat: out of memory");
        r->steps = s;
        r->cap = cap;
    }
    r->steps[r->n++] = (dt_dsat_step){.forward_s = t.forward_s,
                                      .backward_s = t.backward_s,
                                      .step_s = t.step_s,
                                      .flops = t.flops_fwd + t.flops_bwd};
    r->gas = dt_engine_gradient_accumulation_steps(e);
    r->tbs = dt_engine_train_batch_size(e);
    dt_engine_memory mem;
    dt_engine_memory_stats(e, &mem);
    r->peak = mem.device.total_peak;
    int last = r->run.mode == DT_DSAT_PROFILE ? 1 : r->run.end_profile_step;
    if (r->n < last) return DT_OK;
    dt_comm *comm = dt_engine_comm(e);
    dt_status st = DT_OK;
    if (r->run.mode == DT_DSAT_PROFILE) {
        st = dt_dsat_profile_engine(e, 0, &r->profile);
        r->profiled = st == DT_OK;
        r->peak = r->profile.measured_peak;
    } else if (dt_comm_size(comm) > 1) {
        st = dt_comm_allreduce(comm, &r->peak, 1, DT_COMM_DTYPE_I64, DT_REDUCE_OP_MAX);
    }
    dt_trial_set_stop_requested(c, true);
    return st;
}

/* A profile trial's failure, with its cause and what to try. */
static dt_status profile_failed(dt_status st, const char *cause) {
    const char *hint =
        st == DT_ERR_OOM
            ? "the model's states and one example's activations do not fit in the device "
              "budget at the configured ZeRO stage: enable zero_optimization.offload_optimizer, "
              "use ZeRO stage 3, give the trial more slots, or raise the budget "
              "(DT_DEVICE_MEMORY or the config's memory_budget)"
        : st == DT_ERR_CONFIG || st == DT_ERR_IO
            ? "fix the DeepSpeed config or the experiment config named above"
            : "the trial fails by itself: run it with `dtrain train` to see it fail there";
    return dt_error(st,
                    "dsat: the profile trial (micro-batch 1, one step, the configured ZeRO "
                    "settings) failed: %s; hint: %s",
                    cause, hint);
}

/* Report `m` as the trial's validation metrics and complete the searcher operation with the
 * searcher metric's value from it. */
static dt_status report(const dt_prepared_trial *t, int64_t batches, const dt_metrics *m) {
    dt_core *core = t->fit.core;
    if (!core) return DT_OK;
    dt_core_at at = {.batches = batches};
    dt_status st = dt_core_report_validation_metrics(core, &at, m);
    dt_core_op op = {0};
    if (st == DT_OK) st = dt_core_searcher_op(core, &op);
    if (st != DT_OK || op.length.n <= 0) return st;
    double v = NAN;
    const char *name = t->fit.searcher_metric ? t->fit.searcher_metric : "FLOPS_per_gpu";
    dt_metrics_get(m, name, &v);
    return dt_core_searcher_complete(core, &op, v);
}

dt_status dt_dsat_trial_run(const dt_trial_lib *lib, const dt_prepared_trial *t,
                            dt_dsat_metrics *metrics, dt_dsat_profile *profile) {
    if (!lib || !t) return dt_error(DT_ERR_INVALID, "dt_dsat_trial_run: NULL argument");
    recorder r = {0};
    bool is = false;
    dt_status st =
        dt_dsat_run_from_hparams(json_object_get(t->config, "hyperparameters"), &is, &r.run);
    if (st != DT_OK) return st;
    if (!is)
        return dt_error(DT_ERR_CONFIG, "dt_dsat_trial_run: the trial's hyperparameters have no "
                                       "dsat section; hint: run it with dt_trial_run_local");
    int last = r.run.mode == DT_DSAT_PROFILE ? 1 : r.run.end_profile_step;
    dt_prepared_trial run = *t;
    run.fit.on_batch_end = observe;
    run.fit.batch_user = &r;
    /* a measurement starts from its first step: a trial run again (its master restarted after
     * the trial's checkpoint, before its report) measures again rather than resume past the
     * profile steps with nothing to report */
    run.fit.latest_checkpoint = NULL;
    if (!run.fit.core) run.fit.max_length = (dt_length){DT_UNIT_BATCHES, last};
    st = dt_trial_run_local(lib, &run);
    dt_dsat_metrics res = {.peak_bytes = r.peak, .oom = st == DT_ERR_OOM};
    dt_metrics rep;
    if (r.run.mode == DT_DSAT_PROFILE) {
        if (st == DT_OK && !r.profiled)
            st = dt_error(DT_ERR_STATE, "it stopped before its first batch ended");
        if (st != DT_OK) {
            free(r.steps);
            return profile_failed(st, dt_last_error());
        }
        if (profile) *profile = r.profile;
        rep = dt_dsat_profile_report(&r.profile);
    } else {
        if (st == DT_OK && r.n < last)
            st = dt_error(DT_ERR_STATE,
                          "dsat: the trial stopped after %d global batches, before "
                          "end_profile_step %d; hint: the searcher's operation must be at least "
                          "end_profile_step batches long",
                          r.n, last);
        if (st == DT_OK)
            st = dt_dsat_metrics_compute(r.steps, r.n, r.run.start_profile_step, last, r.gas, r.tbs,
                                         &res);
        if (st != DT_OK && st != DT_ERR_OOM) {
            free(r.steps);
            return st;
        }
        if (st == DT_ERR_OOM) dt_log(DT_LOG_INFO, "dsat: out of memory: %s", dt_last_error());
        if (metrics) *metrics = res;
        rep = dt_dsat_metrics_report(&res, r.run.predicted_bytes);
    }
    free(r.steps);
    return report(t, r.n, &rep);
}
