/* test_http.c — the master's HTTP server (src/master/http.c) through the API client
 * (src/master/client.c): routes and their {} params, query strings, JSON bodies, the 400 /
 * 404 / 405 / 413 answers, the error mapping of the client, a bind on a port in use, and many
 * clients at once (handlers are serialised: a counter without a lock stays exact). Loopback
 * only; every server listens on a free port (port 0). */
#include "master/http.h"
#include "master/master.h"
#include "test.h"

#include <pthread.h>
#include <string.h>

typedef struct app {
    int64_t counter;
    int in_handler; /* > 1 would mean two handlers ran at once */
    int overlap;
} app;

static void h_hello(void *a, const dt_http_req *req, dt_http_resp *resp) {
    (void)a;
    (void)req;
    resp->json = json_pack("{s:s}", "hello", "world");
}

static void h_item(void *a, const dt_http_req *req, dt_http_resp *resp) {
    (void)a;
    const char *q = dt_http_query(req, "q");
    resp->json = json_pack("{s:s,s:s,s:i,s:s?}", "exp", req->params[0], "trial", req->params[1],
                           "n", req->n_params, "q", q);
}

static void h_echo(void *a, const dt_http_req *req, dt_http_resp *resp) {
    (void)a;
    resp->json = json_pack("{s:O?}", "got", req->body);
}

static void h_conflict(void *a, const dt_http_req *req, dt_http_resp *resp) {
    (void)a;
    (void)req;
    dt_http_error(resp, 409, "this run was replaced; hint: stop");
}

static void h_count(void *a, const dt_http_req *req, dt_http_resp *resp) {
    (void)req;
    app *p = a;
    if (++p->in_handler > 1) p->overlap++;
    int64_t v = p->counter;
    for (volatile int i = 0; i < 1000; i++) {
    }
    p->counter = v + 1;
    p->in_handler--;
    resp->json = json_pack("{s:I}", "n", (json_int_t)p->counter);
}

static void h_raw(void *a, const dt_http_req *req, dt_http_resp *resp) {
    (void)a;
    (void)req;
    resp->raw = strdup("<p>hi</p>");
    resp->raw_len = strlen(resp->raw);
    resp->content_type = "text/html";
}

static const dt_http_route ROUTES[] = {
    {"GET", "/api/v1/hello", h_hello},  {"GET", "/api/v1/experiments/{}/trials/{}", h_item},
    {"POST", "/api/v1/echo", h_echo},   {"POST", "/api/v1/conflict", h_conflict},
    {"POST", "/api/v1/count", h_count}, {"GET", "/ui", h_raw},
};

/* A server on a free port with the test routes, and a client of it. */
typedef struct fixture {
    app a;
    dt_http_server *s;
    dt_client *c;
    int port;
} fixture;

static bool setup(fixture *f) {
    memset(f, 0, sizeof *f);
    dt_status st =
        dt_http_start("127.0.0.1", 0, ROUTES, (int)(sizeof ROUTES / sizeof *ROUTES), &f->a, &f->s);
    CHECK_MSG(st == DT_OK, "%s", dt_last_error());
    if (!f->s) return false;
    f->port = dt_http_port(f->s);
    CHECK(f->port > 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", f->port);
    f->c = dt_client_new(url);
    CHECK(f->c != NULL);
    return f->c != NULL;
}

static void teardown(fixture *f) {
    dt_client_free(f->c);
    dt_http_stop(f->s);
}

static void test_routes(void) {
    fixture f;
    if (!setup(&f)) return;
    dt_client *c = f.c;
    json_t *ans = NULL;
    long code = 0;
    CHECK(dt_client_call(c, "GET", "/api/v1/hello", NULL, &ans, &code) == DT_OK);
    CHECK(code == 200);
    CHECK(!strcmp(json_string_value(json_object_get(ans, "hello")), "world"));
    json_decref(ans);

    CHECK(dt_client_call(c, "GET", "/api/v1/experiments/12/trials/7?q=a%20b", NULL, &ans, &code) ==
          DT_OK);
    CHECK(!strcmp(json_string_value(json_object_get(ans, "exp")), "12"));
    CHECK(!strcmp(json_string_value(json_object_get(ans, "trial")), "7"));
    CHECK(json_integer_value(json_object_get(ans, "n")) == 2);
    CHECK(!strcmp(json_string_value(json_object_get(ans, "q")), "a b"));
    json_decref(ans);

    json_t *body = json_pack("{s:[i,i,i],s:s}", "rows", 1, 2, 3, "run", "x");
    CHECK(dt_client_call(c, "POST", "/api/v1/echo", body, &ans, &code) == DT_OK);
    CHECK(json_equal(json_object_get(ans, "got"), body));
    json_decref(ans);
    json_decref(body);

    /* an empty body reaches the handler as NULL */
    CHECK(dt_client_call(c, "POST", "/api/v1/echo", NULL, &ans, &code) == DT_OK);
    CHECK(json_is_null(json_object_get(ans, "got")));
    json_decref(ans);

    /* raw bytes */
    CHECK(dt_client_call(c, "GET", "/ui", NULL, &ans, &code) == DT_ERR_IO);
    CHECK(code == 200);
    dt_clear_error();
    teardown(&f);
}

static void test_errors(void) {
    fixture f;
    if (!setup(&f)) return;
    dt_client *c = f.c;
    json_t *ans = NULL;
    long code = 0;
    CHECK(dt_client_call(c, "GET", "/api/v1/nothing", NULL, &ans, &code) == DT_ERR_INVALID);
    CHECK(code == 404);
    CHECK(
        !strcmp(json_string_value(json_object_get(ans, "error")), "no route GET /api/v1/nothing"));
    CHECK(!strcmp(dt_last_error(), "no route GET /api/v1/nothing"));
    json_decref(ans);
    /* a segment too many or too few is another path */
    CHECK(dt_client_call(c, "GET", "/api/v1/experiments/1/trials", NULL, NULL, &code) ==
          DT_ERR_INVALID);
    CHECK(code == 404);

    CHECK(dt_client_call(c, "DELETE", "/api/v1/hello", NULL, NULL, &code) == DT_ERR_INVALID);
    CHECK(code == 405);
    CHECK(strstr(dt_last_error(), "DELETE") != NULL);

    CHECK(dt_client_call(c, "POST", "/api/v1/conflict", NULL, NULL, &code) == DT_ERR_STATE);
    CHECK(code == 409);
    CHECK(!strcmp(dt_last_error(), "this run was replaced; hint: stop"));

    /* over DT_HTTP_MAX_BODY: 413 (the body is read and dropped) */
    size_t big = DT_HTTP_MAX_BODY + 16;
    char *s_big = malloc(big + 1);
    memset(s_big, 'a', big);
    s_big[big] = 0;
    json_t *jb = json_stringn_nocheck(s_big, big);
    free(s_big);
    CHECK(dt_client_call(c, "POST", "/api/v1/echo", jb, NULL, &code) == DT_ERR_INVALID);
    CHECK(code == 413);
    json_decref(jb);
    teardown(&f);
}

/* A body that is not JSON, sent with a raw socket (the client only sends JSON). */
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

static void test_bad_json(void) {
    fixture f;
    if (!setup(&f)) return;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f.port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    const char *req = "POST /api/v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n"
                      "Connection: close\r\n\r\n{\"a\": 1,";
    CHECK(write(fd, req, strlen(req)) == (ssize_t)strlen(req));
    char ans[4096];
    size_t n = 0;
    ssize_t k;
    while (n < sizeof ans - 1 && (k = read(fd, ans + n, sizeof ans - 1 - n)) > 0) n += (size_t)k;
    ans[n] = 0;
    close(fd);
    CHECK_MSG(strstr(ans, "HTTP/1.1 400") == ans, "%s", ans);
    CHECK_MSG(strstr(ans, "{\"error\":\"the body is not JSON: ") != NULL, "%s", ans);
    CHECK_MSG(strstr(ans, "at 1:8") != NULL, "%s", ans);
    CHECK(strstr(ans, "application/json") != NULL);
    teardown(&f);
}

static void test_bind_in_use(void) {
    fixture f;
    if (!setup(&f)) return;
    dt_http_server *s2 = NULL;
    dt_status st = dt_http_start("127.0.0.1", f.port, ROUTES, 1, &f.a, &s2);
    CHECK(st == DT_ERR_IO);
    CHECK(s2 == NULL);
    char want[128];
    snprintf(want, sizeof want,
             "cannot listen on 127.0.0.1:%d: Address already in use; hint: ", f.port);
    CHECK_MSG(strstr(dt_last_error(), want) == dt_last_error(), "%s", dt_last_error());
    CHECK(strstr(dt_last_error(), "dtrain master stop") != NULL);
    CHECK(strstr(dt_last_error(), "--port") != NULL);
    teardown(&f);
    /* the client of a stopped master: DT_ERR_COMM naming the address */
    dt_client *gone = dt_client_new("http://127.0.0.1:1"); /* nothing listens on port 1 */
    long code = 7;
    CHECK(dt_client_call(gone, "GET", "/api/v1/master", NULL, NULL, &code) == DT_ERR_COMM);
    CHECK(code == 0);
    CHECK_MSG(strstr(dt_last_error(), "cannot reach the master at http://127.0.0.1:1 (") ==
                  dt_last_error(),
              "%s", dt_last_error());
    CHECK(strstr(dt_last_error(), "hint: start one with `dtrain master` or set DTRAIN_MASTER"));
    CHECK(!dt_client_ping(gone));
    dt_client_free(gone);
}

static void test_client_url(void) {
    CHECK(dt_client_new("ftp://x") == NULL);
    CHECK(dt_last_status() == DT_ERR_CONFIG);
    CHECK(strstr(dt_last_error(), "\"ftp://x\" is not http://host:port") != NULL);
    CHECK(dt_client_new("http://:80") == NULL);
    CHECK(dt_client_new("http://h:port") == NULL);
    dt_client *c = dt_client_new("http://localhost:8080/");
    CHECK(c && !strcmp(dt_client_url(c), "http://localhost:8080"));
    dt_client_free(c);
    setenv("DTRAIN_MASTER", "http://127.0.0.1:9", 1);
    c = dt_client_new(NULL);
    CHECK(c && !strcmp(dt_client_url(c), "http://127.0.0.1:9"));
    dt_client_free(c);
    unsetenv("DTRAIN_MASTER");
    c = dt_client_new(NULL);
    CHECK(c && !strcmp(dt_client_url(c), DT_MASTER_DEFAULT_URL));
    dt_client_free(c);
}

typedef struct worker_arg {
    int port;
    int ok;
} worker_arg;

static void *worker(void *p) {
    worker_arg *w = p;
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", w->port);
    dt_client *c = dt_client_new(url);
    for (int i = 0; c && i < 50; i++) {
        json_t *body = json_pack("{s:i}", "i", i);
        long code = 0;
        if (dt_client_call(c, "POST", "/api/v1/count", body, NULL, &code) == DT_OK && code == 200)
            w->ok++;
        json_decref(body);
    }
    dt_client_free(c);
    return NULL;
}

static void test_concurrent_clients(void) {
    fixture f;
    if (!setup(&f)) return;
    enum { NT = 24 };
    pthread_t th[NT];
    worker_arg w[NT];
    for (int i = 0; i < NT; i++) {
        w[i] = (worker_arg){.port = f.port};
        pthread_create(&th[i], NULL, worker, &w[i]);
    }
    int ok = 0;
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        ok += w[i].ok;
    }
    CHECK_MSG(ok == NT * 50, "%d of %d calls answered", ok, NT * 50);
    CHECK(f.a.counter == NT * 50);
    CHECK(f.a.overlap == 0);
    teardown(&f);
}

int main(void) {
    TEST_RUN(test_routes);
    TEST_RUN(test_errors);
    TEST_RUN(test_bad_json);
    TEST_RUN(test_bind_in_use);
    TEST_RUN(test_client_url);
    TEST_RUN(test_concurrent_clients);
    TEST_END();
}
