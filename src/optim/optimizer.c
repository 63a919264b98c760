/*
 * optimizer.c — SGD, Adam / AdamW and Lamb over flat f32 buffers.
 *
 * An optimiser owns its state for `n` elements (f32, DT_MEM_OPTIM on its device) and is handed
 * the parameter and gradient pointers at every step, so one object serves a whole flat buffer
 * or one ZeRO shard of it. Semantics (t = the step number, starting at 1):
 *
 *   SGD    torch.optim.SGD: d = g + wd p; with momentum the buffer is d on its first step and
 *          b = momentum b + (1 - dampening) d after; d = nesterov ? d + momentum b : b;
 *          p -= lr d. Nesterov needs momentum > 0 and dampening 0 (as torch checks).
 *   Adam   DeepSpeed FusedAdam / DeepSpeedCPUAdam, written in torch's form:
 *          adam_w_mode off (L2):       g += wd p
 *          m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *          denom = sqrt(v) / sqrt(1 - b2^t) + eps      (eps after the corrected sqrt)
 *          adam_w_mode on (decoupled): p *= 1 - lr wd
 *          p -= lr / (1 - b1^t) * m / denom
 *          bias_correction off drops both (1 - b^t) factors. DT_OPTIM_ADAMW forces adam_w_mode.
 *   Lamb   DeepSpeed FusedLamb (eps outside the sqrt, its default): per tensor
 *          m, v as Adam (no L2 on g);  u = m / (sqrt(v) + eps) + wd p  (uncorrected moments)
 *          ratio = ||p|| / ||u|| clamped to [min_coeff, max_coeff] (1 when either norm is 0)
 *          p -= lr sqrt(1 - b2^t) / (1 - b1^t) * ratio * u   (just lr * ratio * u without
 *          bias correction). The norms are over the tensor's elements before the update.
 *
 * Tensors for Lamb are the segments given to dt_optim_set_segments; elements outside every
 * segment form tensors of their own (one per gap), so without segments the whole buffer is one
 * tensor. A parameter that is zero with a zero gradient stays exactly zero under every
 * optimiser (weight decay of 0 is 0), which keeps a module's alignment padding at zero.
 *
 * Speed and determinism: each step is one pass over params/grads/moments (Lamb: two, the norms
 * need the whole tensor first), split into fixed chunks of CHUNK elements processed in
 * parallel with OpenMP and vectorised inside. Updates are elementwise; Lamb's norms are summed
 * in double per chunk and then over the chunks of a tensor in chunk order, so the bits never
 * depend on the thread count.
 */
#include "dtrain/optim.h"
#include "base/base_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Elements per parallel work item. Items are handed out dynamically: the gradients the
 * backward wrote last are still in cache and the rest are not, so equal static halves left one
 * thread waiting a third of the AdamW step (GPT benchmark). Every item's arithmetic is
 * per element or per item, so the bits do not depend on which thread takes it. */
#define CHUNK 16384

/* one Lamb tensor [lo, hi) of the buffer, and the chunks it is cut into */
typedef struct part {
    int64_t lo, hi;
    int64_t c0, c1; /* its chunks [c0, c1) */
} part;

typedef struct chunk {
    int64_t lo, hi;
    int64_t part; /* the tensor it belongs to */
} chunk;

struct dt_optimizer {
    dt_device *dev;
    dt_optim_config cfg;
    int64_t n;
    int64_t steps;
    /* state: SGD momentum_buffer, or Adam/Lamb exp_avg + exp_avg_sq */
    float *buf[2];
    const char *buf_name[2];
    int nbuf;
    bool mom_started; /* SGD: the momentum buffer holds a value (torch's "buffer is not None") */
    /* Lamb plan: tensors, chunks, per-chunk norm partials (2 per chunk), per-tensor ratio */
    part *parts;
    int64_t nparts;
    chunk *chunks;
    int64_t nchunks;
    double *partial;
    float *coeff;
    void *plan;
    size_t plan_bytes;
};

/* ---- configuration ------------------------------------------------------------------- */

dt_optim_config dt_optim_defaults(dt_optim_type type) {
    dt_optim_config c;
    memset(&c, 0, sizeof c);
    c.type = type;
    c.lr = 1e-3f;
    c.beta1 = 0.9f;
    c.beta2 = 0.999f;
    c.eps = 1e-8f;
    c.bias_correction = true;
    c.max_coeff = 10.0f;
    c.min_coeff = 0.01f;
    switch (type) {
    case DT_OPTIM_ADAM:
        /* DeepSpeed's "Adam" runs in adam_w_mode unless the config opts out
         * (ADAM_W_MODE_DEFAULT = True); with weight_decay 0 the two modes agree. */
        c.adam_w_mode = true;
        break;
    case DT_OPTIM_ADAMW:
        c.adam_w_mode = true;
        c.weight_decay = 0.01f; /* torch.optim.AdamW */
        break;
    default:
        break;
    }
    return c;
}

static dt_status check_config(const dt_optim_config *c, const char *who) {
    if (!(c->lr >= 0) || !isfinite(c->lr))
        return dt_error(DT_ERR_CONFIG,
                        "%s: lr must be finite and >= 0 (got %g); hint: set a positive learning "
                        "rate such as 1e-3",
                        who, (double)c->lr);
    if (!(c->weight_decay >= 0) || !isfinite(c->weight_decay))
        return dt_error(DT_ERR_CONFIG,
                        "%s: weight_decay must be finite and >= 0 (got %g); hint: use 0 to "
                        "disable weight decay",
                        who, (double)c->weight_decay);
    switch (c->type) {
    case DT_OPTIM_SGD:
        if (!(c->momentum >= 0) || !isfinite(c->momentum))
            return dt_error(DT_ERR_CONFIG,
                            "%s: SGD momentum must be finite and >= 0 (got %g); hint: 0 "
                            "disables momentum, 0.9 is common",
                            who, (double)c->momentum);
        if (!isfinite(c->dampening))
            return dt_error(DT_ERR_CONFIG, "%s: SGD dampening must be finite (got %g)", who,
                            (double)c->dampening);
        if (c->nesterov && (c->momentum <= 0 || c->dampening != 0))
            return dt_error(DT_ERR_CONFIG,
                            "%s: nesterov momentum requires momentum > 0 and dampening = 0 (got "
                            "momentum %g, dampening %g); hint: set momentum (e.g. 0.9) and "
                            "dampening 0, or turn nesterov off",
                            who, (double)c->momentum, (double)c->dampening);
        return DT_OK;
    case DT_OPTIM_ADAM:
    case DT_OPTIM_ADAMW:
    case DT_OPTIM_LAMB:
        if (!(c->beta1 >= 0 && c->beta1 < 1))
            return dt_error(DT_ERR_CONFIG,
                            "%s: beta1 must be in [0, 1) (got %g); hint: the usual betas are "
                            "(0.9, 0.999)",
                            who, (double)c->beta1);
        if (!(c->beta2 >= 0 && c->beta2 < 1))
            return dt_error(DT_ERR_CONFIG,
                            "%s: beta2 must be in [0, 1) (got %g); hint: the usual betas are "
                            "(0.9, 0.999)",
                            who, (double)c->beta2);
        if (!(c->eps > 0) || !isfinite(c->eps))
            return dt_error(DT_ERR_CONFIG,
                            "%s: eps must be finite and > 0 (got %g); hint: the usual value is "
                            "1e-8",
                            who, (double)c->eps);
        if (c->type == DT_OPTIM_LAMB &&
            !(c->min_coeff >= 0 && c->min_coeff <= c->max_coeff && isfinite(c->max_coeff)))
            return dt_error(DT_ERR_CONFIG,
                            "%s: Lamb needs 0 <= min_coeff <= max_coeff (got min_coeff %g, "
                            "max_coeff %g); hint: DeepSpeed's defaults are 0.01 and 10",
                            who, (double)c->min_coeff, (double)c->max_coeff);
        return DT_OK;
    }
    return dt_error(DT_ERR_CONFIG,
                    "%s: unknown optimiser type %d; hint: use DT_OPTIM_SGD, DT_OPTIM_ADAM, "
                    "DT_OPTIM_ADAMW or DT_OPTIM_LAMB",
                    who, (int)c->type);
}

/* ---- Lamb plan ----------------------------------------------------------------------- */

static void free_plan(dt_optimizer *o) {
    if (o->plan) dt_mem_free(o->dev, DT_MEM_OPTIM, o->plan, o->plan_bytes);
    o->plan = NULL;
    o->plan_bytes = 0;
    o->parts = NULL;
    o->chunks = NULL;
    o->partial = NULL;
    o->coeff = NULL;
    o->nparts = o->nchunks = 0;
}

/* Build the tensor partition (segments plus the gaps between them) and its chunks. The
 * segments are already validated (sorted, disjoint, inside [0, n)). On OOM the old plan is
 * kept. */
static dt_status build_plan(dt_optimizer *o, int count, const int64_t *off, const int64_t *size) {
    /* count parts and chunks first */
    int64_t np = 0, nc = 0, cur = 0;
    for (int pass = 0; pass < 2; pass++) {
        part *parts = NULL;
        chunk *chunks = NULL;
        void *mem = NULL;
        size_t bytes = 0;
        if (pass == 1) {
            size_t pb = (size_t)np * sizeof(part), cb = (size_t)nc * sizeof(chunk);
            size_t db = (size_t)nc * 2 * sizeof(double), fb = (size_t)np * sizeof(float);
            bytes = pb + cb + db + fb;
            if (bytes == 0) bytes = 64;
            mem = dt_mem_alloc(o->dev, DT_MEM_OPTIM, bytes);
            if (!mem) return dt_last_status();
            /* doubles first for alignment */
            double *partial = mem;
            chunks = (chunk *)(partial + nc * 2);
            parts = (part *)(chunks + nc);
            float *coeff = (float *)(parts + np);
            free_plan(o);
            o->plan = mem;
            o->plan_bytes = bytes;
            o->partial = partial;
            o->chunks = chunks;
            o->parts = parts;
            o->coeff = coeff;
            o->nparts = np;
            o->nchunks = nc;
        }
        np = nc = 0;
        cur = 0;
        for (int s = 0; s <= count; s++) {
            /* a gap before segment s (or before the end), then segment s itself */
            int64_t ranges[2][2];
            int nr = 0;
            int64_t lo = s < count ? off[s] : o->n;
            if (lo > cur) {
                ranges[nr][0] = cur;
                ranges[nr][1] = lo;
                nr++;
            }
            if (s < count && size[s] > 0) {
                ranges[nr][0] = off[s];
                ranges[nr][1] = off[s] + size[s];
                nr++;
            }
            if (s < count) cur = off[s] + size[s] > cur ? off[s] + size[s] : cur;
            for (int r = 0; r < nr; r++) {
                int64_t a = ranges[r][0], b = ranges[r][1];
                int64_t k = (b - a + CHUNK - 1) / CHUNK;
                if (parts) {
                    parts[np].lo = a;
                    parts[np].hi = b;
                    parts[np].c0 = nc;
                    parts[np].c1 = nc + k;
                    for (int64_t c = 0; c < k; c++) {
                        chunks[nc + c].lo = a + c * CHUNK;
                        chunks[nc + c].hi = a + (c + 1) * CHUNK < b ? a + (c + 1) * CHUNK : b;
                        chunks[nc + c].part = np;
                    }
                }
                np++;
                nc += k;
            }
        }
    }
    return DT_OK;
}

/* ---- life cycle ---------------------------------------------------------------------- */

static float *alloc_state(dt_optimizer *o) {
    return dt_mem_alloc(o->dev, DT_MEM_OPTIM, (size_t)o->n * sizeof(float));
}

dt_optimizer *dt_optim_new(dt_device *dev, const dt_optim_config *cfg, int64_t n) {
    if (!dev || !cfg) {
        dt_error(DT_ERR_INVALID, "dt_optim_new: %s is NULL", dev ? "cfg" : "dev");
        return NULL;
    }
    if (n < 0) {
        dt_error(DT_ERR_INVALID, "dt_optim_new: n must be >= 0 (got %lld)", (long long)n);
        return NULL;
    }
    if (check_config(cfg, "dt_optim_new") != DT_OK) return NULL;
    dt_optimizer *o = calloc(1, sizeof *o);
    if (!o) {
        dt_error(DT_ERR_OOM, "dt_optim_new: out of memory");
        return NULL;
    }
    o->dev = dev;
    o->cfg = *cfg;
    o->n = n;
    if (o->cfg.type == DT_OPTIM_ADAMW) o->cfg.adam_w_mode = true;
    bool ok = true;
    if (cfg->type == DT_OPTIM_SGD) {
        if (cfg->momentum != 0 && n > 0) {
            o->buf[0] = alloc_state(o);
            ok = o->buf[0] != NULL;
            o->buf_name[0] = "momentum_buffer";
            o->nbuf = ok;
        }
    } else if (n > 0) {
        o->buf[0] = alloc_state(o);
        o->buf[1] = o->buf[0] ? alloc_state(o) : NULL;
        ok = o->buf[1] != NULL;
        o->buf_name[0] = "exp_avg";
        o->buf_name[1] = "exp_avg_sq";
        o->nbuf = 2;
    }
    if (ok && cfg->type == DT_OPTIM_LAMB) ok = build_plan(o, 0, NULL, NULL) == DT_OK;
    if (!ok) {
        dt_status st = dt_last_status();
        const char *msg = dt_last_error();
        char keep[256];
        strncpy(keep, msg, sizeof keep - 1);
        keep[sizeof keep - 1] = 0;
        dt_optim_free(o);
        dt_error(st, "dt_optim_new: optimiser state for %lld elements: %s", (long long)n, keep);
        return NULL;
    }
    return o;
}

void dt_optim_free(dt_optimizer *o) {
    if (!o) return;
    for (int i = 0; i < 2; i++)
        if (o->buf[i]) dt_mem_free(o->dev, DT_MEM_OPTIM, o->buf[i], (size_t)o->n * sizeof(float));
    free_plan(o);
    free(o);
}

dt_status dt_optim_set_segments(dt_optimizer *o, int count, const int64_t *offsets,
                                const int64_t *sizes) {
    if (!o) return dt_error(DT_ERR_INVALID, "dt_optim_set_segments: optimiser is NULL");
    if (count < 0 || (count > 0 && (!offsets || !sizes)))
        return dt_error(DT_ERR_INVALID,
                        "dt_optim_set_segments: bad segment list (count %d, offsets %p, sizes "
                        "%p)",
                        count, (const void *)offsets, (const void *)sizes);
    int64_t end = 0;
    for (int i = 0; i < count; i++) {
        if (offsets[i] < 0 || sizes[i] < 0 || offsets[i] + sizes[i] > o->n)
            return dt_error(DT_ERR_INVALID,
                            "dt_optim_set_segments: segment %d [%lld, +%lld) is outside the "
                            "optimiser's %lld elements",
                            i, (long long)offsets[i], (long long)sizes[i], (long long)o->n);
        if (offsets[i] < end)
            return dt_error(DT_ERR_INVALID,
                            "dt_optim_set_segments: segment %d at %lld overlaps or precedes the "
                            "previous one (ends at %lld); hint: give segments sorted by offset",
                            i, (long long)offsets[i], (long long)end);
        end = offsets[i] + sizes[i];
    }
    if (o->cfg.type != DT_OPTIM_LAMB) return DT_OK; /* elementwise optimisers ignore them */
    return build_plan(o, count, offsets, sizes);
}

static int cmp_seg(const void *a, const void *b) {
    int64_t x = ((const int64_t *)a)[0], y = ((const int64_t *)b)[0];
    return x < y ? -1 : x > y;
}

dt_optimizer *dt_optim_new_for_module(const dt_optim_config *cfg, dt_module *root) {
    if (!root) {
        dt_error(DT_ERR_INVALID, "dt_optim_new_for_module: module is NULL");
        return NULL;
    }
    int64_t n = 0;
    float *base = dt_module_flat_params(root, &n);
    dt_ctx *ctx = dt_module_ctx(root);
    if (!base || !ctx) {
        dt_error(DT_ERR_STATE,
                 "dt_optim_new_for_module: the module has no flat buffers; hint: call "
                 "dt_module_build(root, ctx, seed) first");
        return NULL;
    }
    dt_optimizer *o = dt_optim_new(dt_ctx_device(ctx), cfg, n);
    if (!o) return NULL;
    int count = dt_module_param_count(root);
    int64_t *seg = malloc((size_t)(count > 0 ? count : 1) * 2 * sizeof(int64_t));
    int64_t *offs = malloc((size_t)(count > 0 ? count : 1) * 2 * sizeof(int64_t));
    if (!seg || !offs) {
        free(seg);
        free(offs);
        dt_optim_free(o);
        dt_error(DT_ERR_OOM, "dt_optim_new_for_module: out of memory");
        return NULL;
    }
    /* seg holds (offset, size) pairs; the offset of a param is its data pointer minus the
     * flat base */
    for (int i = 0; i < count; i++) {
        dt_tensor *t = dt_module_param_tensor(root, i);
        seg[2 * i] = (int64_t)((const float *)t->data - base);
        seg[2 * i + 1] = dt_numel(t);
    }
    qsort(seg, (size_t)count, 2 * sizeof(int64_t), cmp_seg);
    for (int i = 0; i < count; i++) {
        offs[i] = seg[2 * i];
        offs[count + i] = seg[2 * i + 1];
    }
    dt_status st = dt_optim_set_segments(o, count, offs, offs + count);
    free(seg);
    free(offs);
    if (st != DT_OK) {
        dt_optim_free(o);
        return NULL;
    }
    return o;
}

/* ---- kernels ------------------------------------------------------------------------- */

/* The double a float hyperparameter stands for: the shortest decimal that rounds to it
 * (0.999f -> 0.999 rather than 0.99900001287). torch and DeepSpeed hold hyperparameters as
 * Python doubles and form 1 - beta, 1 - beta^t and lr / (1 - beta1^t) in double; taking the
 * float's exact value instead would shift 1 - beta2 by up to 1e-5 relative. */
static double intended(float x) {
    char buf[32];
    for (int d = 1; d < 9; d++) {
        snprintf(buf, sizeof buf, "%.*g", d, (double)x);
        if (strtof(buf, NULL) == x) return strtod(buf, NULL);
    }
    return (double)x;
}

typedef struct adam_k {
    float b1, omb1, b2, omb2, eps;
    float l2;        /* L2 coefficient added to the gradient (0 in adam_w_mode) */
    float decay_mul; /* 1 - lr wd in adam_w_mode, else 1 */
    float bc2_sqrt;  /* sqrt(1 - b2^t) or 1 */
    float neg_step;  /* -lr / (1 - b1^t) */
} adam_k;

static void adam_range(const adam_k *k, float *restrict p, const float *restrict g,
                       float *restrict m, float *restrict v, int64_t lo, int64_t hi) {
    const float b1 = k->b1, omb1 = k->omb1, b2 = k->b2, omb2 = k->omb2, eps = k->eps;
    const float l2 = k->l2, dmul = k->decay_mul, bc2s = k->bc2_sqrt, ns = k->neg_step;
#pragma omp simd
    for (int64_t i = lo; i < hi; i++) {
        float pi = p[i];
        float gi = g[i] + l2 * pi;
        float mi = b1 * m[i] + omb1 * gi;
        float vi = b2 * v[i] + omb2 * (gi * gi);
        float denom = sqrtf(vi) / bc2s + eps;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi * dmul + ns * (mi / denom);
    }
}

typedef struct sgd_k {
    float wd, mom, omd, neg_lr;
    bool nesterov;
} sgd_k;

static void sgd_range(const sgd_k *k, int mode, float *restrict p, const float *restrict g,
                      float *restrict buf, int64_t lo, int64_t hi) {
    const float wd = k->wd, mom = k->mom, omd = k->omd, nl = k->neg_lr;
    const bool nest = k->nesterov;
    if (mode == 0) { /* no momentum */
#pragma omp simd
        for (int64_t i = lo; i < hi; i++) p[i] = p[i] + nl * (g[i] + wd * p[i]);
    } else if (mode == 1) { /* first momentum step: the buffer starts as d */
#pragma omp simd
        for (int64_t i = lo; i < hi; i++) {
            float d = g[i] + wd * p[i];
            buf[i] = d;
            p[i] = p[i] + nl * (nest ? d + mom * d : d);
        }
    } else {
#pragma omp simd
        for (int64_t i = lo; i < hi; i++) {
            float d = g[i] + wd * p[i];
            float b = mom * buf[i] + omd * d;
            buf[i] = b;
            p[i] = p[i] + nl * (nest ? d + mom * b : b);
        }
    }
}

typedef struct lamb_k {
    float b1, omb1, b2, omb2, eps, wd, step_size;
} lamb_k;

/* Pass 1 on [lo, hi): update the moments, return sum p^2 and sum u^2 (8 double lanes, summed
 * in lane order). */
static void lamb_pass1(const lamb_k *k, const float *restrict p, const float *restrict g,
                       float *restrict m, float *restrict v, int64_t lo, int64_t hi, double *w2,
                       double *u2) {
    const float b1 = k->b1, omb1 = k->omb1, b2 = k->b2, omb2 = k->omb2, eps = k->eps;
    const float wd = k->wd;
    double aw[8] = {0}, au[8] = {0};
    int64_t i = lo;
    for (; i + 8 <= hi; i += 8) {
#pragma omp simd
        for (int j = 0; j < 8; j++) {
            float pi = p[i + j], gi = g[i + j];
            float mi = b1 * m[i + j] + omb1 * gi;
            float vi = b2 * v[i + j] + omb2 * (gi * gi);
            m[i + j] = mi;
            v[i + j] = vi;
            float u = mi / (sqrtf(vi) + eps) + wd * pi;
            aw[j] += (double)pi * (double)pi;
            au[j] += (double)u * (double)u;
        }
    }
    for (int j = 0; i < hi; i++, j++) {
        float pi = p[i], gi = g[i];
        float mi = b1 * m[i] + omb1 * gi;
        float vi = b2 * v[i] + omb2 * (gi * gi);
        m[i] = mi;
        v[i] = vi;
        float u = mi / (sqrtf(vi) + eps) + wd * pi;
        aw[j] += (double)pi * (double)pi;
        au[j] += (double)u * (double)u;
    }
    double sw = 0, su = 0;
    for (int j = 0; j < 8; j++) {
        sw += aw[j];
        su += au[j];
    }
    *w2 = sw;
    *u2 = su;
}

static void lamb_pass2(const lamb_k *k, float scale, float *restrict p, const float *restrict m,
                       const float *restrict v, int64_t lo, int64_t hi) {
    const float eps = k->eps, wd = k->wd;
#pragma omp simd
    for (int64_t i = lo; i < hi; i++) {
        float pi = p[i];
        float u = m[i] / (sqrtf(v[i]) + eps) + wd * pi;
        p[i] = pi - scale * u;
    }
}

/* ---- step ---------------------------------------------------------------------------- */

/* The fused zero_grad: a chunk's gradients are zeroed right after the step has read them,
 * while they are in cache (gz NULL: kept). */
static void zero_range(float *gz, int64_t lo, int64_t hi) {
    if (gz) memset(gz + lo, 0, (size_t)(hi - lo) * sizeof(float));
}

static void step_adam(dt_optimizer *o, float *p, const float *g, float *gz) {
    const dt_optim_config *c = &o->cfg;
    double t = (double)(o->steps + 1);
    double lr = intended(c->lr), b1 = intended(c->beta1), b2 = intended(c->beta2);
    double wd = intended(c->weight_decay);
    bool decoupled = c->adam_w_mode || c->type == DT_OPTIM_ADAMW;
    adam_k k;
    k.b1 = c->beta1;
    k.omb1 = (float)(1.0 - b1);
    k.b2 = c->beta2;
    k.omb2 = (float)(1.0 - b2);
    k.eps = c->eps;
    k.l2 = decoupled ? 0.0f : c->weight_decay;
    k.decay_mul = decoupled ? (float)(1.0 - lr * wd) : 1.0f;
    if (c->bias_correction) {
        double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
        k.bc2_sqrt = (float)sqrt(bc2);
        k.neg_step = (float)(-lr / bc1);
    } else {
        k.bc2_sqrt = 1.0f;
        k.neg_step = -c->lr;
    }
    float *m = o->buf[0], *v = o->buf[1];
    int64_t n = o->n, nc = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(dynamic) if (nc > 1)
    for (int64_t c0 = 0; c0 < nc; c0++) {
        int64_t lo = c0 * CHUNK, hi = lo + CHUNK < n ? lo + CHUNK : n;
        adam_range(&k, p, g, m, v, lo, hi);
        zero_range(gz, lo, hi);
    }
}

static dt_status step_sgd(dt_optimizer *o, float *p, const float *g, float *gz) {
    const dt_optim_config *c = &o->cfg;
    int mode = 0;
    if (c->momentum != 0) {
        if (!o->buf[0]) { /* momentum switched on later (e.g. by a schedule): lazy buffer */
            o->buf[0] = alloc_state(o);
            if (!o->buf[0])
                return dt_error(DT_ERR_OOM,
                                "dt_optim_step: SGD momentum buffer for %lld elements: %s",
                                (long long)o->n, dt_last_error());
            o->buf_name[0] = "momentum_buffer";
            o->nbuf = 1;
            o->mom_started = false;
        }
        mode = o->mom_started ? 2 : 1;
    }
    sgd_k k = {c->weight_decay, c->momentum, (float)(1.0 - intended(c->dampening)), -c->lr,
               c->nesterov};
    float *buf = o->buf[0];
    int64_t n = o->n, nc = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(dynamic) if (nc > 1)
    for (int64_t c0 = 0; c0 < nc; c0++) {
        int64_t lo = c0 * CHUNK, hi = lo + CHUNK < n ? lo + CHUNK : n;
        sgd_range(&k, mode, p, g, buf, lo, hi);
        zero_range(gz, lo, hi);
    }
    if (mode) o->mom_started = true;
    return DT_OK;
}

static void step_lamb(dt_optimizer *o, float *p, const float *g, float *gz) {
    const dt_optim_config *c = &o->cfg;
    double t = (double)(o->steps + 1);
    double b1 = intended(c->beta1), b2 = intended(c->beta2);
    lamb_k k;
    k.b1 = c->beta1;
    k.omb1 = (float)(1.0 - b1);
    k.b2 = c->beta2;
    k.omb2 = (float)(1.0 - b2);
    k.eps = c->eps;
    k.wd = c->weight_decay;
    if (c->bias_correction) {
        double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
        k.step_size = (float)(intended(c->lr) * sqrt(bc2) / bc1);
    } else {
        k.step_size = c->lr;
    }
    float *m = o->buf[0], *v = o->buf[1];
    const chunk *ch = o->chunks;
    double *partial = o->partial;
    int64_t nc = o->nchunks;
#pragma omp parallel for schedule(dynamic) if (nc > 1)
    for (int64_t i = 0; i < nc; i++) {
        lamb_pass1(&k, p, g, m, v, ch[i].lo, ch[i].hi, &partial[2 * i], &partial[2 * i + 1]);
        zero_range(gz, ch[i].lo, ch[i].hi);
    }
    /* per tensor: norms summed over its chunks in order, then the clamped trust ratio */
    for (int64_t j = 0; j < o->nparts; j++) {
        double w2 = 0, u2 = 0;
        for (int64_t i = o->parts[j].c0; i < o->parts[j].c1; i++) {
            w2 += partial[2 * i];
            u2 += partial[2 * i + 1];
        }
        double w = sqrt(w2), u = sqrt(u2), r = 1.0;
        if (w != 0 && u != 0) {
            r = w / u;
            if (r > c->max_coeff) r = c->max_coeff;
            if (r < c->min_coeff) r = c->min_coeff;
        }
        o->coeff[j] = (float)r;
    }
    /* pass 2 over the tensors' chunks: p -= step_size * ratio * u */
    const float *coeff = o->coeff;
#pragma omp parallel for schedule(dynamic) if (nc > 1)
    for (int64_t i = 0; i < nc; i++)
        lamb_pass2(&k, k.step_size * coeff[ch[i].part], p, m, v, ch[i].lo, ch[i].hi);
}

/* dt_optim_step, zeroing the gradients as it goes when zero is set (grads is then written) */
static dt_status optim_step(dt_optimizer *o, float *params, const float *grads, int64_t n,
                            bool zero) {
    if (!o) return dt_error(DT_ERR_INVALID, "dt_optim_step: optimiser is NULL");
    if (n != o->n)
        return dt_error(DT_ERR_CONFIG,
                        "dt_optim_step: got %lld elements but the optimiser was made for %lld; "
                        "hint: make the optimiser over the same buffer (or ZeRO shard) it steps",
                        (long long)n, (long long)o->n);
    if (n > 0 && (!params || !grads))
        return dt_error(DT_ERR_INVALID, "dt_optim_step: %s is NULL", params ? "grads" : "params");
    dt_status st = check_config(&o->cfg, "dt_optim_step");
    if (st != DT_OK) return st;
    float *gz = zero ? (float *)grads : NULL;
    if (n > 0) {
        switch (o->cfg.type) {
        case DT_OPTIM_SGD:
            st = step_sgd(o, params, grads, gz);
            if (st != DT_OK) return st;
            break;
        case DT_OPTIM_ADAM:
        case DT_OPTIM_ADAMW:
            step_adam(o, params, grads, gz);
            break;
        case DT_OPTIM_LAMB:
            step_lamb(o, params, grads, gz);
            break;
        }
    }
    o->steps++;
    return DT_OK;
}

dt_status dt_optim_step(dt_optimizer *o, float *params, const float *grads, int64_t n) {
    return optim_step(o, params, grads, n, false);
}

dt_status dt_optim_step_zero_grad(dt_optimizer *o, float *params, float *grads, int64_t n) {
    return optim_step(o, params, grads, n, true);
}

static dt_status step_module(dt_optimizer *o, dt_module *root, bool zero, const char *fn) {
    if (!o || !root) return dt_error(DT_ERR_INVALID, "%s: NULL argument", fn);
    int64_t n = 0, ng = 0;
    float *p = dt_module_flat_params(root, &n);
    float *g = dt_module_flat_grads(root, &ng);
    if (!p || !g)
        return dt_error(DT_ERR_STATE,
                        "%s: the module has no flat buffers; hint: call dt_module_build first", fn);
    dt_status st = optim_step(o, p, g, n, false);
    if (st == DT_OK && zero) dt_module_zero_grad_lazy(root);
    return st;
}

dt_status dt_optim_step_module(dt_optimizer *o, dt_module *root) {
    return step_module(o, root, false, "dt_optim_step_module");
}

dt_status dt_optim_step_module_zero_grad(dt_optimizer *o, dt_module *root) {
    return step_module(o, root, true, "dt_optim_step_module_zero_grad");
}

/* ---- accessors ----------------------------------------------------------------------- */

void dt_optim_set_lr(dt_optimizer *o, float lr) {
    if (o) o->cfg.lr = lr;
}

float dt_optim_lr(const dt_optimizer *o) {
    return o ? o->cfg.lr : 0.0f;
}

void dt_optim_set_momentum(dt_optimizer *o, float m) {
    if (!o) return;
    if (o->cfg.type == DT_OPTIM_SGD)
        o->cfg.momentum = m;
    else
        o->cfg.beta1 = m;
}

const dt_optim_config *dt_optim_config_of(const dt_optimizer *o) {
    return o ? &o->cfg : NULL;
}

int64_t dt_optim_step_count(const dt_optimizer *o) {
    return o ? o->steps : 0;
}

/* Restoring a step count > 0 also marks an SGD momentum buffer as holding a value (its
 * contents come from dt_optim_state). */
void dt_optim_set_step_count(dt_optimizer *o, int64_t steps) {
    if (!o) return;
    o->steps = steps < 0 ? 0 : steps;
    o->mom_started = o->steps > 0 && o->buf[0] != NULL;
}

int dt_optim_state_count(const dt_optimizer *o) {
    return o ? o->nbuf : 0;
}

float *dt_optim_state(dt_optimizer *o, int i, const char **name) {
    if (!o || i < 0 || i >= o->nbuf) {
        if (name) *name = NULL;
        return NULL;
    }
    if (name) *name = o->buf_name[i];
    return o->buf[i];
}

int64_t dt_optim_numel(const dt_optimizer *o) {
    return o ? o->n : 0;
}
