/*
 * series_cache.h — the store's memory of chart series: for each (trial, kind, metric name, x)
 * a chart asked for, every point read so far in batch order and the last batch read, so the
 * next request reads only the rows after it. The store owns one (under its lock), extends an
 * entry from the rows after entry->last_batches, and drops entries a write could change (a row
 * at or before an entry's last batch, a rolled-back transaction, a deleted experiment).
 * Least recently used entries go when the cache holds more than its point budget.
 *
 * An entry also keeps its last answer encoded (for one point count): its points only grow by
 * appending, so the same count of points asked for the same number of times reads the same, and
 * a chart of many trials re-encodes only the trials that got new rows.
 *
 * Its files: series_cache.c (the entries), series_packed.c (the points kept packed in the
 * store), series_rows.c (a number out of a stored row's text), series_encode.c (the points a
 * chart's width can show, written as JSON or binary64, and the route's answer around them).
 */
#ifndef DTRAIN_MASTER_SERIES_CACHE_H
#define DTRAIN_MASTER_SERIES_CACHE_H

#include "base/base_impl.h"

#include <jansson.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct dt__series {
    int64_t trial_id;
    char *kind, *name, *x; /* the key */
    int64_t last_batches;  /* of the last row read (with or without the metric); -1: none */
    int64_t rows;          /* rows of the kind read, with or without the metric */
    double *xs, *ys;       /* the points, in batch order */
    size_t n, cap;
    uint64_t used; /* the cache's clock at the last get */
    char *enc;     /* dt__series_text's last answer (malloc'd) for enc_points at enc_n points */
    size_t enc_len, enc_n;
    int64_t enc_points;
} dt__series;

/* ---- series_encode.c: a series as the metrics route sends it ---- */


typedef struct dt__series_cache dt__series_cache;

/* ---- series_cache.c: the series read so far ---- */

/* A cache holding up to `max_points` points between trims. NULL when out of memory. */
dt__series_cache *dt__series_cache_new(size_t max_points);
void dt__series_cache_free(dt__series_cache *c);
/* The entry of the key, made empty when missing. NULL when out of memory. */
dt__series *dt__series_cache_get(dt__series_cache *c, int64_t trial_id, const char *kind,
                                 const char *name, const char *x);
/* Append a point; false (the entry unchanged) when out of memory. */
bool dt__series_push(dt__series *s, double x, double y);
/* Drop the entries of the trial and kind whose last batch is >= batches (a write there could
 * change what they hold). */
void dt__series_cache_invalidate(dt__series_cache *c, int64_t trial_id, const char *kind,
                                 int64_t batches);
/* Drop every entry. */
void dt__series_cache_clear(dt__series_cache *c);
/* Drop least recently used entries until the points fit the budget (an entry's kept encoding
 * counts as a point per 16 bytes). */
void dt__series_cache_trim(dt__series_cache *c);

/* ---- series_encode.c ---- */

/* Append {"trial_id","total","sampled","data":[[x,y],...]} to out, byte for byte what jansson's
 * compact encoder writes for it: every point when they fit in `points`, else the points
 * dt__series_sample picks ("sampled": true). Reuses (and keeps) the entry's last encoding when
 * points and the point count are unchanged. False when out of memory (out may have grown by a
 * part of the object). */
bool dt__series_text(dt__series *s, int64_t points, dt__buf *out);
/* The same points as dt__series_text, as little-endian binary64 (the charts' binary answer,
 * docs/api.md): trial_id, total, the count m sent, sampled (0 or 1), then m x and m y. False when
 * out of memory. */
bool dt__series_f64(const dt__series *s, int64_t points, dt__buf *out);
/* A chart's answer (malloc'd, *out_len bytes) from its header members (head: a compact JSON
 * object) and its series as dt_store_metric_series_text wrote them: JSON {...,"series":[...]},
 * or with f64 the binary form (docs/api.md): "DTCHART1", the header's length (u32,
 * little-endian), 4 zero bytes, the header padded with spaces to 8-byte alignment, then the
 * series' binary64 blocks. NULL when out of memory. */
char *dt__chart_frame(bool f64, const char *head, const char *series, size_t len, size_t *out_len);
/* The indices (ascending) of the points of a series of n (xs in batch order) sent for a chart
 * of at most `points` points: all of them when n <= points; else the first and the last, and
 * for each of (points - 2) / 2 equal spans of the x range the point of the minimum y and the
 * point of the maximum y among the others (one when they are the same), so spikes survive.
 * idx holds n or points + 2 entries, whichever is fewer; returns the count (<= points). */
size_t dt__series_sample(const double *xs, const double *ys, size_t n, int64_t points,
                         size_t *idx);
/* Write v as the API writes a real (dt_json_real_text: the shortest digits that read back,
 * ".0" on integral values) into buf; returns its length. v must be finite. */
int dt__real_text(double v, char buf[32]);

/* ---- series_rows.c: a number out of a stored row's text ---- */

/* A number in a stored metric row's JSON text (len bytes): the member `key` of the top object,
 * or with `sub` the member `sub` of that member's object. 1 and *out set when it is a number, 0
 * when it is missing, null or not a number, -1 when this scanner cannot tell (malformed text, or
 * a member name written with escapes): read the row another way then. */
int dt__row_number(const char *json, size_t len, const char *key, const char *sub, double *out);

/* ---- series_packed.c: the series packed in the store (schema 8) ---- */

/* After the metric rows of one write were stored (in its transaction): append their points to
 * the trial's packed series of each kind, or drop a kind's packed series when a row comes at or
 * before its last batch. An SQLite result code. */
int dt__packed_append(sqlite3 *db, int64_t trial_id, const json_t *rows);
/* Extend e (x = batches) from the packed series of its trial and kind: *packed false (e
 * unchanged) when they are not packed, so the rows must be read. An SQLite result code. */
int dt__packed_read(sqlite3 *db, dt__series *e, bool *packed);

#endif
