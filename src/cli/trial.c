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
        static const char *const first[] = {"id", "state"}, *const rest[] = {"best_validation",
                                                                             "restarts", "hparams"};
        dt_cli_table_row(t);
        dt_cli_table_put_members(t, tr, first, 2);
        json_t *b = json_object_get(tr, "batches"), *tb = json_object_get(tr, "total_batches");
        if (json_is_integer(tb) && json_integer_value(tb) > 0)
            dt_cli_table_putf(t, "%lld/%lld", (long long)json_integer_value(b),
                              (long long)json_integer_value(tb));
        else
            dt_cli_table_put_json(t, b);
        dt_cli_table_put_members(t, tr, rest, 3);
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

/* The parsed arguments of one verb. */
typedef struct trial_args {
    const char *who, *kind;
    int64_t id;
    bool follow, csv;
    dt_cli_mode mode;
} trial_args;

/* "/api/v1/trials/ID" and `tail` into path. */
static const char *trial_path(char *path, size_t n, int64_t id, const char *tail) {
    snprintf(path, n, "/api/v1/trials/%lld%s", (long long)id, tail);
    return path;
}

static int do_list(dt_client *c, const trial_args *a) {
    char path[96];
    snprintf(path, sizeof path, "/api/v1/experiments/%lld/trials", (long long)a->id);
    return dt_cli_show(c, a->who, path,
                       "dtrain experiment list shows the experiments and their ids", "trials",
                       a->mode, dt_cli_print_trials);
}

/* The trial, then its checkpoints. */
static int do_describe(dt_client *c, const trial_args *a) {
    char path[96];
    json_t *ans = NULL, *more = NULL;
    int rc = dt_cli_request(c, a->who, "GET", trial_path(path, sizeof path, a->id, ""), NULL, &ans,
                            ID_HINT);
    trial_path(path, sizeof path, a->id, "/checkpoints");
    if (!rc) rc = dt_cli_request(c, a->who, "GET", path, NULL, &more, ID_HINT);
    if (!rc && a->mode == DT_CLI_JSON) {
        json_object_set(ans, "checkpoints", json_object_get(more, "checkpoints"));
        dt_cli_print_json(stdout, ans);
    } else if (!rc) {
        print_trial(json_object_get(ans, "trial"), a->mode);
        printf("\n");
        dt_cli_print_checkpoints(json_object_get(more, "checkpoints"), stdout, a->mode);
    }
    json_decref(ans);
    json_decref(more);
    return rc;
}

static int do_logs(dt_client *c, const trial_args *a) {
    char path[96];
    return dt_cli_print_logs(c, a->who, trial_path(path, sizeof path, a->id, "/logs"), a->follow,
                             false);
}

static int do_metrics(dt_client *c, const trial_args *a) {
    char path[160], tail[64];
    json_t *ans = NULL;
    snprintf(tail, sizeof tail, "/metrics%s%s", a->kind ? "?kind=" : "", a->kind ? a->kind : "");
    int rc = dt_cli_request(c, a->who, "GET", trial_path(path, sizeof path, a->id, tail), NULL,
                            &ans, ID_HINT);
    json_t *rows = json_object_get(ans, "metrics");
    if (!rc && a->csv) {
        dt_cli_metrics_csv(stdout, rows);
    } else if (!rc && a->mode == DT_CLI_JSON) {
        dt_cli_print_json(stdout, ans);
    } else if (!rc) {
        dt_cli_table *t = dt_cli_metrics_table(rows);
        dt_cli_table_print(t, stdout, a->mode, false);
        dt_cli_table_free(t);
    }
    json_decref(ans);
    return rc;
}

static int do_kill(dt_client *c, const trial_args *a) {
    char path[96];
    return dt_cli_change(c, a->who, trial_path(path, sizeof path, a->id, "/kill"), ID_HINT, "trial",
                         a->id);
}

/* The options a verb takes: bits of OPTS' rows. */
enum { O_JSON = 1, O_FOLLOW = 2, O_CSV = 4, O_KIND = 8 };

static const struct verb {
    const char *name, *pos_name, *id_what;
    unsigned opts;
    int (*run)(dt_client *c, const trial_args *a);
} VERBS[] = {
    {"list", "EXP", "the experiment ID", O_JSON, do_list},
    {"describe", "ID", "the trial ID", O_JSON, do_describe},
    {"logs", "ID", "the trial ID", O_FOLLOW, do_logs},
    {"metrics", "ID", "the trial ID", O_JSON | O_CSV | O_KIND, do_metrics},
    {"kill", "ID", "the trial ID", 0, do_kill},
};

/* The verb's arguments into a; true to go on, else false with *rc (the exit code). */
static bool parse(const struct verb *v, int argc, char **argv, trial_args *a, int *rc) {
    static const char *const KINDS[] = {"training", "validation", "profiler", NULL};
    bool json = false;
    const char *pos[1];
    char err[512];
    const dt_cli_opt all[] = {{.name = "--json", .flag = &json},
                              {.name = "--follow", .flag = &a->follow},
                              {.name = "--csv", .flag = &a->csv},
                              {.name = "--kind", .value = &a->kind, .choices = KINDS}};
    dt_cli_opt opts[4];
    int n_opts = 0;
    for (int k = 0; k < 4; k++)
        if (v->opts & (1u << k)) opts[n_opts++] = all[k];
    if (dt_cli_parse_verb(a->who, usage, argc, argv, opts, n_opts, pos, 1, 1, v->pos_name, rc) < 0)
        return false;
    if (!dt_cli_parse_id(pos[0], v->id_what, &a->id, err, sizeof err))
        return *rc = dt_cli_usage_error(a->who, err, usage), false;
    if (a->csv && json)
        return *rc = dt_cli_usage_error(a->who, "--csv and --json do not go together", usage),
               false;
    a->mode = dt_cli_mode_for(json, stdout);
    return true;
}

int dt_cli_trial(int argc, char **argv) {
    int rc;
    char who[DT_CLI_WHO_MAX];
    trial_args a = {.who = who};
    const struct verb *v = dt_cli_pick_verb(WHO, usage, argc, argv, VERBS,
                                            sizeof VERBS / sizeof *VERBS, sizeof *VERBS, who, &rc);
    if (!v || !parse(v, argc - 1, argv + 1, &a, &rc)) return rc;
    dt_client *c = dt_cli_connect(who, true);
    if (!c) return DT_EXIT_UNREACHABLE;
    rc = v->run(c, &a);
    dt_client_free(c);
    return rc;
}
