/*
 * zero_layout.c — the ZeRO engine's flat window (one anonymous mapping per buffer at fixed
 * addresses, ranges released to the system and read back as zeros) and its groups: each module
 * with parameters of its own is one range of the flat buffer, and rank j owns block j.
 */
#include "engine/zero_impl.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- the flat window ----------------------------------------------------------------------- */

static size_t page_size(void) {
    return (size_t)sysconf(_SC_PAGESIZE);
}

float *dt__zero_map_floats(int64_t n, size_t *bytes) {
    size_t ps = page_size();
    *bytes = ((size_t)n * sizeof(float) + ps - 1) / ps * ps;
    if (!*bytes) *bytes = ps;
    void *p = mmap(NULL, *bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void dt__zero_release_range(float *base, int64_t a, int64_t b) {
    if (b <= a) return;
    size_t ps = page_size();
    char *lo = (char *)(base + a), *hi = (char *)(base + b);
    memset(lo, 0, (size_t)(hi - lo));
    char *plo = (char *)(((uintptr_t)lo + ps - 1) / ps * ps);
    char *phi = (char *)((uintptr_t)hi / ps * ps);
    if (phi > plo) madvise(plo, (size_t)(phi - plo), MADV_FREE);
}

/* ---- groups -------------------------------------------------------------------------------- */

int dt__zero_count_groups(dt_module *m) {
    int k = m->n_params > 0;
    for (int i = 0; i < m->n_children; i++) k += dt__zero_count_groups(m->children[i]);
    return k;
}

static int64_t numel_of(const dt_param *p) {
    int64_t k = 1;
    for (int i = 0; i < p->ndim; i++) k *= p->shape[i];
    return k;
}

void dt__zero_collect_groups(dt_engine *e, dt_module *m, int *k) {
    if (m->n_params > 0) {
        dt_engine_group *g = &e->groups[(*k)++];
        g->m = m;
        g->a = m->params[0].offset;
        const dt_param *last = &m->params[m->n_params - 1];
        g->b = last->offset + numel_of(last);
        for (int i = 0; i < m->n_params; i++) {
            g->a = min64(g->a, m->params[i].offset);
            g->b = max64(g->b, m->params[i].offset + numel_of(&m->params[i]));
        }
    }
    for (int i = 0; i < m->n_children; i++) dt__zero_collect_groups(e, m->children[i], k);
}

int dt__zero_group_of(const dt_engine *e, const dt_module *m) {
    int lo = 0, hi = e->n_groups - 1;
    int64_t a = m->params[0].offset;
    while (lo <= hi) { /* groups are in flat order: binary search by start */
        int mid = (lo + hi) / 2;
        if (e->groups[mid].a == a) return mid;
        if (e->groups[mid].a < a)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}
