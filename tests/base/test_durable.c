/* Tests for src/base/durable.c: atomic replacement, and SQLite-style fault injection (a disk
 * that fills up on the N-th write, a failing fsync) that must leave the old file intact and no
 * temporary behind — for the module itself and for the writers built on it (safetensors, the
 * checkpoint directory writer). */
#include "base/base_impl.h"
#include "base/durable.h"
#include "dtrain/tensor.h"
#include "dtrain/trialio.h"
#include "fixtures/files.h"
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];

static const char *in_dir(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

/* The whole content of path in buf (NUL-terminated); -1 when it cannot be read. */
static long slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    return (long)n;
}

/* Entries of dir whose name holds ".tmp." (temporary files or directories). */
static int count_tmp(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

static bool msg_has(const char *s) {
    return strstr(dt_last_error(), s) != NULL;
}

static void test_atomic_write(void) {
    const char *p = in_dir("a.txt");
    char buf[256];
    CHECK(dt_file_write_atomic(p, "first\n", 6) == DT_OK);
    CHECK(slurp(p, buf, sizeof buf) == 6 && !strcmp(buf, "first\n"));
    CHECK(dt_file_write_atomic(p, "second", 6) == DT_OK);
    CHECK(slurp(p, buf, sizeof buf) == 6 && !strcmp(buf, "second"));
    CHECK(dt_file_write_atomic(p, NULL, 0) == DT_OK && slurp(p, buf, sizeof buf) == 0);
    CHECK(count_tmp(g_dir) == 0);
    /* a missing directory: DT_ERR_IO naming the temporary, nothing created */
    CHECK(dt_file_write_atomic(in_dir("no/such/x"), "x", 1) == DT_ERR_IO &&
          msg_has("cannot create") && msg_has("no/such/x.tmp."));
    /* the rename fails (the target is a directory): the temporary is removed */
    mkdir(in_dir("adir"), 0755);
    CHECK(dt_file_write_atomic(in_dir("adir"), "x", 1) == DT_ERR_IO && msg_has("rename"));
    CHECK(count_tmp(g_dir) == 0);
    rmdir(in_dir("adir"));
    CHECK(dt_dir_fsync(g_dir) == DT_OK && dt_dir_fsync_parent(p) == DT_OK);
    CHECK(dt_dir_fsync(in_dir("missing")) == DT_ERR_IO);
}

/* The streaming form: pieces, abort, a commit after a failed write. */
static void test_streaming(void) {
    const char *p = in_dir("s.txt");
    char buf[256];
    CHECK(dt_file_write_atomic(p, "old", 3) == DT_OK);
    dt_file_out *f = dt_file_out_open(p);
    CHECK(f && strstr(dt_file_out_tmp_path(f), "s.txt.tmp."));
    CHECK(dt_file_out_write(f, "ne", 2) == DT_OK && dt_file_out_write(f, "w", 1) == DT_OK);
    CHECK(slurp(p, buf, sizeof buf) == 3 && !strcmp(buf, "old")); /* not yet */
    CHECK(dt_file_out_commit(f) == DT_OK);
    CHECK(slurp(p, buf, sizeof buf) == 3 && !strcmp(buf, "new"));
    f = dt_file_out_open(p);
    CHECK(f && dt_file_out_write(f, "dropped", 7) == DT_OK);
    dt_file_out_abort(f);
    dt_file_out_abort(NULL);
    CHECK(slurp(p, buf, sizeof buf) == 3 && !strcmp(buf, "new") && count_tmp(g_dir) == 0);
    /* a failed write poisons the handle: commit refuses and cleans up */
    f = dt_file_out_open(p);
    dt__file_fail_after(DT__FAULT_WRITE, 1, ENOSPC);
    CHECK(f && dt_file_out_write(f, "x", 1) == DT_ERR_IO && msg_has("No space left"));
    CHECK(dt_file_out_write(f, "y", 1) == DT_ERR_STATE);
    CHECK(dt_file_out_commit(f) == DT_ERR_IO);
    CHECK(slurp(p, buf, sizeof buf) == 3 && !strcmp(buf, "new") && count_tmp(g_dir) == 0);
}

/* A full disk on the n-th write or a failing fsync, at every point of a streamed write: the
 * old file is intact and no temporary is left. */
static void test_fault_injection(void) {
    const char *p = in_dir("f.txt");
    char buf[256];
    CHECK(dt_file_write_atomic(p, "precious", 8) == DT_OK);
    for (int n = 1; n <= 4; n++) {
        dt__file_fail_after(DT__FAULT_WRITE, n, ENOSPC);
        dt_file_out *f = dt_file_out_open(p);
        dt_status st = DT_OK;
        for (int i = 0; i < 4 && st == DT_OK; i++) st = dt_file_out_write(f, "abcd", 4);
        if (st == DT_OK)
            st = dt_file_out_commit(f);
        else
            dt_file_out_abort(f);
        CHECK_MSG(st == DT_ERR_IO && msg_has("write failed") && msg_has("No space left"),
                  "write %d: %s", n, dt_last_error());
        CHECK(slurp(p, buf, sizeof buf) == 8 && !strcmp(buf, "precious"));
        CHECK(count_tmp(g_dir) == 0);
    }
    /* the file's fsync fails */
    dt__file_fail_after(DT__FAULT_FSYNC, 1, EIO);
    CHECK(dt_file_write_atomic(p, "lost", 4) == DT_ERR_IO && msg_has("fsync failed"));
    CHECK(slurp(p, buf, sizeof buf) == 8 && !strcmp(buf, "precious") && count_tmp(g_dir) == 0);
    /* the directory's fsync (after the rename) fails: reported, the new file is in place */
    dt__file_fail_after(DT__FAULT_FSYNC, 2, EIO);
    CHECK(dt_file_write_atomic(p, "newer", 5) == DT_ERR_IO && msg_has("fsync of the directory"));
    CHECK(slurp(p, buf, sizeof buf) == 5 && !strcmp(buf, "newer") && count_tmp(g_dir) == 0);
    /* disabled again: writes go through */
    dt__file_fail_after(DT__FAULT_WRITE, 3, ENOSPC);
    dt__file_fail_after(DT__FAULT_WRITE, 0, 0);
    CHECK(dt_file_write_atomic(p, "ok", 2) == DT_OK);
}

/* The writers built on the module keep the old file on an injected failure. */
static void test_safetensors_faults(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    dt_tensor *a = dt_randn(ctx, 1, (int64_t[]){1000}, 1.f);
    const char *nm[] = {"a"};
    const char *p = in_dir("w.safetensors");
    CHECK(dt_safetensors_write(p, 1, nm, &a, 0, NULL) == DT_OK);
    struct stat sb0, sb;
    stat(p, &sb0);
    dt_tensor *b = dt_randn(ctx, 1, (int64_t[]){5000}, 1.f);
    for (int n = 1; n <= 3; n++) { /* length, header, data */
        dt__file_fail_after(DT__FAULT_WRITE, n, ENOSPC);
        CHECK(dt_safetensors_write(p, 1, nm, &b, 0, NULL) == DT_ERR_IO);
        CHECK(stat(p, &sb) == 0 && sb.st_size == sb0.st_size && count_tmp(g_dir) == 0);
    }
    dt__file_fail_after(DT__FAULT_FSYNC, 1, EIO);
    CHECK(dt_safetensors_write(p, 1, nm, &b, 0, NULL) == DT_ERR_IO);
    CHECK(stat(p, &sb) == 0 && sb.st_size == sb0.st_size && count_tmp(g_dir) == 0);
    dt_safetensors *r = dt_safetensors_open(p);
    CHECK(r && dt_safetensors_find(r, "a") == 0);
    dt_safetensors_close(r);
    dt_ctx_free(ctx);
}

/* The checkpoint directory writer: an overwrite that fails on a write or an fsync (of a file
 * or a directory) leaves the old checkpoint whole and no temporary directory. */
static void test_checkpoint_faults(void) {
    const char *parent = in_dir("ckpts");
    dt_ckpt_writer *w = dt_ckpt_begin(parent, "c");
    CHECK(w && dt_ckpt_add_bytes(w, "x.bin", "old!", 4) == DT_OK &&
          dt_ckpt_commit(w, NULL) == DT_OK);
    for (int kind = 0; kind < 2; kind++) {
        /* writes: x.bin, d/y.bin, metadata.json; fsyncs: y.bin, d, x.bin, the top directory,
         * metadata.json (all before the rename) */
        for (int n = 1; n <= (kind ? 5 : 3); n++) {
            w = dt_ckpt_begin_ex(parent, "c", DT_CKPT_OVERWRITE);
            CHECK(w != NULL);
            dt__file_fail_after(kind ? DT__FAULT_FSYNC : DT__FAULT_WRITE, n, kind ? EIO : ENOSPC);
            dt_status st = dt_ckpt_add_bytes(w, "x.bin", "new", 3);
            if (st == DT_OK) st = dt_ckpt_add_bytes(w, "d/y.bin", "more", 4);
            if (st == DT_OK)
                st = dt_ckpt_commit(w, NULL);
            else
                dt_ckpt_abort(w);
            dt__file_fail_after(DT__FAULT_WRITE, 0, 0);
            dt__file_fail_after(DT__FAULT_FSYNC, 0, 0);
            CHECK_MSG(st == DT_ERR_IO, "%s %d: %s", kind ? "fsync" : "write", n, dt_last_error());
            CHECK(count_tmp(parent) == 0);
            dt_ckpt *ck = dt_ckpt_open(in_dir("ckpts/c"));
            char buf[16];
            CHECK(ck && dt_ckpt_file_count(ck) == 1 &&
                  slurp(dt_ckpt_path(ck, "x.bin"), buf, sizeof buf) == 4 && !strcmp(buf, "old!"));
            dt_ckpt_close(ck);
        }
    }
    CHECK(dt_ckpt_remove(in_dir("ckpts/c")) == DT_OK);
}

int main(void) {
    if (!fx_tmpdir(g_dir, sizeof g_dir, "test-durable")) return 1;
    TEST_RUN(test_atomic_write);
    TEST_RUN(test_streaming);
    TEST_RUN(test_fault_injection);
    TEST_RUN(test_safetensors_faults);
    TEST_RUN(test_checkpoint_faults);
    if (!fx_rmtree(g_dir)) fprintf(stderr, "could not remove %s\n", g_dir);
    TEST_END();
}
