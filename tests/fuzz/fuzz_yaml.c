/*
 * fuzz_yaml.c — the YAML loader (dtrain/yaml.h) on any bytes: load, then walk the tree asking
 * for every node's position and number, as the config validators do.
 */
#include "fuzz.h"

#include "base/yaml.h"

static void walk(const dt_yaml_doc *doc, const json_t *node, int depth) {
    char where[128];
    double d;
    dt_yaml_where(doc, dt_yaml_node_pos(doc, node), where, sizeof where);
    (void)dt_json_number(node, &d);
    if (depth > 1024) return; /* the loader refuses nesting deeper than 512 */
    if (json_is_object(node)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)node, k, v) {
            dt_yaml_pos kp = dt_yaml_key_pos(doc, node, k), vp = dt_yaml_value_pos(doc, node, k);
            FZ_ASSERT(kp.line >= 0 && vp.line >= 0);
            walk(doc, v, depth + 1);
        }
    } else if (json_is_array(node)) {
        for (size_t i = 0; i < json_array_size(node); i++) {
            FZ_ASSERT(dt_yaml_item_pos(doc, node, i).line >= 0);
            walk(doc, json_array_get(node, i), depth + 1);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_init();
    dt_yaml_doc *doc = dt_yaml_load_string((const char *)data, size, "fuzz.yaml");
    if (!doc) {
        FZ_ASSERT(dt_last_status() != DT_OK && dt_last_error()[0]);
        return 0;
    }
    walk(doc, dt_yaml_root(doc), 0);
    char *s = json_dumps(dt_yaml_root(doc), JSON_ENCODE_ANY | JSON_COMPACT);
    free(s);
    dt_yaml_free(doc);
    return 0;
}
