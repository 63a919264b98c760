/* core_local.c — the local core context (dtrain/core.h): what `dtrain train` does with the
 * fit loop's reports, on the chief slot only.
 *
 *   metrics      one JSON line per report in the metrics file:
 *                {"kind":"training"|"validation"|"profiler","batches":N,"epochs":E,
 *                 "records":R[,"records_per_s":X,"data_ms":D,"train_batch_ms":T],
 *                 "metrics":{...}} (non-finite values as null), and TensorBoard scalars
 *                "<kind>/<metric>" at the batch count. Lines are flushed at once, except
 *                profiler lines, which go out with the next report (two write calls a batch
 *                would show in the timings they carry).
 *   stderr       validation lines, and training lines or (progress) a progress bar; nothing
 *                when quiet. The "stopped at batch" note when the trial stops early.
 *   checkpoints  a stored checkpoint becomes "latest" (a file naming it, written to a
 *                temporary file and renamed); the best one is named in "best"; the others
 *                beyond save_trial_latest (and save_trial_best) are removed.
 *   preemption   SIGINT / SIGTERM: the loop finishes the batch, checkpoints and stops.
 *   searcher     one operation: train to max_length.
 */
#include "dtrain/core.h"
#include "trial_iface.h"
#include "base/durable.h"
#include "dtrain/trialio.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct local {
    dt_core core;
    dt_core_local_opts o;
    char *checkpoint_dir, *metrics_out; /* owned copies */
    FILE *metrics;
    bool op_done;
    dt_preempt_signals saved_signals; /* SIGINT / SIGTERM: finish the batch, checkpoint, stop */
} local;

static local *L(dt_core *core) {
    return core->impl;
}

/* ---- metrics ---- */

static void write_line(local *l, const char *kind, const dt_core_at *at, const dt_metrics *m,
                       const dt_core_timing *tm) {
    bool flush = strcmp(kind, "profiler") != 0;
    double rec_per_s = tm ? tm->records_per_s : 0;
    if (l->metrics) {
        FILE *f = l->metrics;
        fprintf(f, "{\"kind\":\"%s\",\"batches\":%lld,\"epochs\":%.6g,\"records\":%lld,", kind,
                (long long)at->batches, at->epochs, (long long)at->records);
        if (rec_per_s > 0) fprintf(f, "\"records_per_s\":%.1f,", rec_per_s);
        if (rec_per_s > 0 && tm->batches > 0)
            fprintf(f, "\"data_ms\":%.4f,\"train_batch_ms\":%.4f,", tm->data_ms,
                    tm->train_batch_ms);
        fprintf(f, "\"metrics\":{");
        for (int i = 0; i < m->n; i++) {
            double v = m->m[i].value;
            if (isfinite(v))
                fprintf(f, "%s\"%s\":%.9g", i ? "," : "", m->m[i].name, v);
            else
                fprintf(f, "%s\"%s\":null", i ? "," : "", m->m[i].name);
        }
        fprintf(f, "}}\n");
        if (flush) fflush(f);
    }
    dt_core_tb_write(&l->core, kind, at->batches, m, flush);
}

static void print_line(local *l, const char *kind, const dt_core_at *at, const dt_metrics *m,
                       double rec_per_s) {
    if (l->o.quiet) return;
    if (l->o.progress) fputc('\n', stderr);
    dt_core_print_metrics(stderr, kind, at, m, rec_per_s);
}

static dt_status local_start(dt_core *core, int64_t steps_completed) {
    local *l = L(core);
    if (!core->chief) return DT_OK;
    if (l->metrics_out && !l->metrics) {
        l->metrics = fopen(l->metrics_out, steps_completed ? "a" : "w");
        if (!l->metrics)
            return dt_error(DT_ERR_IO, "cannot write metrics to %s: %s", l->metrics_out,
                            strerror(errno));
    }
    return dt_core_tb_open(core);
}

static dt_status local_training(dt_core *core, const dt_core_at *at, const dt_metrics *m,
                                const dt_core_timing *tm) {
    local *l = L(core);
    if (!core->chief) return DT_OK;
    write_line(l, "training", at, m, tm);
    if (!l->o.progress) print_line(l, "training", at, m, tm ? tm->records_per_s : 0);
    return DT_OK;
}

static dt_status local_validation(dt_core *core, const dt_core_at *at, const dt_metrics *m) {
    local *l = L(core);
    if (!core->chief) return DT_OK;
    write_line(l, "validation", at, m, NULL);
    print_line(l, "validation", at, m, 0);
    return DT_OK;
}

static dt_status local_profiler(dt_core *core, const dt_core_at *at, const dt_metrics *m) {
    if (core->chief) write_line(L(core), "profiler", at, m, NULL);
    return DT_OK;
}

static void local_progress(dt_core *core, const dt_core_progress *p) {
    local *l = L(core);
    if (!l->o.progress || l->o.quiet || !core->chief) return;
    int64_t done = p->batches, total = p->total_batches;
    double el = p->elapsed_s, rate = el > 0 ? p->records / el : 0;
    double eta = done > 0 ? el * (double)(total - done) / (double)done : 0;
    int width = 30, fill = total ? (int)(width * done / total) : 0;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    fprintf(stderr, "\r[%s] %lld/%lld batches  %.0f rec/s  loss %.4f  ETA %d:%02d   ", bar,
            (long long)done, (long long)total, rate, p->loss, (int)(eta / 60), (int)eta % 60);
}

/* ---- checkpoints ---- */

/* Keep the newest save_trial_latest checkpoints (by name: batch_N in version order), the best
 * (save_trial_best) and `latest` (the one just stored, whatever its name sorts as: the Core
 * API's are uuids); delete the others. Failures leave checkpoints behind, nothing worse. */
static void prune_checkpoints(local *l, const char *latest) {
    const char *dir = l->checkpoint_dir;
    int keep_latest = l->o.save_trial_latest > 0 ? l->o.save_trial_latest : 1;
    char **names = NULL;
    int n = 0;
    if (dt_ckpt_list(dir, &names, &n) != DT_OK) return;
    char bestf[2048] = "";
    snprintf(bestf, sizeof bestf, "%s/best", dir);
    char best[128] = "";
    FILE *f = fopen(bestf, "r");
    if (f) {
        if (fgets(best, sizeof best, f)) best[strcspn(best, "\n")] = 0;
        fclose(f);
    }
    for (int i = 0; i < n - keep_latest; i++) {
        if (l->o.save_trial_best > 0 && best[0] && !strcmp(names[i], best)) continue;
        if (!strcmp(names[i], latest)) continue;
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        dt_ckpt_remove(p);
    }
    dt_ckpt_list_free(names);
}

/* "latest" names the checkpoint, replaced durably (dt_file_write_atomic); DT_ERR_IO naming the
 * file when it cannot be. The "best" pointer and pruning follow; their failures are not errors
 * (a checkpoint too many is kept). */
static dt_status local_checkpoint_stored(dt_core *core, const dt_core_checkpoint *ck) {
    local *l = L(core);
    if (!core->chief || !l->checkpoint_dir) return DT_OK;
    char lp[2048], text[300];
    snprintf(lp, sizeof lp, "%s/latest", l->checkpoint_dir);
    snprintf(text, sizeof text, "%s\n", ck->uuid);
    dt_status st = dt_file_write_atomic(lp, text, strlen(text));
    if (st != DT_OK) return dt_error(st, "cannot update %s: %s", lp, dt_last_error());
    if (ck->best) {
        char bp[2048];
        snprintf(bp, sizeof bp, "%s/best", l->checkpoint_dir);
        if (dt_file_write_atomic(bp, text, strlen(text)) != DT_OK) dt_clear_error();
    }
    prune_checkpoints(l, ck->uuid);
    return DT_OK;
}

bool dt_core_local_latest(const char *dir, char *out, size_t n) {
    char p[2048];
    snprintf(p, sizeof p, "%s/latest", dir);
    FILE *f = fopen(p, "r");
    if (!f) return false;
    bool ok = fgets(out, (int)n, f) != NULL;
    fclose(f);
    if (ok) out[strcspn(out, "\n")] = 0;
    return ok && out[0];
}

/* ---- preemption and the searcher ---- */

static bool local_should_preempt(dt_core *core) {
    (void)core;
    return dt_preempt_signal() != 0;
}

static dt_status local_searcher_op(dt_core *core, dt_core_op *op) {
    local *l = L(core);
    op->length = l->op_done ? (dt_length){DT_UNIT_BATCHES, 0} : l->o.max_length;
    return DT_OK;
}

static dt_status local_searcher_complete(dt_core *core, const dt_core_op *op, double metric) {
    (void)op;
    (void)metric; /* no searcher to tell: the metric is in the metrics file already */
    L(core)->op_done = true;
    return DT_OK;
}

static void local_stopped(dt_core *core, int64_t steps_completed) {
    local *l = L(core);
    if (l->o.quiet || !core->chief) return;
    fprintf(stderr,
            "\nstopped at batch %lld%s; checkpoint saved in %s (resume with --resume "
            "latest)\n",
            (long long)steps_completed, dt_preempt_signal() ? " on a signal" : "",
            l->checkpoint_dir ? l->checkpoint_dir : "");
}

static void local_free(dt_core *core) {
    local *l = L(core);
    dt_preempt_signals_restore(&l->saved_signals);
    if (l->metrics) fclose(l->metrics);
    dt_core_tb_close(core);
    free(l->checkpoint_dir);
    free(l->metrics_out);
    free(l);
}

static const dt_core_ops LOCAL_OPS = {
    .name = "local",
    .start = local_start,
    .report_training_metrics = local_training,
    .report_validation_metrics = local_validation,
    .report_profiler_metrics = local_profiler,
    .report_progress = local_progress,
    .checkpoint_stored = local_checkpoint_stored,
    .should_preempt = local_should_preempt,
    .searcher_op = local_searcher_op,
    .searcher_complete = local_searcher_complete,
    .report_stopped = local_stopped,
    .free = local_free,
};

dt_core *dt_core_local_new(const dt_core_local_opts *o) {
    local *l = calloc(1, sizeof *l);
    if (!l) {
        dt_error(DT_ERR_OOM, "out of memory creating the local core");
        return NULL;
    }
    l->o = *o;
    l->checkpoint_dir = o->checkpoint_dir ? strdup(o->checkpoint_dir) : NULL;
    l->metrics_out = o->metrics_out ? strdup(o->metrics_out) : NULL;
    if ((o->checkpoint_dir && !l->checkpoint_dir) || (o->metrics_out && !l->metrics_out)) {
        free(l->checkpoint_dir);
        free(l->metrics_out);
        free(l);
        dt_error(DT_ERR_OOM, "out of memory creating the local core");
        return NULL;
    }
    l->o.checkpoint_dir = l->checkpoint_dir;
    l->o.metrics_out = l->metrics_out;
    l->core.ops = &LOCAL_OPS;
    l->core.impl = l;
    l->core.chief = o->chief;
    if (o->checkpoint_dir)
        snprintf(l->core.tb_path, sizeof l->core.tb_path, "%s/tensorboard", o->checkpoint_dir);
    dt_preempt_signals_catch(&l->saved_signals);
    return &l->core;
}
