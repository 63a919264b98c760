/*
 * exp.c — experiments on the master: creating one (config and overrides, the searcher, the
 * model directory built once), turning the searcher's operations into trials and their
 * operation queues, the users' state changes (pause, activate, cancel, kill, delete), the
 * end of a trial run, and loading the live experiments again after a restart.
 *
 * Every searcher event is one store transaction: the trials it creates, the operation
 * queues it changes and the searcher snapshot after it commit together, so a master killed
 * at any point restarts with a searcher that matches its trials.
 */
#define _GNU_SOURCE
#include "master_impl.h"

#include "gc.h"

#include "dsat/dsat.h"
#include "launch/launch.h"
#include "base/path.h"
#include "dtrain/trialio.h"

#include "base/base_impl.h"
#include "search/searcher.h"
#include "trial/trial_iface.h"
#include "config/expconf_doc.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* How long a restarted master waits for the processes of a previous master's run to be gone
 * before it runs the trial again (a kill reaches them at once; stragglers are logged). */
#define RECLAIM_WAIT_S 30

/* ---- lengths as JSON: {"batches": N} ---- */

dt_status m_length_from_json(const json_t *j, dt_length *out) {
    static const struct {
        const char *key;
        dt_unit u;
    } units[] = {
        {"batches", DT_UNIT_BATCHES}, {"epochs", DT_UNIT_EPOCHS}, {"records", DT_UNIT_RECORDS}};
    if (json_is_object(j) && json_object_size(j) == 1)
        for (size_t i = 0; i < 3; i++) {
            json_t *v = json_object_get(j, units[i].key);
            if (json_is_integer(v) && json_integer_value(v) > 0) {
                *out = (dt_length){units[i].u, json_integer_value(v)};
                return DT_OK;
            }
        }
    return dt_error(DT_ERR_INVALID, "a length must be {\"batches\"|\"epochs\"|\"records\": N} "
                                    "with N > 0");
}

json_t *m_length_json(dt_length len) {
    return json_pack("{sI}", dt_unit_name(len.unit), (json_int_t)len.n);
}

static bool len_eq(dt_length a, dt_length b) {
    return a.unit == b.unit && a.n == b.n;
}

/* ---- lookup ---- */

m_exp *m_exp_find(master *m, int64_t id) {
    for (int i = 0; i < m->n_exps; i++)
        if (m->exps[i]->id == id) return m->exps[i];
    return NULL;
}

m_trial *m_trial_find(master *m, int64_t id, m_exp **exp) {
    for (int i = 0; i < m->n_exps; i++)
        for (int j = 0; j < m->exps[i]->n_trials; j++)
            if (m->exps[i]->trials[j]->id == id) {
                if (exp) *exp = m->exps[i];
                return m->exps[i]->trials[j];
            }
    return NULL;
}

static m_trial *trial_by_request(m_exp *e, int64_t rid) {
    for (int j = 0; j < e->n_trials; j++)
        if (e->trials[j]->request_id == rid) return e->trials[j];
    return NULL;
}

void m_trial_ckpt_dir(const m_trial *t, char *buf, size_t n) {
    snprintf(buf, n, "%s/exp-%lld/trial-%lld", t->exp->ckpt_root, (long long)t->exp->id,
             (long long)t->id);
}

static void trial_free(m_trial *t) {
    if (!t) return;
    json_decref(t->hparams);
    free(t->cpus);
    free(t->silence_reason);
    free(t);
}

void m_exp_free(m_exp *e) {
    if (!e) return;
    for (int i = 0; i < e->n_trials; i++) trial_free(e->trials[i]);
    free(e->trials);
    dt_searcher_free(e->search);
    if (e->own_launcher) e->launcher->ops->free(e->launcher);
    if (e->search_lib) dlclose(e->search_lib);
    dt_expconf_free(e->cfg);
    free(e->so_path);
    free(e->model_dir);
    free(e->ckpt_root);
    free(e);
}

static dt_status add_exp(master *m, m_exp *e) {
    if (m->n_exps == m->cap_exps) {
        int cap = m->cap_exps ? 2 * m->cap_exps : 8;
        m_exp **v = realloc(m->exps, (size_t)cap * sizeof *v);
        if (!v) return dt_error(DT_ERR_OOM, "out of memory");
        m->exps = v;
        m->cap_exps = cap;
    }
    m->exps[m->n_exps++] = e;
    return DT_OK;
}

static m_trial *add_trial(m_exp *e) {
    if (e->n_trials == e->cap_trials) {
        int cap = e->cap_trials ? 2 * e->cap_trials : 16;
        m_trial **v = realloc(e->trials, (size_t)cap * sizeof *v);
        if (!v) return NULL;
        e->trials = v;
        e->cap_trials = cap;
    }
    m_trial *t = calloc(1, sizeof *t);
    if (t) e->trials[e->n_trials++] = t;
    return t;
}

/* ---- states ---- */

void m_trial_set_state(master *m, m_trial *t, m_state state, const char *reason) {
    t->state = state;
    if (m_state_terminal(state) && !t->run) {
        /* no run of it will write there again: a checkpoint a killed run left half-written
         * goes now */
        char dir[4600];
        m_trial_ckpt_dir(t, dir, sizeof dir);
        dt_ckpt_remove_partial(dir);
    }
    if (dt_store_trial_set_state(m->store, t->id, m_state_name(state), reason) != DT_OK)
        dt_log(DT_LOG_ERROR, "trial %lld: %s", (long long)t->id, dt_last_error());
}

void m_exp_set_state(master *m, m_exp *e, m_state state) {
    e->state = state;
    if (dt_store_exp_set_state(m->store, e->id, m_state_name(state)) != DT_OK)
        dt_log(DT_LOG_ERROR, "experiment %lld: %s", (long long)e->id, dt_last_error());
}

/* ---- the searcher's operations ---- */

static json_t *trial_ops_json(const m_trial *t) {
    json_t *ops = json_array();
    for (int i = 0; i < t->n_ops; i++) json_array_append_new(ops, m_length_json(t->ops[i]));
    return json_pack("{so,sb,so}", "ops", ops, "closed", t->closed, "completed",
                     t->completed.n ? m_length_json(t->completed) : json_null());
}

static dt_status save_trial_ops(master *m, const m_trial *t) {
    json_t *j = trial_ops_json(t);
    dt_status st =
        j ? dt_store_trial_set_ops(m->store, t->id, j) : dt_error(DT_ERR_OOM, "out of memory");
    json_decref(j);
    return st;
}

static void load_trial_ops(m_trial *t, const json_t *j) {
    const json_t *ops = json_object_get(j, "ops"), *v;
    size_t i;
    json_array_foreach(ops, i, v) {
        if (t->n_ops < M_MAX_OPS && m_length_from_json(v, &t->ops[t->n_ops]) == DT_OK) t->n_ops++;
    }
    t->closed = json_is_true(json_object_get(j, "closed"));
    if (m_length_from_json(json_object_get(j, "completed"), &t->completed) != DT_OK)
        t->completed = (dt_length){DT_UNIT_BATCHES, 0};
}

/* The trial seed: the experiment seed mixed with the request id (splitmix64). */
static uint64_t trial_seed(const m_exp *e, int64_t rid) {
    uint64_t z = e->cfg->experiment_seed + 0x9e3779b97f4a7c15ull * (uint64_t)rid;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (z ^ (z >> 31)) & 0x7fffffffu;
}

/* A trial of a search timed by a reported metric trains max_length at most (the searcher stops
 * it earlier); without one (a command entrypoint) the command decides, as for a closed trial. */
static dt_status time_trial_length(master *m, m_exp *e, m_trial *t) {
    if (e->cfg->searcher.max_length.n > 0)
        t->ops[t->n_ops++] = e->cfg->searcher.max_length;
    else
        t->closed = true;
    return save_trial_ops(m, t);
}

/* Apply `ops` (which grows while trial creations add the searcher's answers). */
static dt_status apply_ops(master *m, m_exp *e, dt_search_ops *ops) {
    for (int i = 0; i < ops->n; i++) {
        dt_search_op *op = &ops->v[i];
        m_trial *t = op->kind == DT_SEARCH_SHUTDOWN ? NULL : trial_by_request(e, op->request_id);
        dt_status st = DT_OK;
        switch (op->kind) {
        case DT_SEARCH_CREATE: {
            if (t)
                return dt_error(DT_ERR_STATE, "the searcher created request %lld twice",
                                (long long)op->request_id);
            if (!(t = add_trial(e))) return dt_error(DT_ERR_OOM, "out of memory");
            t->exp = e;
            t->request_id = op->request_id;
            t->hparams = json_incref(op->hparams);
            t->seed = trial_seed(e, op->request_id);
            t->best = NAN;
            t->state = e->state == M_PAUSED ? M_PAUSED : M_ACTIVE;
            if ((st = dt_store_trial_insert(m->store, e->id, t->request_id, t->hparams, t->seed,
                                            &t->id)) != DT_OK)
                return st;
            if (t->state != M_ACTIVE &&
                (st = dt_store_trial_set_state(m->store, t->id, m_state_name(t->state), NULL)) !=
                    DT_OK)
                return st;
            if (dt_searcher_time_metric(e->cfg) && (st = time_trial_length(m, e, t)) != DT_OK)
                return st;
            st = dt_searcher_trial_created(e->search, t->request_id, ops);
            break;
        }
        case DT_SEARCH_VALIDATE_AFTER:
            if (!t)
                return dt_error(DT_ERR_STATE,
                                "the searcher gave an operation to unknown "
                                "request %lld",
                                (long long)op->request_id);
            if (dt_searcher_time_metric(e->cfg)) break; /* a rung in the reported metric */
            if (t->n_ops == M_MAX_OPS)
                return dt_error(DT_ERR_STATE, "trial %lld has %d operations queued",
                                (long long)t->id, M_MAX_OPS);
            t->ops[t->n_ops++] = op->length;
            st = save_trial_ops(m, t);
            break;
        case DT_SEARCH_CLOSE:
            if (!t)
                return dt_error(DT_ERR_STATE, "the searcher closed unknown request %lld",
                                (long long)op->request_id);
            t->closed = true;
            if (dt_searcher_time_metric(e->cfg) && !m_state_terminal(t->state)) {
                t->n_ops = 0; /* stopped by its reported time: checkpoint and end */
                if (t->run) t->preempt = true;
            }
            st = save_trial_ops(m, t);
            break;
        case DT_SEARCH_SHUTDOWN:
            e->shutdown = true;
            e->shutdown_cancel = op->cancel;
            e->shutdown_failure = op->failure;
            break;
        }
        if (st != DT_OK) return st;
    }
    return DT_OK;
}

static void end_trial(master *m, m_trial *t, m_state state, const char *reason, bool tell,
                      bool early, dt_search_exit why);
static void gc(master *m, m_exp *e);

/* Trials the searcher closed while they waited between runs for an operation (a custom
 * searcher may leave a trial without one, then close it): nothing will run them again, so
 * they end now, each its own searcher event. */
static void end_closed_waiting(master *m, m_exp *e) {
    bool ended = false;
    for (int i = 0; i < e->n_trials; i++) {
        m_trial *t = e->trials[i];
        if (!t->closed || t->run || t->n_ops || t->run_id == 0 || t->state != M_ACTIVE) continue;
        end_trial(m, t, M_COMPLETED, NULL, true, false, 0);
        ended = true;
    }
    if (!ended) return;
    gc(m, e);
    m_exp_settle(m, e);
}

/* Finish a searcher event: apply its operations and store the snapshot, in the
 * transaction the caller began. On error the experiment ends in ERROR. */
static dt_status end_event(master *m, m_exp *e, dt_status st, dt_search_ops *ops) {
    if (st == DT_OK) st = apply_ops(m, e, ops);
    json_t *snap = st == DT_OK ? dt_searcher_save(e->search) : NULL;
    if (st == DT_OK && !snap) st = dt_last_status();
    if (st == DT_OK) st = dt_store_searcher_save(m->store, e->id, snap);
    if (st == DT_OK)
        st = dt_store_exp_set_progress(m->store, e->id, dt_searcher_progress(e->search));
    json_decref(snap);
    dt_search_ops_free(ops);
    if (st == DT_OK && (st = dt_store_commit(m->store)) == DT_OK) end_closed_waiting(m, e);
    if (st == DT_OK) return DT_OK;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", dt_last_error());
    dt_store_rollback(m->store);
    dt_log(DT_LOG_ERROR, "experiment %lld: the searcher failed: %s", (long long)e->id, msg);
    e->shutdown = true;
    e->shutdown_failure = true;
    return dt_error(st, "%s", msg);
}

dt_status m_trial_completed_op(master *m, m_trial *t, dt_length len, double metric) {
    m_exp *e = t->exp;
    if (t->n_ops == 0 || !len_eq(t->ops[0], len)) {
        /* a run resumed from an earlier checkpoint completes an operation again */
        if (t->completed.n && len.unit == t->completed.unit && len.n <= t->completed.n)
            return DT_OK;
        char a[64];
        return dt_error(DT_ERR_STATE, "trial %lld has no operation to train to %s",
                        (long long)t->id, dt_length_format(len, a, sizeof a));
    }
    if (dt_store_begin(m->store) != DT_OK) return dt_last_status();
    memmove(t->ops, t->ops + 1, (size_t)--t->n_ops * sizeof *t->ops);
    t->completed = len;
    bool timed = dt_searcher_time_metric(e->cfg) != NULL;
    if (timed) t->closed = true; /* trained its whole length: the searcher hears of its exit */
    dt_status st = save_trial_ops(m, t);
    dt_search_ops ops = {0};
    if (st == DT_OK && !timed)
        st = dt_searcher_validation_completed(e->search, t->request_id, metric, len, &ops);
    return end_event(m, e, st, &ops);
}

void m_trial_reported_time(master *m, m_trial *t, const json_t *rows) {
    m_exp *e = t->exp;
    const char *tm = dt_searcher_time_metric(e->cfg);
    size_t i;
    const json_t *r;
    if (!tm) return;
    /* rows after the searcher stopped the trial (before its run noticed) are ignored by it */
    json_array_foreach(rows, i, r) {
        const json_t *mx = json_object_get(r, "metrics"), *x = json_object_get(mx, tm),
                     *y = json_object_get(mx, e->cfg->searcher.metric);
        const char *kind = json_string_value(json_object_get(r, "kind"));
        if (e->shutdown || m_state_terminal(t->state) || m_state_terminal(e->state)) return;
        if (!kind || strcmp(kind, "validation") || !json_is_number(x) || !json_is_number(y))
            continue;
        double v = json_number_value(x);
        dt_length at = {DT_UNIT_BATCHES, v < 0 ? 0 : v > 9e18 ? INT64_MAX : (int64_t)v};
        if (dt_store_begin(m->store) != DT_OK) return;
        dt_search_ops ops = {0};
        end_event(m, e,
                  dt_searcher_validation_completed(e->search, t->request_id, json_number_value(y),
                                                   at, &ops),
                  &ops);
    }
}

/* A trial ends in `state`: the state and the searcher's event about it (closed, or exited
 * early for `why`) commit together, so a restarted master never finds an ended trial the
 * searcher was not told about. `tell` false: no event (the experiment is stopping). */
static void end_trial(master *m, m_trial *t, m_state state, const char *reason, bool tell,
                      bool early, dt_search_exit why) {
    m_exp *e = t->exp;
    tell = tell && !m_state_terminal(e->state) && !e->shutdown;
    bool txn = dt_store_begin(m->store) == DT_OK;
    m_trial_set_state(m, t, state, reason);
    if (!txn) return;
    if (!tell) {
        dt_store_commit(m->store);
        return;
    }
    /* an early exit is told first, then (as for every trial whose process has ended) the close */
    dt_search_ops ops = {0};
    dt_status st =
        early ? dt_searcher_trial_exited_early(e->search, t->request_id, why, &ops) : DT_OK;
    if (st == DT_OK) st = dt_searcher_trial_closed(e->search, t->request_id, &ops);
    t->exited_early = early;
    if (end_event(m, e, st, &ops) != DT_OK)
        m_trial_set_state(m, t, state, reason); /* rolled back */
}

/* ---- garbage collection ---- */

static void gc(master *m, m_exp *e) {
    dt_gc_policy p = dt_gc_policy_of(e->cfg);
    if (dt_gc_run(m->store, e->id, &p, e->ckpt_root) != DT_OK)
        dt_log(DT_LOG_ERROR, "experiment %lld: checkpoint GC: %s", (long long)e->id,
               dt_last_error());
}

/* ---- a run ended ---- */

void m_trial_run_ended(master *m, m_trial *t, int code) {
    m_exp *e = t->exp;
    if (m->stop) return; /* the master is stopping: the trial runs again at the next start */
    bool paused = t->preempt && e->state == M_PAUSED;
    bool stopping = m_state_stopping(e->state);
    t->preempt = false;
    if (t->killing || stopping) {
        end_trial(m, t, M_CANCELED, t->killing ? "killed" : "canceled", !stopping, true,
                  DT_SEARCH_EXIT_USER_CANCELED);
    } else if (code == DT_WORKER_EXIT_INVALID_HP || t->invalid_hp) {
        end_trial(m, t, M_ERROR, "invalid_hp", true, true, DT_SEARCH_EXIT_INVALID_HP);
    } else if (code == 0 && paused) {
        m_trial_set_state(m, t, M_PAUSED, NULL);
    } else if (code == 0 && t->n_ops == 0 && t->closed) {
        end_trial(m, t, M_COMPLETED, NULL, true, false, 0);
    } else if (code == 0 && t->n_ops == 0) {
        /* done with its operations, waiting for the searcher: runs again when one comes */
    } else if (t->restarts < e->cfg->max_restarts) {
        if (dt_store_trial_add_restart(m->store, t->id, &t->restarts) != DT_OK) t->restarts++;
        dt_log(DT_LOG_WARN, "trial %lld exited with %d: restart %lld of %lld", (long long)t->id,
               code, (long long)t->restarts, (long long)e->cfg->max_restarts);
    } else {
        end_trial(m, t, M_ERROR, t->silence_reason ? t->silence_reason : "errored", true, true,
                  DT_SEARCH_EXIT_ERRORED);
    }
    if (m_state_terminal(t->state)) gc(m, e);
    m_exp_settle(m, e);
}

void m_trial_start_failed(master *m, m_trial *t) {
    if (m_state_terminal(t->state)) return;
    end_trial(m, t, M_ERROR, "errored", true, true, DT_SEARCH_EXIT_ERRORED);
    gc(m, t->exp);
    m_exp_settle(m, t->exp);
}

void m_trial_kill(master *m, m_trial *t) {
    if (m_state_terminal(t->state)) return;
    if (t->run) {
        m_sched_kill(m, t); /* ends the run: m_trial_run_ended does the rest */
        return;
    }
    end_trial(m, t, M_CANCELED, "killed", true, true, DT_SEARCH_EXIT_USER_CANCELED);
    gc(m, t->exp);
    m_exp_settle(m, t->exp);
}

static bool any_running(const m_exp *e) {
    for (int i = 0; i < e->n_trials; i++)
        if (e->trials[i]->run) return true;
    return false;
}

void m_exp_settle(master *m, m_exp *e) {
    if (m_state_terminal(e->state) || any_running(e)) return;
    m_state end;
    if (m_state_stopping(e->state))
        end = m_state_ended(e->state);
    else if (e->shutdown && e->state == M_ACTIVE)
        end = e->shutdown_failure ? M_ERROR : e->shutdown_cancel ? M_CANCELED : M_COMPLETED;
    else
        return;
    for (int i = 0; i < e->n_trials; i++)
        if (!m_state_terminal(e->trials[i]->state))
            m_trial_set_state(m, e->trials[i], end == M_COMPLETED ? M_COMPLETED : M_CANCELED, NULL);
    gc(m, e);
    m_exp_set_state(m, e, end);
    dt_log(DT_LOG_INFO, "experiment %lld %s", (long long)e->id, m_state_name(end));
}

/* ---- user actions ---- */

/* Every trial of `e` that is ACTIVE (pause) or PAUSED (activate) follows the experiment. */
static void trials_follow(master *m, m_exp *e, m_state to) {
    for (int i = 0; i < e->n_trials; i++) {
        m_trial *t = e->trials[i];
        if (to == M_PAUSED && t->state == M_ACTIVE) {
            if (t->run)
                t->preempt = true; /* checkpoints and exits; PAUSED when it has */
            else
                m_trial_set_state(m, t, M_PAUSED, NULL);
        } else if (to == M_ACTIVE && t->state == M_PAUSED) {
            t->preempt = false;
            m_trial_set_state(m, t, M_ACTIVE, NULL);
        }
    }
}

/* Stop every live trial of `e`: at once (kill) or after a checkpoint (cancel). */
static void trials_stop(master *m, m_exp *e, bool kill) {
    for (int i = 0; i < e->n_trials; i++) {
        m_trial *t = e->trials[i];
        if (m_state_terminal(t->state)) continue;
        if (!t->run)
            m_trial_set_state(m, t, M_CANCELED, kill ? "killed" : "canceled");
        else if (kill)
            m_sched_kill(m, t);
        else
            t->preempt = true;
    }
}

dt_status m_exp_action(master *m, m_exp *e, m_action action) {
    if (!m_action_allowed(e->state, action))
        return dt_error(DT_ERR_STATE, "experiment %lld is %s: it cannot %s", (long long)e->id,
                        m_state_name(e->state), m_action_name(action));
    m_state to;
    if (!m_action_moves(e->state, action, &to)) return DT_OK; /* already there */
    m_exp_set_state(m, e, to);
    if (action == M_ACT_PAUSE || action == M_ACT_ACTIVATE) {
        trials_follow(m, e, to);
    } else {
        trials_stop(m, e, action == M_ACT_KILL);
        m_exp_settle(m, e);
    }
    return DT_OK;
}

/* ---- delete ---- */

/* Remove <root>/<rel> (the master's own checkpoint, build and context directories), contained
 * in root; a failure is logged, never fatal: the experiment's rows go all the same. */
static void remove_tree(const char *root, const char *rel) {
    if (dt_path_remove_tree(root, rel) != DT_OK) dt_log(DT_LOG_WARN, "%s", dt_last_error());
}

dt_status m_exp_delete(master *m, int64_t id) {
    m_exp *e = m_exp_find(m, id);
    if (!e) return dt_error(DT_ERR_INVALID, "no experiment %lld", (long long)id);
    if (!m_state_terminal(e->state))
        return dt_error(DT_ERR_STATE,
                        "experiment %lld is %s; hint: kill it first (dtrain "
                        "experiment kill %lld), then delete it",
                        (long long)id, m_state_name(e->state), (long long)id);
    char p[4600];
    snprintf(p, sizeof p, "exp-%lld", (long long)id);
    remove_tree(e->ckpt_root, p);
    snprintf(p, sizeof p, "builds/exp-%lld", (long long)id);
    remove_tree(m->home, p);
    /* a context the CLI copied for this experiment (dtrain dsat --include) is its own */
    snprintf(p, sizeof p, "%s/contexts/ctx-", m->home);
    if (e->model_dir && !strncmp(e->model_dir, p, strlen(p)) &&
        !strchr(e->model_dir + strlen(p), '/'))
        remove_tree(m->home, e->model_dir);
    dt_status st = dt_store_exp_delete(m->store, id);
    if (st != DT_OK) return st;
    for (int i = 0; i < m->n_exps; i++)
        if (m->exps[i] == e) {
            m->exps[i] = m->exps[--m->n_exps];
            break;
        }
    m_exp_free(e);
    return DT_OK;
}

/* ---- the searcher ---- */

/* The latest validation metrics of the experiment's trial `rid` (dt_search_trial_metrics). */
static json_t *trial_metrics(void *arg, int64_t rid) {
    m_exp *e = arg;
    m_trial *t = trial_by_request(e, rid);
    json_t *rows = NULL;
    if (!t || dt_store_metrics_query(e->owner->store, t->id, "validation", -1, 0, &rows) != DT_OK)
        return NULL;
    json_t *m =
        json_incref(json_object_get(json_array_get(rows, json_array_size(rows) - 1), "metrics"));
    json_decref(rows);
    return m;
}

/* The dsat search runner, writing to the experiment's checkpoint directory. */
static dt_status make_dsat(m_exp *e) {
    char dir[4600], failed[4600];
    snprintf(dir, sizeof dir, "%s/exp-%lld", e->ckpt_root, (long long)e->id);
    int err = dt__mkdir_p(dir, failed, sizeof failed);
    if (err) return dt_error(DT_ERR_IO, "cannot create %s: %s", failed, strerror(err));
    dt_search_method method = {0};
    dt_status st = dt_dsat_runner_new(e->cfg, e->model_dir, dir, &method);
    if (st != DT_OK) return st;
    st = dt_searcher_new_custom(e->cfg, e->cfg->experiment_seed, &method, &e->search);
    if (st != DT_OK) method.free(method.state);
    return st;
}

/* A built-in searcher, the dsat runner, or (custom) the method the experiment's built object
 * exports under searcher.method. */
static dt_status make_searcher(master *m, m_exp *e) {
    const dt_expconf *cfg = e->cfg;
    e->owner = m;
    dt_status st = DT_OK;
    if (!strcmp(cfg->searcher.name, "dsat"))
        st = make_dsat(e);
    else if (strcmp(cfg->searcher.name, "custom"))
        st = dt_searcher_new(cfg, cfg->experiment_seed, &e->search);
    if (st != DT_OK || e->search) {
        if (e->search) dt_searcher_set_metrics_source(e->search, trial_metrics, e);
        return st;
    }
    if (!e->so_path || !*e->so_path)
        return dt_error(DT_ERR_CONFIG, "searcher.method needs a model directory built into an "
                                       "object (a module:Symbol entrypoint)");
    if (!(e->search_lib = dlopen(e->so_path, RTLD_NOW | RTLD_LOCAL)))
        return dt_error(DT_ERR_CONFIG, "cannot load %s: %s", e->so_path, dlerror());
    dt_search_method_new_fn fn;
    *(void **)&fn = dlsym(e->search_lib, cfg->searcher.method);
    if (!fn)
        return dt_error(DT_ERR_CONFIG,
                        "%s does not export searcher.method '%s'; hint: define "
                        "`dt_status %s(const dt_expconf *, dt_search_method *)` "
                        "(non-static) in the model directory",
                        e->so_path, cfg->searcher.method, cfg->searcher.method);
    dt_search_method method = {0};
    if ((st = fn(cfg, &method)) != DT_OK) return st;
    st = dt_searcher_new_custom(cfg, cfg->experiment_seed, &method, &e->search);
    if (e->search) dt_searcher_set_metrics_source(e->search, trial_metrics, e);
    return st;
}

/* ---- create ---- */

static dt_status parse_config(const json_t *body, dt_expconf **cfg) {
    const char *text = json_string_value(json_object_get(body, "config_text"));
    if (!text)
        return dt_error(DT_ERR_CONFIG, "the request has no config_text; hint: send the "
                                       "experiment config's YAML as \"config_text\"");
    /* messages name the file the client read (config_name), as config check's do */
    const char *name = json_string_value(json_object_get(body, "config_name"));
    dt_yaml_doc *doc = dt_yaml_load_string(text, strlen(text), name ? name : "config");
    if (!doc) return dt_last_status();
    json_t *root = dt_yaml_root(doc);
    if (!json_is_object(root)) {
        dt_yaml_free(doc);
        return dt_error(DT_ERR_CONFIG, "the experiment config must be a mapping");
    }
    const json_t *ov = json_object_get(body, "overrides"), *v;
    size_t i;
    json_array_foreach(ov, i, v) {
        dt_status st = json_is_string(v) ? dt_config_override(root, json_string_value(v))
                                         : dt_error(DT_ERR_CONFIG, "overrides must be strings");
        if (st != DT_OK) {
            dt_yaml_free(doc);
            return st;
        }
    }
    return dt_expconf_from_doc(doc, 0, cfg);
}

char *m_exp_ckpt_root(master *m, const dt_expconf *cfg) {
    const dt_ckpt_storage_conf *c = &cfg->checkpoint_storage;
    char base[4200], p[8400];
    if (c->host_path)
        snprintf(base, sizeof base, "%s", c->host_path);
    else
        snprintf(base, sizeof base, "%s/checkpoints", m->home);
    if (c->storage_path && c->storage_path[0] == '/')
        snprintf(p, sizeof p, "%s", c->storage_path);
    else if (c->storage_path)
        snprintf(p, sizeof p, "%s/%s", base, c->storage_path);
    else
        snprintf(p, sizeof p, "%s", base);
    return strdup(p);
}

dt_status m_exp_create_at(master *m, const json_t *body, const char *dir, int64_t *id,
                          json_t **warnings) {
    *warnings = NULL;
    struct stat sb;
    if (!dir || dir[0] != '/') return dt_error(DT_ERR_CONFIG, "model_dir must be an absolute path");
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return dt_error(DT_ERR_CONFIG,
                        "model directory %s: %s; hint: pass the directory that "
                        "holds the trial's C sources",
                        dir, stat(dir, &sb) ? strerror(errno) : "not a directory");
    dt_expconf *cfg = NULL;
    dt_status st = parse_config(body, &cfg);
    if (st == DT_OK && (st = dt_expconf_check_model_dir(cfg, dir)) != DT_OK) dt_expconf_free(cfg);
    if (st != DT_OK) return st;
    if (cfg->slots_per_trial > m->slots &&
        strcmp(cfg->launcher ? cfg->launcher : m->o.launcher, "slurm")) {
        st = dt_error(DT_ERR_CONFIG,
                      "resources.slots_per_trial is %lld but the master has %d "
                      "slots; hint: lower slots_per_trial or start the master "
                      "with --slots %lld",
                      (long long)cfg->slots_per_trial, m->slots, (long long)cfg->slots_per_trial);
        dt_expconf_free(cfg);
        return st;
    }
    if (!cfg->has_experiment_seed) {
        /* the seed the experiment runs with is part of its recorded config */
        cfg->experiment_seed = (uint32_t)(time(NULL) ^ getpid()) & 0x7fffffffu;
        cfg->has_experiment_seed = true;
        json_t *r = json_object_get(cfg->json, "reproducibility");
        if (!json_is_object(r))
            json_object_set_new(cfg->json, "reproducibility", r = json_object());
        json_object_set_new(r, "experiment_seed", json_integer(cfg->experiment_seed));
    }
    m_exp *e = calloc(1, sizeof *e);
    if (!e) {
        dt_expconf_free(cfg);
        return dt_error(DT_ERR_OOM, "out of memory");
    }
    e->cfg = cfg;
    if ((st = m_sched_exp_launcher(m, e)) != DT_OK) goto fail;
    e->model_dir = strdup(dir);
    e->ckpt_root = m_exp_ckpt_root(m, cfg);
    bool paused = json_is_false(json_object_get(body, "activate"));
    e->state = paused ? M_PAUSED : M_ACTIVE;
    /* a custom searcher comes from the build, dsat's writes under the experiment's id */
    bool custom = !strcmp(cfg->searcher.name, "custom") || !strcmp(cfg->searcher.name, "dsat");
    if (!custom && (st = make_searcher(m, e)) != DT_OK) goto fail; /* checked before any write */
    const char *text = json_string_value(json_object_get(body, "config_text"));
    if ((st = dt_store_exp_insert(m->store, cfg->json, text, dir, &e->id)) != DT_OK) goto fail;
    /* build the model directory once for every trial of the experiment */
    char so[4400];
    if ((st = m_exp_build(m, e->id, dir, cfg, so, sizeof so)) != DT_OK ||
        (custom && (e->so_path = strdup(so)) && (st = make_searcher(m, e)) != DT_OK)) {
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", dt_last_error());
        dt_store_exp_delete(m->store, e->id);
        st = dt_error(st, "%s", msg);
        goto fail;
    }
    if (!e->so_path) e->so_path = strdup(so);
    if (paused && (st = dt_store_exp_set_state(m->store, e->id, "PAUSED")) != DT_OK) goto fail;
    if ((st = add_exp(m, e)) != DT_OK) goto fail;
    *id = e->id;
    *warnings = json_array();
    for (int i = 0; i < cfg->n_warnings; i++)
        json_array_append_new(*warnings, json_string(cfg->warnings[i]));
    if (dt_store_begin(m->store) != DT_OK) return DT_OK; /* logged; the searcher starts later */
    dt_search_ops ops = {0};
    st = dt_searcher_initial_operations(e->search, &ops);
    end_event(m, e, st, &ops);
    m_exp_settle(m, e);
    return DT_OK;
fail:
    DT_KEEP_ERROR(m_exp_free(e));
    return st;
}

/* ---- recovery ---- */

static dt_status recover_trials(master *m, m_exp *e) {
    json_t *rows = NULL, *r;
    dt_status st = dt_store_trial_list(m->store, e->id, &rows);
    if (st != DT_OK) return st;
    size_t i;
    json_array_foreach(rows, i, r) {
        m_trial *t = add_trial(e);
        if (!t) {
            st = dt_error(DT_ERR_OOM, "out of memory");
            break;
        }
        t->exp = e;
        t->id = json_integer_value(json_object_get(r, "id"));
        t->request_id = json_integer_value(json_object_get(r, "request_id"));
        t->state = m_state_of(json_string_value(json_object_get(r, "state")));
        t->hparams = json_incref(json_object_get(r, "hparams"));
        t->seed = (uint64_t)json_integer_value(json_object_get(r, "seed"));
        t->restarts = json_integer_value(json_object_get(r, "restarts"));
        t->run_id = json_integer_value(json_object_get(r, "run_id"));
        t->batches = json_integer_value(json_object_get(r, "batches"));
        t->best = json_is_number(json_object_get(r, "best_validation"))
                      ? json_number_value(json_object_get(r, "best_validation"))
                      : NAN;
        load_trial_ops(t, json_object_get(r, "ops"));
        /* a run of the previous master: make sure every process of it is gone before the
         * trial runs again (from its latest checkpoint; not counted as a restart) */
        int64_t handle = json_integer_value(json_object_get(r, "pgid")); /* the run's handle */
        if (handle > 0 && !m_state_terminal(t->state)) {
            uint64_t start = (uint64_t)json_integer_value(json_object_get(r, "run_start"));
            if (e->launcher->ops->reclaim(e->launcher, handle, start, RECLAIM_WAIT_S) != DT_OK)
                dt_log(DT_LOG_ERROR, "trial %lld: %s", (long long)t->id, dt_last_error());
            dt_store_trial_set_run(m->store, t->id, t->run_id, 0);
        }
    }
    json_decref(rows);
    return st;
}

dt_status m_exp_recover(master *m) {
    const char *live[M_N_STATES];
    int n_live = 0;
    for (int s = 0; s < M_N_STATES; s++)
        if (!m_state_terminal((m_state)s)) live[n_live++] = m_state_name((m_state)s);
    int64_t *ids = NULL;
    int n = 0;
    dt_status st = dt_store_exp_ids(m->store, live, n_live, &ids, &n);
    for (int k = 0; st == DT_OK && k < n; k++) {
        json_t *row = NULL, *snap = NULL;
        if ((st = dt_store_exp_get(m->store, ids[k], &row)) != DT_OK) break;
        m_exp *e = calloc(1, sizeof *e);
        if (!e) {
            json_decref(row);
            st = dt_error(DT_ERR_OOM, "out of memory");
            break;
        }
        e->id = ids[k];
        e->state = m_state_of(json_string_value(json_object_get(row, "state")));
        e->model_dir = strdup(json_string_value(json_object_get(row, "model_dir")) ?: "");
        const char *so = json_string_value(json_object_get(row, "so_path"));
        e->so_path = so ? strdup(so) : NULL;
        st = dt_expconf_from_json(json_object_get(row, "config"), 0, &e->cfg);
        if (st == DT_OK && (st = m_snapshot_restore(m, e)) == DT_OK) {
            e->ckpt_root = m_exp_ckpt_root(m, e->cfg);
            st = make_searcher(m, e);
        }
        if (st == DT_OK) st = m_sched_exp_launcher(m, e);
        if (st == DT_OK) st = dt_store_searcher_load(m->store, e->id, &snap);
        if (st == DT_OK && snap) st = dt_searcher_load(e->search, snap);
        if (st == DT_OK) st = recover_trials(m, e);
        json_decref(row);
        json_decref(snap);
        if (st != DT_OK) {
            /* one experiment that cannot continue does not keep the others down */
            dt_log(DT_LOG_ERROR, "experiment %lld cannot continue: %s", (long long)ids[k],
                   dt_last_error());
            dt_store_exp_set_state(m->store, ids[k], "ERROR");
            m_exp_free(e);
            st = DT_OK;
            continue;
        }
        if ((st = add_exp(m, e)) != DT_OK) {
            m_exp_free(e);
            break;
        }
        bool all_ended = e->n_trials > 0;
        for (int i = 0; i < e->n_trials; i++) all_ended &= m_state_terminal(e->trials[i]->state);
        /* the searcher creates a trial's successor in the event that ends it: when every trial
         * has ended, the search is over (its shutdown is not stored on its own) */
        e->shutdown = all_ended;
        if (!snap && dt_store_begin(m->store) == DT_OK) {
            /* created, but the master stopped before its first searcher event */
            dt_search_ops ops = {0};
            end_event(m, e, dt_searcher_initial_operations(e->search, &ops), &ops);
        }
        m_exp_settle(m, e);
        dt_log(DT_LOG_INFO, "experiment %lld: %s, %d trials", (long long)e->id,
               m_state_name(e->state), e->n_trials);
    }
    free(ids);
    return st;
}
