/*
 * fuzz_ds_config.c — the DeepSpeed config (src/engine/ds_config.c) from any JSON text, for a
 * data-parallel world size given by the input's optional leading digits (default 1): the
 * corpus files read "3{...}" for three ranks. Only text starting with '{' is loaded:
 * dt_ds_config_load takes anything else for a file path.
 */
#include "fuzz.h"

#include "dtrain/engine.h"

#include <ctype.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_init();
    char *text = fz_text(data, size), *p = text;
    int world = 0;
    for (int i = 0; i < 6 && isdigit((unsigned char)*p); i++) world = world * 10 + (*p++ - '0');
    if (world < 1) world = 1;
    const char *q = p;
    while (isspace((unsigned char)*q)) q++;
    json_t *j = *q == '{' ? dt_ds_config_load(p) : NULL;
    if (j) {
        dt_ds_config c;
        if (dt_ds_config_parse(j, world, &c) == DT_OK) {
            FZ_ASSERT(c.train_batch_size ==
                      c.train_micro_batch_size_per_gpu * c.gradient_accumulation_steps * world);
            FZ_ASSERT(c.memory_budget_bytes >= 0);
        }
        /* the engine merges the command line's overrides into the file's config */
        json_t *merged = dt_overwrite_config(j, j);
        FZ_ASSERT(merged && json_equal(merged, j));
        json_decref(merged);
        json_decref(j);
    }
    free(text);
    return 0;
}
