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
 * Exact resume: batch k of the run is always the same records (epoch e's order is a shuffle
 * seeded by (seed, e)), and a checkpoint holds the weights and AdamW's moments and step, so
 * training in two runs gives the same numbers as one. SIGTERM / SIGINT (local) or the
 * master's preemption: checkpoint and exit 0. */
#include "dtrain/core.h"
#include "dtrain/dtrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PIXELS 784

typedef struct images {
    float *x;   /* (n, 784), normalised */
    int64_t *y; /* (n) */
    int64_t n;
} images;

typedef struct run {
    dt_core *core;
    dt_ctx *ctx;
    dt_module *net;
    dt_optimizer *opt;
    images train, val;
    int64_t batch, steps, checkpoint_every, report_every;
    uint64_t seed;
    int64_t *order; /* this epoch's record order */
    int64_t order_epoch;
} run;

static int fail(const char *what) {
    fprintf(stderr, "train: %s: %s\n", what, dt_last_error());
    return 1;
}

static dt_status load(const char *dir, const char *prefix, images *out) {
    char path[2][1024];
    snprintf(path[0], sizeof path[0], "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(path[1], sizeof path[1], "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    dt_idx pix = {0}, lab = {0};
    dt_status st = dt_idx_read(path[0], &pix);
    if (st == DT_OK) st = dt_idx_read(path[1], &lab);
    if (st == DT_OK && (pix.ndim != 3 || pix.dims[1] * pix.dims[2] != PIXELS ||
                        dt_idx_count(&pix) != dt_idx_count(&lab)))
        st = dt_error(DT_ERR_FORMAT, "%s: images and labels do not match", dir);
    if (st == DT_OK) {
        out->n = dt_idx_count(&lab);
        out->x = malloc(sizeof(float) * (size_t)(out->n * PIXELS));
        out->y = malloc(sizeof(int64_t) * (size_t)out->n);
        for (int64_t i = 0; i < out->n * PIXELS; i++)
            out->x[i] = ((float)pix.data[i] / 255.0f - 0.2860f) / 0.3530f;
        for (int64_t i = 0; i < out->n; i++) out->y[i] = (int64_t)lab.data[i];
    }
    dt_idx_free(&pix);
    dt_idx_free(&lab);
    return st;
}

/* The record order of epoch e: a shuffle seeded by (seed, e) only. */
static void order_for(run *r, int64_t e) {
    if (r->order_epoch == e) return;
    dt_rng g;
    dt_rng_init(&g, r->seed * 1000003u + (uint64_t)e);
    for (int64_t i = 0; i < r->train.n; i++) r->order[i] = i;
    for (int64_t i = r->train.n - 1; i > 0; i--) {
        int64_t j = (int64_t)dt_rng_below(&g, (uint64_t)i + 1), t = r->order[i];
        r->order[i] = r->order[j];
        r->order[j] = t;
    }
    r->order_epoch = e;
}

/* Train batch number r->steps; its loss in *loss. */
static dt_status train_step(run *r, float *bx, int64_t *by, double *loss) {
    int64_t per_epoch = r->train.n / r->batch, k = r->steps % per_epoch;
    order_for(r, r->steps / per_epoch);
    for (int64_t i = 0; i < r->batch; i++) {
        int64_t rec = r->order[k * r->batch + i];
        memcpy(bx + i * PIXELS, r->train.x + rec * PIXELS, sizeof(float) * PIXELS);
        by[i] = r->train.y[rec];
    }
    dt_ctx_reset(r->ctx);
    dt_module_zero_grad(r->net);
    dt_tensor *x = dt_tensor_wrap(r->ctx, DT_DTYPE_F32, 2, (int64_t[]){r->batch, PIXELS}, bx);
    dt_tensor *y = dt_tensor_wrap(r->ctx, DT_DTYPE_I64, 1, &r->batch, by);
    dt_tensor *l = dt_cross_entropy(dt_module_forward(r->net, x), y, -100);
    if (!l || dt_backward(l) != DT_OK || dt_optim_step_module(r->opt, r->net) != DT_OK)
        return dt_last_status();
    *loss = dt_item(l);
    r->steps++;
    return DT_OK;
}

/* Loss and accuracy over the validation images. */
static dt_metrics validate(run *r) {
    dt_ctx_set_training(r->ctx, false);
    bool grad = dt_set_grad_enabled(r->ctx, false);
    double sum = 0;
    int64_t right = 0;
    for (int64_t s = 0; s < r->val.n; s += r->batch) {
        int64_t b = s + r->batch <= r->val.n ? r->batch : r->val.n - s;
        dt_ctx_reset(r->ctx);
        dt_tensor *x =
            dt_tensor_wrap(r->ctx, DT_DTYPE_F32, 2, (int64_t[]){b, PIXELS}, r->val.x + s * PIXELS);
        dt_tensor *logits = dt_module_forward(r->net, x);
        sum += dt_item(dt_cross_entropy(
                   logits, dt_tensor_wrap(r->ctx, DT_DTYPE_I64, 1, &b, r->val.y + s), -100)) *
               (double)b;
        const float *z = logits->data;
        for (int64_t i = 0; i < b; i++) {
            int arg = 0;
            for (int c = 1; c < 10; c++) arg = z[i * 10 + c] > z[i * 10 + arg] ? c : arg;
            right += arg == r->val.y[s + i];
        }
    }
    dt_set_grad_enabled(r->ctx, grad);
    dt_ctx_set_training(r->ctx, true);
    dt_metrics m = dt_metrics_scalar("validation_loss", sum / (double)r->val.n);
    dt_metrics_set(&m, "accuracy", (double)right / (double)r->val.n);
    return m;
}

/* ---- checkpoints: state.bin = the weights, then each AdamW state buffer ---- */

static dt_status save(run *r) {
    char dir[DT_CORE_PATH_MAX], uuid[DT_CORE_UUID_MAX];
    json_t *meta = json_pack("{s:I,s:I}", "steps_completed", (json_int_t)r->steps, "optim_steps",
                             (json_int_t)dt_optim_step_count(r->opt));
    dt_status st = dt_core_checkpoint_store_path(r->core, meta, dir, uuid);
    json_decref(meta);
    if (st != DT_OK) return st;
    if (dt_dist_is_chief(dt_core_distributed(r->core))) {
        char p[DT_CORE_PATH_MAX + 16];
        snprintf(p, sizeof p, "%s/state.bin", dir);
        FILE *f = fopen(p, "wb");
        int64_t n = 0;
        const float *w = dt_module_flat_params(r->net, &n);
        bool ok = f && fwrite(w, sizeof *w, (size_t)n, f) == (size_t)n;
        for (int i = 0; ok && i < dt_optim_state_count(r->opt); i++)
            ok = fwrite(dt_optim_state(r->opt, i, NULL), sizeof(float),
                        (size_t)dt_optim_numel(r->opt), f) == (size_t)dt_optim_numel(r->opt);
        if (f && fclose(f) != 0) ok = false;
        if (!ok) st = dt_error(DT_ERR_IO, "cannot write %s", p);
    }
    dt_status done = dt_core_checkpoint_store_done(r->core, uuid);
    return st != DT_OK ? st : done;
}

static dt_status restore(run *r) {
    char dir[DT_CORE_PATH_MAX], p[DT_CORE_PATH_MAX + 16];
    json_t *meta = NULL;
    dt_status st = dt_core_checkpoint_restore_path(r->core, "latest", dir, &meta);
    if (st != DT_OK) return st;
    r->steps = json_integer_value(json_object_get(meta, "steps_completed"));
    dt_optim_set_step_count(r->opt, json_integer_value(json_object_get(meta, "optim_steps")));
    json_decref(meta);
    snprintf(p, sizeof p, "%s/state.bin", dir);
    FILE *f = fopen(p, "rb");
    int64_t n = 0;
    float *w = dt_module_flat_params(r->net, &n);
    bool ok = f && fread(w, sizeof *w, (size_t)n, f) == (size_t)n;
    for (int i = 0; ok && i < dt_optim_state_count(r->opt); i++)
        ok = fread(dt_optim_state(r->opt, i, NULL), sizeof(float), (size_t)dt_optim_numel(r->opt),
                   f) == (size_t)dt_optim_numel(r->opt);
    if (f) fclose(f);
    if (!ok) return dt_error(DT_ERR_FORMAT, "%s: not this model's state", p);
    fprintf(stderr, "resumed at batch %lld from %s\n", (long long)r->steps, dir);
    return DT_OK;
}

/* ---- the searcher's operations ---- */

static int64_t op_batches(const run *r, dt_length len) {
    if (len.unit == DT_UNIT_EPOCHS) return len.n * (r->train.n / r->batch);
    if (len.unit == DT_UNIT_RECORDS) return len.n / r->batch > 0 ? len.n / r->batch : 1;
    return len.n;
}

/* Train to each operation's length; 0 done, 1 failed (or preempted: 0 with a checkpoint). */
static int train(run *r) {
    float *bx = malloc(sizeof(float) * (size_t)(r->batch * PIXELS));
    int64_t *by = malloc(sizeof(int64_t) * (size_t)r->batch);
    dt_core_op op;
    dt_status st = DT_OK;
    double sum = 0;
    int64_t in_window = 0;
    bool stop = false;
    while (!stop && (st = dt_core_searcher_op(r->core, &op)) == DT_OK && op.length.n > 0) {
        int64_t end = op_batches(r, op.length);
        while (r->steps < end && st == DT_OK) {
            double loss = 0;
            if ((st = train_step(r, bx, by, &loss)) != DT_OK) break;
            sum += loss;
            in_window++;
            dt_core_at at = {.batches = r->steps,
                             .epochs = (double)r->steps / (double)(r->train.n / r->batch),
                             .records = r->steps * r->batch};
            if (r->steps % r->report_every == 0 || r->steps == end) {
                dt_metrics m = dt_metrics_scalar("loss", sum / (double)in_window);
                dt_core_report_training_metrics(r->core, &at, &m, NULL);
                sum = 0;
                in_window = 0;
            }
            if (r->steps % r->checkpoint_every == 0 && r->steps < end) st = save(r);
            if (st == DT_OK && dt_core_should_preempt_all(r->core)) {
                if (r->core->lost) { /* replaced or orphaned: write nothing more */
                    st = dt_error(DT_ERR_STATE, "this run was replaced or lost its master: "
                                                "stopped without a checkpoint");
                    break;
                }
                stop = true;
                break;
            }
        }
        if (st != DT_OK || stop) break;
        dt_metrics v = validate(r);
        dt_core_at at = {.batches = r->steps, .records = r->steps * r->batch};
        dt_core_report_validation_metrics(r->core, &at, &v);
        fprintf(stderr, "final validation_loss %.9g at batch %lld\n", v.m[0].value,
                (long long)r->steps);
        if ((st = save(r)) == DT_OK) st = dt_core_searcher_complete(r->core, &op, v.m[0].value);
    }
    if (st == DT_OK && stop) {
        st = save(r);
        if (st == DT_OK) dt_core_report_stopped(r->core, r->steps);
    }
    free(bx);
    free(by);
    return st == DT_OK ? 0 : fail("training");
}

int main(int argc, char **argv) {
    const char *data = getenv("DTRAIN_FASHION_MNIST");
    dt_core_init_opts o = {.max_length = {DT_UNIT_BATCHES, 400}, .checkpoint_dir = "checkpoints"};
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(argv[i], "--resume")) {
            o.resume = true;
            continue;
        }
        if (!strcmp(argv[i], "--data"))
            data = v;
        else if (!strcmp(argv[i], "--max-batches"))
            o.max_length.n = atoll(v);
        else if (!strcmp(argv[i], "--checkpoint-dir"))
            o.checkpoint_dir = v;
        else {
            fprintf(stderr,
                    "usage: %s [--data DIR] [--max-batches N] [--checkpoint-dir DIR] "
                    "[--resume]\n",
                    argv[0]);
            return 2;
        }
        i++;
    }
    run r = {.order_epoch = -1, .checkpoint_every = 100, .report_every = 50};
    if (dt_core_init(&o, &r.core) != DT_OK) return fail("dt_core_init");
    /* the hyperparameters (the master's, or these defaults) */
    const json_t *hp = dt_core_hparams(r.core);
    json_t *v;
    double lr = (v = json_object_get(hp, "lr")) ? json_number_value(v) : 1e-3;
    int64_t hidden = (v = json_object_get(hp, "hidden")) ? json_integer_value(v) : 128;
    r.batch = (v = json_object_get(hp, "global_batch_size")) ? json_integer_value(v) : 64;
    r.seed = (v = json_object_get(hp, "seed")) ? (uint64_t)json_integer_value(v) : 7;
    if (!data) data = "/usr/share/datasets/fashion-mnist";
    int rc = 1;
    if (load(data, "train", &r.train) != DT_OK || load(data, "t10k", &r.val) != DT_OK) {
        rc = fail("loading Fashion-MNIST");
        goto out;
    }
    r.order = malloc(sizeof(int64_t) * (size_t)r.train.n);
    r.ctx = dt_ctx_new(NULL, r.seed);
    r.net = dt_model_mlp(PIXELS, hidden, 2, 10);
    if (!r.ctx || !r.net || dt_module_build(r.net, r.ctx, r.seed) != DT_OK) {
        rc = fail("building the model");
        goto out;
    }
    dt_optim_config oc = dt_optim_defaults(DT_OPTIM_ADAMW);
    oc.lr = (float)lr;
    if (!(r.opt = dt_optim_new_for_module(&oc, r.net))) {
        rc = fail("the optimizer");
        goto out;
    }
    if (dt_core_latest_checkpoint(r.core) && restore(&r) != DT_OK) {
        rc = fail("resuming");
        goto out;
    }
    rc = train(&r);
out:
    dt_optim_free(r.opt);
    dt_module_free(r.net);
    dt_ctx_free(r.ctx);
    free(r.order);
    free(r.train.x), free(r.train.y), free(r.val.x), free(r.val.y);
    dt_core_free(r.core);
    return rc;
}
