/*
 * fuzz_safetensors.c — the safetensors reader (dtrain/tensor.h) on any file: the input is
 * written to a scratch file and opened; a file that opens has every tensor read, as stored
 * (dt_safetensors_get) and converted to f32 when it is floating (dt_safetensors_read_into).
 */
#include "fuzz.h"

#include "dtrain/tensor.h"

static void read_all(dt_safetensors *f, dt_ctx *ctx) {
    for (int i = 0; i < dt_safetensors_count(f); i++) {
        const char *name = dt_safetensors_name(f, i);
        FZ_ASSERT(name && dt_safetensors_find(f, name) == i);
        int nd = dt_safetensors_ndim(f, i);
        dt_dtype dt = dt_safetensors_dtype(f, i);
        const int64_t *shape = dt_safetensors_shape(f, i);
        dt_tensor *t = dt_safetensors_get(f, ctx, name);
        FZ_ASSERT(!t || (t->ndim == nd && t->dtype == dt));
        if (t && (dt == DT_DTYPE_BF16 || dt == DT_DTYPE_F16)) {
            dt_tensor *h = dt_tensor_new_heap(ctx, DT_DTYPE_F32, nd, shape, DT_MEM_OTHER);
            if (h) (void)dt_safetensors_read_into(f, name, h);
            dt_tensor_free(h);
        }
        dt_ctx_reset(ctx);
    }
    for (int i = 0; i < dt_safetensors_metadata_count(f); i++)
        FZ_ASSERT(dt_safetensors_metadata(f, dt_safetensors_metadata_key(f, i)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_init();
    static char path[300];
    if (!path[0]) snprintf(path, sizeof path, "%s/in.safetensors", fz_dir());
    fz_write(path, data, size);
    dt_safetensors *f = dt_safetensors_open(path);
    if (!f) {
        FZ_ASSERT(dt_last_error()[0]);
        return 0;
    }
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    FZ_ASSERT(ctx);
    read_all(f, ctx);
    dt_ctx_free(ctx);
    dt_safetensors_close(f);
    return 0;
}
