/* llama.c — the Llama layout, which Mistral and Qwen2 share (rows of arch.c; their
 * differences are config flags: biases, tied head, sliding window).
 *
 * Tree (Hugging Face names; Linear weights (out, in) as in the files):
 *   model . { embed_tokens (V, D),
 *             layers . i . { input_layernorm (RMSNorm D),
 *                            self_attn . { q_proj D -> Hq·hd, k_proj D -> Hkv·hd,
 *                                          v_proj D -> Hkv·hd, o_proj Hq·hd -> D },
 *                            post_attention_layernorm (RMSNorm D),
 *                            mlp . { gate_proj D -> F, up_proj D -> F, down_proj F -> D } },
 *             norm (RMSNorm D) }
 *   lm_head D -> V (no bias) unless tie_word_embeddings; tied, the head is embed_tokens.
 * Biases: q/k/v (attention_bias, always for Qwen2), o (attention_bias), MLP (mlp_bias).
 *
 * forward(ids (B, T)) -> logits (B, T, V):
 *   x = embed_tokens(ids)                                          p0 = cached tokens (or 0)
 *   per layer: h = rms(x);  q, k, v = proj(h) as (B, T, H, hd)
 *              q, k = rope(q, p0, theta), rope(k, p0, theta)       rotate_half convention
 *              x = x + o_proj(attention(q, k, v))                  causal, GQA
 *              h = rms(x);  x = x + down_proj(silu(gate_proj(h)) * up_proj(h))
 *   logits = norm(x) · headᵀ
 */
#include "model_impl.h"

enum { L_IN_NORM, L_ATTN, L_POST_NORM, L_MLP };
enum { A_Q, A_K, A_V, A_O };
enum { M_GATE, M_UP, M_DOWN };

/* x (B, T, D) -> proj(x) viewed as (B, T, H, hd) */
static dt_tensor *heads(dt_module *proj, dt_tensor *x, int64_t H, int64_t hd) {
    dt_tensor *y = dt_module_forward(proj, x);
    return y ? dt_reshape(y, 4, (int64_t[]){y->shape[0], y->shape[1], H, hd}) : NULL;
}

/* res + proj(y) as one op, with proj's hooks around it. */
static dt_tensor *proj_residual(dt_module *proj, dt_tensor *y, dt_tensor *res) {
    if (!y || !res) return NULL;
    dt__lm_hook_pre(proj);
    dt_tensor *b = proj->n_params > 1 ? proj->params[1].t : NULL;
    dt_tensor *out = dt_linear_residual(y, proj->params[0].t, b, res);
    dt__lm_hook_post(proj);
    return out;
}

static dt_tensor *attention_residual(dt_module *attn, int64_t layer, dt_tensor *h, dt_tensor *x) {
    dt__lm_state *st = dt__lm_state_of(attn);
    const dt_lm_config *c = &st->cfg;
    dt_module **p = attn->children;
    int64_t p0 = st->cache ? st->cache->len : 0, hd = c->head_dim;
    // q (B, T, Hq, hd); k, v (B, T, Hkv, hd)
    dt_tensor *q = dt_rope(heads(p[A_Q], h, c->n_head, hd), p0, c->rope_theta);
    dt_tensor *k = dt_rope(heads(p[A_K], h, c->n_kv_head, hd), p0, c->rope_theta);
    dt_tensor *v = heads(p[A_V], h, c->n_kv_head, hd);
    dt_tensor *y = st->cache ? dt__lm_cached_attention(st->cache, (int)layer, q, k, v)
                             : dt_attention(q, k, v, true);
    // y (B, T, Hq·hd)
    if (y && y->ndim == 4) y = dt_reshape(y, 3, (int64_t[]){y->shape[0], y->shape[1], -1});
    return proj_residual(p[A_O], y, x);
}

static dt_tensor *mlp_residual(dt_module *mlp, dt_tensor *h, dt_tensor *x) {
    dt_module **p = mlp->children;
    // (B, T, D) -> gate, up (B, T, F) -> (B, T, D)
    dt_tensor *a = dt_swiglu(dt_module_forward(p[M_GATE], h), dt_module_forward(p[M_UP], h));
    return proj_residual(p[M_DOWN], a, x);
}

static dt_tensor *layer_forward(dt_module *m, dt_tensor *x) {
    dt_module **c = m->children;
    dt_tensor *h = dt_module_forward(c[L_IN_NORM], x);
    if (!h) return NULL;
    dt__lm_hook_pre(c[L_ATTN]);
    x = attention_residual(c[L_ATTN], m->iconf[0], h, x);
    dt__lm_hook_post(c[L_ATTN]);
    h = dt_module_forward(c[L_POST_NORM], x);
    if (!h) return NULL;
    dt__lm_hook_pre(c[L_MLP]);
    x = mlp_residual(c[L_MLP], h, x);
    dt__lm_hook_post(c[L_MLP]);
    return x;
}

enum { B_EMBED, B_LAYERS, B_NORM };

static dt_tensor *llama_forward(dt_module *root, dt_tensor *ids) {
    dt__lm_state *st = root->impl;
    dt_module **body = root->children[0]->children;
    if (!ids || dt__lm_check_ids(ids, st->cache ? st->cache->len : 0, st->cfg.max_pos)) return NULL;
    dt_tensor *x = dt_module_forward(body[B_EMBED], ids); // (B, T, D)
    dt_module *layers = body[B_LAYERS];
    for (int i = 0; i < layers->n_children && x; i++) x = dt_module_forward(layers->children[i], x);
    x = dt_module_forward(body[B_NORM], x);
    if (st->cache && x) st->cache->len += ids->shape[1];
    return dt__lm_head(root, body[B_EMBED], x); // logits (B, T, V)
}

static dt_module *llama_layer(const dt_lm_config *c) {
    int64_t D = c->d_model, F = c->d_ff, hd = c->head_dim;
    int64_t q = c->n_head * hd, kv = c->n_kv_head * hd;
    float eps = c->norm_eps;
    dt_module *attn = dt__module_with_children(
        dt__lm_container("LlamaAttention"), 4,
        (const char *[]){"q_proj", "k_proj", "v_proj", "o_proj"},
        (dt_module *[]){dt_nn_linear(D, q, c->attn_bias), dt_nn_linear(D, kv, c->attn_bias),
                        dt_nn_linear(D, kv, c->attn_bias), dt_nn_linear(q, D, c->o_bias)});
    dt_module *mlp = dt__module_with_children(
        dt__lm_container("LlamaMLP"), 3, (const char *[]){"gate_proj", "up_proj", "down_proj"},
        (dt_module *[]){dt_nn_linear(D, F, c->mlp_bias), dt_nn_linear(D, F, c->mlp_bias),
                        dt_nn_linear(F, D, c->mlp_bias)});
    return dt__module_with_children(
        dt_module_new("LlamaDecoderLayer", layer_forward), 4,
        (const char *[]){"input_layernorm", "self_attn", "post_attention_layernorm", "mlp"},
        (dt_module *[]){dt_nn_rms_norm(D, eps), attn, dt_nn_rms_norm(D, eps), mlp});
}

dt_module *dt__llama_build(const dt_lm_config *c, const dt__lm_arch *a) {
    int64_t D = c->d_model;
    dt_module *body = dt__module_with_children(
        dt__lm_container("LlamaModel"), 3, (const char *[]){"embed_tokens", "layers", "norm"},
        (dt_module *[]){dt_nn_embedding(c->vocab, D), dt__lm_block_list(c, c->n_layer, llama_layer),
                        dt_nn_rms_norm(D, c->norm_eps)});
    return dt__lm_root_with(dt__lm_root("LlamaForCausalLM", llama_forward, c, a), "model", body, c);
}
