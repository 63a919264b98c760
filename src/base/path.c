/*
 * path.c — the one containment check for paths that come from configs, a checkpoint's own files
 * or requests (base/path.h).
 *
 * Lexical part: the root is put in normal form ("." and empty components dropped, a trailing
 * slash cut; its ".." are kept: the root is trusted as given), the path is resolved component by
 * component with ".." taking one back — a ".." with nothing left to take back is an escape —
 * and an absolute path must then be the root or start with the root and "/".
 *
 * File-system part (DT_PATH_NOFOLLOW): from a descriptor of the root, each component of the
 * resolved rest is examined with fstatat(AT_SYMLINK_NOFOLLOW) and entered with
 * openat(O_PATH | O_DIRECTORY | O_NOFOLLOW), so a symbolic link anywhere below the root is seen,
 * not followed; the walk stops at the first component that does not exist (nothing below it can
 * be a link). The check is a snapshot: the caller then uses the returned path.
 */
#define _GNU_SOURCE /* O_PATH */
#include "base/path.h"

#include "base_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The next component of s at or after c: its start (NULL at the end) and length in *len. */
static const char *next_comp(const char *c, size_t *len) {
    while (*c == '/') c++;
    if (!*c) return NULL;
    const char *e = c;
    while (*e && *e != '/') e++;
    *len = (size_t)(e - c);
    return c;
}

static bool is_dot(const char *c, size_t len) {
    return len == 1 && c[0] == '.';
}

static bool is_dotdot(const char *c, size_t len) {
    return len == 2 && c[0] == '.' && c[1] == '.';
}

/* root in normal form into d (room for strlen(root) + 2): "." and empty components dropped, no
 * trailing slash, ".." kept; "/" and "." when nothing is left. */
static void norm_root(const char *s, char *d) {
    size_t n = 0, len;
    if (s[0] == '/') d[n++] = '/';
    for (const char *c = next_comp(s, &len); c; c = next_comp(c + len, &len)) {
        if (is_dot(c, len)) continue;
        if (n && d[n - 1] != '/') d[n++] = '/';
        memcpy(d + n, c, len);
        n += len;
    }
    if (!n) d[n++] = '.';
    d[n] = 0;
}

/* rel resolved lexically into d (room for strlen(rel) + 2): "." and empty components dropped,
 * ".." taking the previous component back; an absolute rel keeps its leading "/", where ".."
 * stays (as the kernel does). Returns 0, or the 1-based number of the ".." component that
 * climbs above the start of a relative rel. */
static int norm_rel(const char *s, char *d) {
    size_t n = 0, base = 0, len;
    if (s[0] == '/') d[n++] = '/', base = 1;
    int k = 0;
    for (const char *c = next_comp(s, &len); c; c = next_comp(c + len, &len)) {
        k++;
        if (is_dot(c, len)) continue;
        if (is_dotdot(c, len)) {
            if (n == base && !base) {
                d[n] = 0;
                return k;
            }
            while (n > base && d[n - 1] != '/') n--;
            if (n > base) n--;
            continue;
        }
        if (n > base) d[n++] = '/';
        memcpy(d + n, c, len);
        n += len;
    }
    d[n] = 0;
    return 0;
}

/* s for a message: cut to its first 160 bytes and "..." when longer, so what the message says
 * after a long path still fits. */
typedef struct shown {
    char s[168];
} shown;

static shown show(const char *s) {
    shown b;
    size_t n = strlen(s);
    if (n < 164) {
        memcpy(b.s, s, n + 1);
    } else {
        memcpy(b.s, s, 160);
        memcpy(b.s + 160, "...", 4);
    }
    return b;
}

/* The file-system part: out = root + the rest from out[off]; r is root's normal form; rel and
 * root as the messages show them. */
static dt_status check_fs(const char *r, char *out, size_t off, const char *rel, const char *root) {
    int dfd = open(r, O_PATH | O_DIRECTORY | O_CLOEXEC); /* the root: followed, trusted */
    if (dfd < 0) {
        if (errno == ENOENT) return DT_OK; /* nothing below it exists yet */
        return dt_error(DT_ERR_IO, "\"%s\" under \"%s\": cannot open the root directory: %s", rel,
                        root, strerror(errno));
    }
    dt_status st = DT_OK;
    int k = 1;
    for (char *c = out + off;; k++) {
        char *e = strchr(c, '/');
        if (e) *e = 0;
        shown sp = show(out); /* the path down to this component, for the messages */
        const char *at = sp.s;
        struct stat sb;
        bool exists = fstatat(dfd, c, &sb, AT_SYMLINK_NOFOLLOW) == 0;
        if (!exists && errno != ENOENT)
            st = dt_error(DT_ERR_IO, "\"%s\" under \"%s\": cannot examine %s: %s", rel, root, at,
                          strerror(errno));
        else if (exists && S_ISLNK(sb.st_mode))
            st = dt_error(DT_ERR_INVALID,
                          "\"%s\" under \"%s\": %s is a symbolic link (component %d); hint: "
                          "links are not followed below \"%s\": put the directory or file itself "
                          "there",
                          rel, root, at, k, root);
        else if (exists && e && !S_ISDIR(sb.st_mode))
            st = dt_error(DT_ERR_INVALID,
                          "\"%s\" under \"%s\": %s is not a directory (component %d); hint: "
                          "check the path",
                          rel, root, at, k);
        if (st == DT_OK && exists && e) {
            int nfd = openat(dfd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (nfd < 0)
                st = dt_error(errno == ENOTDIR || errno == ELOOP ? DT_ERR_INVALID : DT_ERR_IO,
                              "\"%s\" under \"%s\": cannot enter %s (component %d): %s; hint: "
                              "was it replaced by a link while it was checked?",
                              rel, root, at, k, strerror(errno));
            close(dfd);
            dfd = nfd;
        }
        if (e) *e = '/';
        if (st != DT_OK || !exists || !e) break;
        c = e + 1;
    }
    if (dfd >= 0) close(dfd);
    return st;
}

dt_status dt_path_within(const char *root, const char *rel, unsigned flags, char *out, size_t cap) {
    if (!out || !cap) return dt_error(DT_ERR_INVALID, "path_within: no room for the result");
    out[0] = 0;
    shown srel = show(rel ? rel : ""), sroot = show(root ? root : ""); /* for the messages */
    const char *p = srel.s, *d = sroot.s;
    if (!root || !*root)
        return dt_error(DT_ERR_INVALID,
                        "path_within: empty root directory for \"%s\"; hint: name the directory "
                        "the path must stay in",
                        p);
    if (!rel || !*rel)
        return dt_error(DT_ERR_INVALID,
                        "empty path under \"%s\"; hint: name a file or directory inside it", d);
    char *r = malloc(strlen(root) + 2), *n = malloc(strlen(rel) + 2);
    if (!r || !n) {
        free(r);
        free(n);
        return dt_error(DT_ERR_OOM, "path_within: \"%s\" under \"%s\"", p, d);
    }
    norm_root(root, r);
    int up = norm_rel(rel, n);
    size_t k = strlen(r);
    const char *rest = n;
    dt_status st = DT_OK;
    if (up)
        st = dt_error(DT_ERR_INVALID,
                      "\"%s\" climbs out of \"%s\": its component %d (\"..\") goes above it; "
                      "hint: use a path inside \"%s\" (\"..\" may not leave it)",
                      p, d, up, d);
    else if (n[0] == '/' && r[0] != '/')
        st = dt_error(DT_ERR_INVALID,
                      "\"%s\" is absolute but the directory it must stay in, \"%s\", is "
                      "relative; hint: give a path relative to \"%s\"",
                      p, d, d);
    else if (n[0] == '/' && k == 1)
        rest = n + 1; /* under "/" */
    else if (n[0] == '/' && !strncmp(n, r, k) && (n[k] == '/' || !n[k]))
        rest = n[k] ? n + k + 1 : n + k;
    else if (n[0] == '/')
        st = dt_error(DT_ERR_INVALID,
                      "\"%s\" is absolute and not under \"%s\"; hint: give a path relative to "
                      "\"%s\", or an absolute one inside it",
                      p, d, d);
    size_t sep = *rest && !(k == 1 && r[0] == '/') ? 1 : 0, off = k + sep;
    size_t need = off + strlen(rest) + 1;
    if (st == DT_OK && need > cap)
        st = dt_error(DT_ERR_INVALID,
                      "\"%s\" under \"%s\": the resolved path is %zu bytes, more than the %zu "
                      "allowed; hint: use a shorter path",
                      p, d, need - 1, cap - 1);
    if (st == DT_OK) {
        memcpy(out, r, k);
        if (sep) out[k] = '/';
        memcpy(out + off, rest, need - off);
        if ((flags & DT_PATH_NOFOLLOW) && *rest) st = check_fs(r, out, off, p, d);
    }
    free(r);
    free(n);
    if (st != DT_OK) out[0] = 0;
    return st;
}

/* ---- removing a tree ---- */

int dt__rm_tree_at(int pfd, const char *name) {
    struct stat sb;
    if (fstatat(pfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT ? 0 : errno;
    if (!S_ISDIR(sb.st_mode)) return unlinkat(pfd, name, 0) == 0 ? 0 : errno;
    int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        return e;
    }
    int err = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        int r = dt__rm_tree_at(fd, e->d_name);
        if (r && !err) err = r;
    }
    closedir(d);
    if (unlinkat(pfd, name, AT_REMOVEDIR) != 0 && !err) err = errno;
    return err;
}

dt_status dt_path_remove_tree(const char *root, const char *rel) {
    char path[4096];
    dt_status st = dt_path_within(root, rel, DT_PATH_NOFOLLOW, path, sizeof path);
    if (st != DT_OK) return st;
    if (!strcmp(path, root) || (path[0] == '/' && path[1] == 0))
        return dt_error(DT_ERR_INVALID, "refusing to remove %s itself; hint: name a path below it",
                        root);
    int err = dt__rm_tree_at(AT_FDCWD, path);
    return err ? dt_error(DT_ERR_IO, "could not remove %s: %s", path, strerror(err)) : DT_OK;
}

bool dt_url_encode(char *out, size_t n, const char *s) {
    size_t len = strlen(out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '-' || c == '_' || c == '.' || c == '~';
        int w = plain ? snprintf(out + len, n - len, "%c", c)
                      : snprintf(out + len, n - len, "%%%02X", c);
        if (w < 0 || (size_t)w >= n - len) return false;
        len += (size_t)w;
    }
    return true;
}
