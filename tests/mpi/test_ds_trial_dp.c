/* Engine-based trials (ds_trial.c) under mpirun, W = 2 and 4 slots:
 *   - data-parallel sharding: over one epoch the slots' micro-batches hold every sample exactly
 *     once;
 *   - W slots (micro-batch 16 / (2W), gas 2, ZeRO stage 2) train the same model as one process
 *     with the whole global batch of 16 (weights within 1e-5 relative), and the validation
 *     metrics are reduced to the same value on every slot;
 *   - every slot writes its engine shards into the one committed checkpoint directory (which
 *     verifies), and a stop + resume gives the same engine files bit for bit as an
 *     uninterrupted run (ZeRO stage 3). */
#define _GNU_SOURCE
#include "dtrain/engine.h"
#include "dtrain/trial.h"
#include "dtrain/trialio.h"
#include "mpi_test.h"

#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N 96
#define N_VAL 40
#define DIM 10
#define GLOBAL 16

static float g_x[N * DIM];
static int64_t g_y[N];
static double g_val;            /* last validation loss seen by this slot */
static int g_seen[N];           /* samples this slot trained on during the first epoch */
static int64_t g_batches_per_epoch;
static int g_stage;
static bool g_mpu;              /* test_mpu: the model-parallel unit below */
static int g_builds;            /* loaders this slot built */
static int64_t g_first[64];     /* indices of this slot's first micro-batch */
static int64_t g_n_first;

static int mpu_rank(void *u) { (void)u; return 0; }
static int mpu_world(void *u) { (void)u; return 1; }
static bool mpu_report(void *u) { (void)u; return mt_rank == 0; }
static int g_size;
static bool mpu_build(void *u) { (void)u; return mt_rank != g_size - 1; }

typedef struct dp {
    dt_trial_ctx *c;
    dt_engine *e;
} dp;

static void *dp_init(dt_trial_ctx *c) {
    dp *t = calloc(1, sizeof *t);
    t->c = c;
    dt_module *net = dt_nn_sequential(dt_nn_linear(DIM, 24, true), dt_nn_relu(),
                                      dt_nn_linear(24, 4, true), NULL);
    dt_module_build(net, dt_trial_runtime(c), dt_trial_seed(c));
    json_t *cfg = dt_ds_config_from_hparams(c);
    dt_engine *e = cfg ? dt_engine_init(net, cfg) : NULL;
    json_decref(cfg);
    if (!e) dt_module_free(net);
    t->e = dt_wrap_model_engine(c, e);
    if (!t->e) {
        free(t);
        return NULL;
    }
    if (g_mpu) {
        /* no data parallelism of the data (every slot reads all of it), only rank 0 reports
         * metrics, and the last rank builds no loaders */
        static dt_model_parallel_unit mpu;
        memset(&mpu, 0, sizeof mpu);
        mpu.data_parallel_rank = mpu_rank;
        mpu.data_parallel_world_size = mpu_world;
        mpu.should_report_metrics = mpu_report;
        mpu.should_build_data_loader = mpu_build;
        if (dt_set_mpu(c, &mpu) != DT_OK) {
            free(t);
            return NULL;
        }
    }
    return t;
}

static dt_loader *dp_loader(dp *t, int64_t n, bool train) {
    dt_array_field f[2] = {
        {.field = {.name = "x", .dtype = DT_DTYPE_F32, .ndim = 1, .shape = {DIM}}, .data = g_x},
        {.field = {.name = "y", .dtype = DT_DTYPE_I64, .ndim = 0}, .data = g_y},
    };
    dt_loader_opts o = {.batch_size = dt_trial_train_micro_batch_size(t->c), .shuffle = train,
                        .drop_last = train, .seed = dt_trial_seed(t->c), .take_dataset = true};
    return dt_loader_new(dt_trial_runtime(t->c), dt_dataset_from_arrays(2, f, n, false), &o);
}

static dt_loader *dp_train_loader(void *s) {
    g_builds++;
    return dp_loader(s, N, true);
}
static dt_loader *dp_val_loader(void *s) { return dp_loader(s, N_VAL, false); }

static dt_metrics dp_train(void *s, dt_batch_iter *it, int64_t e, int64_t i) {
    (void)e;
    dp *t = s;
    if (!it) {
        /* a slot without data (set_mpu): a step with zero gradients keeps it in the group */
        if (dt_engine_step(t->e) != DT_OK) return dt_metrics_error();
        return dt_metrics_empty();
    }
    dt_batch *b = dt_batch_iter_next(it);
    if (!b) return dt_metrics_error();
    if (i == 0 && g_n_first == 0)
        for (int64_t k = 0; k < b->n_indices && k < 64; k++) g_first[g_n_first++] = b->indices[k];
    if (i < g_batches_per_epoch)
        for (int64_t k = 0; k < b->n_indices; k++) g_seen[b->indices[k]]++;
    dt_tensor *loss = dt_cross_entropy(dt_engine_forward(t->e, dt_batch_get(b, "x")),
                                       dt_batch_get(b, "y"), -100);
    if (!loss) return dt_metrics_error();
    double l = dt_item(loss);
    if (dt_engine_backward(t->e, loss) || dt_engine_step(t->e)) return dt_metrics_error();
    return dt_metrics_scalar("loss", l);
}

static dt_metrics dp_eval(void *s, dt_batch_iter *it, int64_t i) {
    (void)i;
    dp *t = s;
    if (!it) return dt_metrics_scalar("validation_loss", 1e9); /* must not count */
    dt_batch *b = dt_batch_iter_next(it);
    if (!b) return dt_metrics_error();
    dt_tensor *loss = dt_cross_entropy(dt_engine_forward(t->e, dt_batch_get(b, "x")),
                                       dt_batch_get(b, "y"), -100);
    if (!loss) return dt_metrics_error();
    /* slots that do not report metrics answer nonsense: it must not reach the result */
    double v = dt_item(loss) + (g_mpu && mt_rank != 0 ? 1000.0 : 0.0);
    return dt_metrics_scalar("validation_loss", v);
}

static void dp_free(void *s) { free(s); }

static void on_val_end(void *self, const dt_metrics *m) {
    (void)self;
    dt_metrics_get(m, "validation_loss", &g_val);
}

static int dp_callbacks(void *self, dt_callback *out, const char **names, int max) {
    (void)self;
    if (max < 1) return 0;
    memset(out, 0, sizeof *out);
    out->on_validation_end = on_val_end;
    names[0] = "val_probe";
    return 1;
}

static const dt_trial_def DP = {
    .name = "DsDP", .init = dp_init, .build_training_data_loader = dp_train_loader,
    .build_validation_data_loader = dp_val_loader, .ds_train_batch = dp_train,
    .ds_evaluate_batch = dp_eval, .build_callbacks = dp_callbacks, .free = dp_free,
};

/* The experiment config: the engine config as an object hyperparameter, 16 records per global
 * batch as micro-batches of 16 / (2W) with 2 accumulation steps. */
static json_t *config(int W) {
    json_t *ds = json_pack("{s:i, s:i, s:i, s:{s:s, s:{s:f}}, s:{s:i}}", "train_batch_size",
                           GLOBAL, "gradient_accumulation_steps", 2, "steps_per_print", 100000,
                           "optimizer", "type", "AdamW", "params", "lr", 0.01,
                           "zero_optimization", "stage", g_stage);
    (void)W;
    return json_pack("{s:{s:o}}", "hyperparameters", "deepspeed_config", ds);
}

static dt_fit_opts fit_opts(const char *dir, int64_t batches) {
    dt_fit_opts o;
    memset(&o, 0, sizeof o);
    o.max_length = (dt_length){DT_UNIT_BATCHES, batches};
    o.validation_period = (dt_length){DT_UNIT_BATCHES, 3};
    o.checkpoint_policy = DT_CKPT_NONE;
    o.quiet = true;
    o.save_trial_latest = 1;
    o.checkpoint_dir = dir;
    return o;
}

static float *read_weights(const char *ckpt, int64_t *n) {
    char p[600];
    snprintf(p, sizeof p, "%s/model0/model.safetensors", ckpt);
    dt_safetensors *f = dt_safetensors_open(p);
    if (!f) return NULL;
    dt_ctx *ctx = dt_ctx_new(NULL, 0);
    const char *names[4] = {"0.weight", "0.bias", "2.weight", "2.bias"};
    float *out = NULL;
    *n = 0;
    for (int i = 0; i < 4; i++) {
        dt_tensor *t = dt_safetensors_get(f, ctx, names[i]);
        if (!t) continue;
        out = realloc(out, sizeof(float) * (size_t)(*n + dt_numel(t)));
        memcpy(out + *n, t->data, dt_nbytes(t));
        *n += dt_numel(t);
    }
    dt_safetensors_close(f);
    dt_ctx_free(ctx);
    return out;
}

static int64_t shared_tag(dt_comm *world) {
    int64_t tag = (int64_t)getpid();
    dt_comm_broadcast(world, &tag, sizeof tag, 0);
    return tag;
}

static void test_dp_matches_single(dt_comm *world) {
    int W = dt_comm_size(world);
    int64_t tag = shared_tag(world);
    char ref[256], dpd[256];
    snprintf(ref, sizeof ref, "/tmp/dtrain-dsdp-ref-%lld-%d", (long long)tag, mt_rank);
    snprintf(dpd, sizeof dpd, "/tmp/dtrain-dsdp-%lld", (long long)tag);
    g_stage = 2;
    json_t *cfg = config(W);
    const int64_t B = 12;
    /* the reference: one process, micro-batches of 8 */
    setenv("DTRAIN_COMM_BACKEND", "self", 1);
    dt_fit_opts o = fit_opts(ref, B);
    g_batches_per_epoch = 0;
    CHECK_MSG(dt_trainer_fit(&DP, cfg, 11, &o) == DT_OK, "single: %s", dt_last_error());
    unsetenv("DTRAIN_COMM_BACKEND");
    double ref_val = g_val;
    /* data parallel over all ranks; one epoch is N / 16 = 6 global batches */
    memset(g_seen, 0, sizeof g_seen);
    g_batches_per_epoch = N / GLOBAL;
    o = fit_opts(dpd, B);
    CHECK_MSG(dt_trainer_fit(&DP, cfg, 11, &o) == DT_OK, "rank %d: %s", mt_rank, dt_last_error());
    /* sharding: every sample exactly once over the slots in the first epoch */
    int64_t seen[N];
    int64_t mine = 0;
    for (int i = 0; i < N; i++) mine += seen[i] = g_seen[i];
    CHECK_MSG(mine == N / W, "rank %d trained on %lld samples in epoch 0, expected %d", mt_rank,
              (long long)mine, N / W);
    dt_comm_allreduce(world, seen, N, DT_COMM_DTYPE_I64, DT_REDUCE_OP_SUM);
    int64_t bad = 0;
    for (int i = 0; i < N; i++) bad += seen[i] != 1;
    CHECK_MSG(bad == 0, "%lld samples not seen exactly once over the slots", (long long)bad);
    /* metrics: reduced to one value on every slot, that of one process */
    double vmax = g_val, vmin = g_val;
    dt_comm_allreduce(world, &vmax, 1, DT_COMM_DTYPE_F64, DT_REDUCE_OP_MAX);
    dt_comm_allreduce(world, &vmin, 1, DT_COMM_DTYPE_F64, DT_REDUCE_OP_MIN);
    CHECK_MSG(vmax == vmin, "validation loss differs across slots: %g vs %g", vmin, vmax);
    CHECK_MSG(fabs(g_val - ref_val) <= 1e-5 * fabs(ref_val), "validation loss %g vs single %g",
              g_val, ref_val);
    dt_comm_barrier(world);
    if (mt_rank == 0) {
        char pa[300], pb[300];
        snprintf(pa, sizeof pa, "%s/batch_%lld", ref, (long long)B);
        snprintf(pb, sizeof pb, "%s/batch_%lld", dpd, (long long)B);
        int64_t na = 0, nb = 0;
        float *a = read_weights(pa, &na), *b = read_weights(pb, &nb);
        CHECK(a && b && na == nb && na > 0);
        double worst = 0;
        for (int64_t i = 0; a && b && i < na; i++) {
            double r = fabs((double)a[i] - b[i]) / (fabs((double)a[i]) + 1e-3);
            if (r > worst) worst = r;
        }
        CHECK_MSG(worst <= 1e-5, "W=%d: parameters differ from one process by %g relative", W, worst);
        free(a), free(b);
        /* one trial checkpoint holding every slot's shard, verified */
        dt_ckpt *ck = dt_ckpt_open(pb);
        CHECK_MSG(ck != NULL, "%s", dt_last_error());
        for (int r = 0; ck && r < W; r++) {
            char rel[96];
            snprintf(rel, sizeof rel, "model0/optim_shard_%d_of_%d.safetensors", r, W);
            CHECK_MSG(dt_ckpt_path(ck, rel) != NULL, "%s missing from the checkpoint", rel);
        }
        dt_ckpt_close(ck);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dpd);
        CHECK(system(cmd) == 0);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", ref);
    CHECK(system(cmd) == 0);
    dt_comm_barrier(world);
    json_decref(cfg);
}

static bool same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    while (same) {
        int x = fgetc(fa), y = fgetc(fb);
        if (x != y) same = false;
        if (x == EOF || y == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    if (!same) fprintf(stderr, "  differ: %s vs %s\n", a, b);
    return same;
}

static void test_resume_exact(dt_comm *world) {
    int W = dt_comm_size(world);
    int64_t tag = shared_tag(world);
    char full[256], half[256];
    snprintf(full, sizeof full, "/tmp/dtrain-dsdp-full-%lld", (long long)tag);
    snprintf(half, sizeof half, "/tmp/dtrain-dsdp-half-%lld", (long long)tag);
    g_stage = 3;
    g_batches_per_epoch = 0;
    json_t *cfg = config(W);
    const int64_t B = 8, H = 4;
    dt_fit_opts o = fit_opts(full, B);
    CHECK_MSG(dt_trainer_fit(&DP, cfg, 5, &o) == DT_OK, "rank %d: %s", mt_rank, dt_last_error());
    o = fit_opts(half, H);
    CHECK_MSG(dt_trainer_fit(&DP, cfg, 5, &o) == DT_OK, "rank %d: %s", mt_rank, dt_last_error());
    char resume[300];
    snprintf(resume, sizeof resume, "%s/batch_%lld", half, (long long)H);
    o = fit_opts(half, B);
    o.latest_checkpoint = resume;
    CHECK_MSG(dt_trainer_fit(&DP, cfg, 5, &o) == DT_OK, "rank %d: resume: %s", mt_rank,
              dt_last_error());
    dt_comm_barrier(world);
    if (mt_rank == 0) {
        const char *files[] = {"model0/model.safetensors", "model0/engine_state.json", NULL};
        char a[400], b[400];
        for (int i = 0; files[i]; i++) {
            snprintf(a, sizeof a, "%s/batch_%lld/%s", full, (long long)B, files[i]);
            snprintf(b, sizeof b, "%s/batch_%lld/%s", half, (long long)B, files[i]);
            CHECK_MSG(same_file(a, b), "W=%d stage 3: %s differs after resume", W, files[i]);
        }
        for (int r = 0; r < W; r++) {
            char rel[96];
            snprintf(rel, sizeof rel, "model0/optim_shard_%d_of_%d.safetensors", r, W);
            snprintf(a, sizeof a, "%s/batch_%lld/%s", full, (long long)B, rel);
            snprintf(b, sizeof b, "%s/batch_%lld/%s", half, (long long)B, rel);
            CHECK_MSG(same_file(a, b), "W=%d stage 3: %s differs after resume", W, rel);
        }
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf %s %s", full, half);
        CHECK(system(cmd) == 0);
    }
    dt_comm_barrier(world);
    json_decref(cfg);
}

/* A model-parallel unit: the data is not sharded, rank 0 alone reports metrics, the last rank
 * builds no loaders (its iterators hand out nothing) and still takes part in every step. */
static void test_mpu(dt_comm *world) {
    int W = dt_comm_size(world);
    int64_t tag = shared_tag(world);
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/dtrain-dsdp-mpu-%lld", (long long)tag);
    g_mpu = true;
    g_stage = 0;
    g_builds = 0;
    g_n_first = 0;
    g_batches_per_epoch = 0;
    g_val = NAN;
    json_t *cfg = config(W);
    dt_fit_opts o = fit_opts(dir, 4);
    CHECK_MSG(dt_trainer_fit(&DP, cfg, 9, &o) == DT_OK, "rank %d: %s", mt_rank, dt_last_error());
    CHECK_MSG(g_builds == (mt_rank == W - 1 ? 0 : 1), "rank %d built %d training loaders", mt_rank,
              g_builds);
    /* unsharded: every slot with data saw the same first micro-batch */
    int64_t lo[64], hi[64];
    for (int k = 0; k < 64; k++) lo[k] = hi[k] = k < g_n_first ? g_first[k] : -1;
    int64_t n = mt_rank == W - 1 ? 0 : g_n_first, nmax = n;
    dt_comm_allreduce(world, &nmax, 1, DT_COMM_DTYPE_I64, DT_REDUCE_OP_MAX);
    if (mt_rank == W - 1)
        for (int k = 0; k < 64; k++) lo[k] = INT64_MAX, hi[k] = INT64_MIN;
    dt_comm_allreduce(world, lo, 64, DT_COMM_DTYPE_I64, DT_REDUCE_OP_MIN);
    dt_comm_allreduce(world, hi, 64, DT_COMM_DTYPE_I64, DT_REDUCE_OP_MAX);
    CHECK(nmax > 0 && !memcmp(lo, hi, sizeof lo));
    CHECK_MSG(mt_rank == W - 1 ? g_n_first == 0 : g_n_first == nmax,
              "rank %d: first micro-batch of %lld samples", mt_rank, (long long)g_n_first);
    /* metrics: only rank 0's values count (the others add 1000) */
    CHECK_MSG(g_val < 100, "rank %d: validation loss %g includes a non-reporting slot", mt_rank,
              g_val);
    double vmax = g_val, vmin = g_val;
    dt_comm_allreduce(world, &vmax, 1, DT_COMM_DTYPE_F64, DT_REDUCE_OP_MAX);
    dt_comm_allreduce(world, &vmin, 1, DT_COMM_DTYPE_F64, DT_REDUCE_OP_MIN);
    CHECK(vmax == vmin);
    dt_comm_barrier(world);
    if (mt_rank == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        CHECK(system(cmd) == 0);
    }
    g_mpu = false;
    json_decref(cfg);
}

int main(void) {
    dt_comm *world = NULL;
    if (dt_comm_init(&world) != DT_OK) {
        fprintf(stderr, "dt_comm_init: %s\n", dt_last_error());
        return 1;
    }
    mt_rank = dt_comm_rank(world);
    dt_log_set_level(DT_LOG_ERROR);
    dt_rng r;
    dt_rng_init(&r, 2);
    dt_rng_fill_normal(&r, g_x, N * DIM, 0, 1);
    for (int i = 0; i < N; i++) g_y[i] = (g_x[i * DIM] > 0) + 2 * (g_x[i * DIM + 1] > 0);
    MT_RUN(test_dp_matches_single, world);
    MT_RUN(test_resume_exact, world);
    g_size = dt_comm_size(world);
    MT_RUN(test_mpu, world);
    int rc = mt_end(world);
    dt_comm_finalize(world);
    return rc;
}
