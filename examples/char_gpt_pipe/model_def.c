/* model_def.c — a character-level GPT trained with pipeline parallelism as an engine-based
 * trial (the reference's DeepSpeedTrial with a PipelineModule): the model is a list of layers
 * (token + position embedding, transformer blocks, final norm + LM head: dt_pipe_gpt_layers)
 * cut into stages, and each global batch flows through them with the 1F1B schedule in one
 * dt_pipe_train_batch call.
 *
 *   dtrain train examples/char_gpt_pipe/const.yaml examples/char_gpt_pipe --slots 2  # 2 stages
 *   dtrain train examples/char_gpt_pipe/const.yaml examples/char_gpt_pipe --slots 4  # 2 x 2 DP
 *
 * The text is any plain-text file, or a directory of them read in name order (hyperparameter
 * `corpus`; default /usr/share/common-licenses, the ~250 kB of license texts every Debian
 * system ships in base-files); its bytes are the tokens (vocabulary 256). A training sample is a
 * window of seq + 1 bytes starting every `stride` bytes of the first (1 - val_fraction) of the
 * text (dt_dataset_text without a tokenizer): "x" the first seq bytes, "y" the seq bytes after
 * each (next-byte targets); validation windows come from the rest of the text. Metrics: loss
 * (nats per byte), validation_loss, and validation_bpc (bits per byte).
 *
 * Hyperparameters: deepspeed_config (+ overwrite_deepspeed_args), corpus, val_fraction, seq,
 * stride, d_model, n_head, n_layer, num_stages, partition_method. */
#include <dtrain/dtrain.h>
#include <dtrain/pipe.h>
#include <dtrain/tokenizer.h>

#include <math.h>
#include <stdlib.h>

typedef struct gpt_trial {
    dt_trial_ctx *ctx;
    dt_pipe_engine *pipe;
    dt_dataset *train, *val; /* lent to the loaders */
} gpt_trial;

static void gpt_free(void *self) {
    gpt_trial *t = self;
    dt_dataset_free(t->train); /* the loaders over them are gone by now */
    dt_dataset_free(t->val);
    free(t);
}

static void *gpt_init(dt_trial_ctx *c) {
    gpt_trial *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->ctx = c;
    dt_gpt_config cfg = {.vocab = 256,
                         .seq = dt_hparam_int(c, "seq", 64),
                         .d_model = dt_hparam_int(c, "d_model", 96),
                         .n_head = dt_hparam_int(c, "n_head", 4),
                         .n_layer = dt_hparam_int(c, "n_layer", 4)};
    const char *corpus = dt_hparam_str(c, "corpus", "/usr/share/common-licenses");
    double vf = dt_hparam_double(c, "val_fraction", 0.1);
    dt_text_dataset_opts to = {.block_size = cfg.seq, .stride = dt_hparam_int(c, "stride", 16)};
    if (to.stride < 1 || !(vf > 0 && vf < 1)) {
        dt_error(DT_ERR_CONFIG, "stride must be >= 1 and val_fraction in (0, 1)");
        return gpt_free(t), NULL;
    }
    to.end = 1 - vf;
    t->train = dt_dataset_text(corpus, NULL, &to);
    to.begin = to.end, to.end = 1;
    t->val = t->train ? dt_dataset_text(corpus, NULL, &to) : NULL;
    int nl = 0;
    dt_pipe_layer *layers = t->val ? dt_pipe_gpt_layers(&cfg, &nl) : NULL;
    json_t *ds_cfg = layers ? dt_ds_config_from_hparams(c) : NULL;
    dt_pipe_opts o = dt_pipe_defaults(); /* the default loss: next-byte cross-entropy */
    o.num_stages = (int)dt_hparam_int(c, "num_stages", 2);
    o.partition_method = dt_hparam_str(c, "partition_method", "parameters");
    o.world = dt_dist_comm(dt_trial_distributed(c)); /* the trial's slots */
    o.seed = dt_trial_seed(c);
    /* the context owns the pipeline engine; each stage builds only its own layers */
    t->pipe = dt_wrap_pipe_engine(c, ds_cfg ? dt_pipe_engine_init(nl, layers, &o, ds_cfg) : NULL);
    json_decref(ds_cfg);
    free(layers);
    if (!t->pipe) return gpt_free(t), NULL;
    if (dt_trial_rank(c) == 0)
        dt_log(DT_LOG_INFO,
               "char_gpt_pipe: %s, %lld training and %lld validation windows; %d stages x %d "
               "data-parallel; stage 0 holds %lld parameters",
               corpus, (long long)dt_dataset_len(t->train), (long long)dt_dataset_len(t->val),
               dt_pipe_num_stages(t->pipe), dt_pipe_dp_size(t->pipe),
               (long long)dt_module_num_params(dt_pipe_stage_module(t->pipe)));
    return t;
}

/* Only the first and the last stage are asked for loaders (inputs there, labels here); both
 * read the same micro-batches of their data-parallel shard in the same order. */
static dt_loader *make_loader(gpt_trial *t, bool train) {
    dt_loader_opts o = {.batch_size = dt_trial_train_micro_batch_size(t->ctx),
                        .shuffle = train,
                        .drop_last = true,
                        .seed = dt_trial_seed(t->ctx)};
    return dt_loader_new(dt_trial_runtime(t->ctx), train ? t->train : t->val, &o);
}

static dt_loader *gpt_train_loader(void *self) {
    return make_loader(self, true);
}
static dt_loader *gpt_val_loader(void *self) {
    return make_loader(self, false);
}

/* One GLOBAL batch: the pipeline pulls its gradient_accumulation_steps micro-batches from the
 * iterator itself (it is NULL on a middle stage, which reads no data). */
static dt_metrics gpt_train_batch(void *self, dt_batch_iter *it, int64_t epoch, int64_t batch) {
    (void)epoch, (void)batch;
    gpt_trial *t = self;
    dt_status st;
    float loss = dt_pipe_train_batch(t->pipe, dt_batch_iter_pipe_data, it, &st);
    if (st != DT_OK) return dt_metrics_error();
    dt_metrics m = dt_metrics_scalar("loss", loss);
    dt_metrics_set(&m, "lr", dt_engine_get_lr(dt_pipe_stage_engine(t->pipe)));
    return m;
}

static dt_metrics gpt_evaluate_batch(void *self, dt_batch_iter *it, int64_t batch) {
    (void)batch;
    gpt_trial *t = self;
    dt_status st;
    float loss = dt_pipe_eval_batch(t->pipe, dt_batch_iter_pipe_data, it, &st);
    if (st != DT_OK) return dt_metrics_error();
    dt_metrics m = dt_metrics_scalar("validation_loss", loss);
    dt_metrics_set(&m, "validation_bpc", loss / log(2.0));
    return m;
}

const dt_trial_def CharGPTPipeTrial = {
    .name = "CharGPTPipeTrial",
    .init = gpt_init,
    .build_training_data_loader = gpt_train_loader,
    .build_validation_data_loader = gpt_val_loader,
    .ds_train_batch = gpt_train_batch,
    .ds_evaluate_batch = gpt_evaluate_batch,
    .free = gpt_free,
};
