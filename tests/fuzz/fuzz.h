/*
 * fuzz.h — what the fuzz harnesses share: a scratch directory for the readers that take a path,
 * writing a file into it, and a NUL-terminated copy of an input.
 *
 * Each harness defines LLVMFuzzerTestOneInput; it is linked either with libFuzzer (the DT_FUZZ
 * configuration, `make fuzz`) or with replay.c, which runs the committed corpus in every build.
 * A harness must free everything it allocates for an input, whatever the input is.
 */
#ifndef DT_FUZZ_H
#define DT_FUZZ_H

#define _GNU_SOURCE /* nftw's FTW_PHYS / FTW_DEPTH */
#include "dtrain/base.h"

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Once per process: no warnings on stderr (the inputs are full of unknown keys). */
static inline void fz_init(void) {
    static int done;
    if (!done) dt_log_set_level(DT_LOG_ERROR);
    done = 1;
}

/* Abort (a finding) when an invariant of the reader does not hold for this input. */
#define FZ_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond);      \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A malloc'd NUL-terminated copy of the input (an embedded NUL ends the text early). */
static inline char *fz_text(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) abort();
    if (size) memcpy(s, data, size);
    s[size] = 0;
    return s;
}

static inline int fz_rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *f) {
    (void)sb, (void)flag, (void)f;
    return remove(path);
}

static inline char *fz_dir_path(void) {
    static char path[256];
    return path;
}

static inline void fz_rm_dir(void) {
    nftw(fz_dir_path(), fz_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A private directory for this process ($TMPDIR or /tmp), removed at exit. */
static inline const char *fz_dir(void) {
    char *dir = fz_dir_path();
    if (!dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, 256, "%s/dtrain-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(fz_rm_dir);
    }
    return dir;
}

/* Write `size` bytes to `path` (replacing it); aborts if the file system refuses. */
static inline void fz_write(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

#endif
