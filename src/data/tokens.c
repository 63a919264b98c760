/* tokens.c — a language-model dataset over a flat little-endian token file (nanoGPT's
 * train.bin): memory-mapped read-only; sample i is the window x = tokens[i*S, i*S + T) and its
 * next-token targets y = tokens[i*S + 1, i*S + T + 1), both widened to i64. */
#include "data_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct tokens_state {
    const uint8_t *map;
    size_t map_bytes;
    dt_token_type type;
    int64_t ntok, block, stride, n;
} tokens_state;

static const char *type_name(dt_token_type t) {
    return t == DT_TOKENS_U16 ? "u16" : t == DT_TOKENS_I32 ? "i32" : "u32";
}

static size_t type_size(dt_token_type t) {
    return t == DT_TOKENS_U16 ? 2 : 4;
}

/* Token at position p, widened; little-endian whatever the host. */
static inline int64_t token_at(const tokens_state *s, int64_t p) {
    if (s->type == DT_TOKENS_U16) {
        const uint8_t *b = s->map + (size_t)p * 2;
        return (int64_t)(b[0] | (b[1] << 8));
    }
    const uint8_t *b = s->map + (size_t)p * 4;
    uint32_t u =
        (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
    return s->type == DT_TOKENS_I32 ? (int64_t)(int32_t)u : (int64_t)u;
}

static int64_t tokens_len(const dt_dataset *self) {
    return ((const tokens_state *)self->state)->n;
}

static dt_status tokens_get(const dt_dataset *self, int64_t i, void *const *out) {
    const tokens_state *s = self->state;
    int64_t *x = out[0], *y = out[1]; // x, y are (T)
    int64_t base = i * s->stride;
    for (int64_t t = 0; t < s->block; t++) x[t] = token_at(s, base + t);
    /* y is x shifted by one: reuse x for all but its last token */
    if (s->block > 1) memcpy(y, x + 1, (size_t)(s->block - 1) * sizeof *y);
    y[s->block - 1] = token_at(s, base + s->block);
    return DT_OK;
}

/* (a page of the mapping not yet read in is not faulted by the hint) */
static void tokens_prefetch(const dt_dataset *self, int64_t i) {
    const tokens_state *s = self->state;
    size_t ts = type_size(s->type);
    dt__prefetch_bytes(s->map + (size_t)(i * s->stride) * ts, (size_t)(s->block + 1) * ts);
}

static void tokens_free(dt_dataset *self) {
    tokens_state *s = self->state;
    if (s) {
        if (s->map) munmap((void *)s->map, s->map_bytes);
        free(s);
    }
    free(self);
}

dt_dataset *dt_dataset_tokens(const char *path, dt_token_type type, int64_t block_size,
                              int64_t stride, int64_t vocab_size) {
    if (!path) {
        dt_error(DT_ERR_INVALID, "dt_dataset_tokens: NULL path");
        return NULL;
    }
    if ((unsigned)type > DT_TOKENS_U32) {
        dt_error(DT_ERR_INVALID, "dt_dataset_tokens: unknown token type %d", (int)type);
        return NULL;
    }
    if (block_size < 1) {
        dt_error(DT_ERR_INVALID, "dt_dataset_tokens: block size %lld must be >= 1",
                 (long long)block_size);
        return NULL;
    }
    if (stride <= 0) stride = block_size;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        dt_error(DT_ERR_IO, "cannot open %s: %s; hint: check the path", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        dt_error(DT_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    size_t ts = type_size(type), bytes = (size_t)st.st_size;
    if (bytes % ts) {
        dt_error(DT_ERR_FORMAT,
                 "%s: %zu bytes is not a whole number of %s tokens; hint: check "
                 "the token type",
                 path, bytes, type_name(type));
        close(fd);
        return NULL;
    }
    int64_t ntok = (int64_t)(bytes / ts);
    if (ntok < block_size + 1) {
        dt_error(DT_ERR_FORMAT,
                 "%s: %lld tokens, but a block size of %lld needs at least %lld "
                 "(T + 1: inputs plus the shifted targets)",
                 path, (long long)ntok, (long long)block_size, (long long)block_size + 1);
        close(fd);
        return NULL;
    }
    void *map = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        dt_error(DT_ERR_IO, "cannot map %s (%zu bytes): %s", path, bytes, strerror(errno));
        return NULL;
    }
    tokens_state *s = calloc(1, sizeof *s);
    dt_dataset *ds = calloc(1, sizeof *ds);
    if (!s || !ds) {
        munmap(map, bytes);
        free(s);
        free(ds);
        dt_error(DT_ERR_OOM, "dt_dataset_tokens: dataset header");
        return NULL;
    }
    *s = (tokens_state){.map = map,
                        .map_bytes = bytes,
                        .type = type,
                        .ntok = ntok,
                        .block = block_size,
                        .stride = stride,
                        .n = (ntok - block_size - 1) / stride + 1};
    ds->state = s;
    ds->free = tokens_free;
    ds->len = tokens_len;
    ds->get = tokens_get;
    ds->prefetch = tokens_prefetch;
    if (vocab_size > 0 || type == DT_TOKENS_I32) {
        for (int64_t p = 0; p < ntok; p++) {
            int64_t t = token_at(s, p);
            if (t < 0 || (vocab_size > 0 && t >= vocab_size)) {
                if (t < 0)
                    dt_error(DT_ERR_FORMAT, "%s: token %lld at position %lld is negative", path,
                             (long long)t, (long long)p);
                else
                    dt_error(DT_ERR_FORMAT,
                             "%s: token %lld at position %lld is >= the vocab size "
                             "%lld; hint: check vocab_size and the token type (%s)",
                             path, (long long)t, (long long)p, (long long)vocab_size,
                             type_name(type));
                tokens_free(ds);
                return NULL;
            }
        }
    }
    ds->nfields = 2;
    for (int f = 0; f < 2; f++) {
        strcpy(ds->fields[f].name, f ? "y" : "x");
        ds->fields[f].dtype = DT_DTYPE_I64;
        ds->fields[f].ndim = 1;
        ds->fields[f].shape[0] = block_size;
    }
    return ds;
}
