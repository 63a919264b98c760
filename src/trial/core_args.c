/* core_args.c — the Core API's local fallback configured from a program's command line, the
 * flags every hand-written loop offers when it runs without a master. */
#include "dtrain/core.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

dt_status dt_core_init_args(dt_core_init_opts *o, int *argc, char **argv) {
    if (!o || !argc || (*argc > 0 && !argv))
        return dt_error(DT_ERR_INVALID, "dt_core_init_args: needs options and argc/argv");
    int kept = *argc > 0 ? 1 : 0;
    for (int i = kept; i < *argc; i++) {
        const char *a = argv[i];
        bool valued = !strcmp(a, "--max-batches") || !strcmp(a, "--checkpoint-dir") ||
                      !strcmp(a, "--metrics-out");
        if (valued && i + 1 >= *argc)
            return dt_error(DT_ERR_CONFIG, "%s needs a value; hint: %s %s", a, a,
                            !strcmp(a, "--max-batches") ? "N" : "PATH");
        if (!strcmp(a, "--max-batches")) {
            char *end;
            errno = 0;
            long long n = strtoll(argv[++i], &end, 10);
            if (errno || *end || end == argv[i] || n < 1)
                return dt_error(DT_ERR_CONFIG, "--max-batches %s: not a positive integer", argv[i]);
            o->max_length = (dt_length){DT_UNIT_BATCHES, n};
        } else if (!strcmp(a, "--checkpoint-dir")) {
            o->checkpoint_dir = argv[++i];
        } else if (!strcmp(a, "--metrics-out")) {
            o->metrics_out = argv[++i];
        } else if (!strcmp(a, "--resume")) {
            o->resume = true;
        } else if (!strcmp(a, "--quiet")) {
            o->quiet = true;
        } else {
            argv[kept++] = argv[i];
        }
    }
    if (*argc > kept) argv[kept] = NULL;
    *argc = kept;
    return DT_OK;
}
