/* bench_measure.c — what every benchmark measures with: step times sorted for their
 * percentiles, and the process's memory from /proc (resident now and at its peak). The plain,
 * engine, pipeline and GEMM benchmarks call it; it calls none of them. */
#include "bench_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void dt__bench_sort(double *ms, int n) {
    qsort(ms, (size_t)n, sizeof(double), cmp_double);
}

int64_t dt__bench_proc_bytes(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    int64_t kb = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, n)) kb = strtoll(line + n, NULL, 10);
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}
