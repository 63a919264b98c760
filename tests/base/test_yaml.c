/*
 * test_yaml.c — the YAML loader's refusals of input it cannot honour (src/base/yaml.c): tags
 * on keys and everywhere else a tag can sit, and alias expansion held to its cap (an alias
 * bomb refused cheaply, counted by the allocations the loader makes; realistic anchors and a
 * document exactly at the cap still load; aliases cannot nest past the depth limit).
 * Typing, positions and the accepted anchor forms are tested in tests/config/test_expconf.c.
 */
#include "base/yaml.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dt_yaml_doc *yload(const char *text) {
    return dt_yaml_load_string(text, strlen(text), "t.yaml");
}

/* A YAML text and the message it must be refused with (a part of it). */
typedef struct refusal {
    const char *text, *want;
} refusal;

/* Each text of `r` fails to load with DT_ERR_CONFIG and a message holding its `want`. */
static void check_refused(const refusal *r, size_t n) {
    for (size_t i = 0; i < n; i++) {
        dt_yaml_doc *d = yload(r[i].text);
        const char *e = d ? "(it loaded)" : dt_last_error();
        CHECK_MSG(!d && dt_last_status() == DT_ERR_CONFIG && strstr(e, r[i].want),
                  "%s: \"%s\" lacks \"%s\"", r[i].text, e, r[i].want);
        dt_yaml_free(d);
    }
}

/* ---- tags -------------------------------------------------------------------------------------
 */

static void test_tags_on_keys(void) {
    static const refusal r[] = {
        /* the input: a tag on a mapping key was dropped and the document loaded */
        {"!foo key: 1\n", "t.yaml:1:1: unsupported tag '!foo' on the key 'key'"},
        {"a:\n  !foo b: 1\n", "t.yaml:2:3: unsupported tag '!foo' on the key 'b'"},
        /* flow mappings, and single-pair mappings inside a flow sequence */
        {"a: {x: 1, !foo k: 2}\n", "t.yaml:1:11: unsupported tag '!foo' on the key 'k'"},
        {"a: [!foo k: 2]\n", "unsupported tag '!foo' on the key 'k'"},
        /* a block mapping as a sequence item */
        {"- x: 1\n- !foo k: 2\n", "t.yaml:2:3: unsupported tag '!foo' on the key 'k'"},
        /* an anchor with the tag: the tag is named either way round */
        {"&x !foo k: 1\n", "unsupported tag '!foo' on the key 'k'"},
        {"!foo &x k: 1\n", "unsupported tag '!foo' on the key 'k'"},
        /* core-schema tags other than !!str cannot be honoured on a key (keys are strings) */
        {"!!int 5: x\n", "unsupported tag '!!int' on the key '5'"},
        {"!!null : x\n", "unsupported tag '!!null' on the key ''"},
        {"!!merge <<: {a: 1}\n", "unsupported tag '!!merge' on the key '<<'"},
        /* a key tagged through a %TAG handle is named by its full tag */
        {"%TAG !e! tag:example.com,2000:\n---\n!e!k key: 1\n",
         "t.yaml:3:1: unsupported tag 'tag:example.com,2000:k' on the key 'key'"},
    };
    check_refused(r, sizeof r / sizeof *r);
}

static void test_tags_elsewhere(void) {
    static const refusal r[] = {
        /* values: scalars, mappings and sequences, in blocks and flows, as sequence items */
        {"a: !foo 1\n", "t.yaml:1:4: unsupported tag '!foo'"},
        {"- !foo 1\n", "t.yaml:1:3: unsupported tag '!foo'"},
        {"a: [1, !foo 2]\n", "t.yaml:1:8: unsupported tag '!foo'"},
        {"a: {k: !foo 2}\n", "t.yaml:1:8: unsupported tag '!foo'"},
        {"a: !foo {k: 1}\n", "unsupported tag '!foo' on a mapping"},
        {"a: !foo [1]\n", "unsupported tag '!foo' on a sequence"},
        {"a: !!seq {k: 1}\n", "unsupported tag '!!seq' on a mapping"},
        {"a: !!set {x}\n", "unsupported tag '!!set' on a mapping"},
        {"a: !!binary aGk=\n", "unsupported tag '!!binary'"},
        /* with an anchor, either order */
        {"a: &x !foo 1\n", "t.yaml:1:4: unsupported tag '!foo'"},
        {"a: !foo &x [1]\n", "unsupported tag '!foo' on a sequence"},
        /* the document's own tag: on a root mapping, sequence or scalar */
        {"--- !foo\na: 1\n", "unsupported tag '!foo' on a mapping"},
        {"--- !foo\n- 1\n", "unsupported tag '!foo' on a sequence"},
        {"--- !foo 1\n", "unsupported tag '!foo'"},
        /* %TAG cannot pass a foreign tag off as a core one by redefining '!!' */
        {"%TAG !! tag:example.com,2000:\n---\na: !!str x\n",
         "unsupported tag 'tag:example.com,2000:str'"},
    };
    check_refused(r, sizeof r / sizeof *r);
}

static void test_tags_accepted(void) {
    /* the supported tags, on the root too; on keys, !!str and the non-specific '!' (what a key
     * is anyway) */
    dt_yaml_doc *d = yload("--- !!map\na: !!seq [!!int 1]\nb: !!map {c: !!str 2}\n"
                           "!!str key: 1\n! other: 2\n!!str <<: 3\n");
    CHECK_MSG(d != NULL, "%s", dt_last_error());
    json_t *r = dt_yaml_root(d);
    CHECK(json_integer_value(json_array_get(json_object_get(r, "a"), 0)) == 1);
    CHECK(json_is_string(json_object_get(json_object_get(r, "b"), "c")));
    CHECK(json_integer_value(json_object_get(r, "key")) == 1);
    CHECK(json_integer_value(json_object_get(r, "other")) == 2);
    CHECK(json_integer_value(json_object_get(r, "<<")) == 3); /* a tagged '<<' is no merge */
    dt_yaml_free(d);
}

/* ---- aliases ----------------------------------------------------------------------------------
 */

/* Every allocation jansson makes (the loader builds its tree through it) while counting. */
static long n_json_allocs;
static void *counting_malloc(size_t n) {
    n_json_allocs++;
    return malloc(n);
}

/* Load `text` counting the tree's allocations; returns the doc (NULL on error). */
static dt_yaml_doc *counted_load(const char *text, long *allocs) {
    n_json_allocs = 0;
    json_set_alloc_funcs(counting_malloc, free); /* plain free: blocks stay interchangeable */
    dt_yaml_doc *d = yload(text);
    json_set_alloc_funcs(malloc, free);
    *allocs = n_json_allocs;
    return d;
}

/* The "billion laughs" shape in 306 bytes: 9 levels, each a list of 9 aliases of the one
 * before, 9^9 (387 million) nodes written out. */
static void make_bomb(char *buf, size_t n) {
    size_t len = (size_t)snprintf(buf, n, "a: &a [x,x,x,x,x,x,x,x,x]\n");
    for (char c = 'b'; c <= 'i'; c++) {
        char p = (char)(c - 1);
        len +=
            (size_t)snprintf(buf + len, n - len, "%c: &%c [*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c]\n",
                             c, c, p, p, p, p, p, p, p, p, p);
    }
}

static void test_alias_bomb(void) {
    char bomb[512];
    make_bomb(bomb, sizeof bomb);
    CHECK(strlen(bomb) == 306);
    long allocs = 0;
    dt_yaml_doc *d = counted_load(bomb, &allocs);
    CHECK(d == NULL);
    dt_yaml_free(d);
    const char *e = dt_last_error();
    CHECK(dt_last_status() == DT_ERR_CONFIG);
    /* refused with the cap and the alias that would pass it: levels b, c, d copy 90 + 819 +
     * 7380 nodes, then each *d on line 5 copies 7381 more: the eighth (column 29) passes 65536 */
    char cap[32];
    snprintf(cap, sizeof cap, "%d", DT_YAML_MAX_ALIAS_NODES);
    CHECK_MSG(strstr(e, "t.yaml:5:29: document too large: the alias *d") && strstr(e, cap) &&
                  strstr(e, "that aliases may copy in a document"),
              "%s", e);
    /* and refused cheaply: the tree never grew past the cap (a node is at most 3 allocations:
     * a string and its text, or a container and its table growing), where the node cap alone
     * let it reach a million nodes first */
    CHECK_MSG(allocs < 3L * DT_YAML_MAX_ALIAS_NODES, "%ld allocations", allocs);
}

/* A list of `n` plain scalars under anchor `&a` (n + 1 nodes), then `k` aliases of it. */
static char *anchored_list(int n, int k) {
    size_t cap = (size_t)n * 2 + (size_t)k * 16 + 64;
    char *s = malloc(cap);
    if (!s) return NULL;
    size_t len = (size_t)snprintf(s, cap, "a: &a [");
    for (int i = 0; i < n; i++) len += (size_t)snprintf(s + len, cap - len, i ? ",x" : "x");
    len += (size_t)snprintf(s + len, cap - len, "]\n");
    for (int i = 0; i < k; i++) len += (size_t)snprintf(s + len, cap - len, "b%d: *a\n", i);
    return s;
}

static void test_alias_cap_edge(void) {
    /* four copies of a quarter of the cap: exactly at the cap, so it loads */
    int n = DT_YAML_MAX_ALIAS_NODES / 4 - 1;
    char *s = anchored_list(n, 4);
    dt_yaml_doc *d = s ? yload(s) : NULL;
    CHECK_MSG(d != NULL, "%s", dt_last_error());
    if (d) CHECK(json_array_size(json_object_get(dt_yaml_root(d), "b3")) == (size_t)n);
    dt_yaml_free(d);
    free(s);
    /* a fifth copy passes it */
    s = anchored_list(n, 5);
    if (s) check_refused(&(refusal){s, "t.yaml:6:5: document too large: the alias *a"}, 1);
    free(s);
}

static void test_alias_realistic(void) {
    /* shared hyperparameter blocks, aliased and merged into many trials: loads */
    char *s = malloc(1 << 16);
    if (!s) return;
    size_t len = (size_t)sprintf(s, "base: &base\n");
    for (int i = 0; i < 30; i++)
        len += (size_t)sprintf(s + len, "  k%d: {type: const, val: %d}\n", i, i);
    len += (size_t)sprintf(s + len, "grid: &grid [1, 2, 4, 8, 16, 32]\n");
    for (int t = 0; t < 200; t++)
        len += (size_t)sprintf(s + len, "t%d:\n  <<: *base\n  k0: %d\n  sizes: *grid\n", t, t);
    dt_yaml_doc *d = yload(s);
    CHECK_MSG(d != NULL, "%s", dt_last_error());
    if (d) {
        json_t *t199 = json_object_get(dt_yaml_root(d), "t199");
        CHECK(json_integer_value(json_object_get(t199, "k0")) == 199);
        CHECK(json_integer_value(json_object_get(json_object_get(t199, "k29"), "val")) == 29);
        CHECK(json_array_size(json_object_get(t199, "sizes")) == 6);
    }
    dt_yaml_free(d);
    free(s);
}

/* `levels` nested flow lists around `inner`. */
static size_t nest(char *s, int levels, const char *inner) {
    size_t len = 0;
    for (int i = 0; i < levels; i++) s[len++] = '[';
    len += (size_t)sprintf(s + len, "%s", inner);
    for (int i = 0; i < levels; i++) s[len++] = ']';
    s[len] = 0;
    return len;
}

static void test_alias_depth(void) {
    /* each anchor nests 300 levels, within the limit; the alias makes 601 */
    char *s = malloc(4096);
    if (!s) return;
    size_t len = (size_t)sprintf(s, "a: &a ");
    len += nest(s + len, 300, "1");
    len += (size_t)sprintf(s + len, "\nb: ");
    len += nest(s + len, 300, "*a");
    sprintf(s + len, "\n");
    check_refused(&(refusal){s, "t.yaml:2:304: nesting deeper than 512: the alias *a"}, 1);
    /* 200 + 300 is within it */
    len = (size_t)sprintf(s, "a: &a ");
    len += nest(s + len, 300, "1");
    len += (size_t)sprintf(s + len, "\nb: ");
    len += nest(s + len, 200, "*a");
    sprintf(s + len, "\n");
    dt_yaml_doc *d = yload(s);
    CHECK_MSG(d != NULL, "%s", dt_last_error());
    dt_yaml_free(d);
    free(s);
}

int main(void) {
    TEST_RUN(test_tags_on_keys);
    TEST_RUN(test_tags_elsewhere);
    TEST_RUN(test_tags_accepted);
    TEST_RUN(test_alias_bomb);
    TEST_RUN(test_alias_cap_edge);
    TEST_RUN(test_alias_realistic);
    TEST_RUN(test_alias_depth);
    TEST_END();
}
