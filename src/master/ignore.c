/*
 * ignore.c — gitignore-style patterns for an experiment's snapshot (ignore.h): parsed once
 * into a list, matched segment-aware (`*`, `?` and classes stop at `/`, `**` does not), the
 * last matching pattern deciding, and a path left out with any directory above it.
 */
#define _GNU_SOURCE
#include "master/ignore.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pattern {
    char *glob;    /* without the '!', the anchoring '/' and the trailing '/' */
    bool negate;   /* '!': take the path back in */
    bool dir_only; /* a trailing '/' */
    bool anchored; /* a '/' before the end: matched against the whole path */
} pattern;

struct dt__ignore {
    pattern *v;
    int n, cap;
};

/* Does the class at p ('[' ...) take c? *end is set past its ']'; -1 when p has no ']'. */
static int class_match(const char *p, char c, const char **end) {
    const char *q = p + 1;
    bool neg = *q == '!' || *q == '^';
    if (neg) q++;
    bool hit = false;
    for (bool first = true; *q && (first || *q != ']'); first = false) {
        char lo = *q == '\\' && q[1] ? *++q : *q;
        char hi = lo;
        if (q[1] == '-' && q[2] && q[2] != ']') {
            hi = q[2] == '\\' && q[3] ? q[3] : q[2];
            q += q[2] == '\\' && q[3] ? 3 : 2;
        }
        hit |= c >= lo && c <= hi;
        q++;
    }
    if (*q != ']') return -1;
    *end = q + 1;
    return c != '/' && hit != neg;
}

/* Does glob p match all of s? */
static bool glob(const char *p, const char *s) {
    while (*p) {
        if (p[0] == '*' && p[1] == '*') {
            const char *rest = p + 2;
            if (!*rest) return true; /* a trailing ** takes everything below */
            bool seg = *rest == '/'; /* "**\/": zero or more whole directories */
            if (seg) rest++;
            for (const char *t = s;; t++) {
                if ((!seg || t == s || t[-1] == '/') && glob(rest, t)) return true;
                if (!*t) return false;
            }
        }
        if (*p == '*') {
            for (const char *t = s;; t++) {
                if (glob(p + 1, t)) return true;
                if (!*t || *t == '/') return false;
            }
        }
        if (!*s) return false;
        if (*p == '?') {
            if (*s == '/') return false;
        } else if (*p == '[') {
            const char *end;
            int k = class_match(p, *s, &end);
            if (k == 0) return false;
            if (k > 0) {
                p = end;
                s++;
                continue;
            }
            if (*s != '[') return false; /* no ']': a plain '[' */
        } else {
            if (*p == '\\' && p[1]) p++;
            if (*p != *s) return false;
        }
        p++;
        s++;
    }
    return !*s;
}

/* One line into a pattern; false for a blank line or a comment. */
static bool parse_line(char *line, pattern *pt) {
    size_t n = strlen(line);
    if (n && line[n - 1] == '\r') line[--n] = 0;
    while (n && line[n - 1] == ' ' && !(n >= 2 && line[n - 2] == '\\')) line[--n] = 0;
    if (!n || line[0] == '#') return false;
    *pt = (pattern){0};
    if (line[0] == '!') pt->negate = true, line++, n--;
    if (n && line[n - 1] == '/') pt->dir_only = true, line[--n] = 0;
    if (!n) return false;
    pt->anchored = strchr(line, '/') != NULL;
    if (line[0] == '/') line++;
    pt->glob = *line ? strdup(line) : NULL;
    return pt->glob != NULL;
}

dt_status dt__ignore_add(dt__ignore **ig, const char *text) {
    if (!*ig && !(*ig = calloc(1, sizeof **ig))) return dt_error(DT_ERR_OOM, "out of memory");
    dt__ignore *s = *ig;
    char *copy = strdup(text), *save = NULL;
    if (!copy) return dt_error(DT_ERR_OOM, "out of memory");
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        pattern pt;
        if (!parse_line(line, &pt)) continue;
        if (s->n == s->cap) {
            int cap = s->cap ? 2 * s->cap : 16;
            pattern *v = realloc(s->v, (size_t)cap * sizeof *v);
            if (!v) {
                free(pt.glob);
                free(copy);
                return dt_error(DT_ERR_OOM, "out of memory");
            }
            s->v = v, s->cap = cap;
        }
        s->v[s->n++] = pt;
    }
    free(copy);
    return DT_OK;
}

dt_status dt__ignore_load(const char *dir, dt__ignore **ig) {
    static const char *const names[] = {".dtrainignore", ".detignore"};
    *ig = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "rb");
        if (!f && errno == ENOENT) continue;
        char *text = NULL;
        size_t len = 0;
        dt_status st = DT_OK;
        if (!f || getdelim(&text, &len, 0, f) < 0 || ferror(f))
            st = dt_error(DT_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        if (f) fclose(f);
        if (st == DT_OK && text) st = dt__ignore_add(ig, text);
        free(text);
        if (st != DT_OK) {
            dt__ignore_free(*ig);
            *ig = NULL;
            return st;
        }
    }
    return DT_OK;
}

/* The last pattern's verdict on this one path (its directories above not looked at). */
static bool match_one(const dt__ignore *ig, const char *path, bool is_dir) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    bool out = false;
    for (int i = 0; i < ig->n; i++) {
        const pattern *pt = &ig->v[i];
        if (pt->dir_only && !is_dir) continue;
        if (glob(pt->glob, pt->anchored ? path : base)) out = !pt->negate;
    }
    return out;
}

bool dt__ignore_match(const dt__ignore *ig, const char *path, bool is_dir) {
    if (!ig || !ig->n) return false;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    /* a directory left out takes everything under it: no '!' brings a file back from it */
    for (char *slash = strchr(buf, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = 0;
        bool out = match_one(ig, buf, true);
        *slash = '/';
        if (out) return true;
    }
    return match_one(ig, buf, is_dir);
}

void dt__ignore_free(dt__ignore *ig) {
    if (!ig) return;
    for (int i = 0; i < ig->n; i++) free(ig->v[i].glob);
    free(ig->v);
    free(ig);
}
