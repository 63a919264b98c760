/*
 * ds_config_zero.c — the DeepSpeed config's zero_optimization section (ds_config.c reads the
 * rest): the stage, the bucket sizes, the stage-3 keys under both their names, the offload
 * sections with the deprecated booleans that stand for them, and the rules that tie them to the
 * stage. DeepSpeed's runtime/zero/config.py and offload_config.py are the specification.
 */
#include "engine/ds_config_impl.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static dt_status get_device(const sec *s, dt_offload_device *out) {
    static const char *const names[] = {"none", "cpu", "nvme", NULL};
    int i = -1;
    TRY(dt_conf_enum(s, "device", names,
                     "\"cpu\" keeps the state in host memory, \"nvme\" in files under nvme_path",
                     &i));
    if (i >= 0) *out = i == 0 ? DT_OFFLOAD_NONE : i == 1 ? DT_OFFLOAD_CPU : DT_OFFLOAD_NVME;
    return DT_OK;
}

static dt_status get_path(const sec *s, char *dst, size_t n) {
    const char *p = NULL;
    TRY(dt_conf_str(s, "nvme_path", false, &p));
    if (!p) return DT_OK;
    if (strlen(p) >= n) {
        char kb[256];
        return errf("%s is too long (%zu bytes, at most %zu); hint: use a shorter directory",
                    dt_conf_path(s, "nvme_path", kb, sizeof kb), strlen(p), n - 1);
    }
    snprintf(dst, n, "%s", p);
    return DT_OK;
}

/* DeepSpeed's defaults for the section. */
static void zero_defaults(dt_zero_config *z) {
    memset(z, 0, sizeof *z);
    z->contiguous_gradients = true;
    z->reduce_scatter = true;
    z->reduce_bucket_size = 500000000;
    z->allgather_bucket_size = 500000000;
    z->param_persistence_threshold = 100000;
    z->prefetch_bucket_size = 50000000;
    z->max_live_parameters = 1000000000;
}

/* DeepSpeed's old form, zero_optimization: true (stage 1) or false, with the top-level
 * allgather_size. */
static dt_status zero_old_form(const sec *root, const json_t *zv, dt_zero_config *z) {
    z->stage = json_is_true(zv) ? 1 : 0;
    z->overlap_comm = false;
    sec top = *root;
    top.flags = 0;
    return dt_conf_int(&top, "allgather_size", 0, INT64_MAX, &z->allgather_bucket_size);
}

/* zero_optimization.stage: 0, 1, 2 or 3. */
static dt_status zero_stage(const sec *s, dt_zero_config *z) {
    const json_t *stage = dt_conf_get(s, "stage");
    int64_t st = 0;
    double sx = stage && json_is_number(stage) ? json_number_value(stage) : -1;
    if (stage && !(sx == 0 || sx == 1 || sx == 2 || sx == 3))
        return dt_conf_expected(
            s, "stage", "0, 1, 2 or 3",
            "0 = plain data parallel, 1 = partition the optimizer state, 2 = also the "
            "gradients, 3 = also the parameters");
    TRY(dt_conf_int(s, "stage", 0, 3, &st));
    z->stage = (int)st;
    return DT_OK;
}

/* The stage-3 keys under DeepSpeed's names or the field names pydantic also accepts. */
static dt_status zero_stage3_keys(const sec *s, dt_zero_config *z) {
    static const struct {
        const char *alias, *name;
        size_t off;
    } s3[] = {
        {"stage3_param_persistence_threshold", "param_persistence_threshold",
         offsetof(dt_zero_config, param_persistence_threshold)},
        {"stage3_prefetch_bucket_size", "prefetch_bucket_size",
         offsetof(dt_zero_config, prefetch_bucket_size)},
        {"stage3_max_live_parameters", "max_live_parameters",
         offsetof(dt_zero_config, max_live_parameters)},
    };
    for (size_t i = 0; i < NELEM(s3); i++) {
        int64_t *dst = (int64_t *)((char *)z + s3[i].off);
        TRY(dt_conf_int(s, dt_conf_get(s, s3[i].alias) ? s3[i].alias : s3[i].name, 0, INT64_MAX,
                        dst));
    }
    return DT_OK;
}

/* cpu_offload and cpu_offload_param (deprecated): the cpu offloads, unless the sections they
 * stand for (so, sp) are set too. */
static dt_status zero_deprecated_offload(const sec *s, const sec *so, const sec *sp,
                                         dt_zero_config *z) {
    bool dep = false;
    TRY(dt_conf_bool(s, "cpu_offload", &dep));
    if (dep) {
        if (so->obj)
            return errf("zero_optimization.cpu_offload (deprecated) and offload_optimizer are both "
                        "set; hint: keep only offload_optimizer {\"device\": \"cpu\"}");
        z->offload_optimizer = DT_OFFLOAD_CPU;
    }
    dep = false;
    TRY(dt_conf_bool(s, "cpu_offload_param", &dep));
    if (dep) {
        if (sp->obj)
            return errf("zero_optimization.cpu_offload_param (deprecated) and offload_param are "
                        "both set; hint: keep only offload_param {\"device\": \"cpu\"}");
        z->offload_param = DT_OFFLOAD_CPU;
    }
    return DT_OK;
}

/* zero_optimization.offload_optimizer (so): the device, its nvme path, the partial-offload
 * ratio; buffer_count and pin_memory are checked and have no effect. */
static dt_status zero_offload_optimizer(const sec *so, dt_zero_config *z) {
    int64_t ignored_int = 0;
    bool ignored_bool = false;
    double ratio = 1.0;
    TRY(get_device(so, &z->offload_optimizer));
    TRY(get_path(so, z->offload_optimizer_nvme_path, sizeof z->offload_optimizer_nvme_path));
    TRY(dt_conf_int(so, "buffer_count", 0, INT64_MAX, &ignored_int));
    TRY(dt_conf_bool(so, "pin_memory", &ignored_bool));
    TRY(dt_conf_real(so, "ratio", 0, false, &ratio));
    if (ratio > 1)
        return errf("zero_optimization.offload_optimizer.ratio must be in [0, 1], got %g; hint: "
                    "1 offloads the whole optimizer state",
                    ratio);
    if (ratio < 1 && z->stage != 3)
        return errf("zero_optimization.offload_optimizer.ratio %g (partial offload) needs ZeRO "
                    "stage 3 (stage is %d); hint: remove ratio or use stage 3",
                    ratio, z->stage);
    return DT_OK;
}

/* zero_optimization.offload_param (sp): the device and its nvme path; the buffer sizes and
 * pin_memory are checked and have no effect. */
static dt_status zero_offload_param(const sec *sp, dt_zero_config *z) {
    int64_t ignored_int = 0;
    bool ignored_bool = false;
    TRY(get_device(sp, &z->offload_param));
    TRY(get_path(sp, z->offload_param_nvme_path, sizeof z->offload_param_nvme_path));
    TRY(dt_conf_int(sp, "buffer_count", 0, INT64_MAX, &ignored_int));
    TRY(dt_conf_int(sp, "buffer_size", 0, INT64_MAX, &ignored_int));
    TRY(dt_conf_int(sp, "max_in_cpu", 0, INT64_MAX, &ignored_int));
    TRY(dt_conf_bool(sp, "pin_memory", &ignored_bool));
    return DT_OK;
}

/* The offloads against the stage and their paths. Below stage 3 there are no partitioned
 * parameters to offload: DeepSpeed keeps the setting and ignores it, and so does the engine (the
 * warning is dt__ds_notes'). */
static dt_status zero_offload_checks(const dt_zero_config *z) {
    if (z->offload_optimizer != DT_OFFLOAD_NONE && z->stage == 0)
        return errf("zero_optimization.offload_optimizer needs ZeRO stage 1, 2 or 3 (stage is 0); "
                    "hint: set zero_optimization.stage, or remove offload_optimizer");
    if (z->offload_optimizer == DT_OFFLOAD_NVME && !z->offload_optimizer_nvme_path[0])
        return errf("zero_optimization.offload_optimizer.device is \"nvme\" but nvme_path is not "
                    "set; hint: add \"nvme_path\": \"/a/fast/local/dir\" or use device \"cpu\"");
    if (z->offload_param == DT_OFFLOAD_NVME && !z->offload_param_nvme_path[0])
        return errf("zero_optimization.offload_param.device is \"nvme\" but nvme_path is not set; "
                    "hint: add \"nvme_path\": \"/a/fast/local/dir\" or use device \"cpu\"");
    return DT_OK;
}

dt_status dt__ds_parse_zero(const sec *root, dt_zero_config *z) {
    zero_defaults(z);
    const json_t *zv = dt_conf_get(root, "zero_optimization");
    if (zv && json_is_boolean(zv)) return zero_old_form(root, zv, z);
    sec s;
    TRY(dt_conf_section(root, "zero_optimization", DT_CONF_AUTO, NULL, &s));
    TRY(zero_stage(&s, z));
    z->overlap_comm = z->stage == 3;
    TRY(dt_conf_bool(&s, "overlap_comm", &z->overlap_comm));
    TRY(dt_conf_bool(&s, "contiguous_gradients", &z->contiguous_gradients));
    TRY(dt_conf_bool(&s, "reduce_scatter", &z->reduce_scatter));
    TRY(dt_conf_int(&s, "reduce_bucket_size", 1, INT64_MAX, &z->reduce_bucket_size));
    TRY(dt_conf_int(&s, "allgather_bucket_size", 0, INT64_MAX, &z->allgather_bucket_size));
    TRY(zero_stage3_keys(&s, z));
    bool compute_grad_norm = true;
    TRY(dt_conf_bool(&s, "compute_grad_norm", &compute_grad_norm));
    if (!compute_grad_norm && z->stage != 1 && z->stage != 2)
        return errf("zero_optimization.compute_grad_norm = false needs ZeRO stage 1 or 2 (stage "
                    "is %d); hint: remove the key",
                    z->stage);

    /* offload sections (and the deprecated booleans that stand for them) */
    sec so, sp;
    TRY(dt_conf_section(&s, "offload_optimizer", DT_CONF_AUTO, NULL, &so));
    TRY(dt_conf_section(&s, "offload_param", DT_CONF_AUTO, NULL, &sp));
    TRY(zero_deprecated_offload(&s, &so, &sp, z));
    TRY(zero_offload_optimizer(&so, z));
    TRY(zero_offload_param(&sp, z));
    return zero_offload_checks(z);
}
