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
#include "fixtures/files.h"
#include "fixtures/toy_trial.h"
#include "mpi_test.h"

#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N 96
#define GLOBAL 16

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

/* the engine-based toy trial (a 10 -> 24 -> 4 MLP, 96 shuffled training records, the last
 * partial batch dropped, 40 validation records), with a model-parallel unit when asked */
static void *dp_init(dt_trial_ctx *c) {
    toy *t = toy_init_engine(c);
    if (!t || !g_mpu) return t;
    /* no data parallelism of the data (every slot reads all of it), only rank 0 reports
     * metrics, and the last rank builds no loaders */
    static dt_model_parallel_unit mpu;
    memset(&mpu, 0, sizeof mpu);
    mpu.data_parallel_rank = mpu_rank;
    mpu.data_parallel_world_size = mpu_world;
    mpu.should_report_metrics = mpu_report;
    mpu.should_build_data_loader = mpu_build;
    if (dt_set_mpu(c, &mpu) != DT_OK) {
        toy_free(t);
        return NULL;
    }
    return t;
}

static dt_loader *dp_train_loader(void *s) {
    g_builds++;
    return toy_train_loader(s);
}

static dt_metrics dp_train(void *s, dt_batch_iter *it, int64_t e, int64_t i) {
    (void)e;
    toy *t = s;
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
    double l;
    if (toy_engine_micro(t->e, b, &l) != DT_OK) return dt_metrics_error();
    return dt_metrics_scalar("loss", l);
}

static dt_metrics dp_eval(void *s, dt_batch_iter *it, int64_t i) {
    (void)i;
    if (!it) return dt_metrics_scalar("validation_loss", 1e9); /* must not count */
    dt_batch *b = dt_batch_iter_next(it);
    dt_tensor *loss = b ? toy_loss(s, b) : NULL;
    if (!loss) return dt_metrics_error();
    /* slots that do not report metrics answer nonsense: it must not reach the result */
    double v = dt_item(loss) + (g_mpu && mt_rank != 0 ? 1000.0 : 0.0);
    return dt_metrics_scalar("validation_loss", v);
}

static const dt_trial_def DP = {
    .name = "DsDP", .init = dp_init, .build_training_data_loader = dp_train_loader,
    .build_validation_data_loader = toy_val_loader, .ds_train_batch = dp_train,
    .ds_evaluate_batch = dp_eval, .build_callbacks = toy_callbacks, .free = toy_free,
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
    return toy_fit_opts(dir, batches, 3);
}

static void test_dp_matches_single(dt_comm *world) {
    int W = dt_comm_size(world);
    int64_t tag = mt_shared_tag(world);
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
    double ref_val = toy_last_val;
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
    CHECK_MSG(mt_same_everywhere(world, toy_last_val), "validation loss differs across slots");
    CHECK_MSG(fabs(toy_last_val - ref_val) <= 1e-5 * fabs(ref_val),
              "validation loss %g vs single %g", toy_last_val, ref_val);
    dt_comm_barrier(world);
    if (mt_rank == 0) {
        char pa[300], pb[300];
        snprintf(pa, sizeof pa, "%s/batch_%lld", ref, (long long)B);
        snprintf(pb, sizeof pb, "%s/batch_%lld", dpd, (long long)B);
        char wa[400], wb[400];
        snprintf(wa, sizeof wa, "%s/model0/model.safetensors", pa);
        snprintf(wb, sizeof wb, "%s/model0/model.safetensors", pb);
        CHECK(fx_exists(wa) && fx_exists(wb));
        double worst = toy_weights_rel_diff(wa, wb);
        CHECK_MSG(worst <= 1e-5, "W=%d: parameters differ from one process by %g relative", W, worst);
        /* one trial checkpoint holding every slot's shard, verified */
        dt_ckpt *ck = dt_ckpt_open(pb);
        CHECK_MSG(ck != NULL, "%s", dt_last_error());
        for (int r = 0; ck && r < W; r++) {
            char rel[96];
            snprintf(rel, sizeof rel, "model0/optim_shard_%d_of_%d.safetensors", r, W);
            CHECK_MSG(dt_ckpt_path(ck, rel) != NULL, "%s missing from the checkpoint", rel);
        }
        dt_ckpt_close(ck);
        CHECK(fx_rmtree(dpd));
    }
    CHECK(fx_rmtree(ref));
    dt_comm_barrier(world);
    json_decref(cfg);
}

static void test_resume_exact(dt_comm *world) {
    int W = dt_comm_size(world);
    int64_t tag = mt_shared_tag(world);
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
            CHECK_MSG(fx_same_file(a, b), "W=%d stage 3: %s differs after resume", W, files[i]);
        }
        for (int r = 0; r < W; r++) {
            char rel[96];
            snprintf(rel, sizeof rel, "model0/optim_shard_%d_of_%d.safetensors", r, W);
            snprintf(a, sizeof a, "%s/batch_%lld/%s", full, (long long)B, rel);
            snprintf(b, sizeof b, "%s/batch_%lld/%s", half, (long long)B, rel);
            CHECK_MSG(fx_same_file(a, b), "W=%d stage 3: %s differs after resume", W, rel);
        }
        CHECK(fx_rmtree(full) && fx_rmtree(half));
    }
    dt_comm_barrier(world);
    json_decref(cfg);
}

/* A model-parallel unit: the data is not sharded, rank 0 alone reports metrics, the last rank
 * builds no loaders (its iterators hand out nothing) and still takes part in every step. */
static void test_mpu(dt_comm *world) {
    int W = dt_comm_size(world);
    int64_t tag = mt_shared_tag(world);
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/dtrain-dsdp-mpu-%lld", (long long)tag);
    g_mpu = true;
    g_stage = 0;
    g_builds = 0;
    g_n_first = 0;
    g_batches_per_epoch = 0;
    toy_last_val = NAN;
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
    CHECK_MSG(toy_last_val < 100, "rank %d: validation loss %g includes a non-reporting slot",
              mt_rank, toy_last_val);
    CHECK(mt_same_everywhere(world, toy_last_val));
    dt_comm_barrier(world);
    if (mt_rank == 0) {
        CHECK(fx_rmtree(dir));
    }
    g_mpu = false;
    json_decref(cfg);
}

int main(void) {
    dt_comm *world = NULL;
    if (!mt_begin(&world)) return 1;
    dt_log_set_level(DT_LOG_ERROR);
    toy_cfg = toy_mlp(10, 24, 4, N, 40);
    toy_cfg.shuffle = toy_cfg.drop_last = true;
    toy_data(2, N);
    MT_RUN(test_dp_matches_single, world);
    MT_RUN(test_resume_exact, world);
    g_size = dt_comm_size(world);
    MT_RUN(test_mpu, world);
    return mt_finish(world, NULL);
}
