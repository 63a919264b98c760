/* cli.h — subcommand entry points of the dtrain command and what they share. Each entry point
 * returns the process exit code: 0 done, 1 the operation failed (the master said no, a trial
 * or experiment failed), 2 a usage error, 3 the master cannot be reached. */
#ifndef DT_CLI_H
#define DT_CLI_H

#include "output.h"

#include "master/master.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum { DT_EXIT_OK = 0, DT_EXIT_FAILED = 1, DT_EXIT_USAGE = 2, DT_EXIT_UNREACHABLE = 3 };

int dt_cli_bench(int argc, char **argv);
int dt_cli_worker(int argc, char **argv);
int dt_cli_train(int argc, char **argv);
/* Replace this process with `mpirun -np slots <dtrain> <subcommand> <args minus --slots>`
 * (dt_launch_mpirun). Returns only on failure, after printing why: the exit code 1. */
int dt_cli_mpirun(int argc, char **argv, int slots, const char *subcommand);

/* The platform's verbs: `dtrain master|experiment|trial|checkpoint ...` (argv after the verb). */
int dt_cli_master(int argc, char **argv);
int dt_cli_experiment(int argc, char **argv);
int dt_cli_trial(int argc, char **argv);
int dt_cli_checkpoint(int argc, char **argv);
int dt_cli_model(int argc, char **argv);
/* `dtrain lm <verb> ...`: language models from a Hugging Face model directory (lm.c). */
int dt_cli_lm(int argc, char **argv);
/* `dtrain config check CONFIG [MODEL_DIR]` (config.c). */
int dt_cli_config(int argc, char **argv);

/* Print a usage error (`err`) as `who`, then the verb's usage: returns 2 (args.c). */
int dt_cli_usage_error(const char *who, const char *err, void (*usage)(FILE *));

/* ---- remote.c: talking to the master ---- */

/* A client of the master at $DTRAIN_MASTER (default http://127.0.0.1:8080). When none
 * answers there and `autostart` is set and the address is loopback, start this binary's
 * `master` in the background (log in $DTRAIN_HOME/master.log) and say so on stderr. NULL
 * after printing why, with a hint, as `who` (exit code 3). */
dt_client *dt_cli_connect(const char *who, bool autostart);
/* One API call (dt_client_call). 0 with *out (may be NULL) on success; else prints the
 * master's message as `who` (adding `hint` when the message has none) and returns 1, or 3
 * when the master cannot be reached. */
int dt_cli_request(dt_client *c, const char *who, const char *method, const char *path,
                   const json_t *body, json_t **out, const char *hint);
/* Print the log lines at `path` (".../logs"): every line so far, or with `follow` until the
 * answer says done (the experiment is terminal and every line was sent). `with_trial`
 * prefixes each line with its trial. 0, or request's error code. */
int dt_cli_print_logs(dt_client *c, const char *who, const char *path, bool follow,
                      bool with_trial);
/* Poll the experiment until it is terminal; *state (malloc'd) gets the final state. */
int dt_cli_wait_experiment(dt_client *c, const char *who, int64_t id, char **state);
/* GET `path` and print it: the answer itself with --json (mode DT_CLI_JSON), else its
 * member `key` through `print`. 0, or request's error code. */
int dt_cli_show(dt_client *c, const char *who, const char *path, const char *hint, const char *key,
                dt_cli_mode mode, void (*print)(const json_t *items, FILE *f, dt_cli_mode mode));
/* POST `path` (a state change of `kind` "experiment" or "trial") and print "KIND ID: STATE"
 * from the answer's member `kind`. 0, or request's error code. */
int dt_cli_change(dt_client *c, const char *who, const char *path, const char *hint,
                  const char *kind, int64_t id);

/* ---- experiment.c ---- */
/* Submit the config at `config_path` with `overrides` (an array of "KEY=VALUE" strings) on the
 * model directory, and say so: 0 with *client (the caller frees it) and *id, else the exit
 * code after printing why as `who`. */
int dt_cli_create_experiment(const char *who, const char *config_path, const char *model_dir,
                             const json_t *overrides, bool activate, dt_client **client,
                             int64_t *id);
/* Stream the experiment's logs until it ends, then print "experiment ID: STATE" on stderr: 0
 * with *state (malloc'd), or the exit code of the request that failed. */
int dt_cli_follow_experiment(dt_client *c, const char *who, int64_t id, char **state);
/* ---- files.c: copies ---- */

/* An error message into err (vsnprintf: a long path is cut, never overflows). */
void dt_cli_seterr(char *err, size_t errn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Remove path and everything under it, never following a link. */
void dt_cli_remove_tree(const char *path);
/* Copy the regular file src to the new file dst (refused when dst exists); false with err. */
bool dt_cli_copy_file(const char *src, const char *dst, char *err, size_t errn);
/* Copy the regular files and directories under src into the existing directory dst, adding
 * the files copied to *files; false with err at anything else (a link, a device). */
bool dt_cli_copy_tree(const char *src, const char *dst, int64_t *files, char *err, size_t errn);
/* A new context directory $DTRAIN_HOME/contexts/ctx-XXXXXX (its path in ctx) holding a copy
 * of model_dir plus each of the n `include` paths (a file or a directory) under its last
 * name. False with err (nothing left behind) for a missing or unreadable path, a name the
 * model directory or an earlier include already has, or a failed copy. */
bool dt_cli_make_context(const char *model_dir, const char *const *include, int n, char *ctx,
                         size_t cap, char *err, size_t errn);

/* ---- dsat.c ---- */
int dt_cli_dsat(int argc, char **argv);
/* ---- trial.c ---- */

/* The trials table of `describe` and `trial list`: id, state, batches, best validation,
 * restarts, hyperparameters. */
void dt_cli_print_trials(const json_t *trials, FILE *f, dt_cli_mode mode);

/* ---- checkpoint.c ---- */

/* A checkpoints table: uuid, trial, batches, state, validation metric, bytes, report time. */
void dt_cli_print_checkpoints(const json_t *ckpts, FILE *f, dt_cli_mode mode);

#endif
