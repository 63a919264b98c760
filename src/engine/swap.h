/*
 * swap.h — the NVMe offload store: file-backed f32 arrays with overlapped disk I/O.
 *
 * With "nvme" offload, optimizer state (and ZeRO-3 parameter shards) live in files under the
 * user's nvme_path and are streamed through host memory around the optimizer step. A dt_swap
 * is one such file: an array of `nfloats` f32 values, sized (and its blocks reserved) when it
 * is opened, removed when it is closed.
 *
 * Each dt_swap owns one background I/O thread fed by a FIFO queue of caller-owned requests
 * (dt_swap_req), so requests on one store complete in submission order: a read into a buffer
 * submitted after a write from that same buffer is safe without waiting in between. Short
 * reads and writes are continued until complete and EINTR is retried. The I/O thread never
 * touches the thread-local error message: it records errno in the request, and dt__swap_wait
 * formats the message (path, offset, errno text) on the caller's thread.
 *
 * Offsets and lengths are in floats, not bytes. Files use the machine's byte order; they are
 * scratch space of one process, never read by another, so they carry no header or version.
 */
#ifndef DT_ENGINE_SWAP_H
#define DT_ENGINE_SWAP_H

#include "dtrain/base.h"

#include <stdint.h>

typedef struct dt_swap dt_swap;

/* One asynchronous request. Owned by the caller (stack or struct member, no initialisation
 * needed beyond zeroing or a previous wait); from submission until dt__swap_wait (or
 * dt__swap_close) returns, the request and its buffer must stay alive and untouched. The
 * fields are private to swap.c. */
typedef struct dt_swap_req {
    struct dt_swap_req *next; /* queue link */
    float *buf;
    int64_t off, n; /* floats */
    int64_t done;   /* bytes transferred before an error */
    int op;         /* read or write */
    int err;        /* errno of a failed request, -1 = unexpected end of file, 0 = ok */
    int state;      /* idle, queued, done */
} dt_swap_req;

/* Create directory `dir` (and its parents) if missing and a new file in it named
 * "<name>.<pid>.<random>.swp", opened read/write and sized to `nfloats` f32 values with its
 * blocks reserved (posix_fallocate, falling back to ftruncate on file systems without it), so
 * a full disk shows at open rather than in the middle of a step. The contents start as zeros.
 * Starts the store's I/O thread. On error returns NULL with DT_ERR_IO (unreachable or
 * unwritable dir, no space: the message names the path and the errno text), DT_ERR_INVALID
 * (bad arguments) or DT_ERR_OOM, and leaves no file behind. */
dt_swap *dt__swap_open(const char *dir, const char *name, int64_t nfloats);

/* Wait for every submitted request (their errors are dropped: wait on requests whose result
 * matters first), stop and join the I/O thread, close and remove the file, free the store.
 * NULL is a no-op. */
void dt__swap_close(dt_swap *s);

/* Bytes the store occupies on disk (what the engine accounts to its "nvme" device). */
int64_t dt__swap_bytes(const dt_swap *s);
/* Length of the store in floats. */
int64_t dt__swap_size(const dt_swap *s);
/* Path of the backing file (valid until dt__swap_close). */
const char *dt__swap_path(const dt_swap *s);

/* Queue a read of floats [off, off+n) into dst / a write of src into [off, off+n) and return
 * at once. Fails without queueing with DT_ERR_INVALID for a range outside the store and
 * DT_ERR_STATE when `r` is still in flight. n == 0 is allowed (completes with no I/O). */
dt_status dt__swap_read_async(dt_swap *s, int64_t off, float *dst, int64_t n, dt_swap_req *r);
dt_status dt__swap_write_async(dt_swap *s, int64_t off, const float *src, int64_t n,
                               dt_swap_req *r);

/* Block until `r` has completed and return its result: DT_OK, or DT_ERR_IO with the path,
 * the offset and the errno text (a failed read leaves dst partly filled; a failed write leaves
 * that range of the file partly written). Afterwards `r` can be reused. Waiting on a request
 * that was never submitted (or already waited on) returns DT_OK at once. */
dt_status dt__swap_wait(dt_swap *s, dt_swap_req *r);

/* Synchronous read / write: submit and wait. Errors as for the async pair plus dt__swap_wait. */
dt_status dt__swap_read(dt_swap *s, int64_t off, float *dst, int64_t n);
dt_status dt__swap_write(dt_swap *s, int64_t off, const float *src, int64_t n);

/* Largest number of stores one dt__swap_stream call handles. */
#define DT_SWAP_STREAM_MAX 8

/* Called by dt__swap_stream on floats [off, off+len) of every store; chunk_ptrs[k] holds those
 * values of stores[k] and may be modified in place (they are written back). A non-OK return
 * (with dt_error set) stops the stream. */
typedef dt_status (*dt_swap_chunk_fn)(void *user, int64_t off, int64_t len,
                                      float *const *chunk_ptrs);

/* Stream floats [0, n) of nstores stores through memory in chunks of `chunk` floats (the last
 * one shorter): for each chunk, read it from every store, call fn, write it back. The read of
 * chunk i+1 overlaps fn on chunk i, and the write of chunk i overlaps fn on chunk i+1.
 * `bufs` holds 2*nstores buffers of at least `chunk` floats each, two slots of nstores:
 * bufs[slot*nstores + k] is store k's buffer in slot 0 or 1 (so &bufs[slot*nstores] is the
 * chunk_ptrs array fn receives). Every store must hold at least n floats; n == 0 calls fn
 * never. On an error of fn or of the I/O, the stream stops, waits for the I/O already queued
 * and returns the first error (fn's message is kept): the chunk fn failed on and every later
 * one are unchanged on disk, earlier chunks are written (unless the error is a write error).
 * DT_ERR_INVALID for bad arguments (nothing read or written). */
dt_status dt__swap_stream(dt_swap *const *stores, int nstores, int64_t n, int64_t chunk,
                          float *const *bufs, dt_swap_chunk_fn fn, void *user);

/* ---- fault injection for tests ------------------------------------------------------- */

/* The n-th next request processed by the I/O thread fails with errno `err` before touching
 * the file (n = 0 disables). */
void dt__swap_fail_after(dt_swap *s, int64_t n, int err);
/* Cap every pread/pwrite at `bytes` (0 = no cap) to exercise the short-transfer path. */
void dt__swap_set_max_io(dt_swap *s, int64_t bytes);

#endif
