/* mem.c — devices: 64-byte aligned zeroed allocations with per-category accounting,
 * peak tracking and an optional budget that turns into DT_ERR_OOM. */
#include "dtrain/base.h"
#include "base/base_impl.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Blocks of HUGE_MIN or more (the activation arena, the flat parameter, gradient and optimizer
 * buffers of a model that size) ask for transparent huge pages: a step sweeps through all of
 * them, and with 4 KiB pages it pays TLB misses on every one (GPT benchmark: 2-3% of the
 * step). Only whole 2 MiB pages inside the block are advised, so RSS stays what is used;
 * below HUGE_MIN the rounding would be a large share of the block. A kernel that refuses
 * the advice changes nothing else. */
#define HUGE_PAGE ((size_t)2 << 20)
#define HUGE_MIN ((size_t)8 << 20)

struct dt_device {
    char name[32];
    _Atomic int64_t current[DT_MEM_NCAT];
    _Atomic int64_t peak[DT_MEM_NCAT];
    _Atomic int64_t total;
    _Atomic int64_t total_peak;
    _Atomic int64_t budget;
    _Atomic int64_t fail_after;
};

static const char *cat_names[DT_MEM_NCAT] = {"params",      "grads",        "optimizer_states",
                                             "activations", "comm_buffers", "other"};

const char *dt_mem_category_name(dt_mem_category c) {
    return (c >= 0 && c < DT_MEM_NCAT) ? cat_names[c] : "?";
}

dt_device *dt_device_new(const char *name, int64_t budget_bytes) {
    dt_device *d = calloc(1, sizeof *d);
    if (!d) {
        dt_error(DT_ERR_OOM, "cannot allocate a device");
        return NULL;
    }
    snprintf(d->name, sizeof d->name, "%s", name ? name : "cpu");
    if (budget_bytes < 0) {
        const char *env = getenv("DT_DEVICE_MEMORY");
        budget_bytes = 0;
        if (env && *env) {
            int64_t b = dt_parse_bytes(env);
            if (b < 0) {
                dt_error(DT_ERR_CONFIG,
                         "DT_DEVICE_MEMORY=%s is not a size: %s; hint: use a whole number of "
                         "bytes from 0 (no budget) to %lld, or a K/M/G/T suffix, e.g. "
                         "DT_DEVICE_MEMORY=8G",
                         env, dt_last_error(), (long long)INT64_MAX);
                free(d);
                return NULL;
            }
            budget_bytes = b;
        }
    }
    d->budget = budget_bytes;
    return d;
}

void dt_device_free(dt_device *d) {
    free(d);
}
const char *dt_device_name(const dt_device *d) {
    return d->name;
}
void dt_device_set_budget(dt_device *d, int64_t b) {
    d->budget = b;
}
void dt_device_fail_after(dt_device *d, int64_t n) {
    d->fail_after = n;
}

void dt_device_stats(const dt_device *d, dt_mem_stats *o) {
    for (int i = 0; i < DT_MEM_NCAT; i++) {
        o->current[i] = d->current[i];
        o->peak[i] = d->peak[i];
    }
    o->total_current = d->total;
    o->total_peak = d->total_peak;
    o->budget = d->budget;
}

void dt_device_reset_peak(dt_device *d) {
    for (int i = 0; i < DT_MEM_NCAT; i++) d->peak[i] = d->current[i];
    d->total_peak = d->total;
}

static void bump_peak(_Atomic int64_t *peak, int64_t v) {
    int64_t p = atomic_load(peak);
    while (v > p && !atomic_compare_exchange_weak(peak, &p, v)) {
    }
}

dt_status dt_mem_charge(dt_device *d, dt_mem_category cat, int64_t bytes) {
    if (atomic_load(&d->fail_after) > 0 && atomic_fetch_sub(&d->fail_after, 1) == 1)
        return dt_error(DT_ERR_OOM, "injected allocation failure on device %s (%s, %lld bytes)",
                        d->name, cat_names[cat], (long long)bytes);
    int64_t total = atomic_fetch_add(&d->total, bytes) + bytes;
    int64_t budget = d->budget;
    if (budget > 0 && total > budget) {
        atomic_fetch_sub(&d->total, bytes);
        return dt_error(DT_ERR_OOM,
                        "device %s out of memory: %lld bytes for %s would bring the total to "
                        "%lld of a %lld-byte budget; hint: reduce the batch size, raise "
                        "DT_DEVICE_MEMORY, or enable ZeRO/offload",
                        d->name, (long long)bytes, cat_names[cat], (long long)total,
                        (long long)budget);
    }
    int64_t c = atomic_fetch_add(&d->current[cat], bytes) + bytes;
    bump_peak(&d->peak[cat], c);
    bump_peak(&d->total_peak, total);
    return DT_OK;
}

void dt_mem_release(dt_device *d, dt_mem_category cat, int64_t bytes) {
    atomic_fetch_sub(&d->current[cat], bytes);
    atomic_fetch_sub(&d->total, bytes);
}

void *dt_mem_alloc(dt_device *d, dt_mem_category cat, size_t bytes) {
    size_t sz = (bytes + 63) & ~(size_t)63;
    if (sz == 0) sz = 64;
    if (dt_mem_charge(d, cat, (int64_t)bytes) != DT_OK) return NULL;
    void *p = NULL;
    if (sz >= HUGE_MIN) {
        if (posix_memalign(&p, HUGE_PAGE, sz) != 0)
            p = NULL;
        else
            (void)madvise(p, sz & ~(HUGE_PAGE - 1), MADV_HUGEPAGE);
    } else {
        p = aligned_alloc(64, sz);
    }
    if (!p) {
        dt_mem_release(d, cat, (int64_t)bytes);
        dt_error(DT_ERR_OOM, "malloc of %zu bytes failed (%s)", bytes, cat_names[cat]);
        return NULL;
    }
    memset(p, 0, sz);
    return p;
}

void dt_mem_free(dt_device *d, dt_mem_category cat, void *p, size_t bytes) {
    if (!p) return;
    free(p);
    dt_mem_release(d, cat, (int64_t)bytes);
}
