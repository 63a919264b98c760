/*
 * html.c — how a page is written: a growing buffer, the one escaping function every value
 * that reaches HTML passes through (w_esc), templates of our own ({{key}} escaped, {{{key}}}
 * a fragment), the common layout, and reading the REST API in-process (w_api).
 */
#define _GNU_SOURCE
#include "web_impl.h"

#include "base/numtext.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void w_raw(w_buf *b, const char *markup) {
    dt__buf_put(b, markup, strlen(markup));
}

/* vprintf, then `put` (w_raw or w_esc) of the result; oom when it cannot be formatted. */
static void vput(w_buf *b, void (*put_fn)(w_buf *, const char *), const char *fmt, va_list ap) {
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        b->oom = true;
    else
        put_fn(b, s);
    free(s);
}

void w_rawf(w_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vput(b, w_raw, fmt, ap);
    va_end(ap);
}

void w_esc(w_buf *b, const char *text) {
    if (!text) return;
    const char *run = text;
    for (const char *p = text; *p; p++) {
        const char *ent = *p == '&'    ? "&amp;"
                          : *p == '<'  ? "&lt;"
                          : *p == '>'  ? "&gt;"
                          : *p == '"'  ? "&quot;"
                          : *p == '\'' ? "&#39;"
                                       : NULL;
        if (!ent) continue;
        dt__buf_put(b, run, (size_t)(p - run));
        w_raw(b, ent);
        run = p + 1;
    }
    w_raw(b, run);
}

void w_escf(w_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vput(b, w_esc, fmt, ap);
    va_end(ap);
}

void w_esc_json(w_buf *b, const json_t *v) {
    char *s = v ? dt_json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    if (v && !s) b->oom = true;
    w_esc(b, s ? s : "null");
    free(s);
}

void w_fill(w_buf *b, const char *tpl, const char *const *kv) {
    const char *p = tpl;
    while (*p) {
        const char *open = strstr(p, "{{");
        if (!open) {
            w_raw(b, p);
            return;
        }
        dt__buf_put(b, p, (size_t)(open - p));
        bool markup = open[2] == '{';
        const char *key = open + (markup ? 3 : 2), *close = strstr(key, markup ? "}}}" : "}}");
        if (!close) {
            w_raw(b, open);
            return;
        }
        size_t kl = (size_t)(close - key);
        for (int i = 0; kv[i]; i += 2)
            if (strlen(kv[i]) == kl && !strncmp(kv[i], key, kl)) {
                if (markup)
                    w_raw(b, kv[i + 1] ? kv[i + 1] : "");
                else
                    w_esc(b, kv[i + 1]);
                break;
            }
        p = close + (markup ? 3 : 2);
    }
}

static const char LAYOUT[] =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    "<link rel=\"icon\" href=\"data:,\">"
    "<title>{{title}} · dtrain</title>"
    "<link rel=\"stylesheet\" href=\"/static/dygraph.min.css\">"
    "<link rel=\"stylesheet\" href=\"/static/app.css\"></head>\n<body>"
    "<header><a class=\"brand\" href=\"/\">dtrain</a> <nav><a href=\"/\">Experiments</a>"
    " <a href=\"/models\">Models</a></nav>"
    "</header>\n<main>{{{body}}}</main>\n"
    "<script src=\"/static/dygraph.min.js\"></script><script src=\"/static/d3.min.js\"></script>"
    "<script src=\"/static/app.js\"></script></body></html>\n";

void w_page(dt_http_resp *resp, w_buf *body, const char *title_fmt, ...) {
    char title[256];
    va_list ap;
    va_start(ap, title_fmt);
    vsnprintf(title, sizeof title, title_fmt, ap);
    va_end(ap);
    w_buf page = {0};
    const char *kv[] = {"title", title, "body", body->p ? body->p : "", NULL};
    w_fill(&page, LAYOUT, kv);
    bool oom = page.oom || body->oom;
    free(body->p);
    *body = (w_buf){0};
    if (oom) {
        free(page.p);
        dt_http_error(resp, 500, "out of memory writing the page %s", title);
        return;
    }
    json_decref(resp->json);
    resp->json = NULL;
    resp->raw = page.p;
    resp->raw_len = page.len;
    resp->content_type = "text/html; charset=utf-8";
}

json_t *w_api(const dt_http_req *req, const char *target, dt_http_resp *resp) {
    json_t *ans = NULL;
    int status = 0;
    dt_http_call(req->server, "GET", target, &ans, &status);
    if (status == 200 && ans) return ans;
    const char *msg = json_string_value(json_object_get(ans, "error"));
    dt_http_error(resp, status >= 400 ? status : 500, "%s", msg ? msg : "the API gave no answer");
    json_decref(ans);
    return NULL;
}

bool w_id(const dt_http_req *req, int i, long long *id, dt_http_resp *resp) {
    const char *s = i < req->n_params ? req->params[i] : "";
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v <= 0) {
        dt_http_error(resp, 400, "'%s' is not an id; hint: ids are positive integers", s);
        return false;
    }
    *id = v;
    return true;
}

void w_num(w_buf *b, const json_t *v) {
    char s[32];
    if (json_is_number(v) && isfinite(json_number_value(v))) {
        dt_fmt_double(json_number_value(v), s);
        w_esc(b, s);
    } else
        w_raw(b, "–");
}

void w_bytes(w_buf *b, double bytes) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) bytes /= 1024, u++;
    w_escf(b, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
}

/* Seconds since the epoch of an ISO 8601 UTC time ("2024-01-02T03:04:05Z"), or -1. */
static double iso_seconds(const char *s) {
    struct tm tm = {0};
    if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)) return -1;
    return (double)timegm(&tm);
}

void w_span(w_buf *b, const char *start_iso, const char *end_iso) {
    double t0 = iso_seconds(start_iso), t1 = end_iso ? iso_seconds(end_iso) : (double)time(NULL);
    if (t0 < 0 || t1 < t0) {
        w_raw(b, "–");
        return;
    }
    long s = (long)(t1 - t0);
    if (s >= 3600)
        w_escf(b, "%ldh %02ldm", s / 3600, s / 60 % 60);
    else if (s >= 60)
        w_escf(b, "%ldm %02lds", s / 60, s % 60);
    else
        w_escf(b, "%lds", s);
}

void w_state(w_buf *b, const char *state) {
    w_raw(b, "<span class=\"state ");
    w_esc(b, state);
    w_raw(b, "\">");
    w_esc(b, state);
    w_raw(b, "</span>");
}

void w_csrf_field(w_buf *b, const dt_http_req *req) {
    w_raw(b, "<input type=\"hidden\" name=\"csrf\" value=\"");
    w_esc(b, dt_http_form_token(req->server));
    w_raw(b, "\">");
}
