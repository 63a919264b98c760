/*
 * config.c — `dtrain config check CONFIG [MODEL_DIR]`: the validation experiment create and
 * train run (dt_expconf_load_file, then dt_expconf_check_model_dir when a model directory is
 * given), without a master. Exit 0 when the config would run: one "warning: FILE:LINE: ..." line
 * per key that has no effect here (and per unknown key), then the searcher's plan (for
 * adaptive_asha its brackets, rungs and trials per rung), then "ok: FILE". Exit 1 when it would
 * not: "FILE:LINE:COL: what is wrong; hint: what to do" on stderr. Exit 2: a usage error.
 */
#include "args.h"
#include "cli.h"

#include "dtrain/config.h"
#include "search/searcher.h"

#include <string.h>

static void config_usage(FILE *f) {
    fprintf(f, "usage: dtrain config check CONFIG.yaml [MODEL_DIR]\n"
               "  check an experiment config as experiment create and train do, without a\n"
               "  master: warnings for keys without effect here, the searcher's plan, and exit\n"
               "  code 0 (it would run) or 1 (it would not: FILE:LINE:COL: why; hint: ...).\n"
               "  With MODEL_DIR the model directory and its DeepSpeed config are checked too.\n");
}

/* "117, 468, 1875" from an array of integers. */
static void print_ints(const json_t *a) {
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) printf("%s%lld", i ? ", " : "", (long long)json_integer_value(v));
}

static void print_plan(const json_t *plan) {
    const char *unit = json_string_value(json_object_get(plan, "unit"));
    const json_t *brackets = json_object_get(plan, "brackets");
    printf("plan: %s", json_string_value(json_object_get(plan, "searcher")));
    if (json_object_get(plan, "trials"))
        printf(", %lld trial%s", (long long)json_integer_value(json_object_get(plan, "trials")),
               json_integer_value(json_object_get(plan, "trials")) == 1 ? "" : "s");
    if (unit)
        printf(", %s %lld %s", json_object_get(plan, "time_metric") ? "max_time" : "max_length",
               (long long)json_integer_value(json_object_get(plan, "length")), unit);
    if (brackets)
        printf(", %zu bracket%s", json_array_size(brackets),
               json_array_size(brackets) == 1 ? "" : "s");
    printf("\n");
    size_t k;
    json_t *b;
    json_array_foreach(brackets, k, b) {
        printf("  bracket %zu: %lld trials (%lld at once); rungs at ", k + 1,
               (long long)json_integer_value(json_object_get(b, "max_trials")),
               (long long)json_integer_value(json_object_get(b, "max_concurrent")));
        print_ints(json_object_get(b, "rungs"));
        printf(" %s; trials per rung ", unit ? unit : "");
        print_ints(json_object_get(b, "trials"));
        printf("\n");
    }
}

static int config_check(const char *path, const char *model_dir) {
    dt_log_set_level(DT_LOG_ERROR); /* the warnings are printed below, once */
    dt_expconf *cfg = NULL;
    if (dt_expconf_load_file(path, 0, &cfg) != DT_OK ||
        (model_dir && dt_expconf_check_model_dir(cfg, model_dir) != DT_OK)) {
        fprintf(stderr, "%s\n", dt_last_error());
        dt_expconf_free(cfg);
        return DT_EXIT_FAILED;
    }
    for (int i = 0; i < cfg->n_warnings; i++) printf("warning: %s\n", cfg->warnings[i]);
    json_t *plan = NULL;
    if (dt_searcher_plan(cfg, &plan) != DT_OK) {
        fprintf(stderr, "%s: %s\n", path, dt_last_error());
        dt_expconf_free(cfg);
        return DT_EXIT_FAILED;
    }
    print_plan(plan);
    json_decref(plan);
    printf("ok: %s would run%s%s\n", path, model_dir ? " with " : "", model_dir ? model_dir : "");
    dt_expconf_free(cfg);
    return DT_EXIT_OK;
}

int dt_cli_config(int argc, char **argv) {
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        config_usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? DT_EXIT_USAGE : DT_EXIT_OK;
    }
    if (strcmp(argv[0], "check"))
        return dt_cli_usage_error("dtrain config", "unknown verb (the verb is check)",
                                  config_usage);
    const char *pos[2];
    int rc, n = dt_cli_parse_verb("dtrain config check", config_usage, argc - 1, argv + 1, NULL, 0,
                                  pos, 1, 2, "CONFIG MODEL_DIR", &rc);
    return n < 0 ? rc : config_check(pos[0], n == 2 ? pos[1] : NULL);
}
