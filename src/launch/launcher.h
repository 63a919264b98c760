/*
 * launch/launcher.h — starting and stopping the processes of one trial run.
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
 * give the rank). A run is over only when every process of its group is gone. Its handle is
 * the process group id, named for ever with its leader's start time (handle_start); a group is
 * signalled only while its unreaped leader holds the id, or once that start time matched.
 *
 * Slurm launcher (dt_launcher_slurm_new, src/launch/launcher_slurm.c): each run is one
 * `sbatch` job (ntasks = slots, cpus-per-task, partition, account, time and extra sbatch
 * arguments from the options) whose batch script exports the spec's environment, enters the
 * workdir and execs the command (a multi-slot `dtrain worker` runs its ranks with mpirun
 * inside the allocation). A poller thread asks `squeue` for every run's state, `scontrol` /
 * `sacct` for an ended job's exit code, and tails the job's output file into on_log. A job
 * Slurm refuses is a DT_ERR_IO from start naming sbatch's message. signal is `scancel --full
 * --signal`; kill_wait is `scancel --signal=KILL` then waits until Slurm says the job ended.
 * Its handle is the job id. The job's files live in `job_dir`, which the compute nodes must
 * see at the same path (as they must see the model build and checkpoint storage).
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
    int slots; /* processes the run starts (a cluster launcher allocates them); 0: 1 */
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
    /* What identifies the run outside this process (local: its process group id, Slurm: its
     * job id): the master records it so that a master started after a crash can reclaim it. */
    int64_t (*handle)(dt_launcher *l, dt_launch_run *r);
    /* The start time that, with the handle, names the run for ever (local: the group leader's
     * dt_launch_proc_start; 0 when the launcher's handles are never reused, as Slurm's job
     * ids). Recorded with the handle. */
    uint64_t (*handle_start)(dt_launcher *l, dt_launch_run *r);
    /* Stop whatever is left of a run an earlier process started (its `handle` and
     * `handle_start`) and wait, up to timeout_s, until it is gone. A handle that names
     * another process now (a reused pid: its start time differs) is left alone: the run is
     * gone. DT_OK when gone (or never there); DT_ERR_STATE naming it when it survives the
     * timeout; DT_ERR_INVALID for a handle that cannot be one. */
    dt_status (*reclaim)(dt_launcher *l, int64_t handle, uint64_t handle_start, double timeout_s);
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

/* How a Slurm launcher submits its jobs. Strings are copied. */
typedef struct dt_slurm_opts {
    const char *job_dir;   /* batch scripts and job output (shared with the compute nodes) */
    const char *partition; /* NULL: Slurm's default (likewise account and time) */
    const char *account;
    const char *time;               /* sbatch --time, e.g. "2:00:00" */
    const char *const *sbatch_args; /* more sbatch arguments, n_sbatch_args of them */
    int n_sbatch_args;
    int slots_per_node; /* > 0: --ntasks-per-node and --nodes from it; 0: Slurm places */
    int cpus_per_slot;  /* --cpus-per-task (and OMP_NUM_THREADS); 0: 1 */
    double poll_s;      /* how often squeue is asked; 0: 1 s */
} dt_slurm_opts;

/* A Slurm launcher. NULL with DT_ERR_IO when sbatch is not on PATH or job_dir cannot be
 * made, DT_ERR_OOM. */
DT_API dt_launcher *dt_launcher_slurm_new(const dt_slurm_opts *o);

/* The start time of process `pid` (field 22 of /proc/<pid>/stat, clock ticks after boot);
 * 0 when there is no such process. */
DT_API uint64_t dt_launch_proc_start(pid_t pid);

/* SIGKILL process group `pgid` left by an earlier master (not our child), whose leader started
 * at `start` (dt_launch_proc_start when the run began), and wait, up to `timeout_s`, until no
 * process of it is left. A group that is not that run any more (the pid reused: another start
 * time; or `start` 0, unknown) is not signalled and counts as gone. DT_OK when none is left
 * (or none was there, or it is not the run's); DT_ERR_STATE naming the group when some survive
 * the timeout. */
DT_API dt_status dt_launch_kill_group_wait(pid_t pgid, uint64_t start, double timeout_s);

#ifdef __cplusplus
}
#endif
#endif
