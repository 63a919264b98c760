/*
 * yaml.c — YAML (libyaml's event parser) into a jansson tree, keeping source positions.
 *
 * The builder keeps a stack of open mappings/sequences and adds each finished node to the top
 * one. Scalars are typed by the YAML 1.2 core schema (see base/yaml.h); quoted and block
 * scalars are strings. Positions live in two hash tables owned by the doc, kept by yaml_pos.c
 * (yaml_impl.h): one by (parent, key or index), one by node. Tables key on node addresses, so every
 * node that ever had a position stays alive as long as the doc (merge sources are parked in `keep`
 * rather than freed), and no address is reused.
 *
 * Aliases become deep copies of the anchored node (the copies' children inherit the anchor's
 * positions; the copy itself is placed at the alias); a merge key moves the values of its
 * (parked) sources into the mapping. Before an alias copies anything, the size and depth of what it
 * would copy are measured: the nodes copied in all are capped at DT_YAML_MAX_ALIAS_NODES and a copy
 * may not nest past MAX_DEPTH, so a "billion laughs" document is refused at the first alias past
 * the cap, having built at most the cap's worth of nodes. The total node count is capped too
 * (MAX_NODES), for large documents without aliases.
 */
#include "base/yaml_impl.h"
#include "base/base_impl.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAX_NODES (1 << 20) /* nodes created, including alias copies */
#define MAX_DEPTH 512

/* ---- scalar resolution (YAML 1.2 core schema) ------------------------------------------------ */

static bool all_digits(const char *s, const char *digits) {
    if (!*s) return false;
    for (; *s; s++)
        if (!strchr(digits, *s)) return false;
    return true;
}

static bool is_core_null(const char *s) {
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

static int core_bool(const char *s) { /* 1 true, 0 false, -1 neither */
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) return 1;
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) return 0;
    return -1;
}

/* [-+]?[0-9]+ | 0o[0-7]+ | 0x[0-9a-fA-F]+ → 1 and *v; 0 if not an int; -1 if out of range. */
static int core_int(const char *s, int64_t *v) {
    const char *p = s;
    int base = 10;
    if (p[0] == '0' && p[1] == 'o') {
        p += 2, base = 8;
        if (!all_digits(p, "01234567")) return 0;
    } else if (p[0] == '0' && p[1] == 'x') {
        p += 2, base = 16;
        if (!all_digits(p, "0123456789abcdefABCDEF")) return 0;
    } else {
        const char *q = (*p == '-' || *p == '+') ? p + 1 : p;
        if (!all_digits(q, "0123456789")) return 0;
    }
    errno = 0;
    if (base == 10) {
        long long x = strtoll(p, NULL, 10);
        if (errno == ERANGE) return -1;
        *v = x;
    } else {
        unsigned long long x = strtoull(p, NULL, base);
        if (errno == ERANGE || x > (unsigned long long)INT64_MAX) return -1;
        *v = (int64_t)x;
    }
    return 1;
}

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static bool core_float_syntax(const char *s) {
    const char *p = s;
    if (*p == '-' || *p == '+') p++;
    int int_digits = 0, frac_digits = 0;
    while (*p >= '0' && *p <= '9') p++, int_digits++;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') p++, frac_digits++;
        if (!int_digits && !frac_digits) return false;
    } else if (!int_digits) {
        return false;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '-' || *p == '+') p++;
        int e = 0;
        while (*p >= '0' && *p <= '9') p++, e++;
        if (!e) return false;
    }
    return *p == 0;
}

/* 1 = +inf, -1 = -inf, 2 = nan, 0 = none */
static int core_nonfinite(const char *s) {
    int sign = 1;
    const char *p = s;
    if (*p == '-' || *p == '+') sign = *p == '-' ? -1 : 1, p++;
    if (!strcmp(p, ".inf") || !strcmp(p, ".Inf") || !strcmp(p, ".INF")) return sign;
    if (p == s && (!strcmp(s, ".nan") || !strcmp(s, ".NaN") || !strcmp(s, ".NAN"))) return 2;
    return 0;
}

static json_t *make_real(double x) {
    if (isnan(x)) return json_string(".nan");
    if (isinf(x)) return json_string(x > 0 ? ".inf" : "-.inf");
    return json_real(x);
}

/* ---- builder --------------------------------------------------------------------------------- */

typedef struct frame {
    json_t *node; /* object or array being filled (owned by its parent once attached) */
    bool is_map;
    bool have_key;
    char *key; /* pending key of a mapping */
    dt_yaml_pos key_pos;
    bool key_is_merge;
    json_t *merges; /* merge sources of this mapping, in order */
    int anchor;     /* index into the anchor table, or -1 */
    dt_yaml_pos pos;
} frame;

typedef struct anchor_ent {
    char *name;
    json_t *node; /* borrowed (alive: attached to the tree or kept) */
    dt_yaml_pos pos;
    bool open; /* still being built: an alias to it is recursive */
} anchor_ent;

typedef struct builder {
    dt_yaml_doc *doc;
    frame stack[MAX_DEPTH];
    int depth;
    anchor_ent *anchors;
    int n_anchors, cap_anchors;
    int64_t n_nodes;
    int64_t n_copied; /* nodes copied by aliases (≤ DT_YAML_MAX_ALIAS_NODES) */
    bool have_root;
    bool failed;
} builder;

static dt_yaml_pos mark_pos(yaml_mark_t m) {
    return (dt_yaml_pos){(int)m.line + 1, (int)m.column + 1};
}

/* Record an error at `pos` (once) and return false. */
__attribute__((format(printf, 3, 4))) static bool fail(builder *b, dt_yaml_pos pos, const char *fmt,
                                                       ...) {
    if (b->failed) return false;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    dt_error(DT_ERR_CONFIG, "%s:%d:%d: %s", b->doc->name, pos.line, pos.col, msg);
    b->failed = true;
    return false;
}

static bool count_node(builder *b, dt_yaml_pos pos) {
    if (++b->n_nodes > MAX_NODES)
        return fail(b, pos, "document too large (more than %d nodes; aliases expand to copies)",
                    MAX_NODES);
    return true;
}

static bool oom(builder *b, dt_yaml_pos pos) {
    if (b->failed) return false;
    dt_error(DT_ERR_OOM, "%s:%d:%d: out of memory while loading YAML", b->doc->name, pos.line,
             pos.col);
    b->failed = true;
    return false;
}

/* Nodes in the tree under `n` (itself included) into *size, counting no further than `limit` + 1,
 * and its container nesting into *depth (0 for a scalar, 1 for a flat list). Recursion is bounded:
 * every tree the builder holds nests at most MAX_DEPTH deep. */
static void tree_measure(const json_t *n, int64_t limit, int64_t *size, int *depth) {
    ++*size;
    int below = 0;
    if (json_is_object(n)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)n, k, v) {
            if (*size > limit) break;
            int d = 0;
            tree_measure(v, limit, size, &d);
            if (d > below) below = d;
        }
    } else if (json_is_array(n)) {
        for (size_t i = 0; i < json_array_size(n) && *size <= limit; i++) {
            int d = 0;
            tree_measure(json_array_get(n, i), limit, size, &d);
            if (d > below) below = d;
        }
    }
    *depth = json_is_object(n) || json_is_array(n) ? below + 1 : 0;
}

/* Reserve the copy of `src` for the alias `*name` at `pos` against the document's budget, before
 * anything is copied. False (error set) if it would take the nodes copied by aliases past
 * DT_YAML_MAX_ALIAS_NODES, or nest past MAX_DEPTH. */
static bool reserve_copy(builder *b, const json_t *src, const char *name, dt_yaml_pos pos) {
    int64_t left = DT_YAML_MAX_ALIAS_NODES - b->n_copied, size = 0;
    int depth = 0;
    tree_measure(src, left, &size, &depth);
    if (size > left)
        return fail(b, pos,
                    "document too large: the alias *%s here would copy more than the %lld nodes "
                    "left of the %d that aliases may copy in a document (a cap against alias "
                    "bombs); hint: anchor smaller blocks, or write the repeated ones out",
                    name, (long long)left, DT_YAML_MAX_ALIAS_NODES);
    if (b->depth + depth > MAX_DEPTH)
        return fail(b, pos, "nesting deeper than %d: the alias *%s here nests %d levels under %d",
                    MAX_DEPTH, name, depth, b->depth);
    b->n_copied += size;
    return true;
}

/* Deep copy of `src` with the positions of its children copied too. */
static json_t *copy_with_pos(builder *b, const json_t *src, dt_yaml_pos at) {
    if (!count_node(b, at)) return NULL;
    json_t *dst;
    if (json_is_object(src)) {
        dst = json_object();
        if (!dst) return NULL;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)src, k, v) {
            json_t *c = copy_with_pos(b, v, at);
            if (!c || json_object_set_new(dst, k, c)) {
                json_decref(dst);
                return NULL;
            }
            /* copy the entry out: child_put may grow (move) the table */
            const child_ent *e = dt__yaml_child_find(b->doc, src, k, 0);
            if (!e) continue;
            dt_yaml_pos vp = e->val, kp = e->key_pos;
            if (!dt__yaml_child_put(b->doc, dst, k, 0, vp, kp) ||
                !dt__yaml_node_put(b->doc, c, vp)) {
                json_decref(dst);
                return NULL;
            }
        }
    } else if (json_is_array(src)) {
        dst = json_array();
        if (!dst) return NULL;
        for (size_t i = 0; i < json_array_size(src); i++) {
            json_t *c = copy_with_pos(b, json_array_get(src, i), at);
            if (!c || json_array_append_new(dst, c)) {
                json_decref(dst);
                return NULL;
            }
            const child_ent *e = dt__yaml_child_find(b->doc, src, NULL, i);
            if (!e) continue;
            dt_yaml_pos vp = e->val;
            if (!dt__yaml_child_put(b->doc, dst, NULL, i, vp, vp) ||
                !dt__yaml_node_put(b->doc, c, vp)) {
                json_decref(dst);
                return NULL;
            }
        }
    } else {
        dst = json_copy((json_t *)src);
    }
    return dst;
}

/* Attach a finished node (reference stolen) to the open container, or make it the root. */
static bool add_node(builder *b, json_t *node, dt_yaml_pos pos) {
    if (!node) return b->failed ? false : oom(b, pos);
    if (!dt__yaml_node_put(b->doc, node, pos)) {
        json_decref(node);
        return oom(b, pos);
    }
    if (b->depth == 0) {
        b->doc->root = node;
        b->have_root = true;
        return true;
    }
    frame *f = &b->stack[b->depth - 1];
    if (!f->is_map) {
        size_t i = json_array_size(f->node);
        if (json_array_append_new(f->node, node)) return oom(b, pos);
        if (!dt__yaml_child_put(b->doc, f->node, NULL, i, pos, pos)) return oom(b, pos);
        return true;
    }
    /* a mapping value */
    char *key = f->key;
    f->key = NULL;
    f->have_key = false;
    if (f->key_is_merge) {
        f->key_is_merge = false;
        free(key);
        bool ok = json_is_object(node);
        if (json_is_array(node)) {
            ok = json_array_size(node) > 0;
            for (size_t i = 0; i < json_array_size(node); i++)
                ok = ok && json_is_object(json_array_get(node, i));
        }
        if (!ok) {
            json_decref(node);
            return fail(b, pos, "the merge key '<<' needs a mapping or a list of mappings");
        }
        if (!f->merges && !(f->merges = json_array())) {
            json_decref(node);
            return oom(b, pos);
        }
        if (json_is_object(node)) {
            json_array_append(f->merges, node);
        } else {
            for (size_t i = 0; i < json_array_size(node); i++)
                json_array_append(f->merges, json_array_get(node, i));
        }
        json_array_append_new(b->doc->keep, node); /* addresses stay unique */
        return true;
    }
    json_t *old = json_object_get(f->node, key);
    if (old) {
        dt_yaml_pos first = dt_yaml_key_pos(b->doc, f->node, key);
        json_decref(node);
        bool r = fail(b, f->key_pos, "duplicate key '%s' (first defined at line %d, column %d)",
                      key, first.line, first.col);
        free(key);
        return r;
    }
    bool ok = !json_object_set_new(f->node, key, node) &&
              dt__yaml_child_put(b->doc, f->node, key, 0, pos, f->key_pos);
    free(key);
    return ok ? true : oom(b, pos);
}

/* A mapping is complete: fill in merged keys that were not given explicitly. */
static bool apply_merges(builder *b, frame *f) {
    if (!f->merges) return true;
    for (size_t m = 0; m < json_array_size(f->merges); m++) {
        json_t *src = json_array_get(f->merges, m);
        const char *k;
        json_t *v;
        json_object_foreach(src, k, v) {
            if (json_object_get(f->node, k)) continue; /* explicit keys and earlier merges win */
            const child_ent *e = dt__yaml_child_find(b->doc, src, k, 0);
            dt_yaml_pos at = e ? e->val : f->pos, kat = e ? e->key_pos : at;
            /* the value moves rather than copies (it keeps its positions): a merge source is
             * parked, never in the tree, and merged into this one mapping only (an alias in a
             * merge is a copy of its own), so no node ends up in two places */
            if (json_object_set(f->node, k, v) ||
                !dt__yaml_child_put(b->doc, f->node, k, 0, at, kat))
                return oom(b, at);
        }
    }
    json_decref(f->merges);
    f->merges = NULL;
    return true;
}

static const char *short_tag(const char *tag) {
    static const char prefix[] = "tag:yaml.org,2002:";
    if (tag && !strncmp(tag, prefix, sizeof prefix - 1)) return tag + sizeof prefix - 1;
    return NULL;
}

/* A tag as a message shows it: "!!int" for the core schema's, else as resolved. */
static const char *tag_text(const char *tag, char *buf, size_t n) {
    const char *st = short_tag(tag);
    if (!st) return tag;
    snprintf(buf, n, "!!%s", st);
    return buf;
}

static json_t *resolve_scalar(builder *b, const yaml_event_t *ev, dt_yaml_pos pos) {
    const char *s = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    const char *tag = (const char *)ev->data.scalar.tag;
    bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    bool has_nul = strlen(s) != len;
    const char *kind; /* what the scalar must be: "auto", "str", "int", "float", "bool", "null" */
    if (!tag) {
        kind = plain ? "auto" : "str";
    } else if (!strcmp(tag, "!")) {
        kind = "str";
    } else {
        kind = short_tag(tag);
        if (!kind || (strcmp(kind, "str") && strcmp(kind, "int") && strcmp(kind, "float") &&
                      strcmp(kind, "bool") && strcmp(kind, "null"))) {
            char t[96];
            fail(b, pos, "unsupported tag '%s' (supported: !!str !!int !!float !!bool !!null)",
                 tag_text(tag, t, sizeof t));
            return NULL;
        }
    }
    if (!strcmp(kind, "str") || has_nul) {
        json_t *j = json_stringn(s, len);
        if (!j) fail(b, pos, "string is not valid UTF-8");
        return j;
    }
    bool any = !strcmp(kind, "auto");
    if ((any || !strcmp(kind, "null")) && is_core_null(s)) return json_null();
    if (any || !strcmp(kind, "bool")) {
        int v = core_bool(s);
        if (v >= 0) return json_boolean(v);
    }
    if (any || !strcmp(kind, "int")) {
        int64_t v;
        int r = core_int(s, &v);
        if (r < 0) {
            fail(b, pos, "integer %s is out of range (64-bit signed)", s);
            return NULL;
        }
        if (r > 0) return json_integer(v);
    }
    if (any || !strcmp(kind, "float")) {
        int nf = core_nonfinite(s);
        if (nf) return make_real(nf == 2 ? NAN : nf * INFINITY);
        int64_t iv = 0;
        if (core_float_syntax(s) || (!any && core_int(s, &iv) > 0)) {
            if (!any && (s[0] == '0' && (s[1] == 'x' || s[1] == 'o'))) return json_real((double)iv);
            return make_real(strtod(s, NULL));
        }
    }
    if (any) {
        json_t *j = json_stringn(s, len);
        if (!j) fail(b, pos, "string is not valid UTF-8");
        return j;
    }
    fail(b, pos, "'%s' is not a valid !!%s", s, kind);
    return NULL;
}

static bool register_anchor(builder *b, const char *name, json_t *node, dt_yaml_pos pos, bool open,
                            int *index) {
    if (b->n_anchors == b->cap_anchors) {
        int cap = b->cap_anchors ? b->cap_anchors * 2 : 8;
        anchor_ent *t = realloc(b->anchors, (size_t)cap * sizeof *t);
        if (!t) return oom(b, pos);
        b->anchors = t;
        b->cap_anchors = cap;
    }
    char *n = strdup(name);
    if (!n) return oom(b, pos);
    b->anchors[b->n_anchors] = (anchor_ent){n, node, pos, open};
    if (index) *index = b->n_anchors;
    b->n_anchors++;
    return true;
}

/* The open mapping expects a key: take this scalar as the key. A key is a string, so the only
 * tags it may carry are !!str and the non-specific '!'. */
static bool take_key(builder *b, frame *f, const yaml_event_t *ev, dt_yaml_pos pos) {
    const char *s = (const char *)ev->data.scalar.value;
    if (strlen(s) != ev->data.scalar.length) return fail(b, pos, "a key contains a NUL byte");
    const char *tag = (const char *)ev->data.scalar.tag, *st = short_tag(tag);
    if (tag && strcmp(tag, "!") && !(st && !strcmp(st, "str"))) {
        char t[96];
        return fail(b, pos,
                    "unsupported tag '%s' on the key '%s' (a key is a string: only !!str is "
                    "allowed there)",
                    tag_text(tag, t, sizeof t), s);
    }
    if (ev->data.scalar.anchor) return fail(b, pos, "anchors on keys are not supported");
    f->key = strdup(s);
    if (!f->key) return oom(b, pos);
    f->have_key = true;
    f->key_pos = pos;
    f->key_is_merge = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev->data.scalar.tag &&
                      !strcmp(s, "<<");
    return true;
}

static bool expecting_key(builder *b) {
    return b->depth > 0 && b->stack[b->depth - 1].is_map && !b->stack[b->depth - 1].have_key;
}

static bool on_event(builder *b, const yaml_event_t *ev, int *docs) {
    dt_yaml_pos pos = mark_pos(ev->start_mark);
    switch (ev->type) {
    case YAML_STREAM_START_EVENT:
    case YAML_STREAM_END_EVENT:
    case YAML_DOCUMENT_END_EVENT:
    case YAML_NO_EVENT:
        return true;
    case YAML_DOCUMENT_START_EVENT:
        if (++*docs > 1)
            return fail(b, pos, "more than one YAML document ('---'); a config is one document");
        return true;
    case YAML_SCALAR_EVENT: {
        if (expecting_key(b)) return take_key(b, &b->stack[b->depth - 1], ev, pos);
        if (!count_node(b, pos)) return false;
        json_t *j = resolve_scalar(b, ev, pos);
        if (!j) return b->failed ? false : oom(b, pos);
        if (ev->data.scalar.anchor &&
            !register_anchor(b, (const char *)ev->data.scalar.anchor, j, pos, false, NULL)) {
            json_decref(j);
            return false;
        }
        return add_node(b, j, pos);
    }
    case YAML_ALIAS_EVENT: {
        const char *name = (const char *)ev->data.alias.anchor;
        if (expecting_key(b)) return fail(b, pos, "an alias (*%s) as a key is not supported", name);
        int i = b->n_anchors - 1;
        while (i >= 0 && strcmp(b->anchors[i].name, name)) i--;
        if (i < 0) return fail(b, pos, "unknown alias *%s (no '&%s' before it)", name, name);
        if (b->anchors[i].open)
            return fail(b, pos, "recursive alias *%s (it refers to a node that contains it)", name);
        if (!reserve_copy(b, b->anchors[i].node, name, pos)) return false;
        json_t *c = copy_with_pos(b, b->anchors[i].node, pos);
        if (!c) return b->failed ? false : oom(b, pos);
        return add_node(b, c, pos);
    }
    case YAML_MAPPING_START_EVENT:
    case YAML_SEQUENCE_START_EVENT: {
        bool is_map = ev->type == YAML_MAPPING_START_EVENT;
        if (expecting_key(b))
            return fail(b, pos, "a %s as a mapping key is not supported (keys must be scalars)",
                        is_map ? "mapping" : "sequence");
        if (b->depth == MAX_DEPTH) return fail(b, pos, "nesting deeper than %d", MAX_DEPTH);
        const char *tag =
            (const char *)(is_map ? ev->data.mapping_start.tag : ev->data.sequence_start.tag);
        const char *st = short_tag(tag);
        char t[96];
        if (tag && strcmp(tag, "!") && !(st && !strcmp(st, is_map ? "map" : "seq")))
            return fail(b, pos, "unsupported tag '%s' on a %s", tag_text(tag, t, sizeof t),
                        is_map ? "mapping" : "sequence");
        if (!count_node(b, pos)) return false;
        json_t *n = is_map ? json_object() : json_array();
        if (!n) return oom(b, pos);
        frame *f = &b->stack[b->depth++];
        *f = (frame){.node = n, .is_map = is_map, .anchor = -1, .pos = pos};
        const char *anchor =
            (const char *)(is_map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor);
        if (anchor && !register_anchor(b, anchor, n, pos, true, &f->anchor)) return false;
        return true;
    }
    case YAML_MAPPING_END_EVENT:
    case YAML_SEQUENCE_END_EVENT: {
        frame *f = &b->stack[b->depth - 1];
        if (!apply_merges(b, f)) return false;
        if (f->anchor >= 0) b->anchors[f->anchor].open = false;
        json_t *n = f->node;
        dt_yaml_pos at = f->pos;
        f->node = NULL;
        b->depth--;
        return add_node(b, n, at);
    }
    }
    return true;
}

static dt_yaml_doc *load(const char *text, size_t len, const char *name) {
    dt_yaml_doc *doc = calloc(1, sizeof *doc);
    builder *b = calloc(1, sizeof *b);
    if (!doc || !b || !(doc->name = strdup(name ? name : "<string>")) ||
        !(doc->keep = json_array())) {
        free(b);
        dt_yaml_free(doc);
        dt_error(DT_ERR_OOM, "out of memory while loading YAML");
        return NULL;
    }
    b->doc = doc;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        free(b);
        dt_yaml_free(doc);
        dt_error(DT_ERR_OOM, "out of memory initialising the YAML parser");
        return NULL;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int docs = 0;
    bool done = false;
    while (!done && !b->failed) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            dt_yaml_pos p = mark_pos(parser.problem_mark);
            const char *problem = parser.problem ? parser.problem : "malformed YAML";
            if (parser.context)
                fail(b, p, "%s (%s at line %d, column %d)", problem, parser.context,
                     (int)parser.context_mark.line + 1, (int)parser.context_mark.column + 1);
            else
                fail(b, p, "%s", problem);
            break;
        }
        done = ev.type == YAML_STREAM_END_EVENT;
        on_event(b, &ev, &docs);
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    /* unwind whatever was open (only on failure) */
    for (int i = b->depth - 1; i >= 0; i--) {
        free(b->stack[i].key);
        json_decref(b->stack[i].merges);
        json_decref(b->stack[i].node);
    }
    for (int i = 0; i < b->n_anchors; i++) free(b->anchors[i].name);
    free(b->anchors);
    bool failed = b->failed;
    if (!failed && !b->have_root) doc->root = json_null(); /* empty stream */
    free(b);
    if (failed) {
        dt_yaml_free(doc);
        return NULL;
    }
    return doc;
}

dt_yaml_doc *dt_yaml_load_string(const char *text, size_t len, const char *name) {
    if (!text) {
        dt_error(DT_ERR_INVALID, "dt_yaml_load_string: text is NULL");
        return NULL;
    }
    return load(text, len, name);
}

dt_yaml_doc *dt_yaml_load_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        dt_error(DT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 14, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *t = realloc(buf, cap *= 2);
        if (!t) {
            free(buf);
            buf = NULL;
        } else {
            buf = t;
        }
    }
    bool err = ferror(f);
    fclose(f);
    if (!buf) {
        dt_error(DT_ERR_OOM, "out of memory reading %s", path);
        return NULL;
    }
    if (err) {
        free(buf);
        dt_error(DT_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    dt_yaml_doc *doc = load(buf, n, path);
    free(buf);
    return doc;
}

/* ---- values in messages -------------------------------------------------------------------- */

bool dt_json_number(const json_t *v, double *out) {
    if (json_is_integer(v)) {
        *out = (double)json_integer_value(v);
        return true;
    }
    if (json_is_real(v)) {
        *out = json_real_value(v);
        return true;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (!strcmp(s, ".inf")) {
            *out = INFINITY;
            return true;
        }
        if (!strcmp(s, "-.inf")) {
            *out = -INFINITY;
            return true;
        }
        if (!strcmp(s, ".nan")) {
            *out = NAN;
            return true;
        }
    }
    return false;
}

const char *dt__json_describe(const json_t *v, bool yaml, char *buf, size_t n) {
    if (!v) {
        snprintf(buf, n, "nothing");
        return buf;
    }
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        snprintf(buf, n, yaml ? "a mapping" : "an object");
        break;
    case JSON_ARRAY:
        snprintf(buf, n, yaml ? "a list" : "an array");
        break;
    case JSON_STRING: {
        const char *s = json_string_value(v), *pre = yaml ? "" : "the string ";
        if (strlen(s) > 40)
            snprintf(buf, n, "%s\"%.37s...\"", pre, s);
        else
            snprintf(buf, n, "%s\"%s\"", pre, s);
        break;
    }
    case JSON_INTEGER:
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
        break;
    case JSON_REAL:
        snprintf(buf, n, "%.17g", json_real_value(v));
        break;
    case JSON_TRUE:
        snprintf(buf, n, "true");
        break;
    case JSON_FALSE:
        snprintf(buf, n, "false");
        break;
    case JSON_NULL:
        snprintf(buf, n, "null");
        break;
    }
    return buf;
}
