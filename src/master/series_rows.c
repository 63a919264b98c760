/*
 * series_rows.c — a number picked out of a stored metric row's JSON text without parsing the
 * row (series_cache.h's dt__row_number): a first chart read from the rows reads a million of
 * them, and most of its time went to parsing each whole row.
 */
#include "master/series_cache.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct scan {
    const char *p, *end;
} scan;

static void ws(scan *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool ends_token(char ch) {
    return ch == ',' || ch == ':' || ch == ']' || ch == '}' || ch == ' ' || ch == '\t' ||
           ch == '\r' || ch == '\n';
}

static bool in_number(char ch) {
    return (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '+' || ch == 'e' ||
           ch == 'E';
}

/* Past a string at c->p (at its opening quote); *escaped when it holds a backslash. */
static bool skip_string(scan *c, bool *escaped) {
    *escaped = false;
    for (c->p++; c->p < c->end; c->p++) {
        if (*c->p == '\\') {
            *escaped = true;
            c->p++;
        } else if (*c->p == '"') {
            c->p++;
            return true;
        }
    }
    return false;
}

/* Past one value of any type. */
static bool skip_value(scan *c) {
    int depth = 0;
    bool esc;
    do {
        ws(c);
        if (c->p >= c->end) return false;
        char ch = *c->p;
        if (ch == '"') {
            if (!skip_string(c, &esc)) return false;
        } else if (ch == '{' || ch == '[') {
            depth++, c->p++;
        } else if (ch == '}' || ch == ']') {
            depth--, c->p++;
        } else if (ch == ',' || ch == ':') {
            c->p++;
        } else {
            while (c->p < c->end && !ends_token(*c->p)) c->p++;
        }
    } while (depth > 0);
    return depth == 0;
}

/* Move c to the value of member `key` of the object at c->p: 1 found, 0 not there, -1 unsure. */
static int member(scan *c, const char *key) {
    size_t kl = strlen(key);
    ws(c);
    if (c->p >= c->end || *c->p != '{') return -1;
    c->p++;
    for (;;) {
        ws(c);
        if (c->p < c->end && *c->p == '}') return 0;
        if (c->p >= c->end || *c->p != '"') return -1;
        const char *k = c->p + 1;
        bool esc;
        if (!skip_string(c, &esc) || esc) return -1;
        bool match = (size_t)(c->p - 1 - k) == kl && !memcmp(k, key, kl);
        ws(c);
        if (c->p >= c->end || *c->p != ':') return -1;
        c->p++;
        ws(c);
        if (match) return 1;
        if (!skip_value(c)) return -1;
        ws(c);
        if (c->p < c->end && *c->p == ',') c->p++;
    }
}

int dt__row_number(const char *json, size_t len, const char *key, const char *sub, double *out) {
    scan c = {json, json + len};
    int r = member(&c, key);
    if (r == 1 && sub) r = member(&c, sub);
    if (r != 1) return r;
    if (c.p >= c.end) return -1;
    if (!(*c.p == '-' || (*c.p >= '0' && *c.p <= '9'))) return 0;
    char num[64];
    size_t n = 0;
    while (c.p + n < c.end && n < sizeof num - 1 && in_number(c.p[n])) n++;
    if (n == sizeof num - 1) return -1;
    memcpy(num, c.p, n);
    num[n] = '\0';
    char *e;
    *out = strtod(num, &e);
    return *e || !isfinite(*out) ? -1 : 1;
}
