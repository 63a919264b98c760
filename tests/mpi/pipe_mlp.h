/* pipe_mlp.h — the MLP the pipeline tests cut into stages: Linear(DIM, HID) ReLU
 * Linear(HID, HID) ReLU Linear(HID, HID) ReLU Linear(HID, CLASSES), as a dt_pipe_layer list
 * (LAYERS, NL) and as the equivalent plain Sequential (pipe_mlp_sequential) the pipeline's
 * results are checked against. The including test defines DIM, HID and CLASSES first. */
#ifndef DT_TEST_PIPE_MLP_H
#define DT_TEST_PIPE_MLP_H

#include "dtrain/nn.h"
#include "dtrain/pipe.h"

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

#endif
