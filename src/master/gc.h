/*
 * gc.h — checkpoint garbage collection, as Determined applies checkpoint_storage's policy
 * when a trial ends.
 *
 * Of an experiment's COMPLETED checkpoints it keeps the union of: each trial's
 * save_trial_latest latest (by batches; checkpoints at equal batches share a rank), each
 * trial's save_trial_best best and the experiment's save_experiment_best best (by the
 * validation metric at the checkpoint's batches; equal metrics go to the checkpoint listed
 * first; a checkpoint without a validation metric is never "best"). Everything else is
 * deleted: its directory removed and its row marked DELETED. A count of 0 keeps nothing on
 * its own account; a trial with fewer checkpoints than a count keeps them all. A checkpoint
 * held by a model version or by an active experiment's warm start is never deleted
 * (dt_gc_ckpt_holder, docs/models.md).
 */
#ifndef DTRAIN_MASTER_GC_H
#define DTRAIN_MASTER_GC_H

#include "dtrain/config.h"
#include "master/store.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct dt_gc_policy {
    int64_t save_experiment_best; /* >= 0; Determined's default 0 */
    int64_t save_trial_best;      /* >= 0; default 1 */
    int64_t save_trial_latest;    /* >= 0; default 1 */
    bool smaller_is_better;       /* of the searcher metric; default true */
} dt_gc_policy;

/* The policy of a parsed experiment config (checkpoint_storage and searcher). */
dt_gc_policy dt_gc_policy_of(const dt_expconf *cfg);

/* The uuids to delete (a new array, in input order) from `ckpts`, an array of checkpoint rows
 * as dt_store_ckpt_list gives them ({"uuid","trial_id","batches","state","validation_metric"}
 * are read; rows not COMPLETED are left alone). DT_ERR_INVALID (naming the row) for a row
 * without a uuid, an integer trial_id or batches, or a negative count in the policy; *delete_uuids
 * is then NULL. */
dt_status dt_gc_select(const json_t *ckpts, const dt_gc_policy *p, json_t **delete_uuids);

/* Apply the policy to experiment `exp_id`: each selected checkpoint's directory is removed
 * (dt_ckpt_remove) and its row marked DELETED. A path that does not resolve strictly inside
 * `storage_root` (dt_path_within, no symbolic links) or that is not a checkpoint is refused:
 * logged, left on disk and COMPLETED. A directory already gone is just marked. DT_ERR_INVALID
 * for an unknown experiment; a store or removal error on one checkpoint does not stop the
 * others, and the first such error is returned. */
dt_status dt_gc_run(dt_store *st, int64_t exp_id, const dt_gc_policy *p, const char *storage_root);

/* The one rule of what a checkpoint is protected by, for GC and for delete: a model version
 * that names it, or an active experiment that warm-starts from it (dt_store_ckpt_holders).
 * why[0 .. cap) = "" when nothing holds it, else who does ("model NAME version N",
 * "experiment N (searcher.source_checkpoint_uuid)"; several joined by ", "). */
dt_status dt_gc_ckpt_holder(dt_store *st, const char *uuid, char *why, size_t cap);

/* Delete checkpoint `uuid` at the user's request: DT_ERR_STATE naming the holder when it is
 * protected (dt_gc_ckpt_holder); else its directory is removed (dt_path_remove_tree, strictly
 * inside `storage_root`; already gone is fine) and its row deleted. DT_ERR_INVALID for an
 * unknown uuid or a path outside the root (nothing changed). */
dt_status dt_gc_delete_ckpt(dt_store *st, const char *uuid, const char *storage_root);

#endif
