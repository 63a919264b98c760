/* The finite-difference gradient check over every registered op (see gradcheck.h). */
#include "gradcheck.h"
#include "test.h"
#include "tensor/tensor_iface.h"

#include <string.h>

extern const gc_case *const __start_gc_cases[];
extern const gc_case *const __stop_gc_cases[];

static double weighted_sum(const dt_tensor *y, const float *w) {
    const float *Y = y->data;
    double s = 0;
    for (int64_t i = 0; i < dt_numel(y); i++) s += (double)w[i] * Y[i];
    return s;
}

static bool run_case(const gc_case *c) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1234);
    dt_tensor *in[GC_MAX_IN];
    float lo = c->lo, hi = c->hi;
    if (lo == hi) lo = -1.f, hi = 1.f;
    for (int i = 0; i < c->n_in; i++) {
        in[i] = dt_rand_uniform(ctx, c->ndim[i], c->shape[i], lo, hi);
        dt_set_requires_grad(in[i], true);
    }
    dt_rng saved = *dt_ctx_rng(ctx);
    dt_tensor *y = c->build(ctx, in);
    if (!y) {
        fprintf(stderr, "  %s (%s): build failed: %s\n", c->op, c->desc, dt_last_error());
        dt_ctx_free(ctx);
        return false;
    }
    y = dt_contiguous(y);
    int64_t ny = dt_numel(y);
    float *w = malloc((size_t)ny * sizeof(float));
    dt_rng wr;
    dt_rng_init(&wr, 99);
    dt_rng_fill_uniform(&wr, w, ny, -1.f, 1.f);
    dt_tensor *wt = dt_tensor_from_f32(ctx, y->ndim, y->shape, w);
    if (dt_backward_with(y, wt) != DT_OK) {
        fprintf(stderr, "  %s (%s): backward failed: %s\n", c->op, c->desc, dt_last_error());
        free(w);
        dt_ctx_free(ctx);
        return false;
    }
    double atol = c->atol ? c->atol : 2e-3, rtol = c->rtol ? c->rtol : 2e-2;
    float eps = c->eps ? c->eps : 1e-2f;
    bool ok = true;
    dt_set_grad_enabled(ctx, false);
    for (int i = 0; i < c->n_in && ok; i++) {
        float *x = in[i]->data;
        const float *g = in[i]->grad ? in[i]->grad->data : NULL;
        int64_t n = dt_numel(in[i]);
        int64_t step = n > 96 ? n / 96 : 1; /* sample large inputs */
        for (int64_t k = 0; k < n; k += step) {
            float orig = x[k];
            x[k] = orig + eps;
            *dt_ctx_rng(ctx) = saved;
            double lp = weighted_sum(dt_contiguous(c->build(ctx, in)), w);
            x[k] = orig - eps;
            *dt_ctx_rng(ctx) = saved;
            double lm = weighted_sum(dt_contiguous(c->build(ctx, in)), w);
            x[k] = orig;
            double num = (lp - lm) / (2.0 * eps);
            double ana = g ? g[k] : 0.0;
            if (!(fabs(ana - num) <= atol + rtol * fabs(num))) {
                fprintf(stderr, "  %s (%s): input %d element %lld: analytic %.6g numeric %.6g\n",
                        c->op, c->desc, i, (long long)k, ana, num);
                ok = false;
                break;
            }
        }
    }
    free(w);
    dt_ctx_free(ctx);
    return ok;
}

int main(void) {
    int ncase = 0;
    for (const gc_case *const *fam = __start_gc_cases; fam < __stop_gc_cases; fam++)
        for (const gc_case *c = *fam; c->op; c++) {
            CHECK_MSG(run_case(c), "gradient check of %s (%s)", c->op, c->desc);
            ncase++;
        }
    /* every registered op must have at least one case */
    for (int i = 0; i < dt_op_count(); i++) {
        const char *name = dt_op_name(i);
        bool found = false;
        for (const gc_case *const *fam = __start_gc_cases; fam < __stop_gc_cases && !found; fam++)
            for (const gc_case *c = *fam; c->op && !found; c++) found = !strcmp(c->op, name);
        CHECK_MSG(found, "op '%s' has no gradient-check case", name);
    }
    fprintf(stderr, "%d cases over %d registered ops\n", ncase, dt_op_count());
    TEST_END();
}
