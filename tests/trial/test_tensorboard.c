/* Tests for src/trial/tensorboard.c: the TFRecord framing and crc32c masks of the event file,
 * the exact protobuf bytes of a scalar event, buffering (nothing reaches the file before a
 * flush), unique file names, I/O errors naming the path (an uncreatable log directory, a write
 * that fails under RLIMIT_FSIZE).
 *
 * It also writes the event files that tests/trial/tb_read.py reads back with TensorBoard's own
 * reader (ctest runs that as test_tensorboard_py, with this test as its fixture): into
 * $DT_TB_OUT when set (the previous run's event files there are removed first), otherwise
 * into a temporary directory removed at the end. The values written here are mirrored in
 * tb_read.py: change both together. */
#include "dtrain/trialio.h"
#include "fixtures/files.h"
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_tmp[64];   /* scratch directory for this test only */
static char g_out[1024]; /* where the events for tb_read.py go */

static long file_size(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 ? (long)sb.st_size : -1;
}

static unsigned char *read_file(const char *path, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    *n = fread(b, 1, (size_t)sz, fp);
    fclose(fp);
    return b;
}

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t mask(uint32_t c) {
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* Walk the TFRecords of a file: returns the number of records, or -1 at the first framing or
 * crc error. The data of record `want` (if >= 0) is copied to rec / rec_n. */
static int scan_records(const char *path, int want, unsigned char *rec, size_t *rec_n) {
    size_t n = 0;
    unsigned char *b = read_file(path, &n);
    if (!b) return -1;
    size_t off = 0;
    int count = 0;
    while (off < n) {
        if (n - off < 12) break;
        uint64_t len = 0;
        for (int i = 0; i < 8; i++) len |= (uint64_t)b[off + i] << (8 * i);
        if (le32(b + off + 8) != mask(dt_crc32c(0, b + off, 8))) break;
        if (n - off - 12 < len + 4) break;
        const unsigned char *d = b + off + 12;
        if (le32(d + len) != mask(dt_crc32c(0, d, len))) break;
        if (count == want && rec) {
            memcpy(rec, d, len);
            *rec_n = len;
        }
        count++;
        off += 12 + len + 4;
    }
    free(b);
    return off == n ? count : -1;
}

/* Remove the event files a previous run left in dir (and dir/run2). */
static void clean_events(const char *dir) {
    char sub[1100];
    for (int k = 0; k < 2; k++) {
        if (k == 1) snprintf(sub, sizeof sub, "%s/run2", dir);
        const char *d = k == 0 ? dir : sub;
        DIR *dp = opendir(d);
        if (!dp) continue;
        struct dirent *e;
        char p[1400];
        while ((e = readdir(dp)))
            if (!strncmp(e->d_name, "events.out.tfevents.", 20)) {
                snprintf(p, sizeof p, "%s/%s", d, e->d_name);
                unlink(p);
            }
        closedir(dp);
    }
}

static int count_event_files(const char *dir) {
    DIR *dp = opendir(dir);
    if (!dp) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)))
        if (!strncmp(e->d_name, "events.out.tfevents.", 20)) n++;
    closedir(dp);
    return n;
}

static void test_crc_vector(void) {
    /* the standard CRC-32C check value, and TFRecord's mask of it */
    CHECK(dt_crc32c(0, "123456789", 9) == 0xE3069283u);
    CHECK(mask(0) == 0xa282ead8u);
}

/* The bytes of a scalar event, field by field (only wall_time's 8 bytes vary). */
static void test_exact_bytes(void) {
    char dir[128];
    snprintf(dir, sizeof dir, "%s/exact", g_tmp);
    dt_tb_writer *w = dt_tb_open(dir);
    CHECK(w != NULL);
    if (!w) return;
    char path[1024];
    snprintf(path, sizeof path, "%s", dt_tb_path(w));
    CHECK(strstr(path, "/events.out.tfevents.") != NULL);
    char pid[32];
    snprintf(pid, sizeof pid, ".%ld", (long)getpid());
    CHECK(strlen(path) > strlen(pid) && !strcmp(path + strlen(path) - strlen(pid), pid));
    CHECK(dt_tb_add_scalar(w, "a", 1.0f, 5) == DT_OK);
    CHECK(dt_tb_add_scalar(w, "neg", -2.5f, -3) == DT_OK);
    CHECK(dt_tb_close(w) == DT_OK);
    unsigned char rec[256];
    size_t n = 0;
    CHECK(scan_records(path, 0, rec, &n) == 3);
    /* Event { wall_time (09 + 8 bytes), file_version (1a 0d "brain.Event:2") } */
    CHECK(n == 9 + 2 + 13 && rec[0] == 0x09 && rec[9] == 0x1a && rec[10] == 13 &&
          !memcmp(rec + 11, "brain.Event:2", 13));
    double wt;
    memcpy(&wt, rec + 1, 8);
    CHECK(wt > 1.6e9 && wt < 4e9);
    CHECK(scan_records(path, 1, rec, &n) == 3);
    /* 10 05: step 5; 2a 0a: summary (10 bytes) { 0a 08: value (8 bytes) { 0a 01 'a': tag,
     * 15 00 00 80 3f: simple_value 1.0f } } */
    static const unsigned char want[] = {0x10, 0x05, 0x2a, 0x0a, 0x0a, 0x08, 0x0a,
                                         0x01, 'a',  0x15, 0x00, 0x00, 0x80, 0x3f};
    CHECK(n == 9 + sizeof want && rec[0] == 0x09 && !memcmp(rec + 9, want, sizeof want));
    CHECK(scan_records(path, 2, rec, &n) == 3);
    /* a negative step is a 10-byte varint of its two's complement */
    static const unsigned char want2[] = {0x10, 0xfd, 0xff, 0xff, 0xff, 0xff,
                                          0xff, 0xff, 0xff, 0xff, 0x01, 0x2a};
    CHECK(n > 9 + sizeof want2 && !memcmp(rec + 9, want2, sizeof want2));
}

static void test_buffering_and_names(void) {
    char dir[128];
    snprintf(dir, sizeof dir, "%s/buf/a/b", g_tmp); /* nested: mkdir -p */
    dt_tb_writer *w = dt_tb_open(dir);
    CHECK(w != NULL);
    if (!w) return;
    long s0 = file_size(dt_tb_path(w));
    CHECK(s0 > 0); /* the file_version record is written at once */
    for (int i = 0; i < 10; i++) CHECK(dt_tb_add_scalar(w, "x", (float)i, i) == DT_OK);
    CHECK(file_size(dt_tb_path(w)) == s0); /* buffered */
    CHECK(dt_tb_flush(w) == DT_OK);
    long s1 = file_size(dt_tb_path(w));
    CHECK(s1 > s0);
    CHECK(scan_records(dt_tb_path(w), -1, NULL, NULL) == 11);
    /* many records: the buffer flushes itself past 64 KiB */
    for (int i = 0; i < 5000; i++) CHECK(dt_tb_add_scalar(w, "y", 1.f, i) == DT_OK);
    CHECK(file_size(dt_tb_path(w)) > s1);
    /* two writers of one process in the same second get different files */
    dt_tb_writer *w2 = dt_tb_open(dir);
    CHECK(w2 != NULL && strcmp(dt_tb_path(w), dt_tb_path(w2)) != 0);
    CHECK(dt_tb_close(w2) == DT_OK);
    CHECK(count_event_files(dir) == 2);
    char path[1024];
    snprintf(path, sizeof path, "%s", dt_tb_path(w));
    CHECK(dt_tb_close(w) == DT_OK);
    CHECK(scan_records(path, -1, NULL, NULL) == 5011);
    /* bad arguments */
    dt_tb_writer *w3 = dt_tb_open(dir);
    CHECK(dt_tb_add_scalar(w3, "", 1.f, 0) == DT_ERR_INVALID);
    CHECK(dt_tb_add_scalar(w3, NULL, 1.f, 0) == DT_ERR_INVALID);
    CHECK(dt_tb_add_scalars(w3, 2, (const char *[]){"ok", ""}, (float[]){1, 2}, 0) ==
          DT_ERR_INVALID);
    CHECK(dt_tb_add_scalars(w3, 0, NULL, NULL, 0) == DT_OK);
    CHECK(dt_tb_add_text(w3, "t", NULL, 0) == DT_ERR_INVALID);
    snprintf(path, sizeof path, "%s", dt_tb_path(w3));
    CHECK(dt_tb_close(w3) == DT_OK);
    CHECK(scan_records(path, -1, NULL, NULL) == 1); /* nothing added by the failed calls */
    CHECK(dt_tb_open("") == NULL && dt_last_status() == DT_ERR_INVALID);
    CHECK(dt_tb_close(NULL) == DT_OK);
}

static void test_io_errors(void) {
    /* a log directory below a regular file cannot be created */
    char file[128], dir[160];
    snprintf(file, sizeof file, "%s/plainfile", g_tmp);
    FILE *fp = fopen(file, "w");
    fputs("x", fp);
    fclose(fp);
    snprintf(dir, sizeof dir, "%s/logs", file);
    CHECK(dt_tb_open(dir) == NULL);
    CHECK(dt_last_status() == DT_ERR_IO);
    CHECK_MSG(strstr(dt_last_error(), file) && strstr(dt_last_error(), "hint"), "%s",
              dt_last_error());

    /* a write that fails (file size limit): DT_ERR_IO naming the file, then refused */
    snprintf(dir, sizeof dir, "%s/fsize", g_tmp);
    dt_tb_writer *w = dt_tb_open(dir);
    CHECK(w != NULL);
    if (!w) return;
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {.rlim_cur = 4096, .rlim_max = old.rlim_max};
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    dt_status st = DT_OK;
    for (int i = 0; i < 20000 && st == DT_OK; i++) st = dt_tb_add_scalar(w, "loss", 1.f, i);
    dt_status st2 = dt_tb_add_scalar(w, "loss", 1.f, 0);
    dt_status st3 = dt_tb_flush(w);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CHECK(st == DT_ERR_IO);
    CHECK(st2 == DT_ERR_IO && st3 == DT_ERR_IO);
    CHECK_MSG(strstr(dt_last_error(), dt_tb_path(w)) != NULL, "%s", dt_last_error());
    dt_tb_close(w);
}

/* The events tb_read.py checks (keep the two in step). */
static void write_for_python(void) {
    clean_events(g_out);
    dt_tb_writer *w = dt_tb_open(g_out);
    CHECK_MSG(w != NULL, "%s", dt_last_error());
    if (!w) return;
    CHECK(dt_tb_add_text(w, "notes", "hello **dtrain**", 0) == DT_OK);
    for (int step = 0; step < 200; step++) {
        CHECK(dt_tb_add_scalar(w, "train/loss", 2.0f - (float)step / 128.0f, step) == DT_OK);
        if (step % 50 == 0) {
            const char *tags[] = {"val/loss", "val/accuracy"};
            float v[] = {(float)step / 1000.0f, 0.5f + (float)step / 400.0f};
            CHECK(dt_tb_add_scalars(w, 2, tags, v, step) == DT_OK);
        }
        if (step == 1) CHECK(dt_tb_add_scalar(w, "special/nan", NAN, step) == DT_OK);
        if (step == 2) CHECK(dt_tb_add_scalar(w, "special/inf", INFINITY, step) == DT_OK);
        if (step == 100) CHECK(dt_tb_flush(w) == DT_OK);
    }
    CHECK(dt_tb_add_scalar(w, "big/step", 1.0f, (int64_t)1 << 40) == DT_OK);
    char path[1200];
    snprintf(path, sizeof path, "%s", dt_tb_path(w));
    CHECK(dt_tb_close(w) == DT_OK);
    /* 1 file_version + 1 text + 200 + 4 + 2 + 1 */
    CHECK(scan_records(path, -1, NULL, NULL) == 209);

    char run2[1100];
    snprintf(run2, sizeof run2, "%s/run2", g_out);
    w = dt_tb_open(run2);
    CHECK(w != NULL);
    if (!w) return;
    CHECK(dt_tb_add_scalar(w, "run2/x", 3.0f, 7) == DT_OK);
    CHECK(dt_tb_close(w) == DT_OK);
}

int main(int argc, char **argv) {
    if (!fx_tmpdir(g_tmp, sizeof g_tmp, "test-tb")) return 1;
    const char *out = argc > 1 ? argv[1] : getenv("DT_TB_OUT");
    if (out && *out)
        snprintf(g_out, sizeof g_out, "%s", out);
    else
        snprintf(g_out, sizeof g_out, "%s/for_python", g_tmp);
    TEST_RUN(test_crc_vector);
    TEST_RUN(test_exact_bytes);
    TEST_RUN(test_buffering_and_names);
    TEST_RUN(test_io_errors);
    TEST_RUN(write_for_python);
    if (out && *out) fprintf(stderr, "event files for tb_read.py are in %s\n", g_out);
    fx_rmtree(g_tmp);
    TEST_END();
}
