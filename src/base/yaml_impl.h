/*
 * yaml_impl.h — what the YAML reader's two files share: the document and its position tables
 * (yaml_pos.c keeps them and answers the public lookups; yaml.c builds the tree and records
 * each node's position as it goes).
 */
#ifndef DT_YAML_IMPL_H
#define DT_YAML_IMPL_H

#include "base/yaml.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct child_ent {
    const json_t *parent; /* NULL = empty slot */
    char *key;            /* object member (owned), or NULL for an array item */
    size_t index;
    dt_yaml_pos val, key_pos;
} child_ent;

typedef struct node_ent {
    const json_t *node; /* NULL = empty slot */
    dt_yaml_pos pos;
} node_ent;

struct dt_yaml_doc {
    char *name;
    json_t *root;
    json_t *keep; /* nodes kept alive only so their addresses stay unique (merge sources) */
    child_ent *child;
    size_t child_cap, child_n;
    node_ent *nodes;
    size_t node_cap, node_n;
};

/* The positions of parent[key] (key not NULL) or parent[index]; NULL when none was recorded. */
child_ent *dt__yaml_child_find(const dt_yaml_doc *d, const json_t *parent, const char *key,
                               size_t index);
/* Record (or overwrite) the positions of parent[key] / parent[index]. */
bool dt__yaml_child_put(dt_yaml_doc *d, const json_t *parent, const char *key, size_t index,
                        dt_yaml_pos val, dt_yaml_pos key_pos);
/* Record (or overwrite) node's own position; true for true/false/null, which have none (they
 * are singletons). False when out of memory. */
bool dt__yaml_node_put(dt_yaml_doc *d, const json_t *node, dt_yaml_pos pos);

#endif
