/* Tests for src/base/numtext.c: the digits a person reads (the shortest that read back, as
 * Python's repr(float) writes them, values taken from Python 3) and the JSON text every answer
 * is written with (read back by jansson: the same tree). */
#include "base/numtext.h"
#include "test.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_shortest(void) {
    /* v, Python's repr(v) (exponents written by C's %g: "1e-05" for Python's "1e-05") */
    static const struct {
        double v;
        const char *want;
    } cases[] = {
        {0.003, "0.003"},
        {0.8651, "0.8651"},
        {0.1 + 0.2, "0.30000000000000004"},
        {1.0 / 3, "0.3333333333333333"},
        {2.0 / 3, "0.6666666666666666"},
        {1e-5, "1e-05"},
        {1.5e-7, "1.5e-07"},
        {5e-324, "5e-324"},
        {DBL_MAX, "1.7976931348623157e+308"},
        {0.0001, "0.0001"},
        {123.456, "123.456"},
        {100.0, "100"},
        {-0.25, "-0.25"},
        {1e22, "1e+22"},
        {(double)0.1f, "0.10000000149011612"},
        {9007199254740993.0, "9007199254740992"},
        {1 - 0x1p-53, "0.9999999999999999"}, /* rounding to fewer digits carries to 1 */
        {1 - 0x1p-52, "0.9999999999999998"},
        {99.99999999999999, "99.99999999999999"},
        {0.1 * 3, "0.30000000000000004"},
        {1e23, "1e+23"},
        {-1.2345678901234567e-300, "-1.2345678901234568e-300"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char got[32];
        int n = dt_fmt_double(cases[i].v, got);
        CHECK_MSG(!strcmp(got, cases[i].want) && n == (int)strlen(got), "%a: %s, want %s",
                  cases[i].v, got, cases[i].want);
    }
    char s[32];
    dt_fmt_double(NAN, s);
    CHECK(!strcmp(s, "nan"));
    dt_fmt_double(-INFINITY, s);
    CHECK(!strcmp(s, "-inf"));
}

static void test_json(void) {
    const char *in =
        "{\"lr\":0.003,\"acc\":0.8651,\"n\":3,\"big\":1e22,\"tiny\":1e-05,"
        "\"one\":1.0,\"s\":\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\",\"l\":[true,false,null,[],{}]}";
    json_t *j = json_loads(in, 0, NULL);
    CHECK(j != NULL);
    char *c = dt_json_dumps(j, JSON_COMPACT);
    CHECK_MSG(c && !strcmp(c, "{\"lr\":0.003,\"acc\":0.8651,\"n\":3,\"big\":1e22,\"tiny\":1e-5,"
                              "\"one\":1.0,\"s\":\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\","
                              "\"l\":[true,false,null,[],{}]}"),
              "compact: %s", c ? c : "");
    json_t *back = json_loads(c, 0, NULL);
    CHECK(back && json_equal(back, j)); /* jansson reads the same tree */
    json_decref(back);
    free(c);
    /* indented and sorted: the same text as jansson's writer where no real is involved */
    json_object_del(j, "lr"), json_object_del(j, "acc"), json_object_del(j, "big");
    json_object_del(j, "tiny"), json_object_del(j, "one");
    for (size_t f = 0; f < 4; f++) {
        size_t flags = (f & 1 ? JSON_INDENT(2) : JSON_COMPACT) | (f & 2 ? JSON_SORT_KEYS : 0);
        char *ours = dt_json_dumps(j, flags), *theirs = json_dumps(j, flags);
        CHECK_MSG(ours && theirs && !strcmp(ours, theirs), "flags %zx:\n%s\n%s", flags, ours,
                  theirs);
        free(ours);
        free(theirs);
    }
    json_decref(j);
}

int main(void) {
    TEST_RUN(test_shortest);
    TEST_RUN(test_json);
    TEST_END();
}
