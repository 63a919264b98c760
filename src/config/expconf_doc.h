/*
 * config/expconf_doc.h — the config layer's interface to the master (not public API): validate
 * an experiment config from a YAML document the caller loaded and edited (the master applies
 * KEY=VALUE overrides to the tree first, so messages keep the file's positions), and those
 * overrides (override.c), which the CLI checks before it sends them.
 */
#ifndef DT_CONFIG_EXPCONF_DOC_H
#define DT_CONFIG_EXPCONF_DOC_H

#include "base/yaml.h"
#include "dtrain/config.h"

/* Validate an already-loaded doc; takes ownership of `doc` (freed on error too). */
DT_API dt_status dt_expconf_from_doc(dt_yaml_doc *doc, unsigned flags, dt_expconf **out);

/* Apply one KEY=VALUE override to `root` (an object): KEY a dot-separated path of names,
 * VALUE YAML. DT_ERR_CONFIG naming what is wrong, `root` unchanged. */
DT_API dt_status dt_config_override(json_t *root, const char *kv);

#endif
