/* bench_clock.h — the clocks and order statistics the benchmarks under bench/ share: wall
 * (CLOCK_MONOTONIC) and process CPU (CLOCK_PROCESS_CPUTIME_ID) seconds — the CPU time of a
 * step is the work without the slices other processes took on a shared machine — and
 * percentiles of a sample. Header-only, so a benchmark compiled by hand needs no other file. */
#ifndef DTRAIN_BENCH_CLOCK_H
#define DTRAIN_BENCH_CLOCK_H

#include <stdlib.h>
#include <time.h>

/* Seconds on clock id. */
static inline double bench_now(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline double bench_wall(void) {
    return bench_now(CLOCK_MONOTONIC);
}

static inline double bench_cpu(void) {
    return bench_now(CLOCK_PROCESS_CPUTIME_ID);
}

/* qsort's order for doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The p-quantile (0..1, nearest rank) of v[0..n), which is sorted in place. */
static inline double bench_pct(double *v, int n, double p) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[(int)(p * (n - 1) + 0.5)];
}

#endif
