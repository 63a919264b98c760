/* ops_binary.c — add/sub/mul/div with broadcasting, scale, add_scalar, relu. */
#include "tensor_impl.h"

#define PAR_MIN 32768

enum { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV };

/* Geometry of a broadcast binary op: out shape plus element strides of a and b (0 on
 * broadcast dims) aligned to the out dims. */
typedef struct bgeom {
    int nd;
    int64_t shape[DT_MAX_DIMS];
    int64_t sa[DT_MAX_DIMS], sb[DT_MAX_DIMS];
    int64_t n;
    bool same; /* a, b and out all have the same shape (contiguous) */
    int64_t inner_b; /* >0: b is a contiguous trailing block repeated over leading dims */
} bgeom;

static void aligned_strides(const dt_tensor *t, int nd, const int64_t *shape, int64_t *s) {
    int64_t acc = 1;
    for (int d = nd - 1; d >= 0; d--) {
        int it = t->ndim - nd + d;
        int64_t sz = it >= 0 ? t->shape[it] : 1;
        s[d] = (sz == 1 && shape[d] != 1) ? 0 : acc;
        acc *= sz;
    }
}

static bool bgeometry(const dt_tensor *a, const dt_tensor *b, bgeom *g, const char *op) {
    g->nd = dt__broadcast_shape(a, b, g->shape, op);
    if (g->nd < 0) return false;
    aligned_strides(a, g->nd, g->shape, g->sa);
    aligned_strides(b, g->nd, g->shape, g->sb);
    g->n = 1;
    for (int d = 0; d < g->nd; d++) g->n *= g->shape[d];
    g->same = dt_numel(a) == g->n && dt_numel(b) == g->n;
    g->inner_b = 0;
    if (!g->same && dt_numel(a) == g->n) {
        /* b's shape equals out's trailing dims (after dropping leading 1s)? */
        int64_t nb = dt_numel(b), acc = 1;
        int d = g->nd - 1;
        while (d >= 0 && acc < nb) {
            if (g->sb[d] == 0) break;
            acc *= g->shape[d];
            d--;
        }
        if (acc == nb && nb > 0) g->inner_b = nb;
    }
    return true;
}

static inline int64_t off_of(const bgeom *g, const int64_t *s, int64_t i) {
    int64_t o = 0;
    for (int d = g->nd - 1; d >= 0; d--) {
        o += (i % g->shape[d]) * s[d];
        i /= g->shape[d];
    }
    return o;
}

static inline float apply(int kind, float x, float y) {
    switch (kind) {
    case BIN_ADD: return x + y;
    case BIN_SUB: return x - y;
    case BIN_MUL: return x * y;
    default: return x / y;
    }
}

/* d(a op b)/da and /db for one element, given the upstream gradient g. */
static inline float dgrad_a(int kind, float g, float b) {
    return kind == BIN_MUL ? g * b : kind == BIN_DIV ? g / b : g;
}
static inline float dgrad_b(int kind, float g, float a, float b) {
    switch (kind) {
    case BIN_ADD: return g;
    case BIN_SUB: return -g;
    case BIN_MUL: return g * a;
    default: return -g * a / (b * b);
    }
}

static void binary_backward(dt_node *n) {
    dt_tensor *a = n->in[0], *b = n->in[1];
    int kind = (int)n->iattr[0];
    bgeom g;
    bgeometry(a, b, &g, "binary");
    const float *A = a->data, *B = b->data, *G = n->out->grad->data;
    bool a_full = dt_numel(a) == g.n, b_full = dt_numel(b) == g.n, fresh = false;
    bool a_done = false;
    if (kind != BIN_MUL && kind != BIN_DIV && g.same && a != b && dt__wants_grad(a)) {
        /* a + b, a - b: a's gradient is exactly G; a takes G's buffer over if it can (G stays
         * readable below: nothing adds to a's gradient before this backward ends) */
        a_done = dt__grad_take_over(n, a);
    }
    if (!a_done && dt__wants_grad(a)) {
        /* with a == b (x * x) both gradients go to one buffer, which must start zeroed */
        float *ga = a_full && a != b ? dt__grad_f32_fresh(a, &fresh) : dt__grad_f32(a);
        if (a_full && g.same) {
#pragma omp parallel for simd schedule(static) if (g.n > PAR_MIN)
            for (int64_t i = 0; i < g.n; i++) {
                float d = dgrad_a(kind, G[i], B[i]);
                ga[i] = fresh ? d : ga[i] + d;
            }
        } else if (a_full && g.inner_b) {
            int64_t m = g.inner_b, rows = g.n / m;
#pragma omp parallel for schedule(static) if (g.n > PAR_MIN)
            for (int64_t r = 0; r < rows; r++)
                for (int64_t j = 0; j < m; j++) {
                    float d = dgrad_a(kind, G[r * m + j], B[j]);
                    ga[r * m + j] = fresh ? d : ga[r * m + j] + d;
                }
        } else {
            /* general broadcast: serial, so repeated targets add in a fixed order */
            if (fresh) memset(ga, 0, (size_t)dt_numel(a) * sizeof(float));
            for (int64_t i = 0; i < g.n; i++)
                ga[a_full ? i : off_of(&g, g.sa, i)] +=
                    dgrad_a(kind, G[i], B[g.same ? i : off_of(&g, g.sb, i)]);
        }
    }
    if (dt__wants_grad(b)) {
        float *gb = b_full && a != b ? dt__grad_f32_fresh(b, &fresh) : dt__grad_f32(b);
        if (!b_full || a == b) fresh = false;
        if (b_full && g.same) {
#pragma omp parallel for simd schedule(static) if (g.n > PAR_MIN)
            for (int64_t i = 0; i < g.n; i++) {
                float d = dgrad_b(kind, G[i], A[i], B[i]);
                gb[i] = fresh ? d : gb[i] + d;
            }
        } else if (g.inner_b) {
            /* b repeats along the rows of a: column sums in blocks of 64 columns, rows in
             * order (deterministic whatever the thread count) */
            int64_t m = g.inner_b, rows = g.n / m, nblk = (m + 63) / 64;
#pragma omp parallel for schedule(static) if (g.n > PAR_MIN)
            for (int64_t blk = 0; blk < nblk; blk++) {
                int64_t j0 = blk * 64, w = m - j0 < 64 ? m - j0 : 64;
                float s[64] = {0};
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t j = 0; j < w; j++)
                        s[j] += dgrad_b(kind, G[r * m + j0 + j], A[r * m + j0 + j], B[j0 + j]);
                for (int64_t j = 0; j < w; j++) gb[j0 + j] += s[j];
            }
        } else {
            if (fresh) memset(gb, 0, (size_t)dt_numel(b) * sizeof(float));
            for (int64_t i = 0; i < g.n; i++) {
                int64_t ib = b_full ? i : off_of(&g, g.sb, i);
                gb[ib] += dgrad_b(kind, G[i], A[a_full ? i : off_of(&g, g.sa, i)], B[ib]);
            }
        }
    }
}

static int64_t binary_flops(const dt_node *n) { return dt_numel(n->out); }

DT_OP(op_add, "add", binary_backward, binary_flops, NULL);
DT_OP(op_sub, "sub", binary_backward, binary_flops, NULL);
DT_OP(op_mul, "mul", binary_backward, binary_flops, NULL);
DT_OP(op_div, "div", binary_backward, binary_flops, NULL);

static dt_tensor *binary(dt_tensor *a, dt_tensor *b, int kind, const dt_op_def *op) {
    DT_CHECK_INPUTS(a, b);
    if (!dt__need_f32(a, op->name) || !dt__need_f32(b, op->name)) return NULL;
    a = dt__contig(a);
    b = dt__contig(b);
    if (!a || !b) return NULL;
    bgeom g;
    if (!bgeometry(a, b, &g, op->name)) return NULL;
    dt_tensor *y = dt__empty(a->ctx, DT_DTYPE_F32, g.nd, g.shape);
    dt_node *n = dt__node_new(op, y, 2, (dt_tensor *[]){a, b});
    if (!n) return NULL;
    n->iattr[0] = kind;
    const float *A = a->data, *B = b->data;
    float *Y = y->data;
    if (g.same) {
#pragma omp parallel for schedule(static) if (g.n > PAR_MIN)
        for (int64_t i = 0; i < g.n; i++) Y[i] = apply(kind, A[i], B[i]);
    } else if (g.inner_b) {
        int64_t m = g.inner_b, rows = g.n / m;
#pragma omp parallel for schedule(static) if (g.n > PAR_MIN)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < m; j++) Y[r * m + j] = apply(kind, A[r * m + j], B[j]);
    } else {
#pragma omp parallel for schedule(static) if (g.n > PAR_MIN)
        for (int64_t i = 0; i < g.n; i++)
            Y[i] = apply(kind, A[off_of(&g, g.sa, i)], B[off_of(&g, g.sb, i)]);
    }
    return dt__node_commit(n);
}

dt_tensor *dt_add(dt_tensor *a, dt_tensor *b) { return binary(a, b, BIN_ADD, &op_add); }
dt_tensor *dt_sub(dt_tensor *a, dt_tensor *b) { return binary(a, b, BIN_SUB, &op_sub); }
dt_tensor *dt_mul(dt_tensor *a, dt_tensor *b) { return binary(a, b, BIN_MUL, &op_mul); }
dt_tensor *dt_div(dt_tensor *a, dt_tensor *b) { return binary(a, b, BIN_DIV, &op_div); }

/* ---- scale / add_scalar: fattr[0] = s ---- */

static void scale_backward(dt_node *n) {
    dt_tensor *x = n->in[0];
    if (!dt__wants_grad(x)) return;
    bool fresh;
    float s = (float)n->fattr[0], *gx = dt__grad_f32_fresh(x, &fresh);
    const float *G = n->out->grad->data;
    int64_t N = dt_numel(x);
#pragma omp parallel for simd schedule(static) if (N > PAR_MIN)
    for (int64_t i = 0; i < N; i++) gx[i] = fresh ? s * G[i] : gx[i] + s * G[i];
}

static void add_scalar_backward(dt_node *n) {
    dt_tensor *x = n->in[0];
    if (!dt__wants_grad(x)) return;
    bool fresh;
    float *gx = dt__grad_f32_fresh(x, &fresh);
    const float *G = n->out->grad->data;
    int64_t N = dt_numel(x);
#pragma omp parallel for simd schedule(static) if (N > PAR_MIN)
    for (int64_t i = 0; i < N; i++) gx[i] = fresh ? G[i] : gx[i] + G[i];
}

static int64_t unary_flops(const dt_node *n) { return dt_numel(n->out); }

DT_OP(op_scale, "scale", scale_backward, unary_flops, NULL);
DT_OP(op_add_scalar, "add_scalar", add_scalar_backward, unary_flops, NULL);

/* y = x * s (mul) or x + s, with its node. */
static dt_tensor *scalar_op(dt_tensor *x, float s, const dt_op_def *op, bool mul) {
    DT_CHECK_INPUTS(x);
    if (!dt__need_f32(x, op->name) || !(x = dt__contig(x))) return NULL;
    dt_tensor *y = dt__empty_like(x);
    dt_node *n = dt__node_new(op, y, 1, &x);
    if (!n) return NULL;
    n->fattr[0] = s;
    const float *X = x->data;
    float *Y = y->data;
    int64_t N = dt_numel(x);
    if (mul) {
#pragma omp parallel for schedule(static) if (N > PAR_MIN)
        for (int64_t i = 0; i < N; i++) Y[i] = s * X[i];
    } else {
#pragma omp parallel for schedule(static) if (N > PAR_MIN)
        for (int64_t i = 0; i < N; i++) Y[i] = X[i] + s;
    }
    return dt__node_commit(n);
}

dt_tensor *dt_scale(dt_tensor *x, float s) {
    return scalar_op(x, s, &op_scale, true);
}

dt_tensor *dt_add_scalar(dt_tensor *x, float s) {
    return scalar_op(x, s, &op_add_scalar, false);
}

/* ---- relu: a NaN stays NaN (as in PyTorch: bad values must reach the loss, not vanish into
 * zeros) and gets no gradient; the backward reads the output (y > 0 exactly where x > 0) ---- */

static void relu_backward(dt_node *n) {
    dt_tensor *x = n->in[0];
    if (!dt__wants_grad(x)) return;
    bool fresh;
    float *gx = dt__grad_f32_fresh(x, &fresh);
    const float *G = n->out->grad->data, *Y = n->out->data;
    int64_t N = dt_numel(x);
#pragma omp parallel for simd schedule(static) if (N > PAR_MIN)
    for (int64_t i = 0; i < N; i++) {
        float d = Y[i] > 0.f ? G[i] : 0.f;
        gx[i] = fresh ? d : gx[i] + d;
    }
}

DT_OP(op_relu, "relu", relu_backward, unary_flops, NULL);

dt_tensor *dt_relu(dt_tensor *x) {
    DT_CHECK_INPUTS(x);
    if (!dt__need_f32(x, "relu") || !(x = dt__contig(x))) return NULL;
    dt_tensor *y = dt__empty_like(x);
    dt_node *n = dt__node_new(&op_relu, y, 1, &x);
    if (!n) return NULL;
    const float *X = x->data;
    float *Y = y->data;
    int64_t N = dt_numel(x);
#pragma omp parallel for simd schedule(static) if (N > PAR_MIN)
    for (int64_t i = 0; i < N; i++) Y[i] = !(X[i] <= 0.f) ? X[i] : 0.f; /* NaN stays NaN */
    return dt__node_commit(n);
}
