/*
 * det_impl.h — the second client's door (docs/det-client.md): the routes, shapes and
 * spellings the reference platform's own client (`det`, its Python SDK) needs from a master,
 * on dtrain's master and port. dtrain's own routes answer in dtrain's shapes; on a path both
 * use, a request carrying a login token (det_auth.c) gets the reference's shapes.
 *   det_map.c    THE mapping of dtrain's rows, states and ids to the reference's spellings
 *   det_auth.c   users, login tokens (the store's auth_tokens), the request checks
 *   det_api.c    the route table, /info, login / logout / me, the master, the shared-path
 *                dispatch, the error filter
 *   det_reply.c  what the handlers share: the error shape, a path's row, a page, the token check
 *   det_exp.c    experiments: create (with the uploaded model definition), list, describe,
 *                patch, state changes, trials, checkpoints, model_def
 *   det_trial.c  trials, checkpoints and their download
 *   det_logs.c   a trial's workloads and its log stream
 *   det_pack.c   base64, tar, gzip (det_pack.h); det_sha.c SHA-512
 * The model definition a create uploads is kept by store_modeldef.c.
 */
#ifndef DTRAIN_MASTER_DET_IMPL_H
#define DTRAIN_MASTER_DET_IMPL_H

#include "api_impl.h"

/* The version /info reports: the client warns on any other. */
#define M_DET_VERSION "0.38.1"

/* ---- det_map.c ---- */
/* dtrain's experiment / trial / checkpoint state -> the reference's ("STATE_COMPLETED"), and
 * back (NULL for a name dtrain does not have). */
const char *m_det_state(const char *dtrain_state);
const char *m_det_state_back(const char *det_state);
/* The reference's gRPC code for an HTTP error status. */
int m_det_code(int http_status);
/* The reference's objects from dtrain's store rows (docs/api.md shapes); new references. */
json_t *m_det_user(const char *username);
json_t *m_det_experiment(const json_t *row);
json_t *m_det_trial(const json_t *row);
/* A trial's summaryMetrics from its metric rows: {"avg_metrics" (training),
 * "validation_metrics"}: {name: {"count","sum","min","max","last","type"}}. */
json_t *m_det_summary(const json_t *metric_rows);
/* m_det_trial with its summaryMetrics (read from the store; call under the master's lock). */
json_t *m_det_trial_full(master *m, const json_t *row);
json_t *m_det_checkpoint(const json_t *row, const json_t *exp_row, const char *ckpt_root);
/* A metric row as a workload; `when` (a time, borrowed) stands in for the row's time. */
json_t *m_det_workload(const json_t *metric_row, const json_t *when);
json_t *m_det_log(const json_t *log_row);
/* {"offset","limit","startIndex","endIndex","total"} for `returned` items from `offset`. */
json_t *m_det_pagination(int64_t offset, int64_t limit, int64_t returned, int64_t total);

/* ---- det_auth.c ---- */
/* Log in: `determined` and `admin` with the empty password (bound beyond loopback: with the
 * master's token, `hashed` as the client hashes passwords or not); *token a new login token
 * (65 bytes). DT_ERR_INVALID "invalid credentials" otherwise. */
dt_status m_det_login(master *m, const char *user, const char *password, bool hashed, char *token);
/* The user of a login token (into user, n bytes), false when it is none. */
bool m_det_token_user(master *m, const char *token, char *user, size_t n);
dt_status m_det_logout(master *m, const char *token);
/* http.h token_ok: is it a login token? */
bool m_det_token_ok(void *app, const char *token);
/* Does the request carry a login token (the reference's client)? */
bool m_det_session(master *m, const dt_http_req *req);
/* A request on a route only the reference's client uses: true with a login token or the
 * master's token, else false with a 401 in the reference's shape. */
bool m_det_authed(master *m, const dt_http_req *req, dt_http_resp *resp);

/* ---- det_api.c ---- */
/* The reference's error shape: {"code","message","error":{"error"}} with `status`. */
void m_det_error(dt_http_resp *resp, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* m_det_error with the thread's error (400 bad input, 404 unknown, 409 state, else 500). */
void m_det_fail(dt_http_resp *resp, dt_status st);
/* http.h filter: errors answered to a login token's request take the reference's shape. */
void m_det_filter(void *app, const dt_http_req *req, dt_http_resp *resp);
/* The paths open without a token (http.h open_paths). */
extern const char *const m_det_open_paths[];
/* An experiment's / trial's row as a det read: the path's id, 404 in the reference's shape. */
json_t *m_det_row(master *m, m_owner kind, const dt_http_req *req, int64_t *id, dt_http_resp *resp);
/* The page of `list` (stolen) the query's offset / limit ask for: {key: page, "pagination"}. */
json_t *m_det_page(const dt_http_req *req, const char *key, json_t *list);

/* Answer a checkpoint list (stolen) of experiment `exp_row` in the reference's shape: the
 * query's states filter, sortByAttr / orderBy, offset / limit (det_trial.c). */
void m_det_ckpt_answer(master *m, const json_t *exp_row, dt_status st, json_t *rows,
                       const dt_http_req *req, dt_http_resp *resp);

/* det_map.c: does the query's states= (repeated) admit dtrain state `s`? (None: all.) */
bool m_det_state_wanted(const dt_http_req *req, const char *s);
/* det_auth.c: is t the master's token or a login token? */
bool m_det_token_valid(master *m, const char *t);

/* The reference's routes (det_api.c), put before dtrain's own (api.c) in the server's table. */
extern const dt_http_route m_det_routes[];
extern const int m_det_n_routes;

/* the route handlers */
void m_det_info(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_det_post_login(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_det_post_logout(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_det_get_me(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_det_or_get_master(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_det_or_create_experiment(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_det_or_list_experiments(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_det_or_get_experiment(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_det_patch_experiment(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_det_or_experiment_action(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_det_or_experiment_trials(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_det_or_experiment_checkpoints(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_det_model_def(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_det_or_model_def(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_det_or_get_trial(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_det_workloads(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_det_or_trial_logs(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_det_or_trial_checkpoints(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_det_or_get_checkpoint(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_det_download_checkpoint(void *app, const dt_http_req *req, dt_http_resp *resp);

/* the reference-shaped halves of the shared routes (det_exp.c, det_trial.c) */
void m_det_get_master(master *m, const dt_http_req *req, dt_http_resp *resp);
void m_det_create_experiment(master *m, const dt_http_req *req, dt_http_resp *resp);
void m_det_list_experiments(master *m, const dt_http_req *req, dt_http_resp *resp);
void m_det_get_experiment(master *m, const dt_http_req *req, dt_http_resp *resp);
void m_det_experiment_action(master *m, const dt_http_req *req, dt_http_resp *resp);
void m_det_experiment_trials(master *m, const dt_http_req *req, dt_http_resp *resp);
void m_det_experiment_checkpoints(master *m, const dt_http_req *req, dt_http_resp *resp);
void m_det_get_trial(master *m, const dt_http_req *req, dt_http_resp *resp);
void m_det_trial_logs(master *m, const dt_http_req *req, dt_http_resp *resp);
void m_det_trial_checkpoints(master *m, const dt_http_req *req, dt_http_resp *resp);
void m_det_get_checkpoint(master *m, const dt_http_req *req, dt_http_resp *resp);

#endif
