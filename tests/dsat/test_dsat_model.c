/* Tests for src/dsat/: the memory model against the engine's measured peak on one slot
 * (every stage x micro-batch x precision x offload of the gpt and mlp benchmark models; the
 * two-slot half is tests/mpi/test_dsat_memory.c), the DeepSpeed config of a knob set, the
 * trial hyperparameters, the trimmed-mean metrics and the profile's metrics form. */
#include "dsat/dsat_compare.h"
#include "test.h"

#include <math.h>
#include <string.h>

static void test_model_vs_engine(void) {
    cmp_check_all(0);
}

static dt_dsat_profile toy_profile(void) {
    return (dt_dsat_profile){.params = 1000000,
                             .trainable_params = 1000000,
                             .device_budget = 100000000,
                             .activation_per_example = 1000000,
                             .optimizer_bytes_per_param = 8,
                             .slots = 2,
                             .largest_group = 100000,
                             .reduce_bucket_size = 200000,
                             .stage3_live_params = 300000};
}

static void test_model_formula(void) {
    dt_dsat_profile p = toy_profile();
    dt_dsat_knobs k = dt_dsat_knobs_default();
    int64_t n = p.params;
    k.zero_stage = 0; /* 4n + 4n + 8n */
    CHECK(dt_dsat_model_state_bytes(&p, &k) == 16 * n);
    k.zero_stage = 1; /* 4n + 4n + (4 + 8) n / 2 */
    CHECK(dt_dsat_model_state_bytes(&p, &k) == 8 * n + 6 * n);
    k.offload_optimizer = true; /* the master and moments on the host */
    CHECK(dt_dsat_model_state_bytes(&p, &k) == 8 * n);
    k.offload_optimizer = false;
    k.zero_stage = 2; /* 4n + 2n + 6n + two buckets of 4 x (200000 + 100000) */
    CHECK(dt_dsat_model_state_bytes(&p, &k) == 12 * n + 2 * 4 * 300000);
    k.reduce_bucket_size = 5000000; /* a bucket is at most the model */
    CHECK(dt_dsat_model_state_bytes(&p, &k) == 12 * n + 2 * 4 * n);
    k.reduce_bucket_size = 0;
    k.zero_stage = 3; /* 2n + 4 x 300000 gathered + 2n + 6n + buckets */
    CHECK(dt_dsat_model_state_bytes(&p, &k) == 10 * n + 4 * 300000 + 2 * 4 * 300000);
    /* activations grow with the micro-batch above the floor */
    p.activation_floor = 3000000;
    CHECK(dt_dsat_activation_bytes(&p, 1) == 3000000 && dt_dsat_activation_bytes(&p, 5) == 5000000);
    k.zero_stage = 1;
    k.mbs = 7;
    p.other_bytes = 12345;
    CHECK(dt_dsat_predict_bytes(&p, &k) == 14 * n + 7000000 + 12345);
    /* the largest micro-batch under the budget: (100e6 - 14e6 - 12345) / 1e6 */
    int64_t mx = dt_dsat_max_mbs(&p, &k);
    CHECK(mx == 85);
    k.mbs = mx;
    CHECK(dt_dsat_predict_bytes(&p, &k) <= p.device_budget);
    k.mbs = mx + 1;
    CHECK(dt_dsat_predict_bytes(&p, &k) > p.device_budget);
    p.device_budget = 1000; /* nothing fits: still 1 */
    CHECK(dt_dsat_max_mbs(&p, &k) == 1);
}

/* Two profiles whose second step fit in the first's block: the block tails of a larger first
 * step are bounded by the high-water mark's growth (twice it), and "other" grows per example;
 * the largest micro-batch is the last one the prediction fits. */
static void test_refine_unseen_slack(void) {
    dt_dsat_profile p = toy_profile(), q;
    p.micro_batch = 1;
    p.activation_peak = p.activation_floor = 1 << 20; /* one 1 MiB block at 1 and at 2 */
    p.activation_high_water = 11000;
    p.other_bytes = 270000;
    q = p;
    q.micro_batch = 2;
    q.activation_high_water = 19000;
    q.other_bytes = 273000;
    CHECK(dt_dsat_profile_refine(&p, &q) == DT_OK);
    CHECK(p.activation_hw_per_example == 8000 && p.other_per_example == 3000);
    /* at 512: max(1 MiB, 1 MiB + 511 x 8000, 3000 + 2 x 512 x 8000) */
    CHECK(dt_dsat_activation_bytes(&p, 512) == 3000 + 2 * 512 * 8000);
    CHECK(dt_dsat_activation_bytes(&p, 16) == (1 << 20) + 15 * 8000); /* the affine term */
    dt_dsat_knobs k = dt_dsat_knobs_default();
    k.mbs = 512;
    CHECK(dt_dsat_predict_bytes(&p, &k) ==
          dt_dsat_model_state_bytes(&p, &k) + 3000 + 2 * 512 * 8000 + 273000 + 511 * 3000);
    p.device_budget = dt_dsat_predict_bytes(&p, &k) + 1000;
    int64_t mx = dt_dsat_max_mbs(&p, &k);
    CHECK(mx == 512);
    /* a peak that grew with the bytes used shows the tails itself: no bound added */
    dt_dsat_profile a = toy_profile(), b;
    a.micro_batch = 1;
    a.activation_peak = 3 << 20;
    a.activation_high_water = 3000000;
    b = a;
    b.micro_batch = 2;
    b.activation_peak = 6 << 20;
    b.activation_high_water = 6000000;
    CHECK(dt_dsat_profile_refine(&a, &b) == DT_OK);
    CHECK(a.activation_hw_per_example == 0 && a.activation_per_example == 3 << 20);
}

static void test_ds_config(void) {
    json_t *user =
        json_loads("{\"train_batch_size\": 64, \"gradient_accumulation_steps\": 2,"
                   " \"optimizer\": {\"type\": \"Adam\"}, \"autotuning\": {\"enabled\": true},"
                   " \"zero_optimization\": {\"stage\": 1, \"reduce_bucket_size\": 1234,"
                   " \"overlap_comm\": true, \"offload_optimizer\": {\"device\": \"cpu\"}}}",
                   0, NULL);
    dt_dsat_knobs k = dt_dsat_knobs_default();
    k.zero_stage = 2;
    k.mbs = 3;
    json_t *c = dt_dsat_ds_config(user, &k, 4);
    CHECK(c != NULL);
    json_t *z = json_object_get(c, "zero_optimization");
    /* merged: the knobs set, the user's values where the knobs say -1 / 0 */
    CHECK(json_integer_value(json_object_get(z, "stage")) == 2);
    CHECK(json_integer_value(json_object_get(z, "reduce_bucket_size")) == 1234);
    CHECK(json_is_true(json_object_get(z, "overlap_comm")));
    CHECK(json_object_get(z, "offload_optimizer") != NULL);
    CHECK(json_object_get(json_object_get(c, "optimizer"), "type") != NULL);
    /* train_batch_size = mbs x gas x slots, the autotuning section gone */
    CHECK(json_integer_value(json_object_get(c, "train_micro_batch_size_per_gpu")) == 3);
    CHECK(json_integer_value(json_object_get(c, "gradient_accumulation_steps")) == 2);
    CHECK(json_integer_value(json_object_get(c, "train_batch_size")) == 24);
    CHECK(json_object_get(c, "autotuning") == NULL);
    dt_ds_config parsed;
    CHECK(dt_ds_config_parse(c, 4, &parsed) == DT_OK && parsed.zero.stage == 2 &&
          parsed.train_batch_size == 24);
    /* the user's config is not modified */
    CHECK(json_object_get(user, "autotuning") != NULL &&
          json_integer_value(
              json_object_get(json_object_get(user, "zero_optimization"), "stage")) == 1);
    json_decref(c);
    /* knobs that are set replace the user's; stage 0 drops an offload it cannot run */
    k.zero_stage = 0;
    k.reduce_bucket_size = 5000;
    k.allgather_bucket_size = 6000;
    k.overlap_comm = 0;
    k.reduce_scatter = 1;
    k.contiguous_gradients = 0;
    k.allgather_partitions = 1;
    c = dt_dsat_ds_config(user, &k, 1);
    z = json_object_get(c, "zero_optimization");
    CHECK(json_integer_value(json_object_get(z, "reduce_bucket_size")) == 5000);
    CHECK(json_integer_value(json_object_get(z, "allgather_bucket_size")) == 6000);
    CHECK(json_is_false(json_object_get(z, "overlap_comm")) &&
          json_is_true(json_object_get(z, "reduce_scatter")) &&
          json_is_false(json_object_get(z, "contiguous_gradients")) &&
          json_is_true(json_object_get(z, "allgather_partitions")));
    CHECK(json_object_get(z, "offload_optimizer") == NULL);
    CHECK(dt_ds_config_parse(c, 1, &parsed) == DT_OK);
    json_decref(c);
    /* offload from the knobs at stage 3 */
    k.zero_stage = 3;
    k.offload_optimizer = true;
    c = dt_dsat_ds_config(NULL, &k, 2);
    CHECK(c && json_object_get(json_object_get(c, "zero_optimization"), "offload_optimizer"));
    CHECK(json_integer_value(json_object_get(c, "train_batch_size")) == 2 * k.mbs);
    json_decref(c);
    /* bad input */
    k.mbs = 0;
    CHECK(dt_dsat_ds_config(user, &k, 1) == NULL && dt_last_status() == DT_ERR_INVALID);
    k.mbs = 1;
    json_t *arr = json_array();
    CHECK(dt_dsat_ds_config(arr, &k, 1) == NULL && dt_last_status() == DT_ERR_CONFIG);
    json_decref(arr);
    json_decref(user);
}

static void test_trial_hparams(void) {
    json_t *user_ds =
        json_loads("{\"train_batch_size\": 8, \"autotuning\": {}, \"zero_optimization\":"
                   " {\"stage\": 3, \"offload_param\": {\"device\": \"cpu\"}}}",
                   0, NULL);
    json_t *hp = json_loads("{\"deepspeed_config\": \"ds.json\", \"lr\": 0.1}", 0, NULL);
    dt_dsat_knobs k = dt_dsat_knobs_default();
    k.zero_stage = 1;
    k.mbs = 4;
    dt_dsat_run run = {.mode = DT_DSAT_TRIAL,
                       .start_profile_step = 3,
                       .end_profile_step = 5,
                       .predicted_bytes = 777};
    json_t *t = dt_dsat_trial_hparams(hp, user_ds, &k, 2, &run);
    CHECK(t != NULL);
    CHECK(!strcmp(json_string_value(json_object_get(t, "deepspeed_config")), "ds.json"));
    /* merged over the user's config, the overrides give the knob set's config */
    json_t *merged = dt_overwrite_config(user_ds, json_object_get(t, "overwrite_deepspeed_args"));
    dt_ds_config parsed;
    CHECK(merged && dt_ds_config_parse(merged, 2, &parsed) == DT_OK);
    CHECK(parsed.zero.stage == 1 && parsed.train_micro_batch_size_per_gpu == 4 &&
          parsed.train_batch_size == 8 && parsed.zero.offload_param == DT_OFFLOAD_NONE);
    json_decref(merged);
    bool is = false;
    dt_dsat_run back;
    CHECK(dt_dsat_run_from_hparams(t, &is, &back) == DT_OK && is);
    CHECK(back.mode == DT_DSAT_TRIAL && back.start_profile_step == 3 &&
          back.end_profile_step == 5 && back.predicted_bytes == 777);
    json_decref(t);
    CHECK(dt_dsat_run_from_hparams(hp, &is, &back) == DT_OK && !is);
    json_t *bad = json_loads("{\"dsat\": {\"mode\": \"fast\"}}", 0, NULL);
    CHECK(dt_dsat_run_from_hparams(bad, &is, &back) == DT_ERR_CONFIG);
    json_decref(bad);
    bad = json_loads("{\"dsat\": {\"mode\": \"trial\", \"start_profile_step\": 4, "
                     "\"end_profile_step\": 2}}",
                     0, NULL);
    CHECK(dt_dsat_run_from_hparams(bad, &is, &back) == DT_ERR_CONFIG);
    json_decref(bad);
    run.end_profile_step = 2;
    CHECK(dt_dsat_trial_hparams(hp, user_ds, &k, 2, &run) == NULL);
    json_decref(hp);
    json_decref(user_ds);
}

static void test_metrics(void) {
    /* 12 steps; steps 1-2 are warm-up outliers; 3..12 measured; one outlier in the range is
     * trimmed (10% of 10 = 1 from each end) */
    dt_dsat_step s[12];
    for (int i = 0; i < 12; i++)
        s[i] = (dt_dsat_step){
            .forward_s = 0.2, .backward_s = 0.4, .step_s = 0.1, .flops = 7000000000LL};
    s[0].forward_s = s[1].forward_s = 5;
    s[6].forward_s = 9;   /* the largest: trimmed */
    s[7].forward_s = 0.1; /* the smallest: trimmed */
    dt_dsat_metrics m = {0};
    CHECK(dt_dsat_metrics_compute(s, 12, 3, 12, 2, 32, &m) == DT_OK);
    CHECK_NEAR(m.forward_ms, 100, 1e-9); /* 0.2 s per global batch of 2 micro-batches */
    CHECK_NEAR(m.backward_ms, 200, 1e-9);
    CHECK_NEAR(m.step_ms, 50, 1e-9);
    CHECK_NEAR(m.latency_ms, 700, 1e-9);
    CHECK_NEAR(m.throughput, 32 / 0.7, 1e-9);
    CHECK_NEAR(m.flops_per_slot, 1e10, 1);
    CHECK(dt_dsat_metrics_compute(s, 12, 3, 13, 2, 32, &m) == DT_ERR_INVALID);
    CHECK(dt_dsat_metrics_compute(s, 12, 0, 5, 2, 32, &m) == DT_ERR_INVALID);
    dt_metrics r = dt_dsat_metrics_report(&m, 123);
    double v;
    CHECK(dt_metrics_get(&r, "FLOPS_per_gpu", &v) && fabs(v - 1e10) < 1);
    CHECK(dt_metrics_get(&r, "latency", &v) && dt_metrics_get(&r, "throughput", &v));
    CHECK(dt_metrics_get(&r, "predicted_bytes", &v) && v == 123);
    CHECK(dt_metrics_get(&r, "oom", &v) && v == 0);
    m.oom = true; /* an OOM: no timings */
    r = dt_dsat_metrics_report(&m, 0);
    CHECK(dt_metrics_get(&r, "oom", &v) && v == 1 && !dt_metrics_get(&r, "latency", &v));
}

static void test_profile_metrics(void) {
    dt_dsat_profile p = toy_profile(), q;
    p.compute = DT_DTYPE_BF16;
    p.user_stage = 2;
    p.other_bytes = 99;
    dt_metrics m = dt_dsat_profile_report(&p);
    CHECK(dt_dsat_profile_from_metrics(&m, &q) == DT_OK);
    CHECK(q.params == p.params && q.device_budget == p.device_budget &&
          q.activation_per_example == p.activation_per_example && q.slots == 2 &&
          q.compute == DT_DTYPE_BF16 && q.user_stage == 2 && q.other_bytes == 99 &&
          q.stage3_live_params == p.stage3_live_params && q.largest_group == p.largest_group);
    dt_metrics e = dt_metrics_empty();
    CHECK(dt_dsat_profile_from_metrics(&e, &q) == DT_ERR_FORMAT &&
          strstr(dt_last_error(), "'params'"));
}

int main(void) {
    TEST_RUN(test_model_formula);
    TEST_RUN(test_refine_unseen_slack);
    TEST_RUN(test_ds_config);
    TEST_RUN(test_trial_hparams);
    TEST_RUN(test_metrics);
    TEST_RUN(test_profile_metrics);
    TEST_RUN(test_model_vs_engine);
    TEST_END();
}
