/*
 * launch/launch.h — running trials from a model directory: building the user's C sources into
 * a shared object and loading the trial definition it exports; preparing one trial of an
 * experiment config (hyperparameters, seed, checkpoint directory, resume point, lengths in the
 * fit loop's units) and running it in this process, or re-launching this program under mpirun
 * for a trial of several slots. `dtrain train` is these calls in order; docs/cli.md.
 */
#ifndef DTRAIN_RUNNER_H
#define DTRAIN_RUNNER_H

#include "dtrain/config.h"
#include "dtrain/trial.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where the dtrain headers and library are for building model directories: $DTRAIN_INCLUDE /
 * $DTRAIN_LIBDIR if set, else the install the running binary belongs to (<bin>/../include and
 * <bin>/../lib), else the build tree it was built in (recorded at configure time).
 * DT_ERR_CONFIG naming the places looked at, with a hint, if none holds both. */
DT_API dt_status dt_modeldir_toolchain(char *include_dir, size_t ni, char *lib_dir, size_t nl);

/* Build `model_dir` into a shared object whose path is written to so_path:
 *   - with a Makefile: `make -C model_dir DTRAIN_INCLUDE=... DTRAIN_LIBDIR=... <module>.so`
 *     and the object is model_dir/<module>.so;
 *   - without: every *.c of model_dir compiled with `cc -shared -fPIC -O2 -fopenmp` against
 *     the dtrain headers and library into out_dir/<module>.so;
 *   - module NULL (a command entrypoint): the Makefile's default target, or nothing without a
 *     Makefile; so_path is "".
 * DT_ERR_CONFIG when the directory has no sources or the build fails: the message says which
 * command failed and ends with the tail of its messages (file:line: ...), so they reach
 * whoever asked for the build; a successful build's warnings go to stderr. */
DT_API dt_status dt_modeldir_build(const char *model_dir, const char *module, const char *out_dir,
                                   char *so_path, size_t n);

/* dlopen so_path and find the `const dt_trial_def` named `symbol`. *handle receives the
 * dlopen handle (dlclose it when done). NULL with DT_ERR_CONFIG naming the file or symbol
 * (and listing the trial definitions the object does export, if any). */
DT_API const dt_trial_def *dt_modeldir_load(const char *so_path, const char *symbol, void **handle);

/* ---- trial launch (src/launch/launch.c) ---------------------------------------------------
 *
 * A model directory is built once (dt_trial_lib_build) and any number of trials run from it,
 * each prepared from the config and its own hyperparameters (dt_trial_prepare) and run with
 * dt_trial_run_local. A trial of several slots is this program again under mpirun, one
 * process per slot (dt_launch_mpirun); each of those processes then runs the trial locally. */

/* A model directory built into a shared object and loaded: the trial definition it exports. */
typedef struct dt_trial_lib dt_trial_lib;

/* Build `model_dir` (dt_modeldir_build into a new temporary directory) and load the
 * entrypoint's symbol from it. DT_ERR_CONFIG / DT_ERR_IO with the build's or the loader's
 * message (the compiler's own lines go to stderr); *out = NULL on error. */
DT_API dt_status dt_trial_lib_build(const dt_expconf *cfg, const char *model_dir,
                                    dt_trial_lib **out);
/* Load an already built object `so_path` and its `symbol` (a trial of a model directory
 * built once for many trials); `model_dir` is the directory it came from (relative paths in
 * hyperparameters resolve there; may be NULL). DT_ERR_CONFIG as dt_modeldir_load. */
DT_API dt_status dt_trial_lib_open(const char *so_path, const char *symbol, const char *model_dir,
                                   dt_trial_lib **out);
DT_API const dt_trial_def *dt_trial_lib_def(const dt_trial_lib *lib);
/* dlclose and remove the temporary build directory (if dt_trial_lib_build made one). NULL is
 * a no-op. */
DT_API void dt_trial_lib_free(dt_trial_lib *lib);

/* How to run one trial (what `dtrain train`'s options say). Zero-initialise, then set. */
typedef struct dt_launch_opts {
    const json_t *hparams;      /* the trial's hyperparameter values (an object shaped like
                                 * `hyperparameters`, borrowed); NULL: the config's own, which
                                 * must then all be const */
    const char *checkpoint_dir; /* NULL: checkpoint_storage.host_path/<name>, else
                                 * checkpoints/<name> (relative to the working directory) */
    const char *resume;         /* NULL (start fresh), "latest" (the checkpoint the checkpoint
                                 * dir's `latest` file names) or a checkpoint directory */
    bool has_seed;              /* false: reproducibility.experiment_seed, else 0 */
    uint64_t seed;
    bool test_mode;          /* one batch of training and of validation, then a checkpoint */
    const char *metrics_out; /* JSON-lines metrics file, or NULL */
    bool progress;           /* the progress bar (the caller knows whether stderr is a tty) */
    bool quiet;              /* no progress output */
} dt_launch_opts;

/* One trial ready to run: everything the fit loop needs except the trial definition. Owns
 * every string its fields point to (it outlives the config and the options it came from). */
typedef struct dt_prepared_trial {
    json_t *config;       /* the experiment config with `hyperparameters` replaced by the
                           * trial's values (owned) */
    uint64_t seed;        /* the trial seed */
    char *checkpoint_dir; /* where its checkpoints go */
    char *resume_path;    /* the checkpoint it resumes from, or NULL */
    dt_fit_opts fit;      /* max_length in batches when the config can say how many (records,
                           * or epochs with records_per_epoch); model_dir is set by
                           * dt_trial_run_local */
} dt_prepared_trial;

/* Prepare a trial of `cfg` with `opts`. DT_ERR_CONFIG, *out = NULL, when a hyperparameter is
 * not const and opts->hparams is NULL (the message says the experiment runner searches it),
 * when opts->resume is "latest" and the checkpoint dir has no `latest` file, or when a
 * length cannot be converted to batches (the message names the missing setting). */
DT_API dt_status dt_trial_prepare(const dt_expconf *cfg, const dt_launch_opts *opts,
                                  dt_prepared_trial **out);
DT_API void dt_prepared_trial_free(dt_prepared_trial *t);

/* Set the config's environment.environment_variables in this process (before a build and a
 * trial run, which both see them). DT_ERR_OOM if setenv fails. */
DT_API dt_status dt_trial_apply_env(const dt_expconf *cfg);

/* Run the prepared trial of `lib` in this process to its end (dt_trainer_fit: stopped by
 * SIGINT/SIGTERM it checkpoints and returns DT_OK). Under mpirun every slot calls it. Returns
 * the fit loop's status and message. */
DT_API dt_status dt_trial_run_local(const dt_trial_lib *lib, const dt_prepared_trial *t);

/* `dtrain train` in this process: prepare the trial, apply the config's environment, build
 * `model_dir`, run, clean up the build. The first error's status and message. */
DT_API dt_status dt_trial_launch_local(const dt_expconf *cfg, const char *model_dir,
                                       const dt_launch_opts *opts);

/* True when a job of `slots` processes must be launched under mpirun: more than one slot and
 * this process is not already one of mpirun's ranks. */
DT_API bool dt_launch_needs_mpirun(int64_t slots);
/* The command that runs this program's `subcommand` with `argv` (its arguments, `--slots N`
 * dropped) on `slots` processes: `mpirun -np slots [--allow-run-as-root] [--oversubscribe]
 * --tag-output -x OMP_NUM_THREADS=<cores/slots, at least 1> -x DTRAIN_LAUNCHER_PID=<this
 * process's pid> <this binary> subcommand args...`, meant to replace this process (the ranks
 * die with the process of that pid: dt_ckpt_watch_launcher). A
 * NULL-terminated array of owned strings in *out (dt_launch_argv_free). DT_ERR_IO if this
 * binary cannot be located, DT_ERR_OOM. */
DT_API dt_status dt_launch_mpirun_argv(int slots, const char *subcommand, int argc,
                                       char *const *argv, char ***out);
DT_API void dt_launch_argv_free(char **argv);
/* Replace this process with that command. Returns only on failure: DT_ERR_IO saying mpirun
 * could not run (with a hint to install it), or dt_launch_mpirun_argv's error. */
DT_API dt_status dt_launch_mpirun(int slots, const char *subcommand, int argc, char *const *argv);

/* The same over the hosts of an MPI hostfile (NULL: this machine, the calls above): `mpirun -np
 * slots --hostfile FILE [--allow-run-as-root] --tag-output -x OMP_NUM_THREADS=<cores / the
 * most slots of one host> -x DTRAIN_LAUNCHER_PID=<pid> -x DTRAIN_LAUNCHER_HOST=<this host>
 * -x NAME for every DTRAIN_* variable set here <this binary> subcommand args...`, with
 * `--slots N` and `--hostfile F` dropped from args. Ranks on other hosts get no environment
 * but the -x'd one (as under ssh); they die with their host's MPI daemon. DT_ERR_IO /
 * DT_ERR_CONFIG for a hostfile that cannot be read or has fewer slots than `slots`, else as
 * dt_launch_mpirun_argv. */
DT_API dt_status dt_launch_mpirun_hosts_argv(int slots, const char *hostfile,
                                             const char *subcommand, int argc, char *const *argv,
                                             char ***out);
DT_API dt_status dt_launch_mpirun_hosts(int slots, const char *hostfile, const char *subcommand,
                                        int argc, char *const *argv);

/* An MPI hostfile read (OpenMPI's format: `HOST [slots=N] [max_slots=M]` per line, `#`
 * comments; no slots= is one slot; a host named twice adds up). */
typedef struct dt_hostfile {
    int n_hosts;
    char **hosts; /* in file order */
    int *slots;   /* slots[i] on hosts[i] */
    int total;    /* the sum of slots */
} dt_hostfile;

/* Read `path`. DT_ERR_IO (unreadable) or DT_ERR_CONFIG (path:line and what is wrong; no host)
 * with *out NULL. Free with dt_hostfile_free. */
DT_API dt_status dt_hostfile_load(const char *path, dt_hostfile **out);
/* DT_OK when `slots` fit in h's total, else DT_ERR_CONFIG saying both counts (path names h). */
DT_API dt_status dt_hostfile_check(const dt_hostfile *h, const char *path, int64_t slots);
/* Write n lines `hosts[i] slots=slots[i]` to `path`. DT_ERR_IO naming it. */
DT_API dt_status dt_hostfile_write(const char *path, char *const *hosts, const int *slots, int n);
DT_API void dt_hostfile_free(dt_hostfile *h);

#ifdef __cplusplus
}
#endif
#endif
