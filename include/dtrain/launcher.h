/*
 * dtrain/launcher.h — starting and stopping the processes of one trial run.
 *
 * A launcher is a table of operations (like dt_comm's backends): the local one runs a trial
 * as child processes of the caller on this machine; a cluster launcher (mpirun with a
 * hostfile, Slurm) comes behind the same table. The master's scheduler decides which trial
 * runs on which slots; the launcher only starts, watches, signals and reaps.
 *
 * Local launcher (dt_launcher_local_new): the command runs in a process group of its own,
 * bound to the given cores (sched_setaffinity, inherited by mpirun's ranks), with
 * PR_SET_PDEATHSIG so it dies with the thread that launched it, and its stdout and stderr
 * read line by line by a reader thread and handed to on_log (mpirun's --tag-output prefixes
 * give the rank). A run is over only when every process of its group is gone.
 */
#ifndef DTRAIN_LAUNCHER_H
#define DTRAIN_LAUNCHER_H

#include "dtrain/base.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A line a run printed: rank -1 when the launcher cannot tell. Called from the launcher's
 * reader thread; `line` has no newline and is valid during the call only. */
typedef void (*dt_log_fn)(void *arg, int64_t trial_id, int rank, const char *line);

typedef struct dt_launch_spec {
    int64_t trial_id;  /* for on_log */
    char *const *argv; /* the command (argv[0] a path), NULL-terminated */
    char *const *env;  /* KEY=VALUE added to this process's environment, NULL-terminated or NULL */
    const char *workdir; /* NULL: the caller's */
    const int *cpus;     /* cores to bind the run to (n_cpus of them); NULL: no binding */
    int n_cpus;
    dt_log_fn on_log;
    void *log_arg;
} dt_launch_spec;

typedef struct dt_launcher dt_launcher;
typedef struct dt_launch_run dt_launch_run; /* one started run */

typedef struct dt_launcher_ops {
    const char *name; /* "local", ... */
    /* Start the run. DT_ERR_IO naming the command when it cannot start. */
    dt_status (*start)(dt_launcher *l, const dt_launch_spec *spec, dt_launch_run **out);
    /* Non-blocking: true once the run's main process has exited, with its exit code in
     * *code (128 + signal number when killed by a signal). */
    bool (*exited)(dt_launcher *l, dt_launch_run *r, int *code);
    /* Send `sig` to every process of the run. */
    dt_status (*signal)(dt_launcher *l, dt_launch_run *r, int sig);
    /* SIGKILL every process of the run and return once all are gone and its output is
     * read. */
    void (*kill_wait)(dt_launcher *l, dt_launch_run *r);
    /* The run's process group id (the master records it to clean up after a crash). */
    pid_t (*pgid)(dt_launcher *l, dt_launch_run *r);
    /* Wait until the run's output is read to its end, then free it (the run has exited or
     * was killed). */
    void (*release)(dt_launcher *l, dt_launch_run *r);
    void (*free)(dt_launcher *l);
} dt_launcher_ops;

struct dt_launcher {
    const dt_launcher_ops *ops;
    void *impl;
};

/* The local launcher. NULL with DT_ERR_OOM. */
DT_API dt_launcher *dt_launcher_local_new(void);

/* SIGKILL process group `pgid` left by an earlier master (not our child) and wait, up to
 * `timeout_s`, until no process of it is left. DT_OK when none is left (or none was there);
 * DT_ERR_STATE naming the group when some survive the timeout. */
DT_API dt_status dt_launch_kill_group_wait(pid_t pgid, double timeout_s);

#ifdef __cplusplus
}
#endif
#endif
