/* test_pack_dir.c — a model directory packed into a snapshot (src/master/pack_dir.c) and
 * unpacked again (det_pack.c): the same files, bytes, executable bits and modification times,
 * so a build in the unpacked copy (make) rebuilds what is older than its source and no more. */
#define _GNU_SOURCE
#include "master/det_pack.h"
#include "fixtures/files.h"
#include "test.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <time.h>

static void set_mtime(const char *dir, const char *name, time_t t) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct timespec at[2] = {{.tv_sec = t}, {.tv_sec = t}};
    CHECK(utimensat(AT_FDCWD, p, at, 0) == 0);
}

static bool stat_of(const char *dir, const char *name, struct stat *sb) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, sb) == 0;
}

static void test_round_trip(void) {
    char src[64], dst[64];
    if (!fx_tmpdir(src, sizeof src, "pack_src") || !fx_tmpdir(dst, sizeof dst, "pack_dst")) {
        CHECK_MSG(0, "no scratch directory");
        return;
    }
    fx_write(fx_path(src, "train.c"), "int main(void) { return 0; }\n");
    fx_write(fx_path(src, "train"), "an old build");
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/data", src);
    CHECK(mkdir(sub, 0755) == 0);
    fx_write(fx_path(src, "data/notes.txt"), "x");
    char exe[4200];
    snprintf(exe, sizeof exe, "%s/train", src);
    CHECK(chmod(exe, 0755) == 0);
    /* the build older than its source, as after an edit */
    set_mtime(src, "train", 1000000000);
    set_mtime(src, "train.c", 1100000000);
    set_mtime(src, "data/notes.txt", 1200000000);
    dt__buf tar = {0};
    CHECK(dt__tar_snapshot(src, NULL, 0, 1 << 20, &tar) == DT_OK);
    CHECK(dt__tar_unpack(tar.p, tar.len, dst) == DT_OK);
    static const char *const names[] = {"train.c", "train", "data/notes.txt"};
    for (int i = 0; i < 3; i++) {
        struct stat a, b;
        bool both = stat_of(src, names[i], &a) && stat_of(dst, names[i], &b);
        CHECK_MSG(both && a.st_size == b.st_size && a.st_mtime == b.st_mtime &&
                      (a.st_mode & 0111) == (b.st_mode & 0111),
                  "%s: size %lld/%lld mtime %lld/%lld", names[i], both ? (long long)a.st_size : -1,
                  both ? (long long)b.st_size : -1, both ? (long long)a.st_mtime : -1,
                  both ? (long long)b.st_mtime : -1);
    }
    struct stat bin, c;
    CHECK(stat_of(dst, "train", &bin) && stat_of(dst, "train.c", &c) && bin.st_mtime < c.st_mtime);
    dt__buf_free(&tar);
    /* an entry without a time (the reference's client sends none) is written now */
    dt__buf t2 = {0};
    CHECK(dt__tar_entry(&t2, "plain.txt", false, 0644, "y", 1, 0));
    dt__tar_end(&t2);
    time_t before = time(NULL);
    CHECK(dt__tar_unpack(t2.p, t2.len, dst) == DT_OK);
    struct stat p;
    CHECK(stat_of(dst, "plain.txt", &p) && p.st_mtime >= before - 1);
    dt__buf_free(&t2);
    fx_rmtree(src);
    fx_rmtree(dst);
}

int main(void) {
    TEST_RUN(test_round_trip);
    TEST_END();
}
