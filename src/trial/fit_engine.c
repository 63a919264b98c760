/* fit_engine.c — the fit loop's engine trial (DeepSpeedTrial's shape, fit_impl.h): the trial's
 * ds_train_batch reads micro-batches through the engines' iterator (ds_trial.c), a batch is the
 * first engine's train_batch_size records, and every slot saves its own engine shards into the
 * checkpoint the chief opens. */
#include "fit_impl.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static dt_status engine_check(const dt_trial_def *def) {
    if (!def->init || !def->build_training_data_loader || !def->build_validation_data_loader)
        return dt_error(DT_ERR_INVALID,
                        "trial %s is incomplete: init, ds_train_batch, "
                        "ds_evaluate_batch, build_training_data_loader and "
                        "build_validation_data_loader are required",
                        def->name ? def->name : "(unnamed)");
    return dt__ds_check_def(def);
}

static dt_status engine_open(dt__trainer *t) {
    dt_trial_ctx *c = t->c;
    dt_status st = dt__ds_after_init(c, t->def);
    if (st != DT_OK) return st;
    t->report = dt__ds_reports_metrics(c);
    int shard_rank, shard_world;
    dt__ds_shard(c, &shard_rank, &shard_world); /* the model-parallel unit's view */
    st = dt__fit_build_loaders(t, dt__ds_builds_loaders(c), shard_rank, shard_world);
    /* batches per epoch = the loader's micro-batches / gradient_accumulation_steps */
    return st == DT_OK ? dt__ds_attach_loaders(c, t->train, t->val, &t->batches_per_epoch) : st;
}

static int64_t engine_global_batch_size(const dt__trainer *t) {
    return dt_trial_global_batch_size(t->c);
}

/* the iterator reads the loader as one stream: no epoch boundary to set */
static dt_status engine_start_epoch(dt__trainer *t, int64_t e, int64_t in_epoch) {
    (void)t, (void)e, (void)in_epoch;
    return DT_OK;
}

static dt_status engine_next_batch(dt__trainer *t, int64_t e, int64_t in_epoch, dt_batch **b) {
    (void)t, (void)e, (void)in_epoch;
    *b = NULL;
    return DT_OK;
}

static dt_metrics engine_train(dt__trainer *t, dt_batch *b, int64_t e, int64_t *records) {
    (void)b;
    *records = dt__ds_records_per_batch(t->c);
    return dt__ds_train_batch(t->c, t->def, t->self, e, t->c->batches_trained);
}

static dt_status engine_eval_begin(dt__trainer *t) {
    return dt__ds_eval_begin(t->c);
}

/* the trial pulls from the iterator; the weight is the records it pulled */
static bool engine_eval_batch(dt__trainer *t, int64_t vb, dt_metrics *m, int64_t *len,
                              dt_status *st) {
    if (!dt__ds_eval_more(t->c, vb, st)) return false;
    dt_ctx_reset(t->c->rt);
    *m = dt__ds_evaluate_batch(t->c, t->def, t->self, vb, len);
    return true;
}

/* What the chief tells every slot before the engines are saved. */
typedef struct ckpt_msg {
    int32_t code; /* 0: write into dir; 1: this position is already saved; 2: the chief failed */
    char dir[4092];
} ckpt_msg;

/* On every slot: the chief starts the checkpoint and broadcasts its temporary directory; every
 * slot saves its engines' shards there; the slots agree on the outcome. The chief gets the open
 * writer back in *w (NULL when there is nothing to write: *skip set), the other slots are done
 * when this returns (*skip set too). */
static dt_status engine_ckpt_begin(dt__trainer *t, const char *name, dt_ckpt_writer **w,
                                   bool *skip) {
    dt_trial_ctx *c = t->c;
    bool chief = dt__fit_chief(t);
    *w = NULL;
    *skip = false;
    ckpt_msg msg;
    memset(&msg, 0, sizeof msg);
    dt_status st = DT_OK;
    if (chief) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", t->o->checkpoint_dir, name);
        struct stat sb;
        if (stat(path, &sb) == 0) {
            msg.code = 1;
        } else if (!(*w = dt_ckpt_begin(t->o->checkpoint_dir, name))) {
            msg.code = 2;
            st = dt_last_status();
        } else {
            snprintf(msg.dir, sizeof msg.dir, "%s", dt_ckpt_dir(*w));
        }
    }
    if (c->size > 1) {
        char keep[1024];
        snprintf(keep, sizeof keep, "%s", dt_last_error());
        dt_status bst = dt_comm_broadcast(c->comm, &msg, sizeof msg, 0);
        if (bst != DT_OK) {
            dt_ckpt_abort(*w);
            *w = NULL;
            return bst;
        }
        if (st != DT_OK) dt_error(st, "%s", keep);
    }
    if (msg.code == 1) {
        *skip = true;
        return DT_OK;
    }
    if (msg.code == 2)
        return chief ? st : dt_error(DT_ERR_IO, "the chief could not start checkpoint %s", name);
    /* every slot writes its own shards into the chief's temporary directory */
    st = dt__fit_agree(t, dt__ds_save(c, t->def, t->self, msg.dir));
    if (st != DT_OK || !chief) {
        dt_ckpt_abort(*w);
        *w = NULL;
        *skip = !chief && st == DT_OK;
    }
    return st;
}

static void engine_ckpt_state(const dt__trainer *t, json_t *state) {
    json_object_set_new(state, "ds_stream", dt__ds_state_json(t->c));
}

const dt__fit_kind dt__fit_engine = {
    .check = engine_check,
    .open = engine_open,
    .global_batch_size = engine_global_batch_size,
    .start_epoch = engine_start_epoch,
    .next_batch = engine_next_batch,
    .train = engine_train,
    .eval_begin = engine_eval_begin,
    .eval_batch = engine_eval_batch,
    .every_slot_saves = true,
    .ckpt_begin = engine_ckpt_begin,
    .ckpt_state = engine_ckpt_state,
    .loads_in_train = true,
};
