/* output.c — the one printer of the dtrain command (output.h): tables, plain lines, JSON, CSV,
 * and the formatting of numbers, times and durations they share. */
#define _GNU_SOURCE /* timegm */
#include "output.h"

#include "base/numtext.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct dt_cli_table {
    int ncols;
    char **headers;
    bool has_header; /* false: a list of fields, printed without a header in any mode */
    json_t *rows;    /* an array of arrays of cells */
};

static void *oom_check(void *p) {
    if (!p) {
        fprintf(stderr, "dtrain: out of memory\n");
        exit(1);
    }
    return p;
}

static char *xstrdup(const char *s) {
    return oom_check(strdup(s));
}

dt_cli_mode dt_cli_mode_for(bool json, FILE *f) {
    if (json) return DT_CLI_JSON;
    return isatty(fileno(f)) ? DT_CLI_TABLE : DT_CLI_PLAIN;
}

dt_cli_table *dt_cli_table_new(int ncols, const char *const *headers) {
    dt_cli_table *t = oom_check(calloc(1, sizeof *t));
    t->ncols = ncols;
    t->headers = oom_check(calloc((size_t)ncols, sizeof *t->headers));
    for (int i = 0; i < ncols; i++) t->headers[i] = xstrdup(headers ? headers[i] : "");
    t->has_header = headers != NULL;
    t->rows = oom_check(json_array());
    return t;
}

void dt_cli_table_free(dt_cli_table *t) {
    if (!t) return;
    for (int i = 0; i < t->ncols; i++) free(t->headers[i]);
    free(t->headers);
    json_decref(t->rows);
    free(t);
}

void dt_cli_table_row(dt_cli_table *t) {
    if (json_array_append_new(t->rows, oom_check(json_array()))) oom_check(NULL);
}

static void put_new(dt_cli_table *t, json_t *v) {
    size_t n = json_array_size(t->rows);
    if (!n) dt_cli_table_row(t), n = 1;
    if (json_array_append_new(json_array_get(t->rows, n - 1), oom_check(v))) oom_check(NULL);
}

void dt_cli_table_put(dt_cli_table *t, const char *s) {
    put_new(t, s ? json_string(s) : json_null());
}

void dt_cli_table_putf(dt_cli_table *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    put_new(t, json_string(oom_check(s)));
    free(s);
}

void dt_cli_table_put_json(dt_cli_table *t, const json_t *v) {
    put_new(t, v ? json_deep_copy(v) : json_null());
}

void dt_cli_table_put_members(dt_cli_table *t, const json_t *obj, const char *const *keys,
                              size_t n) {
    for (size_t k = 0; k < n; k++) dt_cli_table_put_json(t, json_object_get(obj, keys[k]));
}

void dt_cli_table_put_time(dt_cli_table *t, const json_t *obj, const char *key) {
    char buf[32];
    dt_cli_table_put(
        t, dt_cli_fmt_time(json_string_value(json_object_get(obj, key)), buf, sizeof buf));
}

void dt_cli_field(dt_cli_table *t, const char *name, const char *value) {
    dt_cli_table_row(t);
    dt_cli_table_put(t, name);
    dt_cli_table_put(t, value);
}

void dt_cli_fields(dt_cli_table *t, const json_t *obj, const char *const *keys, size_t n) {
    for (size_t k = 0; k < n; k++) {
        dt_cli_table_row(t);
        dt_cli_table_put(t, keys[k]);
        dt_cli_table_put_json(t, json_object_get(obj, keys[k]));
    }
}

void dt_cli_fields_times(dt_cli_table *t, const json_t *obj) {
    char buf[32];
    const char *st = json_string_value(json_object_get(obj, "start_time"));
    const char *et = json_string_value(json_object_get(obj, "end_time"));
    dt_cli_field(t, "start_time", dt_cli_fmt_time(st, buf, sizeof buf));
    dt_cli_field(t, "end_time", dt_cli_fmt_time(et, buf, sizeof buf));
    dt_cli_field(t, "duration", dt_cli_fmt_span(st, et, buf, sizeof buf));
}

/* ---- values as text ---- */

const char *dt_cli_fmt_number(double v, dt_cli_mode mode, char *buf, size_t n) {
    if (isnan(v)) return snprintf(buf, n, "nan"), buf;
    if (isinf(v)) return snprintf(buf, n, v > 0 ? "inf" : "-inf"), buf;
    (void)mode; /* a table and JSON show the same digits: the shortest that read back as v */
    char s[32];
    dt_fmt_double(v, s);
    snprintf(buf, n, "%s", s);
    return buf;
}

char *dt_cli_json_text(const json_t *v, dt_cli_mode mode) {
    char num[32];
    switch (v ? json_typeof(v) : JSON_NULL) {
    case JSON_NULL:
        return xstrdup("-");
    case JSON_TRUE:
        return xstrdup("true");
    case JSON_FALSE:
        return xstrdup("false");
    case JSON_STRING:
        return xstrdup(json_string_value(v));
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
        return xstrdup(num);
    case JSON_REAL:
        return xstrdup(dt_cli_fmt_number(json_real_value(v), mode, num, sizeof num));
    default:
        return oom_check(dt_json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY));
    }
}

const char *dt_cli_fmt_duration(double s, char *buf, size_t n) {
    if (!isfinite(s) || s < 0) return snprintf(buf, n, "-"), buf;
    int64_t x = (int64_t)s;
    if (x < 60)
        snprintf(buf, n, "%llds", (long long)x);
    else if (x < 3600)
        snprintf(buf, n, "%lldm%02llds", (long long)(x / 60), (long long)(x % 60));
    else if (x < 86400)
        snprintf(buf, n, "%lldh%02lldm", (long long)(x / 3600), (long long)(x % 3600 / 60));
    else
        snprintf(buf, n, "%lldd%02lldh", (long long)(x / 86400), (long long)(x % 86400 / 3600));
    return buf;
}

bool dt_cli_parse_time(const char *iso, time_t *out) {
    struct tm tm = {0};
    int len = 0;
    if (!iso ||
        sscanf(iso, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &len) != 6 ||
        len != 19)
        return false;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    *out = timegm(&tm);
    return true;
}

const char *dt_cli_fmt_time(const char *iso, char *buf, size_t n) {
    time_t t;
    struct tm lt;
    if (!iso) return snprintf(buf, n, "-"), buf;
    if (!dt_cli_parse_time(iso, &t) || !localtime_r(&t, &lt))
        return snprintf(buf, n, "%s", iso), buf;
    strftime(buf, n, "%Y-%m-%d %H:%M:%S", &lt);
    return buf;
}

const char *dt_cli_fmt_span(const char *start, const char *end, char *buf, size_t n) {
    time_t a, b;
    if (!dt_cli_parse_time(start, &a)) return snprintf(buf, n, "-"), buf;
    if (!end)
        b = time(NULL);
    else if (!dt_cli_parse_time(end, &b))
        return snprintf(buf, n, "-"), buf;
    return dt_cli_fmt_duration(difftime(b, a), buf, n);
}

/* ---- printing ---- */

/* Characters (UTF-8 code points) in s. */
static size_t width(const char *s) {
    size_t w = 0;
    for (; *s; s++) w += ((unsigned char)*s & 0xC0) != 0x80;
    return w;
}

/* The cell's text for `mode`: one line (tabs and line breaks become spaces), cut to
 * DT_CLI_MAX_CELL characters in a table. */
static char *cell_text(const json_t *row, int col, dt_cli_mode mode) {
    char *s = dt_cli_json_text(json_array_get(row, (size_t)col), mode);
    for (char *p = s; *p; p++)
        if (*p == '\t' || *p == '\n' || *p == '\r') *p = ' ';
    if (mode == DT_CLI_TABLE && width(s) > DT_CLI_MAX_CELL) {
        size_t chars = 0, i = 0;
        for (; s[i]; i++)
            if (((unsigned char)s[i] & 0xC0) != 0x80 && chars++ == DT_CLI_MAX_CELL - 3) break;
        strcpy(s + i, "...");
    }
    return s;
}

static void print_padded(FILE *f, const char *s, size_t w, bool last) {
    fputs(s, f);
    if (!last)
        for (size_t k = width(s); k < w + 2; k++) fputc(' ', f);
}

void dt_cli_table_print(const dt_cli_table *t, FILE *f, dt_cli_mode mode, bool header) {
    size_t nrows = json_array_size(t->rows), nc = (size_t)t->ncols;
    char **cells = oom_check(calloc(nrows * nc + 1, sizeof *cells));
    size_t *w = oom_check(calloc(nc, sizeof *w));
    for (size_t c = 0; c < nc; c++) w[c] = width(t->headers[c]);
    for (size_t r = 0; r < nrows; r++)
        for (size_t c = 0; c < nc; c++) {
            char *s = cell_text(json_array_get(t->rows, r), (int)c, mode);
            cells[r * nc + c] = s;
            if (width(s) > w[c]) w[c] = width(s);
        }
    if (mode == DT_CLI_TABLE) {
        for (size_t c = 0; c < nc && t->has_header; c++)
            print_padded(f, t->headers[c], w[c], c + 1 == nc);
        if (t->has_header) fputc('\n', f);
        for (size_t r = 0; r < nrows; r++) {
            for (size_t c = 0; c < nc; c++) print_padded(f, cells[r * nc + c], w[c], c + 1 == nc);
            fputc('\n', f);
        }
    } else {
        if (header && t->has_header)
            for (size_t c = 0; c < nc; c++)
                fprintf(f, "%s%c", t->headers[c], c + 1 == nc ? '\n' : '\t');
        for (size_t r = 0; r < nrows; r++)
            for (size_t c = 0; c < nc; c++)
                fprintf(f, "%s%c", cells[r * nc + c], c + 1 == nc ? '\n' : '\t');
    }
    for (size_t i = 0; i < nrows * nc; i++) free(cells[i]);
    free(cells);
    free(w);
}

void dt_cli_print_json(FILE *f, const json_t *v) {
    char *s = dt_json_dumps(v, JSON_INDENT(2) | JSON_ENCODE_ANY);
    fprintf(f, "%s\n", (char *)oom_check(s));
    free(s);
}

/* ---- metrics ---- */

dt_cli_table *dt_cli_metrics_table(const json_t *rows) {
    /* the metric names in the order first seen */
    json_t *names = oom_check(json_object());
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(row, "metrics"), k, v) {
            if (!json_object_get(names, k))
                json_object_set_new(names, k, json_integer((json_int_t)json_object_size(names)));
        }
    }
    size_t nm = json_object_size(names);
    const char **hdr = oom_check(calloc(4 + nm, sizeof *hdr));
    hdr[0] = "batches", hdr[1] = "epochs", hdr[2] = "records", hdr[3] = "kind";
    const char *k;
    json_t *v;
    json_object_foreach(names, k, v) hdr[4 + json_integer_value(v)] = k;
    dt_cli_table *t = dt_cli_table_new((int)(4 + nm), hdr);
    json_array_foreach(rows, i, row) {
        dt_cli_table_row(t);
        for (size_t c = 0; c < 4 + nm; c++) {
            const json_t *src = c < 4 ? row : json_object_get(row, "metrics");
            /* a value the row lacks is null: empty in CSV, "-" elsewhere */
            dt_cli_table_put_json(t, json_object_get(src, hdr[c]));
        }
    }
    free(hdr);
    json_decref(names);
    return t;
}

static void csv_field(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

void dt_cli_metrics_csv(FILE *f, const json_t *rows) {
    dt_cli_table *t = dt_cli_metrics_table(rows);
    for (int c = 0; c < t->ncols; c++) {
        csv_field(f, t->headers[c]);
        fputc(c + 1 == t->ncols ? '\n' : ',', f);
    }
    size_t r;
    json_t *row;
    json_array_foreach(t->rows, r, row) {
        for (int c = 0; c < t->ncols; c++) {
            const json_t *v = json_array_get(row, (size_t)c);
            char *s = json_is_null(v) ? xstrdup("") : dt_cli_json_text(v, DT_CLI_PLAIN);
            csv_field(f, s);
            free(s);
            fputc(c + 1 == t->ncols ? '\n' : ',', f);
        }
    }
    dt_cli_table_free(t);
}
