/* decode.c — one generated token through the model on plain arrays: the step after the prompt
 * of a KV-cache generation, where every product has one row. The module forwards would build
 * ~100 tensors and as many parallel regions per token and run the M = 1 products through the
 * GEMM; here the weights are read in place (the built tree's f32 parameters), the products are
 * matrix-vector ones (dt__gemv_rows), attention reads the cache for its one query, and nothing
 * is allocated per token. The arithmetic is the forwards' (gpt2.c, llama.c): the same norms,
 * GELU (tanh), SwiGLU, rotary angles and causal softmax, in f32 with other summation orders.
 *
 * A tree with engine hooks (ZeRO-3 gathers, profilers) is not decoded here: the hooks must run
 * around their modules, so generation keeps the module forwards for it. */
#include "model_impl.h"
#include "tensor/tensor_iface.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct lin {
    const float *w, *b; /* (out, in), bias or NULL */
    int64_t out, in;
} lin;

typedef struct dec_layer {
    const float *n1w, *n1b, *n2w, *n2b; /* norms; the biases NULL under RMSNorm */
    lin qkv, q, k, v, o;                /* GPT-2: the fused qkv; Llama: q, k, v */
    lin up, gate, down;                 /* GPT-2: up = c_fc, down = mlp.c_proj, no gate */
} dec_layer;

struct dt__lm_decoder {
    dt_lm_config cfg;
    bool gpt2;
    int threads;
    const float *wte, *wpe, *nfw, *nfb; /* wpe NULL for Llama */
    lin head;
    dec_layer *layer;
    float *x, *h, *qkv, *att, *f1, *f2, *scores, *logits; /* scratch, one token */
};

static const float *pdata(dt_module *m, int i) {
    return i < m->n_params ? (const float *)m->params[i].t->data : NULL;
}

static lin lin_of(dt_module *m) {
    const dt_tensor *w = m->params[0].t;
    return (lin){pdata(m, 0), pdata(m, 1), w->shape[0], w->shape[1]};
}

/* The tree has no hooks and f32 contiguous parameters. */
static bool plain_tree(dt_module *m) {
    if (m->pre_hook || m->post_hook) return false;
    for (int i = 0; i < m->n_params; i++) {
        const dt_tensor *t = m->params[i].t;
        if (!t || t->dtype != DT_DTYPE_F32 || !dt_is_contiguous(t)) return false;
    }
    for (int i = 0; i < m->n_children; i++)
        if (!plain_tree(m->children[i])) return false;
    return true;
}

static void gpt2_layer(dec_layer *L, dt_module *blk) {
    dt_module **c = blk->children, *attn = c[1], *mlp = c[3];
    *L = (dec_layer){.n1w = pdata(c[0], 0),
                     .n1b = pdata(c[0], 1),
                     .n2w = pdata(c[2], 0),
                     .n2b = pdata(c[2], 1),
                     .qkv = lin_of(attn->children[0]),
                     .o = lin_of(attn->children[1]),
                     .up = lin_of(mlp->children[0]),
                     .down = lin_of(mlp->children[1])};
}

static void llama_layer(dec_layer *L, dt_module *lay) {
    dt_module **c = lay->children, **a = c[1]->children, **m = c[3]->children;
    *L = (dec_layer){.n1w = pdata(c[0], 0),
                     .n2w = pdata(c[2], 0),
                     .q = lin_of(a[0]),
                     .k = lin_of(a[1]),
                     .v = lin_of(a[2]),
                     .o = lin_of(a[3]),
                     .gate = lin_of(m[0]),
                     .up = lin_of(m[1]),
                     .down = lin_of(m[2])};
}

dt__lm_decoder *dt__lm_decoder_new(dt_module *root, int64_t cap, int threads) {
    const dt__lm_state *st = dt__lm_state_of(root);
    const dt_lm_config *c = &st->cfg;
    if (!plain_tree(root)) return NULL;
    dt__lm_decoder *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->cfg = *c, d->gpt2 = st->arch->family == DT__LM_GPT2, d->threads = threads;
    dt_module **body = root->children[0]->children, *blocks = body[d->gpt2 ? 2 : 1];
    d->wte = pdata(body[0], 0);
    d->wpe = d->gpt2 ? pdata(body[1], 0) : NULL;
    dt_module *norm = body[d->gpt2 ? 3 : 2];
    d->nfw = pdata(norm, 0), d->nfb = d->gpt2 ? pdata(norm, 1) : NULL;
    d->head = c->tied ? (lin){d->wte, NULL, c->vocab, c->d_model} : lin_of(root->children[1]);
    d->layer = calloc((size_t)c->n_layer, sizeof *d->layer);
    for (int64_t i = 0; d->layer && i < c->n_layer; i++)
        (d->gpt2 ? gpt2_layer : llama_layer)(&d->layer[i], blocks->children[i]);
    int64_t D = c->d_model, hd = c->head_dim, qkv = (c->n_head + 2 * c->n_kv_head) * hd;
    size_t n = (size_t)(2 * D + (qkv > 3 * D ? qkv : 3 * D) + c->n_head * hd + 2 * c->d_ff + cap +
                        c->vocab);
    d->x = malloc(n * sizeof(float));
    if (!d->layer || !d->x) {
        dt__lm_decoder_free(d);
        return NULL;
    }
    d->h = d->x + D, d->qkv = d->h + D, d->att = d->qkv + (qkv > 3 * D ? qkv : 3 * D);
    d->f1 = d->att + c->n_head * hd, d->f2 = d->f1 + c->d_ff, d->scores = d->f2 + c->d_ff;
    d->logits = d->scores + cap;
    return d;
}

void dt__lm_decoder_free(dt__lm_decoder *d) {
    if (!d) return;
    free(d->layer);
    free(d->x);
    free(d);
}

/* y = norm(x): LayerNorm with b, RMSNorm without. */
static void norm(const float *x, const float *w, const float *b, float eps, int64_t D, float *y) {
    double mean = 0, var = 0;
    if (b) {
        for (int64_t i = 0; i < D; i++) mean += x[i];
        mean /= (double)D;
    }
    for (int64_t i = 0; i < D; i++) var += ((double)x[i] - mean) * ((double)x[i] - mean);
    float r = (float)(1.0 / sqrt(var / (double)D + (double)eps)), m = (float)mean;
    for (int64_t i = 0; i < D; i++) y[i] = (x[i] - m) * r * w[i] + (b ? b[i] : 0.f);
}

static void gemv(const dt__lm_decoder *d, const lin *l, const float *x, float *y) {
    dt__gemv_rows(l->w, l->out, l->in, x, l->b, y, d->threads);
}

/* Rotate the H heads of x (H, hd) to position pos (rotate_half, as dt_rope). */
static void rope(float *x, int64_t H, int64_t hd, int64_t pos, float theta) {
    int64_t h2 = hd / 2;
    for (int64_t i = 0; i < h2; i++) {
        double a = (double)pos * pow((double)theta, -2.0 * (double)i / (double)hd);
        float c = (float)cos(a), s = (float)sin(a);
        for (int64_t j = 0; j < H; j++) {
            float *r = x + j * hd, x1 = r[i], x2 = r[i + h2];
            r[i] = x1 * c - x2 * s, r[i + h2] = x2 * c + x1 * s;
        }
    }
}

/* att (Hq, hd) = the causal attention of q (Hq, hd) over the cache's S positions (S, Hkv, hd). */
static void attend(const dt__lm_decoder *d, const float *q, const float *K, const float *V,
                   int64_t S, float *att) {
    int64_t Hq = d->cfg.n_head, Hkv = d->cfg.n_kv_head, hd = d->cfg.head_dim, row = Hkv * hd;
    float scale = 1.f / sqrtf((float)hd), *p = d->scores;
    for (int64_t h = 0; h < Hq; h++) {
        int64_t g = h / (Hq / Hkv);
        const float *qh = q + h * hd;
        float mx = -INFINITY, sum = 0.f, *o = att + h * hd;
        for (int64_t s = 0; s < S; s++) {
            const float *k = K + s * row + g * hd;
            float dot = 0.f;
            for (int64_t i = 0; i < hd; i++) dot += qh[i] * k[i];
            p[s] = dot * scale, mx = p[s] > mx ? p[s] : mx;
        }
        for (int64_t s = 0; s < S; s++) sum += p[s] = expf(p[s] - mx);
        memset(o, 0, (size_t)hd * sizeof *o);
        for (int64_t s = 0; s < S; s++) {
            const float *v = V + s * row + g * hd, w = p[s] / sum;
            for (int64_t i = 0; i < hd; i++) o[i] += w * v[i];
        }
    }
}

/* x += attention of norm_1(x), with k and v written into the cache at pos. */
static void attention_block(dt__lm_decoder *d, const dec_layer *L, dt__lm_cache *c, int layer) {
    const dt_lm_config *cf = &d->cfg;
    int64_t D = cf->d_model, hd = cf->head_dim, pos = c->len, qn = cf->n_head * hd;
    int64_t kvn = cf->n_kv_head * hd;
    norm(d->x, L->n1w, L->n1b, cf->norm_eps, D, d->h);
    float *q = d->qkv, *k = q + qn, *v = k + kvn;
    if (d->gpt2) {
        gemv(d, &L->qkv, d->h, d->qkv);
    } else {
        gemv(d, &L->q, d->h, q), gemv(d, &L->k, d->h, k), gemv(d, &L->v, d->h, v);
        rope(q, cf->n_head, hd, pos, cf->rope_theta);
        rope(k, cf->n_kv_head, hd, pos, cf->rope_theta);
    }
    float *K = c->k[layer]->data, *V = c->v[layer]->data;
    memcpy(K + pos * kvn, k, (size_t)kvn * sizeof *K);
    memcpy(V + pos * kvn, v, (size_t)kvn * sizeof *V);
    attend(d, q, K, V, pos + 1, d->att);
    gemv(d, &L->o, d->att, d->h);
    for (int64_t i = 0; i < D; i++) d->x[i] += d->h[i];
}

/* x += mlp(norm_2(x)): GELU (tanh) for GPT-2, SwiGLU for Llama. */
static void mlp_block(dt__lm_decoder *d, const dec_layer *L) {
    int64_t D = d->cfg.d_model, F = d->cfg.d_ff;
    norm(d->x, L->n2w, L->n2b, d->cfg.norm_eps, D, d->h);
    gemv(d, &L->up, d->h, d->gpt2 ? d->f1 : d->f2);
    if (d->gpt2) {
        for (int64_t i = 0; i < F; i++) {
            float u = d->f1[i];
            d->f1[i] = 0.5f * u * (1.f + tanhf(0.7978845608f * (u + 0.044715f * u * u * u)));
        }
    } else {
        gemv(d, &L->gate, d->h, d->f1);
        for (int64_t i = 0; i < F; i++) d->f1[i] = d->f1[i] / (1.f + expf(-d->f1[i])) * d->f2[i];
    }
    gemv(d, &L->down, d->f1, d->h);
    for (int64_t i = 0; i < D; i++) d->x[i] += d->h[i];
}

const float *dt__lm_decode(dt__lm_decoder *d, dt__lm_cache *c, int32_t id) {
    int64_t D = d->cfg.d_model, pos = c->len;
    memcpy(d->x, d->wte + (int64_t)id * D, (size_t)D * sizeof *d->x);
    if (d->wpe)
        for (int64_t i = 0; i < D; i++) d->x[i] += d->wpe[pos * D + i];
    for (int64_t l = 0; l < d->cfg.n_layer; l++) {
        attention_block(d, &d->layer[l], c, (int)l);
        mlp_block(d, &d->layer[l]);
    }
    norm(d->x, d->nfw, d->nfb, d->cfg.norm_eps, D, d->h);
    gemv(d, &d->head, d->h, d->logits);
    c->len++;
    return d->logits;
}
