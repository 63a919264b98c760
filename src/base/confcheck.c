/*
 * confcheck.c — the config-validation toolkit: sections with key paths, typed getters, error
 * and warning messages with source positions, did-you-mean suggestions, unknown keys.
 *
 * Every config the platform reads goes through these functions, so a key path, a "got ...", a
 * suggestion and a position read the same everywhere. The contract, the two dialects' words and
 * the suggestion rule are in base/confcheck.h. Nothing here allocates except the list of
 * unknown keys (dt_conf_clear frees it); messages are built in fixed buffers and cut if long.
 */
#include "base/confcheck.h"
#include "base/base_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- suggestions --------------------------------------------------------------------------- */

/* dt_edit_distance with ASCII case folded. */
static int fold_distance(const char *a, const char *b) {
    char la[256], lb[256];
    size_t n = strlen(a), m = strlen(b);
    if (n > 255 || m > 255) return (int)(n > m ? n : m);
    for (size_t i = 0; i <= n; i++) la[i] = (char)(a[i] >= 'A' && a[i] <= 'Z' ? a[i] + 32 : a[i]);
    for (size_t j = 0; j <= m; j++) lb[j] = (char)(b[j] >= 'A' && b[j] <= 'Z' ? b[j] + 32 : b[j]);
    return dt_edit_distance(la, lb);
}

const char *dt_conf_suggest2(const char *word, const char *const *a, const char *const *b) {
    const char *const *lists[2] = {a, b};
    const char *best = NULL;
    int best_d = 0;
    for (int k = 0; k < 2; k++)
        for (const char *const *c = lists[k]; c && *c; c++) {
            int d = fold_distance(word, *c);
            if (!best || d < best_d) best_d = d, best = *c;
        }
    int len = (int)strlen(word);
    int limit = len <= 3 ? 1 : len / 3 < 2 ? 2 : len / 3 > 4 ? 4 : len / 3;
    if (best && best_d <= limit) return best;
    /* a shortened or extended name ("train_micro_batch_size") */
    for (int k = 0; k < 2; k++)
        for (const char *const *c = lists[k]; c && *c; c++) {
            size_t lc = strlen(*c), lw = strlen(word);
            size_t shorter = lc < lw ? lc : lw;
            if (shorter >= 6 && !strncasecmp(word, *c, shorter)) return *c;
        }
    return NULL;
}

const char *dt_conf_suggest(const char *word, const char *const *cands) {
    return dt_conf_suggest2(word, cands, NULL);
}

bool dt_conf_in_list(const char *s, const char *const *list) {
    for (; list && *list; list++)
        if (!strcmp(s, *list)) return true;
    return false;
}

/* ---- sections and paths -------------------------------------------------------------------- */

/* "a.b" from a parent path and a key (path "" → key), cut to fit. */
static const char *join(const char *path, const char *key, char *buf, size_t n) {
    /* by hand: a truncated path is fine in a message, and snprintf would warn about it */
    size_t i = 0;
    for (const char *p = path; *p && i + 1 < n; p++) buf[i++] = *p;
    if (*path && i + 1 < n) buf[i++] = '.';
    for (const char *p = key; *p && i + 1 < n; p++) buf[i++] = *p;
    buf[i] = 0;
    return buf;
}

const char *dt_conf_path(const dt_conf_sec *s, const char *key, char *buf, size_t n) {
    return join(s->path, key, buf, n);
}

dt_conf_sec dt_conf_root(dt_conf *c, unsigned flags, const char *const *known) {
    dt_conf_sec s = {.conf = c, .obj = c->root, .flags = flags, .known = known};
    return s;
}

const json_t *dt_conf_get(const dt_conf_sec *s, const char *key) {
    if (!json_is_object(s->obj)) return NULL;
    const json_t *v = json_object_get(s->obj, key);
    if (!v || json_is_null(v)) return NULL;
    if ((s->flags & DT_CONF_AUTO) && json_is_string(v) && !strcmp(json_string_value(v), "auto"))
        return NULL;
    return v;
}

dt_yaml_pos dt_conf_pos(const dt_conf_sec *s, const char *key) {
    return dt_yaml_value_pos(s->conf->doc, s->obj, key);
}

dt_yaml_pos dt_conf_sec_pos(const dt_conf_sec *s) {
    if (!s->obj || s->obj == s->conf->root) return (dt_yaml_pos){0, 0};
    return dt_yaml_node_pos(s->conf->doc, s->obj);
}

const char *dt_conf_describe(const dt_conf *c, const json_t *v, char *buf, size_t n) {
    return dt__json_describe(v, c->dialect == DT_CONF_YAML, buf, n);
}

/* ---- errors -------------------------------------------------------------------------------- */

/* "[where: ][prefix]" into buf. */
static const char *lead(const dt_conf *c, dt_yaml_pos pos, char *buf, size_t n) {
    char w[512];
    snprintf(buf, n, "%s%s%s", c->doc ? dt_yaml_where(c->doc, pos, w, sizeof w) : "",
             c->doc ? ": " : "", c->prefix ? c->prefix : "");
    return buf;
}

static dt_status verror(const dt_conf *c, dt_yaml_pos pos, const char *fmt, va_list ap) {
    char msg[1024], pre[600];
    vsnprintf(msg, sizeof msg, fmt, ap);
    bool add_hint = c->hint && !strstr(msg, "hint:");
    return dt_error(DT_ERR_CONFIG, "%s%s%s%s", lead(c, pos, pre, sizeof pre), msg,
                    add_hint ? "; hint: " : "", add_hint ? c->hint : "");
}

dt_status dt_conf_error_at(const dt_conf *c, dt_yaml_pos pos, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    dt_status st = verror(c, pos, fmt, ap);
    va_end(ap);
    return st;
}

dt_status dt_conf_error(const dt_conf_sec *s, const char *key, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    dt_status st = verror(s->conf, dt_conf_pos(s, key), fmt, ap);
    va_end(ap);
    return st;
}

/* "path.key must be <want><sep>got <value><auto note><note>[; hint: <hint>]". */
static dt_status refuse(const dt_conf_sec *s, const char *key, const char *want, const char *sep,
                        const char *note, const char *hint) {
    const dt_conf *c = s->conf;
    const json_t *v = json_object_get(s->obj, key);
    char p[300], d[96];
    bool is_auto = json_is_string(v) && !strcmp(json_string_value(v), "auto");
    const char *auto_note = is_auto && c->auto_note ? c->auto_note : "";
    return dt_conf_error(s, key, "%s must be %s%sgot %s%s%s%s%s", dt_conf_path(s, key, p, sizeof p),
                         want, sep, dt_conf_describe(c, v, d, sizeof d), auto_note,
                         note ? note : "", hint ? "; hint: " : "", hint ? hint : "");
}

dt_status dt_conf_expected(const dt_conf_sec *s, const char *key, const char *want,
                           const char *hint) {
    return refuse(s, key, want, ", ", NULL, hint);
}

dt_status dt_conf_missing(const dt_conf_sec *s, const char *key, const char *hint) {
    char full[300];
    dt_conf_path(s, key, full, sizeof full);
    const char *typo = NULL;
    const char *k;
    json_t *val;
    const char *const one[] = {key, NULL};
    if (json_is_object(s->obj)) json_object_foreach((json_t *)s->obj, k, val) {
            if (!typo && !dt_conf_in_list(k, s->known) && dt_conf_suggest(k, one)) typo = k;
        }
    dt_yaml_pos tp = typo ? dt_yaml_key_pos(s->conf->doc, s->obj, typo) : (dt_yaml_pos){0, 0};
    char t[400] = "";
    if (typo && tp.line > 0)
        snprintf(t, sizeof t, " (is '%s' on line %d a typo?)", typo, tp.line);
    else if (typo)
        snprintf(t, sizeof t, " (is '%s' a typo?)", typo);
    return dt_conf_error_at(s->conf, dt_conf_sec_pos(s), "%s is required%s%s%s", full, t,
                            hint ? "; hint: " : "", hint ? hint : "");
}

/* ---- getters ------------------------------------------------------------------------------- */

dt_status dt_conf_section(const dt_conf_sec *parent, const char *key, unsigned flags,
                          const char *const *known, dt_conf_sec *out) {
    *out = (dt_conf_sec){.conf = parent->conf, .flags = flags, .known = known};
    dt_conf_path(parent, key, out->path, sizeof out->path);
    const json_t *v = dt_conf_get(parent, key);
    if (!v) return DT_OK;
    if (!json_is_object(v)) {
        bool yaml = parent->conf->dialect == DT_CONF_YAML;
        return dt_conf_expected(parent, key, yaml ? "a mapping" : "an object",
                                yaml ? NULL : "write the section as {\"key\": value, ...}");
    }
    out->obj = v;
    return DT_OK;
}

dt_status dt_conf_bool(const dt_conf_sec *s, const char *key, bool *out) {
    const json_t *v = dt_conf_get(s, key);
    if (!v) return DT_OK;
    if (json_is_boolean(v)) {
        *out = json_is_true(v);
        return DT_OK;
    }
    if (s->conf->dialect == DT_CONF_JSON) {
        /* pydantic reads the numbers 0 and 1 as booleans */
        if (json_is_number(v) && (json_number_value(v) == 0 || json_number_value(v) == 1)) {
            *out = json_number_value(v) == 1;
            return DT_OK;
        }
        return dt_conf_expected(s, key, "a boolean", "write true or false (without quotes)");
    }
    static const char *const yaml11[] = {"yes", "no",  "on",  "off", "y",  "n",   "Yes", "No",
                                         "On",  "Off", "YES", "NO",  "ON", "OFF", NULL};
    bool old = json_is_string(v) && dt_conf_in_list(json_string_value(v), yaml11);
    return refuse(s, key, "true or false", ", ",
                  old ? " (YAML 1.2 reads yes/no/on/off as strings; write true or false)" : NULL,
                  NULL);
}

bool dt_conf_as_int(const json_t *x, int64_t *out) {
    if (json_is_integer(x)) {
        *out = (int64_t)json_integer_value(x);
        return true;
    }
    if (json_is_real(x)) {
        double r = json_real_value(x);
        if (isfinite(r) && r == floor(r) && fabs(r) < 9.2e18) {
            *out = (int64_t)r;
            return true;
        }
    }
    return false;
}

dt_status dt_conf_int(const dt_conf_sec *s, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    const json_t *v = dt_conf_get(s, key);
    if (!v) return DT_OK;
    int64_t x;
    bool ok = dt_conf_as_int(v, &x);
    if (ok && x >= lo && x <= hi) {
        *out = x;
        return DT_OK;
    }
    if (s->conf->dialect == DT_CONF_JSON) {
        if (!ok)
            return dt_conf_expected(s, key, "an integer", "write a whole number such as 8 or 5e8");
        char p[300], range[96];
        if (hi == INT64_MAX)
            snprintf(range, sizeof range, ">= %lld", (long long)lo);
        else
            snprintf(range, sizeof range, "in [%lld, %lld]", (long long)lo, (long long)hi);
        return dt_conf_error(s, key, "%s must be %s, got %lld; hint: use a value %s",
                             dt_conf_path(s, key, p, sizeof p), range, (long long)x, range);
    }
    char want[64];
    if (ok && x > hi)
        snprintf(want, sizeof want, "at most %lld", (long long)hi);
    else if (lo == 1 || lo == 0)
        snprintf(want, sizeof want, "a %s integer", lo ? "positive" : "non-negative");
    else if (lo == INT64_MIN)
        snprintf(want, sizeof want, "an integer");
    else
        snprintf(want, sizeof want, "an integer >= %lld", (long long)lo);
    return dt_conf_expected(s, key, want, NULL);
}

dt_status dt_conf_int32(const dt_conf_sec *s, const char *key, int lo, int hi, int *out) {
    int64_t x = *out; /* unchanged unless the value is good */
    dt_status st = dt_conf_int(s, key, lo, hi, &x);
    *out = (int)x;
    return st;
}

dt_status dt_conf_real(const dt_conf_sec *s, const char *key, double lo, bool open, double *out) {
    const json_t *v = dt_conf_get(s, key);
    if (!v) return DT_OK;
    double x;
    bool ok = dt_json_number(v, &x) && isfinite(x);
    if (ok && (open ? x > lo : x >= lo)) {
        *out = x;
        return DT_OK;
    }
    const char *op = open ? ">" : ">=";
    if (s->conf->dialect == DT_CONF_JSON) {
        if (!ok)
            return dt_conf_expected(s, key, "a number",
                                    "write a number such as 1.0 or 1e-3 (without quotes)");
        char p[300];
        return dt_conf_error(s, key, "%s must be %s %g, got %g; hint: use a value %s %g",
                             dt_conf_path(s, key, p, sizeof p), op, lo, x, op, lo);
    }
    char want[64];
    if (isinf(lo) && lo < 0)
        snprintf(want, sizeof want, "a finite number");
    else
        snprintf(want, sizeof want, "a number %s %g", op, lo);
    return dt_conf_expected(s, key, want, NULL);
}

dt_status dt_conf_float(const dt_conf_sec *s, const char *key, double lo, bool open, float *out) {
    double x = *out; /* unchanged unless the value is good */
    dt_status st = dt_conf_real(s, key, lo, open, &x);
    *out = (float)x;
    return st;
}

dt_status dt_conf_str(const dt_conf_sec *s, const char *key, bool nonempty, const char **out) {
    const json_t *v = dt_conf_get(s, key);
    if (!v) return DT_OK;
    if (!json_is_string(v)) {
        if (s->conf->dialect == DT_CONF_JSON)
            return dt_conf_expected(s, key, "a string", "write the value in double quotes");
        bool scalar = json_is_number(v) || json_is_boolean(v);
        return refuse(s, key, "a string", ", ", scalar ? " (quote it to make it a string)" : NULL,
                      NULL);
    }
    if (nonempty && !*json_string_value(v)) {
        char p[300];
        return dt_conf_error(s, key, "%s must not be empty", dt_conf_path(s, key, p, sizeof p));
    }
    *out = json_string_value(v);
    return DT_OK;
}

dt_status dt_conf_enum(const dt_conf_sec *s, const char *key, const char *const *valid,
                       const char *hint, int *out) {
    const json_t *v = dt_conf_get(s, key);
    if (!v) return DT_OK;
    const char *str = json_string_value(v);
    for (int i = 0; str && valid[i]; i++)
        if (!strcmp(str, valid[i])) {
            *out = i;
            return DT_OK;
        }
    /* YAML: one of a, b; got "x" (did you mean 'y'?) — JSON: one of "a", "b", got ... "y"?) */
    bool json = s->conf->dialect == DT_CONF_JSON;
    char list[400], note[128] = "";
    size_t used = (size_t)snprintf(list, sizeof list, "one of ");
    for (int i = 0; valid[i] && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, json ? "%s\"%s\"" : "%s%s",
                                 i ? ", " : "", valid[i]);
    const char *sug = str ? dt_conf_suggest(str, valid) : NULL;
    if (sug)
        snprintf(note, sizeof note, json ? " (did you mean \"%s\"?)" : " (did you mean '%s'?)",
                 sug);
    return refuse(s, key, list, json ? ", " : "; ", note, hint);
}

dt_status dt_conf_list(const dt_conf_sec *s, const char *key, const json_t **out) {
    const json_t *v = dt_conf_get(s, key);
    *out = NULL;
    if (!v) return DT_OK;
    if (!json_is_array(v)) {
        bool yaml = s->conf->dialect == DT_CONF_YAML;
        return dt_conf_expected(s, key, yaml ? "a list" : "an array",
                                yaml ? NULL : "write the values as [a, b, ...]");
    }
    *out = v;
    return DT_OK;
}

/* ---- unknown keys -------------------------------------------------------------------------- */

dt_status dt_conf_check_keys(dt_conf *c, const json_t *obj, const char *path,
                             const char *const *known, const char *const *accepted) {
    if (!json_is_object(obj)) return DT_OK;
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)obj, k, val) {
        if (dt_conf_in_list(k, known) || dt_conf_in_list(k, accepted)) continue;
        dt_conf_unknown *u = realloc(c->unknown, (size_t)(c->n_unknown + 1) * sizeof *u);
        if (!u) return dt_error(DT_ERR_OOM, "out of memory recording an unknown config key");
        c->unknown = u;
        char full[300];
        u = &c->unknown[c->n_unknown];
        *u = (dt_conf_unknown){.path = strdup(join(path, k, full, sizeof full)),
                               .suggestion = dt_conf_suggest2(k, known, accepted),
                               .pos = dt_yaml_key_pos(c->doc, obj, k)};
        if (!u->path) return dt_error(DT_ERR_OOM, "out of memory recording an unknown config key");
        c->n_unknown++;
    }
    return DT_OK;
}

const char *dt_conf_unknown_warning(const dt_conf *c, int i, char *buf, size_t n) {
    const dt_conf_unknown *u = &c->unknown[i];
    char pre[600];
    snprintf(buf, n, "%sunknown key '%s' (ignored)%s%s%s", lead(c, u->pos, pre, sizeof pre),
             u->path, u->suggestion ? "; did you mean '" : "", u->suggestion ? u->suggestion : "",
             u->suggestion ? "'?" : "");
    return buf;
}

void dt_conf_log_unknowns(const dt_conf *c) {
    if (!c->n_unknown) return;
    char text[1800];
    size_t used = 0;
    int shown = 0;
    text[0] = 0;
    for (int i = 0; i < c->n_unknown && used <= sizeof text - 200; i++, shown++) {
        const dt_conf_unknown *u = &c->unknown[i];
        int w = snprintf(text + used, sizeof text - used, "%s%s%s%s%s", shown ? ", " : "", u->path,
                         u->suggestion ? " (did you mean '" : "",
                         u->suggestion ? u->suggestion : "", u->suggestion ? "'?)" : "");
        if (w > 0) used += (size_t)w < sizeof text - used ? (size_t)w : 0;
    }
    dt_log(DT_LOG_WARN, "%s%d unknown key%s ignored: %s%s", c->prefix ? c->prefix : "",
           c->n_unknown, c->n_unknown == 1 ? "" : "s", text, shown < c->n_unknown ? ", ..." : "");
}

void dt_conf_clear(dt_conf *c) {
    if (!c) return;
    for (int i = 0; i < c->n_unknown; i++) free(c->unknown[i].path);
    free(c->unknown);
    c->unknown = NULL;
    c->n_unknown = 0;
}
