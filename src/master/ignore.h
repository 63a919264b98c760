/*
 * ignore.h — the files an experiment's snapshot leaves out: the patterns of a model
 * directory's .dtrainignore and .detignore (both when both exist), in gitignore's syntax
 * (docs/experiments.md): `#` comments, blank lines, `*` and `?` within one path segment,
 * `**` across segments, `[abc]` classes, `\` escapes, a trailing `/` for directories only, a
 * `/` at the start or in the middle anchoring the pattern to the directory, `!` taking a path
 * back in. The last pattern that matches a path decides.
 */
#ifndef DTRAIN_MASTER_IGNORE_H
#define DTRAIN_MASTER_IGNORE_H

#include "dtrain/base.h"

#include <stdbool.h>

typedef struct dt__ignore dt__ignore;

/* The patterns of `text` (one a line) added to *ig (a new set when *ig is NULL).
 * DT_ERR_OOM. */
dt_status dt__ignore_add(dt__ignore **ig, const char *text);
/* The patterns of dir/.dtrainignore and dir/.detignore (none: *ig stays NULL). DT_ERR_IO
 * naming the file when one exists but cannot be read. */
dt_status dt__ignore_load(const char *dir, dt__ignore **ig);
/* Is `path` (relative to the directory, '/'-separated; is_dir: a directory) left out?
 * A NULL set leaves nothing out. */
bool dt__ignore_match(const dt__ignore *ig, const char *path, bool is_dir);
void dt__ignore_free(dt__ignore *ig);

#endif
