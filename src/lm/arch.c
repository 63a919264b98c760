/* arch.c — the architecture table: one row per Hugging Face model_type, with its config.json
 * keys, its tensor-name templates by role, its flags (norm kind, tied head, biases, which
 * weights are stored transposed) and the buffers its files may carry. The loader, the module
 * builders and the exporter read everything about a family's layout from here, so Mistral and
 * Qwen2 are rows, not code. Also: the walk over a model's parameters by role, and reading
 * config.json into a dt_lm_config. */
#include "model_impl.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define GPT2_KEYS                                                                                  \
    {                                                                                              \
        "vocab_size", "n_positions", "n_embd", "n_layer", "n_head", NULL, "n_inner",               \
            "layer_norm_epsilon"                                                                   \
    }
#define LLAMA_KEYS                                                                                 \
    {                                                                                              \
        "vocab_size", "max_position_embeddings", "hidden_size", "num_hidden_layers",               \
            "num_attention_heads", "num_key_value_heads", "intermediate_size", "rms_norm_eps"      \
    }
#define BIT(r) (1u << (r))

/* GPT-2: Conv1D weights (in, out); the head is wte (never in the file). */
#define GPT2_NAMES                                                                                 \
    {                                                                                              \
        [DT__R_TOK_EMB] = "wte.weight", [DT__R_POS_EMB] = "wpe.weight",                            \
        [DT__R_ATTN_NORM] = "h.{i}.ln_1.weight", [DT__R_ATTN_NORM_B] = "h.{i}.ln_1.bias",          \
        [DT__R_QKV] = "h.{i}.attn.c_attn.weight", [DT__R_QKV_B] = "h.{i}.attn.c_attn.bias",        \
        [DT__R_O] = "h.{i}.attn.c_proj.weight", [DT__R_O_B] = "h.{i}.attn.c_proj.bias",            \
        [DT__R_MLP_NORM] = "h.{i}.ln_2.weight", [DT__R_MLP_NORM_B] = "h.{i}.ln_2.bias",            \
        [DT__R_UP] = "h.{i}.mlp.c_fc.weight", [DT__R_UP_B] = "h.{i}.mlp.c_fc.bias",                \
        [DT__R_DOWN] = "h.{i}.mlp.c_proj.weight", [DT__R_DOWN_B] = "h.{i}.mlp.c_proj.bias",        \
        [DT__R_OUT_NORM] = "ln_f.weight", [DT__R_OUT_NORM_B] = "ln_f.bias",                        \
        [DT__R_HEAD] = "lm_head.weight"                                                            \
    }

/* Llama and the families laid out like it (the head is the file's unless tied). */
#define LLAMA_NAMES                                                                                \
    {                                                                                              \
        [DT__R_TOK_EMB] = "embed_tokens.weight",                                                   \
        [DT__R_ATTN_NORM] = "layers.{i}.input_layernorm.weight",                                   \
        [DT__R_Q] = "layers.{i}.self_attn.q_proj.weight",                                          \
        [DT__R_Q_B] = "layers.{i}.self_attn.q_proj.bias",                                          \
        [DT__R_K] = "layers.{i}.self_attn.k_proj.weight",                                          \
        [DT__R_K_B] = "layers.{i}.self_attn.k_proj.bias",                                          \
        [DT__R_V] = "layers.{i}.self_attn.v_proj.weight",                                          \
        [DT__R_V_B] = "layers.{i}.self_attn.v_proj.bias",                                          \
        [DT__R_O] = "layers.{i}.self_attn.o_proj.weight",                                          \
        [DT__R_O_B] = "layers.{i}.self_attn.o_proj.bias",                                          \
        [DT__R_MLP_NORM] = "layers.{i}.post_attention_layernorm.weight",                           \
        [DT__R_GATE] = "layers.{i}.mlp.gate_proj.weight",                                          \
        [DT__R_GATE_B] = "layers.{i}.mlp.gate_proj.bias",                                          \
        [DT__R_UP] = "layers.{i}.mlp.up_proj.weight",                                              \
        [DT__R_UP_B] = "layers.{i}.mlp.up_proj.bias",                                              \
        [DT__R_DOWN] = "layers.{i}.mlp.down_proj.weight",                                          \
        [DT__R_DOWN_B] = "layers.{i}.mlp.down_proj.bias", [DT__R_OUT_NORM] = "norm.weight",        \
        [DT__R_HEAD] = "lm_head.weight"                                                            \
    }

/* A row of the Llama layout: only the model type and the q/k/v bias default differ. */
#define LLAMA_LIKE(type, qkv_bias)                                                                 \
    {                                                                                              \
        .model_type = type, .family = DT__LM_LLAMA, .norm = DT_LM_NORM_RMS, .prefix = "model.",    \
        .keys = LLAMA_KEYS, .qkv_bias_default = qkv_bias, .names = LLAMA_NAMES, .skip = {          \
            "layers.{i}.self_attn.rotary_emb.inv_freq"                                             \
        }                                                                                          \
    }

static const dt__lm_arch ARCHS[] = {
    {.model_type = "gpt2",
     .family = DT__LM_GPT2,
     .norm = DT_LM_NORM_LAYER,
     .prefix = "transformer.",
     .prefix_optional = true,
     .keys = GPT2_KEYS,
     .tied_default = true,
     .transposed = BIT(DT__R_QKV) | BIT(DT__R_O) | BIT(DT__R_UP) | BIT(DT__R_DOWN),
     .names = GPT2_NAMES,
     .skip = {"h.{i}.attn.bias", "h.{i}.attn.masked_bias"}},
    LLAMA_LIKE("llama", false),
    LLAMA_LIKE("mistral", false),
    LLAMA_LIKE("qwen2", true), /* q/k/v biases whatever attention_bias says */
};
#define N_ARCHS ((int)(sizeof ARCHS / sizeof ARCHS[0]))

const dt__lm_arch *dt__lm_arch_find(const char *model_type) {
    for (int i = 0; model_type && i < N_ARCHS; i++)
        if (!strcmp(ARCHS[i].model_type, model_type)) return &ARCHS[i];
    return NULL;
}

const char *dt__lm_arch_list(void) {
    return "gpt2, llama, mistral, qwen2"; /* ARCHS' model types, in order */
}

bool dt__lm_name(char *buf, size_t cap, const char *prefix, const char *tmpl, int64_t layer) {
    const char *at = strstr(tmpl, "{i}");
    int n = at ? snprintf(buf, cap, "%s%.*s%lld%s", prefix, (int)(at - tmpl), tmpl,
                          (long long)layer, at + 3)
               : snprintf(buf, cap, "%s%s", prefix, tmpl);
    return n >= 0 && (size_t)n < cap;
}

/* ---- the parameters by role ------------------------------------------------------------ */
dt_status dt__lm_each_param(dt_lm *m,
                            dt_status (*fn)(void *user, int role, const char *canon, dt_tensor *p),
                            void *user) {
    const dt__lm_arch *a = m->arch;
    int seen = 0;
    for (int r = 0; r < DT__R_COUNT; r++) {
        if (!a->names[r]) continue;
        int64_t layers = strstr(a->names[r], "{i}") ? m->cfg.n_layer : 1;
        for (int64_t i = 0; i < layers; i++) {
            char canon[256];
            dt__lm_name(canon, sizeof canon, r == DT__R_HEAD ? "" : a->prefix, a->names[r], i);
            dt_tensor *p = dt_module_find_param(m->root, canon);
            if (!p) continue; /* this model has no such parameter (a bias, a tied head) */
            dt_status st = fn(user, r, canon, p);
            if (st) return st;
            seen++;
        }
    }
    if (seen != dt_module_param_count(m->root))
        return dt_error(DT_ERR_STATE,
                        "%s: %d of the model's %d parameters have a name in the "
                        "architecture table",
                        a->model_type, seen, dt_module_param_count(m->root));
    return DT_OK;
}

/* ---- config.json ---------------------------------------------------------------------- */

json_t *dt__lm_read_json(const char *path, const char *what) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        dt_error(DT_ERR_IO, "%s: missing; hint: %s", path, what);
        return NULL;
    }
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (!j)
        dt_error(DT_ERR_FORMAT, "%s:%d:%d: not valid JSON: %s", path, e.line, e.column, e.text);
    else if (!json_is_object(j)) {
        dt_error(DT_ERR_FORMAT, "%s: expected a JSON object", path);
        json_decref(j);
        j = NULL;
    }
    return j;
}

/* An integer key: required (def < 0 means required) or its default; null counts as absent. */
static dt_status get_int(const json_t *j, const char *path, const char *key, int64_t def,
                         int64_t *out) {
    const json_t *v = key ? json_object_get(j, key) : NULL;
    if (!v || json_is_null(v)) {
        if (def < 0 && key)
            return dt_error(DT_ERR_FORMAT,
                            "%s: key '%s' is missing; hint: the model's "
                            "config.json as save_pretrained writes it has it",
                            path, key);
        *out = def;
        return DT_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return dt_error(DT_ERR_FORMAT, "%s: key '%s' must be a non-negative integer", path, key);
    *out = json_integer_value(v);
    return DT_OK;
}

static dt_status get_num(const json_t *j, const char *path, const char *key, double def,
                         float *out) {
    const json_t *v = key ? json_object_get(j, key) : NULL;
    if (!v || json_is_null(v)) {
        *out = (float)def;
        return DT_OK;
    }
    if (!json_is_number(v) || json_number_value(v) <= 0)
        return dt_error(DT_ERR_FORMAT, "%s: key '%s' must be a positive number", path, key);
    *out = (float)json_number_value(v);
    return DT_OK;
}

static bool get_bool(const json_t *j, const char *key, bool def) {
    const json_t *v = json_object_get(j, key);
    return json_is_boolean(v) ? json_is_true(v) : def;
}

/* bos/eos: an integer, a list (the first), or absent / null (-1). */
static int64_t token_id(const json_t *j, const char *key) {
    const json_t *v = json_object_get(j, key);
    if (json_is_array(v)) v = json_array_get(v, 0);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* The string value of key must be one of the allowed ones (absent: fine). */
static dt_status require_str(const json_t *j, const char *path, const char *key,
                             const char *const *allowed) {
    const char *s = json_string_value(json_object_get(j, key));
    if (!s) return DT_OK;
    for (int i = 0; allowed[i]; i++)
        if (!strcmp(s, allowed[i])) return DT_OK;
    return dt_error(DT_ERR_FORMAT, "%s: %s '%s' is not supported (supported: %s%s%s)", path, key, s,
                    allowed[0], allowed[1] ? ", " : "", allowed[1] ? allowed[1] : "");
}

/* rope_theta at the top level or in rope_parameters; scaled rope types are refused. */
static dt_status rope(const json_t *j, const char *path, dt_lm_config *c) {
    const json_t *rp = json_object_get(j, "rope_parameters");
    const json_t *rs = json_object_get(j, "rope_scaling");
    const json_t *scaling = json_is_object(rs) ? rs : json_is_object(rp) ? rp : NULL;
    const char *type = json_string_value(json_object_get(scaling, "rope_type"));
    if (!type) type = json_string_value(json_object_get(scaling, "type"));
    if (scaling && type && strcmp(type, "default") != 0)
        return dt_error(DT_ERR_FORMAT,
                        "%s: rope type '%s' is not supported (only the default "
                        "rotary embedding)",
                        path, type);
    if (json_is_object(rp) && json_object_get(rp, "rope_theta"))
        return get_num(rp, path, "rope_theta", 10000.0, &c->rope_theta);
    return get_num(j, path, "rope_theta", 10000.0, &c->rope_theta);
}

/* What differs between the families beyond the keys: activations, biases, sliding windows. */
static dt_status family_flags(const dt__lm_arch *a, const json_t *j, const char *path,
                              dt_lm_config *c) {
    if (a->family == DT__LM_GPT2) {
        c->attn_bias = c->o_bias = c->mlp_bias = true;
        if (get_bool(j, "scale_attn_by_inverse_layer_idx", false) ||
            get_bool(j, "add_cross_attention", false))
            return dt_error(DT_ERR_FORMAT,
                            "%s: scale_attn_by_inverse_layer_idx and "
                            "add_cross_attention are not supported",
                            path);
        return require_str(j, path, "activation_function",
                           (const char *[]){"gelu_new", "gelu_pytorch_tanh", NULL});
    }
    bool ab = get_bool(j, "attention_bias", false);
    c->attn_bias = ab || a->qkv_bias_default;
    c->o_bias = ab;
    c->mlp_bias = get_bool(j, "mlp_bias", false);
    /* a sliding window shorter than the context: windows never exceed it */
    const json_t *sw = json_object_get(j, "sliding_window");
    bool use_sw = !json_is_false(json_object_get(j, "use_sliding_window"));
    if (use_sw && json_is_integer(sw) && json_integer_value(sw) > 0 &&
        json_integer_value(sw) < c->max_pos)
        c->max_pos = json_integer_value(sw);
    dt_status st = require_str(j, path, "hidden_act", (const char *[]){"silu", NULL});
    return st ? st : rope(j, path, c);
}

static dt_status check_shape(const char *path, dt_lm_config *c) {
    if (!c->vocab || !c->d_model || !c->n_head || !c->max_pos || !c->n_kv_head || !c->d_ff)
        return dt_error(DT_ERR_FORMAT,
                        "%s: vocab, hidden size, heads, positions and the MLP "
                        "width must be positive",
                        path);
    if (!c->head_dim && c->d_model % c->n_head)
        return dt_error(DT_ERR_FORMAT, "%s: hidden size %lld is not a multiple of the %lld heads",
                        path, (long long)c->d_model, (long long)c->n_head);
    if (!c->head_dim) c->head_dim = c->d_model / c->n_head;
    if (c->n_head % c->n_kv_head)
        return dt_error(DT_ERR_FORMAT,
                        "%s: %lld attention heads are not a multiple of the "
                        "%lld key/value heads",
                        path, (long long)c->n_head, (long long)c->n_kv_head);
    if (c->n_layer > 100000 || c->vocab > ((int64_t)1 << 31))
        return dt_error(DT_ERR_FORMAT,
                        "%s: %lld layers / vocab %lld is beyond what dtrain "
                        "reads",
                        path, (long long)c->n_layer, (long long)c->vocab);
    return DT_OK;
}

dt_status dt__lm_config_read(const dt__lm_arch *a, const json_t *j, const char *path,
                             dt_lm_config *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->model_type, sizeof c->model_type, "%s", a->model_type);
    const dt__lm_keys *k = &a->keys;
    dt_status st = get_int(j, path, k->vocab, -1, &c->vocab);
    if (!st) st = get_int(j, path, k->max_pos, -1, &c->max_pos);
    if (!st) st = get_int(j, path, k->d_model, -1, &c->d_model);
    if (!st) st = get_int(j, path, k->n_layer, -1, &c->n_layer);
    if (!st) st = get_int(j, path, k->n_head, -1, &c->n_head);
    if (!st) st = get_int(j, path, k->n_kv_head, c->n_head, &c->n_kv_head);
    if (!st) st = get_int(j, path, k->d_ff, 4 * c->d_model, &c->d_ff);
    if (!st) st = get_int(j, path, "head_dim", 0, &c->head_dim);
    if (!st) st = get_num(j, path, k->eps, a->norm == DT_LM_NORM_RMS ? 1e-6 : 1e-5, &c->norm_eps);
    if (st) return st;
    c->norm = a->norm;
    c->rope_theta = 10000.f;
    c->tied = get_bool(j, "tie_word_embeddings", a->tied_default);
    c->bos_id = token_id(j, "bos_token_id");
    c->eos_id = token_id(j, "eos_token_id");
    st = family_flags(a, j, path, c);
    return st ? st : check_shape(path, c);
}
