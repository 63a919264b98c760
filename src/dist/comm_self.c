/*
 * comm_self.c — the "self" backend: a communicator of one process. Every collective is a copy
 * or a no-op (AVG divides by W = 1, which changes nothing); splitting gives another
 * one-process communicator. Point-to-point never reaches here: the only peer is the rank
 * itself, whose messages comm.c buffers.
 */
#include "dist/comm_impl.h"

#include <string.h>

static dt_status self_max_i64(dt_comm *c, int64_t *v, int n) {
    (void)c, (void)v, (void)n;
    return DT_OK;
}

static dt_status self_allreduce(dt_comm *c, void *buf, int64_t count, dt_comm_dtype dtype,
                                dt_reduce_op op) {
    (void)c, (void)buf, (void)count, (void)dtype, (void)op;
    return DT_OK;
}

static dt_status self_reduce_scatter(dt_comm *c, const float *send, float *recv, int64_t block,
                                     dt_reduce_op op) {
    (void)c, (void)op;
    if (recv != send) memcpy(recv, send, (size_t)block * sizeof(float));
    return DT_OK;
}

static dt_status self_isend(dt_comm *c, const void *buf, size_t bytes, int peer, int tag,
                            void **handle) {
    (void)c, (void)buf, (void)bytes, (void)peer, (void)tag, (void)handle;
    return dt_error(DT_ERR_INVALID, "dt_comm_isend: no peer %d on the self backend", peer);
}

static dt_status self_wait(dt_comm *c, void *handle) {
    (void)c, (void)handle;
    return DT_OK;
}

static dt_status self_reduce_scatterv(dt_comm *c, const float *send, float *recv,
                                      const int64_t *counts, dt_reduce_op op) {
    (void)c, (void)op;
    if (recv != send && counts[0] > 0) memmove(recv, send, (size_t)counts[0] * sizeof(float));
    return DT_OK;
}

static dt_status self_allgather(dt_comm *c, const void *send, void *recv, size_t bytes) {
    (void)c;
    if (recv != send) memcpy(recv, send, bytes);
    return DT_OK;
}

static dt_status self_broadcast(dt_comm *c, void *buf, size_t bytes, int root) {
    (void)c, (void)buf, (void)bytes, (void)root;
    return DT_OK;
}

static dt_status self_p2p(dt_comm *c, const char *fn, int peer) {
    return dt_error(DT_ERR_INVALID, "%s: peer %d on a one-process communicator (rank %d)", fn, peer,
                    c->rank);
}

static dt_status self_send(dt_comm *c, const void *buf, size_t bytes, int peer, int tag) {
    (void)buf, (void)bytes, (void)tag;
    return self_p2p(c, "dt_comm_send", peer);
}

static dt_status self_recv(dt_comm *c, void *buf, size_t bytes, int peer, int tag) {
    (void)buf, (void)bytes, (void)tag;
    return self_p2p(c, "dt_comm_recv", peer);
}

static dt_status self_barrier(dt_comm *c) {
    (void)c;
    return DT_OK;
}

static dt_status self_gatherv(dt_comm *c, const void *send, size_t bytes, void *recv,
                              const size_t *counts, const size_t *displs, int root) {
    (void)c, (void)counts, (void)root;
    if (bytes) memcpy((char *)recv + displs[0], send, bytes);
    return DT_OK;
}

static dt_status self_allgatherv(dt_comm *c, const void *send, size_t bytes, void *recv,
                                 const size_t *counts, const size_t *displs) {
    return self_gatherv(c, send, bytes, recv, counts, displs, 0);
}

static dt_status self_split(dt_comm *c, int color, int key, dt_comm **out);

static dt_status self_destroy(dt_comm *c) {
    (void)c;
    return DT_OK;
}

static const dt_comm_backend self_backend = {
    .name = "self",
    .max_i64 = self_max_i64,
    .allreduce = self_allreduce,
    .reduce_scatter = self_reduce_scatter,
    .reduce_scatterv = self_reduce_scatterv,
    .allgather = self_allgather,
    .broadcast = self_broadcast,
    .send = self_send,
    .recv = self_recv,
    .isend = self_isend,
    .wait = self_wait,
    .barrier = self_barrier,
    .gatherv = self_gatherv,
    .allgatherv = self_allgatherv,
    .split = self_split,
    .destroy = self_destroy,
};

static dt_status self_split(dt_comm *c, int color, int key, dt_comm **out) {
    (void)key;
    *out = NULL;
    if (color < 0) return DT_OK;
    *out = dt__comm_new(&self_backend, NULL, 0, 1, c);
    return *out ? DT_OK : dt_last_status();
}

dt_comm *dt__comm_self_new(void) {
    return dt__comm_new(&self_backend, NULL, 0, 1, NULL);
}
