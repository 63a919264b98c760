/*
 * http.h — the master's HTTP server: libmicrohttpd under a table of routes.
 *
 * Routes are data: {method, pattern, handler}; a pattern's `{}` segments match one path
 * segment each and reach the handler as req->params. Request bodies are read whole (up to
 * DT_HTTP_MAX_BODY) and parsed as JSON when they are not empty; a body that is not JSON is
 * answered 400 before any handler runs. Handlers fill a response: a JSON value (sent with
 * the one JSON encoder, compact) or raw bytes with a content type (the web UI). Errors are
 * {"error": "what was wrong; hint: what to do"} with a 4xx/5xx status (dt_http_error).
 * The server runs its own thread; handlers are called one at a time (the server serialises
 * them), so the master's state needs no lock of its own against other requests.
 */
#ifndef DTRAIN_MASTER_HTTP_H
#define DTRAIN_MASTER_HTTP_H

#include "dtrain/base.h"

#include <jansson.h>
#include <stddef.h>

#define DT_HTTP_MAX_BODY (64u << 20)

typedef struct dt_http_req {
    const char *method; /* "GET", "POST", "DELETE", ... */
    const char *path;   /* without the query string */
    const char *params[4]; /* the pattern's {} segments, in order (URL-decoded) */
    int n_params;
    json_t *body; /* the parsed body, or NULL when empty (borrowed) */
    void *conn;   /* for dt_http_query */
} dt_http_req;

/* A query-string argument, or NULL. */
const char *dt_http_query(const dt_http_req *req, const char *key);

typedef struct dt_http_resp {
    int status;       /* default 200 */
    json_t *json;     /* the body as JSON (stolen by the server), or NULL */
    char *raw;        /* or raw bytes (malloc'd, freed by the server) ... */
    size_t raw_len;
    const char *content_type; /* ... of this type (a static string) */
} dt_http_resp;

/* Set resp to `status` with {"error": <printf message>}. */
void dt_http_error(dt_http_resp *resp, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

typedef void (*dt_http_handler)(void *app, const dt_http_req *req, dt_http_resp *resp);

typedef struct dt_http_route {
    const char *method;  /* "GET", ... */
    const char *pattern; /* "/api/v1/experiments/{}/trials" */
    dt_http_handler fn;
} dt_http_route;

typedef struct dt_http_server dt_http_server;

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
