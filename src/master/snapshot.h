/*
 * snapshot.h — an experiment's model definition written back to files (docs/experiments.md):
 * the interface of the master's layer to the `dtrain experiment download-model-def` command.
 * The master's side (packing at create, unpacking for trials) is in master_impl.h.
 */
#ifndef DTRAIN_MASTER_SNAPSHOT_H
#define DTRAIN_MASTER_SNAPSHOT_H

#include "dtrain/base.h"

/* The files of `b64_tar` (the "b64Tar" of GET /api/v1/experiments/ID/model_def) into `dir`,
 * created (with its parents) when missing. DT_ERR_INVALID when dir exists and is not an empty
 * directory, DT_ERR_FORMAT for an answer that is not such a tar, DT_ERR_IO. */
DT_API dt_status dt_snapshot_write(const char *b64_tar, const char *dir);

#endif
