/*
 * snapshot.c — an experiment's model definition kept with it (docs/experiments.md): packed at
 * create (the model directory less its ignored files, plus the included paths, up to 96 MiB),
 * kept in the store (store_modeldef.h), unpacked into the experiment's own directory under the
 * master's home where it is built and run (exp_build.c), and handed back (GET
 * /api/v1/experiments/ID/model_def, dtrain experiment download-model-def). Trials never run
 * from the directory the user gave.
 */
#define _GNU_SOURCE
#include "api_impl.h"

#include "master/det_pack.h"
#include "master/snapshot.h"
#include "master/store_modeldef.h"

#include "base/base_impl.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The largest model definition an experiment keeps (the reference platform's limit). */
#define SNAPSHOT_LIMIT ((size_t)96 << 20)

dt_status m_snapshot_pack(const json_t *body, dt__buf *tar) {
    const char *dir = json_string_value(json_object_get(body, "model_dir"));
    if (!dir || dir[0] != '/') return dt_error(DT_ERR_CONFIG, "model_dir must be an absolute path");
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return dt_error(DT_ERR_CONFIG,
                        "model directory %s: %s; hint: pass the directory that "
                        "holds the trial's C sources",
                        dir, stat(dir, &sb) ? strerror(errno) : "not a directory");
    const json_t *inc = json_object_get(body, "include"), *v;
    size_t n = json_array_size(inc), i;
    const char **paths = calloc(n ? n : 1, sizeof *paths);
    if (!paths) return dt_error(DT_ERR_OOM, "out of memory");
    dt_status st = DT_OK;
    json_array_foreach(inc, i, v) {
        paths[i] = json_string_value(v);
        if (!paths[i] || paths[i][0] != '/')
            st = dt_error(DT_ERR_CONFIG, "include[%zu] must be an absolute path", i);
    }
    if (st == DT_OK) st = dt__tar_snapshot(dir, paths, (int)n, SNAPSHOT_LIMIT, tar);
    free(paths);
    return st;
}

/* Is `dir` a context directory of the master's home ($home/contexts/ctx-XXXXXX)? */
static bool own_context(const master *m, const char *dir) {
    char p[4200];
    snprintf(p, sizeof p, "%s/contexts/ctx-", m->home);
    return dir && !strncmp(dir, p, strlen(p)) && !strchr(dir + strlen(p), '/');
}

dt_status m_exp_create_from(master *m, const json_t *body, const dt__buf *given, int64_t *id,
                            json_t **warnings) {
    *warnings = NULL;
    dt__buf own = {0};
    const dt__buf *tar = given ? given : &own;
    char dir[4400];
    dt_status st = given ? DT_OK : m_snapshot_pack(body, &own);
    if (st == DT_OK) st = m_snapshot_unpack(m, tar->p, tar->len, dir, sizeof dir);
    if (st == DT_OK && (st = m_exp_create_at(m, body, dir, id, warnings)) != DT_OK)
        dt__tree_remove(dir);
    const char *cname = json_string_value(json_object_get(body, "config_name"));
    if (st == DT_OK &&
        ((st = dt_store_modeldef_put(m->store, *id, tar->p, tar->len)) != DT_OK ||
         (cname && (st = dt_store_exp_set_config_name(m->store, *id, cname)) != DT_OK))) {
        /* created but not kept whole: stopped before anything runs from it */
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", dt_last_error());
        m_exp *e = m_exp_find(m, *id);
        if (e) DT_KEEP_ERROR(m_exp_action(m, e, M_ACT_KILL));
        st = dt_error(st, "experiment %lld was stopped: %s", (long long)*id, msg);
        json_decref(*warnings);
        *warnings = NULL;
    }
    /* a context copied for this request (dtrain dsat --include) is not needed any more */
    const char *given_dir = json_string_value(json_object_get(body, "model_dir"));
    if (st == DT_OK && own_context(m, given_dir)) dt__tree_remove(given_dir);
    dt__buf_free(&own);
    return st;
}

static void model_def_of(master *m, int64_t id, const json_t *row, const dt_http_req *req,
                         dt_http_resp *resp) {
    (void)row, (void)req;
    void *tar = NULL;
    size_t len = 0;
    dt_status st = dt_store_modeldef_get(m->store, id, &tar, &len);
    dt__buf b64 = {0};
    if (st == DT_OK) {
        dt__base64_put(&b64, tar, len);
        dt__buf_put(&b64, "", 1);
        if (b64.oom) st = dt_error(DT_ERR_OOM, "out of memory packing the model definition");
    }
    if (st == DT_ERR_INVALID)
        dt_http_error(resp, 404, "%s", dt_last_error());
    else
        m_api_status(resp, st,
                     st == DT_OK ? json_pack("{sI,ss,sI}", "experiment_id", (json_int_t)id,
                                             "b64Tar", b64.p, "bytes", (json_int_t)len)
                                 : NULL);
    dt__buf_free(&b64);
    free(tar);
}

void m_api_experiment_model_def(void *app, const dt_http_req *req, dt_http_resp *resp) {
    m_api_read(app, req, resp, M_OWNER_EXPERIMENT, model_def_of);
}

dt_status dt_snapshot_write(const char *b64_tar, const char *dir) {
    if (!b64_tar || !dir) return dt_error(DT_ERR_INVALID, "dt_snapshot_write: NULL argument");
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        bool empty = true;
        while (empty && (e = readdir(d)))
            empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
        closedir(d);
        if (!empty)
            return dt_error(DT_ERR_INVALID,
                            "%s exists and is not empty; hint: give another "
                            "directory, or move that one away first",
                            dir);
    } else if (errno != ENOENT) {
        return dt_error(DT_ERR_INVALID, "%s: %s; hint: give a new directory's path", dir,
                        strerror(errno));
    }
    char failed[4400];
    int err = dt__mkdir_p(dir, failed, sizeof failed);
    if (err) return dt_error(DT_ERR_IO, "cannot create %s: %s", failed, strerror(err));
    dt__buf tar = {0};
    dt_status st = dt__base64_decode(b64_tar, &tar)
                       ? dt__tar_unpack(tar.p, tar.len, dir)
                       : dt_error(DT_ERR_FORMAT, "the model definition is not base64 text");
    dt__buf_free(&tar);
    return st;
}
