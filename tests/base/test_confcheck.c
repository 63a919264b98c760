/*
 * test_confcheck.c — the config-validation toolkit (src/base/confcheck.c): each getter's type
 * and range errors with key paths and positions in both dialects, defaults kept for absent,
 * null and "auto" values, required keys with a typo named, the suggestion rule on its edges,
 * and unknown keys (one warning each with positions, or one line to the log).
 */
#include "base/confcheck.h"
#include "test.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define HAS(s, sub) (strstr((s), (sub)) != NULL)
#define CHECK_HAS(s, sub) CHECK_MSG(HAS(s, sub), "lacks \"%s\": %s", sub, s)

static json_t *J(const char *text) {
    json_t *j = json_loads(text, 0, NULL);
    if (!j) fprintf(stderr, "bad test JSON: %s\n", text);
    return j;
}

/* ---- suggestions ------------------------------------------------------------------------------
 */

static const char *sug1(const char *word, const char *cand) {
    const char *const l[] = {cand, NULL};
    return dt_conf_suggest(word, l);
}

static void test_suggest_threshold(void) {
    /* up to 3 bytes: one edit */
    CHECK(sug1("foo", "fox") != NULL);
    CHECK(sug1("ab", "ba") != NULL); /* a transposition is one edit */
    CHECK(sug1("foo", "fxy") == NULL);
    CHECK(sug1("pbt", "grid") == NULL);
    /* 4..8 bytes: two edits */
    CHECK(sug1("abcd", "abxy") != NULL);
    CHECK(sug1("abcd", "axyz") == NULL);
    CHECK(sug1("abcdefgh", "abcdefxy") != NULL);
    CHECK(sug1("abcdefgh", "abcdexyz") == NULL);
    CHECK(sug1("batch", "batches") != NULL);
    /* 9..11 bytes: three edits */
    CHECK(sug1("abcdefghi", "abcdefxyz") != NULL);
    CHECK(sug1("abcdefghi", "abcdewxyz") == NULL);
    /* 12 bytes and more: four edits at most */
    CHECK(sug1("abcdefghijkl", "abcdefghwxyz") != NULL);
    CHECK(sug1("abcdefghijkl", "abcdefgvwxyz") == NULL);
    CHECK(sug1("abcdefghijklmnopqr", "abcdefghijklmnwxyz") != NULL);
    CHECK(sug1("abcdefghijklmnopqr", "abcdefghijklmvwxyz") == NULL); /* 18/3 = 6, clamped */
    /* case is folded */
    CHECK(sug1("sgd", "SGD") != NULL);
    CHECK(sug1("WarmupLr", "WarmupLR") != NULL);
    /* a prefix of 6 bytes or more either way */
    CHECK(sug1("train_micro_batch_size", "train_micro_batch_size_per_gpu") != NULL);
    CHECK(sug1("abcdef", "abcdefghijklmnop") != NULL);
    CHECK(sug1("abcdefghijklmnop", "ABCDEF") != NULL);
    CHECK(sug1("abcde", "abcdefghijklmnop") == NULL);
    CHECK(sug1("completely_unrelated", "checkpoint_policy") == NULL);
    /* the closest wins; on a tie the first list first */
    const char *const a[] = {"stage", "stag3", NULL}, *const b[] = {"stags", NULL};
    CHECK(!strcmp(dt_conf_suggest("stagx", a), "stage"));
    CHECK(!strcmp(dt_conf_suggest2("stagx", a, b), "stage"));
    CHECK(!strcmp(dt_conf_suggest2("stagsx", a, b), "stags"));
    CHECK(dt_conf_suggest("x", NULL) == NULL);
    CHECK(dt_conf_in_list("a", (const char *const[]){"b", "a", NULL}));
    CHECK(!dt_conf_in_list("a", NULL));
}

/* ---- getters, YAML dialect --------------------------------------------------------------------
 */

static const char *yaml_text = "top:\n"           /* 1 */
                               "  flag: yes\n"    /* 2 */
                               "  n: 0\n"         /* 3 */
                               "  big: 20\n"      /* 4 */
                               "  neg: -5\n"      /* 5 */
                               "  half: 2.5\n"    /* 6 */
                               "  r: 1\n"         /* 7 */
                               "  name: 12\n"     /* 8 */
                               "  empty: ''\n"    /* 9 */
                               "  mode: fsat\n"   /* 10 */
                               "  list: {a: 1}\n" /* 11 */
                               "  sub: [1]\n"     /* 12 */
                               "  nul: ~\n"       /* 13 */
                               "  good: 7\n"      /* 14 */
                               "  metrc: loss\n"  /* 15 */
                               "  inf: .inf\n"    /* 16 */
                               "other: 1\n";      /* 17 */

static void test_yaml_getters(void) {
    dt_yaml_doc *doc = dt_yaml_load_string(yaml_text, strlen(yaml_text), "t.yaml");
    CHECK(doc != NULL);
    if (!doc) return;
    dt_conf c = {.dialect = DT_CONF_YAML, .doc = doc, .root = dt_yaml_root(doc)};
    dt_conf_sec root = dt_conf_root(&c, 0, NULL), s;
    static const char *const known[] = {"flag", "n", "big", "metric", NULL};
    CHECK(dt_conf_section(&root, "top", 0, known, &s) == DT_OK && s.obj != NULL);
    CHECK(!strcmp(s.path, "top"));
    char p[64];
    CHECK(!strcmp(dt_conf_path(&s, "x", p, sizeof p), "top.x"));
    CHECK(!strcmp(dt_conf_path(&root, "x", p, sizeof p), "x"));

    bool b = true;
    CHECK(dt_conf_bool(&s, "flag", &b) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "t.yaml:2:9: top.flag must be true or false, got \"yes\" (YAML 1.2");
    CHECK(dt_conf_bool(&s, "absent", &b) == DT_OK && b); /* default kept */
    CHECK(dt_conf_bool(&s, "nul", &b) == DT_OK && b);

    int64_t x = 42;
    CHECK(dt_conf_int(&s, "n", 1, INT64_MAX, &x) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "t.yaml:3:6: top.n must be a positive integer, got 0");
    CHECK(dt_conf_int(&s, "neg", 0, INT64_MAX, &x) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "t.yaml:5:8: top.neg must be a non-negative integer, got -5");
    CHECK(dt_conf_int(&s, "neg", 3, INT64_MAX, &x) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "top.neg must be an integer >= 3, got -5");
    CHECK(dt_conf_int(&s, "big", 0, 10, &x) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "t.yaml:4:8: top.big must be at most 10, got 20");
    CHECK(dt_conf_int(&s, "half", INT64_MIN, INT64_MAX, &x) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "t.yaml:6:9: top.half must be an integer, got 2.5");
    CHECK(x == 42);
    CHECK(dt_conf_int(&s, "good", 7, 7, &x) == DT_OK && x == 7);
    CHECK(dt_conf_int(&s, "nul", 1, 2, &x) == DT_OK && x == 7);

    double r = 9;
    CHECK(dt_conf_real(&s, "r", 1, true, &r) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "t.yaml:7:6: top.r must be a number > 1, got 1");
    CHECK(dt_conf_real(&s, "inf", -INFINITY, false, &r) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "top.inf must be a finite number, got \".inf\"");
    CHECK(dt_conf_real(&s, "r", 1, false, &r) == DT_OK && r == 1);

    const char *str = "dflt";
    CHECK(dt_conf_str(&s, "name", false, &str) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "t.yaml:8:9: top.name must be a string, got 12 (quote it");
    CHECK(dt_conf_str(&s, "empty", true, &str) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "t.yaml:9:10: top.empty must not be empty");
    CHECK(dt_conf_str(&s, "empty", false, &str) == DT_OK && !strcmp(str, ""));

    static const char *const modes[] = {"fast", "slow", NULL};
    int e = 1;
    CHECK(dt_conf_enum(&s, "mode", modes, NULL, &e) == DT_ERR_CONFIG);
    CHECK_HAS(
        dt_last_error(),
        "t.yaml:10:9: top.mode must be one of fast, slow; got \"fsat\" (did you mean 'fast'?)");
    CHECK(dt_conf_enum(&s, "absent", modes, NULL, &e) == DT_OK && e == 1);

    dt_conf_sec sub;
    CHECK(dt_conf_section(&s, "sub", 0, NULL, &sub) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "t.yaml:12:8: top.sub must be a mapping, got a list");
    CHECK(dt_conf_section(&s, "absent", 0, NULL, &sub) == DT_OK && !sub.obj);
    CHECK(!strcmp(sub.path, "top.absent"));
    CHECK(dt_conf_int(&sub, "k", 0, 1, &x) == DT_OK); /* an absent section reads as defaults */
    const json_t *l;
    CHECK(dt_conf_list(&s, "list", &l) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "t.yaml:11:9: top.list must be a list, got a mapping");
    CHECK(dt_conf_list(&s, "sub", &l) == DT_OK && json_array_size(l) == 1);

    /* required keys: at the section, naming an unknown sibling that looks like a typo */
    CHECK(dt_conf_missing(&s, "metric", "name a metric") == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "t.yaml:2:3: top.metric is required (is 'metrc' on line 15 a "
                               "typo?); hint: name a metric");
    CHECK(dt_conf_missing(&root, "entrypoint", NULL) == DT_ERR_CONFIG);
    CHECK(!strcmp(dt_last_error(), "t.yaml: entrypoint is required")); /* the root: no line */
    dt_conf_clear(&c);
    dt_yaml_free(doc);
}

/* ---- getters, JSON dialect --------------------------------------------------------------------
 */

static void test_json_getters(void) {
    json_t *j = J("{\"s\": {\"b\": 1, \"b2\": \"yes\", \"i\": 0, \"h\": 12.5, \"a\": \"auto\", "
                  "\"r\": -1, \"d\": \"gpu\", \"o\": [1], \"k\": 5e8}, \"t\": {\"a\": \"auto\"}}");
    if (!j) return;
    dt_conf c = {.dialect = DT_CONF_JSON,
                 .root = j,
                 .prefix = "cfg: ",
                 .hint = "see the docs",
                 .auto_note = " (auto note)"};
    dt_conf_sec root = dt_conf_root(&c, 0, NULL), s, t;
    CHECK(dt_conf_section(&root, "s", 0, NULL, &s) == DT_OK);
    CHECK(dt_conf_section(&root, "t", DT_CONF_AUTO, NULL, &t) == DT_OK);
    bool b = false;
    CHECK(dt_conf_bool(&s, "b", &b) == DT_OK && b); /* pydantic's 1 */
    CHECK(dt_conf_bool(&s, "b2", &b) == DT_ERR_CONFIG);
    CHECK(!strcmp(dt_last_error(), "cfg: s.b2 must be a boolean, got the string \"yes\"; hint: "
                                   "write true or false (without quotes)"));
    int64_t x = 3;
    CHECK(dt_conf_int(&s, "i", 1, INT64_MAX, &x) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "cfg: s.i must be >= 1, got 0; hint: use a value >= 1");
    CHECK(dt_conf_int(&s, "i", 1, 3, &x) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "s.i must be in [1, 3], got 0");
    CHECK(dt_conf_int(&s, "h", 1, INT64_MAX, &x) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "s.h must be an integer, got 12.5; hint: write a whole number");
    CHECK(dt_conf_int(&s, "k", 0, INT64_MAX, &x) == DT_OK && x == 500000000);
    /* "auto": the default in a DT_CONF_AUTO section, else an error with the note */
    CHECK(dt_conf_int(&t, "a", 0, 9, &x) == DT_OK && x == 500000000);
    CHECK(dt_conf_int(&s, "a", 0, 9, &x) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(),
              "s.a must be an integer, got the string \"auto\" (auto note); hint:");
    double r = 0;
    CHECK(dt_conf_real(&s, "r", 0, false, &r) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "cfg: s.r must be >= 0, got -1; hint: use a value >= 0");
    CHECK(dt_conf_real(&s, "d", 0, false, &r) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "s.d must be a number, got the string \"gpu\"; hint:");
    static const char *const dev[] = {"none", "cpu", NULL};
    int e = 0;
    CHECK(dt_conf_enum(&s, "d", dev, "pick one", &e) == DT_ERR_CONFIG);
    CHECK(!strcmp(dt_last_error(), "cfg: s.d must be one of \"none\", \"cpu\", got the string "
                                   "\"gpu\" (did you mean \"cpu\"?); hint: pick one"));
    dt_conf_sec o;
    CHECK(dt_conf_section(&s, "o", 0, NULL, &o) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "cfg: s.o must be an object, got an array; hint:");
    /* the default hint goes on messages without one */
    CHECK(dt_conf_error(&s, "i", "s.i is odd") == DT_ERR_CONFIG);
    CHECK(!strcmp(dt_last_error(), "cfg: s.i is odd; hint: see the docs"));
    CHECK(dt_conf_error(&s, "i", "s.i is odd; hint: mine") == DT_ERR_CONFIG);
    CHECK(!strcmp(dt_last_error(), "cfg: s.i is odd; hint: mine"));
    dt_conf_clear(&c);
    json_decref(j);
}

/* ---- unknown keys -----------------------------------------------------------------------------
 */

/* dt_conf_log_unknowns with stderr captured into buf. */
static void log_capture(const dt_conf *c, char *buf, size_t n) {
    FILE *f = tmpfile();
    buf[0] = 0;
    if (!f) return;
    fflush(stderr);
    int saved = dup(fileno(stderr));
    dup2(fileno(f), fileno(stderr));
    dt_conf_log_unknowns(c);
    fflush(stderr);
    dup2(saved, fileno(stderr));
    close(saved);
    rewind(f);
    buf[fread(buf, 1, n - 1, f)] = 0;
    fclose(f);
}

static void test_unknown_keys(void) {
    static const char *const known[] = {"stage", "offload", NULL};
    static const char *const accepted[] = {"legacy_fusion", NULL};
    const char *text = "z:\n  stage: 1\n  stag: 2\n  legacy_fusoin: 1\n  zzz: 3\n";
    dt_yaml_doc *doc = dt_yaml_load_string(text, strlen(text), "u.yaml");
    if (!doc) return;
    dt_conf c = {.dialect = DT_CONF_YAML, .doc = doc, .root = dt_yaml_root(doc)};
    const json_t *z = json_object_get(dt_yaml_root(doc), "z");
    CHECK(dt_conf_check_keys(&c, z, "z", known, accepted) == DT_OK);
    CHECK(dt_conf_check_keys(&c, NULL, "x", known, NULL) == DT_OK); /* not an object: nothing */
    CHECK(c.n_unknown == 3);
    char w[256];
    if (c.n_unknown == 3) {
        CHECK(!strcmp(dt_conf_unknown_warning(&c, 0, w, sizeof w),
                      "u.yaml:3:3: unknown key 'z.stag' (ignored); did you mean 'stage'?"));
        /* accepted keys are suggested too */
        CHECK_HAS(dt_conf_unknown_warning(&c, 1, w, sizeof w), "did you mean 'legacy_fusion'?");
        CHECK(!strcmp(dt_conf_unknown_warning(&c, 2, w, sizeof w),
                      "u.yaml:5:3: unknown key 'z.zzz' (ignored)"));
    }
    dt_conf_clear(&c);
    CHECK(c.n_unknown == 0 && c.unknown == NULL);
    dt_yaml_free(doc);

    /* JSON: no positions; all of them as one log line */
    json_t *j = J("{\"stag\": 1, \"foo\": 2, \"s\": {\"offlaod\": true}}");
    if (!j) return;
    dt_conf jc = {.dialect = DT_CONF_JSON, .root = j, .prefix = "cfg: "};
    static const char *const top[] = {"stage", "s", NULL};
    CHECK(dt_conf_check_keys(&jc, j, "", top, NULL) == DT_OK);
    CHECK(dt_conf_check_keys(&jc, json_object_get(j, "s"), "s", known, NULL) == DT_OK);
    CHECK(jc.n_unknown == 3);
    if (jc.n_unknown == 3)
        CHECK(!strcmp(dt_conf_unknown_warning(&jc, 0, w, sizeof w),
                      "cfg: unknown key 'stag' (ignored); did you mean 'stage'?"));
    dt_log_set_level(DT_LOG_INFO);
    char log[2048];
    log_capture(&jc, log, sizeof log);
    CHECK_HAS(log, "cfg: 3 unknown keys ignored: stag (did you mean 'stage'?), foo, s.offlaod (did "
                   "you mean 'offload'?)");
    dt_conf_clear(&jc);
    log_capture(&jc, log, sizeof log);
    CHECK_MSG(log[0] == 0, "no unknown keys, no line: %s", log);
    json_decref(j);
}

int main(void) {
    TEST_RUN(test_suggest_threshold);
    TEST_RUN(test_yaml_getters);
    TEST_RUN(test_json_getters);
    TEST_RUN(test_unknown_keys);
    TEST_END();
}
