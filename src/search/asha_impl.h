/*
 * asha_impl.h — adaptive_asha's state (asha.c) and the helpers that keep it (asha_state.c).
 * Nothing outside these files uses it.
 */
#ifndef DTRAIN_ASHA_IMPL_H
#define DTRAIN_ASHA_IMPL_H

#include "search_impl.h"

#include <float.h>

#define MAX_RUNGS 1000 /* more would only come from a divisor barely above 1 */
#define WORST DBL_MAX

typedef struct entry {
    int64_t id;
    double metric; /* smaller is better */
} entry;

typedef struct rung {
    int64_t units;
    int64_t n, cap;
    entry *v; /* sorted ascending by metric */
} rung;

enum { B_CREATED, B_INVALID, B_OPEN, B_CLOSED, B_N };

typedef struct bracket {
    int num_rungs;
    int64_t max_trials, max_concurrent;
    int64_t c[B_N];
    rung *rungs;
} bracket;

/* Per-trial flags. done: no more operations will come (stopped, topped out or exited);
 * exited: ended early. */
enum { T_DONE = 1, T_INVALID = 2, T_CLOSED = 4, T_EXITED = 8 };
#define T_ALL 15

typedef struct trial {
    int32_t bracket, rung;
    int32_t flags;
} trial;

typedef struct asha {
    dt_length length;
    double divisor;
    bool smaller_is_better;
    int nb;
    bracket *b;
    trial *t; /* request id i + 1 */
    int64_t nt, tcap;
} asha;

/* Insert (id, m) into the rung, before any equal metric; returns its index or -1 (OOM). */
int64_t dt__asha_rung_insert(rung *g, int64_t id, double m);
void dt__asha_rung_remove(rung *g, int64_t id);
/* The trial of request `id`, or NULL with DT_ERR_STATE. */
trial *dt__asha_trial_of(asha *a, int64_t id);
/* A new trial in bracket k: CREATE and VALIDATE_AFTER its first rung. */
dt_status dt__asha_start(asha *a, int k, dt_search_ctx *sc, dt_search_ops *out);
/* No open trial and no more to create. */
bool dt__asha_bracket_done(const bracket *b);

static inline dt_length dt__asha_units(const asha *a, int64_t n) {
    return (dt_length){a->length.unit, n};
}

#endif
