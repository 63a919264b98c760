/*
 * test_step.c — the step at an accumulation boundary (src/optim/step.c): the order of the
 * callbacks, what each one sees (the reduced gradient, unscaled before clipping, clipped before
 * the update), fp16 skips decided locally or by the ranks' agreement, the error at the minimum
 * scale, and errors stopping the sequence where they happen.
 *
 * A fake caller records each callback as a letter (R reduce, A agree, C clip, U update,
 * D discard) and the gradient values each one saw.
 */
#include "dtrain/optim.h"
#include "test.h"

#include <string.h>

#define N 5

typedef struct fake {
    char trace[16];
    int nt;
    float grads[N];
    float seen_clip[N], seen_update[N];
    float *update_g;
    int64_t update_n;
    double agree_in;
    double agree_out; /* < 0: leave the flag as it is */
    char fail;        /* the callback that fails with DT_ERR_COMM */
} fake;

static void mark(fake *f, char c) {
    if (f->nt < (int)sizeof f->trace - 1) f->trace[f->nt++] = c;
}

static dt_status f_reduce(void *self, float **g, int64_t *n) {
    fake *f = self;
    mark(f, 'R');
    for (int i = 0; i < N; i++) f->grads[i] *= 2.0f; /* a "sum over two ranks" */
    *g = f->grads;
    *n = N;
    return f->fail == 'R' ? dt_error(DT_ERR_COMM, "reduce failed") : DT_OK;
}

static dt_status f_agree(void *self, double *flag) {
    fake *f = self;
    mark(f, 'A');
    f->agree_in = *flag;
    if (f->agree_out >= 0) *flag = f->agree_out;
    return f->fail == 'A' ? dt_error(DT_ERR_COMM, "agree failed") : DT_OK;
}

static dt_status f_clip(void *self, float *g, int64_t n) {
    fake *f = self;
    mark(f, 'C');
    memcpy(f->seen_clip, g, (size_t)n * sizeof *g);
    for (int64_t i = 0; i < n; i++) g[i] = g[i] > 1.0f ? 1.0f : g[i];
    return f->fail == 'C' ? dt_error(DT_ERR_COMM, "clip failed") : DT_OK;
}

static dt_status f_update(void *self, float *g, int64_t n) {
    fake *f = self;
    mark(f, 'U');
    f->update_g = g;
    f->update_n = n;
    memcpy(f->seen_update, g, (size_t)n * sizeof *g);
    memset(f->grads, 0, sizeof f->grads);
    return f->fail == 'U' ? dt_error(DT_ERR_COMM, "update failed") : DT_OK;
}

static void f_discard(void *self) {
    fake *f = self;
    mark(f, 'D');
    memset(f->grads, 0, sizeof f->grads);
}

static const dt_boundary_ops all_ops = {f_reduce, f_agree, f_clip, f_update, f_discard};

static fake new_fake(void) {
    fake f;
    memset(&f, 0, sizeof f);
    const float g[N] = {0.25f, -0.5f, 1.0f, 4.0f, 0.125f};
    memcpy(f.grads, g, sizeof g);
    f.agree_in = -1;
    f.agree_out = -1;
    return f;
}

static dt_loss_scaler *scaler_at(double scale_power, double min_scale) {
    dt_loss_scaler_config c = dt_loss_scaler_defaults();
    c.initial_scale_power = (int)scale_power;
    c.hysteresis = 1;
    c.min_loss_scale = min_scale;
    return dt_loss_scaler_new(&c);
}

/* Without a scaler: reduce, clip, update, in that order, on the reduced buffer. */
static void test_plain(void) {
    fake f = new_fake();
    bool skipped = true;
    CHECK(dt_boundary_step(&all_ops, &f, NULL, &skipped) == DT_OK);
    CHECK_MSG(!strcmp(f.trace, "RCU"), "trace %s", f.trace);
    CHECK(!skipped);
    CHECK(f.update_g == f.grads && f.update_n == N);
    CHECK(f.seen_clip[3] == 8.0f && f.seen_clip[0] == 0.5f);      /* reduced, not unscaled */
    CHECK(f.seen_update[3] == 1.0f && f.seen_update[1] == -1.0f); /* clipped */
    /* clip is optional; so is agree without a scaler */
    dt_boundary_ops ops = {.reduce = f_reduce, .update = f_update};
    f = new_fake();
    CHECK(dt_boundary_step(&ops, &f, NULL, NULL) == DT_OK);
    CHECK_MSG(!strcmp(f.trace, "RU"), "trace %s", f.trace);
    CHECK(f.seen_update[3] == 8.0f);
}

/* fp16 without overflow: the overflow flag is agreed, the gradient unscaled before clipping. */
static void test_fp16_good(void) {
    dt_loss_scaler *ls = scaler_at(2, 1); /* scale 4 */
    fake f = new_fake();
    bool skipped = true;
    CHECK(dt_boundary_step(&all_ops, &f, ls, &skipped) == DT_OK);
    CHECK_MSG(!strcmp(f.trace, "RACU"), "trace %s", f.trace);
    CHECK(!skipped && f.agree_in == 0.0);
    CHECK(f.seen_clip[3] == 2.0f && f.seen_clip[4] == 0.0625f); /* (g * 2) / 4 */
    CHECK(f.seen_update[3] == 1.0f && f.seen_update[0] == 0.125f);
    CHECK(dt_loss_scaler_scale(ls) == 4.0f);
    dt_loss_scaler_state s;
    dt_loss_scaler_get_state(ls, &s);
    CHECK(s.cur_iter == 1 && s.last_overflow_iter == -1);
    dt_loss_scaler_free(ls);
}

/* fp16 overflow on this rank: the flag passed to the agreement is 1, the step is skipped, the
 * gradients discarded (not unscaled, not clipped, not stepped), the scale halved. */
static void test_fp16_local_overflow(void) {
    dt_loss_scaler *ls = scaler_at(3, 1);
    fake f = new_fake();
    f.grads[2] = INFINITY;
    bool skipped = false;
    CHECK(dt_boundary_step(&all_ops, &f, ls, &skipped) == DT_OK);
    CHECK_MSG(!strcmp(f.trace, "RAD"), "trace %s", f.trace);
    CHECK(skipped && f.agree_in == 1.0);
    CHECK(f.grads[0] == 0.0f && f.grads[2] == 0.0f);
    CHECK(dt_loss_scaler_scale(ls) == 4.0f);
    /* no agreement callback: the local answer decides */
    dt_boundary_ops ops = all_ops;
    ops.agree_overflow = NULL;
    f = new_fake();
    f.grads[4] = NAN;
    CHECK(dt_boundary_step(&ops, &f, ls, &skipped) == DT_OK);
    CHECK_MSG(!strcmp(f.trace, "RD") && skipped, "trace %s", f.trace);
    CHECK(dt_loss_scaler_scale(ls) == 2.0f);
    dt_loss_scaler_free(ls);
}

/* Another rank overflowed: this rank's finite gradient is skipped all the same. */
static void test_fp16_remote_overflow(void) {
    dt_loss_scaler *ls = scaler_at(3, 1);
    fake f = new_fake();
    f.agree_out = 1.0;
    bool skipped = false;
    CHECK(dt_boundary_step(&all_ops, &f, ls, &skipped) == DT_OK);
    CHECK_MSG(!strcmp(f.trace, "RAD"), "trace %s", f.trace);
    CHECK(skipped && f.agree_in == 0.0);
    CHECK(dt_loss_scaler_scale(ls) == 4.0f);
    /* every rank finite: the step goes on */
    f = new_fake();
    f.agree_out = 0.0;
    CHECK(dt_boundary_step(&all_ops, &f, ls, &skipped) == DT_OK);
    CHECK_MSG(!strcmp(f.trace, "RACU") && !skipped, "trace %s", f.trace);
    CHECK(f.seen_clip[3] == 2.0f); /* (4 * 2) / 4 */
    dt_loss_scaler_free(ls);
}

/* An overflow at the minimum scale: DT_ERR_STATE, and the step is skipped (gradients dropped). */
static void test_fp16_min_scale(void) {
    dt_loss_scaler *ls = scaler_at(0, 1); /* scale 1 = the minimum */
    fake f = new_fake();
    f.grads[1] = -INFINITY;
    bool skipped = false;
    CHECK(dt_boundary_step(&all_ops, &f, ls, &skipped) == DT_ERR_STATE);
    CHECK(strstr(dt_last_error(), "minimum") != NULL);
    CHECK_MSG(!strcmp(f.trace, "RAD") && skipped, "trace %s", f.trace);
    CHECK(dt_loss_scaler_scale(ls) == 1.0f);
    dt_loss_scaler_free(ls);
}

/* A failing callback stops the sequence there and its status comes back as it is. */
static void test_errors(void) {
    const char *fails = "RACU", *traces[] = {"R", "RA", "RAC", "RACU"};
    for (int k = 0; k < 4; k++) {
        dt_loss_scaler *ls = scaler_at(2, 1);
        fake f = new_fake();
        f.fail = fails[k];
        bool skipped = true;
        CHECK(dt_boundary_step(&all_ops, &f, ls, &skipped) == DT_ERR_COMM);
        CHECK_MSG(!strcmp(f.trace, traces[k]), "fail %c: trace %s", fails[k], f.trace);
        CHECK(!skipped);
        dt_loss_scaler_free(ls);
    }
    /* required callbacks */
    fake f = new_fake();
    dt_boundary_ops ops = all_ops;
    ops.update = NULL;
    CHECK(dt_boundary_step(&ops, &f, NULL, NULL) == DT_ERR_INVALID);
    ops = all_ops;
    ops.reduce = NULL;
    CHECK(dt_boundary_step(&ops, &f, NULL, NULL) == DT_ERR_INVALID);
    CHECK(dt_boundary_step(NULL, &f, NULL, NULL) == DT_ERR_INVALID);
    dt_loss_scaler *ls = scaler_at(2, 1);
    ops = all_ops;
    ops.discard = NULL;
    CHECK(dt_boundary_step(&ops, &f, ls, NULL) == DT_ERR_INVALID);
    CHECK(strstr(dt_last_error(), "discard") != NULL && f.nt == 0);
    CHECK(dt_boundary_step(&ops, &f, NULL, NULL) == DT_OK); /* no scaler: discard unused */
    CHECK_MSG(!strcmp(f.trace, "RCU"), "trace %s", f.trace);
    dt_loss_scaler_free(ls);
}

int main(void) {
    TEST_RUN(test_plain);
    TEST_RUN(test_fp16_good);
    TEST_RUN(test_fp16_local_overflow);
    TEST_RUN(test_fp16_remote_overflow);
    TEST_RUN(test_fp16_min_scale);
    TEST_RUN(test_errors);
    TEST_END();
}
