/*
 * det_pack.c — base64, an in-memory ustar writer and reader, and a gzip frame (det_pack.h).
 * Only what the second client's door needs: regular files and directories, names up to 255
 * bytes (ustar prefix + name), modes kept as mode & 0777.
 */
#define _GNU_SOURCE
#include "master/det_pack.h"

#include "base/base_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void dt__base64_put(dt__buf *b, const void *d, size_t n) {
    const unsigned char *s = d;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? s[i + 2] : 0);
        char q[4] = {B64[v >> 18 & 63], B64[v >> 12 & 63], i + 1 < n ? B64[v >> 6 & 63] : '=',
                     i + 2 < n ? B64[v & 63] : '='};
        dt__buf_put(b, q, 4);
    }
}

bool dt__base64_decode(const char *s, dt__buf *out) {
    unsigned acc = 0;
    int bits = 0, pad = 0;
    for (; *s; s++) {
        const char *c = *s ? strchr(B64, *s) : NULL;
        if (*s == '=') {
            pad++;
            continue;
        }
        if (*s == '\n' || *s == '\r' || *s == ' ') continue;
        if (!c || pad) return false;
        acc = acc << 6 | (unsigned)(c - B64);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            char ch = (char)(acc >> bits & 0xff);
            dt__buf_put(out, &ch, 1);
        }
    }
    return !out->oom && pad <= 2;
}

/* ---- ustar ---- */

/* v in octal, zero-padded to w - 1 digits and NUL-ended (the high digits dropped if wider). */
static void octal(char *f, size_t w, unsigned long long v) {
    f[w - 1] = 0;
    for (size_t i = w - 1; i-- > 0; v >>= 3) f[i] = (char)('0' + (v & 7));
}

bool dt__tar_entry(dt__buf *b, const char *name, bool dir, unsigned mode, const void *d, size_t n,
                   long long mtime) {
    char h[512] = {0};
    size_t nl = strlen(name);
    if (nl <= 100) {
        memcpy(h, name, nl);
    } else {
        const char *cut = name + nl - 100;
        const char *slash = strchr(cut - 1 > name ? cut - 1 : name, '/');
        if (!slash || slash - name > 155 || nl - (size_t)(slash - name) - 1 > 100) return false;
        memcpy(h, slash + 1, nl - (size_t)(slash - name) - 1);
        memcpy(h + 345, name, (size_t)(slash - name));
    }
    octal(h + 100, 8, mode & 0777);
    octal(h + 108, 8, 0);
    octal(h + 116, 8, 0);
    octal(h + 124, 12, dir ? 0 : n);
    octal(h + 136, 12, (unsigned long long)(mtime > 0 ? mtime : 0));
    h[156] = dir ? '5' : '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += (unsigned char)h[i];
    snprintf(h + 148, 8, "%06o", sum);
    dt__buf_put(b, h, 512);
    if (!dir && n) {
        static const char zero[512];
        dt__buf_put(b, d, n);
        dt__buf_put(b, zero, (512 - n % 512) % 512);
    }
    return true;
}

void dt__tar_end(dt__buf *b) {
    static const char zero[1024];
    dt__buf_put(b, zero, sizeof zero);
}

/* A relative path without "..", "." or empty segments. */
static bool safe_path(const char *p) {
    if (!p || !*p || *p == '/' || strlen(p) > 255) return false;
    for (const char *s = p; *s;) {
        size_t n = strcspn(s, "/");
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return false;
        s += n + (s[n] == '/');
        if (s[-1] == '/' && !*s) return false;
    }
    return true;
}

dt_status dt__tar_from_upload(const json_t *files, size_t limit, dt__buf *tar) {
    if (!json_is_array(files))
        return dt_error(DT_ERR_INVALID, "modelDefinition must be a list of files");
    size_t i, total = 0;
    json_t *f;
    json_array_foreach(files, i, f) {
        const char *path = json_string_value(json_object_get(f, "path"));
        json_int_t type = json_integer_value(json_object_get(f, "type"));
        json_int_t mode = json_integer_value(json_object_get(f, "mode"));
        const char *content = json_string_value(json_object_get(f, "content"));
        if (!safe_path(path))
            return dt_error(DT_ERR_INVALID,
                            "modelDefinition[%zu]: path \"%s\" is not a relative path inside the "
                            "model directory",
                            i, path ? path : "(none)");
        if (type != '0' && type != '5')
            return dt_error(DT_ERR_INVALID,
                            "modelDefinition[%zu] (%s): type %lld is neither a file (48) nor a "
                            "directory (53)",
                            i, path, (long long)type);
        dt__buf data = {0};
        if (type == '0' && (!content || !dt__base64_decode(content, &data))) {
            dt__buf_free(&data);
            return dt_error(DT_ERR_INVALID, "modelDefinition[%zu] (%s): content is not base64", i,
                            path);
        }
        total += data.len;
        if (total > limit) {
            dt__buf_free(&data);
            return dt_error(DT_ERR_INVALID,
                            "the model directory is over %zu MiB (at %s); hint: leave data, "
                            "checkpoints and build outputs out with a .detignore file",
                            limit >> 20, path);
        }
        bool ok = dt__tar_entry(tar, path, type == '5', mode ? (unsigned)mode : 0644, data.p,
                                data.len, 0);
        dt__buf_free(&data);
        if (!ok)
            return dt_error(DT_ERR_INVALID, "modelDefinition[%zu]: path %s is too long", i, path);
    }
    dt__tar_end(tar);
    return tar->oom ? dt_error(DT_ERR_OOM, "out of memory packing the model definition") : DT_OK;
}

static unsigned long long from_octal(const char *f, size_t w) {
    unsigned long long v = 0;
    for (size_t i = 0; i < w && f[i] >= '0' && f[i] <= '7'; i++) v = v * 8 + (unsigned)(f[i] - '0');
    return v;
}

static dt_status write_file(const char *path, const void *d, size_t n, unsigned mode) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode & 0777) | 0600);
    if (fd < 0) return dt_error(DT_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    const char *p = d;
    for (size_t off = 0; off < n;) {
        ssize_t k = write(fd, p + off, n - off);
        if (k <= 0) {
            close(fd);
            return dt_error(DT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        }
        off += (size_t)k;
    }
    return close(fd) == 0 ? DT_OK : dt_error(DT_ERR_IO, "cannot write %s", path);
}

dt_status dt__tar_unpack(const void *tar, size_t len, const char *dir) {
    const char *t = tar;
    for (size_t off = 0; off + 512 <= len;) {
        const char *h = t + off;
        if (!h[0]) return DT_OK; /* the end blocks */
        char name[260];
        if (h[345])
            snprintf(name, sizeof name, "%.155s/%.100s", h + 345, h);
        else
            snprintf(name, sizeof name, "%.100s", h);
        size_t n = (size_t)from_octal(h + 124, 12);
        unsigned mode = (unsigned)from_octal(h + 100, 8);
        if (!safe_path(name) || off + 512 + n > len)
            return dt_error(DT_ERR_FORMAT, "model definition: a bad entry \"%s\"", name);
        char path[4400], failed[4400];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (h[156] == '5') {
            int err = dt__mkdir_p(path, failed, sizeof failed);
            if (err) return dt_error(DT_ERR_IO, "cannot create %s: %s", failed, strerror(err));
        } else {
            char *slash = strrchr(path, '/');
            *slash = 0;
            int err = dt__mkdir_p(path, failed, sizeof failed);
            *slash = '/';
            if (err) return dt_error(DT_ERR_IO, "cannot create %s: %s", failed, strerror(err));
            dt_status st = write_file(path, h + 512, n, mode);
            if (st != DT_OK) return st;
        }
        off += 512 + (h[156] == '5' ? 0 : (n + 511) / 512 * 512);
    }
    return DT_OK;
}

/* ---- gzip ---- */

static uint32_t crc32_of(const unsigned char *d, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= d[i];
        for (int k = 0; k < 8; k++) c = c >> 1 ^ (0xedb88320u & (0u - (c & 1)));
    }
    return ~c;
}

static void le32(dt__buf *b, uint32_t v) {
    unsigned char q[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    dt__buf_put(b, q, 4);
}

void dt__gzip_put(dt__buf *b, const void *d, size_t n) {
    static const unsigned char head[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255};
    dt__buf_put(b, head, sizeof head);
    const unsigned char *p = d;
    size_t off = 0;
    do {
        size_t k = n - off > 65535 ? 65535 : n - off;
        unsigned char bh[5] = {off + k == n ? 1 : 0, (unsigned char)k, (unsigned char)(k >> 8),
                               (unsigned char)~k, (unsigned char)(~k >> 8)};
        dt__buf_put(b, bh, 5);
        dt__buf_put(b, p + off, k);
        off += k;
    } while (off < n);
    le32(b, crc32_of(p, n));
    le32(b, (uint32_t)n);
}

void dt__tree_remove(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            dt__tree_remove(p);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}
