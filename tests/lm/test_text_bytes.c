/* Byte-level text datasets (dt_dataset_text without a tokenizer, DT_TOKENS_U8):
 *   - a file's windows are its bytes: sample i is x = bytes[i*S, +T), y = bytes[i*S + 1, +T),
 *     checked against the bytes read back with stdio;
 *   - a directory reads its regular files in name order, skipping symlinks and dot files;
 *   - begin / end cut the bytes into a training and a validation part at floor(n * f), the
 *     windows of each starting at its own first byte;
 *   - dt_dataset_tokens reads a byte file as u8 tokens;
 *   - errors: a part shorter than T + 1 bytes, a bad part, a missing path, an empty directory. */
#include <dtrain/data.h>
#include <dtrain/tokenizer.h>

#include "fixtures/files.h"
#include "test.h"

#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];

/* Every window of ds against the bytes text[first, first + n). */
static int bad_windows(dt_dataset *ds, const char *text, int64_t first, int64_t n, int64_t T,
                       int64_t S) {
    int bad = dt_dataset_len(ds) != (n - T - 1) / S + 1;
    int64_t x[64], y[64];
    for (int64_t i = 0; i < dt_dataset_len(ds); i++) {
        void *out[2] = {x, y};
        bad += dt_dataset_get(ds, i, out) != DT_OK;
        for (int64_t t = 0; t < T; t++)
            bad += x[t] != (uint8_t)text[first + i * S + t] ||
                   y[t] != (uint8_t)text[first + i * S + t + 1];
    }
    return bad;
}

static void test_file_and_split(void) {
    const char *text = "The quick brown fox jumps over the lazy dog. \xc3\xa9t\xc3\xa9!\n";
    fx_write(fx_path(g_dir, "one.txt"), text);
    char p[512];
    snprintf(p, sizeof p, "%s/one.txt", g_dir);
    int64_t n = (int64_t)strlen(text);
    dt_text_dataset_opts o = {.block_size = 8, .stride = 3};
    dt_dataset *ds = dt_dataset_text(p, NULL, &o);
    CHECK(ds && ds->nfields == 2 && ds->fields[0].dtype == DT_DTYPE_I64 &&
          ds->fields[0].shape[0] == 8 && !strcmp(ds->fields[1].name, "y"));
    CHECK(ds && bad_windows(ds, text, 0, n, 8, 3) == 0);
    dt_dataset_free(ds);
    /* 90 / 10: the split point floor(n * 0.9); validation windows start at it */
    int64_t cut = (int64_t)((double)n * 0.9);
    o = (dt_text_dataset_opts){.block_size = 4, .stride = 2, .end = 0.9};
    dt_dataset *tr = dt_dataset_text(p, NULL, &o);
    o.begin = 0.9, o.end = 1;
    dt_dataset *va = dt_dataset_text(p, NULL, &o);
    CHECK(tr && bad_windows(tr, text, 0, cut, 4, 2) == 0);
    CHECK(va && bad_windows(va, text, cut, n - cut, 4, 2) == 0);
    dt_dataset_free(tr);
    dt_dataset_free(va);
    /* the same file as u8 tokens */
    ds = dt_dataset_tokens(p, DT_TOKENS_U8, 8, 3, 0);
    CHECK(ds && bad_windows(ds, text, 0, n, 8, 3) == 0);
    dt_dataset_free(ds);
    CHECK(dt_dataset_tokens(p, DT_TOKENS_U8, 8, 3, 100) == NULL && strstr(dt_last_error(), ">="));
    /* a part too short for one window; a part outside [0, 1] */
    o = (dt_text_dataset_opts){.block_size = 8, .begin = 0.95, .end = 1};
    CHECK(dt_dataset_text(p, NULL, &o) == NULL && strstr(dt_last_error(), "at least 9"));
    o = (dt_text_dataset_opts){.block_size = 8, .begin = 0.5, .end = 0.2};
    CHECK(dt_dataset_text(p, NULL, &o) == NULL && dt_last_status() == DT_ERR_INVALID);
}

static void test_directory(void) {
    char sub[300], p[400];
    snprintf(sub, sizeof sub, "%s/corpus", g_dir);
    mkdir(sub, 0700);
    CHECK(dt_dataset_text(sub, NULL, &(dt_text_dataset_opts){.block_size = 2}) == NULL &&
          strstr(dt_last_error(), "no regular file"));
    fx_write(fx_path(g_dir, "corpus/b"), "bravo bravo\n");
    fx_write(fx_path(g_dir, "corpus/a"), "alpha alpha\n");
    fx_write(fx_path(g_dir, "corpus/.hidden"), "HIDDEN");
    snprintf(p, sizeof p, "%s/b", sub);
    char link[400];
    snprintf(link, sizeof link, "%s/c-link", sub);
    CHECK(symlink(p, link) == 0); /* an alias: read once, as b */
    dt_dataset *ds = dt_dataset_text(sub, NULL, &(dt_text_dataset_opts){.block_size = 5});
    const char *want = "alpha alpha\nbravo bravo\n";
    CHECK(ds && bad_windows(ds, want, 0, (int64_t)strlen(want), 5, 5) == 0);
    dt_dataset_free(ds);
    snprintf(p, sizeof p, "%s/missing", g_dir);
    CHECK(dt_dataset_text(p, NULL, &(dt_text_dataset_opts){.block_size = 2}) == NULL &&
          dt_last_status() == DT_ERR_IO && strstr(dt_last_error(), "missing"));
}

int main(void) {
    if (!fx_tmpdir(g_dir, sizeof g_dir, "dtrain-text-bytes")) return 1;
    TEST_RUN(test_file_and_split);
    TEST_RUN(test_directory);
    fx_rmtree(g_dir);
    TEST_END();
}
