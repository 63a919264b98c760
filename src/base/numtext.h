/*
 * base/numtext.h — numbers as a person reads them and the one JSON writer (numtext.c): an
 * internal interface of the base layer to the master, the web UI and the CLI (not public API).
 */
#ifndef DT_BASE_NUMTEXT_H
#define DT_BASE_NUMTEXT_H

#include "dtrain/base.h"

#include <jansson.h>
#include <stddef.h>

/* v as the shortest decimal that strtod reads back as v ("0.003", "1e-05"; integral values
 * with all their digits, "100"; "nan", "inf", "-inf"): every number a person reads. Returns
 * the length written into buf. */
DT_API int dt_fmt_double(double v, char buf[32]);
/* v as a JSON real: dt_fmt_double's digits, ".0" when integral, the exponent as "e5" / "e-5";
 * "null" for nan and inf. Returns the length written into buf. */
DT_API int dt_json_real_text(double v, char buf[32]);
/* v as JSON text like json_dumps (flags: JSON_COMPACT, JSON_INDENT(n), JSON_SORT_KEYS; any value
 * at the top), each real by dt_json_real_text. malloc'd; NULL when out of memory. */
DT_API char *dt_json_dumps(const json_t *v, size_t flags);

#endif
