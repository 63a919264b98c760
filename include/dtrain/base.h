/*
 * dtrain/base.h — status codes, error messages, memory accounting, arenas, RNG, timers.
 *
 * Every fallible library function returns a dt_status (or NULL) and leaves a message in a
 * thread-local buffer readable with dt_last_error(). Nothing here calls exit().
 */
#ifndef DTRAIN_BASE_H
#define DTRAIN_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DT_API __attribute__((visibility("default")))

typedef enum dt_status {
    DT_OK = 0,
    DT_ERR_INVALID = 1, /* bad argument or shape */
    DT_ERR_OOM = 2,     /* allocation failed or the device budget is exceeded */
    DT_ERR_CONFIG = 3,  /* bad configuration value */
    DT_ERR_IO = 4,      /* file system error */
    DT_ERR_COMM = 5,    /* communication failure */
    DT_ERR_FORMAT = 6,  /* corrupted or unsupported file */
    DT_ERR_STATE = 7,   /* call not allowed in the current state */
    /* the trial called its hyperparameters invalid (the reference's InvalidHP): the searcher
     * is told, the trial is not restarted */
    DT_ERR_INVALID_HP = 8,
} dt_status;

/* The message of the last error raised on this thread ("" if none). */
DT_API const char *dt_last_error(void);
/* The status of the last error raised on this thread. */
DT_API dt_status dt_last_status(void);
/* Record an error on this thread and return `st` (so callers can `return dt_error(...)`). */
DT_API dt_status dt_error(dt_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
DT_API void dt_clear_error(void);
DT_API const char *dt_status_name(dt_status st);
/* The first failure of two results: a when it is an error, else b. For cleanup that must run
 * after an error and may fail itself: st = dt_status_first(st, x_free(...)). */
static inline dt_status dt_status_first(dt_status a, dt_status b) {
    return a != DT_OK ? a : b;
}
/* The thread's last error, saved so clean-up that may raise errors of its own can run after a
 * failure without losing the message that explains it. */
typedef struct dt_error_saved {
    dt_status status;
    char msg[1024];
} dt_error_saved;
DT_API void dt_error_save(dt_error_saved *s);
/* Make a saved error the thread's last error again; returns its status. */
DT_API dt_status dt_error_restore(const dt_error_saved *s);
/* Run clean-up statements and keep the error they follow: DT_KEEP_ERROR(x_free(x)). */
#define DT_KEEP_ERROR(...)                                                                         \
    do {                                                                                           \
        dt_error_saved dt_keep_;                                                                   \
        dt_error_save(&dt_keep_);                                                                  \
        __VA_ARGS__;                                                                               \
        dt_error_restore(&dt_keep_);                                                               \
    } while (0)

/* ---- memory accounting ---------------------------------------------------------------- */

typedef enum dt_mem_category {
    DT_MEM_PARAMS = 0,
    DT_MEM_GRADS,
    DT_MEM_OPTIM,
    DT_MEM_ACTIVATIONS,
    DT_MEM_COMM,
    DT_MEM_OTHER,
    DT_MEM_NCAT
} dt_mem_category;


/* A device is a memory pool with per-category accounting and an optional byte budget.
 * A device is thread-safe; every allocation is 64-byte aligned and zeroed. */
typedef struct dt_device dt_device;

typedef struct dt_mem_stats {
    int64_t current[DT_MEM_NCAT];
    int64_t peak[DT_MEM_NCAT];
    int64_t total_current;
    int64_t total_peak;
    int64_t budget; /* 0 = unlimited */
} dt_mem_stats;

/* Create a device named `name` (e.g. "cpu", "host", "nvme"). budget_bytes = 0 means no budget;
 * if budget_bytes < 0 the budget is read from $DT_DEVICE_MEMORY (bytes, or with a K/M/G suffix). */
DT_API dt_device *dt_device_new(const char *name, int64_t budget_bytes);
DT_API void dt_device_free(dt_device *dev);
DT_API void dt_device_stats(const dt_device *dev, dt_mem_stats *out);
DT_API void dt_device_reset_peak(dt_device *dev);

/* Charge / release bytes that were allocated elsewhere (e.g. by a library). Charging fails
 * with DT_ERR_OOM when it would exceed the budget. */
DT_API dt_status dt_mem_charge(dt_device *dev, dt_mem_category cat, int64_t bytes);
DT_API void dt_mem_release(dt_device *dev, dt_mem_category cat, int64_t bytes);

/* ---- arena ---------------------------------------------------------------------------- */

/* A bump allocator for activations: allocations are freed all at once by dt_arena_reset.
 * After a reset the arena keeps one block sized to the high-water mark so the next step
 * allocates nothing. */
typedef struct dt_arena dt_arena;

/* A position in the arena; dt_arena_rewind frees everything allocated after it (memory
 * allocated before the mark stays valid). Marks nest; rewinding past a reset is undefined. */
typedef struct dt_arena_mark {
    void *block;
    size_t used, used_total;
} dt_arena_mark;

/* ---- RNG ------------------------------------------------------------------------------ */

/* Counter-based RNG (Philox4x32-10). The whole state is (seed, counter): saving those two
 * numbers and restoring them reproduces the stream exactly. Element i of a fill request uses
 * counter position `counter + i/4`, so results never depend on the thread count. */
typedef struct dt_rng {
    uint64_t seed;
    uint64_t counter;
} dt_rng;

DT_API void dt_rng_init(dt_rng *r, uint64_t seed);
/* Uniform in [0, 1). */
DT_API double dt_rng_uniform(dt_rng *r);
/* Fill with U[lo, hi). Advances the counter by ceil(n/4). */
DT_API void dt_rng_fill_uniform(dt_rng *r, float *out, int64_t n, float lo, float hi);
/* Fill with N(mean, std). Advances the counter by ceil(n/4). */
DT_API void dt_rng_fill_normal(dt_rng *r, float *out, int64_t n, float mean, float std);
/* Uniform integer in [0, n). */
DT_API uint64_t dt_rng_below(dt_rng *r, uint64_t n);

/* ---- config sources ------------------------------------------------------------------ */

/* A YAML document loaded with the source position of every node (configs name their errors'
 * line:column from it). */
typedef struct dt_yaml_doc dt_yaml_doc;
/* A position in the source: 1-based line and column; line 0 = unknown. */
typedef struct dt_yaml_pos {
    int line, col;
} dt_yaml_pos;

/* ---- misc ----------------------------------------------------------------------------- */

DT_API double dt_now_sec(void); /* monotonic clock */
DT_API uint32_t dt_crc32c(uint32_t crc, const void *data, size_t n);

typedef enum dt_log_level { DT_LOG_DEBUG, DT_LOG_INFO, DT_LOG_WARN, DT_LOG_ERROR } dt_log_level;
DT_API void dt_log(dt_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
DT_API void dt_log_set_level(dt_log_level lvl);

/* Threads used by kernels and BLAS (one shared OpenMP pool). n <= 0 picks the core count. */
DT_API void dt_set_num_threads(int n);
DT_API int dt_get_num_threads(void);

/* Instruction-set levels, each including the ones before it. */
typedef enum dt_cpu_isa {
    DT_CPU_GENERIC = 0,     /* x86-64 baseline (or another architecture) */
    DT_CPU_AVX2 = 1,        /* AVX2 + FMA */
    DT_CPU_AVX512 = 2,      /* AVX-512 F/BW/VL/DQ */
    DT_CPU_AVX512_BF16 = 3, /* plus the bf16 instructions (vcvtne2ps2bf16, vdpbf16ps) */
} dt_cpu_isa;
/* The level kernels may use: the CPU's, capped by $DTRAIN_ISA (a level's name); read once. */
DT_API dt_cpu_isa dt_cpu_isa_level(void);
DT_API const char *dt_cpu_isa_name(dt_cpu_isa isa);

/* Parse a byte count: "1024", "64K", "512M", "1.5GiB", "2T" (binary units). It must come to a
 * whole number of bytes in [0, INT64_MAX]: NaN, inf, negative, fractional ("0.1") and too large
 * values are refused, never rounded. Returns -1 with DT_ERR_INVALID and the reason. */
DT_API int64_t dt_parse_bytes(const char *s);

#ifdef __cplusplus
}
#endif
#endif
