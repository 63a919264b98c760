/*
 * swap.c — the NVMe offload store (see swap.h for the contract).
 *
 * One file per store, one I/O thread per store. The queue is intrusive: requests are linked
 * through their own `next` field, so submitting allocates nothing and the queue has no size
 * limit beyond the requests the caller owns. The mutex guards the queue, the request states
 * and the fault-injection settings; the file descriptor is only used by the I/O thread between
 * open and close. The I/O thread formats nothing: errors travel back as errno in the request.
 */
#define _GNU_SOURCE /* mkostemps */
#include "engine/swap.h"
#include "base/base_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { REQ_IDLE = 0, REQ_QUEUED, REQ_DONE };
enum { OP_READ = 1, OP_WRITE };

/* largest single pread/pwrite (Linux transfers at most ~2 GiB per call anyway) */
#define SWAP_MAX_IO ((int64_t)1 << 30)

struct dt_swap {
    char *path;
    int fd;
    int64_t nfloats;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_work; /* queue became non-empty, or stop */
    pthread_cond_t cv_done; /* a request completed */
    dt_swap_req *head, *tail;
    int stop;
    int64_t fail_after; /* fault injection: the n-th next request fails with fail_err */
    int fail_err;
    int64_t max_io; /* fault injection: cap on one transfer, 0 = none */
};

/* ---- the I/O thread ---------------------------------------------------------------- */

/* Run one request to completion: short transfers continue where they stopped, EINTR retries.
 * Leaves errno (or -1 for an unexpected end of file / a write that made no progress) in
 * r->err and the bytes moved in r->done. */
static void run_request(int fd, dt_swap_req *r, int64_t max_io, int inject) {
    r->err = 0;
    r->done = 0;
    if (inject) {
        r->err = inject;
        return;
    }
    char *p = (char *)r->buf;
    const int64_t total = r->n * (int64_t)sizeof(float);
    const off_t base = (off_t)r->off * (off_t)sizeof(float);
    while (r->done < total) {
        int64_t want = total - r->done;
        if (want > SWAP_MAX_IO) want = SWAP_MAX_IO;
        if (max_io > 0 && want > max_io) want = max_io;
        ssize_t k = r->op == OP_READ ? pread(fd, p + r->done, (size_t)want, base + r->done)
                                     : pwrite(fd, p + r->done, (size_t)want, base + r->done);
        if (k < 0) {
            if (errno == EINTR) continue;
            r->err = errno;
            return;
        }
        if (k == 0) {
            r->err = -1;
            return;
        }
        r->done += k;
    }
}

static void *io_main(void *arg) {
    dt_swap *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stop) pthread_cond_wait(&s->cv_work, &s->mu);
        if (!s->head) break; /* stopping and drained */
        dt_swap_req *r = s->head;
        s->head = r->next;
        if (!s->head) s->tail = NULL;
        r->next = NULL;
        int inject = 0;
        if (s->fail_after > 0 && --s->fail_after == 0) inject = s->fail_err;
        int64_t max_io = s->max_io;
        pthread_mutex_unlock(&s->mu);

        run_request(s->fd, r, max_io, inject);

        pthread_mutex_lock(&s->mu);
        /* once closing, nobody will wait on the request: hand it back idle. The request is not
         * touched after this point (its owner may reuse it as soon as it sees the state). */
        r->state = s->stop ? REQ_IDLE : REQ_DONE;
        pthread_cond_broadcast(&s->cv_done);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- open / close ------------------------------------------------------------------ */

static const char *io_hint(int err) {
    switch (err) {
    case ENOSPC:
    case EDQUOT:
        return "free space on that disk or set nvme_path to a larger one";
    case EFBIG:
        return "the file system caps the file size; set nvme_path to another file system";
    case EACCES:
    case EPERM:
    case EROFS:
        return "make nvme_path a directory this user can write, or point it elsewhere";
    default:
        return "check that nvme_path names a writable directory on a local disk";
    }
}

static void swap_free(dt_swap *s) {
    free(s->path);
    free(s);
}

/* Reserve `bytes` for the file; a file system that cannot (EOPNOTSUPP) gets a sparse file.
 * Returns 0 or an errno. */
static int reserve(int fd, int64_t bytes) {
    int err = posix_fallocate(fd, 0, (off_t)bytes);
    if ((err == EOPNOTSUPP || err == EINVAL) && ftruncate(fd, (off_t)bytes) == 0)
        err = 0;
    else if (err == EOPNOTSUPP || err == EINVAL)
        err = errno;
    return err;
}

/* The directory (s->path holds it, dlen bytes of dir) made, then a fresh file
 * <dir>/<name>.<pid>.XXXXXX.swp in s->fd with its blocks reserved. On error s->fd is -1 and
 * no file is left. */
static dt_status swap_create(dt_swap *s, const char *dir, size_t dlen, const char *name,
                             size_t cap) {
    char failed[512];
    int err = dt__mkdir_p(s->path, failed, sizeof failed);
    if (err)
        return dt_error(DT_ERR_IO,
                        "cannot create the nvme offload directory %s (at %s): %s; hint: %s",
                        s->path, failed, strerror(err), io_hint(err));
    static const char suffix[] = ".swp";
    snprintf(s->path, cap, "%.*s/%s.%ld.XXXXXX%s", (int)dlen, dir, name, (long)getpid(), suffix);
    s->fd = mkostemps(s->path, (int)strlen(suffix), O_CLOEXEC);
    if (s->fd < 0) {
        err = errno;
        return dt_error(DT_ERR_IO, "cannot create the nvme offload file %s: %s; hint: %s", s->path,
                        strerror(err), io_hint(err));
    }
    const int64_t bytes = s->nfloats * (int64_t)sizeof(float);
    if (bytes > 0 && (err = reserve(s->fd, bytes)) != 0) {
        dt_status st = dt_error(DT_ERR_IO,
                                "cannot reserve %lld bytes for the nvme offload file %s: %s; "
                                "hint: %s",
                                (long long)bytes, s->path, strerror(err), io_hint(err));
        close(s->fd);
        s->fd = -1;
        unlink(s->path);
        return st;
    }
    return DT_OK;
}

dt_swap *dt__swap_open(const char *dir, const char *name, int64_t nfloats) {
    if (!dir || !*dir || !name || !*name || strchr(name, '/')) {
        dt_error(DT_ERR_INVALID, "swap store: need a directory and a file name without '/'");
        return NULL;
    }
    if (nfloats < 0 || nfloats > INT64_MAX / (int64_t)sizeof(float)) {
        dt_error(DT_ERR_INVALID, "swap store %s: invalid size of %lld floats", name,
                 (long long)nfloats);
        return NULL;
    }
    /* drop trailing slashes (but keep "/") so the file path reads cleanly */
    size_t dlen = strlen(dir);
    while (dlen > 1 && dir[dlen - 1] == '/') dlen--;

    dt_swap *s = calloc(1, sizeof *s);
    size_t cap = dlen + strlen(name) + 64;
    if (s) s->path = malloc(cap);
    if (!s || !s->path) {
        if (s) swap_free(s);
        dt_error(DT_ERR_OOM, "swap store %s: cannot allocate its descriptor", name);
        return NULL;
    }
    s->fd = -1;
    s->nfloats = nfloats;
    snprintf(s->path, cap, "%.*s", (int)dlen, dir);

    if (swap_create(s, dir, dlen, name, cap) != DT_OK) {
        swap_free(s);
        return NULL;
    }

    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv_work, NULL);
    pthread_cond_init(&s->cv_done, NULL);
    int err = pthread_create(&s->thread, NULL, io_main, s);
    if (err) {
        dt_error(DT_ERR_OOM, "cannot start the I/O thread of %s: %s", s->path, strerror(err));
        pthread_cond_destroy(&s->cv_done);
        pthread_cond_destroy(&s->cv_work);
        pthread_mutex_destroy(&s->mu);
        close(s->fd);
        unlink(s->path);
        swap_free(s);
        return NULL;
    }
    return s;
}

void dt__swap_close(dt_swap *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL); /* the thread drains the queue before it exits */
    pthread_cond_destroy(&s->cv_done);
    pthread_cond_destroy(&s->cv_work);
    pthread_mutex_destroy(&s->mu);
    close(s->fd);
    unlink(s->path);
    swap_free(s);
}

int64_t dt__swap_bytes(const dt_swap *s) {
    return s->nfloats * (int64_t)sizeof(float);
}
int64_t dt__swap_size(const dt_swap *s) {
    return s->nfloats;
}
const char *dt__swap_path(const dt_swap *s) {
    return s->path;
}

void dt__swap_fail_after(dt_swap *s, int64_t n, int err) {
    pthread_mutex_lock(&s->mu);
    s->fail_after = n;
    s->fail_err = err ? err : EIO;
    pthread_mutex_unlock(&s->mu);
}

void dt__swap_set_max_io(dt_swap *s, int64_t bytes) {
    pthread_mutex_lock(&s->mu);
    s->max_io = bytes;
    pthread_mutex_unlock(&s->mu);
}

/* ---- requests ---------------------------------------------------------------------- */

static dt_status submit(dt_swap *s, int op, int64_t off, float *buf, int64_t n, dt_swap_req *r) {
    if (off < 0 || n < 0 || off > s->nfloats - n || (n > 0 && !buf))
        return dt_error(DT_ERR_INVALID,
                        "%s of %lld floats at float offset %lld does not fit the nvme "
                        "offload file %s (%lld floats)",
                        op == OP_READ ? "read" : "write", (long long)n, (long long)off, s->path,
                        (long long)s->nfloats);
    pthread_mutex_lock(&s->mu);
    if (r->state != REQ_IDLE) {
        pthread_mutex_unlock(&s->mu);
        return dt_error(DT_ERR_STATE,
                        "request on %s submitted while the previous one is not "
                        "waited on; hint: call dt__swap_wait first",
                        s->path);
    }
    r->next = NULL;
    r->buf = buf;
    r->off = off;
    r->n = n;
    r->op = op;
    r->err = 0;
    r->done = 0;
    r->state = REQ_QUEUED;
    if (s->tail)
        s->tail->next = r;
    else
        s->head = r;
    s->tail = r;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    return DT_OK;
}

dt_status dt__swap_read_async(dt_swap *s, int64_t off, float *dst, int64_t n, dt_swap_req *r) {
    return submit(s, OP_READ, off, dst, n, r);
}

dt_status dt__swap_write_async(dt_swap *s, int64_t off, const float *src, int64_t n,
                               dt_swap_req *r) {
    /* the buffer is only read by a write; the cast keeps one request type for both */
    return submit(s, OP_WRITE, off, (float *)src, n, r);
}

/* Wait for `r` without touching the error message; returns its errno-or-(-1), 0 on success
 * (and for a request that was not in flight). r's fields stay readable for format_error. */
static int wait_raw(dt_swap *s, dt_swap_req *r) {
    pthread_mutex_lock(&s->mu);
    while (r->state == REQ_QUEUED) pthread_cond_wait(&s->cv_done, &s->mu);
    int err = r->state == REQ_DONE ? r->err : 0;
    r->state = REQ_IDLE;
    pthread_mutex_unlock(&s->mu);
    return err;
}

static dt_status format_error(const dt_swap *s, const dt_swap_req *r) {
    const int64_t bytes = r->n * (int64_t)sizeof(float);
    const int64_t at = r->off * (int64_t)sizeof(float) + r->done;
    const char *what = r->op == OP_READ ? "read" : "write";
    if (r->err == -1)
        return dt_error(DT_ERR_IO,
                        "cannot %s %lld bytes at byte offset %lld of %s: %s after "
                        "%lld bytes; hint: the file was changed by something else, keep "
                        "nvme_path private to this job",
                        what, (long long)bytes, (long long)(r->off * (int64_t)sizeof(float)),
                        s->path, r->op == OP_READ ? "unexpected end of file" : "no progress",
                        (long long)r->done);
    return dt_error(DT_ERR_IO,
                    "cannot %s %lld bytes at byte offset %lld of %s (failed at "
                    "byte %lld): %s; hint: %s",
                    what, (long long)bytes, (long long)(r->off * (int64_t)sizeof(float)), s->path,
                    (long long)at, strerror(r->err), io_hint(r->err));
}

dt_status dt__swap_wait(dt_swap *s, dt_swap_req *r) {
    return wait_raw(s, r) ? format_error(s, r) : DT_OK;
}

dt_status dt__swap_read(dt_swap *s, int64_t off, float *dst, int64_t n) {
    dt_swap_req r = {0};
    dt_status st = dt__swap_read_async(s, off, dst, n, &r);
    return st ? st : dt__swap_wait(s, &r);
}

dt_status dt__swap_write(dt_swap *s, int64_t off, const float *src, int64_t n) {
    dt_swap_req r = {0};
    dt_status st = dt__swap_write_async(s, off, src, n, &r);
    return st ? st : dt__swap_wait(s, &r);
}

/* ---- streaming --------------------------------------------------------------------- */

/* Per-store requests of a stream: one read and one write per buffer slot. */
typedef struct stream_reqs {
    dt_swap_req rd[DT_SWAP_STREAM_MAX][2];
    dt_swap_req wr[DT_SWAP_STREAM_MAX][2];
} stream_reqs;

/* Wait for `r`; the first error of the stream is formatted into the message, later ones are
 * dropped so the message names the cause that stopped the stream. */
static void stream_wait(dt_swap *s, dt_swap_req *r, dt_status *st) {
    int err = wait_raw(s, r);
    if (err && *st == DT_OK) *st = format_error(s, r);
}

static dt_status stream_read(dt_swap *const *stores, int nstores, int64_t n, int64_t chunk,
                             float *const *bufs, int64_t c, stream_reqs *q) {
    const int slot = (int)(c & 1);
    const int64_t off = c * chunk, len = n - off < chunk ? n - off : chunk;
    for (int k = 0; k < nstores; k++) {
        dt_status st =
            dt__swap_read_async(stores[k], off, bufs[slot * nstores + k], len, &q->rd[k][slot]);
        if (st) return st;
    }
    return DT_OK;
}

dt_status dt__swap_stream(dt_swap *const *stores, int nstores, int64_t n, int64_t chunk,
                          float *const *bufs, dt_swap_chunk_fn fn, void *user) {
    if (nstores < 1 || nstores > DT_SWAP_STREAM_MAX || !stores || !bufs || !fn || n < 0 ||
        (n > 0 && chunk <= 0))
        return dt_error(DT_ERR_INVALID,
                        "swap stream: need 1..%d stores, n >= 0, chunk > 0 "
                        "(got %d stores, n = %lld, chunk = %lld)",
                        DT_SWAP_STREAM_MAX, nstores, (long long)n, (long long)chunk);
    for (int k = 0; k < nstores; k++) {
        if (!stores[k] || !bufs[k] || !bufs[nstores + k])
            return dt_error(DT_ERR_INVALID, "swap stream: store or buffer %d is NULL", k);
        if (stores[k]->nfloats < n)
            return dt_error(DT_ERR_INVALID, "swap stream over %lld floats: %s holds only %lld",
                            (long long)n, stores[k]->path, (long long)stores[k]->nfloats);
        for (int j = 0; j < k; j++)
            if (stores[j] == stores[k])
                return dt_error(DT_ERR_INVALID, "swap stream: %s is given twice", stores[k]->path);
    }
    if (n == 0) return DT_OK;

    const int64_t nchunks = (n - 1) / chunk + 1;
    stream_reqs q;
    memset(&q, 0, sizeof q);
    dt_status st = DT_OK;

    /* Chunk c lives in slot c % 2. Each store's queue is FIFO, so "write chunk c, then read
     * chunk c+2" into the same slot is queued back to back without waiting: the write has
     * left the buffer before the read fills it. While fn runs on chunk c, the store threads
     * write chunk c-1 and read chunk c+1. */
    for (int64_t c = 0; c < 2 && c < nchunks && !st; c++)
        st = stream_read(stores, nstores, n, chunk, bufs, c, &q);

    for (int64_t c = 0; c < nchunks && !st; c++) {
        const int slot = (int)(c & 1);
        const int64_t off = c * chunk, len = n - off < chunk ? n - off : chunk;
        for (int k = 0; k < nstores; k++) {
            stream_wait(stores[k], &q.rd[k][slot], &st); /* chunk c is in memory */
            stream_wait(stores[k], &q.wr[k][slot], &st); /* chunk c-2 (done: FIFO) */
        }
        if (st) break;
        st = fn(user, off, len, &bufs[slot * nstores]);
        if (st) break; /* chunk c and later stay as they are on disk */
        for (int k = 0; k < nstores && !st; k++)
            st =
                dt__swap_write_async(stores[k], off, bufs[slot * nstores + k], len, &q.wr[k][slot]);
        if (!st && c + 2 < nchunks) st = stream_read(stores, nstores, n, chunk, bufs, c + 2, &q);
    }

    /* drain: every buffer is the caller's again when we return */
    for (int k = 0; k < nstores; k++)
        for (int slot = 0; slot < 2; slot++) {
            stream_wait(stores[k], &q.rd[k][slot], &st);
            stream_wait(stores[k], &q.wr[k][slot], &st);
        }
    return st;
}
