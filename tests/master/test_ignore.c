/* test_ignore.c — the snapshot's ignore patterns (src/master/ignore.c): a table of paths with
 * the verdicts git gives for the same .gitignore (checked again against `git check-ignore` in
 * a scratch repository when git is on PATH), .dtrainignore and .detignore read together, and
 * a directory left out taking its files with it. */
#define _GNU_SOURCE
#include "master/ignore.h"
#include "fixtures/files.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char PATTERNS[] = "# a comment, then a blank line\n"
                               "\n"
                               "\\#hash\n"
                               "*.o\n"
                               "!keep.o\n"
                               "/build/\n"
                               "docs/*.md\n"
                               "**/logs\n"
                               "data/**\n"
                               "a/**/z\n"
                               "?x.txt\n"
                               "[bc]at\n"
                               "[!m]ouse\n"
                               "trail\\ \n"
                               "dir_only/\n"
                               "spaced   \n";

static const struct {
    const char *path;
    bool dir, out;
} CASES[] = {
    {"#hash", false, true},
    {"main.o", false, true},
    {"src/main.o", false, true},
    {"keep.o", false, false},
    {"src/keep.o", false, false},
    {"build", true, true},
    {"src/build", true, false},
    {"build/x.c", false, true},
    {"build/keep.o", false, true},
    {"docs/a.md", false, true},
    {"docs/sub/a.md", false, false},
    {"x/docs/a.md", false, false},
    {"logs", true, true},
    {"p/q/logs", true, true},
    {"data", true, false},
    {"data/x", false, true},
    {"data/d/e", false, true},
    {"a/z", false, true},
    {"a/b/c/z", false, true},
    {"b/a/z", false, false},
    {"ax.txt", false, true},
    {"abx.txt", false, false},
    {"x.txt", false, false},
    {"cat", false, true},
    {"bat", false, true},
    {"rat", false, false},
    {"house", false, true},
    {"mouse", false, false},
    {"trail ", false, true},
    {"trail", false, false},
    {"dir_only", true, true},
    {"spaced", false, true},
    {"README", false, false},
    {"src/README.md", false, false},
};
#define N_CASES (sizeof CASES / sizeof *CASES)

/* git's own verdict on each case, in a scratch repository holding the same tree; false when
 * git cannot be run. */
static bool git_verdicts(const char *root, bool *out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "git init -q '%s' 2> /dev/null", root);
    if (system(cmd) != 0) return false;
    snprintf(cmd, sizeof cmd, "%s/.gitignore", root);
    fx_write(cmd, PATTERNS);
    for (size_t i = 0; i < N_CASES; i++) {
        snprintf(cmd, sizeof cmd, "cd '%s' && mkdir -p \"$(dirname '%s')\" && %s '%s'", root,
                 CASES[i].path, CASES[i].dir ? "mkdir -p" : "touch", CASES[i].path);
        if (system(cmd) != 0) return false;
    }
    for (size_t i = 0; i < N_CASES; i++) {
        snprintf(cmd, sizeof cmd, "cd '%s' && git check-ignore -q -- '%s'", root, CASES[i].path);
        int rc = system(cmd);
        if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) > 1) return false;
        out[i] = WEXITSTATUS(rc) == 0;
    }
    return true;
}

static void test_table(void) {
    dt__ignore *ig = NULL;
    CHECK(dt__ignore_add(&ig, PATTERNS) == DT_OK);
    for (size_t i = 0; i < N_CASES; i++)
        CHECK_MSG(dt__ignore_match(ig, CASES[i].path, CASES[i].dir) == CASES[i].out,
                  "'%s'%s: expected %s", CASES[i].path, CASES[i].dir ? " (dir)" : "",
                  CASES[i].out ? "left out" : "kept");
    dt__ignore_free(ig);
    ig = NULL;
    CHECK(!dt__ignore_match(NULL, "anything", false));
    /* a path that is a file in one tree and a directory in another */
    CHECK(dt__ignore_add(&ig, "**/logs\ndir_only/\n") == DT_OK);
    CHECK(dt__ignore_match(ig, "logs", false) && dt__ignore_match(ig, "logs", true));
    CHECK(!dt__ignore_match(ig, "dir_only", false) && dt__ignore_match(ig, "dir_only", true));
    dt__ignore_free(ig);
}

/* The table against git, in one scratch repository holding every case's path (as a file or
 * a directory, as git looks at what is on disk). */
static void test_against_git(void) {
    char root[64];
    if (!fx_tmpdir(root, sizeof root, "ignore")) return;
    char repo[80];
    snprintf(repo, sizeof repo, "%s/%s", root, "r");
    bool git[N_CASES];
    if (git_verdicts(repo, git)) {
        for (size_t i = 0; i < N_CASES; i++)
            CHECK_MSG(git[i] == CASES[i].out, "git says '%s' is %s, the table says otherwise",
                      CASES[i].path, git[i] ? "ignored" : "not ignored");
    } else {
        fprintf(stderr, "note: git could not be run; the table alone was checked\n");
    }
    CHECK(fx_rmtree(root));
}

static void test_load_both(void) {
    char root[64];
    if (!fx_tmpdir(root, sizeof root, "ignore")) return;
    char p[128];
    dt__ignore *ig = NULL;
    CHECK(dt__ignore_load(root, &ig) == DT_OK && ig == NULL); /* no ignore files */
    snprintf(p, sizeof p, "%s/.dtrainignore", root);
    fx_write(p, "*.bin\n");
    snprintf(p, sizeof p, "%s/.detignore", root);
    fx_write(p, "ckpt/\r\n");
    CHECK(dt__ignore_load(root, &ig) == DT_OK && ig != NULL);
    CHECK(dt__ignore_match(ig, "w.bin", false));
    CHECK(dt__ignore_match(ig, "ckpt", true));
    CHECK(dt__ignore_match(ig, "ckpt/a.txt", false));
    CHECK(!dt__ignore_match(ig, "model_def.c", false));
    dt__ignore_free(ig);
    fx_rmtree(root);
}

int main(void) {
    TEST_RUN(test_table);
    TEST_RUN(test_against_git);
    TEST_RUN(test_load_both);
    TEST_END();
}
