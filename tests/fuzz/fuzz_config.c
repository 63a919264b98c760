/*
 * fuzz_config.c — the experiment config (dtrain/config.h) from any text: load and validate,
 * then use what a valid config offers (hyperparameter lookup and values, batch lengths, the
 * max_length override) and validate its JSON form again, as the store's readers will.
 */
#include "fuzz.h"

#include "dtrain/config.h"

static void use(dt_expconf *cfg) {
    for (int i = 0; i < cfg->n_hparams; i++)
        FZ_ASSERT(dt_expconf_hparam(cfg, cfg->hparams[i].name) == &cfg->hparams[i]);
    json_t *values = NULL;
    if (dt_expconf_require_const(cfg) == DT_OK && dt_expconf_hparam_values(cfg, &values) == DT_OK)
        json_decref(values);
    int64_t n;
    (void)dt_expconf_global_batch_size(cfg, "fuzzing", &n);
    (void)dt_expconf_length_batches(cfg, cfg->searcher.max_length, "searcher.max_length", &n);
    (void)dt_expconf_length_batches(cfg, cfg->min_validation_period, "min_validation_period", &n);
    dt_expconf *again = NULL;
    FZ_ASSERT(dt_expconf_from_json(cfg->json, DT_EXPCONF_MAX_LENGTH_OPTIONAL, &again) == DT_OK);
    dt_expconf_free(again);
    (void)dt_expconf_set_max_length(cfg, (dt_length){DT_UNIT_EPOCHS, 3});
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_init();
    char *text = fz_text(data, size);
    dt_expconf *cfg = NULL;
    if (dt_expconf_load_string(text, "fuzz.yaml", DT_EXPCONF_MAX_LENGTH_OPTIONAL, &cfg) == DT_OK)
        use(cfg);
    else
        FZ_ASSERT(!cfg && dt_last_error()[0]);
    dt_expconf_free(cfg);
    free(text);
    return 0;
}
