/* model.c — `dtrain model create|register-version|list|describe`: the model registry
 * (docs/models.md) through the master's REST API. A verb is a row of VERBS (its positional
 * arguments and options) and a function; the master checks names, uuids and states and its
 * messages carry the hints. */
#include "args.h"
#include "cli.h"

#include "base/path.h"

#include <stdlib.h>
#include <string.h>

#define WHO "dtrain model"

static void usage(FILE *f) {
    fprintf(f,
            "usage: dtrain model <verb> [args]\n"
            "  create NAME [--description TEXT] [--label L]...  a new model in the registry\n"
            "  register-version NAME CHECKPOINT_UUID          the checkpoint as its next version\n"
            "  list [--json]                                  the models\n"
            "  describe NAME [--json]                         a model and its versions\n"
            "A checkpoint a version names is never deleted (GC or dtrain checkpoint delete).\n");
}

/* The parsed arguments of one verb. */
typedef struct model_args {
    const char *who;
    const char *pos[2];
    const char *description;
    dt_cli_list labels;
    dt_cli_mode mode;
} model_args;

static void print_models(const json_t *models, FILE *f, dt_cli_mode mode) {
    const char *hdr[] = {"NAME", "VERSIONS", "DESCRIPTION", "LABELS", "UPDATED"};
    dt_cli_table *t = dt_cli_table_new(5, hdr);
    size_t i;
    json_t *m;
    static const char *const keys[] = {"name", "num_versions", "description", "labels"};
    json_array_foreach(models, i, m) {
        dt_cli_table_row(t);
        dt_cli_table_put_members(t, m, keys, 4);
        dt_cli_table_put_time(t, m, "last_updated");
    }
    dt_cli_table_print(t, f, mode, false);
    dt_cli_table_free(t);
}

/* A version's checkpoint state: "MISSING" when its row is gone (its experiment deleted). */
static const char *ckpt_state(const json_t *v) {
    const char *s = json_string_value(json_object_get(v, "checkpoint_state"));
    return s ? s : "MISSING";
}

static void print_describe(const json_t *ans, dt_cli_mode mode) {
    static const char *const keys[] = {"name", "description", "labels", "num_versions"};
    const json_t *model = json_object_get(ans, "model");
    dt_cli_table *t = dt_cli_table_new(2, NULL);
    dt_cli_fields(t, model, keys, sizeof keys / sizeof *keys);
    dt_cli_table_row(t);
    dt_cli_table_put(t, "creation_time");
    dt_cli_table_put_time(t, model, "creation_time");
    dt_cli_table_print(t, stdout, mode, false);
    dt_cli_table_free(t);

    const char *hdr[] = {"VERSION", "CHECKPOINT", "STATE",   "EXPERIMENT",
                         "TRIAL",   "BATCHES",    "METRICS", "REGISTERED"};
    t = dt_cli_table_new(8, hdr);
    size_t i;
    json_t *v;
    static const char *const first[] = {"version", "checkpoint_uuid"}, *const rest[] = {
                                                                           "experiment_id",
                                                                           "trial_id", "batches",
                                                                           "metrics"};
    json_array_foreach(json_object_get(ans, "versions"), i, v) {
        dt_cli_table_row(t);
        dt_cli_table_put_members(t, v, first, 2);
        dt_cli_table_put(t, ckpt_state(v));
        dt_cli_table_put_members(t, v, rest, 4);
        dt_cli_table_put_time(t, v, "creation_time");
    }
    printf("\n");
    dt_cli_table_print(t, stdout, mode, false);
    dt_cli_table_free(t);
}

static int do_create(dt_client *c, const model_args *a) {
    json_t *labels = json_array();
    for (int k = 0; k < a->labels.n; k++)
        json_array_append_new(labels, json_string(a->labels.v[k]));
    json_t *body = json_pack("{s:s,s:s,s:o}", "name", a->pos[0], "description",
                             a->description ? a->description : "", "labels", labels);
    json_t *ans = NULL;
    int rc = dt_cli_request(c, a->who, "POST", "/api/v1/models", body, &ans,
                            "dtrain model list shows the models");
    if (!rc) printf("model %s created\n", a->pos[0]);
    json_decref(body);
    json_decref(ans);
    return rc;
}

/* A name whose encoding does not fit a request path (the master refuses far shorter ones). */
static int name_too_long(const model_args *a) {
    fprintf(stderr, "%s: error: the model name is too long; hint: model names are short words\n",
            a->who);
    return 1;
}

static int do_register(dt_client *c, const model_args *a) {
    char name[512] = "", path[600];
    if (!dt_url_encode(name, sizeof name, a->pos[0])) return name_too_long(a);
    snprintf(path, sizeof path, "/api/v1/models/%s/versions", name);
    json_t *body = json_pack("{s:s}", "checkpoint_uuid", a->pos[1]), *ans = NULL;
    int rc = dt_cli_request(c, a->who, "POST", path, body, &ans,
                            "dtrain checkpoint list EXP shows an experiment's checkpoints");
    const json_t *v = json_object_get(ans, "version");
    if (!rc)
        printf("model %s version %lld: checkpoint %s (experiment %lld, trial %lld, batches "
               "%lld)\n",
               a->pos[0], (long long)json_integer_value(json_object_get(v, "version")), a->pos[1],
               (long long)json_integer_value(json_object_get(v, "experiment_id")),
               (long long)json_integer_value(json_object_get(v, "trial_id")),
               (long long)json_integer_value(json_object_get(v, "batches")));
    json_decref(body);
    json_decref(ans);
    return rc;
}

static int do_list(dt_client *c, const model_args *a) {
    return dt_cli_show(c, a->who, "/api/v1/models", NULL, "models", a->mode, print_models);
}

static int do_describe(dt_client *c, const model_args *a) {
    char name[512] = "", path[600];
    if (!dt_url_encode(name, sizeof name, a->pos[0])) return name_too_long(a);
    snprintf(path, sizeof path, "/api/v1/models/%s", name);
    json_t *ans = NULL;
    int rc = dt_cli_request(c, a->who, "GET", path, NULL, &ans, "dtrain model list shows them");
    if (!rc && a->mode == DT_CLI_JSON)
        dt_cli_print_json(stdout, ans);
    else if (!rc)
        print_describe(ans, a->mode);
    json_decref(ans);
    return rc;
}

static const struct verb {
    const char *name, *pos_names;
    int n_pos;
    bool create_opts, json;
    int (*run)(dt_client *c, const model_args *a);
} VERBS[] = {
    {"create", "NAME", 1, true, false, do_create},
    {"register-version", "NAME CHECKPOINT_UUID", 2, false, false, do_register},
    {"list", "", 0, false, true, do_list},
    {"describe", "NAME", 1, false, true, do_describe},
};

int dt_cli_model(int argc, char **argv) {
    int rc;
    char who[DT_CLI_WHO_MAX];
    const struct verb *v = dt_cli_pick_verb(WHO, usage, argc, argv, VERBS,
                                            sizeof VERBS / sizeof *VERBS, sizeof *VERBS, who, &rc);
    if (!v) return rc;
    model_args a = {.who = who};
    bool json = false;
    dt_cli_opt opts[2] = {{.name = "--json", .flag = &json}};
    if (v->create_opts) {
        opts[0] = (dt_cli_opt){.name = "--description", .value = &a.description};
        opts[1] = (dt_cli_opt){.name = "--label", .list = &a.labels};
    }
    if (dt_cli_parse_verb(who, usage, argc - 1, argv + 1, opts, v->create_opts ? 2 : v->json, a.pos,
                          v->n_pos, v->n_pos, v->pos_names, &rc) < 0)
        return rc;
    a.mode = dt_cli_mode_for(json, stdout);
    dt_client *c = dt_cli_connect(who, true);
    if (!c) return DT_EXIT_UNREACHABLE;
    rc = v->run(c, &a);
    dt_client_free(c);
    return rc;
}
