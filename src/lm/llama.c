/* llama.c — the Llama layout (and Mistral, Qwen2: rows of arch.c). */
#include "model_impl.h"

dt_module *dt__llama_build(const dt_lm_config *cfg, const dt__lm_arch *a) {
    (void)cfg;
    dt_error(DT_ERR_FORMAT, "model_type '%s' is not supported yet", a->model_type);
    return NULL;
}
