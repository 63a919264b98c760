/*
 * safetensors.c — reading and writing the safetensors format.
 *
 * File layout: an 8-byte little-endian header length N, N bytes of UTF-8 JSON, then the data
 * buffer. The JSON maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]}
 * (offsets relative to the data buffer) and may hold "__metadata__": {str: str}.
 *
 * Reading: dt_safetensors_open reads the header, validates every entry against the file size
 * (no overlaps, no gaps, every byte of the data buffer covered, as the reference
 * implementation requires) and keeps the file open; tensor bytes are read with pread when
 * asked for, so a multi-GB checkpoint is never held twice in memory.
 *
 * Writing: dt_safetensors_write lays tensors out in the given order (header padded with
 * spaces to a multiple of 8 so the data buffer is aligned) and streams them through base's
 * durable-file writer (dtrain/durable.h): "<path>.tmp.<pid>" is written, fsynced, renamed over
 * `path` and the directory fsynced; on failure the temporary file is removed and whatever was
 * at `path` stays as it was.
 *
 * The machine is little-endian (x86-64), the format's byte order: data is copied as is.
 */
#include "tensor_impl.h"
#include "base/durable.h"
#include "base/base_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors.c assumes little-endian");

#define ST_MAX_HEADER (100u << 20) /* 100 MB, as the reference implementation */
#define ST_META_KEY "__metadata__"

typedef struct st_entry {
    char *name;
    dt_dtype dtype;
    int ndim;
    int64_t shape[DT_MAX_DIMS];
    uint64_t begin, end; /* byte range inside the data buffer */
} st_entry;

struct dt_safetensors {
    char *path;
    int fd;
    uint64_t data_start; /* 8 + N */
    uint64_t data_size;
    st_entry *e;
    int n;
    char **meta_key, **meta_val;
    int n_meta;
};

/* ---- dtype names ---- */

static const char *st_dtype_names[DT_DTYPE_COUNT] = {"F32", "BF16", "F16", "I32", "I64"};

static dt_dtype st_dtype_parse(const char *s) {
    for (int i = 0; i < DT_DTYPE_COUNT; i++)
        if (!strcmp(s, st_dtype_names[i])) return (dt_dtype)i;
    return DT_DTYPE_COUNT;
}

static bool is_float(dt_dtype t) {
    return t == DT_DTYPE_F32 || t == DT_DTYPE_BF16 || t == DT_DTYPE_F16;
}

/* ---- low-level I/O ---- */

/* Read exactly n bytes at off. DT_ERR_IO on a read error or a short file. */
static dt_status pread_full(int fd, const char *path, void *buf, size_t n, uint64_t off) {
    char *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return dt_error(DT_ERR_IO, "%s: read failed: %s", path, strerror(errno));
        if (r == 0)
            return dt_error(DT_ERR_IO,
                            "%s: unexpected end of file at byte %llu; hint: was the "
                            "file truncated while open?",
                            path, (unsigned long long)off);
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return DT_OK;
}

/* ---- open ---- */

void dt_safetensors_close(dt_safetensors *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    for (int i = 0; i < f->n; i++) free(f->e[i].name);
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta_key[i]);
        free(f->meta_val[i]);
    }
    free(f->e);
    free(f->meta_key);
    free(f->meta_val);
    free(f->path);
    free(f);
}

/* Parse one non-negative JSON integer. */
static bool get_u64(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

/* Parse entry `name` -> `v` into e (name not yet set). */
static dt_status parse_entry(const char *path, const char *name, json_t *v, st_entry *e) {
    if (!json_is_object(v))
        return dt_error(DT_ERR_FORMAT, "%s: header entry '%s' is not a JSON object", path, name);
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape");
    json_t *of = json_object_get(v, "data_offsets");
    if (!json_is_string(dt) || !json_is_array(sh) || !json_is_array(of))
        return dt_error(DT_ERR_FORMAT,
                        "%s: tensor '%s' needs \"dtype\" (string), \"shape\" (array) and "
                        "\"data_offsets\" (array)",
                        path, name);
    e->dtype = st_dtype_parse(json_string_value(dt));
    if (e->dtype == DT_DTYPE_COUNT)
        return dt_error(DT_ERR_FORMAT,
                        "%s: tensor '%s' has unsupported dtype \"%s\"; dtrain reads F32, BF16, "
                        "F16, I32 and I64",
                        path, name, json_string_value(dt));
    size_t nd = json_array_size(sh);
    if (nd > DT_MAX_DIMS)
        return dt_error(DT_ERR_FORMAT, "%s: tensor '%s' has %zu dims, dtrain supports up to %d",
                        path, name, nd, DT_MAX_DIMS);
    e->ndim = (int)nd;
    /* bytes: the tensor's size; span: the same over the non-zero dims only, which must fit in
     * int64 too (strides and element counts multiply them, whatever a 0 dim makes the size) */
    uint64_t bytes = dt_dtype_size(e->dtype), span = bytes;
    bool ovf = false, span_ovf = false;
    size_t zero_dim = 0;
    for (size_t i = 0; i < nd; i++) {
        uint64_t d;
        if (!get_u64(json_array_get(sh, i), &d) || d > (uint64_t)INT64_MAX)
            return dt_error(DT_ERR_FORMAT,
                            "%s: tensor '%s': shape[%zu] is not a non-negative integer", path, name,
                            i);
        e->shape[i] = (int64_t)d;
        ovf |= __builtin_mul_overflow(bytes, d, &bytes);
        if (d == 0)
            zero_dim = i;
        else
            span_ovf |= __builtin_mul_overflow(span, d, &span) || span > (uint64_t)INT64_MAX;
    }
    if (json_array_size(of) != 2 || !get_u64(json_array_get(of, 0), &e->begin) ||
        !get_u64(json_array_get(of, 1), &e->end))
        return dt_error(DT_ERR_FORMAT,
                        "%s: tensor '%s': data_offsets must be two non-negative integers", path,
                        name);
    if (e->end < e->begin)
        return dt_error(DT_ERR_FORMAT,
                        "%s: tensor '%s': data_offsets [%llu, %llu) end before "
                        "they begin",
                        path, name, (unsigned long long)e->begin, (unsigned long long)e->end);
    if (ovf || bytes != e->end - e->begin)
        return dt_error(DT_ERR_FORMAT,
                        "%s: tensor '%s': shape and dtype %s make %s%llu bytes but data_offsets "
                        "[%llu, %llu) hold %llu",
                        path, name, st_dtype_names[e->dtype], ovf ? "more than " : "",
                        (unsigned long long)(ovf ? UINT64_MAX : bytes),
                        (unsigned long long)e->begin, (unsigned long long)e->end,
                        (unsigned long long)(e->end - e->begin));
    if (span_ovf) {
        char shape[160];
        size_t k = 0;
        for (size_t i = 0; i < nd && k < sizeof shape; i++)
            k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%lld", i ? ", " : "",
                                  (long long)e->shape[i]);
        return dt_error(DT_ERR_FORMAT,
                        "%s: tensor '%s': the non-zero dims of shape [%s] multiply past %lld "
                        "bytes (as %s); shape[%zu] is 0, but strides are products of the other "
                        "dims and each must fit in 64 bits; hint: the file is damaged",
                        path, name, shape, (long long)INT64_MAX, st_dtype_names[e->dtype],
                        zero_dim);
    }
    return DT_OK;
}

static dt_status parse_metadata(dt_safetensors *f, json_t *m) {
    if (!json_is_object(m))
        return dt_error(DT_ERR_FORMAT, "%s: \"%s\" is not an object", f->path, ST_META_KEY);
    size_t cnt = json_object_size(m);
    f->meta_key = calloc(cnt ? cnt : 1, sizeof(char *));
    f->meta_val = calloc(cnt ? cnt : 1, sizeof(char *));
    if (!f->meta_key || !f->meta_val) return dt_error(DT_ERR_OOM, "%s: metadata", f->path);
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v) {
        if (!json_is_string(v))
            return dt_error(DT_ERR_FORMAT, "%s: metadata value of '%s' is not a string", f->path,
                            k);
        f->meta_key[f->n_meta] = strdup(k);
        f->meta_val[f->n_meta] = strdup(json_string_value(v));
        f->n_meta++;
        if (!f->meta_key[f->n_meta - 1] || !f->meta_val[f->n_meta - 1])
            return dt_error(DT_ERR_OOM, "%s: metadata", f->path);
    }
    return DT_OK;
}

static int cmp_range(const void *a, const void *b) {
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* Every byte of the data buffer belongs to exactly one tensor. */
static dt_status check_layout(dt_safetensors *f) {
    for (int i = 0; i < f->n; i++)
        if (f->e[i].end > f->data_size)
            return dt_error(DT_ERR_FORMAT,
                            "%s: tensor '%s': data_offsets [%llu, %llu) go past the end of the "
                            "data buffer (%llu bytes); hint: the file may be truncated",
                            f->path, f->e[i].name, (unsigned long long)f->e[i].begin,
                            (unsigned long long)f->e[i].end, (unsigned long long)f->data_size);
    st_entry **s = malloc(((size_t)(unsigned)f->n + 1) * sizeof *s);
    if (!s) return dt_error(DT_ERR_OOM, "%s: layout check", f->path);
    for (int i = 0; i < f->n; i++) s[i] = &f->e[i];
    qsort(s, (size_t)f->n, sizeof *s, cmp_range);
    uint64_t pos = 0;
    const st_entry *prev = NULL;
    dt_status st = DT_OK;
    for (int i = 0; i < f->n && st == DT_OK; i++) {
        if (s[i]->begin < pos)
            st = dt_error(DT_ERR_FORMAT,
                          "%s: tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) "
                          "overlap",
                          f->path, prev->name, (unsigned long long)prev->begin,
                          (unsigned long long)prev->end, s[i]->name,
                          (unsigned long long)s[i]->begin, (unsigned long long)s[i]->end);
        else if (s[i]->begin > pos)
            st = dt_error(DT_ERR_FORMAT,
                          "%s: bytes [%llu, %llu) of the data buffer belong to no tensor", f->path,
                          (unsigned long long)pos, (unsigned long long)s[i]->begin);
        if (s[i]->end > pos) {
            pos = s[i]->end;
            prev = s[i];
        }
    }
    free(s);
    if (st == DT_OK && pos != f->data_size)
        st = dt_error(DT_ERR_FORMAT,
                      "%s: bytes [%llu, %llu) at the end of the data buffer belong to no tensor",
                      f->path, (unsigned long long)pos, (unsigned long long)f->data_size);
    return st;
}

static dt_status parse_header(dt_safetensors *f, const char *hdr, size_t len) {
    json_error_t jerr;
    json_t *root = json_loadb(hdr, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return dt_error(DT_ERR_FORMAT, "%s: header is not valid JSON: %s (line %d, column %d)",
                        f->path, jerr.text, jerr.line, jerr.column);
    dt_status st = DT_OK;
    if (!json_is_object(root)) {
        st = dt_error(DT_ERR_FORMAT, "%s: header is not a JSON object", f->path);
        goto done;
    }
    size_t cnt = json_object_size(root);
    f->e = calloc(cnt ? cnt : 1, sizeof *f->e);
    if (!f->e) {
        st = dt_error(DT_ERR_OOM, "%s: header of %zu entries", f->path, cnt);
        goto done;
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (!strcmp(k, ST_META_KEY)) {
            st = parse_metadata(f, v);
        } else if (!*k) {
            st = dt_error(DT_ERR_FORMAT,
                          "%s: a tensor has the empty name \"\"; a tensor name is 1 or more "
                          "bytes (dtrain never writes an empty one); hint: the file is damaged "
                          "or was written by another tool: rename the tensor",
                          f->path);
        } else {
            st_entry *e = &f->e[f->n];
            st = parse_entry(f->path, k, v, e);
            if (st == DT_OK) {
                e->name = strdup(k);
                if (!e->name)
                    st = dt_error(DT_ERR_OOM, "%s: tensor names", f->path);
                else
                    f->n++;
            }
        }
        if (st != DT_OK) goto done;
    }
    st = check_layout(f);
done:
    json_decref(root);
    return st;
}

dt_safetensors *dt_safetensors_open(const char *path) {
    if (!path) {
        dt_error(DT_ERR_INVALID, "safetensors: path is NULL");
        return NULL;
    }
    dt_safetensors *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        dt_error(DT_ERR_OOM, "safetensors: handle for %s", path);
        return NULL;
    }
    char *hdr = NULL;
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) {
        dt_error(DT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    struct stat sb;
    if (fstat(f->fd, &sb) != 0) {
        dt_error(DT_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        dt_error(DT_ERR_IO, "%s: not a regular file", path);
        goto fail;
    }
    uint64_t fsize = (uint64_t)sb.st_size;
    if (fsize < 8) {
        dt_error(DT_ERR_FORMAT, "%s: truncated: %llu bytes, a safetensors file has at least 8",
                 path, (unsigned long long)fsize);
        goto fail;
    }
    unsigned char lenb[8];
    if (pread_full(f->fd, path, lenb, 8, 0) != DT_OK) goto fail;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | lenb[i];
    if (hlen > ST_MAX_HEADER) {
        dt_error(DT_ERR_FORMAT,
                 "%s: header length %llu is over the 100 MB limit; hint: this is "
                 "probably not a safetensors file",
                 path, (unsigned long long)hlen);
        goto fail;
    }
    if (hlen > fsize - 8) {
        dt_error(DT_ERR_FORMAT,
                 "%s: truncated: header says %llu bytes, file has %llu after the "
                 "8-byte length",
                 path, (unsigned long long)hlen, (unsigned long long)(fsize - 8));
        goto fail;
    }
    hdr = malloc(hlen ? hlen : 1);
    if (!hdr) {
        dt_error(DT_ERR_OOM, "%s: header of %llu bytes", path, (unsigned long long)hlen);
        goto fail;
    }
    if (pread_full(f->fd, path, hdr, hlen, 8) != DT_OK) goto fail;
    f->data_start = 8 + hlen;
    f->data_size = fsize - f->data_start;
    if (parse_header(f, hdr, hlen) != DT_OK) goto fail;
    free(hdr);
    return f;
fail:
    free(hdr);
    dt_safetensors_close(f);
    return NULL;
}

/* ---- accessors ---- */

static bool valid_index(const dt_safetensors *f, int i) {
    return f && i >= 0 && i < f->n;
}

const char *dt_safetensors_path(const dt_safetensors *f) {
    return f ? f->path : NULL;
}
int dt_safetensors_count(const dt_safetensors *f) {
    return f ? f->n : 0;
}
const char *dt_safetensors_name(const dt_safetensors *f, int i) {
    return valid_index(f, i) ? f->e[i].name : NULL;
}
dt_dtype dt_safetensors_dtype(const dt_safetensors *f, int i) {
    return valid_index(f, i) ? f->e[i].dtype : DT_DTYPE_COUNT;
}
int dt_safetensors_ndim(const dt_safetensors *f, int i) {
    return valid_index(f, i) ? f->e[i].ndim : -1;
}
const int64_t *dt_safetensors_shape(const dt_safetensors *f, int i) {
    return valid_index(f, i) ? f->e[i].shape : NULL;
}

int dt_safetensors_find(const dt_safetensors *f, const char *name) {
    for (int i = 0; f && name && i < f->n; i++)
        if (!strcmp(f->e[i].name, name)) return i;
    return -1;
}

const char *dt_safetensors_metadata(const dt_safetensors *f, const char *key) {
    for (int i = 0; f && key && i < f->n_meta; i++)
        if (!strcmp(f->meta_key[i], key)) return f->meta_val[i];
    return NULL;
}
int dt_safetensors_metadata_count(const dt_safetensors *f) {
    return f ? f->n_meta : 0;
}
const char *dt_safetensors_metadata_key(const dt_safetensors *f, int i) {
    return f && i >= 0 && i < f->n_meta ? f->meta_key[i] : NULL;
}

/* Index of `name`, or -1 with DT_ERR_INVALID naming a few tensors that do exist. */
static int lookup(const dt_safetensors *f, const char *name) {
    int i = dt_safetensors_find(f, name);
    if (i >= 0) return i;
    char some[160] = "";
    size_t k = 0;
    for (int j = 0; j < f->n && j < 4 && k < sizeof some; j++)
        k += (size_t)snprintf(some + k, sizeof some - k, "%s'%s'", j ? ", " : "", f->e[j].name);
    dt_error(DT_ERR_INVALID, "%s: no tensor named '%s' (the file has %d: %s%s)", f->path,
             name ? name : "(null)", f->n, some, f->n > 4 ? ", ..." : "");
    return -1;
}

dt_tensor *dt_safetensors_get(dt_safetensors *f, dt_ctx *ctx, const char *name) {
    if (!f || !ctx) {
        dt_error(DT_ERR_INVALID, "safetensors_get: NULL file or context");
        return NULL;
    }
    int i = lookup(f, name);
    if (i < 0) return NULL;
    const st_entry *e = &f->e[i];
    dt_tensor *t = dt__empty(ctx, e->dtype, e->ndim, e->shape);
    if (!t) return NULL;
    if (pread_full(f->fd, f->path, t->data, e->end - e->begin, f->data_start + e->begin) != DT_OK)
        return NULL;
    return t;
}

dt_status dt_safetensors_read_into(dt_safetensors *f, const char *name, dt_tensor *dst) {
    if (!f || !dst) return dt_error(DT_ERR_INVALID, "safetensors_read_into: NULL file or tensor");
    int i = lookup(f, name);
    if (i < 0) return dt_last_status();
    const st_entry *e = &f->e[i];
    /* a stored tensor shaped like the file entry, to describe the bytes read */
    dt_tensor src;
    memset(&src, 0, sizeof src);
    src.dtype = e->dtype;
    src.ndim = e->ndim;
    memcpy(src.shape, e->shape, sizeof e->shape);
    dt__set_contiguous_strides(&src);
    bool same_shape = dst->ndim == e->ndim;
    for (int d = 0; same_shape && d < e->ndim; d++) same_shape = dst->shape[d] == e->shape[d];
    if (!same_shape) {
        char a[96], b[96];
        return dt_error(DT_ERR_INVALID, "%s: tensor '%s' is %s, the destination is %s", f->path,
                        name, dt_shape_str(&src, a, sizeof a), dt_shape_str(dst, b, sizeof b));
    }
    if (dst->dtype != e->dtype && !(is_float(dst->dtype) && is_float(e->dtype)))
        return dt_error(DT_ERR_INVALID,
                        "%s: tensor '%s' is %s and cannot be converted to %s (only f32, bf16 and "
                        "f16 convert into each other)",
                        f->path, name, dt_dtype_name(e->dtype), dt_dtype_name(dst->dtype));
    size_t bytes = e->end - e->begin;
    uint64_t off = f->data_start + e->begin;
    if (dst->dtype == e->dtype && dt_is_contiguous(dst))
        return pread_full(f->fd, f->path, dst->data, bytes, off);
    dt_device *dev = dst->ctx ? dst->ctx->dev : NULL;
    void *buf =
        dev ? dt_mem_alloc(dev, DT_MEM_OTHER, bytes ? bytes : 1) : malloc(bytes ? bytes : 1);
    if (!buf) return dt_error(DT_ERR_OOM, "%s: staging buffer for '%s'", f->path, name);
    src.data = buf;
    dt_status st = pread_full(f->fd, f->path, buf, bytes, off);
    if (st == DT_OK) st = dt_copy(dst, &src);
    if (dev)
        dt_mem_free(dev, DT_MEM_OTHER, buf, bytes ? bytes : 1);
    else
        free(buf);
    return st;
}

/* ---- write ---- */

/* Write t's elements in row-major logical order. */
static dt_status write_tensor(dt_file_out *f, const dt_tensor *t) {
    size_t es = dt_dtype_size(t->dtype);
    int64_t n = dt_numel(t);
    if (n == 0) return DT_OK;
    if (dt_is_contiguous(t)) return dt_file_out_write(f, t->data, (size_t)n * es);
    /* gather through a small buffer, walking a multi-index */
    char buf[1 << 16];
    size_t used = 0;
    int64_t idx[DT_MAX_DIMS] = {0};
    int64_t off = 0; /* element offset of idx */
    for (int64_t i = 0; i < n; i++) {
        memcpy(buf + used, (const char *)t->data + off * (int64_t)es, es);
        used += es;
        if (used + es > sizeof buf) {
            if (dt_file_out_write(f, buf, used) != DT_OK) return DT_ERR_IO;
            used = 0;
        }
        for (int d = t->ndim - 1; d >= 0; d--) {
            off += t->stride[d];
            if (++idx[d] < t->shape[d]) break;
            off -= t->stride[d] * t->shape[d];
            idx[d] = 0;
        }
    }
    return used ? dt_file_out_write(f, buf, used) : DT_OK;
}

/* The JSON header (padded with spaces to a multiple of 8) in *out (malloc'd). */
static dt_status build_header(const char *path, int n, const char *const *names,
                              dt_tensor *const *ts, int n_meta, const char *const *kv, char **out,
                              size_t *out_len) {
    json_t *root = json_object();
    if (!root) return dt_error(DT_ERR_OOM, "%s: header", path);
    dt_status st = DT_OK;
    if (n_meta > 0) {
        json_t *m = json_object();
        if (!m || json_object_set_new(root, ST_META_KEY, m) != 0) {
            st = dt_error(DT_ERR_OOM, "%s: header", path);
            goto done;
        }
        for (int i = 0; i < n_meta; i++) {
            const char *k = kv[2 * i], *v = kv[2 * i + 1];
            if (!k || !v) {
                st = dt_error(DT_ERR_INVALID, "%s: metadata pair %d has a NULL key or value", path,
                              i);
                goto done;
            }
            json_t *js = json_string(v);
            if (!js || json_object_set_new(m, k, js) != 0) {
                st = dt_error(DT_ERR_INVALID, "%s: metadata '%s' is not valid UTF-8", path, k);
                goto done;
            }
        }
    }
    uint64_t pos = 0;
    for (int i = 0; i < n; i++) {
        const char *nm = names[i];
        const dt_tensor *t = ts[i];
        if (!nm || !*nm || !strcmp(nm, ST_META_KEY)) {
            st = dt_error(DT_ERR_INVALID, "%s: tensor %d has an empty or reserved name", path, i);
            goto done;
        }
        if (!t || t->dtype >= DT_DTYPE_COUNT || (dt_numel(t) > 0 && !t->data)) {
            st = dt_error(DT_ERR_INVALID, "%s: tensor '%s' is NULL or invalid", path, nm);
            goto done;
        }
        if (json_object_get(root, nm)) {
            st = dt_error(DT_ERR_INVALID, "%s: tensor name '%s' appears twice", path, nm);
            goto done;
        }
        uint64_t bytes = dt_nbytes(t);
        json_t *shape = json_array(), *e = json_object();
        json_t *offs = json_pack("[II]", (json_int_t)pos, (json_int_t)(pos + bytes));
        if (shape && e && offs)
            for (int d = 0; d < t->ndim; d++)
                json_array_append_new(shape, json_integer(t->shape[d]));
        if (!shape || !e || !offs ||
            json_object_set_new(e, "dtype", json_string(st_dtype_names[t->dtype])) ||
            json_object_set_new(e, "shape", shape) ||
            json_object_set_new(e, "data_offsets", offs) || json_object_set_new(root, nm, e)) {
            st = dt_error(DT_ERR_INVALID, "%s: cannot encode tensor '%s' (name not UTF-8?)", path,
                          nm);
            goto done;
        }
        pos += bytes;
    }
    char *s = json_dumps(root, JSON_COMPACT);
    if (!s) {
        st = dt_error(DT_ERR_OOM, "%s: header", path);
        goto done;
    }
    size_t len = strlen(s), padded = (len + 7) & ~(size_t)7;
    char *h = realloc(s, padded + 1);
    if (!h) {
        free(s);
        st = dt_error(DT_ERR_OOM, "%s: header", path);
        goto done;
    }
    memset(h + len, ' ', padded - len);
    h[padded] = 0;
    *out = h;
    *out_len = padded;
done:
    json_decref(root);
    return st;
}

dt_status dt_safetensors_write(const char *path, int n, const char *const *names,
                               dt_tensor *const *tensors, int n_meta, const char *const *meta_kv) {
    if (!path || n < 0 || n_meta < 0 || (n > 0 && (!names || !tensors)) || (n_meta > 0 && !meta_kv))
        return dt_error(DT_ERR_INVALID,
                        "safetensors_write: bad arguments (path %s, n %d, "
                        "n_meta %d)",
                        path ? path : "NULL", n, n_meta);
    char *hdr = NULL;
    size_t hlen = 0;
    dt_status st = build_header(path, n, names, tensors, n_meta, meta_kv, &hdr, &hlen);
    if (st != DT_OK) return st;
    dt_file_out *f = dt_file_out_open(path);
    if (!f) {
        free(hdr);
        return dt_last_status();
    }
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    st = dt_file_out_write(f, lenb, 8);
    if (st == DT_OK) st = dt_file_out_write(f, hdr, hlen);
    for (int i = 0; i < n && st == DT_OK; i++) st = write_tensor(f, tensors[i]);
    if (st == DT_OK)
        st = dt_file_out_commit(f);
    else
        dt_file_out_abort(f);
    free(hdr);
    return st;
}
