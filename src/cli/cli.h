/* cli.h — subcommand entry points of the dtrain command. Each returns the process exit code. */
#ifndef DT_CLI_H
#define DT_CLI_H

int dt_cli_bench(int argc, char **argv);
int dt_cli_train(int argc, char **argv);
/* Replace this process with `mpirun -np slots <dtrain> <subcommand> <args minus --slots>`
 * (dt_launch_mpirun). Returns only on failure, after printing why: the exit code 1. */
int dt_cli_mpirun(int argc, char **argv, int slots, const char *subcommand);

#endif
