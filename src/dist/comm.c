/*
 * comm.c — the communicator front end: backend choice at start-up, argument validation, the
 * agreement check that turns cross-rank mismatches into errors on every rank, messages a rank
 * sends to itself, and the object collectives (variable-length byte buffers) built from the
 * backends' raw operations. Backends live in comm_self.c and comm_mpi.c; what they share with
 * this file is in comm_backend.c.
 */
#include "dist/comm_impl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers ------------------------------------------------------------------- */

static const char *dtype_name(int dt) {
    static const char *n[] = {"f32", "f64", "i64"};
    return dt >= 0 && dt < DT_COMM_DTYPE_COUNT ? n[dt] : "?";
}

static const char *op_name(int op) {
    static const char *n[] = {"sum", "avg", "max", "min"};
    return op >= 0 && op < DT_REDUCE_OP_COUNT ? n[op] : "?";
}

void dt__comm_set_chunk_bytes(dt_comm *c, size_t bytes) {
    c->chunk_bytes = bytes < 16 ? 16 : bytes;
}

dt_status dt_comm_agree(dt_comm *c, dt_status local, const char *what) {
    return dt__comm_agree_status(c, local, what ? what : "dt_comm_agree", DT_OK);
}

/* ---- the agreement check ---------------------------------------------------------------- */

enum {
    K_ALLREDUCE = 1,
    K_REDUCE_SCATTER,
    K_ALLGATHER,
    K_BROADCAST,
    K_BARRIER,
    K_GATHER_BYTES,
    K_ALLGATHER_BYTES,
    K_BROADCAST_BYTES,
    K_SPLIT,
    K_REDUCE_SCATTERV,
    K_ALLGATHERV,
    K_COUNT
};

static const char *kind_name(int64_t k) {
    static const char *n[] = {"?",
                              "allreduce",
                              "reduce_scatter",
                              "allgather",
                              "broadcast",
                              "barrier",
                              "gather_bytes",
                              "allgather_bytes",
                              "broadcast_bytes",
                              "split",
                              "reduce_scatterv",
                              "allgatherv"};
    return k > 0 && k < K_COUNT ? n[k] : "?";
}

/* What the values of each kind mean (for messages), and how to print them. */
static const char *value_label(int kind, int i) {
    switch (kind) {
    case K_ALLREDUCE:
        return (const char *[]){"element count", "dtype", "op"}[i];
    case K_REDUCE_SCATTER:
        return (const char *[]){"block size", "op", ""}[i];
    case K_ALLGATHER:
        return (const char *[]){"byte count", "", ""}[i];
    case K_BROADCAST:
        return (const char *[]){"byte count", "root", ""}[i];
    case K_REDUCE_SCATTERV:
        return (const char *[]){"total count", "op", "count layout"}[i];
    case K_ALLGATHERV:
        return (const char *[]){"total bytes", "byte layout", ""}[i];
    case K_GATHER_BYTES:
    case K_BROADCAST_BYTES:
        return (const char *[]){"root", "", ""}[i];
    default:
        return "";
    }
}

static void value_str(char *buf, size_t n, const char *label, int64_t v) {
    if (strcmp(label, "dtype") == 0)
        snprintf(buf, n, "%s", dtype_name((int)v));
    else if (strcmp(label, "op") == 0)
        snprintf(buf, n, "%s", op_name((int)v));
    else
        snprintf(buf, n, "%lld", (long long)v);
}

/* Run before each collective. `local` is this rank's validation result (an error already
 * recorded with dt_error, or DT_OK). With checks on, all ranks learn in one exact MAX-reduce
 * whether they called the same collective with the same values and whether any rank's
 * arguments were invalid; then either all proceed or all return an error. */
static dt_status agree(dt_comm *c, int kind, dt_status local, int64_t a, int64_t b, int64_t d) {
    if (!c->checks || c->size == 1) return local;
    char msg[1024];
    if (local != DT_OK) snprintf(msg, sizeof msg, "%s", dt_last_error());
    int64_t mine[3] = {a, b, d};
    int64_t v[9] = {kind, -kind, local != DT_OK ? c->rank + 1 : 0, a, -a, b, -b, d, -d};
    dt_status st = c->be->max_i64(c, v, 9);
    if (st != DT_OK) return st;
    const char *what = kind_name(kind);
    if (v[0] != kind || -v[1] != kind)
        return dt_error(DT_ERR_COMM,
                        "dt_comm_%s: ranks called different collectives at the "
                        "same point (this rank %d of %d: %s, another: %s); hint: every rank "
                        "must call the same collectives in the same order",
                        what, c->rank, c->size, what, kind_name(v[0] != kind ? v[0] : -v[1]));
    if (v[2] > 0) {
        if (local != DT_OK) return dt_error(local, "%s", msg);
        return dt_error(DT_ERR_COMM,
                        "dt_comm_%s: rank %lld of %d passed invalid arguments "
                        "(see its error); hint: every rank returned an error from this call",
                        what, (long long)(v[2] - 1), c->size);
    }
    for (int i = 0; i < 3; i++) {
        int64_t hi = v[3 + 2 * i], lo = -v[4 + 2 * i];
        if (hi == mine[i] && lo == mine[i]) continue;
        const char *label = value_label(kind, i);
        char sm[32], sl[32], sh[32];
        value_str(sm, sizeof sm, label, mine[i]);
        value_str(sl, sizeof sl, label, lo);
        value_str(sh, sizeof sh, label, hi);
        return dt_error(DT_ERR_COMM,
                        "dt_comm_%s: size mismatch: ranks disagree on the %s "
                        "(this rank %d of %d: %s; smallest: %s, largest: %s); hint: every rank "
                        "must pass the same count, dtype, op and root",
                        what, label, c->rank, c->size, sm, sl, sh);
    }
    return DT_OK;
}

/* ---- initialisation --------------------------------------------------------------------- */

static bool env_set(const char *name) {
    const char *v = getenv(name);
    return v && *v;
}

static long env_long(const char *name, long dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    return *end ? dflt : x;
}

dt_status dt_comm_init_self(dt_comm **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "dt_comm_init_self: out is NULL");
    *out = dt__comm_self_new();
    return *out ? DT_OK : dt_last_status();
}

dt_status dt_comm_init(dt_comm **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "dt_comm_init: out is NULL");
    *out = NULL;
    const char *forced = getenv("DTRAIN_COMM_BACKEND");
    const char *manual_s = getenv("DTRAIN_MANUAL_INIT_DISTRIBUTED");
    bool manual = manual_s && (strcmp(manual_s, "1") == 0 || strcmp(manual_s, "true") == 0);
    bool launched = env_set("OMPI_COMM_WORLD_SIZE") || env_set("PMIX_RANK") ||
                    env_set("PMI_RANK") || env_set("PMI_SIZE");
    if (forced && *forced) {
        if (strcmp(forced, "self") == 0) return dt_comm_init_self(out);
        if (strcmp(forced, "mpi") == 0) return dt__comm_mpi_init(manual, out);
        return dt_error(DT_ERR_CONFIG,
                        "DTRAIN_COMM_BACKEND=%s is not a backend; hint: use "
                        "self or mpi, or unset it to choose from the environment",
                        forced);
    }
    if (launched || manual) return dt__comm_mpi_init(manual, out);
    long world = env_long("WORLD_SIZE", 1), rank = env_long("RANK", 0);
    long local_rank = env_long("LOCAL_RANK", 0);
    if (world > 1 || rank > 0 || local_rank > 0)
        return dt_error(DT_ERR_CONFIG,
                        "distributed launch variables are set (WORLD_SIZE=%s "
                        "RANK=%s LOCAL_RANK=%s) but this process was not started by mpirun; "
                        "dtrain communicates over MPI only; hint: launch with `mpirun -np %ld "
                        "...` or `dtrain train --slots %ld`, or unset these variables",
                        getenv("WORLD_SIZE") ? getenv("WORLD_SIZE") : "unset",
                        getenv("RANK") ? getenv("RANK") : "unset",
                        getenv("LOCAL_RANK") ? getenv("LOCAL_RANK") : "unset",
                        world > 1 ? world : 2, world > 1 ? world : 2);
    return dt_comm_init_self(out);
}

static void comm_release(dt_comm *c) {
    while (c->mbox_head) {
        dt__msg *m = c->mbox_head;
        c->mbox_head = m->next;
        free(m);
    }
    if (c->scratch) {
        free(c->scratch);
        if (c->dev) dt_mem_release(c->dev, DT_MEM_COMM, (int64_t)c->scratch_bytes);
    }
    free(c);
}

dt_status dt_comm_finalize(dt_comm *world) {
    if (!world) return DT_OK;
    if (world->world)
        return dt_error(DT_ERR_INVALID, "dt_comm_finalize: this communicator came from "
                                        "dt_comm_split; hint: free it with dt_comm_free");
    if (world->live_children > 0)
        return dt_error(DT_ERR_STATE,
                        "dt_comm_finalize: %d communicator(s) split from this "
                        "world are still alive; hint: dt_comm_free (or dt_dist_ctx_free) them "
                        "first",
                        world->live_children);
    dt_status st = world->be->destroy(world);
    comm_release(world);
    return st;
}

void dt_comm_free(dt_comm *c) {
    if (!c) return;
    if (!c->world) {
        dt_log(DT_LOG_WARN, "dt_comm_free called on a world communicator; use "
                            "dt_comm_finalize (finalizing it now)");
        dt_comm_finalize(c);
        return;
    }
    c->world->live_children--;
    c->be->destroy(c);
    comm_release(c);
}

int dt_comm_rank(const dt_comm *c) {
    return c ? c->rank : -1;
}
int dt_comm_size(const dt_comm *c) {
    return c ? c->size : 0;
}
const char *dt_comm_backend_name(const dt_comm *c) {
    return c ? c->be->name : "none";
}
void dt_comm_set_device(dt_comm *c, dt_device *dev) {
    if (c && !c->scratch) c->dev = dev;
}
void dt_comm_set_checks(dt_comm *c, bool on) {
    if (c) c->checks = on;
}

dt_status dt_comm_split(dt_comm *c, int color, int key, dt_comm **out) {
    if (!c || !out) return dt_error(DT_ERR_INVALID, "dt_comm_split: NULL communicator or out");
    *out = NULL;
    dt_status local = DT_OK;
    if (color < 0 && color != DT_COMM_UNDEFINED)
        local = dt_error(DT_ERR_INVALID,
                         "dt_comm_split: color %d is negative; hint: colors "
                         "are >= 0, or DT_COMM_UNDEFINED to join no group",
                         color);
    dt_status st = agree(c, K_SPLIT, local, 0, 0, 0);
    if (st != DT_OK) return st;
    return c->be->split(c, color, key, out);
}

/* ---- collectives -------------------------------------------------------------------------- */

static bool overlaps(const void *a, size_t na, const void *b, size_t nb) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na && nb && x < y + nb && y < x + na;
}

dt_status dt_comm_allreduce(dt_comm *c, void *buf, int64_t count, dt_comm_dtype dtype,
                            dt_reduce_op op) {
    if (!c) return dt_error(DT_ERR_INVALID, "dt_comm_allreduce: communicator is NULL");
    dt_status local = DT_OK;
    if (count < 0)
        local = dt_error(DT_ERR_INVALID, "dt_comm_allreduce: count %lld < 0", (long long)count);
    else if (dtype < 0 || dtype >= DT_COMM_DTYPE_COUNT)
        local = dt_error(DT_ERR_INVALID, "dt_comm_allreduce: unknown dtype %d", (int)dtype);
    else if (op < 0 || op >= DT_REDUCE_OP_COUNT)
        local = dt_error(DT_ERR_INVALID, "dt_comm_allreduce: unknown op %d", (int)op);
    else if (count > 0 && !buf)
        local = dt_error(DT_ERR_INVALID, "dt_comm_allreduce: buf is NULL");
    else if (count > (int64_t)(SIZE_MAX / 16))
        local = dt_error(DT_ERR_INVALID, "dt_comm_allreduce: count %lld is too large",
                         (long long)count);
    dt_status st = agree(c, K_ALLREDUCE, local, count, dtype, op);
    if (st != DT_OK || count == 0) return st;
    return c->be->allreduce(c, buf, count, dtype, op);
}

dt_status dt_comm_reduce_scatter(dt_comm *c, const float *send, float *recv, int64_t block,
                                 dt_reduce_op op) {
    if (!c) return dt_error(DT_ERR_INVALID, "dt_comm_reduce_scatter: communicator is NULL");
    dt_status local = DT_OK;
    if (block < 0 || block > (int64_t)(SIZE_MAX / 16 / (size_t)c->size))
        local = dt_error(DT_ERR_INVALID, "dt_comm_reduce_scatter: block %lld out of range",
                         (long long)block);
    else if (op < 0 || op >= DT_REDUCE_OP_COUNT)
        local = dt_error(DT_ERR_INVALID, "dt_comm_reduce_scatter: unknown op %d", (int)op);
    else if (block > 0 && (!send || !recv))
        local = dt_error(DT_ERR_INVALID, "dt_comm_reduce_scatter: send or recv is NULL");
    else if (block > 0 && recv != send + (size_t)c->rank * (size_t)block &&
             overlaps(send, (size_t)c->size * (size_t)block * 4, recv, (size_t)block * 4))
        local = dt_error(DT_ERR_INVALID, "dt_comm_reduce_scatter: recv overlaps send; hint: "
                                         "use separate buffers or recv = send + rank*block");
    dt_status st = agree(c, K_REDUCE_SCATTER, local, block, op, 0);
    if (st != DT_OK || block == 0) return st;
    return c->be->reduce_scatter(c, send, recv, block, op);
}

/* A hash of a count list, so ranks agree on the whole layout in one check. */
static int64_t layout_hash(const int64_t *v, int n) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) h = (h ^ (uint64_t)v[i]) * 1099511628211ull;
    return (int64_t)(h >> 1);
}

dt_status dt_comm_reduce_scatterv(dt_comm *c, const float *send, float *recv, const int64_t *counts,
                                  dt_reduce_op op) {
    if (!c) return dt_error(DT_ERR_INVALID, "dt_comm_reduce_scatterv: communicator is NULL");
    dt_status local = DT_OK;
    int64_t total = 0, h = 0;
    if (!counts) {
        local = dt_error(DT_ERR_INVALID, "dt_comm_reduce_scatterv: counts is NULL");
    } else {
        for (int j = 0; j < c->size && local == DT_OK; j++) {
            if (counts[j] < 0 || counts[j] > INT64_MAX / 8 - total)
                local = dt_error(DT_ERR_INVALID,
                                 "dt_comm_reduce_scatterv: count %lld of rank %d out of range",
                                 (long long)counts[j], j);
            else
                total += counts[j];
        }
        if (local == DT_OK) h = layout_hash(counts, c->size);
    }
    if (local == DT_OK && (op < 0 || op >= DT_REDUCE_OP_COUNT))
        local = dt_error(DT_ERR_INVALID, "dt_comm_reduce_scatterv: unknown op %d", (int)op);
    else if (local == DT_OK && total > 0 && (!send || (counts[c->rank] > 0 && !recv)))
        local = dt_error(DT_ERR_INVALID, "dt_comm_reduce_scatterv: send or recv is NULL");
    dt_status st = agree(c, K_REDUCE_SCATTERV, local, total, op, h);
    if (st != DT_OK || total == 0) return st;
    return c->be->reduce_scatterv(c, send, recv, counts, op);
}

dt_status dt_comm_allgatherv(dt_comm *c, const void *send, void *recv, const size_t *counts) {
    if (!c) return dt_error(DT_ERR_INVALID, "dt_comm_allgatherv: communicator is NULL");
    dt_status local = DT_OK;
    size_t *displs = NULL;
    int64_t total = 0, h = 0;
    if (!counts) {
        local = dt_error(DT_ERR_INVALID, "dt_comm_allgatherv: counts is NULL");
    } else if (!(displs = malloc((size_t)c->size * sizeof *displs))) {
        local = dt_error(DT_ERR_OOM, "dt_comm_allgatherv: out of memory");
    } else {
        int64_t *v = (int64_t *)displs; /* hash the counts before displs overwrites them */
        for (int j = 0; j < c->size; j++) v[j] = (int64_t)counts[j];
        h = layout_hash(v, c->size);
        for (int j = 0; j < c->size; j++) {
            displs[j] = (size_t)total;
            total += (int64_t)counts[j];
        }
        if (total > 0 && (!recv || (counts[c->rank] > 0 && !send)))
            local = dt_error(DT_ERR_INVALID, "dt_comm_allgatherv: send or recv is NULL");
    }
    dt_status st = agree(c, K_ALLGATHERV, local, total, h, 0);
    if (st == DT_OK && total > 0)
        st = c->be->allgatherv(c, send, counts[c->rank], recv, counts, displs);
    free(displs);
    return st;
}

dt_status dt_comm_allgather(dt_comm *c, const void *send, void *recv, size_t bytes) {
    if (!c) return dt_error(DT_ERR_INVALID, "dt_comm_allgather: communicator is NULL");
    dt_status local = DT_OK;
    if (bytes > (size_t)INT64_MAX / (size_t)c->size)
        local = dt_error(DT_ERR_INVALID, "dt_comm_allgather: %zu bytes is too large", bytes);
    else if (bytes > 0 && (!send || !recv))
        local = dt_error(DT_ERR_INVALID, "dt_comm_allgather: send or recv is NULL");
    else if (bytes > 0 && send != (char *)recv + (size_t)c->rank * bytes &&
             overlaps(send, bytes, recv, bytes * (size_t)c->size))
        local = dt_error(DT_ERR_INVALID, "dt_comm_allgather: send overlaps recv; hint: use "
                                         "separate buffers or send = recv + rank*bytes");
    dt_status st = agree(c, K_ALLGATHER, local, (int64_t)bytes, 0, 0);
    if (st != DT_OK || bytes == 0) return st;
    return c->be->allgather(c, send, recv, bytes);
}

dt_status dt_comm_broadcast(dt_comm *c, void *buf, size_t bytes, int root) {
    if (!c) return dt_error(DT_ERR_INVALID, "dt_comm_broadcast: communicator is NULL");
    dt_status local = DT_OK;
    if (root < 0 || root >= c->size)
        local = dt_error(DT_ERR_INVALID,
                         "dt_comm_broadcast: root %d is not a rank of this "
                         "communicator (size %d)",
                         root, c->size);
    else if (bytes > (size_t)INT64_MAX)
        local = dt_error(DT_ERR_INVALID, "dt_comm_broadcast: %zu bytes is too large", bytes);
    else if (bytes > 0 && !buf)
        local = dt_error(DT_ERR_INVALID, "dt_comm_broadcast: buf is NULL");
    dt_status st = agree(c, K_BROADCAST, local, (int64_t)bytes, root, 0);
    if (st != DT_OK || bytes == 0) return st;
    return c->be->broadcast(c, buf, bytes, root);
}

static dt_status check_p2p(dt_comm *c, const char *fn, const void *buf, size_t bytes, int peer,
                           int tag) {
    if (!c) return dt_error(DT_ERR_INVALID, "%s: communicator is NULL", fn);
    if (peer < 0 || peer >= c->size)
        return dt_error(DT_ERR_INVALID,
                        "%s: peer %d is not a rank of this communicator "
                        "(size %d)",
                        fn, peer, c->size);
    if (tag < 0 || tag > DT_COMM_TAG_MAX)
        return dt_error(DT_ERR_INVALID, "%s: tag %d outside [0, %d]", fn, tag, DT_COMM_TAG_MAX);
    if (bytes > 0 && !buf) return dt_error(DT_ERR_INVALID, "%s: buf is NULL", fn);
    return DT_OK;
}

dt_status dt_comm_send(dt_comm *c, const void *buf, size_t bytes, int peer, int tag) {
    dt_status st = check_p2p(c, "dt_comm_send", buf, bytes, peer, tag);
    if (st != DT_OK) return st;
    if (peer != c->rank) return c->be->send(c, buf, bytes, peer, tag);
    dt__msg *m = malloc(sizeof *m + bytes);
    if (!m)
        return dt_error(DT_ERR_OOM,
                        "dt_comm_send: out of memory buffering %zu bytes "
                        "sent to self",
                        bytes);
    m->next = NULL;
    m->tag = tag;
    m->len = bytes;
    if (bytes) memcpy(m->data, buf, bytes);
    if (c->mbox_tail)
        c->mbox_tail->next = m;
    else
        c->mbox_head = m;
    c->mbox_tail = m;
    return DT_OK;
}

struct dt_comm_req {
    void *handle; /* the backend's, NULL when the send completed at once (to self) */
};

dt_status dt_comm_isend(dt_comm *c, const void *buf, size_t bytes, int peer, int tag,
                        dt_comm_req **req) {
    if (req) *req = NULL;
    if (!req) return dt_error(DT_ERR_INVALID, "dt_comm_isend: req is NULL");
    dt_status st = check_p2p(c, "dt_comm_isend", buf, bytes, peer, tag);
    if (st != DT_OK) return st;
    dt_comm_req *r = calloc(1, sizeof *r);
    if (!r) return dt_error(DT_ERR_OOM, "dt_comm_isend: out of memory");
    /* to self: buffered at once, like dt_comm_send */
    st = peer == c->rank ? dt_comm_send(c, buf, bytes, peer, tag)
                         : c->be->isend(c, buf, bytes, peer, tag, &r->handle);
    if (st != DT_OK) {
        free(r);
        return st;
    }
    *req = r;
    return DT_OK;
}

dt_status dt_comm_wait(dt_comm *c, dt_comm_req *req) {
    if (!req) return DT_OK;
    dt_status st = req->handle ? c->be->wait(c, req->handle) : DT_OK;
    free(req);
    return st;
}

dt_status dt_comm_recv(dt_comm *c, void *buf, size_t bytes, int peer, int tag) {
    dt_status st = check_p2p(c, "dt_comm_recv", buf, bytes, peer, tag);
    if (st != DT_OK) return st;
    if (peer != c->rank) return c->be->recv(c, buf, bytes, peer, tag);
    dt__msg *prev = NULL, *m = c->mbox_head;
    while (m && m->tag != tag) {
        prev = m;
        m = m->next;
    }
    if (!m)
        return dt_error(DT_ERR_STATE,
                        "dt_comm_recv: rank %d receives from itself with tag %d "
                        "but sent nothing with that tag (this would block forever); hint: "
                        "send to yourself before receiving",
                        c->rank, tag);
    if (prev)
        prev->next = m->next;
    else
        c->mbox_head = m->next;
    if (c->mbox_tail == m) c->mbox_tail = prev;
    st = DT_OK;
    if (m->len != bytes)
        st = dt_error(DT_ERR_COMM,
                      "dt_comm_recv: size mismatch: rank %d sent itself %zu bytes "
                      "with tag %d, the receive expects %zu; hint: sender and receiver must "
                      "agree on the size",
                      c->rank, m->len, tag, bytes);
    else if (bytes)
        memcpy(buf, m->data, bytes);
    free(m);
    return st;
}

dt_status dt_comm_barrier(dt_comm *c) {
    if (!c) return dt_error(DT_ERR_INVALID, "dt_comm_barrier: communicator is NULL");
    dt_status st = agree(c, K_BARRIER, DT_OK, 0, 0, 0);
    if (st != DT_OK) return st;
    return c->be->barrier(c);
}

/* ---- object collectives ------------------------------------------------------------------- */

void dt_bytes_list_free(dt_bytes_list *l) {
    free(l);
}

void dt_bytes_free(dt_bytes *b) {
    if (!b) return;
    free(b->data);
    b->data = NULL;
    b->len = 0;
}

#define ALIGN16(x) (((x) + (size_t)15) & ~(size_t)15)

/* One allocation holding the list, its items and the payloads (each 16-byte aligned).
 * displs[i] gets item i's offset from the returned payload base. NULL with DT_ERR_OOM. */
static dt_bytes_list *list_alloc(int n, const size_t *lens, size_t *displs, char **base) {
    size_t head = ALIGN16(sizeof(dt_bytes_list)) + ALIGN16((size_t)n * sizeof(dt_bytes));
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        displs[i] = off;
        if (lens[i] > SIZE_MAX / 2 - off - 16) {
            dt_error(DT_ERR_OOM, "object collective: total size overflows");
            return NULL;
        }
        off += ALIGN16(lens[i]);
    }
    char *mem = malloc(head + off + 16);
    if (!mem) {
        dt_error(DT_ERR_OOM, "object collective: out of memory for %zu bytes", head + off);
        return NULL;
    }
    dt_bytes_list *l = (dt_bytes_list *)mem;
    l->count = n;
    l->items = (dt_bytes *)(mem + ALIGN16(sizeof(dt_bytes_list)));
    *base = mem + head;
    for (int i = 0; i < n; i++) {
        l->items[i].data = *base + displs[i];
        l->items[i].len = lens[i];
    }
    return l;
}

/* Everyone learns every rank's length (the lengths are rank-dependent, so they are exchanged
 * rather than agreed on). */
static dt_status exchange_lengths(dt_comm *c, size_t len, size_t **lens) {
    *lens = malloc((size_t)c->size * sizeof(size_t));
    dt_status local = *lens ? DT_OK : dt_error(DT_ERR_OOM, "object collective: out of memory");
    dt_status st = dt__comm_agree_status(c, local, "object collective", DT_ERR_COMM);
    if (st != DT_OK) {
        free(*lens);
        *lens = NULL;
        return st;
    }
    size_t mine = len; /* every rank runs the same build: same size_t */
    st = c->be->allgather(c, &mine, *lens, sizeof mine);
    if (st != DT_OK) {
        free(*lens);
        *lens = NULL;
    }
    return st;
}

static dt_status check_obj(dt_comm *c, const char *fn, const void *data, size_t len, int root,
                           void *out) {
    if (!out) return dt_error(DT_ERR_INVALID, "%s: out is NULL", fn);
    if (len > 0 && !data) return dt_error(DT_ERR_INVALID, "%s: data is NULL", fn);
    if (root < 0 || root >= c->size)
        return dt_error(DT_ERR_INVALID,
                        "%s: root %d is not a rank of this communicator "
                        "(size %d)",
                        fn, root, c->size);
    return DT_OK;
}

/* gather_bytes to `root`, or to every rank (`all`, root 0 then) */
static dt_status gather_bytes(dt_comm *c, const char *fn, const void *data, size_t len, int root,
                              bool all, dt_bytes_list **out) {
    if (!c) return dt_error(DT_ERR_INVALID, "%s: communicator is NULL", fn);
    if (out) *out = NULL;
    dt_status local = check_obj(c, fn, data, len, root, out);
    dt_status st = agree(c, all ? K_ALLGATHER_BYTES : K_GATHER_BYTES, local, root, 0, 0);
    if (st != DT_OK) return st;
    size_t *lens;
    if ((st = exchange_lengths(c, len, &lens)) != DT_OK) return st;
    size_t *displs = malloc((size_t)c->size * sizeof(size_t));
    dt_bytes_list *l = NULL;
    char *base = NULL;
    local = displs ? DT_OK : dt_error(DT_ERR_OOM, "%s: out of memory", fn);
    if (local == DT_OK && (all || c->rank == root)) {
        l = list_alloc(c->size, lens, displs, &base);
        if (!l) local = dt_last_status();
    }
    st = dt__comm_agree_status(c, local, fn, DT_ERR_COMM);
    if (st == DT_OK)
        st = all ? c->be->allgatherv(c, data, len, base, lens, displs)
                 : c->be->gatherv(c, data, len, base, lens, displs, root);
    free(lens);
    free(displs);
    if (st != DT_OK) {
        free(l);
        return st;
    }
    *out = l;
    return DT_OK;
}

dt_status dt_comm_gather_bytes(dt_comm *c, const void *data, size_t len, int root,
                               dt_bytes_list **out) {
    return gather_bytes(c, "dt_comm_gather_bytes", data, len, root, false, out);
}

dt_status dt_comm_allgather_bytes(dt_comm *c, const void *data, size_t len, dt_bytes_list **out) {
    return gather_bytes(c, "dt_comm_allgather_bytes", data, len, 0, true, out);
}

dt_status dt_comm_broadcast_bytes(dt_comm *c, const void *data, size_t len, int root,
                                  dt_bytes *out) {
    if (!c) return dt_error(DT_ERR_INVALID, "dt_comm_broadcast_bytes: communicator is NULL");
    if (out) *out = (dt_bytes){NULL, 0};
    dt_status local = check_obj(c, "dt_comm_broadcast_bytes", c->rank == root ? data : NULL,
                                c->rank == root ? len : 0, root, out);
    dt_status st = agree(c, K_BROADCAST_BYTES, local, root, 0, 0);
    if (st != DT_OK) return st;
    uint64_t n = len;
    if ((st = c->be->broadcast(c, &n, sizeof n, root)) != DT_OK) return st;
    void *buf = NULL;
    local = DT_OK;
    if (n > SIZE_MAX / 2)
        local = dt_error(DT_ERR_OOM, "dt_comm_broadcast_bytes: too large");
    else if (!(buf = malloc(n ? (size_t)n : 1)))
        local = dt_error(DT_ERR_OOM, "dt_comm_broadcast_bytes: out of memory for %llu bytes",
                         (unsigned long long)n);
    if ((st = dt__comm_agree_status(c, local, "dt_comm_broadcast_bytes", DT_ERR_COMM)) != DT_OK) {
        free(buf);
        return st;
    }
    if (c->rank == root && n) memcpy(buf, data, (size_t)n);
    if (n && (st = c->be->broadcast(c, buf, (size_t)n, root)) != DT_OK) {
        free(buf);
        return st;
    }
    out->data = buf;
    out->len = (size_t)n;
    return DT_OK;
}
