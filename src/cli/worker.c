/* worker.c — `dtrain worker [--slots N] [--hostfile FILE]`: what the master runs for one trial
 * run (not in the usage). With several slots, or any over a hostfile (the run's hosts, written
 * by the master), it re-runs itself under mpirun, one rank per slot: mpirun is then the process
 * the master started, so it dies with the master and its ranks die with it. */
#include "args.h"
#include "cli.h"

#include "master/master.h"
#include "launch/launch.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

static void usage(FILE *f) {
    fprintf(f, "usage: dtrain worker [--slots N] [--hostfile FILE] (run by the master for a "
               "trial)\n");
}

int dt_cli_worker(int argc, char **argv) {
    long long slots = 1;
    const char *hostfile = NULL;
    dt_cli_opt opts[] = {{.name = "--slots", .integer = &slots, .lo = 1, .hi = INT_MAX},
                         {.name = "--hostfile", .value = &hostfile}};
    int rc;
    if (dt_cli_parse_verb("dtrain worker", usage, argc, argv, opts, 2, NULL, 0, 0, "", &rc) < 0)
        return rc;
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
