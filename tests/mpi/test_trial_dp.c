/* Data-parallel training through the trial API under mpirun: W slots with per-slot batch G/W
 * train the same model as one process with batch G (the gradients are averaged across slots
 * at every optimiser step and each slot sees its shard of every global batch). Checks the
 * parameters after 12 steps agree within 1e-5 relative, that only the chief writes
 * checkpoints, and that validation metrics are the same on every slot. */
#define _GNU_SOURCE
#include "dtrain/trial.h"
#include "dtrain/trialio.h"
#include "fixtures/files.h"
#include "fixtures/toy_trial.h"
#include "mpi_test.h"

#include <string.h>

/* the toy trial: a 10 -> 24 -> 4 MLP, AdamW, 96 shuffled training records (the last partial
 * batch dropped), 40 validation records, the validation loss seen by the slot in toy_last_val */
static dt_trial_def DP;

static void test_dp_matches_single(dt_comm *world) {
    int W = dt_comm_size(world);
    int64_t tag = mt_shared_tag(world);
    char ref[256], dpd[256];
    snprintf(ref, sizeof ref, "/tmp/dtrain-dp-ref-%lld-%d", (long long)tag, mt_rank);
    snprintf(dpd, sizeof dpd, "/tmp/dtrain-dp-%lld", (long long)tag);
    json_error_t e;
    json_t *cfg = json_loads("{\"hyperparameters\": {\"global_batch_size\": 16}}", 0, &e);
    /* the reference: one process with the whole global batch */
    setenv("DTRAIN_COMM_BACKEND", "self", 1);
    dt_fit_opts o = toy_fit_opts(ref, 12, 6);
    CHECK(dt_trainer_fit(&DP, cfg, 11, &o) == DT_OK);
    unsetenv("DTRAIN_COMM_BACKEND");
    double ref_val = toy_last_val;
    /* data parallel over all ranks */
    o.checkpoint_dir = dpd;
    CHECK_MSG(dt_trainer_fit(&DP, cfg, 11, &o) == DT_OK, "rank %d: %s", mt_rank, dt_last_error());
    /* every slot saw the same validation loss */
    double v = toy_last_val;
    CHECK_MSG(mt_same_everywhere(world, v), "validation loss differs across slots");
    CHECK_MSG(fabs(v - ref_val) <= 1e-5 * fabs(ref_val), "validation loss %g vs single %g", v, ref_val);
    dt_comm_barrier(world);
    if (mt_rank == 0) {
        char pa[300], pb[300];
        snprintf(pa, sizeof pa, "%s/batch_12/model.safetensors", ref);
        snprintf(pb, sizeof pb, "%s/batch_12/model.safetensors", dpd);
        double worst = toy_weights_rel_diff(pa, pb);
        CHECK_MSG(worst <= 1e-5, "W=%d: parameters differ from one process by %g relative", W, worst);
        CHECK(fx_rmtree(dpd));
    }
    CHECK(fx_rmtree(ref));
    json_decref(cfg);
}

int main(void) {
    dt_comm *world = NULL;
    if (!mt_begin(&world)) return 1;
    toy_cfg = toy_mlp(10, 24, 4, 96, 40);
    toy_cfg.shuffle = toy_cfg.drop_last = true;
    toy_cfg.optim = DT_OPTIM_ADAMW;
    toy_cfg.lr = 0.01f;
    toy_data(2, toy_cfg.n_train);
    DP = ToyPlain;
    DP.build_callbacks = toy_callbacks;
    MT_RUN(test_dp_matches_single, world);
    return mt_finish(world, NULL);
}
