/*
 * checkpoint.c — checkpoint directories: an atomic writer, a verifying reader, removal and
 * listing. The on-disk format is described in docs/checkpoints.md.
 *
 * Writing. dt_ckpt_begin makes "<parent>/<name>.tmp.<pid>"; files are added into it (by the
 * dt_ckpt_add_* helpers or directly by a save hook through dt_ckpt_dir). dt_ckpt_commit walks
 * the directory in sorted order, fsyncs every file while computing its size and crc32c, writes
 * metadata.json (format_version, the file list, the caller's extra members), fsyncs the
 * directories, then renames the temporary directory to "<parent>/<name>" with
 * renameat2(RENAME_NOREPLACE) — or, when overwriting was asked for, swaps it with the old
 * checkpoint with renameat2(RENAME_EXCHANGE) and removes the old one — and fsyncs the parent.
 * At every instant "<parent>/<name>" is either absent, the old checkpoint or the complete new
 * one. File systems without renameat2 fall back to stat + rename (and, to overwrite, rename
 * the old checkpoint aside first). Any failure removes the temporary directory. A process
 * whose launcher is gone (launcher_watch.c) commits nothing: a relaunched run owns the directory.
 * The file writes and fsyncs are base's durable-file pieces (durable.c), which tests can make
 * fail.
 *
 * Reading. dt_ckpt_open parses metadata.json, checks format_version, and verifies every listed
 * file's size and crc32c, naming the file and the difference when something is off. A listed
 * name must be a plain relative path (no "." / ".." / empty components) and, checked with
 * dt_path_within (base/path.h), have no symbolic link in any component: a file reached through
 * a link could lie outside the checkpoint.
 *
 * Removal. dt_ckpt_remove renames a checkpoint to a temporary name first (so a half-deleted
 * directory never looks like a checkpoint) and deletes it without following symlinks
 * (openat / unlinkat over directory descriptors). Refused, like a commit, once this process's
 * launcher is gone.
 */
#define _GNU_SOURCE /* renameat2, strverscmp, fdopendir */
#include "dtrain/trialio.h"
#include "base/durable.h"
#include "base/path.h"
#include "base/base_impl.h"
#include "trial_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CK_META "metadata.json"
#define CK_TMP_TAG ".tmp."
#define CK_READ_CHUNK (1u << 20)

struct dt_ckpt_writer {
    char *parent, *name;
    char *final; /* <parent>/<name> */
    char *tmp;   /* <parent>/<name>.tmp.<pid> */
    unsigned flags;
    bool failed;
};

struct dt_ckpt {
    char *dir;
    json_t *meta;
    int n;
    char **names, **paths;
    int64_t *sizes;
};

/* ---- small helpers ---- */

/* "a" + "/" + "b" (malloc'd), or NULL with DT_ERR_OOM. */
static char *path_join(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *p = malloc(na + nb + 2);
    if (!p) {
        dt_error(DT_ERR_OOM, "path %s/%s", a, b);
        return NULL;
    }
    memcpy(p, a, na);
    p[na] = '/';
    memcpy(p + na + 1, b, nb + 1);
    return p;
}

static char *str_dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* mkdir -p. DT_ERR_IO naming the component that could not be made and `what` it is for. */
static dt_status mkdir_p(const char *dir, const char *what) {
    char failed[4096];
    int err = dt__mkdir_p(dir, failed, sizeof failed);
    if (err == ENOTDIR)
        return dt_error(DT_ERR_IO,
                        "%s: exists and is not a directory; hint: choose another %s than %s",
                        failed, what, dir);
    if (err == ENOMEM) return dt_error(DT_ERR_OOM, "%s: path", dir);
    if (err)
        return dt_error(DT_ERR_IO,
                        "%s: cannot create directory: %s; hint: check that the %s %s is on a "
                        "writable path",
                        failed, strerror(err), what, dir);
    return DT_OK;
}

dt_status dt__ckpt_mkdir(const char *dir) {
    return mkdir_p(dir, "checkpoint directory");
}

/* Size and crc32c of a regular file, read in chunks through buf (CK_READ_CHUNK bytes); fsync
 * it too when asked. */
static dt_status file_crc(const char *path, unsigned char *buf, bool do_sync, int64_t *size,
                          uint32_t *crc) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return dt_error(DT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    uint32_t c = 0;
    int64_t total = 0;
    dt_status st = DT_OK;
    for (;;) {
        ssize_t r = read(fd, buf, CK_READ_CHUNK);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            st = dt_error(DT_ERR_IO, "%s: read failed: %s", path, strerror(errno));
            break;
        }
        if (r == 0) break;
        c = dt_crc32c(c, buf, (size_t)r);
        total += r;
    }
    if (st == DT_OK && do_sync) st = dt__file_fsync(fd, path);
    close(fd);
    *size = total;
    *crc = c;
    return st;
}

static int rm_tree(const char *path) {
    return dt__rm_tree_at(AT_FDCWD, path);
}

void dt_ckpt_remove_partial(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    int dfd = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *tag = strstr(e->d_name, CK_TMP_TAG);
        if (!tag || tag == e->d_name) continue;
        const char *pid = tag + strlen(CK_TMP_TAG);
        if (!*pid || pid[strspn(pid, "0123456789")]) continue; /* not "<name>.tmp.<pid>" */
        int err = dt__rm_tree_at(dfd, e->d_name);
        dt_log(err ? DT_LOG_WARN : DT_LOG_INFO,
               "%s a partial checkpoint an earlier run left: %s/%s%s%s",
               err ? "could not remove" : "removed", dir, e->d_name, err ? ": " : "",
               err ? strerror(err) : "");
    }
    closedir(d);
}

/* A checkpoint name: one path component, not "." / "..", no ".tmp." (reserved for
 * temporary directories). */
static bool valid_name(const char *name) {
    return name && *name && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..") &&
           !strstr(name, CK_TMP_TAG) && strlen(name) < 240;
}

/* A relative path inside a checkpoint: non-empty components, none "." or "..". */
static bool valid_relname(const char *rel) {
    if (!rel || !*rel || rel[0] == '/' || strlen(rel) >= 2048) return false;
    const char *c = rel;
    for (;;) {
        const char *slash = strchr(c, '/');
        size_t len = slash ? (size_t)(slash - c) : strlen(c);
        if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        if (!slash) return true;
        c = slash + 1;
    }
}

static bool is_checkpoint_dir(const char *path) {
    char *m = path_join(path, CK_META);
    struct stat sb;
    bool ok = m && lstat(m, &sb) == 0 && S_ISREG(sb.st_mode);
    free(m);
    return ok;
}

/* ---- writer ---- */

static void writer_free(dt_ckpt_writer *ck) {
    if (!ck) return;
    free(ck->parent);
    free(ck->name);
    free(ck->final);
    free(ck->tmp);
    free(ck);
}

dt_ckpt_writer *dt_ckpt_begin_ex(const char *parent_dir, const char *name, unsigned flags) {
    if (!parent_dir || !*parent_dir || !valid_name(name)) {
        dt_error(DT_ERR_INVALID,
                 "ckpt_begin: bad checkpoint name \"%s\" in \"%s\"; hint: a "
                 "name is one non-empty path component without '/' or \".tmp.\"",
                 name ? name : "(null)", parent_dir ? parent_dir : "(null)");
        return NULL;
    }
    if (mkdir_p(parent_dir, "checkpoint directory") != DT_OK) return NULL;
    dt_ckpt_writer *ck = calloc(1, sizeof *ck);
    size_t tlen = strlen(parent_dir) + strlen(name) + 48;
    if (ck) {
        ck->parent = str_dup(parent_dir);
        ck->name = str_dup(name);
        ck->final = path_join(parent_dir, name);
        ck->tmp = malloc(tlen);
    }
    if (!ck || !ck->parent || !ck->name || !ck->final || !ck->tmp) {
        writer_free(ck);
        dt_error(DT_ERR_OOM, "ckpt_begin: %s/%s", parent_dir, name);
        return NULL;
    }
    snprintf(ck->tmp, tlen, "%s/%s" CK_TMP_TAG "%ld", parent_dir, name, (long)getpid());
    ck->flags = flags;
    struct stat sb;
    if (!(flags & DT_CKPT_OVERWRITE) && lstat(ck->final, &sb) == 0) {
        dt_error(DT_ERR_STATE,
                 "%s: a checkpoint (or file) of that name already exists; hint: "
                 "choose another name, remove it (dt_ckpt_remove) or pass DT_CKPT_OVERWRITE",
                 ck->final);
        writer_free(ck);
        return NULL;
    }
    if ((flags & DT_CKPT_OVERWRITE) && lstat(ck->final, &sb) == 0 &&
        (!S_ISDIR(sb.st_mode) || !is_checkpoint_dir(ck->final))) {
        dt_error(DT_ERR_STATE,
                 "%s: exists and is not a checkpoint (no metadata.json); refusing "
                 "to overwrite it; hint: move it away",
                 ck->final);
        writer_free(ck);
        return NULL;
    }
    rm_tree(ck->tmp); /* a stale temporary directory of a dead process with our pid */
    if (mkdir(ck->tmp, 0755) != 0) {
        dt_error(DT_ERR_IO,
                 "%s: cannot create the checkpoint's temporary directory: %s; hint: "
                 "check that %s is writable and has free space",
                 ck->tmp, strerror(errno), parent_dir);
        writer_free(ck);
        return NULL;
    }
    return ck;
}

dt_ckpt_writer *dt_ckpt_begin(const char *parent_dir, const char *name) {
    return dt_ckpt_begin_ex(parent_dir, name, 0);
}

const char *dt_ckpt_dir(const dt_ckpt_writer *ck) {
    return ck ? ck->tmp : NULL;
}

/* A write failed with status st: remove the temporary directory and mark the writer failed,
 * keeping st's message. */
static dt_status writer_fail(dt_ckpt_writer *ck, dt_status st) {
    DT_KEEP_ERROR(rm_tree(ck->tmp));
    ck->failed = true;
    return st;
}

static dt_status writer_usable(const dt_ckpt_writer *ck, const char *fn) {
    if (!ck) return dt_error(DT_ERR_INVALID, "%s: NULL checkpoint writer", fn);
    if (ck->failed)
        return dt_error(DT_ERR_STATE,
                        "%s: checkpoint %s: an earlier write failed and it was "
                        "discarded; hint: call dt_ckpt_abort and start again",
                        fn, ck->final);
    return DT_OK;
}

/* Check relname and return the full path of a new file in the checkpoint (its directories
 * made), or NULL with the error set (DT_ERR_INVALID: writer still usable; otherwise failed). */
static char *writer_file(dt_ckpt_writer *ck, const char *relname, const char *fn) {
    if (writer_usable(ck, fn) != DT_OK) return NULL;
    if (!valid_relname(relname) || !strcmp(relname, CK_META)) {
        dt_error(DT_ERR_INVALID,
                 "%s: bad file name \"%s\" for checkpoint %s; hint: a relative "
                 "path without \".\"/\"..\" components; metadata.json is reserved",
                 fn, relname ? relname : "(null)", ck->final);
        return NULL;
    }
    char *full = path_join(ck->tmp, relname);
    if (!full) {
        writer_fail(ck, DT_ERR_OOM);
        return NULL;
    }
    char *slash = strrchr(full, '/');
    if (slash - full > (ptrdiff_t)strlen(ck->tmp)) { /* relname has directories */
        *slash = 0;
        dt_status st = mkdir_p(full, "checkpoint subdirectory");
        *slash = '/';
        if (st != DT_OK) {
            free(full);
            writer_fail(ck, st);
            return NULL;
        }
    }
    return full;
}

dt_status dt_ckpt_add_tensors(dt_ckpt_writer *ck, const char *relname, int n,
                              const char *const *names, dt_tensor *const *tensors, int n_meta,
                              const char *const *meta_kv) {
    char *full = writer_file(ck, relname, "ckpt_add_tensors");
    if (!full) return dt_last_status();
    dt_status st = dt_safetensors_write(full, n, names, tensors, n_meta, meta_kv);
    free(full);
    if (st != DT_OK && st != DT_ERR_INVALID) writer_fail(ck, st);
    return st;
}

dt_status dt_ckpt_add_bytes(dt_ckpt_writer *ck, const char *relname, const void *data, size_t n) {
    if (n > 0 && !data) return dt_error(DT_ERR_INVALID, "ckpt_add_bytes: NULL data");
    char *full = writer_file(ck, relname, "ckpt_add_bytes");
    if (!full) return dt_last_status();
    dt_status st = dt__file_write(full, data, n, false);
    free(full);
    return st == DT_OK ? st : writer_fail(ck, st);
}

dt_status dt_ckpt_add_json(dt_ckpt_writer *ck, const char *relname, const json_t *value) {
    if (!value) return dt_error(DT_ERR_INVALID, "ckpt_add_json: NULL value");
    if (writer_usable(ck, "ckpt_add_json") != DT_OK) return dt_last_status();
    char *s = json_dumps(value, JSON_INDENT(2) | JSON_ENCODE_ANY);
    if (!s)
        return dt_error(DT_ERR_INVALID, "ckpt_add_json: %s: value cannot be encoded",
                        relname ? relname : "(null)");
    size_t len = strlen(s);
    char *t = realloc(s, len + 2);
    if (!t) {
        free(s);
        return writer_fail(ck, dt_error(DT_ERR_OOM, "ckpt_add_json: %s", relname));
    }
    t[len] = '\n';
    t[len + 1] = 0;
    dt_status st = dt_ckpt_add_bytes(ck, relname, t, len + 1);
    free(t);
    return st;
}

/* List the files under dir (its path inside the checkpoint is rel, "" at the top) into files
 * in sorted order, fsyncing each file and each directory. */
static int dirent_cmp(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

static dt_status walk(const char *dir, const char *rel, json_t *files, unsigned char *buf) {
    struct dirent **list = NULL;
    int n = scandir(dir, &list, NULL, dirent_cmp);
    if (n < 0) return dt_error(DT_ERR_IO, "%s: cannot list: %s", dir, strerror(errno));
    dt_status st = DT_OK;
    for (int i = 0; i < n; i++) {
        const char *nm = list[i]->d_name;
        if (st != DT_OK || !strcmp(nm, ".") || !strcmp(nm, "..")) continue;
        char *full = path_join(dir, nm);
        char *r = *rel ? path_join(rel, nm) : str_dup(nm);
        struct stat sb;
        if (!full || !r) {
            st = dt_error(DT_ERR_OOM, "%s: listing", dir);
        } else if (lstat(full, &sb) != 0) {
            st = dt_error(DT_ERR_IO, "%s: cannot stat: %s", full, strerror(errno));
        } else if (S_ISDIR(sb.st_mode)) {
            st = walk(full, r, files, buf);
        } else if (!S_ISREG(sb.st_mode)) {
            st = dt_error(DT_ERR_INVALID,
                          "%s: not a regular file (a symlink, device or pipe); "
                          "hint: a checkpoint holds only regular files and directories",
                          full);
        } else if (!*rel && !strcmp(nm, CK_META)) {
            st = dt_error(DT_ERR_INVALID,
                          "%s: metadata.json is written by dt_ckpt_commit; "
                          "hint: store your own metadata under another name",
                          full);
        } else {
            int64_t size = 0;
            uint32_t crc = 0;
            st = file_crc(full, buf, true, &size, &crc);
            json_t *e = json_pack("{s:I,s:I}", "size", (json_int_t)size, "crc32c", (json_int_t)crc);
            if (st == DT_OK && (!e || json_object_set_new(files, r, e) != 0)) {
                e = NULL;
                st = dt_error(DT_ERR_OOM, "%s: metadata entry", full);
            }
            if (st != DT_OK) json_decref(e);
        }
        free(full);
        free(r);
    }
    for (int i = 0; i < n; i++) free(list[i]);
    free(list);
    if (st == DT_OK) st = dt_dir_fsync(dir);
    return st;
}

/* Move the finished temporary directory into place (see the file comment). */
static dt_status install(dt_ckpt_writer *ck) {
    struct stat sb;
    bool exists = lstat(ck->final, &sb) == 0;
    if (exists && !(ck->flags & DT_CKPT_OVERWRITE))
        return dt_error(DT_ERR_STATE,
                        "%s: a checkpoint of that name appeared while this one was "
                        "written; hint: choose another name or pass DT_CKPT_OVERWRITE",
                        ck->final);
    if (exists && (!S_ISDIR(sb.st_mode) || !is_checkpoint_dir(ck->final)))
        return dt_error(DT_ERR_STATE,
                        "%s: exists and is not a checkpoint (no metadata.json); "
                        "refusing to overwrite it; hint: move it away",
                        ck->final);
    if (!exists) {
        if (renameat2(AT_FDCWD, ck->tmp, AT_FDCWD, ck->final, RENAME_NOREPLACE) == 0) return DT_OK;
        if (errno == EEXIST)
            return dt_error(DT_ERR_STATE,
                            "%s: a checkpoint of that name appeared while this one "
                            "was written; hint: choose another name",
                            ck->final);
        if (errno != EINVAL && errno != ENOSYS)
            return dt_error(DT_ERR_IO, "cannot rename %s to %s: %s", ck->tmp, ck->final,
                            strerror(errno));
        if (rename(ck->tmp, ck->final) != 0) /* no renameat2 here: best effort */
            return dt_error(DT_ERR_IO, "cannot rename %s to %s: %s", ck->tmp, ck->final,
                            strerror(errno));
        return DT_OK;
    }
    /* Overwrite: swap, after which the temporary name holds the old checkpoint. */
    if (renameat2(AT_FDCWD, ck->tmp, AT_FDCWD, ck->final, RENAME_EXCHANGE) == 0) {
        dt_dir_fsync(ck->parent);
        rm_tree(ck->tmp);
        return DT_OK;
    }
    if (errno != EINVAL && errno != ENOSYS)
        return dt_error(DT_ERR_IO, "cannot exchange %s with %s: %s", ck->tmp, ck->final,
                        strerror(errno));
    size_t olen = strlen(ck->tmp) + 8;
    char *old = malloc(olen);
    if (!old) return dt_error(DT_ERR_OOM, "%s: old name", ck->final);
    snprintf(old, olen, "%s.old", ck->tmp); /* holds ".tmp.": never listed as a checkpoint */
    rm_tree(old);
    dt_status st = DT_OK;
    if (rename(ck->final, old) != 0) {
        st = dt_error(DT_ERR_IO, "cannot move %s aside: %s", ck->final, strerror(errno));
    } else if (rename(ck->tmp, ck->final) != 0) {
        st = dt_error(DT_ERR_IO, "cannot rename %s to %s: %s", ck->tmp, ck->final, strerror(errno));
        rename(old, ck->final); /* put the old one back */
    } else {
        dt_dir_fsync(ck->parent);
        rm_tree(old);
    }
    free(old);
    return st;
}

dt_status dt_ckpt_commit(dt_ckpt_writer *ck, const json_t *extra_metadata) {
    dt_status st = writer_usable(ck, "ckpt_commit");
    if (st != DT_OK) {
        writer_free(ck); /* a failed writer has no directory left */
        return st;
    }
    if (extra_metadata &&
        (!json_is_object(extra_metadata) || json_object_get(extra_metadata, "format_version") ||
         json_object_get(extra_metadata, "files")))
        st = dt_error(DT_ERR_INVALID,
                      "ckpt_commit: %s: extra metadata must be a JSON object "
                      "without the keys \"format_version\" and \"files\"",
                      ck->final);
    json_t *meta = json_object(), *files = json_object();
    unsigned char *buf = malloc(CK_READ_CHUNK);
    if (st == DT_OK && (!meta || !files || !buf))
        st = dt_error(DT_ERR_OOM, "ckpt_commit: %s", ck->final);
    if (st == DT_OK) st = walk(ck->tmp, "", files, buf);
    free(buf);
    char *text = NULL;
    if (st == DT_OK) {
        json_object_set_new(meta, "format_version", json_integer(DT_CKPT_FORMAT_VERSION));
        json_object_set(meta, "files", files);
        if (extra_metadata) json_object_update(meta, (json_t *)extra_metadata);
        text = json_dumps(meta, JSON_INDENT(2));
        if (!text) st = dt_error(DT_ERR_OOM, "ckpt_commit: %s: metadata", ck->final);
    }
    if (st == DT_OK) {
        char *mp = path_join(ck->tmp, CK_META);
        size_t len = strlen(text);
        text[len] = '\n'; /* replaces the terminator: write len + 1 bytes, no string use after */
        st = mp ? dt__file_write(mp, text, len + 1, true) : DT_ERR_OOM;
        free(mp);
    }
    free(text);
    json_decref(files);
    json_decref(meta);
    if (st == DT_OK) st = dt_dir_fsync(ck->tmp);
    if (st == DT_OK) st = dt__ckpt_launcher_alive(ck->final); /* never after a relaunch */
    if (st == DT_OK) st = install(ck);
    if (st == DT_OK) {
        st = dt_dir_fsync(ck->parent);
    } else {
        DT_KEEP_ERROR(rm_tree(ck->tmp));
    }
    writer_free(ck);
    return st;
}

void dt_ckpt_abort(dt_ckpt_writer *ck) {
    if (!ck) return;
    if (!ck->failed) rm_tree(ck->tmp);
    writer_free(ck);
}

/* ---- reader ---- */

void dt_ckpt_close(dt_ckpt *ck) {
    if (!ck) return;
    for (int i = 0; i < ck->n; i++) {
        free(ck->names[i]);
        free(ck->paths[i]);
    }
    free(ck->names);
    free(ck->paths);
    free(ck->sizes);
    json_decref(ck->meta);
    free(ck->dir);
    free(ck);
}

/* Check one listed file against its metadata entry e. */
static dt_status verify_file(dt_ckpt *ck, int i, const char *rel, const json_t *e,
                             unsigned char *buf) {
    const char *mp = ck->dir;
    json_t *js = json_object_get(e, "size"), *jc = json_object_get(e, "crc32c");
    if (!json_is_object(e) || !json_is_integer(js) || !json_is_integer(jc) ||
        json_integer_value(js) < 0 || json_integer_value(jc) < 0 ||
        json_integer_value(jc) > (json_int_t)UINT32_MAX)
        return dt_error(DT_ERR_FORMAT,
                        "%s/metadata.json: the entry of \"%s\" is malformed "
                        "(expected {\"size\": bytes, \"crc32c\": u32}): the metadata is "
                        "corrupted",
                        mp, rel);
    if (!valid_relname(rel) || !strcmp(rel, CK_META))
        return dt_error(DT_ERR_FORMAT,
                        "%s/metadata.json: lists an unsafe file name \"%s\" (absolute, "
                        "with \".\", \"..\" or empty components, or metadata.json): the "
                        "metadata is corrupted",
                        mp, rel);
    int64_t want_size = json_integer_value(js);
    uint32_t want_crc = (uint32_t)json_integer_value(jc);
    size_t cap = strlen(ck->dir) + strlen(rel) + 2;
    ck->names[i] = str_dup(rel);
    ck->paths[i] = malloc(cap);
    if (!ck->names[i] || !ck->paths[i]) return dt_error(DT_ERR_OOM, "%s: file list", mp);
    /* every component of the name, not only the last, must be a real directory or file of the
     * checkpoint: a symbolic link anywhere would let a listed file lie outside it */
    dt_status st = dt_path_within(ck->dir, rel, DT_PATH_NOFOLLOW, ck->paths[i], cap);
    if (st == DT_ERR_OOM || st == DT_ERR_IO) return st;
    if (st != DT_OK)
        return dt_error(DT_ERR_FORMAT,
                        "%s/metadata.json: lists \"%s\", which is not a file inside the "
                        "checkpoint (%s): the checkpoint was modified; a checkpoint holds only "
                        "regular files and directories",
                        mp, rel, dt_last_error());
    const char *p = ck->paths[i];
    struct stat sb;
    if (lstat(p, &sb) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return dt_error(DT_ERR_FORMAT,
                            "%s: listed in metadata.json but missing: the "
                            "checkpoint is incomplete",
                            p);
        return dt_error(DT_ERR_IO, "%s: cannot stat: %s", p, strerror(errno));
    }
    if (!S_ISREG(sb.st_mode))
        return dt_error(DT_ERR_FORMAT,
                        "%s: not a regular file, metadata.json lists a file: "
                        "the checkpoint was modified",
                        p);
    if ((int64_t)sb.st_size != want_size)
        return dt_error(DT_ERR_FORMAT, "%s: size %lld, metadata says %lld: %s", p,
                        (long long)sb.st_size, (long long)want_size,
                        (int64_t)sb.st_size < want_size
                            ? "the checkpoint is truncated"
                            : "the file was changed after the checkpoint was written");
    int64_t size = 0;
    uint32_t crc = 0;
    st = file_crc(p, buf, false, &size, &crc);
    if (st != DT_OK) return st;
    if (size != want_size)
        return dt_error(DT_ERR_FORMAT,
                        "%s: read %lld bytes, metadata says %lld: the file "
                        "changed while it was verified",
                        p, (long long)size, (long long)want_size);
    if (crc != want_crc)
        return dt_error(DT_ERR_FORMAT,
                        "%s: crc32c 0x%08x, metadata says 0x%08x: the file is "
                        "corrupted",
                        p, crc, want_crc);
    ck->sizes[i] = size;
    return DT_OK;
}

/* Read <dir>/metadata.json (mp) into ck->meta: a regular file holding a JSON object. */
static dt_status load_meta(dt_ckpt *ck, const char *mp) {
    struct stat sb;
    if (lstat(mp, &sb) != 0 || !S_ISREG(sb.st_mode))
        return dt_error(DT_ERR_FORMAT,
                        "%s: missing: not a dtrain checkpoint, or it was never "
                        "committed; hint: a checkpoint is only valid once dt_ckpt_commit wrote "
                        "its metadata.json",
                        mp);
    json_error_t jerr;
    ck->meta = json_load_file(mp, JSON_REJECT_DUPLICATES, &jerr);
    if (!ck->meta)
        return dt_error(DT_ERR_FORMAT,
                        "%s: invalid JSON (line %d, column %d: %s): the "
                        "metadata is corrupted",
                        mp, jerr.line, jerr.column, jerr.text);
    if (!json_is_object(ck->meta))
        return dt_error(DT_ERR_FORMAT, "%s: not a JSON object: the metadata is corrupted", mp);
    return DT_OK;
}

/* The metadata's format_version (1..DT_CKPT_FORMAT_VERSION) and its "files" object. */
static dt_status check_meta(const dt_ckpt *ck, const char *mp, json_t **files) {
    json_t *v = json_object_get(ck->meta, "format_version");
    *files = json_object_get(ck->meta, "files");
    if (!json_is_integer(v))
        return dt_error(DT_ERR_FORMAT,
                        "%s: no integer \"format_version\": not a dtrain "
                        "checkpoint or the metadata is corrupted",
                        mp);
    if (json_integer_value(v) > DT_CKPT_FORMAT_VERSION)
        return dt_error(DT_ERR_FORMAT,
                        "%s: format_version %lld is newer than this dtrain "
                        "reads (up to %d); hint: load it with a newer dtrain",
                        mp, (long long)json_integer_value(v), DT_CKPT_FORMAT_VERSION);
    if (json_integer_value(v) < 1)
        return dt_error(DT_ERR_FORMAT,
                        "%s: format_version %lld is not supported (this dtrain "
                        "reads 1 to %d)",
                        mp, (long long)json_integer_value(v), DT_CKPT_FORMAT_VERSION);
    if (!json_is_object(*files))
        return dt_error(DT_ERR_FORMAT, "%s: no \"files\" object: the metadata is corrupted", mp);
    return DT_OK;
}

/* Fill ck's file list from the metadata's "files", verifying each file (verify_file). */
static dt_status verify_files(dt_ckpt *ck, json_t *files, const char *path) {
    dt_status st = DT_OK;
    int n = (int)json_object_size(files);
    ck->names = calloc((size_t)n + 1, sizeof *ck->names);
    ck->paths = calloc((size_t)n + 1, sizeof *ck->paths);
    ck->sizes = calloc((size_t)n + 1, sizeof *ck->sizes);
    unsigned char *buf = malloc(CK_READ_CHUNK);
    if (!ck->names || !ck->paths || !ck->sizes || !buf) {
        st = dt_error(DT_ERR_OOM, "ckpt_open: %s", path);
    } else {
        ck->n = n;
        const char *rel;
        json_t *e;
        int i = 0;
        json_object_foreach(files, rel, e) {
            st = verify_file(ck, i++, rel, e, buf);
            if (st != DT_OK) break;
        }
    }
    free(buf);
    return st;
}

dt_ckpt *dt_ckpt_open(const char *path) {
    if (!path || !*path) {
        dt_error(DT_ERR_INVALID, "ckpt_open: empty path");
        return NULL;
    }
    struct stat sb;
    if (stat(path, &sb) != 0) {
        dt_error(DT_ERR_IO, "%s: cannot open the checkpoint: %s", path, strerror(errno));
        return NULL;
    }
    if (!S_ISDIR(sb.st_mode)) {
        dt_error(DT_ERR_IO,
                 "%s: not a directory; hint: a checkpoint is a directory holding "
                 "metadata.json",
                 path);
        return NULL;
    }
    dt_ckpt *ck = calloc(1, sizeof *ck);
    char *mp = path_join(path, CK_META);
    if (!ck || !mp || !(ck->dir = str_dup(path))) {
        free(mp);
        dt_ckpt_close(ck);
        dt_error(DT_ERR_OOM, "ckpt_open: %s", path);
        return NULL;
    }
    json_t *files = NULL;
    dt_status st = load_meta(ck, mp);
    if (st == DT_OK) st = check_meta(ck, mp, &files);
    if (st == DT_OK) st = verify_files(ck, files, path);
    free(mp);
    if (st != DT_OK) {
        DT_KEEP_ERROR(dt_ckpt_close(ck));
        return NULL;
    }
    return ck;
}

const char *dt_ckpt_path(dt_ckpt *ck, const char *relname) {
    if (!ck) {
        dt_error(DT_ERR_INVALID, "ckpt_path: NULL checkpoint");
        return NULL;
    }
    if (!relname) return ck->dir;
    for (int i = 0; i < ck->n; i++)
        if (!strcmp(ck->names[i], relname)) return ck->paths[i];
    char list[512] = "";
    size_t used = 0;
    for (int i = 0; i < ck->n && used < sizeof list - 64; i++)
        used +=
            (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", ck->names[i]);
    dt_error(DT_ERR_INVALID, "%s: the checkpoint has no file \"%s\"; it has: %s", ck->dir, relname,
             ck->n ? list : "(no files)");
    return NULL;
}

const json_t *dt_ckpt_metadata(const dt_ckpt *ck) {
    return ck ? ck->meta : NULL;
}
int dt_ckpt_file_count(const dt_ckpt *ck) {
    return ck ? ck->n : 0;
}

const char *dt_ckpt_file_name(const dt_ckpt *ck, int i) {
    return ck && i >= 0 && i < ck->n ? ck->names[i] : NULL;
}

int64_t dt_ckpt_file_size(const dt_ckpt *ck, int i) {
    return ck && i >= 0 && i < ck->n ? ck->sizes[i] : -1;
}

/* ---- removal and listing ---- */

dt_status dt_ckpt_remove(const char *path) {
    if (!path || !*path) return dt_error(DT_ERR_INVALID, "ckpt_remove: empty path");
    char *p = str_dup(path);
    if (!p) return dt_error(DT_ERR_OOM, "ckpt_remove: %s", path);
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
    const char *base = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
    struct stat sb;
    dt_status st = DT_OK;
    if (lstat(p, &sb) != 0)
        st = dt_error(DT_ERR_IO, "%s: cannot remove the checkpoint: %s", p, strerror(errno));
    else if (S_ISLNK(sb.st_mode) || !S_ISDIR(sb.st_mode))
        st = dt_error(DT_ERR_INVALID,
                      "%s: not a directory (a checkpoint is one); refusing to "
                      "remove it",
                      p);
    else if (!strcmp(base, ".") || !strcmp(base, "..") ||
             (!strstr(base, CK_TMP_TAG) && !is_checkpoint_dir(p)))
        st = dt_error(DT_ERR_INVALID,
                      "%s: does not look like a checkpoint (no metadata.json); "
                      "refusing to remove it",
                      p);
    if (st == DT_OK) st = dt__ckpt_launcher_alive(p);
    if (st != DT_OK) {
        free(p);
        return st;
    }
    char *victim = p;
    char *renamed = NULL;
    if (!strstr(base, CK_TMP_TAG)) { /* hide it first: never a half-deleted "checkpoint" */
        size_t len = n + 48;
        renamed = malloc(len);
        if (!renamed) {
            free(p);
            return dt_error(DT_ERR_OOM, "ckpt_remove: %s", path);
        }
        snprintf(renamed, len, "%s" CK_TMP_TAG "%ld.del", p, (long)getpid());
        rm_tree(renamed);
        if (rename(p, renamed) != 0) {
            st = dt_error(DT_ERR_IO,
                          "%s: cannot remove the checkpoint (rename failed: %s); "
                          "hint: check the permissions of its parent directory",
                          p, strerror(errno));
            free(renamed);
            free(p);
            return st;
        }
        victim = renamed;
    }
    int err = rm_tree(victim);
    if (err)
        st = dt_error(DT_ERR_IO, "%s: removal incomplete (%s); what is left is in %s", p,
                      strerror(err), victim);
    free(renamed);
    free(p);
    return st;
}

static int verscmp(const void *a, const void *b) {
    return strverscmp(*(char *const *)a, *(char *const *)b);
}

void dt_ckpt_list_free(char **names) {
    if (!names) return;
    for (char **p = names; *p; p++) free(*p);
    free(names);
}

dt_status dt_ckpt_list(const char *dir, char ***names, int *count) {
    if (!dir || !names) return dt_error(DT_ERR_INVALID, "ckpt_list: NULL argument");
    *names = NULL;
    if (count) *count = 0;
    DIR *d = opendir(dir);
    if (!d && errno == ENOENT) {
        *names = calloc(1, sizeof **names);
        return *names ? DT_OK : dt_error(DT_ERR_OOM, "ckpt_list: %s", dir);
    }
    if (!d) return dt_error(DT_ERR_IO, "%s: cannot list checkpoints: %s", dir, strerror(errno));
    int n = 0, cap = 16;
    char **v = calloc((size_t)cap + 1, sizeof *v);
    dt_status st = v ? DT_OK : dt_error(DT_ERR_OOM, "ckpt_list: %s", dir);
    struct dirent *e;
    while (st == DT_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.' || strstr(e->d_name, CK_TMP_TAG)) continue;
        char *full = path_join(dir, e->d_name);
        struct stat sb;
        bool ok = full && lstat(full, &sb) == 0 && S_ISDIR(sb.st_mode) && is_checkpoint_dir(full);
        free(full);
        if (!ok) continue;
        if (n == cap) {
            char **nv = realloc(v, ((size_t)cap * 2 + 1) * sizeof *v);
            if (!nv) {
                st = dt_error(DT_ERR_OOM, "ckpt_list: %s", dir);
                break;
            }
            v = nv;
            cap *= 2;
        }
        if (!(v[n] = str_dup(e->d_name))) {
            st = dt_error(DT_ERR_OOM, "ckpt_list: %s", dir);
            break;
        }
        v[++n] = NULL;
    }
    closedir(d);
    if (st != DT_OK) {
        dt_ckpt_list_free(v);
        return st;
    }
    qsort(v, (size_t)n, sizeof *v, verscmp);
    *names = v;
    if (count) *count = n;
    return DT_OK;
}
