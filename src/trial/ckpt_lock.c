/* ckpt_lock.c — the checkpoint directory's lock: two runs never write one directory
 * (launcher_watch.c is the other half).
 *
 * The chief of a run holds flock(LOCK_EX) on "<dir>/.lock" for the run's life, the file holding
 * "<pid> <host>" for the error a second run gets. The kernel drops the lock with the process,
 * however it ends. On release the file is unlinked before it is closed; a run that locked a file
 * already unlinked (the inode at the path differs) locks again. A holder that is dying (killed with
 * its launcher a moment ago) lets go within moments, so a busy lock is retried for LOCK_GRACE_S
 * before it is an error. */
#define _GNU_SOURCE
#include "trial_impl.h"

#include "dtrain/trialio.h"
#include "trial_iface.h"

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

#define LOCK_NAME ".lock"
#define LOCK_GRACE_S 3.0

/* ---- the checkpoint directory's lock ---- */

static void sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* "<pid> <host>" of the lock's holder from file `fd`, "an unknown process" when unreadable. */
static void holder(int fd, char *out, size_t n) {
    char buf[320];
    ssize_t k = pread(fd, buf, sizeof buf - 1, 0);
    buf[k > 0 ? k : 0] = 0;
    long pid = 0;
    char host[256] = "";
    if (sscanf(buf, "%ld %255s", &pid, host) == 2 && pid > 0)
        snprintf(out, n, "pid %ld on host %s", pid, host);
    else
        snprintf(out, n, "an unknown process (see %s)", LOCK_NAME);
}

/* True when `fd` is the file at `path` now (not one a releasing holder unlinked). */
static bool same_file(int fd, const char *path) {
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

dt_status dt__ckpt_dir_lock(const char *dir, int *fd_out) {
    *fd_out = -1;
    if (dt__ckpt_mkdir(dir) != DT_OK) return dt_last_status();
    char path[4096];
    if (snprintf(path, sizeof path, "%s/" LOCK_NAME, dir) >= (int)sizeof path)
        return dt_error(DT_ERR_CONFIG, "checkpoint directory path too long: %s", dir);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            return dt_error(DT_ERR_IO,
                            "cannot lock checkpoint directory %s (%s: %s); hint: check that it "
                            "is writable",
                            dir, path, strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            if (!same_file(fd, path)) { /* unlinked by the holder we waited for: again */
                close(fd);
                continue;
            }
            char text[320], host[256] = "unknown";
            if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "unknown");
            host[sizeof host - 1] = 0;
            int len = snprintf(text, sizeof text, "%ld %s\n", (long)getpid(), host);
            if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)len, 0) != len) {
                /* the lock holds without its note; the other run's error says less */
            }
            *fd_out = fd;
            dt_ckpt_remove_partial(dir); /* ours now: what is half-written is garbage */
            return DT_OK;
        }
        int err = errno;
        if (err != EWOULDBLOCK && err != EINTR) {
            close(fd);
            return dt_error(DT_ERR_IO, "cannot lock checkpoint directory %s: %s", dir,
                            strerror(err));
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        double waited =
            (double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec);
        if (waited >= LOCK_GRACE_S) {
            char who[400];
            holder(fd, who, sizeof who);
            close(fd);
            return dt_error(DT_ERR_STATE,
                            "checkpoint directory %s is in use by %s; hint: wait for that run "
                            "to end or stop it, or use another checkpoint directory",
                            dir, who);
        }
        close(fd);
        sleep_ms(20);
    }
}

void dt__ckpt_dir_unlock(const char *dir, int fd) {
    if (fd < 0) return;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/" LOCK_NAME, dir) < (int)sizeof path && same_file(fd, path))
        unlink(path); /* before close: a waiter then sees the inode change and locks again */
    close(fd);
}
