/*
 * store_models.h — the model registry in the store (schema 6): models, named by the user, and
 * their numbered versions, each naming a COMPLETED checkpoint by uuid; what holds a checkpoint
 * (a version, or an active experiment that warm-starts from it); and a checkpoint's row
 * removed. docs/models.md is the user's page.
 *
 * A model row: {"id","name","description","labels" (array of strings),"creation_time",
 * "num_versions","last_updated" (the newest version's time, or the model's)}.
 * A version row: {"model","version","checkpoint_uuid","creation_time","checkpoint_state"
 * (null when the checkpoint's row is gone),"trial_id","experiment_id","batches",
 * "metrics" (the validation metrics reported at the checkpoint's batches, or null)}.
 *
 * Errors: DT_ERR_INVALID for a bad or unknown name or uuid (the message says which, with a
 * hint), DT_ERR_STATE for a duplicate name or a checkpoint that is not COMPLETED, DT_ERR_IO
 * from SQLite. A failed write changes nothing.
 */
#ifndef DTRAIN_MASTER_STORE_MODELS_H
#define DTRAIN_MASTER_STORE_MODELS_H

#include "master/store.h"

/* A new model; `labels` an array of strings or NULL. *id may be NULL. */
dt_status dt_store_model_create(dt_store *st, const char *name, const char *description,
                                const json_t *labels, int64_t *id);
/* Every model (an array of model rows), by name. */
dt_status dt_store_model_list(dt_store *st, json_t **out);
/* One model row by name. */
dt_status dt_store_model_get(dt_store *st, const char *name, json_t **out);
/* The versions of model `name` (an array of version rows), oldest first. */
dt_status dt_store_model_versions(dt_store *st, const char *name, json_t **out);
/* Register checkpoint `uuid` as the next version of model `name` (*version gets its number;
 * may be NULL). */
dt_status dt_store_model_register(dt_store *st, const char *name, const char *uuid,
                                  int64_t *version);

/* What holds checkpoint `uuid`: an array of {"model","version"} (a model version names it) and
 * {"experiment_id","key"} (an experiment in a state that is not terminal names it in its
 * searcher's source_checkpoint_uuid, or names its trial in source_trial_id and it is that
 * trial's latest COMPLETED checkpoint, the one a warm start reads). Empty: nothing. */
dt_status dt_store_ckpt_holders(dt_store *st, const char *uuid, json_t **out);
/* Remove checkpoint `uuid`'s row (its files are the caller's). DT_ERR_INVALID when unknown. */
dt_status dt_store_ckpt_delete(dt_store *st, const char *uuid);

#endif
