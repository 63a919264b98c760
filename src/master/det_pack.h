/*
 * det_pack.h — packing files for the second client's door (docs/det-client.md): base64, a
 * ustar archive in memory (written from an upload or a directory, unpacked into a directory),
 * and gzip around it (stored blocks: the files are sent as they are, the frame is what the
 * client needs), and SHA-512 for the client's hashed passwords.
 */
#ifndef DTRAIN_MASTER_DET_PACK_H
#define DTRAIN_MASTER_DET_PACK_H

#include "base/base_impl.h" /* dt__buf */
#include "dtrain/base.h"

#include <jansson.h>
#include <stddef.h>

/* Base64 of n bytes into b. */
void dt__base64_put(dt__buf *b, const void *d, size_t n);
/* Decode base64 text `s` (whitespace skipped); false when it is not base64. */
bool dt__base64_decode(const char *s, dt__buf *out);

/* A tar from the client's upload: a JSON array of {"path","type" (48 file, 53 directory),
 * "content" (base64),"mode"}. DT_ERR_INVALID naming the entry for a bad path (absolute, with
 * "..", empty), type or content; DT_ERR_INVALID when the files pass `limit` bytes. */
dt_status dt__tar_from_upload(const json_t *files, size_t limit, dt__buf *tar);
/* Append one tar header (and for a file its n bytes at d, padded to 512) for `name`, mode &
 * 0777, mtime; false for a name over ustar's 255 bytes. */
bool dt__tar_entry(dt__buf *b, const char *name, bool dir, unsigned mode, const void *d, size_t n,
                   long long mtime);
/* Append the tar's end (two zero blocks). */
void dt__tar_end(dt__buf *b);
/* A tar of the regular files under `dir` (names relative to it; symlinks skipped) (pack_dir.c).
 * DT_ERR_IO. */
dt_status dt__tar_from_dir(const char *dir, dt__buf *tar);
/* An experiment's model definition (pack_dir.c): the files under `dir` less those its
 * .dtrainignore / .detignore leave out (ignore.h), and each includes[0..n) (a file, or a
 * directory with its own ignore files) under its base name. DT_ERR_INVALID past `limit` bytes
 * (naming the biggest files), for a name too long or an include clashing with a file of dir;
 * DT_ERR_IO. */
dt_status dt__tar_snapshot(const char *dir, const char *const *includes, int n, size_t limit,
                           dt__buf *tar);
/* Unpack a tar written by the two above into the existing directory `dir`. DT_ERR_IO /
 * DT_ERR_FORMAT (not such a tar). */
dt_status dt__tar_unpack(const void *tar, size_t len, const char *dir);
/* Remove `path` and everything under it (symlinks are removed, not followed). */
void dt__tree_remove(const char *path);
/* gzip of n bytes (stored deflate blocks) into b. */
void dt__gzip_put(dt__buf *b, const void *d, size_t n);

/* The lowercase hex SHA-512 of n bytes (det_sha.c). */
void dt__sha512_hex(const void *data, size_t n, char hex[129]);

#endif
