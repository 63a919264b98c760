/*
 * comm_mpi.c — the "mpi" backend (OpenMPI). The only file that includes <mpi.h>.
 *
 * Every communicator is our own duplicate of MPI_COMM_WORLD (or a split of it) with
 * MPI_ERRORS_RETURN, so our traffic never mixes with a trial's own MPI traffic and MPI errors
 * come back as DT_ERR_COMM instead of aborting.
 *
 * Determinism: floating-point reductions do not use MPI_Allreduce / MPI_Reduce_scatter, whose
 * summation order depends on the algorithm OpenMPI picks (by message size, communicator size
 * and tuning files). Instead, for each segment of the buffer, rank j owns the slice
 * [j*m/W, (j+1)*m/W) (the DESIGN's partition): an MPI_Alltoallv sends every rank's copy of
 * slice j to rank j, which reduces the W copies in rank order 0, 1, ..., W-1 (AVG then
 * divides by W), and an MPI_Allgatherv copies the reduced slices to everyone. So:
 *   - each element is reduced once, by one rank, in a fixed order: every rank gets the same
 *     bits, the same bits as a sequential loop over ranks, whatever MPI's algorithm choice;
 *   - reduce_scatter is the first half of the same scheme: its block equals the matching
 *     block of an allreduce of the same data bit for bit (ZeRO stages agree);
 *   - traffic is the bandwidth-optimal 2(W-1)/W of the buffer per rank, like a ring.
 * The agreement check (max_i64) uses MPI_Allreduce on integers with MAX, which is exact.
 *
 * Large transfers go in chunks of c->chunk_bytes (MPI counts are int); reductions need a
 * scratch of about one segment.
 */
#include "dist/comm_impl.h"

#include <mpi.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct mpi_state {
    MPI_Comm comm;
} mpi_state;

/* MPI is initialised and finalized once per process, so whether dt_comm_init did it and how
 * many world communicators still use it is process-wide state by nature (not a computation's
 * state); the lock makes init/finalize from two engines safe. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_worlds;   /* live world communicators on MPI */
static bool g_we_init; /* dt_comm_init called MPI_Init_thread (so it finalizes) */

static MPI_Comm comm_of(const dt_comm *c) {
    return ((const mpi_state *)c->impl)->comm;
}

static dt_status mpi_fail(const dt_comm *c, const char *fn, int err) {
    char s[MPI_MAX_ERROR_STRING + 1];
    int n = 0;
    if (MPI_Error_string(err, s, &n) != MPI_SUCCESS) n = 0;
    s[n] = 0;
    int cls = 0;
    MPI_Error_class(err, &cls);
    if (cls == MPI_ERR_TRUNCATE)
        return dt_error(DT_ERR_COMM,
                        "%s on rank %d of %d: size mismatch: a message was larger "
                        "than the receive buffer (%s); hint: sender and receiver must agree on "
                        "the size",
                        fn, c->rank, c->size, s);
    return dt_error(DT_ERR_COMM,
                    "%s failed on rank %d of %d: %s; hint: a peer process may "
                    "have died or the ranks called different operations; check every rank's "
                    "log",
                    fn, c->rank, c->size, s);
}

#define TRY(fn, call)                                                                              \
    do {                                                                                           \
        int e_ = (call);                                                                           \
        if (e_ != MPI_SUCCESS) return mpi_fail(c, fn, e_);                                         \
    } while (0)

static MPI_Datatype mpi_type(dt_comm_dtype dt) {
    switch (dt) {
    case DT_COMM_DTYPE_F32:
        return MPI_FLOAT;
    case DT_COMM_DTYPE_F64:
        return MPI_DOUBLE;
    default:
        return MPI_INT64_T;
    }
}

static size_t min_sz(size_t a, size_t b) {
    return a < b ? a : b;
}

/* ---- the backend operations ---------------------------------------------------------- */

static dt_status mpi_max_i64(dt_comm *c, int64_t *v, int n) {
    TRY("MPI_Allreduce (agreement check)",
        MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, MPI_MAX, comm_of(c)));
    return DT_OK;
}

static dt_status mpi_allreduce(dt_comm *c, void *buf, int64_t count, dt_comm_dtype dtype,
                               dt_reduce_op op) {
    const int W = c->size, me = c->rank;
    if (W == 1) return DT_OK; /* AVG divides by 1 */
    const size_t es = dt__comm_dtype_size(dtype);
    MPI_Datatype T = mpi_type(dtype);
    /* elements per segment: at least W, at most INT_MAX/2 (MPI counts are int) */
    size_t seg = c->chunk_bytes / es;
    if (seg < (size_t)W) seg = (size_t)W;
    if (seg > (size_t)INT_MAX / 2) seg = (size_t)INT_MAX / 2;
    seg = min_sz(seg, (size_t)count);
    size_t piece = (seg + (size_t)W - 1) / (size_t)W; /* largest slice of a segment */
    size_t ints = 4 * (size_t)W * sizeof(int);
    size_t head = (ints + 63) & ~(size_t)63;
    char *scr = dt__comm_scratch(c, head + (size_t)W * piece * es);
    if (!scr) return dt_last_status();
    int *cnt = (int *)scr, *dsp = cnt + W, *rcnt = dsp + W, *rdsp = rcnt + W;
    char *rbuf = scr + head;
    char *base = buf;
    for (size_t off = 0; off < (size_t)count; off += seg) {
        size_t m = min_sz(seg, (size_t)count - off);
        // rank j owns the slice [j*m/W, (j+1)*m/W) of this segment
        for (int j = 0; j < W; j++) {
            size_t lo = (size_t)j * m / (size_t)W, hi = (size_t)(j + 1) * m / (size_t)W;
            cnt[j] = (int)(hi - lo);
            dsp[j] = (int)lo;
        }
        int mine = cnt[me];
        for (int i = 0; i < W; i++) {
            rcnt[i] = mine;
            rdsp[i] = i * mine;
        }
        char *seg_ptr = base + off * es;
        TRY("MPI_Alltoallv (allreduce)",
            MPI_Alltoallv(seg_ptr, cnt, dsp, T, rbuf, rcnt, rdsp, T, comm_of(c)));
        // rbuf is (W, mine): rank i's copy of my slice; reduce in rank order
        char *dst = seg_ptr + (size_t)dsp[me] * es;
        if (mine > 0) {
            memcpy(dst, rbuf, (size_t)mine * es);
            for (int i = 1; i < W; i++)
                dt__comm_combine(dst, rbuf + (size_t)i * (size_t)mine * es, mine, dtype, op);
            if (op == DT_REDUCE_OP_AVG) dt__comm_divide(dst, mine, dtype, W);
        }
        TRY("MPI_Allgatherv (allreduce)",
            MPI_Allgatherv(MPI_IN_PLACE, 0, T, seg_ptr, cnt, dsp, T, comm_of(c)));
    }
    return DT_OK;
}

/* Reduce the (W, n) copies in `rbuf` in rank order into dst (n floats). */
static void reduce_rows(float *dst, const float *rbuf, size_t n, int W, dt_reduce_op op) {
    memcpy(dst, rbuf, n * sizeof(float));
    for (int i = 1; i < W; i++)
        dt__comm_combine(dst, rbuf + (size_t)i * n, (int64_t)n, DT_COMM_DTYPE_F32, op);
    if (op == DT_REDUCE_OP_AVG) dt__comm_divide(dst, (int64_t)n, DT_COMM_DTYPE_F32, W);
}

static dt_status mpi_reduce_scatter(dt_comm *c, const float *send, float *recv, int64_t block,
                                    dt_reduce_op op) {
    const int W = c->size;
    const size_t B = (size_t)block;
    if (W == 1) {
        if (recv != send) memcpy(recv, send, B * sizeof(float));
        return DT_OK;
    }
    // elements of each block moved per round
    size_t per = c->chunk_bytes / sizeof(float) / (size_t)W;
    if (per < 1) per = 1;
    if (per > (size_t)INT_MAX / 2) per = (size_t)INT_MAX / 2;
    if (per >= B) {
        // one round: send is (W, B) contiguous already
        float *rbuf = dt__comm_scratch(c, (size_t)W * B * sizeof(float));
        if (!rbuf) return dt_last_status();
        TRY("MPI_Alltoall (reduce_scatter)",
            MPI_Alltoall(send, (int)B, MPI_FLOAT, rbuf, (int)B, MPI_FLOAT, comm_of(c)));
        reduce_rows(recv, rbuf, B, W, op);
        return DT_OK;
    }
    float *pack = dt__comm_scratch(c, 2 * (size_t)W * per * sizeof(float));
    if (!pack) return dt_last_status();
    float *rbuf = pack + (size_t)W * per;
    for (size_t s = 0; s < B; s += per) {
        size_t n = min_sz(per, B - s);
        // pack is (W, n): elements [s, s+n) of every destination block
        for (int j = 0; j < W; j++)
            memcpy(pack + (size_t)j * n, send + (size_t)j * B + s, n * sizeof(float));
        TRY("MPI_Alltoall (reduce_scatter)",
            MPI_Alltoall(pack, (int)n, MPI_FLOAT, rbuf, (int)n, MPI_FLOAT, comm_of(c)));
        reduce_rows(recv + s, rbuf, n, W, op);
    }
    return DT_OK;
}

/* Like reduce_scatter with uneven pieces: MPI_Alltoallv moves piece j of every rank to rank j,
 * which adds them in rank order (the same bits as the matching elements of an allreduce).
 * Rounds move at most `per` elements of each piece. */
static dt_status mpi_reduce_scatterv(dt_comm *c, const float *send, float *recv,
                                     const int64_t *counts, dt_reduce_op op) {
    const int W = c->size;
    int64_t maxc = 0, total = 0;
    for (int j = 0; j < W; j++) {
        maxc = counts[j] > maxc ? counts[j] : maxc;
        total += counts[j];
    }
    size_t per = c->chunk_bytes / sizeof(float) / (size_t)W;
    if (per < 1) per = 1;
    if (per > (size_t)INT_MAX / (size_t)W) per = (size_t)INT_MAX / (size_t)W;
    const size_t mine = (size_t)counts[c->rank];
    const bool one_round = (size_t)maxc <= per && total <= INT_MAX;
    int *sc = malloc(4 * (size_t)W * sizeof(int));
    if (!sc) return dt_error(DT_ERR_OOM, "dt_comm_reduce_scatterv: out of memory");
    int *sd = sc + W, *rc = sd + W, *rd = rc + W;
    /* one round: the pieces are already consecutive in send and go as they are; otherwise
     * each round packs `per` elements of every piece */
    size_t rows = one_round ? 0 : min_sz(per, (size_t)maxc);
    /* the scratch request is the same on every rank: growing it is collective */
    size_t rrows = one_round ? (size_t)maxc : rows;
    float *pack = dt__comm_scratch(c, ((size_t)W * (rows + rrows) + 16) * sizeof(float));
    if (!pack) {
        free(sc);
        return dt_last_status();
    }
    float *rbuf = pack + (size_t)W * rows;
    dt_status st = DT_OK;
    for (size_t s = 0; s < (size_t)maxc && st == DT_OK; s += per) {
        size_t off = 0, roff = 0, rn = s < mine ? min_sz(per, mine - s) : 0;
        const float *src = send;
        for (int j = 0; j < W; j++) {
            size_t cj = (size_t)counts[j];
            size_t n = s < cj ? min_sz(per, cj - s) : 0;
            if (n && !one_round) memcpy(pack + off, src + s, n * sizeof(float));
            sc[j] = (int)n;
            sd[j] = (int)(one_round ? (size_t)(src - send) : off);
            rc[j] = (int)rn;
            rd[j] = (int)roff;
            off += n;
            roff += rn;
            src += cj;
        }
        int e = MPI_Alltoallv(one_round ? send : pack, sc, sd, MPI_FLOAT, rbuf, rc, rd, MPI_FLOAT,
                              comm_of(c));
        if (e != MPI_SUCCESS)
            st = mpi_fail(c, "MPI_Alltoallv (reduce_scatterv)", e);
        else if (rn)
            reduce_rows(recv + s, rbuf, rn, W, op);
    }
    free(sc);
    return st;
}

static dt_status mpi_allgather(dt_comm *c, const void *send, void *recv, size_t bytes) {
    const int W = c->size;
    char *r = recv;
    const bool in_place = send == r + (size_t)c->rank * bytes;
    if (bytes <= c->chunk_bytes && bytes <= (size_t)INT_MAX) {
        TRY("MPI_Allgather", MPI_Allgather(in_place ? MPI_IN_PLACE : send, (int)bytes, MPI_BYTE,
                                           recv, (int)bytes, MPI_BYTE, comm_of(c)));
        return DT_OK;
    }
    size_t per = c->chunk_bytes / (size_t)W;
    if (per < 1) per = 1;
    if (per > (size_t)INT_MAX / 2) per = (size_t)INT_MAX / 2;
    char *scr = dt__comm_scratch(c, (size_t)W * per);
    if (!scr) return dt_last_status();
    for (size_t s = 0; s < bytes; s += per) {
        size_t n = min_sz(per, bytes - s);
        TRY("MPI_Allgather", MPI_Allgather((const char *)send + s, (int)n, MPI_BYTE, scr, (int)n,
                                           MPI_BYTE, comm_of(c)));
        // scr is (W, n); in place, our own row rewrites the same bytes already in place
        for (int j = 0; j < W; j++) memmove(r + (size_t)j * bytes + s, scr + (size_t)j * n, n);
    }
    return DT_OK;
}

static dt_status mpi_broadcast(dt_comm *c, void *buf, size_t bytes, int root) {
    size_t per = min_sz(c->chunk_bytes, (size_t)INT_MAX / 2);
    for (size_t s = 0; s < bytes; s += per) {
        size_t n = min_sz(per, bytes - s);
        TRY("MPI_Bcast", MPI_Bcast((char *)buf + s, (int)n, MPI_BYTE, root, comm_of(c)));
    }
    return DT_OK;
}

static dt_status mpi_send(dt_comm *c, const void *buf, size_t bytes, int peer, int tag) {
    size_t per = min_sz(c->chunk_bytes, (size_t)INT_MAX / 2), s = 0;
    do { // a 0-byte message is still one message
        size_t n = min_sz(per, bytes - s);
        const char *p = n ? (const char *)buf + s : buf;
        TRY("MPI_Send", MPI_Send(p, (int)n, MPI_BYTE, peer, tag, comm_of(c)));
        s += n;
    } while (s < bytes);
    return DT_OK;
}

/* In-flight sends of one dt_comm_isend: one MPI request per chunk, as mpi_send cuts them. */
typedef struct isend_state {
    int n;
    MPI_Request r[];
} isend_state;

static dt_status mpi_isend(dt_comm *c, const void *buf, size_t bytes, int peer, int tag,
                           void **handle) {
    size_t per = min_sz(c->chunk_bytes, (size_t)INT_MAX / 2);
    size_t chunks = bytes ? (bytes + per - 1) / per : 1;
    isend_state *st = malloc(sizeof *st + chunks * sizeof(MPI_Request));
    if (!st) return dt_error(DT_ERR_OOM, "dt_comm_isend: out of memory");
    st->n = 0;
    size_t s = 0;
    do {
        size_t n = min_sz(per, bytes - s);
        const char *p = n ? (const char *)buf + s : buf;
        int e = MPI_Isend(p, (int)n, MPI_BYTE, peer, tag, comm_of(c), &st->r[st->n]);
        if (e != MPI_SUCCESS) {
            MPI_Waitall(st->n, st->r, MPI_STATUSES_IGNORE);
            free(st);
            return mpi_fail(c, "MPI_Isend", e);
        }
        st->n++;
        s += n;
    } while (s < bytes);
    *handle = st;
    return DT_OK;
}

static dt_status mpi_wait(dt_comm *c, void *handle) {
    isend_state *st = handle;
    int e = MPI_Waitall(st->n, st->r, MPI_STATUSES_IGNORE);
    free(st);
    return e == MPI_SUCCESS ? DT_OK : mpi_fail(c, "MPI_Waitall (isend)", e);
}

static dt_status mpi_recv(dt_comm *c, void *buf, size_t bytes, int peer, int tag) {
    size_t per = min_sz(c->chunk_bytes, (size_t)INT_MAX / 2), s = 0;
    do {
        size_t n = min_sz(per, bytes - s);
        char *p = n ? (char *)buf + s : buf;
        MPI_Status status;
        int e = MPI_Recv(p, (int)n, MPI_BYTE, peer, tag, comm_of(c), &status);
        if (e != MPI_SUCCESS) return mpi_fail(c, "MPI_Recv", e);
        int got = 0;
        MPI_Get_count(&status, MPI_BYTE, &got);
        if ((size_t)got != n)
            return dt_error(DT_ERR_COMM,
                            "dt_comm_recv on rank %d: size mismatch: rank %d sent "
                            "a shorter message with tag %d than the %zu-byte receive (%d bytes "
                            "where %zu were expected at offset %zu); hint: sender and receiver "
                            "must agree on the size",
                            c->rank, peer, tag, bytes, got, n, s);
        s += n;
    } while (s < bytes);
    return DT_OK;
}

static dt_status mpi_barrier(dt_comm *c) {
    TRY("MPI_Barrier", MPI_Barrier(comm_of(c)));
    return DT_OK;
}

/* Variable-count gathers. One call straight into place when every count fits in a chunk and
 * the total fits in int; otherwise rounds of at most `per` bytes from each rank through
 * scratch. The choice depends only on counts, which every rank knows, so all ranks take the
 * same path. */
static dt_status gatherv_impl(dt_comm *c, bool all, const void *send, size_t bytes, char *recv,
                              const size_t *counts, const size_t *displs, int root) {
    const int W = c->size;
    size_t maxc = 0, total = 0;
    for (int i = 0; i < W; i++) {
        if (counts[i] > maxc) maxc = counts[i];
        total += counts[i] + 16;
    }
    size_t ints = 2 * (size_t)W * sizeof(int), head = (ints + 63) & ~(size_t)63;
    if (maxc <= c->chunk_bytes && total <= (size_t)INT_MAX) {
        int *icnt = dt__comm_scratch(c, ints);
        if (!icnt) return dt_last_status();
        int *idsp = icnt + W;
        if (all || c->rank == root)
            for (int i = 0; i < W; i++) {
                icnt[i] = (int)counts[i];
                idsp[i] = (int)displs[i];
            }
        // send already in its place in recv: MPI forbids aliasing, MPI_IN_PLACE says it
        const bool in_place = all && (const char *)send == recv + displs[c->rank];
        if (all)
            TRY("MPI_Allgatherv", MPI_Allgatherv(in_place ? MPI_IN_PLACE : send, (int)bytes,
                                                 MPI_BYTE, recv, icnt, idsp, MPI_BYTE, comm_of(c)));
        else
            TRY("MPI_Gatherv", MPI_Gatherv(send, (int)bytes, MPI_BYTE, recv, icnt, idsp, MPI_BYTE,
                                           root, comm_of(c)));
        return DT_OK;
    }
    size_t per = c->chunk_bytes / (size_t)W;
    if (per < 1) per = 1;
    if (per > (size_t)INT_MAX / 2 / (size_t)W) per = (size_t)INT_MAX / 2 / (size_t)W;
    char *scr = dt__comm_scratch(c, head + (size_t)W * per);
    if (!scr) return dt_last_status();
    int *icnt = (int *)scr, *idsp = icnt + W;
    char *rbuf = scr + head;
    for (size_t o = 0; o < maxc; o += per) {
        // round: bytes [o, o+per) of every rank's buffer, rank i's at rbuf + i*per
        for (int i = 0; i < W; i++) {
            icnt[i] = counts[i] > o ? (int)min_sz(per, counts[i] - o) : 0;
            idsp[i] = (int)((size_t)i * per);
        }
        int k = icnt[c->rank];
        const char *p = k ? (const char *)send + o : send;
        if (all)
            TRY("MPI_Allgatherv",
                MPI_Allgatherv(p, k, MPI_BYTE, rbuf, icnt, idsp, MPI_BYTE, comm_of(c)));
        else
            TRY("MPI_Gatherv",
                MPI_Gatherv(p, k, MPI_BYTE, rbuf, icnt, idsp, MPI_BYTE, root, comm_of(c)));
        if (all || c->rank == root)
            for (int i = 0; i < W; i++)
                if (icnt[i]) memcpy(recv + displs[i] + o, rbuf + idsp[i], (size_t)icnt[i]);
    }
    return DT_OK;
}

static dt_status mpi_gatherv(dt_comm *c, const void *send, size_t bytes, void *recv,
                             const size_t *counts, const size_t *displs, int root) {
    return gatherv_impl(c, false, send, bytes, recv, counts, displs, root);
}

static dt_status mpi_allgatherv(dt_comm *c, const void *send, size_t bytes, void *recv,
                                const size_t *counts, const size_t *displs) {
    return gatherv_impl(c, true, send, bytes, recv, counts, displs, 0);
}

static dt_status mpi_split(dt_comm *c, int color, int key, dt_comm **out);

static dt_status mpi_destroy(dt_comm *c) {
    mpi_state *st = c->impl;
    int e = MPI_SUCCESS, finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) { // the trial finalized MPI under us (manual initialisation)
        free(st);
        c->impl = NULL;
        if (!c->world) {
            pthread_mutex_lock(&g_lock);
            g_worlds--;
            pthread_mutex_unlock(&g_lock);
        }
        return dt_error(DT_ERR_STATE, "freeing a communicator after MPI_Finalize; hint: call "
                                      "dt_comm_free / dt_comm_finalize before MPI_Finalize");
    }
    if (st) {
        e = MPI_Comm_free(&st->comm);
        free(st);
        c->impl = NULL;
    }
    if (c->world) return e == MPI_SUCCESS ? DT_OK : mpi_fail(c, "MPI_Comm_free", e);
    pthread_mutex_lock(&g_lock);
    int fe = MPI_SUCCESS;
    if (--g_worlds == 0 && g_we_init) {
        fe = MPI_Finalize();
        g_we_init = false;
    }
    pthread_mutex_unlock(&g_lock);
    if (e != MPI_SUCCESS) return mpi_fail(c, "MPI_Comm_free", e);
    if (fe != MPI_SUCCESS) return mpi_fail(c, "MPI_Finalize", fe);
    return DT_OK;
}

static const dt_comm_backend mpi_backend = {
    .name = "mpi",
    .max_i64 = mpi_max_i64,
    .allreduce = mpi_allreduce,
    .reduce_scatter = mpi_reduce_scatter,
    .allgather = mpi_allgather,
    .broadcast = mpi_broadcast,
    .send = mpi_send,
    .recv = mpi_recv,
    .isend = mpi_isend,
    .wait = mpi_wait,
    .barrier = mpi_barrier,
    .gatherv = mpi_gatherv,
    .allgatherv = mpi_allgatherv,
    .reduce_scatterv = mpi_reduce_scatterv,
    .split = mpi_split,
    .destroy = mpi_destroy,
};

/* Wrap an MPI communicator we own (errors return) into a dt_comm. On failure frees `comm`. */
static dt_status wrap(MPI_Comm comm, dt_comm *parent, dt_comm **out) {
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    mpi_state *st = malloc(sizeof *st);
    dt_comm *c = st ? dt__comm_new(&mpi_backend, st, rank, size, parent) : NULL;
    if (!c) {
        free(st);
        MPI_Comm_free(&comm);
        return dt_error(DT_ERR_OOM, "out of memory creating an MPI communicator");
    }
    st->comm = comm;
    *out = c;
    return DT_OK;
}

static dt_status mpi_split(dt_comm *c, int color, int key, dt_comm **out) {
    MPI_Comm nc = MPI_COMM_NULL;
    *out = NULL;
    TRY("MPI_Comm_split", MPI_Comm_split(comm_of(c), color < 0 ? MPI_UNDEFINED : color, key, &nc));
    if (nc == MPI_COMM_NULL) return DT_OK;
    return wrap(nc, c, out);
}

dt_status dt__comm_mpi_init(bool manual, dt_comm **out) {
    *out = NULL;
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized)
        return dt_error(DT_ERR_STATE,
                        "dt_comm_init: MPI was already finalized in this process "
                        "and cannot be initialised again; hint: keep one dt_comm world alive "
                        "for the life of the process");
    pthread_mutex_lock(&g_lock);
    if (!inited) {
        if (manual) {
            pthread_mutex_unlock(&g_lock);
            return dt_error(DT_ERR_STATE,
                            "dt_comm_init: DTRAIN_MANUAL_INIT_DISTRIBUTED=1 says "
                            "the trial initialises MPI itself, but MPI is not initialised; "
                            "hint: call MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, "
                            "&provided) before dt_comm_init, or unset "
                            "DTRAIN_MANUAL_INIT_DISTRIBUTED");
        }
        int provided = 0;
        int e = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (e != MPI_SUCCESS) {
            pthread_mutex_unlock(&g_lock);
            return dt_error(DT_ERR_COMM,
                            "dt_comm_init: MPI_Init_thread failed (error %d); "
                            "hint: check that the job was started with mpirun and that every "
                            "rank can start",
                            e);
        }
        if (provided < MPI_THREAD_FUNNELED)
            dt_log(DT_LOG_WARN,
                   "MPI provides thread level %d < MPI_THREAD_FUNNELED; "
                   "communication stays on the main thread",
                   provided);
        g_we_init = true;
    }
    MPI_Comm world = MPI_COMM_NULL;
    int e = MPI_Comm_dup(MPI_COMM_WORLD, &world);
    if (e != MPI_SUCCESS) {
        pthread_mutex_unlock(&g_lock);
        return dt_error(DT_ERR_COMM,
                        "dt_comm_init: MPI_Comm_dup(MPI_COMM_WORLD) failed "
                        "(error %d)",
                        e);
    }
    g_worlds++;
    pthread_mutex_unlock(&g_lock);
    dt_status st = wrap(world, NULL, out);
    if (st != DT_OK) {
        pthread_mutex_lock(&g_lock);
        if (--g_worlds == 0 && g_we_init) {
            MPI_Finalize();
            g_we_init = false;
        }
        pthread_mutex_unlock(&g_lock);
    }
    return st;
}
