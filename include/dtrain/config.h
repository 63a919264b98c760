/*
 * dtrain/config.h — the experiment configuration.
 *
 * dt_expconf: a Determined-style experiment config (entrypoint, hyperparameters, searcher,
 * lengths, checkpoint storage, environment, ...) parsed and validated into a C struct with
 * base's config toolkit (base/confcheck.h). Errors are DT_ERR_CONFIG with "file:line:col:
 * key.path ..." messages naming the file; unknown keys are warnings with a "did you mean ...?"
 * suggestion, keys without effect here are warnings saying why, removed keys are errors naming
 * the key to write instead.
 * docs/config.md is the user-facing reference. YAML loading with source positions is base's.
 *
 * Lengths (dt_length, dt_unit) and the checkpoint policy (dt_ckpt_policy) are the Trainer's
 * types from dtrain/trial.h, so a parsed config feeds dt_fit_opts without conversion.
 */
#ifndef DTRAIN_CONFIG_H
#define DTRAIN_CONFIG_H

#include "dtrain/base.h"
#include "dtrain/trial.h"

#include <jansson.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- lengths -------------------------------------------------------------------------------
 * dt_length {unit, n}, its parsing, rendering and conversion to batches are the trial layer's
 * (dtrain/trial.h, src/trial/length.c). In a config a length is written {batches: N},
 * {epochs: N} or {records: N}. */

/* ---- experiment config ------------------------------------------------------------------ */

typedef enum dt_hp_type {
    DT_HP_CONST = 0,
    DT_HP_INT,         /* integer in [minval, maxval] */
    DT_HP_DOUBLE,      /* real in [minval, maxval] */
    DT_HP_LOG,         /* base^x with x in [minval, maxval] */
    DT_HP_CATEGORICAL, /* one of vals */
} dt_hp_type;

/* One hyperparameter. Nested groups (a mapping without a `type` key) are flattened: the member
 * `lr` of group `optimizer` is named "optimizer.lr". */
typedef struct dt_hparam {
    char *name; /* dotted path under hyperparameters */
    dt_hp_type type;
    const json_t *val;     /* CONST: the value (borrowed from dt_expconf.json) */
    double minval, maxval; /* INT (integral values), DOUBLE, LOG (exponents) */
    double base;           /* LOG: default 10 */
    int64_t count;         /* INT/DOUBLE/LOG: grid points, 0 = not given */
    const json_t *vals;    /* CATEGORICAL: non-empty array (borrowed) */
    dt_yaml_pos pos;       /* where it is defined (line 0 if unknown) */
} dt_hparam;

/* searcher.dsat: the autotuner's options (docs/dsat.md), the reference's defaults. */
typedef struct dt_dsat_searcher_conf {
    int zero_stages[4];                           /* distinct, 0..3 (default 1 2 3) */
    int n_zero_stages;                            /* 1..4 */
    int64_t start_profile_step, end_profile_step; /* 1 <= start <= end (3, 5) */
    int64_t random_seed;                          /* 42 */
    double search_range_factor;                   /* > 0 (1.0) */
    int64_t trials_per_random_config;             /* random: 5 */
    int64_t early_stopping;                       /* random: 0 = never */
    int64_t max_rungs, min_binary_search_trials;  /* asha: 5, 3 */
    int64_t asha_early_stopping, divisor;         /* asha: 0, 2 */
} dt_dsat_searcher_conf;

typedef struct dt_searcher_conf {
    char *name; /* single | grid | random | adaptive_asha | async_halving | custom | dsat */
    char *metric;                  /* required */
    bool smaller_is_better;        /* default true */
    dt_length max_length;          /* n = 0 when not given (only allowed with the flag below) */
    int64_t max_trials;            /* required by random and adaptive_asha; 0 = not given */
    int64_t max_concurrent_trials; /* 0 = not given (the runner decides) */
    char *mode;                    /* adaptive_asha: aggressive | standard | conservative */
    double divisor;                /* adaptive_asha: default 4 */
    int64_t max_rungs;             /* adaptive_asha: default 5 */
    int64_t num_rungs;             /* async_halving: its one bracket's rungs (required) */
    bool stop_once;                /* adaptive_asha, async_halving: default false */
    char *time_metric;             /* adaptive_asha: the reported metric rungs count in (NULL =
                                    * none: rungs count max_length) */
    int64_t max_time;              /* with time_metric: the top rung, in its units */
    int64_t source_trial_id;       /* 0 = not given */
    char *source_checkpoint_uuid;  /* NULL = not given */
    char *method;                  /* custom: the model directory's dt_search_method_new_fn;
                                    * dsat: binary | random | asha */
    dt_dsat_searcher_conf dsat;    /* dsat only */
} dt_searcher_conf;

/* adaptive_asha, or async_halving (one bracket of num_rungs rungs): the rung searchers. */
static inline bool dt_searcher_is_asha(const dt_searcher_conf *s) {
    return s->name && (!strcmp(s->name, "adaptive_asha") || !strcmp(s->name, "async_halving"));
}

typedef struct dt_ckpt_storage_conf {
    char *type;                   /* "shared_fs" (the only type in dtrain) */
    char *host_path;              /* NULL = not given: the runner picks a default */
    char *storage_path;           /* NULL = not given; relative paths are under host_path */
    int64_t save_trial_best;      /* default 1 */
    int64_t save_trial_latest;    /* default 1 */
    int64_t save_experiment_best; /* default 0 */
} dt_ckpt_storage_conf;

/* The experiment config's `slurm` section: how the slurm launcher submits each trial. */
typedef struct dt_slurm_conf {
    char *partition, *account, *time; /* NULL: not given (Slurm's defaults) */
    int n_sbatch_args;                /* sbatch_args: more sbatch arguments, as written */
    char **sbatch_args;
    int64_t slots_per_node; /* 0: not given (Slurm places the tasks) */
    int64_t cpus_per_slot;  /* default 1 */
} dt_slurm_conf;

/* resources.max_silence when not given: ten minutes without a heartbeat (a validation or a
 * checkpoint longer than that still sends them) */
#define DT_MAX_SILENCE_DEFAULT_S 600.0

typedef struct dt_expconf {
    json_t *json;     /* the whole config (owned); the struct's json_t pointers borrow from it */
    dt_yaml_doc *doc; /* source positions (owned); NULL when parsed from json */

    char *name;         /* default: the entrypoint's symbol */
    char *description;  /* NULL if not given */
    char *entrypoint;   /* "model_def:MyTrial" */
    char *entry_module; /* "model_def": the source file stem (dots allowed: "models.mnist") */
    char *entry_symbol; /* "MyTrial": the C symbol of the const dt_trial_def */
    /* or a command ("./train", "python3 train.py", "train.sh", or a list of arguments joined
     * with /bin/sh quoting), run in the model directory, that uses the Core API; entry_module
     * and entry_symbol are then NULL */
    char *entry_command;

    int n_hparams;
    dt_hparam *hparams; /* in file order */

    dt_searcher_conf searcher;
    dt_length min_validation_period;  /* n = 0: not given */
    dt_length min_checkpoint_period;  /* n = 0: not given */
    int64_t records_per_epoch;        /* 0 = not given */
    int64_t scheduling_unit;          /* default 100 */
    bool perform_initial_validation;  /* default false */
    dt_ckpt_policy checkpoint_policy; /* default DT_CKPT_BEST */
    dt_ckpt_storage_conf checkpoint_storage;

    int64_t aggregation_frequency;     /* optimizations; default 1 */
    bool average_aggregated_gradients; /* default true */
    bool average_training_metrics;     /* default true */

    bool has_experiment_seed; /* reproducibility.experiment_seed given? */
    uint32_t experiment_seed; /* 0 <= seed < 2^31; when not given the runner picks one */

    int n_env; /* environment.environment_variables (the cpu list in the per-device form) */
    char **env_keys;
    char **env_values;

    bool profiling_enabled;  /* profiling.enabled; default false */
    int64_t profiling_begin; /* profiling.begin_on_batch (0-based); default 0 */
    int64_t profiling_end;   /* profiling.end_after_batch, inclusive; INT64_MAX = to the end */

    int64_t slots_per_trial; /* resources; default 1 */
    int64_t max_slots;       /* resources: slots the experiment's trials may use at once; 0 =
                              * no cap */
    double max_silence;      /* resources: seconds a run may go without a heartbeat before the
                              * master kills it (a restart); 0 = never; default 600 */
    char *launcher;          /* resources.launcher: "local" or "slurm"; NULL: the master's */
    dt_slurm_conf slurm;     /* the slurm section (used by the slurm launcher) */
    int64_t max_restarts;    /* default 5 */
    const json_t *data;      /* free-form object (empty object when not given) */

    /* "FILE:LINE: key has no effect: why" and unknown keys, also sent to dt_log; printed by
     * experiment create, train and config check */
    int n_warnings;
    char **warnings;
} dt_expconf;

/* Flags for the parse functions. */
enum {
    /* searcher.max_length may be missing (the command line gives it): set it afterwards with
     * dt_expconf_set_max_length. */
    DT_EXPCONF_MAX_LENGTH_OPTIONAL = 1u << 0,
};

/* Load + validate a config file. On error returns DT_ERR_IO / DT_ERR_CONFIG, *out = NULL. */
DT_API dt_status dt_expconf_load_file(const char *path, unsigned flags, dt_expconf **out);
/* The same from text; `name` prefixes positions in messages. */
DT_API dt_status dt_expconf_load_string(const char *text, const char *name, unsigned flags,
                                        dt_expconf **out);
/* Validate a json config (e.g. read back from the store); no positions in messages. The json is
 * deep-copied: the caller keeps its reference. */
DT_API dt_status dt_expconf_from_json(const json_t *json, unsigned flags, dt_expconf **out);
DT_API void dt_expconf_free(dt_expconf *cfg);

/* The checks that need the model directory, the same for experiment create, train and config
 * check: a trial entrypoint needs C sources (a directory of Python says so and what to do), a
 * command entrypoint's program must exist (on PATH or in the directory), and the DeepSpeed config
 * a const hyperparameters.deepspeed_config names must be found and accepted (its warnings are
 * appended to cfg->warnings). DT_ERR_CONFIG saying what to do. */
DT_API dt_status dt_expconf_check_model_dir(dt_expconf *cfg, const char *model_dir);

/* Set searcher.max_length (the command-line override), in the struct and in cfg->json.
 * DT_ERR_CONFIG if len.n <= 0. */
DT_API dt_status dt_expconf_set_max_length(dt_expconf *cfg, dt_length len);

/* The hyperparameter named `name` (dotted for nested ones), or NULL. */
DT_API const dt_hparam *dt_expconf_hparam(const dt_expconf *cfg, const char *name);
/* DT_OK if every hyperparameter is const; otherwise DT_ERR_CONFIG naming the first one that is
 * not (with its position), and saying that the experiment runner searches it. */
DT_API dt_status dt_expconf_require_const(const dt_expconf *cfg);
/* The values a trial sees: a new object shaped like `hyperparameters` with every definition
 * replaced by its value (nested groups stay nested). Requires all const (as above). The
 * caller owns *out. */
DT_API dt_status dt_expconf_hparam_values(const dt_expconf *cfg, json_t **out);
/* hyperparameters.global_batch_size as a positive integer. DT_ERR_CONFIG if it is missing,
 * not const, or not a positive integer — saying so and that `for_what` needs it. */
DT_API dt_status dt_expconf_global_batch_size(const dt_expconf *cfg, const char *for_what,
                                              int64_t *out);
/* dt_length_to_batches with the config's records_per_epoch and const global_batch_size (only
 * looked up when the unit needs it). `what` names the setting for messages. */
DT_API dt_status dt_expconf_length_batches(const dt_expconf *cfg, dt_length len, const char *what,
                                           int64_t *out);

#ifdef __cplusplus
}
#endif
#endif
