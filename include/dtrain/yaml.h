/*
 * dtrain/yaml.h — YAML loading with source positions, and small JSON helpers (base layer).
 *
 * dt_yaml_doc: a YAML file (or string) loaded into a jansson tree (mappings → objects,
 * sequences → arrays, scalars typed by the YAML 1.2 core schema), plus the line:column of every
 * node, so a later validation error can point at "config.yaml:12:5". Positions are looked up by
 * (parent, key) or (array, index) — jansson's true/false/null are shared singletons, so a node
 * pointer alone cannot name them. Validating a loaded tree is base/confcheck.h's job.
 */
#ifndef DTRAIN_YAML_H
#define DTRAIN_YAML_H

#include "dtrain/base.h"

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- YAML ----------------------------------------------------------------------------------
 *
 * Scalars (YAML 1.2 core schema; only plain, i.e. unquoted, scalars are resolved):
 *   null, Null, NULL, ~, empty          → json null
 *   true/True/TRUE, false/False/FALSE   → json true/false ("yes", "on" stay strings)
 *   123, -7, +7, 0x1F, 0o17             → json integer (out of int64 range: an error)
 *   1.5, .5, 1e-3, -2.5E+4              → json real
 *   .inf, -.inf, .nan (any case form)   → the strings ".inf", "-.inf", ".nan": jansson cannot
 *                                          hold non-finite reals; dt_json_number() reads them
 *   anything else, and every quoted or block (| >) scalar → json string
 * Explicit tags !!str !!int !!float !!bool !!null !!map !!seq are honoured; others are refused,
 * wherever they sit (values, items, the document's root); a key, always a string, takes only
 * !!str (or the non-specific '!'). Anchors and aliases are supported (an alias is a deep copy of
 * the anchored node, whose children keep their positions at the anchor), as is the merge key
 * `<<: *base`. Duplicate keys, complex (non-scalar) keys, recursive aliases and more than one
 * document are errors, as are nesting deeper than 512 (counting what aliases expand to) and
 * aliases that would copy more than DT_YAML_MAX_ALIAS_NODES nodes in all: an alias's size is
 * measured before it is copied, so an alias bomb is refused having built at most that many. */

/* Nodes the aliases of one document may copy in all (65536: a config's shared blocks copied a
 * few hundred times over; a "billion laughs" document is refused at the alias that passes it). */
#define DT_YAML_MAX_ALIAS_NODES 65536

typedef struct dt_yaml_doc dt_yaml_doc;

/* A position in the source: 1-based line and column; line 0 = unknown. */
typedef struct dt_yaml_pos {
    int line, col;
} dt_yaml_pos;

/* Load `path`. On error returns NULL: DT_ERR_IO if the file can't be read, DT_ERR_CONFIG with
 * "path:line:col: what the parser said" for malformed YAML. An empty file gives a null root. */
DT_API dt_yaml_doc *dt_yaml_load_file(const char *path);
/* Load `len` bytes of `text`; `name` (e.g. "config.yaml") prefixes positions in messages. */
DT_API dt_yaml_doc *dt_yaml_load_string(const char *text, size_t len, const char *name);
DT_API void dt_yaml_free(dt_yaml_doc *doc);

/* The tree (borrowed: owned by the doc; take a json_incref to keep it longer). Positions are
 * known only for nodes the loader made: nodes added later have none. */
DT_API json_t *dt_yaml_root(const dt_yaml_doc *doc);
/* The name given at load time (the path for dt_yaml_load_file). */
DT_API const char *dt_yaml_name(const dt_yaml_doc *doc);

/* Where the value of member `key` of object `obj` starts. {0, 0} if unknown. */
DT_API dt_yaml_pos dt_yaml_value_pos(const dt_yaml_doc *doc, const json_t *obj, const char *key);
/* Where the key `key` of object `obj` is written. */
DT_API dt_yaml_pos dt_yaml_key_pos(const dt_yaml_doc *doc, const json_t *obj, const char *key);
/* Where item `i` of array `arr` starts. */
DT_API dt_yaml_pos dt_yaml_item_pos(const dt_yaml_doc *doc, const json_t *arr, size_t i);
/* Where an object, array, number or string node starts (unknown for true/false/null, which
 * are shared singletons: use the parent-based lookups for those). */
DT_API dt_yaml_pos dt_yaml_node_pos(const dt_yaml_doc *doc, const json_t *node);
/* Write "name:line:col" (or "name" if pos is unknown; "" if doc is NULL) into buf; returns buf. */
DT_API const char *dt_yaml_where(const dt_yaml_doc *doc, dt_yaml_pos pos, char *buf, size_t n);

/* A json number as a double: integers, reals, and the strings ".inf", "-.inf", ".nan" that
 * stand for YAML's non-finite floats. False (out untouched) for anything else. */
DT_API bool dt_json_number(const json_t *v, double *out);

#ifdef __cplusplus
}
#endif
#endif
