/* Tests for src/base/path.c: dt_path_within, the containment check for paths from configs,
 * checkpoints and requests — lexical escapes, absolute paths inside and outside the root, the
 * root "/", symbolic links below the root, long paths and empty strings. */
#include "base/path.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];
static char out[4096];

static bool msg_has(const char *s) {
    bool ok = strstr(dt_last_error(), s) != NULL;
    if (!ok) fprintf(stderr, "  message: %s\n  lacks: %s\n", dt_last_error(), s);
    return ok;
}

/* dt_path_within(root, rel, lexically) gives `want` */
static bool lex_ok(const char *root, const char *rel, const char *want) {
    dt_status st = dt_path_within(root, rel, DT_PATH_LEXICAL, out, sizeof out);
    if (st != DT_OK || strcmp(out, want)) {
        fprintf(stderr, "  \"%s\" under \"%s\": %s \"%s\" (%s), want \"%s\"\n", rel, root,
                dt_status_name(st), out, dt_last_error(), want);
        return false;
    }
    return true;
}

static bool lex_bad(const char *root, const char *rel) {
    strcpy(out, "x");
    return dt_path_within(root, rel, DT_PATH_LEXICAL, out, sizeof out) == DT_ERR_INVALID &&
           out[0] == 0;
}

static void test_relative(void) {
    static const char *const inside[][3] = {
        {"/data/ckpts", "exp1", "/data/ckpts/exp1"},
        {"/data/ckpts/", "exp1/", "/data/ckpts/exp1"},
        {"/data//ckpts/.", "./a//b/./c", "/data/ckpts/a/b/c"},
        {"/data/ckpts", "a/../b", "/data/ckpts/b"},
        {"/data/ckpts", "a/..", "/data/ckpts"},
        {"/data/ckpts", ".", "/data/ckpts"},
        {"ckpts", "a", "ckpts/a"},
        {".", "a/b", "./a/b"},
        {"../up", "a", "../up/a"}, /* the root's own ".." is the caller's choice */
        {"/data/ckpts", "..a/b..", "/data/ckpts/..a/b.."},
    };
    for (size_t i = 0; i < sizeof inside / sizeof *inside; i++)
        CHECK(lex_ok(inside[i][0], inside[i][1], inside[i][2]));

    /* climbing out */
    CHECK(lex_bad("/data/ckpts", "../../../etc/cron.d"));
    CHECK(msg_has("\"../../../etc/cron.d\" climbs out of \"/data/ckpts\": its component 1 "
                  "(\"..\") goes above it; hint: use a path inside \"/data/ckpts\""));
    CHECK(lex_bad("/data/ckpts", "a/../../x"));
    CHECK(msg_has("component 3 (\"..\")"));
    CHECK(lex_bad("/data/ckpts", ".."));
    CHECK(lex_bad("/data/ckpts", "a/b/../../.."));
    CHECK(lex_bad("/", "../etc")); /* even where the kernel would stay at "/" */
}

static void test_absolute(void) {
    CHECK(lex_ok("/data/ckpts", "/data/ckpts/exp1", "/data/ckpts/exp1"));
    CHECK(lex_ok("/data/ckpts/", "/data/ckpts", "/data/ckpts"));
    CHECK(lex_ok("/data/ckpts", "//data/./ckpts//x/", "/data/ckpts/x"));
    CHECK(lex_ok("/data/ckpts", "/data/ckpts/a/../b", "/data/ckpts/b"));
    CHECK(lex_bad("/data/ckpts", "/data/ckptsx"));
    CHECK(msg_has("\"/data/ckptsx\" is absolute and not under \"/data/ckpts\"; hint: give a "
                  "path relative to \"/data/ckpts\", or an absolute one inside it"));
    CHECK(lex_bad("/data/ckpts", "/data/ckpts/../etc"));
    CHECK(lex_bad("/data/ckpts", "/etc/cron.d"));
    CHECK(lex_bad("/data/ckpts", "/"));
    CHECK(lex_bad("ckpts", "/ckpts/x"));
    CHECK(msg_has("is absolute but the directory it must stay in, \"ckpts\", is relative"));
    /* the root "/" contains every absolute path */
    static const char *const under_slash[][3] = {
        {"/", "/srv/x", "/srv/x"}, {"/", "srv/x", "/srv/x"}, {"//", "/srv/../srv/x", "/srv/x"},
        {"/", "/", "/"},           {"/", "/..", "/"},        {"/", ".", "/"},
    };
    for (size_t i = 0; i < sizeof under_slash / sizeof *under_slash; i++)
        CHECK(lex_ok(under_slash[i][0], under_slash[i][1], under_slash[i][2]));
}

static void test_empty_and_long(void) {
    CHECK(lex_bad("/data", ""));
    CHECK(msg_has("empty path under \"/data\""));
    CHECK(lex_bad("", "x"));
    CHECK(msg_has("empty root directory for \"x\""));
    CHECK(dt_path_within(NULL, "x", 0, out, sizeof out) == DT_ERR_INVALID);
    CHECK(dt_path_within("/data", NULL, 0, out, sizeof out) == DT_ERR_INVALID);
    CHECK(dt_path_within("/data", "x", 0, NULL, 0) == DT_ERR_INVALID);
    /* the result must fit: exactly, and one byte short */
    char small[8];
    CHECK(dt_path_within("/ab", "cde", 0, small, 8) == DT_OK && !strcmp(small, "/ab/cde"));
    CHECK(dt_path_within("/ab", "cdef", 0, small, 8) == DT_ERR_INVALID && small[0] == 0);
    CHECK(msg_has("the resolved path is 8 bytes, more than the 7 allowed"));
    /* a long path resolving to a short one, and a long one that does not fit */
    size_t n = 20000;
    char *rel = malloc(n + 1);
    if (!rel) return;
    for (size_t i = 0; i < n; i += 2) memcpy(rel + i, "a/", 2);
    rel[n] = 0;
    CHECK(dt_path_within("/r", rel, 0, out, sizeof out) == DT_ERR_INVALID);
    CHECK(msg_has("the resolved path is 20002 bytes, more than the 4095 allowed"));
    for (size_t i = 0; i + 3 <= n; i += 3) memcpy(rel + i, "../", 3);
    rel[0] = 'a'; /* "a./../..": climbs out at the third component */
    CHECK(dt_path_within("/r", rel, 0, out, sizeof out) == DT_ERR_INVALID &&
          msg_has("component 3"));
    for (size_t i = 0; i < n; i++) rel[i] = i % 2 ? '/' : '.';
    CHECK(lex_ok("/r", rel, "/r")); /* "./././..." is the root itself */
    rel[0] = '/';
    CHECK(lex_bad("/r", rel)); /* "//././...": "/", outside "/r" */
    free(rel);
}

/* symbolic links below the root: refused in every position, followed nowhere (in g_dir, the
 * working directory) */
static void test_symlinks(void) {
    mkdir("root", 0755);
    mkdir("root/sub", 0755);
    mkdir("outside", 0755);
    FILE *f = fopen("root/sub/file", "w");
    if (f) fclose(f);
    f = fopen("outside/hostname", "w");
    if (f) fclose(f);
    CHECK(symlink("../outside", "root/ext") == 0);
    CHECK(symlink("sub/file", "root/sub/link") == 0);
    CHECK(symlink("sub", "root/inner") == 0); /* a link inside the root: refused too */
    const char *root = "root", *want = "root/sub/file";
    CHECK(dt_path_within(root, "sub/file", DT_PATH_NOFOLLOW, out, sizeof out) == DT_OK &&
          !strcmp(out, want));
    /* not there yet: nothing below a missing component can be a link */
    CHECK(dt_path_within(root, "sub/new/deeper", DT_PATH_NOFOLLOW, out, sizeof out) == DT_OK);
    CHECK(dt_path_within(root, "new", DT_PATH_NOFOLLOW, out, sizeof out) == DT_OK);
    /* a symlinked directory component */
    CHECK(dt_path_within(root, "ext/hostname", DT_PATH_LEXICAL, out, sizeof out) == DT_OK);
    CHECK(dt_path_within(root, "ext/hostname", DT_PATH_NOFOLLOW, out, sizeof out) ==
              DT_ERR_INVALID &&
          out[0] == 0);
    char m[700];
    snprintf(m, sizeof m, "%s/ext is a symbolic link (component 1); hint: links are not followed",
             root);
    CHECK(msg_has(m));
    CHECK(msg_has("\"ext/hostname\" under"));
    CHECK(dt_path_within(root, "inner/file", DT_PATH_NOFOLLOW, out, sizeof out) == DT_ERR_INVALID);
    CHECK(dt_path_within(root, "ext/missing", DT_PATH_NOFOLLOW, out, sizeof out) == DT_ERR_INVALID);
    /* a symlink as the last component */
    CHECK(dt_path_within(root, "sub/link", DT_PATH_NOFOLLOW, out, sizeof out) == DT_ERR_INVALID);
    CHECK(msg_has("sub/link is a symbolic link (component 2)"));
    CHECK(dt_path_within(root, "ext", DT_PATH_NOFOLLOW, out, sizeof out) == DT_ERR_INVALID);
    /* ".." over a link is resolved before the file system is asked: the link is never walked */
    CHECK(dt_path_within(root, "ext/../sub/file", DT_PATH_NOFOLLOW, out, sizeof out) == DT_OK &&
          !strcmp(out, want));
    /* a file used as a directory */
    CHECK(dt_path_within(root, "sub/file/x", DT_PATH_NOFOLLOW, out, sizeof out) == DT_ERR_INVALID &&
          msg_has("sub/file is not a directory (component 2)"));
    /* the root itself may be a link (the operator's choice); what is under it is checked */
    CHECK(symlink("root", "rootlink") == 0);
    CHECK(dt_path_within("rootlink", "sub/file", DT_PATH_NOFOLLOW, out, sizeof out) == DT_OK);
    CHECK(dt_path_within("rootlink", "ext/hostname", DT_PATH_NOFOLLOW, out, sizeof out) ==
          DT_ERR_INVALID);
    /* a missing root: nothing under it exists */
    CHECK(dt_path_within("nothere", "a/b", DT_PATH_NOFOLLOW, out, sizeof out) == DT_OK);
    /* the root "/" with the file system checked */
    CHECK(dt_path_within("/", g_dir + 1, DT_PATH_NOFOLLOW, out, sizeof out) == DT_OK &&
          !strcmp(out, g_dir));
}

static void touch(const char *path) {
    FILE *f = fopen(path, "w");
    if (f) fputs("x", f), fclose(f);
}

static bool exists(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* dt_path_remove_tree: a whole tree goes, a link inside it goes without its target, and no
 * path outside the root (or the root itself) is ever removed. */
static void test_remove_tree(void) {
    char root[300], p[400];
    snprintf(root, sizeof root, "%s/rmroot", g_dir);
    CHECK(mkdir(root, 0755) == 0);
    snprintf(p, sizeof p, "%s/keep", g_dir);
    CHECK(mkdir(p, 0755) == 0);
    snprintf(p, sizeof p, "%s/keep/precious", g_dir);
    touch(p);
    snprintf(p, sizeof p, "%s/victim", root);
    CHECK(mkdir(p, 0755) == 0);
    snprintf(p, sizeof p, "%s/victim/sub", root);
    CHECK(mkdir(p, 0755) == 0);
    snprintf(p, sizeof p, "%s/victim/sub/file", root);
    touch(p);
    char target[300];
    snprintf(target, sizeof target, "%s/keep", g_dir);
    snprintf(p, sizeof p, "%s/victim/link", root);
    CHECK(symlink(target, p) == 0);

    CHECK(dt_path_remove_tree(root, "victim") == DT_OK);
    snprintf(p, sizeof p, "%s/victim", root);
    CHECK(!exists(p));
    snprintf(p, sizeof p, "%s/keep/precious", g_dir);
    CHECK(exists(p));
    CHECK(dt_path_remove_tree(root, "victim") == DT_OK); /* gone already: nothing to do */

    CHECK(dt_path_remove_tree(root, "../keep") == DT_ERR_INVALID && msg_has(".."));
    CHECK(dt_path_remove_tree(root, target) == DT_ERR_INVALID);
    CHECK(dt_path_remove_tree(root, ".") == DT_ERR_INVALID && msg_has("itself"));
    CHECK(exists(p) && exists(root));
    /* a link below the root is not followed into what it points at */
    snprintf(p, sizeof p, "%s/hop", root);
    CHECK(symlink(target, p) == 0);
    CHECK(dt_path_remove_tree(root, "hop/precious") == DT_ERR_INVALID);
    snprintf(p, sizeof p, "%s/keep/precious", g_dir);
    CHECK(exists(p));
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/dt_test_path_%ld", (long)getpid());
    if (mkdir(g_dir, 0755) != 0 || chdir(g_dir) != 0) {
        perror(g_dir);
        return 1;
    }
    TEST_RUN(test_relative);
    TEST_RUN(test_absolute);
    TEST_RUN(test_empty_and_long);
    TEST_RUN(test_symlinks);
    TEST_RUN(test_remove_tree);
    if (chdir("/") != 0) perror("/");
    if (dt_path_remove_tree("/tmp", g_dir + 5) != DT_OK) fprintf(stderr, "%s\n", dt_last_error());
    TEST_END();
}
