/* The pipeline engine under mpirun: 2 stages (np2), 2 stages x 2 data-parallel and 4 stages
 * (np4) train an MLP split into layers exactly like one process training the same layers
 * without a pipeline on the same micro-batches (parameters after 20 steps within 1e-5, the
 * returned losses too), evaluation gives the same loss, bad set-ups are refused on every rank
 * with the reason, and (np4) "deterministic": true gives the same bits at ZeRO stage 0 and 1
 * and the unpipelined model's at ZeRO stage 2. */
#define _GNU_SOURCE
#include "dtrain/pipe.h"
#include "fixtures/compare.h"
#include "mpi_test.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DIM 12
#define HID 32
#define CLASSES 4
#define MB 2    /* micro-batch per data-parallel rank */
#define MICRO 4 /* micro-batches per global batch */

static dt_comm *g_world;
static char g_tmp[256];

#include "pipe_mlp.h"

static void sample(int64_t id, float *x, int64_t *y) {
    for (int k = 0; k < DIM; k++) x[k] = sinf(0.31f * (float)(id + 1) * (float)(k + 1));
    *y = (id * 5 + (x[1] > 0)) % CLASSES;
}

static void batch(dt_ctx *c, int64_t first, int64_t count, dt_tensor **x, dt_tensor **y) {
    float *xs = malloc((size_t)(count * DIM) * sizeof *xs);
    int64_t *ys = malloc((size_t)count * sizeof *ys);
    for (int64_t b = 0; b < count; b++) sample(first + b, xs + b * DIM, ys + b);
    if (x) *x = dt_tensor_from_f32(c, 2, (int64_t[]){count, DIM}, xs);
    if (y) *y = dt_tensor_from_i64(c, 1, (int64_t[]){count}, ys);
    free(xs);
    free(ys);
}

static dt_tensor *ce(dt_tensor *out, dt_tensor *labels, void *user) {
    (void)user;
    return dt_cross_entropy(out, labels, -100);
}

typedef struct feed {
    int64_t step;
    int D, dp_rank;
} feed;

/* Micro-batch m of the global step: this data-parallel rank's MB samples of it. */
static dt_status pipe_data(void *user, int64_t m, dt_ctx *c, bool want_in, dt_tensor **in,
                           bool want_lab, dt_tensor **lab) {
    feed *f = user;
    int64_t first = ((f->step * MICRO + m) * f->D + f->dp_rank) * MB;
    batch(c, first, MB, want_in ? in : NULL, want_lab ? lab : NULL);
    return DT_OK;
}

static json_t *config(int D, const char *zero) {
    char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"train_batch_size\": %d, \"gradient_accumulation_steps\": %d,"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}},"
             " \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 5}},"
             " \"gradient_clipping\": 0.5, \"zero_optimization\": %s}",
             MB * MICRO * D, MICRO, zero);
    return dt_ds_config_load(buf);
}

/* The reference: the same layers as one Sequential in one process, micro-batch m of a step
 * being the union of every data-parallel rank's micro-batch m. */
typedef struct ref_run {
    dt_module *net;
    dt_ctx *ctx;
    float losses[32];
    float eval_loss;
} ref_run;

static void reference(int D, int steps, ref_run *out) {
    out->ctx = dt_ctx_new(NULL, 1);
    out->net = pipe_mlp_sequential();
    dt_module_build(out->net, out->ctx, 3);
    char path[400];
    snprintf(path, sizeof path, "%s/init.safetensors", g_tmp);
    if (dt_comm_rank(g_world) == 0) CHECK(fx_save_params(path, out->net));
    dt_comm *self = NULL;
    dt_comm_init_self(&self);
    json_t *j = config(1, "{\"stage\": 0}");
    /* one process: micro-batches of MB * D samples */
    json_object_set_new(j, "train_batch_size", json_integer(MB * MICRO * D));
    dt_engine_opts o = {.comm = self};
    dt_engine *e = dt_engine_init_opts(out->net, j, &o);
    json_decref(j);
    CHECK(e != NULL);
    for (int s = 0; e && s < steps; s++) {
        double l = 0;
        for (int m = 0; m < MICRO; m++) {
            dt_tensor *x, *y;
            batch(out->ctx, (int64_t)(s * MICRO + m) * D * MB, D * MB, &x, &y);
            dt_tensor *loss = dt_cross_entropy(dt_engine_forward(e, x), y, -100);
            l += dt_item(loss) / MICRO;
            CHECK(dt_engine_backward(e, loss) == DT_OK && dt_engine_step(e) == DT_OK);
        }
        out->losses[s] = (float)l;
    }
    /* evaluation of the step after the last: forward only */
    double l = 0;
    bool g = dt_set_grad_enabled(out->ctx, false);
    for (int m = 0; e && m < MICRO; m++) {
        dt_tensor *x, *y;
        batch(out->ctx, (int64_t)(steps * MICRO + m) * D * MB, D * MB, &x, &y);
        l += dt_item(dt_cross_entropy(dt_engine_forward(e, x), y, -100)) / MICRO;
    }
    dt_set_grad_enabled(out->ctx, g);
    dt_ctx_reset(out->ctx);
    out->eval_loss = (float)l;
    dt_engine_free(e);
    dt_comm_finalize(self);
    dt_comm_barrier(g_world);
}

static void check_pipeline(int stages, const char *method, int ckpt_every) {
    int W = dt_comm_size(g_world), D = W / stages;
    const int steps = 20;
    ref_run ref;
    reference(D, steps, &ref);
    char path[400];
    snprintf(path, sizeof path, "%s/init.safetensors", g_tmp);
    dt_pipe_opts o = dt_pipe_defaults();
    o.num_stages = stages;
    o.partition_method = method;
    o.loss = ce;
    o.world = g_world;
    o.init_weights = path;
    o.activation_checkpoint_interval = ckpt_every;
    json_t *j = config(D, "{\"stage\": 1}");
    dt_pipe_engine *p = dt_pipe_engine_init(NL, LAYERS, &o, j);
    json_decref(j);
    CHECK_MSG(p != NULL, "pipeline %d stages: %s", stages, dt_last_error());
    if (p) {
        CHECK(dt_pipe_num_stages(p) == stages && dt_pipe_dp_size(p) == D);
        feed f = {0, D, dt_pipe_dp_rank(p)};
        int bad_loss = 0;
        float last = 0;
        for (int s = 0; s < steps; s++) {
            f.step = s;
            dt_status st;
            float l = dt_pipe_train_batch(p, pipe_data, &f, &st);
            CHECK_MSG(st == DT_OK, "train_batch: %s", dt_last_error());
            bad_loss += !(fabsf(l - ref.losses[s]) <= 1e-5f * fabsf(ref.losses[s]));
            last = l;
        }
        CHECK_MSG(bad_loss == 0, "%d stages: %d losses differ (last %g vs %g)", stages, bad_loss,
                  (double)last, (double)ref.losses[steps - 1]);
        f.step = steps;
        float ev = dt_pipe_eval_batch(p, pipe_data, &f, NULL);
        CHECK_MSG(fabsf(ev - ref.eval_loss) <= 1e-5f * fabsf(ref.eval_loss), "eval %g vs %g",
                  (double)ev, (double)ref.eval_loss);
        CHECK(dt_engine_global_steps(dt_pipe_stage_engine(p)) == steps);
        /* the stage's engine is driven by the pipeline only */
        CHECK(dt_engine_step(dt_pipe_stage_engine(p)) == DT_ERR_STATE &&
              strstr(dt_last_error(), "dt_pipe_train_batch"));
        CHECK(dt_engine_forward(dt_pipe_stage_engine(p), NULL) == NULL);
        /* this stage's parameters against the reference's of the same names */
        dt_module *sm = dt_pipe_stage_module(p);
        double worst = 0;
        int missing = 0;
        for (int i = 0; i < dt_module_param_count(sm); i++) {
            const char *nm = dt_module_param_name(sm, i);
            dt_tensor *a = dt_module_param_tensor(sm, i), *b = dt_module_find_param(ref.net, nm);
            if (!b || dt_numel(a) != dt_numel(b)) {
                missing++;
                continue;
            }
            worst = fmax(worst, fx_rel_l2(a->data, b->data, dt_numel(a)));
        }
        CHECK_MSG(missing == 0 && worst <= 1e-5, "%d stages (%s): stage %d rel %.3g, %d missing",
                  stages, method, dt_pipe_stage_id(p), worst, missing);
        dt_pipe_engine_free(p);
    }
    dt_module_free(ref.net);
    dt_ctx_free(ref.ctx);
}

static void test_two_stages(void) {
    check_pipeline(2, "parameters", 0);
}

static void test_all_stages(void) {
    int W = dt_comm_size(g_world);
    if (W > 2) check_pipeline(W, "uniform", 0);
    check_pipeline(1, "type:linear", 0);
}

/* activation checkpointing every 2 layers: the same training */
static void test_activation_checkpointing(void) {
    check_pipeline(2, "parameters", 2);
}

/* Save after 10 global steps, go on to 20; a fresh engine loads the checkpoint and trains the
 * same 10: the same weights bit for bit. The consolidated weights load into the same layers
 * without a pipeline and evaluate to the pipeline's loss. */
static dt_module *drop(void *a) {
    (void)a;
    return dt_nn_dropout(0.5f);
}

static const dt_pipe_layer DROPPY[] = {
    {.type = "Linear", .build = lin_in}, {.type = "Dropout", .build = drop},
    {.type = "ReLU", .build = relu},     {.type = "Linear", .build = lin_hid},
    {.type = "Dropout", .build = drop},  {.type = "Linear", .build = lin_out},
};

static void checkpoint_case(const dt_pipe_layer *layers, int nl, bool plain_check) {
    int W = dt_comm_size(g_world), S = 2, D = W / S;
    char dir[400];
    snprintf(dir, sizeof dir, "%s/pipe_ck", g_tmp);
    dt_pipe_opts o = dt_pipe_defaults();
    o.num_stages = S;
    o.loss = ce;
    o.world = g_world;
    float *ref = NULL, *got = NULL;
    int64_t n = 0;
    float eval_pipe = 0;
    for (int pass = 0; pass < 2; pass++) {
        json_t *j = config(D, "{\"stage\": 1}");
        dt_pipe_engine *p = dt_pipe_engine_init(nl, layers, &o, j);
        json_decref(j);
        CHECK(p != NULL);
        if (!p) return;
        dt_ctx_set_training(dt_module_ctx(dt_pipe_stage_module(p)), true);
        feed f = {0, D, dt_pipe_dp_rank(p)};
        int s = 0;
        if (pass == 1) {
            json_t *client = NULL;
            CHECK_MSG(dt_pipe_load_checkpoint(p, dir, "global_step10", &client) == DT_OK,
                      "load: %s", dt_last_error());
            CHECK(client && json_integer_value(json_object_get(client, "step")) == 10);
            json_decref(client);
            CHECK(dt_engine_global_steps(dt_pipe_stage_engine(p)) == 10);
            s = 10;
        }
        for (; s < 20; s++) {
            f.step = s;
            dt_status st;
            dt_pipe_train_batch(p, pipe_data, &f, &st);
            CHECK(st == DT_OK);
            if (pass == 0 && s == 9) {
                json_t *client = json_pack("{s:i}", "step", 10);
                CHECK_MSG(dt_pipe_save_checkpoint(p, dir, NULL, client) == DT_OK, "save: %s",
                          dt_last_error());
                json_decref(client);
            }
        }
        f.step = 20;
        if (pass == 0) eval_pipe = dt_pipe_eval_batch(p, pipe_data, &f, NULL);
        float *w = dt_module_flat_params(dt_pipe_stage_module(p), &n);
        float *copy = malloc((size_t)n * sizeof *copy);
        memcpy(copy, w, (size_t)n * sizeof *copy);
        if (pass)
            got = copy;
        else
            ref = copy;
        if (pass == 0) {
            /* the consolidated weights of step 10 are in the checkpoint; save step 20 too */
            CHECK(dt_pipe_save_checkpoint(p, dir, "final", NULL) == DT_OK);
        }
        dt_pipe_engine_free(p);
    }
    CHECK_MSG(ref && got && memcmp(ref, got, (size_t)n * sizeof *ref) == 0,
              "resumed pipeline differs");
    free(ref);
    free(got);
    if (!plain_check) return;
    /* the final consolidated weights in a plain Sequential: the same evaluation loss */
    dt_ctx *c = dt_ctx_new(NULL, 1);
    dt_module *net = pipe_mlp_sequential();
    dt_module_build(net, c, 9);
    char path[500];
    snprintf(path, sizeof path, "%s/final/model.safetensors", dir);
    dt_safetensors *sf = dt_safetensors_open(path);
    CHECK_MSG(sf != NULL, "%s", dt_last_error());
    for (int i = 0; sf && i < dt_module_param_count(net); i++)
        CHECK(dt_safetensors_read_into(sf, dt_module_param_name(net, i),
                                       dt_module_param_tensor(net, i)) == DT_OK);
    dt_safetensors_close(sf);
    double l = 0;
    dt_set_grad_enabled(c, false);
    for (int m = 0; m < MICRO; m++) {
        dt_tensor *x, *y;
        batch(c, (int64_t)(20 * MICRO + m) * D * MB, D * MB, &x, &y);
        l += dt_item(dt_cross_entropy(dt_module_forward(net, x), y, -100)) / MICRO;
    }
    CHECK_MSG(fabs(l - eval_pipe) <= 1e-5 * fabs(l), "plain %g vs pipeline %g", l,
              (double)eval_pipe);
    dt_module_free(net);
    dt_ctx_free(c);
    /* another layout is refused with the reason, on every rank */
    o.num_stages = 1;
    json_t *j = config(W, "{\"stage\": 0}");
    dt_pipe_engine *p1 = dt_pipe_engine_init(NL, LAYERS, &o, j);
    json_decref(j);
    CHECK(p1 && dt_pipe_load_checkpoint(p1, dir, NULL, NULL) == DT_ERR_FORMAT &&
          strstr(dt_last_error(), "another pipeline layout"));
    dt_pipe_engine_free(p1);
}

static void test_checkpoint(void) {
    checkpoint_case(LAYERS, NL, true);
}

/* with dropout: the stages' RNG is in the checkpoint, so the masks after the resume match */
static void test_checkpoint_dropout(void) {
    checkpoint_case(DROPPY, (int)(sizeof DROPPY / sizeof DROPPY[0]), false);
}

/* ---- tied layers: the first layer's weight W (HID x DIM) is also the output projection
 * x · W (DIM logits), on the first and the last stage ---- */

static dt_module *lin_in_nb(void *a) {
    (void)a;
    return dt_nn_linear(DIM, HID, false);
}

static dt_tensor *tied_out(dt_module *shared, dt_tensor *x, void *a) {
    (void)a;
    return dt_matmul(x, shared->params[0].t); /* (B, HID) · (HID, DIM) */
}

static const dt_pipe_layer TIED[] = {
    {.type = "Linear", .build = lin_in_nb, .tied_key = "w"},
    {.type = "ReLU", .build = relu},
    {.type = "Linear", .build = lin_hid},
    {.type = "ReLU", .build = relu},
    {.type = "Head", .build = lin_in_nb, .tied_key = "w", .tied_forward = tied_out},
};

static dt_tensor *tied_ref_forward(dt_module *m, dt_tensor *x) {
    dt_module *w = m->children[0], *h = m->children[1];
    x = dt_relu(dt_module_forward(h, dt_relu(dt_module_forward(w, x))));
    return tied_out(w, x, NULL);
}

static void test_tied_layers(void) {
    int W = dt_comm_size(g_world), S = 2, D = W / S;
    const int steps = 20;
    /* the plain model: one W used twice, named as the pipeline names it */
    dt_ctx *c = dt_ctx_new(NULL, 1);
    dt_module *net = dt_module_new("Tied", tied_ref_forward);
    dt_module_add_child(net, "tied_w", lin_in_nb(NULL));
    dt_module_add_child(net, "2", lin_hid(NULL));
    CHECK(dt_module_build(net, c, 8) == DT_OK);
    char path[400];
    snprintf(path, sizeof path, "%s/tied_init.safetensors", g_tmp);
    if (dt_comm_rank(g_world) == 0) {
        const char *names[3];
        dt_tensor *ts[3];
        for (int i = 0; i < 3; i++) {
            names[i] = dt_module_param_name(net, i);
            ts[i] = dt_module_param_tensor(net, i);
        }
        CHECK(dt_safetensors_write(path, 3, names, ts, 0, NULL) == DT_OK);
    }
    dt_comm_barrier(g_world);
    dt_comm *self = NULL;
    dt_comm_init_self(&self);
    json_t *j = config(1, "{\"stage\": 0}");
    json_object_set_new(j, "train_batch_size", json_integer(MB * MICRO * D));
    dt_engine_opts eo = {.comm = self};
    dt_engine *e = dt_engine_init_opts(net, j, &eo);
    json_decref(j);
    float ref_loss[32];
    for (int s = 0; e && s < steps; s++) {
        double l = 0;
        for (int m = 0; m < MICRO; m++) {
            dt_tensor *x, *y;
            batch(c, (int64_t)(s * MICRO + m) * D * MB, D * MB, &x, &y);
            dt_tensor *loss = dt_cross_entropy(dt_engine_forward(e, x), y, -100);
            l += dt_item(loss) / MICRO;
            CHECK(dt_engine_backward(e, loss) == DT_OK && dt_engine_step(e) == DT_OK);
        }
        ref_loss[s] = (float)l;
    }
    dt_engine_free(e);
    dt_comm_finalize(self);
    /* the pipeline: W on stage 0 (layer 0) and on stage 1 (layer 4) */
    dt_pipe_opts o = dt_pipe_defaults();
    o.num_stages = S;
    o.partition_method = "uniform";
    o.loss = ce;
    o.world = g_world;
    o.init_weights = path;
    j = config(D, "{\"stage\": 1}");
    dt_pipe_engine *p = dt_pipe_engine_init(5, TIED, &o, j);
    json_decref(j);
    CHECK_MSG(p != NULL, "tied pipeline: %s", dt_last_error());
    if (p) {
        feed f = {0, D, dt_pipe_dp_rank(p)};
        int bad = 0;
        for (int s = 0; s < steps; s++) {
            f.step = s;
            dt_status st;
            float l = dt_pipe_train_batch(p, pipe_data, &f, &st);
            CHECK(st == DT_OK);
            bad += !(fabsf(l - ref_loss[s]) <= 1e-5f * fabsf(ref_loss[s]));
        }
        CHECK_MSG(bad == 0, "tied: %d losses differ", bad);
        dt_module *sm = dt_pipe_stage_module(p);
        CHECK(dt_module_find_param(sm, "tied_w.weight") != NULL); /* a copy on each stage */
        double worst = 0;
        for (int i = 0; i < dt_module_param_count(sm); i++) {
            dt_tensor *a = dt_module_param_tensor(sm, i);
            dt_tensor *b = dt_module_find_param(net, dt_module_param_name(sm, i));
            CHECK(b != NULL);
            if (b) worst = fmax(worst, fx_rel_l2(a->data, b->data, dt_numel(a)));
        }
        CHECK_MSG(worst <= 1e-5, "tied: stage %d weights rel %.3g", dt_pipe_stage_id(p), worst);
        /* the consolidated checkpoint holds the tied module once, with the plain model's names */
        char dir[300], mpath[400];
        snprintf(dir, sizeof dir, "%s/tied_ck", g_tmp);
        CHECK(dt_pipe_save_checkpoint(p, dir, "t", NULL) == DT_OK);
        if (dt_comm_rank(g_world) == 0) {
            snprintf(mpath, sizeof mpath, "%s/t/model.safetensors", dir);
            dt_safetensors *f = dt_safetensors_open(mpath);
            CHECK(f && dt_safetensors_count(f) == 3 &&
                  dt_safetensors_find(f, "tied_w.weight") >= 0 &&
                  dt_safetensors_find(f, "2.bias") >= 0);
            dt_safetensors_close(f);
        }
        dt_pipe_engine_free(p);
    }
    dt_module_free(net);
    dt_ctx_free(c);
}

/* ---- "deterministic": true on a 2-stage x 2-way data-parallel pipeline ---- */

#define DET_STEPS 12
#define DET_CLIP 0.05 /* below these models' gradient norm: clipping scales every step */

typedef struct det_feed {
    int64_t step;
    int gas, D, dp_rank;
} det_feed;

/* Micro-batch m of the step: data-parallel rank dp_rank's MB samples of it. */
static int64_t det_first(const det_feed *f, int64_t m) {
    return ((f->step * f->gas + m) * f->D + f->dp_rank) * MB;
}

static dt_status det_data(void *user, int64_t m, dt_ctx *c, bool want_in, dt_tensor **in,
                          bool want_lab, dt_tensor **lab) {
    det_feed *f = user;
    batch(c, det_first(f, m), MB, want_in ? in : NULL, want_lab ? lab : NULL);
    return DT_OK;
}

static json_t *det_config(int D, int gas, double clip, int zero) {
    char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"train_batch_size\": %d, \"gradient_accumulation_steps\": %d,"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}},"
             " \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 5}},"
             " \"gradient_clipping\": %g, \"zero_optimization\": {\"stage\": %d},"
             " \"deterministic\": true}",
             MB * gas * D, gas, clip, zero);
    return dt_ds_config_load(buf);
}

/* This stage's parameters after DET_STEPS steps of the pipeline (NULL on failure), in the
 * stage module's order; *clipped: some step's gradient norm was above `clip`. */
static float *det_pipe_run(bool tied, int gas, double clip, int zero, const char *init, int64_t *n,
                           bool *clipped) {
    int D = dt_comm_size(g_world) / 2;
    dt_pipe_opts o = dt_pipe_defaults();
    o.num_stages = 2;
    o.partition_method = tied ? "uniform" : "parameters";
    o.loss = ce;
    o.world = g_world;
    o.init_weights = init;
    json_t *j = det_config(D, gas, clip, zero);
    dt_pipe_engine *p =
        tied ? dt_pipe_engine_init(5, TIED, &o, j) : dt_pipe_engine_init(NL, LAYERS, &o, j);
    json_decref(j);
    CHECK_MSG(p != NULL, "deterministic pipeline: %s", dt_last_error());
    if (!p) return NULL;
    det_feed f = {0, gas, D, dt_pipe_dp_rank(p)};
    bool ok = true;
    *clipped = false;
    for (int s = 0; s < DET_STEPS && ok; s++) {
        f.step = s;
        dt_status st;
        dt_pipe_train_batch(p, det_data, &f, &st);
        ok = st == DT_OK;
        *clipped |= clip > 0 && dt_engine_grad_norm(dt_pipe_stage_engine(p)) > clip;
    }
    CHECK_MSG(ok, "deterministic pipeline gas %d zero %d: %s", gas, zero, dt_last_error());
    dt_module *sm = dt_pipe_stage_module(p);
    if (tied && ok) { /* every copy of the tied weight, on both stages, holds rank 0's bits */
        dt_tensor *t = dt_module_find_param(sm, "tied_w.weight");
        size_t bytes = (size_t)dt_numel(t) * sizeof(float);
        float *r0 = malloc(bytes);
        memcpy(r0, t->data, bytes);
        dt_comm_broadcast(g_world, r0, bytes, 0);
        CHECK_MSG(!memcmp(r0, t->data, bytes), "gas %d zero %d: rank %d's tied copy differs", gas,
                  zero, dt_comm_rank(g_world));
        free(r0);
    }
    *n = 0;
    for (int i = 0; i < dt_module_param_count(sm); i++)
        *n += dt_numel(dt_module_param_tensor(sm, i));
    float *w = malloc((size_t)*n * sizeof *w);
    for (int i = 0, at = 0; i < dt_module_param_count(sm); i++) {
        dt_tensor *t = dt_module_param_tensor(sm, i);
        memcpy(w + at, t->data, (size_t)dt_numel(t) * sizeof *w);
        at += (int)dt_numel(t);
    }
    dt_pipe_engine_free(p);
    if (!ok) {
        free(w);
        w = NULL;
    }
    return w;
}

/* The same model (built as the init file was) unpipelined on this rank's data-parallel slice, ZeRO
 * 2 (stage 2/3's order, the mode's canonical one): after the same steps on the same micro-batches,
 * this stage's parameters in the stage module's order (NULL on failure). */
static float *det_plain_run(int gas, const char *const *names, int count, int64_t n) {
    int W = dt_comm_size(g_world), r = dt_comm_rank(g_world), D = W / 2;
    dt_comm *dp = NULL;
    CHECK(dt_comm_split(g_world, r / D, r % D, &dp) == DT_OK);
    dt_ctx *c = dt_ctx_new(NULL, 1);
    dt_module *net = pipe_mlp_sequential();
    dt_module_build(net, c, 3);
    json_t *j = det_config(D, gas, 0, 2);
    dt_engine_opts eo = {.comm = dp};
    dt_engine *e = dt_engine_init_opts(net, j, &eo);
    json_decref(j);
    CHECK_MSG(e != NULL, "plain engine: %s", dt_last_error());
    float *w = NULL;
    if (e) {
        det_feed f = {0, gas, D, r % D};
        bool ok = true;
        for (int s = 0; s < DET_STEPS && ok; s++)
            for (int m = 0; m < gas && ok; m++) {
                f.step = s;
                dt_tensor *x, *y;
                batch(c, det_first(&f, m), MB, &x, &y);
                dt_tensor *loss = dt_cross_entropy(dt_engine_forward(e, x), y, -100);
                ok = dt_engine_backward(e, loss) == DT_OK && dt_engine_step(e) == DT_OK;
            }
        CHECK_MSG(ok, "plain engine gas %d: %s", gas, dt_last_error());
        dt_engine_free(e);
        w = malloc((size_t)n * sizeof *w);
        int64_t at = 0;
        for (int i = 0; ok && i < count; i++) {
            dt_tensor *t = dt_module_find_param(net, names[i]);
            ok = t && at + dt_numel(t) <= n;
            if (ok) memcpy(w + at, t->data, (size_t)dt_numel(t) * sizeof *w);
            if (ok) at += dt_numel(t);
        }
        CHECK_MSG(ok && at == n, "plain engine: the stage's parameters not found");
        if (!ok || at != n) {
            free(w);
            w = NULL;
        }
    }
    dt_module_free(net);
    dt_ctx_free(c);
    dt_comm_free(dp);
    return w;
}

/* The stage module's parameter names of the plain MLP's pipeline at this rank. */
static int det_stage_names(const char *init, const char **names) {
    dt_pipe_opts o = dt_pipe_defaults();
    o.num_stages = 2;
    o.partition_method = "parameters";
    o.loss = ce;
    o.world = g_world;
    o.init_weights = init;
    json_t *j = det_config(dt_comm_size(g_world) / 2, 2, 0, 0);
    dt_pipe_engine *p = dt_pipe_engine_init(NL, LAYERS, &o, j);
    json_decref(j);
    if (!p) return 0;
    dt_module *sm = dt_pipe_stage_module(p);
    int count = dt_module_param_count(sm);
    for (int i = 0; i < count; i++) names[i] = strdup(dt_module_param_name(sm, i));
    dt_pipe_engine_free(p);
    return count;
}

/* With "deterministic": true, a 2-stage x 2-way data-parallel pipeline gives bit-identical
 * weights at ZeRO stage 0 and 1 (gas 2 and 3, clipping active and off, the MLP and the tied
 * model; every rank's copy of the tied weight the same bits), and without clipping the MLP's
 * are the bits of the unpipelined model at ZeRO stage 2 on the same data-parallel ranks: each
 * micro-batch reduced, then accumulated. */
static void test_deterministic(void) {
    if (dt_comm_size(g_world) != 4) {
        if (mt_rank == 0)
            fprintf(stderr, "  skipped: needs 4 ranks (2 stages x 2 data-parallel)\n");
        return;
    }
    char init[400];
    snprintf(init, sizeof init, "%s/det_init.safetensors", g_tmp);
    if (dt_comm_rank(g_world) == 0) CHECK(pipe_mlp_save_init(init, 3));
    dt_comm_barrier(g_world);
    const char *names[32];
    int count = det_stage_names(init, names);
    CHECK(count > 0);
    for (int tied = 0; tied < 2; tied++)
        for (int gas = 2; gas <= 3; gas++)
            for (int cl = 0; cl < 2; cl++) {
                double clip = cl ? DET_CLIP : 0;
                int64_t n0 = 0, n1 = 0;
                bool c0 = false, c1 = false;
                float *w0 = det_pipe_run(tied, gas, clip, 0, tied ? NULL : init, &n0, &c0);
                float *w1 = det_pipe_run(tied, gas, clip, 1, tied ? NULL : init, &n1, &c1);
                CHECK_MSG(c0 == (clip > 0), "tied %d gas %d clip %g: clipping %s", tied, gas, clip,
                          c0 ? "active" : "never active");
                if (w0 && w1)
                    CHECK_MSG(n0 == n1 && !memcmp(w0, w1, (size_t)n0 * sizeof *w0),
                              "tied %d gas %d clip %g: stage %d's weights at ZeRO 1 differ from "
                              "ZeRO 0 (rel %.3g)",
                              tied, gas, clip, dt_comm_rank(g_world) / 2,
                              n0 == n1 ? fx_rel_l2(w1, w0, n0) : 1.0);
                if (w0 && !tied && !cl) {
                    float *pl = det_plain_run(gas, names, count, n0);
                    if (pl)
                        CHECK_MSG(!memcmp(w0, pl, (size_t)n0 * sizeof *w0),
                                  "gas %d: stage %d's weights differ from the unpipelined "
                                  "model's at ZeRO 2 (rel %.3g)",
                                  gas, dt_comm_rank(g_world) / 2, fx_rel_l2(w0, pl, n0));
                    free(pl);
                }
                free(w0);
                free(w1);
            }
    for (int i = 0; i < count; i++) free((void *)names[i]);
}

static void test_refused(void) {
    dt_pipe_opts o = dt_pipe_defaults();
    o.loss = ce;
    o.world = g_world;
    o.num_stages = 3;
    json_t *j = config(1, "{\"stage\": 1}");
    if (dt_comm_size(g_world) % 3) {
        CHECK(dt_pipe_engine_init(NL, LAYERS, &o, j) == NULL &&
              strstr(dt_last_error(), "cannot form 3 stages"));
    }
    json_decref(j);
    o.num_stages = 2;
    j = config(dt_comm_size(g_world) / 2, "{\"stage\": 2}");
    CHECK(dt_pipe_engine_init(NL, LAYERS, &o, j) == NULL &&
          strstr(dt_last_error(), "ZeRO stage 2"));
    json_decref(j);
    /* more stages than layers */
    o.num_stages = dt_comm_size(g_world);
    dt_pipe_layer two[2] = {LAYERS[0], LAYERS[6]};
    j = config(1, "{\"stage\": 0}");
    if (o.num_stages > 2)
        CHECK(dt_pipe_engine_init(2, two, &o, j) == NULL && dt_last_status() == DT_ERR_CONFIG);
    json_decref(j);
}

int main(void) {
    if (!mt_begin(&g_world)) return 1;
    mt_tmpdir(g_world, g_tmp, sizeof g_tmp, "pipe-mpi"); /* one scratch directory for the job */
    MT_RUN(test_two_stages);
    MT_RUN(test_all_stages);
    MT_RUN(test_activation_checkpointing);
    MT_RUN(test_checkpoint);
    MT_RUN(test_checkpoint_dropout);
    MT_RUN(test_tied_layers);
    MT_RUN(test_deterministic);
    MT_RUN(test_refused);
    return mt_finish(g_world, g_tmp);
}
