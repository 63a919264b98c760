/*
 * base/durable.h — durable files: written whole or not at all, and still there after a crash.
 * An internal interface of the base layer to the layers above (not public API).
 *
 * A file replaced through these functions is written under a temporary name next to it
 * ("<path>.tmp.<pid>"), fsynced, renamed over `path` and its directory fsynced. At every
 * instant `path` is either the old file or the complete new one; on any failure the temporary
 * is removed and the old file is untouched. Every writer of checkpoints and pointer files
 * (safetensors, engine and trial checkpoints, "latest") goes through here.
 */
#ifndef DT_BASE_DURABLE_H
#define DT_BASE_DURABLE_H

#include "dtrain/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Replace `path` by the n bytes at data, atomically and durably (see above). DT_ERR_IO (the
 * message names the file and the system error) or DT_ERR_OOM; the old file stays as it was. */
DT_API dt_status dt_file_write_atomic(const char *path, const void *data, size_t n);

/* fsync directory `dir`, so the names created or renamed in it survive a crash. File systems
 * that cannot sync directories (EINVAL) count as success. DT_ERR_IO on failure. */
DT_API dt_status dt_dir_fsync(const char *dir);

/* fsync the directory that holds `path` ("." for a bare name). */
DT_API dt_status dt_dir_fsync_parent(const char *path);

/* The streaming form, for writers that produce a file piece by piece: open makes the
 * temporary, write appends, commit makes it `path` (fsync, rename, directory fsync) and abort
 * drops it. commit and abort free the handle, whatever the outcome. */
typedef struct dt_file_out dt_file_out;

/* Start replacing `path`. NULL with DT_ERR_IO (directory missing or not writable) or
 * DT_ERR_OOM; nothing is created then. */
DT_API dt_file_out *dt_file_out_open(const char *path);
/* Append n bytes. DT_ERR_IO (e.g. the disk is full); the handle must then be aborted (a
 * commit after a failed write fails and removes the temporary). */
DT_API dt_status dt_file_out_write(dt_file_out *f, const void *data, size_t n);
/* The name being written (the temporary), for messages. */
DT_API const char *dt_file_out_tmp_path(const dt_file_out *f);
/* Make the written bytes `path`. On error (DT_ERR_IO) the temporary is removed and `path` is as
 * it was; a failure of the final directory fsync leaves the new file in place. */
DT_API dt_status dt_file_out_commit(dt_file_out *f);
/* Drop the temporary; `path` is as it was. NULL is a no-op. */
DT_API void dt_file_out_abort(dt_file_out *f);

#ifdef __cplusplus
}
#endif
#endif
