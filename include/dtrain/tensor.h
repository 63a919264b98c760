/*
 * dtrain/tensor.h — tensors, the runtime context, eager autograd and the op library.
 *
 * Lifetimes. A tensor made by an op (or by dt_tensor_new) lives in its context's activation
 * arena and is freed, together with the autograd tape, by dt_ctx_reset() — call it once per
 * training step. Tensors that must outlive a step (datasets, parameters, optimizer state)
 * are made with dt_tensor_new_heap() and freed with dt_tensor_free(); parameters belong to
 * their module (nn.h).
 *
 * Errors. Ops return NULL on error with the reason in dt_last_error(). Every op accepts NULL
 * inputs and then returns NULL itself, so an expression can be checked once at the end.
 *
 * Autograd. An op records itself on the context's tape when gradients are enabled and any
 * input requires a gradient. dt_backward(loss) walks the tape in reverse and accumulates
 * gradients (+=) into each tensor's `grad`; a parameter's grad is its view into the flat
 * gradient buffer of its module, so gradients of parameters survive dt_ctx_reset().
 */
#ifndef DTRAIN_TENSOR_H
#define DTRAIN_TENSOR_H

#include "dtrain/base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DT_MAX_DIMS 6

typedef enum dt_dtype {
    DT_DTYPE_F32 = 0,
    DT_DTYPE_BF16,
    DT_DTYPE_F16,
    DT_DTYPE_I32,
    DT_DTYPE_I64,
    DT_DTYPE_COUNT
} dt_dtype;

DT_API size_t dt_dtype_size(dt_dtype t);
DT_API const char *dt_dtype_name(dt_dtype t);
/* Parse "f32"/"float32"/"fp32", "bf16"/"bfloat16", "f16"/"fp16"/"float16", "i32", "i64".
 * Returns DT_DTYPE_COUNT for an unknown name. */
DT_API dt_dtype dt_dtype_from_name(const char *name);

typedef struct dt_ctx dt_ctx;
typedef struct dt_node dt_node;
typedef struct dt_tensor dt_tensor;

enum {
    DT_TENSOR_REQUIRES_GRAD = 1 << 0,
    DT_TENSOR_PARAM = 1 << 1, /* a view into a module's flat parameter buffer */
    DT_TENSOR_HEAP = 1 << 2,  /* struct + data from the heap: free with dt_tensor_free */
    /* bits 16 and up are the library's own */
};

struct dt_tensor {
    dt_dtype dtype;
    int ndim;
    int64_t shape[DT_MAX_DIMS];
    int64_t stride[DT_MAX_DIMS]; /* in elements */
    void *data;                  /* address of element (0, ..., 0) */
    dt_tensor *grad;             /* f32, contiguous, same shape; NULL until a gradient arrives */
    dt_node *node;               /* the op that produced this tensor, if recorded */
    dt_ctx *ctx;
    uint32_t flags;
    dt_mem_category mem_cat; /* heap tensors: the category their data is charged to */
    const char *name;        /* optional, not owned */
};

/* ---- context -------------------------------------------------------------------------- */

/* A context owns an activation arena, the autograd tape, an RNG, FLOP counters and the
 * grad-mode / training / autocast switches. `dev` may be NULL: the context then owns a
 * device whose budget comes from $DT_DEVICE_MEMORY. */
DT_API dt_ctx *dt_ctx_new(dt_device *dev, uint64_t seed);
DT_API void dt_ctx_free(dt_ctx *ctx);
DT_API dt_device *dt_ctx_device(dt_ctx *ctx);
DT_API dt_rng *dt_ctx_rng(dt_ctx *ctx);
/* Free every arena tensor and clear the tape. Parameter gradients are kept. */
DT_API void dt_ctx_reset(dt_ctx *ctx);
/* A hook point inside backward passes (the engine's ZeRO gather / reduce points): `fn(user,
 * arg)` runs when a backward over the current tape reaches the place where this was called —
 * after the backward of every op recorded after the call, before the backward of any op
 * recorded before it. Marks recorded after the node a backward starts from are not run by that
 * backward. dt_ctx_reset forgets the marks. DT_ERR_OOM / DT_ERR_INVALID on failure. */
typedef void (*dt_backward_mark_fn)(void *user, int64_t arg);
DT_API dt_status dt_ctx_mark_backward(dt_ctx *ctx, dt_backward_mark_fn fn, void *user, int64_t arg);
/* Activation checkpointing: y = fn(x, user) computed without keeping fn's intermediate
 * activations (only x and y stay in the arena); the backward runs fn again from x, with the
 * context RNG as it was the first time (dropout draws the same masks), and backpropagates
 * through the recomputed ops. fn must compute the same thing given the same x and RNG; user
 * must stay valid until the backward. Parameters used inside fn get their gradients as usual.
 * With gradients off this is just fn(x). NULL on error (fn's, or DT_ERR_OOM). */
typedef dt_tensor *(*dt_checkpoint_fn)(dt_tensor *x, void *user);
DT_API dt_tensor *dt_checkpoint(dt_checkpoint_fn fn, void *user, dt_tensor *x);
/* Returns the previous setting. With grad disabled no op records itself (evaluation). */
DT_API bool dt_set_grad_enabled(dt_ctx *ctx, bool on);
DT_API bool dt_grad_enabled(const dt_ctx *ctx);
/* Training mode switches dropout on. Default: training. */
DT_API void dt_ctx_set_training(dt_ctx *ctx, bool on);
DT_API bool dt_ctx_training(const dt_ctx *ctx);
/* Autocast: DT_DTYPE_BF16 makes matmul-class ops compute in bf16 with f32 accumulation and
 * f32 outputs; DT_DTYPE_F32 (default) computes in f32. */
DT_API dt_status dt_ctx_set_autocast(dt_ctx *ctx, dt_dtype compute);
DT_API dt_dtype dt_ctx_autocast(const dt_ctx *ctx);
/* How large matmuls compute under autocast `compute` at this process's kernel level:
 * "f32-onednn", "f32-openblas", "bf16-onednn" (bf16 instructions), or "bf16-storage-f32-openblas"
 * / "bf16-storage-f32-onednn" (operands rounded to bf16, f32 products: no bf16 instructions);
 * under bf16's f32 fallback the f32 ones. */
DT_API const char *dt_matmul_compute(dt_dtype compute);
/* How bf16 autocast runs in this process: "native" (bf16 instructions), "storage-f32-compute"
 * (operands rounded to bf16, f32 products) or "f32-fallback" (f32 matmuls; $DTRAIN_BF16_PATH). */
DT_API const char *dt_bf16_path(void);

typedef struct dt_flops {
    int64_t forward; /* since the last dt_ctx_flops_reset */
    int64_t backward;
} dt_flops;
DT_API dt_flops dt_ctx_flops(const dt_ctx *ctx);
DT_API void dt_ctx_flops_reset(dt_ctx *ctx);

/* Op profile: while on, every op adds the wall time of its forward (from its node's creation
 * to its commit: the op's own work, not the preparation of its inputs) and of its backward to
 * its row. Turning it on clears the rows; turning it off keeps them for reading. Off costs
 * one branch per op. */
typedef struct dt_op_time {
    const char *op; /* the op's registered name */
    int64_t fwd_calls, bwd_calls;
    double fwd_sec, bwd_sec;
} dt_op_time;
DT_API dt_status dt_ctx_set_profile(dt_ctx *ctx, bool on);

/* ---- tensors -------------------------------------------------------------------------- */

/* Zeroed contiguous arena tensor. */
DT_API dt_tensor *dt_tensor_new(dt_ctx *ctx, dt_dtype dtype, int ndim, const int64_t *shape);
/* Zeroed contiguous heap tensor charged to `cat`; free with dt_tensor_free. */
DT_API dt_tensor *dt_tensor_new_heap(dt_ctx *ctx, dt_dtype dtype, int ndim, const int64_t *shape,
                                     dt_mem_category cat);
DT_API void dt_tensor_free(dt_tensor *t);
/* An arena tensor that wraps caller memory (not copied, not freed). */
DT_API dt_tensor *dt_tensor_wrap(dt_ctx *ctx, dt_dtype dtype, int ndim, const int64_t *shape,
                                 void *data);
/* Arena f32 tensor filled from `src` (n must equal numel). */
DT_API dt_tensor *dt_tensor_from_f32(dt_ctx *ctx, int ndim, const int64_t *shape, const float *src);
DT_API dt_tensor *dt_tensor_from_i64(dt_ctx *ctx, int ndim, const int64_t *shape,
                                     const int64_t *src);
DT_API dt_tensor *dt_scalar(dt_ctx *ctx, float v);
DT_API dt_tensor *dt_randn(dt_ctx *ctx, int ndim, const int64_t *shape, float std);
DT_API dt_tensor *dt_rand_uniform(dt_ctx *ctx, int ndim, const int64_t *shape, float lo, float hi);

DT_API int64_t dt_numel(const dt_tensor *t);
DT_API bool dt_is_contiguous(const dt_tensor *t);
DT_API size_t dt_nbytes(const dt_tensor *t); /* numel * dtype size */
DT_API void dt_set_requires_grad(dt_tensor *t, bool on);
DT_API bool dt_requires_grad(const dt_tensor *t);
/* Value of a one-element tensor, converted to double. */
DT_API double dt_item(const dt_tensor *t);
/* Copy `src` into `dst` (same numel; any dtypes / strides; converting). Not recorded. */
DT_API dt_status dt_copy(dt_tensor *dst, const dt_tensor *src);
/* Copy into a fresh contiguous arena tensor of `dtype` (not recorded; no gradient). */
DT_API dt_tensor *dt_to_dtype(dt_tensor *t, dt_dtype dtype);
/* A tensor that shares data but is cut from the tape (like PyTorch's detach()). */
DT_API dt_tensor *dt_detach(dt_tensor *t);
DT_API void dt_zero_(dt_tensor *t);
DT_API void dt_fill_(dt_tensor *t, float v);
/* Format "f32[2, 3]" into buf. */
DT_API const char *dt_shape_str(const dt_tensor *t, char *buf, size_t n);

/* bf16 / f16 conversion (round to nearest even). */
DT_API void dt_f32_to_bf16(const float *src, uint16_t *dst, int64_t n);
DT_API void dt_bf16_to_f32(const uint16_t *src, float *dst, int64_t n);
DT_API void dt_f32_to_f16(const float *src, uint16_t *dst, int64_t n);
DT_API void dt_f16_to_f32(const uint16_t *src, float *dst, int64_t n);

/* ---- autograd ------------------------------------------------------------------------- */

/* Backpropagate from a one-element tensor (seeded with 1). Gradients accumulate into leaves
 * (parameters and tensors marked with dt_set_requires_grad); intermediate tensors' gradients
 * are consumed on the way, so calling backward again on the same graph (e.g. for a second
 * loss) adds exactly that loss's gradient. */
DT_API dt_status dt_backward(dt_tensor *loss);
/* Backpropagate from any tensor with an explicit output gradient (same shape). */
DT_API dt_status dt_backward_with(dt_tensor *out, const dt_tensor *grad_out);

/* ---- ops -----------------------------------------------------------------------------
 * Inputs are f32 unless stated. Shapes: `(B, T, C)` comments name dims in order.
 * Broadcasting follows NumPy/PyTorch rules. A negative `dim` counts from the end. */

/* a (..., M, K) @ b (..., K, N); ta/tb transpose the last two dims of a/b first. The batch
 * dims broadcast (b may be 2-D). */
DT_API dt_tensor *dt_matmul(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_matmul_t(dt_tensor *a, dt_tensor *b, bool ta, bool tb);
/* x (..., IN) · w (OUT, IN)ᵀ + b (OUT); b may be NULL. */
DT_API dt_tensor *dt_linear(dt_tensor *x, dt_tensor *w, dt_tensor *b);
/* Fused linear + activation: the same values as dt_gelu_tanh(dt_linear(x, w, b)) and
 * dt_relu(dt_linear(x, w, b)) in one op (the activation runs on each GEMM tile while it is in
 * cache; no separate activation tensor or pass). */
DT_API dt_tensor *dt_linear_gelu_tanh(dt_tensor *x, dt_tensor *w, dt_tensor *b);
DT_API dt_tensor *dt_linear_relu(dt_tensor *x, dt_tensor *w, dt_tensor *b);
/* res + (x · wᵀ + b), res of the output's shape: the same values as dt_add(res, dt_linear(x,
 * w, b)) in one op (res is added on each GEMM tile; in the backward res takes dy over instead
 * of a copy). The projection that closes a residual branch. */
DT_API dt_tensor *dt_linear_residual(dt_tensor *x, dt_tensor *w, dt_tensor *b, dt_tensor *res);

DT_API dt_tensor *dt_add(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_sub(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_mul(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_div(dt_tensor *a, dt_tensor *b);
DT_API dt_tensor *dt_scale(dt_tensor *x, float s);
DT_API dt_tensor *dt_add_scalar(dt_tensor *x, float s);

DT_API dt_tensor *dt_relu(dt_tensor *x);
DT_API dt_tensor *dt_gelu(dt_tensor *x);      /* exact (erf) */
DT_API dt_tensor *dt_gelu_tanh(dt_tensor *x); /* tanh approximation */
DT_API dt_tensor *dt_silu(dt_tensor *x);
/* gate and up of one shape: silu(gate) * up */
DT_API dt_tensor *dt_swiglu(dt_tensor *gate, dt_tensor *up);
DT_API dt_tensor *dt_tanh(dt_tensor *x);
DT_API dt_tensor *dt_sigmoid(dt_tensor *x);
DT_API dt_tensor *dt_softmax(dt_tensor *x, int dim);
DT_API dt_tensor *dt_log_softmax(dt_tensor *x, int dim);

/* Normalise over the last dim; w, b of shape (C) may be NULL. */
DT_API dt_tensor *dt_layer_norm(dt_tensor *x, dt_tensor *w, dt_tensor *b, float eps);
DT_API dt_tensor *dt_rms_norm(dt_tensor *x, dt_tensor *w, float eps);
/* x (B, T, H, D), D even: rotary position embedding, HF rotate_half convention (pairs (i, i+D/2)),
 * positions pos0..pos0+T-1, inv_freq = theta^(-2i/D) */
DT_API dt_tensor *dt_rope(dt_tensor *x, int64_t pos0, float theta);
/* idx (any shape, i32 or i64) into w (V, C) -> (idx..., C). Out-of-range ids are an error. */
DT_API dt_tensor *dt_embedding(dt_tensor *idx, dt_tensor *w);
/* wa[ia] + wb[ib] as one op (ia, ib of one shape; tables of one width C): a GPT's token plus
 * position embeddings. The bits of dt_add(dt_embedding(ia, wa), dt_embedding(ib, wb)). */
DT_API dt_tensor *dt_embedding_sum(dt_tensor *ia, dt_tensor *wa, dt_tensor *ib, dt_tensor *wb);
/* Inverted dropout with keep-probability 1-p when the context is training; identity else.
 * The mask comes from the context RNG (counter-based: reproducible, thread-count free). */
DT_API dt_tensor *dt_dropout(dt_tensor *x, float p);

/* x (N, C, H, W), w (OC, C, KH, KW), b (OC) or NULL -> (N, OC, OH, OW). */
DT_API dt_tensor *dt_conv2d(dt_tensor *x, dt_tensor *w, dt_tensor *b, int stride, int padding);
DT_API dt_tensor *dt_max_pool2d(dt_tensor *x, int kernel, int stride, int padding);
/* dt_max_pool2d(dt_relu(x), ...) in one op: the same values and gradients, without the
 * full-size ReLU output and its passes (a CNN's ReLU → MaxPool2d). */
DT_API dt_tensor *dt_relu_max_pool2d(dt_tensor *x, int kernel, int stride, int padding);
DT_API dt_tensor *dt_avg_pool2d(dt_tensor *x, int kernel, int stride, int padding);

/* Views share data with the input when possible (reshape of a contiguous tensor, transpose,
 * permute, slice); dt_contiguous copies when needed. A -1 in reshape is inferred. */
DT_API dt_tensor *dt_reshape(dt_tensor *x, int ndim, const int64_t *shape);
DT_API dt_tensor *dt_transpose(dt_tensor *x, int d0, int d1);
DT_API dt_tensor *dt_permute(dt_tensor *x, const int *perm);
DT_API dt_tensor *dt_slice(dt_tensor *x, int dim, int64_t start, int64_t end);
DT_API dt_tensor *dt_contiguous(dt_tensor *x);
DT_API dt_tensor *dt_concat(int n, dt_tensor *const *xs, int dim);
/* Split `x` along `dim` into n pieces of the given sizes (written to out[0..n)). */
DT_API dt_status dt_split(dt_tensor *x, int dim, int n, const int64_t *sizes, dt_tensor **out);

DT_API dt_tensor *dt_sum(dt_tensor *x, int dim, bool keepdim);
DT_API dt_tensor *dt_mean(dt_tensor *x, int dim, bool keepdim);
DT_API dt_tensor *dt_max(dt_tensor *x, int dim, bool keepdim);
DT_API dt_tensor *dt_sum_all(dt_tensor *x);
DT_API dt_tensor *dt_mean_all(dt_tensor *x);

/* logits (N, C) (or (..., C)), targets (N) i32/i64 -> mean over targets != ignore_index. */
DT_API dt_tensor *dt_cross_entropy(dt_tensor *logits, dt_tensor *targets, int64_t ignore_index);
DT_API dt_tensor *dt_mse(dt_tensor *pred, dt_tensor *target);

/* Fused causal multi-head self-attention core: qkv (B, T, 3C) laid out [q | k | v] along
 * the last dim, heads split C = NH * HD -> y (B, T, C), softmax(q kᵀ / sqrt(HD)) v with a
 * causal mask. */
DT_API dt_tensor *dt_causal_self_attention(dt_tensor *qkv, int n_head);
/* q (B, T, Hq, D), k and v (B, S, Hkv, D), Hq % Hkv == 0, S >= T: softmax(q k^T / sqrt(D)) v per
 * head, query head h reads kv head h / (Hq/Hkv); causal: query t sits at position S-T+t and sees
 * keys 0..S-T+t. Returns (B, T, Hq, D). */
DT_API dt_tensor *dt_attention(dt_tensor *q, dt_tensor *k, dt_tensor *v, bool causal);

/* ---- op table ------------------------------------------------------------------------- */

/* Number of registered ops and their names (every op that can appear on the tape). */

/* ---- safetensors ----------------------------------------------------------------------
 * The safetensors format (readable by PyTorch / Hugging Face tools): an 8-byte little-endian
 * header length N, N bytes of JSON {"name": {"dtype": "F32", "shape": [..],
 * "data_offsets": [begin, end]}, ..., "__metadata__": {"key": "value"}}, then the data buffer.
 * dtrain reads and writes the dtypes F32, BF16, F16, I32 and I64 (src/tensor/safetensors.c). */

typedef struct dt_safetensors dt_safetensors;

/* Open `path` and validate it completely before returning: header size sane (< 100 MB and
 * inside the file), JSON valid, every dtype known, shape x dtype size == data size, offsets
 * inside the data buffer, no overlaps, no gaps, the data buffer fully covered. Tensor data is
 * not loaded: it is read from the open file by _get / _read_into. The handle is owned by the
 * caller (dt_safetensors_close). On error returns NULL with DT_ERR_IO (cannot open/read) or
 * DT_ERR_FORMAT (corrupted/unsupported), the message naming the file and what is wrong. */
DT_API dt_safetensors *dt_safetensors_open(const char *path);
/* Close the file and free the handle; every string it returned becomes invalid. NULL is fine. */
DT_API void dt_safetensors_close(dt_safetensors *f);
DT_API const char *dt_safetensors_path(const dt_safetensors *f);
/* Tensors in header order: i in [0, count). Out-of-range i: NULL / DT_DTYPE_COUNT / -1. */
DT_API int dt_safetensors_count(const dt_safetensors *f);
DT_API const char *dt_safetensors_name(const dt_safetensors *f, int i);
/* Index of tensor `name`, or -1 (no error is raised: absence is a normal answer). */
DT_API int dt_safetensors_find(const dt_safetensors *f, const char *name);
DT_API dt_dtype dt_safetensors_dtype(const dt_safetensors *f, int i);
DT_API int dt_safetensors_ndim(const dt_safetensors *f, int i);
/* The shape of tensor i (ndim entries, owned by f). */
DT_API const int64_t *dt_safetensors_shape(const dt_safetensors *f, int i);
/* A new contiguous arena tensor in ctx holding a copy of tensor `name` in its stored dtype (it
 * is freed by dt_ctx_reset). NULL on error: DT_ERR_INVALID for an unknown name (the message
 * lists some names), DT_ERR_IO if the file cannot be read, DT_ERR_OOM. */
DT_API dt_tensor *dt_safetensors_get(dt_safetensors *f, dt_ctx *ctx, const char *name);
/* Read tensor `name` into dst (any strides). Shapes must be equal; dtypes equal, or both
 * floating (f32/bf16/f16: converted, round to nearest even). Not recorded on the tape.
 * On error dst may be partly written. */
DT_API dt_status dt_safetensors_read_into(dt_safetensors *f, const char *name, dt_tensor *dst);
/* Value of metadata `key` (owned by f), or NULL when absent. */
DT_API const char *dt_safetensors_metadata(const dt_safetensors *f, const char *key);
DT_API int dt_safetensors_metadata_count(const dt_safetensors *f);
DT_API const char *dt_safetensors_metadata_key(const dt_safetensors *f, int i);

/* Write n tensors (names[i] -> tensors[i], in the given order; any strides: written in logical
 * row-major order) and n_meta metadata pairs (meta_kv[2k] = key, meta_kv[2k+1] = value) to
 * `path` atomically: the bytes go to "<path>.tmp.<pid>", which is fsynced, renamed over path,
 * and the directory fsynced. Names must be unique, non-empty and not "__metadata__".
 * On error (DT_ERR_INVALID for bad arguments, DT_ERR_IO for the file system) the temporary
 * file is removed and a file already at `path` is left untouched. */
DT_API dt_status dt_safetensors_write(const char *path, int n, const char *const *names,
                                      dt_tensor *const *tensors, int n_meta,
                                      const char *const *meta_kv);

#ifdef __cplusplus
}
#endif
#endif
