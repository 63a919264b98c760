/* proctree_impl.h — stopping every process of a run (proctree.c), for the launchers.
 *
 * A run is its process group and everything started below it, including processes that moved
 * to groups of their own (mpirun puts each rank in a new group). dt__proctree_kill stops the
 * groups (SIGSTOP, so none can fork a process the walk misses), follows the parent links from
 * their members to the descendants' groups until none is new, then SIGKILLs them all;
 * dt__proctree_wait returns once none of those groups has a live (non-zombie) process. */
#ifndef DT_RUNNER_PROCTREE_IMPL_H
#define DT_RUNNER_PROCTREE_IMPL_H

#include "dtrain/base.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define DT__PROCTREE_MAX_GROUPS 256

/* The process groups of one run. */
typedef struct dt__proctree {
    int n;
    pid_t groups[DT__PROCTREE_MAX_GROUPS];
} dt__proctree;

/* Collect group `pgid` and its descendants' groups into *t, stopped, then SIGKILL them and
 * send SIGCONT. Never touches this process's own group or a group id below 2. Groups beyond
 * DT__PROCTREE_MAX_GROUPS are killed but not waited for. Cannot fail. */
void dt__proctree_kill(pid_t pgid, dt__proctree *t);

/* Send `sig` to group `pgid` and to its descendants' groups (no stopping). The number of
 * groups signalled (0 when none is there any more). */
int dt__proctree_signal(pid_t pgid, int sig);

/* True when no group of *t has a live process (zombies do not count: they run no code). */
bool dt__proctree_gone(const dt__proctree *t);

/* The start time of process `pid` (field 22 of /proc/<pid>/stat: clock ticks since boot), or
 * 0 when there is no such process. With the pid it names one process for ever: a pid the
 * kernel gave again has a later start time. */
uint64_t dt__proc_start(pid_t pid);

/* Is group `pgid` still the one whose leader started at `start` (dt__proc_start of the leader
 * when the run began)? True when the leader is there with that start time, or the leader is
 * gone and every process left in the group started no earlier than it (a number held by the
 * group's members is not given again). False when the pid is another process now, when a
 * member is older than the run, when nothing of it is left, or when `start` is 0 (unknown):
 * such a group is not the run's, and is never signalled. */
bool dt__proctree_is_run(pid_t pgid, uint64_t start);

#endif
