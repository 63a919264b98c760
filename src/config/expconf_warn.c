/*
 * expconf_warn.c — keys of the reference's config that have no effect here: each is accepted
 * (a config carries over unchanged) and becomes one warning, "FILE:LINE: key has no effect:
 * why", so nothing is dropped in silence. A key set to null, false or an empty value asks for
 * nothing and gets no warning. One row per key; the reason says what dtrain does instead.
 */
#include "config_impl.h"

#define HOST "trials run as processes on this host"
#define SCHED "the master schedules trials by slots alone"
#define HOROVOD "a Horovod setting; dtrain reduces gradients with its own communicator"

static const struct {
    const char *path, *why;
} NO_EFFECT[] = {
    {"workspace", "dtrain has no workspaces or projects (every experiment is listed together)"},
    {"project", "dtrain has no workspaces or projects (every experiment is listed together)"},
    {"debug", "dtrain's log level is its own (dtrain master --log-level)"},
    {"tensorboard_storage", "TensorBoard files are written under each trial's checkpoint "
                            "directory (tensorboard/)"},
    {"log_policies", "trial logs are kept whole; no pattern acts on them"},
    {"retention_policy", "logs are kept until the experiment is deleted"},
    {"integrations", "dtrain has no external integrations (webhooks, data platforms)"},
    {"pbs", "dtrain launches trials locally or through Slurm, not PBS"},
    {"preemption_timeout", "trials here are not preempted"},
    {"bind_mounts", HOST " and see its file system directly (no container to mount into)"},
    {"environment.image", HOST},
    {"environment.force_pull_image", HOST},
    {"environment.registry_auth", HOST},
    {"environment.pod_spec", HOST},
    {"environment.add_capabilities", HOST},
    {"environment.drop_capabilities", HOST},
    {"environment.ports", HOST " (no proxy in front of them)"},
    {"environment.proxy_ports", HOST " (no proxy in front of them)"},
    {"environment.environment_variables.cuda", "trials run on the CPU: the cpu list applies"},
    {"environment.environment_variables.gpu", "trials run on the CPU: the cpu list applies"},
    {"environment.environment_variables.rocm", "trials run on the CPU: the cpu list applies"},
    {"resources.shm_size", HOST " (shared memory is the host's)"},
    {"resources.devices", HOST " (no devices to pass into a container)"},
    {"resources.resource_pool", SCHED},
    {"resources.resource_manager", SCHED},
    {"resources.priority", SCHED},
    {"resources.weight", SCHED},
    {"resources.agent_label", SCHED},
    {"resources.is_single_node", "the local launcher runs a trial's processes on this host"},
    {"resources.native_parallel", "the reference's own launch layer; dtrain launches every trial"},
    {"optimizations.gradient_compression", HOROVOD},
    {"optimizations.mixed_precision", "the Apex AMP level; precision is the trial's (a DeepSpeed "
                                      "config's fp16/bf16)"},
    {"optimizations.tensor_fusion_threshold", HOROVOD},
    {"optimizations.tensor_fusion_cycle_time", HOROVOD},
    {"optimizations.auto_tune_tensor_fusion", HOROVOD},
    {"optimizations.grad_updates_size_file", HOROVOD},
    {"checkpoint_storage.propagation", "the checkpoint directory is the host's own (no bind "
                                       "mount to propagate)"},
    {"slurm.gpu_type", "trials run on the CPU"},
    {"profiling.sync_timings", "timings on the CPU are synchronous already"},
    {"searcher.bracket_rungs", "adaptive_asha's brackets follow max_rungs and mode"},
};

/* Does v ask for anything? null, false and empty values do not. */
static bool asks(const json_t *v) {
    if (!v || json_is_null(v) || json_is_false(v)) return false;
    if (json_is_object(v)) return json_object_size(v) > 0;
    if (json_is_array(v)) return json_array_size(v) > 0;
    if (json_is_string(v)) return json_string_length(v) > 0;
    return true;
}

/* The member at a dotted path (parent into *parent, last key into *key), or NULL. */
static const json_t *lookup(const json_t *root, const char *path, const json_t **parent, char *key,
                            size_t n) {
    const json_t *cur = root;
    const char *p = path;
    for (;;) {
        size_t l = strcspn(p, ".");
        snprintf(key, n, "%.*s", (int)l, p);
        if (!json_is_object(cur)) return NULL;
        *parent = cur;
        cur = json_object_get(cur, key);
        if (!p[l]) return cur;
        p += l + 1;
    }
}

dt_status dt__cfg_warn_no_effect(vctx *v) {
    for (size_t i = 0; i < sizeof NO_EFFECT / sizeof *NO_EFFECT; i++) {
        const json_t *parent = NULL;
        char key[64];
        const json_t *x = lookup(v->cfg->json, NO_EFFECT[i].path, &parent, key, sizeof key);
        if (!asks(x)) continue;
        TRY(dt__cfg_warn(v, dt_yaml_key_pos(v->conf.doc, parent, key), "%s has no effect: %s",
                         NO_EFFECT[i].path, NO_EFFECT[i].why));
    }
    return DT_OK;
}
