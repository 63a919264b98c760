/* testproc.h — process checks shared by the tests that start and kill processes: whether a
 * pid is a live process (a zombie, left for its parent or init to reap, runs no code and does
 * not count), read from /proc independently of the code under test. */
#ifndef DT_TESTPROC_H
#define DT_TESTPROC_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

/* True while `pid` is a live (non-zombie) process. */
static inline bool test_pid_alive(pid_t pid) {
    if (pid <= 1 || kill(pid, 0) != 0) return false;
    char p[64], buf[512];
    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(p, "r");
    if (!f) return false;
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = 0;
    char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

/* Wait up to 10 s for `pid` to be gone; true when it is. */
static inline bool test_pid_gone(pid_t pid) {
    struct timespec ms2 = {0, 2000000L};
    for (int i = 0; i < 5000 && test_pid_alive(pid); i++) nanosleep(&ms2, NULL);
    return !test_pid_alive(pid);
}

#endif
