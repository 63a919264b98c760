/*
 * exp_build.c — an experiment's own model directory and build (master_impl.h): its kept model
 * definition unpacked under the master's home, built there once for all its trials, and after
 * a restart unpacked and built again when that directory or build is gone.
 */
#define _GNU_SOURCE
#include "master_impl.h"

#include "master/det_pack.h"
#include "master/store_modeldef.h"

#include "base/base_impl.h"
#include "launch/launch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

dt_status m_snapshot_unpack(master *m, const void *tar, size_t len, char *dir, size_t n) {
    char failed[4400];
    snprintf(dir, n, "%s/contexts", m->home);
    int err = dt__mkdir_p(dir, failed, sizeof failed);
    if (err) return dt_error(DT_ERR_IO, "cannot create %s: %s", failed, strerror(err));
    snprintf(dir, n, "%s/contexts/ctx-XXXXXX", m->home);
    if (!mkdtemp(dir)) return dt_error(DT_ERR_IO, "cannot create %s: %s", dir, strerror(errno));
    dt_status st = dt__tar_unpack(tar, len, dir);
    if (st != DT_OK) dt__tree_remove(dir);
    return st;
}

dt_status m_exp_build(master *m, int64_t id, const char *dir, const dt_expconf *cfg, char *so,
                      size_t n) {
    char out_dir[4300], failed[4300];
    snprintf(out_dir, sizeof out_dir, "%s/builds/exp-%lld", m->home, (long long)id);
    int err = dt__mkdir_p(out_dir, failed, sizeof failed);
    if (err) return dt_error(DT_ERR_IO, "cannot create %s: %s", failed, strerror(err));
    dt_status st =
        dt_modeldir_build(dir, cfg->entry_command ? NULL : cfg->entry_module, out_dir, so, n);
    return st == DT_OK ? dt_store_exp_set_build(m->store, id, so) : st;
}

dt_status m_snapshot_restore(master *m, m_exp *e) {
    struct stat sb;
    if (stat(e->model_dir, &sb) != 0) {
        char p[4200], failed[4400];
        snprintf(p, sizeof p, "%s/contexts/", m->home);
        if (strncmp(e->model_dir, p, strlen(p)))
            return dt_error(DT_ERR_CONFIG,
                            "its model directory %s is gone (it was created "
                            "before experiments kept their model definition)",
                            e->model_dir);
        void *tar = NULL;
        size_t len = 0;
        dt_status st = dt_store_modeldef_get(m->store, e->id, &tar, &len);
        int err = st == DT_OK ? dt__mkdir_p(e->model_dir, failed, sizeof failed) : 0;
        if (err) st = dt_error(DT_ERR_IO, "cannot create %s: %s", failed, strerror(err));
        if (st == DT_OK) st = dt__tar_unpack(tar, len, e->model_dir);
        free(tar);
        if (st != DT_OK) return st;
        dt_log(DT_LOG_INFO, "experiment %lld: its model definition unpacked again into %s",
               (long long)e->id, e->model_dir);
    }
    if (e->so_path && stat(e->so_path, &sb) == 0) return DT_OK;
    char so[4400];
    dt_status st = m_exp_build(m, e->id, e->model_dir, e->cfg, so, sizeof so);
    if (st != DT_OK) return st;
    free(e->so_path);
    e->so_path = strdup(so);
    return e->so_path ? DT_OK : dt_error(DT_ERR_OOM, "out of memory");
}
