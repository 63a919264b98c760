/*
 * config/expconf_doc.h — the config layer's interface to the master (not public API): validate
 * an experiment config from a YAML document the caller loaded and edited (the master applies
 * KEY=VALUE overrides to the tree first, so messages keep the file's positions).
 */
#ifndef DT_CONFIG_EXPCONF_DOC_H
#define DT_CONFIG_EXPCONF_DOC_H

#include "base/yaml.h"
#include "dtrain/config.h"

/* Validate an already-loaded doc; takes ownership of `doc` (freed on error too). */
DT_API dt_status dt_expconf_from_doc(dt_yaml_doc *doc, unsigned flags, dt_expconf **out);

#endif
