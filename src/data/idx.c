/* idx.c — IDX reader (big-endian header: 0, 0, type, ndim; ndim u32 dims; data), through
 * zlib's gzread so gzip'd and raw files read the same way. */
#include "data_impl.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static dt_status read_full(gzFile f, void *buf, size_t n, const char *path, const char *what) {
    size_t got = 0;
    while (got < n) {
        unsigned chunk = n - got > (1u << 30) ? (1u << 30) : (unsigned)(n - got);
        int r = gzread(f, (char *)buf + got, chunk);
        if (r < 0) {
            int e;
            const char *m = gzerror(f, &e);
            return dt_error(DT_ERR_IO, "%s: read error in %s: %s", path, what, m);
        }
        if (r == 0)
            return dt_error(DT_ERR_FORMAT, "%s: truncated: %s needs %zu bytes, file ends after %zu",
                            path, what, n, got);
        got += (size_t)r;
    }
    return DT_OK;
}


void dt_idx_free(dt_idx *x) {
    if (!x) return;
    free(x->data);
    memset(x, 0, sizeof *x);
}

dt_status dt_idx_read(const char *path, dt_idx *out) {
    memset(out, 0, sizeof *out);
    gzFile f = gzopen(path, "rb");
    if (!f) return dt_error(DT_ERR_IO, "cannot open %s; hint: check the path (Fashion-MNIST comes "
                                       "with Debian's dataset-fashion-mnist package)", path);
    unsigned char hdr[4];
    dt_status st = read_full(f, hdr, 4, path, "the header");
    if (st == DT_OK && (hdr[0] || hdr[1] || hdr[3] < 1 || hdr[3] > 4))
        st = dt_error(DT_ERR_FORMAT, "%s: not an IDX file (magic %02x%02x%02x%02x)", path, hdr[0],
                      hdr[1], hdr[2], hdr[3]);
    if (st == DT_OK && hdr[2] != 0x08)
        st = dt_error(DT_ERR_FORMAT, "%s: IDX element type 0x%02x is not supported (only u8)", path,
                      hdr[2]);
    int64_t total = 1;
    dt_idx x = {0};
    if (st == DT_OK) {
        x.ndim = hdr[3];
        for (int i = 0; i < x.ndim && st == DT_OK; i++) {
            unsigned char d[4];
            st = read_full(f, d, 4, path, "the dims");
            x.dims[i] = ((int64_t)d[0] << 24) | (d[1] << 16) | (d[2] << 8) | d[3];
            total *= x.dims[i];
        }
    }
    if (st == DT_OK && (total <= 0 || total > ((int64_t)1 << 34)))
        st = dt_error(DT_ERR_FORMAT, "%s: implausible IDX size %lld", path, (long long)total);
    if (st == DT_OK) {
        x.data = dt__sample_store_alloc((size_t)total);
        if (!x.data) st = dt_error(DT_ERR_OOM, "%s: %lld bytes", path, (long long)total);
    }
    if (st == DT_OK) st = read_full(f, x.data, (size_t)total, path, "the data");
    if (st == DT_OK) {
        char extra;
        if (gzread(f, &extra, 1) > 0)
            st = dt_error(DT_ERR_FORMAT, "%s: trailing bytes after %lld data bytes", path,
                          (long long)total);
    }
    gzclose(f);
    if (st != DT_OK) {
        free(x.data);
        return st;
    }
    *out = x;
    return DT_OK;
}
