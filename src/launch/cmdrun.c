/* cmdrun.c — running a helper command and keeping what it printed (cmdrun_impl.h). */
#define _GNU_SOURCE
#include "cmdrun_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int dt__cmd_run(char *const *argv, char *out, size_t n) {
    int fds[2];
    out[0] = 0;
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        execvp(argv[0], argv);
        fprintf(stderr, "dtrain: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0;
    char buf[4096];
    ssize_t r;
    while ((r = read(fds[0], buf, sizeof buf)) != 0) {
        if (r < 0) {
            if (errno == EINTR) continue;
            break;
        }
        size_t add = (size_t)r, drop = len + add > n - 1 ? len + add - (n - 1) : 0;
        if (drop >= len) { /* keep the tail of this chunk only */
            memcpy(out, buf + (drop - len), add - (drop - len));
            len = add - (drop - len);
        } else {
            memmove(out, out + drop, len - drop);
            memcpy(out + len - drop, buf, add);
            len += add - drop;
        }
        out[len] = 0;
    }
    close(fds[0]);
    int ws;
    while (waitpid(pid, &ws, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + (WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
}
