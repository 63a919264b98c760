/* gpt2.c — GPT-2 as transformers' GPT2LMHeadModel lays it out.
 *
 * Tree (parameter names are the Hugging Face names; Linear weights are (out, in), the files'
 * Conv1D (in, out) are transposed by the loader and the exporter):
 *   transformer . { wte (V, D), wpe (P, D),
 *                   h . i . { ln_1, attn . { c_attn D -> 3D, c_proj D -> D },
 *                             ln_2, mlp . { c_fc D -> F, c_proj F -> D } },
 *                   ln_f }
 *   lm_head D -> V (no bias) only when the head is not tied; tied, the head is wte.
 *
 * forward(ids (B, T)) -> logits (B, T, V):
 *   x = wte(ids) + wpe(p0 .. p0+T-1)               p0 = tokens already in the KV cache (or 0)
 *   per block: x = x + c_proj(attn(c_attn(ln_1(x))))          causal, heads of D / H
 *              x = x + mlp.c_proj(gelu_tanh(mlp.c_fc(ln_2(x))))   gelu_new is the tanh GELU
 *   logits = ln_f(x) · wteᵀ   (or lm_head)
 * The fused ops do the work (dt_embedding_sum, dt_linear_gelu_tanh, dt_linear_residual,
 * dt_causal_self_attention), with each child's hooks run around them as dt_module_forward
 * would. With a KV cache (generation) attention reads the cache instead.
 */
#include "model_impl.h"

#include <stdio.h>

enum { BLK_LN_1, BLK_ATTN, BLK_LN_2, BLK_MLP };

/* res + proj(y) as one op, with proj's hooks around it. */
static dt_tensor *proj_residual(dt_module *proj, dt_tensor *y, dt_tensor *res) {
    if (!y || !res) return NULL;
    dt__lm_hook_pre(proj);
    dt_tensor *out = dt_linear_residual(y, proj->params[0].t, proj->params[1].t, res);
    dt__lm_hook_post(proj);
    return out;
}

/* attention core on qkv (B, T, 3D) -> (B, T, D): the fused causal op, or the KV cache's. */
static dt_tensor *attention(dt_module *attn, dt_tensor *qkv) {
    dt__lm_state *st = dt__lm_state_of(attn);
    int64_t H = st->cfg.n_head, D = st->cfg.d_model;
    if (!qkv) return NULL;
    if (!st->cache) return dt_causal_self_attention(qkv, (int)H);
    dt_tensor *p[3];
    if (dt_split(qkv, 2, 3, (int64_t[]){D, D, D}, p) != DT_OK) return NULL;
    int64_t B = qkv->shape[0], T = qkv->shape[1], shape[4] = {B, T, H, D / H};
    for (int i = 0; i < 3; i++) p[i] = dt_reshape(dt_contiguous(p[i]), 4, shape);
    // q, k, v (B, T, H, D/H)
    return dt__lm_cached_attention(st->cache, (int)attn->parent->iconf[0], p[0], p[1], p[2]);
}

static dt_tensor *block_forward(dt_module *m, dt_tensor *x) {
    dt_module **c = m->children, *attn = c[BLK_ATTN], *mlp = c[BLK_MLP];
    // x (B, T, D); attention branch
    dt_tensor *h = dt_module_forward(c[BLK_LN_1], x);
    dt__lm_hook_pre(attn);
    dt_tensor *qkv = dt_module_forward(attn->children[0], h); // (B, T, 3D)
    x = proj_residual(attn->children[1], attention(attn, qkv), x);
    dt__lm_hook_post(attn);
    // MLP branch: (B, T, D) -> (B, T, F) -> (B, T, D)
    h = dt_module_forward(c[BLK_LN_2], x);
    if (!h) return NULL;
    dt__lm_hook_pre(mlp);
    dt_module *fc = mlp->children[0];
    dt__lm_hook_pre(fc);
    h = dt_linear_gelu_tanh(h, fc->params[0].t, fc->params[1].t);
    dt__lm_hook_post(fc);
    x = proj_residual(mlp->children[1], h, x);
    dt__lm_hook_post(mlp);
    return x;
}

/* x (B, T, D) = wte(ids) + wpe(p0 + t). */
static dt_tensor *embed(dt_module *wte, dt_module *wpe, dt_tensor *ids, int64_t p0,
                        int64_t max_pos) {
    if (dt__lm_check_ids(ids, p0, max_pos) != DT_OK) return NULL;
    int64_t B = ids->shape[0], T = ids->shape[1];
    dt_tensor *pos = dt_tensor_new(ids->ctx, DT_DTYPE_I64, 2, (int64_t[]){B, T});
    if (!pos) return NULL;
    int64_t *pd = pos->data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) pd[b * T + t] = p0 + t;
    dt__lm_hook_pre(wte);
    dt__lm_hook_pre(wpe);
    dt_tensor *x = dt_embedding_sum(ids, wte->params[0].t, pos, wpe->params[0].t);
    dt__lm_hook_post(wpe);
    dt__lm_hook_post(wte);
    return x;
}

enum { TF_WTE, TF_WPE, TF_H, TF_LN_F };

static dt_tensor *gpt2_forward(dt_module *root, dt_tensor *ids) {
    dt__lm_state *st = root->impl;
    dt_module **tf = root->children[0]->children;
    if (!ids) return NULL;
    int64_t p0 = st->cache ? st->cache->len : 0;
    dt_tensor *x = embed(tf[TF_WTE], tf[TF_WPE], ids, p0, st->cfg.max_pos); // (B, T, D)
    dt_module *h = tf[TF_H];
    for (int i = 0; i < h->n_children && x; i++) x = dt_module_forward(h->children[i], x);
    x = dt_module_forward(tf[TF_LN_F], x);
    if (st->cache && x) st->cache->len += ids->shape[1];
    return dt__lm_head(root, tf[TF_WTE], x); // logits (B, T, V)
}

static dt_module *gpt2_block(const dt_lm_config *c) {
    int64_t D = c->d_model, F = c->d_ff;
    float eps = c->norm_eps;
    dt_module *attn = dt__module_with_children(
        dt__lm_container("GPT2Attention"), 2, (const char *[]){"c_attn", "c_proj"},
        (dt_module *[]){dt_nn_linear(D, 3 * D, true), dt_nn_linear(D, D, true)});
    dt_module *mlp =
        dt__module_with_children(dt__lm_container("GPT2MLP"), 2, (const char *[]){"c_fc", "c_proj"},
                             (dt_module *[]){dt_nn_linear(D, F, true), dt_nn_linear(F, D, true)});
    return dt__module_with_children(
        dt_module_new("GPT2Block", block_forward), 4,
        (const char *[]){"ln_1", "attn", "ln_2", "mlp"},
        (dt_module *[]){dt_nn_layer_norm(D, eps), attn, dt_nn_layer_norm(D, eps), mlp});
}

dt_module *dt__gpt2_build(const dt_lm_config *c, const dt__lm_arch *a) {
    int64_t D = c->d_model;
    dt_module *body = dt__module_with_children(
        dt__lm_container("GPT2Model"), 4, (const char *[]){"wte", "wpe", "h", "ln_f"},
        (dt_module *[]){dt_nn_embedding(c->vocab, D), dt_nn_embedding(c->max_pos, D),
                        dt__lm_block_list(c, c->n_layer, gpt2_block),
                        dt_nn_layer_norm(D, c->norm_eps)});
    return dt__lm_root_with(dt__lm_root("GPT2LMHeadModel", gpt2_forward, c, a), "transformer", body,
                            c);
}
