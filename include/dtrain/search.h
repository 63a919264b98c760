/*
 * dtrain/search.h — hyperparameter search: the search-method interface (the reference
 * platform's custom searcher, in C) and the searcher that drives one.
 *
 * A search method reacts to events (the experiment starts, a trial was created, a validation
 * completed, a trial closed or exited early) by appending operations: create a trial with
 * these hyperparameters, train a trial until a length then validate, close a trial, shut the
 * search down. The built-in methods (single, random, grid, adaptive_asha; src/search/)
 * and the autotuner are written on this interface, and so is a user's own.
 *
 * A dt_searcher wraps one method with what every search needs: request ids, the counts of
 * trials requested / created / closed / exited, the RNG hyperparameters are sampled from, and
 * a snapshot (dt_searcher_save / dt_searcher_load) of all of it and the method's own state, so
 * a restarted master continues the same search. The master calls it from one thread.
 */
#ifndef DTRAIN_SEARCH_H
#define DTRAIN_SEARCH_H

#include "dtrain/config.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_search_op_kind {
    DT_SEARCH_CREATE = 0,     /* create trial request_id with hparams */
    DT_SEARCH_VALIDATE_AFTER, /* train request_id until `length` in total, then validate */
    DT_SEARCH_CLOSE,          /* request_id needs no more operations: let it finish */
    DT_SEARCH_SHUTDOWN,       /* the search is over (cancel / failure say how) */
} dt_search_op_kind;

typedef struct dt_search_op {
    dt_search_op_kind kind;
    int64_t request_id; /* 1, 2, ... in creation order (0 for SHUTDOWN) */
    json_t *hparams;    /* CREATE: the trial's values, shaped like `hyperparameters` (owned) */
    dt_length length;   /* VALIDATE_AFTER: the total length to reach */
    bool cancel;        /* SHUTDOWN: the experiment ends CANCELED instead of COMPLETED */
    bool failure;       /* SHUTDOWN: the experiment ends in ERROR */
} dt_search_op;

/* A growing list of operations (dt_search_ops_free releases the hparams it owns). */
typedef struct dt_search_ops {
    int n, cap;
    dt_search_op *v;
} dt_search_ops;


/* Why a trial stopped before its operations were done. */
typedef enum dt_search_exit {
    DT_SEARCH_EXIT_ERRORED = 0,   /* failed beyond its restarts */
    DT_SEARCH_EXIT_INVALID_HP,    /* the trial called its hyperparameters invalid */
    DT_SEARCH_EXIT_USER_CANCELED, /* killed by a user */
} dt_search_exit;

typedef struct dt_searcher dt_searcher;

/* What a method may use while handling an event (owned by the searcher). */
typedef struct dt_search_ctx dt_search_ctx;
/* A new request id and a CREATE for it with hyperparameters sampled from the config's
 * definitions (random values; const as given). The id is written to *request_id. */
DT_API dt_status dt_search_create_random(dt_search_ctx *sc, dt_search_ops *out,
                                         int64_t *request_id);
/* A new request id and a CREATE for it with the given values (copied). */
DT_API dt_status dt_search_create_with(dt_search_ctx *sc, const json_t *hparams, dt_search_ops *out,
                                       int64_t *request_id);
DT_API dt_status dt_search_validate_after(dt_search_ops *out, int64_t request_id, dt_length len);
DT_API dt_status dt_search_close(dt_search_ops *out, int64_t request_id);
DT_API dt_status dt_search_shutdown(dt_search_ops *out, bool cancel, bool failure);
/* The experiment config, and the searcher's uniform random number in [0, 1). */
DT_API const dt_expconf *dt_search_config(const dt_search_ctx *sc);
DT_API double dt_search_uniform(dt_search_ctx *sc);
/* The latest validation metrics of request_id's trial, as the caller of the searcher keeps
 * them (dt_searcher_set_metrics_source): a new reference to {name: number | null}, or NULL
 * when there are none or no source is set. */
DT_API json_t *dt_search_trial_metrics(dt_search_ctx *sc, int64_t request_id);

/* A search method: a table of event handlers over the method's own state. Every handler
 * appends its operations to `out` and returns DT_OK, or an error that ends the search in
 * ERROR (the message says why). NULL handlers append nothing. */
typedef struct dt_search_method {
    const char *name;
    void *state;
    dt_status (*initial_operations)(void *state, dt_search_ctx *sc, dt_search_ops *out);
    dt_status (*on_trial_created)(void *state, dt_search_ctx *sc, int64_t request_id,
                                  dt_search_ops *out);
    /* `metric` is the searcher metric as reported (the method applies smaller_is_better);
     * `length` is the operation that completed. */
    dt_status (*on_validation_completed)(void *state, dt_search_ctx *sc, int64_t request_id,
                                         double metric, dt_length length, dt_search_ops *out);
    dt_status (*on_trial_closed)(void *state, dt_search_ctx *sc, int64_t request_id,
                                 dt_search_ops *out);
    dt_status (*on_trial_exited_early)(void *state, dt_search_ctx *sc, int64_t request_id,
                                       dt_search_exit why, dt_search_ops *out);
    /* Progress of the search in [0, 1]. */
    double (*progress)(void *state, dt_search_ctx *sc);
    /* The method's state as JSON (new reference), and back. */
    json_t *(*save)(void *state);
    dt_status (*load)(void *state, const json_t *saved);
    void (*free)(void *state);
} dt_search_method;

/* What a model directory exports for `searcher: {name: custom, method: NAME}`: a function
 * named NAME that fills `out` with a method and fresh state for the experiment `cfg`. The
 * master loads it from the experiment's built object (docs/experiments.md). */
typedef dt_status (*dt_search_method_new_fn)(const dt_expconf *cfg, dt_search_method *out);

/* A searcher over a caller's method (`custom`); the method's state is the caller's until
 * dt_searcher_free calls method->free. */
DT_API dt_status dt_searcher_new_custom(const dt_expconf *cfg, uint64_t seed,
                                        const dt_search_method *method, dt_searcher **out);
/* Where dt_search_trial_metrics reads a trial's latest validation metrics: fn(arg,
 * request_id) returns a new reference or NULL (arg is borrowed). */
typedef json_t *(*dt_search_metrics_fn)(void *arg, int64_t request_id);

/* The events; each appends the method's operations to `out`. The master reports trial_closed
 * for every created trial once its process has exited (after trial_exited_early too); a repeated
 * trial_closed is ignored, an event for a request never made is DT_ERR_STATE. */
/* The whole searcher state (counts, RNG, method state) as JSON (new reference; NULL with
 * DT_ERR_OOM); load it into a searcher made from the same config to continue the search.
 * DT_ERR_FORMAT when the snapshot is not one of this searcher's. */

#ifdef __cplusplus
}
#endif
#endif
