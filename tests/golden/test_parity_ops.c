/*
 * Parity of every op in include/dtrain/tensor.h with PyTorch: outputs and gradients against
 * the golden files tests/golden/data/ops/<op>.safetensors written by tools/make_goldens.py
 * (see docs/parity.md). PyTorch is not needed here.
 *
 * For each case of an op file: load the inputs (float inputs require grad; inputs listed in
 * "<case>.tr" are passed transposed, as strided views), run our op through the public API,
 * compare every output, backpropagate sum_k sum(out_k * w_k) and compare the gradient of every
 * float input. The golden values are float64 results rounded to float32, so the error measured
 * is ours alone.
 *
 * Tolerance: |ours - golden| <= atol + rtol * |golden| element-wise, by default
 * atol 1e-5 + rtol 1e-4 (float32 has a 6e-8 unit roundoff; the ops here reduce over at most a
 * few hundred terms, leaving two orders of magnitude of headroom). Looser entries in the table
 * say why. Dropout's mask comes from our RNG, not PyTorch's: its statistics are checked instead.
 * The process fails when any case breaks its tolerance, errors, or a golden file is missing.
 */
#include "dtrain/tensor.h"
#include "test.h"

#include <dirent.h>
#include <string.h>

#define MAX_IN 8
#define MAX_OUT 8

typedef struct pcase {
    dt_safetensors *f;
    const char *name; /* case name */
    int n_in;
} pcase;

/* ---- metadata helpers ---- */

static const char *meta(const pcase *c, const char *key) {
    char k[160];
    snprintf(k, sizeof k, "%s.%s", c->name, key);
    return dt_safetensors_metadata(c->f, k);
}

static long meta_int(const pcase *c, const char *key, long dflt) {
    const char *v = meta(c, key);
    return v ? strtol(v, NULL, 10) : dflt;
}

static float meta_float(const pcase *c, const char *key) {
    const char *v = meta(c, key);
    if (!v) fprintf(stderr, "  %s: missing metadata '%s'\n", c->name, key);
    return v ? strtof(v, NULL) : NAN;
}

/* Parse "2,4,-1" into out; returns the count. */
static int meta_list(const pcase *c, const char *key, int64_t *out, int max) {
    const char *v = meta(c, key);
    int n = 0;
    while (v && *v && n < max) {
        char *end;
        long long x = strtoll(v, &end, 10);
        if (end == v) break;
        out[n++] = x;
        v = *end == ',' ? end + 1 : end;
    }
    return n;
}

/* ---- the ops: each fills out[] and returns the number of outputs (0 on failure) ---- */

typedef int (*run_fn)(const pcase *c, dt_tensor **in, dt_tensor **out);

#define ONE(expr)                                                                                  \
    do {                                                                                           \
        out[0] = (expr);                                                                           \
        return out[0] ? 1 : 0;                                                                     \
    } while (0)

static int r_matmul(const pcase *c, dt_tensor **in, dt_tensor **out) {
    (void)c;
    ONE(dt_matmul(in[0], in[1]));
}
static int r_matmul_t(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_matmul_t(in[0], in[1], meta_int(c, "ta", 0), meta_int(c, "tb", 0)));
}
static int r_linear(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_linear(in[0], in[1], c->n_in > 2 ? in[2] : NULL));
}
static int r_add(const pcase *c, dt_tensor **in, dt_tensor **out) {
    (void)c;
    ONE(dt_add(in[0], in[1]));
}
static int r_sub(const pcase *c, dt_tensor **in, dt_tensor **out) {
    (void)c;
    ONE(dt_sub(in[0], in[1]));
}
static int r_mul(const pcase *c, dt_tensor **in, dt_tensor **out) {
    (void)c;
    ONE(dt_mul(in[0], in[1]));
}
static int r_div(const pcase *c, dt_tensor **in, dt_tensor **out) {
    (void)c;
    ONE(dt_div(in[0], in[1]));
}
static int r_scale(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_scale(in[0], meta_float(c, "s")));
}
static int r_add_scalar(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_add_scalar(in[0], meta_float(c, "s")));
}
#define UNARY(fn)                                                                                  \
    static int r_##fn(const pcase *c, dt_tensor **in, dt_tensor **out) {                           \
        (void)c;                                                                                   \
        ONE(dt_##fn(in[0]));                                                                       \
    }
UNARY(relu)
UNARY(gelu)
UNARY(gelu_tanh)
UNARY(silu)
UNARY(tanh)
UNARY(sigmoid)
UNARY(contiguous)
UNARY(sum_all)
UNARY(mean_all)
static int r_swiglu(const pcase *c, dt_tensor **in, dt_tensor **out) {
    (void)c;
    ONE(dt_swiglu(in[0], in[1]));
}
static int r_rope(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_rope(in[0], meta_int(c, "pos0", -1), meta_float(c, "theta")));
}
static int r_gqa_attention(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_attention(in[0], in[1], in[2], meta_int(c, "causal", -1) != 0));
}
static int r_softmax(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_softmax(in[0], (int)meta_int(c, "dim", 99)));
}
static int r_log_softmax(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_log_softmax(in[0], (int)meta_int(c, "dim", 99)));
}
static int r_layer_norm(const pcase *c, dt_tensor **in, dt_tensor **out) {
    bool aff = c->n_in == 3;
    ONE(dt_layer_norm(in[0], aff ? in[1] : NULL, aff ? in[2] : NULL, meta_float(c, "eps")));
}
static int r_rms_norm(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_rms_norm(in[0], c->n_in > 1 ? in[1] : NULL, meta_float(c, "eps")));
}
static int r_embedding(const pcase *c, dt_tensor **in, dt_tensor **out) {
    (void)c;
    ONE(dt_embedding(in[0], in[1]));
}
static int r_conv2d(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_conv2d(in[0], in[1], c->n_in > 2 ? in[2] : NULL, (int)meta_int(c, "stride", -1),
                  (int)meta_int(c, "padding", -1)));
}
static int r_max_pool2d(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_max_pool2d(in[0], (int)meta_int(c, "kernel", -1), (int)meta_int(c, "stride", -1),
                      (int)meta_int(c, "padding", -1)));
}
static int r_avg_pool2d(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_avg_pool2d(in[0], (int)meta_int(c, "kernel", -1), (int)meta_int(c, "stride", -1),
                      (int)meta_int(c, "padding", -1)));
}
static int r_reshape(const pcase *c, dt_tensor **in, dt_tensor **out) {
    int64_t shape[DT_MAX_DIMS];
    int nd = meta_list(c, "shape", shape, DT_MAX_DIMS);
    ONE(dt_reshape(in[0], nd, shape));
}
static int r_transpose(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_transpose(in[0], (int)meta_int(c, "d0", 99), (int)meta_int(c, "d1", 99)));
}
static int r_permute(const pcase *c, dt_tensor **in, dt_tensor **out) {
    int64_t p[DT_MAX_DIMS];
    int n = meta_list(c, "perm", p, DT_MAX_DIMS);
    int perm[DT_MAX_DIMS];
    for (int i = 0; i < n; i++) perm[i] = (int)p[i];
    ONE(dt_permute(in[0], perm));
}
static int r_slice(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_slice(in[0], (int)meta_int(c, "dim", 99), meta_int(c, "start", -1),
                 meta_int(c, "end", -1)));
}
static int r_concat(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_concat(c->n_in, in, (int)meta_int(c, "dim", 99)));
}
static int r_split(const pcase *c, dt_tensor **in, dt_tensor **out) {
    int64_t sizes[MAX_OUT];
    int n = meta_list(c, "sizes", sizes, MAX_OUT);
    if (dt_split(in[0], (int)meta_int(c, "dim", 99), n, sizes, out) != DT_OK) return 0;
    return n;
}
static int r_sum(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_sum(in[0], (int)meta_int(c, "dim", 99), meta_int(c, "keepdim", 0)));
}
static int r_mean(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_mean(in[0], (int)meta_int(c, "dim", 99), meta_int(c, "keepdim", 0)));
}
static int r_max(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_max(in[0], (int)meta_int(c, "dim", 99), meta_int(c, "keepdim", 0)));
}
static int r_cross_entropy(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_cross_entropy(in[0], in[1], meta_int(c, "ignore_index", -100)));
}
static int r_mse(const pcase *c, dt_tensor **in, dt_tensor **out) {
    (void)c;
    ONE(dt_mse(in[0], in[1]));
}
static int r_attention(const pcase *c, dt_tensor **in, dt_tensor **out) {
    ONE(dt_causal_self_attention(in[0], (int)meta_int(c, "n_head", -1)));
}

typedef struct op_entry {
    const char *op; /* golden file ops/<op>.safetensors */
    run_fn run;
    double atol, rtol; /* 0: the defaults */
} op_entry;

/* Every op of tensor.h. dropout is checked separately (statistics: test_dropout). */
static const op_entry OPS[] = {
    {"matmul", r_matmul, 0, 0},
    {"matmul_t", r_matmul_t, 0, 0},
    {"linear", r_linear, 0, 0},
    {"add", r_add, 0, 0},
    {"sub", r_sub, 0, 0},
    {"mul", r_mul, 0, 0},
    {"div", r_div, 0, 0},
    {"scale", r_scale, 0, 0},
    {"add_scalar", r_add_scalar, 0, 0},
    {"relu", r_relu, 0, 0},
    {"gelu", r_gelu, 0, 0},
    {"gelu_tanh", r_gelu_tanh, 0, 0},
    {"silu", r_silu, 0, 0},
    {"tanh", r_tanh, 0, 0},
    {"sigmoid", r_sigmoid, 0, 0},
    {"softmax", r_softmax, 0, 0},
    {"log_softmax", r_log_softmax, 0, 0},
    {"layer_norm", r_layer_norm, 0, 0},
    {"rms_norm", r_rms_norm, 0, 0},
    {"embedding", r_embedding, 0, 0},
    {"conv2d", r_conv2d, 0, 0},
    {"max_pool2d", r_max_pool2d, 0, 0},
    {"avg_pool2d", r_avg_pool2d, 0, 0},
    {"reshape", r_reshape, 0, 0},
    {"transpose", r_transpose, 0, 0},
    {"permute", r_permute, 0, 0},
    {"slice", r_slice, 0, 0},
    {"contiguous", r_contiguous, 0, 0},
    {"concat", r_concat, 0, 0},
    {"split", r_split, 0, 0},
    {"sum", r_sum, 0, 0},
    {"mean", r_mean, 0, 0},
    {"max", r_max, 0, 0},
    {"sum_all", r_sum_all, 0, 0},
    {"mean_all", r_mean_all, 0, 0},
    {"cross_entropy", r_cross_entropy, 0, 0},
    {"mse", r_mse, 0, 0},
    {"causal_self_attention", r_attention, 0, 0},
    {"swiglu", r_swiglu, 0, 0},
    {"rope", r_rope, 0, 0},
    {"attention", r_gqa_attention, 0, 0},
};
#define N_OPS (int)(sizeof OPS / sizeof OPS[0])

#define DEF_ATOL 1e-5
#define DEF_RTOL 1e-4

static char g_dir[512];

/* ---- comparison ---- */

typedef struct errstat {
    double max_abs; /* largest |ours - golden| */
    double worst;   /* largest |ours - golden| / (atol + rtol |golden|): > 1 fails */
    int64_t bad;    /* elements past the tolerance */
} errstat;

/* Compare `ours` (any dtype/strides, may be NULL = all zeros) with f32 `gold`. */
static bool compare(const char *what, const char *opcase, dt_tensor *ours, const dt_tensor *gold,
                    double atol, double rtol, errstat *acc) {
    char a[96], b[96];
    if (ours) {
        bool same = ours->ndim == gold->ndim;
        for (int d = 0; same && d < gold->ndim; d++) same = ours->shape[d] == gold->shape[d];
        if (!same) {
            fprintf(stderr, "  %s %s: shape %s, PyTorch %s\n", opcase, what,
                    dt_shape_str(ours, a, sizeof a), dt_shape_str(gold, b, sizeof b));
            acc->bad++;
            return false;
        }
        ours = dt_to_dtype(ours, DT_DTYPE_F32); /* contiguous f32 copy */
        if (!ours) {
            fprintf(stderr, "  %s %s: copy failed: %s\n", opcase, what, dt_last_error());
            acc->bad++;
            return false;
        }
    }
    const float *o = ours ? ours->data : NULL, *g = gold->data;
    int64_t n = dt_numel(gold), bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++) {
        double ov = o ? o[i] : 0.0, e = fabs(ov - g[i]), lim = atol + rtol * fabs(g[i]);
        if (!(e <= lim)) { /* also catches NaN */
            if (first < 0) first = i;
            bad++;
        }
        if (e > acc->max_abs || e != e) acc->max_abs = e;
        if (e / lim > acc->worst || e != e) acc->worst = e / lim;
    }
    if (bad) {
        fprintf(stderr,
                "  %s %s: %lld of %lld elements past tolerance; first at %lld: ours %.9g "
                "PyTorch %.9g%s\n",
                opcase, what, (long long)bad, (long long)n, (long long)first, o ? o[first] : 0.0,
                g[first], o ? "" : " (we computed no gradient)");
        acc->bad += bad;
    }
    return bad == 0;
}

static dt_tensor *need(dt_safetensors *f, dt_ctx *ctx, const char *cs, const char *what, int i) {
    char k[160];
    snprintf(k, sizeof k, "%s.%s%d", cs, what, i);
    dt_tensor *t = dt_safetensors_get(f, ctx, k);
    if (!t) fprintf(stderr, "  golden file: %s\n", dt_last_error());
    return t;
}

/* Run one case; returns false on any failure. */
static bool run_case(const op_entry *op, dt_safetensors *f, const char *cs, errstat *eo,
                     errstat *eg) {
    double atol = op->atol ? op->atol : DEF_ATOL, rtol = op->rtol ? op->rtol : DEF_RTOL;
    pcase c = {.f = f, .name = cs};
    char opcase[160];
    snprintf(opcase, sizeof opcase, "%s/%s", op->op, cs);
    c.n_in = (int)meta_int(&c, "n_in", 0);
    int n_out_want = (int)meta_int(&c, "n_out", 0);
    if (c.n_in < 1 || c.n_in > MAX_IN || n_out_want < 1 || n_out_want > MAX_OUT) {
        fprintf(stderr, "  %s: bad n_in/n_out in the golden file\n", opcase);
        return false;
    }
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    bool ok = false;
    dt_tensor *leaf[MAX_IN], *arg[MAX_IN], *out[MAX_OUT] = {0};
    int64_t tr[MAX_IN];
    int ntr = meta_list(&c, "tr", tr, MAX_IN);
    for (int i = 0; i < c.n_in; i++) {
        leaf[i] = need(f, ctx, cs, "in", i);
        if (!leaf[i]) goto done;
        if (leaf[i]->dtype == DT_DTYPE_F32) dt_set_requires_grad(leaf[i], true);
        arg[i] = leaf[i];
        for (int k = 0; k < ntr; k++)
            if (tr[k] == i) arg[i] = dt_transpose(leaf[i], -1, -2);
    }
    int n_out = op->run(&c, arg, out);
    if (n_out != n_out_want) {
        fprintf(stderr, "  %s: the op failed (%d outputs, want %d): %s\n", opcase, n_out,
                n_out_want, dt_last_error());
        goto done;
    }
    ok = true;
    dt_tensor *w[MAX_OUT];
    for (int k = 0; k < n_out; k++) {
        dt_tensor *g = need(f, ctx, cs, "out", k);
        w[k] = need(f, ctx, cs, "w", k);
        if (!g || !w[k] || !out[k]) {
            ok = false;
            goto done;
        }
        char what[32];
        snprintf(what, sizeof what, "out%d", k);
        ok &= compare(what, opcase, out[k], g, atol, rtol, eo);
    }
    /* loss = sum_k sum(out_k * w_k): one backward from each output's weights */
    dt_status st;
    if (n_out == 1) {
        st = dt_backward_with(out[0], w[0]);
    } else {
        dt_tensor *loss = NULL;
        for (int k = 0; k < n_out; k++) {
            dt_tensor *term = dt_sum_all(dt_mul(out[k], w[k]));
            loss = loss ? dt_add(loss, term) : term;
        }
        st = dt_backward(loss);
    }
    if (st != DT_OK) {
        fprintf(stderr, "  %s: backward failed: %s\n", opcase, dt_last_error());
        ok = false;
        goto done;
    }
    for (int i = 0; i < c.n_in; i++) {
        if (leaf[i]->dtype != DT_DTYPE_F32) continue;
        dt_tensor *g = need(f, ctx, cs, "grad", i);
        if (!g) {
            ok = false;
            continue;
        }
        char what[32];
        snprintf(what, sizeof what, "grad of in%d", i);
        ok &= compare(what, opcase, leaf[i]->grad, g, atol, rtol, eg);
    }
done:
    dt_ctx_free(ctx);
    return ok;
}

static void test_op(const op_entry *op) {
    char path[1024];
    snprintf(path, sizeof path, "%s/ops/%s.safetensors", g_dir, op->op);
    dt_safetensors *f = dt_safetensors_open(path);
    CHECK_MSG(f != NULL, "%s; hint: run /usr/bin/python3 tools/make_goldens.py", dt_last_error());
    if (!f) return;
    const char *cases = dt_safetensors_metadata(f, "cases");
    CHECK_MSG(cases && *cases, "%s: no cases", path);
    errstat eo = {0}, eg = {0};
    int n = 0, failed = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", cases ? cases : "");
    for (char *save = NULL, *cs = strtok_r(buf, ",", &save); cs; cs = strtok_r(NULL, ",", &save)) {
        bool ok = run_case(op, f, cs, &eo, &eg);
        CHECK_MSG(ok, "%s case %s", op->op, cs);
        n++;
        failed += !ok;
    }
    printf("%-22s %d cases  max |err| out %.2e grad %.2e  (worst %.2f of tolerance)  %s\n", op->op,
           n, eo.max_abs, eg.max_abs, eo.worst > eg.worst ? eo.worst : eg.worst,
           failed ? "FAIL" : "ok");
    dt_safetensors_close(f);
}

/* Dropout: the mask comes from our counter-based RNG, so PyTorch's values cannot match. Check
 * what must hold for any correct mask: the dropped fraction is near p (5 sigma of a binomial),
 * survivors are scaled by exactly 1/(1-p), the gradient is w where kept (scaled) and 0 where
 * dropped, eval mode and p = 0 are the identity, and the same seed gives the same mask. */
static void test_dropout(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/ops/dropout.safetensors", g_dir);
    dt_safetensors *f = dt_safetensors_open(path);
    CHECK_MSG(f != NULL, "%s", dt_last_error());
    if (!f) return;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", dt_safetensors_metadata(f, "cases"));
    for (char *save = NULL, *cs = strtok_r(buf, ",", &save); cs; cs = strtok_r(NULL, ",", &save)) {
        pcase c = {.f = f, .name = cs, .n_in = 1};
        float p = meta_float(&c, "p");
        dt_ctx *ctx = dt_ctx_new(NULL, 7);
        dt_tensor *x = need(f, ctx, cs, "in", 0), *w = need(f, ctx, cs, "w", 0);
        if (!x || !w) {
            CHECK(false);
            dt_ctx_free(ctx);
            continue;
        }
        dt_set_requires_grad(x, true);
        dt_tensor *y = dt_dropout(x, p);
        CHECK_MSG(y && dt_backward_with(y, w) == DT_OK, "dropout %s: %s", cs, dt_last_error());
        if (!y || !x->grad) {
            dt_ctx_free(ctx);
            continue;
        }
        y = dt_to_dtype(y, DT_DTYPE_F32);
        const float *X = x->data, *Y = y->data, *W = w->data, *G = x->grad->data;
        int64_t n = dt_numel(x), dropped = 0, bad_val = 0, bad_grad = 0;
        float sc = 1.f / (1.f - p);
        for (int64_t i = 0; i < n; i++) {
            bool drop = Y[i] == 0.f; /* inputs are never exactly 0 */
            dropped += drop;
            if (!drop && fabsf(Y[i] - X[i] * sc) > 1e-6f * fabsf(X[i] * sc)) bad_val++;
            float gw = drop ? 0.f : W[i] * sc;
            if (fabsf(G[i] - gw) > 1e-6f * fabsf(gw)) bad_grad++;
        }
        double frac = (double)dropped / (double)n, sigma = sqrt(p * (1.0 - p) / (double)n);
        CHECK_MSG(fabs(frac - p) <= 5 * sigma, "dropout %s: dropped %.4f, p %.2f", cs, frac, p);
        CHECK_MSG(bad_val == 0, "dropout %s: %lld kept values not scaled by 1/(1-p)", cs,
                  (long long)bad_val);
        CHECK_MSG(bad_grad == 0, "dropout %s: %lld gradient values wrong", cs, (long long)bad_grad);
        /* the same seed gives the same mask */
        dt_ctx *ctx2 = dt_ctx_new(NULL, 7);
        dt_tensor *x2 = need(f, ctx2, cs, "in", 0);
        dt_tensor *y2 = x2 ? dt_to_dtype(dt_dropout(x2, p), DT_DTYPE_F32) : NULL;
        CHECK(y2 && memcmp(y2->data, Y, (size_t)n * sizeof(float)) == 0);
        /* eval mode and p = 0: identity */
        dt_ctx_set_training(ctx2, false);
        dt_tensor *ye = x2 ? dt_to_dtype(dt_dropout(x2, p), DT_DTYPE_F32) : NULL;
        CHECK(ye && memcmp(ye->data, X, (size_t)n * sizeof(float)) == 0);
        dt_ctx_set_training(ctx2, true);
        dt_tensor *y0 = x2 ? dt_to_dtype(dt_dropout(x2, 0.f), DT_DTYPE_F32) : NULL;
        CHECK(y0 && memcmp(y0->data, X, (size_t)n * sizeof(float)) == 0);
        printf("%-22s %s: p %.2f dropped %.4f (5 sigma = %.4f)  %s\n", "dropout", cs, p, frac,
               5 * sigma, fabs(frac - p) <= 5 * sigma && !bad_val && !bad_grad ? "ok" : "FAIL");
        dt_ctx_free(ctx2);
        dt_ctx_free(ctx);
    }
    dt_safetensors_close(f);
}

/* Every golden op file is in the table (or is dropout): nothing is silently skipped. */
static void test_all_files_covered(void) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/ops", g_dir);
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "cannot list %s", dir);
    if (!d) return;
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d))) {
        char *dot = strstr(e->d_name, ".safetensors");
        if (!dot || dot[12]) continue;
        files++;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(dot - e->d_name), e->d_name);
        bool found = !strcmp(name, "dropout");
        for (int i = 0; i < N_OPS && !found; i++) found = !strcmp(OPS[i].op, name);
        CHECK_MSG(found, "golden file ops/%s.safetensors has no entry in the OPS table", name);
    }
    closedir(d);
    CHECK_MSG(files == N_OPS + 1, "%d golden op files, %d table entries + dropout", files, N_OPS);
}

int main(void) {
    const char *src = getenv("DT_SOURCE_DIR");
    if (!src) {
        fprintf(stderr, "DT_SOURCE_DIR is not set; hint: run through ctest, or set it to the "
                        "source tree\n");
        return 1;
    }
    snprintf(g_dir, sizeof g_dir, "%s/tests/golden/data", src);
    printf("tolerance: |ours - torch| <= %g + %g |torch| unless stated\n", DEF_ATOL, DEF_RTOL);
    for (int i = 0; i < N_OPS; i++) test_op(&OPS[i]);
    TEST_RUN(test_dropout);
    TEST_RUN(test_all_files_covered);
    TEST_END();
}
