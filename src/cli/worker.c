/* worker.c — `dtrain worker [--slots N] [--hostfile FILE]`: what the master runs for one trial
 * run (not in the usage). With several slots, or any over a hostfile (the run's hosts, written
 * by the master), it re-runs itself under mpirun, one rank per slot: mpirun is then the process
 * the master started, so it dies with the master and its ranks die with it. */
#include "cli.h"

#include "master/master.h"
#include "launch/launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dt_cli_worker(int argc, char **argv) {
    long slots = 1;
    const char *hostfile = NULL;
    for (int i = 0; i < argc; i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "--slots") && i + 1 < argc &&
            (slots = strtol(argv[++i], &end, 10)) >= 1 && !*end)
            continue;
        if (!strcmp(argv[i], "--hostfile") && i + 1 < argc) {
            hostfile = argv[++i];
            continue;
        }
        fprintf(stderr, "usage: dtrain worker [--slots N] [--hostfile FILE] (run by the master "
                        "for a trial)\n");
        return 2;
    }
    if (hostfile && !getenv("OMPI_COMM_WORLD_SIZE")) {
        dt_launch_mpirun_hosts((int)slots, hostfile, "worker", 0, NULL);
        fprintf(stderr, "error: %s\n", dt_last_error());
        return 1;
    }
    if (dt_launch_needs_mpirun(slots)) {
        dt_launch_mpirun((int)slots, "worker", 0, NULL);
        fprintf(stderr, "error: %s\n", dt_last_error());
        return 1;
    }
    return dt_worker_main();
}
