/* trial.c — `dtrain trial list|describe|logs|metrics|kill`: parses the arguments, calls the
 * master's REST API (docs/api.md) and prints the answer (output.h). */
#include "args.h"
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#define WHO "dtrain trial"
#define ID_HINT "dtrain experiment describe EXP shows the trials of an experiment"

static void usage(FILE *f) {
    fprintf(f, "usage: dtrain trial <verb> [args]\n"
               "  list EXP [--json]       the trials of experiment EXP\n"
               "  describe ID [--json]    a trial and its checkpoints\n"
               "  logs ID [--follow]      its log lines (every rank)\n"
               "  metrics ID [--kind training|validation|profiler] [--csv | --json]\n"
               "                          its metrics, one row per report\n"
               "  kill ID                 stop it at once\n");
}

void dt_cli_print_trials(const json_t *trials, FILE *f, dt_cli_mode mode) {
    const char *hdr[] = {"ID", "STATE", "BATCHES", "BEST VALIDATION", "RESTARTS", "HPARAMS"};
    dt_cli_table *t = dt_cli_table_new(6, hdr);
    size_t i;
    json_t *tr;
    json_array_foreach(trials, i, tr) {
        dt_cli_table_row(t);
        dt_cli_table_put_json(t, json_object_get(tr, "id"));
        dt_cli_table_put_json(t, json_object_get(tr, "state"));
        json_t *b = json_object_get(tr, "batches"), *tb = json_object_get(tr, "total_batches");
        if (json_is_integer(tb) && json_integer_value(tb) > 0)
            dt_cli_table_putf(t, "%lld/%lld", (long long)json_integer_value(b),
                              (long long)json_integer_value(tb));
        else
            dt_cli_table_put_json(t, b);
        dt_cli_table_put_json(t, json_object_get(tr, "best_validation"));
        dt_cli_table_put_json(t, json_object_get(tr, "restarts"));
        dt_cli_table_put_json(t, json_object_get(tr, "hparams"));
    }
    dt_cli_table_print(t, f, mode, false);
    dt_cli_table_free(t);
}

static void print_trial(const json_t *tr, dt_cli_mode mode) {
    static const char *const keys[] = {
        "id",         "experiment_id", "state",         "hparams",         "seed",
        "restarts",   "batches",       "total_batches", "best_validation", "latest_checkpoint",
        "exit_reason"};
    dt_cli_table *t = dt_cli_table_new(2, NULL);
    dt_cli_fields(t, tr, keys, sizeof keys / sizeof *keys);
    dt_cli_fields_times(t, tr);
    dt_cli_table_print(t, stdout, mode, false);
    dt_cli_table_free(t);
}

int dt_cli_trial(int argc, char **argv) {
    static const char *const verbs[] = {"list", "describe", "logs", "metrics", "kill"};
    if (argc < 1) return dt_cli_usage_error(WHO, "missing the verb", usage);
    const char *v = argv[0];
    if (!strcmp(v, "--help") || !strcmp(v, "-h") || !strcmp(v, "help"))
        return usage(stdout), DT_EXIT_OK;
    size_t k = 0;
    while (k < sizeof verbs / sizeof *verbs && strcmp(v, verbs[k])) k++;
    char err[512], who[64], path[160];
    if (k == sizeof verbs / sizeof *verbs) {
        snprintf(err, sizeof err, "unknown verb '%s'", v);
        return dt_cli_usage_error(WHO, err, usage);
    }
    snprintf(who, sizeof who, WHO " %s", v);
    bool json = false, follow = false, csv = false;
    const char *kind = NULL, *pos[1];
    dt_cli_opt opts[] = {{.name = "--json", .flag = &json},
                         {.name = "--follow", .flag = &follow},
                         {.name = "--csv", .flag = &csv},
                         {.name = "--kind", .value = &kind}};
    /* which options each verb takes */
    const dt_cli_opt *o = opts;
    int n_opts = 1;
    if (!strcmp(v, "logs")) o = opts + 1;
    if (!strcmp(v, "metrics")) n_opts = 4;
    if (!strcmp(v, "kill")) n_opts = 0;
    int n =
        dt_cli_parse(argc - 1, argv + 1, o, n_opts, pos, 1, 1, k ? "ID" : "EXP", err, sizeof err);
    if (n == DT_CLI_HELP) return usage(stdout), DT_EXIT_OK;
    int64_t id;
    if (n < 0 ||
        !dt_cli_parse_id(pos[0], k ? "the trial ID" : "the experiment ID", &id, err, sizeof err))
        return dt_cli_usage_error(who, err, usage);
    if (kind && strcmp(kind, "training") && strcmp(kind, "validation") && strcmp(kind, "profiler"))
        return snprintf(err, sizeof err,
                        "--kind must be training, validation or profiler, got '%s'", kind),
               dt_cli_usage_error(who, err, usage);
    if (csv && json) return dt_cli_usage_error(who, "--csv and --json do not go together", usage);

    dt_client *c = dt_cli_connect(who, true);
    if (!c) return DT_EXIT_UNREACHABLE;
    dt_cli_mode mode = dt_cli_mode_for(json, stdout);
    json_t *ans = NULL, *more = NULL;
    int rc;
    if (k == 0) { /* list */
        snprintf(path, sizeof path, "/api/v1/experiments/%lld/trials", (long long)id);
        rc = dt_cli_show(c, who, path, "dtrain experiment list shows the experiments and their ids",
                         "trials", mode, dt_cli_print_trials);
    } else if (k == 1) { /* describe: the trial, then its checkpoints */
        snprintf(path, sizeof path, "/api/v1/trials/%lld", (long long)id);
        rc = dt_cli_request(c, who, "GET", path, NULL, &ans, ID_HINT);
        snprintf(path, sizeof path, "/api/v1/trials/%lld/checkpoints", (long long)id);
        if (!rc) rc = dt_cli_request(c, who, "GET", path, NULL, &more, ID_HINT);
        if (!rc && mode == DT_CLI_JSON) {
            json_object_set(ans, "checkpoints", json_object_get(more, "checkpoints"));
            dt_cli_print_json(stdout, ans);
        } else if (!rc) {
            print_trial(json_object_get(ans, "trial"), mode);
            printf("\n");
            dt_cli_print_checkpoints(json_object_get(more, "checkpoints"), stdout, mode);
        }
    } else if (k == 2) { /* logs */
        snprintf(path, sizeof path, "/api/v1/trials/%lld/logs", (long long)id);
        rc = dt_cli_print_logs(c, who, path, follow, false);
    } else if (k == 3) { /* metrics */
        snprintf(path, sizeof path, "/api/v1/trials/%lld/metrics%s%s", (long long)id,
                 kind ? "?kind=" : "", kind ? kind : "");
        rc = dt_cli_request(c, who, "GET", path, NULL, &ans, ID_HINT);
        json_t *rows = json_object_get(ans, "metrics");
        if (!rc && csv) {
            dt_cli_metrics_csv(stdout, rows);
        } else if (!rc && mode == DT_CLI_JSON) {
            dt_cli_print_json(stdout, ans);
        } else if (!rc) {
            dt_cli_table *t = dt_cli_metrics_table(rows);
            dt_cli_table_print(t, stdout, mode, false);
            dt_cli_table_free(t);
        }
    } else { /* kill */
        snprintf(path, sizeof path, "/api/v1/trials/%lld/kill", (long long)id);
        rc = dt_cli_change(c, who, path, ID_HINT, "trial", id);
    }
    json_decref(ans);
    json_decref(more);
    dt_client_free(c);
    return rc;
}
