/* model_def.c — fine-tuning a Hugging Face language model (GPT-2, Llama, Mistral, Qwen2) as a
 * dtrain trial: the model directory is loaded into a module tree, trained with AdamW on a token
 * file, and written back in Hugging Face format — inside every checkpoint (`hf/`) and, with
 * `out_dir`, when the trial ends.
 *
 *   dtrain train examples/hf_finetune/const.yaml examples/hf_finetune
 *   dtrain train examples/hf_finetune/zero.yaml examples/hf_finetune --slots 2   # ZeRO engine
 *
 * HFFinetuneTrial trains through the trial context (AdamW, data parallel with --slots);
 * HFFinetuneDSTrial hands the model to the DeepSpeed-style engine (deepspeed_config: the
 * optimizer, gradient accumulation, ZeRO stage 1-3), whose checkpoints hold the consolidated
 * weights whatever the stage; its hf/ export is made from them.
 *
 * Hyperparameters:
 *   model_dir     the Hugging Face directory (relative paths from this directory)
 *   train_text, val_text   text files, tokenized with the model's tokenizer.json through
 *                 dt_dataset_text (a name ending in .jsonl: JSON lines, each line's `text`
 *                 member a document); val_text "" = train_text. When train_text is "":
 *   train_tokens, val_tokens   flat u16 token files of the model's tokenizer (nanoGPT's
 *                 train.bin); the files in data/ hold text encoded with the fixture's tokenizer
 *   text_cache    where the text's token cache goes ("" = beside the text)
 *   seq, stride   window length and the step between training windows
 *   lr, weight_decay, global_batch_size
 *   dtype         f32 (default) or bf16: matmuls under bf16 autocast (dt_trial_use_amp)
 *   out_dir       where the trained model is written when the trial ends ("" = nowhere)
 * This trial is also the one `dtrain lm finetune` runs in its own process.
 * Metrics: loss, validation_loss (nats per token). */
#include <dtrain/dtrain.h>
#include <dtrain/engine.h>
#include <dtrain/lm.h>
#include <dtrain/tokenizer.h>
#include <dtrain/trial.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ft_trial {
    dt_trial_ctx *ctx;
    dt_lm *lm;
    dt_tokenizer *tok; /* for text files, loaded on first use */
    dt_module *net;
    dt_optimizer *opt;
    dt_engine *engine; /* HFFinetuneDSTrial */
    int64_t seq, stride;
} ft_trial;

/* A hyperparameter path, relative ones taken from the model directory. */
static void hparam_path(ft_trial *t, const char *name, const char *dflt, char *out, size_t n) {
    const char *v = dt_hparam_str(t->ctx, name, dflt);
    const char *base = dt_trial_model_dir(t->ctx);
    if (v[0] == '/' || !base || !v[0])
        snprintf(out, n, "%s", v);
    else
        snprintf(out, n, "%s/%s", base, v);
}

/* The trial's state with the model directory opened (config.json and the unbuilt tree). */
static ft_trial *ft_open(dt_trial_ctx *c) {
    ft_trial *t = calloc(1, sizeof *t);
    char dir[1024];
    t->ctx = c;
    t->seq = dt_hparam_int(c, "seq", 32);
    t->stride = dt_hparam_int(c, "stride", 8);
    hparam_path(t, "model_dir", "../../tests/lm/fixtures/models/gpt2", dir, sizeof dir);
    if (dt_lm_open(&t->lm, dir) != DT_OK) {
        fprintf(stderr, "hf_finetune: %s\n", dt_last_error());
        free(t);
        return NULL;
    }
    return t;
}

static void *ft_init(dt_trial_ctx *c) {
    ft_trial *t = ft_open(c);
    if (!t) return NULL;
    /* the trial's context builds the tree; then the Hugging Face weights go in */
    dt_module *net = dt_lm_take_module(t->lm);
    t->net = dt_wrap_model(c, net);
    if (!t->net) dt_module_free(net); /* not the context's */
    if (!t->net || dt_lm_load_weights(t->lm) != DT_OK) goto fail;
    dt_optim_config oc = dt_optim_defaults(DT_OPTIM_ADAMW);
    oc.lr = (float)dt_hparam_double(c, "lr", 1e-3);
    oc.weight_decay = (float)dt_hparam_double(c, "weight_decay", 0.0);
    t->opt = dt_wrap_optimizer(c, dt_optim_new_for_module(&oc, t->net), t->net);
    if (!t->opt) goto fail;
    const char *dtype = dt_hparam_str(c, "dtype", "f32");
    if (strcmp(dtype, "f32") && strcmp(dtype, "bf16")) {
        dt_error(DT_ERR_CONFIG, "hyperparameter dtype '%s': use f32 or bf16", dtype);
        goto fail;
    }
    if (!strcmp(dtype, "bf16") && dt_trial_use_amp(c, DT_AMP_BF16) != DT_OK) goto fail;
    return t;
fail:
    fprintf(stderr, "hf_finetune: %s\n", dt_last_error());
    dt_lm_free(t->lm);
    free(t);
    return NULL;
}

/* The windows of a text file (plain, or JSON lines when it ends in .jsonl) through the
 * model's tokenizer; NULL with the error set. */
static dt_dataset *text_dataset(ft_trial *t, const char *path, bool train) {
    char tj[1100], cache[1024];
    if (!t->tok) {
        snprintf(tj, sizeof tj, "%s/tokenizer.json", dt_lm_dir(t->lm));
        if (dt_tokenizer_load(&t->tok, tj) != DT_OK) return NULL;
    }
    hparam_path(t, "text_cache", "", cache, sizeof cache);
    size_t n = strlen(path);
    dt_text_dataset_opts o = {
        .jsonl_field = n > 6 && !strcmp(path + n - 6, ".jsonl") ? "text" : NULL,
        .cache_dir = cache[0] ? cache : NULL,
        .block_size = t->seq,
        .stride = train ? t->stride : t->seq};
    return dt_dataset_text(path, t->tok, &o);
}

static dt_loader *loader(ft_trial *t, const char *hparam, const char *dflt, bool train) {
    char path[1024], text[1024];
    hparam_path(t, train ? "train_text" : "val_text", "", text, sizeof text);
    if (!train && !text[0]) hparam_path(t, "train_text", "", text, sizeof text);
    hparam_path(t, hparam, dflt, path, sizeof path);
    int64_t vocab = dt_lm_get_config(t->lm)->vocab;
    dt_dataset *ds =
        text[0] ? text_dataset(t, text, train)
                : dt_dataset_tokens(path, DT_TOKENS_U16, t->seq, train ? t->stride : t->seq, vocab);
    if (!ds) return NULL;
    int64_t bs =
        t->engine ? dt_trial_train_micro_batch_size(t->ctx) : dt_trial_per_slot_batch_size(t->ctx);
    dt_loader_opts o = {.batch_size = bs,
                        .shuffle = train,
                        .drop_last = train || t->engine,
                        .seed = dt_trial_seed(t->ctx),
                        .num_workers = 0,
                        .take_dataset = true};
    return dt_loader_new(dt_trial_runtime(t->ctx), ds, &o);
}

static dt_loader *ft_train_loader(void *self) {
    return loader(self, "train_tokens", "data/train.u16", true);
}
static dt_loader *ft_val_loader(void *self) {
    return loader(self, "val_tokens", "data/val.u16", false);
}

/* mean next-token cross-entropy of a batch: x, y (B, T) -> logits (B, T, V) */
static dt_tensor *batch_loss(ft_trial *t, dt_batch *b) {
    dt_tensor *x = dt_batch_get(b, "x");
    dt_tensor *logits = t->engine ? dt_engine_forward(t->engine, dt_to_device(t->ctx, x))
                                  : dt_module_forward(t->net, x);
    dt_tensor *y = dt_batch_get(b, "y");
    if (!logits || !y) return NULL;
    int64_t V = logits->shape[2];
    return dt_cross_entropy(dt_reshape(logits, 2, (int64_t[]){dt_numel(logits) / V, V}),
                            dt_reshape(y, 1, (int64_t[]){dt_numel(y)}), -100);
}

static dt_metrics ft_train_batch(void *self, dt_batch *b, int64_t epoch, int64_t batch) {
    (void)epoch, (void)batch;
    ft_trial *t = self;
    dt_tensor *loss = batch_loss(t, b);
    if (dt_trial_backward(t->ctx, loss) != DT_OK ||
        dt_step_optimizer(t->ctx, t->opt, NULL) != DT_OK)
        return dt_metrics_error();
    return dt_metrics_scalar("loss", dt_item(loss));
}

static dt_metrics ft_evaluate_batch(void *self, dt_batch *b, int64_t batch) {
    (void)batch;
    dt_tensor *loss = batch_loss(self, b);
    return loss ? dt_metrics_scalar("validation_loss", dt_item(loss)) : dt_metrics_error();
}

/* Every checkpoint carries the model in Hugging Face format under hf/. */
static dt_status ft_save(void *self, const char *dir) {
    ft_trial *t = self;
    if (dt_trial_rank(t->ctx) != 0) return DT_OK;
    char out[1100];
    snprintf(out, sizeof out, "%s/hf", dir);
    return dt_lm_save(t->lm, out);
}

static void ft_shutdown(void *self) {
    ft_trial *t = self;
    char out[1024];
    hparam_path(t, "out_dir", "", out, sizeof out);
    if (!out[0] || dt_trial_rank(t->ctx) != 0) return;
    if (dt_lm_save(t->lm, out) != DT_OK)
        fprintf(stderr, "hf_finetune: %s\n", dt_last_error());
    else
        fprintf(stderr, "hf_finetune: wrote %s\n", out);
}

static int ft_callbacks(void *self, dt_callback *out, const char **names, int max) {
    if (max < 1) return 0;
    out[0] = (dt_callback){.self = self, .on_trial_shutdown = ft_shutdown};
    names[0] = "hf_export";
    return 1;
}

static void ft_free(void *self) {
    ft_trial *t = self;
    dt_lm_free(t->lm); /* the module tree is the context's */
    dt_tokenizer_free(t->tok);
    free(t);
}

/* ---- the engine-based trial ---- */

static void *ds_init(dt_trial_ctx *c) {
    ft_trial *t = ft_open(c);
    if (!t) return NULL;
    json_t *cfg = dt_ds_config_from_hparams(c);
    dt_module *net = NULL;
    if (!cfg) goto fail;
    /* every slot loads the same weights; the engine starts them all from rank 0's */
    net = dt_lm_take_module(t->lm);
    if (dt_module_build(net, dt_trial_runtime(c), dt_trial_seed(c)) != DT_OK ||
        dt_lm_load_weights(t->lm) != DT_OK)
        goto fail;
    dt_engine *e = dt_engine_init(net, cfg);
    if (!e) goto fail;
    net = NULL; /* the engine's, then the context's */
    t->engine = dt_wrap_model_engine(c, e);
    if (!t->engine) goto fail;
    json_decref(cfg);
    return t;
fail:
    fprintf(stderr, "hf_finetune: %s\n", dt_last_error());
    json_decref(cfg);
    dt_module_free(net);
    dt_lm_free(t->lm);
    free(t);
    return NULL;
}

/* One micro-batch: the engine accumulates gradient_accumulation_steps of them. */
static dt_metrics ds_train_batch(void *self, dt_batch_iter *it, int64_t epoch, int64_t batch) {
    (void)epoch, (void)batch;
    ft_trial *t = self;
    dt_batch *b = dt_batch_iter_next(it);
    dt_tensor *loss = b ? batch_loss(t, b) : NULL;
    if (!loss) return dt_metrics_error();
    double l = dt_item(loss);
    if (dt_engine_backward(t->engine, loss) != DT_OK || dt_engine_step(t->engine) != DT_OK)
        return dt_metrics_error();
    return dt_metrics_scalar("loss", l);
}

static dt_metrics ds_evaluate_batch(void *self, dt_batch_iter *it, int64_t batch) {
    dt_batch *b = dt_batch_iter_next(it);
    return b ? ft_evaluate_batch(self, b, batch) : dt_metrics_error();
}

/* The engine's checkpoint (every slot), then on rank 0 the Hugging Face export of its
 * consolidated weights, read into a model of its own (under ZeRO-3 the engine's parameters
 * are partitioned). */
static dt_status ds_save(void *self, const char *dir) {
    ft_trial *t = self;
    dt_status st = dt_save_model_engines(t->ctx, dir);
    if (st || dt_trial_rank(t->ctx) != 0) return st;
    char weights[1100], out[1100];
    snprintf(weights, sizeof weights, "%s/model0/model.safetensors", dir);
    snprintf(out, sizeof out, "%s/hf", dir);
    dt_lm *copy = NULL;
    st = dt_lm_load(&copy, dt_lm_dir(t->lm));
    if (!st) st = dt_lm_load_checkpoint_weights(copy, weights);
    if (!st) st = dt_lm_save(copy, out);
    dt_lm_free(copy);
    return st;
}

const dt_trial_def HFFinetuneDSTrial = {
    .name = "HFFinetuneDSTrial",
    .init = ds_init,
    .build_training_data_loader = ft_train_loader,
    .build_validation_data_loader = ft_val_loader,
    .ds_train_batch = ds_train_batch,
    .ds_evaluate_batch = ds_evaluate_batch,
    .save = ds_save,
    .free = ft_free,
};

const dt_trial_def HFFinetuneTrial = {
    .name = "HFFinetuneTrial",
    .init = ft_init,
    .build_training_data_loader = ft_train_loader,
    .build_validation_data_loader = ft_val_loader,
    .train_batch = ft_train_batch,
    .evaluate_batch = ft_evaluate_batch,
    .build_callbacks = ft_callbacks,
    .save = ft_save,
    .free = ft_free,
};
