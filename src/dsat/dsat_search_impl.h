/*
 * dsat_search_impl.h — what the dsat search methods (search_binary.c, search_random.c,
 * search_asha.c) share with their driver (search_method.c) and the knob space
 * (search_space.c). Private to those files and their test.
 *
 * A method is a table of four rules over one state: how a result moves its lineage's range,
 * whether a lineage continues, which lineage to start when none continues, and which
 * micro-batch to try next (random adds a fifth: drop a proposal). A lineage is one random
 * configuration (stage, knobs, offload) and the search over its micro-batch: its trials form a
 * chain, at most one running at a time.
 */
#ifndef DTRAIN_DSAT_SEARCH_IMPL_H
#define DTRAIN_DSAT_SEARCH_IMPL_H

#include "dsat_search.h"

enum { DT__T_RUNNING = 0, DT__T_OK, DT__T_OOM, DT__T_ERROR }; /* a trial's outcome */

typedef struct dt__dsat_trial {
    dt_dsat_knobs k;
    int32_t lineage, rung; /* rung: asha's rung of the lineage when proposed */
    int64_t lo, hi;        /* the lineage's range when proposed */
    int outcome;
    double metric; /* DT__T_OK only */
} dt__dsat_trial;

typedef struct dt__dsat_lineage {
    dt_dsat_knobs k; /* mbs unused */
    int64_t lo, hi;  /* micro-batches still worth trying (empty when lo > hi) */
    int32_t rung;    /* asha */
    int32_t last;    /* its latest trial */
    int64_t n_done;  /* reported trials */
    bool running;    /* its latest trial has no result yet */
    bool failed;     /* a trial of it failed (OOM or error) */
} dt__dsat_lineage;

typedef struct dt__dsat_rules {
    const char *name;
    /* A result of L's latest trial t came in: move L's range. */
    void (*update)(dt__dsat_method *m, dt__dsat_lineage *L, const dt__dsat_trial *t);
    /* L's latest result is in: does it get another trial? */
    bool (*cont)(dt__dsat_method *m, int32_t L);
    /* The lineage to try next when none continues (a new one via dt__dsat_lineage_new, or an
     * existing one); -1 when no stage can fit anything. */
    int32_t (*fresh)(dt__dsat_method *m);
    /* The micro-batch L tries next, within [lo, hi] (lo <= hi). */
    int64_t (*pick)(dt__dsat_method *m, const dt__dsat_lineage *L);
    /* Drop this proposal (L would try mbs)? NULL: never. */
    bool (*discard)(dt__dsat_method *m, int32_t L, int64_t mbs);
} dt__dsat_rules;

extern const dt__dsat_rules dt__dsat_binary_rules, dt__dsat_random_rules, dt__dsat_asha_rules;

/* The feasible knob sets of one stage: combination indices (search_space.c). */
typedef struct dt__dsat_feasible {
    int32_t *v;
    int32_t n;
} dt__dsat_feasible;

typedef struct dt__dsat_ranked {
    double key; /* the metric, negated when larger is better */
    int32_t lineage;
} dt__dsat_ranked;

struct dt__dsat_method {
    const dt__dsat_rules *rules;
    dt__dsat_opts o;
    dt_dsat_space sp;
    dt_rng rng;
    dt__dsat_feasible feas[4]; /* by stage; derived from the space, not saved */
    dt__dsat_trial *t;         /* trial id i */
    int64_t nt, tcap;
    dt__dsat_lineage *l; /* committed lineages, then one being started at index nl */
    int32_t nl, lcap;
    dt__dsat_ranked *rank; /* asha's scratch, lcap entries */
    int32_t *pending;      /* lineages whose result awaits a decision: [head, tail), cap tcap */
    int64_t head, tail;
    int64_t running, since_best, skipped, discarded;
    unsigned ok_stages; /* bit s: a trial at stage s succeeded */
    char stop[512];     /* why no more proposals ("" while searching) */
    char msg[640];      /* dt__dsat_done_reason's text */
};

/* ---- the knob space (search_space.c) ----------------------------------------------------- */

/* Fills m->feas from the space (at micro-batch 1, offload only where needed); DT_ERR_OOM. */
dt_status dt__dsat_feasible_init(dt__dsat_method *m);
void dt__dsat_feasible_free(dt__dsat_method *m);
bool dt__dsat_fits(const dt__dsat_method *m, const dt_dsat_knobs *k);
/* A stage drawn uniformly from the feasible stages in `prefer` (a bit mask), or from all
 * feasible ones when none is; -1 when no stage has a feasible knob set. */
int dt__dsat_draw_stage(dt__dsat_method *m, unsigned prefer);
/* Starts a lineage (at index m->nl, committed with its first trial) at `stage` with knobs
 * drawn from the stage's feasible sets and the range [lo, hi], or when hi == 0 the common
 * range [1, max(⌊factor × approx⌋, 1)] (approx: the stage's approx_max_mbs, or for an
 * offloaded set the largest micro-batch that fits). Returns its index. */
int32_t dt__dsat_lineage_new(dt__dsat_method *m, int stage, int64_t lo, int64_t hi);
/* lo + Binomial(hi − lo, 1/2) (the normal approximation above 4096). */
int64_t dt__dsat_binomial_pick(dt__dsat_method *m, int64_t lo, int64_t hi);
/* Binary search: success -> lo = mbs + 1, failure -> hi = mbs − 1 (binary and asha). */
void dt__dsat_update_halving(dt__dsat_method *m, dt__dsat_lineage *L, const dt__dsat_trial *t);
/* A new lineage at a stage drawn uniformly, over the common range (binary and asha); -1 when
 * no stage fits. */
int32_t dt__dsat_fresh_uniform(dt__dsat_method *m);
/* (lo + hi) / 2 (binary and asha). */
int64_t dt__dsat_pick_mid(dt__dsat_method *m, const dt__dsat_lineage *L);
/* a better than b under the metric's direction */
bool dt__dsat_better(const dt__dsat_method *m, double a, double b);
/* The best successful trial with stage == `stage` (-1: any), in lineage `lineage` (-1: any)
 * and rung <= max_rung (-1: any); the first proposed among equals; -1 when none. */
int64_t dt__dsat_best_of(const dt__dsat_method *m, int stage, int32_t lineage, int32_t max_rung);

#endif
