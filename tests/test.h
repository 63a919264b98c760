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

#endif
