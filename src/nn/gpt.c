/* gpt.c — the GPT-2 style benchmark model (dt_model_gpt).
 *
 * Tree (names are PyTorch state_dict names; Linear weights are (out, in)):
 *   wte (Embedding V x D), wpe (Embedding seq x D),
 *   h (ModuleList) . i (Block) . { ln_1 (LayerNorm D), attn . { c_attn (Linear D -> 3D),
 *                                  c_proj (Linear D -> D) }, ln_2 (LayerNorm D),
 *                                  mlp . { c_fc (Linear D -> 4D), c_proj (Linear 4D -> D) } },
 *   ln_f (LayerNorm D), lm_head (Linear D -> V, no bias, not tied to wte).
 * Initialisation is PyTorch's module defaults (what a plain model built from nn.Embedding,
 * nn.Linear and nn.LayerNorm gets): embeddings N(0, 1), Linear U(±1/sqrt(in)), LayerNorm 1/0.
 *
 * forward(tokens (B, T) i32/i64, T <= seq) -> logits (B, T, V):
 *   x = drop(wte(tokens) + wpe(0..T-1))
 *   per block: x = x + drop(c_proj(attn(c_attn(ln_1(x)))))
 *              x = x + drop(mlp.c_proj(gelu_tanh(mlp.c_fc(ln_2(x)))))
 *   logits = lm_head(ln_f(x))
 * attn is the fused dt_causal_self_attention; gelu_tanh(mlp.c_fc(.)) is the fused
 * dt_linear_gelu_tanh; x + c_proj(.) is the fused dt_linear_residual whenever the dropout is
 * the identity. Dropout uses cfg->dropout (p = 0: no op).
 * Every submodule runs through dt_module_forward, so module hooks see each layer (c_fc's
 * hooks run around the fused op).
 *
 * Position ids are embedded as a (B, T) grid (row b = 0..T-1): the add with the token
 * embedding is then same-shape (parallel) in both directions, and wpe's gradient is the
 * embedding scatter, cheaper than reducing a broadcast (T, D) operand over the batch.
 */
#include "dtrain/nn.h"
#include "nn_iface.h"

#include <stdio.h>

/* module iconf/fconf use:
 *   GPT:   iconf[0]=vocab [1]=seq [2]=d_model [3]=n_head [4]=n_layer, fconf[0]=dropout
 *   attn:  iconf[0]=n_head, fconf[0]=dropout;  mlp: fconf[0]=dropout */
enum { GPT_WTE, GPT_WPE, GPT_H, GPT_LN_F, GPT_LM_HEAD };
enum { BLK_LN_1, BLK_ATTN, BLK_LN_2, BLK_MLP };

static dt_tensor *attn_forward(dt_module *m, dt_tensor *x) {
    // x (B, T, D) -> qkv (B, T, 3D) -> y (B, T, D)
    dt_tensor *qkv = dt_module_forward(m->children[0], x);
    dt_tensor *y = dt_causal_self_attention(qkv, (int)m->iconf[0]);
    return dt_dropout(dt_module_forward(m->children[1], y), m->fconf[0]);
}

/* gelu_tanh(c_fc(x)) as the fused op dt_linear_gelu_tanh (bias and gelu run on the GEMM's
 * tiles while they are in cache); c_fc's hooks still run around it, as dt_module_forward would. */
static dt_tensor *fc_gelu(dt_module *fc, dt_tensor *x) {
    if (!x || !fc->params[0].t) return dt_gelu_tanh(dt_module_forward(fc, x)); /* its errors */
    if (fc->pre_hook) fc->pre_hook(fc, fc->hook_user);
    dt_tensor *h = dt_linear_gelu_tanh(x, fc->params[0].t, fc->params[1].t);
    if (fc->post_hook) fc->post_hook(fc, fc->hook_user);
    return h;
}

static dt_tensor *mlp_forward(dt_module *m, dt_tensor *x) {
    // x (B, T, D) -> h (B, T, 4D) -> (B, T, D)
    dt_tensor *h = fc_gelu(m->children[0], x);
    return dt_dropout(dt_module_forward(m->children[1], h), m->fconf[0]);
}

/* res + drop(proj(y)): one dt_linear_residual when the dropout is the identity (p = 0, or
 * evaluation), so the branch output is never a tensor of its own; proj's hooks run around it,
 * as dt_module_forward would. With dropout on, the plain ops. */
static dt_tensor *proj_residual(dt_module *proj, dt_tensor *y, dt_tensor *res, float p) {
    if (!y || !res) return NULL;
    if (!proj->params[0].t || (p > 0.f && dt_ctx_training(y->ctx)))
        return dt_add(res, dt_dropout(dt_module_forward(proj, y), p)); /* (or its errors) */
    if (proj->pre_hook) proj->pre_hook(proj, proj->hook_user);
    dt_tensor *out = dt_linear_residual(y, proj->params[0].t, proj->params[1].t, res);
    if (proj->post_hook) proj->post_hook(proj, proj->hook_user);
    return out;
}

static dt_tensor *attn_residual(dt_module *m, dt_tensor *x, dt_tensor *res) {
    dt_tensor *qkv = dt_module_forward(m->children[0], x);
    dt_tensor *y = qkv ? dt_causal_self_attention(qkv, (int)m->iconf[0]) : NULL;
    return proj_residual(m->children[1], y, res, m->fconf[0]);
}

static dt_tensor *mlp_residual(dt_module *m, dt_tensor *x, dt_tensor *res) {
    dt_tensor *h = fc_gelu(m->children[0], x);
    return proj_residual(m->children[1], h, res, m->fconf[0]);
}

/* res + branch(in), with the branch module's hooks around it (dt_module_forward's part) */
static dt_tensor *residual(dt_module *m,
                           dt_tensor *(*branch)(dt_module *, dt_tensor *, dt_tensor *),
                           dt_tensor *in, dt_tensor *res) {
    if (!in || !res) return NULL;
    if (m->pre_hook) m->pre_hook(m, m->hook_user);
    dt_tensor *y = branch(m, in, res);
    if (m->post_hook) m->post_hook(m, m->hook_user);
    return y;
}

static dt_tensor *block_forward(dt_module *m, dt_tensor *x) {
    dt_module **c = m->children;
    x = residual(c[BLK_ATTN], attn_residual, dt_module_forward(c[BLK_LN_1], x), x);
    return residual(c[BLK_MLP], mlp_residual, dt_module_forward(c[BLK_LN_2], x), x);
}

static dt_tensor *module_list_forward(dt_module *m, dt_tensor *x) {
    (void)x;
    dt_error(DT_ERR_STATE, "%s '%s' is a container and has no forward; hint: call its children",
             m->type, m->name);
    return NULL;
}

/* x = drop(wte(tokens) + wpe(positions)), with the checks on tokens; seq is the context. */
static dt_tensor *embed(dt_module *wte, dt_module *wpe, int64_t seq, float dropout,
                        dt_tensor *tokens) {
    char s[96];
    if (tokens->dtype != DT_DTYPE_I32 && tokens->dtype != DT_DTYPE_I64) {
        dt_error(DT_ERR_INVALID, "GPT: tokens must be i32 or i64 ids, got %s",
                 dt_shape_str(tokens, s, sizeof s));
        return NULL;
    }
    if (tokens->ndim != 2) {
        dt_error(DT_ERR_INVALID, "GPT: tokens must be (B, T), got %s",
                 dt_shape_str(tokens, s, sizeof s));
        return NULL;
    }
    int64_t B = tokens->shape[0], T = tokens->shape[1];
    if (T > seq) {
        dt_error(DT_ERR_INVALID,
                 "GPT: sequence of %lld tokens is longer than the model's context length %lld; "
                 "hint: feed at most %lld tokens per row (or build with a larger seq)",
                 (long long)T, (long long)seq, (long long)seq);
        return NULL;
    }
    // pos (B, T) i64: row b holds 0..T-1
    dt_tensor *pos = dt_tensor_new(tokens->ctx, DT_DTYPE_I64, 2, (int64_t[]){B, T});
    if (!pos) return NULL;
    int64_t *pd = pos->data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) pd[b * T + t] = t;
    // x (B, T, D): one dt_embedding_sum, with both modules' hooks around it (nested, as
    // dt_module_forward would run them); unbuilt modules take the plain path for its errors
    dt_tensor *x;
    if (!wte->params[0].t || !wpe->params[0].t) {
        x = dt_add(dt_module_forward(wte, tokens), dt_module_forward(wpe, pos));
    } else {
        if (wte->pre_hook) wte->pre_hook(wte, wte->hook_user);
        if (wpe->pre_hook) wpe->pre_hook(wpe, wpe->hook_user);
        x = dt_embedding_sum(tokens, wte->params[0].t, pos, wpe->params[0].t);
        if (wpe->post_hook) wpe->post_hook(wpe, wpe->hook_user);
        if (wte->post_hook) wte->post_hook(wte, wte->hook_user);
    }
    return dt_dropout(x, dropout);
}

static dt_tensor *gpt_forward(dt_module *m, dt_tensor *tokens) {
    dt_module **c = m->children;
    dt_tensor *x = embed(c[GPT_WTE], c[GPT_WPE], m->iconf[1], m->fconf[0], tokens);
    dt_module *h = c[GPT_H];
    for (int i = 0; i < h->n_children && x; i++) x = dt_module_forward(h->children[i], x);
    // logits (B, T, V)
    return dt_module_forward(c[GPT_LM_HEAD], dt_module_forward(c[GPT_LN_F], x));
}

/* The pieces as layers of a pipeline: embedding (wte, wpe; iconf[0] = seq), head (ln_f,
 * lm_head). */
static dt_tensor *embedding_forward(dt_module *m, dt_tensor *tokens) {
    return embed(m->children[0], m->children[1], m->iconf[0], m->fconf[0], tokens);
}

static dt_tensor *head_forward(dt_module *m, dt_tensor *x) {
    return dt_module_forward(m->children[1], dt_module_forward(m->children[0], x));
}

static dt_module *gpt_block(const dt_gpt_config *cfg) {
    int64_t D = cfg->d_model;
    dt_module *attn = dt__module_with_children(
        dt_module_new("CausalSelfAttention", attn_forward), 2, (const char *[]){"c_attn", "c_proj"},
        (dt_module *[]){dt_nn_linear(D, 3 * D, true), dt_nn_linear(D, D, true)});
    if (attn) {
        attn->iconf[0] = cfg->n_head;
        attn->fconf[0] = cfg->dropout;
    }
    dt_module *mlp = dt__module_with_children(
        dt_module_new("MLP", mlp_forward), 2, (const char *[]){"c_fc", "c_proj"},
        (dt_module *[]){dt_nn_linear(D, 4 * D, true), dt_nn_linear(4 * D, D, true)});
    if (mlp) mlp->fconf[0] = cfg->dropout;
    return dt__module_with_children(
        dt_module_new("Block", block_forward), 4, (const char *[]){"ln_1", "attn", "ln_2", "mlp"},
        (dt_module *[]){dt_nn_layer_norm(D, 1e-5f), attn, dt_nn_layer_norm(D, 1e-5f), mlp});
}

static bool valid_config(const dt_gpt_config *cfg) {
    if (!cfg) {
        dt_error(DT_ERR_INVALID, "GPT: config is NULL");
        return false;
    }
    if (cfg->vocab <= 0 || cfg->seq <= 0 || cfg->d_model <= 0 || cfg->n_head <= 0 ||
        cfg->n_layer < 0) {
        dt_error(DT_ERR_INVALID,
                 "GPT: vocab %lld, seq %lld, d_model %lld, n_head %lld must be positive and "
                 "n_layer %lld non-negative",
                 (long long)cfg->vocab, (long long)cfg->seq, (long long)cfg->d_model,
                 (long long)cfg->n_head, (long long)cfg->n_layer);
        return false;
    }
    if (cfg->d_model % cfg->n_head != 0) {
        dt_error(DT_ERR_INVALID,
                 "GPT: d_model %lld is not a multiple of n_head %lld; hint: "
                 "each head gets d_model / n_head features",
                 (long long)cfg->d_model, (long long)cfg->n_head);
        return false;
    }
    if (!(cfg->dropout >= 0.f && cfg->dropout < 1.f)) {
        dt_error(DT_ERR_INVALID, "GPT: dropout %g must be in [0, 1)", (double)cfg->dropout);
        return false;
    }
    return true;
}

dt_module *dt_gpt_embedding(const dt_gpt_config *cfg) {
    if (!valid_config(cfg)) return NULL;
    dt_module *m = dt__module_with_children(
        dt_module_new("GPTEmbedding", embedding_forward), 2, (const char *[]){"wte", "wpe"},
        (dt_module *[]){dt_nn_embedding(cfg->vocab, cfg->d_model),
                        dt_nn_embedding(cfg->seq, cfg->d_model)});
    if (m) {
        m->iconf[0] = cfg->seq;
        m->fconf[0] = cfg->dropout;
    }
    return m;
}

dt_module *dt_gpt_block(const dt_gpt_config *cfg) {
    return valid_config(cfg) ? gpt_block(cfg) : NULL;
}

dt_module *dt_gpt_head(const dt_gpt_config *cfg) {
    if (!valid_config(cfg)) return NULL;
    return dt__module_with_children(dt_module_new("GPTHead", head_forward), 2,
                                    (const char *[]){"ln_f", "lm_head"},
                                    (dt_module *[]){dt_nn_layer_norm(cfg->d_model, 1e-5f),
                                                    dt_nn_linear(cfg->d_model, cfg->vocab, false)});
}

dt_module *dt_model_gpt(const dt_gpt_config *cfg) {
    if (!valid_config(cfg)) return NULL;
    dt_module *h = dt_module_new("ModuleList", module_list_forward);
    for (int64_t i = 0; i < cfg->n_layer && h; i++) {
        char name[24];
        snprintf(name, sizeof name, "%lld", (long long)i);
        dt_module *blk = gpt_block(cfg);
        if (dt_module_add_child(h, name, blk) < 0) {
            dt_module_free(blk);
            dt_module_free(h);
            h = NULL;
        }
    }
    dt_module *m =
        dt__module_with_children(dt_module_new("GPT", gpt_forward), 5,
                                 (const char *[]){"wte", "wpe", "h", "ln_f", "lm_head"},
                                 (dt_module *[]){dt_nn_embedding(cfg->vocab, cfg->d_model),
                                                 dt_nn_embedding(cfg->seq, cfg->d_model), h,
                                                 dt_nn_layer_norm(cfg->d_model, 1e-5f),
                                                 dt_nn_linear(cfg->d_model, cfg->vocab, false)});
    if (!m) return NULL;
    m->iconf[0] = cfg->vocab;
    m->iconf[1] = cfg->seq;
    m->iconf[2] = cfg->d_model;
    m->iconf[3] = cfg->n_head;
    m->iconf[4] = cfg->n_layer;
    m->fconf[0] = cfg->dropout;
    return m;
}
