/* mpi_test.h — helpers for the multi-process tests (run by ctest under mpirun -np 2 and 4):
 * rank-dependent test values and a closing line that sums every rank's counts. Include it
 * after `#define _GNU_SOURCE` (for dl_iterate_phdr). */
#ifndef DT_MPI_TEST_H
#define DT_MPI_TEST_H

#include "dtrain/dist.h"
#include "fixtures/files.h"
#include "test.h"

#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <unistd.h>

static int mt_rank;

static int mt_pin_one(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size, (void)data;
    if (info->dlpi_name && info->dlpi_name[0])
        dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    return 0;
}

/* Call before MPI is finalized: keeps every loaded shared object mapped when MPI_Finalize
 * unloads OpenMPI's plugins, so that LeakSanitizer (at exit) can still name their frames and
 * tests/lsan_mpi.supp can match OpenMPI's own start-up allocations by library. */
static inline void mt_pin_modules(void) {
    dl_iterate_phdr(mt_pin_one, NULL);
}

/* Run a test function: rank 0 reports it, any rank reports its own failure. */
#define MT_RUN(fn, ...)                                                                            \
    do {                                                                                           \
        int before_ = t_fail;                                                                      \
        fn(__VA_ARGS__);                                                                           \
        if (t_fail != before_)                                                                     \
            fprintf(stderr, "rank %d: %-32s FAILED\n", mt_rank, #fn);                              \
        else if (mt_rank == 0)                                                                     \
            fprintf(stderr, "%-40s ok\n", #fn);                                                    \
    } while (0)

/* A float from (rank, index) with varied magnitudes, so that the summation order shows in the
 * rounded result. */
static inline float mt_valf(int r, int64_t i) {
    uint32_t h = (uint32_t)(r + 1) * 2654435761u ^ ((uint32_t)i * 40503u + 17u);
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    float x = (float)(h & 0xffffff) / 16777216.0f - 0.5f;
    return x * (float)(1u << (h >> 28));
}

static inline double mt_vald(int r, int64_t i) {
    return (double)mt_valf(r, i) * 1.0000001 + (double)mt_valf(r + 7, i) * 1e-9;
}

/* Start a job: *world from dt_comm_init, mt_rank set, warnings and errors logged only. False
 * (the reason printed, and counted as a failure) when there is no world. */
static inline bool mt_begin(dt_comm **world) {
    if (dt_comm_init(world) != DT_OK) {
        fprintf(stderr, "dt_comm_init: %s\n", dt_last_error());
        printf("0 passed, 1 failed\n");
        return false;
    }
    mt_rank = dt_comm_rank(*world);
    dt_log_set_level(DT_LOG_WARN);
    return true;
}

/* A number every rank shares (rank 0's process id), for the names of shared directories. */
static inline int64_t mt_shared_tag(dt_comm *world) {
    int64_t tag = (int64_t)getpid();
    dt_comm_broadcast(world, &tag, sizeof tag, 0);
    return tag;
}

/* One scratch directory for the job, made by rank 0 (fixtures/files.h) and named to all in
 * out (empty when it could not be made). */
static inline void mt_tmpdir(dt_comm *world, char *out, size_t n, const char *name) {
    if (mt_rank == 0 && !fx_tmpdir(out, n, name)) out[0] = 0;
    dt_comm_broadcast(world, out, n, 0);
}

/* Whether v is the same on every rank (collective). */
static inline bool mt_same_everywhere(dt_comm *world, double v) {
    double hi = v, lo = v;
    dt_comm_allreduce(world, &hi, 1, DT_COMM_DTYPE_F64, DT_REDUCE_OP_MAX);
    dt_comm_allreduce(world, &lo, 1, DT_COMM_DTYPE_F64, DT_REDUCE_OP_MIN);
    if (hi != lo)
        fprintf(stderr, "rank %d: %g here, from %g to %g over the ranks\n", mt_rank, v, lo, hi);
    return hi == lo;
}

/* Sum every rank's pass/fail counts; rank 0 prints "N passed, M failed" for the job. A rank
 * returns non-zero when it failed itself (mpirun then fails the test). */
static inline int mt_end(dt_comm *world) {
    mt_pin_modules();
    int64_t v[2] = {t_pass, t_fail};
    if (dt_comm_allreduce(world, v, 2, DT_COMM_DTYPE_I64, DT_REDUCE_OP_SUM) != DT_OK) {
        fprintf(stderr, "rank %d: could not sum the counts: %s\n", dt_comm_rank(world),
                dt_last_error());
        printf("%d passed, %d failed\n", t_pass, t_fail + 1);
        return 1;
    }
    if (dt_comm_rank(world) == 0) {
        printf("ranks: %d\n", dt_comm_size(world));
        printf("%lld passed, %lld failed\n", (long long)v[0], (long long)v[1]);
    }
    return t_fail ? 1 : 0;
}

/* End a job: every rank done, rank 0 removes the scratch directory tmp (when given and made),
 * the counts summed (mt_end), MPI finalized. The exit status of the rank. */
static inline int mt_finish(dt_comm *world, const char *tmp) {
    dt_comm_barrier(world);
    if (mt_rank == 0 && tmp && tmp[0] && !fx_rmtree(tmp))
        fprintf(stderr, "could not remove %s\n", tmp);
    int rc = mt_end(world);
    dt_comm_finalize(world);
    return rc;
}

#endif
