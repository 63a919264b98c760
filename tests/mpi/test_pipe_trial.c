/* Pipeline engines in engine-based trials (ds_trial.c, dt_wrap_pipe_engine) under mpirun,
 * W = 2 and 4 slots, through the fit loop:
 *   - 2 stages (x 2 data-parallel at W = 4), and 4 stages at W = 4: ds_train_batch runs once
 *     per global batch; only the first and the last stage build loaders (the others get no
 *     iterator); the data is sharded over the data-parallel ranks; the parameters, the
 *     training loss reported (from the last stage only) and the validation loss match one
 *     process training the same layers without a pipeline on the same micro-batches (a stream
 *     that crosses epochs of the loader inside a global batch);
 *   - a validation loader with fewer than gradient_accumulation_steps micro-batches is refused
 *     on every slot with the reason;
 *   - the pipeline checkpoint lands inside the trial checkpoint, and a stop + resume gives the
 *     same files bit for bit as an uninterrupted run. */
#define _GNU_SOURCE
#include "dtrain/engine.h"
#include "dtrain/pipe.h"
#include "dtrain/trial.h"
#include "dtrain/trialio.h"
#include "fixtures/toy_trial.h"
#include "fixtures/compare.h"
#include "mpi_test.h"

#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIM 8
#define HID 16
#define CLASSES 4
#define N 90 /* 45 / 22 micro-batches per epoch on a shard (D = 1 / 2): not a multiple of 4 */
#define N_VAL 40
#define MB 2  /* micro-batch per data-parallel rank */
#define GAS 4 /* micro-batches per global batch */
#define BATCHES 12

static dt_comm *g_world;
static char g_init[256]; /* the initial weights every run starts from */

/* knobs and what this rank saw */
static int g_stages = 2;
static int64_t g_n_val = N_VAL;
static int64_t g_calls, g_evals, g_builds, g_null_it, g_data_it;
static float g_losses[64];
static double g_val = NAN, g_train_avg = NAN;
static int g_stage_seen = -1;

#include "pipe_mlp.h"

static dt_tensor *ce(dt_tensor *out, dt_tensor *labels, void *user) {
    (void)user;
    return dt_cross_entropy(out, labels, -100);
}

static const char *ds_json(int micro) {
    static char buf[512];
    snprintf(buf, sizeof buf,
             "{\"train_micro_batch_size_per_gpu\": %d, \"gradient_accumulation_steps\": %d,"
             " \"steps_per_print\": 100000,"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}},"
             " \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 5}},"
             " \"gradient_clipping\": 0.5, \"zero_optimization\": {\"stage\": 1}}",
             micro, GAS);
    return buf;
}

/* ---- the trial ---- */

typedef struct pt {
    dt_trial_ctx *c;
    dt_pipe_engine *p;
} pt;

static void *pt_init(dt_trial_ctx *c) {
    pt *t = calloc(1, sizeof *t);
    t->c = c;
    json_t *cfg = dt_ds_config_from_hparams(c);
    dt_pipe_opts o = dt_pipe_defaults();
    o.num_stages = g_stages;
    o.partition_method = "type:Linear"; /* a Linear layer or two per stage */
    o.loss = ce;
    o.world = dt_dist_comm(dt_trial_distributed(c));
    o.init_weights = g_init;
    t->p = dt_wrap_pipe_engine(c, cfg ? dt_pipe_engine_init(NL, LAYERS, &o, cfg) : NULL);
    json_decref(cfg);
    if (!t->p) {
        free(t);
        return NULL;
    }
    g_stage_seen = dt_pipe_stage_id(t->p);
    return t;
}

static dt_loader *pt_loader(pt *t, int64_t n, bool train) {
    return toy_loader(dt_trial_runtime(t->c), dt_trial_seed(t->c), n, train,
                      dt_trial_train_micro_batch_size(t->c));
}

static dt_loader *pt_train_loader(void *s) {
    g_builds++;
    return pt_loader(s, N, true);
}
static dt_loader *pt_val_loader(void *s) {
    return pt_loader(s, g_n_val, false);
}

static bool reports(const pt *t) {
    return dt_pipe_stage_id(t->p) == dt_pipe_num_stages(t->p) - 1;
}

static dt_metrics pt_train(void *s, dt_batch_iter *it, int64_t e, int64_t i) {
    (void)e;
    pt *t = s;
    g_null_it += it == NULL;
    g_data_it += it != NULL;
    dt_status st;
    float l = dt_pipe_train_batch(t->p, dt_batch_iter_pipe_data, it, &st);
    if (st != DT_OK) return dt_metrics_error();
    if (g_calls < 64) g_losses[g_calls] = l;
    g_calls++;
    (void)i;
    /* stages that do not report answer nonsense: it must not reach the metrics */
    return dt_metrics_scalar("loss", reports(t) ? l : l + 1000.0);
}

static dt_metrics pt_eval(void *s, dt_batch_iter *it, int64_t i) {
    (void)i;
    pt *t = s;
    dt_status st;
    float l = dt_pipe_eval_batch(t->p, dt_batch_iter_pipe_data, it, &st);
    if (st != DT_OK) return dt_metrics_error();
    g_evals++;
    return dt_metrics_scalar("validation_loss", reports(t) ? l : l + 1000.0);
}

static void pt_free(void *s) {
    free(s);
}

static void on_val_end(void *self, const dt_metrics *m) {
    (void)self;
    dt_metrics_get(m, "validation_loss", &g_val);
}
static void on_train_end(void *self, const dt_metrics *avg, const dt_metrics *last) {
    (void)self, (void)last;
    dt_metrics_get(avg, "loss", &g_train_avg);
}

static int pt_callbacks(void *self, dt_callback *out, const char **names, int max) {
    (void)self;
    if (max < 1) return 0;
    memset(out, 0, sizeof *out);
    out->on_validation_end = on_val_end;
    out->on_training_workload_end = on_train_end;
    names[0] = "probe";
    return 1;
}

static const dt_trial_def PT = {
    .name = "PipeTrial",
    .init = pt_init,
    .build_training_data_loader = pt_train_loader,
    .build_validation_data_loader = pt_val_loader,
    .ds_train_batch = pt_train,
    .ds_evaluate_batch = pt_eval,
    .build_callbacks = pt_callbacks,
    .free = pt_free,
};

static json_t *config(void) {
    return json_pack("{s:{s:o}}", "hyperparameters", "deepspeed_config",
                     dt_ds_config_load(ds_json(MB)));
}

static dt_fit_opts fit_opts(const char *dir, int64_t batches) {
    return toy_fit_opts(dir, batches, 5);
}

static void reset_seen(void) {
    g_calls = g_evals = g_builds = g_null_it = g_data_it = 0;
    g_val = g_train_avg = NAN;
    g_stage_seen = -1;
}

/* ---- the reference: the same layers as one Sequential in one process, micro-batches of
 * MB x D samples (the union of every data-parallel rank's micro-batch) ---- */

typedef struct ref_run {
    dt_module *net;
    dt_ctx *ctx;
    float losses[BATCHES];
    double val;
} ref_run;

static dt_loader *ref_loader(dt_ctx *c, int64_t n, int64_t batch, bool train, uint64_t seed) {
    return toy_loader(c, seed, n, train, batch);
}

static void reference(int D, uint64_t seed, ref_run *out) {
    out->ctx = dt_ctx_new(NULL, 1);
    out->net = pipe_mlp_sequential();
    CHECK(dt_module_build(out->net, out->ctx, 3) == DT_OK);
    dt_safetensors *f = dt_safetensors_open(g_init);
    for (int i = 0; f && i < dt_module_param_count(out->net); i++)
        CHECK(dt_safetensors_read_into(f, dt_module_param_name(out->net, i),
                                       dt_module_param_tensor(out->net, i)) == DT_OK);
    dt_safetensors_close(f);
    dt_comm *self = NULL;
    dt_comm_init_self(&self);
    json_t *j = dt_ds_config_load(ds_json(MB * D));
    dt_engine_opts eo = {.comm = self};
    dt_engine *e = dt_engine_init_opts(out->net, j, &eo);
    json_decref(j);
    CHECK(e != NULL);
    dt_loader *l = ref_loader(out->ctx, N, MB * D, true, seed);
    int64_t per_epoch = dt_loader_num_batches(l), epoch = 0;
    dt_loader_start_epoch(l, 0, 0);
    for (int s = 0; e && s < BATCHES; s++) {
        double sum = 0;
        for (int m = 0; m < GAS; m++) {
            dt_batch *b = NULL;
            dt_loader_next(l, &b);
            if (!b) { /* the stream runs on into the next epoch */
                dt_loader_start_epoch(l, ++epoch, 0);
                dt_loader_next(l, &b);
            }
            dt_tensor *loss = dt_cross_entropy(dt_engine_forward(e, dt_batch_get(b, "x")),
                                               dt_batch_get(b, "y"), -100);
            sum += dt_item(loss);
            CHECK(dt_engine_backward(e, loss) == DT_OK && dt_engine_step(e) == DT_OK);
        }
        out->losses[s] = (float)(sum / GAS);
    }
    CHECK(per_epoch * (BATCHES * GAS / per_epoch) < BATCHES * GAS); /* crossed an epoch */
    dt_loader_free(l);
    /* validation: floor(micro-batches per shard / GAS) calls of GAS micro-batches */
    l = ref_loader(out->ctx, N_VAL, MB * D, false, seed);
    int64_t calls = (N_VAL / (MB * D)) / GAS;
    dt_loader_start_epoch(l, 0, 0);
    bool g = dt_set_grad_enabled(out->ctx, false);
    double v = 0;
    for (int64_t k = 0; e && k < calls * GAS; k++) {
        dt_batch *b = NULL;
        dt_loader_next(l, &b);
        v += dt_item(dt_cross_entropy(dt_engine_forward(e, dt_batch_get(b, "x")),
                                      dt_batch_get(b, "y"), -100));
        dt_ctx_reset(out->ctx);
    }
    dt_set_grad_enabled(out->ctx, g);
    out->val = v / (double)(calls * GAS);
    dt_loader_free(l);
    dt_engine_free(e);
    dt_comm_finalize(self);
}

/* Train BATCHES global batches with `stages` stages through the fit loop; compare with the
 * reference. Leaves the run's checkpoint directory in `dir` (shared by the ranks). */
static void check_trial(int stages, const char *dir) {
    int W = dt_comm_size(g_world), D = W / stages;
    const uint64_t seed = 7;
    ref_run ref;
    reference(D, seed, &ref);
    g_stages = stages;
    g_n_val = N_VAL;
    reset_seen();
    json_t *cfg = config();
    dt_fit_opts o = fit_opts(dir, BATCHES);
    dt_status st = dt_trainer_fit(&PT, cfg, seed, &o);
    json_decref(cfg);
    CHECK_MSG(st == DT_OK, "%d stages, rank %d: %s", stages, mt_rank, dt_last_error());
    int s = g_stage_seen;
    bool edge = s == 0 || s == stages - 1;
    /* once per global batch; loaders and iterators on the first and last stage only */
    CHECK_MSG(g_calls == BATCHES, "rank %d: ds_train_batch ran %lld times for %d batches", mt_rank,
              (long long)g_calls, BATCHES);
    CHECK_MSG(g_builds == (edge ? 1 : 0), "rank %d (stage %d of %d) built %lld loaders", mt_rank, s,
              stages, (long long)g_builds);
    CHECK_MSG(edge ? g_null_it == 0 && g_data_it == BATCHES : g_null_it == BATCHES,
              "rank %d (stage %d): %lld calls without an iterator, %lld with", mt_rank, s,
              (long long)g_null_it, (long long)g_data_it);
    /* validations at batches 5, 10 and 12: floor(N_VAL / (MB x D) / GAS) calls each */
    CHECK_MSG(g_evals == 3 * ((N_VAL / (MB * D)) / GAS), "rank %d: %lld evaluation calls", mt_rank,
              (long long)g_evals);
    /* the losses of every global batch, the reported averages */
    int bad = 0;
    double mean = 0;
    for (int k = 0; k < BATCHES; k++) {
        bad += !(fabsf(g_losses[k] - ref.losses[k]) <= 1e-5f * fabsf(ref.losses[k]));
        mean += ref.losses[k] / BATCHES;
    }
    CHECK_MSG(bad == 0, "%d stages, rank %d: %d losses differ from one process (first %g vs %g)",
              stages, mt_rank, bad, (double)g_losses[0], (double)ref.losses[0]);
    if (mt_rank == 0) {
        CHECK_MSG(fabs(g_train_avg - mean) <= 1e-5 * fabs(mean),
                  "reported training loss %g, one process %g", g_train_avg, mean);
        CHECK_MSG(fabs(g_val - ref.val) <= 1e-5 * fabs(ref.val),
                  "reported validation loss %g, one process %g", g_val, ref.val);
    }
    /* the consolidated weights in the trial checkpoint against the reference's */
    dt_comm_barrier(g_world);
    if (mt_rank == 0) {
        char p[400];
        snprintf(p, sizeof p, "%s/batch_%d/model0/model.safetensors", dir, BATCHES);
        dt_safetensors *f = dt_safetensors_open(p);
        CHECK_MSG(f != NULL, "%s: %s", p, dt_last_error());
        dt_ctx *c = dt_ctx_new(NULL, 1);
        double worst = 0;
        int missing = 0;
        for (int i = 0; f && i < dt_module_param_count(ref.net); i++) {
            const char *nm = dt_module_param_name(ref.net, i);
            dt_tensor *a = dt_safetensors_get(f, c, nm), *b = dt_module_param_tensor(ref.net, i);
            if (!a || dt_numel(a) != dt_numel(b)) {
                missing++;
                continue;
            }
            worst = fmax(worst, fx_rel_l2(a->data, b->data, dt_numel(b)));
        }
        CHECK_MSG(f && missing == 0 && worst <= 1e-5,
                  "%d stages: weights differ from one process by %.3g (%d missing)", stages, worst,
                  missing);
        dt_safetensors_close(f);
        dt_ctx_free(c);
        snprintf(p, sizeof p, "%s/batch_%d", dir, BATCHES);
        dt_ckpt *ck = dt_ckpt_open(p); /* every slot's files listed and verified */
        CHECK_MSG(ck != NULL, "%s", dt_last_error());
        for (int k = 0; ck && k < stages; k++) {
            char rel[128];
            snprintf(rel, sizeof rel, "model0/stage_%d/engine/optim_shard_0_of_%d.safetensors", k,
                     D);
            CHECK_MSG(dt_ckpt_path(ck, rel) != NULL, "%s missing from the checkpoint", rel);
        }
        dt_ckpt_close(ck);
    }
    dt_comm_barrier(g_world);
    dt_module_free(ref.net);
    dt_ctx_free(ref.ctx);
}

/* 2 stages (x 2 data-parallel at W = 4): parity, then a stop at 6 and a resume to 12 gives
 * the files of the uninterrupted run. */
static void test_two_stages_and_resume(void) {
    int W = dt_comm_size(g_world), D = W / 2;
    int64_t tag = mt_shared_tag(g_world);
    char full[256], half[256];
    snprintf(full, sizeof full, "/tmp/dtrain-pipetrial-full-%lld", (long long)tag);
    snprintf(half, sizeof half, "/tmp/dtrain-pipetrial-half-%lld", (long long)tag);
    check_trial(2, full);
    g_stages = 2;
    json_t *cfg = config();
    dt_fit_opts o = fit_opts(half, BATCHES / 2);
    CHECK_MSG(dt_trainer_fit(&PT, cfg, 7, &o) == DT_OK, "rank %d: %s", mt_rank, dt_last_error());
    char resume[300];
    snprintf(resume, sizeof resume, "%s/batch_%d", half, BATCHES / 2);
    reset_seen();
    o = fit_opts(half, BATCHES);
    o.latest_checkpoint = resume;
    CHECK_MSG(dt_trainer_fit(&PT, cfg, 7, &o) == DT_OK, "rank %d: resume: %s", mt_rank,
              dt_last_error());
    CHECK_MSG(g_calls == BATCHES / 2, "rank %d: %lld calls after the resume", mt_rank,
              (long long)g_calls);
    json_decref(cfg);
    dt_comm_barrier(g_world);
    if (mt_rank == 0) {
        char rel[40][128];
        int n = 0;
        snprintf(rel[n++], 128, "model0/model.safetensors");
        for (int i = 0; i < NL; i++) snprintf(rel[n++], 128, "model0/layer_%d.safetensors", i);
        for (int s = 0; s < 2; s++) {
            snprintf(rel[n++], 128, "model0/stage_%d/engine/model.safetensors", s);
            snprintf(rel[n++], 128, "model0/stage_%d/engine/engine_state.json", s);
            for (int r = 0; r < D; r++)
                snprintf(rel[n++], 128, "model0/stage_%d/engine/optim_shard_%d_of_%d.safetensors",
                         s, r, D);
        }
        for (int i = 0; i < n; i++) {
            char a[600], b[600];
            snprintf(a, sizeof a, "%s/batch_%d/%.127s", full, BATCHES, rel[i]);
            snprintf(b, sizeof b, "%s/batch_%d/%.127s", half, BATCHES, rel[i]);
            CHECK_MSG(fx_same_file(a, b), "W=%d: %s differs after stop + resume", W, rel[i]);
        }
        CHECK(fx_rmtree(full));
        CHECK(fx_rmtree(half));
    }
    dt_comm_barrier(g_world);
}

/* Every rank a stage (W = 4): the middle stages build no loader and get no iterator. */
static void test_all_stages(void) {
    int W = dt_comm_size(g_world);
    if (W < 3) return;
    int64_t tag = mt_shared_tag(g_world);
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/dtrain-pipetrial-all-%lld", (long long)tag);
    check_trial(W, dir);
    if (mt_rank == 0) CHECK(fx_rmtree(dir));
    dt_comm_barrier(g_world);
}

/* A validation loader shorter than one pipeline evaluation: refused on every slot. */
static void test_short_validation(void) {
    int W = dt_comm_size(g_world), D = W / 2;
    int64_t tag = mt_shared_tag(g_world);
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/dtrain-pipetrial-short-%lld", (long long)tag);
    g_stages = 2;
    g_n_val = (int64_t)MB * D * (GAS - 1); /* GAS - 1 micro-batches per shard */
    reset_seen();
    json_t *cfg = config();
    dt_fit_opts o = fit_opts(dir, 2);
    dt_status st = dt_trainer_fit(&PT, cfg, 7, &o);
    json_decref(cfg);
    CHECK_MSG(st == DT_ERR_CONFIG && strstr(dt_last_error(), "validation loader") &&
                  strstr(dt_last_error(), "gradient_accumulation_steps"),
              "rank %d: %d %s", mt_rank, (int)st, dt_last_error());
    CHECK(g_calls == 0);
    g_n_val = N_VAL;
    dt_comm_barrier(g_world);
    if (mt_rank == 0) CHECK(fx_rmtree(dir));
    dt_comm_barrier(g_world);
}

int main(void) {
    if (!mt_begin(&g_world)) return 1;
    dt_log_set_level(DT_LOG_ERROR);
    toy_cfg = toy_defaults(); /* the toy dataset: DIM features, CLASSES classes */
    toy_cfg.dim = DIM;
    toy_cfg.classes = CLASSES;
    toy_cfg.shuffle = toy_cfg.drop_last = true;
    toy_data(6, N);
    /* the initial weights: rank 0 writes them where every rank reads them */
    int64_t tag = mt_shared_tag(g_world);
    snprintf(g_init, sizeof g_init, "/tmp/dtrain-pipetrial-init-%lld.safetensors", (long long)tag);
    if (mt_rank == 0) CHECK(pipe_mlp_save_init(g_init, 3));
    dt_comm_barrier(g_world);
    MT_RUN(test_two_stages_and_resume);
    MT_RUN(test_all_stages);
    MT_RUN(test_short_validation);
    dt_comm_barrier(g_world);
    if (mt_rank == 0) unlink(g_init);
    return mt_finish(g_world, NULL);
}
