/* cmdrun_impl.h — running a helper command (the compiler, make, sbatch, squeue ...) and keeping
 * what it printed, so that its messages can go into an error (cmdrun.c). */
#ifndef DT_RUNNER_CMDRUN_IMPL_H
#define DT_RUNNER_CMDRUN_IMPL_H

#include <stddef.h>

/* Run argv (NULL-terminated, argv[0] looked up on PATH) and wait, its stdout and stderr read
 * into out[0 .. n) (the last n - 1 bytes when there are more, NUL-terminated). Returns the exit
 * status (128 + signal when killed), or -1 if it could not start. */
int dt__cmd_run(char *const *argv, char *out, size_t n);

#endif
