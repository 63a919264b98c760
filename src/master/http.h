/*
 * http.h — the master's HTTP server: libmicrohttpd under a table of routes.
 *
 * Routes are data: {method, pattern, handler}; a pattern's `{}` segments match one path
 * segment each and reach the handler as req->params. Request bodies are read whole (up to
 * DT_HTTP_MAX_BODY) and parsed as JSON when they are not empty; a body that is not JSON is
 * answered 400 before any handler runs. Handlers fill a response: a JSON value (sent with
 * the one JSON encoder, compact) or raw bytes with a content type (the web UI). Errors are
 * {"error": "what was wrong; hint: what to do"} with a 4xx/5xx status (dt_http_error).
 * Each connection has its own thread, but handlers are called one at a time (the server
 * serialises them under one mutex), so the master's state needs no lock of its own against
 * other requests. A streamed answer (resp->stream) is produced after its handler returned, on
 * its connection's thread and outside that mutex: a long stream never holds up other clients.
 *
 * Security (dt_http_opts, the master turns it on; docs/webui.md "Security"): with a token,
 * every request must carry it (Authorization: Bearer, the dtrain_token cookie, or once as
 * ?token= which sets the cookie and redirects); with csrf, every request but GET / HEAD must
 * carry a JSON content type, the X-Dtrain-Csrf header or an Authorization: Bearer header and
 * no content type (none is sent cross-site without a CORS preflight, which the server never
 * grants), or a form body
 * whose csrf field is the server's form token; a request marked Sec-Fetch-Site: cross-site is
 * refused either way. Refusals are 401 / 403 JSON errors before any handler runs.
 *
 * This header is the master layer's interface to the web layer above it (tools/
 * check_layers.sh INTERFACES): the web UI's routes are handlers of this shape, and they read
 * the REST API through dt_http_call, never the store.
 */
#ifndef DTRAIN_MASTER_HTTP_H
#define DTRAIN_MASTER_HTTP_H

#include "dtrain/base.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#define DT_HTTP_MAX_BODY (64u << 20)
#define DT_HTTP_MAX_ARGS 16 /* query-string arguments kept per request (the rest: 400) */

typedef struct dt_http_server dt_http_server;

typedef struct dt_http_req {
    const char *method;    /* "GET", "POST", "DELETE", ... */
    const char *path;      /* without the query string */
    const char *params[4]; /* the pattern's {} segments, in order (URL-decoded) */
    int n_params;
    json_t *body;     /* the parsed body, or NULL when empty (borrowed) */
    const char *form; /* an application/x-www-form-urlencoded body (NUL-ended), or NULL */
    const char *args[DT_HTTP_MAX_ARGS][2]; /* the query string's key / value pairs (decoded) */
    int n_args;
    dt_http_server *server; /* for dt_http_call */
    void *conn;             /* the connection (NULL for dt_http_call) */
} dt_http_req;

/* A query-string argument, or NULL. */
const char *dt_http_query(const dt_http_req *req, const char *key);
/* A request header, or NULL (always NULL inside dt_http_call). */
const char *dt_http_header(const dt_http_req *req, const char *name);
/* The Authorization: Bearer token of the request, or NULL. */
const char *dt_http_bearer(const dt_http_req *req);
/* The value of `key` in a form body, URL-decoded into buf (n bytes), or NULL. */
const char *dt_http_form(const dt_http_req *req, const char *key, char *buf, size_t n);

typedef struct dt_http_resp {
    int status;   /* default 200 */
    json_t *json; /* the body as JSON (stolen by the server), or NULL */
    char *raw;    /* or raw bytes (malloc'd, freed by the server) ... */
    size_t raw_len;
    const char *content_type;  /* ... of this type (a static string) */
    const char *cache_control; /* a Cache-Control header (a static string), or NULL */
    char location[512];        /* a Location header (for 3xx), or empty */
    const char *disposition;   /* a Content-Disposition header (a static string), or NULL */
    /* or a stream of unknown length, sent chunked: stream(arg, buf, max) fills up to max bytes
     * and returns their count (it may block; > 0), or -1 at the end; stream_free(arg) when the
     * connection is done with it (also when the stream never started). Called on the
     * connection's own thread, not under the handlers' mutex. */
    long (*stream)(void *arg, char *buf, size_t max);
    void *stream_arg;
    void (*stream_free)(void *arg);
} dt_http_resp;

/* Set resp to `status` with {"error": <printf message>}. */
void dt_http_error(dt_http_resp *resp, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* dt_http_error with the arguments as a va_list. */
void dt_http_verror(dt_http_resp *resp, int status, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

typedef void (*dt_http_handler)(void *app, const dt_http_req *req, dt_http_resp *resp);

typedef struct dt_http_route {
    const char *method;  /* "GET", ... */
    const char *pattern; /* "/api/v1/experiments/{}/trials" */
    dt_http_handler fn;
} dt_http_route;

typedef struct dt_http_opts {
    const char *host;      /* the address to bind */
    int port;              /* 0: any free port */
    const char *token;     /* NULL: none needed; else every request must carry it (copied) */
    bool csrf;             /* check state-changing requests (see above) */
    const char *form_csrf; /* the form token for no-JS forms (copied; NULL: none accepted) */
    /* With `token`: is a carried token that is not it valid too (a login's token)? NULL: no.
     * Called under the handlers' mutex with the server's app. */
    bool (*token_ok)(void *app, const char *token);
    /* Paths (exact) that need neither the token nor a CSRF proof (a login, a version probe). */
    const char *const *open_paths;
    /* Called on every answer before it is sent (the handler's, or a refusal of the server's),
     * under the handlers' mutex: may rewrite it (an error body in another client's shape). */
    void (*filter)(void *app, const dt_http_req *req, dt_http_resp *resp);
} dt_http_opts;

/* As dt_http_start, with the security options. */
dt_status dt_http_start_opts(const dt_http_opts *o, const dt_http_route *routes, int n_routes,
                             void *app, dt_http_server **out);

/* Run `method` on `target` (a path with an optional query string) through the server's
 * routes in this thread, as a request without a body would be: *out gets the JSON answer (a
 * new reference; NULL for a raw one), *status its HTTP status. For the web pages, which read
 * the REST API as every other client does. */
void dt_http_call(dt_http_server *s, const char *method, const char *target, json_t **out,
                  int *status);

/* The form token pages put into their no-JS forms (a hidden csrf field), or NULL. */
const char *dt_http_form_token(const dt_http_server *s);

/* Listen on host:port (port 0: any free port) and serve `routes` (borrowed, with `app`)
 * until dt_http_stop. DT_ERR_IO naming the address and the reason when it cannot bind, with
 * a hint (another master is running there: pick --port, or stop it). */
dt_status dt_http_start(const char *host, int port, const dt_http_route *routes, int n_routes,
                        void *app, dt_http_server **out);
/* The port it listens on. */
int dt_http_port(const dt_http_server *s);
/* Stop serving (requests in progress finish) and free. NULL is a no-op. */
void dt_http_stop(dt_http_server *s);

#endif
