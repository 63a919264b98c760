/* status.c — thread-local error state and log output. */
#include "dtrain/base.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char tl_msg[1024];
static _Thread_local dt_status tl_status;

const char *dt_last_error(void) {
    return tl_msg;
}
dt_status dt_last_status(void) {
    return tl_status;
}

dt_status dt_error(dt_status st, const char *fmt, ...) {
    /* format into a local buffer first: the arguments may include dt_last_error() itself */
    char buf[sizeof tl_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    memcpy(tl_msg, buf, sizeof buf);
    tl_status = st;
    return st;
}

void dt_clear_error(void) {
    tl_msg[0] = 0;
    tl_status = DT_OK;
}

void dt_error_save(dt_error_saved *s) {
    _Static_assert(sizeof s->msg == sizeof tl_msg, "a saved message holds a whole one");
    memcpy(s->msg, tl_msg, sizeof tl_msg);
    s->status = tl_status;
}

dt_status dt_error_restore(const dt_error_saved *s) {
    memcpy(tl_msg, s->msg, sizeof tl_msg);
    tl_status = s->status;
    return s->status;
}

const char *dt_status_name(dt_status st) {
    switch (st) {
    case DT_OK:
        return "ok";
    case DT_ERR_INVALID:
        return "invalid argument";
    case DT_ERR_OOM:
        return "out of memory";
    case DT_ERR_CONFIG:
        return "configuration error";
    case DT_ERR_IO:
        return "i/o error";
    case DT_ERR_COMM:
        return "communication error";
    case DT_ERR_FORMAT:
        return "format error";
    case DT_ERR_STATE:
        return "invalid state";
    }
    return "unknown";
}

/* The log level is process-wide configuration set once at start-up, not mutable state of a
 * computation; it is read without synchronisation. */
static dt_log_level g_level = DT_LOG_INFO;

void dt_log_set_level(dt_log_level lvl) {
    g_level = lvl;
}

void dt_log(dt_log_level lvl, const char *fmt, ...) {
    if (lvl < g_level) return;
    static const char *names[] = {"debug", "info", "warning", "error"};
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "dtrain: %s: %s\n", names[lvl], buf);
}

int64_t dt_parse_bytes(const char *s) {
    if (!s || !*s) return -1;
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0) return -1;
    double mul = 1;
    switch (*end) {
    case 0:
        break;
    case 'k':
    case 'K':
        mul = 1024.0;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1024.0 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1024.0 * 1024 * 1024;
        end++;
        break;
    case 't':
    case 'T':
        mul = 1024.0 * 1024 * 1024 * 1024;
        end++;
        break;
    default:
        return -1;
    }
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'b' || *end == 'B') end++;
    if (*end) return -1;
    return (int64_t)(v * mul);
}
