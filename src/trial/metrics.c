/* metrics.c — a trial's metrics: a small map of names to values that train_batch and
 * evaluate_batch return and the fit loop averages and reports; and the common ones a
 * classifier computes (top-1 and top-k accuracy). */
#include "trial_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

dt_metrics dt_metrics_empty(void) {
    dt_metrics m;
    m.n = 0;
    m.status = DT_OK;
    return m;
}

dt_metrics dt_metrics_scalar(const char *name, double value) {
    dt_metrics m = dt_metrics_empty();
    dt_metrics_set(&m, name, value);
    return m;
}

dt_metrics dt_metrics_error(void) {
    dt_metrics m = dt_metrics_empty();
    m.status = dt_last_status() != DT_OK ? dt_last_status() : DT_ERR_STATE;
    return m;
}

bool dt_metrics_set(dt_metrics *m, const char *name, double value) {
    if (strlen(name) >= DT_METRIC_NAME_MAX) return false;
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->m[i].name, name)) {
            m->m[i].value = value;
            return true;
        }
    if (m->n == DT_METRICS_MAX) return false;
    snprintf(m->m[m->n].name, DT_METRIC_NAME_MAX, "%s", name);
    m->m[m->n++].value = value;
    return true;
}

bool dt_metrics_get(const dt_metrics *m, const char *name, double *value) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->m[i].name, name)) {
            if (value) *value = m->m[i].value;
            return true;
        }
    return false;
}

/* ---- classification ---- */

double dt_topk_accuracy(const dt_tensor *logits, const dt_tensor *y, int k) {
    if (!logits || !y || logits->ndim != 2 || logits->dtype != DT_DTYPE_F32 ||
        y->dtype != DT_DTYPE_I64 || y->ndim != 1 || y->shape[0] != logits->shape[0] || k < 1 ||
        !dt_is_contiguous(logits) || !dt_is_contiguous(y)) {
        dt_error(DT_ERR_INVALID, "accuracy: need logits (N, C) f32 and labels (N) i64, k >= 1");
        return NAN;
    }
    const float *L = logits->data;
    const int64_t *Y = y->data;
    int64_t n = logits->shape[0], c = logits->shape[1], hits = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *row = L + i * c;
        if (Y[i] < 0 || Y[i] >= c) continue; /* an ignored label never counts as a hit */
        /* the label is in the top k when fewer than k classes score above it (ties go to the
         * lower index, as an argmax does) */
        int64_t above = 0;
        for (int64_t j = 0; j < c && above < k; j++)
            above += row[j] > row[Y[i]] || (row[j] == row[Y[i]] && j < Y[i]);
        hits += above < k;
    }
    return n ? (double)hits / (double)n : NAN;
}

double dt_accuracy(const dt_tensor *logits, const dt_tensor *y) {
    return dt_topk_accuracy(logits, y, 1);
}
