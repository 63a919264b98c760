/*
 * dtrain/client.h — the client of a dtrain master's REST API (docs/api.md), for programs that
 * drive experiments or read their results from C.
 *
 * The client (libcurl) reaches it at $DTRAIN_MASTER, default http://127.0.0.1:8080. A call
 * sends an optional JSON body and returns the JSON answer. Errors:
 *   DT_ERR_COMM  the master cannot be reached (the message names the address and says how
 *                to start one or point DTRAIN_MASTER at it), or, with an answer timeout set,
 *                it accepted the connection but sent no byte of an answer in time
 *                (dt_client_hung tells which);
 *   the master's own error message for a 4xx/5xx answer, as DT_ERR_INVALID (400, 404),
 *   DT_ERR_STATE (409), DT_ERR_IO (5xx); the HTTP status is in *http_status.
 * A client is used by one thread at a time.
 */
#ifndef DTRAIN_CLIENT_H
#define DTRAIN_CLIENT_H

#include "dtrain/base.h"

#include <jansson.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DT_MASTER_DEFAULT_URL "http://127.0.0.1:8080"

typedef struct dt_client dt_client;

/* url NULL: $DTRAIN_MASTER or the default. Requests carry the token of $DTRAIN_TOKEN, else of
 * $DTRAIN_HOME/master.token when that file is readable, and the X-Dtrain-Csrf header. NULL with
 * DT_ERR_OOM / DT_ERR_CONFIG (a URL that is not http://host:port). */
DT_API dt_client *dt_client_new(const char *url);
DT_API void dt_client_free(dt_client *c);
DT_API const char *dt_client_url(const dt_client *c);
/* Per-call timeout in seconds (default 30; 0 = none, for long polls). */
DT_API void dt_client_set_timeout(dt_client *c, double seconds);
/* The first byte of an answer must come within `seconds` of the request being sent, else the
 * call fails with DT_ERR_COMM and dt_client_hung is true (default 0 = no such limit: set it
 * for ordinary requests, clear it for long polls and requests whose handler works before it
 * answers). */
DT_API void dt_client_set_answer_timeout(dt_client *c, double seconds);
/* Did the last call fail because the master accepted the connection and did not answer? */
DT_API bool dt_client_hung(const dt_client *c);

/* `method` "GET" / "POST" / "DELETE" on `path` ("/api/v1/..." with any query string);
 * `body` may be NULL; *out (may be NULL) gets the answer (a new reference, NULL when
 * empty); *http_status (may be NULL) the status, 0 when the master was not reached. */
DT_API dt_status dt_client_call(dt_client *c, const char *method, const char *path,
                                const json_t *body, json_t **out, long *http_status);

/* Is a master answering at the client's address (GET /api/v1/master)? */
DT_API bool dt_client_ping(dt_client *c);

#ifdef __cplusplus
}
#endif
#endif
