/* model_impl.h — what the language-model files share: the architecture table (arch.c), the
 * model object, the families' module builders (gpt2.c, llama.c) and the KV cache. */
#ifndef DT_LM_MODEL_IMPL_H
#define DT_LM_MODEL_IMPL_H

#include "dtrain/lm.h"
#include "nn/nn_iface.h"

#include <jansson.h>

/* The families: each builds its module tree and runs its forward. */
typedef enum dt__lm_family { DT__LM_GPT2, DT__LM_LLAMA } dt__lm_family;

/* Tensor roles; each architecture names the ones it has with a template ({i} = layer). */
typedef enum dt__lm_role {
    DT__R_TOK_EMB,
    DT__R_POS_EMB,
    DT__R_ATTN_NORM,
    DT__R_ATTN_NORM_B,
    DT__R_QKV,
    DT__R_QKV_B,
    DT__R_Q,
    DT__R_Q_B,
    DT__R_K,
    DT__R_K_B,
    DT__R_V,
    DT__R_V_B,
    DT__R_O,
    DT__R_O_B,
    DT__R_MLP_NORM,
    DT__R_MLP_NORM_B,
    DT__R_GATE,
    DT__R_GATE_B,
    DT__R_UP,
    DT__R_UP_B,
    DT__R_DOWN,
    DT__R_DOWN_B,
    DT__R_OUT_NORM,
    DT__R_OUT_NORM_B,
    DT__R_HEAD,
    DT__R_COUNT
} dt__lm_role;

/* config.json keys of a family (NULL: the family has no such key). */
typedef struct dt__lm_keys {
    const char *vocab, *max_pos, *d_model, *n_layer, *n_head, *n_kv_head, *d_ff, *eps;
} dt__lm_keys;

/* One row of the architecture table. */
typedef struct dt__lm_arch {
    const char *model_type;
    dt__lm_family family;
    dt_lm_norm norm;
    const char *prefix;   /* body names' prefix ("transformer.", "model."); the head has none */
    bool prefix_optional; /* files may leave the prefix out (GPT-2 files of both eras) */
    dt__lm_keys keys;
    bool tied_default, qkv_bias_default; /* when the config does not say */
    uint32_t transposed;                 /* roles stored (in, out): 1u << role (Conv1D) */
    const char *names[DT__R_COUNT];      /* templates, relative to the prefix */
    const char *skip[3];                 /* buffers in files that are not parameters */
} dt__lm_arch;

/* The row for model_type, or NULL. */
const dt__lm_arch *dt__lm_arch_find(const char *model_type);
/* "gpt2, llama, ..." for messages. */
const char *dt__lm_arch_list(void);
/* Fill a template: "h.{i}.ln_1.weight", 3 -> "h.3.ln_1.weight". false if it does not fit. */
bool dt__lm_name(char *buf, size_t cap, const char *prefix, const char *tmpl, int64_t layer);
/* Read config.json's values into cfg with the row's keys and defaults; the message names the
 * file and key. */
dt_status dt__lm_config_read(const dt__lm_arch *a, const json_t *j, const char *path,
                             dt_lm_config *cfg);

/* Keys and values of one generation step: per layer (1, cap, Hkv, D) f32, len filled. */
typedef struct dt__lm_cache {
    int64_t cap, len;
    dt_tensor **k, **v;
} dt__lm_cache;

/* The root module's impl: what the forward needs, independent of the dt_lm that made it. */
typedef struct dt__lm_state {
    dt_lm_config cfg;
    const dt__lm_arch *arch;
    dt__lm_cache *cache; /* set by generation for one forward, NULL otherwise */
} dt__lm_state;

struct dt_lm {
    dt_lm_config cfg;
    const dt__lm_arch *arch;
    dt_module *root;
    dt_ctx *own_ctx;     /* the context dt_lm_load made, or NULL */
    bool module_taken;   /* dt_lm_take_module: the tree is the caller's */
    char *dir;           /* the source directory */
    json_t *config_json; /* config.json as read, written back by dt_lm_save */
};

/* fn(user, role, canonical name, parameter) for every parameter of the built tree, in the
 * table's role order; stops at the first error. DT_ERR_STATE if a parameter has no role. */
dt_status dt__lm_each_param(dt_lm *m,
                            dt_status (*fn)(void *user, int role, const char *canon, dt_tensor *p),
                            void *user);
/* config.json-like file at path as a JSON object; `what` is the hint when it is missing. */
json_t *dt__lm_read_json(const char *path, const char *what);

/* The families' module trees, not built; NULL on error (dt_last_error). */
dt_module *dt__gpt2_build(const dt_lm_config *cfg, const dt__lm_arch *a);
dt_module *dt__llama_build(const dt_lm_config *cfg, const dt__lm_arch *a);
/* A root module carrying a dt__lm_state (freed with it); NULL on DT_ERR_OOM. */
dt_module *dt__lm_root(const char *type, dt_forward_fn forward, const dt_lm_config *cfg,
                       const dt__lm_arch *a);
/* root with its children: the body, and lm_head (D -> V, no bias) unless the head is tied. */
dt_module *dt__lm_root_with(dt_module *root, const char *body_name, dt_module *body,
                            const dt_lm_config *c);
/* logits (B, T, V) of x (B, T, D): lm_head, or the embedding emb (V, D) when tied. */
dt_tensor *dt__lm_head(dt_module *root, dt_module *emb, dt_tensor *x);
/* The state of the root above m. */
dt__lm_state *dt__lm_state_of(dt_module *root);

/* The hooks of a child run around a fused op (modules.c); trees are assembled with nn's
 * dt__module_with_children. */
void dt__lm_hook_pre(dt_module *m);
void dt__lm_hook_post(dt_module *m);
/* ids (B, T) i32/i64 whose positions p0 .. p0+T-1 fit in max_pos, or DT_ERR_INVALID. */
dt_status dt__lm_check_ids(const dt_tensor *ids, int64_t p0, int64_t max_pos);
/* Every id in [0, vocab), or DT_ERR_INVALID naming the first that is not ("what: id ..."). */
dt_status dt__lm_check_vocab(const int32_t *ids, size_t n, int64_t vocab, const char *what);
/* A module that only holds children (its forward is an error). */
dt_module *dt__lm_container(const char *type);
/* A numbered list of n blocks made by make(cfg). */
dt_module *dt__lm_block_list(const dt_lm_config *cfg, int64_t n,
                             dt_module *(*make)(const dt_lm_config *));

/* Attention of q (1, T, Hq, D) over the cache's first len + T positions after writing k, v
 * (1, T, Hkv, D) into it at len (generation): y (1, T, Hq * D). */
dt_tensor *dt__lm_cached_attention(dt__lm_cache *c, int layer, dt_tensor *q, dt_tensor *k,
                                   dt_tensor *v);

/* One generated token on plain arrays (decode.c): the built tree's weights read in place,
 * matrix-vector products on `threads` threads, scratch for a cache of cap positions. NULL when
 * the tree has hooks or parameters that are not f32 (the module forwards are used then) or on
 * out of memory. */
typedef struct dt__lm_decoder dt__lm_decoder;
dt__lm_decoder *dt__lm_decoder_new(dt_module *root, int64_t cap, int threads);
void dt__lm_decoder_free(dt__lm_decoder *d);
/* The logits (V, owned by d) of token id at the cache's position len, its keys and values
 * written into the cache; len advances. */
const float *dt__lm_decode(dt__lm_decoder *d, dt__lm_cache *c, int32_t id);

#endif
