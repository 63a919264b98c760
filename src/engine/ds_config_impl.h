/*
 * ds_config_impl.h — what ds_config.c (the reader) calls in ds_config_warn.c (keys without
 * effect, features refused).
 */
#ifndef DT_DS_CONFIG_IMPL_H
#define DT_DS_CONFIG_IMPL_H

#include "base/confcheck.h"
#include "dtrain/engine.h"

/* The keys of section `path` that are accepted without effect, and why. */
typedef struct dt__ds_ignored {
    const char *path;
    const char *const *keys;
    const char *why;
} dt__ds_ignored;

/* The keys of j that have no effect here, each a string appended to `out` ("tensorboard has no
 * effect: ..."), the sections' own in `ignored` (ends with a NULL path; ds_config.c's table);
 * DT_ERR_CONFIG for a feature asked for that dtrain does not have (random_ltd, sequence
 * parallelism, ...), saying so. */
dt_status dt__ds_notes(const json_t *j, const dt__ds_ignored *ignored, json_t *out);

#endif
