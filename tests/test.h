/* test.h — a minimal test harness: CHECK macros count failures; TEST_MAIN prints
 * "N passed, M failed" and exits non-zero when anything failed. */
#ifndef DT_TEST_H
#define DT_TEST_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static int t_pass, t_fail;

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (cond) {                                                                            \
            t_pass++;                                                                          \
        } else {                                                                               \
            t_fail++;                                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);           \
        }                                                                                      \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                   \
    do {                                                                                       \
        if (cond) {                                                                            \
            t_pass++;                                                                          \
        } else {                                                                               \
            t_fail++;                                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
        }                                                                                      \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                  \
    do {                                                                                       \
        double ta_ = (double)(a), tb_ = (double)(b);                                           \
        if (fabs(ta_ - tb_) <= (tol)) {                                                        \
            t_pass++;                                                                          \
        } else {                                                                               \
            t_fail++;                                                                          \
            fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s = %.9g, %s = %.9g (tol %g)\n",        \
                    __FILE__, __LINE__, #a, ta_, #b, tb_, (double)(tol));                      \
        }                                                                                      \
    } while (0)

#define TEST_RUN(fn)                                                                           \
    do {                                                                                       \
        int before_ = t_fail;                                                                  \
        fn();                                                                                  \
        fprintf(stderr, "%-40s %s\n", #fn, t_fail == before_ ? "ok" : "FAILED");               \
    } while (0)

#define TEST_END()                                                                             \
    do {                                                                                       \
        printf("%d passed, %d failed\n", t_pass, t_fail);                                      \
        return t_fail ? 1 : 0;                                                                 \
    } while (0)

/* A test's scratch directory: a new /tmp/<prefix>.XXXXXX in dir (n bytes); false if none. */
static inline bool t_tmpdir(char *dir, size_t n, const char *prefix) {
    snprintf(dir, n, "/tmp/%s.XXXXXX", prefix);
    return mkdtemp(dir) != NULL;
}

/* Remove a scratch directory and everything in it. */
static inline void t_rmtree(const char *dir) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

/* Write `text` to dir/name. */
static inline void t_write_file(const char *dir, const char *name, const char *text) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (f) fputs(text, f);
    if (f) fclose(f);
}

#endif
