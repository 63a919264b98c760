/* Tests for the datasets in src/data: in-memory arrays (borrowed / copied), subsets, the IDX
 * image/label dataset (gzip'd and raw files written here), the flat token-file dataset, and
 * their error messages. Loader behaviour is in test_loader.c. */
#include "dtrain/data.h"
#include "test.h"
#include "data/data_iface.h"

#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char tmpdir[256];

static void tmp_path(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", tmpdir, name);
}

static dt_field field(const char *name, dt_dtype dt, int ndim, const int64_t *shape) {
    dt_field f = {0};
    snprintf(f.name, sizeof f.name, "%s", name);
    f.dtype = dt;
    f.ndim = ndim;
    for (int d = 0; d < ndim && d < DT_MAX_DIMS - 1; d++) f.shape[d] = shape[d];
    return f;
}

static void test_arrays(void) {
    enum { N = 6 };
    float x[N][2];
    int64_t y[N];
    for (int i = 0; i < N; i++) {
        x[i][0] = (float)i;
        x[i][1] = -0.5f * (float)i;
        y[i] = 10 * i;
    }
    int64_t s2[] = {2};
    dt_array_field a[2] = {{field("x", DT_DTYPE_F32, 1, s2), x},
                           {field("y", DT_DTYPE_I64, 0, NULL), y}};
    dt_dataset *copied = dt_dataset_from_arrays(2, a, N, true);
    dt_dataset *borrowed = dt_dataset_from_arrays(2, a, N, false);
    CHECK(copied && borrowed);
    CHECK(dt_dataset_len(copied) == N && copied->nfields == 2);
    CHECK(dt_dataset_find(copied, "y") == 1 && dt_dataset_find(copied, "z") == -1);
    CHECK(dt_field_nbytes(&copied->fields[0]) == 8 && dt_field_nbytes(&copied->fields[1]) == 8);
    float xs[2];
    int64_t ys;
    void *out[2] = {xs, &ys};
    CHECK(dt_dataset_get(copied, 4, out) == DT_OK);
    CHECK(xs[0] == 4.f && xs[1] == -2.f && ys == 40);
    /* a borrowed array sees later changes, a copied one does not */
    y[4] = 99;
    CHECK(dt_dataset_get(copied, 4, out) == DT_OK && ys == 40);
    CHECK(dt_dataset_get(borrowed, 4, out) == DT_OK && ys == 99);
    CHECK(dt_dataset_get(copied, N, out) == DT_ERR_INVALID);
    CHECK(strstr(dt_last_error(), "outside [0, 6)") != NULL);
    CHECK(dt_dataset_get(copied, -1, out) == DT_ERR_INVALID);

    /* subsets: a range and an index list, borrowed or owning their base */
    dt_dataset *sub = dt_dataset_subset(copied, 2, 5, false);
    CHECK(sub && dt_dataset_len(sub) == 3 && sub->nfields == 2);
    CHECK(dt_dataset_get(sub, 0, out) == DT_OK && ys == 20);
    CHECK(dt_dataset_get(sub, 2, out) == DT_OK && ys == 40);
    CHECK(dt_dataset_get(sub, 3, out) == DT_ERR_INVALID);
    CHECK(dt_dataset_subset(copied, 4, 7, false) == NULL && dt_last_status() == DT_ERR_INVALID);
    CHECK(strstr(dt_last_error(), "[4, 7)") != NULL);
    int64_t pick[] = {5, 0, 5};
    dt_dataset *subi = dt_dataset_subset_indices(sub, pick + 1, 1, false);
    CHECK(subi && dt_dataset_len(subi) == 1 && dt_dataset_get(subi, 0, out) == DT_OK && ys == 20);
    dt_dataset_free(subi);
    CHECK(dt_dataset_subset_indices(sub, pick, 3, false) == NULL); /* 5 >= len 3 */
    dt_dataset_free(sub);
    dt_dataset *own = dt_dataset_subset_indices(copied, pick, 3, true); /* takes `copied` */
    CHECK(own && dt_dataset_len(own) == 3);
    CHECK(dt_dataset_get(own, 1, out) == DT_OK && ys == 0 && xs[0] == 0.f);
    dt_dataset_free(own);
    dt_dataset_free(borrowed);
    dt_dataset_free(NULL);

    /* bad fields */
    dt_array_field dup[2] = {a[0], a[0]};
    CHECK(dt_dataset_from_arrays(2, dup, N, true) == NULL && dt_last_status() == DT_ERR_INVALID);
    CHECK(strstr(dt_last_error(), "twice") != NULL);
    int64_t big[6] = {1, 1, 1, 1, 1, 1};
    dt_array_field deep = {field("x", DT_DTYPE_F32, 6, big), x};
    CHECK(dt_dataset_from_arrays(1, &deep, N, false) == NULL);
    CHECK(strstr(dt_last_error(), "ndim 6") != NULL);
    dt_array_field noname = {field("", DT_DTYPE_F32, 1, s2), x};
    CHECK(dt_dataset_from_arrays(1, &noname, N, false) == NULL);
    dt_array_field nodata = {field("x", DT_DTYPE_F32, 1, s2), NULL};
    CHECK(dt_dataset_from_arrays(1, &nodata, N, false) == NULL);
    CHECK(dt_dataset_from_arrays(0, a, N, false) == NULL);
}

/* ---- IDX ------------------------------------------------------------------------------- */

static void be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Write an IDX u8 file with the given dims and `ndata` bytes of data (fewer than the dims say
 * for a truncated file; 0 means all); gzip'd when gz. */
static void write_idx_n(const char *path, int ndim, const uint32_t *dims, const uint8_t *data,
                        size_t ndata, bool gz) {
    uint8_t hdr[4 + 4 * 4] = {0, 0, 0x08, (uint8_t)ndim};
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        be32(hdr + 4 + 4 * i, dims[i]);
        n *= dims[i];
    }
    size_t hn = 4 + 4 * (size_t)ndim;
    if (ndata) n = ndata;
    if (gz) {
        gzFile f = gzopen(path, "wb");
        gzwrite(f, hdr, (unsigned)hn);
        gzwrite(f, data, (unsigned)n);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        fwrite(hdr, 1, hn, f);
        fwrite(data, 1, n, f);
        fclose(f);
    }
}

static void write_idx(const char *path, int ndim, const uint32_t *dims, const uint8_t *data,
                      bool gz) {
    write_idx_n(path, ndim, dims, data, 0, gz);
}

static void test_idx(void) {
    enum { N = 5, H = 3, W = 4 };
    uint8_t im[N * H * W], lb[N];
    for (int i = 0; i < N * H * W; i++) im[i] = (uint8_t)(i * 37 + 11);
    for (int i = 0; i < N; i++) lb[i] = (uint8_t)(9 - i);
    uint32_t idims[3] = {N, H, W}, ldims[1] = {N};
    char ip[512], lp[512], ipz[512], lpz[512], bad[512];
    tmp_path(ip, sizeof ip, "images-idx3-ubyte");
    tmp_path(lp, sizeof lp, "labels-idx1-ubyte");
    tmp_path(ipz, sizeof ipz, "images-idx3-ubyte.gz");
    tmp_path(lpz, sizeof lpz, "labels-idx1-ubyte.gz");
    write_idx(ip, 3, idims, im, false);
    write_idx(lp, 1, ldims, lb, false);
    write_idx(ipz, 3, idims, im, true);
    write_idx(lpz, 1, ldims, lb, true);
    const float mean = 0.2860f, sd = 0.3530f;
    for (int gz = 0; gz < 2; gz++) {
        for (int layout = DT_IMAGE_FLAT; layout <= DT_IMAGE_CHW; layout++) {
            dt_dataset *ds =
                dt_dataset_idx(gz ? ipz : ip, gz ? lpz : lp, mean, sd, (dt_image_layout)layout);
            CHECK_MSG(ds != NULL, "%s", dt_last_error());
            if (!ds) continue;
            CHECK(dt_dataset_len(ds) == N && ds->nfields == 2);
            const dt_field *x = &ds->fields[0], *y = &ds->fields[1];
            CHECK(strcmp(x->name, "x") == 0 && x->dtype == DT_DTYPE_F32);
            CHECK(strcmp(y->name, "y") == 0 && y->dtype == DT_DTYPE_I64 && y->ndim == 0);
            if (layout == DT_IMAGE_FLAT) CHECK(x->ndim == 1 && x->shape[0] == H * W);
            if (layout == DT_IMAGE_HW) CHECK(x->ndim == 2 && x->shape[0] == H && x->shape[1] == W);
            if (layout == DT_IMAGE_CHW)
                CHECK(x->ndim == 3 && x->shape[0] == 1 && x->shape[1] == H && x->shape[2] == W);
            float px[H * W];
            int64_t label;
            void *out[2] = {px, &label};
            int bad_px = 0;
            for (int i = 0; i < N; i++) {
                CHECK(dt_dataset_get(ds, i, out) == DT_OK);
                CHECK(label == 9 - i);
                for (int j = 0; j < H * W; j++)
                    bad_px += px[j] != (im[i * H * W + j] / 255.f - mean) / sd;
            }
            CHECK(bad_px == 0);
            dt_dataset_free(ds);
        }
    }
    /* images wide enough for the vector paths (300 = 4 x 64 + a tail of 44 for VBMI, 9 x 32 +
     * 12 for AVX2, run as isa_avx2_test_data), every pixel value present: the same bits as
     * the formula */
    {
        enum { N2 = 4, H2 = 10, W2 = 30 };
        static uint8_t im2[N2 * H2 * W2];
        uint8_t lb2[N2] = {1, 2, 3, 4};
        for (int i = 0; i < N2 * H2 * W2; i++) im2[i] = (uint8_t)(i * 7 + i / 256);
        uint32_t idims2[3] = {N2, H2, W2}, ldims2[1] = {N2};
        char ip2[512], lp2[512];
        tmp_path(ip2, sizeof ip2, "wide-images-idx3-ubyte");
        tmp_path(lp2, sizeof lp2, "wide-labels-idx1-ubyte");
        write_idx(ip2, 3, idims2, im2, false);
        write_idx(lp2, 1, ldims2, lb2, false);
        dt_dataset *ds = dt_dataset_idx(ip2, lp2, mean, sd, DT_IMAGE_FLAT);
        CHECK_MSG(ds != NULL, "%s", dt_last_error());
        int bad_px = 0, seen[256] = {0};
        for (int i = 0; ds && i < N2; i++) {
            float px[H2 * W2];
            int64_t label;
            void *out[2] = {px, &label};
            CHECK(dt_dataset_get(ds, i, out) == DT_OK && label == i + 1);
            for (int j = 0; j < H2 * W2; j++) {
                uint8_t v = im2[i * H2 * W2 + j];
                seen[v] = 1;
                float want = (v / 255.f - mean) / sd;
                bad_px += memcmp(&px[j], &want, sizeof want) != 0;
            }
        }
        int nseen = 0;
        for (int v = 0; v < 256; v++) nseen += seen[v];
        CHECK_MSG(bad_px == 0 && nseen == 256, "%d pixels differ, %d values seen", bad_px, nseen);
        dt_dataset_free(ds);
        unlink(ip2);
        unlink(lp2);
    }
    /* the MNIST family's names in a directory: gzip'd images, raw labels (the .gz is tried
     * first, the raw file when only it exists); an unknown split names the file it wanted */
    {
        char si[512], sl[512];
        tmp_path(si, sizeof si, "tr-images-idx3-ubyte.gz");
        tmp_path(sl, sizeof sl, "tr-labels-idx1-ubyte");
        write_idx(si, 3, idims, im, true);
        write_idx(sl, 1, ldims, lb, false);
        dt_dataset *ds = dt_dataset_idx_split(tmpdir, "tr", mean, sd, DT_IMAGE_CHW);
        CHECK_MSG(ds && dt_dataset_len(ds) == N && ds->fields[0].ndim == 3, "%s", dt_last_error());
        dt_dataset_free(ds);
        CHECK(dt_dataset_idx_split(tmpdir, "nope", mean, sd, DT_IMAGE_FLAT) == NULL);
        CHECK(strstr(dt_last_error(), "nope-images-idx3-ubyte.gz") != NULL);
        CHECK(dt_dataset_idx_split(NULL, "tr", mean, sd, DT_IMAGE_FLAT) == NULL);
        unlink(si);
        unlink(sl);
    }
    /* errors: missing file, counts that differ, labels that are not 1-D, std <= 0 */
    tmp_path(bad, sizeof bad, "no-such-file");
    CHECK(dt_dataset_idx(bad, lp, 0, 1, DT_IMAGE_FLAT) == NULL && dt_last_status() == DT_ERR_IO);
    CHECK(strstr(dt_last_error(), "no-such-file") != NULL);
    uint32_t ldims4[1] = {N - 1};
    tmp_path(bad, sizeof bad, "labels4.gz");
    write_idx(bad, 1, ldims4, lb, true);
    CHECK(dt_dataset_idx(ipz, bad, 0, 1, DT_IMAGE_FLAT) == NULL);
    CHECK(dt_last_status() == DT_ERR_FORMAT && strstr(dt_last_error(), "4 labels") != NULL);
    CHECK(dt_dataset_idx(ipz, ipz, 0, 1, DT_IMAGE_FLAT) == NULL); /* 3-D "labels" */
    CHECK(dt_last_status() == DT_ERR_FORMAT && strstr(dt_last_error(), "1-D labels") != NULL);
    CHECK(dt_dataset_idx(lpz, lpz, 0, 1, DT_IMAGE_FLAT) == NULL); /* 1-D "images" */
    CHECK(strstr(dt_last_error(), "3-D images") != NULL);
    CHECK(dt_dataset_idx(ipz, lpz, 0, 0, DT_IMAGE_FLAT) == NULL);
    CHECK(dt_last_status() == DT_ERR_INVALID);
    /* a truncated gzip'd file */
    tmp_path(bad, sizeof bad, "trunc.gz");
    uint32_t idims_more[3] = {N + 1, H, W};
    write_idx_n(bad, 3, idims_more, im, sizeof im, true);
    CHECK(dt_dataset_idx(bad, lpz, 0, 1, DT_IMAGE_FLAT) == NULL);
    CHECK(dt_last_status() == DT_ERR_FORMAT && strstr(dt_last_error(), "truncated") != NULL);
    const char *names[] = {ip, lp, ipz, lpz};
    for (int i = 0; i < 4; i++) unlink(names[i]);
    tmp_path(bad, sizeof bad, "labels4.gz");
    unlink(bad);
    tmp_path(bad, sizeof bad, "trunc.gz");
    unlink(bad);
}

/* ---- token files ----------------------------------------------------------------------- */

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (n) fwrite(p, 1, n, f);
    fclose(f);
}

static int64_t tok(int64_t p) {
    return (p * 7 + 3) % 50;
}

static void test_tokens(void) {
    enum { NT = 100, T = 8 };
    char p16[512], p32[512], pu32[512], bad[512];
    tmp_path(p16, sizeof p16, "train.bin");
    tmp_path(p32, sizeof p32, "train_i32.bin");
    tmp_path(pu32, sizeof pu32, "train_u32.bin");
    uint8_t b16[NT * 2], b32[NT * 4], bu32[NT * 4];
    for (int p = 0; p < NT; p++) {
        uint32_t v = (uint32_t)tok(p); /* little-endian bytes, whatever the host */
        b16[2 * p] = (uint8_t)v;
        b16[2 * p + 1] = (uint8_t)(v >> 8);
        uint32_t w = v + 70000u; /* a u32 token above 16 bits */
        for (int k = 0; k < 4; k++) {
            b32[4 * p + k] = (uint8_t)(v >> (8 * k));
            bu32[4 * p + k] = (uint8_t)(w >> (8 * k));
        }
    }
    write_bytes(p16, b16, sizeof b16);
    write_bytes(p32, b32, sizeof b32);
    write_bytes(pu32, bu32, sizeof bu32);

    dt_dataset *ds = dt_dataset_tokens(p16, DT_TOKENS_U16, T, 0, 50);
    CHECK_MSG(ds != NULL, "%s", dt_last_error());
    if (!ds) return;
    CHECK(dt_dataset_len(ds) == (NT - T - 1) / T + 1); /* 12 windows */
    CHECK(ds->nfields == 2 && ds->fields[0].dtype == DT_DTYPE_I64 && ds->fields[1].ndim == 1 &&
          ds->fields[1].shape[0] == T && strcmp(ds->fields[1].name, "y") == 0);
    int64_t x[T], y[T];
    void *out[2] = {x, y};
    int bad_tok = 0;
    for (int64_t i = 0; i < dt_dataset_len(ds); i++) {
        CHECK(dt_dataset_get(ds, i, out) == DT_OK);
        for (int t = 0; t < T; t++) bad_tok += x[t] != tok(i * T + t) || y[t] != tok(i * T + t + 1);
    }
    CHECK(bad_tok == 0);
    dt_dataset_free(ds);
    /* stride 1: every window; the last one ends exactly at the file's last token */
    ds = dt_dataset_tokens(p16, DT_TOKENS_U16, T, 1, 0);
    CHECK(ds && dt_dataset_len(ds) == NT - T);
    if (ds) {
        CHECK(dt_dataset_get(ds, NT - T - 1, out) == DT_OK);
        CHECK(x[0] == tok(NT - T - 1) && y[T - 1] == tok(NT - 1));
        dt_dataset_free(ds);
    }
    /* T = 1 */
    ds = dt_dataset_tokens(p16, DT_TOKENS_U16, 1, 0, 0);
    CHECK(ds && dt_dataset_len(ds) == NT - 1);
    if (ds) {
        CHECK(dt_dataset_get(ds, 5, out) == DT_OK && x[0] == tok(5) && y[0] == tok(6));
        dt_dataset_free(ds);
    }
    ds = dt_dataset_tokens(p32, DT_TOKENS_I32, T, 3, 50);
    CHECK(ds && dt_dataset_len(ds) == (NT - T - 1) / 3 + 1);
    if (ds) {
        CHECK(dt_dataset_get(ds, 4, out) == DT_OK && x[2] == tok(14) && y[7] == tok(20));
        dt_dataset_free(ds);
    }
    ds = dt_dataset_tokens(pu32, DT_TOKENS_U32, T, 0, 0);
    CHECK(ds != NULL);
    if (ds) {
        CHECK(dt_dataset_get(ds, 1, out) == DT_OK && x[0] == tok(8) + 70000);
        dt_dataset_free(ds);
    }

    /* errors */
    CHECK(dt_dataset_tokens(pu32, DT_TOKENS_U32, T, 0, 50000) == NULL);
    CHECK(dt_last_status() == DT_ERR_FORMAT &&
          strstr(dt_last_error(), "token 70003 at position 0") &&
          strstr(dt_last_error(), "vocab size 50000"));
    CHECK(dt_dataset_tokens(p16, DT_TOKENS_U16, T, 0, 49) == NULL); /* token 49 appears */
    CHECK(strstr(dt_last_error(), ">= the vocab size 49") != NULL);
    tmp_path(bad, sizeof bad, "short.bin");
    write_bytes(bad, b16, 2 * T); /* T tokens: one short of T + 1 */
    CHECK(dt_dataset_tokens(bad, DT_TOKENS_U16, T, 0, 0) == NULL);
    CHECK(dt_last_status() == DT_ERR_FORMAT && strstr(dt_last_error(), "8 tokens") &&
          strstr(dt_last_error(), "at least 9"));
    write_bytes(bad, b16, 0); /* empty */
    CHECK(dt_dataset_tokens(bad, DT_TOKENS_U16, T, 0, 0) == NULL);
    CHECK(dt_last_status() == DT_ERR_FORMAT);
    write_bytes(bad, b16, 2 * T + 3); /* not a whole number of u16 tokens */
    CHECK(dt_dataset_tokens(bad, DT_TOKENS_U16, 2, 0, 0) == NULL);
    CHECK(strstr(dt_last_error(), "whole number") != NULL);
    uint8_t neg[4 * (T + 1)];
    memset(neg, 0, sizeof neg);
    memset(neg + 4 * 5, 0xff, 4); /* -1 at position 5 */
    write_bytes(bad, neg, sizeof neg);
    CHECK(dt_dataset_tokens(bad, DT_TOKENS_I32, T, 0, 0) == NULL);
    CHECK(strstr(dt_last_error(), "position 5 is negative") != NULL);
    dt_dataset *u = dt_dataset_tokens(bad, DT_TOKENS_U32, T, 0, 0); /* as u32: 0xffffffff */
    CHECK(u != NULL);
    if (u) {
        CHECK(dt_dataset_get(u, 0, out) == DT_OK && x[5] == 0xffffffffLL);
        dt_dataset_free(u);
    }
    tmp_path(bad, sizeof bad, "missing.bin");
    CHECK(dt_dataset_tokens(bad, DT_TOKENS_U16, T, 0, 0) == NULL && dt_last_status() == DT_ERR_IO);
    CHECK(strstr(dt_last_error(), "missing.bin") != NULL);
    CHECK(dt_dataset_tokens(p16, DT_TOKENS_U16, 0, 0, 0) == NULL);
    CHECK(dt_last_status() == DT_ERR_INVALID);
    unlink(p16);
    unlink(p32);
    unlink(pu32);
    tmp_path(bad, sizeof bad, "short.bin");
    unlink(bad);
}

int main(void) {
    /* a fresh directory of its own: a name from the pid could meet a leftover of an earlier
     * run that died with the same pid */
    snprintf(tmpdir, sizeof tmpdir, "/tmp/dt_test_data_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("test_data: mkdtemp");
        return 1;
    }
    TEST_RUN(test_arrays);
    TEST_RUN(test_idx);
    TEST_RUN(test_tokens);
    rmdir(tmpdir);
    TEST_END();
}
