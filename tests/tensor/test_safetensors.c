/* Tests for src/tensor/safetensors.c: round trips of every dtype (0-dim, empty and strided
 * tensors too), metadata, dtype conversion on read, corrupted files refused with clear
 * messages, atomic writes that leave no temporary file and never damage an existing file, and
 * the files written by tools/make_goldens.py (Python's side of the format). */
#include "dtrain/tensor.h"
#include "fixtures/files.h"
#include "test.h"

#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[64];

static const char *tmp_path(const char *name) {
    return fx_path(g_dir, name);
}

static void write_raw(const char *path, uint64_t hlen_field, const char *json, size_t data_len) {
    FILE *fp = fopen(path, "wb");
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(hlen_field >> (8 * i));
    fwrite(b, 1, 8, fp);
    fwrite(json, 1, strlen(json), fp);
    for (size_t i = 0; i < data_len; i++) fputc((int)(i & 255), fp);
    fclose(fp);
}

static void write_json(const char *path, const char *json, size_t data_len) {
    write_raw(path, strlen(json), json, data_len);
}

static bool msg_has(const char *needle) {
    return strstr(dt_last_error(), needle) != NULL;
}

static void test_roundtrip(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    float f[6] = {1.5f, -2.25f, 3.f, 0.f, -0.f, 1e-3f};
    dt_tensor *a = dt_tensor_from_f32(ctx, 2, (int64_t[]){2, 3}, f);
    dt_tensor *bf = dt_to_dtype(a, DT_DTYPE_BF16);
    dt_tensor *hf = dt_to_dtype(a, DT_DTYPE_F16);
    dt_tensor *i32 = dt_tensor_new(ctx, DT_DTYPE_I32, 1, (int64_t[]){4});
    for (int i = 0; i < 4; i++) ((int32_t *)i32->data)[i] = -7 + 1000000 * i;
    dt_tensor *i64 = dt_tensor_from_i64(ctx, 1, (int64_t[]){3},
                                        (int64_t[]){INT64_MIN, 0, ((int64_t)1 << 40) + 3});
    dt_tensor *s = dt_scalar(ctx, 42.5f); /* 0-dim */
    dt_tensor *empty = dt_tensor_new(ctx, DT_DTYPE_F32, 2, (int64_t[]){0, 3});
    dt_tensor *tr = dt_transpose(a, 0, 1); /* (3, 2) strided: written in logical order */
    CHECK(tr && !dt_is_contiguous(tr));
    const char *names[] = {"z.last_in_sort", "bf", "hf", "i32", "i64", "scalar", "empty", "tr"};
    dt_tensor *ts[] = {a, bf, hf, i32, i64, s, empty, tr};
    const char *meta[] = {"format", "pt", "note", "π ≈ 3.14 \"quoted\""};
    const char *path = tmp_path("rt.safetensors");
    CHECK(dt_safetensors_write(path, 8, names, ts, 2, meta) == DT_OK);
    CHECK(fx_count_named(g_dir, ".tmp.") == 0);

    dt_safetensors *r = dt_safetensors_open(path);
    CHECK_MSG(r != NULL, "%s", dt_last_error());
    if (!r) return;
    CHECK(dt_safetensors_count(r) == 8);
    for (int i = 0; i < 8; i++) CHECK(strcmp(dt_safetensors_name(r, i), names[i]) == 0);
    CHECK(dt_safetensors_find(r, "hf") == 2 && dt_safetensors_find(r, "nope") == -1);
    CHECK(dt_safetensors_dtype(r, 1) == DT_DTYPE_BF16 &&
          dt_safetensors_dtype(r, 4) == DT_DTYPE_I64);
    CHECK(dt_safetensors_ndim(r, 5) == 0 && dt_safetensors_ndim(r, 6) == 2);
    CHECK(dt_safetensors_shape(r, 7)[0] == 3 && dt_safetensors_shape(r, 7)[1] == 2);
    CHECK(dt_safetensors_name(r, 8) == NULL && dt_safetensors_shape(r, -1) == NULL);
    CHECK(strcmp(dt_safetensors_metadata(r, "format"), "pt") == 0);
    CHECK(strcmp(dt_safetensors_metadata(r, "note"), "π ≈ 3.14 \"quoted\"") == 0);
    CHECK(dt_safetensors_metadata(r, "missing") == NULL);
    CHECK(dt_safetensors_metadata_count(r) == 2);
    CHECK(strcmp(dt_safetensors_metadata_key(r, 1), "note") == 0);

    dt_tensor *g = dt_safetensors_get(r, ctx, "z.last_in_sort");
    CHECK(g && g->dtype == DT_DTYPE_F32 && memcmp(g->data, f, sizeof f) == 0);
    g = dt_safetensors_get(r, ctx, "bf");
    CHECK(g && g->dtype == DT_DTYPE_BF16 && memcmp(g->data, bf->data, 12) == 0);
    g = dt_safetensors_get(r, ctx, "hf");
    CHECK(g && g->dtype == DT_DTYPE_F16 && memcmp(g->data, hf->data, 12) == 0);
    g = dt_safetensors_get(r, ctx, "i32");
    CHECK(g && memcmp(g->data, i32->data, 16) == 0);
    g = dt_safetensors_get(r, ctx, "i64");
    CHECK(g && ((int64_t *)g->data)[0] == INT64_MIN && ((int64_t *)g->data)[2] == (1LL << 40) + 3);
    g = dt_safetensors_get(r, ctx, "scalar");
    CHECK(g && g->ndim == 0 && dt_item(g) == 42.5);
    g = dt_safetensors_get(r, ctx, "empty");
    CHECK(g && g->ndim == 2 && g->shape[0] == 0 && g->shape[1] == 3 && dt_numel(g) == 0);
    g = dt_safetensors_get(r, ctx, "tr");
    const float want_tr[6] = {1.5f, 0.f, -2.25f, -0.f, 3.f, 1e-3f};
    CHECK(g && g->shape[0] == 3 && memcmp(g->data, want_tr, sizeof want_tr) == 0);

    /* unknown names are errors that list what the file holds */
    CHECK(dt_safetensors_get(r, ctx, "wieght") == NULL && dt_last_status() == DT_ERR_INVALID);
    CHECK(msg_has("no tensor named 'wieght'") && msg_has("'z.last_in_sort'"));
    dt_safetensors_close(r);

    /* the data buffer starts 8-byte aligned (header padded with spaces) */
    FILE *fp = fopen(path, "rb");
    unsigned char lb[8];
    CHECK(fread(lb, 1, 8, fp) == 8);
    fclose(fp);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | lb[i];
    CHECK(hl % 8 == 0);

    /* no tensors, no metadata: the smallest valid file ("{}" padded) */
    path = tmp_path("empty.safetensors");
    CHECK(dt_safetensors_write(path, 0, NULL, NULL, 0, NULL) == DT_OK);
    r = dt_safetensors_open(path);
    CHECK(r && dt_safetensors_count(r) == 0 && dt_safetensors_metadata_count(r) == 0);
    dt_safetensors_close(r);
    dt_ctx_free(ctx);
}

static void test_read_into(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    dt_tensor *a = dt_randn(ctx, 2, (int64_t[]){4, 5}, 1.f);
    dt_tensor *ab = dt_to_dtype(a, DT_DTYPE_BF16);
    dt_tensor *ids = dt_tensor_from_i64(ctx, 1, (int64_t[]){2}, (int64_t[]){3, 9});
    const char *path = tmp_path("into.safetensors");
    CHECK(dt_safetensors_write(path, 3, (const char *[]){"a", "ab", "ids"},
                               (dt_tensor *[]){a, ab, ids}, 0, NULL) == DT_OK);
    dt_safetensors *r = dt_safetensors_open(path);
    CHECK(r != NULL);
    if (!r) return;
    /* same dtype, contiguous; a heap destination */
    dt_tensor *h = dt_tensor_new_heap(ctx, DT_DTYPE_F32, 2, (int64_t[]){4, 5}, DT_MEM_PARAMS);
    CHECK(dt_safetensors_read_into(r, "a", h) == DT_OK && memcmp(h->data, a->data, 80) == 0);
    /* f32 -> bf16 and bf16 -> f32 conversions */
    dt_tensor *b = dt_tensor_new(ctx, DT_DTYPE_BF16, 2, (int64_t[]){4, 5});
    CHECK(dt_safetensors_read_into(r, "a", b) == DT_OK && memcmp(b->data, ab->data, 40) == 0);
    dt_tensor *f = dt_tensor_new(ctx, DT_DTYPE_F32, 2, (int64_t[]){4, 5});
    CHECK(dt_safetensors_read_into(r, "ab", f) == DT_OK);
    bool close = true;
    for (int i = 0; i < 20; i++) {
        float x = ((float *)a->data)[i], y = ((float *)f->data)[i];
        close &= fabsf(x - y) <= fabsf(x) * (1.f / 128);
    }
    CHECK(close);
    dt_tensor *hf = dt_tensor_new(ctx, DT_DTYPE_F16, 2, (int64_t[]){4, 5});
    CHECK(dt_safetensors_read_into(r, "a", hf) == DT_OK);
    /* a strided destination: the transpose of a (5, 4) buffer */
    dt_tensor *big = dt_tensor_new(ctx, DT_DTYPE_F32, 2, (int64_t[]){5, 4});
    dt_tensor *bt = dt_transpose(big, 0, 1);
    CHECK(dt_safetensors_read_into(r, "a", bt) == DT_OK);
    CHECK(((float *)big->data)[1 * 4 + 2] == ((float *)a->data)[2 * 5 + 1]);
    /* refusals */
    dt_tensor *wrong = dt_tensor_new(ctx, DT_DTYPE_F32, 2, (int64_t[]){5, 4});
    CHECK(dt_safetensors_read_into(r, "a", wrong) == DT_ERR_INVALID);
    CHECK(msg_has("f32[4, 5]") && msg_has("f32[5, 4]"));
    dt_tensor *fi = dt_tensor_new(ctx, DT_DTYPE_F32, 1, (int64_t[]){2});
    CHECK(dt_safetensors_read_into(r, "ids", fi) == DT_ERR_INVALID &&
          msg_has("cannot be converted"));
    dt_tensor *i32 = dt_tensor_new(ctx, DT_DTYPE_I32, 1, (int64_t[]){2});
    CHECK(dt_safetensors_read_into(r, "ids", i32) == DT_ERR_INVALID);
    dt_tensor *i64 = dt_tensor_new(ctx, DT_DTYPE_I64, 1, (int64_t[]){2});
    CHECK(dt_safetensors_read_into(r, "ids", i64) == DT_OK && ((int64_t *)i64->data)[1] == 9);
    CHECK(dt_safetensors_read_into(r, "nope", f) == DT_ERR_INVALID);
    dt_tensor_free(h);
    dt_safetensors_close(r);
    dt_ctx_free(ctx);
}

/* Each corrupted file is refused with DT_ERR_FORMAT and a message naming the file and `what`. */
static void expect_refused(const char *path, dt_status want, const char *what) {
    dt_clear_error();
    dt_safetensors *r = dt_safetensors_open(path);
    CHECK_MSG(r == NULL && dt_last_status() == want && msg_has(path) && msg_has(what),
              "expected '%s', got status %d: %s", what, (int)dt_last_status(), dt_last_error());
    dt_safetensors_close(r);
}

static void test_corrupted(void) {
    const char *p = tmp_path("bad.safetensors");
    const char *ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}";

    write_json(p, ok, 16); /* the control: valid */
    dt_safetensors *r = dt_safetensors_open(p);
    CHECK_MSG(r != NULL, "%s", dt_last_error());
    dt_safetensors_close(r);

    expect_refused(tmp_path("missing.safetensors"), DT_ERR_IO, "cannot open");
    FILE *fp = fopen(p, "wb");
    fwrite("abc", 1, 3, fp);
    fclose(fp);
    expect_refused(p, DT_ERR_FORMAT, "truncated: 3 bytes");

    write_json(p, ok, 12); /* truncated data */
    expect_refused(p, DT_ERR_FORMAT, "go past the end of the data buffer (12 bytes)");
    write_raw(p, 1234, "{}", 0); /* header length beyond the file */
    expect_refused(p, DT_ERR_FORMAT, "truncated: header says 1234 bytes, file has 2");
    write_raw(p, (uint64_t)1 << 40, "{}", 0);
    expect_refused(p, DT_ERR_FORMAT, "over the 100 MB limit");
    write_json(p, "{\"a\":{\"dtype\":\"F32\",", 0);
    expect_refused(p, DT_ERR_FORMAT, "not valid JSON");
    write_json(p, "[1, 2]", 0);
    expect_refused(p, DT_ERR_FORMAT, "not a JSON object");
    write_json(p, "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16);
    expect_refused(p, DT_ERR_FORMAT, "unsupported dtype \"F64\"");
    write_json(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}", 16);
    expect_refused(p, DT_ERR_FORMAT, "make 12 bytes but data_offsets [0, 16) hold 16");
    write_json(p,
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],"
               "\"data_offsets\":[0,16]}}",
               16);
    expect_refused(p, DT_ERR_FORMAT, "make more than");
    write_json(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,16]}}", 16);
    expect_refused(p, DT_ERR_FORMAT, "shape[0] is not a non-negative integer");
    write_json(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16,0]}}", 16);
    expect_refused(p, DT_ERR_FORMAT, "end before they begin");
    write_json(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4]}}", 16);
    expect_refused(p, DT_ERR_FORMAT, "needs \"dtype\"");
    write_json(p,
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
               16);
    expect_refused(p, DT_ERR_FORMAT, "'a' [0, 16) and 'b' [8, 16) overlap");
    write_json(p,
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}",
               16);
    expect_refused(p, DT_ERR_FORMAT, "'b': data_offsets [16, 24) go past the end");
    write_json(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16);
    expect_refused(p, DT_ERR_FORMAT, "bytes [0, 8) of the data buffer belong to no tensor");
    write_json(p, ok, 20); /* trailing bytes */
    expect_refused(p, DT_ERR_FORMAT, "bytes [16, 20) at the end of the data buffer");
    write_json(p, "{\"__metadata__\":{\"k\":1}}", 0);
    expect_refused(p, DT_ERR_FORMAT, "metadata value of 'k' is not a string");
    write_json(p,
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
               8);
    expect_refused(p, DT_ERR_FORMAT, "not valid JSON"); /* duplicate key */
    write_json(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
               4);
    expect_refused(p, DT_ERR_FORMAT, "7 dims");
    expect_refused(g_dir, DT_ERR_IO, "not a regular file");
    /* a zero dim makes the byte count 0, but the other dims must still multiply within 64
     * bits (strides and element counts are products of them) */
    write_json(p,
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4294967296,4294967296],"
               "\"data_offsets\":[0,0]}}",
               0);
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    r = dt_safetensors_open(p);
    CHECK_MSG(r == NULL && dt_last_status() == DT_ERR_FORMAT &&
                  msg_has("'a': the non-zero dims of shape [0, 4294967296, 4294967296]") &&
                  msg_has("9223372036854775807 bytes"),
              "%s", dt_last_error());
    if (r) CHECK(dt_safetensors_get(r, ctx, "a") == NULL); /* where the strides overflowed */
    dt_safetensors_close(r);
    write_json(p,
               "{\"a\":{\"dtype\":\"I64\",\"shape\":[4294967296,0,1073741824],"
               "\"data_offsets\":[0,0]}}",
               0);
    expect_refused(p, DT_ERR_FORMAT, "multiply past 9223372036854775807 bytes");
    /* the constructors dt_safetensors_get goes through refuse such a shape too */
    CHECK(dt_tensor_new(ctx, DT_DTYPE_F32, 3, (int64_t[]){0, 4294967296, 4294967296}) == NULL);
    CHECK(dt_last_status() == DT_ERR_INVALID && msg_has("more than 9223372036854775807 bytes"));
    CHECK(dt_tensor_new(ctx, DT_DTYPE_I64, 1, (int64_t[]){(int64_t)1 << 61}) == NULL);
    CHECK(dt_tensor_new(ctx, DT_DTYPE_F32, 2, (int64_t[]){0, (int64_t)1 << 60}) != NULL);
    dt_ctx_free(ctx);
    /* the writer refuses the empty name; so does the reader */
    write_json(p, "{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    expect_refused(p, DT_ERR_FORMAT, "empty name");
    /* an empty tensor anywhere in the covered range is fine, metadata may be empty */
    write_json(p,
               "{\"__metadata__\":{},\"e\":{\"dtype\":\"I64\",\"shape\":[0],"
               "\"data_offsets\":[16,16]},\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],"
               "\"data_offsets\":[0,16]}}  ",
               16);
    r = dt_safetensors_open(p);
    CHECK_MSG(r && dt_safetensors_count(r) == 2, "%s", dt_last_error());
    dt_safetensors_close(r);
}

static void test_write_failures(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    dt_tensor *a = dt_randn(ctx, 1, (int64_t[]){1000}, 1.f);
    dt_tensor *big = dt_randn(ctx, 1, (int64_t[]){100000}, 1.f);
    const char *nm[] = {"a"};

    /* a path in a missing directory: DT_ERR_IO, no temporary file anywhere */
    const char *bad = tmp_path("no/such/dir/x.safetensors");
    CHECK(dt_safetensors_write(bad, 1, nm, &a, 0, NULL) == DT_ERR_IO);
    CHECK(msg_has("cannot create") && msg_has("no/such/dir/x.safetensors.tmp."));
    CHECK(!fx_exists(tmp_path("no")));
    CHECK(fx_count_named(g_dir, ".tmp.") == 0);

    /* an existing file that every failure below must leave untouched */
    const char *path = tmp_path("keep.safetensors");
    CHECK(dt_safetensors_write(path, 1, nm, &a, 0, NULL) == DT_OK);
    long size0 = fx_size(path);

    /* invalid arguments are caught before anything is written */
    CHECK(dt_safetensors_write(path, 2, (const char *[]){"x", "x"}, (dt_tensor *[]){a, a}, 0,
                               NULL) == DT_ERR_INVALID &&
          msg_has("appears twice"));
    CHECK(dt_safetensors_write(path, 1, (const char *[]){"__metadata__"}, &a, 0, NULL) ==
          DT_ERR_INVALID);
    CHECK(dt_safetensors_write(path, 1, (const char *[]){""}, &a, 0, NULL) == DT_ERR_INVALID);
    CHECK(dt_safetensors_write(path, 1, nm, (dt_tensor *[]){NULL}, 0, NULL) == DT_ERR_INVALID);
    CHECK(dt_safetensors_write(path, 1, nm, &a, 1, (const char *[]){"k", NULL}) == DT_ERR_INVALID);

    /* a write that fails half-way (the file-size limit stands in for a full disk) */
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {.rlim_cur = 64 * 1024, .rlim_max = old.rlim_max};
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    dt_status st = dt_safetensors_write(path, 1, (const char *[]){"big"}, &big, 0, NULL);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CHECK(st == DT_ERR_IO && msg_has("write failed"));
    CHECK(fx_count_named(g_dir, ".tmp.") == 0);
    CHECK(fx_size(path) == size0);

    /* a rename that fails (the target is a directory): the temporary file is removed */
    const char *dirpath = tmp_path("adir");
    mkdir(dirpath, 0755);
    CHECK(dt_safetensors_write(dirpath, 1, nm, &a, 0, NULL) == DT_ERR_IO && msg_has("rename"));
    CHECK(fx_count_named(g_dir, ".tmp.") == 0);
    rmdir(dirpath);

    /* the kept file still reads back as written */
    dt_safetensors *r = dt_safetensors_open(path);
    dt_tensor *g = r ? dt_safetensors_get(r, ctx, "a") : NULL;
    CHECK(g && memcmp(g->data, a->data, 4000) == 0);
    dt_safetensors_close(r);

    /* overwriting an existing file works and replaces it */
    CHECK(dt_safetensors_write(path, 1, (const char *[]){"big"}, &big, 0, NULL) == DT_OK);
    CHECK(fx_size(path) > size0);
    dt_ctx_free(ctx);
}

/* Files written by tools/make_goldens.py (a hand-written encoder in Python, from torch
 * tensors): format.safetensors holds known values in every dtype. */
static void test_python_files(void) {
    const char *src = getenv("DT_SOURCE_DIR");
    CHECK_MSG(src != NULL, "DT_SOURCE_DIR is not set (CMake sets it for every test)");
    if (!src) return;
    char path[512];
    snprintf(path, sizeof path, "%s/tests/golden/data/format.safetensors", src);
    dt_safetensors *r = dt_safetensors_open(path);
    CHECK_MSG(r != NULL, "%s; hint: run /usr/bin/python3 tools/make_goldens.py", dt_last_error());
    if (!r) return;
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    CHECK(dt_safetensors_metadata(r, "generator") != NULL);
    /* each of f32, bf16, f16 holds arange(-6, 6) * 0.25 shaped (3, 4): exact in every dtype */
    const char *fl[] = {"f32", "bf16", "f16"};
    for (int k = 0; k < 3; k++) {
        dt_tensor *t = dt_tensor_new(ctx, DT_DTYPE_F32, 2, (int64_t[]){3, 4});
        CHECK_MSG(dt_safetensors_read_into(r, fl[k], t) == DT_OK, "%s", dt_last_error());
        bool ok = true;
        for (int i = 0; i < 12; i++) ok &= ((float *)t->data)[i] == (float)(i - 6) * 0.25f;
        CHECK_MSG(ok, "%s values", fl[k]);
    }
    dt_tensor *i32 = dt_safetensors_get(r, ctx, "i32"); /* arange(-3, 3) */
    CHECK(i32 && i32->dtype == DT_DTYPE_I32 && ((int32_t *)i32->data)[0] == -3 &&
          ((int32_t *)i32->data)[5] == 2);
    dt_tensor *i64 = dt_safetensors_get(r, ctx, "i64"); /* [-2^40, 0, 2^40 + 1] */
    CHECK(i64 && i64->dtype == DT_DTYPE_I64 && ((int64_t *)i64->data)[0] == -(1LL << 40) &&
          ((int64_t *)i64->data)[2] == (1LL << 40) + 1);
    dt_tensor *s = dt_safetensors_get(r, ctx, "scalar"); /* 0-dim 3.5 */
    CHECK(s && s->ndim == 0 && dt_item(s) == 3.5);
    dt_tensor *e = dt_safetensors_get(r, ctx, "empty"); /* (2, 0) */
    CHECK(e && e->ndim == 2 && e->shape[0] == 2 && e->shape[1] == 0);
    dt_safetensors_close(r);

    /* and every golden file opens and validates */
    const char *sub[] = {"ops", "models"};
    int opened = 0;
    for (int k = 0; k < 2; k++) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/tests/golden/data/%s", src, sub[k]);
        DIR *d = opendir(dir);
        CHECK_MSG(d != NULL, "cannot list %s", dir);
        if (!d) continue;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!strstr(de->d_name, ".safetensors")) continue;
            char p[1024];
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            dt_safetensors *g = dt_safetensors_open(p);
            CHECK_MSG(g && dt_safetensors_count(g) > 0, "%s", dt_last_error());
            dt_safetensors_close(g);
            opened++;
        }
        closedir(d);
    }
    CHECK(opened > 0);
    dt_ctx_free(ctx);
}

int main(void) {
    if (!fx_tmpdir(g_dir, sizeof g_dir, "st")) return 1;
    TEST_RUN(test_roundtrip);
    TEST_RUN(test_read_into);
    TEST_RUN(test_corrupted);
    TEST_RUN(test_write_failures);
    TEST_RUN(test_python_files);
    fx_rmtree(g_dir);
    TEST_END();
}
