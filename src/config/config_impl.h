/*
 * config_impl.h — what the experiment config's files share: the validation context and one
 * parse function per section. expconf.c walks the sections in order; each file holds one job:
 *   expconf_hparams.c    hyperparameters and the helpers that read them
 *   expconf_searcher.c   lengths and the searcher section
 *   expconf_resources.c  resources, slurm, environment, checkpoint storage
 *   expconf_entry.c      the entrypoint (trial symbol or command) and the model directory check
 *   expconf_legacy.c     keys the reference removed, refused with the key to write instead
 *   expconf_warn.c       keys accepted with no effect here, each a warning with its position
 *   expconf_util.c       the helpers they all read with (strings, sections, lists, warnings)
 * Nothing outside src/config/ includes this header.
 */
#ifndef DT_CONFIG_IMPL_H
#define DT_CONFIG_IMPL_H

#include "dtrain/config.h"
#include "base/confcheck.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Typed reads, positions, messages and unknown keys are base's config toolkit
 * (base/confcheck.h) in its YAML dialect; unknown keys and keys without effect become
 * cfg->warnings at the end. */
typedef struct dt__vctx {
    dt_expconf *cfg;
    dt_conf conf;
} dt__vctx;
typedef dt__vctx vctx;

#define TRY(x)                                                                                     \
    do {                                                                                           \
        dt_status st_ = (x);                                                                       \
        if (st_ != DT_OK) return st_;                                                              \
    } while (0)

#define OOM() dt_error(DT_ERR_OOM, "out of memory")

/* A value for "got ..." in the YAML dialect's words. */
const char *dt__cfg_describe(const vctx *v, const json_t *x, char *buf, size_t n);
/* A string member: *out = strdup (NULL when absent and !required). */
dt_status dt__cfg_get_str(const dt_conf_sec *s, const char *key, bool required, bool nonempty,
                          const char *hint, char **out);
/* The section s.key (absent: obj NULL) with its keys checked against known and accepted. */
dt_status dt__cfg_section(vctx *v, const dt_conf_sec *parent, const char *key,
                          const char *const *known, const char *const *accepted, dt_conf_sec *out);
/* s.key: a list of strings (or of mappings when !strings). */
dt_status dt__cfg_list_of(const dt_conf_sec *s, const char *key, bool strings);
/* Append the warning w (owned, also on failure) to cfg->warnings. */
dt_status dt__cfg_push_warning(dt_expconf *c, char *w);
/* Record a warning "FILE:LINE: <message>" (no position when the config has none). */
dt_status dt__cfg_warn(vctx *v, dt_yaml_pos pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A length {batches|epochs|records: N}, or (bare_ok) a bare integer N in batches, as the
 * reference reads searcher.max_length. allow_zero: N = 0 means "not set". */
dt_status dt__cfg_get_length(const dt_conf_sec *s, const char *key, bool allow_zero, bool bare_ok,
                             dt_length *out);

/* The sections, in the order validate() reads them. */
dt_status dt__cfg_legacy(vctx *v);
dt_status dt__cfg_entrypoint(vctx *v, const dt_conf_sec *root);
dt_status dt__cfg_hparams(vctx *v, const dt_conf_sec *root);
dt_status dt__cfg_searcher(vctx *v, const dt_conf_sec *root, unsigned flags);
dt_status dt__cfg_storage(vctx *v, const dt_conf_sec *root);
dt_status dt__cfg_environment(vctx *v, const dt_conf_sec *root);
dt_status dt__cfg_resources(vctx *v, const dt_conf_sec *root);
dt_status dt__cfg_slurm(vctx *v, const dt_conf_sec *root);
dt_status dt__cfg_warn_no_effect(vctx *v);

#endif
