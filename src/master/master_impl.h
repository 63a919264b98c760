/*
 * master_impl.h — the master's state, shared by its parts:
 *   master.c     the process: home directory, pid file, store, server, the scheduler thread
 *   exp.c        experiments: create (config, build), searcher events, state changes, recovery
 *   sched.c      slots, launching and watching trial runs, restarts, pausing and killing
 *   api_*.c      the REST handlers (docs/api.md); api.c holds the route table
 *
 * One mutex (master.lock) guards everything below: the HTTP server calls handlers one at a
 * time on its thread and each takes the lock; the scheduler thread takes it for each tick.
 * The store is the truth that survives a crash; these structures mirror the live part of it.
 */
#ifndef DTRAIN_MASTER_IMPL_H
#define DTRAIN_MASTER_IMPL_H

#include "dtrain/config.h"
#include "launch/launcher.h"
#include "master/master.h"
#include "dtrain/search.h"

#include "http.h"
#include "states.h"
#include "store.h"

#include <pthread.h>
#include <stdbool.h>

#define M_MAX_OPS 64 /* validate_after operations queued for one trial */

typedef struct m_exp m_exp;

typedef struct m_trial {
    int64_t id, request_id;
    m_exp *exp;
    m_state state; /* ACTIVE, PAUSED, or terminal */
    json_t *hparams;
    uint64_t seed;
    /* the searcher's operations for this trial: lengths still to reach, head first */
    dt_length ops[M_MAX_OPS];
    int n_ops;
    bool closed;         /* the searcher closed it: no more operations will come */
    dt_length completed; /* the longest operation completed (n 0: none) */
    bool exited_early;   /* reported to the searcher as exited early */
    /* the current run */
    int64_t run_id;
    dt_launch_run *run; /* NULL when not running */
    int *cpus;          /* its slots' cores (n = the experiment's slots_per_trial) */
    bool preempt;       /* asked to checkpoint and exit (pause, cancel, master shutdown) */
    bool killing;       /* killed by a user (trial or experiment kill) */
    bool invalid_hp;    /* the run said its hyperparameters are invalid */
    int64_t restarts;
    double best; /* the best searcher metric validated so far (NAN: none) */
    int64_t batches, total_batches;
    double last_progress_write; /* when batches last went to the store */
    double started;             /* when the current run started (monotonic s) */
    bool first_batch_seen;      /* the current run has reported progress */
    double last_heard;          /* the current run's last report or heartbeat (monotonic s) */
    char *silence_reason;       /* why its last run was killed for silence (NULL: it was not) */
} m_trial;

struct m_exp {
    int64_t id;
    m_state state;
    dt_expconf *cfg;
    dt_searcher *search;
    void *search_lib; /* a custom searcher's object (dlopen handle), or NULL */
    char *so_path;    /* the model directory built once for every trial */
    char *model_dir;  /* absolute */
    char *ckpt_root;  /* checkpoint_storage host_path[/storage_path] */
    m_trial **trials;
    int n_trials, cap_trials;
    bool shutdown; /* the searcher said the search is over */
    bool shutdown_cancel, shutdown_failure;
    struct master *owner;  /* the master (its store answers the searcher's metrics queries) */
    dt_launcher *launcher; /* its trials' (the master's local one, or its own Slurm one) */
    bool own_launcher;
};

/* A line a trial printed, waiting to go into the store. */
typedef struct m_log {
    int64_t trial_id;
    int rank;
    char *line;
} m_log;

/* An encoded answer of the metrics route (api_charts.c), kept while the store's metrics are
 * unchanged. */
typedef struct m_chart_answer {
    char *key;    /* the experiment and the query, as JSON text; NULL: a free slot */
    uint64_t gen; /* dt_store_metrics_generation when it was made */
    uint64_t used;
    char *body; /* the answer's bytes */
    size_t len;
    const char *type; /* its content type (static), NULL for JSON */
} m_chart_answer;
#define M_CHART_ANSWERS 8

/* What the scheduler tells the experiments (exp.c), the one way it reaches them: exp.c calls
 * the scheduler directly (kill, launchers), the scheduler answers only through these. */
typedef struct m_sched_events {
    void (*run_ended)(struct master *m, m_trial *t, int exit_code); /* a run's processes are gone */
    void (*start_failed)(struct master *m, m_trial *t);             /* a run could not start */
} m_sched_events;

typedef struct master {
    pthread_mutex_t lock;
    dt_master_opts o;
    char home[4096];
    char url[256];         /* how trials reach us */
    char cluster_url[256]; /* how trials on other hosts (a Slurm job) reach us */
    char token[80];        /* the access token (passed to trials as DTRAIN_TOKEN) */
    dt_store *store;
    dt_http_server *http;
    dt_launcher *launcher;
    volatile int stop; /* set by a signal or the shutdown route */
    int slots;
    int *slot_busy;            /* trial id using each slot, 0 = free */
    struct dt_hostfile *hosts; /* --hostfile: the slots' hosts (NULL: this machine) */
    int *slot_host;            /* with hosts: slot i is on hosts->hosts[slot_host[i]] */
    m_exp **exps;
    int n_exps, cap_exps;
    /* log lines from the launcher's reader thread (own lock: never taken with the above) */
    pthread_mutex_t log_lock;
    m_log *logs;
    int n_logs, cap_logs;
    double started;        /* monotonic s, for uptimes */
    char started_utc[32];  /* the same moment as the store writes times (ISO 8601, UTC) */
    char store_path[4200]; /* <home>/store.db */
    m_sched_events events; /* the scheduler's reports (exp.c's handlers) */
    m_chart_answer charts[M_CHART_ANSWERS];
    uint64_t charts_clock;
} master;

/* ---- api_charts.c ---- */
/* Free the kept chart answers. */
void m_charts_free(master *m);

/* ---- snapshot.c ---- */
struct dt__buf;
/* Create an experiment (m_exp_create_at) from its model definition: `tar` (the det door's
 * upload, or m_snapshot_pack's), or NULL: m_snapshot_pack here. The tar is unpacked into a new $home/contexts/ctx-XXXXXX the experiment runs from,
 * and kept in the store. Nothing is left behind on error. */
dt_status m_exp_create_from(master *m, const json_t *body, const struct dt__buf *tar, int64_t *id,
                            json_t **warnings);
/* The model definition a create request names (its model_dir and include: absolute paths on
 * the master's machine) packed into tar, up to 96 MiB (pack_dir.c). Reads files only: called
 * outside the master's lock. */
dt_status m_snapshot_pack(const json_t *body, struct dt__buf *tar);

/* ---- exp_build.c ---- */
/* Unpack `tar` into a new directory $home/contexts/ctx-XXXXXX (written to dir). */
dt_status m_snapshot_unpack(master *m, const void *tar, size_t len, char *dir, size_t n);
/* Build `dir` into $home/builds/exp-<id> (its object's path into so) and record it. */
dt_status m_exp_build(master *m, int64_t id, const char *dir, const dt_expconf *cfg, char *so,
                      size_t n);
/* After a restart: unpack the kept model definition again when the experiment's directory is
 * gone, build it again when its object is. */
dt_status m_snapshot_restore(master *m, m_exp *e);

/* ---- exp.c ---- */
/* Create an experiment from a request body (config_text, config_name, overrides, activate),
 * run from the model directory `dir` (the experiment's own copy, snapshot.c). On success *id
 * is the new experiment's; on error the store is unchanged and the error message says what
 * was wrong (the handler answers 400). */
dt_status m_exp_create_at(master *m, const json_t *body, const char *dir, int64_t *id,
                          json_t **warnings);
m_exp *m_exp_find(master *m, int64_t id);
m_trial *m_trial_find(master *m, int64_t id, m_exp **exp);
/* Load the live experiments from the store after a start (their searchers from the
 * snapshots); trials that were running are queued to run again from their checkpoints. */
dt_status m_exp_recover(master *m);
/* A user's state change. DT_ERR_STATE when the experiment's state does not allow it. */
dt_status m_exp_action(master *m, m_exp *e, m_action action);
/* Delete a terminal experiment: its checkpoint files, build, rows. */
dt_status m_exp_delete(master *m, int64_t id);
/* Searcher events from a trial run (the run's reports and its exit). */
dt_status m_trial_completed_op(master *m, m_trial *t, dt_length len, double metric);
/* Validation rows of a search timed by a reported metric (searcher.time_metric): each row with
 * that metric and the searcher's is a searcher event at the metric's value. */
void m_trial_reported_time(master *m, m_trial *t, const json_t *rows);
void m_trial_run_ended(master *m, m_trial *t, int code);
/* A user's kill of one trial: its run is killed now; it ends CANCELED. */
void m_trial_kill(master *m, m_trial *t);
/* A trial whose run cannot start: it ends ERROR and its searcher is told (it exited early), so
 * a search waiting on it goes on or ends. */
void m_trial_start_failed(master *m, m_trial *t);
/* The experiment reaches a terminal state when nothing runs any more. */
void m_exp_settle(master *m, m_exp *e);
/* Set and store a trial's / experiment's state. */
void m_trial_set_state(master *m, m_trial *t, m_state state, const char *reason);
void m_exp_set_state(master *m, m_exp *e, m_state state);
/* Where the trial's checkpoints go: <ckpt_root>/<exp uuid-ish>/trial-<id>. */
void m_trial_ckpt_dir(const m_trial *t, char *buf, size_t n);
void m_exp_free(m_exp *e);
/* The checkpoint root of an experiment with config `cfg` (malloc'd; NULL when out of memory):
 * its trials' and its searcher's files are under <root>/exp-<id>. */
char *m_exp_ckpt_root(master *m, const dt_expconf *cfg);

/* ---- sched.c ---- */
/* One scheduling pass: reap ended runs, flush logs, start what fits. */
void m_sched_tick(master *m);
/* Stop every run (master shutdown: preempt, wait a little, then kill). */
void m_sched_stop_all(master *m, double grace_s);
/* Give experiment e its launcher: cfg->launcher (recorded into its config when the master's
 * default chose it). DT_ERR_IO / DT_ERR_CONFIG when a Slurm launcher cannot be had. */
dt_status m_sched_exp_launcher(master *m, m_exp *e);
/* Kill a trial's run now (user kill) and wait until its processes are gone. */
void m_sched_kill(master *m, m_trial *t);
/* ---- hosts.c ---- */
/* With o.hostfile: read it, the master's slots become its slots. DT_ERR_CONFIG / DT_ERR_IO. */
dt_status m_hosts_load(master *m);
/* Write the hostfile of t's current slots, its path into `path`. DT_ERR_IO / DT_ERR_OOM. */
dt_status m_hosts_write_run(master *m, const m_trial *t, char *path, size_t n);
/* Remove that file (the run is over). */
void m_hosts_run_done(master *m, const m_trial *t);
void m_hosts_free(master *m);

/* The launcher's log callback. */
void m_sched_on_log(void *arg, int64_t trial_id, int rank, const char *line);

/* ---- api.c ---- */
extern const dt_http_route m_routes[];
extern const int m_n_routes;

/* ---- helpers ---- */
/* Is `host` the loopback default (127.0.0.1, ::1, localhost), reachable only from here? */
bool m_loopback(const char *host);
/* 64 random hex digits and a NUL into buf (65 bytes) from /dev/urandom. DT_ERR_IO. */
dt_status m_random_hex(char *buf);
/* Parse "{batches|epochs|records: N}" from JSON / render it. */
dt_status m_length_from_json(const json_t *j, dt_length *out);
json_t *m_length_json(dt_length len);

#endif
