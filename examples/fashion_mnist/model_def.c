/* model_def.c — Fashion-MNIST with an MLP, as a dtrain trial.
 *
 *   dtrain train examples/fashion_mnist/const.yaml examples/fashion_mnist
 *
 * Hyperparameters: global_batch_size, hidden, layers, lr, weight_decay, dropout.
 * Data config: data.dir (default /usr/share/datasets/fashion-mnist, Debian's
 * dataset-fashion-mnist package). */
#include <dtrain/dtrain.h>

#include <stdlib.h>

typedef struct mlp_trial { dt_trial_ctx *ctx; dt_module *net; dt_optimizer *opt; } mlp_trial;

/* layers x (Linear, ReLU[, Dropout]), then Linear to the 10 classes */
static dt_module *build_net(dt_trial_ctx *c) {
    int64_t hidden = dt_hparam_int(c, "hidden", 512), in = 784;
    float p = (float)dt_hparam_double(c, "dropout", 0.0);
    dt_module *mods[64];
    int n = 0;
    for (int l = 0; l < dt_hparam_int(c, "layers", 2) && n < 60; l++, in = hidden) {
        mods[n++] = dt_nn_linear(in, hidden, true);
        mods[n++] = dt_nn_relu();
        if (p > 0) mods[n++] = dt_nn_dropout(p);
    }
    mods[n++] = dt_nn_linear(in, 10, true);
    return dt_nn_sequential_of(mods, n);
}

static void *mlp_init(dt_trial_ctx *c) {
    mlp_trial *t = calloc(1, sizeof *t);
    t->ctx = c;
    t->net = dt_wrap_model(c, build_net(c));
    dt_optim_config oc = dt_optim_defaults(DT_OPTIM_ADAMW);
    oc.lr = (float)dt_hparam_double(c, "lr", 1e-3);
    oc.weight_decay = (float)dt_hparam_double(c, "weight_decay", 0.01);
    t->opt = t->net ? dt_wrap_optimizer(c, dt_optim_new_for_module(&oc, t->net), t->net) : NULL;
    return t->opt ? t : (free(t), NULL);
}

/* Fashion-MNIST's pixel mean and std; images flattened to 784 */
static dt_loader *loader(mlp_trial *t, const char *split, bool train) {
    const char *dir = dt_trial_data_str(t->ctx, "dir", "/usr/share/datasets/fashion-mnist");
    dt_dataset *ds = dt_dataset_idx_split(dir, split, 0.2860f, 0.3530f, DT_IMAGE_FLAT);
    return dt_trial_loader(t->ctx, ds, train);
}

static dt_loader *mlp_train_loader(void *self) { return loader(self, "train", true); }
static dt_loader *mlp_val_loader(void *self) { return loader(self, "t10k", false); }

static dt_metrics mlp_train_batch(void *self, dt_batch *b, int64_t epoch, int64_t batch) {
    mlp_trial *t = self;
    dt_tensor *logits = dt_module_forward(t->net, dt_batch_get(b, "x"));
    dt_tensor *loss = dt_cross_entropy(logits, dt_batch_get(b, "y"), -100);
    if (dt_trial_backward(t->ctx, loss) != DT_OK || dt_step_optimizer(t->ctx, t->opt, NULL) != DT_OK)
        return dt_metrics_error();
    return (void)epoch, (void)batch, dt_metrics_scalar("loss", dt_item(loss));
}

static dt_metrics mlp_evaluate_batch(void *self, dt_batch *b, int64_t batch) {
    mlp_trial *t = self;
    dt_tensor *y = dt_batch_get(b, "y"), *logits = dt_module_forward(t->net, dt_batch_get(b, "x"));
    dt_tensor *loss = dt_cross_entropy(logits, y, -100);
    if (!loss) return dt_metrics_error();
    dt_metrics m = dt_metrics_scalar("validation_loss", dt_item(loss));
    dt_metrics_set(&m, "accuracy", dt_accuracy(logits, y));
    return (void)batch, m;
}

static void mlp_free(void *self) { free(self); }

const dt_trial_def FashionMLPTrial = {
    .name = "FashionMLPTrial",
    .init = mlp_init,
    .build_training_data_loader = mlp_train_loader,
    .build_validation_data_loader = mlp_val_loader,
    .train_batch = mlp_train_batch,
    .evaluate_batch = mlp_evaluate_batch,
    .free = mlp_free,
};
