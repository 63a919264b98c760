/*
 * dsat_search.h — the autotuner's search methods (binary, random, asha): the runner layer's
 * internal interface between them and the dsat search runner. Nothing outside src/dsat/
 * and its tests uses it.
 *
 * A method proposes configurations (a ZeRO stage, a micro-batch and the stage's
 * zero_optimization knobs) and learns from their results; it never runs anything. It takes the
 * memory model as data (the approximate max micro-batch per stage) and a callback (`fits`), so
 * it does not depend on the engine: the caller wires those to dsat/dsat.h's model. The
 * methods' rules are in docs/dsat.md ("Methods"); the shared machinery is in dsat_space.c.
 *
 * The caller's loop: next() for as many configurations as it may start now, run them, report()
 * each result, next() again, until done(). The same seed, space, options and sequence of calls
 * give the same configurations; save() -> free -> load() between any two calls continues with
 * the same next configurations.
 */
#ifndef DTRAIN_DSAT_SEARCH_H
#define DTRAIN_DSAT_SEARCH_H

#include "dtrain/base.h"
#include "dsat/dsat.h" /* dt_dsat_knobs */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* What the methods search: the stages, the model's estimates and its budget check. */
typedef struct dt_dsat_space {
    int zero_stages[4];         /* --zero-stages: distinct, each 0..3 */
    int n_stages;               /* 1..4 */
    int64_t approx_max_mbs[4];  /* indexed by stage number, >= 1: the memory model's estimate */
    double search_range_factor; /* > 0: the micro-batch range is [1, max(⌊f × approx⌋, 1)] */
    /* Would this configuration exceed the device budget (the memory model)? Never proposed when
     * it returns false; must be monotone in mbs (fits at m -> fits below m). */
    bool (*fits)(void *arg, const dt_dsat_knobs *k);
    void *arg;     /* passed to fits (borrowed) */
    uint64_t seed; /* --random-seed */
} dt_dsat_space;

/* A finished trial: an OOM (DT_ERR_OOM) or another failure, else the searcher metric. A
 * success with a non-finite metric counts as an error. */
typedef struct dt_dsat_result {
    bool oom, error;
    double metric;
} dt_dsat_result;

/* The options of all three methods, with the reference's defaults (dt__dsat_opts_default). */
typedef struct dt__dsat_opts {
    /* trials the method may propose: the caller subtracts the profile trial from --max-trials */
    int64_t max_trials;               /* 50 */
    bool smaller_is_better;           /* from the metric (dt__dsat_metric_smaller) */
    int64_t trials_per_random_config; /* random: 5 */
    int64_t early_stopping; /* random: trials without a new best before stopping; 0: never */
    int64_t max_rungs;      /* asha: 5 */
    int64_t min_binary_search_trials; /* asha: 3 */
    int64_t asha_early_stopping;      /* asha: 0 */
    int64_t divisor;                  /* asha: 2 */
} dt__dsat_opts;

void dt__dsat_opts_default(dt__dsat_opts *o);
/* Whether `metric` (FLOPS_per_gpu, throughput, forward, backward, latency) is smaller-is-better;
 * DT_ERR_CONFIG naming the choices for any other name. */
dt_status dt__dsat_metric_smaller(const char *metric, bool *smaller);

typedef struct dt__dsat_method dt__dsat_method;

/* A method ("binary", "random" or "asha") over `space` (copied; space->arg is borrowed until
 * free). DT_ERR_CONFIG saying what is wrong for an unknown name, bad options or a bad space;
 * DT_ERR_OOM. A space where nothing fits is not an error: the method is done at once and
 * dt__dsat_done_reason says why. */
dt_status dt__dsat_method_new(const char *name, const dt__dsat_opts *opts,
                              const dt_dsat_space *space, dt__dsat_method **out);
void dt__dsat_method_free(dt__dsat_method *m);
const char *dt__dsat_method_name(const dt__dsat_method *m);

/* One configuration to start: `id` (0, 1, ... in proposal order) is what report() takes. */
typedef struct dt__dsat_config {
    int64_t id;
    dt_dsat_knobs knobs;
} dt__dsat_config;

/* Up to n configurations to start now (n: the trials the caller may start, from
 * --max-concurrent-trials and --max-slots), written to out[0..*got). Fewer once max_trials have
 * been proposed or the search is stopping. Every one fits (space.fits). DT_ERR_OOM leaves the
 * method as it was before the call. */
dt_status dt__dsat_next(dt__dsat_method *m, int n, dt__dsat_config *out, int *got);
/* The result of configuration `id`. DT_ERR_STATE for an id never proposed or already reported. */
dt_status dt__dsat_report(dt__dsat_method *m, int64_t id, dt_dsat_result r);
/* True when nothing is running and nothing more will be proposed. */
bool dt__dsat_done(const dt__dsat_method *m);
/* Why the search ended or is ending (max_trials, early stopping, nothing fits...), or NULL. */
const char *dt__dsat_done_reason(dt__dsat_method *m);
/* Reported trials / max_trials, in [0, 1] (1 once done). */
double dt__dsat_progress(const dt__dsat_method *m);
/* The best successful trial so far (first proposed among equals): false when none. */
bool dt__dsat_best(const dt__dsat_method *m, int64_t *id, dt_dsat_knobs *knobs, double *metric);

typedef struct dt__dsat_stats {
    int64_t proposed, running, succeeded, oom, errors;
    int64_t lineages;
    int64_t skipped;   /* configurations `fits` rejected: never proposed, taken as an OOM */
    int64_t discarded; /* random: configurations dropped by its early-stopping rules */
} dt__dsat_stats;
void dt__dsat_get_stats(const dt__dsat_method *m, dt__dsat_stats *st);

/* The whole state as JSON (new reference; NULL with DT_ERR_OOM), and back into a method made
 * with the same name, options and space: DT_ERR_FORMAT saying what does not match, with the
 * method unchanged. */
json_t *dt__dsat_save(const dt__dsat_method *m);
dt_status dt__dsat_load(dt__dsat_method *m, const json_t *saved);

#endif
