/* data_impl.h — internals shared by the data layer's files: field checks and the epoch plan
 * (the list of batches one iteration hands out, built by sampler.c, consumed by loader.c). */
#ifndef DT_DATA_IMPL_H
#define DT_DATA_IMPL_H

#include "dtrain/data.h"

/* A dataset's prefetch hint for one sample: start reading the cache lines of [p, p + n) (a
 * hint: nothing faults, nothing is waited for). */
/* Memory for a dataset's samples, released with free(). Samples are read in random order, so
 * with 4 KiB pages nearly every one costs a TLB miss (a long page walk under virtualisation):
 * a block of 2 MiB or more is aligned to 2 MiB and advised to use transparent huge pages. */
void *dt__sample_store_alloc(size_t n);

static inline void dt__prefetch_line(const char *p) {
#if defined(__x86_64__) || defined(__i386__)
    /* volatile: gcc deletes a loop whose body is only __builtin_prefetch (it has no effect
     * the compiler must keep), which left a sample's lines unfetched */
    __asm__ volatile("prefetcht0 %0" : : "m"(*p));
#else
    __builtin_prefetch(p);
#endif
}

static inline void dt__prefetch_bytes(const void *p, size_t n) {
    const char *c = p;
    for (size_t o = 0; o < n; o += 64) dt__prefetch_line(c + o);
    if (n) dt__prefetch_line(c + n - 1);
}

/* DT_OK if `f` is a usable field description (name set and terminated, dtype known,
 * 0 <= ndim < DT_MAX_DIMS, every dim >= 1); else DT_ERR_INVALID naming `who`. */
dt_status dt__field_check(const dt_field *f, const char *who);

/* A list of batches: batch b holds idx[off[b] .. off[b+1]). Buffers grow and are reused. */
struct dt_batch_plan {
    int64_t *idx;
    int64_t n_idx, cap_idx;
    int64_t *off; /* nb + 1 entries */
    int64_t nb, cap_off;
};

void dt__plan_clear(dt_batch_plan *p);
void dt__plan_release(dt_batch_plan *p);
int64_t dt__plan_max_batch(const dt_batch_plan *p);

/* What the sampler side needs to know about a loader. */
typedef struct dt__sampling {
    const dt_dataset *ds;
    int64_t batch_size;
    bool shuffle, drop_last;
    uint64_t seed;
    const dt_sampler *sampler; /* with a fixed list already copied into it */
    const dt_batch_sampler *batch_sampler;
} dt__sampling;

/* Scratch buffers the plan builder reuses between epochs. */
typedef struct dt__plan_scratch {
    int64_t *order; /* the epoch's global sample order */
    int64_t cap_order;
    dt_batch_plan global; /* a batch sampler's global batches */
    int64_t global_epoch; /* epoch `global` holds, or -1 */
} dt__plan_scratch;

void dt__scratch_release(dt__plan_scratch *s);

/* Build the batches of `epoch` for shard (rank, world) into *out, following the sharding rule
 * in data.h. On error *out is left empty and the status returned (message set). */
dt_status dt__plan_build(const dt__sampling *cfg, dt__plan_scratch *scr, int64_t epoch, int rank,
                         int world, dt_batch_plan *out);

/* Count the batches and records of `epoch` for shard (rank, world) without building a plan
 * (a batch sampler's global list is built and cached in scr). */
dt_status dt__plan_count(const dt__sampling *cfg, dt__plan_scratch *scr, int64_t epoch, int rank,
                         int world, int64_t *nb, int64_t *nrec);

/* The Philox key of epoch `epoch`'s shuffle under `seed` (a splitmix64 mix: streams of nearby
 * seeds and epochs are unrelated, and unrelated to the context RNG's stream of `seed`). */
uint64_t dt__shuffle_key(uint64_t seed, int64_t epoch);

#endif
