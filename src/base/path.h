/*
 * base/path.h — containment: a path taken from a config, a checkpoint's own files or a
 * request, resolved under the directory it must stay in.
 *
 * Every reader and writer that joins such a path under a root goes through dt_path_within. The
 * root itself is trusted (the operator chose it; it may be or lie under a symbolic link); the
 * part below it is not: it may not climb out with "..", an absolute path must lie inside the
 * root, and, when the file system is checked, no component below the root may be a symbolic
 * link. docs/checkpoints.md says which checks run when.
 */
#ifndef DTRAIN_PATH_H
#define DTRAIN_PATH_H

#include "dtrain/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Flags of dt_path_within. */
enum {
    DT_PATH_LEXICAL = 0,  /* the string alone: for configs, whose directories need not exist */
    DT_PATH_NOFOLLOW = 1, /* also the file system: no existing component below root is a
                             symbolic link and every existing one but the last is a directory
                             (components that do not exist yet pass) */
};

/* out[0 .. cap) = `rel` resolved under `root`: "." and empty components dropped, ".." taken
 * back lexically, an absolute `rel` accepted only inside `root` ("/" contains everything); the
 * result is root's normal form, "/" and the rest (root itself when rel resolves to it).
 * DT_ERR_INVALID when rel or root is empty, ".." climbs above root, an absolute rel lies outside
 * root (or root is relative), the result needs cap bytes or more, or (DT_PATH_NOFOLLOW) a
 * component is a symbolic link or not a directory; DT_ERR_IO when a component cannot be
 * examined. The message names the path, the component and what to do; out is "" on error. */
DT_API dt_status dt_path_within(const char *root, const char *rel, unsigned flags, char *out,
                                size_t cap);

/* Remove root/rel and everything under it, never following a symbolic link; rel must resolve
 * strictly below root (dt_path_within with DT_PATH_NOFOLLOW). A missing path is DT_OK.
 * DT_ERR_INVALID for a path outside root or root itself, DT_ERR_IO naming the first entry that
 * could not be removed (the rest is still removed). */
DT_API dt_status dt_path_remove_tree(const char *root, const char *rel);

/* Append s to out (a NUL-terminated string in n bytes) percent-encoded as a URL path segment or
 * query value (all but the unreserved A-Z a-z 0-9 - _ . ~). False when it does not fit. */
DT_API bool dt_url_encode(char *out, size_t n, const char *s);

#ifdef __cplusplus
}
#endif
#endif
