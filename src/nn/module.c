/* module.c — module trees, flat parameter/gradient buffers, initialisation, named params. */
#include "nn/nn_iface.h"

#include "base/base_impl.h"
#include "tensor/tensor_iface.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN_ELEMS 16 /* 64 bytes of f32 */

typedef struct named {
    char name[160];
    dt_param *p;
} named;

struct dt_flat {
    dt_ctx *ctx;
    float *params, *grads;
    int64_t n;     /* elements including padding */
    int64_t nreal; /* elements excluding padding */
    named *list;
    int count;
    bool borrowed; /* params/grads belong to someone else (dt__module_rebind) */
    bool stale;    /* some parameters' gradients are stale (dt_module_zero_grad_lazy) */
};

/* The stale gradients become zeroed ones (see DT__TENSOR_GRAD_STALE): the context calls this
 * when a backward ends, and every accessor that hands gradients out calls it first. */
static void settle_grads(void *arg) {
    struct dt_flat *f = arg;
    if (!f->stale) return;
    for (int i = 0; i < f->count; i++) {
        dt_tensor *t = f->list[i].p->t;
        if (!(t->flags & DT__TENSOR_GRAD_STALE)) continue;
        dt__zero_f32(t->grad->data, dt_numel(t));
        t->flags &= ~DT__TENSOR_GRAD_STALE;
    }
    f->stale = false;
}

static void settle(const dt_module *root) {
    struct dt_flat *f = root->flat;
    if (!f || !f->stale) return;
    settle_grads(f);
    dt__ctx_remove_settle(f->ctx, settle_grads, f);
}

dt_module *dt_module_new(const char *type, dt_forward_fn forward) {
    dt_module *m = calloc(1, sizeof *m);
    if (!m) {
        dt_error(DT_ERR_OOM, "module");
        return NULL;
    }
    m->type = type;
    m->forward = forward;
    return m;
}

int dt_module_add_param(dt_module *m, const char *name, int ndim, const int64_t *shape,
                        dt_init init, float a, float b) {
    if (m->n_params == m->cap_params) {
        int cap = m->cap_params ? m->cap_params * 2 : 4;
        dt_param *p = realloc(m->params, (size_t)cap * sizeof *p);
        if (!p) {
            dt_error(DT_ERR_OOM, "module params");
            return -1;
        }
        m->params = p;
        m->cap_params = cap;
    }
    dt_param *p = &m->params[m->n_params];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    for (int i = 0; i < ndim; i++) p->shape[i] = shape[i];
    p->init = init;
    p->a = a;
    p->b = b;
    return m->n_params++;
}

int dt_module_add_child(dt_module *m, const char *name, dt_module *child) {
    if (!child) {
        dt_error(DT_ERR_INVALID, "module %s: child '%s' is NULL (its constructor failed: %s)",
                 m->type, name, dt_last_error());
        return -1;
    }
    if (m->n_children == m->cap_children) {
        int cap = m->cap_children ? m->cap_children * 2 : 4;
        dt_module **c = realloc(m->children, (size_t)cap * sizeof *c);
        if (!c) {
            dt_error(DT_ERR_OOM, "module children");
            return -1;
        }
        m->children = c;
        m->cap_children = cap;
    }
    snprintf(child->name, sizeof child->name, "%s", name);
    child->parent = m;
    m->children[m->n_children] = child;
    return m->n_children++;
}

dt_tensor *dt_module_param(dt_module *m, int i) {
    return m->params[i].t;
}
dt_module *dt_module_child(dt_module *m, int i) {
    return m->children[i];
}

static void free_flat(struct dt_flat *f) {
    if (!f) return;
    if (f->stale) dt__ctx_remove_settle(f->ctx, settle_grads, f);
    dt_device *dev = dt_ctx_device(f->ctx);
    if (!f->borrowed) {
        dt_mem_free(dev, DT_MEM_PARAMS, f->params, (size_t)f->n * sizeof(float));
        dt_mem_free(dev, DT_MEM_GRADS, f->grads, (size_t)f->n * sizeof(float));
    }
    free(f->list);
    free(f);
}

static void free_tree(dt_module *m) {
    for (int i = 0; i < m->n_children; i++) free_tree(m->children[i]);
    for (int i = 0; i < m->n_params; i++) {
        if (m->params[i].t) {
            free(m->params[i].t->grad);
            free(m->params[i].t);
        }
    }
    if (m->destroy) m->destroy(m);
    free(m->children);
    free(m->params);
    free(m);
}

void dt_module_free(dt_module *m) {
    if (!m) return;
    struct dt_flat *f = m->flat;
    free_tree(m);
    free_flat(f);
}

static int64_t numel_of(const dt_param *p) {
    int64_t n = 1;
    for (int i = 0; i < p->ndim; i++) n *= p->shape[i];
    return n;
}

/* Depth-first walk: own params, then children. Fills offsets and (if list) names. */
static void layout(dt_module *m, const char *prefix, int64_t *off, int64_t *real, named *list,
                   int *count) {
    for (int i = 0; i < m->n_params; i++) {
        dt_param *p = &m->params[i];
        p->offset = *off;
        int64_t n = numel_of(p);
        *off += (n + ALIGN_ELEMS - 1) / ALIGN_ELEMS * ALIGN_ELEMS;
        *real += n;
        if (list) {
            snprintf(list[*count].name, sizeof list[*count].name, "%s%s", prefix, p->name);
            list[*count].p = p;
        }
        (*count)++;
    }
    for (int c = 0; c < m->n_children; c++) {
        char sub[160];
        snprintf(sub, sizeof sub, "%s%s.", prefix, m->children[c]->name);
        layout(m->children[c], sub, off, real, list, count);
    }
}

static dt_tensor *make_view(dt_ctx *ctx, const dt_param *p, float *base) {
    dt_tensor *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->dtype = DT_DTYPE_F32;
    t->ndim = p->ndim;
    int64_t s = 1;
    for (int i = p->ndim - 1; i >= 0; i--) {
        t->shape[i] = p->shape[i];
        t->stride[i] = s;
        s *= p->shape[i];
    }
    t->data = base + p->offset;
    t->ctx = ctx;
    return t;
}

dt_status dt_module_build(dt_module *root, dt_ctx *ctx, uint64_t seed) {
    if (root->flat) return dt_error(DT_ERR_STATE, "module %s is already built", root->type);
    if (root->parent)
        return dt_error(DT_ERR_STATE, "build the root module, not a child (%s)", root->name);
    int64_t n = 0, real = 0;
    int count = 0;
    layout(root, "", &n, &real, NULL, &count);
    struct dt_flat *f = calloc(1, sizeof *f);
    named *list = calloc((size_t)(count ? count : 1), sizeof *list);
    if (!f || !list) {
        free(f);
        free(list);
        return dt_error(DT_ERR_OOM, "module parameter list");
    }
    f->ctx = ctx;
    f->n = n;
    f->nreal = real;
    f->list = list;
    f->count = count;
    dt_device *dev = dt_ctx_device(ctx);
    f->params = dt_mem_alloc(dev, DT_MEM_PARAMS, (size_t)(n ? n : 1) * sizeof(float));
    f->grads =
        f->params ? dt_mem_alloc(dev, DT_MEM_GRADS, (size_t)(n ? n : 1) * sizeof(float)) : NULL;
    if (!f->grads) {
        dt_status st = dt_last_status();
        DT_KEEP_ERROR({
            if (f->params)
                dt_mem_free(dev, DT_MEM_PARAMS, f->params, (size_t)(n ? n : 1) * sizeof(float));
            free(list);
            free(f);
        });
        return dt_error(st, "building %s with %lld parameters: %s", root->type, (long long)real,
                        dt_last_error());
    }
    if (!n) f->n = 1; /* keep the allocation size consistent for free_flat */
    int64_t off = 0, r2 = 0;
    count = 0;
    layout(root, "", &off, &r2, list, &count);
    dt_rng rng;
    dt_rng_init(&rng, seed);
    for (int i = 0; i < count; i++) {
        dt_param *p = list[i].p;
        float *dst = f->params + p->offset;
        int64_t k = numel_of(p);
        switch (p->init) {
        case DT_INIT_ZEROS:
            break;
        case DT_INIT_ONES:
            for (int64_t j = 0; j < k; j++) dst[j] = 1.f;
            break;
        case DT_INIT_UNIFORM:
            dt_rng_fill_uniform(&rng, dst, k, p->a, p->b);
            break;
        case DT_INIT_NORMAL:
            dt_rng_fill_normal(&rng, dst, k, p->a, p->b);
            break;
        }
        p->t = make_view(ctx, p, f->params);
        dt_tensor *g = p->t ? make_view(ctx, p, f->grads) : NULL;
        if (!g) {
            for (int j = 0; j <= i; j++) {
                if (list[j].p->t) free(list[j].p->t->grad);
                free(list[j].p->t);
                list[j].p->t = NULL;
            }
            free_flat(f);
            return dt_error(DT_ERR_OOM, "parameter views");
        }
        p->t->grad = g;
        p->t->flags = DT_TENSOR_REQUIRES_GRAD | DT_TENSOR_PARAM;
        p->t->name = p->name;
    }
    root->flat = f;
    return DT_OK;
}

dt_tensor *dt_module_forward(dt_module *m, dt_tensor *x) {
    if (!x) return NULL;
    if (!m) {
        dt_error(DT_ERR_INVALID, "forward on a NULL module");
        return NULL;
    }
    if (m->n_params && !m->params[0].t) {
        dt_error(DT_ERR_STATE,
                 "module %s '%s' has no parameters yet; hint: call "
                 "dt_module_build(root, ctx, seed) first",
                 m->type, m->name);
        return NULL;
    }
    if (m->pre_hook) m->pre_hook(m, m->hook_user);
    dt_tensor *y = m->forward(m, x);
    if (m->post_hook) m->post_hook(m, m->hook_user);
    return y;
}

int64_t dt_module_num_params(const dt_module *root) {
    if (root->flat) return root->flat->nreal;
    int64_t n = 0, real = 0;
    int count = 0;
    layout((dt_module *)root, "", &n, &real, NULL, &count);
    return real;
}

int dt_module_param_count(const dt_module *root) {
    return root->flat ? root->flat->count : 0;
}

const char *dt_module_param_name(const dt_module *root, int i) {
    return root->flat && i >= 0 && i < root->flat->count ? root->flat->list[i].name : NULL;
}

dt_tensor *dt_module_param_tensor(const dt_module *root, int i) {
    settle(root);
    return root->flat && i >= 0 && i < root->flat->count ? root->flat->list[i].p->t : NULL;
}

dt_tensor *dt_module_find_param(const dt_module *root, const char *name) {
    settle(root);
    for (int i = 0; root->flat && i < root->flat->count; i++)
        if (!strcmp(root->flat->list[i].name, name)) return root->flat->list[i].p->t;
    return NULL;
}

void dt__module_rebind(dt_module *root, float *params, float *grads, bool owned) {
    settle(root); /* the new buffers' gradients are the caller's */
    struct dt_flat *f = root->flat;
    if (!f->borrowed) {
        dt_device *dev = dt_ctx_device(f->ctx);
        dt_mem_free(dev, DT_MEM_PARAMS, f->params, (size_t)f->n * sizeof(float));
        dt_mem_free(dev, DT_MEM_GRADS, f->grads, (size_t)f->n * sizeof(float));
    }
    f->params = params;
    f->grads = grads;
    f->borrowed = !owned;
    for (int i = 0; i < f->count; i++) {
        dt_param *p = f->list[i].p;
        p->t->data = params + p->offset;
        p->t->grad->data = grads + p->offset;
    }
}

float *dt_module_flat_params(const dt_module *root, int64_t *n) {
    if (!root->flat) return NULL;
    if (n) *n = root->flat->n;
    return root->flat->params;
}

float *dt_module_flat_grads(const dt_module *root, int64_t *n) {
    if (!root->flat) return NULL;
    settle(root);
    if (n) *n = root->flat->n;
    return root->flat->grads;
}

void dt_module_zero_grad(dt_module *root) {
    struct dt_flat *f = root->flat;
    if (!f) return;
    if (f->stale) {
        for (int i = 0; i < f->count; i++) f->list[i].p->t->flags &= ~DT__TENSOR_GRAD_STALE;
        f->stale = false;
        dt__ctx_remove_settle(f->ctx, settle_grads, f);
    }
    dt__zero_f32(f->grads, f->n);
}

void dt_module_zero_grad_lazy(dt_module *root) {
    struct dt_flat *f = root->flat;
    if (!f) return;
    if (!dt__ctx_add_settle(f->ctx, settle_grads, f)) { /* the context has no room: now */
        dt_module_zero_grad(root);
        return;
    }
    for (int i = 0; i < f->count; i++) f->list[i].p->t->flags |= DT__TENSOR_GRAD_STALE;
    f->stale = true;
}

dt_ctx *dt_module_ctx(const dt_module *root) {
    return root->flat ? root->flat->ctx : NULL;
}

/* A module with children named and added in order; frees everything on failure. */
dt_module *dt__module_with_children(dt_module *m, int n, const char *const *names,
                                    dt_module **kids) {
    bool ok = m != NULL;
    for (int i = 0; i < n; i++) {
        if (!ok || dt_module_add_child(m, names[i], kids[i]) < 0) {
            ok = false;
            dt_module_free(kids[i]);
        }
    }
    if (!ok) {
        dt_module_free(m);
        return NULL;
    }
    return m;
}
