/* arena.c — bump allocator for per-step activations. Blocks are charged to the device
 * when obtained; after a reset the blocks are coalesced into one of high-water size. */
#include "dtrain/base.h"
#include "base/base_impl.h"

#include <stdlib.h>
#include <string.h>

typedef struct block {
    struct block *next;
    size_t cap, used;
    char *mem;
} block;

struct dt_arena {
    dt_device *dev;
    dt_mem_category cat;
    block *head; /* current block first */
    size_t used_total, high_water;
};

static block *block_new(dt_arena *a, size_t cap) {
    block *b = calloc(1, sizeof *b);
    if (!b) {
        dt_error(DT_ERR_OOM, "arena block header");
        return NULL;
    }
    b->mem = dt_mem_alloc(a->dev, a->cat, cap);
    if (!b->mem) {
        free(b);
        return NULL;
    }
    b->cap = cap;
    return b;
}

dt_arena *dt_arena_new(dt_device *dev, dt_mem_category cat, size_t initial) {
    dt_arena *a = calloc(1, sizeof *a);
    if (!a) {
        dt_error(DT_ERR_OOM, "arena");
        return NULL;
    }
    a->dev = dev;
    a->cat = cat;
    if (initial) {
        a->head = block_new(a, initial);
        if (!a->head) {
            free(a);
            return NULL;
        }
    }
    return a;
}

static void free_blocks(dt_arena *a) {
    block *b = a->head;
    while (b) {
        block *n = b->next;
        dt_mem_free(a->dev, a->cat, b->mem, b->cap);
        free(b);
        b = n;
    }
    a->head = NULL;
}

void dt_arena_free(dt_arena *a) {
    if (!a) return;
    free_blocks(a);
    free(a);
}

void *dt_arena_alloc_raw(dt_arena *a, size_t bytes) {
    size_t sz = (bytes + 63) & ~(size_t)63;
    if (sz == 0) sz = 64;
    block *b = a->head;
    if (!b || b->used + sz > b->cap) {
        size_t cap = sz;
        size_t grow = b ? b->cap : (size_t)1 << 20;
        if (cap < grow) cap = grow;
        block *nb = block_new(a, cap);
        if (!nb) return NULL;
        nb->next = a->head;
        a->head = nb;
        b = nb;
    }
    void *p = b->mem + b->used;
    b->used += sz;
    a->used_total += sz;
    if (a->used_total > a->high_water) a->high_water = a->used_total;
    return p;
}

void *dt_arena_alloc(dt_arena *a, size_t bytes) {
    void *p = dt_arena_alloc_raw(a, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

void dt_arena_reset(dt_arena *a) {
    if (a->head && a->head->next) {
        /* several blocks: replace them with one block that fits the whole step */
        size_t hw = a->high_water;
        free_blocks(a);
        a->head = block_new(a, hw);
        /* on failure the arena is empty and grows again on demand */
    } else if (a->head) {
        a->head->used = 0;
    }
    a->used_total = 0;
}

dt_arena_mark dt_arena_get_mark(const dt_arena *a) {
    return (dt_arena_mark){a->head, a->head ? a->head->used : 0, a->used_total};
}

void dt_arena_rewind(dt_arena *a, dt_arena_mark m) {
    while (a->head && a->head != (block *)m.block) { /* blocks added since the mark */
        block *b = a->head;
        a->head = b->next;
        dt_mem_free(a->dev, a->cat, b->mem, b->cap);
        free(b);
    }
    if (a->head) a->head->used = m.used;
    a->used_total = m.used_total;
}

bool dt_arena_allocated_since(const dt_arena *a, dt_arena_mark m, const void *ptr) {
    const char *p = ptr;
    for (const block *b = a->head; b; b = b->next) {
        size_t from = b == (const block *)m.block ? m.used : 0;
        if (p >= b->mem + from && p < b->mem + b->used) return true;
        if (b == (const block *)m.block) break;
    }
    return false;
}

bool dt_arena_contains(const dt_arena *a, const void *ptr) {
    const char *p = ptr;
    for (const block *b = a->head; b; b = b->next)
        if (p >= b->mem && p < b->mem + b->used) return true;
    return false;
}

size_t dt_arena_used(const dt_arena *a) {
    return a->used_total;
}
size_t dt_arena_high_water(const dt_arena *a) {
    return a->high_water;
}
size_t dt_arena_capacity(const dt_arena *a) {
    size_t c = 0;
    for (block *b = a->head; b; b = b->next) c += b->cap;
    return c;
}
