/* What a hand-written Core API loop always needs, from the library:
 *   - dt_core_init_args takes the local fallback's flags out of argv and keeps the rest;
 *   - dt_validate_classifier is the loop over a validation loader it replaces (loss and
 *     accuracy weighted by batch records), leaves training mode and gradients as they were;
 *   - dt_core_preempt_save: false while nothing asks to stop; after SIGTERM (the local core's
 *     preemption) the model and optimizer are checkpointed at the given steps and load back;
 *     a lost run writes nothing and fails;
 *   - dt_core_save_module without metadata records the optimizer's step count. */
#include <dtrain/core.h>
#include <dtrain/dtrain.h>

#include "fixtures/files.h"
#include "test.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 23
#define IN 5
#define C 3

static char g_dir[256];

static void test_init_args(void) {
    char *argv[] = {"prog",     "--data",           "d",  "--max-batches", "7",
                    "--resume", "--checkpoint-dir", "ck", "--quiet",       "tail",
                    NULL};
    int argc = 10;
    dt_core_init_opts o = {.max_length = {DT_UNIT_BATCHES, 400}};
    CHECK(dt_core_init_args(&o, &argc, argv) == DT_OK);
    CHECK(argc == 4 && !strcmp(argv[1], "--data") && !strcmp(argv[2], "d") &&
          !strcmp(argv[3], "tail") && argv[4] == NULL);
    CHECK(o.max_length.unit == DT_UNIT_BATCHES && o.max_length.n == 7 && o.resume && o.quiet &&
          !strcmp(o.checkpoint_dir, "ck") && o.metrics_out == NULL);
    char *bad1[] = {"prog", "--max-batches", "0", NULL}, *bad2[] = {"prog", "--metrics-out", NULL};
    argc = 3;
    CHECK(dt_core_init_args(&o, &argc, bad1) == DT_ERR_CONFIG &&
          strstr(dt_last_error(), "positive integer"));
    argc = 2;
    CHECK(dt_core_init_args(&o, &argc, bad2) == DT_ERR_CONFIG &&
          strstr(dt_last_error(), "needs a value"));
}

static dt_loader *val_loader(dt_ctx *ctx) {
    static float x[N * IN];
    static int64_t y[N];
    for (int i = 0; i < N * IN; i++) x[i] = (float)((i * 37) % 11) / 5.f - 1.f;
    for (int i = 0; i < N; i++) y[i] = (i * 5) % C;
    dt_array_field f[2] = {{{.name = "x", .dtype = DT_DTYPE_F32, .ndim = 1, .shape = {IN}}, x},
                           {{.name = "y", .dtype = DT_DTYPE_I64}, y}};
    dt_loader_opts o = {.batch_size = 4, .take_dataset = true}; /* the last batch of 3 */
    return dt_loader_new(ctx, dt_dataset_from_arrays(2, f, N, true), &o);
}

static void test_validate(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    dt_module *net = dt_model_mlp(IN, 8, 2, C);
    dt_loader *l = val_loader(ctx);
    CHECK(net && l && dt_module_build(net, ctx, 3) == DT_OK);
    dt_metrics m = dt_validate_classifier(net, l);
    /* the hand-written loop */
    double loss = 0, right = 0, n = 0;
    dt_batch *b = NULL;
    bool grad = dt_set_grad_enabled(ctx, false);
    dt_ctx_set_training(ctx, false);
    dt_loader_start_epoch(l, 0, 0);
    while (dt_loader_next(l, &b) == DT_OK && b) {
        dt_ctx_reset(ctx);
        dt_tensor *logits = dt_module_forward(net, dt_batch_get(b, "x"));
        loss += dt_item(dt_cross_entropy(logits, dt_batch_get(b, "y"), -100)) * b->records;
        right += dt_accuracy(logits, dt_batch_get(b, "y")) * b->records;
        n += b->records;
    }
    dt_set_grad_enabled(ctx, grad);
    dt_ctx_set_training(ctx, true);
    double v, acc;
    CHECK(n == N && dt_metrics_get(&m, "validation_loss", &v) && v == loss / n);
    CHECK(dt_metrics_get(&m, "accuracy", &acc) && acc == right / n && acc > 0);
    CHECK(dt_ctx_training(ctx) && dt_grad_enabled(ctx)); /* restored */
    dt_ctx_set_training(ctx, false);
    dt_validate_classifier(net, l);
    CHECK(!dt_ctx_training(ctx));
    dt_metrics e = dt_validate_classifier(net, NULL);
    CHECK(!dt_metrics_get(&e, "validation_loss", &v) && dt_last_status() == DT_ERR_INVALID);
    dt_loader_free(l);
    dt_module_free(net);
    dt_ctx_free(ctx);
}

static void test_preempt_save(void) {
    unsetenv("DTRAIN_TRIAL_ID");
    char ck[300];
    snprintf(ck, sizeof ck, "%s/ck", g_dir);
    dt_core_init_opts o = {.max_length = {DT_UNIT_BATCHES, 9}, .checkpoint_dir = ck, .quiet = true};
    dt_core *core = NULL;
    CHECK_MSG(dt_core_init(&o, &core) == DT_OK, "%s", dt_last_error());
    if (!core) return;
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    dt_module *net = dt_model_mlp(IN, 8, 2, C);
    CHECK(dt_module_build(net, ctx, 3) == DT_OK);
    dt_optim_config oc = dt_optim_defaults(DT_OPTIM_ADAMW);
    dt_optimizer *opt = dt_optim_new_for_module(&oc, net);
    dt_status st = DT_ERR_IO;
    CHECK(!dt_core_preempt_save(core, 7, net, opt, &st) && st == DT_OK);
    CHECK(dt_core_latest_checkpoint(core) == NULL);
    raise(SIGTERM); /* the local core's preemption */
    CHECK(dt_core_preempt_save(core, 7, net, opt, &st) && st == DT_OK);
    json_t *meta = NULL;
    CHECK(dt_core_load_module(core, "latest", net, opt, &meta) == DT_OK &&
          json_integer_value(json_object_get(meta, "steps_completed")) == 7);
    json_decref(meta);
    /* no metadata: the optimizer's step count */
    dt_optim_set_step_count(opt, 12);
    char uuid[DT_CORE_UUID_MAX];
    CHECK(dt_core_save_module(core, NULL, net, opt, uuid) == DT_OK);
    CHECK(dt_core_load_module(core, uuid, net, opt, &meta) == DT_OK &&
          json_integer_value(json_object_get(meta, "steps_completed")) == 12);
    json_decref(meta);
    core->lost = true; /* disowned: nothing more is written */
    CHECK(dt_core_preempt_save(core, 8, net, opt, &st) && st == DT_ERR_STATE);
    CHECK(!strcmp(dt_core_latest_checkpoint(core), uuid));
    dt_optim_free(opt);
    dt_module_free(net);
    dt_ctx_free(ctx);
    dt_core_free(core);
}

int main(void) {
    if (!fx_tmpdir(g_dir, sizeof g_dir, "dtrain-core-helpers")) return 1;
    TEST_RUN(test_init_args);
    TEST_RUN(test_validate);
    TEST_RUN(test_preempt_save);
    fx_rmtree(g_dir);
    TEST_END();
}
