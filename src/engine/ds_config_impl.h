/*
 * ds_config_impl.h — what ds_config.c (the reader) and ds_config_warn.c (keys without effect,
 * features refused, dt_ds_config_check) share.
 */
#ifndef DT_DS_CONFIG_IMPL_H
#define DT_DS_CONFIG_IMPL_H

#include "dtrain/confcheck.h"
#include "dtrain/engine.h"

/* The keys of section `path` that are accepted without effect, and why. */
typedef struct dt__ds_ignored {
    const char *path;
    const char *const *keys;
    const char *why;
} dt__ds_ignored;
extern const dt__ds_ignored dt__ds_ignored_keys[]; /* ends with a NULL path */

/* Record every unknown key of j in c (ds_config.c). */
dt_status dt__ds_collect_unknowns(dt_conf *c, const json_t *j);
/* The keys of j that have no effect here, each a string appended to `out` ("tensorboard has no
 * effect: ..."); DT_ERR_CONFIG for a feature asked for that dtrain does not have (random_ltd,
 * sequence parallelism, ...), saying so. */
dt_status dt__ds_notes(const json_t *j, json_t *out);

#endif
