/* core_init.c — dt_core_init (dtrain/core.h, the Core API): the core of a process that trains
 * with its own loop. Started by the master (trial_env.h) it is the master-backed core over the
 * trial's spec; otherwise the local core, as `dtrain train` would make it. Also the trial
 * environment and spec shared with the worker (trial_env.h).
 */
#include "trial_env.h"

#include "dtrain/core.h"
#include "master/master.h"
#include "trial/trial_iface.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dt_status env_id(const char *name, int64_t *out) {
    const char *v = getenv(name);
    char *end = NULL;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || x < 0)
        return dt_error(DT_ERR_CONFIG,
                        "%s is \"%s\", not a trial id; hint: this is set by the master that "
                        "starts the trial (unset DTRAIN_TRIAL_ID to train locally)",
                        name, v ? v : "");
    *out = x;
    return DT_OK;
}

dt_status dt__trial_env(bool *from_master, int64_t *trial, int64_t *run) {
    const char *t = getenv("DTRAIN_TRIAL_ID");
    *from_master = t && *t;
    if (!*from_master) return DT_OK;
    dt_status st = env_id("DTRAIN_TRIAL_ID", trial);
    return st == DT_OK ? env_id("DTRAIN_TRIAL_RUN", run) : st;
}

dt_status dt__trial_spec(dt_comm *world, int64_t trial, int64_t run, json_t **out) {
    *out = NULL;
    char *text = NULL;
    dt_status st = DT_OK;
    bool chief = !world || dt_comm_rank(world) == 0;
    if (chief) {
        dt_client *c = dt_client_new(NULL);
        json_t *spec = NULL;
        char path[128];
        snprintf(path, sizeof path, "/api/v1/trials/%lld/spec?run=%lld", (long long)trial,
                 (long long)run);
        st = c ? dt_client_call(c, "GET", path, NULL, &spec, NULL) : dt_last_status();
        if (st == DT_OK && !json_is_object(spec))
            st = dt_error(DT_ERR_FORMAT, "the master's spec of trial %lld is not an object",
                          (long long)trial);
        if (st == DT_OK) text = json_dumps(spec, JSON_COMPACT);
        json_decref(spec);
        dt_client_free(c);
    }
    if (world && dt_comm_size(world) > 1) {
        /* the chief's text, or an empty buffer when it failed */
        dt_bytes b = {0};
        dt_status bst = dt_comm_broadcast_bytes(world, text, text ? strlen(text) : 0, 0, &b);
        free(text);
        text = NULL;
        if (bst != DT_OK) return bst;
        if (b.len) text = strndup(b.data, b.len);
        dt_bytes_free(&b);
        if (!text && !chief) st = dt_error(DT_ERR_COMM, "the chief could not get the spec");
    }
    if (st != DT_OK) {
        free(text);
        return st;
    }
    json_error_t err;
    *out = text ? json_loads(text, 0, &err) : NULL;
    free(text);
    return *out ? DT_OK : dt_error(DT_ERR_OOM, "out of memory reading the trial's spec");
}

dt_status dt_core_init(const dt_core_init_opts *o, dt_core **out) {
    *out = NULL;
    dt_core_init_opts none = {0};
    if (!o) o = &none;
    bool from_master = false;
    int64_t trial = 0, run = 0;
    dt_status st = dt__trial_env(&from_master, &trial, &run);
    if (st != DT_OK) return st;
    if (!from_master && o->max_length.n <= 0)
        return dt_error(DT_ERR_CONFIG, "dt_core_init: max_length is required without a master "
                                       "(its one searcher operation); hint: set "
                                       "dt_core_init_opts.max_length");
    dt_comm *world = NULL;
    if ((st = dt_comm_init(&world)) != DT_OK) return st;
    bool chief = dt_comm_rank(world) == 0;
    json_t *spec = NULL;
    dt_core *core = NULL;
    dt_core_api_init a = {.world = world};
    char latest[DT_CORE_UUID_MAX] = "";
    if (from_master) {
        st = dt__trial_spec(world, trial, run, &spec);
        a.checkpoint_dir = json_string_value(json_object_get(spec, "checkpoint_dir"));
        a.hparams = json_object_get(spec, "hparams");
        a.trial_id = trial;
        const char *resume = json_string_value(json_object_get(spec, "resume"));
        if (resume) {
            const char *slash = strrchr(resume, '/');
            snprintf(latest, sizeof latest, "%s", slash ? slash + 1 : resume);
        }
        if (st == DT_OK && !a.checkpoint_dir)
            st = dt_error(DT_ERR_FORMAT, "the spec of trial %lld has no checkpoint_dir",
                          (long long)trial);
        dt_core_master_opts mo = {
            .trial_id = trial, .run = run, .chief = chief, .checkpoint_dir = a.checkpoint_dir};
        if (st == DT_OK && !(core = dt_core_master_new(&mo))) st = dt_last_status();
    } else {
        a.checkpoint_dir = o->checkpoint_dir ? o->checkpoint_dir : "checkpoints";
        a.hparams = o->hparams;
        if (o->resume && !dt_core_local_latest(a.checkpoint_dir, latest, sizeof latest))
            st = dt_error(DT_ERR_CONFIG,
                          "cannot resume: %s has no latest checkpoint; hint: start without "
                          "resuming, or point checkpoint_dir at a run's checkpoints",
                          a.checkpoint_dir);
        dt_core_local_opts lo = {.chief = chief,
                                 .max_length = o->max_length,
                                 .checkpoint_dir = a.checkpoint_dir,
                                 .metrics_out = o->metrics_out,
                                 .quiet = o->quiet,
                                 .save_trial_best = 1,
                                 .save_trial_latest = 1};
        if (st == DT_OK && !(core = dt_core_local_new(&lo))) st = dt_last_status();
    }
    a.latest = latest[0] ? latest : NULL;
    if (st == DT_OK) st = dt_core_api_attach(core, &a); /* the core owns world from here */
    if (st != DT_OK) {
        bool owned = core && core->api;
        DT_KEEP_ERROR(dt_core_free(core); if (!owned) dt_comm_finalize(world));
        json_decref(spec);
        return st;
    }
    json_decref(spec);
    st = dt_core_start(core, a.latest ? 1 : 0);
    if (st != DT_OK) {
        DT_KEEP_ERROR(dt_core_free(core));
        return st;
    }
    *out = core;
    return DT_OK;
}
