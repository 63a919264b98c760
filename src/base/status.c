/* status.c — thread-local error state and log output. */
#include "dtrain/base.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
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
    case DT_ERR_INVALID_HP:
        return "invalid hyperparameters";
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

/* A size is a number, then an optional binary unit (K, M, G or T, any case, optionally followed
 * by "i" and then "B"). The number is digits, read exactly, or a decimal with a fraction or an
 * exponent, read as a double; either way the result must be a whole number of bytes in
 * [0, INT64_MAX]. So "0.1" (a tenth of a byte) is refused rather than rounded down to 0, which
 * callers read as "no budget". On a refusal returns -1 with DT_ERR_INVALID and the reason (the
 * caller names the field). */
int64_t dt_parse_bytes(const char *s) {
    if (!s || !*s) {
        dt_error(DT_ERR_INVALID, "the size is empty");
        return -1;
    }
    /* the number: no sign, space, hex, inf or nan, which strtod would also take */
    size_t span = strspn(s, "0123456789.eE+-");
    char *end = (char *)s;
    double v = 0;
    if ((*s >= '0' && *s <= '9') || *s == '.') {
        errno = 0;
        v = strtod(s, &end);
    }
    if (end == s || (size_t)(end - s) > span) {
        if (*s == '-')
            dt_error(DT_ERR_INVALID, "\"%s\" is negative: a size is 0 bytes or more", s);
        else
            dt_error(DT_ERR_INVALID, "\"%s\" is not a number of bytes", s);
        return -1;
    }
    bool underflow = errno == ERANGE && v < 1;
    const char *num_end = end;
    int shift = 0;
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    case 't':
    case 'T':
        shift = 40;
        break;
    }
    if (shift) {
        end++;
        if (*end == 'i' || *end == 'I') end++;
        if (*end == 'b' || *end == 'B') end++;
    }
    if (*end) {
        dt_error(DT_ERR_INVALID,
                 "\"%s\" has an unknown unit \"%s\" (the units are K, M, G and T, as in 512M or "
                 "2GiB)",
                 s, num_end);
        return -1;
    }
    if (strspn(s, "0123456789") == (size_t)(num_end - s)) { /* plain digits: exact */
        int64_t x = 0;
        bool big = false;
        for (const char *p = s; p < num_end && !big; p++)
            big = __builtin_mul_overflow(x, 10, &x) || __builtin_add_overflow(x, *p - '0', &x);
        if (!big && x <= INT64_MAX >> shift) return x << shift;
    } else {
        double b = v * (double)(1LL << shift); /* exact: a power of two */
        if (b < 0x1p63) {                      /* 2^63; also false for inf */
            int64_t x = (int64_t)b;
            if ((double)x == b && !underflow) return x;
            if (b < 1)
                dt_error(DT_ERR_INVALID,
                         "\"%s\" is less than one byte: not a whole number of bytes", s);
            else
                dt_error(DT_ERR_INVALID, "\"%s\" is %.2f bytes: not a whole number of bytes", s, b);
            return -1;
        }
    }
    dt_error(DT_ERR_INVALID, "\"%s\" is over the largest size, %lld bytes", s,
             (long long)INT64_MAX);
    return -1;
}
