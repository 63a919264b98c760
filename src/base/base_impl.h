/* base_impl.h — base-layer helpers shared by the other layers (not part of the public API): the
 * base layer's internal interface, which any layer may include (tools/check_layers.sh). */
#ifndef DT_BASE_IMPL_H
#define DT_BASE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtrain/base.h"

/* ---- buf.c: a growing byte buffer ---- */
/* Bytes p[0 .. len), NUL-terminated once anything is in it; {0} is empty. An allocation
 * failure sets oom and drops further writes. */
typedef struct dt__buf {
    char *p;
    size_t len, cap;
    bool oom;
} dt__buf;
/* Free p and empty the buffer. */
void dt__buf_free(dt__buf *b);
/* Append n bytes (nothing once b->oom). */
void dt__buf_put(dt__buf *b, const void *d, size_t n);

/* ---- cpu.c: kernel variants (docs/performance.md, "One binary for every x86-64 CPU") ----
 * The build's baseline is x86-64-v3 (AVX2 + FMA). A kernel's AVX-512 variant is compiled for
 * its own target between DT__AVX512_BEGIN and DT__ISA_END (GCC's target pragma, which also
 * defines __AVX512F__ there) and chosen at each call when dt__isa_avx512() holds; the others
 * likewise. Keep only code (functions, static inline helpers) between the two. */
/* clang-format off */
#define DT__AVX2_BEGIN _Pragma("GCC push_options") \
    _Pragma("GCC target(\"avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt\")")
#define DT__AVX512_BEGIN _Pragma("GCC push_options") \
    _Pragma("GCC target(\"avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,avx512f,avx512bw,avx512vl,avx512dq,avx512cd\")")
#define DT__AVX512_BF16_BEGIN _Pragma("GCC push_options") \
    _Pragma("GCC target(\"avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,avx512f,avx512bw,avx512vl,avx512dq,avx512cd,avx512bf16\")")
/* clang-format on */
#define DT__ISA_END _Pragma("GCC pop_options")
static inline bool dt__isa_avx512(void) {
    return dt_cpu_isa_level() >= DT_CPU_AVX512;
}
static inline bool dt__isa_avx2(void) {
    return dt_cpu_isa_level() >= DT_CPU_AVX2;
}
/* For tests: run the kernels of `isa` (capped at the CPU's level) from now on, in the whole
 * process; returns the previous level. Not thread-safe: call it between computations. */
dt_cpu_isa dt__cpu_isa_override(dt_cpu_isa isa);

/* p[0 .. n) = 0, spread over the OpenMP threads when n is large (a gradient buffer is zeroed
 * every step, and one core alone cannot fill the memory bandwidth). */
void dt__zero_f32(float *p, int64_t n);

/* dt_crc32c computed with the byte table, whatever the CPU offers (the reference the
 * instruction path is tested against). */
uint32_t dt__crc32c_table(uint32_t crc, const void *data, size_t n);

/* mkdir -p: makes every missing directory of `dir` (mode 0777 less the umask). Returns 0, or
 * the errno of the first component that could not be made (ENOTDIR: it exists and is not a
 * directory) with that component's path in failed[0 .. cap). */
int dt__mkdir_p(const char *dir, char *failed, size_t cap);
/* Remove `name` under directory fd `pfd` (AT_FDCWD: a path) recursively, never following a
 * symbolic link. Returns 0 or the first errno met; it goes on removing what it can. */
int dt__rm_tree_at(int pfd, const char *name);

/* A short rendering of a config value for "got ..." in error messages: its kind for containers
 * (in YAML's words, mapping and list, when `yaml`, else JSON's, object and array), a string
 * quoted and cut at 40 characters, numbers and literals as written; "nothing" for NULL. */
struct json_t;
const char *dt__json_describe(const struct json_t *v, bool yaml, char *buf, size_t n);

/* ---- durable.c: the pieces of the durable write path (base/durable.h) ---- */
/* Write all n bytes to fd (retrying short writes and EINTR). DT_ERR_IO naming `path`. */
dt_status dt__write_full(int fd, const char *path, const void *data, size_t n);
/* fsync fd. DT_ERR_IO naming `path`. */
dt_status dt__file_fsync(int fd, const char *path);
/* Create or truncate `path` and write n bytes to it, fsynced when do_sync; no rename (for files
 * inside a temporary directory that is committed as a whole). DT_ERR_IO. */
dt_status dt__file_write(const char *path, const void *data, size_t n, bool do_sync);

/* Fault injection for tests, on the calling thread only: the n-th next write (or fsync, of a
 * file or a directory) through durable.c fails with errno err (0: EIO); n = 0 disables. */
typedef enum dt__file_fault { DT__FAULT_WRITE = 0, DT__FAULT_FSYNC = 1 } dt__file_fault;
void dt__file_fail_after(dt__file_fault kind, int64_t n, int err);

/* ---- the activation arena (arena.c) ---- */
DT_API dt_arena *dt_arena_new(dt_device *dev, dt_mem_category cat, size_t initial_bytes);
DT_API void dt_arena_free(dt_arena *a);
/* Zeroed, 64-byte aligned. NULL with DT_ERR_OOM on failure. */
DT_API void *dt_arena_alloc(dt_arena *a, size_t bytes);
DT_API void *dt_arena_alloc_raw(dt_arena *a, size_t bytes);
DT_API void dt_arena_reset(dt_arena *a);
DT_API dt_arena_mark dt_arena_get_mark(const dt_arena *a);
DT_API void dt_arena_rewind(dt_arena *a, dt_arena_mark m);
/* True when ptr points into memory allocated after mark m (and not rewound since). */
DT_API bool dt_arena_allocated_since(const dt_arena *a, dt_arena_mark m, const void *ptr);
DT_API bool dt_arena_contains(const dt_arena *a, const void *ptr);
DT_API size_t dt_arena_used(const dt_arena *a);
DT_API size_t dt_arena_high_water(const dt_arena *a);
DT_API size_t dt_arena_capacity(const dt_arena *a);

/* Memory accounting and random streams below the public API. */
DT_API const char *dt_mem_category_name(dt_mem_category c);
DT_API const char *dt_device_name(const dt_device *dev);
DT_API void dt_device_set_budget(dt_device *dev, int64_t budget_bytes);
/* Fault injection for tests: the n-th next allocation on `dev` fails (0 disables). */
DT_API void dt_device_fail_after(dt_device *dev, int64_t n);
/* Four 32-bit random words for block `ctr` under key `seed`. */
DT_API void dt_philox(uint64_t seed, uint64_t ctr, uint32_t out[4]);
DT_API uint32_t dt_rng_u32(dt_rng *r);
DT_API uint64_t dt_rng_u64(dt_rng *r);

/* Allocate `bytes` zeroed bytes charged to `cat`. On failure (malloc or budget) returns NULL
 * with DT_ERR_OOM set; nothing is charged. */
DT_API void *dt_mem_alloc(dt_device *dev, dt_mem_category cat, size_t bytes);
/* Free memory from dt_mem_alloc; `bytes` must be the size it was allocated with. */
DT_API void dt_mem_free(dt_device *dev, dt_mem_category cat, void *p, size_t bytes);
/* Edit distance (optimal string alignment: insertions, deletions, substitutions, adjacent
 * transpositions), case-sensitive — used for "did you mean" suggestions. Strings longer than
 * 255 bytes give the longer length. */
DT_API int dt_edit_distance(const char *a, const char *b);

#endif
