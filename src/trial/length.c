/* length.c — training lengths: their names, the command-line form ("100b", "5e", "20000r"),
 * their rendering, and the one conversion of a length to batches that the experiment config
 * (src/config/expconf.c) and the fit loop (fit.c) both use.
 *
 * The rounding rule is Determined's: records become floor(records / global batch size)
 * batches (a partial batch is dropped, never added); epochs are the training loader's batches
 * per epoch when known, else records_per_epoch records converted as records. The callers
 * differ only in what a non-zero length under one batch means (dt_length_min, trial.h). */
#include "dtrain/trial.h"

#include <stdio.h>
#include <string.h>

const char *dt_unit_name(dt_unit u) {
    switch (u) {
    case DT_UNIT_BATCHES:
        return "batches";
    case DT_UNIT_EPOCHS:
        return "epochs";
    case DT_UNIT_RECORDS:
        return "records";
    }
    return "?";
}

dt_status dt_length_parse(const char *s, dt_length *out) {
    const char *hint = "hint: write 100b (batches), 5e (epochs) or 20000r (records)";
    if (!s) return dt_error(DT_ERR_CONFIG, "no length given; %s", hint);
    const char *p = s;
    while (*p == ' ' || *p == '\t') p++;
    if (*p < '0' || *p > '9') return dt_error(DT_ERR_CONFIG, "bad length \"%s\"; %s", s, hint);
    int64_t n = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (__builtin_mul_overflow(n, 10, &n) || __builtin_add_overflow(n, *p - '0', &n))
            return dt_error(DT_ERR_CONFIG, "length \"%s\" is too large", s);
    }
    while (*p == ' ' || *p == '\t') p++;
    char suffix[16];
    size_t k = 0;
    while (*p && *p != ' ' && *p != '\t' && k + 1 < sizeof suffix) {
        char c = *p++;
        suffix[k++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    suffix[k] = 0;
    while (*p == ' ' || *p == '\t') p++;
    static const char *const names[3][4] = {{"", "b", "batch", "batches"},
                                            {"e", "epoch", "epochs", NULL},
                                            {"r", "record", "records", NULL}};
    int unit = -1;
    for (int u = 0; u < 3 && unit < 0; u++)
        for (int i = 0; i < 4 && names[u][i]; i++)
            if (!strcmp(suffix, names[u][i])) unit = u;
    if (*p || unit < 0) return dt_error(DT_ERR_CONFIG, "bad length \"%s\"; %s", s, hint);
    if (n <= 0) return dt_error(DT_ERR_CONFIG, "length \"%s\" must be positive", s);
    *out = (dt_length){(dt_unit)unit, n};
    return DT_OK;
}

const char *dt_length_format(dt_length len, char *buf, size_t n) {
    if (len.n <= 0) {
        snprintf(buf, n, "(unset)");
        return buf;
    }
    const char *u = dt_unit_name(len.unit);
    if (len.n == 1)
        snprintf(buf, n, "1 %.*s", (int)strlen(u) - (len.unit == DT_UNIT_BATCHES ? 2 : 1), u);
    else
        snprintf(buf, n, "%lld %s", (long long)len.n, u);
    return buf;
}

dt_status dt_length_batches(dt_length len, const dt_length_scale *scale, dt_length_min min,
                            const char *what, int64_t *out) {
    char f[64];
    if (!what) what = "the length";
    *out = 0;
    if (len.n <= 0) return DT_OK;
    if (len.unit == DT_UNIT_BATCHES) {
        *out = len.n;
        return DT_OK;
    }
    if (len.unit != DT_UNIT_RECORDS && len.unit != DT_UNIT_EPOCHS)
        return dt_error(DT_ERR_INVALID, "%s: invalid length unit %d", what, (int)len.unit);
    if (len.unit == DT_UNIT_EPOCHS && scale->batches_per_epoch > 0) {
        /* epochs counted by the training loader: exact */
        int64_t b;
        if (__builtin_mul_overflow(len.n, scale->batches_per_epoch, &b))
            return dt_error(DT_ERR_CONFIG, "%s: %s of %lld batches overflows", what,
                            dt_length_format(len, f, sizeof f),
                            (long long)scale->batches_per_epoch);
        *out = b;
        return DT_OK;
    }
    int64_t gbs = scale->global_batch_size;
    if (gbs <= 0)
        return dt_error(DT_ERR_CONFIG,
                        "%s is %s, which needs the global batch size to count batches; hint: set "
                        "hyperparameters.global_batch_size, or give the length in batches",
                        what, dt_length_format(len, f, sizeof f));
    int64_t records = len.n;
    if (len.unit == DT_UNIT_EPOCHS) {
        if (scale->records_per_epoch <= 0)
            return dt_error(DT_ERR_CONFIG,
                            "%s is %s, which needs records_per_epoch to count batches; hint: set "
                            "records_per_epoch at the top level of the config, or give the "
                            "length in batches or records",
                            what, dt_length_format(len, f, sizeof f));
        if (__builtin_mul_overflow(len.n, scale->records_per_epoch, &records))
            return dt_error(DT_ERR_CONFIG, "%s: %s of %lld records overflows", what,
                            dt_length_format(len, f, sizeof f),
                            (long long)scale->records_per_epoch);
    }
    int64_t b = records / gbs; /* Determined truncates */
    if (b == 0 && min == DT_LENGTH_MIN_ONE) b = 1;
    if (b == 0)
        return dt_error(DT_ERR_CONFIG,
                        "%s is %s = %lld records, less than one batch of %lld; hint: give a "
                        "longer length or a smaller global_batch_size",
                        what, dt_length_format(len, f, sizeof f), (long long)records,
                        (long long)gbs);
    *out = b;
    return DT_OK;
}

dt_status dt_length_to_batches(dt_length len, int64_t global_batch_size, int64_t records_per_epoch,
                               const char *what, int64_t *out) {
    dt_length_scale s = {.global_batch_size = global_batch_size,
                         .records_per_epoch = records_per_epoch};
    return dt_length_batches(len, &s, DT_LENGTH_MIN_ERROR, what, out);
}
