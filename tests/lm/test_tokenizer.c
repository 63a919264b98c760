/* test_tokenizer.c — the C tokenizer against the `tokenizers` library: every case of
 * tests/lm/fixtures/tok/cases.json (made by tools/lm_fixtures/make_tokenizer_fixtures.py with
 * the real library) must give exactly its ids and decode to exactly its string; then the
 * refusals of tokenizer.json files dtrain does not support or cannot read, each naming the part. */
#include "test.h"

#include "dtrain/tokenizer.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fixdir[4096];

static char *unhex(const char *h, size_t *n) {
    size_t len = strlen(h) / 2;
    char *out = malloc(len + 1);
    for (size_t i = 0; i < len; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        out[i] = (char)v;
    }
    out[len] = 0;
    *n = len;
    return out;
}

static dt_tokenizer *load_fixture(const char *name) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", fixdir, name);
    dt_tokenizer *t = NULL;
    dt_status st = dt_tokenizer_load(&t, path);
    CHECK_MSG(st == DT_OK, "%s: %s", name, dt_last_error());
    return t;
}

static void print_ids(const char *what, const int32_t *ids, size_t n) {
    fprintf(stderr, "  %s:", what);
    for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

/* One case: ids exact, decode exact. */
static void check_case(dt_tokenizer *t, const json_t *c) {
    size_t len, dlen = 0;
    char *text = unhex(json_string_value(json_object_get(c, "text_hex")), &len);
    const json_t *want = json_object_get(c, "ids");
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(dt_tokenizer_encode(t, text, len, &ids, &n) == DT_OK);
    bool same = n == json_array_size(want);
    for (size_t i = 0; same && i < n; i++)
        same = ids[i] == json_integer_value(json_array_get(want, i));
    CHECK_MSG(same, "%s: ids differ for \"%.60s\"",
              json_string_value(json_object_get(c, "tokenizer")), text);
    if (!same) {
        print_ids("dtrain", ids, n);
        int32_t w[64];
        size_t wn = json_array_size(want) < 64 ? json_array_size(want) : 64;
        for (size_t i = 0; i < wn; i++) w[i] = (int32_t)json_integer_value(json_array_get(want, i));
        print_ids("tokenizers", w, wn);
    }
    const json_t *dec = json_object_get(c, "decoded_hex");
    if (json_is_string(dec)) {
        char *expect = unhex(json_string_value(dec), &dlen), *got = NULL;
        CHECK(dt_tokenizer_decode(t, ids, n, &got) == DT_OK);
        /* the decoding is a C string: a text with a NUL byte is compared up to it */
        CHECK_MSG(got && !strcmp(got, expect), "decode of \"%.60s\": got \"%s\" want \"%s\"", text,
                  got ? got : "", expect);
        free(got);
        free(expect);
    }
    free(ids);
    free(text);
}

static void test_fixture_cases(void) {
    char path[4200];
    snprintf(path, sizeof path, "%s/cases.json", fixdir);
    json_t *root = json_load_file(path, 0, NULL);
    CHECK_MSG(root != NULL, "cannot read %s", path);
    const json_t *cases = json_object_get(root, "cases");
    CHECK(json_array_size(cases) > 100);
    const char *cur = NULL;
    dt_tokenizer *t = NULL;
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *c = json_array_get(cases, i);
        const char *name = json_string_value(json_object_get(c, "tokenizer"));
        if (!cur || strcmp(cur, name)) {
            dt_tokenizer_free(t);
            t = load_fixture(name);
            cur = name;
        }
        if (t) check_case(t, c);
    }
    dt_tokenizer_free(t);
    json_decref(root);
}

/* Encoding twice (the second time from the word cache) gives the same ids. */
static void test_cache_same(void) {
    dt_tokenizer *t = load_fixture("bytelevel.json");
    if (!t) return;
    const char *s = "the same words, the same words again and again";
    int32_t *a, *b;
    size_t na, nb;
    CHECK(dt_tokenizer_encode(t, s, strlen(s), &a, &na) == DT_OK);
    CHECK(dt_tokenizer_encode(t, s, strlen(s), &b, &nb) == DT_OK);
    CHECK(na == nb && na > 0 && !memcmp(a, b, na * sizeof *a));
    free(a);
    free(b);
    int32_t *e = (int32_t *)1;
    size_t ne = 7;
    CHECK(dt_tokenizer_encode(t, "", 0, &e, &ne) == DT_OK && ne == 0);
    free(e);
    CHECK(dt_tokenizer_eos(t) == 0 && dt_tokenizer_bos(t) == 0);
    CHECK(dt_tokenizer_vocab_size(t) == 520);
    CHECK(dt_tokenizer_token_id(t, "<|endoftext|>") == 0);
    dt_tokenizer_free(t);
    t = load_fixture("llama_metaspace.json");
    if (t) CHECK(dt_tokenizer_eos(t) == 2 && dt_tokenizer_bos(t) == 1);
    dt_tokenizer_free(t);
}

/* A copy of bytelevel.json with one member replaced, loaded: the error must contain `want`. */
static void refused(const char *key, const char *value_json, const char *want) {
    char path[4200], out[] = "/tmp/dt_tok_XXXXXX";
    snprintf(path, sizeof path, "%s/bytelevel.json", fixdir);
    json_t *root = json_load_file(path, 0, NULL);
    json_t *model = json_object_get(root, "model");
    json_t *v = json_loads(value_json, JSON_DECODE_ANY, NULL);
    if (!strncmp(key, "model.", 6))
        json_object_set_new(model, key + 6, v);
    else
        json_object_set_new(root, key, v);
    int fd = mkstemp(out);
    close(fd);
    json_dump_file(root, out, 0);
    json_decref(root);
    dt_tokenizer *t = (dt_tokenizer *)1;
    dt_status st = dt_tokenizer_load(&t, out);
    CHECK_MSG(st == DT_ERR_FORMAT && t == NULL && strstr(dt_last_error(), want) &&
                  strstr(dt_last_error(), out),
              "%s: want \"%s\", got %s", key, want, dt_last_error());
    unlink(out);
}

static void test_refusals(void) {
    refused("pre_tokenizer", "{\"type\": \"Whitespace\"}",
            "pre_tokenizer type Whitespace is not supported");
    refused("normalizer", "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFKC\"}]}",
            "normalizer type NFKC is not supported");
    refused("decoder", "{\"type\": \"WordPiece\"}", "decoder type WordPiece is not supported");
    refused("model.type", "\"WordPiece\"", "model type WordPiece is not supported");
    refused("model.dropout", "0.1", "model.dropout is not supported");
    refused("model.merges", "[\"a b c\"]", "model.merges[0]");
    refused("model.merges", "[[\"Ġ\", \"zzz\"]]", "token \"zzz\" is not in the vocabulary");
    refused("model.vocab", "{\"a\": -1}", "model.vocab[\"a\"]");
    refused("model.vocab", "{\"a\": 2000000000}", "hint: ids must number the tokens from 0");
    refused("normalizer",
            "{\"type\": \"Replace\", \"pattern\": {\"Regex\": \" +\"}, "
            "\"content\": \" \"}",
            "Replace with a Regex pattern");
    refused("pre_tokenizer",
            "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": "
            "\"ByteLevel\"}, {\"type\": \"Metaspace\"}]}",
            "ByteLevel is supported only as the last");
    refused("post_processor", "{\"type\": \"Bogus\"}", "post_processor type Bogus");
    refused("decoder", "{\"type\": \"Metaspace\", \"replacement\": \"\"}",
            "decoder.replacement is empty");
    refused("pre_tokenizer",
            "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\w+\"}, "
            "\"behavior\": \"Isolated\", \"invert\": false}",
            "pre_tokenizer type Split with the pattern \\w+ is not supported");
    refused("added_tokens", "[{\"id\": 3}]", "added_tokens[0]");
    refused("model", "null", "model is missing");

    dt_tokenizer *t = (dt_tokenizer *)1;
    CHECK(dt_tokenizer_load(&t, "/nonexistent/tokenizer.json") == DT_ERR_IO && !t);
    CHECK(strstr(dt_last_error(), "/nonexistent/tokenizer.json") != NULL);
    char out[] = "/tmp/dt_tok_XXXXXX";
    int fd = mkstemp(out);
    CHECK(write(fd, "{\"model\": [1, 2", 15) == 15);
    close(fd);
    CHECK(dt_tokenizer_load(&t, out) == DT_ERR_FORMAT && strstr(dt_last_error(), "not JSON"));
    unlink(out);
}

int main(void) {
    const char *src = getenv("DT_SOURCE_DIR");
    snprintf(fixdir, sizeof fixdir, "%s/tests/lm/fixtures/tok", src ? src : ".");
    TEST_RUN(test_fixture_cases);
    TEST_RUN(test_cache_same);
    TEST_RUN(test_refusals);
    TEST_END();
}
