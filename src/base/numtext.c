/*
 * numtext.c — numbers as a person reads them, and the JSON text every answer is written with.
 *
 * dt_fmt_double: the shortest decimal that reads back (strtod) as the same double: "0.003",
 * not the 17 digits "0.0030000000000000001". Integral values print all their digits ("100",
 * not "1e+02"). dt_json_dumps: a jansson tree as text, like json_dumps, but each real written
 * by dt_fmt_double (with ".0" when integral, so it stays a real), so the API, the pages and the
 * CLI's JSON show the numbers that were reported.
 */
#include "base/numtext.h"
#include "base/base_impl.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The digits d[0..p) (no trailing zeros past the first) with decimal exponent x, written as %.Pg
 * writes them: fixed when -4 <= x < P, else d.ddde+XX. */
static int g_text(bool neg, const char *d, int p, int x, int P, char buf[32]) {
    while (p > 1 && d[p - 1] == '0') p--;
    char *o = buf;
    if (neg) *o++ = '-';
    if (x < -4 || x >= P) {
        *o++ = d[0];
        if (p > 1) *o++ = '.', memcpy(o, d + 1, (size_t)p - 1), o += p - 1;
        o += snprintf(o, 8, "e%c%02d", x < 0 ? '-' : '+', x < 0 ? -x : x);
    } else if (x < 0) {
        *o++ = '0', *o++ = '.';
        for (int i = -1; i > x; i--) *o++ = '0';
        memcpy(o, d, (size_t)p), o += p;
    } else {
        for (int i = 0; i <= x; i++) *o++ = i < p ? d[i] : '0';
        if (p > x + 1) *o++ = '.', memcpy(o, d + x + 1, (size_t)(p - x - 1)), o += p - x - 1;
    }
    *o = '\0';
    return (int)(o - buf);
}

/* The 17 significant digits of v rounded to p digits (d, exponent *x); false when rounding the
 * 17 again could differ from rounding v (a tie in the digits dropped): ask printf then. */
static bool round_to(const char *d17, int x17, int p, char *d, int *x) {
    if (d17[p] == '5') {
        bool rest_zero = true;
        for (int i = p + 1; i < 17; i++) rest_zero &= d17[i] == '0';
        if (rest_zero) return false;
    }
    memcpy(d, d17, (size_t)p);
    *x = x17;
    if (d17[p] >= '5') {
        int i = p - 1;
        while (i >= 0 && d[i] == '9') d[i--] = '0';
        if (i >= 0) {
            d[i]++;
        } else { /* 99.9 -> 100: one more digit before the point */
            memmove(d + 1, d, (size_t)p - 1);
            d[0] = '1';
            ++*x;
        }
    }
    return true;
}

int dt_fmt_double(double v, char buf[32]) {
    if (isnan(v)) return snprintf(buf, 32, "nan");
    if (isinf(v)) return snprintf(buf, 32, v > 0 ? "inf" : "-inf");
    if (v == trunc(v) && fabs(v) < 1e16) return snprintf(buf, 32, "%.0f", v);
    /* The first precision p of 1..17 whose %.pg reads back. If some p <= 15 does, %.15g reads
     * back too and shows the same digits (a double's half-ulp, 1.1e-16 of it, is below half a
     * unit of a 15th digit, 5e-16; %g drops the trailing zeros, and a value with a fraction is
     * written without an exponent at p as at 15). So 15, then 16, then 17, which always reads
     * back: the 17 digits printed once, rounded to 15 and 16 here. Subnormals have fewer bits:
     * try each p. */
    if (fabs(v) < DBL_MIN) {
        int n = 0;
        for (int p = 1; p <= 17; p++)
            if (n = snprintf(buf, 32, "%.*g", p, v), strtod(buf, NULL) == v) break;
        return n;
    }
    char e[40], d17[18], d[18];
    snprintf(e, sizeof e, "%.16e", v); /* [-]d.dddddddddddddddde[+-]XX */
    bool neg = e[0] == '-';
    const char *m = e + neg;
    d17[0] = m[0];
    memcpy(d17 + 1, m + 2, 16);
    int x17 = atoi(m + 19);
    for (int p = 15; p <= 16; p++) {
        int x, n;
        if (round_to(d17, x17, p, d, &x))
            n = g_text(neg, d, p, x, p, buf);
        else
            n = snprintf(buf, 32, p == 15 ? "%.15g" : "%.16g", v);
        if (strtod(buf, NULL) == v) return n;
    }
    return g_text(neg, d17, 17, x17, 17, buf);
}

int dt_json_real_text(double v, char buf[32]) {
    if (!isfinite(v)) return snprintf(buf, 32, "null");
    int n = dt_fmt_double(v, buf);
    char *e = strchr(buf, 'e');
    if (!e) {
        if (!strchr(buf, '.')) memcpy(buf + n, ".0", 3), n += 2;
        return n;
    }
    /* e+05 -> e5, e-05 -> e-5, as JSON writers commonly do */
    char *from = e + 1, *to = e + 1;
    if (*from == '-') from++, to++;
    if (*from == '+') from++;
    while (*from == '0' && from[1]) from++;
    memmove(to, from, strlen(from) + 1);
    return (int)strlen(buf);
}

/* ---- JSON text ---- */

typedef struct jt {
    dt__buf b;
    size_t flags;
} jt;

static void put(jt *t, const char *s, size_t n) {
    dt__buf_put(&t->b, s, n);
}

static void puts_(jt *t, const char *s) {
    put(t, s, strlen(s));
}

static void string(jt *t, const char *s, size_t n) {
    put(t, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        put(t, s + run, i - run);
        run = i + 1;
        char esc[8];
        const char *e = c == '"'    ? "\\\""
                        : c == '\\' ? "\\\\"
                        : c == '\n' ? "\\n"
                        : c == '\t' ? "\\t"
                        : c == '\r' ? "\\r"
                        : c == '\b' ? "\\b"
                        : c == '\f' ? "\\f"
                                    : NULL;
        if (!e) snprintf(esc, sizeof esc, "\\u%04x", c), e = esc;
        puts_(t, e);
    }
    put(t, s + run, n - run);
    put(t, "\"", 1);
}

static void newline(jt *t, int depth) {
    size_t ind = t->flags & 0x1F; /* JSON_INDENT(n) */
    if (!ind) return;
    put(t, "\n", 1);
    for (size_t i = 0; i < ind * (size_t)depth; i++) put(t, " ", 1);
}

static int by_key(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void value(jt *t, const json_t *v, int depth);

/* An object or an array: one writer keeps their separators and indentation together. */
static void container(jt *t, const json_t *v, int depth) {
    bool obj = json_is_object(v);
    size_t n = obj ? json_object_size(v) : json_array_size(v);
    put(t, obj ? "{" : "[", 1);
    const char *sep = t->flags & JSON_COMPACT ? "," : ", ";
    if (t->flags & 0x1F) sep = ",";
    const char **keys = NULL;
    if (obj && n) {
        keys = malloc(n * sizeof *keys);
        if (!keys) {
            t->b.oom = true;
            return;
        }
        size_t i = 0;
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) keys[i++] = k;
        if (t->flags & JSON_SORT_KEYS) qsort(keys, n, sizeof *keys, by_key);
    }
    for (size_t i = 0; i < n; i++) {
        if (i) puts_(t, sep);
        newline(t, depth + 1);
        if (obj) {
            string(t, keys[i], strlen(keys[i]));
            puts_(t, t->flags & JSON_COMPACT ? ":" : ": ");
            value(t, json_object_get(v, keys[i]), depth + 1);
        } else {
            value(t, json_array_get(v, i), depth + 1);
        }
    }
    if (n) newline(t, depth);
    put(t, obj ? "}" : "]", 1);
    free(keys);
}

static void value(jt *t, const json_t *v, int depth) {
    char num[32];
    switch (json_typeof(v)) {
    case JSON_OBJECT:
    case JSON_ARRAY:
        container(t, v, depth);
        break;
    case JSON_STRING:
        string(t, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        put(t, num,
            (size_t)snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v)));
        break;
    case JSON_REAL:
        put(t, num, (size_t)dt_json_real_text(json_real_value(v), num));
        break;
    case JSON_TRUE:
        puts_(t, "true");
        break;
    case JSON_FALSE:
        puts_(t, "false");
        break;
    default:
        puts_(t, "null");
    }
}

char *dt_json_dumps(const json_t *v, size_t flags) {
    if (!v) return NULL;
    jt t = {.flags = flags};
    value(&t, v, 0);
    if (t.b.oom || !t.b.p) {
        free(t.b.p);
        return NULL;
    }
    return t.b.p;
}
