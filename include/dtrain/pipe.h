/*
 * dtrain/pipe.h — pipeline parallelism: a model given as an ordered list of layers is cut into
 * stages (one per group of ranks), and a global batch of gradient_accumulation_steps
 * micro-batches flows through them with the 1F1B schedule.
 *
 * Topology: the world of P ranks is num_stages x D data-parallel ranks; rank r runs stage
 * r / D as data-parallel rank r % D (DeepSpeed's pipe-major layout). Each stage is an engine
 * (dtrain/engine.h) over that stage's layers, reducing its gradients in its data-parallel group;
 * the gradient norm and fp16 overflow are global over the stages.
 *
 *   dt_pipe_layer layers[] = {{"Embed", build_embed, &cfg}, {"Block", build_block, &cfg}, ...};
 *   dt_pipe_opts o = dt_pipe_defaults();
 *   o.num_stages = 2; o.loss = my_loss;
 *   dt_pipe_engine *p = dt_pipe_engine_init(n, layers, &o, ds_config);
 *   float loss = dt_pipe_train_batch(p, my_data, my_state, &st);   // a whole global batch
 *
 * Layers are built only on the stage that owns them (and, for the "parameters" partition
 * method, once on every rank to count their parameters). Parameter names are "<layer
 * index>.<name>" (tied modules: "tied_<key>.<name>"), the names of a dt_nn_sequential over the
 * same layers, so weights move between a pipelined and a plain model by name.
 */
#ifndef DTRAIN_PIPE_H
#define DTRAIN_PIPE_H

#include "dtrain/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Builds one layer (a module that is not built yet). NULL on error. */
typedef dt_module *(*dt_pipe_layer_fn)(void *arg);

/* How a tied layer uses its shared module (e.g. an LM head multiplying by the transposed
 * token embedding). */
typedef dt_tensor *(*dt_pipe_tied_fn)(dt_module *shared, dt_tensor *x, void *arg);

typedef struct dt_pipe_layer {
    const char *type; /* name matched by the partition method "type:REGEX" */
    dt_pipe_layer_fn build;
    void *arg;
    /* Tied layers: layers with the same key share one module, built by the first of them
     * (DeepSpeed's TiedLayerSpec). Each stage owning such a layer keeps a copy, named
     * "tied_<key>" in parameter names; the copies start equal and their gradients are summed
     * across the owning stages before the step (counted once in the gradient norm). */
    const char *tied_key;
    dt_pipe_tied_fn tied_forward; /* NULL: the shared module's own forward */
} dt_pipe_layer;

/* The loss of micro-batch output `out` (last stage) against its labels: a one-element tensor. */
typedef dt_tensor *(*dt_pipe_loss_fn)(dt_tensor *out, dt_tensor *labels, void *user);

/* Micro-batch `micro` of the current global batch: *inputs on the first stage (want_inputs),
 * *labels on the last stage (want_labels), made in `ctx` (they live until the batch ends).
 * Only the first and last stage are asked. */
typedef dt_status (*dt_pipe_data_fn)(void *user, int64_t micro, dt_ctx *ctx, bool want_inputs,
                                     dt_tensor **inputs, bool want_labels, dt_tensor **labels);

typedef struct dt_pipe_opts {
    int num_stages;               /* >= 1 and dividing the world size */
    const char *partition_method; /* "parameters" (default), "uniform", "type:REGEX" */
    dt_pipe_loss_fn loss;         /* NULL: mean cross-entropy of the logits (..., C) against
                                     class ids (...), e.g. a GPT's next-token targets */
    void *loss_user;
    dt_comm *world; /* borrowed; NULL: the engine calls dt_comm_init and owns it */
    uint64_t seed;  /* initialisation of the stage's layers (default 1) */
    /* optional safetensors file (e.g. a plain model's weights): each stage loads its
     * parameters from it by name before its engine starts */
    const char *init_weights;
    /* activation checkpointing: each stage runs its layers in segments of this many whose
     * activations are recomputed in the backward (0 = off, the default) */
    int activation_checkpoint_interval;
} dt_pipe_opts;

DT_API dt_pipe_opts dt_pipe_defaults(void);

typedef struct dt_pipe_engine dt_pipe_engine;

/* Collective over the world. Partitions the layers, builds this rank's stage and its engine
 * from the DeepSpeed config (ZeRO stage 0 or 1; gradient_accumulation_steps is the number of
 * micro-batches per global batch). NULL on error with the reason (the world size not a
 * multiple of num_stages, more stages than layers, ZeRO 2-3, a bad config...). */
DT_API dt_pipe_engine *dt_pipe_engine_init(int n_layers, const dt_pipe_layer *layers,
                                           const dt_pipe_opts *opts, const json_t *ds_config);
DT_API void dt_pipe_engine_free(dt_pipe_engine *p);

/* One global batch: gradient_accumulation_steps micro-batches through the 1F1B schedule, then
 * the optimizer step on every stage. Returns the loss averaged over the micro-batches and the
 * data-parallel ranks, on every rank; NAN with *st set on error (st may be NULL). */
DT_API float dt_pipe_train_batch(dt_pipe_engine *p, dt_pipe_data_fn data, void *user,
                                 dt_status *st);
/* The same number of micro-batches forward only (no gradients), the loss averaged likewise. */
DT_API float dt_pipe_eval_batch(dt_pipe_engine *p, dt_pipe_data_fn data, void *user, dt_status *st);

/* ---- checkpoints ----
 * DIR/TAG/ gets: model.safetensors (every layer's weights by their "<layer>.<name>" names,
 * consolidated on rank 0: loads into the same layers without a pipeline, e.g. a
 * dt_nn_sequential, by name), layer_<i>.safetensors (each layer's weights, written by its
 * stage), stage_<s>/ (each stage's engine checkpoint: optimizer shards, counters, schedule)
 * and pipe_state.json (stages, partition, data-parallel size); DIR/latest names TAG. Collective.
 * TAG NULL = "global_step<N>". Loading needs the same number of stages and the same partition
 * (the data-parallel size may differ); it restores weights, optimizer state and counters, so a
 * resumed run continues exactly. On error the engine is unchanged. */
DT_API dt_status dt_pipe_save_checkpoint(dt_pipe_engine *p, const char *dir, const char *tag,
                                         const json_t *client_state);
DT_API dt_status dt_pipe_load_checkpoint(dt_pipe_engine *p, const char *dir, const char *tag,
                                         json_t **client_state);

/* A GPT's layers as a pipeline layer list (free() it): the embedding "GPTEmbedding",
 * cfg->n_layer "GPTBlock"s and the head "GPTHead" (*n_layers = n_layer + 2), chained they are
 * dt_model_gpt(cfg); cfg is borrowed until dt_pipe_engine_init returns. */
DT_API dt_pipe_layer *dt_pipe_gpt_layers(const dt_gpt_config *cfg, int *n_layers);

DT_API int dt_pipe_stage_id(const dt_pipe_engine *p);
DT_API int dt_pipe_num_stages(const dt_pipe_engine *p);
DT_API int dt_pipe_dp_rank(const dt_pipe_engine *p);
DT_API int dt_pipe_dp_size(const dt_pipe_engine *p);
/* This stage's module (its layers as children named by global index) and engine. */
DT_API dt_module *dt_pipe_stage_module(const dt_pipe_engine *p);
DT_API dt_engine *dt_pipe_stage_engine(const dt_pipe_engine *p);

#ifdef __cplusplus
}
#endif
#endif
