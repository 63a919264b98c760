/*
 * api_impl.h — the REST handlers (one per route, named after it) and what they share.
 */
#ifndef DTRAIN_MASTER_API_IMPL_H
#define DTRAIN_MASTER_API_IMPL_H

#include "master_impl.h"

/* Answer with the thread's error: 400 for bad input, 409 for a state conflict, else 500. */
void m_api_fail(dt_http_resp *resp, dt_status st);
/* `ok` (stolen; NULL: {}) on DT_OK, else m_api_fail. */
void m_api_status(dt_http_resp *resp, dt_status st, json_t *ok);
/* The i-th path parameter as an id; false with a 400 answer when it is not one. */
bool m_api_id(const dt_http_req *req, int i, int64_t *id, dt_http_resp *resp);
int64_t m_api_query_int(const dt_http_req *req, const char *key, int64_t dflt);

/* The common shape of a read: the path's first parameter as an id, its experiment or trial
 * row looked up (404 when unknown), then `read` with the row (borrowed), all under the
 * master's lock. */
typedef enum m_owner { M_OWNER_EXPERIMENT, M_OWNER_TRIAL } m_owner;
typedef void (*m_read_fn)(master *m, int64_t id, const json_t *row, const dt_http_req *req,
                          dt_http_resp *resp);
void m_api_read(void *app, const dt_http_req *req, dt_http_resp *resp, m_owner kind,
                m_read_fn read);
/* {key: list, "total": n} on DT_OK (list stolen), else m_api_fail. The query's offset and
 * limit (both optional; req NULL: none) page the list; total counts the whole list. */
void m_api_list(const dt_http_req *req, dt_http_resp *resp, dt_status st, const char *key,
                json_t *list);
/* A whole store list (`list`: dt_store_exp_list, dt_store_model_list ...) read under the
 * master's lock and answered as m_api_list does. */
void m_api_list_store(master *m, const dt_http_req *req, dt_http_resp *resp, const char *key,
                      dt_status (*list)(dt_store *s, json_t **out));

/* The experiment's own directory under its checkpoint root (`<root>/exp-<id>`: its trials'
 * checkpoints and its searcher's files), malloc'd; NULL when out of memory. */
char *m_api_exp_dir(master *m, const dt_expconf *cfg, int64_t id);

/* api.c */
void m_api_get_master(void *app, const dt_http_req *req, dt_http_resp *resp);

/* api_exp.c */
void m_api_create_experiment(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_list_experiments(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_get_experiment(void *app, const dt_http_req *req, dt_http_resp *resp);
/* Set row.actions to the actions the experiment row's state allows (states.c's table). */
void m_api_exp_actions(json_t *row);
void m_api_delete_experiment(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_experiment_trials(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_experiment_checkpoints(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_experiment_action(void *app, const dt_http_req *req, dt_http_resp *resp);

/* api_charts.c */
void m_api_experiment_metrics(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_experiment_searcher(void *app, const dt_http_req *req, dt_http_resp *resp);

/* api_dsat.c */
void m_api_experiment_dsat(void *app, const dt_http_req *req, dt_http_resp *resp);
/* snapshot.c: the experiment's kept model definition, {"b64Tar": base64 of its tar} */
void m_api_experiment_model_def(void *app, const dt_http_req *req, dt_http_resp *resp);

/* api_logs.c */
void m_api_experiment_logs(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_trial_logs(void *app, const dt_http_req *req, dt_http_resp *resp);

/* api_trial.c */
void m_api_get_trial(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_trial_metrics(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_trial_checkpoints(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_kill_trial(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_get_checkpoint(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_trial_spec(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_post_metrics(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_post_progress(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_searcher_op(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_searcher_completed(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_post_checkpoint(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_preempt(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_early_exit(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_stopped(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_heartbeat(void *app, const dt_http_req *req, dt_http_resp *resp);

/* api_models.c */
void m_api_list_models(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_create_model(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_get_model(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_model_versions(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_register_version(void *app, const dt_http_req *req, dt_http_resp *resp);
void m_api_delete_checkpoint(void *app, const dt_http_req *req, dt_http_resp *resp);
/* m_api_delete_experiment, refused (409) while a checkpoint of the experiment is protected */
void m_api_delete_experiment_kept(void *app, const dt_http_req *req, dt_http_resp *resp);

#endif
