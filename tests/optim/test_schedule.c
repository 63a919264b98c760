/*
 * test_schedule.c — LR schedules (src/optim/schedule.c): values at the characteristic steps
 * (creation, step 0, mid-warmup, end of warmup, mid-decay, end, beyond the end) derived by
 * hand from DeepSpeed's lr_schedules.py / torch's formulas (derivations in the comments; k is
 * last_batch_iteration), lr_at agrees with stepping, the optimiser receives lr and momentum,
 * set_last_step restores, configuration errors.
 */
#include "dtrain/optim.h"
#include "test.h"

#include <string.h>

static dt_device *dev;

#define CHECK_LR(s, k, want) CHECK_NEAR(dt_sched_lr_at((s), (k)), (want), 1e-6 * fabs(want) + 1e-12)

/* An optimiser of 4 elements with lr `lr` (the schedules' base lr). */
static dt_optimizer *opt_with_lr(dt_optim_type t, float lr) {
    dt_optim_config c = dt_optim_defaults(t);
    c.lr = lr;
    if (t == DT_OPTIM_SGD) c.momentum = 0.9f;
    return dt_optim_new(dev, &c, 4);
}

/* Step through `n` steps: the current lr is always lr_at(last) and it is in the optimiser. */
static void check_stepping(dt_lr_schedule *s, dt_optimizer *o, int n) {
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int64_t k = dt_sched_last_step(s);
        float lr = dt_sched_lr_at(s, k);
        if (o) bad += dt_optim_lr(o) != lr;
        dt_sched_step(s);
        bad += dt_sched_last_step(s) != k + 1;
    }
    CHECK_MSG(bad == 0, "%d mismatches between stepping and lr_at", bad);
}

static void test_warmup_lr(void) {
    dt_sched_config c = dt_sched_defaults(DT_SCHED_WARMUP_LR);
    CHECK(c.warmup_min_lr == 0.0f && c.warmup_max_lr == 1e-3f && c.warmup_num_steps == 1000);
    CHECK(!c.warmup_linear);
    c.warmup_min_lr = 1e-4f;
    c.warmup_max_lr = 1e-3f;
    c.warmup_num_steps = 10;
    dt_optimizer *o = opt_with_lr(DT_OPTIM_ADAMW, 0.5f);
    dt_lr_schedule *s = dt_sched_new(&c, o);
    CHECK(s != NULL);
    /* creation: k = -1, DeepSpeed's get_lr() returns min_lr before it has started */
    CHECK(dt_sched_last_step(s) == -1);
    CHECK_NEAR(dt_sched_lr_at(s, dt_sched_last_step(s)), 1e-4, 1e-11);
    CHECK(dt_optim_lr(o) == dt_sched_lr_at(s, dt_sched_last_step(s)));
    /* log warmup: min + (max - min) log(k + 1) / log(W), W = 10 */
    CHECK_LR(s, 0, 1e-4);                  /* log 1 = 0 */
    CHECK_LR(s, 1, 3.7092699609758304e-4); /* 1e-4 + 9e-4 log 2 / log 10 */
    CHECK_LR(s, 4, 7.290730039024168e-4);  /* 1e-4 + 9e-4 log 5 / log 10 (mid-warmup) */
    CHECK_LR(s, 9, 1e-3);                  /* log 10 / log 10 = 1: end of warmup */
    CHECK_LR(s, 10, 1e-3);                 /* k >= W: max */
    CHECK_LR(s, 100000, 1e-3);
    check_stepping(s, o, 15);
    CHECK(dt_sched_last_step(s) == 14);
    CHECK_NEAR(dt_optim_lr(o), 1e-3, 1e-9);
    dt_sched_free(s);

    /* linear warmup: min + (max - min) k / W */
    c.warmup_linear = true;
    s = dt_sched_new(&c, NULL);
    CHECK_LR(s, -1, 1e-4);
    CHECK_LR(s, 0, 1e-4);
    CHECK_LR(s, 4, 4.6e-4); /* 1e-4 + 9e-4 * 0.4 */
    CHECK_LR(s, 9, 9.1e-4); /* 1e-4 + 9e-4 * 0.9: linear reaches max only at k = W */
    CHECK_LR(s, 10, 1e-3);
    dt_sched_free(s);
    /* warmup_num_steps 1 is raised to 2 as DeepSpeed does: k = 1 -> 1/2 */
    c.warmup_num_steps = 1;
    s = dt_sched_new(&c, NULL);
    CHECK_LR(s, 1, 5.5e-4);
    CHECK_LR(s, 2, 1e-3);
    dt_sched_free(s);
    dt_optim_free(o);
}

static void test_warmup_decay_lr(void) {
    dt_sched_config c = dt_sched_defaults(DT_SCHED_WARMUP_DECAY_LR);
    c.warmup_min_lr = 0.0f;
    c.warmup_max_lr = 1e-3f;
    c.warmup_num_steps = 10;
    c.total_num_steps = 110;
    c.warmup_linear = true;
    dt_lr_schedule *s = dt_sched_new(&c, NULL);
    CHECK(s != NULL);
    CHECK_LR(s, -1, 0.0);
    CHECK_LR(s, 0, 0.0);
    CHECK_LR(s, 5, 5e-4); /* 1e-3 * 5/10 */
    /* after warmup: max * max(0, (T - k) / max(1, T - W)), T - W = 100 */
    CHECK_LR(s, 10, 1e-3);  /* 100/100 */
    CHECK_LR(s, 60, 5e-4);  /* 50/100: mid-decay */
    CHECK_LR(s, 109, 1e-5); /* 1/100 */
    CHECK_LR(s, 110, 0.0);  /* end */
    CHECK_LR(s, 200, 0.0);  /* beyond: clamped at 0 */
    check_stepping(s, NULL, 120);
    dt_sched_free(s);
    /* log warmup with a non-zero floor: min + delta * gamma */
    c.warmup_linear = false;
    c.warmup_min_lr = 1e-4f;
    s = dt_sched_new(&c, NULL);
    CHECK_LR(s, 4, 7.290730039024168e-4);
    CHECK_LR(s, 60, 1e-4 + 9e-4 * 0.5);
    CHECK_LR(s, 500, 1e-4); /* gamma 0: back to min */
    dt_sched_free(s);
}

static void test_warmup_cosine_lr(void) {
    dt_sched_config c = dt_sched_defaults(DT_SCHED_WARMUP_COSINE_LR);
    CHECK(c.cos_min_ratio == 1e-4f && c.warmup_min_ratio == 0.0f);
    c.warmup_num_steps = 10;
    c.total_num_steps = 110;
    c.warmup_min_ratio = 0.1f;
    c.cos_min_ratio = 0.01f;
    c.warmup_linear = true;
    dt_optimizer *o = opt_with_lr(DT_OPTIM_SGD, 0.1f); /* base lr 0.1 */
    dt_lr_schedule *s = dt_sched_new(&c, o);
    /* creation: DeepSpeed's get_lr() returns 0.0 before it has started */
    CHECK(dt_sched_lr_at(s, dt_sched_last_step(s)) == 0.0f && dt_optim_lr(o) == 0.0f);
    /* warmup: base (wmin + (1 - wmin) k / W) */
    CHECK_LR(s, 0, 0.01);  /* 0.1 * 0.1 */
    CHECK_LR(s, 5, 0.055); /* 0.1 * (0.1 + 0.9 * 0.5) */
    /* cosine: p = (k - W + 1) / (T - W), ratio = cmin + (1 - cmin)(1 + cos(pi p))/2 */
    CHECK_LR(s, 10, 0.09997557473810371); /* p = 0.01 */
    CHECK_LR(s, 34, 0.0855017856687341);  /* p = 0.25 */
    CHECK_LR(s, 59, 0.0505);              /* p = 0.5: 0.1 * (0.01 + 0.99 / 2) */
    CHECK_LR(s, 109, 0.001);              /* p = 1: 0.1 * cmin (end) */
    CHECK_LR(s, 300, 0.001);              /* beyond: p clamped to 1 */
    check_stepping(s, o, 130);
    CHECK_NEAR(dt_optim_lr(o), 0.001, 1e-9);
    dt_sched_free(s);
    dt_optim_free(o);
    /* without an optimiser the base lr comes from the config */
    c.base_lr = 0.2f;
    s = dt_sched_new(&c, NULL);
    CHECK_LR(s, 5, 0.11);
    dt_sched_free(s);
}

static void test_one_cycle(void) {
    dt_sched_config c = dt_sched_defaults(DT_SCHED_ONE_CYCLE);
    CHECK(c.cycle_momentum && c.cycle_min_mom == 0.8f && c.cycle_max_mom == 0.9f);
    c.cycle_min_lr = 0.01f;
    c.cycle_max_lr = 0.1f;
    c.cycle_first_step_size = 10; /* second 0 = same: S = 20, ratio 0.5 */
    c.decay_step_size = 5;
    c.decay_lr_rate = 0.5f;
    c.decay_mom_rate = 0.01f;
    dt_optimizer *o = opt_with_lr(DT_OPTIM_ADAM, 1.0f);
    dt_lr_schedule *s = dt_sched_new(&c, o);
    /* creation: cycle_min_lr and cycle_min_mom (DeepSpeed's _initialize_lr/_momentum) */
    CHECK_NEAR(dt_optim_lr(o), 0.01, 1e-9);
    CHECK_NEAR(dt_optim_config_of(o)->beta1, 0.8, 1e-7);
    /* i = k + 1, x = i/S - floor(i/S); f = x / 0.5 rising, (x - 1) / (0.5 - 1) falling */
    CHECK_LR(s, 4, 0.055);  /* i = 5: x = 0.25, f = 0.5 */
    CHECK_LR(s, 9, 0.1);    /* i = 10: x = 0.5, f = 1 (peak) */
    CHECK_LR(s, 14, 0.055); /* i = 15: x = 0.75, f = 0.5 */
    CHECK_LR(s, 19, 0.01);  /* i = 20: x = 0, f = 0 (end of the cycle) */
    /* decay: d = k - S + 1, min_lr / (1 + rate d / decay_step_size) */
    CHECK_LR(s, 20, 0.01 / 1.1); /* d = 1 */
    CHECK_LR(s, 29, 0.005);      /* d = 10: 0.01 / (1 + 0.5 * 2) */
    /* momentum moves opposite: max_mom - (max - min) f, then max_mom (1 + rate d / size) */
    for (int i = 0; i < 5; i++) dt_sched_step(s); /* k = 4 */
    CHECK_NEAR(dt_optim_config_of(o)->beta1, 0.85, 1e-7);
    CHECK_NEAR(dt_optim_lr(o), 0.055, 1e-8);
    for (int i = 0; i < 5; i++) dt_sched_step(s); /* k = 9 */
    CHECK_NEAR(dt_optim_config_of(o)->beta1, 0.8, 1e-7);
    for (int i = 0; i < 11; i++) dt_sched_step(s); /* k = 20 */
    CHECK_NEAR(dt_optim_config_of(o)->beta1, 0.9 * 1.002, 1e-7);
    CHECK_NEAR(dt_optim_lr(o), 0.01 / 1.1, 1e-9);
    /* the optimiser still steps with the cycled values */
    float p[4] = {1, 2, 3, 4}, g[4] = {0.1f, -0.1f, 0.2f, 0};
    CHECK(dt_optim_step(o, p, g, 4) == DT_OK);
    check_stepping(s, o, 30);
    dt_sched_free(s);
    dt_optim_free(o);

    /* SGD: momentum is the SGD momentum; no decay: stays at min_lr / max_mom after the cycle */
    c.decay_step_size = 0;
    o = opt_with_lr(DT_OPTIM_SGD, 1.0f);
    s = dt_sched_new(&c, o);
    CHECK_NEAR(dt_optim_config_of(o)->momentum, 0.8, 1e-7);
    CHECK_LR(s, 25, 0.01);
    dt_sched_set_last_step(s, 25);
    CHECK_NEAR(dt_optim_config_of(o)->momentum, 0.9, 1e-7);
    dt_sched_free(s);
    /* cycle_momentum off leaves momentum alone */
    c.cycle_momentum = false;
    s = dt_sched_new(&c, o);
    dt_sched_set_last_step(s, 4);
    CHECK_NEAR(dt_optim_config_of(o)->momentum, 0.9, 1e-7);
    dt_sched_free(s);
    dt_optim_free(o);

    /* stairs: f = floor(pos) / c, pos = (i mod S) c / first rising, (S - i mod S) c / second
     * falling; c = 2 (second stair count -1 = same as first) */
    c = dt_sched_defaults(DT_SCHED_ONE_CYCLE);
    c.cycle_min_lr = 0.01f;
    c.cycle_max_lr = 0.1f;
    c.cycle_first_step_size = 10;
    c.cycle_first_stair_count = 2;
    s = dt_sched_new(&c, NULL);
    CHECK_LR(s, 3, 0.01);   /* i = 4: pos 0.8 -> 0 */
    CHECK_LR(s, 4, 0.055);  /* i = 5: pos 1 -> 0.5 */
    CHECK_LR(s, 8, 0.055);  /* i = 9: pos 1.8 -> 0.5 */
    CHECK_LR(s, 9, 0.1);    /* i = 10: pos 2 -> 1 */
    CHECK_LR(s, 10, 0.055); /* i = 11: pos (20 - 11) 2 / 10 = 1.8 -> 0.5 */
    CHECK_LR(s, 15, 0.01);  /* i = 16: pos 0.8 -> 0 */
    dt_sched_free(s);
    /* asymmetric cycle: first 10, second 30: S = 40, ratio 0.25 */
    c.cycle_first_stair_count = 0;
    c.cycle_second_step_size = 30;
    s = dt_sched_new(&c, NULL);
    CHECK_LR(s, 9, 0.1);                 /* i = 10: x = 0.25 = ratio: f = 1 */
    CHECK_LR(s, 24, 0.01 + 0.09 * 0.5);  /* i = 25: x = 0.625: (0.625 - 1)/(0.25 - 1) = 0.5 */
    CHECK_LR(s, 38, 0.01 + 0.09 / 30.0); /* i = 39: x = 0.975: 0.025 / 0.75 */
    dt_sched_free(s);
}

static void test_lr_range_test(void) {
    dt_sched_config c = dt_sched_defaults(DT_SCHED_LR_RANGE_TEST);
    CHECK(c.lr_range_test_min_lr == 1e-3f && c.lr_range_test_step_size == 2000);
    c.lr_range_test_step_size = 10;
    c.lr_range_test_step_rate = 0.5f;
    dt_lr_schedule *s = dt_sched_new(&c, NULL);
    /* min (1 + rate (k + 1) / size) */
    CHECK_LR(s, -1, 1e-3);
    CHECK_LR(s, 0, 1.05e-3);
    CHECK_LR(s, 19, 2e-3);
    check_stepping(s, NULL, 30);
    dt_sched_free(s);
    c.lr_range_test_staircase = true; /* floor((k + 1) / size) */
    s = dt_sched_new(&c, NULL);
    CHECK_LR(s, 8, 1e-3);
    CHECK_LR(s, 9, 1.5e-3);
    CHECK_LR(s, 29, 2.5e-3);
    dt_sched_free(s);
}

static float user_fn(int64_t step, float base, void *user) {
    return base * (float)(step + 1) / *(float *)user;
}

static void test_torch_family(void) {
    /* StepLR: base gamma^floor(k / step_size); torch's constructor steps once: k = 0 */
    dt_sched_config c = dt_sched_defaults(DT_SCHED_STEP_LR);
    c.step_size = 3;
    c.gamma = 0.5f;
    dt_optimizer *o = opt_with_lr(DT_OPTIM_SGD, 0.1f);
    dt_lr_schedule *s = dt_sched_new(&c, o);
    CHECK(dt_sched_last_step(s) == 0);
    CHECK_NEAR(dt_optim_lr(o), 0.1, 1e-8);
    CHECK_LR(s, 2, 0.1);
    CHECK_LR(s, 3, 0.05);
    CHECK_LR(s, 7, 0.025);
    check_stepping(s, o, 10);
    dt_sched_free(s);

    /* CosineAnnealingLR closed form: eta_min + (base - eta_min)(1 + cos(pi k / T_max)) / 2 */
    dt_optim_set_lr(o, 0.1f);
    c = dt_sched_defaults(DT_SCHED_COSINE_ANNEALING);
    c.t_max = 10;
    c.eta_min = 0.01f;
    s = dt_sched_new(&c, o);
    CHECK_LR(s, 0, 0.1);
    CHECK_LR(s, 5, 0.055);
    CHECK_LR(s, 10, 0.01);
    CHECK_LR(s, 15, 0.055); /* periodic past T_max, as torch's closed form */
    CHECK_LR(s, 20, 0.1);
    check_stepping(s, o, 25);
    dt_sched_free(s);

    /* constant and user function */
    dt_optim_set_lr(o, 0.1f);
    c = dt_sched_defaults(DT_SCHED_CONSTANT);
    s = dt_sched_new(&c, o);
    CHECK_LR(s, 12345, 0.1);
    dt_sched_free(s);
    float div = 10.0f;
    c = dt_sched_defaults(DT_SCHED_USER);
    c.fn = user_fn;
    c.user = &div;
    s = dt_sched_new(&c, o);
    CHECK_NEAR(dt_optim_lr(o), 0.01, 1e-9); /* fn(0) = 0.1 * 1 / 10 */
    dt_sched_step(s);
    CHECK_NEAR(dt_optim_lr(o), 0.02, 1e-9);
    dt_sched_free(s);
    dt_optim_free(o);
}

/* Resuming: a fresh schedule set to the saved last step gives the same lr and momentum. */
static void test_set_last_step(void) {
    dt_sched_config c = dt_sched_defaults(DT_SCHED_ONE_CYCLE);
    c.cycle_first_step_size = 20;
    c.cycle_second_step_size = 30;
    c.decay_step_size = 7;
    c.decay_lr_rate = 0.3f;
    dt_optimizer *o1 = opt_with_lr(DT_OPTIM_LAMB, 1.0f), *o2 = opt_with_lr(DT_OPTIM_LAMB, 1.0f);
    dt_lr_schedule *s1 = dt_sched_new(&c, o1);
    for (int i = 0; i < 37; i++) dt_sched_step(s1);
    int64_t saved = dt_sched_last_step(s1);
    CHECK(saved == 36);
    dt_lr_schedule *s2 = dt_sched_new(&c, o2);
    dt_sched_set_last_step(s2, saved);
    CHECK(dt_sched_lr_at(s2, saved) == dt_sched_lr_at(s1, saved));
    CHECK(dt_optim_lr(o2) == dt_optim_lr(o1));
    CHECK(dt_optim_config_of(o2)->beta1 == dt_optim_config_of(o1)->beta1);
    for (int i = 0; i < 20; i++) {
        dt_sched_step(s1);
        dt_sched_step(s2);
    }
    CHECK(dt_optim_lr(o2) == dt_optim_lr(o1));
    dt_sched_free(s1);
    dt_sched_free(s2);
    dt_optim_free(o1);
    dt_optim_free(o2);
}

static void expect_error(dt_sched_config c, const char *what) {
    dt_clear_error();
    dt_lr_schedule *s = dt_sched_new(&c, NULL);
    CHECK_MSG(s == NULL, "%s accepted", what);
    CHECK(dt_last_status() == DT_ERR_CONFIG);
    CHECK_MSG(strstr(dt_last_error(), what) != NULL, "'%s' not in '%s'", what, dt_last_error());
    dt_sched_free(s);
}

static void test_errors(void) {
    dt_sched_config c = dt_sched_defaults(DT_SCHED_WARMUP_DECAY_LR);
    expect_error(c, "total_num_steps"); /* required, as in DeepSpeed */
    CHECK(strstr(dt_last_error(), "hint") != NULL);
    c = dt_sched_defaults(DT_SCHED_WARMUP_COSINE_LR);
    expect_error(c, "total_num_steps");
    c = dt_sched_defaults(DT_SCHED_WARMUP_LR);
    c.warmup_num_steps = 0;
    expect_error(c, "warmup_num_steps");
    c = dt_sched_defaults(DT_SCHED_STEP_LR);
    expect_error(c, "step_size");
    c = dt_sched_defaults(DT_SCHED_COSINE_ANNEALING);
    expect_error(c, "t_max");
    c = dt_sched_defaults(DT_SCHED_ONE_CYCLE);
    c.cycle_first_step_size = 0;
    expect_error(c, "cycle_first_step_size");
    c = dt_sched_defaults(DT_SCHED_LR_RANGE_TEST);
    c.lr_range_test_step_size = 0;
    expect_error(c, "lr_range_test_step_size");
    c = dt_sched_defaults(DT_SCHED_USER);
    expect_error(c, "fn");
    c.type = (dt_sched_type)99;
    expect_error(c, "type");

    CHECK(dt_sched_type_from_name("WarmupLR") == DT_SCHED_WARMUP_LR);
    CHECK(dt_sched_type_from_name("warmupdecaylr") == DT_SCHED_WARMUP_DECAY_LR);
    CHECK(dt_sched_type_from_name("WarmupCosineLR") == DT_SCHED_WARMUP_COSINE_LR);
    CHECK(dt_sched_type_from_name("OneCycle") == DT_SCHED_ONE_CYCLE);
    CHECK(dt_sched_type_from_name("LRRangeTest") == DT_SCHED_LR_RANGE_TEST);
    CHECK(dt_sched_type_from_name("StepLR") == DT_SCHED_STEP_LR);
    CHECK(dt_sched_type_from_name("CosineAnnealingLR") == DT_SCHED_COSINE_ANNEALING);
    CHECK(dt_sched_type_from_name("Cyclic") == -1);
    CHECK(dt_sched_type_from_name(NULL) == -1);
}

int main(void) {
    dev = dt_device_new("cpu", 0);
    TEST_RUN(test_warmup_lr);
    TEST_RUN(test_warmup_decay_lr);
    TEST_RUN(test_warmup_cosine_lr);
    TEST_RUN(test_one_cycle);
    TEST_RUN(test_lr_range_test);
    TEST_RUN(test_torch_family);
    TEST_RUN(test_set_last_step);
    TEST_RUN(test_errors);
    dt_device_free(dev);
    TEST_END();
}
