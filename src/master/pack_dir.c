/*
 * pack_dir.c — directories into a tar (det_pack.h): a checkpoint as it is, and an experiment's
 * model definition with its ignore files, its included paths and its size limit. The files are
 * listed (and sized) first, then read: a directory over the limit is refused before any byte
 * of it is read, naming its biggest files.
 */
#define _GNU_SOURCE
#include "master/det_pack.h"
#include "master/ignore.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct entry {
    char *name; /* in the tar */
    char *full; /* on disk */
    size_t size;
    unsigned mode;
    long long mtime;
    bool dir;
} entry;

typedef struct listing {
    entry *v;
    int n, cap;
    size_t total; /* bytes of the files */
} listing;

static void listing_free(listing *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i].name), free(l->v[i].full);
    free(l->v);
}

static dt_status add(listing *l, const char *name, const char *full, const struct stat *sb) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        entry *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return dt_error(DT_ERR_OOM, "out of memory listing %s", full);
        l->v = v, l->cap = cap;
    }
    bool dir = S_ISDIR(sb->st_mode);
    entry e = {strdup(name),
               strdup(full),
               dir ? 0 : (size_t)sb->st_size,
               (unsigned)sb->st_mode,
               (long long)sb->st_mtime,
               dir};
    if (!e.name || !e.full) {
        free(e.name), free(e.full);
        return dt_error(DT_ERR_OOM, "out of memory listing %s", full);
    }
    l->v[l->n++] = e;
    l->total += e.size;
    return DT_OK;
}

/* The files and directories under root/rel (rel "" for root), named prefix/rel in the tar,
 * depth-first, less what ig leaves out; symlinks and other kinds skipped. */
static dt_status walk(listing *l, const char *root, const char *rel, const char *prefix,
                      const dt__ignore *ig, int depth) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s%s%s", root, *rel ? "/" : "", rel);
    DIR *d = opendir(dir);
    if (!d) return dt_error(DT_ERR_IO, "cannot read %s: %s", dir, strerror(errno));
    dt_status st = DT_OK;
    struct dirent *e;
    while (st == DT_OK && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char r[1024], full[4096], name[1100];
        snprintf(r, sizeof r, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        snprintf(full, sizeof full, "%s/%s", root, r);
        snprintf(name, sizeof name, "%s%s%s", prefix, *prefix ? "/" : "", r);
        struct stat sb;
        if (lstat(full, &sb) != 0) continue;
        bool is_dir = S_ISDIR(sb.st_mode);
        if ((!is_dir && !S_ISREG(sb.st_mode)) || dt__ignore_match(ig, r, is_dir)) continue;
        if (is_dir && depth >= 32) continue;
        st = add(l, name, full, &sb);
        if (st == DT_OK && is_dir) st = walk(l, root, r, prefix, ig, depth + 1);
    }
    closedir(d);
    return st;
}

/* Read a whole file into b. */
static bool slurp(const char *path, dt__buf *b) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char chunk[65536];
    ssize_t k;
    while ((k = read(fd, chunk, sizeof chunk)) > 0) dt__buf_put(b, chunk, (size_t)k);
    close(fd);
    return k == 0 && !b->oom;
}

static int bigger_first(const void *a, const void *b) {
    size_t x = (*(const entry *const *)a)->size, y = (*(const entry *const *)b)->size;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* DT_ERR_INVALID for a listing of `dir` over limit, naming its three biggest files. */
static dt_status too_big(const listing *l, const char *dir, size_t limit) {
    const entry **by = malloc((size_t)l->n * sizeof *by);
    if (!by) return dt_error(DT_ERR_OOM, "out of memory");
    for (int i = 0; i < l->n; i++) by[i] = &l->v[i];
    qsort(by, (size_t)l->n, sizeof *by, bigger_first);
    char names[1024] = "";
    size_t at = 0;
    for (int i = 0; i < l->n && i < 3 && !by[i]->dir; i++) {
        int k = snprintf(names + at, sizeof names - at, "%s%s (%.1f MiB)", i ? ", " : "",
                         by[i]->name, (double)by[i]->size / (1 << 20));
        if (k < 0 || (at += (size_t)k) >= sizeof names) break;
    }
    free(by);
    return dt_error(DT_ERR_INVALID,
                    "the model definition %s is %.1f MiB, over the %zu MiB limit; the biggest "
                    "files: %s; hint: leave data, checkpoints and build outputs out with a "
                    ".dtrainignore file in the model directory (gitignore syntax) and read "
                    "data sets from a path the trials can see",
                    dir, (double)l->total / (1 << 20), limit >> 20, names);
}

/* The listed files and directories into tar, then its end. */
static dt_status write_all(const listing *l, dt__buf *tar) {
    for (int i = 0; i < l->n; i++) {
        const entry *e = &l->v[i];
        dt__buf data = {0};
        if (!e->dir && !slurp(e->full, &data)) {
            dt__buf_free(&data);
            return dt_error(DT_ERR_IO, "cannot read %s: %s", e->full, strerror(errno));
        }
        bool ok = dt__tar_entry(tar, e->name, e->dir, e->mode, data.p, data.len, e->mtime);
        dt__buf_free(&data);
        if (!ok)
            return dt_error(DT_ERR_INVALID,
                            "%s: a path over 255 bytes cannot be kept; hint: "
                            "shorten it or leave it out with .dtrainignore",
                            e->full);
    }
    dt__tar_end(tar);
    return tar->oom ? dt_error(DT_ERR_OOM, "out of memory packing the model definition") : DT_OK;
}

/* Add one included path (a file, or a directory with its own ignore files) under its base
 * name, unless a path of that name is already there. */
static dt_status add_include(listing *l, const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0)
        return dt_error(DT_ERR_INVALID,
                        "include %s: %s; hint: give a file or directory that "
                        "exists",
                        path, strerror(errno));
    const char *slash = strrchr(path, '/');
    const char *base = slash && slash[1] ? slash + 1 : path;
    size_t bl = strlen(base);
    for (int i = 0; i < l->n; i++)
        if (!strncmp(l->v[i].name, base, bl) && (!l->v[i].name[bl] || l->v[i].name[bl] == '/'))
            return dt_error(DT_ERR_INVALID,
                            "include %s: the model definition already has %s; "
                            "hint: rename one of them",
                            path, base);
    if (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode))
        return dt_error(DT_ERR_INVALID, "include %s is neither a file nor a directory", path);
    dt_status st = add(l, base, path, &sb);
    if (st != DT_OK || !S_ISDIR(sb.st_mode)) return st;
    dt__ignore *ig = NULL;
    if ((st = dt__ignore_load(path, &ig)) == DT_OK) st = walk(l, path, "", base, ig, 1);
    dt__ignore_free(ig);
    return st;
}

/* dir (with its ignore files when `ignore`) and the includes, up to limit bytes. */
static dt_status pack(const char *dir, const char *const *includes, int n, size_t limit,
                      bool ignore, dt__buf *tar) {
    listing l = {0};
    dt__ignore *ig = NULL;
    dt_status st = ignore ? dt__ignore_load(dir, &ig) : DT_OK;
    if (st == DT_OK) st = walk(&l, dir, "", "", ig, 0);
    dt__ignore_free(ig);
    for (int i = 0; st == DT_OK && i < n; i++) st = add_include(&l, includes[i]);
    if (st == DT_OK && l.total > limit) st = too_big(&l, dir, limit);
    if (st == DT_OK) st = write_all(&l, tar);
    listing_free(&l);
    return st;
}

dt_status dt__tar_from_dir(const char *dir, dt__buf *tar) {
    return pack(dir, NULL, 0, SIZE_MAX, false, tar);
}

dt_status dt__tar_snapshot(const char *dir, const char *const *includes, int n, size_t limit,
                           dt__buf *tar) {
    return pack(dir, includes, n, limit, true, tar);
}
