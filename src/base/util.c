/* util.c — monotonic clock, crc32c, thread-count control, parallel zeroing, mkdir -p. */
#include "base/base_impl.h"
#include "dtrain/base.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <omp.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

double dt_now_sec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint32_t table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static bool crc_hw;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[i] = c;
    }
#if defined(__x86_64__)
    crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

/* crc is the running (inverted) register */
static uint32_t crc_table(uint32_t crc, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__)
/* The SSE4.2 crc32 instruction computes this very polynomial: 8 bytes per instruction, about
 * 20x the table's rate, which is what checkpoint save and load spend their CPU time on. */
__attribute__((target("sse4.2"))) static uint32_t crc_hw8(uint32_t crc, const unsigned char *p,
                                                          size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        crc = __builtin_ia32_crc32qi(crc, *p++);
        n--;
    }
    uint64_t c = crc;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
    }
    crc = (uint32_t)c;
    while (n--) crc = __builtin_ia32_crc32qi(crc, *p++);
    return crc;
}
#endif

uint32_t dt__crc32c_table(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
    return ~crc_table(~crc, data, n);
}

uint32_t dt_crc32c(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
#if defined(__x86_64__)
    if (crc_hw) return ~crc_hw8(~crc, data, n);
#endif
    return ~crc_table(~crc, data, n);
}

/* OpenBLAS built for OpenMP follows omp_set_num_threads; this declaration lets us set it
 * explicitly too without including cblas.h in the base layer. */
void openblas_set_num_threads(int);

void dt_set_num_threads(int n) {
    if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n <= 0) n = 1;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

int dt_get_num_threads(void) {
    return omp_get_max_threads();
}

/* below this many floats (1 MiB) a single memset beats waking the other threads */
#define ZERO_PAR_MIN ((int64_t)1 << 18)
#define ZERO_CHUNK ((int64_t)1 << 16) /* 256 KiB pieces, whole cache lines */

void dt__zero_f32(float *p, int64_t n) {
    if (n <= 0) return;
    if (n < ZERO_PAR_MIN || omp_in_parallel() || omp_get_max_threads() == 1) {
        memset(p, 0, (size_t)n * sizeof *p);
        return;
    }
    int64_t chunks = (n + ZERO_CHUNK - 1) / ZERO_CHUNK;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t lo = c * ZERO_CHUNK, hi = lo + ZERO_CHUNK < n ? lo + ZERO_CHUNK : n;
        memset(p + lo, 0, (size_t)(hi - lo) * sizeof *p);
    }
}

/* Optimal string alignment distance: Levenshtein plus adjacent transpositions (the typo
 * measure behind the configs' "did you mean"). */
int dt_edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > 255 || m > 255) return (int)(n > m ? n : m); /* not a plausible typo */
    /* three rolling rows: i-2, i-1, i */
    int rows[3][256];
    for (size_t j = 0; j <= m; j++) rows[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int *cur = rows[i % 3], *prev = rows[(i - 1) % 3], *prev2 = rows[(i + 1) % 3];
        cur[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int cost = a[i - 1] != b[j - 1];
            int d = prev[j] + 1;
            if (cur[j - 1] + 1 < d) d = cur[j - 1] + 1;
            if (prev[j - 1] + cost < d) d = prev[j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                prev2[j - 2] + 1 < d)
                d = prev2[j - 2] + 1;
            cur[j] = d;
        }
    }
    return rows[n % 3][m];
}

int dt__mkdir_p(const char *dir, char *failed, size_t cap) {
    size_t len = strlen(dir);
    char *p = malloc(len + 1);
    if (!p) return ENOMEM;
    memcpy(p, dir, len + 1);
    int err = 0;
    for (size_t i = 1; i <= len && !err; i++) {
        if (p[i] != '/' && p[i] != 0) continue;
        char saved = p[i];
        p[i] = 0;
        struct stat st;
        if (stat(p, &st) == 0) {
            if (!S_ISDIR(st.st_mode)) err = ENOTDIR;
        } else if (errno != ENOENT) {
            err = errno;
        } else if (mkdir(p, 0777) != 0 && errno != EEXIST) { /* EEXIST: a concurrent mkdir */
            err = errno;
        }
        if (err && cap) snprintf(failed, cap, "%s", p);
        p[i] = saved;
    }
    free(p);
    return err;
}
