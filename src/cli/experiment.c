/* experiment.c — `dtrain experiment create|list|describe|logs|pause|activate|cancel|kill|
 * delete|wait|list-trials|download-model-def`: parses the arguments, calls the master's REST
 * API (docs/api.md) and prints the answer (output.h). */
#define _GNU_SOURCE
#include "args.h"
#include "base/numtext.h"
#include "cli.h"

#include "base/yaml.h"
#include "master/snapshot.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define WHO "dtrain experiment"
#define ID_HINT "dtrain experiment list shows the experiments and their ids"

static void usage(FILE *f) {
    fprintf(f, "usage: dtrain experiment <verb> [args]\n"
               "  create CONFIG.yaml MODEL_DIR [--include PATH ...] [--config KEY=VALUE ...]\n"
               "         [--paused] [--follow]\n"
               "                       submit an experiment; MODEL_DIR (less what its\n"
               "                       .dtrainignore leaves out) and each --include PATH are\n"
               "                       kept with it, up to 96 MiB (--follow: stream its logs,\n"
               "                       then exit 0 only if it COMPLETED)\n"
               "  list [--json]        every experiment, newest first\n"
               "  describe ID [--json] the experiment and its trials\n"
               "  logs ID [--follow]   the logs of its trials\n"
               "  pause ID | activate ID | cancel ID | kill ID | delete ID\n"
               "  wait ID              until it ends: exit 0 COMPLETED, 1 ERROR, 2 CANCELED\n"
               "  list-trials ID [--json]  its trials (as dtrain trial list ID)\n"
               "  download-model-def ID [DIR]  the files it was created from, into DIR\n"
               "                       (default ./experiment_ID_model_def; not an existing\n"
               "                       non-empty one)\n");
}

/* Read a whole file (malloc'd, NUL-terminated); NULL with errno. */
static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (cap - n < 4096) {
            char *nb = realloc(buf, cap = cap * 2 + 8192);
            if (!nb) {
                free(buf);
                fclose(f);
                return errno = ENOMEM, NULL;
            }
            buf = nb;
        }
        got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
    } while (got);
    int err = ferror(f) ? EIO : 0;
    fclose(f);
    if (err) return free(buf), errno = err, NULL;
    buf[n] = 0;
    *len = n;
    return buf;
}

/* After --follow: the best trial's hyperparameters and last validation metrics, and the
 * commands to look further. Nothing when the experiment has no validated trial. */
static void print_summary(dt_client *c, int64_t id) {
    char path[96];
    json_t *ans = NULL, *rows = NULL, *t, *best = NULL;
    snprintf(path, sizeof path, "/api/v1/experiments/%lld", (long long)id);
    if (dt_client_call(c, "GET", path, NULL, &ans, NULL) != DT_OK) return;
    const json_t *e = json_object_get(ans, "experiment");
    bool smaller = !json_is_false(json_object_get(e, "smaller_is_better"));
    const char *metric = json_string_value(json_object_get(e, "searcher_metric"));
    size_t i;
    double bv = 0;
    json_array_foreach(json_object_get(ans, "trials"), i, t) {
        double v;
        if (!dt_json_number(json_object_get(t, "best_validation"), &v)) continue;
        if (!best || (smaller ? v < bv : v > bv)) best = t, bv = v;
    }
    if (best) {
        int64_t tid = json_integer_value(json_object_get(best, "id"));
        char bvs[32];
        dt_fmt_double(bv, bvs);
        printf("best trial %lld: %s %s after %lld batches\n", (long long)tid,
               metric ? metric : "metric", bvs,
               (long long)json_integer_value(json_object_get(best, "batches")));
        char *hp = dt_json_dumps(json_object_get(best, "hparams"), JSON_COMPACT | JSON_SORT_KEYS);
        if (hp) printf("  hyperparameters: %s\n", hp);
        free(hp);
        snprintf(path, sizeof path, "/api/v1/trials/%lld/metrics?kind=validation", (long long)tid);
        if (dt_client_call(c, "GET", path, NULL, &rows, NULL) == DT_OK) {
            json_t *ms = json_object_get(rows, "metrics");
            json_t *last = json_array_get(ms, json_array_size(ms) - 1);
            char *mj = last ? dt_json_dumps(json_object_get(last, "metrics"), JSON_COMPACT) : NULL;
            if (mj)
                printf("  last validation (batch %lld): %s\n",
                       (long long)json_integer_value(json_object_get(last, "batches")), mj);
            free(mj);
            json_decref(rows);
        }
        printf("look further:\n  dtrain experiment describe %lld\n  dtrain trial metrics %lld "
               "--kind validation\n  dtrain checkpoint list %lld\n",
               (long long)id, (long long)tid, (long long)id);
    }
    printf("  dtrain master stop     (the master keeps running in the background)\n");
    json_decref(ans);
}

/* The absolute paths of the --include arguments into a JSON array; NULL after printing the
 * error for one that does not exist. */
static json_t *include_paths(const char *who, const dt_cli_list *include) {
    json_t *a = json_array();
    for (int i = 0; include && i < include->n; i++) {
        char p[PATH_MAX];
        if (!realpath(include->v[i], p)) {
            fprintf(stderr,
                    "%s: error: --include '%s': %s\nhint: give a file or directory "
                    "that exists\n",
                    who, include->v[i], strerror(errno));
            return json_decref(a), NULL;
        }
        json_array_append_new(a, json_string(p));
    }
    return a;
}

/* dt_cli_create_experiment with the paths to keep beside the model directory's files. */
static int create_with(const char *who, const char *config_path, const char *model_dir,
                       const dt_cli_list *include, const json_t *overrides, bool activate,
                       dt_client **client, int64_t *id) {
    *client = NULL;
    size_t len;
    char *text = read_file(config_path, &len);
    if (!text) {
        fprintf(stderr,
                "%s: error: cannot read the config '%s': %s\nhint: give the "
                "path of the experiment's YAML config\n",
                who, config_path, strerror(errno));
        return DT_EXIT_FAILED;
    }
    char dir[PATH_MAX];
    struct stat sb;
    if (!realpath(model_dir, dir) || stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr,
                "%s: error: the model directory '%s' %s\nhint: give the "
                "directory with the model's sources (its entrypoint)\n",
                who, model_dir, errno ? strerror(errno) : "is not a directory");
        free(text);
        return DT_EXIT_FAILED;
    }
    json_t *inc = include_paths(who, include);
    if (!inc) return free(text), DT_EXIT_FAILED;
    json_t *body = json_pack("{s:s%,s:s,s:s,s:o,s:O,s:b}", "config_text", text, len, "config_name",
                             config_path, "model_dir", dir, "include", inc, "overrides", overrides,
                             "activate", activate);
    free(text);
    if (!body) {
        fprintf(stderr, "%s: error: the config '%s' is not UTF-8 text\nhint: save it as UTF-8\n",
                who, config_path);
        return DT_EXIT_FAILED;
    }
    dt_client *c = dt_cli_connect(who, true);
    if (!c) return json_decref(body), DT_EXIT_UNREACHABLE;
    json_t *ans;
    int rc = dt_cli_request(c, who, "POST", "/api/v1/experiments", body, &ans,
                            "fix the config and submit it again");
    json_decref(body);
    if (rc) return dt_client_free(c), rc;
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(ans, "warnings"), i, w)
        fprintf(stderr, "warning: %s\n", json_string_value(w) ? json_string_value(w) : "");
    *id = json_integer_value(json_object_get(ans, "id"));
    json_decref(ans);
    printf("created experiment %lld\nsee it at %s/experiments/%lld\n", (long long)*id,
           dt_client_url(c), (long long)*id);
    fflush(stdout);
    *client = c;
    return DT_EXIT_OK;
}

int dt_cli_follow_experiment(dt_client *c, const char *who, int64_t id, char **state) {
    char path[96];
    snprintf(path, sizeof path, "/api/v1/experiments/%lld/logs", (long long)id);
    int rc = dt_cli_print_logs(c, who, path, true, true);
    if (!rc) rc = dt_cli_wait_experiment(c, who, id, state);
    if (!rc) fprintf(stderr, "experiment %lld: %s\n", (long long)id, *state);
    return rc;
}

int dt_cli_create_experiment(const char *who, const char *config_path, const char *model_dir,
                             const json_t *overrides, bool activate, dt_client **client,
                             int64_t *id) {
    return create_with(who, config_path, model_dir, NULL, overrides, activate, client, id);
}

static int create(int argc, char **argv) {
    bool follow = false, paused = false;
    dt_cli_list overrides = {0}, include = {0};
    const char *pos[2];
    char err[1024];
    dt_cli_opt opts[] = {{.name = "--follow", .flag = &follow},
                         {.name = "--paused", .flag = &paused},
                         {.name = "--config", .list = &overrides},
                         {.name = "--include", .list = &include}};
    int n = dt_cli_parse(argc, argv, opts, 4, pos, 2, 2, "CONFIG MODEL_DIR", err, sizeof err);
    if (n == DT_CLI_HELP) return usage(stdout), DT_EXIT_OK;
    if (n < 0) return dt_cli_usage_error(WHO " create", err, usage);
    for (int i = 0; i < overrides.n; i++)
        if (!dt_cli_check_override(overrides.v[i], err, sizeof err))
            return dt_cli_usage_error(WHO " create", err, usage);

    json_t *ov = json_array();
    for (int i = 0; i < overrides.n; i++) json_array_append_new(ov, json_string(overrides.v[i]));
    dt_client *c = NULL;
    int64_t id = 0;
    int rc = create_with(WHO " create", pos[0], pos[1], &include, ov, !paused, &c, &id);
    json_decref(ov);
    if (rc) return dt_client_free(c), rc;
    if (follow) {
        char *state = NULL;
        rc = dt_cli_follow_experiment(c, WHO " create", id, &state);
        if (!rc) {
            rc = strcmp(state, "COMPLETED") ? DT_EXIT_FAILED : DT_EXIT_OK;
            print_summary(c, id);
        }
        free(state);
    }
    dt_client_free(c);
    return rc;
}

static void put_progress(dt_cli_table *t, const json_t *e) {
    double p;
    if (dt_json_number(json_object_get(e, "progress"), &p))
        dt_cli_table_putf(t, "%.0f%%", p * 100);
    else
        dt_cli_table_put(t, NULL);
}

static void print_list(const json_t *ans, dt_cli_mode mode) {
    const char *hdr[] = {"ID", "NAME", "STATE", "PROGRESS", "TRIALS", "BEST", "START", "DURATION"};
    dt_cli_table *t = dt_cli_table_new(8, hdr);
    size_t i;
    json_t *e;
    char buf[32];
    json_array_foreach(json_object_get(ans, "experiments"), i, e) {
        static const char *const first[] = {"id", "name", "state"}, *const rest[] = {"num_trials",
                                                                                     "best_metric"};
        dt_cli_table_row(t);
        dt_cli_table_put_members(t, e, first, 3);
        put_progress(t, e);
        dt_cli_table_put_members(t, e, rest, 2);
        const char *st = json_string_value(json_object_get(e, "start_time"));
        dt_cli_table_put(t, dt_cli_fmt_time(st, buf, sizeof buf));
        dt_cli_table_put(t, dt_cli_fmt_span(st, json_string_value(json_object_get(e, "end_time")),
                                            buf, sizeof buf));
    }
    dt_cli_table_print(t, stdout, mode, false);
    dt_cli_table_free(t);
}

static void print_describe(const json_t *ans, dt_cli_mode mode) {
    const json_t *e = json_object_get(ans, "experiment");
    dt_cli_table *t = dt_cli_table_new(2, NULL);
    static const char *const keys[] = {
        "id",         "name",       "description",     "state",
        "model_dir",  "num_trials", "searcher_metric", "smaller_is_better",
        "best_metric"};
    dt_cli_fields(t, e, keys, sizeof keys / sizeof *keys);
    dt_cli_table_row(t);
    dt_cli_table_put(t, "progress");
    put_progress(t, e);
    dt_cli_fields_times(t, e);
    dt_cli_table_print(t, stdout, mode, false);
    dt_cli_table_free(t);
    printf("\n");
    dt_cli_print_trials(json_object_get(ans, "trials"), stdout, mode);
}

/* The verbs that take one experiment ID: GET or POST one route, print the answer. */
static int one_id(const char *verb, int argc, char **argv) {
    bool json = false, follow = false;
    const char *pos[1];
    char err[512], who[64], path[128];
    snprintf(who, sizeof who, WHO " %s", verb);
    bool lists = !strcmp(verb, "describe") || !strcmp(verb, "list-trials");
    bool logs = !strcmp(verb, "logs");
    dt_cli_opt opts[] = {{.name = "--json", .flag = &json}, {.name = "--follow", .flag = &follow}};
    int n = dt_cli_parse(argc, argv, opts + (lists ? 0 : 1), lists || logs ? 1 : 0, pos, 1, 1, "ID",
                         err, sizeof err);
    if (n == DT_CLI_HELP) return usage(stdout), DT_EXIT_OK;
    int64_t id;
    if (n < 0 || !dt_cli_parse_id(pos[0], "the experiment ID", &id, err, sizeof err))
        return dt_cli_usage_error(who, err, usage);
    dt_client *c = dt_cli_connect(who, true);
    if (!c) return DT_EXIT_UNREACHABLE;
    int rc;
    json_t *ans = NULL;
    const char *base = "/api/v1/experiments";
    dt_cli_mode mode = dt_cli_mode_for(json, stdout);
    if (logs) {
        snprintf(path, sizeof path, "%s/%lld/logs", base, (long long)id);
        rc = dt_cli_print_logs(c, who, path, follow, true);
    } else if (!strcmp(verb, "wait")) {
        char *state = NULL;
        rc = dt_cli_wait_experiment(c, who, id, &state);
        if (!rc) {
            printf("experiment %lld: %s\n", (long long)id, state);
            rc = !strcmp(state, "COMPLETED") ? 0 : !strcmp(state, "ERROR") ? 1 : 2;
        }
        free(state);
    } else if (lists) {
        bool trials = !strcmp(verb, "list-trials");
        snprintf(path, sizeof path, "%s/%lld%s", base, (long long)id, trials ? "/trials" : "");
        rc = dt_cli_request(c, who, "GET", path, NULL, &ans, ID_HINT);
        if (!rc && mode == DT_CLI_JSON)
            dt_cli_print_json(stdout, ans);
        else if (!rc && trials)
            dt_cli_print_trials(json_object_get(ans, "trials"), stdout, mode);
        else if (!rc)
            print_describe(ans, mode);
    } else if (!strcmp(verb, "delete")) {
        snprintf(path, sizeof path, "%s/%lld", base, (long long)id);
        rc = dt_cli_request(c, who, "DELETE", path, NULL, NULL,
                            "only an ended experiment can be deleted: kill it first");
        if (!rc) printf("deleted experiment %lld\n", (long long)id);
    } else { /* pause, activate, cancel, kill */
        snprintf(path, sizeof path, "%s/%lld/%s", base, (long long)id, verb);
        rc = dt_cli_change(c, who, path, ID_HINT, "experiment", id);
    }
    json_decref(ans);
    dt_client_free(c);
    return rc;
}

/* download-model-def ID [DIR]: the experiment's kept files written into DIR. */
static int download_model_def(int argc, char **argv) {
    const char *pos[2] = {NULL, NULL}, *who = WHO " download-model-def";
    char err[512], path[128], dir[PATH_MAX];
    int n = dt_cli_parse(argc, argv, NULL, 0, pos, 1, 2, "ID [DIR]", err, sizeof err);
    if (n == DT_CLI_HELP) return usage(stdout), DT_EXIT_OK;
    int64_t id;
    if (n < 0 || !dt_cli_parse_id(pos[0], "the experiment ID", &id, err, sizeof err))
        return dt_cli_usage_error(who, err, usage);
    if (n > 1 && pos[1])
        snprintf(dir, sizeof dir, "%s", pos[1]);
    else
        snprintf(dir, sizeof dir, "experiment_%lld_model_def", (long long)id);
    dt_client *c = dt_cli_connect(who, true);
    if (!c) return DT_EXIT_UNREACHABLE;
    json_t *ans = NULL;
    snprintf(path, sizeof path, "/api/v1/experiments/%lld/model_def", (long long)id);
    int rc = dt_cli_request(c, who, "GET", path, NULL, &ans, ID_HINT);
    if (!rc && dt_snapshot_write(json_string_value(json_object_get(ans, "b64Tar")), dir) != DT_OK) {
        fprintf(stderr, "%s: error: %s\n", who, dt_last_error());
        rc = DT_EXIT_FAILED;
    } else if (!rc) {
        printf("wrote the model definition of experiment %lld into %s\n", (long long)id, dir);
    }
    json_decref(ans);
    dt_client_free(c);
    return rc;
}

static int list(int argc, char **argv) {
    bool json = false;
    char err[256];
    dt_cli_opt opts[] = {{.name = "--json", .flag = &json}};
    int n = dt_cli_parse(argc, argv, opts, 1, NULL, 0, 0, "", err, sizeof err);
    if (n == DT_CLI_HELP) return usage(stdout), DT_EXIT_OK;
    if (n < 0) return dt_cli_usage_error(WHO " list", err, usage);
    dt_client *c = dt_cli_connect(WHO " list", true);
    if (!c) return DT_EXIT_UNREACHABLE;
    json_t *ans;
    int rc = dt_cli_request(c, WHO " list", "GET", "/api/v1/experiments", NULL, &ans, NULL);
    if (!rc) {
        dt_cli_mode mode = dt_cli_mode_for(json, stdout);
        if (mode == DT_CLI_JSON)
            dt_cli_print_json(stdout, ans);
        else
            print_list(ans, mode);
        json_decref(ans);
    }
    dt_client_free(c);
    return rc;
}

int dt_cli_experiment(int argc, char **argv) {
    static const char *const one[] = {"describe", "logs",   "pause", "activate",   "cancel",
                                      "kill",     "delete", "wait",  "list-trials"};
    if (argc < 1) return dt_cli_usage_error(WHO, "missing the verb", usage);
    const char *v = argv[0];
    if (!strcmp(v, "--help") || !strcmp(v, "-h") || !strcmp(v, "help"))
        return usage(stdout), DT_EXIT_OK;
    if (!strcmp(v, "create")) return create(argc - 1, argv + 1);
    if (!strcmp(v, "list")) return list(argc - 1, argv + 1);
    if (!strcmp(v, "download-model-def")) return download_model_def(argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof one / sizeof *one; i++)
        if (!strcmp(v, one[i])) return one_id(v, argc - 1, argv + 1);
    char err[128];
    snprintf(err, sizeof err, "unknown verb '%s'", v);
    return dt_cli_usage_error(WHO, err, usage);
}
