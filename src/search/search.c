/*
 * search.c — the searcher: one search method (built-in or the caller's) and what every search
 * needs around it.
 *
 * The driver hands out request ids (1, 2, ... in creation order), counts the trials requested
 * (CREATE operations), created, closed and exited early (by reason), owns the RNG hyperparameters
 * are drawn from (base's counter RNG seeded with the experiment seed), and checks the events
 * against what it knows: an event for a request it never made, a second trial_created, or an
 * event after the trial closed is DT_ERR_STATE (a second trial_closed is accepted and ignored,
 * so a master that repeats a report after a crash does no harm). Once the method has asked for
 * SHUTDOWN the events reach it no more.
 *
 * The snapshot is one JSON object:
 *   {"version": 1, "searcher": name, "counts": {"requested","created","closed","errored",
 *    "invalid_hp","user_canceled","shutdown"}, "requests": [flags per request id],
 *    "rng": {"seed": "decimal", "counter": "decimal"}, "method": the method's own state}
 * dt_searcher_load checks all of it before changing anything, and refuses (DT_ERR_FORMAT) a
 * snapshot of another searcher or version.
 */
#include "search_impl.h"
#include "search/searcher.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SNAPSHOT_VERSION 1

/* Per-request flags. */
enum { REQ_CREATED = 1, REQ_CLOSED = 2, REQ_EXITED = 4 };

struct dt_search_ctx {
    dt_searcher *s;
};

struct dt_searcher {
    const dt_expconf *cfg;
    dt_search_method m;
    dt_search_ctx ctx;
    dt_rng rng;
    int64_t requested, created, closed;
    int64_t exits[3]; /* by dt_search_exit */
    bool shutdown;
    uint8_t *req; /* flags of request id i + 1 */
    int64_t req_cap;
    dt_search_metrics_fn metrics_fn; /* the caller's per-trial validation metrics, or NULL */
    void *metrics_arg;
};

static const char *const EXIT_KEYS[3] = {"errored", "invalid_hp", "user_canceled"};

/* ---- operations ---------------------------------------------------------------------------- */

void dt_search_ops_free(dt_search_ops *ops) {
    if (!ops) return;
    for (int i = 0; i < ops->n; i++) json_decref(ops->v[i].hparams);
    free(ops->v);
    *ops = (dt_search_ops){0};
}

/* Append op (taking its hparams reference, released on failure). */
static dt_status ops_push(dt_search_ops *out, dt_search_op op) {
    if (out->n == out->cap) {
        int cap = out->cap ? 2 * out->cap : 8;
        dt_search_op *v = realloc(out->v, (size_t)cap * sizeof *v);
        if (!v) {
            json_decref(op.hparams);
            return dt_error(DT_ERR_OOM, "out of memory adding a searcher operation");
        }
        out->v = v;
        out->cap = cap;
    }
    out->v[out->n++] = op;
    return DT_OK;
}

/* A new request id with its CREATE (taking `hp`). */
static dt_status create_op(dt_search_ctx *sc, json_t *hp, dt_search_ops *out, int64_t *id) {
    dt_searcher *s = sc->s;
    if (!hp) return dt_error(DT_ERR_OOM, "out of memory copying hyperparameters");
    if (s->requested == s->req_cap) {
        int64_t cap = s->req_cap ? 2 * s->req_cap : 64;
        uint8_t *r = realloc(s->req, (size_t)cap);
        if (!r) {
            json_decref(hp);
            return dt_error(DT_ERR_OOM, "out of memory adding a trial request");
        }
        memset(r + s->req_cap, 0, (size_t)(cap - s->req_cap));
        s->req = r;
        s->req_cap = cap;
    }
    int64_t rid = s->requested + 1;
    dt_status st =
        ops_push(out, (dt_search_op){.kind = DT_SEARCH_CREATE, .request_id = rid, .hparams = hp});
    if (st) return st;
    s->req[s->requested++] = 0;
    if (id) *id = rid;
    return DT_OK;
}

dt_status dt_search_create_random(dt_search_ctx *sc, dt_search_ops *out, int64_t *request_id) {
    json_t *hp;
    dt_status st = dt__hp_sample(sc->s->cfg, &sc->s->rng, &hp);
    return st ? st : create_op(sc, hp, out, request_id);
}

dt_status dt_search_create_with(dt_search_ctx *sc, const json_t *hparams, dt_search_ops *out,
                                int64_t *request_id) {
    if (!json_is_object(hparams))
        return dt_error(DT_ERR_INVALID, "dt_search_create_with: the hyperparameters must be an "
                                        "object shaped like `hyperparameters`");
    return create_op(sc, json_deep_copy(hparams), out, request_id);
}

dt_status dt_search_validate_after(dt_search_ops *out, int64_t request_id, dt_length len) {
    if (len.n <= 0)
        return dt_error(DT_ERR_INVALID,
                        "validate_after for request %" PRId64
                        ": the length must be positive, got %" PRId64,
                        request_id, len.n);
    return ops_push(
        out,
        (dt_search_op){.kind = DT_SEARCH_VALIDATE_AFTER, .request_id = request_id, .length = len});
}

dt_status dt_search_close(dt_search_ops *out, int64_t request_id) {
    return ops_push(out, (dt_search_op){.kind = DT_SEARCH_CLOSE, .request_id = request_id});
}

dt_status dt_search_shutdown(dt_search_ops *out, bool cancel, bool failure) {
    return ops_push(
        out, (dt_search_op){.kind = DT_SEARCH_SHUTDOWN, .cancel = cancel, .failure = failure});
}

const dt_expconf *dt_search_config(const dt_search_ctx *sc) {
    return sc->s->cfg;
}

double dt_search_uniform(dt_search_ctx *sc) {
    return dt_rng_uniform(&sc->s->rng);
}

json_t *dt_search_trial_metrics(dt_search_ctx *sc, int64_t request_id) {
    dt_searcher *s = sc->s;
    return s->metrics_fn ? s->metrics_fn(s->metrics_arg, request_id) : NULL;
}

void dt_searcher_set_metrics_source(dt_searcher *s, dt_search_metrics_fn fn, void *arg) {
    s->metrics_fn = fn;
    s->metrics_arg = arg;
}

dt_status dt__search_start(dt_search_ctx *sc, const json_t *hparams, dt_length len,
                           dt_search_ops *out, int64_t *id) {
    int64_t rid;
    dt_status st = hparams ? dt_search_create_with(sc, hparams, out, &rid)
                           : dt_search_create_random(sc, out, &rid);
    /* no length (a command entrypoint that decides its own): nothing to ask, let it finish */
    if (!st) st = len.n > 0 ? dt_search_validate_after(out, rid, len) : dt_search_close(out, rid);
    if (!st && id) *id = rid;
    return st;
}

json_t *dt__search_counters_save(const char *const *keys, const int64_t *vals, int n) {
    json_t *o = json_object();
    for (int i = 0; o && i < n; i++)
        if (json_object_set_new(o, keys[i], json_integer((json_int_t)vals[i]))) {
            json_decref(o);
            o = NULL;
        }
    return o;
}

dt_status dt__search_counters_load(const json_t *saved, const char *who, const char *const *keys,
                                   int64_t *vals, int n) {
    int64_t tmp[16];
    if (n > 16) return dt_error(DT_ERR_INVALID, "dt__search_counters_load: too many counters");
    for (int i = 0; i < n; i++) {
        const json_t *v = json_object_get(saved, keys[i]);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return dt_error(DT_ERR_FORMAT,
                            "searcher snapshot: the %s searcher's state lacks a count '%s'", who,
                            keys[i]);
        tmp[i] = (int64_t)json_integer_value(v);
    }
    memcpy(vals, tmp, (size_t)n * sizeof *vals);
    return DT_OK;
}

int64_t dt__search_max_concurrent(const dt_expconf *cfg) {
    return cfg->searcher.max_concurrent_trials > 0 ? cfg->searcher.max_concurrent_trials : 16;
}

/* ---- construction -------------------------------------------------------------------------- */

dt_status dt_searcher_new_custom(const dt_expconf *cfg, uint64_t seed,
                                 const dt_search_method *method, dt_searcher **out) {
    *out = NULL;
    if (!cfg || !method || !method->name)
        return dt_error(DT_ERR_INVALID, "dt_searcher_new_custom: a config and a named method "
                                        "are required");
    dt_searcher *s = calloc(1, sizeof *s);
    if (!s) return dt_error(DT_ERR_OOM, "out of memory creating the searcher");
    s->cfg = cfg;
    s->m = *method;
    s->ctx.s = s;
    dt_rng_init(&s->rng, seed);
    *out = s;
    return DT_OK;
}

void dt_searcher_free(dt_searcher *s) {
    if (!s) return;
    if (s->m.free) s->m.free(s->m.state);
    free(s->req);
    free(s);
}

/* ---- events -------------------------------------------------------------------------------- */

/* The flags of request `id`, or NULL with DT_ERR_STATE naming the event. */
static uint8_t *req_flags(dt_searcher *s, int64_t id, const char *event) {
    if (id >= 1 && id <= s->requested) return &s->req[id - 1];
    dt_error(DT_ERR_STATE,
             "searcher event %s for request %" PRId64 ", which the searcher never "
             "made (it made %" PRId64 ")",
             event, id, s->requested);
    return NULL;
}

/* Run a handler's output through: on error drop what it appended (the event failed). */
static dt_status finish(dt_searcher *s, dt_search_ops *out, int before, dt_status st) {
    if (st) {
        for (int i = before; i < out->n; i++) json_decref(out->v[i].hparams);
        out->n = before;
        return st;
    }
    for (int i = before; i < out->n; i++)
        if (out->v[i].kind == DT_SEARCH_SHUTDOWN) s->shutdown = true;
    return DT_OK;
}

dt_status dt_searcher_initial_operations(dt_searcher *s, dt_search_ops *out) {
    if (s->requested > 0 || s->shutdown)
        return dt_error(DT_ERR_STATE, "the searcher's initial operations were already made");
    int before = out->n;
    dt_status st =
        s->m.initial_operations ? s->m.initial_operations(s->m.state, &s->ctx, out) : DT_OK;
    return finish(s, out, before, st);
}

dt_status dt_searcher_trial_created(dt_searcher *s, int64_t request_id, dt_search_ops *out) {
    uint8_t *f = req_flags(s, request_id, "trial_created");
    if (!f) return DT_ERR_STATE;
    if (*f & REQ_CREATED)
        return dt_error(DT_ERR_STATE, "trial_created twice for request %" PRId64, request_id);
    *f |= REQ_CREATED;
    s->created++;
    if (s->shutdown || !s->m.on_trial_created) return DT_OK;
    int before = out->n;
    return finish(s, out, before, s->m.on_trial_created(s->m.state, &s->ctx, request_id, out));
}

/* The flags of a created, not yet closed request, for `event`; NULL with DT_ERR_STATE. */
static uint8_t *open_flags(dt_searcher *s, int64_t id, const char *event) {
    uint8_t *f = req_flags(s, id, event);
    if (f && !(*f & REQ_CREATED)) {
        dt_error(DT_ERR_STATE,
                 "searcher event %s for request %" PRId64 " before its trial was "
                 "created",
                 event, id);
        return NULL;
    }
    if (f && (*f & REQ_CLOSED)) {
        dt_error(DT_ERR_STATE, "searcher event %s for request %" PRId64 " after it closed", event,
                 id);
        return NULL;
    }
    return f;
}

dt_status dt_searcher_validation_completed(dt_searcher *s, int64_t request_id, double metric,
                                           dt_length length, dt_search_ops *out) {
    if (!open_flags(s, request_id, "validation_completed")) return DT_ERR_STATE;
    if (s->shutdown || !s->m.on_validation_completed) return DT_OK;
    int before = out->n;
    return finish(
        s, out, before,
        s->m.on_validation_completed(s->m.state, &s->ctx, request_id, metric, length, out));
}

dt_status dt_searcher_trial_closed(dt_searcher *s, int64_t request_id, dt_search_ops *out) {
    uint8_t *f = req_flags(s, request_id, "trial_closed");
    if (!f) return DT_ERR_STATE;
    if (*f & REQ_CLOSED) return DT_OK; /* a repeated report */
    if (!(*f & REQ_CREATED)) {         /* the trial never started: it is created and closed */
        *f |= REQ_CREATED;
        s->created++;
    }
    *f |= REQ_CLOSED;
    s->closed++;
    if (s->shutdown || !s->m.on_trial_closed) return DT_OK;
    int before = out->n;
    return finish(s, out, before, s->m.on_trial_closed(s->m.state, &s->ctx, request_id, out));
}

dt_status dt_searcher_trial_exited_early(dt_searcher *s, int64_t request_id, dt_search_exit why,
                                         dt_search_ops *out) {
    if ((unsigned)why > DT_SEARCH_EXIT_USER_CANCELED)
        return dt_error(DT_ERR_INVALID, "trial_exited_early: unknown reason %d", (int)why);
    uint8_t *f = req_flags(s, request_id, "trial_exited_early");
    if (!f) return DT_ERR_STATE;
    if (*f & (REQ_EXITED | REQ_CLOSED)) return DT_OK; /* reported already, or after its close */
    if (!(*f & REQ_CREATED)) {
        *f |= REQ_CREATED;
        s->created++;
    }
    *f |= REQ_EXITED;
    s->exits[why]++;
    if (s->shutdown || !s->m.on_trial_exited_early) return DT_OK;
    int before = out->n;
    return finish(s, out, before,
                  s->m.on_trial_exited_early(s->m.state, &s->ctx, request_id, why, out));
}

double dt_searcher_progress(dt_searcher *s) {
    if (s->shutdown) return 1.0;
    double p = s->m.progress ? s->m.progress(s->m.state, &s->ctx) : 0.0;
    return p != p || p < 0 ? 0.0 : p > 1 ? 1.0 : p;
}

/* ---- snapshot ------------------------------------------------------------------------------ */

static json_t *u64_json(uint64_t v) {
    char b[24];
    snprintf(b, sizeof b, "%" PRIu64, v);
    return json_string(b);
}

static bool u64_parse(const json_t *j, uint64_t *v) {
    const char *t = json_string_value(j);
    if (!t || !*t || *t == '-') return false;
    char *end;
    unsigned long long x = strtoull(t, &end, 10);
    *v = x;
    return *end == 0;
}

json_t *dt_searcher_save(const dt_searcher *s) {
    json_t *req = json_array(), *method = NULL;
    for (int64_t i = 0; req && i < s->requested; i++)
        if (json_array_append_new(req, json_integer(s->req[i]))) {
            json_decref(req);
            req = NULL;
        }
    if (s->m.save) {
        method = s->m.save(s->m.state);
        if (!method) {
            json_decref(req);
            dt_error(DT_ERR_OOM, "out of memory saving the %s searcher's state", s->m.name);
            return NULL;
        }
    }
    json_t *snap =
        json_pack("{s:i, s:s, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:b}, s:o*, s:{s:o*, s:o*}, s:o*}",
                  "version", SNAPSHOT_VERSION, "searcher", s->m.name, "counts", "requested",
                  (json_int_t)s->requested, "created", (json_int_t)s->created, "closed",
                  (json_int_t)s->closed, EXIT_KEYS[0], (json_int_t)s->exits[0], EXIT_KEYS[1],
                  (json_int_t)s->exits[1], EXIT_KEYS[2], (json_int_t)s->exits[2], "shutdown",
                  s->shutdown, "requests", req, "rng", "seed", u64_json(s->rng.seed), "counter",
                  u64_json(s->rng.counter), "method", method ? method : json_null());
    json_t *r = json_object_get(snap, "rng");
    if (!snap || !req || !json_object_get(r, "seed") || !json_object_get(r, "counter")) {
        json_decref(snap);
        dt_error(DT_ERR_OOM, "out of memory saving the searcher");
        return NULL;
    }
    return snap;
}

/* DT_ERR_FORMAT "searcher snapshot: <what>". */
static dt_status bad_snapshot(const char *what) {
    return dt_error(DT_ERR_FORMAT, "searcher snapshot: %s", what);
}

dt_status dt_searcher_load(dt_searcher *s, const json_t *snap) {
    json_int_t version = 0;
    const char *name = NULL;
    json_t *counts = NULL, *req = NULL, *rng = NULL, *method = NULL;
    json_int_t c[6] = {0};
    int shutdown = 0;
    if (!json_is_object(snap) ||
        json_unpack((json_t *)snap, "{s:I, s:s, s:o, s:o, s:o, s:o}", "version", &version,
                    "searcher", &name, "counts", &counts, "requests", &req, "rng", &rng, "method",
                    &method))
        return bad_snapshot("not a searcher snapshot (expected an object with version, "
                            "searcher, counts, requests, rng and method)");
    if (version != SNAPSHOT_VERSION)
        return dt_error(DT_ERR_FORMAT,
                        "searcher snapshot: version %lld is not supported (this dtrain reads "
                        "version %d); hint: continue the experiment with the dtrain that "
                        "started it",
                        (long long)version, SNAPSHOT_VERSION);
    if (strcmp(name, s->m.name))
        return dt_error(DT_ERR_FORMAT,
                        "searcher snapshot: it is the %s searcher's, not the %s searcher's; "
                        "hint: load it into a searcher made from the experiment's own config",
                        name, s->m.name);
    if (json_unpack(counts, "{s:I, s:I, s:I, s:I, s:I, s:I, s:b}", "requested", &c[0], "created",
                    &c[1], "closed", &c[2], EXIT_KEYS[0], &c[3], EXIT_KEYS[1], &c[4], EXIT_KEYS[2],
                    &c[5], "shutdown", &shutdown))
        return bad_snapshot("counts is not {requested, created, closed, errored, invalid_hp, "
                            "user_canceled, shutdown}");
    uint64_t seed, counter;
    if (!u64_parse(json_object_get(rng, "seed"), &seed) ||
        !u64_parse(json_object_get(rng, "counter"), &counter))
        return bad_snapshot("rng is not {seed, counter} as decimal strings");
    if (!json_is_array(req) || (json_int_t)json_array_size(req) != c[0])
        return bad_snapshot("requests does not hold one entry per requested trial");
    int64_t n = (int64_t)c[0], ncreated = 0, nclosed = 0;
    for (int i = 0; i < 6; i++)
        if (c[i] < 0) return bad_snapshot("a count is negative");
    uint8_t *flags = malloc((size_t)n + 1);
    if (!flags) return dt_error(DT_ERR_OOM, "out of memory loading the searcher");
    for (int64_t i = 0; i < n; i++) {
        json_t *f = json_array_get(req, (size_t)i);
        json_int_t v = json_integer_value(f);
        if (!json_is_integer(f) || v < 0 || v > 7) {
            free(flags);
            return bad_snapshot("requests holds something other than request flags");
        }
        flags[i] = (uint8_t)v;
        ncreated += (v & REQ_CREATED) != 0;
        nclosed += (v & REQ_CLOSED) != 0;
    }
    if (ncreated != c[1] || nclosed != c[2]) {
        free(flags);
        return bad_snapshot("the counts do not match the requests");
    }
    dt_status st = s->m.load ? s->m.load(s->m.state, method) : DT_OK;
    if (st) {
        free(flags);
        return st;
    }
    free(s->req);
    s->req = flags;
    s->req_cap = n + 1;
    s->requested = n;
    s->created = c[1];
    s->closed = c[2];
    for (int i = 0; i < 3; i++) s->exits[i] = c[3 + i];
    s->shutdown = shutdown;
    s->rng.seed = seed;
    s->rng.counter = counter;
    return DT_OK;
}
