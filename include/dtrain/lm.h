/*
 * dtrain/lm.h — language models from Hugging Face directories: load, evaluate, generate, save.
 *
 * A model directory is what transformers' save_pretrained writes: config.json, the weights in
 * model.safetensors or in shards model-0000k-of-0000n.safetensors listed by
 * model.safetensors.index.json (f32, f16 or bf16; converted to f32 on load), and usually a
 * tokenizer.json. Supported model_type values: gpt2, llama, mistral, qwen2 (docs/lm.md).
 *
 * Two ways in:
 *   dt_lm *m;  dt_lm_load(&m, dir);                // config + module tree + weights, own context
 * or, for a trial whose context builds the module:
 *   dt_lm_open(&m, dir);                          // config + module tree, not built
 *   dt_module *net = dt_wrap_model(ctx, dt_lm_take_module(m));
 *   dt_lm_load_weights(m);                        // weights into the built tree
 *
 * The module tree's parameter names are the Hugging Face names (`transformer.h.0.attn.c_attn.
 * weight`, `model.layers.0.self_attn.q_proj.weight`); GPT-2's Conv1D weights are held
 * transposed, as dtrain's Linear (out, in). Its forward maps ids (B, T) i32/i64 to logits
 * (B, T, V). Evaluation and generation run on the module's context and reset it
 * (dt_ctx_reset) as they go.
 */
#ifndef DTRAIN_LM_H
#define DTRAIN_LM_H

#include "dtrain/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_lm dt_lm;

typedef enum dt_lm_norm { DT_LM_NORM_LAYER, DT_LM_NORM_RMS } dt_lm_norm;

/* What a model's config.json says, in one vocabulary for every family. */
typedef struct dt_lm_config {
    char model_type[32];
    int64_t vocab, max_pos, d_model, n_layer, n_head, n_kv_head, head_dim, d_ff;
    float norm_eps, rope_theta;
    bool tied, attn_bias, o_bias, mlp_bias;
    dt_lm_norm norm;
    int64_t bos_id, eos_id; /* -1 when the config has none */
} dt_lm_config;

/* Read dir/config.json and build the (unbuilt) module tree. DT_ERR_IO / DT_ERR_FORMAT /
 * DT_ERR_CONFIG with the file and the problem; *out is NULL then. */
DT_API dt_status dt_lm_open(dt_lm **out, const char *dir);
/* Read the weights of the directory into the built module tree (dt_module_build or
 * dt_wrap_model first). Every tensor the model needs must be there with its shape; a tensor
 * the model does not know is an error. */
DT_API dt_status dt_lm_load_weights(dt_lm *m);
/* dt_lm_open, dt_module_build on a context of its own, dt_lm_load_weights. */
DT_API dt_status dt_lm_load(dt_lm **out, const char *dir);
/* Frees the model and, unless it was taken, its module tree and context. NULL is fine. */
DT_API void dt_lm_free(dt_lm *m);

DT_API const dt_lm_config *dt_lm_get_config(const dt_lm *m);
/* The module tree (owned by m). */
DT_API dt_module *dt_lm_module(dt_lm *m);
/* The module tree, now owned by the caller (a trial's dt_wrap_model); m keeps using it, so it
 * must outlive m's last use. */
DT_API dt_module *dt_lm_take_module(dt_lm *m);
/* The directory the model came from. */
DT_API const char *dt_lm_dir(const dt_lm *m);

/* ids (B, T) i32/i64, T <= max_pos -> logits (B, T, V) f32, on the module's context. */
DT_API dt_tensor *dt_lm_forward(dt_lm *m, dt_tensor *ids);

/* Mean next-token cross-entropy (natural log) of ids[0..n): cut into consecutive windows of
 * `seq` tokens (0: max_pos); a last window shorter than seq is kept if it has >= 2 tokens;
 * each window predicts its tokens 2..len from those before. *predicted = tokens predicted.
 * DT_ERR_INVALID when no window predicts anything or an id is out of range. */
DT_API dt_status dt_lm_eval_ids(dt_lm *m, const int32_t *ids, size_t n, int64_t seq,
                                double *mean_loss, int64_t *predicted);

typedef struct dt_lm_gen_opts {
    float temperature; /* 0: greedy (the default) */
    int64_t top_k;     /* 0: off */
    float top_p;       /* 0 or 1: off */
    uint64_t seed;     /* sampling draws from dtrain's counter RNG with this seed */
    int64_t eos_id;    /* stop after emitting it; -1: never */
} dt_lm_gen_opts;
/* Greedy, no EOS stop (eos_id -1). */
DT_API dt_lm_gen_opts dt_lm_gen_defaults(void);
/* Generate up to n new tokens after prompt[0..n_prompt) with a KV cache. *out (malloc'd,
 * caller frees) holds the prompt then the new ids, *out_n of them; an emitted EOS is
 * included and ends the generation. The prompt plus n must fit in max_pos. */
DT_API dt_status dt_lm_generate(dt_lm *m, const int32_t *prompt, size_t n_prompt, size_t n,
                                const dt_lm_gen_opts *opts, int32_t **out, size_t *out_n);

/* Write dir as a Hugging Face directory: config.json, model.safetensors (f32, the family's
 * names and layouts), and the source's tokenizer files when it had them. dir is created. */
DT_API dt_status dt_lm_save(const dt_lm *m, const char *dir);

/* Read a dtrain checkpoint's model.safetensors (a trial's, or an engine's consolidated weights
 * of any ZeRO stage: this tree's names and layouts) into the built tree; then dt_lm_save
 * exports the trained model. DT_ERR_FORMAT naming the file when a parameter is not there. */
DT_API dt_status dt_lm_load_checkpoint_weights(dt_lm *m, const char *path);

#ifdef __cplusplus
}
#endif
#endif
