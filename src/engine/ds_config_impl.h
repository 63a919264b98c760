/*
 * ds_config_impl.h — what the DeepSpeed config reader's files share: ds_config.c (loading,
 * merging, the keys, batch arithmetic, the top level) calls ds_config_zero.c (the
 * zero_optimization section), ds_config_sched.c (optimizer and scheduler) and ds_config_warn.c
 * (keys without effect, features refused).
 */
#ifndef DT_DS_CONFIG_IMPL_H
#define DT_DS_CONFIG_IMPL_H

#include "base/confcheck.h"
#include "dtrain/engine.h"

#include <stdio.h>
#include <string.h>

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

/* ---- the reader's words and shorthands ---- */

/* The words of every message (base's toolkit, base/confcheck.h, in its JSON dialect). */
static inline const dt_conf *dt__ds_words(void) {
    static const dt_conf words = {
        .dialect = DT_CONF_JSON,
        .prefix = "ds_config: ",
        .hint = "docs/engine.md lists every key with its range and default",
        .auto_note = " (\"auto\" is filled in by the Hugging Face integration, not by DeepSpeed "
                     "itself)",
    };
    return &words;
}

/* DT_ERR_CONFIG "ds_config: <message>[; hint: docs/engine.md ...]". */
#define errf(...) dt_conf_error_at(dt__ds_words(), (dt_yaml_pos){0, 0}, __VA_ARGS__)

typedef dt_conf_sec sec;

#define TRY(x)                                                                                     \
    do {                                                                                           \
        dt_status st_ = (x);                                                                       \
        if (st_ != DT_OK) return st_;                                                              \
    } while (0)

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* A constructor's refusal of the values read (the last error, its own prefix `own` dropped) as
 * DT_ERR_CONFIG "ds_config: <where><message>"; the constructors check what they take themselves. */
static inline dt_status dt__ds_refused(const char *own, const char *where) {
    char keep[512];
    snprintf(keep, sizeof keep, "%s", dt_last_error());
    const char *msg = strncmp(keep, own, strlen(own)) ? keep : keep + strlen(own);
    return errf("%s%s", where, msg);
}

/* ---- the sections read in their own files ---- */

/* zero_optimization into *z with DeepSpeed's defaults (ds_config_zero.c). */
dt_status dt__ds_parse_zero(const dt_conf_sec *root, dt_zero_config *z);
/* optimizer into out->optimizer (out->has_optimizer), checked by building it once. */
dt_status dt__ds_parse_optimizer(const dt_conf_sec *root, dt_ds_config *out);
/* scheduler into out->scheduler (out->has_scheduler), after the optimizer (its lr is the base). */
dt_status dt__ds_parse_scheduler(const dt_conf_sec *root, dt_ds_config *out);
/* The params scheduler.params of schedule `type` may have (NULL: an unknown type). */
const char *const *dt__ds_sched_keys(const char *type);

#endif
