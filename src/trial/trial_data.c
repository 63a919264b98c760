/* trial_data.c — what most trials' init and data-loader callbacks share: an engine from the
 * hyperparameters, the data config's values, and a loader over a dataset with the trial's
 * per-slot batch size and seed. */
#include "trial_impl.h"

#include "dtrain/data.h"
#include "dtrain/engine.h"
#include "trial/trial_iface.h"

const char *dt_trial_data_str(const dt_trial_ctx *c, const char *key, const char *dflt) {
    const json_t *v = json_object_get(dt_trial_data_config(c), key);
    if (json_is_string(v)) return json_string_value(v);
    if (v) dt_log(DT_LOG_WARN, "data.%s is not a string; using '%s'", key, dflt ? dflt : "");
    return dflt;
}

dt_loader *dt_trial_loader(dt_trial_ctx *c, dt_dataset *ds, bool train) {
    if (!ds) return NULL; /* the dataset's own error stands */
    int64_t batch = dt_trial_engine_count(c) > 0 ? dt_trial_train_micro_batch_size(c)
                                                 : dt_trial_per_slot_batch_size(c);
    dt_loader_opts o = {.batch_size = batch,
                        .shuffle = train,
                        .drop_last = train,
                        .seed = dt_trial_seed(c),
                        .take_dataset = true};
    return dt_loader_new(dt_trial_runtime(c), ds, &o);
}

dt_engine *dt_trial_engine_from_hparams(dt_trial_ctx *c, dt_module *net) {
    json_t *cfg = net ? dt_ds_config_from_hparams(c) : NULL;
    if (net && (!cfg || dt_module_build(net, dt_trial_runtime(c), dt_trial_seed(c)) != DT_OK)) {
        DT_KEEP_ERROR(dt_module_free(net));
        net = NULL;
    }
    dt_engine *e = net ? dt_engine_init(net, cfg) : NULL;
    if (net && !e) DT_KEEP_ERROR(dt_module_free(net));
    json_decref(cfg);
    return dt_wrap_model_engine(c, e); /* the context owns e and net from here */
}
