/*
 * master/master.h — the master (`dtrain master`), its trial-run side and the worker; the
 * client of its REST API is the public dtrain/client.h.
 *
 * The master is one long-running process: it owns the experiment store, runs every
 * experiment's searcher, schedules trials onto slots and serves the REST API (docs/api.md)
 * that the CLI, the trials and the web UI use.
 */
#ifndef DTRAIN_MASTER_H
#define DTRAIN_MASTER_H

#include "dtrain/base.h"
#include "dtrain/client.h"
#include "dtrain/core.h"

#include <jansson.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* GET path and keep the answer's bytes as they are (*out malloc'd, NUL-terminated, *len bytes
 * without the NUL): for answers that are not JSON (a chart's binary form). An HTTP error is
 * the status with the master's message, as dt_client_call. */
dt_status dt__client_get_bytes(dt_client *c, const char *path, char **out, size_t *len);

/* ---- the master ---- */

struct dt_http_route; /* the server's route shape (src/master/http.h), for the web UI's routes */

typedef struct dt_master_opts {
    const char *host;     /* default 127.0.0.1 */
    int port;             /* default 8080; 0: any free port (written to <home>/master.port) */
    int slots;            /* default: the machine's cores */
    const char *hostfile; /* an MPI hostfile: trials run on its hosts, its slots are the
                             master's (docs/clusters.md); NULL: this machine */
    const char *home;     /* NULL: $DTRAIN_HOME, else ~/.dtrain (the store, logs, pid file) */
    bool quiet;           /* no log lines on stderr */
    const struct dt_http_route *routes; /* more routes after the REST API's (the web UI) */
    int n_routes;
    const char *launcher; /* experiments' default launcher: "local" (default) or "slurm" */
    double slurm_poll_s;  /* how often Slurm launchers ask squeue; 0: 1 s */
} dt_master_opts;

/* The master's access token: <home>/master.token (home NULL: dt_master_home), created with
 * mode 0600 when missing (64 hex digits). Every request needs it when the master is bound to
 * any address but 127.0.0.1 / ::1 / localhost. DT_ERR_IO naming the file. */
DT_API dt_status dt_master_token(const char *home, char *buf, size_t n);

/* Where dtrain keeps its state: $DTRAIN_HOME, else $HOME/.dtrain (written to buf). */
DT_API const char *dt_master_home(char *buf, size_t n);

/* Run the master until SIGINT / SIGTERM or POST /api/v1/master/shutdown. DT_ERR_IO when it
 * cannot bind its address or open its store (the message says which and what to do),
 * DT_ERR_FORMAT for a store that is not one or is from a newer dtrain. */
DT_API dt_status dt_master_run(const dt_master_opts *o);

/* ---- a trial run's side ---- */

typedef struct dt_core_master_opts {
    const char *url;            /* NULL: $DTRAIN_MASTER or the default */
    int64_t trial_id, run;      /* DTRAIN_TRIAL_ID, DTRAIN_TRIAL_RUN */
    bool chief;                 /* rank 0: the only slot that talks to the master */
    const char *checkpoint_dir; /* TensorBoard files in <dir>/tensorboard (NULL: none) */
    double lost_after_s;        /* the master unreachable this long: lost (default 10) */
} dt_core_master_opts;

/* The master-backed core (core.h) of a trial run the master started: reports over the
 * trial-facing routes of docs/api.md (src/master/core_master.c). A 409 (the run was replaced)
 * or the master unreachable for lost_after_s makes it lost (dt_core.lost). NULL with
 * DT_ERR_OOM / DT_ERR_CONFIG (a bad url). */
DT_API dt_core *dt_core_master_new(const dt_core_master_opts *o);

/* The exit status of a worker whose trial called its hyperparameters invalid. */
#define DT_WORKER_EXIT_INVALID_HP 3

/* `dtrain worker`: what the master runs for a trial (one process per slot, under mpirun for
 * several). Reads DTRAIN_MASTER, DTRAIN_TRIAL_ID and DTRAIN_TRIAL_RUN, gets the trial's spec,
 * and runs the trial with the master-backed core (a command entrypoint is executed instead,
 * in the model directory, with the same environment). The process exit status: 0 done or
 * stopped with a checkpoint, 3 the trial called its hyperparameters invalid (early_exit
 * invalid_hp was posted), 1 any other failure (the error line on stderr). */
DT_API int dt_worker_main(void);

#ifdef __cplusplus
}
#endif
#endif
