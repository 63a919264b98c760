/*
 * tensor_iface.h — the tensor layer's internal interface to the layers above (not public API):
 * what modules (nn) and the pipeline engine need from a context beyond dtrain/tensor.h. Only
 * this header of the tensor layer's internals may be included outside src/tensor/
 * (tools/check_layers.sh enforces it).
 */
#ifndef DT_TENSOR_IFACE_H
#define DT_TENSOR_IFACE_H

#include <stdbool.h>

#include "dtrain/tensor.h"

/* Stale gradients. A parameter whose tensor has DT__TENSOR_GRAD_STALE set has a gradient of
 * zero whatever its buffer holds (dt_module_zero_grad_lazy, PyTorch's set_to_none): the next
 * backward op to reach it stores instead of adding (dt__grad_f32_fresh says fresh) or zeroes it
 * first (dt__grad_f32), and clears the flag. The owner of such tensors registers a settle
 * function with their context, which every top-level backward calls when it ends: it zeroes
 * the gradients the backward did not reach and clears their flags, so after a backward every
 * gradient buffer holds its true values again. */
#define DT__TENSOR_GRAD_STALE (1u << 16)
#define DT__MAX_SETTLE 8
typedef void (*dt__settle_fn)(void *arg);
/* false when the context has no room left (the caller then zeroes eagerly) */
bool dt__ctx_add_settle(dt_ctx *ctx, dt__settle_fn fn, void *arg);
void dt__ctx_remove_settle(dt_ctx *ctx, dt__settle_fn fn, void *arg);

/* ---- several arenas on one context (the pipeline engine: one per micro-batch in flight) ----
 * Everything a context allocates goes to its current arena. dt__ctx_swap_arena makes `a` the
 * current one and returns the previous. Before an arena other than the context's own is reset,
 * dt__ctx_forget_arena takes its nodes off the tape (and its marks) and empties the gradient
 * pool, so no later backward visits freed memory. */
dt_arena *dt__ctx_swap_arena(dt_ctx *c, dt_arena *a);
void dt__ctx_forget_arena(dt_ctx *c, const dt_arena *a);

/* ---- the op registry and profile (autograd.c) ---- */
/* The rows of ops called since the profile was turned on, in op-table order: up to cap into
 * out; returns how many there are. */
DT_API int dt_ctx_op_times(const dt_ctx *ctx, dt_op_time *out, int cap);
/* Number of nodes on the tape (for tests and debugging). */
DT_API int64_t dt_ctx_tape_len(const dt_ctx *ctx);
DT_API int dt_op_count(void);
DT_API const char *dt_op_name(int i);

DT_API dt_arena *dt_ctx_arena(dt_ctx *ctx);

#endif
