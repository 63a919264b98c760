/*
 * output.h — the one printer of the dtrain command.
 *
 * Three modes: a table with aligned columns and a header (stdout is a terminal), plain lines
 * with tab-separated fields and no header unless asked (a pipe or a file: for scripts), and
 * JSON (--json: the API's answer, pretty). Cells are JSON values rendered at print time, so a
 * number is rounded to 6 significant digits in a table and kept exact (the shortest form
 * that reads back to the same double) in plain lines, CSV and JSON. Times are shown in local
 * time as "YYYY-MM-DD HH:MM:SS", durations as "45s", "3m05s", "2h03m", "1d04h"; a missing
 * value is "-". Allocation failures print "out of memory" and exit(1) (this is src/cli).
 */
#ifndef DT_CLI_OUTPUT_H
#define DT_CLI_OUTPUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

typedef enum dt_cli_mode { DT_CLI_TABLE, DT_CLI_PLAIN, DT_CLI_JSON } dt_cli_mode;

/* Table cells longer than this (in characters) are cut, ending in "..."; plain never cuts. */
#define DT_CLI_MAX_CELL 60

/* --json wins; else a table when `f` is a terminal, else plain lines. */
dt_cli_mode dt_cli_mode_for(bool json, FILE *f);

typedef struct dt_cli_table dt_cli_table;

/* A table with `ncols` columns named `headers` (copied); headers NULL: a list of fields
 * (e.g. NAME VALUE rows of a `describe`), printed without a header in every mode. */
dt_cli_table *dt_cli_table_new(int ncols, const char *const *headers);
void dt_cli_table_free(dt_cli_table *t);
/* Start a new row; the cells that follow fill it left to right (missing ones print "-"). */
void dt_cli_table_row(dt_cli_table *t);
/* The next cell: a string (NULL: "-"), a printf-formatted string, or any JSON value
 * (borrowed; strings as is, numbers as the mode rounds them, null "-", objects and arrays
 * as compact JSON). */
void dt_cli_table_put(dt_cli_table *t, const char *s);
void dt_cli_table_putf(dt_cli_table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dt_cli_table_put_json(dt_cli_table *t, const json_t *v);
/* The next n cells: obj's members keys[0..n) as JSON values; or obj's member `key`, an ISO
 * 8601 time, in local time (dt_cli_fmt_time). */
void dt_cli_table_put_members(dt_cli_table *t, const json_t *obj, const char *const *keys,
                              size_t n);
void dt_cli_table_put_time(dt_cli_table *t, const json_t *obj, const char *key);
/* Rows of a list of fields: NAME then VALUE (a string), or for each of keys[0..n) the key
 * and obj's member of that name, or start_time, end_time and duration from obj's
 * "start_time" / "end_time". */
void dt_cli_field(dt_cli_table *t, const char *name, const char *value);
void dt_cli_fields(dt_cli_table *t, const json_t *obj, const char *const *keys, size_t n);
void dt_cli_fields_times(dt_cli_table *t, const json_t *obj);
/* Print in `mode` (DT_CLI_JSON prints plain lines: JSON output is the API's answer, through
 * dt_cli_print_json). `header`: plain lines start with the header row too. */
void dt_cli_table_print(const dt_cli_table *t, FILE *f, dt_cli_mode mode, bool header);

/* Pretty JSON with a final newline. */
void dt_cli_print_json(FILE *f, const json_t *v);

/* A JSON value as text in `mode` (malloc'd; see dt_cli_table_put_json). */
char *dt_cli_json_text(const json_t *v, dt_cli_mode mode);
/* A number: 6 significant digits (table), else the shortest exact form. buf of 32 bytes. */
const char *dt_cli_fmt_number(double v, dt_cli_mode mode, char *buf, size_t n);
/* A duration in seconds ("-" when negative or not finite). buf of 16 bytes. */
const char *dt_cli_fmt_duration(double seconds, char *buf, size_t n);
/* An ISO 8601 UTC time ("2024-05-01T12:03:04Z", fractions ignored) as epoch seconds; false
 * when `iso` is NULL or not of that form. */
bool dt_cli_parse_time(const char *iso, time_t *out);
/* An ISO 8601 UTC time in local time; "-" for NULL, the text itself when it does not parse.
 * buf of 24 bytes. */
const char *dt_cli_fmt_time(const char *iso, char *buf, size_t n);
/* The time from `start` to `end` (NULL: now) as a duration; "-" when start is missing. */
const char *dt_cli_fmt_span(const char *start, const char *end, char *buf, size_t n);

/* Metric rows ({"kind","batches","epochs","records","metrics":{...}}) as a table: batches,
 * epochs, records, kind, then one column per metric name in the order first seen. */
dt_cli_table *dt_cli_metrics_table(const json_t *rows);
/* The same as CSV: a header row, then one line per row; a metric a row lacks is empty;
 * fields with commas, quotes or line breaks are quoted. */
void dt_cli_metrics_csv(FILE *f, const json_t *rows);

#endif
