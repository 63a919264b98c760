/* The dsat memory model against the engine's measured peak under mpirun (2 and 4 ranks): every
 * stage x micro-batch x precision x offload of the gpt and mlp benchmark models, the profile
 * taken in the same world (its `slots` = the ranks), the peak the largest over the ranks. The
 * cases and tolerances are tests/dsat/dsat_compare.h's, shared with the one-slot test. */
#define _GNU_SOURCE
#include "mpi_test.h"
#include "dsat/dsat_compare.h"

static void test_model_vs_engine(void) {
    cmp_check_all(mt_rank);
}

int main(void) {
    dt_comm *world = NULL;
    if (!mt_begin(&world)) return 1;
    MT_RUN(test_model_vs_engine);
    int rc = mt_end(world);
    if (dt_comm_finalize(world) != DT_OK) rc = 1;
    return rc;
}
