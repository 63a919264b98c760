/*
 * dtrain/trialio.h — the trial layer's files: TensorBoard event files and checkpoint
 * directories (src/trial/tensorboard.c, src/trial/checkpoint.c).
 *
 * TensorBoard. A dt_tb_writer appends scalar (and text) summaries to one event file that
 * TensorBoard reads as is: TFRecord framing around hand-encoded tensorflow.Event protobufs.
 * Records are buffered in memory and written on dt_tb_flush / dt_tb_close (and whenever the
 * buffer passes 64 KiB), so logging a metric costs no system call. A writer (like a checkpoint
 * writer or reader) is used by one thread at a time.
 *
 * Checkpoints. A checkpoint is a directory "<parent>/<name>" holding the files a trial saves
 * (model.safetensors, state.json, the user's own files) and a metadata.json that lists every
 * file with its size and crc32c. It is built under a temporary name, fsynced and renamed, so a
 * crash never leaves a half checkpoint that looks whole; the reader verifies every listed file
 * before handing the checkpoint out. The on-disk format is described in docs/checkpoints.md.
 */
#ifndef DTRAIN_TRIALIO_H
#define DTRAIN_TRIALIO_H

#include "dtrain/base.h"
#include "dtrain/tensor.h"

#include <jansson.h>
#include <signal.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- TensorBoard event files ---------------------------------------------------------- */

typedef struct dt_tb_writer dt_tb_writer;

/* Create `logdir` (like mkdir -p) and a new event file in it named
 * "events.out.tfevents.<unix_seconds>.<hostname>.<pid>" (a ".<k>" suffix is added if another
 * writer of this process made that name in the same second), and write its first record
 * (file_version "brain.Event:2"). The writer is owned by the caller (dt_tb_close).
 * On error returns NULL: DT_ERR_INVALID for a NULL/empty logdir, DT_ERR_IO naming the path
 * that could not be created or written, DT_ERR_OOM. */
DT_API dt_tb_writer *dt_tb_open(const char *logdir);
/* The event file's path (owned by w). */
DT_API const char *dt_tb_path(const dt_tb_writer *w);
/* Append a scalar summary `tag` = value at global step `step` (wall time = now). The tag must
 * be non-empty. Errors: DT_ERR_INVALID (bad tag), DT_ERR_IO (a write of the buffer failed: the
 * writer then refuses every later record with DT_ERR_IO, since the file's tail is unknown). */
DT_API dt_status dt_tb_add_scalar(dt_tb_writer *w, const char *tag, float value, int64_t step);
/* n scalars at one step, in one event (tags[i] = values[i]). Nothing is added on error. */
DT_API dt_status dt_tb_add_scalars(dt_tb_writer *w, int n, const char *const *tags,
                                   const float *values, int64_t step);
/* A text summary (TensorBoard's "Text" tab renders it as markdown). */
DT_API dt_status dt_tb_add_text(dt_tb_writer *w, const char *tag, const char *text, int64_t step);
/* Write the buffered records to the file (no fsync). DT_ERR_IO naming the file on failure. */
DT_API dt_status dt_tb_flush(dt_tb_writer *w);
/* Flush, close and free w (NULL is fine). Returns the flush/close status; w is freed anyway. */
DT_API dt_status dt_tb_close(dt_tb_writer *w);

/* ---- checkpoint directories ----------------------------------------------------------- */

#define DT_CKPT_FORMAT_VERSION 1

/* Flags of dt_ckpt_begin_ex. */
enum {
    /* Replace a checkpoint already at "<parent>/<name>" on commit (atomically where the file
     * system supports renameat2(RENAME_EXCHANGE), otherwise by renaming the old one aside
     * first). Without it dt_ckpt_begin and dt_ckpt_commit refuse with DT_ERR_STATE. */
    DT_CKPT_OVERWRITE = 1 << 0,
};

typedef struct dt_ckpt_writer dt_ckpt_writer;

/* Start a checkpoint "<parent_dir>/<name>": creates parent_dir (like mkdir -p) and the
 * temporary directory "<parent_dir>/<name>.tmp.<pid>" (a stale one of that name is removed
 * first). `name` is one path component: non-empty, no '/', not "." or "..", no ".tmp.".
 * On error returns NULL: DT_ERR_INVALID (bad name), DT_ERR_STATE (the checkpoint exists and
 * DT_CKPT_OVERWRITE is not set, or something that is not a checkpoint has that name),
 * DT_ERR_IO naming the directory that could not be created. */
DT_API dt_ckpt_writer *dt_ckpt_begin(const char *parent_dir, const char *name);
/* Remove every "<name>.tmp.<pid>" directory in `dir`: checkpoints a killed run was writing.
 * Only for the holder of the directory's lock (the next run, when it takes it) or when no run
 * can write there any more (the master, once a trial has ended). Logs what it removes. */
DT_API dt_ckpt_writer *dt_ckpt_begin_ex(const char *parent_dir, const char *name, unsigned flags);

/* The temporary directory being filled (owned by ck): a save hook may write its own files and
 * subdirectories into it; dt_ckpt_commit lists them all. Valid until commit/abort. */
DT_API const char *dt_ckpt_dir(const dt_ckpt_writer *ck);

/* Adding files. `relname` is a relative path inside the checkpoint ("model.safetensors",
 * "optim/rank0.safetensors"; missing subdirectories are created): no leading '/', no empty,
 * "." or ".." component, and not "metadata.json" (written by commit). An existing file of that
 * name is replaced.
 * Errors: DT_ERR_INVALID for bad arguments (the writer stays usable); DT_ERR_IO / DT_ERR_OOM
 * for a failed write — the writer is then failed: the temporary directory is removed at once,
 * every later call returns DT_ERR_STATE and commit refuses (call dt_ckpt_abort to free it). */

/* Tensors as safetensors (dt_safetensors_write: n tensors names[i] -> tensors[i] and n_meta
 * metadata pairs meta_kv[2k] = key, meta_kv[2k+1] = value). */
DT_API dt_status dt_ckpt_add_tensors(dt_ckpt_writer *ck, const char *relname, int n,
                                     const char *const *names, dt_tensor *const *tensors,
                                     int n_meta, const char *const *meta_kv);
/* A JSON value, indented (the value is borrowed, not stolen). */
DT_API dt_status dt_ckpt_add_json(dt_ckpt_writer *ck, const char *relname, const json_t *value);
/* n raw bytes. */
DT_API dt_status dt_ckpt_add_bytes(dt_ckpt_writer *ck, const char *relname, const void *data,
                                   size_t n);

/* Finish the checkpoint: list every regular file under the temporary directory (recursively)
 * with its size and crc32c, fsync each file, write metadata.json = {"format_version": 1,
 * "files": {relname: {"size": bytes, "crc32c": n}, ...}} plus the members of extra_metadata
 * (borrowed; an object or NULL; it may not use the keys "format_version" or "files"), fsync
 * the directories, rename the temporary directory to "<parent>/<name>" and fsync the parent.
 * The writer is freed in every case. On error nothing is left behind (the temporary directory
 * is removed) and a checkpoint already at "<parent>/<name>" is untouched: DT_ERR_STATE (the
 * checkpoint exists and DT_CKPT_OVERWRITE was not given, or the writer had failed),
 * DT_ERR_INVALID (bad extra_metadata; a symlink, device or "metadata.json" found in the
 * directory), DT_ERR_IO naming the path. */
DT_API dt_status dt_ckpt_commit(dt_ckpt_writer *ck, const json_t *extra_metadata);
/* Remove the temporary directory and free ck (NULL is fine). */
DT_API void dt_ckpt_abort(dt_ckpt_writer *ck);

typedef struct dt_ckpt dt_ckpt;

/* Open the checkpoint directory `path` and verify it completely: metadata.json present, valid
 * JSON, format_version supported, and every listed file present with the listed size and
 * crc32c (files not listed are ignored). Owned by the caller (dt_ckpt_close).
 * On error returns NULL: DT_ERR_IO (path missing / unreadable), DT_ERR_FORMAT naming the file
 * and what differs ("model.safetensors: size 1000, metadata says 2048: the checkpoint is
 * truncated"), DT_ERR_OOM. */
DT_API dt_ckpt *dt_ckpt_open(const char *path);
DT_API void dt_ckpt_close(dt_ckpt *ck);
/* The full path of file `relname` of the checkpoint, or with relname NULL the checkpoint
 * directory (owned by ck, valid until dt_ckpt_close). NULL with DT_ERR_INVALID when relname is
 * not one of the checkpoint's files (the message lists some of them). */
DT_API const char *dt_ckpt_path(dt_ckpt *ck, const char *relname);
/* The parsed metadata.json (borrowed: valid until dt_ckpt_close; do not modify). */
DT_API const json_t *dt_ckpt_metadata(const dt_ckpt *ck);
/* The listed files in metadata order: i in [0, count); out of range gives NULL / -1. */
DT_API int dt_ckpt_file_count(const dt_ckpt *ck);
DT_API const char *dt_ckpt_file_name(const dt_ckpt *ck, int i);
DT_API int64_t dt_ckpt_file_size(const dt_ckpt *ck, int i);

/* Delete the checkpoint directory `path` and everything in it (symlinks are removed, never
 * followed). It is first renamed to a temporary name so an interrupted removal never leaves
 * something that looks like a checkpoint. Only a directory holding metadata.json, or a
 * leftover temporary directory ("<name>.tmp.<pid>"), is removed: anything else is refused
 * with DT_ERR_INVALID. DT_ERR_IO naming the path if it is missing or cannot be removed. */
DT_API dt_status dt_ckpt_remove(const char *path);

/* Preemption by signal (the cores): from dt_preempt_signals_catch until
 * dt_preempt_signals_restore, SIGINT and SIGTERM are recorded instead of ending the process
 * (the previous handlers are kept in *saved). dt_preempt_signal: the last one caught, 0 if
 * none since the catch. */
typedef struct dt_preempt_signals {
    struct sigaction old_int, old_term;
} dt_preempt_signals;

/* The checkpoints under `dir`: the names of its subdirectories that hold a metadata.json
 * (not verified; temporary directories are skipped), sorted in version order ("step_99" before
 * "step_100"). *names is a NULL-terminated array owned by the caller (dt_ckpt_list_free);
 * *count (may be NULL) receives the number. A missing dir gives zero checkpoints and DT_OK.
 * DT_ERR_IO if dir cannot be read, DT_ERR_OOM. */
DT_API dt_status dt_ckpt_list(const char *dir, char ***names, int *count);
DT_API void dt_ckpt_list_free(char **names);

#ifdef __cplusplus
}
#endif
#endif
