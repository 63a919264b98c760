/* tensor.c — contexts, tensor creation, dtype conversion and copies. */
#include "tensor_impl.h"

#include <math.h>
#include <stdatomic.h>
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/base_impl.h"
#include "tensor/tensor_iface.h"

/* ---- dtypes ---- */

static const size_t dtype_sizes[DT_DTYPE_COUNT] = {4, 2, 2, 4, 8};
static const char *dtype_names[DT_DTYPE_COUNT] = {"f32", "bf16", "f16", "i32", "i64"};

size_t dt_dtype_size(dt_dtype t) {
    return t < DT_DTYPE_COUNT ? dtype_sizes[t] : 0;
}
const char *dt_dtype_name(dt_dtype t) {
    return t < DT_DTYPE_COUNT ? dtype_names[t] : "?";
}

dt_dtype dt_dtype_from_name(const char *s) {
    static const struct {
        const char *n;
        dt_dtype t;
    } tab[] = {{"f32", DT_DTYPE_F32},     {"fp32", DT_DTYPE_F32},  {"float32", DT_DTYPE_F32},
               {"F32", DT_DTYPE_F32},     {"bf16", DT_DTYPE_BF16}, {"bfloat16", DT_DTYPE_BF16},
               {"BF16", DT_DTYPE_BF16},   {"f16", DT_DTYPE_F16},   {"fp16", DT_DTYPE_F16},
               {"float16", DT_DTYPE_F16}, {"F16", DT_DTYPE_F16},   {"i32", DT_DTYPE_I32},
               {"int32", DT_DTYPE_I32},   {"I32", DT_DTYPE_I32},   {"i64", DT_DTYPE_I64},
               {"int64", DT_DTYPE_I64},   {"I64", DT_DTYPE_I64}};
    for (size_t i = 0; s && i < sizeof tab / sizeof tab[0]; i++)
        if (!strcmp(s, tab[i].n)) return tab[i].t;
    return DT_DTYPE_COUNT;
}

/* ---- context ---- */

dt_ctx *dt_ctx_new(dt_device *dev, uint64_t seed) {
    dt_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        dt_error(DT_ERR_OOM, "cannot allocate a context");
        return NULL;
    }
    if (!dev) {
        dev = dt_device_new("cpu", -1);
        if (!dev) {
            free(c);
            return NULL;
        }
        c->own_dev = true;
    }
    c->dev = dev;
    c->arena = dt_arena_new(dev, DT_MEM_ACTIVATIONS, 0);
    if (!c->arena) {
        if (c->own_dev) dt_device_free(dev);
        free(c);
        return NULL;
    }
    dt_rng_init(&c->rng, seed);
    c->grad_enabled = true;
    c->training = true;
    c->autocast = DT_DTYPE_F32;
    return c;
}

void dt_ctx_free(dt_ctx *c) {
    if (!c) return;
    dt__gemm_cache_free(c);
    dt_arena_free(c->arena);
    dt_mem_free(c->dev, DT_MEM_OTHER, c->tape, (size_t)c->tape_cap * sizeof(dt_node *));
    dt_mem_free(c->dev, DT_MEM_OTHER, c->marks, (size_t)c->cap_marks * sizeof *c->marks);
    free(c->carry);
    dt_mem_free(c->dev, DT_MEM_OTHER, c->prof, (size_t)dt_op_count() * sizeof(dt_op_time));
    if (c->own_dev) dt_device_free(c->dev);
    free(c);
}

dt_device *dt_ctx_device(dt_ctx *c) {
    return c->dev;
}
dt_arena *dt_ctx_arena(dt_ctx *c) {
    return c->arena;
}

dt_arena *dt__ctx_swap_arena(dt_ctx *c, dt_arena *a) {
    dt_arena *prev = c->arena;
    c->arena = a;
    return prev;
}

void dt__ctx_forget_arena(dt_ctx *c, const dt_arena *a) {
    int64_t k = 0, m = 0;
    /* tape entries in that arena go; marks keep their place relative to the others */
    for (int64_t i = 0; i < c->tape_len; i++) {
        while (m < c->n_marks && c->marks[m].pos == i) c->marks[m++].pos = k;
        if (dt_arena_contains(a, c->tape[i])) continue;
        c->tape[k++] = c->tape[i];
    }
    while (m < c->n_marks) c->marks[m++].pos = k;
    c->tape_len = k;
    c->grad_pool.n = 0;
    c->n_carry = 0;
}
dt_rng *dt_ctx_rng(dt_ctx *c) {
    return &c->rng;
}

void dt_ctx_reset(dt_ctx *c) {
    c->tape_len = 0;
    c->n_marks = 0;
    c->n_carry = 0;
    c->grad_pool.n = 0; /* arena memory */
    dt_arena_reset(c->arena);
}

bool dt_set_grad_enabled(dt_ctx *c, bool on) {
    bool prev = c->grad_enabled;
    c->grad_enabled = on;
    return prev;
}
bool dt_grad_enabled(const dt_ctx *c) {
    return c->grad_enabled;
}
void dt_ctx_set_training(dt_ctx *c, bool on) {
    c->training = on;
}
bool dt_ctx_training(const dt_ctx *c) {
    return c->training;
}

dt_status dt_ctx_set_autocast(dt_ctx *c, dt_dtype t) {
    if (t != DT_DTYPE_F32 && t != DT_DTYPE_BF16)
        return dt_error(DT_ERR_INVALID,
                        "autocast supports f32 and bf16, not %s; hint: use fp16 "
                        "storage with a loss scaler instead",
                        dt_dtype_name(t));
    c->autocast = t;
    if (t == DT_DTYPE_BF16 && dt__bf16_path_now() == DT__BF16_F32) {
        static atomic_flag told = ATOMIC_FLAG_INIT; /* once per process */
        if (!atomic_flag_test_and_set(&told))
            dt_log(DT_LOG_INFO,
                   "bf16 autocast: no bf16 instructions at kernel level %s; matmuls compute in "
                   "f32, the faster path here (DTRAIN_BF16_PATH=storage keeps bf16 rounding)",
                   dt_cpu_isa_name(dt_cpu_isa_level()));
    }
    return DT_OK;
}
dt_dtype dt_ctx_autocast(const dt_ctx *c) {
    return c->autocast;
}

dt_flops dt_ctx_flops(const dt_ctx *c) {
    return (dt_flops){c->flops_fwd, c->flops_bwd};
}
void dt_ctx_flops_reset(dt_ctx *c) {
    c->flops_fwd = c->flops_bwd = 0;
}
int64_t dt_ctx_tape_len(const dt_ctx *c) {
    return c->tape_len;
}

/* ---- tensors ---- */

int64_t dt_numel(const dt_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

size_t dt_nbytes(const dt_tensor *t) {
    return (size_t)dt_numel(t) * dt_dtype_size(t->dtype);
}

bool dt_is_contiguous(const dt_tensor *t) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != s) return false;
        s *= t->shape[i];
    }
    return true;
}

void dt__set_contiguous_strides(dt_tensor *t) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        t->stride[i] = s;
        s *= t->shape[i];
    }
}

/* The dims are >= 0 and the non-zero ones come to at most INT64_MAX bytes of `dtype`, so the
 * strides, the element count and the byte size computed from them cannot overflow (a 0 dim
 * makes the tensor empty but not its strides small). */
static dt_status check_shape(dt_dtype dtype, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > DT_MAX_DIMS)
        return dt_error(DT_ERR_INVALID, "a tensor has 0 to %d dims, not %d", DT_MAX_DIMS, ndim);
    int64_t span = dtype < DT_DTYPE_COUNT ? (int64_t)dt_dtype_size(dtype) : 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return dt_error(DT_ERR_INVALID, "negative size %lld in dim %d", (long long)shape[i], i);
        if (shape[i] && __builtin_mul_overflow(span, shape[i], &span))
            return dt_error(DT_ERR_INVALID,
                            "the non-zero dims of a tensor come to more than %lld bytes (dim %d "
                            "is %lld)",
                            (long long)INT64_MAX, i, (long long)shape[i]);
    }
    return DT_OK;
}

static void init_header(dt_tensor *t, dt_ctx *ctx, dt_dtype dtype, int ndim, const int64_t *shape) {
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    dt__set_contiguous_strides(t);
    t->ctx = ctx;
}

static dt_tensor *arena_tensor(dt_ctx *ctx, dt_dtype dtype, int ndim, const int64_t *shape,
                               bool zero) {
    if (check_shape(dtype, ndim, shape) != DT_OK) return NULL;
    if (dtype >= DT_DTYPE_COUNT) {
        dt_error(DT_ERR_INVALID, "unknown dtype %d", (int)dtype);
        return NULL;
    }
    dt_tensor *t = dt_arena_alloc(ctx->arena, sizeof *t);
    if (!t) return NULL;
    init_header(t, ctx, dtype, ndim, shape);
    size_t bytes = dt_nbytes(t);
    t->data = zero ? dt_arena_alloc(ctx->arena, bytes) : dt_arena_alloc_raw(ctx->arena, bytes);
    return t->data ? t : NULL;
}

dt_tensor *dt_tensor_new(dt_ctx *ctx, dt_dtype dtype, int ndim, const int64_t *shape) {
    return arena_tensor(ctx, dtype, ndim, shape, true);
}

dt_tensor *dt__empty(dt_ctx *ctx, dt_dtype dtype, int ndim, const int64_t *shape) {
    return arena_tensor(ctx, dtype, ndim, shape, false);
}

dt_tensor *dt__empty_like(const dt_tensor *x) {
    return arena_tensor(x->ctx, DT_DTYPE_F32, x->ndim, x->shape, false);
}

dt_tensor *dt_tensor_new_heap(dt_ctx *ctx, dt_dtype dtype, int ndim, const int64_t *shape,
                              dt_mem_category cat) {
    if (check_shape(dtype, ndim, shape) != DT_OK) return NULL;
    dt_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        dt_error(DT_ERR_OOM, "tensor header");
        return NULL;
    }
    init_header(t, ctx, dtype, ndim, shape);
    t->flags = DT_TENSOR_HEAP;
    t->mem_cat = cat;
    t->data = dt_mem_alloc(ctx->dev, cat, dt_nbytes(t));
    if (!t->data) {
        free(t);
        return NULL;
    }
    return t;
}

void dt_tensor_free(dt_tensor *t) {
    if (!t || !(t->flags & DT_TENSOR_HEAP)) return;
    dt_mem_free(t->ctx->dev, t->mem_cat, t->data, dt_nbytes(t));
    free(t);
}

dt_tensor *dt_tensor_wrap(dt_ctx *ctx, dt_dtype dtype, int ndim, const int64_t *shape, void *data) {
    if (check_shape(dtype, ndim, shape) != DT_OK) return NULL;
    dt_tensor *t = dt_arena_alloc(ctx->arena, sizeof *t);
    if (!t) return NULL;
    init_header(t, ctx, dtype, ndim, shape);
    t->data = data;
    return t;
}

dt_tensor *dt__view_of(dt_tensor *x) {
    dt_tensor *t = dt_arena_alloc(x->ctx->arena, sizeof *t);
    if (!t) return NULL;
    *t = *x;
    t->grad = NULL;
    t->node = NULL;
    t->flags = 0;
    t->name = NULL;
    return t;
}

dt_tensor *dt_tensor_from_f32(dt_ctx *ctx, int ndim, const int64_t *shape, const float *src) {
    dt_tensor *t = dt__empty(ctx, DT_DTYPE_F32, ndim, shape);
    if (t) memcpy(t->data, src, dt_nbytes(t));
    return t;
}

dt_tensor *dt_tensor_from_i64(dt_ctx *ctx, int ndim, const int64_t *shape, const int64_t *src) {
    dt_tensor *t = dt__empty(ctx, DT_DTYPE_I64, ndim, shape);
    if (t) memcpy(t->data, src, dt_nbytes(t));
    return t;
}

dt_tensor *dt_scalar(dt_ctx *ctx, float v) {
    dt_tensor *t = dt__empty(ctx, DT_DTYPE_F32, 0, NULL);
    if (t) *(float *)t->data = v;
    return t;
}

dt_tensor *dt_randn(dt_ctx *ctx, int ndim, const int64_t *shape, float std) {
    dt_tensor *t = dt__empty(ctx, DT_DTYPE_F32, ndim, shape);
    if (t) dt_rng_fill_normal(&ctx->rng, t->data, dt_numel(t), 0.f, std);
    return t;
}

dt_tensor *dt_rand_uniform(dt_ctx *ctx, int ndim, const int64_t *shape, float lo, float hi) {
    dt_tensor *t = dt__empty(ctx, DT_DTYPE_F32, ndim, shape);
    if (t) dt_rng_fill_uniform(&ctx->rng, t->data, dt_numel(t), lo, hi);
    return t;
}

void dt_set_requires_grad(dt_tensor *t, bool on) {
    if (on)
        t->flags |= DT_TENSOR_REQUIRES_GRAD;
    else
        t->flags &= ~(uint32_t)DT_TENSOR_REQUIRES_GRAD;
}
bool dt_requires_grad(const dt_tensor *t) {
    return t && (t->flags & DT_TENSOR_REQUIRES_GRAD);
}

dt_tensor *dt__need_f32(dt_tensor *t, const char *op) {
    if (!t) return NULL;
    if (t->dtype != DT_DTYPE_F32) {
        char b[96];
        dt_error(DT_ERR_INVALID,
                 "%s: expected an f32 tensor, got %s; hint: convert with "
                 "dt_to_dtype(t, DT_DTYPE_F32)",
                 op, dt_shape_str(t, b, sizeof b));
        return NULL;
    }
    return t;
}

const char *dt_shape_str(const dt_tensor *t, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "%s[", dt_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* ---- conversion ---- */

static inline uint16_t bf16_one(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                                          /* nearest even */
    return (uint16_t)(u >> 16);
}

DT__AVX512_BF16_BEGIN
/* The first n / 32 * 32 elements; returns how many. vcvtne2ps2bf16 rounds to nearest even and
 * quiets NaNs: the same result as bf16_one. */
static int64_t f32_to_bf16_avx512bf16(const float *src, uint16_t *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 lo = _mm512_loadu_ps(src + i), hi = _mm512_loadu_ps(src + i + 16);
        _mm512_storeu_si512((void *)(dst + i), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
    return i;
}
DT__ISA_END

void dt__f32_to_bf16_seq(const float *src, uint16_t *dst, int64_t n) {
    int64_t i = 0;
    if (dt_cpu_isa_level() >= DT_CPU_AVX512_BF16) i = f32_to_bf16_avx512bf16(src, dst, n);
    for (; i < n; i++) dst[i] = bf16_one(src[i]);
}

/* bf16_one without a branch (so that it vectorises), kept in the high half of an f32's bits */
static inline uint32_t bf16_high(uint32_t u) {
    uint32_t nan = 0u - (uint32_t)((u & 0x7fffffffu) > 0x7f800000u);
    uint32_t r = ((u | 0x400000u) & nan) | ((u + 0x7fffu + ((u >> 16) & 1u)) & ~nan);
    return r & 0xffff0000u;
}

void dt__f32_round_bf16_seq(const float *src, float *dst, uint16_t *keep, int64_t n) {
    const uint32_t *s = (const uint32_t *)(const void *)src;
    uint32_t *d = (uint32_t *)(void *)dst;
    if (keep)
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            uint32_t r = bf16_high(s[i]);
            d[i] = r;
            keep[i] = (uint16_t)(r >> 16);
        }
    else
#pragma omp simd
        for (int64_t i = 0; i < n; i++) d[i] = bf16_high(s[i]);
}

/* Short arrays never enter an OpenMP region (not even an inactive one: the GEMM packing calls
 * these once per row). Large ones go in parallel chunks of CH elements (both paths round
 * alike, so the split never shows in the bits). */
#define CVT_CHUNK ((int64_t)1 << 14)

void dt_f32_to_bf16(const float *src, uint16_t *dst, int64_t n) {
    if (n <= 1 << 18) {
        dt__f32_to_bf16_seq(src, dst, n);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += CVT_CHUNK)
        dt__f32_to_bf16_seq(src + i, dst + i, n - i < CVT_CHUNK ? n - i : CVT_CHUNK);
}

static void bf16_to_f32_seq(const uint16_t *src, float *dst, int64_t n) {
    uint32_t *d = (uint32_t *)(void *)dst;
#pragma omp simd
    for (int64_t i = 0; i < n; i++) d[i] = (uint32_t)src[i] << 16;
}

void dt_bf16_to_f32(const uint16_t *src, float *dst, int64_t n) {
    if (n <= 1 << 16) {
        bf16_to_f32_seq(src, dst, n);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += CVT_CHUNK)
        bf16_to_f32_seq(src + i, dst + i, n - i < CVT_CHUNK ? n - i : CVT_CHUNK);
}

#ifdef __FLT16_MAX__ /* the compiler has _Float16 (GCC; clang from 15 on x86-64) */
void dt_f32_to_f16(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        _Float16 h = (_Float16)src[i];
        memcpy(&dst[i], &h, 2);
    }
}

void dt_f16_to_f32(const uint16_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        _Float16 h;
        memcpy(&h, &src[i], 2);
        dst[i] = (float)h;
    }
}
#else /* the same bits by hand (checked against _Float16 over every f32 and every f16) */
void dt_f32_to_f16(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t x, ax;
        memcpy(&x, &src[i], 4);
        uint16_t sign = (uint16_t)(x >> 16 & 0x8000);
        ax = x & 0x7fffffff;
        if (ax > 0x7f800000) /* NaN: keep the top payload bits, quiet */
            dst[i] = sign | 0x7e00 | (uint16_t)(ax >> 13 & 0x3ff);
        else if (ax >= 0x477ff000) /* rounds to infinity (65520 and up) */
            dst[i] = sign | 0x7c00;
        else if (ax < 0x38800000) /* a subnormal half: round to nearest even in units of 2^-24 */
            dst[i] = sign | (uint16_t)nearbyintf(fabsf(src[i]) * 0x1p24f);
        else /* rebias the exponent, round the mantissa to nearest even */
            dst[i] = sign | (uint16_t)((ax - 0x38000000 + 0xfff + (ax >> 13 & 1)) >> 13);
    }
}

void dt_f16_to_f32(const uint16_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t h = src[i], sign = (h & 0x8000) << 16, e = h >> 10 & 0x1f, m = h & 0x3ff;
        if (e == 0) { /* zero or subnormal: m units of 2^-24, exact in f32 */
            dst[i] = (sign ? -1.0f : 1.0f) * (float)m * 0x1p-24f;
            continue;
        }
        uint32_t x = sign | (e < 31 ? (e + 112) << 23 | m << 13 /* rebias the exponent */
                             : m    ? 0x7fc00000 | m << 13
                                    : 0x7f800000); /* NaN, inf */
        memcpy(&dst[i], &x, 4);
    }
}
#endif

static double load_as_double(const void *base, dt_dtype t, int64_t i) {
    switch (t) {
    case DT_DTYPE_F32:
        return ((const float *)base)[i];
    case DT_DTYPE_BF16: {
        float f;
        dt_bf16_to_f32((const uint16_t *)base + i, &f, 1);
        return f;
    }
    case DT_DTYPE_F16: {
        float f;
        dt_f16_to_f32((const uint16_t *)base + i, &f, 1);
        return f;
    }
    case DT_DTYPE_I32:
        return ((const int32_t *)base)[i];
    case DT_DTYPE_I64:
        return (double)((const int64_t *)base)[i];
    default:
        return 0;
    }
}

static void store_from_double(void *base, dt_dtype t, int64_t i, double v) {
    switch (t) {
    case DT_DTYPE_F32:
        ((float *)base)[i] = (float)v;
        break;
    case DT_DTYPE_BF16: {
        float f = (float)v;
        dt_f32_to_bf16(&f, (uint16_t *)base + i, 1);
        break;
    }
    case DT_DTYPE_F16: {
        float f = (float)v;
        dt_f32_to_f16(&f, (uint16_t *)base + i, 1);
        break;
    }
    case DT_DTYPE_I32:
        ((int32_t *)base)[i] = (int32_t)v;
        break;
    case DT_DTYPE_I64:
        ((int64_t *)base)[i] = (int64_t)v;
        break;
    default:
        break;
    }
}

double dt_item(const dt_tensor *t) {
    if (!t || dt_numel(t) != 1) return NAN;
    return load_as_double(t->data, t->dtype, 0);
}

/* Offset in elements of the i-th element (row-major order) of a strided tensor. */
static int64_t strided_offset(const dt_tensor *t, int64_t i) {
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t s = t->shape[d];
        off += (i % s) * t->stride[d];
        i /= s;
    }
    return off;
}

dt_status dt_copy(dt_tensor *dst, const dt_tensor *src) {
    int64_t n = dt_numel(src);
    if (dt_numel(dst) != n) {
        char a[96], b[96];
        return dt_error(DT_ERR_INVALID, "copy: %s and %s differ in size", dt_shape_str(dst, a, 96),
                        dt_shape_str(src, b, 96));
    }
    bool sc = dt_is_contiguous(src), dc = dt_is_contiguous(dst);
    if (sc && dc && src->dtype == dst->dtype) {
        memcpy(dst->data, src->data, dt_nbytes(src));
        return DT_OK;
    }
    if (sc && dc && src->dtype == DT_DTYPE_F32 && dst->dtype == DT_DTYPE_BF16) {
        dt_f32_to_bf16(src->data, dst->data, n);
        return DT_OK;
    }
    if (sc && dc && src->dtype == DT_DTYPE_BF16 && dst->dtype == DT_DTYPE_F32) {
        dt_bf16_to_f32(src->data, dst->data, n);
        return DT_OK;
    }
    if (src->dtype == DT_DTYPE_F32 && dst->dtype == DT_DTYPE_F32) {
        const float *s = src->data;
        float *d = dst->data;
#pragma omp parallel for schedule(static) if (n > 1 << 15)
        for (int64_t i = 0; i < n; i++)
            d[dc ? i : strided_offset(dst, i)] = s[sc ? i : strided_offset(src, i)];
        return DT_OK;
    }
    for (int64_t i = 0; i < n; i++)
        store_from_double(dst->data, dst->dtype, dc ? i : strided_offset(dst, i),
                          load_as_double(src->data, src->dtype, sc ? i : strided_offset(src, i)));
    return DT_OK;
}

dt_tensor *dt_to_dtype(dt_tensor *t, dt_dtype dtype) {
    if (!t) return NULL;
    dt_tensor *o = dt__empty(t->ctx, dtype, t->ndim, t->shape);
    if (!o || dt_copy(o, t) != DT_OK) return NULL;
    return o;
}

dt_tensor *dt_detach(dt_tensor *t) {
    if (!t) return NULL;
    return dt__view_of(t);
}

void dt_zero_(dt_tensor *t) {
    if (dt_is_contiguous(t)) {
        memset(t->data, 0, dt_nbytes(t));
        return;
    }
    dt_fill_(t, 0.f);
}

void dt_fill_(dt_tensor *t, float v) {
    int64_t n = dt_numel(t);
    bool c = dt_is_contiguous(t);
    if (t->dtype == DT_DTYPE_F32) {
        float *d = t->data;
        for (int64_t i = 0; i < n; i++) d[c ? i : strided_offset(t, i)] = v;
        return;
    }
    for (int64_t i = 0; i < n; i++)
        store_from_double(t->data, t->dtype, c ? i : strided_offset(t, i), v);
}

void *dt__scratch(dt_ctx *ctx, size_t bytes) {
    return dt_arena_alloc_raw(ctx->arena, bytes);
}

int dt__norm_dim(int dim, int ndim, const char *op) {
    int d = dim < 0 ? dim + ndim : dim;
    if (d < 0 || d >= ndim) {
        dt_error(DT_ERR_INVALID, "%s: dim %d out of range for a %d-dim tensor", op, dim, ndim);
        return -1;
    }
    return d;
}

int dt__broadcast_shape(const dt_tensor *a, const dt_tensor *b, int64_t *out, const char *op) {
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < nd; i++) {
        int ia = a->ndim - nd + i, ib = b->ndim - nd + i;
        int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            char x[96], y[96];
            dt_error(DT_ERR_INVALID, "%s: shapes %s and %s do not broadcast (dim %d: %lld vs %lld)",
                     op, dt_shape_str(a, x, 96), dt_shape_str(b, y, 96), i, (long long)sa,
                     (long long)sb);
            return -1;
        }
        out[i] = sa == 1 ? sb : sa;
    }
    return nd;
}
