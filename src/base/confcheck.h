/*
 * base/confcheck.h — the config-validation toolkit (base layer): typed getters with key paths,
 * did-you-mean suggestions, unknown-key warnings and "got ..." rendering, for every config the
 * platform reads (the DeepSpeed config, the experiment config, and the ones that come next).
 *
 * A check runs over a jansson tree, optionally with the dt_yaml_doc it came from (then errors
 * and warnings start with "file:line:col: "; a JSON config has no positions). The caller opens
 * sections (dt_conf_sec: an object and its key path) and reads keys with the getters. Getters
 * leave *out untouched when the key is absent or null, so a default is whatever *out held; in a
 * section opened with DT_CONF_AUTO the string "auto" also means the default. The first bad value
 * is a DT_ERR_CONFIG: "[where: ][prefix]key.path must be <what>, got <value>[; hint: ...]".
 *
 * Wording follows the config's dialect (its users' own words), the only thing that differs:
 *   DT_CONF_YAML (experiment config, also when read back as JSON): "a mapping", "a list",
 *     booleans are true/false only, integers are named by their bounds ("a positive integer",
 *     "a non-negative integer", "at most N"), reals "a number > 1";
 *   DT_CONF_JSON (DeepSpeed config, pydantic's reading): "an object", "an array", booleans also
 *     0/1, ranges as ">= 1" / "in [0, 3]", and each type error hints at the JSON to write.
 *
 * Suggestions (one rule for every config): the candidate closest to the word by dt_edit_distance
 * with ASCII case folded, if that distance is at most a third of the word's length clamped to
 * [2, 4] (1 for words of up to 3 bytes): "stag" → "stage", "batch" → "batches", "sgd" → "SGD";
 * otherwise the first candidate that the word is a prefix of, or that is a prefix of the word,
 * when the shorter of the two has at least 6 bytes ("train_micro_batch_size" →
 * "train_micro_batch_size_per_gpu"); otherwise none ("foo", "pbt").
 */
#ifndef DTRAIN_CONFCHECK_H
#define DTRAIN_CONFCHECK_H

#include "dtrain/base.h"
#include "base/yaml.h"
#include "base/base_impl.h"

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_conf_dialect { DT_CONF_YAML = 0, DT_CONF_JSON = 1 } dt_conf_dialect;

/* One unknown key: its full path, a suggestion (borrowed from the caller's key lists) or NULL,
 * and where the key is written. */
typedef struct dt_conf_unknown {
    char *path;
    const char *suggestion;
    dt_yaml_pos pos;
} dt_conf_unknown;

/* A check in progress. Set the fields up to auto_note (zero the rest); free with dt_conf_clear. */
typedef struct dt_conf {
    dt_conf_dialect dialect;
    const dt_yaml_doc *doc; /* positions for messages; NULL: none */
    const json_t *root;     /* a key missing here has no position (1:1 would name a sibling) */
    const char *prefix; /* put before each message, after the position ("ds_config: "), or NULL */
    const char *hint;   /* "; hint: <hint>" for errors that carry none, or NULL */
    const char *auto_note; /* after a "got" of the string "auto" outside DT_CONF_AUTO sections */
    int n_unknown;         /* unknown keys seen by dt_conf_check_keys, in order */
    dt_conf_unknown *unknown;
} dt_conf;

/* Free what the check recorded (the unknown keys); the dt_conf itself is the caller's. */
DT_API void dt_conf_clear(dt_conf *c);

/* Section flags. */
enum {
    DT_CONF_AUTO =
        1u << 0, /* the string "auto" means the default (DeepSpeed's pydantic sections) */
};

/* An object being read and its key path. */
typedef struct dt_conf_sec {
    dt_conf *conf;
    const json_t *obj; /* NULL: the section is absent (every getter then keeps the default) */
    unsigned flags;
    const char *const *known; /* its keys, for "is 'metrc' a typo?" in dt_conf_missing; or NULL */
    char path[256];           /* "zero_optimization.offload_param"; "" for the root */
} dt_conf_sec;

/* The root section (c->root, path ""). */
DT_API dt_conf_sec dt_conf_root(dt_conf *c, unsigned flags, const char *const *known);
/* A sub-section: absent or null → out->obj NULL; an object → it; else DT_ERR_CONFIG. */
DT_API dt_status dt_conf_section(const dt_conf_sec *parent, const char *key, unsigned flags,
                                 const char *const *known, dt_conf_sec *out);
/* "path.key" (or "key" at the root) into buf; returns buf. */
DT_API const char *dt_conf_path(const dt_conf_sec *s, const char *key, char *buf, size_t n);
/* The value of key: NULL when absent, null, or "auto" in a DT_CONF_AUTO section. */
DT_API const json_t *dt_conf_get(const dt_conf_sec *s, const char *key);

/* ---- getters: DT_OK and *out untouched when the key is absent; DT_ERR_CONFIG on a bad value */

DT_API dt_status dt_conf_bool(const dt_conf_sec *s, const char *key, bool *out);
/* An integer (an integral real such as 5e8 counts) in [lo, hi]. */
DT_API dt_status dt_conf_int(const dt_conf_sec *s, const char *key, int64_t lo, int64_t hi,
                             int64_t *out);
DT_API dt_status dt_conf_int32(const dt_conf_sec *s, const char *key, int lo, int hi, int *out);
/* A finite number >= lo (> lo when `open`; lo = -INFINITY for any). YAML's .inf/.nan refused. */
DT_API dt_status dt_conf_real(const dt_conf_sec *s, const char *key, double lo, bool open,
                              double *out);
DT_API dt_status dt_conf_float(const dt_conf_sec *s, const char *key, double lo, bool open,
                               float *out);
/* A string (borrowed from the tree); `nonempty` refuses "". */
DT_API dt_status dt_conf_str(const dt_conf_sec *s, const char *key, bool nonempty,
                             const char **out);
/* A string that is one of the NULL-terminated valid[] (case-sensitive); *out = its index. The
 * error lists them and suggests the closest; `hint` (or NULL) is added to it. */
DT_API dt_status dt_conf_enum(const dt_conf_sec *s, const char *key, const char *const *valid,
                              const char *hint, int *out);
/* A list (any items): *out = the array, NULL when absent. */
DT_API dt_status dt_conf_list(const dt_conf_sec *s, const char *key, const json_t **out);

/* ---- errors -------------------------------------------------------------------------------- */

/* DT_ERR_CONFIG "[where: ][prefix]<message>[; hint: <c->hint>]" at `pos`. */
DT_API dt_status dt_conf_error_at(const dt_conf *c, dt_yaml_pos pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same at the value of s.key (its position, when known). */
DT_API dt_status dt_conf_error(const dt_conf_sec *s, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "path.key must be <want>, got <value>[; hint: <hint>]" for the value of s.key. */
DT_API dt_status dt_conf_expected(const dt_conf_sec *s, const char *key, const char *want,
                                  const char *hint);
/* "path.key is required[ (is 'metrc' on line 3 a typo?)][; hint: <hint>]", at the section; a
 * key of the section outside s->known that looks like a typo of `key` is named. */
DT_API dt_status dt_conf_missing(const dt_conf_sec *s, const char *key, const char *hint);
/* Where the value of s.key is written ({0, 0} if unknown); where the section starts. */
DT_API dt_yaml_pos dt_conf_pos(const dt_conf_sec *s, const char *key);
DT_API dt_yaml_pos dt_conf_sec_pos(const dt_conf_sec *s);
/* A value for "got ...": in the dialect's words (dt_conf describes a mapping or an object). */
DT_API const char *dt_conf_describe(const dt_conf *c, const json_t *v, char *buf, size_t n);

/* ---- suggestions and unknown keys ------------------------------------------------------------ */

/* The candidate in the NULL-terminated list(s) that `word` is a typo of (the rule on top), or
 * NULL. dt_conf_suggest2 searches two lists, the first first. */
DT_API const char *dt_conf_suggest(const char *word, const char *const *cands);
DT_API const char *dt_conf_suggest2(const char *word, const char *const *a, const char *const *b);
/* An integer value: a json integer or an integral real such as 5e8 (|x| < 9.2e18). */
DT_API bool dt_conf_as_int(const json_t *v, int64_t *out);
/* True if s is in the NULL-terminated list (NULL list: false). */
DT_API bool dt_conf_in_list(const char *s, const char *const *list);

/* Record every key of `obj` (if an object) that is in neither `known` nor `accepted` (keys the
 * config takes without using): its path under `path`, the suggestion from both lists, its
 * position. DT_ERR_OOM if recording fails. */
DT_API dt_status dt_conf_check_keys(dt_conf *c, const json_t *obj, const char *path,
                                    const char *const *known, const char *const *accepted);
/* Unknown key i as a warning of its own: "[where: ][prefix]unknown key 'a.b' (ignored)[; did
 * you mean 'x'?]". Returns buf. */
DT_API const char *dt_conf_unknown_warning(const dt_conf *c, int i, char *buf, size_t n);
/* All unknown keys as one warning to dt_log (nothing if none): "[prefix]N unknown keys ignored:
 * a.b (did you mean 'x'?), c, ..." (a long list is cut with ", ..."). */
DT_API void dt_conf_log_unknowns(const dt_conf *c);

#ifdef __cplusplus
}
#endif
#endif
