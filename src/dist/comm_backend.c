/*
 * comm_backend.c — what every backend shares with the front end: element sizes, the local
 * reduction of two buffers, communicator objects, the status agreement and the scratch
 * buffer. The backends (comm_self.c, comm_mpi.c) and comm.c call this file; it calls none of
 * them, only the backend's own table through a communicator.
 */
#include "dist/comm_impl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t dt__comm_dtype_size(dt_comm_dtype dt) {
    switch (dt) {
    case DT_COMM_DTYPE_F32:
        return 4;
    case DT_COMM_DTYPE_F64:
        return 8;
    case DT_COMM_DTYPE_I64:
        return 8;
    default:
        return 0;
    }
}

/* MAX/MIN keep a NaN once it appears (the comparisons are false for NaN) and take a NaN from
 * src (the explicit isnan test), so any NaN among the ranks gives NaN. */
#define DT__COMBINE(T, ISNAN)                                                                      \
    do {                                                                                           \
        T *d = dst;                                                                                \
        const T *s = src;                                                                          \
        switch (op) {                                                                              \
        case DT_REDUCE_OP_SUM:                                                                     \
        case DT_REDUCE_OP_AVG:                                                                     \
            for (int64_t i = 0; i < n; i++) d[i] = d[i] + s[i];                                    \
            break;                                                                                 \
        case DT_REDUCE_OP_MAX:                                                                     \
            for (int64_t i = 0; i < n; i++)                                                        \
                if (s[i] > d[i] || ISNAN(s[i])) d[i] = s[i];                                       \
            break;                                                                                 \
        case DT_REDUCE_OP_MIN:                                                                     \
            for (int64_t i = 0; i < n; i++)                                                        \
                if (s[i] < d[i] || ISNAN(s[i])) d[i] = s[i];                                       \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

#define DT__ISNAN_F(x) ((x) != (x))
#define DT__ISNAN_I(x) 0

void dt__comm_combine(void *dst, const void *src, int64_t n, dt_comm_dtype dt, dt_reduce_op op) {
    switch (dt) {
    case DT_COMM_DTYPE_F32:
        DT__COMBINE(float, DT__ISNAN_F);
        break;
    case DT_COMM_DTYPE_F64:
        DT__COMBINE(double, DT__ISNAN_F);
        break;
    case DT_COMM_DTYPE_I64:
        DT__COMBINE(int64_t, DT__ISNAN_I);
        break;
    default:
        break;
    }
}

void dt__comm_divide(void *buf, int64_t n, dt_comm_dtype dt, int w) {
    if (w == 1) return;
    switch (dt) {
    case DT_COMM_DTYPE_F32: {
        float *b = buf, fw = (float)w;
        for (int64_t i = 0; i < n; i++) b[i] = b[i] / fw;
        break;
    }
    case DT_COMM_DTYPE_F64: {
        double *b = buf, dw = (double)w;
        for (int64_t i = 0; i < n; i++) b[i] = b[i] / dw;
        break;
    }
    case DT_COMM_DTYPE_I64: {
        int64_t *b = buf;
        for (int64_t i = 0; i < n; i++) b[i] = b[i] / w;
        break;
    }
    default:
        break;
    }
}

dt_comm *dt__comm_new(const dt_comm_backend *be, void *impl, int rank, int size, dt_comm *parent) {
    dt_comm *c = calloc(1, sizeof *c);
    if (!c) {
        dt_error(DT_ERR_OOM, "out of memory creating a communicator");
        return NULL;
    }
    c->be = be;
    c->impl = impl;
    c->rank = rank;
    c->size = size;
    c->checks = parent ? parent->checks : true;
    c->chunk_bytes = parent ? parent->chunk_bytes : DT__COMM_CHUNK_BYTES;
    c->dev = parent ? parent->dev : NULL;
    if (parent) {
        c->world = parent->world ? parent->world : parent;
        c->world->live_children++;
    }
    return c;
}

/* The agreement on a status (dt_comm_agree): one exact MAX of (status, rank + 1) packed in an
 * int64, so every rank learns the worst status and the highest rank that raised it. A failing
 * rank returns its own status and message; the others `others`, or the failing rank's status
 * when `others` is DT_OK. */
dt_status dt__comm_agree_status(dt_comm *c, dt_status local, const char *what, dt_status others) {
    if (!c || c->size == 1) return local;
    char msg[1024];
    if (local != DT_OK) snprintf(msg, sizeof msg, "%s", dt_last_error());
    int64_t v = local != DT_OK ? (int64_t)local << 32 | (c->rank + 1) : 0;
    dt_status st = c->be->max_i64(c, &v, 1);
    if (st != DT_OK) return st;
    if (local != DT_OK) return dt_error(local, "%s", msg);
    if (v > 0)
        return dt_error(others != DT_OK ? others : (dt_status)(v >> 32),
                        "%s: rank %lld failed (see its error); hint: every rank "
                        "stopped this operation, check that rank's log",
                        what, (long long)(v & 0xffffffff) - 1);
    return DT_OK;
}

/* Inside the communicator a peer's local failure (allocation) is a communication failure
 * for the other ranks: they return DT_ERR_COMM naming it. */
static dt_status agree_ok(dt_comm *c, dt_status local, const char *what) {
    return dt__comm_agree_status(c, local, what, DT_ERR_COMM);
}

/* Scratch requests must be rank-symmetric (every rank asks for the same size at the same
 * point), so growth happens on all ranks at once and they agree on its success: an
 * allocation failure on one rank never leaves the others waiting in a collective. */
void *dt__comm_scratch(dt_comm *c, size_t bytes) {
    if (bytes <= c->scratch_bytes) return c->scratch;
    dt_status local = DT_OK;
    size_t want = bytes < 4096 ? 4096 : bytes;
    void *p = NULL;
    if (c->dev && dt_mem_charge(c->dev, DT_MEM_COMM, (int64_t)want) != DT_OK) {
        local = dt_last_status();
    } else {
        p = malloc(want);
        if (!p) {
            if (c->dev) dt_mem_release(c->dev, DT_MEM_COMM, (int64_t)want);
            local = dt_error(DT_ERR_OOM,
                             "out of memory allocating %zu bytes of communication "
                             "scratch",
                             want);
        }
    }
    if (agree_ok(c, local, "communication scratch allocation") != DT_OK) {
        if (p) {
            free(p);
            if (c->dev) dt_mem_release(c->dev, DT_MEM_COMM, (int64_t)want);
        }
        return NULL;
    }
    if (c->scratch) {
        free(c->scratch);
        if (c->dev) dt_mem_release(c->dev, DT_MEM_COMM, (int64_t)c->scratch_bytes);
    }
    c->scratch = p;
    c->scratch_bytes = want;
    return p;
}
