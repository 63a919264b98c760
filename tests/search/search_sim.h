/* search_sim.h — a deterministic stand-in for the master, for the searcher tests: it applies a
 * searcher's operations to simulated trials and reports the events back, one at a time, always
 * for the lowest request id that has something to report (created, then its validations as
 * asked, an early exit if the test planned one, then closed once CLOSE came). Every operation
 * is also written as one line to a log ("CREATE 3 {...}", "VALIDATE 3 batches 100", "CLOSE 3",
 * "SHUTDOWN"), so two searchers can be compared operation by operation. */
#ifndef DT_SEARCH_SIM_H
#define DT_SEARCH_SIM_H

#include "dtrain/search.h"
#include "test.h"
#include "search/searcher.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_MAX 512

typedef struct sim_trial {
    bool created, close_asked, closed, exited;
    int64_t target, reached; /* the length asked for and the length last reported */
    int exit_at; /* plan: exit early (reason exit_why) at this validation count; 0 none */
    dt_search_exit exit_why;
    int validations;
    double x; /* hparams.x when it is a number */
} sim_trial;

typedef struct sim {
    dt_searcher *s;
    /* the searcher metric of trial `id` (its x) after `length` units */
    double (*metric)(const struct sim_trial *t, int64_t length);
    int64_t n; /* requests seen */
    sim_trial t[SIM_MAX + 1];
    int shutdowns;
    bool failed; /* an event returned an error */
    char *log;
    size_t log_len, log_cap;
} sim;

static void sim_logf(sim *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sim_logf(sim *m, const char *fmt, ...) {
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t need = m->log_len + (size_t)w + 2;
    if (need > m->log_cap) {
        m->log_cap = need * 2;
        m->log = realloc(m->log, m->log_cap);
    }
    memcpy(m->log + m->log_len, line, (size_t)w);
    m->log_len += (size_t)w;
    m->log[m->log_len++] = '\n';
    m->log[m->log_len] = 0;
}

/* Apply (and log, and free) the operations in ops. */
static void sim_apply(sim *m, dt_search_ops *ops) {
    static const char *const unit[] = {"batches", "epochs", "records"};
    for (int i = 0; i < ops->n; i++) {
        const dt_search_op *op = &ops->v[i];
        int64_t id = op->request_id;
        sim_trial *t = id >= 1 && id <= SIM_MAX ? &m->t[id] : NULL;
        switch (op->kind) {
        case DT_SEARCH_CREATE: {
            char *js = json_dumps(op->hparams, JSON_COMPACT | JSON_SORT_KEYS);
            sim_logf(m, "CREATE %lld %s", (long long)id, js ? js : "?");
            free(js);
            CHECK(id == m->n + 1 && t);
            if (!t) break;
            m->n = id;
            t->x = json_number_value(json_object_get(op->hparams, "x"));
            break;
        }
        case DT_SEARCH_VALIDATE_AFTER:
            sim_logf(m, "VALIDATE %lld %s %lld", (long long)id, unit[op->length.unit],
                     (long long)op->length.n);
            CHECK(t && id <= m->n && !t->close_asked);
            if (t) t->target = op->length.n;
            break;
        case DT_SEARCH_CLOSE:
            sim_logf(m, "CLOSE %lld", (long long)id);
            CHECK(t && id <= m->n);
            if (t) t->close_asked = true;
            break;
        case DT_SEARCH_SHUTDOWN:
            sim_logf(m, "SHUTDOWN%s%s", op->cancel ? " cancel" : "", op->failure ? " failure" : "");
            m->shutdowns++;
            break;
        }
    }
    dt_search_ops_free(ops);
}

/* Report one event; false when nothing is left to report. */
static inline bool sim_step(sim *m) {
    dt_search_ops ops = {0};
    dt_status st = DT_OK;
    for (int64_t id = 1; id <= m->n; id++) {
        sim_trial *t = &m->t[id];
        if (t->closed) continue;
        if (!t->created) {
            t->created = true;
            st = dt_searcher_trial_created(m->s, id, &ops);
        } else if (t->exit_at && t->validations + 1 >= t->exit_at && !t->exited) {
            t->exited = true;
            sim_logf(m, "# exit %lld", (long long)id);
            st = dt_searcher_trial_exited_early(m->s, id, t->exit_why, &ops);
        } else if (!t->exited && t->target > t->reached && !t->close_asked) {
            t->reached = t->target;
            t->validations++;
            double v = m->metric ? m->metric(t, t->reached) : 0.0;
            st = dt_searcher_validation_completed(m->s, id, v,
                                                  (dt_length){DT_UNIT_BATCHES, t->reached}, &ops);
        } else if (t->close_asked || t->exited) {
            t->closed = true;
            st = dt_searcher_trial_closed(m->s, id, &ops);
        } else {
            continue; /* waiting for an operation */
        }
        if (st) {
            m->failed = true;
            fprintf(stderr, "searcher event failed: %s\n", dt_last_error());
        }
        sim_apply(m, &ops);
        return true;
    }
    return false;
}

/* Run until nothing is left to report (or `max_steps`); returns the steps taken. */
static inline int sim_run(sim *m, int max_steps) {
    int n = 0;
    while (n < max_steps && sim_step(m)) n++;
    return n;
}

static inline void sim_start(sim *m) {
    dt_search_ops ops = {0};
    CHECK(dt_searcher_initial_operations(m->s, &ops) == DT_OK);
    sim_apply(m, &ops);
}

static inline void sim_free(sim *m) {
    free(m->log);
    m->log = NULL;
    m->log_len = m->log_cap = 0;
}

#endif
