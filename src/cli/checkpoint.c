/* checkpoint.c — `dtrain checkpoint list|describe|export|delete`: parses the arguments, calls the
 * master's REST API (docs/api.md), prints the answer (output.h), and for `export` copies the
 * checkpoint directory the master names into a new directory, checking every file the
 * checkpoint lists against its recorded size. An export that fails leaves nothing behind:
 * the copy is made under a temporary sibling name and renamed into place when verified.
 * `delete` asks the master, which refuses a checkpoint a model version or an active
 * experiment's warm start holds (docs/models.md). */
#include "args.h"
#include "cli.h"

#include "base/path.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WHO "dtrain checkpoint"

static void usage(FILE *f) {
    fprintf(f, "usage: dtrain checkpoint <verb> [args]\n"
               "  list EXP [--json]        the checkpoints of experiment EXP\n"
               "  describe UUID [--json]   one checkpoint and its files\n"
               "  export UUID DIR          copy it into DIR (new, or an empty directory)\n"
               "  delete UUID              remove its files and its record (refused while a\n"
               "                           model version or an active experiment holds it)\n");
}

/* Find the checkpoint `uuid` among every experiment's: *out = the checkpoint object. */
static int find_checkpoint(dt_client *c, const char *who, const char *uuid, json_t **out) {
    json_t *exps;
    *out = NULL;
    int rc = dt_cli_request(c, who, "GET", "/api/v1/experiments", NULL, &exps, NULL);
    if (rc) return rc;
    size_t i, j;
    json_t *e, *ck;
    json_array_foreach(json_object_get(exps, "experiments"), i, e) {
        char path[96];
        json_t *ans;
        snprintf(path, sizeof path, "/api/v1/experiments/%lld/checkpoints",
                 (long long)json_integer_value(json_object_get(e, "id")));
        if ((rc = dt_cli_request(c, who, "GET", path, NULL, &ans, NULL))) break;
        json_array_foreach(json_object_get(ans, "checkpoints"), j, ck) {
            const char *u = json_string_value(json_object_get(ck, "uuid"));
            if (u && !strcmp(u, uuid)) *out = json_incref(ck);
        }
        json_decref(ans);
        if (*out) break;
    }
    json_decref(exps);
    if (rc || *out) return rc;
    fprintf(stderr,
            "%s: error: no checkpoint has the uuid '%s'\nhint: dtrain checkpoint list "
            "EXP shows an experiment's checkpoints\n",
            who, uuid);
    return DT_EXIT_FAILED;
}

static int64_t resources_bytes(const json_t *ck) {
    int64_t sum = 0;
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(ck, "resources"), k, v) sum += json_integer_value(v);
    return sum;
}

void dt_cli_print_checkpoints(const json_t *ckpts, FILE *f, dt_cli_mode mode) {
    const char *hdr[] = {"UUID", "TRIAL", "BATCHES", "STATE", "VALIDATION", "BYTES", "REPORTED"};
    dt_cli_table *t = dt_cli_table_new(7, hdr);
    size_t i;
    json_t *ck;
    static const char *const keys[] = {"uuid", "trial_id", "batches", "state", "validation_metric"};
    json_array_foreach(ckpts, i, ck) {
        dt_cli_table_row(t);
        dt_cli_table_put_members(t, ck, keys, 5);
        dt_cli_table_putf(t, "%lld", (long long)resources_bytes(ck));
        dt_cli_table_put_time(t, ck, "report_time");
    }
    dt_cli_table_print(t, f, mode, false);
    dt_cli_table_free(t);
}

static void print_describe(const json_t *ck, dt_cli_mode mode) {
    static const char *const keys[] = {"uuid",  "experiment_id", "trial_id",         "batches",
                                       "state", "path",          "validation_metric"};
    dt_cli_table *t = dt_cli_table_new(2, NULL);
    char buf[32];
    dt_cli_fields(t, ck, keys, sizeof keys / sizeof *keys);
    dt_cli_field(
        t, "report_time",
        dt_cli_fmt_time(json_string_value(json_object_get(ck, "report_time")), buf, sizeof buf));
    dt_cli_table_row(t);
    dt_cli_table_put(t, "bytes");
    dt_cli_table_putf(t, "%lld", (long long)resources_bytes(ck));
    dt_cli_table_print(t, stdout, mode, false);
    dt_cli_table_free(t);

    const char *hdr[] = {"FILE", "BYTES"};
    t = dt_cli_table_new(2, hdr);
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(ck, "resources"), k, v) {
        dt_cli_table_row(t);
        dt_cli_table_put(t, k);
        dt_cli_table_put_json(t, v);
    }
    printf("\n");
    dt_cli_table_print(t, stdout, mode, false);
    dt_cli_table_free(t);
}

/* ---- export ---- */

/* Every file the checkpoint lists is in dir with its recorded size. */
static bool verify(const json_t *ck, const char *dir, char *err, size_t errn) {
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(ck, "resources"), k, v) {
        char p[PATH_MAX];
        struct stat sb;
        if (dt_path_within(dir, k, DT_PATH_NOFOLLOW, p, sizeof p) != DT_OK)
            return dt_cli_seterr(err, errn, "the checkpoint lists a file outside it: %s",
                                 dt_last_error()),
                   false;
        if (stat(p, &sb))
            return dt_cli_seterr(err, errn, "the checkpoint lists %s, which its directory lacks",
                                 k),
                   false;
        if (!json_is_integer(v) || sb.st_size != json_integer_value(v))
            return dt_cli_seterr(err, errn, "%s has %lld bytes, the checkpoint lists %lld", k,
                                 (long long)sb.st_size, (long long)json_integer_value(v)),
                   false;
    }
    return true;
}

static bool empty_dir(const char *path) {
    DIR *d = opendir(path);
    if (!d) return false;
    struct dirent *de;
    bool empty = true;
    while (empty && (de = readdir(d)))
        empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
    closedir(d);
    return empty;
}

static int export_ckpt(const json_t *ck, const char *uuid, const char *dir_arg) {
    const char *who = WHO " export";
    char err[PATH_MAX + 512], dir[PATH_MAX], tmp[PATH_MAX + 32];
    struct stat sb;
    const char *state = json_string_value(json_object_get(ck, "state"));
    const char *src = json_string_value(json_object_get(ck, "path"));
    if (!state || strcmp(state, "COMPLETED")) {
        fprintf(stderr,
                "%s: error: checkpoint %s is %s, its files are gone\nhint: export a "
                "COMPLETED checkpoint (dtrain checkpoint list EXP)\n",
                who, uuid, state ? state : "in no state");
        return DT_EXIT_FAILED;
    }
    if (!src || stat(src, &sb) || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr,
                "%s: error: the checkpoint directory %s is not on this machine\nhint: "
                "run the export where the master runs\n",
                who, src ? src : "(none)");
        return DT_EXIT_FAILED;
    }
    snprintf(dir, sizeof dir, "%s", dir_arg);
    for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--) dir[n - 1] = 0;
    if (!stat(dir, &sb) && (!S_ISDIR(sb.st_mode) || !empty_dir(dir))) {
        fprintf(stderr,
                "%s: error: %s exists and is not an empty directory\nhint: export into "
                "a new directory (nothing there was changed)\n",
                who, dir);
        return DT_EXIT_FAILED;
    }
    snprintf(tmp, sizeof tmp, "%s.partial-%d", dir, (int)getpid());
    if (mkdir(tmp, 0755)) {
        fprintf(stderr,
                "%s: error: cannot create %s: %s\nhint: export into a directory whose "
                "parent exists and is writable\n",
                who, tmp, strerror(errno));
        return DT_EXIT_FAILED;
    }
    int64_t files = 0;
    bool ok =
        dt_cli_copy_tree(src, tmp, &files, err, sizeof err) && verify(ck, tmp, err, sizeof err);
    if (ok && rename(tmp, dir)) {
        dt_cli_seterr(err, sizeof err, "cannot rename %s to %s: %s", tmp, dir, strerror(errno));
        ok = false;
    }
    if (!ok) {
        dt_cli_remove_tree(tmp);
        fprintf(stderr,
                "%s: error: %s\nhint: nothing was exported; check the checkpoint with "
                "dtrain checkpoint describe %s\n",
                who, err, uuid);
        return DT_EXIT_FAILED;
    }
    printf("exported checkpoint %s (%lld files, %lld bytes) to %s\n", uuid, (long long)files,
           (long long)resources_bytes(ck), dir);
    return DT_EXIT_OK;
}

/* ---- delete ---- */

static int delete_ckpt(dt_client *c, const char *who, const char *uuid) {
    char path[256];
    for (const char *p = uuid; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              *p == '-' || *p == '_')) {
            fprintf(stderr,
                    "%s: error: '%s' is not a checkpoint uuid\nhint: dtrain checkpoint list EXP "
                    "shows an experiment's checkpoints\n",
                    who, uuid);
            return DT_EXIT_FAILED;
        }
    snprintf(path, sizeof path, "/api/v1/checkpoints/%.200s", uuid);
    int rc = dt_cli_request(c, who, "DELETE", path, NULL, NULL, NULL);
    if (!rc) printf("checkpoint %s deleted\n", uuid);
    return rc;
}

int dt_cli_checkpoint(int argc, char **argv) {
    if (argc < 1) return dt_cli_usage_error(WHO, "missing the verb", usage);
    const char *v = argv[0];
    if (!strcmp(v, "--help") || !strcmp(v, "-h") || !strcmp(v, "help"))
        return usage(stdout), DT_EXIT_OK;
    int k = !strcmp(v, "list")       ? 0
            : !strcmp(v, "describe") ? 1
            : !strcmp(v, "export")   ? 2
            : !strcmp(v, "delete")   ? 3
                                     : -1;
    char err[512], who[64];
    if (k < 0) {
        dt_cli_seterr(err, sizeof err, "unknown verb '%s'", v);
        return dt_cli_usage_error(WHO, err, usage);
    }
    snprintf(who, sizeof who, WHO " %s", v);
    bool json = false;
    const char *pos[2];
    dt_cli_opt opts[] = {{.name = "--json", .flag = &json}};
    int n = dt_cli_parse(argc - 1, argv + 1, opts, k < 2, pos, k == 2 ? 2 : 1, k == 2 ? 2 : 1,
                         k == 0   ? "EXP"
                         : k == 3 ? "UUID"
                                  : "UUID DIR",
                         err, sizeof err);
    if (n == DT_CLI_HELP) return usage(stdout), DT_EXIT_OK;
    int64_t id = 0;
    if (n < 0 || (k == 0 && !dt_cli_parse_id(pos[0], "the experiment ID", &id, err, sizeof err)))
        return dt_cli_usage_error(who, err, usage);
    dt_client *c = dt_cli_connect(who, true);
    if (!c) return DT_EXIT_UNREACHABLE;
    dt_cli_mode mode = dt_cli_mode_for(json, stdout);
    json_t *ans = NULL;
    int rc;
    if (k == 0) {
        char path[96];
        snprintf(path, sizeof path, "/api/v1/experiments/%lld/checkpoints", (long long)id);
        rc = dt_cli_show(c, who, path, "dtrain experiment list shows the experiments and their ids",
                         "checkpoints", mode, dt_cli_print_checkpoints);
    } else if (k == 3) {
        rc = delete_ckpt(c, who, pos[0]);
    } else {
        rc = find_checkpoint(c, who, pos[0], &ans);
        if (!rc && k == 2) {
            rc = export_ckpt(ans, pos[0], pos[1]);
        } else if (!rc && mode == DT_CLI_JSON) {
            json_t *o = json_pack("{s:O}", "checkpoint", ans);
            dt_cli_print_json(stdout, o);
            json_decref(o);
        } else if (!rc) {
            print_describe(ans, mode);
        }
    }
    json_decref(ans);
    dt_client_free(c);
    return rc;
}
