/*
 * comm_impl.h — internals of the distributed layer: the communicator struct, the backend
 * table and helpers shared by the front end (comm.c) and the backends (comm_self.c,
 * comm_mpi.c).
 *
 * Division of work: comm.c validates arguments, runs the agreement check, handles messages a
 * rank sends to itself and builds the object collectives out of the raw operations; a backend
 * only moves bytes and reduces. Backend functions are called with valid, agreed arguments,
 * count/bytes > 0 and (send/recv) peer != own rank. Only comm_mpi.c includes <mpi.h>.
 */
#ifndef DT_COMM_IMPL_H
#define DT_COMM_IMPL_H

#include "dtrain/dist.h"

/* A message a rank sent to itself, waiting for its recv. */
typedef struct dt__msg {
    struct dt__msg *next;
    int tag;
    size_t len;
    unsigned char data[];
} dt__msg;

typedef struct dt_comm_backend {
    const char *name;
    /* Elementwise exact MAX of n int64 values over all ranks (the agreement check). */
    dt_status (*max_i64)(dt_comm *c, int64_t *v, int n);
    /* In place; AVG divides by W after the ordered SUM. */
    dt_status (*allreduce)(dt_comm *c, void *buf, int64_t count, dt_comm_dtype dtype,
                           dt_reduce_op op);
    /* send (W, block) -> recv (block); recv may be send + rank*block. */
    dt_status (*reduce_scatter)(dt_comm *c, const float *send, float *recv, int64_t block,
                                dt_reduce_op op);
    /* send holds counts[j] floats for rank j, rank after rank; recv (counts[rank]) gets the
     * reduction of this rank's pieces over all ranks. Some counts may be 0. */
    dt_status (*reduce_scatterv)(dt_comm *c, const float *send, float *recv,
                                 const int64_t *counts, dt_reduce_op op);
    /* send may be recv + rank*bytes. */
    dt_status (*allgather)(dt_comm *c, const void *send, void *recv, size_t bytes);
    dt_status (*broadcast)(dt_comm *c, void *buf, size_t bytes, int root);
    dt_status (*send)(dt_comm *c, const void *buf, size_t bytes, int peer, int tag);
    dt_status (*recv)(dt_comm *c, void *buf, size_t bytes, int peer, int tag);
    /* Start a send; *handle is the backend's in-flight state, finished (and freed) by wait. */
    dt_status (*isend)(dt_comm *c, const void *buf, size_t bytes, int peer, int tag, void **handle);
    dt_status (*wait)(dt_comm *c, void *handle);
    dt_status (*barrier)(dt_comm *c);
    /* Variable counts: counts[i] bytes of rank i land at recv + displs[i] on root (gatherv)
     * or everywhere (allgatherv). counts/displs/recv are read on root only for gatherv.
     * bytes (this rank's count) may be 0. */
    dt_status (*gatherv)(dt_comm *c, const void *send, size_t bytes, void *recv,
                         const size_t *counts, const size_t *displs, int root);
    dt_status (*allgatherv)(dt_comm *c, const void *send, size_t bytes, void *recv,
                            const size_t *counts, const size_t *displs);
    /* color < 0: join nothing, *out = NULL. */
    dt_status (*split)(dt_comm *c, int color, int key, dt_comm **out);
    /* Release the backend state (the world's also ends the backend: MPI_Finalize). */
    dt_status (*destroy)(dt_comm *c);
} dt_comm_backend;

struct dt_comm {
    const dt_comm_backend *be;
    void *impl; /* backend state */
    int rank, size;
    dt_comm *world;     /* the world this was split from; NULL for a world */
    int live_children;  /* (world only) communicators split from it, not yet freed */
    bool checks;        /* agreement check before each collective */
    size_t chunk_bytes; /* largest single transfer; bigger ones go in chunks */
    dt_device *dev;     /* scratch accounting (DT_MEM_COMM), may be NULL */
    void *scratch;      /* grown on demand, freed with the communicator */
    size_t scratch_bytes;
    dt__msg *mbox_head, *mbox_tail; /* messages to self */
};

/* Default chunk: transfers are split into pieces of at most 64 MiB (MPI counts are int, and
 * the reduction scratch stays bounded). */
#define DT__COMM_CHUNK_BYTES ((size_t)64 << 20)

/* A new communicator of `be` with rank/size, inheriting settings from `parent` (NULL for a
 * world). NULL with DT_ERR_OOM. */
dt_comm *dt__comm_new(const dt_comm_backend *be, void *impl, int rank, int size, dt_comm *parent);
/* Scratch of at least `bytes` (contents undefined); NULL with DT_ERR_OOM. Two regions: a
 * second call invalidates the first, so take one region and carve it. Growing it is collective
 * (the ranks agree on an allocation failure), so every rank must ask for the same size at the
 * same point. */
void *dt__comm_scratch(dt_comm *c, size_t bytes);
/* Every rank learns the worst status of `local` over the ranks (one MAX): a failing rank
 * returns its own status and message, the others `others` (DT_OK: the failing rank's status). */
dt_status dt__comm_agree_status(dt_comm *c, dt_status local, const char *what, dt_status others);
/* For tests: make transfers go in chunks of `bytes` (>= 16) to exercise the chunked paths. */
void dt__comm_set_chunk_bytes(dt_comm *c, size_t bytes);

size_t dt__comm_dtype_size(dt_comm_dtype dt);
/* dst[i] = dst[i] op src[i] for i < n (AVG combines as SUM). */
void dt__comm_combine(void *dst, const void *src, int64_t n, dt_comm_dtype dt, dt_reduce_op op);
/* buf[i] /= w (f32/f64 division, i64 truncating). */
void dt__comm_divide(void *buf, int64_t n, dt_comm_dtype dt, int w);

/* Backend constructors. */
dt_comm *dt__comm_self_new(void);
/* manual: the trial initialised MPI itself (DTRAIN_MANUAL_INIT_DISTRIBUTED=1). */
dt_status dt__comm_mpi_init(bool manual, dt_comm **out);

#endif
