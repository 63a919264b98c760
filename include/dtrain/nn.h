/*
 * dtrain/nn.h — modules: named parameters in one flat buffer, children, forward; the
 * standard layers; builders for the benchmark models (mlp, cnn, gpt).
 *
 * Life of a model:
 *   dt_module *net = dt_nn_sequential(dt_nn_linear(784, 512, true), dt_nn_relu(),
 *                                     dt_nn_linear(512, 10, true), NULL);
 *   dt_module_build(net, ctx, seed);   // one flat f32 buffer for params, one for grads;
 *                                      // parameters initialised as PyTorch's defaults
 *   dt_tensor *y = dt_module_forward(net, x);
 *   ...
 *   dt_module_free(net);               // frees the whole tree and its buffers
 *
 * Parameter names are dotted paths as in PyTorch's state_dict ("0.weight", "h.1.attn.c_attn.bias").
 * Each parameter is 64-byte aligned inside the flat buffer; the padding stays zero.
 */
#ifndef DTRAIN_NN_H
#define DTRAIN_NN_H

#include "dtrain/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_module dt_module;
typedef dt_tensor *(*dt_forward_fn)(dt_module *m, dt_tensor *x);
/* Called around a module's forward (engine hook points: ZeRO-3 gather/release, pipeline). */
typedef void (*dt_module_hook)(dt_module *m, void *user);

typedef enum dt_init {
    DT_INIT_ZEROS,
    DT_INIT_ONES,
    DT_INIT_UNIFORM, /* U[a, b) */
    DT_INIT_NORMAL,  /* N(a, b^2) */
} dt_init;

typedef struct dt_param {
    char name[48];     /* local name, e.g. "weight" */
    dt_tensor *t;      /* view into the flat buffer (valid after dt_module_build) */
    int ndim;
    int64_t shape[DT_MAX_DIMS];
    dt_init init;
    float a, b;
    int64_t offset; /* element offset in the flat buffer */
} dt_param;

struct dt_module {
    const char *type; /* "Linear", "Sequential", ... (static string) */
    char name[48];    /* name inside the parent ("0", "fc1"); "" for the root */
    dt_module *parent;
    dt_module **children;
    int n_children, cap_children;
    dt_param *params;
    int n_params, cap_params;
    dt_forward_fn forward;
    void (*destroy)(dt_module *m); /* frees impl; may be NULL */
    void *impl;
    int64_t iconf[6]; /* small layer configuration (features, kernel, stride, ...) */
    float fconf[2];   /* (eps, p, ...) */
    dt_module_hook pre_hook, post_hook;
    void *hook_user;
    struct dt_flat *flat; /* root only, after dt_module_build */
};

/* ---- building blocks for new layers ---- */

/* A module with no params or children. `type` must be a static string. */
DT_API dt_module *dt_module_new(const char *type, dt_forward_fn forward);
/* Declare a parameter (before dt_module_build). Returns its index, or -1 (DT_ERR_OOM). */
DT_API int dt_module_add_param(dt_module *m, const char *name, int ndim, const int64_t *shape,
                               dt_init init, float a, float b);
/* Attach `child` under `name` (the parent takes ownership). NULL child: error, returns -1. */
DT_API int dt_module_add_child(dt_module *m, const char *name, dt_module *child);
/* The tensor of parameter `i` of m (after build). */
DT_API dt_tensor *dt_module_param(dt_module *m, int i);
DT_API dt_module *dt_module_child(dt_module *m, int i);
/* Free the module tree (and the flat buffers if built). NULL is fine. */
DT_API void dt_module_free(dt_module *m);

/* ---- whole-model operations (on the root) ---- */

/* Allocate the flat parameter and gradient buffers on ctx's device (DT_MEM_PARAMS /
 * DT_MEM_GRADS) and initialise every parameter from an RNG seeded with `seed`, in tree order.
 * On DT_ERR_OOM nothing stays allocated. Building twice is an error. */
DT_API dt_status dt_module_build(dt_module *root, dt_ctx *ctx, uint64_t seed);
DT_API dt_tensor *dt_module_forward(dt_module *m, dt_tensor *x);
/* Number of parameter elements (excluding alignment padding). */
DT_API int64_t dt_module_num_params(const dt_module *root);
/* Named parameter list of a built root (dotted names); i in [0, count). */
DT_API int dt_module_param_count(const dt_module *root);
DT_API const char *dt_module_param_name(const dt_module *root, int i);
DT_API dt_tensor *dt_module_param_tensor(const dt_module *root, int i);
DT_API dt_tensor *dt_module_find_param(const dt_module *root, const char *dotted_name);
/* The flat buffers (n = elements including padding). */
DT_API float *dt_module_flat_params(const dt_module *root, int64_t *n);
DT_API float *dt_module_flat_grads(const dt_module *root, int64_t *n);
DT_API void dt_module_zero_grad(dt_module *root);
/* Zero the gradients without writing them (PyTorch's zero_grad(set_to_none=True)): each
 * parameter's gradient becomes zero by definition, and the next backward stores its first
 * contribution instead of adding it to a zeroed buffer; the parameters that backward does not
 * reach are zeroed when it ends. dt_module_flat_grads, dt_module_param_tensor and
 * dt_module_find_param zero what is still pending before they hand anything out, so through
 * them the gradients always read as zero until a backward writes them. Between this call and
 * the next backward, do not read or write the gradient buffer through a pointer obtained
 * before it. */
DT_API void dt_module_zero_grad_lazy(dt_module *root);
DT_API dt_ctx *dt_module_ctx(const dt_module *root);

/* ---- layers ---- */

DT_API dt_module *dt_nn_linear(int64_t in, int64_t out, bool bias);
DT_API dt_module *dt_nn_conv2d(int64_t in_ch, int64_t out_ch, int kernel, int stride, int padding,
                               bool bias);
DT_API dt_module *dt_nn_embedding(int64_t num, int64_t dim);
DT_API dt_module *dt_nn_layer_norm(int64_t dim, float eps);
DT_API dt_module *dt_nn_rms_norm(int64_t dim, float eps);
DT_API dt_module *dt_nn_dropout(float p);
DT_API dt_module *dt_nn_relu(void);
DT_API dt_module *dt_nn_gelu(bool tanh_approx);
DT_API dt_module *dt_nn_silu(void);
DT_API dt_module *dt_nn_tanh(void);
DT_API dt_module *dt_nn_sigmoid(void);
DT_API dt_module *dt_nn_max_pool2d(int kernel, int stride, int padding);
DT_API dt_module *dt_nn_avg_pool2d(int kernel, int stride, int padding);
/* (N, d1, d2, ...) -> (N, d1*d2*...) */
DT_API dt_module *dt_nn_flatten(void);
/* NULL-terminated list of children named "0", "1", ...; a NULL from a failed constructor
 * before the terminator cannot be told apart, so check constructors that can fail. */
DT_API dt_module *dt_nn_sequential(dt_module *first, ...);
/* The same from an array of n modules, all owned by the result; a NULL entry (a failed
 * constructor) frees them all and returns NULL with DT_ERR_INVALID naming its index. */
DT_API dt_module *dt_nn_sequential_of(dt_module *const *mods, int n);

/* ---- benchmark models ---- */

/* in -> hidden (ReLU) x layers -> out, as nn.Sequential (names "0", "2", ...). */
DT_API dt_module *dt_model_mlp(int64_t in, int64_t hidden, int layers, int64_t out);
/* conv3x3(1->32,p1) ReLU maxpool2, conv3x3(32->64,p1) ReLU maxpool2, flatten,
 * linear 3136->128 ReLU, linear 128->10 on (N, 1, 28, 28), as nn.Sequential. */
DT_API dt_module *dt_model_cnn(void);

typedef struct dt_gpt_config {
    int64_t vocab, seq, d_model, n_head, n_layer;
    float dropout; /* 0 for the benchmark */
} dt_gpt_config;
/* GPT-2 style: wte, wpe, h.i.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}, ln_f,
 * lm_head (no bias, untied). forward: tokens (B, T) i32/i64 -> logits (B, T, V). */
DT_API dt_module *dt_model_gpt(const dt_gpt_config *cfg);
/* The same model as pipeline layers: embedding (tokens (B, T) -> x (B, T, D); children wte,
 * wpe), n_layer blocks (x -> x; ln_1, attn, ln_2, mlp), head (x -> logits (B, T, V); ln_f,
 * lm_head). Chained they compute dt_model_gpt's forward. */
DT_API dt_module *dt_gpt_embedding(const dt_gpt_config *cfg);
DT_API dt_module *dt_gpt_block(const dt_gpt_config *cfg);
DT_API dt_module *dt_gpt_head(const dt_gpt_config *cfg);

#ifdef __cplusplus
}
#endif
#endif
