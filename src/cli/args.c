/* args.c — argument parsing of the dtrain command's verbs and the syntax checks of ids,
 * `--config` overrides and the master's URL (args.h). */
#include "args.h"

#include "base/yaml.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const dt_cli_opt *find_opt(const dt_cli_opt *opts, int n, const char *a, size_t len) {
    for (int i = 0; i < n; i++)
        if (strlen(opts[i].name) == len && !strncmp(opts[i].name, a, len)) return &opts[i];
    return NULL;
}

/* The `k`th (0-based) space-separated word of `names` into buf ("ARGUMENT" past the end). */
static const char *nth_name(const char *names, int k, char *buf, size_t n) {
    const char *p = names ? names : "";
    for (; k > 0 && p; k--) p = strchr(p, ' '), p = p ? p + 1 : NULL;
    if (!p || !*p) return snprintf(buf, n, "ARGUMENT"), buf;
    snprintf(buf, n, "%.*s", (int)strcspn(p, " "), p);
    return buf;
}

int dt_cli_parse(int argc, char **argv, const dt_cli_opt *opts, int n_opts, const char **pos,
                 int min_pos, int max_pos, const char *pos_names, char *err, size_t errn) {
    int npos = 0;
    bool options_done = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!options_done && (!strcmp(a, "--help") || !strcmp(a, "-h"))) return DT_CLI_HELP;
        if (!options_done && !strcmp(a, "--")) {
            options_done = true;
            continue;
        }
        if (options_done || a[0] != '-' || !a[1]) {
            if (npos >= max_pos) {
                snprintf(err, errn, "unexpected argument '%s'", a);
                return DT_CLI_BAD;
            }
            pos[npos++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const dt_cli_opt *o = find_opt(opts, n_opts, a, len);
        if (!o) {
            snprintf(err, errn, "unknown option '%.*s'", (int)len, a);
            return DT_CLI_BAD;
        }
        if (o->flag) {
            if (eq) {
                snprintf(err, errn, "%s takes no value", o->name);
                return DT_CLI_BAD;
            }
            *o->flag = true;
            continue;
        }
        const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!v) {
            snprintf(err, errn, "%s needs a value", o->name);
            return DT_CLI_BAD;
        }
        if (o->list) {
            if (o->list->n >= DT_CLI_MAX_LIST) {
                snprintf(err, errn, "%s given more than %d times", o->name, DT_CLI_MAX_LIST);
                return DT_CLI_BAD;
            }
            o->list->v[o->list->n++] = v;
        } else {
            if (*o->value) {
                snprintf(err, errn, "%s given twice", o->name);
                return DT_CLI_BAD;
            }
            *o->value = v;
        }
    }
    if (npos < min_pos) {
        char name[64];
        snprintf(err, errn, "missing %s", nth_name(pos_names, npos, name, sizeof name));
        return DT_CLI_BAD;
    }
    return npos;
}

bool dt_cli_parse_id(const char *s, const char *what, int64_t *id, char *err, size_t errn) {
    char *end;
    errno = 0;
    long long v = isdigit((unsigned char)s[0]) ? strtoll(s, &end, 10) : 0;
    if (!isdigit((unsigned char)s[0]) || *end || errno || v < 1) {
        snprintf(err, errn, "%s must be a positive integer, got '%s'", what, s);
        return false;
    }
    *id = v;
    return true;
}

static bool name_char(char c) {
    return isalnum((unsigned char)c) || c == '_' || c == '-';
}

bool dt_cli_check_override(const char *kv, char *err, size_t errn) {
    const char *eq = strchr(kv, '=');
    if (!eq) {
        snprintf(err, errn,
                 "--config '%s' has no '='; hint: write KEY=VALUE, e.g. "
                 "--config searcher.max_trials=4",
                 kv);
        return false;
    }
    bool seg_empty = true;
    for (const char *p = kv; p <= eq; p++) {
        if (p == eq || *p == '.') {
            if (seg_empty) {
                snprintf(err, errn,
                         "--config '%s': the key '%.*s' has an empty name; hint: a key is a "
                         "dot-separated path such as hyperparameters.lr",
                         kv, (int)(eq - kv), kv);
                return false;
            }
            seg_empty = true;
        } else if (!name_char(*p)) {
            snprintf(err, errn,
                     "--config '%s': the key '%.*s' has the character '%c'; hint: key names "
                     "are letters, digits, '_' and '-', joined by '.'",
                     kv, (int)(eq - kv), kv, *p);
            return false;
        } else {
            seg_empty = false;
        }
    }
    dt_yaml_doc *doc = dt_yaml_load_string(eq + 1, strlen(eq + 1), "value");
    if (!doc) {
        snprintf(err, errn,
                 "--config '%s': the value is not valid YAML (%s); hint: quote a string "
                 "value in the shell, e.g. --config 'description=\"a: b\"'",
                 kv, dt_last_error());
        return false;
    }
    dt_yaml_free(doc);
    return true;
}

bool dt_cli_parse_url(const char *url, char *host, size_t hostn, int *port, bool *loopback,
                      char *err, size_t errn) {
    const char *p = url;
    if (strncmp(p, "http://", 7)) goto bad;
    p += 7;
    const char *h = p, *he;
    if (*p == '[') { /* [IPv6]:port */
        h = p + 1;
        he = strchr(h, ']');
        if (!he) goto bad;
        p = he + 1;
    } else {
        he = p + strcspn(p, ":/");
        p = he;
    }
    if (he == h || (size_t)(he - h) >= hostn || *p != ':') goto bad;
    char *end;
    errno = 0;
    long v = strtol(p + 1, &end, 10);
    if (end == p + 1 || errno || v < 1 || v > 65535 || (*end && strcmp(end, "/"))) goto bad;
    snprintf(host, hostn, "%.*s", (int)(he - h), h);
    *port = (int)v;
    *loopback = !strcmp(host, "localhost") || !strcmp(host, "::1") ||
                (!strncmp(host, "127.", 4) && strspn(host, "0123456789.") == strlen(host));
    return true;
bad:
    snprintf(err, errn,
             "DTRAIN_MASTER='%s' is not http://HOST:PORT; hint: e.g. "
             "DTRAIN_MASTER=http://127.0.0.1:8080",
             url);
    return false;
}
