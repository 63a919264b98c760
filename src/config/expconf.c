/*
 * expconf.c — the experiment config: parse and validate a Determined-style config into
 * dt_expconf, section by section (config_impl.h lists the files), then the warnings.
 *
 * Validation walks the tree in a fixed order and stops at the first error, a DT_ERR_CONFIG
 * whose message starts with the source position ("const.yaml:7:14: searcher.max_length.batches
 * must be a positive integer, got \"ten\""). An optional key that is absent or null takes its
 * default. Nothing is dropped in silence: an unknown key is a warning with the closest known key
 * as a suggestion, a key the reference has but that has no effect here is a warning saying why
 * (expconf_warn.c), a key the reference removed is an error naming its replacement
 * (expconf_legacy.c). docs/config.md documents every key and default.
 */
#include "config_impl.h"
#include "config/expconf_doc.h"

/* ---- the top level ----------------------------------------------------------------------- */

static const char *const TOP_KNOWN[] = {"name",
                                        "description",
                                        "entrypoint",
                                        "hyperparameters",
                                        "searcher",
                                        "min_validation_period",
                                        "min_checkpoint_period",
                                        "records_per_epoch",
                                        "scheduling_unit",
                                        "perform_initial_validation",
                                        "checkpoint_policy",
                                        "checkpoint_storage",
                                        "optimizations",
                                        "reproducibility",
                                        "environment",
                                        "resources",
                                        "data",
                                        "max_restarts",
                                        "bind_mounts",
                                        "labels",
                                        "profiling",
                                        "slurm",
                                        NULL};
/* The reference's keys that have no effect here: each is a warning (expconf_warn.c). */
static const char *const TOP_ACCEPTED[] = {
    "workspace",        "project",      "debug", "tensorboard_storage", "log_policies",
    "retention_policy", "integrations", "pbs",   "preemption_timeout",  NULL};

/* name, description, lengths, checkpoint policy and storage. */
static dt_status validate_meta(vctx *v, const dt_conf_sec *top, unsigned flags) {
    dt_expconf *c = v->cfg;
    TRY(dt__cfg_entrypoint(v, top));
    TRY(dt__cfg_get_str(top, "name", false, true, NULL, &c->name));
    if (!c->name && !(c->name = strdup(c->entry_symbol ? c->entry_symbol : c->entry_command)))
        return OOM();
    TRY(dt__cfg_get_str(top, "description", false, false, NULL, &c->description));
    TRY(dt__cfg_hparams(v, top));
    TRY(dt_conf_int(top, "records_per_epoch", 0, INT64_MAX, &c->records_per_epoch));
    TRY(dt__cfg_searcher(v, top, flags));
    TRY(dt__cfg_get_length(top, "min_validation_period", true, false, &c->min_validation_period));
    TRY(dt__cfg_get_length(top, "min_checkpoint_period", true, false, &c->min_checkpoint_period));
    c->scheduling_unit = 100;
    TRY(dt_conf_int(top, "scheduling_unit", 1, INT64_MAX, &c->scheduling_unit));
    TRY(dt_conf_bool(top, "perform_initial_validation", &c->perform_initial_validation));
    static const char *const policies[] = {"best", "all", "none", NULL};
    int pol = 0;
    TRY(dt_conf_enum(top, "checkpoint_policy", policies, NULL, &pol));
    c->checkpoint_policy = pol == 0 ? DT_CKPT_BEST : pol == 1 ? DT_CKPT_ALL : DT_CKPT_NONE;
    return dt__cfg_storage(v, top);
}

/* optimizations, profiling, reproducibility. */
static dt_status validate_run(vctx *v, const dt_conf_sec *top) {
    dt_expconf *c = v->cfg;
    dt_conf_sec obj;
    static const char *const opt_known[] = {"aggregation_frequency", "average_aggregated_gradients",
                                            "average_training_metrics", "deterministic", NULL};
    static const char *const opt_accepted[] = {"gradient_compression",
                                               "mixed_precision",
                                               "tensor_fusion_threshold",
                                               "tensor_fusion_cycle_time",
                                               "auto_tune_tensor_fusion",
                                               "grad_updates_size_file",
                                               NULL};
    c->aggregation_frequency = 1;
    c->average_aggregated_gradients = true;
    c->average_training_metrics = true;
    TRY(dt__cfg_section(v, top, "optimizations", opt_known, opt_accepted, &obj));
    TRY(dt_conf_int(&obj, "aggregation_frequency", 1, INT64_MAX, &c->aggregation_frequency));
    TRY(dt_conf_bool(&obj, "average_aggregated_gradients", &c->average_aggregated_gradients));
    TRY(dt_conf_bool(&obj, "average_training_metrics", &c->average_training_metrics));
    bool deterministic = false; /* checked here, read by the trial context */
    TRY(dt_conf_bool(&obj, "deterministic", &deterministic));

    /* profiling: the fit loop's per-batch timings (profiler lines) for a range of batches */
    static const char *const prof_known[] = {"enabled", "begin_on_batch", "end_after_batch", NULL};
    static const char *const prof_accepted[] = {"sync_timings", NULL};
    c->profiling_end = INT64_MAX;
    TRY(dt__cfg_section(v, top, "profiling", prof_known, prof_accepted, &obj));
    TRY(dt_conf_bool(&obj, "enabled", &c->profiling_enabled));
    TRY(dt_conf_int(&obj, "begin_on_batch", 0, INT64_MAX, &c->profiling_begin));
    bool sync = true;
    TRY(dt_conf_bool(&obj, "sync_timings", &sync));
    TRY(dt_conf_int(&obj, "end_after_batch", 0, INT64_MAX, &c->profiling_end));
    if (c->profiling_end < c->profiling_begin)
        return dt_conf_error(&obj, "end_after_batch",
                             "profiling.end_after_batch (%lld) is before begin_on_batch (%lld); "
                             "hint: the range is inclusive, end_after_batch >= begin_on_batch",
                             (long long)c->profiling_end, (long long)c->profiling_begin);

    static const char *const repro_known[] = {"experiment_seed", NULL};
    int64_t seed = -1;
    TRY(dt__cfg_section(v, top, "reproducibility", repro_known, NULL, &obj));
    TRY(dt_conf_int(&obj, "experiment_seed", 0, INT32_MAX, &seed));
    c->has_experiment_seed = seed >= 0;
    c->experiment_seed = seed >= 0 ? (uint32_t)seed : 0;
    return DT_OK;
}

static dt_status validate(vctx *v, unsigned flags) {
    dt_expconf *c = v->cfg;
    json_t *root = c->json;
    if (!json_is_object(root)) {
        char d[64];
        if (json_is_null(root))
            return dt_conf_error_at(&v->conf, (dt_yaml_pos){0, 0},
                                    "the config is empty; hint: see docs/config.md for an example");
        return dt_conf_error_at(&v->conf, dt_yaml_node_pos(v->conf.doc, root),
                                "the experiment config must be a mapping (entrypoint:, "
                                "hyperparameters:, searcher:, ...), got %s",
                                dt__cfg_describe(v, root, d, sizeof d));
    }
    dt_conf_sec top = dt_conf_root(&v->conf, 0, TOP_KNOWN), obj;
    TRY(dt__cfg_legacy(v)); /* before the unknown keys: a removed key gets its own message */
    TRY(dt_conf_check_keys(&v->conf, root, "", TOP_KNOWN, TOP_ACCEPTED));
    TRY(validate_meta(v, &top, flags));
    TRY(validate_run(v, &top));
    TRY(dt__cfg_environment(v, &top));
    TRY(dt__cfg_resources(v, &top));
    TRY(dt__cfg_slurm(v, &top));
    TRY(dt_conf_section(&top, "data", 0, NULL, &obj));
    if (!obj.obj && json_object_set_new(root, "data", json_object())) return OOM();
    c->data = json_object_get(root, "data");
    c->max_restarts = 5;
    TRY(dt_conf_int(&top, "max_restarts", 0, INT64_MAX, &c->max_restarts));
    TRY(dt__cfg_list_of(&top, "bind_mounts", false));
    TRY(dt__cfg_list_of(&top, "labels", true));
    const json_t *ws = dt_conf_get(&top, "workspace"), *pr = dt_conf_get(&top, "project");
    if (!ws != !pr) /* the reference places an experiment by both or neither */
        return dt_conf_error(&top, ws ? "workspace" : "project",
                             "%s is given without %s; hint: give both workspace and project, or "
                             "neither (the reference refuses one alone)",
                             ws ? "workspace" : "project", ws ? "project" : "workspace");
    return DT_OK;
}

/* Validate, then turn the unknown keys (in validation order) into cfg->warnings, followed by
 * the keys without effect — after an error too, to explain it. */
static dt_status validate_and_warn(vctx *v, unsigned flags) {
    dt_status st = validate(v, flags);
    dt_expconf *c = v->cfg;
    for (int i = 0; i < v->conf.n_unknown; i++) {
        char w[1500];
        dt_conf_unknown_warning(&v->conf, i, w, sizeof w);
        dt_status ws = dt__cfg_push_warning(c, strdup(w));
        if (ws) {
            if (st == DT_OK) st = ws;
            break;
        }
    }
    if (st == DT_OK) st = dt__cfg_warn_no_effect(v);
    dt_conf_clear(&v->conf);
    return st;
}

/* ---- construction ---------------------------------------------------------------------------- */

void dt_expconf_free(dt_expconf *c) {
    if (!c) return;
    for (int i = 0; i < c->n_hparams; i++) free(c->hparams[i].name);
    free(c->hparams);
    free(c->name);
    free(c->description);
    free(c->entrypoint);
    free(c->entry_module);
    free(c->entry_symbol);
    free(c->entry_command);
    free(c->searcher.name);
    free(c->searcher.metric);
    free(c->searcher.mode);
    free(c->searcher.source_checkpoint_uuid);
    free(c->searcher.method);
    free(c->checkpoint_storage.type);
    free(c->checkpoint_storage.host_path);
    free(c->checkpoint_storage.storage_path);
    free(c->launcher);
    free(c->slurm.partition);
    free(c->slurm.account);
    free(c->slurm.time);
    for (int i = 0; i < c->slurm.n_sbatch_args; i++) free(c->slurm.sbatch_args[i]);
    free(c->slurm.sbatch_args);
    for (int i = 0; i < c->n_env; i++) {
        free(c->env_keys[i]);
        free(c->env_values[i]);
    }
    free(c->env_keys);
    free(c->env_values);
    for (int i = 0; i < c->n_warnings; i++) free(c->warnings[i]);
    free(c->warnings);
    json_decref(c->json);
    dt_yaml_free(c->doc);
    free(c);
}

/* Takes ownership of json (a reference) and doc. */
static dt_status build(json_t *json, dt_yaml_doc *doc, unsigned flags, dt_expconf **out) {
    *out = NULL;
    dt_expconf *c = calloc(1, sizeof *c);
    if (!c) {
        json_decref(json);
        dt_yaml_free(doc);
        return OOM();
    }
    c->json = json;
    c->doc = doc;
    vctx v = {c, {.dialect = DT_CONF_YAML, .doc = doc, .root = json}};
    dt_status st = validate_and_warn(&v, flags);
    if (st) {
        dt_expconf_free(c);
        return st;
    }
    *out = c;
    return DT_OK;
}

dt_status dt_expconf_from_doc(dt_yaml_doc *doc, unsigned flags, dt_expconf **out) {
    if (!doc) {
        *out = NULL;
        return dt_error(DT_ERR_INVALID, "dt_expconf_from_doc: doc is NULL");
    }
    return build(json_incref(dt_yaml_root(doc)), doc, flags, out);
}

dt_status dt_expconf_from_json(const json_t *json, unsigned flags, dt_expconf **out) {
    json_t *copy = json ? json_deep_copy(json) : json_null();
    if (!copy) {
        *out = NULL;
        return dt_error(DT_ERR_OOM, "out of memory copying the config");
    }
    return build(copy, NULL, flags, out);
}

dt_status dt_expconf_load_file(const char *path, unsigned flags, dt_expconf **out) {
    *out = NULL;
    dt_yaml_doc *doc = dt_yaml_load_file(path);
    if (!doc) return dt_last_status();
    return dt_expconf_from_doc(doc, flags, out);
}

dt_status dt_expconf_load_string(const char *text, const char *name, unsigned flags,
                                 dt_expconf **out) {
    *out = NULL;
    if (!text) return dt_error(DT_ERR_INVALID, "dt_expconf_load_string: text is NULL");
    dt_yaml_doc *doc = dt_yaml_load_string(text, strlen(text), name);
    if (!doc) return dt_last_status();
    return dt_expconf_from_doc(doc, flags, out);
}

dt_status dt_expconf_set_max_length(dt_expconf *cfg, dt_length len) {
    char f[64];
    if (len.n <= 0 || (unsigned)len.unit > DT_UNIT_RECORDS)
        return dt_error(DT_ERR_CONFIG, "searcher.max_length must be positive, got %s",
                        dt_length_format(len, f, sizeof f));
    json_t *s = json_object_get(cfg->json, "searcher");
    if (!json_is_object(s))
        return dt_error(DT_ERR_STATE, "dt_expconf_set_max_length: the config has no searcher");
    json_t *l = json_object();
    if (!l || json_object_set_new(l, dt_unit_name(len.unit), json_integer(len.n)) ||
        json_object_set_new(s, "max_length", l)) {
        return dt_error(DT_ERR_OOM, "out of memory setting searcher.max_length");
    }
    cfg->searcher.max_length = len;
    return DT_OK;
}
