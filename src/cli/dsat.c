/* dsat.c — `dtrain dsat asha|binary|random CONFIG.yaml MODEL_DIR [flags]`: the DeepSpeed
 * autotuner. Checks every flag, submits the user's config with its searcher replaced by the
 * dsat search runner's (config overrides), follows the experiment's logs, then prints the
 * runner's log, the summary of every trial (or --json) and where the best config is; with
 * --run-full-experiment it then submits the user's experiment with that config (docs/dsat.md). */
#define _GNU_SOURCE
#include "args.h"
#include "cli.h"

#include "base/yaml.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define WHO "dtrain dsat"

static void usage(FILE *f) {
    fprintf(
        f, "usage: dtrain dsat asha|binary|random CONFIG.yaml MODEL_DIR [flags]\n"
           "  tunes the DeepSpeed config of an engine-based trial (hyperparameters.\n"
           "  deepspeed_config): a profile trial, then configurations the memory model says fit\n"
           "  --max-trials N (50)              trials in all, the profile trials included\n"
           "  --max-concurrent-trials N (16)   trials at once\n"
           "  --max-slots N                    slots the trials may use at once\n"
           "  --metric M (FLOPS_per_gpu)       FLOPS_per_gpu|throughput|forward|backward|latency\n"
           "  --zero-stages S... (1 2 3)       the ZeRO stages to search\n"
           "  --start-profile-step N (3)  --end-profile-step N (5)   the measured steps\n"
           "  --random-seed N (42)\n"
           "  --run-full-experiment            then run the config with the best DeepSpeed config\n"
           "  --include PATH                   a file or directory the trials get next to\n"
           "                                   MODEL_DIR's files (repeatable; copied)\n"
           "  --json                           the summary as JSON\n"
           "  asha:   --max-rungs N (5) --min-binary-search-trials N (3)\n"
           "          --asha-early-stopping N (0) --divisor N (2) --search-range-factor F (1.0)\n"
           "  binary: --search-range-factor F (1.0)\n"
           "  random: --trials-per-random-config N (5) --early-stopping N (0: never)\n");
}

enum {
    F_MAX_TRIALS,
    F_MAX_CONC,
    F_MAX_SLOTS,
    F_START,
    F_END,
    F_SEED,
    F_MAX_RUNGS,
    F_MIN_BST,
    F_ASHA_ES,
    F_DIVISOR,
    F_TPRC,
    F_ES,
    N_INT
};
static const struct {
    const char *flag, *key; /* key: searcher.dsat's (NULL: elsewhere) */
    long long lo, hi, def;  /* def 0 for --max-slots: no limit */
    const char *method;     /* the only method that takes it, or NULL */
} INTS[N_INT] = {
    {"--max-trials", NULL, 1, 100000, 50, NULL},
    {"--max-concurrent-trials", NULL, 1, 100000, 16, NULL},
    {"--max-slots", NULL, 1, 100000, 0, NULL},
    {"--start-profile-step", "start_profile_step", 1, 1000000, 3, NULL},
    {"--end-profile-step", "end_profile_step", 1, 1000000, 5, NULL},
    {"--random-seed", "random_seed", 0, INT_MAX, 42, NULL},
    {"--max-rungs", "max_rungs", 1, 64, 5, "asha"},
    {"--min-binary-search-trials", "min_binary_search_trials", 1, 100000, 3, "asha"},
    {"--asha-early-stopping", "asha_early_stopping", 0, 64, 0, "asha"},
    {"--divisor", "divisor", 2, 1024, 2, "asha"},
    {"--trials-per-random-config", "trials_per_random_config", 1, 100000, 5, "random"},
    {"--early-stopping", "early_stopping", 0, 100000, 0, "random"},
};
static const char *const METRICS[] = {"FLOPS_per_gpu", "throughput", "forward",
                                      "backward",      "latency",    NULL};
#define NOT_GIVEN LLONG_MIN

/* The parsed command line. */
typedef struct dsat_args {
    const char *method, *metric, *pos[2];
    long long v[N_INT];
    double factor;
    char stages[64]; /* a flow list: "[1, 2, 3]" */
    dt_cli_list zero, include;
    bool full, json;
} dsat_args;

/* --zero-stages takes the stage numbers after it. */
static bool is_digits(const char *s) {
    return *s && !s[strspn(s, "0123456789")];
}

/* --zero-stages' values as a flow list into a->stages; false with err. */
static bool stages_list(dsat_args *a, char *err, size_t errn) {
    int seen = 0;
    size_t at = (size_t)snprintf(a->stages, sizeof a->stages, "[");
    for (int k = 0; k < a->zero.n; k++) {
        const char *s = a->zero.v[k];
        int st = is_digits(s) && strlen(s) < 4 ? (int)strtol(s, NULL, 10) : -1;
        if (st < 0 || st > 3) {
            snprintf(err, errn,
                     "--zero-stages must be stages 0..3, e.g. --zero-stages 1 2 3; got '%s'", s);
            return false;
        }
        if (seen & (1 << st)) {
            snprintf(err, errn, "--zero-stages names stage %d twice", st);
            return false;
        }
        seen |= 1 << st;
        at += (size_t)snprintf(a->stages + at, sizeof a->stages - at, "%s%d", k ? ", " : "", st);
    }
    snprintf(a->stages + at, sizeof a->stages - at, "]");
    return true;
}

/* The values checked across flags: the method's own flags, the profile steps, the stages. */
static bool check_args(dsat_args *a, char *err, size_t errn) {
    for (int i = 0; i < N_INT; i++) {
        if (a->v[i] == NOT_GIVEN) {
            a->v[i] = INTS[i].def;
        } else if (INTS[i].method && strcmp(INTS[i].method, a->method)) {
            snprintf(err, errn, "%s is a flag of dtrain dsat %s, not %s", INTS[i].flag,
                     INTS[i].method, a->method);
            return false;
        }
    }
    if (a->v[F_END] < a->v[F_START]) {
        snprintf(err, errn, "--end-profile-step (%lld) is below --start-profile-step (%lld)",
                 a->v[F_END], a->v[F_START]);
        return false;
    }
    if (!isnan(a->factor) && !strcmp(a->method, "random")) {
        snprintf(err, errn, "--search-range-factor is a flag of asha and binary");
        return false;
    }
    if (isnan(a->factor)) a->factor = 1.0;
    if (!a->zero.n) return snprintf(a->stages, sizeof a->stages, "[1, 2, 3]"), true;
    return stages_list(a, err, errn);
}

/* The method and the flags into a: DT_EXIT_OK to go on, else the exit code (after printing
 * the usage error, or the usage for --help: then *done). */
static int parse_args(int argc, char **argv, dsat_args *a, bool *done) {
    char err[512];
    *a = (dsat_args){.method = argc ? argv[0] : NULL, .metric = "FLOPS_per_gpu", .factor = NAN};
    *done = argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h");
    if (*done) return usage(argc < 1 ? stderr : stdout), argc < 1 ? DT_EXIT_USAGE : DT_EXIT_OK;
    if (strcmp(a->method, "asha") && strcmp(a->method, "binary") && strcmp(a->method, "random")) {
        snprintf(err, sizeof err, "unknown method '%s': use asha, binary or random", a->method);
        return *done = true, dt_cli_usage_error(WHO, err, usage);
    }
    dt_cli_opt opts[N_INT + 6] = {
        {.name = "--metric", .value = &a->metric, .choices = METRICS},
        {.name = "--search-range-factor", .number = &a->factor, .hi = INFINITY, .above_lo = true},
        {.name = "--run-full-experiment", .flag = &a->full},
        {.name = "--json", .flag = &a->json},
        {.name = "--include", .list = &a->include},
        {.name = "--zero-stages", .list = &a->zero, .more = is_digits},
    };
    for (int i = 0; i < N_INT; i++) {
        a->v[i] = NOT_GIVEN;
        opts[6 + i] = (dt_cli_opt){.name = INTS[i].flag,
                                   .integer = &a->v[i],
                                   .lo = (double)INTS[i].lo,
                                   .hi = (double)INTS[i].hi};
    }
    int n = dt_cli_parse(argc - 1, argv + 1, opts, N_INT + 6, a->pos, 2, 2, "CONFIG MODEL_DIR", err,
                         sizeof err);
    *done = n < 0;
    if (n == DT_CLI_HELP) return usage(stdout), DT_EXIT_OK;
    if (n < 0 || !check_args(a, err, sizeof err))
        return *done = true, dt_cli_usage_error(WHO, err, usage);
    return DT_EXIT_OK;
}

/* The experiment's overrides: the dsat runner as its searcher with these settings, no
 * restarts, the slot limit. */
static json_t *overrides(const dsat_args *a) {
    int mi = 0;
    while (strcmp(a->metric, METRICS[mi])) mi++;
    char s[2048], *m = NULL;
    int k = snprintf(s, sizeof s,
                     "searcher={name: dsat, method: %s, metric: %s, smaller_is_better: %s, "
                     "max_trials: %lld, max_concurrent_trials: %lld, max_length: {batches: %lld}, "
                     "dsat: {zero_stages: %s, search_range_factor: %.17g",
                     a->method, a->metric, mi >= 2 ? "true" : "false", a->v[F_MAX_TRIALS],
                     a->v[F_MAX_CONC], a->v[F_END], a->stages, a->factor);
    for (int i = F_START; i < N_INT; i++)
        if (!INTS[i].method || !strcmp(INTS[i].method, a->method))
            k += snprintf(s + k, sizeof s - (size_t)k, ", %s: %lld", INTS[i].key, a->v[i]);
    snprintf(s + k, sizeof s - (size_t)k, "}}");
    json_t *ov = json_array();
    json_array_append_new(ov, json_string(s));
    /* a failed trial is a result of the search, not something to run again */
    json_array_append_new(ov, json_string("max_restarts=0"));
    if (a->v[F_MAX_SLOTS] && asprintf(&m, "resources.max_slots=%lld", a->v[F_MAX_SLOTS]) > 0)
        json_array_append_new(ov, json_string(m));
    free(m);
    return ov;
}

/* ---- the summary --------------------------------------------------------------------------- */

static json_t *load_json(const char *dir, const char *name) {
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return json_load_file(p, 0, NULL);
}

static void put_bytes(dt_cli_table *t, const json_t *v) {
    double b;
    if (dt_json_number(v, &b) && b > 0)
        dt_cli_table_putf(t, "%.1f MB", b / 1e6);
    else
        dt_cli_table_put(t, NULL);
}

static void print_trials(const json_t *summary, bool json) {
    if (json) {
        dt_cli_print_json(stdout, summary);
        return;
    }
    const char *hdr[] = {"REQUEST",   "KIND",     "STAGE",  "MBS",   "KNOBS",
                         "PREDICTED", "MEASURED", "METRIC", "RESULT"};
    dt_cli_table *t = dt_cli_table_new(9, hdr);
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(summary, "trials"), i, r) {
        const json_t *k = json_object_get(r, "knobs");
        dt_cli_table_row(t);
        dt_cli_table_put_json(t, json_object_get(r, "request_id"));
        dt_cli_table_put_json(t, json_object_get(r, "kind"));
        dt_cli_table_put_json(t, json_object_get(k, "zero_stage"));
        dt_cli_table_put_json(t, json_object_get(k, "mbs"));
        char knobs[256] = "";
        static const char *const B[] = {"overlap_comm", "reduce_scatter", "contiguous_gradients",
                                        "allgather_partitions"};
        static const char *const SHORT[] = {"oc", "rs", "cg", "ap"};
        double rb = 0, ab = 0;
        dt_json_number(json_object_get(k, "reduce_bucket_size"), &rb);
        dt_json_number(json_object_get(k, "allgather_bucket_size"), &ab);
        if (rb > 0) snprintf(knobs + strlen(knobs), sizeof knobs - strlen(knobs), "rb=%.0g ", rb);
        if (ab > 0) snprintf(knobs + strlen(knobs), sizeof knobs - strlen(knobs), "ab=%.0g ", ab);
        for (int b = 0; b < 4; b++) {
            json_int_t v = json_integer_value(json_object_get(k, B[b]));
            if (v >= 0)
                snprintf(knobs + strlen(knobs), sizeof knobs - strlen(knobs), "%s=%d ", SHORT[b],
                         (int)v);
        }
        if (json_is_true(json_object_get(k, "offload_optimizer")))
            snprintf(knobs + strlen(knobs), sizeof knobs - strlen(knobs), "offload ");
        if (knobs[0]) knobs[strlen(knobs) - 1] = 0;
        dt_cli_table_put(t, knobs[0] ? knobs : "-");
        put_bytes(t, json_object_get(r, "predicted_bytes"));
        put_bytes(t, json_object_get(r, "measured_bytes"));
        double mv;
        if (dt_json_number(json_object_get(r, "metric"), &mv))
            dt_cli_table_putf(t, "%.4g", mv);
        else
            dt_cli_table_put(t, NULL);
        dt_cli_table_put_json(t, json_object_get(r, "result"));
    }
    dt_cli_table_print(t, stdout, dt_cli_mode_for(false, stdout), true);
    dt_cli_table_free(t);
}

/* The runner's log, the trials and the files, from the experiment's checkpoint directory;
 * *dir gets it (malloc'd) for --run-full-experiment. */
static int print_summary(dt_client *c, int64_t id, bool json, char **dir) {
    char path[96];
    json_t *ans = NULL;
    snprintf(path, sizeof path, "/api/v1/experiments/%lld", (long long)id);
    int rc = dt_cli_request(c, WHO, "GET", path, NULL, &ans, NULL);
    if (rc) return rc;
    const char *d =
        json_string_value(json_object_get(json_object_get(ans, "experiment"), "checkpoint_dir"));
    *dir = d ? strdup(d) : NULL;
    json_decref(ans);
    json_t *summary = *dir ? load_json(*dir, "dsat_summary.json") : NULL;
    if (!summary) {
        fprintf(stderr,
                WHO ": error: the search runner left no summary%s%s\nhint: dtrain "
                    "experiment logs %lld shows what happened\n",
                *dir ? " in " : "", *dir ? *dir : "", (long long)id);
        return DT_EXIT_FAILED;
    }
    if (!json) {
        char p[PATH_MAX + 64], line[2048];
        snprintf(p, sizeof p, "%s/dsat.log", *dir);
        FILE *f = fopen(p, "r");
        while (f && fgets(line, sizeof line, f)) fputs(line, stdout);
        if (f) fclose(f);
    }
    print_trials(summary, json);
    json_decref(summary);
    json_t *best = load_json(*dir, "best_ds_metrics.json");
    if (!json && best)
        printf("best: request %lld, %s %g\n  %s/best_ds_config.json\n  %s/best_ds_metrics.json\n",
               (long long)json_integer_value(json_object_get(best, "request_id")),
               json_string_value(json_object_get(best, "metric")),
               json_number_value(json_object_get(best, "value")), *dir, *dir);
    else if (!json)
        printf("no trial succeeded: no best config (the trials' logs say why)\n");
    json_decref(best);
    return DT_EXIT_OK;
}

/* The user's experiment with the best DeepSpeed config, on its own copy of the model
 * directory and the included paths when there are any. */
static int run_full(const char *config, const char *model_dir, const char *const *include,
                    int n_include, const char *dir) {
    json_t *best = load_json(dir, "best_ds_config.json");
    if (!best) {
        fprintf(stderr, WHO ": error: --run-full-experiment: no best config in %s\n", dir);
        return DT_EXIT_FAILED;
    }
    char *ds = json_dumps(best, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(best);
    char *a = NULL;
    json_t *ov = json_array();
    if (ds && asprintf(&a, "hyperparameters.deepspeed_config={type: const, val: %s}", ds) > 0)
        json_array_append_new(ov, json_string(a));
    json_array_append_new(
        ov, json_string("hyperparameters.overwrite_deepspeed_args={type: const, val: {}}"));
    free(ds);
    free(a);
    char ctx[PATH_MAX], err[512];
    if (n_include &&
        !dt_cli_make_context(model_dir, include, n_include, ctx, sizeof ctx, err, sizeof err)) {
        json_decref(ov);
        fprintf(stderr, WHO " --run-full-experiment: error: %s\n", err);
        return DT_EXIT_FAILED;
    }
    dt_client *c = NULL;
    int64_t id = 0;
    int rc = dt_cli_create_experiment(WHO " --run-full-experiment", config,
                                      n_include ? ctx : model_dir, ov, true, &c, &id);
    json_decref(ov);
    if (rc && n_include) dt_cli_remove_tree(ctx);
    dt_client_free(c);
    if (!rc) printf("full experiment: %lld\n", (long long)id);
    return rc;
}

int dt_cli_dsat(int argc, char **argv) {
    dsat_args a;
    bool done;
    int rc = parse_args(argc, argv, &a, &done);
    if (done) return rc;
    json_t *ov = overrides(&a);
    /* with --include the experiment runs from a copy: MODEL_DIR plus the included paths */
    char ctx[PATH_MAX], err[512];
    const char *model_dir = a.pos[1];
    if (a.include.n && !dt_cli_make_context(a.pos[1], a.include.v, a.include.n, ctx, sizeof ctx,
                                            err, sizeof err)) {
        json_decref(ov);
        fprintf(stderr, WHO ": error: %s\nhint: nothing was submitted\n", err);
        return DT_EXIT_FAILED;
    }
    if (a.include.n) model_dir = ctx;
    dt_client *c = NULL;
    int64_t id = 0;
    rc = dt_cli_create_experiment(WHO, a.pos[0], model_dir, ov, true, &c, &id);
    json_decref(ov);
    if (rc && a.include.n) dt_cli_remove_tree(ctx); /* no experiment owns it */
    char *state = NULL, *dir = NULL;
    if (!rc) {
        printf("dsat page: %s/experiments/%lld/dsat\n", dt_client_url(c), (long long)id);
        fflush(stdout);
        rc = dt_cli_follow_experiment(c, WHO, id, &state);
    }
    if (!rc) {
        rc = print_summary(c, id, a.json, &dir);
        if (!rc && strcmp(state, "COMPLETED")) rc = DT_EXIT_FAILED;
        if (!rc && a.full) rc = run_full(a.pos[0], a.pos[1], a.include.v, a.include.n, dir);
    }
    free(state);
    free(dir);
    dt_client_free(c);
    return rc;
}
