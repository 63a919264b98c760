/* test_tokenizer_nfc.c — the NFC and NFD normalizers: dt__unicode_normalize against Python's
 * unicodedata.normalize on every row of tests/lm/fixtures/tok/nfc/golden.json; bytes that are
 * not UTF-8 pass through; and the `tokenizers` library's ids for a byte-level BPE with
 * {"type": "NFC"} and with a Sequence of NFD, Replace and NFC (cases.json, all made by
 * tools/lm_fixtures/make_nfc_fixtures.py); NFKC and NFKD are refused by name. */
#include "test.h"

#include "dtrain/tokenizer.h"
#include "lm/unicode_nfc_impl.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fixdir[4096];

static json_t *load_json(const char *name) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", fixdir, name);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    CHECK_MSG(j != NULL, "%s: %s", path, e.text);
    return j;
}

/* s normalized equals want; prints both in hex if not. */
static void check_norm(const char *s, size_t n, bool compose, const char *want, size_t wn) {
    dt__tbuf out = {0};
    CHECK(dt__tbuf_put(&out, "<", 1) == DT_OK); /* appends after what is there */
    CHECK(dt__unicode_normalize(&out, s, n, compose) == DT_OK);
    bool same = out.n == wn + 1 && out.p[0] == '<' && !memcmp(out.p + 1, want, wn);
    CHECK_MSG(same, "%s of a %zu-byte text differs", compose ? "NFC" : "NFD", n);
    if (!same) {
        fprintf(stderr, "  text:");
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %02x", (unsigned char)s[i]);
        fprintf(stderr, "\n  got: ");
        for (size_t i = 1; i < out.n; i++) fprintf(stderr, " %02x", (unsigned char)out.p[i]);
        fprintf(stderr, "\n  want:");
        for (size_t i = 0; i < wn; i++) fprintf(stderr, " %02x", (unsigned char)want[i]);
        fprintf(stderr, "\n");
    }
    free(out.p);
}

static void test_golden(void) {
    json_t *rows = load_json("golden.json");
    CHECK(json_array_size(rows) > 500);
    for (size_t i = 0; i < json_array_size(rows); i++) {
        const json_t *r = json_array_get(rows, i);
        const json_t *text = json_array_get(r, 0);
        for (int k = 1; k <= 2; k++) {
            const json_t *want = json_array_get(r, (size_t)k);
            check_norm(json_string_value(text), json_string_length(text), k == 1,
                       json_string_value(want), json_string_length(want));
        }
    }
    json_decref(rows);
}

/* Bytes that are not UTF-8 stay, and nothing composes across them. */
static void test_invalid_bytes(void) {
    static const struct {
        const char *in, *nfc, *nfd;
    } cases[] = {
        {"\xff", "\xff", "\xff"},
        {"\x80" "e\xcc\x81", "\x80\xc3\xa9", "\x80" "e\xcc\x81"},
        {"e\xff\xcc\x81", "e\xff\xcc\x81", "e\xff\xcc\x81"},
        {"\xc3\xa9\xc3", "\xc3\xa9\xc3", "e\xcc\x81\xc3"},
        {"a\xcc\xa3\xcc\x82\xed\xa0\x80", "\xe1\xba\xad\xed\xa0\x80",
         "a\xcc\xa3\xcc\x82\xed\xa0\x80"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        check_norm(cases[i].in, strlen(cases[i].in), true, cases[i].nfc, strlen(cases[i].nfc));
        check_norm(cases[i].in, strlen(cases[i].in), false, cases[i].nfd, strlen(cases[i].nfd));
    }
    CHECK(dt__unicode_ccc('a') == 0 && dt__unicode_ccc(0x301) == 230 &&
          dt__unicode_ccc(0x323) == 220 && dt__unicode_ccc(0x10FFFF) == 0);
}

/* Every case of cases.json: exactly the library's ids. */
static void test_tokenizer_ids(void) {
    json_t *cases = load_json("cases.json");
    CHECK(json_array_size(cases) > 100);
    dt_tokenizer *t = NULL;
    const char *cur = NULL;
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *c = json_array_get(cases, i);
        const char *name = json_string_value(json_object_get(c, "tokenizer"));
        if (!cur || strcmp(cur, name)) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", fixdir, name);
            dt_tokenizer_free(t);
            t = NULL;
            CHECK_MSG(dt_tokenizer_load(&t, path) == DT_OK, "%s: %s", name, dt_last_error());
            cur = name;
        }
        if (!t) continue;
        const json_t *text = json_object_get(c, "text"), *want = json_object_get(c, "ids");
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK(dt_tokenizer_encode(t, json_string_value(text), json_string_length(text), &ids,
                                  &n) == DT_OK);
        bool same = n == json_array_size(want);
        for (size_t k = 0; same && k < n; k++)
            same = ids[k] == json_integer_value(json_array_get(want, k));
        CHECK_MSG(same, "%s: ids differ for \"%s\" (%zu ids, want %zu)", name,
                  json_string_value(text), n, json_array_size(want));
        free(ids);
    }
    dt_tokenizer_free(t);
    json_decref(cases);
}

/* The compatibility forms are refused by name. */
static void test_refused(void) {
    const char *types[] = {"NFKC", "NFKD"};
    for (int i = 0; i < 2; i++) {
        char path[4200], out[] = "/tmp/dt_nfc_XXXXXX";
        snprintf(path, sizeof path, "%s/nfc.json", fixdir);
        json_t *root = json_load_file(path, 0, NULL);
        json_t *norm = json_pack("{s:s, s:[{s:s}]}", "type", "Sequence", "normalizers", "type",
                                 types[i]);
        json_object_set_new(root, "normalizer", norm);
        int fd = mkstemp(out);
        close(fd);
        json_dump_file(root, out, 0);
        json_decref(root);
        dt_tokenizer *t = NULL;
        CHECK(dt_tokenizer_load(&t, out) == DT_ERR_FORMAT);
        CHECK_MSG(strstr(dt_last_error(), types[i]) && strstr(dt_last_error(), "not supported"),
                  "%s", dt_last_error());
        unlink(out);
    }
}

int main(void) {
    const char *src = getenv("DT_SOURCE_DIR");
    snprintf(fixdir, sizeof fixdir, "%s/tests/lm/fixtures/tok/nfc", src ? src : ".");
    TEST_RUN(test_golden);
    TEST_RUN(test_invalid_bytes);
    TEST_RUN(test_tokenizer_ids);
    TEST_RUN(test_refused);
    TEST_END();
}
