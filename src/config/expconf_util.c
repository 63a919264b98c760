/*
 * expconf_util.c — the helpers every section of the experiment config reads with: strings,
 * sections with their unknown keys, lists, and warnings with the file and line.
 */
#include "config_impl.h"

#include <stdarg.h>

const char *dt__cfg_describe(const vctx *v, const json_t *x, char *buf, size_t n) {
    return dt_conf_describe(&v->conf, x, buf, n);
}

dt_status dt__cfg_get_str(const dt_conf_sec *s, const char *key, bool required, bool nonempty,
                          const char *hint, char **out) {
    const char *p = NULL;
    *out = NULL;
    if (required && !dt_conf_get(s, key)) return dt_conf_missing(s, key, hint);
    TRY(dt_conf_str(s, key, nonempty, &p));
    if (p && !(*out = strdup(p))) return OOM();
    return DT_OK;
}

dt_status dt__cfg_section(vctx *v, const dt_conf_sec *parent, const char *key,
                          const char *const *known, const char *const *accepted, dt_conf_sec *out) {
    TRY(dt_conf_section(parent, key, 0, known, out));
    return out->obj ? dt_conf_check_keys(&v->conf, out->obj, out->path, known, accepted) : DT_OK;
}

dt_status dt__cfg_list_of(const dt_conf_sec *s, const char *key, bool strings) {
    const json_t *x;
    char d[64];
    TRY(dt_conf_list(s, key, &x));
    for (size_t i = 0; x && i < json_array_size(x); i++) {
        json_t *e = json_array_get(x, i);
        if (strings ? !json_is_string(e) : !json_is_object(e))
            return dt_conf_error_at(
                s->conf, dt_yaml_item_pos(s->conf->doc, x, i), "%s[%zu] must be %s, got %s", key, i,
                strings ? "a string" : "a mapping", dt_conf_describe(s->conf, e, d, sizeof d));
    }
    return DT_OK;
}

/* Append the warning w (owned) to cfg->warnings; whoever validates prints them (config check,
 * train, experiment create, the web page). */
dt_status dt__cfg_push_warning(dt_expconf *c, char *w) {
    char **ws = w ? realloc(c->warnings, (size_t)(c->n_warnings + 1) * sizeof *ws) : NULL;
    if (!ws) {
        free(w);
        return dt_error(DT_ERR_OOM, "out of memory recording a config warning");
    }
    c->warnings = ws;
    c->warnings[c->n_warnings++] = w;
    return DT_OK;
}

dt_status dt__cfg_warn(vctx *v, dt_yaml_pos pos, const char *fmt, ...) {
    char msg[1024], where[512] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (v->conf.doc && pos.line > 0) /* FILE:LINE, as a compiler's note */
        snprintf(where, sizeof where, "%s:%d", dt_yaml_name(v->conf.doc), pos.line);
    else if (v->conf.doc)
        snprintf(where, sizeof where, "%s", dt_yaml_name(v->conf.doc));
    size_t n = strlen(where) + strlen(msg) + 3;
    char *w = malloc(n);
    if (w) snprintf(w, n, "%s%s%s", where, *where ? ": " : "", msg);
    return dt__cfg_push_warning(v->cfg, w);
}
