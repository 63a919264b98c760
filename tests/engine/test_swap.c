/*
 * test_swap.c — the NVMe offload store (src/engine/swap.c).
 *
 * Everything runs in a fresh directory from mkdtemp under /tmp, removed at the end. File
 * contents are checked through an independent reader (stdio on dt__swap_path), not only
 * through the store itself. Covered: open (nested directories created, size, unique names,
 * zeros, removal on close), round trips of random data at many offsets and sizes (also with
 * every transfer cut to a few bytes, so short reads/writes are continued), FIFO completion
 * order with requests waited on in reverse, the stream over 1..4 stores with fn x = 2x + k
 * (n == 0, one chunk, n % chunk != 0, chunk == 1, chunk > n, a store longer than n), an fn
 * failure at the first / a middle / the last chunk (later chunks unchanged on disk), injected
 * read and write errors (ENOSPC, EIO) in plain requests and in the stream, open on
 * unreachable paths, a path through a regular file and a size no disk holds (no file left
 * behind), argument errors, and close with requests still queued.
 */
#define _GNU_SOURCE /* nftw */
#include "engine/swap.h"
#include "fixtures/files.h"
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[64];

/* ---- helpers ----------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static float rndf(void) {
    return (float)((double)(rnd() >> 11) / 9007199254740992.0 * 2 - 1);
}
static void fill_random(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = rndf();
}

/* floats [off, off+n) of the file at `path`, read with stdio; 0 on success */
static int read_disk(const char *path, int64_t off, float *out, int64_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    int ok = fseeko(f, (off_t)off * 4, SEEK_SET) == 0 && (int64_t)fread(out, 4, n, f) == n;
    fclose(f);
    return ok ? 0 : -1;
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static int64_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

/* ---- open / close ------------------------------------------------------------------ */

static void test_open_basic(void) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/a/b/c/", g_dir); /* missing parents, trailing slash */
    dt_swap *s = dt__swap_open(dir, "exp_avg", 1001);
    CHECK_MSG(s != NULL, "%s", dt_last_error());
    if (!s) return;
    CHECK(dt__swap_size(s) == 1001);
    CHECK(dt__swap_bytes(s) == 4004);
    CHECK(file_size(dt__swap_path(s)) == 4004);
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s/a/b/c/exp_avg.%ld.", g_dir, (long)getpid());
    CHECK_MSG(strncmp(dt__swap_path(s), prefix, strlen(prefix)) == 0, "%s", dt__swap_path(s));

    dt_swap *t = dt__swap_open(dir, "exp_avg", 0); /* same name: a different file */
    CHECK_MSG(t != NULL, "%s", dt_last_error());
    if (t) {
        CHECK(strcmp(dt__swap_path(s), dt__swap_path(t)) != 0);
        CHECK(dt__swap_bytes(t) == 0 && file_size(dt__swap_path(t)) == 0);
        CHECK(dt__swap_read(t, 0, NULL, 0) == DT_OK);
    }

    float *x = malloc(1001 * sizeof *x);
    for (int i = 0; i < 1001; i++) x[i] = 1;
    CHECK(dt__swap_read(s, 0, x, 1001) == DT_OK);
    int zeros = 1;
    for (int i = 0; i < 1001; i++) zeros &= x[i] == 0;
    CHECK(zeros);
    free(x);

    char path[512];
    snprintf(path, sizeof path, "%s", dt__swap_path(s));
    snprintf(dir, sizeof dir, "%s/a/b/c", g_dir);
    CHECK(count_entries(dir) == 2);
    dt__swap_close(s);
    dt__swap_close(t);
    dt__swap_close(NULL);
    CHECK(file_size(path) == -1 && errno == ENOENT);
    CHECK(count_entries(dir) == 0);
}

static void test_open_errors(void) {
    dt_swap *s = dt__swap_open("/proc/nonexistent/x", "m", 16);
    CHECK(s == NULL);
    CHECK(dt_last_status() == DT_ERR_IO);
    const char *m = dt_last_error();
    CHECK_MSG(strstr(m, "/proc/nonexistent") && strstr(m, "hint:"), "%s", m);
    CHECK_MSG(strstr(m, strerror(ENOENT)) || strstr(m, strerror(EACCES)) ||
                  strstr(m, strerror(EPERM)),
              "%s", m);
    dt__swap_close(s);

    /* a component that is a regular file */
    char path[256], dir[300];
    snprintf(path, sizeof path, "%s/plain", g_dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    snprintf(dir, sizeof dir, "%s/sub", path);
    s = dt__swap_open(dir, "m", 16);
    CHECK(s == NULL && dt_last_status() == DT_ERR_IO);
    CHECK_MSG(strstr(dt_last_error(), strerror(ENOTDIR)) && strstr(dt_last_error(), path), "%s",
              dt_last_error());
    remove(path);

    /* a size no disk holds: reserving fails, nothing is left behind */
    snprintf(dir, sizeof dir, "%s/big", g_dir);
    s = dt__swap_open(dir, "huge", (int64_t)1 << 58);
    CHECK(s == NULL && dt_last_status() == DT_ERR_IO);
    CHECK_MSG(strstr(dt_last_error(), "big/huge.") && strstr(dt_last_error(), "hint:"), "%s",
              dt_last_error());
    CHECK(count_entries(dir) == 0);
    dt__swap_close(s);

    /* argument errors */
    CHECK(dt__swap_open(g_dir, "a/b", 4) == NULL && dt_last_status() == DT_ERR_INVALID);
    CHECK(dt__swap_open(g_dir, "", 4) == NULL && dt_last_status() == DT_ERR_INVALID);
    CHECK(dt__swap_open("", "x", 4) == NULL && dt_last_status() == DT_ERR_INVALID);
    CHECK(dt__swap_open(g_dir, "x", -1) == NULL && dt_last_status() == DT_ERR_INVALID);
    CHECK(dt__swap_open(g_dir, "x", INT64_MAX) == NULL && dt_last_status() == DT_ERR_INVALID);
}

/* ---- requests ---------------------------------------------------------------------- */

static void roundtrip(dt_swap *s, int64_t size, float *ref, float *buf, int64_t max_io) {
    dt__swap_set_max_io(s, max_io);
    int bad = 0, bad_disk = 0, fails = 0;
    for (int it = 0; it < 200; it++) {
        int64_t n = (int64_t)(rnd() % (uint64_t)(it % 4 == 0 ? 8 : size + 1));
        if (it == 0) n = size;
        int64_t off = (int64_t)(rnd() % (uint64_t)(size - n + 1));
        fill_random(buf, n);
        if (dt__swap_write(s, off, buf, n) != DT_OK) fails++;
        memcpy(ref + off, buf, (size_t)n * 4);
        /* read back a different random range */
        int64_t n2 = (int64_t)(rnd() % (uint64_t)(size + 1));
        int64_t off2 = (int64_t)(rnd() % (uint64_t)(size - n2 + 1));
        if (dt__swap_read(s, off2, buf, n2) != DT_OK) fails++;
        if (memcmp(buf, ref + off2, (size_t)n2 * 4)) bad++;
    }
    CHECK_MSG(fails == 0, "%s", dt_last_error());
    CHECK(bad == 0);
    if (dt__swap_read(s, 0, buf, size) != DT_OK || memcmp(buf, ref, (size_t)size * 4)) bad++;
    if (read_disk(dt__swap_path(s), 0, buf, size) || memcmp(buf, ref, (size_t)size * 4)) bad_disk++;
    CHECK(bad == 0);
    CHECK(bad_disk == 0);
    dt__swap_set_max_io(s, 0);
}

static void test_roundtrip(void) {
    const int64_t size = 100003;
    dt_swap *s = dt__swap_open(g_dir, "rt", size);
    CHECK_MSG(s != NULL, "%s", dt_last_error());
    if (!s) return;
    float *ref = calloc((size_t)size, 4), *buf = calloc((size_t)size, 4);
    roundtrip(s, size, ref, buf, 0);
    roundtrip(s, size, ref, buf, 7); /* every transfer short, and not a multiple of 4 bytes */
    roundtrip(s, size, ref, buf, 4096);
    /* the edges */
    float v = 42;
    CHECK(dt__swap_write(s, size - 1, &v, 1) == DT_OK);
    v = 0;
    CHECK(dt__swap_read(s, size - 1, &v, 1) == DT_OK && v == 42);
    CHECK(dt__swap_read(s, size, &v, 0) == DT_OK);
    /* out of range */
    CHECK(dt__swap_read(s, size, &v, 1) == DT_ERR_INVALID);
    CHECK(strstr(dt_last_error(), dt__swap_path(s)) != NULL);
    CHECK(dt__swap_write(s, -1, &v, 1) == DT_ERR_INVALID);
    CHECK(dt__swap_write(s, 0, &v, -1) == DT_ERR_INVALID);
    CHECK(dt__swap_read(s, 1, buf, size) == DT_ERR_INVALID);
    CHECK(dt__swap_read(s, INT64_MAX, buf, 2) == DT_ERR_INVALID);
    free(ref);
    free(buf);
    dt__swap_close(s);
}

static void test_async_order(void) {
    const int64_t n = 50000;
    dt_swap *s = dt__swap_open(g_dir, "order", n);
    CHECK_MSG(s != NULL, "%s", dt_last_error());
    if (!s) return;
    enum { R = 12 };
    float *a[R];
    dt_swap_req req[R];
    memset(req, 0, sizeof req);
    /* write v0, read, write v1, read, ...: each read must see the write just before it */
    for (int i = 0; i < R; i++) {
        a[i] = malloc((size_t)n * 4);
        for (int64_t j = 0; j < n; j++) a[i][j] = (float)(i * 1000 + j % 977);
    }
    dt__swap_set_max_io(s, 65536);
    int st = 0;
    for (int i = 0; i < R; i += 2) {
        st |= dt__swap_write_async(s, 0, a[i], n, &req[i]);
        st |= dt__swap_read_async(s, 0, a[i + 1], n, &req[i + 1]);
    }
    CHECK(st == DT_OK);
    /* resubmitting a request not yet waited on is refused */
    CHECK(dt__swap_read_async(s, 0, a[1], n, &req[1]) == DT_ERR_STATE);
    for (int i = R - 1; i >= 0; i--) CHECK(dt__swap_wait(s, &req[i]) == DT_OK);
    CHECK(dt__swap_wait(s, &req[0]) == DT_OK); /* waiting twice: nothing in flight */
    int bad = 0;
    for (int i = 0; i < R; i += 2)
        for (int64_t j = 0; j < n; j++) bad += a[i + 1][j] != (float)(i * 1000 + j % 977);
    CHECK(bad == 0);
    /* the same buffer: write it, refill it from another range, in one queue without waiting */
    float *b = malloc((size_t)n * 4);
    fill_random(b, n);
    float *keep = malloc((size_t)n * 4);
    memcpy(keep, b, (size_t)n * 4);
    CHECK(dt__swap_write(s, 0, b, n / 2) == DT_OK);
    dt_swap_req w = {0}, r = {0};
    CHECK(dt__swap_write_async(s, n / 2, b, n / 2, &w) == DT_OK);
    CHECK(dt__swap_read_async(s, 0, b + n / 2, n / 2, &r) == DT_OK);
    CHECK(dt__swap_wait(s, &r) == DT_OK && dt__swap_wait(s, &w) == DT_OK);
    CHECK(memcmp(b + n / 2, keep, (size_t)(n / 2) * 4) == 0);
    CHECK(read_disk(dt__swap_path(s), n / 2, b, n / 2) == 0);
    CHECK(memcmp(b, keep, (size_t)(n / 2) * 4) == 0);
    free(b);
    free(keep);
    for (int i = 0; i < R; i++) free(a[i]);
    dt__swap_close(s);
}

static void test_io_errors(void) {
    dt_swap *s = dt__swap_open(g_dir, "err", 1000);
    CHECK_MSG(s != NULL, "%s", dt_last_error());
    if (!s) return;
    float x[100];
    fill_random(x, 100);
    CHECK(dt__swap_write(s, 200, x, 100) == DT_OK);
    dt__swap_fail_after(s, 2, ENOSPC); /* the second next request fails */
    dt_swap_req r1 = {0}, r2 = {0}, r3 = {0};
    float y[100];
    CHECK(dt__swap_write_async(s, 0, x, 100, &r1) == DT_OK);
    CHECK(dt__swap_write_async(s, 100, x, 100, &r2) == DT_OK);
    CHECK(dt__swap_read_async(s, 200, y, 100, &r3) == DT_OK);
    CHECK(dt__swap_wait(s, &r1) == DT_OK);
    CHECK(dt__swap_wait(s, &r2) == DT_ERR_IO);
    const char *m = dt_last_error();
    CHECK_MSG(strstr(m, dt__swap_path(s)) && strstr(m, "write") && strstr(m, "offset 400") &&
                  strstr(m, strerror(ENOSPC)) && strstr(m, "hint:"),
              "%s", m);
    CHECK(dt__swap_wait(s, &r3) == DT_OK); /* requests are independent */
    CHECK(memcmp(x, y, sizeof x) == 0);

    dt__swap_fail_after(s, 1, EIO);
    CHECK(dt__swap_read(s, 0, y, 10) == DT_ERR_IO);
    CHECK_MSG(strstr(dt_last_error(), "read") && strstr(dt_last_error(), strerror(EIO)), "%s",
              dt_last_error());
    CHECK(dt__swap_read(s, 0, y, 10) == DT_OK); /* one-shot */
    CHECK(memcmp(x, y, 10 * sizeof *y) == 0);
    dt__swap_close(s);
}

static void test_close_outstanding(void) {
    enum { R = 64, N = 8192 };
    dt_swap *s = dt__swap_open(g_dir, "close", (int64_t)R * N);
    CHECK_MSG(s != NULL, "%s", dt_last_error());
    if (!s) return;
    char path[512];
    snprintf(path, sizeof path, "%s", dt__swap_path(s));
    float *buf = malloc((size_t)R * N * 4);
    fill_random(buf, (int64_t)R * N);
    dt_swap_req *req = calloc(R, sizeof *req);
    dt__swap_set_max_io(s, 1000);
    int st = 0;
    for (int i = 0; i < R; i++)
        st |= (i % 2 ? dt__swap_read_async(s, (int64_t)i * N, buf + (int64_t)i * N, N, &req[i])
                     : dt__swap_write_async(s, (int64_t)i * N, buf + (int64_t)i * N, N, &req[i]));
    CHECK(st == DT_OK);
    dt__swap_close(s); /* waits for all 64, then removes the file */
    CHECK(file_size(path) == -1);
    free(req);
    free(buf);
}

/* ---- streaming --------------------------------------------------------------------- */

typedef struct stream_ctx {
    int nstores;
    int64_t next_off, chunk;
    int calls;
    int bad_order, bad_ptr;
    float *const *bufs;
    int fail_at; /* chunk index at which fn fails, -1 = never */
} stream_ctx;

static dt_status twice_plus_k(void *user, int64_t off, int64_t len, float *const *p) {
    stream_ctx *c = user;
    if (off != c->next_off || len < 1 || len > c->chunk) c->bad_order++;
    int slot = c->calls & 1;
    for (int k = 0; k < c->nstores; k++)
        if (p[k] != c->bufs[slot * c->nstores + k]) c->bad_ptr++;
    for (int k = 0; k < c->nstores; k++)
        for (int64_t i = 0; i < len; i++) p[k][i] = 2 * p[k][i] + (float)k;
    if (c->calls == c->fail_at) return dt_error(DT_ERR_INVALID, "boom at chunk %d", c->calls);
    c->calls++;
    c->next_off = off + len;
    return DT_OK;
}

/* Stream n floats of nstores stores of `size` floats in chunks of `chunk`; fn fails at chunk
 * fail_at (-1: never); io_fail > 0 makes request io_fail of store 0 fail with EIO. Checks the
 * file contents against the expected result. */
static void run_stream(int nstores, int64_t size, int64_t n, int64_t chunk, int fail_at,
                       int io_fail, int64_t max_io) {
    dt_swap *st[4] = {0};
    float *init[4] = {0}, *bufs[8] = {0};
    float *disk = malloc((size_t)(size ? size : 1) * 4);
    int ok = 1;
    for (int k = 0; k < nstores; k++) {
        st[k] = dt__swap_open(g_dir, "stream", size);
        if (!st[k]) {
            ok = 0;
            break;
        }
        init[k] = malloc((size_t)(size ? size : 1) * 4);
        fill_random(init[k], size);
        if (dt__swap_write(st[k], 0, init[k], size) != DT_OK) ok = 0;
        bufs[k] = malloc((size_t)chunk * 4);
        bufs[nstores + k] = malloc((size_t)chunk * 4);
        dt__swap_set_max_io(st[k], max_io);
    }
    CHECK_MSG(ok, "%s", dt_last_error());
    if (io_fail > 0 && ok) dt__swap_fail_after(st[0], io_fail, EIO);

    stream_ctx c = {.nstores = nstores, .chunk = chunk, .bufs = bufs, .fail_at = fail_at};
    const int64_t nchunks = n ? (n - 1) / chunk + 1 : 0;
    dt_status rc = ok ? dt__swap_stream(st, nstores, n, chunk, bufs, twice_plus_k, &c) : DT_OK;
    int64_t done_chunks = nchunks; /* chunks that must be transformed on disk */
    if (fail_at >= 0 && fail_at < nchunks) {
        CHECK(rc == DT_ERR_INVALID);
        CHECK_MSG(strstr(dt_last_error(), "boom at chunk"), "%s", dt_last_error());
        CHECK(c.calls == fail_at);
        done_chunks = fail_at;
    } else if (io_fail > 0) {
        CHECK(rc == DT_ERR_IO);
        CHECK_MSG(strstr(dt_last_error(), dt__swap_path(st[0])) &&
                      strstr(dt_last_error(), strerror(EIO)),
                  "%s", dt_last_error());
        CHECK(c.calls < nchunks);
        done_chunks = -1; /* which chunks got written depends on where the request fell */
    } else {
        CHECK_MSG(rc == DT_OK, "%s", dt_last_error());
        CHECK(c.calls == nchunks);
        CHECK(c.next_off == n);
    }
    CHECK(c.bad_order == 0);
    CHECK(c.bad_ptr == 0);

    int bad = 0, bad_read = 0;
    for (int k = 0; k < nstores && ok; k++) {
        if (read_disk(dt__swap_path(st[k]), 0, disk, size)) bad_read++;
        for (int64_t i = 0; i < size; i++) {
            float x0 = init[k][i], want = 2 * x0 + (float)k;
            int64_t ci = i / chunk;
            if (done_chunks < 0) { /* after an I/O error each chunk is either old or new */
                if (i < n && disk[i] != x0 && disk[i] != want) bad++;
                if (i >= n && disk[i] != x0) bad++;
            } else if (i < n && ci < done_chunks) {
                bad += disk[i] != want;
            } else {
                bad += disk[i] != x0; /* unprocessed, or beyond n */
            }
        }
    }
    CHECK_MSG(bad == 0 && bad_read == 0,
              "nstores %d size %lld n %lld chunk %lld fail_at %d io_fail %d: %d wrong", nstores,
              (long long)size, (long long)n, (long long)chunk, fail_at, io_fail, bad);
    for (int k = 0; k < nstores; k++) {
        dt__swap_close(st[k]);
        free(init[k]);
        free(bufs[k]);
        free(bufs[nstores + k]);
    }
    free(disk);
}

static void test_stream(void) {
    static const int64_t cases[][3] = {
        /* size, n, chunk */
        {64, 0, 16},           {64, 1, 16},        {64, 16, 16},       {64, 17, 16},
        {64, 64, 16},          {100, 100, 7},      {100, 100, 1},      {100, 60, 1000},
        {1000, 999, 64},       {4096, 4096, 4096}, {5000, 4097, 1024}, {100003, 100003, 8192},
        {100003, 77777, 4095},
    };
    for (int ns = 1; ns <= 4; ns++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            run_stream(ns, cases[i][0], cases[i][1], cases[i][2], -1, 0, 0);
    /* short transfers under the stream */
    run_stream(3, 5000, 4999, 333, -1, 0, 13);
    /* fn failing at the first, a middle and the last chunk (and one it never reaches) */
    for (int ns = 1; ns <= 4; ns++) {
        run_stream(ns, 1000, 1000, 64, 0, 0, 0);
        run_stream(ns, 1000, 1000, 64, 5, 0, 0);
        run_stream(ns, 1000, 1000, 64, 15, 0, 0); /* chunk 15 is the short last one */
        run_stream(ns, 1000, 1000, 64, 16, 0, 0);
        run_stream(ns, 1000, 30, 64, 0, 0, 0); /* the only chunk */
    }
    /* I/O errors at several points of store 0's queue (reads and writes interleave) */
    for (int f = 1; f <= 8; f++) run_stream(2, 1000, 1000, 100, -1, f, 0);
}

static void test_stream_args(void) {
    dt_swap *a = dt__swap_open(g_dir, "sa", 100), *b = dt__swap_open(g_dir, "sb", 50);
    CHECK(a && b);
    if (!a || !b) {
        dt__swap_close(a);
        dt__swap_close(b);
        return;
    }
    float b0[10], b1[10], b2[10], b3[10];
    float *bufs[4] = {b0, b1, b2, b3};
    stream_ctx c = {.nstores = 2, .chunk = 10, .bufs = bufs, .fail_at = -1};
    dt_swap *two[2] = {a, b}, *same[2] = {a, a};
    CHECK(dt__swap_stream(two, 2, 51, 10, bufs, twice_plus_k, &c) == DT_ERR_INVALID);
    CHECK(strstr(dt_last_error(), dt__swap_path(b)) != NULL);
    CHECK(dt__swap_stream(same, 2, 10, 10, bufs, twice_plus_k, &c) == DT_ERR_INVALID);
    CHECK(dt__swap_stream(two, 0, 10, 10, bufs, twice_plus_k, &c) == DT_ERR_INVALID);
    CHECK(dt__swap_stream(two, 2, 10, 0, bufs, twice_plus_k, &c) == DT_ERR_INVALID);
    CHECK(dt__swap_stream(two, 2, -1, 10, bufs, twice_plus_k, &c) == DT_ERR_INVALID);
    CHECK(dt__swap_stream(two, 2, 10, 10, bufs, NULL, &c) == DT_ERR_INVALID);
    CHECK(c.calls == 0);
    CHECK(dt__swap_stream(two, 2, 50, 10, bufs, twice_plus_k, &c) == DT_OK);
    CHECK(c.calls == 5);
    dt__swap_close(a);
    dt__swap_close(b);
}

int main(void) {
    if (!fx_tmpdir(g_dir, sizeof g_dir, "test-swap")) return 1;
    TEST_RUN(test_open_basic);
    TEST_RUN(test_open_errors);
    TEST_RUN(test_roundtrip);
    TEST_RUN(test_async_order);
    TEST_RUN(test_io_errors);
    TEST_RUN(test_close_outstanding);
    TEST_RUN(test_stream);
    TEST_RUN(test_stream_args);
    /* every store removed its file: only the directories made by test_open_basic remain */
    int left = 0;
    char p[128];
    snprintf(p, sizeof p, "%s/a/b/c", g_dir);
    left += count_entries(p);
    snprintf(p, sizeof p, "%s/big", g_dir);
    left += count_entries(p) > 0;
    CHECK(left == 0);
    CHECK(count_entries(g_dir) == 2); /* a/ and big/ */
    nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    CHECK(access(g_dir, F_OK) != 0);
    TEST_END();
}
