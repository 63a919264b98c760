/*
 * store_modeldef.h — an experiment's model definition in the store: the files it was created
 * from, packed as one tar (det_pack.h makes and unpacks it), kept with the experiment (deleted
 * with it) so that it can be handed back or run again after the original directory is gone.
 */
#ifndef DTRAIN_MASTER_STORE_MODELDEF_H
#define DTRAIN_MASTER_STORE_MODELDEF_H

#include "master/store.h"

#include <stddef.h>

/* Keep `tar` (len bytes) as experiment exp_id's model definition (replacing one kept before).
 * DT_ERR_INVALID for an unknown experiment, DT_ERR_IO from SQLite. */
dt_status dt_store_modeldef_put(dt_store *st, int64_t exp_id, const void *tar, size_t len);
/* Its tar into *tar (malloc'd), *len bytes. DT_ERR_INVALID when none is kept (an experiment
 * created from a directory on the master's machine). */
dt_status dt_store_modeldef_get(dt_store *st, int64_t exp_id, void **tar, size_t *len);

/* Record the name of the config file experiment exp_id was created from (as the user gave it:
 * its messages name it; the experiment row's "config_name"). DT_ERR_INVALID for an unknown
 * experiment, DT_ERR_IO from SQLite. */
dt_status dt_store_exp_set_config_name(dt_store *st, int64_t exp_id, const char *name);

#endif
