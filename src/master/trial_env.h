/*
 * trial_env.h — what a trial process the master started reads to find its trial: the
 * environment (DTRAIN_TRIAL_ID, DTRAIN_TRIAL_RUN, DTRAIN_HEARTBEAT_S) and the spec the master serves for it
 * (GET /api/v1/trials/{id}/spec, docs/api.md). Shared by the Core API's dt_core_init
 * (core_init.c) and the trial worker (worker.c); internal to the master layer.
 */
#ifndef DTRAIN_MASTER_TRIAL_ENV_H
#define DTRAIN_MASTER_TRIAL_ENV_H

#include "dtrain/dist.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* Seconds between a run's heartbeats (core_master.c), set by the master (sched.c) from the
 * experiment's resources.max_silence. */
#define DT__HEARTBEAT_ENV "DTRAIN_HEARTBEAT_S"

/* Is this process a trial run the master started (DTRAIN_TRIAL_ID set)? On true, *trial and
 * *run hold the ids, or the function returns DT_ERR_CONFIG naming the bad variable. */
dt_status dt__trial_env(bool *from_master, int64_t *trial, int64_t *run);

/* The trial's spec, fetched by the chief of `world` (rank 0) and shared with every rank
 * (collective; world NULL: this process alone). DT_ERR_COMM / the master's error; *out NULL
 * then. */
dt_status dt__trial_spec(dt_comm *world, int64_t trial, int64_t run, json_t **out);

#endif
