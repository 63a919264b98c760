/* core.c — the calls of the core-context interface (dtrain/core.h): each forwards to the
 * implementation's operation; a NULL core or operation is a no-op. */
#include "dtrain/core.h"
#include "trial_impl.h"
#include "dtrain/trialio.h"

#include <stdio.h>

#include <stddef.h>

#define HAS(core, op) ((core) && (core)->ops && (core)->ops->op)

dt_status dt_core_start(dt_core *core, int64_t steps_completed) {
    return HAS(core, start) ? core->ops->start(core, steps_completed) : DT_OK;
}

dt_status dt_core_report_training_metrics(dt_core *core, const dt_core_at *at, const dt_metrics *m,
                                          const dt_core_timing *timing) {
    return HAS(core, report_training_metrics)
               ? core->ops->report_training_metrics(core, at, m, timing)
               : DT_OK;
}

dt_status dt_core_report_validation_metrics(dt_core *core, const dt_core_at *at,
                                            const dt_metrics *m) {
    return HAS(core, report_validation_metrics) ? core->ops->report_validation_metrics(core, at, m)
                                                : DT_OK;
}

dt_status dt_core_report_profiler_metrics(dt_core *core, const dt_core_at *at,
                                          const dt_metrics *m) {
    return HAS(core, report_profiler_metrics) ? core->ops->report_profiler_metrics(core, at, m)
                                              : DT_OK;
}

void dt_core_report_progress(dt_core *core, const dt_core_progress *p) {
    if (HAS(core, report_progress)) core->ops->report_progress(core, p);
}

dt_status dt_core_checkpoint_stored(dt_core *core, const dt_core_checkpoint *ck) {
    return HAS(core, checkpoint_stored) ? core->ops->checkpoint_stored(core, ck) : DT_OK;
}

bool dt_core_should_preempt(dt_core *core) {
    return HAS(core, should_preempt) && core->ops->should_preempt(core);
}

dt_status dt_core_searcher_op(dt_core *core, dt_core_op *op) {
    op->length = (dt_length){DT_UNIT_BATCHES, 0};
    return HAS(core, searcher_op) ? core->ops->searcher_op(core, op) : DT_OK;
}

dt_status dt_core_searcher_complete(dt_core *core, const dt_core_op *op, double metric) {
    return HAS(core, searcher_complete) ? core->ops->searcher_complete(core, op, metric) : DT_OK;
}

void dt_core_report_stopped(dt_core *core, int64_t steps_completed) {
    if (HAS(core, report_stopped)) core->ops->report_stopped(core, steps_completed);
}

void dt_core_free(dt_core *core) {
    if (!core) return;
    struct dt_core_api *api = core->api;
    void (*api_free)(struct dt_core_api *) = core->api_free;
    if (HAS(core, free)) core->ops->free(core);
    if (api && api_free) api_free(api); /* after the core: its last reports may use the comm */
}

dt_status dt_core_tb_open(dt_core *core) {
    if (!core->chief || core->tb || !core->tb_path[0]) return DT_OK;
    core->tb = dt_tb_open(core->tb_path);
    return core->tb ? DT_OK : dt_last_status();
}

void dt_core_tb_write(dt_core *core, const char *kind, int64_t batches, const dt_metrics *m,
                      bool flush) {
    if (!core->tb) return;
    char tag[96];
    for (int i = 0; i < m->n; i++) {
        snprintf(tag, sizeof tag, "%s/%s", kind, m->m[i].name);
        dt_tb_add_scalar(core->tb, tag, (float)m->m[i].value, batches);
    }
    if (flush) dt_tb_flush(core->tb);
}

void dt_core_tb_close(dt_core *core) {
    if (core && core->tb) dt_tb_close(core->tb);
    if (core) core->tb = NULL;
}

void dt_core_print_metrics(FILE *f, const char *kind, const dt_core_at *at, const dt_metrics *m,
                           double records_per_s) {
    fprintf(f, "%s: batch %lld (epoch %.2f)", kind, (long long)at->batches, at->epochs);
    for (int i = 0; i < m->n; i++) fprintf(f, " %s=%.5g", m->m[i].name, m->m[i].value);
    if (records_per_s > 0) fprintf(f, " (%.0f records/s)", records_per_s);
    fputc('\n', f);
    fflush(f);
}
