/* test_text_dataset.c — dt_dataset_text: the windows hold the tokenizer's ids of each document
 * (checked against the fixtures' tokenizers-made tokenizer) with EOS after each; JSON lines by a
 * named field; the token file is written once and reused, and a changed text makes a new one;
 * a bad JSON line is refused naming the file and line. */
#include "fixtures/files.h"
#include "test.h"

#include "dtrain/tokenizer.h"

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64], fixdir[4096];

static void write_file(const char *name, const char *s) {
    fx_write(fx_path(dir, name), s);
}

/* The expected stream: each document encoded, then EOS. */
static size_t expect(dt_tokenizer *t, const char *const *docs, int n, int64_t *out) {
    size_t k = 0;
    for (int d = 0; d < n; d++) {
        int32_t *ids;
        size_t ni;
        CHECK(dt_tokenizer_encode(t, docs[d], strlen(docs[d]), &ids, &ni) == DT_OK);
        for (size_t i = 0; i < ni; i++) out[k++] = ids[i];
        out[k++] = dt_tokenizer_eos(t);
        free(ids);
    }
    return k;
}

/* Every window of the dataset (T 4, stride 4) matches the stream. */
static void check_windows(dt_dataset *ds, const int64_t *want, size_t n) {
    CHECK(ds != NULL);
    if (!ds) return;
    CHECK(dt_dataset_len(ds) == (int64_t)((n - 5) / 4 + 1));
    for (int64_t i = 0; i < dt_dataset_len(ds); i++) {
        int64_t x[4], y[4];
        void *out[2] = {x, y};
        CHECK(dt_dataset_get(ds, i, out) == DT_OK);
        CHECK(!memcmp(x, want + 4 * i, sizeof x) && !memcmp(y, want + 4 * i + 1, sizeof y));
    }
}

static int count_cache_files(void) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strstr(e->d_name, ".tok.i32") != NULL;
    closedir(d);
    return n;
}

static dt_tokenizer *load(void) {
    char p[4200];
    snprintf(p, sizeof p, "%s/bytelevel.json", fixdir);
    dt_tokenizer *t = NULL;
    CHECK(dt_tokenizer_load(&t, p) == DT_OK);
    return t;
}

static void test_plain_text(void) {
    dt_tokenizer *t = load();
    if (!t) return;
    const char *doc = "The GNU General Public License is a free, copyleft license.\nIt's 2024!";
    write_file("plain.txt", doc);
    int64_t want[256];
    size_t n = expect(t, &doc, 1, want);
    char path[128];
    snprintf(path, sizeof path, "%s/plain.txt", dir);
    dt_text_dataset_opts o = {.block_size = 4};
    dt_dataset *ds = dt_dataset_text(path, t, &o);
    check_windows(ds, want, n);
    dt_dataset_free(ds);
    CHECK(count_cache_files() == 1);
    ds = dt_dataset_text(path, t, &o); /* reused: still one file */
    check_windows(ds, want, n);
    dt_dataset_free(ds);
    CHECK(count_cache_files() == 1);
    const char *doc2 = "Another text, a different length of text.";
    write_file("plain.txt", doc2);
    n = expect(t, &doc2, 1, want);
    ds = dt_dataset_text(path, t, &o);
    check_windows(ds, want, n);
    dt_dataset_free(ds);
    CHECK(count_cache_files() == 2);
    dt_tokenizer_free(t);
}

static void test_jsonl(void) {
    dt_tokenizer *t = load();
    if (!t) return;
    char sub[96];
    snprintf(sub, sizeof sub, "%s/cache", dir);
    mkdir(sub, 0700);
    write_file("docs.jsonl", "{\"body\": \"first document here\", \"id\": 1}\n\n"
                             "{\"body\": \"second one, caf\\u00e9 \\ud83d\\ude00\"}\r\n"
                             "{\"body\": \"third\"}");
    const char *docs[] = {"first document here", "second one, caf\xc3\xa9 \xf0\x9f\x98\x80",
                          "third"};
    int64_t want[256];
    size_t n = expect(t, docs, 3, want);
    char path[128];
    snprintf(path, sizeof path, "%s/docs.jsonl", dir);
    dt_text_dataset_opts o = {.jsonl_field = "body", .cache_dir = sub, .block_size = 4};
    dt_dataset *ds = dt_dataset_text(path, t, &o);
    check_windows(ds, want, n);
    dt_dataset_free(ds);

    write_file("bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": 3}\n");
    snprintf(path, sizeof path, "%s/bad.jsonl", dir);
    o.jsonl_field = "text";
    CHECK(dt_dataset_text(path, t, &o) == NULL && dt_last_status() == DT_ERR_FORMAT);
    CHECK_MSG(strstr(dt_last_error(), "bad.jsonl:2") != NULL, "%s", dt_last_error());
    write_file("bad.jsonl", "not json\n");
    CHECK(dt_dataset_text(path, t, &o) == NULL && strstr(dt_last_error(), "bad.jsonl:1"));
    snprintf(path, sizeof path, "%s/missing.txt", dir);
    CHECK(dt_dataset_text(path, t, &o) == NULL && dt_last_status() == DT_ERR_IO);
    dt_tokenizer_free(t);
}

int main(void) {
    const char *src = getenv("DT_SOURCE_DIR");
    snprintf(fixdir, sizeof fixdir, "%s/tests/lm/fixtures/tok", src ? src : ".");
    if (!fx_tmpdir(dir, sizeof dir, "textds")) return 1;
    TEST_RUN(test_plain_text);
    TEST_RUN(test_jsonl);
    if (!fx_rmtree(dir)) fprintf(stderr, "could not remove %s\n", dir);
    TEST_END();
}
