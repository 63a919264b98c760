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
 * batch (dt_loader_next_step); a checkpoint holds the weights and AdamW's moments and step.
 * SIGTERM / SIGINT (local) or the master's preemption: checkpoint and exit 0. */
#include <dtrain/core.h>
#include <dtrain/dtrain.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct run {
    dt_core *core;
    dt_ctx *ctx;
    dt_module *net;
    dt_optimizer *opt; /* its step count is the batches trained (as in the checkpoints) */
    dt_loader *train, *val;
} run;

/* Train to each searcher operation's length (in batches): forward, backward and AdamW on
 * each batch, a report every 50 and a checkpoint every 100; then validate, checkpoint and
 * complete the operation. Asked to stop, checkpoint and return. */
static dt_status train(run *r) {
    dt_core_op op;
    dt_status st;
    dt_batch *b;
    int64_t steps = dt_optim_step_count(r->opt);
    while ((st = dt_core_searcher_op(r->core, &op)) == DT_OK && op.length.n > 0) {
        while (steps < op.length.n) {
            if ((st = dt_loader_next_step(r->train, steps, &b)) != DT_OK) return st;
            dt_ctx_reset(r->ctx);
            dt_module_zero_grad(r->net);
            dt_tensor *logits = dt_module_forward(r->net, dt_batch_get(b, "x"));
            dt_tensor *l = dt_cross_entropy(logits, dt_batch_get(b, "y"), -100);
            if (!l || dt_backward(l) != DT_OK || dt_optim_step_module(r->opt, r->net) != DT_OK)
                return dt_last_status();
            dt_metrics m = dt_metrics_scalar("loss", dt_item(l));
            if (++steps % 50 == 0)
                dt_core_report_training_metrics(r->core, &(dt_core_at){.batches = steps}, &m, NULL);
            if (steps % 100 == 0 && steps < op.length.n &&
                (st = dt_core_save_module(r->core, NULL, r->net, r->opt, NULL)) != DT_OK)
                return st;
            if (dt_core_preempt_save(r->core, steps, r->net, r->opt, &st)) return st;
        }
        dt_metrics v = dt_validate_classifier(r->net, r->val);
        dt_core_report_validation_metrics(r->core, &(dt_core_at){.batches = steps}, &v);
        fprintf(stderr, "final validation_loss %.9g at batch %lld\n", v.m[0].value,
                (long long)steps);
        if ((st = dt_core_save_module(r->core, NULL, r->net, r->opt, NULL)) != DT_OK ||
            (st = dt_core_searcher_complete(r->core, &op, v.m[0].value)) != DT_OK)
            return st;
    }
    return st;
}

int main(int argc, char **argv) {
    /* the local fallback's hyperparameters; the master's replace them */
    json_t *hp = json_pack("{s:i, s:f, s:i}", "hidden", 128, "lr", 1e-3, "global_batch_size", 64);
    dt_core_init_opts o = {.max_length = {DT_UNIT_BATCHES, 400}, .hparams = hp};
    if (dt_core_init_args(&o, &argc, argv) != DT_OK ||
        (argc != 1 && (argc != 3 || strcmp(argv[1], "--data"))))
        return fprintf(stderr,
                       "usage: %s [--data DIR] [--max-batches N] [--checkpoint-dir DIR] "
                       "[--resume]\n",
                       argv[0]),
               2;
    const char *data = argc == 3 ? argv[2] : getenv("DTRAIN_FASHION_MNIST");
    if (!data) data = "/usr/share/datasets/fashion-mnist";
    run r = {0};
    dt_status st = dt_core_init(&o, &r.core);
    if (st == DT_OK) {
        const json_t *h = dt_core_hparams(r.core);
        r.ctx = dt_ctx_new(NULL, 7);
        r.net = dt_model_mlp(784, (int64_t)json_number_value(json_object_get(h, "hidden")), 2, 10);
        dt_loader_opts lo = {.shuffle = true, .seed = 7, .take_dataset = true};
        lo.batch_size = (int64_t)json_number_value(json_object_get(h, "global_batch_size"));
        dt_image_layout flat = DT_IMAGE_FLAT;
        r.train =
            dt_loader_new(r.ctx, dt_dataset_idx_split(data, "train", .286f, .353f, flat), &lo);
        lo.shuffle = false;
        r.val = dt_loader_new(r.ctx, dt_dataset_idx_split(data, "t10k", .286f, .353f, flat), &lo);
        dt_optim_config oc = dt_optim_defaults(DT_OPTIM_ADAMW);
        oc.lr = (float)json_number_value(json_object_get(h, "lr"));
        st = r.train && r.val && r.net ? dt_module_build(r.net, r.ctx, 7) : dt_last_status();
        if (st == DT_OK && !(r.opt = dt_optim_new_for_module(&oc, r.net))) st = dt_last_status();
    }
    if (st == DT_OK && dt_core_latest_checkpoint(r.core) &&
        (st = dt_core_load_module(r.core, "latest", r.net, r.opt, NULL)) == DT_OK)
        fprintf(stderr, "resumed at batch %lld\n", (long long)dt_optim_step_count(r.opt));
    if (st == DT_OK) st = train(&r);
    if (st != DT_OK) fprintf(stderr, "train: %s\n", dt_last_error());
    dt_loader_free(r.train);
    dt_loader_free(r.val);
    dt_optim_free(r.opt);
    dt_module_free(r.net);
    dt_ctx_free(r.ctx);
    dt_core_free(r.core);
    json_decref(hp);
    return st == DT_OK ? 0 : 1;
}
