/* proctree.c — finding, stopping and waiting for every process of a run (proctree_impl.h).
 *
 * The process table is read from /proc/<pid>/stat (pid, state, parent, group, start time). A run's
 * processes are the members of its groups and, transitively, their children; a child that
 * made a group of its own (setpgid, as mpirun does for each rank) brings that group in. The
 * walk stops each group it finds before looking further, so no process forks a child the
 * walk has not seen; a stopped process still dies of SIGKILL.
 *
 * A pid outlives its process only as a number: once reaped, the kernel may give it to another
 * process. So a group is signalled only while something holds its number for the run (the
 * unreaped leader, the launcher's own child) or after dt__proctree_is_run has matched the
 * leader's start time with the one recorded when the run began. */
#define _GNU_SOURCE
#include "proctree_impl.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct proc {
    pid_t pid, ppid, pgid;
    char state;
    uint64_t start; /* field 22: clock ticks after boot */
} proc;

/* One entry of /proc/<pid>/stat; false when the process is gone or the line is odd. */
static bool read_stat(pid_t pid, proc *p) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *rp = strrchr(buf, ')'); /* the command name may hold anything, ')' included */
    int ppid = 0, pgid = 0;
    char state = 0;
    unsigned long long start = 0;
    /* fields 3..5, then 6..21 skipped, then 22 (starttime) */
    if (!rp || sscanf(rp + 1,
                      " %c %d %d %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s"
                      " %llu",
                      &state, &ppid, &pgid, &start) != 4)
        return false;
    *p = (proc){.pid = pid, .ppid = ppid, .pgid = pgid, .state = state, .start = start};
    return true;
}

/* Every process of the machine (of this pid namespace); *n of them, NULL when /proc cannot be
 * read (the caller then knows only the groups it was given). */
static proc *snapshot(int *n) {
    *n = 0;
    DIR *d = opendir("/proc");
    if (!d) return NULL;
    int cap = 256;
    proc *ps = malloc((size_t)cap * sizeof *ps);
    struct dirent *e;
    while (ps && (e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        if (*n == cap) {
            proc *grown = realloc(ps, (size_t)(cap *= 2) * sizeof *ps);
            if (!grown) break;
            ps = grown;
        }
        if (read_stat((pid_t)pid, &ps[*n])) (*n)++;
    }
    closedir(d);
    return ps;
}

static bool has_group(const dt__proctree *t, pid_t g) {
    for (int i = 0; i < t->n; i++)
        if (t->groups[i] == g) return true;
    return false;
}

/* A group we may signal: a real one, not ours. */
static bool may_signal(pid_t g) {
    return g > 1 && g != getpgrp();
}

/* Add to *t the groups of the descendants of the members of t's groups (one pass over a fresh
 * snapshot; `sig` sent to each new group as it is found, 0 for none). The number added. */
static int grow(dt__proctree *t, int sig) {
    int n = 0, added = 0;
    proc *ps = snapshot(&n);
    if (!ps) return 0;
    /* mark the run's processes: members of its groups, then their children until stable */
    bool *in = calloc((size_t)n + 1, sizeof *in);
    bool changed = in != NULL;
    for (int i = 0; in && i < n; i++) in[i] = has_group(t, ps[i].pgid);
    while (changed) {
        changed = false;
        for (int i = 0; i < n; i++) {
            if (in[i]) continue;
            for (int j = 0; j < n; j++)
                if (in[j] && ps[i].ppid == ps[j].pid) {
                    in[i] = changed = true;
                    break;
                }
        }
    }
    for (int i = 0; in && i < n; i++) {
        pid_t g = ps[i].pgid;
        if (!in[i] || has_group(t, g) || !may_signal(g)) continue;
        if (sig) kill(-g, sig);
        if (t->n < DT__PROCTREE_MAX_GROUPS) t->groups[t->n++] = g;
        added++;
    }
    free(in);
    free(ps);
    return added;
}

void dt__proctree_kill(pid_t pgid, dt__proctree *t) {
    t->n = 0;
    if (!may_signal(pgid)) return;
    t->groups[t->n++] = pgid;
    kill(-pgid, SIGSTOP);
    /* each pass finds the groups of processes below the stopped ones; bounded, as a group
     * beyond the table is not followed further */
    for (int pass = 0; pass < DT__PROCTREE_MAX_GROUPS && grow(t, SIGSTOP) > 0; pass++) {
    }
    for (int i = 0; i < t->n; i++) {
        kill(-t->groups[i], SIGKILL);
        kill(-t->groups[i], SIGCONT);
    }
}

int dt__proctree_signal(pid_t pgid, int sig) {
    if (!may_signal(pgid)) return 0;
    dt__proctree t = {.n = 1, .groups = {pgid}};
    while (grow(&t, 0) > 0) {
    }
    int sent = 0;
    for (int i = 0; i < t.n; i++) sent += kill(-t.groups[i], sig) == 0;
    return sent;
}

/* True when group g has a process that is not a zombie. */
static bool group_live(pid_t g, const proc *ps, int n) {
    if (kill(-g, 0) != 0 && errno == ESRCH) return false;
    if (!ps) return true; /* no process table: trust kill() */
    for (int i = 0; i < n; i++)
        if (ps[i].pgid == g && ps[i].state != 'Z' && ps[i].state != 'X') return true;
    return false;
}

bool dt__proctree_gone(const dt__proctree *t) {
    int n = 0;
    proc *ps = NULL;
    bool gone = true;
    for (int i = 0; i < t->n && gone; i++) {
        if (kill(-t->groups[i], 0) != 0 && errno == ESRCH) continue;
        if (!ps) ps = snapshot(&n);
        gone = !group_live(t->groups[i], ps, n);
    }
    free(ps);
    return gone;
}

uint64_t dt__proc_start(pid_t pid) {
    proc p;
    return pid > 0 && read_stat(pid, &p) ? p.start : 0;
}

bool dt__proctree_is_run(pid_t pgid, uint64_t start) {
    if (start == 0 || !may_signal(pgid)) return false;
    proc leader;
    if (read_stat(pgid, &leader)) return leader.start == start && leader.pgid == pgid;
    int n = 0, members = 0;
    proc *ps = snapshot(&n);
    bool older = ps == NULL; /* no process table: nothing can be checked */
    for (int i = 0; i < n; i++)
        if (ps[i].pgid == pgid) {
            members++;
            older = older || ps[i].start < start;
        }
    free(ps);
    return members > 0 && !older;
}
