/* core_api.c — the Core API's calls (dtrain/core.h, "the Core API") over any dt_core that
 * dt_core_init gave its state (dt_core_api_attach): the trial's hyperparameters, its slots,
 * the checkpoint to resume from, checkpoints stored in two steps and restored by uuid.
 *
 * A checkpoint is a dt_ckpt writer (checkpoint.c): the chief begins it in the checkpoint
 * directory under a new uuid and shares the temporary directory with every slot; when all
 * have written, the chief commits it (metadata.json lists the files) and reports it through
 * dt_core_checkpoint_stored, so it becomes the latest exactly as the fit loop's do.
 */
#include "trial_impl.h"

#include "dtrain/core.h"
#include "dtrain/trialio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

struct dt_core_api {
    dt_comm *world;
    dt_dist_ctx *dist;
    char *checkpoint_dir;
    char latest[DT_CORE_UUID_MAX];
    json_t *hparams;
    int64_t trial_id;
    /* the checkpoint being stored */
    dt_ckpt_writer *writer;
    char open_uuid[DT_CORE_UUID_MAX];
    json_t *open_meta;
};

/* Free the Core API's state of a core (its communicator too); NULL is a no-op. */
static void core_api_free(struct dt_core_api *api) {
    if (!api) return;
    dt_ckpt_abort(api->writer);
    json_decref(api->open_meta);
    json_decref(api->hparams);
    free(api->checkpoint_dir);
    dt_dist_ctx_free(api->dist);
    if (api->world) dt_comm_finalize(api->world);
    free(api);
}

dt_status dt_core_api_attach(dt_core *core, const dt_core_api_init *a) {
    struct dt_core_api *api = calloc(1, sizeof *api);
    if (!api) return dt_error(DT_ERR_OOM, "out of memory setting up the Core API");
    api->checkpoint_dir = strdup(a->checkpoint_dir ? a->checkpoint_dir : "checkpoints");
    api->hparams = a->hparams ? json_deep_copy(a->hparams) : json_object();
    if (!api->checkpoint_dir || !api->hparams || dt_dist_ctx_new(a->world, &api->dist) != DT_OK) {
        free(api->checkpoint_dir);
        json_decref(api->hparams);
        free(api);
        return dt_error(DT_ERR_OOM, "out of memory setting up the Core API");
    }
    api->world = a->world;
    api->trial_id = a->trial_id;
    if (a->latest) snprintf(api->latest, sizeof api->latest, "%s", a->latest);
    core->api = api;
    core->api_free = core_api_free;
    core->comm = a->world;
    return DT_OK;
}

static struct dt_core_api *API(const dt_core *core) {
    if (!core || !core->api)
        dt_error(DT_ERR_STATE, "this core was not made by dt_core_init; hint: call dt_core_init "
                               "for the Core API");
    return core ? core->api : NULL;
}

const json_t *dt_core_hparams(const dt_core *core) {
    return core && core->api ? core->api->hparams : NULL;
}

int64_t dt_core_trial_id(const dt_core *core) {
    return core && core->api ? core->api->trial_id : 0;
}

dt_dist_ctx *dt_core_distributed(dt_core *core) {
    struct dt_core_api *a = API(core);
    return a ? a->dist : NULL;
}

const char *dt_core_latest_checkpoint(const dt_core *core) {
    return core && core->api && core->api->latest[0] ? core->api->latest : NULL;
}

bool dt_core_should_preempt_all(dt_core *core) {
    dt_core_heartbeat(core); /* asked between steps: the loop is alive */
    int64_t stop = dt_core_should_preempt(core);
    if (core && core->comm && dt_comm_size(core->comm) > 1 &&
        dt_comm_allreduce(core->comm, &stop, 1, DT_COMM_DTYPE_I64, DT_REDUCE_OP_MAX) != DT_OK)
        return true; /* the slots cannot agree: stopping is the safe answer */
    return stop != 0;
}

/* ---- checkpoints ---- */

static void new_uuid(char *out) {
    unsigned char b[16] = {0};
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        uint64_t t = (uint64_t)(dt_now_sec() * 1e9);
        memcpy(b, &t, sizeof t);
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* variant 1 */
    snprintf(out, DT_CORE_UUID_MAX,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
             b[15]);
}

typedef struct ck_msg {
    int32_t status;
    char uuid[DT_CORE_UUID_MAX];
    char path[DT_CORE_PATH_MAX];
} ck_msg;

dt_status dt_core_checkpoint_store_path(dt_core *core, const json_t *metadata, char *path_out,
                                        char *uuid_out) {
    struct dt_core_api *a = API(core);
    if (!a) return DT_ERR_STATE;
    if (a->open_uuid[0])
        return dt_error(DT_ERR_STATE,
                        "checkpoint %s is still open; hint: finish it with "
                        "dt_core_checkpoint_store_done first",
                        a->open_uuid);
    if (!json_is_integer(json_object_get(metadata, "steps_completed")))
        return dt_error(DT_ERR_INVALID, "a checkpoint's metadata needs \"steps_completed\" (the "
                                        "batches trained); hint: json_pack(\"{s:I}\", "
                                        "\"steps_completed\", batches)");
    ck_msg msg = {0};
    if (core->chief) {
        new_uuid(msg.uuid);
        a->writer = dt_ckpt_begin(a->checkpoint_dir, msg.uuid);
        if (a->writer)
            snprintf(msg.path, sizeof msg.path, "%s", dt_ckpt_dir(a->writer));
        else
            msg.status = dt_last_status();
    }
    if (a->world && dt_comm_size(a->world) > 1) {
        char keep[1024];
        snprintf(keep, sizeof keep, "%s", dt_last_error());
        dt_status st = dt_comm_broadcast(a->world, &msg, sizeof msg, 0);
        if (st != DT_OK) return st;
        if (msg.status != DT_OK)
            return core->chief ? dt_error((dt_status)msg.status, "%s", keep)
                               : dt_error((dt_status)msg.status,
                                          "the chief could not start the checkpoint");
    }
    if (msg.status != DT_OK) return (dt_status)msg.status;
    snprintf(a->open_uuid, sizeof a->open_uuid, "%s", msg.uuid);
    a->open_meta = json_deep_copy(metadata);
    snprintf(path_out, DT_CORE_PATH_MAX, "%s", msg.path);
    snprintf(uuid_out, DT_CORE_UUID_MAX, "%s", msg.uuid);
    return DT_OK;
}

/* Finish the open checkpoint once every slot has written its files (`mine`: this slot's
 * outcome): committed and reported when all succeeded, else removed. */
static dt_status store_finish(dt_core *core, const char *uuid, dt_status mine) {
    struct dt_core_api *a = API(core);
    if (!a) return DT_ERR_STATE;
    if (!uuid || strcmp(uuid, a->open_uuid))
        return dt_error(DT_ERR_INVALID, "checkpoint %s is not the open one (%s)",
                        uuid ? uuid : "(null)", a->open_uuid[0] ? a->open_uuid : "none");
    dt_status st = dt_comm_agree(a->world, mine, "checkpoint");
    if (st == DT_OK && core->chief) {
        st = dt_ckpt_commit(a->writer, a->open_meta);
        a->writer = NULL;
        char path[DT_CORE_PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", a->checkpoint_dir, uuid);
        json_int_t steps = json_integer_value(json_object_get(a->open_meta, "steps_completed"));
        dt_core_checkpoint ck = {
            .uuid = uuid, .path = path, .metadata = a->open_meta, .steps_completed = steps};
        if (st == DT_OK) st = dt_core_checkpoint_stored(core, &ck);
    }
    st = dt_comm_agree(a->world, st, "storing the checkpoint");
    if (st == DT_OK) snprintf(a->latest, sizeof a->latest, "%s", uuid);
    DT_KEEP_ERROR(dt_ckpt_abort(a->writer));
    a->writer = NULL;
    a->open_uuid[0] = 0;
    json_decref(a->open_meta);
    a->open_meta = NULL;
    return st;
}

dt_status dt_core_checkpoint_store_done(dt_core *core, const char *uuid) {
    return store_finish(core, uuid, DT_OK);
}

dt_status dt_core_save_module(dt_core *core, const json_t *metadata, dt_module *model,
                              dt_optimizer *opt, char *uuid_out) {
    char dir[DT_CORE_PATH_MAX], uuid[DT_CORE_UUID_MAX];
    json_t *steps = NULL;
    if (!metadata && opt)
        metadata = steps = json_pack("{s:I}", "steps_completed",
                                     (json_int_t)dt_optim_step_count(opt));
    dt_status st = dt_core_checkpoint_store_path(core, metadata, dir, uuid);
    json_decref(steps);
    if (st != DT_OK) return st;
    if (core->chief) { /* the states are replicated on every slot: the chief writes them */
        dt_ctx *rt = dt_ctx_new(NULL, 0);
        st = rt ? dt__params_save(dir, rt, 1, &model, opt ? 1 : 0, &opt) : dt_last_status();
        dt_ctx_free(rt);
    }
    st = store_finish(core, uuid, st);
    if (st == DT_OK && uuid_out) snprintf(uuid_out, DT_CORE_UUID_MAX, "%s", uuid);
    return st;
}

dt_status dt_core_load_module(dt_core *core, const char *uuid, dt_module *model,
                              dt_optimizer *opt, json_t **metadata_out) {
    char dir[DT_CORE_PATH_MAX];
    dt_status st = dt_core_checkpoint_restore_path(core, uuid, dir, metadata_out);
    if (st != DT_OK) return st;
    dt_ctx *rt = dt_ctx_new(NULL, 0);
    st = rt ? dt__params_load(dir, rt, 1, &model, opt ? 1 : 0, &opt) : dt_last_status();
    dt_ctx_free(rt);
    if (st != DT_OK && metadata_out) {
        json_decref(*metadata_out);
        *metadata_out = NULL;
    }
    return st != DT_OK ? dt_error(st, "restoring %s: %s", dir, dt_last_error()) : DT_OK;
}

dt_status dt_core_checkpoint_restore_path(dt_core *core, const char *uuid, char *path_out,
                                          json_t **metadata_out) {
    if (metadata_out) *metadata_out = NULL;
    struct dt_core_api *a = API(core);
    if (!a) return DT_ERR_STATE;
    if (!uuid || !strcmp(uuid, "latest")) {
        if (!a->latest[0])
            return dt_error(DT_ERR_STATE, "there is no latest checkpoint to restore: the trial "
                                          "starts fresh; hint: check "
                                          "dt_core_latest_checkpoint first");
        uuid = a->latest;
    }
    char path[DT_CORE_PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", a->checkpoint_dir, uuid);
    dt_ckpt *ck = dt_ckpt_open(path);
    if (!ck) return dt_last_status();
    if (metadata_out) *metadata_out = json_deep_copy(dt_ckpt_metadata(ck));
    dt_ckpt_close(ck);
    snprintf(path_out, DT_CORE_PATH_MAX, "%s", path);
    return DT_OK;
}

bool dt_core_preempt_save(dt_core *core, int64_t steps, dt_module *model, dt_optimizer *opt,
                          dt_status *st) {
    *st = DT_OK;
    if (!dt_core_should_preempt_all(core)) return false;
    if (core->lost) {
        *st = dt_error(DT_ERR_STATE, "the run lost its master; hint: the run that replaced it "
                                     "owns the checkpoints now");
        return true;
    }
    json_t *meta = json_pack("{s:I}", "steps_completed", (json_int_t)steps);
    *st = dt_core_save_module(core, meta, model, opt, NULL);
    json_decref(meta);
    if (*st == DT_OK) dt_core_report_stopped(core, steps);
    return true;
}
