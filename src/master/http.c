/* http.c — the master's HTTP server (http.h): libmicrohttpd under a table of routes, with the
 * token and CSRF checks of http.h run before any handler.
 *
 * Threads: libmicrohttpd runs a thread per connection, and one mutex (serve) makes the
 * handlers run one at a time as before. Why not one polling thread with suspend / resume: a
 * streamed answer (a log followed until its trial ends) would then have to be resumed from
 * elsewhere whenever a line arrives, and a content callback with nothing to send would spin
 * the one thread; with a thread per connection the stream's producer simply waits on its own
 * thread, outside the mutex, while every other connection is served.
 *
 * The listening socket is made here (bound to the given host only; port 0 picks a free port)
 * and handed to libmicrohttpd, so a bind failure can say why. A request's body is gathered
 * up to DT_HTTP_MAX_BODY (413 beyond) and parsed as JSON (400 when it is not) before the
 * route's handler runs; a path no route matches is 404, one that matches with another method
 * 405. Answers are encoded once, compactly, by json_dumps. dt_http_call runs a route in the
 * calling thread without a connection (the web pages read the API so).
 */
#include "http.h"

#include "base/numtext.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_SEGMENTS 16
/* A streamed answer (logs -f, event streams) is handed to the socket in blocks this large. */
#define STREAM_BLOCK (64 * 1024)
/* An idle connection is closed after this long: longer than any client's poll interval, short
 * enough that abandoned keep-alive sockets do not pile up. */
#define IDLE_CONNECTION_S 120u
/* Connections served at once (a thread each): far above a team's clients and browser tabs,
 * a bound on what a runaway client can take. */
#define MAX_CONNECTIONS 1000u

struct dt_http_server {
    struct MHD_Daemon *mhd;
    const dt_http_route *routes;
    int n_routes;
    void *app;
    int port;
    char *token; /* NULL: none needed */
    bool csrf;
    char *form_csrf; /* NULL: no form token accepted */
    bool (*token_ok)(void *app, const char *token);
    const char *const *open_paths;
    void (*filter)(void *app, const dt_http_req *req, dt_http_resp *resp);
    pthread_mutex_t serve; /* held while a handler (or the guard, or the filter) runs */
};

/* One request in progress: its body as it arrives. */
typedef struct pending {
    char *buf;
    size_t len, cap;
    bool too_big;
} pending;

const char *dt_http_query(const dt_http_req *req, const char *key) {
    for (int i = 0; i < req->n_args; i++)
        if (!strcmp(req->args[i][0], key)) return req->args[i][1];
    return NULL;
}

const char *dt_http_header(const dt_http_req *req, const char *name) {
    if (!req->conn) return NULL;
    return MHD_lookup_connection_value((struct MHD_Connection *)req->conn, MHD_HEADER_KIND, name);
}

const char *dt_http_bearer(const dt_http_req *req) {
    const char *auth = dt_http_header(req, MHD_HTTP_HEADER_AUTHORIZATION);
    return auth && !strncmp(auth, "Bearer ", 7) ? auth + 7 : NULL;
}

static int hexval(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* URL-decode s in place ('+' is a space; a bad %XX stays as it is). */
static void url_decode(char *s) {
    char *o = s;
    for (; *s; s++) {
        if (*s == '+') {
            *o++ = ' ';
        } else if (*s == '%' && hexval(s[1]) >= 0 && hexval(s[2]) >= 0) {
            *o++ = (char)(hexval(s[1]) * 16 + hexval(s[2]));
            s += 2;
        } else {
            *o++ = *s;
        }
    }
    *o = 0;
}

/* libmicrohttpd's unescaping of paths and query arguments, but %00 stays as it is: a NUL would
 * cut a path short ("/static/app.js%00.png" must not name app.js). Returns the new length. */
static size_t unescape(void *cls, struct MHD_Connection *conn, char *s) {
    (void)cls, (void)conn;
    char *o = s, *p = s;
    for (; *p; p++) {
        int hi = p[0] == '%' ? hexval(p[1]) : -1, lo = hi >= 0 ? hexval(p[2]) : -1;
        if (lo >= 0 && (hi || lo)) {
            *o++ = (char)(hi * 16 + lo);
            p += 2;
        } else {
            *o++ = *p;
        }
    }
    *o = 0;
    return (size_t)(o - s);
}

/* Split "k=v&k2=v2" in place (buf) into req->args, decoded. False when there are too many. */
static bool parse_args(char *buf, dt_http_req *req) {
    char *save = NULL;
    for (char *kv = strtok_r(buf, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
        if (req->n_args == DT_HTTP_MAX_ARGS) return false;
        char *eq = strchr(kv, '=');
        if (eq) *eq = 0;
        url_decode(kv);
        if (eq) url_decode(eq + 1);
        req->args[req->n_args][0] = kv;
        req->args[req->n_args++][1] = eq ? eq + 1 : "";
    }
    return true;
}

const char *dt_http_form(const dt_http_req *req, const char *key, char *buf, size_t n) {
    if (!req->form) return NULL;
    size_t kl = strlen(key);
    for (const char *p = req->form; *p;) {
        size_t len = strcspn(p, "&");
        if (len > kl && !strncmp(p, key, kl) && p[kl] == '=') {
            size_t vl = len - kl - 1;
            if (vl >= n) return NULL;
            memcpy(buf, p + kl + 1, vl);
            buf[vl] = 0;
            url_decode(buf);
            return buf;
        }
        p += len + (p[len] == '&');
    }
    return NULL;
}

void dt_http_error(dt_http_resp *resp, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    dt_http_verror(resp, status, fmt, ap);
    va_end(ap);
}

void dt_http_verror(dt_http_resp *resp, int status, const char *fmt, va_list ap) {
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    json_decref(resp->json);
    free(resp->raw);
    resp->raw = NULL;
    resp->raw_len = 0;
    resp->status = status;
    resp->json = json_pack("{s:s}", "error", msg);
}

/* ---- routing ---- */

/* Split `path` ("/a/b/c") into its segments, in place in `buf`. The count, or -1 when there
 * are more than MAX_SEGMENTS. */
static int split(const char *path, char *buf, size_t n, char **seg) {
    snprintf(buf, n, "%s", path);
    int k = 0;
    char *save = NULL;
    for (char *s = strtok_r(buf, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
        if (k == MAX_SEGMENTS) return -1;
        seg[k++] = s;
    }
    return k;
}

/* Does `pattern` match the path's segments? Fills req->params with the {} segments. */
static bool match(const char *pattern, char **seg, int n, dt_http_req *req) {
    char pbuf[512], *pseg[MAX_SEGMENTS];
    int np = split(pattern, pbuf, sizeof pbuf, pseg);
    if (np != n) return false;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!strcmp(pseg[i], "{}")) {
            if (k == 4) return false;
            req->params[k++] = seg[i];
        } else if (strcmp(pseg[i], seg[i])) {
            return false;
        }
    }
    req->n_params = k;
    return true;
}

/* Find the route for req (404 / 405 into resp when there is none). */
static const dt_http_route *route(dt_http_server *s, dt_http_req *req, char *buf, size_t n,
                                  dt_http_resp *resp) {
    char *seg[MAX_SEGMENTS];
    int ns = split(req->path, buf, n, seg);
    bool other_method = false;
    for (int i = 0; ns >= 0 && i < s->n_routes; i++) {
        dt_http_req r = *req;
        if (!match(s->routes[i].pattern, seg, ns, &r)) continue;
        if (!strcmp(s->routes[i].method, req->method)) {
            *req = r;
            return &s->routes[i];
        }
        other_method = true;
    }
    if (other_method)
        dt_http_error(resp, 405, "method %s is not allowed on %s", req->method, req->path);
    else
        dt_http_error(resp, 404, "no route %s %s", req->method, req->path);
    return NULL;
}

/* ---- libmicrohttpd callbacks ---- */

static enum MHD_Result queue(struct MHD_Connection *conn, dt_http_resp *resp,
                             struct MHD_Response *r, const char *type, const char *cookie);
static enum MHD_Result send_stream(struct MHD_Connection *conn, dt_http_resp *resp);

static enum MHD_Result send_resp(struct MHD_Connection *conn, dt_http_resp *resp,
                                 const char *cookie) {
    if (resp->stream) return send_stream(conn, resp);
    char *body;
    size_t len;
    const char *type = "application/json";
    if (resp->raw) {
        body = resp->raw;
        len = resp->raw_len;
        if (resp->content_type) type = resp->content_type;
        resp->raw = NULL;
    } else {
        body =
            resp->json ? dt_json_dumps(resp->json, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("{}");
        len = body ? strlen(body) : 0;
    }
    json_decref(resp->json);
    resp->json = NULL;
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, body ? body : (void *)"", body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    return queue(conn, resp, r, type, cookie);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    dt_http_resp *resp = cls;
    long n = resp->stream(resp->stream_arg, buf, max);
    return n > 0 ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_done(void *cls) {
    dt_http_resp *resp = cls;
    if (resp->stream_free) resp->stream_free(resp->stream_arg);
    free(resp);
}

/* A streamed answer: chunked, produced by resp->stream on the connection's thread. */
static enum MHD_Result send_stream(struct MHD_Connection *conn, dt_http_resp *resp) {
    dt_http_resp *keep = malloc(sizeof *keep);
    if (!keep) {
        if (resp->stream_free) resp->stream_free(resp->stream_arg);
        return MHD_NO;
    }
    *keep = *resp;
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK,
                                                               stream_read, keep, stream_done);
    if (!r) {
        stream_done(keep);
        return MHD_NO;
    }
    return queue(conn, keep, r, keep->content_type ? keep->content_type : "application/json", NULL);
}

static enum MHD_Result queue(struct MHD_Connection *conn, dt_http_resp *resp,
                             struct MHD_Response *r, const char *type, const char *cookie) {
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL,
                            resp->cache_control ? resp->cache_control : "no-store");
    if (resp->location[0]) MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, resp->location);
    if (resp->disposition)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_DISPOSITION, resp->disposition);
    if (cookie) MHD_add_response_header(r, MHD_HTTP_HEADER_SET_COOKIE, cookie);
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)resp->status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value) {
    (void)kind;
    dt_http_req *req = cls;
    if (req->n_args < DT_HTTP_MAX_ARGS) {
        req->args[req->n_args][0] = key;
        req->args[req->n_args][1] = value ? value : "";
    }
    req->n_args++; /* one over the maximum: refused by the caller */
    return MHD_YES;
}

/* Equal strings, in time independent of where they differ. */
static bool same_secret(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = la != lb;
    for (size_t i = 0; i < la && i < lb; i++) d |= (unsigned char)(a[i] ^ b[i]);
    return !d;
}

/* The request's token: the Authorization bearer, else the dtrain_token cookie. */
static const char *carried_token(const dt_http_req *req) {
    const char *b = dt_http_bearer(req);
    if (b) return b;
    return MHD_lookup_connection_value((struct MHD_Connection *)req->conn, MHD_COOKIE_KIND,
                                       "dtrain_token");
}

enum { GUARD_PASS, GUARD_REFUSED, GUARD_COOKIE };

/* The token and CSRF rules of http.h. GUARD_COOKIE: a right ?token=, answered with a redirect
 * to the same path that sets the cookie (in `cookie`). */
static int guard(dt_http_server *s, const dt_http_req *req, dt_http_resp *resp, char *cookie,
                 size_t n) {
    for (int i = 0; s->open_paths && s->open_paths[i]; i++)
        if (!strcmp(req->path, s->open_paths[i])) return GUARD_PASS;
    if (s->token) {
        const char *q = dt_http_query(req, "token"), *t = carried_token(req);
        if (q && same_secret(q, s->token) && strlen(req->path) < sizeof resp->location) {
            snprintf(cookie, n, "dtrain_token=%s; Path=/; HttpOnly; SameSite=Strict", s->token);
            snprintf(resp->location, sizeof resp->location, "%s", req->path);
            resp->status = 303;
            resp->json = json_object();
            return GUARD_COOKIE;
        }
        if (!t || (!same_secret(t, s->token) && !(s->token_ok && s->token_ok(s->app, t)))) {
            dt_http_error(resp, 401,
                          "%s token; hint: this master is bound to a non-loopback address: "
                          "send Authorization: Bearer TOKEN (dtrain master token prints it; the "
                          "CLI reads DTRAIN_TOKEN or $DTRAIN_HOME/master.token) or open the UI "
                          "once as /?token=TOKEN",
                          t || q ? "a wrong" : "no");
            return GUARD_REFUSED;
        }
    }
    if (!s->csrf || !strcmp(req->method, "GET") || !strcmp(req->method, "HEAD")) return GUARD_PASS;
    const char *site = dt_http_header(req, "Sec-Fetch-Site");
    const char *type = dt_http_header(req, MHD_HTTP_HEADER_CONTENT_TYPE);
    char ftok[128];
    const char *f = dt_http_form(req, "csrf", ftok, sizeof ftok);
    /* a bearer token passes when no body type is named: no cross-site page can set the header,
     * and the reference's client sends none (a form type with it still needs a proof) */
    bool ok = dt_http_header(req, "X-Dtrain-Csrf") || (dt_http_bearer(req) && !type) ||
              (type && !strncasecmp(type, "application/json", 16)) ||
              (f && s->form_csrf && same_secret(f, s->form_csrf));
    if (site && !strcmp(site, "cross-site")) ok = false;
    if (ok) return GUARD_PASS;
    dt_http_error(resp, 403,
                  "%s %s is a state change without a CSRF proof; hint: send it as JSON "
                  "(Content-Type: application/json) or with the X-Dtrain-Csrf header, from the "
                  "master's own pages",
                  req->method, req->path);
    return GUARD_REFUSED;
}

/* Answer a whole request into resp (false: out of memory, drop the connection). `cookie`
 * gets a Set-Cookie value when the guard sets one. */
static bool answer(dt_http_server *s, pending *p, dt_http_req *req, dt_http_resp *resp,
                   char *cookie, size_t n) {
    char buf[2048];
    if (p->too_big) {
        dt_http_error(resp, 413, "the body is over %u bytes; hint: send less at once",
                      DT_HTTP_MAX_BODY);
        return true;
    }
    MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, collect_arg, req);
    if (req->n_args > DT_HTTP_MAX_ARGS) {
        dt_http_error(resp, 400, "more than %d query arguments; hint: send fewer",
                      DT_HTTP_MAX_ARGS);
        return true;
    }
    const char *type = dt_http_header(req, MHD_HTTP_HEADER_CONTENT_TYPE);
    bool form = type && !strncasecmp(type, "application/x-www-form-urlencoded", 33);
    if (form && p->len) {
        char *nb = realloc(p->buf, p->len + 1);
        if (!nb) return false;
        p->buf = nb;
        p->buf[p->len] = 0;
        req->form = p->buf;
    }
    int g = guard(s, req, resp, cookie, n);
    if (g != GUARD_COOKIE) cookie[0] = 0;
    if (g != GUARD_PASS) return true;
    const dt_http_route *rt = route(s, req, buf, sizeof buf, resp);
    if (!rt) return true;
    if (p->len && !form) {
        json_error_t err;
        req->body = json_loadb(p->buf, p->len, JSON_DECODE_ANY, &err);
        if (!req->body) {
            dt_http_error(resp, 400, "the body is not JSON: %s at %d:%d", err.text, err.line,
                          err.column);
            return true;
        }
    }
    rt->fn(s->app, req, resp);
    return true;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    (void)version;
    dt_http_server *s = cls;
    pending *p = *con_cls;
    if (!p) {
        /* the first call: only the headers are here */
        p = calloc(1, sizeof *p);
        if (!p) return MHD_NO;
        *con_cls = p;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (p->too_big || p->len + n > DT_HTTP_MAX_BODY) {
            p->too_big = true; /* read and dropped: answered 413 at the end */
            return MHD_YES;
        }
        if (p->len + n > p->cap) {
            size_t cap = p->cap ? p->cap : 4096;
            while (cap < p->len + n) cap *= 2;
            char *nb = realloc(p->buf, cap);
            if (!nb) return MHD_NO;
            p->buf = nb;
            p->cap = cap;
        }
        memcpy(p->buf + p->len, upload_data, n);
        p->len += n;
        return MHD_YES;
    }
    /* the whole request is here: answered under the handlers' mutex, sent outside it */
    dt_http_resp resp = {.status = 200};
    dt_http_req req = {.method = method, .path = url, .conn = conn, .server = s};
    char cookie[256] = "";
    pthread_mutex_lock(&s->serve);
    bool ok = answer(s, p, &req, &resp, cookie, sizeof cookie);
    if (ok && s->filter) s->filter(s->app, &req, &resp);
    pthread_mutex_unlock(&s->serve);
    json_decref(req.body);
    if (!ok) return MHD_NO;
    return send_resp(conn, &resp, cookie[0] ? cookie : NULL);
}

void dt_http_call(dt_http_server *s, const char *method, const char *target, json_t **out,
                  int *status) {
    char path[1024], query[2048], buf[2048];
    size_t pl = strcspn(target, "?");
    snprintf(path, sizeof path, "%.*s", (int)(pl < sizeof path ? pl : sizeof path - 1), target);
    snprintf(query, sizeof query, "%s", target[pl] ? target + pl + 1 : "");
    dt_http_resp resp = {.status = 200};
    dt_http_req req = {.method = method, .path = path, .server = s};
    const dt_http_route *rt = NULL;
    if (!parse_args(query, &req))
        dt_http_error(&resp, 400, "more than %d query arguments", DT_HTTP_MAX_ARGS);
    else
        rt = route(s, &req, buf, sizeof buf, &resp);
    if (rt) rt->fn(s->app, &req, &resp);
    if (resp.raw && !resp.content_type && !resp.json) /* JSON sent as encoded text */
        resp.json = json_loadb(resp.raw, resp.raw_len, 0, NULL);
    free(resp.raw);
    *status = resp.status;
    *out = resp.json;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)conn;
    (void)toe;
    pending *p = *con_cls;
    if (p) {
        free(p->buf);
        free(p);
        *con_cls = NULL;
    }
}

/* ---- the listening socket ---- */

/* A socket bound to host:port and listening, or -1 with DT_ERR_IO. */
static int listen_on(const char *host, int port, int *bound_port) {
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int rc = getaddrinfo(host, ps, &hints, &ai);
    if (rc) {
        dt_error(DT_ERR_IO,
                 "cannot listen on %s:%d: %s; hint: pass an address of this machine "
                 "(--host 127.0.0.1)",
                 host, port, gai_strerror(rc));
        return -1;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) || listen(fd, 128)) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        dt_error(DT_ERR_IO,
                 "cannot listen on %s:%d: %s; hint: another master may be running there: stop "
                 "it (dtrain master stop) or pass --port",
                 host, port, strerror(err));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    *bound_port = port;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        *bound_port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                               : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

static void server_free(dt_http_server *s) {
    pthread_mutex_destroy(&s->serve);
    free(s->token);
    free(s->form_csrf);
    free(s);
}

dt_status dt_http_start(const char *host, int port, const dt_http_route *routes, int n_routes,
                        void *app, dt_http_server **out) {
    dt_http_opts o = {.host = host, .port = port};
    return dt_http_start_opts(&o, routes, n_routes, app, out);
}

dt_status dt_http_start_opts(const dt_http_opts *o, const dt_http_route *routes, int n_routes,
                             void *app, dt_http_server **out) {
    *out = NULL;
    const char *host = o->host;
    int port = o->port;
    dt_http_server *s = calloc(1, sizeof *s);
    if (!s) return dt_error(DT_ERR_OOM, "out of memory starting the HTTP server");
    s->csrf = o->csrf;
    s->token_ok = o->token_ok;
    s->open_paths = o->open_paths;
    s->filter = o->filter;
    pthread_mutex_init(&s->serve, NULL);
    if ((o->token && !(s->token = strdup(o->token))) ||
        (o->form_csrf && !(s->form_csrf = strdup(o->form_csrf)))) {
        server_free(s);
        return dt_error(DT_ERR_OOM, "out of memory starting the HTTP server");
    }
    s->routes = routes;
    s->n_routes = n_routes;
    s->app = app;
    int fd = listen_on(host, port, &s->port);
    if (fd < 0) {
        server_free(s);
        return DT_ERR_IO;
    }
    /* a thread per connection; handlers are called one at a time (s->serve) */
    s->mhd = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_AUTO, 0, NULL,
        NULL, on_request, s, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, NULL, MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
        MHD_OPTION_CONNECTION_TIMEOUT, IDLE_CONNECTION_S, MHD_OPTION_CONNECTION_LIMIT,
        MAX_CONNECTIONS, MHD_OPTION_END);
    if (!s->mhd) {
        close(fd);
        server_free(s);
        return dt_error(DT_ERR_IO, "cannot serve HTTP on %s:%d: libmicrohttpd did not start", host,
                        port);
    }
    *out = s;
    return DT_OK;
}

const char *dt_http_form_token(const dt_http_server *s) {
    return s->form_csrf;
}

int dt_http_port(const dt_http_server *s) {
    return s->port;
}

void dt_http_stop(dt_http_server *s) {
    if (!s) return;
    MHD_stop_daemon(s->mhd); /* closes the listening socket too */
    server_free(s);
}
