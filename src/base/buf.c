/* buf.c — a growing byte buffer (base_impl.h): pages, archives, encoded text. */
#include "base/base_impl.h"

#include <stdlib.h>
#include <string.h>

void dt__buf_free(dt__buf *b) {
    free(b->p);
    *b = (dt__buf){0};
}

void dt__buf_put(dt__buf *b, const void *d, size_t n) {
    if (b->oom || !n) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
    b->p[b->len] = 0;
}
