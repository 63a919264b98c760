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
#include <dtrain/engine.h>

#include <stdio.h>
#include <stdlib.h>

typedef struct ds_trial {
    dt_trial_ctx *ctx;
    dt_engine *engine;
    char dir[512];
} ds_trial;

static void *ds_init(dt_trial_ctx *c) {
    ds_trial *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->ctx = c;
    const char *dir = json_string_value(json_object_get(dt_trial_data_config(c), "dir"));
    snprintf(t->dir, sizeof t->dir, "%s", dir ? dir : "/usr/share/datasets/fashion-mnist");
    /* deepspeed_config with overwrite_deepspeed_args merged in */
    json_t *cfg = dt_ds_config_from_hparams(c);
    /* conv3x3 32, pool, conv3x3 64, pool, linear 128, linear 10; every slot builds the same
     * model and the engine starts them all from rank 0's weights */
    dt_module *net = cfg ? dt_model_cnn() : NULL;
    if (net && dt_module_build(net, dt_trial_runtime(c), dt_trial_seed(c)) != DT_OK) {
        dt_module_free(net);
        net = NULL;
    }
    dt_engine *e = net ? dt_engine_init(net, cfg) : NULL;
    if (net && !e) dt_module_free(net);
    json_decref(cfg);
    /* from here the context owns the engine and the model */
    t->engine = dt_wrap_model_engine(c, e);
    if (!t->engine) {
        free(t);
        return NULL;
    }
    return t;
}

/* Loaders hand out micro-batches: the engine accumulates gradient_accumulation_steps of them
 * into one global batch. */
static dt_loader *loader(ds_trial *t, const char *split, bool train) {
    char im[640], lb[640];
    snprintf(im, sizeof im, "%s/%s-images-idx3-ubyte.gz", t->dir, split);
    snprintf(lb, sizeof lb, "%s/%s-labels-idx1-ubyte.gz", t->dir, split);
    /* Fashion-MNIST's pixel mean and std; images as (1, 28, 28) */
    dt_dataset *ds = dt_dataset_idx(im, lb, 0.2860f, 0.3530f, DT_IMAGE_CHW);
    if (!ds) return NULL;
    dt_loader_opts o = {.batch_size = dt_trial_train_micro_batch_size(t->ctx), .shuffle = train,
                        .drop_last = train, .seed = dt_trial_seed(t->ctx), .num_workers = 0,
                        .take_dataset = true};
    return dt_loader_new(dt_trial_runtime(t->ctx), ds, &o);
}

static dt_loader *ds_train_loader(void *self) { return loader(self, "train", true); }
static dt_loader *ds_val_loader(void *self) { return loader(self, "t10k", false); }

/* One micro-batch: the platform calls this gradient_accumulation_steps times per batch. */
static dt_metrics ds_train_batch(void *self, dt_batch_iter *it, int64_t epoch, int64_t batch) {
    (void)epoch, (void)batch;
    ds_trial *t = self;
    dt_batch *b = dt_batch_iter_next(it);
    if (!b) return dt_metrics_error();
    dt_tensor *x = dt_to_device(t->ctx, dt_batch_get(b, "x")); /* (B, 1, 28, 28) */
    dt_tensor *y = dt_to_device(t->ctx, dt_batch_get(b, "y")); /* (B) */
    dt_tensor *loss = dt_cross_entropy(dt_engine_forward(t->engine, x), y, -100);
    if (!loss) return dt_metrics_error();
    double l = dt_item(loss);
    if (dt_engine_backward(t->engine, loss) != DT_OK || dt_engine_step(t->engine) != DT_OK)
        return dt_metrics_error();
    dt_metrics m = dt_metrics_scalar("loss", l);
    dt_metrics_set(&m, "lr", dt_engine_get_lr(t->engine));
    return m;
}

static dt_metrics ds_evaluate_batch(void *self, dt_batch_iter *it, int64_t batch) {
    (void)batch;
    ds_trial *t = self;
    dt_batch *b = dt_batch_iter_next(it);
    if (!b) return dt_metrics_error();
    dt_tensor *y = dt_batch_get(b, "y");
    dt_tensor *logits = dt_engine_forward(t->engine, dt_batch_get(b, "x")); /* (B, 10) */
    dt_tensor *loss = dt_cross_entropy(logits, y, -100);
    if (!loss) return dt_metrics_error();
    const float *L = logits->data;
    const int64_t *Y = y->data;
    int64_t n = logits->shape[0], correct = 0;
    for (int64_t i = 0; i < n; i++) {
        int best = 0;
        for (int k = 1; k < 10; k++)
            if (L[i * 10 + k] > L[i * 10 + best]) best = k;
        correct += best == Y[i];
    }
    dt_metrics m = dt_metrics_scalar("validation_loss", dt_item(loss));
    dt_metrics_set(&m, "accuracy", (double)correct / (double)n);
    return m;
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
