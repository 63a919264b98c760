/* model_def.c — Fashion-MNIST with the benchmark CNN as an engine-based trial (the reference's
 * DeepSpeedTrial): the DeepSpeed-style engine owns the optimizer, the LR schedule, gradient
 * accumulation and ZeRO; the trial pulls its micro-batches from the iterator it is given.
 *
 *   dtrain train examples/fashion_mnist_ds/const.yaml examples/fashion_mnist_ds
 *   dtrain train examples/fashion_mnist_ds/const.yaml examples/fashion_mnist_ds --slots 2
 *
 * Hyperparameters: deepspeed_config (ds_config.json: ZeRO stage 1; ds_config_zero2.json:
 * stage 2), overwrite_deepspeed_args (merged into it). Data config: data.dir (default
 * /usr/share/datasets/fashion-mnist, Debian's dataset-fashion-mnist package). */
#include <dtrain/dtrain.h>

#include <stdlib.h>

typedef struct ds_trial { dt_trial_ctx *ctx; dt_engine *engine; } ds_trial;

static void *ds_init(dt_trial_ctx *c) {
    ds_trial *t = calloc(1, sizeof *t);
    t->ctx = c;
    /* conv3x3 32, pool, conv3x3 64, pool, linear 128, linear 10; every slot builds the same
     * model and the engine starts them all from rank 0's weights; the config is
     * deepspeed_config with overwrite_deepspeed_args merged in */
    t->engine = dt_trial_engine_from_hparams(c, dt_model_cnn());
    return t->engine ? t : (free(t), NULL);
}

/* Loaders hand out micro-batches: the engine accumulates gradient_accumulation_steps of them
 * into one global batch. Fashion-MNIST's pixel mean and std; images as (1, 28, 28). */
static dt_loader *loader(ds_trial *t, const char *split, bool train) {
    const char *dir = dt_trial_data_str(t->ctx, "dir", "/usr/share/datasets/fashion-mnist");
    dt_dataset *ds = dt_dataset_idx_split(dir, split, 0.2860f, 0.3530f, DT_IMAGE_CHW);
    return dt_trial_loader(t->ctx, ds, train);
}

static dt_loader *ds_train_loader(void *self) { return loader(self, "train", true); }
static dt_loader *ds_val_loader(void *self) { return loader(self, "t10k", false); }

/* One micro-batch: the platform calls this gradient_accumulation_steps times per batch. */
static dt_metrics ds_train_batch(void *self, dt_batch_iter *it, int64_t epoch, int64_t batch) {
    ds_trial *t = self;
    dt_batch *b = dt_batch_iter_next(it);
    if (!b) return dt_metrics_error();
    dt_tensor *logits = dt_engine_forward(t->engine, dt_batch_get(b, "x")); /* x (B, 1, 28, 28) */
    dt_tensor *loss = dt_cross_entropy(logits, dt_batch_get(b, "y"), -100);
    double l = loss ? dt_item(loss) : 0;
    if (!loss || dt_engine_backward(t->engine, loss) != DT_OK || dt_engine_step(t->engine) != DT_OK)
        return dt_metrics_error();
    dt_metrics m = dt_metrics_scalar("loss", l);
    dt_metrics_set(&m, "lr", dt_engine_get_lr(t->engine));
    return (void)epoch, (void)batch, m;
}

static dt_metrics ds_evaluate_batch(void *self, dt_batch_iter *it, int64_t batch) {
    ds_trial *t = self;
    dt_batch *b = dt_batch_iter_next(it);
    if (!b) return dt_metrics_error();
    dt_tensor *y = dt_batch_get(b, "y");
    dt_tensor *logits = dt_engine_forward(t->engine, dt_batch_get(b, "x")); /* (B, 10) */
    dt_tensor *loss = dt_cross_entropy(logits, y, -100);
    if (!loss) return dt_metrics_error();
    dt_metrics m = dt_metrics_scalar("validation_loss", dt_item(loss));
    dt_metrics_set(&m, "accuracy", dt_accuracy(logits, y));
    return (void)batch, m;
}

static void ds_free(void *self) { free(self); }

const dt_trial_def FashionDSTrial = {
    .name = "FashionDSTrial",
    .init = ds_init,
    .build_training_data_loader = ds_train_loader,
    .build_validation_data_loader = ds_val_loader,
    .ds_train_batch = ds_train_batch,
    .ds_evaluate_batch = ds_evaluate_batch,
    .free = ds_free,
};
