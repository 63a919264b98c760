/* layers.c — Linear, Sequential, Flatten, ReLU and the MLP builder. Sequential runs a Linear
 * followed by a ReLU as one fused op (dt_linear_relu).
 * Initialisation matches PyTorch's nn.Linear: weight and bias ~ U(-1/sqrt(in), 1/sqrt(in))
 * (kaiming_uniform with a = sqrt(5) reduces to that bound). */
#include "dtrain/nn.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static dt_tensor *linear_forward(dt_module *m, dt_tensor *x) {
    return dt_linear(x, m->params[0].t, m->n_params > 1 ? m->params[1].t : NULL);
}

dt_module *dt_nn_linear(int64_t in, int64_t out, bool bias) {
    if (in <= 0 || out <= 0) {
        dt_error(DT_ERR_INVALID, "Linear(%lld, %lld): sizes must be positive", (long long)in,
                 (long long)out);
        return NULL;
    }
    dt_module *m = dt_module_new("Linear", linear_forward);
    if (!m) return NULL;
    float bound = 1.0f / sqrtf((float)in);
    m->iconf[0] = in;
    m->iconf[1] = out;
    if (dt_module_add_param(m, "weight", 2, (int64_t[]){out, in}, DT_INIT_UNIFORM, -bound, bound) <
            0 ||
        (bias &&
         dt_module_add_param(m, "bias", 1, (int64_t[]){out}, DT_INIT_UNIFORM, -bound, bound) < 0)) {
        dt_module_free(m);
        return NULL;
    }
    return m;
}

static dt_tensor *relu_forward(dt_module *m, dt_tensor *x);

/* A Linear followed by a ReLU without hooks of its own runs as the fused dt_linear_relu (the
 * ReLU is applied to each GEMM tile in cache); the Linear's hooks still run around it. */
static bool fuses_with_relu(dt_module *lin, dt_module *next) {
    return lin->forward == linear_forward && lin->params[0].t && next->forward == relu_forward &&
           !next->pre_hook && !next->post_hook;
}

/* A ReLU followed by a MaxPool2d, neither with hooks, runs as the fused dt_relu_max_pool2d
 * (the pool's maxima are taken first; the full-size ReLU output is never made). */
static bool relu_fuses_with_pool(dt_module *relu, dt_module *next) {
    return relu->forward == relu_forward && !relu->pre_hook && !relu->post_hook &&
           !strcmp(next->type, "MaxPool2d") && !next->pre_hook && !next->post_hook;
}

static dt_tensor *sequential_forward(dt_module *m, dt_tensor *x) {
    for (int i = 0; i < m->n_children && x; i++) {
        dt_module *c = m->children[i];
        if (i + 1 < m->n_children && relu_fuses_with_pool(c, m->children[i + 1])) {
            dt_module *pool = m->children[i + 1]; /* iconf: kernel, stride, padding */
            x = dt_relu_max_pool2d(x, (int)pool->iconf[0], (int)pool->iconf[1],
                                   (int)pool->iconf[2]);
            i++; /* the pool is done */
            continue;
        }
        if (i + 1 < m->n_children && fuses_with_relu(c, m->children[i + 1])) {
            if (c->pre_hook) c->pre_hook(c, c->hook_user);
            x = dt_linear_relu(x, c->params[0].t, c->n_params > 1 ? c->params[1].t : NULL);
            if (c->post_hook) c->post_hook(c, c->hook_user);
            i++; /* the ReLU is done */
            continue;
        }
        x = dt_module_forward(c, x);
    }
    return x;
}

dt_module *dt_nn_sequential_of(dt_module *const *mods, int n) {
    dt_module *m = dt_module_new("Sequential", sequential_forward);
    bool ok = m != NULL;
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "%d", i);
        if (!mods[i]) {
            if (ok)
                dt_error(DT_ERR_INVALID, "sequential: child %d is NULL (its constructor failed)",
                         i);
            ok = false;
        } else if (!ok || dt_module_add_child(m, name, mods[i]) < 0) {
            ok = false;
            dt_module_free(mods[i]);
        }
    }
    if (!ok) {
        dt_module_free(m);
        return NULL;
    }
    return m;
}

dt_module *dt_nn_sequential(dt_module *first, ...) {
    dt_module *mods[256];
    int n = 0;
    va_list ap;
    va_start(ap, first);
    for (dt_module *c = first; c; c = va_arg(ap, dt_module *)) {
        if (n == 256) {
            dt_module_free(c);
            continue;
        }
        mods[n++] = c;
    }
    va_end(ap);
    if (n == 256) {
        for (int i = 0; i < n; i++) dt_module_free(mods[i]);
        dt_error(DT_ERR_INVALID,
                 "sequential: more than 255 children; hint: use dt_nn_sequential_of");
        return NULL;
    }
    return dt_nn_sequential_of(mods, n);
}

static dt_tensor *relu_forward(dt_module *m, dt_tensor *x) {
    (void)m;
    return dt_relu(x);
}

dt_module *dt_nn_relu(void) {
    return dt_module_new("ReLU", relu_forward);
}

static dt_tensor *flatten_forward(dt_module *m, dt_tensor *x) {
    (void)m;
    if (x->ndim < 1) return x;
    int64_t n0 = x->shape[0];
    return dt_reshape(x, 2, (int64_t[]){n0, n0 ? dt_numel(x) / n0 : 0});
}

dt_module *dt_nn_flatten(void) {
    return dt_module_new("Flatten", flatten_forward);
}

dt_module *dt_model_mlp(int64_t in, int64_t hidden, int layers, int64_t out) {
    dt_module *m = dt_nn_sequential(NULL);
    if (!m) return NULL;
    int64_t prev = in;
    int idx = 0;
    char name[16];
    for (int l = 0; l < layers; l++) {
        snprintf(name, sizeof name, "%d", idx++);
        if (dt_module_add_child(m, name, dt_nn_linear(prev, hidden, true)) < 0) goto fail;
        snprintf(name, sizeof name, "%d", idx++);
        if (dt_module_add_child(m, name, dt_nn_relu()) < 0) goto fail;
        prev = hidden;
    }
    snprintf(name, sizeof name, "%d", idx++);
    if (dt_module_add_child(m, name, dt_nn_linear(prev, out, true)) < 0) goto fail;
    return m;
fail:
    dt_module_free(m);
    return NULL;
}
