/* http.c — the master's HTTP server (http.h): libmicrohttpd with one internal polling thread,
 * so handlers run one at a time, under a table of routes.
 *
 * The listening socket is made here (bound to the given host only; port 0 picks a free port)
 * and handed to libmicrohttpd, so a bind failure can say why. A request's body is gathered
 * up to DT_HTTP_MAX_BODY (413 beyond) and parsed as JSON (400 when it is not) before the
 * route's handler runs; a path no route matches is 404, one that matches with another method
 * 405. Answers are encoded once, compactly, by json_dumps.
 */
#include "http.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_SEGMENTS 16

struct dt_http_server {
    struct MHD_Daemon *mhd;
    const dt_http_route *routes;
    int n_routes;
    void *app;
    int port;
};

/* One request in progress: its body as it arrives. */
typedef struct pending {
    char *buf;
    size_t len, cap;
    bool too_big;
} pending;

const char *dt_http_query(const dt_http_req *req, const char *key) {
    return MHD_lookup_connection_value((struct MHD_Connection *)req->conn, MHD_GET_ARGUMENT_KIND,
                                       key);
}

void dt_http_error(dt_http_resp *resp, int status, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
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

static enum MHD_Result send_resp(struct MHD_Connection *conn, dt_http_resp *resp) {
    char *body;
    size_t len;
    const char *type = "application/json";
    if (resp->raw) {
        body = resp->raw;
        len = resp->raw_len;
        if (resp->content_type) type = resp->content_type;
        resp->raw = NULL;
    } else {
        body = resp->json ? json_dumps(resp->json, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("{}");
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
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)resp->status, r);
    MHD_destroy_response(r);
    return ret;
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
    /* the whole request is here */
    dt_http_resp resp = {.status = 200};
    dt_http_req req = {.method = method, .path = url, .conn = conn};
    char buf[2048];
    if (p->too_big) {
        dt_http_error(&resp, 413, "the body is over %u bytes; hint: send less at once",
                      DT_HTTP_MAX_BODY);
        return send_resp(conn, &resp);
    }
    const dt_http_route *rt = route(s, &req, buf, sizeof buf, &resp);
    if (!rt) return send_resp(conn, &resp);
    if (p->len) {
        json_error_t err;
        req.body = json_loadb(p->buf, p->len, JSON_DECODE_ANY, &err);
        if (!req.body) {
            dt_http_error(&resp, 400, "the body is not JSON: %s at %d:%d", err.text, err.line,
                          err.column);
            return send_resp(conn, &resp);
        }
    }
    rt->fn(s->app, &req, &resp);
    json_decref(req.body);
    return send_resp(conn, &resp);
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

dt_status dt_http_start(const char *host, int port, const dt_http_route *routes, int n_routes,
                        void *app, dt_http_server **out) {
    *out = NULL;
    dt_http_server *s = calloc(1, sizeof *s);
    if (!s) return dt_error(DT_ERR_OOM, "out of memory starting the HTTP server");
    s->routes = routes;
    s->n_routes = n_routes;
    s->app = app;
    int fd = listen_on(host, port, &s->port);
    if (fd < 0) {
        free(s);
        return DT_ERR_IO;
    }
    /* one polling thread: handlers are called one at a time */
    s->mhd =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO, 0, NULL, NULL, on_request,
                         s, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
                         NULL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
                         MHD_OPTION_CONNECTION_LIMIT, (unsigned)1000, MHD_OPTION_END);
    if (!s->mhd) {
        close(fd);
        free(s);
        return dt_error(DT_ERR_IO, "cannot serve HTTP on %s:%d: libmicrohttpd did not start", host,
                        port);
    }
    *out = s;
    return DT_OK;
}

int dt_http_port(const dt_http_server *s) {
    return s->port;
}

void dt_http_stop(dt_http_server *s) {
    if (!s) return;
    MHD_stop_daemon(s->mhd); /* closes the listening socket too */
    free(s);
}
