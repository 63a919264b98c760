/* override.c — KEY=VALUE overrides of an experiment config (`dtrain experiment create --config`
 * checks them before sending; the master applies them to the config's tree): one grammar, one
 * set of messages, for both.
 *
 * KEY is a dot-separated path of names (letters, digits, '_' and '-'); VALUE is YAML (a scalar
 * or a flow sequence / mapping; empty means the empty string). Mappings missing on the path are
 * created; a path through a value that is not a mapping is an error. */
#include "config/expconf_doc.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static bool name_char(char c) {
    return isalnum((unsigned char)c) || c == '_' || c == '-';
}

/* The key's grammar; `eq` is the '=' that ends it. */
static dt_status check_key(const char *kv, const char *eq) {
    bool seg_empty = true;
    for (const char *p = kv; p <= eq; p++) {
        if (p == eq || *p == '.') {
            if (seg_empty)
                return dt_error(DT_ERR_CONFIG,
                                "override '%s': the key '%.*s' has an empty name; hint: a key is "
                                "a dot-separated path such as hyperparameters.lr",
                                kv, (int)(eq - kv), kv);
            seg_empty = true;
        } else if (!name_char(*p)) {
            return dt_error(DT_ERR_CONFIG,
                            "override '%s': the key '%.*s' has the character '%c'; hint: key "
                            "names are letters, digits, '_' and '-', joined by '.'",
                            kv, (int)(eq - kv), kv, *p);
        } else {
            seg_empty = false;
        }
    }
    return DT_OK;
}

/* The value as a json tree (a new reference). */
static dt_status parse_value(const char *kv, const char *eq, json_t **out) {
    dt_yaml_doc *vd = dt_yaml_load_string(eq + 1, strlen(eq + 1), "value");
    if (!vd)
        return dt_error(DT_ERR_CONFIG,
                        "override '%s': the value is not valid YAML (%s); hint: quote a string "
                        "value in the shell, e.g. --config 'description=\"a: b\"'",
                        kv, dt_last_error());
    *out = json_incref(dt_yaml_root(vd));
    dt_yaml_free(vd);
    if (!*out) *out = json_string("");
    return *out ? DT_OK : dt_error(DT_ERR_OOM, "override '%s': out of memory", kv);
}

dt_status dt_config_override(json_t *root, const char *kv) {
    const char *eq = strchr(kv, '=');
    if (!eq)
        return dt_error(DT_ERR_CONFIG,
                        "override '%s' has no '='; hint: write KEY=VALUE, e.g. "
                        "searcher.max_trials=4",
                        kv);
    json_t *val = NULL;
    dt_status st = check_key(kv, eq);
    if (st == DT_OK) st = parse_value(kv, eq, &val);
    if (st != DT_OK) return st;
    json_t *obj = root;
    for (const char *part = kv; part < eq;) {
        size_t n = strcspn(part, ".=");
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)n, part);
        if (part + n == eq) return json_object_set_new(obj, name, val) ? DT_ERR_OOM : DT_OK;
        json_t *child = json_object_get(obj, name);
        if (!child) json_object_set_new(obj, name, child = json_object());
        if (!json_is_object(child)) {
            json_decref(val);
            return dt_error(DT_ERR_CONFIG,
                            "override '%s': '%s' is not a mapping in the config; hint: override "
                            "'%.*s' itself",
                            kv, name, (int)(part + n - kv), kv);
        }
        obj = child;
        part += n + 1;
    }
    json_decref(val);
    return DT_OK; /* not reached: check_key refuses an empty key */
}
