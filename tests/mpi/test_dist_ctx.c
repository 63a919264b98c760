/* Multi-process tests of the distributed context (run under mpirun -np 2 and -np 4): the
 * rank/local/cross values on this machine, the same on pretend machines (host names given by
 * rank, even and uneven), and the gather / allgather / broadcast "stuff" collectives, global
 * and local, with variable and 0 lengths. */
#define _GNU_SOURCE /* dl_iterate_phdr in mpi_test.h */
#include "dtrain/dist.h"
#include "dist/dist_impl.h"
#include "mpi_test.h"

#include <stdlib.h>
#include <string.h>

static int W, R;

/* Rank r's stuff: r copies of the letter 'a'+r (rank 0: nothing). */
static size_t stuff(int r, char *buf) {
    for (int k = 0; k < r; k++) buf[k] = (char)('a' + r);
    return (size_t)r;
}

static bool is_stuff(const dt_bytes *b, int r) {
    char want[64];
    size_t n = stuff(r, want);
    return b->len == n && b->data && memcmp(b->data, want, n) == 0;
}

static void test_one_machine(dt_comm *c) {
    dt_dist_ctx *d = NULL;
    CHECK(dt_dist_ctx_new(c, &d) == DT_OK && d);
    if (!d) return;
    CHECK(dt_dist_rank(d) == R && dt_dist_size(d) == W);
    CHECK(dt_dist_local_size(d) == W && dt_dist_cross_size(d) == 1 && dt_dist_cross_rank(d) == 0);
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    CHECK(lr && atoi(lr) == dt_dist_local_rank(d));
    CHECK(ls && atoi(ls) == dt_dist_local_size(d));
    CHECK(dt_dist_is_chief(d) == (R == 0));
    CHECK(dt_dist_is_local_chief(d) == (dt_dist_local_rank(d) == 0));
    CHECK(dt_comm_size(dt_dist_cross_comm(d)) == 1);
    CHECK(dt_dist_comm(d) == c);

    char mine[64];
    size_t n = stuff(R, mine);
    dt_bytes_list *l = NULL;
    CHECK(dt_dist_gather(d, mine, n, &l) == DT_OK);
    if (R == 0) {
        CHECK(l && l->count == W);
        for (int r = 0; l && r < W; r++) CHECK(is_stuff(&l->items[r], r));
    } else {
        CHECK(l == NULL);
    }
    dt_bytes_list_free(l);
    CHECK(dt_dist_allgather(d, mine, n, &l) == DT_OK && l && l->count == W);
    for (int r = 0; l && r < W; r++) CHECK(is_stuff(&l->items[r], r));
    dt_bytes_list_free(l);
    dt_bytes b;
    CHECK(dt_dist_broadcast(d, mine, n, &b) == DT_OK && is_stuff(&b, 0)); /* chief: 0 bytes */
    dt_bytes_free(&b);
    dt_dist_ctx_free(d);
}

/* Pretend machines: host_of(r) names rank r's machine. */
static void check_hosts(dt_comm *c, const char *(*host_of)(int)) {
    // expected values, computed the slow way
    int machine[64], local_rank = 0, local_size = 0, machines = 0;
    for (int r = 0; r < W; r++) {
        machine[r] = -1;
        for (int j = 0; j < r; j++)
            if (strcmp(host_of(j), host_of(r)) == 0) {
                machine[r] = machine[j];
                break;
            }
        if (machine[r] < 0) machine[r] = machines++;
    }
    int first_of_my_machine = -1;
    for (int r = 0; r < W; r++)
        if (machine[r] == machine[R]) {
            if (first_of_my_machine < 0) first_of_my_machine = r;
            if (r < R) local_rank++;
            local_size++;
        }
    dt_dist_ctx *d = NULL;
    CHECK(dt__dist_ctx_new_on_host(c, host_of(R), &d) == DT_OK && d);
    if (!d) return;
    CHECK(dt_dist_rank(d) == R && dt_dist_size(d) == W);
    CHECK_MSG(dt_dist_local_rank(d) == local_rank, "rank %d local_rank %d, want %d", R,
              dt_dist_local_rank(d), local_rank);
    CHECK(dt_dist_local_size(d) == local_size);
    CHECK(dt_dist_cross_rank(d) == machine[R] && dt_dist_cross_size(d) == machines);
    CHECK(dt_dist_is_local_chief(d) == (R == first_of_my_machine));
    dt_comm *cc = dt_dist_cross_comm(d);
    int cross_members = 0;
    for (int r = 0; r < W; r++) {
        int lr = 0;
        for (int j = 0; j < r; j++) lr += machine[j] == machine[r];
        cross_members += lr == local_rank;
    }
    CHECK(dt_comm_size(cc) == cross_members);
    if (cross_members == machines) CHECK(dt_comm_rank(cc) == machine[R]);

    char mine[64];
    size_t n = stuff(R, mine);
    // gather_local: the local chief gets its machine's stuff in local-rank order
    dt_bytes_list *l = NULL;
    CHECK(dt_dist_gather_local(d, mine, n, &l) == DT_OK);
    if (R == first_of_my_machine) {
        CHECK(l && l->count == local_size);
        int k = 0;
        for (int r = 0; l && r < W; r++)
            if (machine[r] == machine[R]) CHECK(k < l->count && is_stuff(&l->items[k++], r));
    } else {
        CHECK(l == NULL);
    }
    dt_bytes_list_free(l);
    CHECK(dt_dist_allgather_local(d, mine, n, &l) == DT_OK && l && l->count == local_size);
    int k = 0;
    for (int r = 0; l && r < W; r++)
        if (machine[r] == machine[R]) CHECK(k < l->count && is_stuff(&l->items[k++], r));
    dt_bytes_list_free(l);
    dt_bytes b;
    CHECK(dt_dist_broadcast_local(d, mine, n, &b) == DT_OK && is_stuff(&b, first_of_my_machine));
    dt_bytes_free(&b);
    // the global ones are unaffected by the machines
    CHECK(dt_dist_allgather(d, mine, n, &l) == DT_OK && l && l->count == W);
    for (int r = 0; l && r < W; r++) CHECK(is_stuff(&l->items[r], r));
    dt_bytes_list_free(l);
    dt_dist_ctx_free(d);
}

/* Alternating: A B A B -> 2 machines, local ranks 0 0 1 1. */
static const char *host_alt(int r) {
    return r % 2 ? "nodeB" : "nodeA";
}
/* Uneven: A B B B -> machine sizes 1 and W-1. */
static const char *host_uneven(int r) {
    return r == 0 ? "nodeA" : "nodeB";
}
/* Every rank its own machine. */
static const char *host_own(int r) {
    static const char *n[] = {"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"};
    return n[r % 8];
}

static void test_pretend_machines(dt_comm *c) {
    check_hosts(c, host_alt);
    check_hosts(c, host_uneven);
    check_hosts(c, host_own);
    /* the alternating case spelled out: 2 machines of W/2 ranks */
    dt_dist_ctx *d = NULL;
    CHECK(dt__dist_ctx_new_on_host(c, host_alt(R), &d) == DT_OK && d);
    if (!d) return;
    CHECK(dt_dist_local_rank(d) == R / 2 && dt_dist_local_size(d) == W / 2);
    CHECK(dt_dist_cross_rank(d) == R % 2 && dt_dist_cross_size(d) == 2);
    CHECK(dt_comm_size(dt_dist_cross_comm(d)) == 2 && dt_comm_rank(dt_dist_cross_comm(d)) == R % 2);
    dt_dist_ctx_free(d);
}

int main(void) {
    dt_comm *c = NULL;
    if (!mt_begin(&c)) return 1;
    R = dt_comm_rank(c);
    W = dt_comm_size(c);
    CHECK(strcmp(dt_comm_backend_name(c), "mpi") == 0 && W >= 2 && W <= 8);
    MT_RUN(test_one_machine, c);
    MT_RUN(test_pretend_machines, c);
    int rc = mt_end(c);
    if (dt_comm_finalize(c) != DT_OK) rc = 1;
    return rc;
}
