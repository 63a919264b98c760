/*
 * yaml_pos.c — the positions of a YAML document's nodes (base/yaml.h): two hash tables owned by
 * the doc, keyed on node addresses, which yaml.c fills while it builds the tree.
 *   - child table: (parent object, key) or (parent array, index) → value and key positions;
 *     this is the lookup validation uses, since jansson's true/false/null are singletons;
 *   - node table: node pointer → position, for containers, numbers and strings.
 * Also the public lookups over them, the "file:line:col" text, and freeing the doc.
 */
#include "base/yaml_impl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- position tables ----------------------------------------------------------------------- */

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static uint64_t child_hash(const json_t *parent, const char *key, size_t index) {
    uint64_t h = mix64((uint64_t)(uintptr_t)parent);
    if (key) {
        uint64_t f = 1469598103934665603ULL; /* FNV-1a */
        for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
            f ^= *p;
            f *= 1099511628211ULL;
        }
        return mix64(h ^ f);
    }
    return mix64(h ^ (index * 0x9e3779b97f4a7c15ULL + 1));
}

static bool child_match(const child_ent *e, const json_t *parent, const char *key, size_t index) {
    if (e->parent != parent) return false;
    if (key) return e->key && !strcmp(e->key, key);
    return !e->key && e->index == index;
}

child_ent *dt__yaml_child_find(const dt_yaml_doc *d, const json_t *parent, const char *key,
                               size_t index) {
    if (!d || !d->child_cap || !parent) return NULL;
    size_t mask = d->child_cap - 1;
    for (size_t i = child_hash(parent, key, index) & mask;; i = (i + 1) & mask) {
        child_ent *e = &d->child[i];
        if (!e->parent) return NULL;
        if (child_match(e, parent, key, index)) return e;
    }
}

static bool child_grow(dt_yaml_doc *d) {
    size_t cap = d->child_cap ? d->child_cap * 2 : 64;
    child_ent *t = calloc(cap, sizeof *t);
    if (!t) return false;
    for (size_t j = 0; j < d->child_cap; j++) {
        child_ent *e = &d->child[j];
        if (!e->parent) continue;
        size_t i = child_hash(e->parent, e->key, e->index) & (cap - 1);
        while (t[i].parent) i = (i + 1) & (cap - 1);
        t[i] = *e;
    }
    free(d->child);
    d->child = t;
    d->child_cap = cap;
    return true;
}

bool dt__yaml_child_put(dt_yaml_doc *d, const json_t *parent, const char *key, size_t index,
                        dt_yaml_pos val, dt_yaml_pos key_pos) {
    child_ent *e = dt__yaml_child_find(d, parent, key, index);
    if (e) {
        e->val = val;
        e->key_pos = key_pos;
        return true;
    }
    if ((d->child_n + 1) * 4 > d->child_cap * 3 && !child_grow(d)) return false;
    size_t mask = d->child_cap - 1;
    size_t i = child_hash(parent, key, index) & mask;
    while (d->child[i].parent) i = (i + 1) & mask;
    char *k = NULL;
    if (key && !(k = strdup(key))) return false;
    d->child[i] = (child_ent){parent, k, index, val, key_pos};
    d->child_n++;
    return true;
}

static bool is_singleton(const json_t *n) {
    return json_is_true(n) || json_is_false(n) || json_is_null(n);
}

static node_ent *node_find(const dt_yaml_doc *d, const json_t *node) {
    if (!d || !d->node_cap || !node) return NULL;
    size_t mask = d->node_cap - 1;
    for (size_t i = mix64((uint64_t)(uintptr_t)node) & mask;; i = (i + 1) & mask) {
        node_ent *e = &d->nodes[i];
        if (!e->node) return NULL;
        if (e->node == node) return e;
    }
}

bool dt__yaml_node_put(dt_yaml_doc *d, const json_t *node, dt_yaml_pos pos) {
    if (is_singleton(node)) return true;
    node_ent *e = node_find(d, node);
    if (e) {
        e->pos = pos;
        return true;
    }
    if ((d->node_n + 1) * 4 > d->node_cap * 3) {
        size_t cap = d->node_cap ? d->node_cap * 2 : 64;
        node_ent *t = calloc(cap, sizeof *t);
        if (!t) return false;
        for (size_t j = 0; j < d->node_cap; j++) {
            if (!d->nodes[j].node) continue;
            size_t i = mix64((uint64_t)(uintptr_t)d->nodes[j].node) & (cap - 1);
            while (t[i].node) i = (i + 1) & (cap - 1);
            t[i] = d->nodes[j];
        }
        free(d->nodes);
        d->nodes = t;
        d->node_cap = cap;
    }
    size_t mask = d->node_cap - 1;
    size_t i = mix64((uint64_t)(uintptr_t)node) & mask;
    while (d->nodes[i].node) i = (i + 1) & mask;
    d->nodes[i] = (node_ent){node, pos};
    d->node_n++;
    return true;
}

/* ---- public lookups -------------------------------------------------------------------------- */

json_t *dt_yaml_root(const dt_yaml_doc *doc) {
    return doc ? doc->root : NULL;
}
const char *dt_yaml_name(const dt_yaml_doc *doc) {
    return doc ? doc->name : "";
}

dt_yaml_pos dt_yaml_value_pos(const dt_yaml_doc *doc, const json_t *obj, const char *key) {
    child_ent *e = key ? dt__yaml_child_find(doc, obj, key, 0) : NULL;
    return e ? e->val : (dt_yaml_pos){0, 0};
}

dt_yaml_pos dt_yaml_key_pos(const dt_yaml_doc *doc, const json_t *obj, const char *key) {
    child_ent *e = key ? dt__yaml_child_find(doc, obj, key, 0) : NULL;
    return e ? e->key_pos : (dt_yaml_pos){0, 0};
}

dt_yaml_pos dt_yaml_item_pos(const dt_yaml_doc *doc, const json_t *arr, size_t i) {
    child_ent *e = dt__yaml_child_find(doc, arr, NULL, i);
    return e ? e->val : (dt_yaml_pos){0, 0};
}

dt_yaml_pos dt_yaml_node_pos(const dt_yaml_doc *doc, const json_t *node) {
    if (is_singleton(node)) return (dt_yaml_pos){0, 0};
    node_ent *e = node_find(doc, node);
    return e ? e->pos : (dt_yaml_pos){0, 0};
}

const char *dt_yaml_where(const dt_yaml_doc *doc, dt_yaml_pos pos, char *buf, size_t n) {
    if (!n) return buf;
    if (!doc) {
        buf[0] = 0;
    } else if (pos.line > 0) {
        snprintf(buf, n, "%s:%d:%d", doc->name, pos.line, pos.col);
    } else {
        snprintf(buf, n, "%s", doc->name);
    }
    return buf;
}

void dt_yaml_free(dt_yaml_doc *doc) {
    if (!doc) return;
    for (size_t i = 0; i < doc->child_cap; i++) free(doc->child[i].key);
    free(doc->child);
    free(doc->nodes);
    json_decref(doc->root);
    json_decref(doc->keep);
    free(doc->name);
    free(doc);
}
