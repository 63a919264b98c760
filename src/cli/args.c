/* args.c — the one argument parser of the dtrain command's verbs (option tables with flags,
 * values, words, integers and numbers in their ranges, lists; positional arguments; the usage
 * error; verb tables) and the syntax checks of ids, `--config` overrides and the master's URL
 * (args.h). */
#include "args.h"
#include "cli.h"

#include "config/expconf_doc.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
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

/* "A, B or C" of a NULL-terminated word list into buf. */
static const char *words_text(const char *const *w, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = 0;
    for (int k = 0; w[k] && at < n; k++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s", k ? (w[k + 1] ? ", " : " or ") : "", w[k]);
    return buf;
}

/* A bound for a message: an integer's without a fraction. */
static const char *bound_text(double b, char *buf, size_t n) {
    snprintf(buf, n, "%.15g", b);
    return buf;
}

/* What an integer or number option must be: "an integer in [1, 64]", "a number > 0". */
static const char *range_text(const dt_cli_opt *o, char *buf, size_t n) {
    char lo[32], hi[32];
    const char *what = o->integer ? "an integer" : "a number";
    bound_text(o->lo, lo, sizeof lo);
    if (isinf(o->hi))
        snprintf(buf, n, "%s %s %s", what, o->above_lo ? ">" : ">=", lo);
    else
        snprintf(buf, n, "%s in %c%s, %s]", what, o->above_lo ? '(' : '[', lo,
                 bound_text(o->hi, hi, sizeof hi));
    return buf;
}

/* Store the value v of option o where the option says; false with err when v is not of its
 * kind or range. */
static bool store_value(const dt_cli_opt *o, const char *v, char *err, size_t errn) {
    char what[160];
    if (o->list) {
        if (o->list->n >= DT_CLI_MAX_LIST) {
            snprintf(err, errn, "%s given more than %d times", o->name, DT_CLI_MAX_LIST);
            return false;
        }
        o->list->v[o->list->n++] = v;
        return true;
    }
    if (o->integer || o->number) {
        char *end = NULL;
        errno = 0;
        double x = o->integer ? (double)strtoll(v, &end, 10) : strtod(v, &end);
        if (!*v || *end || errno || !isfinite(x) || x < o->lo || x > o->hi ||
            (o->above_lo && x == o->lo)) {
            snprintf(err, errn, "%s must be %s, got '%s'", o->name,
                     range_text(o, what, sizeof what), v);
            return false;
        }
        if (o->integer)
            *o->integer = strtoll(v, NULL, 10);
        else
            *o->number = x;
        return true;
    }
    int k = 0;
    while (o->choices && o->choices[k] && strcmp(o->choices[k], v)) k++;
    if (o->choices && !o->choices[k]) {
        snprintf(err, errn, "%s must be %s, got '%s'", o->name,
                 words_text(o->choices, what, sizeof what), v);
        return false;
    }
    *o->value = v;
    return true;
}

/* The option argument a (argv[*i]) and its value(s); false with err. */
static bool take_option(const dt_cli_opt *opts, int n_opts, bool *seen, int argc, char **argv,
                        int *i, char *err, size_t errn) {
    const char *a = argv[*i], *eq = strchr(a, '=');
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    const dt_cli_opt *o = find_opt(opts, n_opts, a, len);
    if (!o) {
        snprintf(err, errn, "unknown option '%.*s'", (int)len, a);
        return false;
    }
    if (o->flag) {
        if (eq) snprintf(err, errn, "%s takes no value", o->name);
        return eq ? false : (*o->flag = true);
    }
    if (!o->list && seen[o - opts]) {
        snprintf(err, errn, "%s given twice", o->name);
        return false;
    }
    seen[o - opts] = true;
    const char *v = eq ? eq + 1 : *i + 1 < argc ? argv[++*i] : NULL;
    if (!v) {
        snprintf(err, errn, "%s needs a value", o->name);
        return false;
    }
    if (!store_value(o, v, err, errn)) return false;
    while (o->list && o->more && *i + 1 < argc && o->more(argv[*i + 1]))
        if (!store_value(o, argv[++*i], err, errn)) return false;
    return true;
}

int dt_cli_parse(int argc, char **argv, const dt_cli_opt *opts, int n_opts, const char **pos,
                 int min_pos, int max_pos, const char *pos_names, char *err, size_t errn) {
    int npos = 0;
    bool options_done = false, seen[DT_CLI_MAX_OPTS] = {0};
    if (n_opts > DT_CLI_MAX_OPTS) {
        snprintf(err, errn, "more than %d options in one table", DT_CLI_MAX_OPTS);
        return DT_CLI_BAD;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!options_done && (!strcmp(a, "--help") || !strcmp(a, "-h"))) return DT_CLI_HELP;
        if (!options_done && !strcmp(a, "--")) {
            options_done = true;
        } else if (options_done || a[0] != '-' || !a[1]) {
            if (npos >= max_pos) {
                snprintf(err, errn, "unexpected argument '%s'", a);
                return DT_CLI_BAD;
            }
            pos[npos++] = a;
        } else if (!take_option(opts, n_opts, seen, argc, argv, &i, err, errn)) {
            return DT_CLI_BAD;
        }
    }
    if (npos < min_pos) {
        char name[64];
        snprintf(err, errn, "missing %s", nth_name(pos_names, npos, name, sizeof name));
        return DT_CLI_BAD;
    }
    return npos;
}

int dt_cli_usage_error(const char *who, const char *err, void (*usage)(FILE *)) {
    fprintf(stderr, "%s: %s\n", who, err);
    usage(stderr);
    return DT_EXIT_USAGE;
}

int dt_cli_parse_verb(const char *who, void (*usage)(FILE *), int argc, char **argv,
                      const dt_cli_opt *opts, int n_opts, const char **pos, int min_pos,
                      int max_pos, const char *pos_names, int *rc) {
    char err[512];
    int n =
        dt_cli_parse(argc, argv, opts, n_opts, pos, min_pos, max_pos, pos_names, err, sizeof err);
    if (n == DT_CLI_HELP) *rc = DT_EXIT_OK, usage(stdout);
    if (n == DT_CLI_BAD) *rc = dt_cli_usage_error(who, err, usage);
    return n < 0 ? -1 : n;
}

const void *dt_cli_pick_verb(const char *who, void (*usage)(FILE *), int argc, char **argv,
                             const void *table, size_t n, size_t size,
                             char verb_who[DT_CLI_WHO_MAX], int *rc) {
    char err[256];
    if (argc < 1) return *rc = dt_cli_usage_error(who, "missing the verb", usage), NULL;
    if (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h") || !strcmp(argv[0], "help"))
        return *rc = DT_EXIT_OK, usage(stdout), NULL;
    for (size_t k = 0; k < n; k++) {
        const char *row = (const char *)table + k * size, *name;
        memcpy(&name, row, sizeof name);
        if (!strcmp(argv[0], name))
            return snprintf(verb_who, DT_CLI_WHO_MAX, "%s %s", who, name), row;
    }
    snprintf(err, sizeof err, "unknown verb '%s'", argv[0]);
    *rc = dt_cli_usage_error(who, err, usage);
    return NULL;
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

bool dt_cli_check_override(const char *kv, char *err, size_t errn) {
    json_t *scratch = json_object();
    dt_status st = scratch ? dt_config_override(scratch, kv) : DT_ERR_OOM;
    json_decref(scratch);
    if (st != DT_OK) snprintf(err, errn, "--config: %s", dt_last_error());
    return st == DT_OK;
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
