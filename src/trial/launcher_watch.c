/* launcher_watch.c — a rank dies with the launcher that started it, so a run never writes a
 * checkpoint it no longer owns (ckpt_lock.c is the other half).
 *
 * dt_launch_mpirun passes its own pid (mpirun's, after exec) to the ranks
 * as DTRAIN_LAUNCHER_PID; OpenMPI's local ranks are mpirun's children. dt_ckpt_watch_launcher
 * makes such a rank die with mpirun (PR_SET_PDEATHSIG SIGKILL) and refuses to start when
 * mpirun is gone already (getppid() is then another process). dt__ckpt_launcher_alive is
 * checked again before a checkpoint is renamed into place and before one is removed (check
 * then act: the kill arrives as a SIGKILL that stops the rank before its next call). Nothing
 * is stored: the environment and getppid() are the state.
 *
 * Over a hostfile, dt_launch_mpirun_hosts also passes DTRAIN_LAUNCHER_HOST, mpirun's host name.
 * A rank on another host is a child of that host's MPI daemon (orted), which ends its ranks and
 * itself when mpirun is gone: such a rank takes its parent at start as its launcher (rewriting
 * DTRAIN_LAUNCHER_PID in its own environment) and is tied to it the same way. One at start
 * whose parent is gone already (re-parented to init) refuses to start.
 * */
#define _GNU_SOURCE
#include "trial_impl.h"

#include "dtrain/trialio.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LAUNCHER_ENV "DTRAIN_LAUNCHER_PID"
#define LAUNCHER_HOST_ENV "DTRAIN_LAUNCHER_HOST"

/* The launcher's pid from the environment; 0 when there is none. */
static pid_t launcher_pid(void) {
    const char *v = getenv(LAUNCHER_ENV);
    if (!v || !*v) return 0;
    char *end;
    long pid = strtol(v, &end, 10);
    return *end || pid <= 1 ? 0 : (pid_t)pid;
}

/* Is this process on another host than its launcher (DTRAIN_LAUNCHER_HOST)? */
static bool launcher_remote(void) {
    const char *h = getenv(LAUNCHER_HOST_ENV);
    char me[256] = "";
    if (!h || !*h || gethostname(me, sizeof me - 1) != 0) return false;
    return strcmp(h, me) != 0;
}

dt_status dt_ckpt_watch_launcher(void) {
    pid_t l = launcher_pid();
    if (!l) return DT_OK;
    if (launcher_remote()) { /* the launcher here is this host's MPI daemon, our parent */
        char pid[32], me[256] = "";
        pid_t p = getppid();
        if (p <= 1)
            return dt_error(DT_ERR_STATE, "start: the MPI daemon that started this process on "
                                          "this host is gone; refusing to go on");
        snprintf(pid, sizeof pid, "%ld", (long)p);
        if (gethostname(me, sizeof me - 1) != 0 || setenv(LAUNCHER_ENV, pid, 1) != 0 ||
            setenv(LAUNCHER_HOST_ENV, me, 1) != 0)
            return dt_error(DT_ERR_OOM, "cannot record this process's launcher: %s",
                            strerror(errno));
    }
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        return dt_error(DT_ERR_IO, "cannot tie this process to its launcher (pid %d): %s", (int)l,
                        strerror(errno));
    return dt__ckpt_launcher_alive("start");
}

dt_status dt__ckpt_launcher_alive(const char *what) {
    pid_t l = launcher_pid();
    if (!l || getppid() == l) return DT_OK;
    return dt_error(DT_ERR_STATE,
                    "%s: the launcher of this process (pid %d, %s) is gone; refusing to go on so "
                    "that a relaunched run is never raced; hint: start the run again (--resume "
                    "latest)",
                    what, (int)l, LAUNCHER_ENV);
}
