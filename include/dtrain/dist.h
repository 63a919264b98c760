/*
 * dtrain/dist.h — communicators, process groups and the distributed context.
 *
 * A dt_comm is a group of processes that run collectives together. It sits on a backend
 * chosen at run time (callers never #ifdef on MPI):
 *   "self"  one process; every collective is a copy or a no-op;
 *   "mpi"   OpenMPI (the process was started by mpirun).
 * dt_comm_init picks the backend from the environment (docs/distributed.md has the rules);
 * dt_comm_split makes sub-groups (data-parallel, pipeline) like MPI_Comm_split.
 *
 * Contracts shared by every collective here:
 *   - Every rank of the communicator calls it, in the same order, with the same count,
 *     dtype, op and root. With checks on (the default, dt_comm_set_checks) the ranks first
 *     agree on these values in one small exact reduction, so a mismatch or an invalid
 *     argument on any rank makes every rank return an error instead of hanging or
 *     corrupting memory.
 *   - Results are deterministic and identical on every rank: reductions add the ranks'
 *     contributions in rank order 0, 1, ..., W-1 (a fixed order that does not depend on the
 *     MPI library's algorithm), each element is reduced by exactly one rank and copied to the
 *     others. AVG is SUM in that order, then a division by W. reduce_scatter gives the same
 *     bits as the matching block of allreduce.
 *   - A communicator is used by one thread at a time (MPI is initialised FUNNELED: only the
 *     thread that called dt_comm_init makes communication calls).
 *   - Errors return a dt_status; dt_last_error() says what happened and what to do.
 *     DT_ERR_INVALID: a bad argument on this rank; DT_ERR_COMM: a peer failed, ranks
 *     disagree (size mismatch, different collectives), or a message had the wrong size;
 *     DT_ERR_STATE: initialisation order problems; DT_ERR_CONFIG: a bad launch environment.
 */
#ifndef DTRAIN_DIST_H
#define DTRAIN_DIST_H

#include "dtrain/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_comm dt_comm;

/* Element types of dt_comm_allreduce. */
typedef enum dt_comm_dtype {
    DT_COMM_DTYPE_F32 = 0,
    DT_COMM_DTYPE_F64,
    DT_COMM_DTYPE_I64,
    DT_COMM_DTYPE_COUNT
} dt_comm_dtype;

/* Reductions. AVG on I64 is the SUM divided by W with C's truncation toward zero.
 * MAX/MIN propagate NaN (a NaN on any rank gives NaN). */
typedef enum dt_reduce_op {
    DT_REDUCE_OP_SUM = 0,
    DT_REDUCE_OP_AVG,
    DT_REDUCE_OP_MAX,
    DT_REDUCE_OP_MIN,
    DT_REDUCE_OP_COUNT
} dt_reduce_op;

/* dt_comm_split color for "this rank joins no group" (MPI_UNDEFINED). */
#define DT_COMM_UNDEFINED (-1)
/* Tags of dt_comm_send/recv are in [0, DT_COMM_TAG_MAX]. */
#define DT_COMM_TAG_MAX 32767

/* A byte buffer. */
typedef struct dt_bytes {
    void *data;
    size_t len;
} dt_bytes;

/* One byte buffer per rank, in rank order, in ONE allocation: items[i].data points inside it
 * (never NULL, also for len 0; each payload 16-byte aligned). The caller owns the list and
 * frees it with dt_bytes_list_free (which is free()). */
typedef struct dt_bytes_list {
    int count;
    dt_bytes *items;
} dt_bytes_list;

DT_API void dt_bytes_list_free(dt_bytes_list *l);
/* Frees b->data (malloc'd by the library) and sets *b to {NULL, 0}. NULL-safe. */
DT_API void dt_bytes_free(dt_bytes *b);

/* ---- initialisation ------------------------------------------------------------------- */

/* Create the world communicator, choosing the backend from the environment:
 *   DTRAIN_COMM_BACKEND=self|mpi                 forces a backend;
 *   started by mpirun (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK or PMI_SIZE set)  -> mpi:
 *       MPI_Init_thread(MPI_THREAD_FUNNELED) unless MPI is already initialised, or, with
 *       DTRAIN_MANUAL_INIT_DISTRIBUTED=1, attach to MPI_COMM_WORLD initialised by the trial
 *       itself (DT_ERR_STATE if it is not initialised yet);
 *   WORLD_SIZE > 1 or RANK/LOCAL_RANK > 0 without an MPI launcher -> DT_ERR_CONFIG (launch
 *       with mpirun -np N or `dtrain train --slots N`);
 *   otherwise -> self.
 * Calling dt_comm_init again in the same process (e.g. a second engine) attaches to the same
 * MPI world. On error *out is NULL. Free with dt_comm_finalize. */
DT_API dt_status dt_comm_init(dt_comm **out);
/* A one-process communicator on the self backend, whatever the environment. */
DT_API dt_status dt_comm_init_self(dt_comm **out);
/* Free a communicator from dt_comm_init / dt_comm_init_self. The last one of an MPI world
 * calls MPI_Finalize if dt_comm_init initialised MPI (never when the trial did it itself).
 * DT_ERR_STATE (nothing freed) while communicators split from it are still alive. */
DT_API dt_status dt_comm_finalize(dt_comm *world);

/* ---- process groups ------------------------------------------------------------------- */

/* Collective over `c`: ranks with the same color form a new communicator, ordered by
 * (key, rank in c). color DT_COMM_UNDEFINED gives *out = NULL. colors are >= 0 otherwise.
 * Free with dt_comm_free (before dt_comm_finalize of the world). */
DT_API dt_status dt_comm_split(dt_comm *c, int color, int key, dt_comm **out);
/* Free a communicator from dt_comm_split. NULL-safe. Not for the world (dt_comm_finalize). */
DT_API void dt_comm_free(dt_comm *c);

DT_API int dt_comm_rank(const dt_comm *c);
DT_API int dt_comm_size(const dt_comm *c);
/* "self" or "mpi". */
DT_API const char *dt_comm_backend_name(const dt_comm *c);
/* Account the communicator's scratch buffers to `dev` under DT_MEM_COMM (NULL: none). Call
 * before the first collective. */
DT_API void dt_comm_set_device(dt_comm *c, dt_device *dev);
/* Agreement checks before each collective (default on; one small exact MAX-allreduce of a
 * few integers). Off: a mismatch between ranks is undefined behaviour, as in MPI. Every rank
 * must use the same setting. */
DT_API void dt_comm_set_checks(dt_comm *c, bool on);

/* ---- collectives ---------------------------------------------------------------------- */

/* In place: buf (count elements of dtype) becomes the reduction over all ranks. */
DT_API dt_status dt_comm_allreduce(dt_comm *c, void *buf, int64_t count, dt_comm_dtype dtype,
                                   dt_reduce_op op);
/* send is (W, block) f32; recv (block) gets the reduction of block `rank` over all ranks.
 * recv may be send + rank*block (in place); otherwise the buffers must not overlap. */
DT_API dt_status dt_comm_reduce_scatter(dt_comm *c, const float *send, float *recv, int64_t block,
                                        dt_reduce_op op);
/* Uneven reduce-scatter: send holds counts[j] floats destined for rank j, for j = 0..W-1 one
 * after the other; recv (counts[rank] floats) gets the reduction of this rank's piece over all
 * ranks (the same bits as those elements of an allreduce). counts are the same on every rank;
 * zeros are allowed. recv must not overlap send unless it is this rank's piece of send. */
DT_API dt_status dt_comm_reduce_scatterv(dt_comm *c, const float *send, float *recv,
                                         const int64_t *counts, dt_reduce_op op);
/* Uneven allgather: rank j contributes counts[j] bytes (send); recv gets them packed in rank
 * order (rank j's at the sum of counts[0..j)). counts are the same on every rank. send may be
 * this rank's place in recv. */
DT_API dt_status dt_comm_allgatherv(dt_comm *c, const void *send, void *recv,
                                    const size_t *counts);
/* send is `bytes` bytes; recv (W * bytes) gets rank i's send at offset i*bytes. send may be
 * recv + rank*bytes (in place). */
DT_API dt_status dt_comm_allgather(dt_comm *c, const void *send, void *recv, size_t bytes);
/* buf (bytes) of rank `root` is copied into buf on every rank. */
DT_API dt_status dt_comm_broadcast(dt_comm *c, void *buf, size_t bytes, int root);
/* Point to point. recv must name the exact size the peer sent (else DT_ERR_COMM "size
 * mismatch"). Messages between a pair with the same tag arrive in order. Sending to one's
 * own rank is buffered (the matching recv may come later); sends to other ranks may block
 * until the peer receives. */
DT_API dt_status dt_comm_send(dt_comm *c, const void *buf, size_t bytes, int peer, int tag);
DT_API dt_status dt_comm_recv(dt_comm *c, void *buf, size_t bytes, int peer, int tag);
/* A send that returns at once: *req tracks it until dt_comm_wait, which blocks until the send
 * is complete and frees *req. buf must stay untouched until then. Every isend needs its wait
 * (also on error paths). To one's own rank the message is buffered at once. dt_comm_wait(c,
 * NULL) is a no-op. */
typedef struct dt_comm_req dt_comm_req;
DT_API dt_status dt_comm_isend(dt_comm *c, const void *buf, size_t bytes, int peer, int tag,
                               dt_comm_req **req);
DT_API dt_status dt_comm_wait(dt_comm *c, dt_comm_req *req);
DT_API dt_status dt_comm_barrier(dt_comm *c);
/* Do all ranks agree that a step went well? Each rank passes its own result (an error already
 * recorded with dt_error, or DT_OK); all return DT_OK together or all an error: a failing rank
 * its own status and message, the others the failing rank's status and "<what>: rank R failed
 * (see its error)". Collective (one exact MAX); c NULL or of one rank returns local. */
DT_API dt_status dt_comm_agree(dt_comm *c, dt_status local, const char *what);

/* ---- object collectives (variable-length byte buffers, 0 length allowed) -------------- */

/* Rank `root` gets *out = every rank's buffer in rank order; other ranks get *out = NULL. */
DT_API dt_status dt_comm_gather_bytes(dt_comm *c, const void *data, size_t len, int root,
                                      dt_bytes_list **out);
/* Every rank gets *out = every rank's buffer in rank order. */
DT_API dt_status dt_comm_allgather_bytes(dt_comm *c, const void *data, size_t len,
                                         dt_bytes_list **out);
/* Every rank (root included) gets a malloc'd copy of root's (data, len) in *out; data/len
 * are read on root only. Free with dt_bytes_free. */
DT_API dt_status dt_comm_broadcast_bytes(dt_comm *c, const void *data, size_t len, int root,
                                         dt_bytes *out);

/* ---- the distributed context ---------------------------------------------------------- */

/* Who is where: rank/size over the job, local_rank/local_size on this machine, cross_rank
 * (index of this machine; machines numbered by their lowest world rank, so rank 0 is on
 * machine 0) and cross_size (machines). Plus "stuff" collectives over the job (chief = rank 0)
 * and over this machine (local chief = local_rank 0). The counterpart of the reference's
 * DistributedContext. Machines are told apart by host name; local ranks follow
 * OMPI_COMM_WORLD_LOCAL_RANK when set, else world rank order. */
typedef struct dt_dist_ctx dt_dist_ctx;

/* Collective over `world`, which the context borrows (free the context before it). Makes a
 * local communicator (one per machine) and a cross communicator (ranks with the same
 * local_rank). On error *out is NULL. */
DT_API dt_status dt_dist_ctx_new(dt_comm *world, dt_dist_ctx **out);
DT_API void dt_dist_ctx_free(dt_dist_ctx *d);

DT_API int dt_dist_rank(const dt_dist_ctx *d);
DT_API int dt_dist_size(const dt_dist_ctx *d);
DT_API int dt_dist_local_rank(const dt_dist_ctx *d);
DT_API int dt_dist_local_size(const dt_dist_ctx *d);
DT_API int dt_dist_cross_rank(const dt_dist_ctx *d);
DT_API int dt_dist_cross_size(const dt_dist_ctx *d);
DT_API bool dt_dist_is_chief(const dt_dist_ctx *d);
DT_API bool dt_dist_is_local_chief(const dt_dist_ctx *d);
/* Communicators owned by the context: the job, this machine, same local_rank across
 * machines (its rank equals cross_rank when every machine runs the same number of ranks). */
DT_API dt_comm *dt_dist_comm(const dt_dist_ctx *d);
DT_API dt_comm *dt_dist_local_comm(const dt_dist_ctx *d);
DT_API dt_comm *dt_dist_cross_comm(const dt_dist_ctx *d);

/* Results are owned by the caller (dt_bytes_list_free / dt_bytes_free), as in dt_comm_*_bytes.
 * gather: the chief gets every rank's buffer in rank order, others *out = NULL.
 * gather_local: the local chief gets this machine's buffers in local_rank order.
 * allgather / allgather_local: everyone (on the machine) gets them.
 * broadcast / broadcast_local: everyone gets the (local) chief's buffer; data/len are read
 * on the (local) chief only. */
DT_API dt_status dt_dist_gather(dt_dist_ctx *d, const void *data, size_t len, dt_bytes_list **out);
DT_API dt_status dt_dist_gather_local(dt_dist_ctx *d, const void *data, size_t len,
                                      dt_bytes_list **out);
DT_API dt_status dt_dist_allgather(dt_dist_ctx *d, const void *data, size_t len,
                                   dt_bytes_list **out);
DT_API dt_status dt_dist_allgather_local(dt_dist_ctx *d, const void *data, size_t len,
                                         dt_bytes_list **out);
DT_API dt_status dt_dist_broadcast(dt_dist_ctx *d, const void *data, size_t len, dt_bytes *out);
DT_API dt_status dt_dist_broadcast_local(dt_dist_ctx *d, const void *data, size_t len,
                                         dt_bytes *out);

#ifdef __cplusplus
}
#endif
#endif
