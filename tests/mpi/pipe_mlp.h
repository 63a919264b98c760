/* pipe_mlp.h — the MLP the pipeline tests cut into stages: Linear(DIM, HID) ReLU
 * Linear(HID, HID) ReLU Linear(HID, HID) ReLU Linear(HID, CLASSES), as a dt_pipe_layer list
 * (LAYERS, NL) and as the equivalent plain Sequential (pipe_mlp_sequential) the pipeline's
 * results are checked against, and its initial weights in a file (pipe_mlp_save_init). The
 * including test defines DIM, HID and CLASSES first. */
#ifndef DT_TEST_PIPE_MLP_H
#define DT_TEST_PIPE_MLP_H

#include "dtrain/nn.h"
#include "dtrain/pipe.h"
#include "fixtures/files.h"

static dt_module *lin_in(void *a) {
    (void)a;
    return dt_nn_linear(DIM, HID, true);
}
static dt_module *lin_hid(void *a) {
    (void)a;
    return dt_nn_linear(HID, HID, true);
}
static dt_module *lin_out(void *a) {
    (void)a;
    return dt_nn_linear(HID, CLASSES, true);
}
static dt_module *relu(void *a) {
    (void)a;
    return dt_nn_relu();
}

static const dt_pipe_layer LAYERS[] = {
    {.type = "Linear", .build = lin_in},  {.type = "ReLU", .build = relu},
    {.type = "Linear", .build = lin_hid}, {.type = "ReLU", .build = relu},
    {.type = "Linear", .build = lin_hid}, {.type = "ReLU", .build = relu},
    {.type = "Linear", .build = lin_out},
};
#define NL ((int)(sizeof LAYERS / sizeof LAYERS[0]))

static dt_module *pipe_mlp_sequential(void) {
    return dt_nn_sequential(lin_in(NULL), relu(NULL), lin_hid(NULL), relu(NULL), lin_hid(NULL),
                            relu(NULL), lin_out(NULL), NULL);
}

/* Write the weights of pipe_mlp_sequential built from seed to a safetensors file at path. */
static inline bool pipe_mlp_save_init(const char *path, uint64_t seed) {
    dt_ctx *c = dt_ctx_new(NULL, 1);
    dt_module *net = pipe_mlp_sequential();
    bool ok = dt_module_build(net, c, seed) == DT_OK && fx_save_params(path, net);
    dt_module_free(net);
    dt_ctx_free(c);
    return ok;
}

#endif
