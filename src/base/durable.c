/*
 * durable.c — the one write path for files that must survive a crash whole (see
 * dtrain/durable.h): write fully, fsync, rename over the old name, fsync the directory; on any
 * failure remove the temporary and leave the old file untouched.
 *
 * Also the plain pieces the checkpoint directory writer builds its own directory-level
 * protocol from (base_impl.h): a full write, a file fsync and a whole-file write without
 * rename.
 *
 * Fault injection (tests, SQLite style): dt__file_fail_after makes the n-th next write or
 * fsync of this module fail with a chosen errno, on the calling thread only, so a test can
 * check that a disk that fills up or a failing fsync leaves the old file intact and no
 * temporary behind.
 */
#define _GNU_SOURCE
#include "base/base_impl.h"
#include "base/durable.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Test-only fault injection: per thread, so concurrent writers elsewhere are never hit. */
static _Thread_local int64_t fail_n[2];
static _Thread_local int fail_err[2];

void dt__file_fail_after(dt__file_fault kind, int64_t n, int err) {
    if (kind != DT__FAULT_WRITE && kind != DT__FAULT_FSYNC) return;
    fail_n[kind] = n > 0 ? n : 0;
    fail_err[kind] = err ? err : EIO;
}

/* true (errno set) when the injected fault of `kind` fires now */
static bool injected(dt__file_fault kind) {
    if (fail_n[kind] <= 0 || --fail_n[kind] > 0) return false;
    errno = fail_err[kind];
    return true;
}

dt_status dt__write_full(int fd, const char *path, const void *data, size_t n) {
    const char *p = data;
    while (n > 0) {
        ssize_t r = injected(DT__FAULT_WRITE) ? -1 : write(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            return dt_error(DT_ERR_IO, "%s: write failed: %s; hint: is the disk full?", path,
                            strerror(errno));
        p += r;
        n -= (size_t)r;
    }
    return DT_OK;
}

dt_status dt__file_fsync(int fd, const char *path) {
    if (injected(DT__FAULT_FSYNC) || fsync(fd) != 0)
        return dt_error(DT_ERR_IO, "%s: fsync failed: %s", path, strerror(errno));
    return DT_OK;
}

dt_status dt__file_write(const char *path, const void *data, size_t n, bool do_sync) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return dt_error(DT_ERR_IO,
                        "%s: cannot create: %s; hint: does the directory exist and is it "
                        "writable?",
                        path, strerror(errno));
    dt_status st = dt__write_full(fd, path, data, n);
    if (st == DT_OK && do_sync) st = dt__file_fsync(fd, path);
    if (close(fd) != 0 && st == DT_OK)
        st = dt_error(DT_ERR_IO, "%s: close failed: %s", path, strerror(errno));
    return st;
}

dt_status dt_dir_fsync(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return dt_error(DT_ERR_IO, "%s: cannot open directory to sync: %s", dir, strerror(errno));
    int r = injected(DT__FAULT_FSYNC) ? -1 : fsync(fd), err = errno;
    close(fd);
    if (r != 0 && err != EINVAL) /* some file systems cannot sync directories */
        return dt_error(DT_ERR_IO, "%s: fsync of the directory failed: %s", dir, strerror(err));
    return DT_OK;
}

dt_status dt_dir_fsync_parent(const char *path) {
    const char *slash = path ? strrchr(path, '/') : NULL;
    if (!slash) return dt_dir_fsync(".");
    if (slash == path) return dt_dir_fsync("/");
    size_t n = (size_t)(slash - path);
    char *dir = malloc(n + 1);
    if (!dir) return dt_error(DT_ERR_OOM, "%s: directory name", path);
    memcpy(dir, path, n);
    dir[n] = 0;
    dt_status st = dt_dir_fsync(dir);
    free(dir);
    return st;
}

/* ---- replacing a file ---- */

struct dt_file_out {
    int fd;
    bool failed; /* a write failed: commit refuses */
    char *path, *tmp;
};

static void out_free(dt_file_out *f) {
    if (f->fd >= 0) close(f->fd);
    free(f->path);
    free(f->tmp);
    free(f);
}

dt_file_out *dt_file_out_open(const char *path) {
    if (!path || !*path) {
        dt_error(DT_ERR_INVALID, "file_out_open: empty path");
        return NULL;
    }
    size_t n = strlen(path), tlen = n + 32;
    dt_file_out *f = calloc(1, sizeof *f);
    if (f) {
        f->fd = -1;
        f->path = malloc(n + 1);
        f->tmp = malloc(tlen);
    }
    if (!f || !f->path || !f->tmp) {
        if (f) out_free(f);
        dt_error(DT_ERR_OOM, "%s: temporary name", path);
        return NULL;
    }
    memcpy(f->path, path, n + 1);
    snprintf(f->tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        dt_error(DT_ERR_IO,
                 "%s: cannot create: %s; hint: does the directory exist and is it "
                 "writable?",
                 f->tmp, strerror(errno));
        out_free(f);
        return NULL;
    }
    return f;
}

dt_status dt_file_out_write(dt_file_out *f, const void *data, size_t n) {
    if (!f) return dt_error(DT_ERR_INVALID, "file_out_write: NULL file");
    if (f->failed) return dt_error(DT_ERR_STATE, "%s: an earlier write failed", f->tmp);
    dt_status st = dt__write_full(f->fd, f->tmp, data, n);
    if (st != DT_OK) f->failed = true;
    return st;
}

const char *dt_file_out_tmp_path(const dt_file_out *f) {
    return f ? f->tmp : NULL;
}

dt_status dt_file_out_commit(dt_file_out *f) {
    if (!f) return dt_error(DT_ERR_INVALID, "file_out_commit: NULL file");
    dt_status st = f->failed ? dt_error(DT_ERR_IO, "%s: not committed: a write failed", f->path)
                             : dt__file_fsync(f->fd, f->tmp);
    int r = close(f->fd);
    f->fd = -1;
    if (r != 0 && st == DT_OK)
        st = dt_error(DT_ERR_IO, "%s: close failed: %s", f->tmp, strerror(errno));
    if (st == DT_OK && rename(f->tmp, f->path) != 0)
        st = dt_error(DT_ERR_IO, "cannot rename %s to %s: %s", f->tmp, f->path, strerror(errno));
    if (st != DT_OK)
        unlink(f->tmp);
    else
        st = dt_dir_fsync_parent(f->path);
    out_free(f);
    return st;
}

void dt_file_out_abort(dt_file_out *f) {
    if (!f) return;
    close(f->fd);
    f->fd = -1;
    unlink(f->tmp);
    out_free(f);
}

dt_status dt_file_write_atomic(const char *path, const void *data, size_t n) {
    if (n > 0 && !data) return dt_error(DT_ERR_INVALID, "file_write_atomic: NULL data");
    dt_file_out *f = dt_file_out_open(path);
    if (!f) return dt_last_status();
    dt_status st = dt_file_out_write(f, data, n);
    if (st != DT_OK) {
        dt_file_out_abort(f);
        return st;
    }
    return dt_file_out_commit(f);
}
