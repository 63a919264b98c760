/* files.c — the CLI's file copies: a directory tree copied file by file (regular files and
 * directories only, never following a link), removed again, and an experiment's context
 * directory: the model directory plus the files and directories a user includes, copied
 * under $DTRAIN_HOME/contexts so that the experiment runs from a copy it owns (the master
 * removes it with the experiment). Every function reports its failure in err and returns
 * false; a context that fails is removed, so nothing is left behind. */
#include "cli.h"

#include "base/path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void dt_cli_seterr(char *err, size_t errn, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errn, fmt, ap);
    va_end(ap);
}

void dt_cli_remove_tree(const char *path) {
    /* path is one the command made itself: its parent is the root it must stay in */
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    if (!slash || !slash[1]) return;
    *slash = 0;
    if (dt_path_remove_tree(*parent ? parent : "/", slash + 1) != DT_OK)
        fprintf(stderr, "warning: %s\n", dt_last_error());
}

bool dt_cli_copy_file(const char *src, const char *dst, char *err, size_t errn) {
    int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    int out = in < 0 ? -1 : open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    bool ok = in >= 0 && out >= 0;
    char buf[1 << 16];
    ssize_t n = 0;
    while (ok && (n = read(in, buf, sizeof buf)) > 0)
        for (ssize_t off = 0, w; ok && off < n; off += w)
            ok = (w = write(out, buf + off, (size_t)(n - off))) > 0;
    ok = ok && n == 0;
    if (!ok) dt_cli_seterr(err, errn, "cannot copy %s to %s: %s", src, dst, strerror(errno));
    if (out >= 0 && close(out) && ok) {
        dt_cli_seterr(err, errn, "cannot write %s: %s", dst, strerror(errno));
        ok = false;
    }
    if (in >= 0) close(in);
    return ok;
}

bool dt_cli_copy_tree(const char *src, const char *dst, int64_t *files, char *err, size_t errn) {
    DIR *d = opendir(src);
    if (!d) return dt_cli_seterr(err, errn, "cannot read %s: %s", src, strerror(errno)), false;
    bool ok = true;
    struct dirent *de;
    while (ok && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char s[PATH_MAX], t[PATH_MAX];
        struct stat sb;
        snprintf(s, sizeof s, "%s/%s", src, de->d_name);
        snprintf(t, sizeof t, "%s/%s", dst, de->d_name);
        if (lstat(s, &sb)) {
            ok = false;
            dt_cli_seterr(err, errn, "cannot read %s: %s", s, strerror(errno));
        } else if (S_ISDIR(sb.st_mode)) {
            ok = !mkdir(t, 0755) ||
                 (dt_cli_seterr(err, errn, "cannot create %s: %s", t, strerror(errno)), false);
            ok = ok && dt_cli_copy_tree(s, t, files, err, errn);
        } else if (S_ISREG(sb.st_mode)) {
            ok = dt_cli_copy_file(s, t, err, errn);
            *files += ok;
        } else {
            ok = false;
            dt_cli_seterr(err, errn,
                          "%s is not a regular file or a directory; only those are copied", s);
        }
    }
    closedir(d);
    return ok;
}

/* Copy one included path (a file or a directory, links followed at the top only) into ctx
 * under its last name, which must not be taken yet. */
static bool include_one(const char *path, const char *ctx, char *err, size_t errn) {
    char real[PATH_MAX], t[PATH_MAX + 8];
    struct stat sb, taken;
    if (!realpath(path, real) || stat(real, &sb))
        return dt_cli_seterr(err, errn, "--include %s: %s", path, strerror(errno)), false;
    const char *name = strrchr(real, '/') + 1;
    if (!*name) return dt_cli_seterr(err, errn, "--include %s: cannot include /", path), false;
    snprintf(t, sizeof t, "%s/%s", ctx, name);
    if (!lstat(t, &taken))
        return dt_cli_seterr(err, errn,
                             "--include %s: the model directory (or another --include) already "
                             "has '%s'; rename one of them",
                             path, name),
               false;
    if (access(real, R_OK | (S_ISDIR(sb.st_mode) ? X_OK : 0)))
        return dt_cli_seterr(err, errn, "--include %s: cannot read it: %s", path, strerror(errno)),
               false;
    int64_t files = 0;
    if (S_ISREG(sb.st_mode)) return dt_cli_copy_file(real, t, err, errn);
    if (!S_ISDIR(sb.st_mode))
        return dt_cli_seterr(err, errn, "--include %s is not a regular file or a directory", path),
               false;
    if (mkdir(t, 0755))
        return dt_cli_seterr(err, errn, "cannot create %s: %s", t, strerror(errno)), false;
    return dt_cli_copy_tree(real, t, &files, err, errn);
}

bool dt_cli_make_context(const char *model_dir, const char *const *include, int n, char *ctx,
                         size_t cap, char *err, size_t errn) {
    char home[PATH_MAX], failed[PATH_MAX + 16];
    if (!dt_master_home(home, sizeof home))
        return dt_cli_seterr(err, errn, "cannot find the dtrain home (set DTRAIN_HOME)"), false;
    snprintf(failed, sizeof failed, "%s/contexts", home);
    mkdir(home, 0755);
    if (mkdir(failed, 0755) && errno != EEXIST)
        return dt_cli_seterr(err, errn, "cannot create %s: %s", failed, strerror(errno)), false;
    if ((size_t)snprintf(ctx, cap, "%s/ctx-XXXXXX", failed) >= cap || !mkdtemp(ctx))
        return dt_cli_seterr(err, errn, "cannot create a directory in %s: %s", failed,
                             strerror(errno)),
               false;
    int64_t files = 0;
    bool ok = dt_cli_copy_tree(model_dir, ctx, &files, err, errn);
    for (int i = 0; ok && i < n; i++) ok = include_one(include[i], ctx, err, errn);
    if (!ok) dt_cli_remove_tree(ctx);
    return ok;
}
