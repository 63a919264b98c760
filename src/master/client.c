/* client.c — the client of the master's REST API (master/master.h, "the client"): one libcurl
 * easy handle per client, reused call after call so the connection stays open (keep-alive).
 *
 * A call sends the body (if any) as compact JSON with Content-Type application/json, the
 * X-Dtrain-Csrf header and the master's token when one is known (master.h), and parses
 * the answer. Errors: DT_ERR_COMM when the master is not reached (curl's reason and how to
 * start one), else the master's own {"error"} message mapped by HTTP status (master.h).
 *
 * A hung master (a deadlock, a handler that never returns) still accepts connections — the
 * kernel does that — but never answers. With an answer timeout set, a progress callback
 * watches the time from the request's last byte sent to the answer's first byte (its status
 * line) and aborts the call when it passes, so the caller says "hung" in seconds rather than
 * after the whole call's timeout.
 */
#include "master/master.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A call waits this long for the answer unless dt_client_set_timeout says otherwise: a master
 * busy with a large transaction, or an answer that is long to send, is not an error. */
#define DEFAULT_TIMEOUT_S 30
/* Connecting takes longer than this only when the host or its network is down. */
#define CONNECT_TIMEOUT_S 5
/* dt_client_ping: a master answers its status route at once; anything slower is no master
 * (its own connect and answer limits, so that asking costs the CLI little). */
#define PING_CONNECT_S 2
#define PING_TIMEOUT_S 2

struct dt_client {
    CURL *curl;
    char url[512];
    char auth[128]; /* "Authorization: Bearer TOKEN", or empty */
    double timeout_s;
    double connect_s;
    double answer_s; /* dt_client_set_answer_timeout; 0: none */
    bool hung;       /* the last call: connected, no answer within answer_s */
    char errbuf[CURL_ERROR_SIZE];
};

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init;

static void curl_init_once(void) {
    g_curl_init = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* Is `url` http://host[:port][/]? */
static bool valid_url(const char *url) {
    if (strncmp(url, "http://", 7)) return false;
    const char *h = url + 7, *e = h + strcspn(h, ":/");
    if (e == h) return false;
    if (*e == ':') {
        const char *d = e + 1;
        size_t nd = strspn(d, "0123456789");
        if (nd == 0 || nd > 5) return false;
        e = d + nd;
    }
    return *e == 0 || !strcmp(e, "/");
}

/* The token to send: $DTRAIN_TOKEN, else $DTRAIN_HOME/master.token when readable (never
 * created here), as an Authorization header line into auth (empty when there is none). */
static void find_token(char *auth, size_t n) {
    char tok[80] = "", home[4096], p[4200];
    const char *env = getenv("DTRAIN_TOKEN");
    if (env && *env) {
        snprintf(tok, sizeof tok, "%s", env);
    } else {
        snprintf(p, sizeof p, "%s/master.token", dt_master_home(home, sizeof home));
        FILE *f = fopen(p, "r");
        if (f) {
            if (!fgets(tok, sizeof tok, f)) tok[0] = 0;
            fclose(f);
            tok[strcspn(tok, "\r\n")] = 0;
        }
    }
    auth[0] = 0;
    if (tok[0]) snprintf(auth, n, "Authorization: Bearer %s", tok);
}

dt_client *dt_client_new(const char *url) {
    if (!url || !*url) url = getenv("DTRAIN_MASTER");
    if (!url || !*url) url = DT_MASTER_DEFAULT_URL;
    if (!valid_url(url) || strlen(url) >= sizeof((dt_client *)0)->url) {
        dt_error(DT_ERR_CONFIG,
                 "the master address \"%s\" is not http://host:port; hint: set DTRAIN_MASTER "
                 "to e.g. %s",
                 url, DT_MASTER_DEFAULT_URL);
        return NULL;
    }
    pthread_once(&g_curl_once, curl_init_once);
    dt_client *c = calloc(1, sizeof *c);
    if (!c || g_curl_init != CURLE_OK || !(c->curl = curl_easy_init())) {
        free(c);
        dt_error(DT_ERR_OOM, "cannot set up the HTTP client (libcurl)");
        return NULL;
    }
    snprintf(c->url, sizeof c->url, "%s", url);
    size_t n = strlen(c->url);
    if (c->url[n - 1] == '/') c->url[n - 1] = 0;
    c->timeout_s = DEFAULT_TIMEOUT_S;
    c->connect_s = CONNECT_TIMEOUT_S;
    find_token(c->auth, sizeof c->auth);
    return c;
}

void dt_client_free(dt_client *c) {
    if (!c) return;
    curl_easy_cleanup(c->curl);
    free(c);
}

const char *dt_client_url(const dt_client *c) {
    return c->url;
}

void dt_client_set_timeout(dt_client *c, double seconds) {
    c->timeout_s = seconds;
}

void dt_client_set_answer_timeout(dt_client *c, double seconds) {
    c->answer_s = seconds > 0 ? seconds : 0;
}

bool dt_client_hung(const dt_client *c) {
    return c->hung;
}

/* The wait for the answer's first byte of one call. */
typedef struct answer_watch {
    dt_client *c;
    CURL *h;
    bool answered; /* a header line came */
    double sent;   /* when the request was out (0: not yet) */
} answer_watch;

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg) {
    ((answer_watch *)arg)->answered = true;
    (void)data;
    return size * nmemb;
}

/* libcurl calls this about once a second, and on every transfer step: abort (non-zero) once
 * the request has been sent and answer_s have passed with no byte of an answer. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
    (void)dltotal, (void)dlnow;
    answer_watch *w = arg;
    if (w->answered || w->c->answer_s <= 0) return 0;
    curl_off_t pre = 0; /* microseconds to the transfer's start: non-zero once connected */
    if (w->sent == 0 && ulnow >= ultotal &&
        curl_easy_getinfo(w->h, CURLINFO_PRETRANSFER_TIME_T, &pre) == CURLE_OK && pre > 0)
        w->sent = dt_now_sec();
    if (w->sent > 0 && dt_now_sec() - w->sent > w->c->answer_s) {
        w->c->hung = true;
        return 1;
    }
    return 0;
}

typedef struct buf {
    char *p;
    size_t len;
    bool oom;
} buf;

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg) {
    buf *b = arg;
    size_t n = size * nmemb;
    char *np = realloc(b->p, b->len + n + 1);
    if (!np) {
        b->oom = true;
        return 0;
    }
    memcpy(np + b->len, data, n);
    b->len += n;
    np[b->len] = 0;
    b->p = np;
    return n;
}

/* The status an HTTP error status maps to (master.h). */
static dt_status status_of(long http) {
    if (http == 409) return DT_ERR_STATE;
    if (http >= 500) return DT_ERR_IO;
    return DT_ERR_INVALID;
}

/* Why a call that got no complete answer failed. */
static dt_status transfer_error(const dt_client *c, CURLcode rc, const char *url, bool oom) {
    if (oom) return dt_error(DT_ERR_OOM, "out of memory reading the answer of %s", url);
    if (c->hung)
        return dt_error(DT_ERR_COMM,
                        "master at %s accepted the connection but did not answer within %.0f s; "
                        "hint: it is hung or overloaded: see its log ($DTRAIN_HOME/master.log "
                        "for one the CLI started), then restart it (dtrain master stop, or kill "
                        "the pid in $DTRAIN_HOME/master.pid)",
                        c->url + strlen("http://"), c->answer_s);
    return dt_error(DT_ERR_COMM,
                    "cannot reach the master at %s (%s); hint: start one with `dtrain master` or "
                    "set DTRAIN_MASTER",
                    c->url, c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc));
}

/* One request: the answer's bytes into *b (NUL-terminated), its HTTP status into *code. */
static dt_status perform(dt_client *c, const char *method, const char *path, const char *text,
                         buf *b, long *code) {
    char url[2048];
    snprintf(url, sizeof url, "%s%s", c->url, path);
    /* reset keeps the open connection: the next call reuses it */
    CURL *h = c->curl;
    curl_easy_reset(h);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    hdr = curl_slist_append(hdr, "Expect:"); /* no 100-continue round trip for big bodies */
    hdr = curl_slist_append(hdr, "X-Dtrain-Csrf: 1"); /* a state change from a client of ours */
    if (c->auth[0]) hdr = curl_slist_append(hdr, c->auth);
    answer_watch w = {.c = c, .h = h};
    c->errbuf[0] = 0;
    c->hung = false;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*"); /* the master is reached directly */
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(c->connect_s * 1e3));
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &w);
    if (c->answer_s > 0) {
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, &w);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    }
    if (c->timeout_s > 0) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(c->timeout_s * 1e3));
    if (text) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(text));
    }
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(hdr);
    if (rc != CURLE_OK) {
        bool oom = b->oom;
        free(b->p);
        *b = (buf){0};
        return transfer_error(c, rc, url, oom);
    }
    *code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, code);
    return DT_OK;
}

/* The status of an answer of HTTP `code` (its JSON body ans, if any, names the error). */
static dt_status answer_status(long code, const json_t *ans, const char *method, const char *path) {
    if (code < 400) return DT_OK;
    const char *msg = json_string_value(json_object_get(ans, "error"));
    return msg ? dt_error(status_of(code), "%s", msg)
               : dt_error(status_of(code), "the master answered %s %s with HTTP %ld", method, path,
                          code);
}

dt_status dt_client_call(dt_client *c, const char *method, const char *path, const json_t *body,
                         json_t **out, long *http_status) {
    if (out) *out = NULL;
    if (http_status) *http_status = 0;
    char *text = body ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    if (body && !text)
        return dt_error(DT_ERR_OOM, "out of memory encoding a request to %s%s", c->url, path);
    buf b = {0};
    long code = 0;
    dt_status st = perform(c, method, path, text, &b, &code);
    free(text);
    if (st != DT_OK) return st;
    if (http_status) *http_status = code;
    json_t *ans = NULL;
    if (b.len) {
        json_error_t err;
        ans = json_loadb(b.p, b.len, JSON_DECODE_ANY, &err);
        if (!ans && code < 400) {
            free(b.p);
            return dt_error(DT_ERR_IO,
                            "the master at %s answered %s %s with a body that is not "
                            "JSON (%s); hint: check DTRAIN_MASTER points at a dtrain "
                            "master",
                            c->url, method, path, err.text);
        }
    }
    st = answer_status(code, ans, method, path);
    free(b.p);
    if (out)
        *out = ans;
    else
        json_decref(ans);
    return st;
}

dt_status dt__client_get_bytes(dt_client *c, const char *path, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    buf b = {0};
    long code = 0;
    dt_status st = perform(c, "GET", path, NULL, &b, &code);
    if (st != DT_OK) return st;
    if (code >= 400) {
        json_t *ans = b.len ? json_loadb(b.p, b.len, 0, NULL) : NULL;
        st = answer_status(code, ans, "GET", path);
        json_decref(ans);
        free(b.p);
        return st;
    }
    *out = b.p ? b.p : calloc(1, 1);
    *len = b.len;
    return *out ? DT_OK : dt_error(DT_ERR_OOM, "out of memory reading the answer of %s", path);
}

bool dt_client_ping(dt_client *c) {
    double t = c->timeout_s, cs = c->connect_s;
    /* with an answer timeout, that decides "hung" (the call's own limit comes after it) */
    c->timeout_s = c->answer_s > 0 ? PING_CONNECT_S + c->answer_s + 1 : PING_TIMEOUT_S;
    c->connect_s = PING_CONNECT_S;
    long code = 0;
    dt_status st = dt_client_call(c, "GET", "/api/v1/master", NULL, NULL, &code);
    c->timeout_s = t;
    c->connect_s = cs;
    if (st != DT_OK && !c->hung) dt_clear_error(); /* (hung: the caller says so) */
    return st == DT_OK && code == 200;
}
