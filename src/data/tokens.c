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
    const uint8_t *map; /* the first token of the part */
    size_t map_bytes;
    void *mapped, *heap; /* the whole file's mapping, or the heap buffer owned */
    dt_token_type type;
    int64_t ntok, block, stride, n;
} tokens_state;

static const char *type_name(dt_token_type t) {
    return t == DT_TOKENS_U16   ? "u16"
           : t == DT_TOKENS_I32 ? "i32"
           : t == DT_TOKENS_U8  ? "u8"
                                : "u32";
}

static size_t type_size(dt_token_type t) {
    return t == DT_TOKENS_U16 ? 2 : t == DT_TOKENS_U8 ? 1 : 4;
}

/* Token at position p, widened; little-endian whatever the host. */
static inline int64_t token_at(const tokens_state *s, int64_t p) {
    if (s->type == DT_TOKENS_U8) return s->map[p];
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
        if (s->mapped) munmap(s->mapped, s->map_bytes);
        free(s->heap);
        free(s);
    }
    free(self);
}

/* Scan every token once: none negative, none >= vocab_size (when > 0). */
static dt_status check_vocab(const tokens_state *s, int64_t vocab_size, const char *what) {
    for (int64_t p = 0; p < s->ntok; p++) {
        int64_t t = token_at(s, p);
        if (t < 0)
            return dt_error(DT_ERR_FORMAT, "%s: token %lld at position %lld is negative", what,
                            (long long)t, (long long)p);
        if (vocab_size > 0 && t >= vocab_size)
            return dt_error(DT_ERR_FORMAT,
                            "%s: token %lld at position %lld is >= the vocab size "
                            "%lld; hint: check vocab_size and the token type (%s)",
                            what, (long long)t, (long long)p, (long long)vocab_size,
                            type_name(s->type));
    }
    return DT_OK;
}

/* The file's bytes, mapped read-only, in *map / *bytes. */
static dt_status map_file(const char *path, void **map, size_t *bytes) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return dt_error(DT_ERR_IO, "cannot open %s: %s; hint: check the path", path,
                        strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        dt_status e = dt_error(DT_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
        close(fd);
        return e;
    }
    *bytes = (size_t)st.st_size;
    *map = *bytes ? mmap(NULL, *bytes, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (*map == MAP_FAILED) {
        *map = NULL;
        return dt_error(DT_ERR_IO, "cannot map %s (%zu bytes): %s", path, *bytes, strerror(errno));
    }
    return DT_OK;
}

dt_dataset *dt__dataset_tokens_part(const char *path, void *buf, size_t bytes, dt_token_type type,
                                    int64_t block_size, int64_t stride, int64_t vocab_size,
                                    double begin, double end, const char *what) {
    dt_status st = DT_OK;
    void *map = NULL;
    if ((unsigned)type > DT_TOKENS_U8)
        st = dt_error(DT_ERR_INVALID, "dt_dataset_tokens: unknown token type %d", (int)type);
    else if (block_size < 1)
        st = dt_error(DT_ERR_INVALID, "dt_dataset_tokens: block size %lld must be >= 1",
                      (long long)block_size);
    else if (!(begin >= 0 && begin <= end && end <= 1))
        st = dt_error(DT_ERR_INVALID, "%s: the part [%g, %g) is not within [0, 1]", what, begin,
                      end);
    else if (path)
        st = map_file(path, &map, &bytes);
    size_t ts = type_size(type);
    if (st == DT_OK && bytes % ts)
        st = dt_error(DT_ERR_FORMAT,
                      "%s: %zu bytes is not a whole number of %s tokens; hint: check "
                      "the token type",
                      what, bytes, type_name(type));
    int64_t all = (int64_t)(bytes / ts), first = (int64_t)((double)all * begin),
            ntok = (int64_t)((double)all * end) - first;
    if (st == DT_OK && ntok < block_size + 1)
        st = dt_error(DT_ERR_FORMAT,
                      "%s: %lld tokens, but a block size of %lld needs at least %lld "
                      "(T + 1: inputs plus the shifted targets); hint: use a larger text or a "
                      "smaller block size",
                      what, (long long)ntok, (long long)block_size, (long long)block_size + 1);
    tokens_state *s = st == DT_OK ? calloc(1, sizeof *s) : NULL;
    dt_dataset *ds = s ? calloc(1, sizeof *ds) : NULL;
    if (st == DT_OK && !ds) st = dt_error(DT_ERR_OOM, "dt_dataset_tokens: dataset header");
    if (st != DT_OK) {
        if (map) munmap(map, bytes);
        free(buf);
        free(s);
        return NULL;
    }
    if (stride <= 0) stride = block_size;
    *s = (tokens_state){.map = (const uint8_t *)(map ? map : buf) + (size_t)first * ts,
                        .map_bytes = bytes,
                        .mapped = map,
                        .heap = buf,
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
    if ((vocab_size > 0 || type == DT_TOKENS_I32) && check_vocab(s, vocab_size, what) != DT_OK) {
        tokens_free(ds);
        return NULL;
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

dt_dataset *dt_dataset_tokens(const char *path, dt_token_type type, int64_t block_size,
                              int64_t stride, int64_t vocab_size) {
    if (!path) {
        dt_error(DT_ERR_INVALID, "dt_dataset_tokens: NULL path");
        return NULL;
    }
    return dt__dataset_tokens_part(path, NULL, 0, type, block_size, stride, vocab_size, 0, 1, path);
}
