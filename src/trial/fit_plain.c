/* fit_plain.c — the fit loop's plain trial (PyTorchTrial's shape, fit_impl.h): the loop reads
 * each batch from the trial's loaders and the chief alone writes checkpoints, since the model
 * and optimiser states are replicated on every data-parallel slot. */
#include "fit_impl.h"

#include <stdio.h>
#include <sys/stat.h>

static dt_status plain_check(const dt_trial_def *def) {
    if (!def->init || !def->train_batch || !def->build_training_data_loader ||
        !def->build_validation_data_loader || (!def->evaluate_batch && !def->evaluate_full_dataset))
        return dt_error(DT_ERR_INVALID,
                        "trial %s is incomplete: init, train_batch, "
                        "build_training_data_loader, build_validation_data_loader "
                        "and evaluate_batch (or evaluate_full_dataset) are required "
                        "(or ds_train_batch and ds_evaluate_batch for an "
                        "engine-based trial)",
                        def->name ? def->name : "(unnamed)");
    return DT_OK;
}

dt_status dt__fit_build_loaders(dt__trainer *t, bool build, int shard_rank, int shard_world) {
    t->train = build ? t->def->build_training_data_loader(t->self) : NULL;
    t->val = t->train ? t->def->build_validation_data_loader(t->self) : NULL;
    if (build && (!t->train || !t->val))
        return dt_error(dt_last_status() ? dt_last_status() : DT_ERR_STATE,
                        "building the %s data loader failed: %s",
                        t->train ? "validation" : "training", dt_last_error());
    if (!t->c->repro_disabled && shard_world > 1 && t->train) {
        dt_loader_set_shard(t->train, shard_rank, shard_world);
        dt_loader_set_shard(t->val, shard_rank, shard_world);
    }
    return DT_OK;
}

static dt_status plain_open(dt__trainer *t) {
    dt_status st = dt__fit_build_loaders(t, true, t->c->rank, t->c->size);
    if (st == DT_OK) t->batches_per_epoch = dt_loader_num_batches(t->train);
    return st;
}

static int64_t plain_global_batch_size(const dt__trainer *t) {
    return dt_trial_per_slot_batch_size(t->c) * t->c->size;
}

static dt_status plain_start_epoch(dt__trainer *t, int64_t e, int64_t in_epoch) {
    return dt_loader_start_epoch(t->train, e, in_epoch);
}

static dt_status plain_next_batch(dt__trainer *t, int64_t e, int64_t in_epoch, dt_batch **b) {
    dt_status st = dt_loader_next(t->train, b);
    if (st == DT_OK && !*b)
        return dt_error(DT_ERR_STATE,
                        "the training loader ended epoch %lld after %lld batches "
                        "but reported %lld per epoch",
                        (long long)e, (long long)in_epoch, (long long)t->batches_per_epoch);
    return st;
}

static dt_metrics plain_train(dt__trainer *t, dt_batch *b, int64_t e, int64_t *records) {
    dt_trial_ctx *c = t->c;
    *records = dt__fit_batch_length(t, b) * c->size;
    if (b->records > 0) return t->def->train_batch(t->self, b, e, c->batches_trained);
    /* a shard's padding batch: no data here, but the slot still takes part in the optimiser
     * steps' gradient averaging (contributing zero gradients) */
    dt_metrics m = dt_metrics_empty();
    for (int i = 0; i < c->n_optims && m.status == DT_OK; i++)
        m.status = dt_step_optimizer(c, c->optims[i].opt, NULL);
    return m;
}

static dt_status plain_eval_begin(dt__trainer *t) {
    return dt_loader_start_epoch(t->val, 0, 0);
}

static bool plain_eval_batch(dt__trainer *t, int64_t vb, dt_metrics *m, int64_t *len,
                             dt_status *st) {
    dt_batch *b = NULL;
    do {
        *st = dt_loader_next(t->val, &b);
        if (*st != DT_OK || !b) return false;
    } while (b->records == 0); /* a shard's padding batch: nothing to evaluate */
    dt_ctx_reset(t->c->rt);
    *m = t->def->evaluate_batch(t->self, b, vb);
    *len = dt__fit_batch_length(t, b);
    return true;
}

static dt_status plain_ckpt_begin(dt__trainer *t, const char *name, dt_ckpt_writer **w,
                                  bool *skip) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", t->o->checkpoint_dir, name);
    struct stat sb;
    *skip = stat(path, &sb) == 0;
    *w = *skip ? NULL : dt_ckpt_begin(t->o->checkpoint_dir, name);
    return *skip || *w ? DT_OK : dt_last_status();
}

const dt__fit_kind dt__fit_plain = {
    .check = plain_check,
    .open = plain_open,
    .global_batch_size = plain_global_batch_size,
    .start_epoch = plain_start_epoch,
    .next_batch = plain_next_batch,
    .train = plain_train,
    .eval_begin = plain_eval_begin,
    .eval_batch = plain_eval_batch,
    .every_slot_saves = false,
    .ckpt_begin = plain_ckpt_begin,
};
