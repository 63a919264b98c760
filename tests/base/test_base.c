/* Tests for src/base: errors, memory accounting and budget, arena, RNG, crc32c. */
#include "base/base_impl.h"
#include "dtrain/base.h"
#include "test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_errors(void) {
    dt_clear_error();
    CHECK(dt_last_status() == DT_OK);
    CHECK(dt_error(DT_ERR_CONFIG, "bad %s", "thing") == DT_ERR_CONFIG);
    CHECK(strcmp(dt_last_error(), "bad thing") == 0);
    CHECK(dt_last_status() == DT_ERR_CONFIG);
    /* the message may be built from the previous one */
    dt_error(DT_ERR_IO, "inner %d", 42);
    dt_error(DT_ERR_IO, "outer: %s", dt_last_error());
    CHECK(strcmp(dt_last_error(), "outer: inner 42") == 0);
    /* clean-up that raises an error of its own keeps the one it follows */
    dt_error(DT_ERR_FORMAT, "the first failure");
    DT_KEEP_ERROR({
        dt_error(DT_ERR_IO, "clean-up failed too");
        dt_clear_error();
    });
    CHECK(dt_last_status() == DT_ERR_FORMAT);
    CHECK(strcmp(dt_last_error(), "the first failure") == 0);
    dt_error_saved saved;
    dt_error_save(&saved);
    dt_error(DT_ERR_OOM, "later");
    CHECK(dt_error_restore(&saved) == DT_ERR_FORMAT);
    CHECK(strcmp(dt_last_error(), "the first failure") == 0);
    CHECK(dt_parse_bytes("64K") == 65536);
    CHECK(dt_parse_bytes("2G") == 2LL << 30);
    CHECK(dt_parse_bytes("1.5M") == 3LL << 19);
    CHECK(dt_parse_bytes("12x") == -1);
}

/* dt_parse_bytes is strict: a size is a whole number of bytes in [0, INT64_MAX], and a refusal
 * says why (so a tiny budget never silently becomes "no budget"). */
static void expect_bad_size(const char *s, const char *why) {
    dt_clear_error();
    int64_t v = dt_parse_bytes(s);
    CHECK_MSG(v == -1 && strstr(dt_last_error(), why) != NULL, "\"%s\": %lld, want -1 (%s): %s", s,
              (long long)v, why, dt_last_error());
}

static void test_parse_bytes(void) {
    CHECK(dt_parse_bytes("0") == 0);
    CHECK(dt_parse_bytes("1") == 1);
    CHECK(dt_parse_bytes("0.5K") == 512);
    CHECK(dt_parse_bytes("2GiB") == 2LL << 30);
    CHECK(dt_parse_bytes("3tb") == 3LL << 40);
    CHECK(dt_parse_bytes("1e3") == 1000);
    CHECK(dt_parse_bytes("9223372036854775807") == INT64_MAX);
    CHECK(dt_parse_bytes("8388607T") == INT64_MAX - ((1LL << 40) - 1));
    expect_bad_size("1e300", "over the largest size");
    expect_bad_size("1e999", "over the largest size");
    expect_bad_size("9223372036854775808", "over the largest size");
    expect_bad_size("99999999999999999999999", "over the largest size");
    expect_bad_size("8388608T", "over the largest size");
    expect_bad_size("9.3e18", "over the largest size");
    CHECK(dt_parse_bytes("8.5e18") == 8500000000000000000LL);
    expect_bad_size("0.1", "not a whole number of bytes");
    expect_bad_size("1e-400", "not a whole number of bytes");
    expect_bad_size("0.3K", "not a whole number of bytes");
    expect_bad_size("nan", "not a number");
    expect_bad_size("inf", "not a number");
    expect_bad_size("0x10", "not a number");
    expect_bad_size(" 1", "not a number");
    expect_bad_size("-1", "negative");
    expect_bad_size("-0.5K", "negative");
    expect_bad_size("", "empty");
    expect_bad_size("12x", "unknown unit");
    expect_bad_size("1KK", "unknown unit");
    expect_bad_size("5B", "unknown unit");
    /* the device budget from the environment names the variable and the valid form */
    static const char *const bad_env[] = {"0.1", "1e300", "nan", "-4K"};
    for (size_t i = 0; i < sizeof bad_env / sizeof *bad_env; i++) {
        setenv("DT_DEVICE_MEMORY", bad_env[i], 1);
        dt_device *d = dt_device_new("cpu", -1);
        CHECK_MSG(d == NULL && dt_last_status() == DT_ERR_CONFIG &&
                      strstr(dt_last_error(), "DT_DEVICE_MEMORY") &&
                      strstr(dt_last_error(), "9223372036854775807"),
                  "DT_DEVICE_MEMORY=%s: %s", bad_env[i], dt_last_error());
        dt_device_free(d);
    }
    setenv("DT_DEVICE_MEMORY", "1M", 1);
    dt_device *d = dt_device_new("cpu", -1);
    dt_mem_stats ms;
    if (d) dt_device_stats(d, &ms);
    CHECK(d != NULL && ms.budget == 1 << 20);
    dt_device_free(d);
    unsetenv("DT_DEVICE_MEMORY");
}

static void test_memory(void) {
    dt_device *d = dt_device_new("cpu", 1 << 20);
    void *a = dt_mem_alloc(d, DT_MEM_PARAMS, 1000);
    void *b = dt_mem_alloc(d, DT_MEM_ACTIVATIONS, 5000);
    CHECK(a && b);
    dt_mem_stats s;
    dt_device_stats(d, &s);
    CHECK(s.current[DT_MEM_PARAMS] == 1000);
    CHECK(s.total_current == 6000);
    dt_mem_free(d, DT_MEM_ACTIVATIONS, b, 5000);
    dt_device_stats(d, &s);
    CHECK(s.peak[DT_MEM_ACTIVATIONS] == 5000 && s.current[DT_MEM_ACTIVATIONS] == 0);
    CHECK(s.total_peak == 6000);
    /* the budget turns into a clean OOM that charges nothing */
    void *big = dt_mem_alloc(d, DT_MEM_OPTIM, 2 << 20);
    CHECK(big == NULL && dt_last_status() == DT_ERR_OOM);
    CHECK(strstr(dt_last_error(), "budget") != NULL);
    dt_device_stats(d, &s);
    CHECK(s.current[DT_MEM_OPTIM] == 0 && s.total_current == 1000);
    /* fault injection: the 2nd allocation fails */
    dt_device_fail_after(d, 2);
    void *c1 = dt_mem_alloc(d, DT_MEM_OTHER, 10);
    void *c2 = dt_mem_alloc(d, DT_MEM_OTHER, 10);
    void *c3 = dt_mem_alloc(d, DT_MEM_OTHER, 10);
    CHECK(c1 && !c2 && c3);
    dt_mem_free(d, DT_MEM_OTHER, c1, 10);
    dt_mem_free(d, DT_MEM_OTHER, c3, 10);
    dt_mem_free(d, DT_MEM_PARAMS, a, 1000);
    dt_device_stats(d, &s);
    CHECK(s.total_current == 0);
    dt_device_free(d);
}

static void test_arena(void) {
    dt_device *d = dt_device_new("cpu", 0);
    dt_arena *a = dt_arena_new(d, DT_MEM_ACTIVATIONS, 0);
    for (int i = 0; i < 100; i++) {
        char *p = dt_arena_alloc(a, 100000);
        CHECK(p && ((uintptr_t)p & 63) == 0 && p[99999] == 0);
        memset(p, 1, 100000);
    }
    size_t hw = dt_arena_high_water(a);
    CHECK(hw >= 100 * 100000);
    dt_arena_reset(a);
    CHECK(dt_arena_used(a) == 0);
    /* after a reset one block holds the whole step: no new blocks */
    size_t cap = dt_arena_capacity(a);
    CHECK(cap >= hw);
    for (int i = 0; i < 100; i++) {
        char *p = dt_arena_alloc(a, 100000);
        CHECK(p[0] == 0);
    }
    CHECK(dt_arena_capacity(a) == cap);
    dt_mem_stats s;
    dt_device_stats(d, &s);
    CHECK(s.current[DT_MEM_ACTIVATIONS] == (int64_t)cap);
    dt_arena_free(a);
    dt_device_stats(d, &s);
    CHECK(s.total_current == 0);
    dt_device_free(d);
}

static void test_rng(void) {
    dt_rng r;
    dt_rng_init(&r, 42);
    float a[1001], b[1001];
    dt_rng_fill_uniform(&r, a, 1001, 0.f, 1.f);
    dt_rng saved = r;
    dt_rng_fill_normal(&r, b, 1001, 0.f, 1.f);
    double mean = 0, var = 0;
    for (int i = 0; i < 1001; i++) {
        CHECK(a[i] >= 0.f && a[i] < 1.f);
        mean += b[i];
    }
    mean /= 1001;
    for (int i = 0; i < 1001; i++) var += (b[i] - mean) * (b[i] - mean);
    var /= 1001;
    CHECK(fabs(mean) < 0.1 && fabs(var - 1) < 0.15);
    /* restoring (seed, counter) reproduces the stream */
    float c[1001];
    r = saved;
    dt_rng_fill_normal(&r, c, 1001, 0.f, 1.f);
    CHECK(memcmp(b, c, sizeof b) == 0);
    /* Philox known-answer test (Random123 kat_vectors: philox4x32_10, zero ctr and key) */
    uint32_t o[4];
    dt_philox(0, 0, o);
    CHECK(o[0] == 0x6627e8d5u && o[1] == 0xe169c58du && o[2] == 0xbc57ac4cu && o[3] == 0x9b00dbd8u);
    int counts[7] = {0};
    for (int i = 0; i < 7000; i++) counts[dt_rng_below(&r, 7)]++;
    for (int i = 0; i < 7; i++) CHECK(counts[i] > 800 && counts[i] < 1200);
}

static void test_crc(void) {
    CHECK(dt_crc32c(0, "123456789", 9) == 0xE3069283u);
    uint32_t c = dt_crc32c(0, "12345", 5);
    CHECK(dt_crc32c(c, "6789", 4) == 0xE3069283u);
    CHECK(dt__crc32c_table(0, "123456789", 9) == 0xE3069283u);
    /* the instruction path (where the CPU has it) against the table: every length up to 300
     * at every alignment, chained across a split */
    unsigned char buf[320];
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < sizeof buf; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        buf[i] = (unsigned char)(s >> 56);
    }
    int bad = 0;
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n <= 300; n++) {
            uint32_t want = dt__crc32c_table(0x1234u, buf + off, n);
            bad += dt_crc32c(0x1234u, buf + off, n) != want;
            size_t h = n / 3;
            bad += dt_crc32c(dt_crc32c(0x1234u, buf + off, h), buf + off + h, n - h) != want;
        }
    CHECK(bad == 0);
}

/* dt__mkdir_p: nested directories made, existing ones accepted, and a file in the way named */
static void test_mkdir_p(void) {
    char root[] = "/tmp/dt_mkdir_XXXXXX", path[256], failed[256] = "";
    CHECK(mkdtemp(root) != NULL);
    snprintf(path, sizeof path, "%s/a/b//c/", root);
    CHECK(dt__mkdir_p(path, failed, sizeof failed) == 0);
    struct stat st;
    snprintf(path, sizeof path, "%s/a/b/c", root);
    CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK(dt__mkdir_p(path, failed, sizeof failed) == 0); /* already there */
    char file[256];
    snprintf(file, sizeof file, "%s/a/f", root);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    snprintf(path, sizeof path, "%s/a/f/g", root);
    CHECK(dt__mkdir_p(path, failed, sizeof failed) == ENOTDIR);
    CHECK_MSG(!strcmp(failed, file), "failed component '%s', want '%s'", failed, file);
    remove(file);
    const char *dirs[] = {"a/b/c", "a/b", "a", ""};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", root, dirs[i]);
        rmdir(path);
    }
}

int main(void) {
    TEST_RUN(test_errors);
    TEST_RUN(test_parse_bytes);
    TEST_RUN(test_memory);
    TEST_RUN(test_arena);
    TEST_RUN(test_rng);
    TEST_RUN(test_crc);
    TEST_RUN(test_mkdir_p);
    TEST_END();
}
