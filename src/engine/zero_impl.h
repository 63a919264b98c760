/*
 * zero_impl.h — what the ZeRO files share: zero.c (setup and teardown) over zero_layout.c
 * (the flat window, the groups and who owns which block), zero_gather.c (stage 3's gathers and
 * releases), zero_grads.c (gradient reduction during backward and at the boundary),
 * zero_norm.c (the gradient norm) and zero_step.c (the partitioned optimiser step and the
 * state's visits). engine_impl.h declares what the rest of the engine calls.
 */
#ifndef DT_ZERO_IMPL_H
#define DT_ZERO_IMPL_H

#include "base/base_impl.h"
#include "engine/engine_impl.h"

#include <stddef.h>
#include <stdint.h>

static inline int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}
static inline int64_t max64(int64_t a, int64_t b) {
    return a > b ? a : b;
}

/* ---- the flat window and the groups (zero_layout.c) ---- */

/* An anonymous mapping of n floats (whole pages, *bytes); NULL when the system refuses. */
float *dt__zero_map_floats(int64_t n, size_t *bytes);
/* Zero floats [a, b) of base and hand the whole pages inside back to the system with
 * MADV_FREE: the kernel takes them when it needs memory (then they read as zeros), and until
 * then a later use finds them in place, zeroed, without page faults. Either way the range
 * reads as zeros afterwards, which the gradient window relies on. */
void dt__zero_release_range(float *base, int64_t a, int64_t b);

/* The modules of m's tree with parameters of their own (the groups). */
int dt__zero_count_groups(dt_module *m);
/* Fill e->groups[*k..] with m's tree's groups, in flat order, each its range [a, b). */
void dt__zero_collect_groups(dt_engine *e, dt_module *m, int *k);
/* The index of m's group (m has parameters of its own). */
int dt__zero_group_of(const dt_engine *e, const dt_module *m);
/* Bytes of [a, b) that rank j owns, for allgatherv / reduce_scatterv layouts. */
static inline int64_t dt__zero_owned_part(const dt_engine *e, int j, int64_t a, int64_t b,
                                          int64_t *start) {
    int64_t s = max64(a, (int64_t)j * e->block), t = min64(b, (int64_t)(j + 1) * e->block);
    if (start) *start = s;
    return t > s ? t - s : 0;
}

/* ---- stage 3 (zero_gather.c) ---- */

/* A user of group gi's parameters (a forward or a backward of its module): gathered unless
 * resident already, with the next groups prefetched in direction dir. */
dt_status dt__zero_use_params(dt_engine *e, int gi, int dir);
/* The user is done with g's parameters: released when nobody else holds them. */
void dt__zero_unuse_params(dt_engine *e, dt_engine_group *g);
/* Release prefetched groups nobody used (the run order left the layout's, or the pass ended). */
void dt__zero_release_idle(dt_engine *e);
/* Stage 3, after an update: copies in the window are stale. Persistent groups are gathered
 * again; prefetched ones nobody holds are dropped. */
dt_status dt__zero_refresh_persistent(dt_engine *e);

/* ---- the optimiser step (zero_step.c) ---- */

/* The nvme files of the master weights and the two moments, in buf[0..3). */
dt_swap *const *dt__zero_nv_stores(dt_engine *e, dt_swap **buf);

/* ---- gradient reduction (zero_grads.c) ---- */

/* Stage >= 2: every group's module gets the hooks that mark its backward (gradients reduced
 * in buckets as they are final) and, at stage 3, gather and release its parameters; the
 * module's own hooks are kept and still run. */
void dt__zero_hook_modules(dt_engine *e);

#endif
