/*
 * dist_ctx.c — the distributed context: rank/size over the job, local_rank/local_size on this
 * machine, cross_rank/cross_size over machines, and the "stuff" collectives of the reference's
 * DistributedContext on byte buffers, built on dt_comm.
 *
 * Machines are told apart by host name: every rank allgathers its host name; machines are
 * numbered in order of their lowest world rank (cross_rank; rank 0 is on machine 0). The local
 * communicator is a split by machine, ordered by OMPI_COMM_WORLD_LOCAL_RANK when the launcher
 * sets it (so local_rank matches the launcher's) and by world rank otherwise. The cross
 * communicator groups the ranks with the same local_rank, ordered by machine.
 */
#include "dist/dist_impl.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct dt_dist_ctx {
    dt_comm *world; /* borrowed */
    dt_comm *local; /* owned: this machine's ranks */
    dt_comm *cross; /* owned: ranks with this local_rank, one per machine */
    int rank, size, local_rank, local_size, cross_rank, cross_size;
};

/* key < 0: order local ranks by world rank. */
static dt_status ctx_new(dt_comm *world, const char *host, int key, dt_dist_ctx **out) {
    if (!out) return dt_error(DT_ERR_INVALID, "dt_dist_ctx_new: out is NULL");
    *out = NULL;
    if (!world) return dt_error(DT_ERR_INVALID, "dt_dist_ctx_new: world is NULL");
    dt_bytes_list *hosts = NULL;
    dt_status st = dt_comm_allgather_bytes(world, host, strlen(host), &hosts);
    if (st != DT_OK) return st;
    const int W = hosts->count, me = dt_comm_rank(world);
    // machine[i]: index of rank i's host in order of first appearance
    int *machine = malloc((size_t)W * sizeof(int));
    dt_dist_ctx *d = calloc(1, sizeof *d);
    dt_status local = DT_OK;
    if (!machine || !d) local = dt_error(DT_ERR_OOM, "dt_dist_ctx_new: out of memory");
    int machines = 0;
    for (int i = 0; machine && i < W; i++) {
        machine[i] = -1;
        for (int j = 0; j < i && machine[i] < 0; j++)
            if (hosts->items[j].len == hosts->items[i].len &&
                memcmp(hosts->items[j].data, hosts->items[i].data, hosts->items[i].len) == 0)
                machine[i] = machine[j];
        if (machine[i] < 0) machine[i] = machines++;
    }
    int my_machine = machine ? machine[me] : 0;
    free(machine);
    dt_bytes_list_free(hosts);
    // every rank must take part in the splits; an allocation failure turns into an
    // undefined color (no group) and an error after the splits
    dt_comm *lc = NULL, *cc = NULL;
    st = dt_comm_split(world, local == DT_OK ? my_machine : DT_COMM_UNDEFINED, key >= 0 ? key : me,
                       &lc);
    if (st == DT_OK)
        st = dt_comm_split(world, lc ? dt_comm_rank(lc) : DT_COMM_UNDEFINED, my_machine, &cc);
    st = dt_status_first(st, local);
    if (st != DT_OK) {
        dt_comm_free(cc);
        dt_comm_free(lc);
        free(d);
        return st;
    }
    d->world = world;
    d->local = lc;
    d->cross = cc;
    d->rank = me;
    d->size = W;
    d->local_rank = dt_comm_rank(lc);
    d->local_size = dt_comm_size(lc);
    d->cross_rank = my_machine;
    d->cross_size = machines;
    *out = d;
    return DT_OK;
}

dt_status dt_dist_ctx_new(dt_comm *world, dt_dist_ctx **out) {
    char host[256];
    if (gethostname(host, sizeof host) != 0) strcpy(host, "localhost");
    host[sizeof host - 1] = 0;
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    int key = -1;
    if (lr && *lr && world && strcmp(dt_comm_backend_name(world), "mpi") == 0) {
        char *end;
        long v = strtol(lr, &end, 10);
        if (!*end && v >= 0 && v < 1 << 30) key = (int)v;
    }
    dt_status st = ctx_new(world, host, key, out);
    if (st != DT_OK || key < 0) return st;
    // the launcher's view of this machine should match the host-name split
    const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE"), *ws = getenv("OMPI_COMM_WORLD_SIZE");
    if (ls && ws && atoi(ws) == (*out)->size && atoi(ls) != (*out)->local_size)
        dt_log(DT_LOG_WARN,
               "rank %d: OMPI_COMM_WORLD_LOCAL_SIZE=%s but %d ranks share host "
               "name '%s'; local ranks follow the host names",
               (*out)->rank, ls, (*out)->local_size, host);
    return DT_OK;
}

dt_status dt__dist_ctx_new_on_host(dt_comm *world, const char *host, dt_dist_ctx **out) {
    if (!host) return dt_error(DT_ERR_INVALID, "dt__dist_ctx_new_on_host: host is NULL");
    return ctx_new(world, host, -1, out);
}

void dt_dist_ctx_free(dt_dist_ctx *d) {
    if (!d) return;
    dt_comm_free(d->cross);
    dt_comm_free(d->local);
    free(d);
}

int dt_dist_rank(const dt_dist_ctx *d) {
    return d->rank;
}
int dt_dist_size(const dt_dist_ctx *d) {
    return d->size;
}
int dt_dist_local_rank(const dt_dist_ctx *d) {
    return d->local_rank;
}
int dt_dist_local_size(const dt_dist_ctx *d) {
    return d->local_size;
}
int dt_dist_cross_rank(const dt_dist_ctx *d) {
    return d->cross_rank;
}
int dt_dist_cross_size(const dt_dist_ctx *d) {
    return d->cross_size;
}
bool dt_dist_is_chief(const dt_dist_ctx *d) {
    return d->rank == 0;
}
bool dt_dist_is_local_chief(const dt_dist_ctx *d) {
    return d->local_rank == 0;
}
dt_comm *dt_dist_comm(const dt_dist_ctx *d) {
    return d->world;
}
dt_comm *dt_dist_local_comm(const dt_dist_ctx *d) {
    return d->local;
}
dt_comm *dt_dist_cross_comm(const dt_dist_ctx *d) {
    return d->cross;
}

dt_status dt_dist_gather(dt_dist_ctx *d, const void *data, size_t len, dt_bytes_list **out) {
    return dt_comm_gather_bytes(d->world, data, len, 0, out);
}

dt_status dt_dist_gather_local(dt_dist_ctx *d, const void *data, size_t len, dt_bytes_list **out) {
    return dt_comm_gather_bytes(d->local, data, len, 0, out);
}

dt_status dt_dist_allgather(dt_dist_ctx *d, const void *data, size_t len, dt_bytes_list **out) {
    return dt_comm_allgather_bytes(d->world, data, len, out);
}

dt_status dt_dist_allgather_local(dt_dist_ctx *d, const void *data, size_t len,
                                  dt_bytes_list **out) {
    return dt_comm_allgather_bytes(d->local, data, len, out);
}

dt_status dt_dist_broadcast(dt_dist_ctx *d, const void *data, size_t len, dt_bytes *out) {
    return dt_comm_broadcast_bytes(d->world, data, len, 0, out);
}

dt_status dt_dist_broadcast_local(dt_dist_ctx *d, const void *data, size_t len, dt_bytes *out) {
    return dt_comm_broadcast_bytes(d->local, data, len, 0, out);
}
