/*
 * expconf_resources.c — where and how trials run: resources, the slurm section, environment
 * (variables kept; images, pod specs and the like have no effect here) and checkpoint storage
 * (shared_fs and directory; the cloud kinds refused, since this host cannot reach them).
 */
#include "config_impl.h"
#include "base/path.h"

/* storage_path must name a directory inside host_path: checked on the string alone (dt_path_within,
 * lexically), since neither need exist yet; whoever creates or opens the directory checks the
 * file system then. Without host_path the runner's default root applies and storage_path must be
 * relative. DT_ERR_CONFIG at storage_path. */
static dt_status check_storage_path(const dt_conf_sec *obj, const dt_ckpt_storage_conf *cs) {
    const char *sp = cs->storage_path, *hp = cs->host_path;
    if (!sp) return DT_OK;
    if (!hp && sp[0] == '/')
        return dt_conf_error(obj, "storage_path",
                             "checkpoint_storage.storage_path \"%s\" is absolute but no host_path "
                             "is given; hint: give host_path, or make storage_path relative (it is "
                             "then under the default checkpoint directory)",
                             sp);
    size_t cap = (hp ? strlen(hp) : 1) + strlen(sp) + 2; /* the resolved path always fits */
    char *out = malloc(cap);
    if (!out) return OOM();
    dt_status st = dt_path_within(hp ? hp : ".", sp, DT_PATH_LEXICAL, out, cap);
    free(out);
    if (st == DT_OK) return DT_OK;
    if (st == DT_ERR_OOM) return st;
    if (hp && sp[0] == '/' && hp[0] == '/')
        return dt_conf_error(obj, "storage_path",
                             "checkpoint_storage.storage_path \"%s\" is absolute but not under "
                             "host_path \"%s\"; hint: make it relative to host_path, or an "
                             "absolute path inside it",
                             sp, hp);
    if (hp && sp[0] == '/')
        return dt_conf_error(obj, "storage_path",
                             "checkpoint_storage.storage_path \"%s\" is absolute but host_path "
                             "\"%s\" is relative, so it cannot be checked; hint: make "
                             "storage_path relative to host_path",
                             sp, hp);
    return dt_conf_error(obj, "storage_path",
                         "checkpoint_storage.storage_path \"%s\" climbs out of %s%s%s with "
                         "\"..\"; hint: storage_path names a directory inside host_path (\"..\" "
                         "may not leave it)",
                         sp, hp ? "host_path \"" : "the checkpoint directory", hp ? hp : "",
                         hp ? "\"" : "");
}

/* checkpoint_storage: shared_fs (host_path, storage_path) or directory (container_path, which
 * is a path on this host since trials run as processes); the cloud kinds are refused. */
dt_status dt__cfg_storage(vctx *v, const dt_conf_sec *root) {
    static const char *const known[] = {"type",
                                        "host_path",
                                        "storage_path",
                                        "container_path",
                                        "save_trial_best",
                                        "save_trial_latest",
                                        "save_experiment_best",
                                        NULL};
    static const char *const accepted[] = {"propagation", NULL};
    static const char *const types[] = {"shared_fs", "directory", NULL};
    static const char *const cloud[] = {"s3", "gcs", "azure", "hdfs", NULL};
    dt_ckpt_storage_conf *cs = &v->cfg->checkpoint_storage;
    dt_conf_sec obj;
    cs->save_trial_best = 1;
    cs->save_trial_latest = 1;
    TRY(dt__cfg_section(v, root, "checkpoint_storage", known, accepted, &obj));
    int ti = 0;
    if (obj.obj) {
        const json_t *t = dt_conf_get(&obj, "type");
        if (json_is_string(t) && dt_conf_in_list(json_string_value(t), cloud))
            return dt_conf_error(&obj, "type",
                                 "checkpoint_storage.type '%s' cannot be used here: dtrain writes "
                                 "checkpoints to a file system on this host and does not reach "
                                 "cloud storage; hint: use `type: shared_fs` with a host_path "
                                 "(or `type: directory` with a container_path)",
                                 json_string_value(t));
        TRY(dt_conf_enum(&obj, "type", types, NULL, &ti));
        if (ti == 1) {
            TRY(dt__cfg_get_str(&obj, "container_path", true, true,
                                "the directory checkpoints go to, e.g. `container_path: "
                                "/data/checkpoints`",
                                &cs->host_path));
        } else {
            TRY(dt__cfg_get_str(&obj, "host_path", false, true, NULL, &cs->host_path));
            TRY(dt__cfg_get_str(&obj, "storage_path", false, true, NULL, &cs->storage_path));
            TRY(check_storage_path(&obj, cs));
        }
        TRY(dt_conf_int(&obj, "save_trial_best", 0, INT64_MAX, &cs->save_trial_best));
        TRY(dt_conf_int(&obj, "save_trial_latest", 0, INT64_MAX, &cs->save_trial_latest));
        TRY(dt_conf_int(&obj, "save_experiment_best", 0, INT64_MAX, &cs->save_experiment_best));
    }
    if (!(cs->type = strdup(types[ti]))) return OOM();
    return DT_OK;
}

/* s.key: a list of "NAME=value" strings, kept in cfg->env_* when `keep`. */
static dt_status parse_env_list(vctx *v, const dt_conf_sec *s, const char *key, bool keep) {
    const json_t *list = dt_conf_get(s, key);
    char path[300], d[64];
    dt_conf_path(s, key, path, sizeof path);
    if (!json_is_array(list))
        return dt_conf_expected(s, key, "a list of \"NAME=value\" strings", NULL);
    dt_expconf *c = v->cfg;
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *e = json_array_get(list, i);
        dt_yaml_pos pos = dt_yaml_item_pos(v->conf.doc, list, i);
        const char *str = json_string_value(e);
        const char *eq = str ? strchr(str, '=') : NULL;
        if (!eq)
            return dt_conf_error_at(
                &v->conf, pos, "%s[%zu] must be a \"NAME=value\" string, got %s%s", path, i,
                dt__cfg_describe(v, e, d, sizeof d),
                json_is_object(e) ? " (write `- NAME=value`, not `- NAME: value`)" : "");
        size_t kl = (size_t)(eq - str);
        bool ok = kl > 0 && !(str[0] >= '0' && str[0] <= '9');
        for (size_t j = 0; j < kl && ok; j++) {
            char ch = str[j];
            ok = ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                 (ch >= '0' && ch <= '9');
        }
        if (!ok)
            return dt_conf_error_at(&v->conf, pos,
                                    "%s[%zu]: \"%.*s\" is not a valid environment variable name "
                                    "(letters, digits and _, not starting with a digit)",
                                    path, i, (int)kl, str);
        if (!keep) continue;
        char *k = strndup(str, kl), *val = strdup(eq + 1);
        if (!k || !val) {
            free(k);
            free(val);
            return OOM();
        }
        int j = 0;
        while (j < c->n_env && strcmp(c->env_keys[j], k)) j++;
        if (j < c->n_env) { /* a later entry for the same name wins, as in a shell */
            free(k);
            free(c->env_values[j]);
            c->env_values[j] = val;
            continue;
        }
        char **nk = realloc(c->env_keys, (size_t)(c->n_env + 1) * sizeof *nk);
        if (nk) c->env_keys = nk;
        char **nv = nk ? realloc(c->env_values, (size_t)(c->n_env + 1) * sizeof *nv) : NULL;
        if (nv) c->env_values = nv;
        if (!nk || !nv) {
            free(k);
            free(val);
            return OOM();
        }
        c->env_keys[c->n_env] = k;
        c->env_values[c->n_env] = val;
        c->n_env++;
    }
    return DT_OK;
}

dt_status dt__cfg_environment(vctx *v, const dt_conf_sec *root) {
    static const char *const known[] = {"environment_variables", NULL};
    static const char *const accepted[] = {"image",    "force_pull_image", "registry_auth",
                                           "pod_spec", "add_capabilities", "drop_capabilities",
                                           "ports",    "proxy_ports",      NULL};
    static const char *const devices[] = {"cpu", "cuda", "gpu", "rocm", NULL};
    dt_conf_sec obj, ev;
    TRY(dt__cfg_section(v, root, "environment", known, accepted, &obj));
    const json_t *x = dt_conf_get(&obj, "environment_variables");
    if (!x) return DT_OK;
    if (!json_is_object(x)) return parse_env_list(v, &obj, "environment_variables", true);
    /* the per-device form: {cpu: [...], cuda: [...], rocm: [...]}; dtrain runs on the CPU */
    TRY(dt__cfg_section(v, &obj, "environment_variables", devices, NULL, &ev));
    for (int i = 0; devices[i]; i++)
        if (dt_conf_get(&ev, devices[i])) TRY(parse_env_list(v, &ev, devices[i], i == 0));
    return DT_OK;
}

/* The slurm section (dt_slurm_conf). Determined's gpu_type is accepted and unused. */
dt_status dt__cfg_slurm(vctx *v, const dt_conf_sec *top) {
    static const char *const known[] = {"partition",      "account",       "time", "sbatch_args",
                                        "slots_per_node", "cpus_per_slot", NULL};
    static const char *const accepted[] = {"gpu_type", NULL};
    dt_slurm_conf *sc = &v->cfg->slurm;
    dt_conf_sec obj;
    sc->cpus_per_slot = 1;
    TRY(dt__cfg_section(v, top, "slurm", known, accepted, &obj));
    TRY(dt__cfg_get_str(&obj, "partition", false, true, NULL, &sc->partition));
    TRY(dt__cfg_get_str(&obj, "account", false, true, NULL, &sc->account));
    TRY(dt__cfg_get_str(&obj, "time", false, true, NULL, &sc->time));
    TRY(dt_conf_int(&obj, "slots_per_node", 1, 1 << 20, &sc->slots_per_node));
    TRY(dt_conf_int(&obj, "cpus_per_slot", 1, 1 << 20, &sc->cpus_per_slot));
    TRY(dt__cfg_list_of(&obj, "sbatch_args", true));
    const json_t *args = NULL;
    TRY(dt_conf_list(&obj, "sbatch_args", &args));
    size_t n = json_array_size(args);
    if (n > 60)
        return dt_conf_error(&obj, "sbatch_args",
                             "slurm.sbatch_args has %zu items, more than 60; "
                             "hint: put options in an sbatch script's "
                             "defaults (SBATCH_* variables) instead",
                             n);
    if (n && !(sc->sbatch_args = calloc(n, sizeof *sc->sbatch_args))) return OOM();
    for (size_t i = 0; i < n; i++, sc->n_sbatch_args++)
        if (!(sc->sbatch_args[i] = strdup(json_string_value(json_array_get(args, i)))))
            return OOM();
    return DT_OK;
}

/* resources: slots_per_trial (0 = a trial with no accelerator: one process here), max_slots,
 * launcher, max_silence (seconds without a heartbeat before the master kills a run; 0 = never);
 * the scheduling keys of a cluster are warnings (expconf_warn.c). */
dt_status dt__cfg_resources(vctx *v, const dt_conf_sec *top) {
    dt_expconf *c = v->cfg;
    dt_conf_sec obj;
    static const char *const res_known[] = {"slots_per_trial", "max_slots", "launcher",
                                                "max_silence", NULL};
    static const char *const res_accepted[] = {
        "weight",  "native_parallel", "shm_size",       "resource_pool",    "priority",
        "devices", "agent_label",     "is_single_node", "resource_manager", NULL};
    c->slots_per_trial = 1;
    c->max_silence = DT_MAX_SILENCE_DEFAULT_S;
    TRY(dt__cfg_section(v, top, "resources", res_known, res_accepted, &obj));
    TRY(dt_conf_int(&obj, "slots_per_trial", 0, INT64_MAX, &c->slots_per_trial));
    if (c->slots_per_trial == 0) {
        /* the reference's trial without accelerators; here every slot is a CPU process */
        c->slots_per_trial = 1;
        TRY(dt__cfg_warn(v, dt_conf_pos(&obj, "slots_per_trial"),
                         "resources.slots_per_trial: 0 runs the trial as one process (a slot here "
                         "is a CPU process, and a trial needs one)"));
    }
    TRY(dt_conf_int(&obj, "max_slots", 1, INT64_MAX, &c->max_slots));
    if (c->max_slots && c->max_slots < c->slots_per_trial) {
        char full[256];
        dt_conf_path(&obj, "max_slots", full, sizeof full);
        return dt_conf_error(&obj, "max_slots",
                             "%s is %lld, less than slots_per_trial (%lld): no trial could run; "
                             "hint: raise max_slots or lower slots_per_trial",
                             full, (long long)c->max_slots, (long long)c->slots_per_trial);
    }
    TRY(dt_conf_real(&obj, "max_silence", 0, false, &c->max_silence));
    if (c->max_silence > 0 && c->max_silence < 1) {
        char full[256];
        dt_conf_path(&obj, "max_silence", full, sizeof full);
        return dt_conf_error(&obj, "max_silence",
                             "%s is %g s: a run could not start and send its first heartbeat "
                             "in that time; hint: give at least 1 (seconds), or 0 to never kill "
                             "a silent run",
                             full, c->max_silence);
    }

    static const char *const LAUNCHERS[] = {"local", "slurm", NULL};
    int launcher = -1;
    TRY(dt_conf_enum(&obj, "launcher", LAUNCHERS,
                     "the master's default is `dtrain master --launcher`", &launcher));
    if (launcher >= 0 && !(c->launcher = strdup(LAUNCHERS[launcher]))) return OOM();
    return DT_OK;
}
