/*
 * store_impl.h — the store's internals shared by store.c, store_schema.c, gc.c and the tests:
 * the schema steps, building a store at an older schema version, and the SQLite handle.
 */
#ifndef DTRAIN_MASTER_STORE_IMPL_H
#define DTRAIN_MASTER_STORE_IMPL_H

#include "master/store.h"

#include <sqlite3.h>

/* DT_ERR_FORMAT for a file that is not a database (or is damaged), else DT_ERR_IO; the message
 * names the store file, what was being done and SQLite's reason. Returns the status. */
dt_status dt__store_sqlite_error(sqlite3 *db, int rc, const char *path, const char *what);

/* The schema version of the open database `db` (at `path`, for messages), checked before
 * anything is written: DT_ERR_FORMAT for a file that is not SQLite, a SQLite database that is
 * not a dtrain store, or a schema newer than this build knows; the file is left untouched. */
dt_status dt__store_schema_probe(sqlite3 *db, const char *path, int *version);

/* Bring `db` forward from its version to `target` (<= dt_store_schema_version()), one migration
 * per transaction; a failed step is rolled back and leaves the store at the step before it. */
dt_status dt__store_schema_migrate(sqlite3 *db, const char *path, int target);

/* dt_store_open, migrating no further than schema `version` (tests build old stores with it). */
dt_status dt__store_open_at_version(const char *path, int version, dt_store **out);

/* The SQLite connection (for tests: raw SQL on an old schema, integrity checks). */
sqlite3 *dt__store_db(dt_store *st);

#endif
