/* metrics.c — a trial's metrics: a small map of names to values that train_batch and
 * evaluate_batch return and the fit loop averages and reports. */
#include "trial_impl.h"

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
