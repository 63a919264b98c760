/* train — the Fashion-MNIST MLP trained by a loop of its own through the Core API
 * (dtrain/core.h, docs/core_api.md): the searcher's operations, metrics, checkpoints, resume
 * and preemption, with no trial definition.
 *
 * Under the master (entrypoint: ./train) everything comes from dt_core_init: the
 * hyperparameters, where checkpoints go and which one to resume. Run by hand it is the local
 * fallback: metrics on stderr, checkpoints in --checkpoint-dir, --resume picks up the latest.
 *
 *   ./train [--data DIR] [--max-batches N] [--checkpoint-dir DIR] [--resume]
 *
 * Exact resume: the loader's order of epoch e depends only on (seed, e) and it restarts at any
 * batch; a checkpoint holds the weights and AdamW's moments and step. SIGTERM / SIGINT (local)
 * or the master's preemption: checkpoint and exit 0. */
#include <dtrain/core.h>
#include <dtrain/dtrain.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct run {
    dt_core *core;
    dt_ctx *ctx;
    dt_module *net;
    dt_optimizer *opt;
    dt_loader *train, *val;
    int64_t steps;
} run;

static dt_status save(run *r) {
    json_t *meta = json_pack("{s:I}", "steps_completed", (json_int_t)r->steps);
    dt_status st = dt_core_save_module(r->core, meta, r->net, r->opt, NULL);
    json_decref(meta);
    return st;
}

/* Loss and accuracy over the validation set, weighted by batch size. */
static dt_metrics validate(run *r) {
    dt_ctx_set_training(r->ctx, false);
    bool grad = dt_set_grad_enabled(r->ctx, false);
    double loss = 0, right = 0, n = 0;
    dt_batch *b = NULL;
    dt_loader_start_epoch(r->val, 0, 0);
    while (dt_loader_next(r->val, &b) == DT_OK && b) {
        dt_ctx_reset(r->ctx);
        dt_tensor *y = dt_batch_get(b, "y"), *x = dt_batch_get(b, "x");
        dt_tensor *logits = dt_module_forward(r->net, x);
        loss += dt_item(dt_cross_entropy(logits, y, -100)) * b->records;
        right += dt_accuracy(logits, y) * b->records;
        n += b->records;
    }
    dt_set_grad_enabled(r->ctx, grad);
    dt_ctx_set_training(r->ctx, true);
    dt_metrics m = dt_metrics_scalar("validation_loss", loss / n);
    dt_metrics_set(&m, "accuracy", right / n);
    return m;
}

/* One batch: forward, backward, AdamW. The loader restarts at any batch of an epoch. */
static dt_status step(run *r, int64_t per_epoch, bool *started, double *loss) {
    dt_batch *b = NULL;
    dt_status st = DT_OK;
    if (!*started || r->steps % per_epoch == 0)
        st = dt_loader_start_epoch(r->train, r->steps / per_epoch, r->steps % per_epoch);
    *started = true;
    if (st != DT_OK || (st = dt_loader_next(r->train, &b)) != DT_OK) return st;
    dt_ctx_reset(r->ctx);
    dt_module_zero_grad(r->net);
    dt_tensor *logits = dt_module_forward(r->net, dt_batch_get(b, "x"));
    dt_tensor *l = dt_cross_entropy(logits, dt_batch_get(b, "y"), -100);
    if (!l || dt_backward(l) != DT_OK || dt_optim_step_module(r->opt, r->net) != DT_OK)
        return dt_last_status();
    *loss = dt_item(l);
    r->steps++;
    return DT_OK;
}

/* Train to each searcher operation's length (in batches), validate, checkpoint, report;
 * when asked to stop, checkpoint and report where. */
static dt_status train(run *r) {
    int64_t per_epoch = dt_loader_num_batches(r->train);
    bool started = false;
    dt_core_op op;
    dt_status st;
    while ((st = dt_core_searcher_op(r->core, &op)) == DT_OK && op.length.n > 0) {
        while (r->steps < op.length.n) {
            double loss;
            if ((st = step(r, per_epoch, &started, &loss)) != DT_OK) return st;
            dt_metrics m = dt_metrics_scalar("loss", loss);
            if (r->steps % 50 == 0)
                dt_core_report_training_metrics(r->core, &(dt_core_at){.batches = r->steps}, &m,
                                                NULL);
            if (r->steps % 100 == 0 && r->steps < op.length.n && (st = save(r)) != DT_OK) return st;
            if (dt_core_should_preempt_all(r->core)) {
                if (r->core->lost) return dt_error(DT_ERR_STATE, "the run lost its master");
                if ((st = save(r)) == DT_OK) dt_core_report_stopped(r->core, r->steps);
                return st;
            }
        }
        dt_metrics v = validate(r);
        dt_core_report_validation_metrics(r->core, &(dt_core_at){.batches = r->steps}, &v);
        fprintf(stderr, "final validation_loss %.9g at batch %lld\n", v.m[0].value,
                (long long)r->steps);
        if ((st = save(r)) != DT_OK ||
            (st = dt_core_searcher_complete(r->core, &op, v.m[0].value)) != DT_OK)
            return st;
    }
    return st;
}

static double hparam(const dt_core *core, const char *name, double dflt) {
    const json_t *v = json_object_get(dt_core_hparams(core), name);
    return v ? json_number_value(v) : dflt; /* the master's, or the default */
}

int main(int argc, char **argv) {
    const char *data = getenv("DTRAIN_FASHION_MNIST");
    dt_core_init_opts o = {.max_length = {DT_UNIT_BATCHES, 400}, .checkpoint_dir = "checkpoints"};
    for (int i = 1; i < argc; i++) {
        bool more = i + 1 < argc;
        if (!strcmp(argv[i], "--resume"))
            o.resume = true;
        else if (!strcmp(argv[i], "--data") && more)
            data = argv[++i];
        else if (!strcmp(argv[i], "--max-batches") && more)
            o.max_length.n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--checkpoint-dir") && more)
            o.checkpoint_dir = argv[++i];
        else
            return fprintf(stderr,
                           "usage: %s [--data DIR] [--max-batches N] "
                           "[--checkpoint-dir DIR] [--resume]\n",
                           argv[0]),
                   2;
    }
    if (!data) data = "/usr/share/datasets/fashion-mnist";
    run r = {0};
    json_t *meta = NULL;
    dt_status st = dt_core_init(&o, &r.core);
    if (st == DT_OK) {
        r.ctx = dt_ctx_new(NULL, 7);
        r.net = dt_model_mlp(784, (int64_t)hparam(r.core, "hidden", 128), 2, 10);
        dt_loader_opts lo = {.batch_size = (int64_t)hparam(r.core, "global_batch_size", 64),
                             .shuffle = true,
                             .seed = 7,
                             .take_dataset = true};
        dt_image_layout flat = DT_IMAGE_FLAT;
        r.train =
            dt_loader_new(r.ctx, dt_dataset_idx_split(data, "train", 0.286f, 0.353f, flat), &lo);
        lo.shuffle = false;
        r.val = dt_loader_new(r.ctx, dt_dataset_idx_split(data, "t10k", 0.286f, 0.353f, flat), &lo);
        dt_optim_config oc = dt_optim_defaults(DT_OPTIM_ADAMW);
        oc.lr = (float)hparam(r.core, "lr", 1e-3);
        st = r.train && r.val && r.net ? dt_module_build(r.net, r.ctx, 7) : dt_last_status();
        if (st == DT_OK && !(r.opt = dt_optim_new_for_module(&oc, r.net))) st = dt_last_status();
    }
    if (st == DT_OK && dt_core_latest_checkpoint(r.core) &&
        (st = dt_core_load_module(r.core, "latest", r.net, r.opt, &meta)) == DT_OK) {
        r.steps = json_integer_value(json_object_get(meta, "steps_completed"));
        fprintf(stderr, "resumed at batch %lld\n", (long long)r.steps);
    }
    if (st == DT_OK) st = train(&r);
    if (st != DT_OK) fprintf(stderr, "train: %s\n", dt_last_error());
    json_decref(meta);
    dt_loader_free(r.train);
    dt_loader_free(r.val);
    dt_optim_free(r.opt);
    dt_module_free(r.net);
    dt_ctx_free(r.ctx);
    dt_core_free(r.core);
    return st == DT_OK ? 0 : 1;
}
