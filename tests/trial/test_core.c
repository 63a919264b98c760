/* Tests for the core context (src/trial/core.c, core_local.c) and the fit loop's use of it:
 *   - a core of the test's own (as the master-backed one will be) receives everything the
 *     fit loop reports: start, training / validation metrics at their positions, progress,
 *     stored checkpoints, the searcher operations in turn (two: 6 then 12 batches, each
 *     completed with the validation loss) and preemption (stopped at the batch it asked);
 *   - the local core writes the JSON lines, "latest" / "best", prunes, takes SIGTERM as
 *     preemption and restores the previous handler when freed. */
#include "dtrain/core.h"
#include "dtrain/trialio.h"
#include "fixtures/files.h"
#include "fixtures/toy_trial.h"
#include "test.h"
#include "trial/trial_iface.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_root[256];

/* the toy trial: one Linear layer 6 -> 3, SGD, 64 training and 16 validation records in
 * batches of 8 */
static const dt_trial_def *const Toy = &ToyPlain;

/* ---- a recording core ---- */

typedef struct rec {
    int64_t start_at;
    int n_start, n_train, n_val, n_progress, n_ckpt, n_ops, n_complete, n_stopped;
    int64_t train_at[16], val_at[16], ckpt_at[16], progress_total;
    char ckpt_uuid[16][64];
    bool ckpt_best[16], ckpt_meta[16];
    double completed[4];
    int64_t op_len[2]; /* the operations it hands out, in batches */
    int64_t preempt_at;
    int64_t batches; /* the last position it heard of */
    int64_t stopped_at;
} rec;

static rec *R(dt_core *c) {
    return c->impl;
}
static dt_status r_start(dt_core *c, int64_t s) {
    R(c)->n_start++;
    R(c)->start_at = s;
    return DT_OK;
}
static dt_status r_train(dt_core *c, const dt_core_at *at, const dt_metrics *m,
                         const dt_core_timing *tm) {
    rec *r = R(c);
    double v;
    if (r->n_train < 16) r->train_at[r->n_train] = at->batches;
    r->n_train++;
    CHECK(dt_metrics_get(m, "loss", &v) && tm && tm->batches > 0);
    CHECK(at->records == at->batches * 8 && at->epochs == at->batches / 8.0);
    return DT_OK;
}
static dt_status r_val(dt_core *c, const dt_core_at *at, const dt_metrics *m) {
    rec *r = R(c);
    double v;
    CHECK(dt_metrics_get(m, "validation_loss", &v));
    if (r->n_val < 16) r->val_at[r->n_val] = at->batches;
    r->n_val++;
    return DT_OK;
}
static void r_progress(dt_core *c, const dt_core_progress *p) {
    R(c)->n_progress++;
    R(c)->batches = p->batches;
    R(c)->progress_total = p->total_batches;
}
static dt_status r_ckpt(dt_core *c, const dt_core_checkpoint *ck) {
    rec *r = R(c);
    if (r->n_ckpt < 16) {
        r->ckpt_at[r->n_ckpt] = ck->steps_completed;
        snprintf(r->ckpt_uuid[r->n_ckpt], 64, "%s", ck->uuid);
        r->ckpt_best[r->n_ckpt] = ck->best;
        r->ckpt_meta[r->n_ckpt] =
            ck->metadata && json_integer_value(json_object_get(ck->metadata, "steps_completed")) ==
                                ck->steps_completed;
    }
    r->n_ckpt++;
    struct stat sb;
    CHECK(stat(ck->path, &sb) == 0); /* complete on storage when reported */
    return DT_OK;
}
static bool r_preempt(dt_core *c) {
    return R(c)->preempt_at > 0 && R(c)->batches >= R(c)->preempt_at;
}
static dt_status r_op(dt_core *c, dt_core_op *op) {
    rec *r = R(c);
    op->length = (dt_length){DT_UNIT_BATCHES, r->n_complete < 2 ? r->op_len[r->n_complete] : 0};
    r->n_ops++;
    return DT_OK;
}
static dt_status r_complete(dt_core *c, const dt_core_op *op, double metric) {
    rec *r = R(c);
    CHECK(op->length.n == r->op_len[r->n_complete]);
    r->completed[r->n_complete++] = metric;
    return DT_OK;
}
static void r_stopped(dt_core *c, int64_t steps) {
    R(c)->n_stopped++;
    R(c)->stopped_at = steps;
}

static const dt_core_ops REC_OPS = {
    .name = "recording",
    .start = r_start,
    .report_training_metrics = r_train,
    .report_validation_metrics = r_val,
    .report_progress = r_progress,
    .checkpoint_stored = r_ckpt,
    .should_preempt = r_preempt,
    .searcher_op = r_op,
    .searcher_complete = r_complete,
    .report_stopped = r_stopped,
};

static dt_fit_opts opts(const char *dir, dt_core *core) {
    dt_fit_opts o;
    memset(&o, 0, sizeof o);
    o.validation_period = (dt_length){DT_UNIT_BATCHES, 4};
    o.reporting_period = (dt_length){DT_UNIT_BATCHES, 2};
    o.checkpoint_policy = DT_CKPT_BEST;
    o.checkpoint_dir = dir;
    o.quiet = true;
    o.core = core;
    return o;
}

static json_t *config(void) {
    return json_pack("{s:{s:i}}", "hyperparameters", "global_batch_size", 8);
}

static void test_fit_reports_through_core(void) {
    rec r = {.op_len = {6, 12}};
    dt_core core = {.ops = &REC_OPS, .impl = &r, .chief = true};
    char dir[300];
    snprintf(dir, sizeof dir, "%s/rec", g_root);
    dt_fit_opts o = opts(dir, &core);
    json_t *cfg = config();
    CHECK_MSG(dt_trainer_fit(Toy, cfg, 3, &o) == DT_OK, "%s", dt_last_error());
    CHECK(r.n_start == 1 && r.start_at == 0);
    /* training reports every 2 batches and at each operation's end */
    CHECK_MSG(r.n_train == 6 && r.train_at[0] == 2 && r.train_at[2] == 6 && r.train_at[5] == 12,
              "%d reports", r.n_train);
    /* validation every 4 batches, and at the end of each operation (6, 12) */
    CHECK_MSG(r.n_val == 4 && r.val_at[0] == 4 && r.val_at[1] == 6 && r.val_at[2] == 8 &&
                  r.val_at[3] == 12,
              "%d validations", r.n_val);
    CHECK(r.n_progress == 12 && r.batches == 12 && r.progress_total == 12);
    /* both operations completed with the validation loss, then asked for a third (none) */
    CHECK(r.n_complete == 2 && r.n_ops == 3 && isfinite(r.completed[0]) &&
          isfinite(r.completed[1]) && r.completed[0] != r.completed[1]);
    /* checkpoint policy best: the first validation is always best; each stored one is
     * reported with its metadata, and the end of training checkpoints the last batch */
    CHECK(r.n_ckpt >= 2 && r.ckpt_at[0] == 4 && r.ckpt_best[0] &&
          !strcmp(r.ckpt_uuid[0], "batch_4") && r.ckpt_meta[0]);
    CHECK(r.ckpt_at[r.n_ckpt - 1] == 12 && r.n_stopped == 0);
    /* the fit loop wrote no local-core files */
    char p[400];
    struct stat sb;
    snprintf(p, sizeof p, "%s/latest", dir);
    CHECK(stat(p, &sb) != 0);
    snprintf(p, sizeof p, "%s/tensorboard", dir);
    CHECK(stat(p, &sb) != 0);

    /* preemption: asked after batch 5, the loop checkpoints there and reports the stop */
    rec r2 = {.op_len = {12, 0}, .preempt_at = 5};
    core.impl = &r2;
    snprintf(dir, sizeof dir, "%s/rec_stop", g_root);
    o = opts(dir, &core);
    CHECK_MSG(dt_trainer_fit(Toy, cfg, 3, &o) == DT_OK, "%s", dt_last_error());
    CHECK(r2.n_stopped == 1 && r2.stopped_at == 5 && r2.n_complete == 0);
    CHECK(r2.n_ckpt >= 1 && r2.ckpt_at[r2.n_ckpt - 1] == 5 && !r2.ckpt_best[r2.n_ckpt - 1]);

    /* no operation at all: the fit loop says what is missing */
    rec r3 = {.op_len = {0, 0}};
    core.impl = &r3;
    CHECK(dt_trainer_fit(Toy, cfg, 3, &o) == DT_ERR_CONFIG);
    CHECK(strstr(dt_last_error(), "max_length is required") != NULL);
    json_decref(cfg);
}

/* ---- the local core ---- */

static int count_lines(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0, ch;
    while ((ch = fgetc(f)) != EOF) n += ch == '\n';
    fclose(f);
    return n;
}

static bool file_is(const char *path, const char *want) {
    char buf[256] = "";
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return !strcmp(buf, want);
}

static void test_local_core(void) {
    char dir[300], mo[320], p[400];
    snprintf(dir, sizeof dir, "%s/local", g_root);
    snprintf(mo, sizeof mo, "%s/local.jsonl", g_root);
    struct sigaction before;
    sigaction(SIGTERM, NULL, &before);
    dt_core_local_opts lo = {.chief = true,
                             .max_length = {DT_UNIT_EPOCHS, 2},
                             .checkpoint_dir = dir,
                             .metrics_out = mo,
                             .quiet = true,
                             .save_trial_best = 1,
                             .save_trial_latest = 1};
    dt_core *c = dt_core_local_new(&lo);
    CHECK(c && c->chief && !strcmp(c->ops->name, "local"));
    if (!c) return;
    snprintf(p, sizeof p, "%s/tensorboard", dir);
    CHECK(!strcmp(c->tb_path, p));
    CHECK(dt_core_start(c, 0) == DT_OK && c->tb != NULL);
    /* the one searcher operation, until completed */
    dt_core_op op;
    CHECK(dt_core_searcher_op(c, &op) == DT_OK && op.length.unit == DT_UNIT_EPOCHS &&
          op.length.n == 2);
    CHECK(dt_core_searcher_op(c, &op) == DT_OK && op.length.n == 2);
    CHECK(dt_core_searcher_complete(c, &op, 0.5) == DT_OK);
    CHECK(dt_core_searcher_op(c, &op) == DT_OK && op.length.n == 0);
    /* metrics lines */
    dt_metrics m = dt_metrics_scalar("loss", 0.25);
    dt_metrics_set(&m, "bad", NAN);
    dt_core_at at = {.batches = 4, .epochs = 0.5, .records = 32};
    dt_core_timing tm = {.records_per_s = 100, .batches = 2, .data_ms = 1.5, .train_batch_ms = 3};
    CHECK(dt_core_report_training_metrics(c, &at, &m, &tm) == DT_OK);
    CHECK(dt_core_report_validation_metrics(c, &at, &m) == DT_OK);
    CHECK(count_lines(mo) == 2);
    CHECK(file_is(mo, "{\"kind\":\"training\",\"batches\":4,\"epochs\":0.5,\"records\":32,"
                      "\"records_per_s\":100.0,\"data_ms\":1.5000,\"train_batch_ms\":3.0000,"
                      "\"metrics\":{\"loss\":0.25,\"bad\":null}}\n"
                      "{\"kind\":\"validation\",\"batches\":4,\"epochs\":0.5,\"records\":32,"
                      "\"metrics\":{\"loss\":0.25,\"bad\":null}}\n"));
    /* checkpoints: latest, best, pruning to save_trial_latest + the best */
    const char *names[] = {"batch_1", "batch_2", "batch_3"};
    for (int i = 0; i < 3; i++) {
        dt_ckpt_writer *w = dt_ckpt_begin(dir, names[i]);
        CHECK(w && dt_ckpt_add_bytes(w, "x", "x", 1) == DT_OK && dt_ckpt_commit(w, NULL) == DT_OK);
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        dt_core_checkpoint ck = {
            .uuid = names[i], .path = p, .steps_completed = i + 1, .best = i == 0};
        CHECK(dt_core_checkpoint_stored(c, &ck) == DT_OK);
    }
    snprintf(p, sizeof p, "%s/latest", dir);
    CHECK(file_is(p, "batch_3\n"));
    snprintf(p, sizeof p, "%s/best", dir);
    CHECK(file_is(p, "batch_1\n"));
    char **list = NULL;
    int n = 0;
    CHECK(dt_ckpt_list(dir, &list, &n) == DT_OK && n == 2 && !strcmp(list[0], "batch_1") &&
          !strcmp(list[1], "batch_3"));
    dt_ckpt_list_free(list);
    /* SIGTERM is preemption while the core lives */
    CHECK(!dt_core_should_preempt(c));
    raise(SIGTERM);
    CHECK(dt_core_should_preempt(c));
    dt_core_free(c);
    struct sigaction after;
    sigaction(SIGTERM, NULL, &after);
    CHECK(after.sa_handler == before.sa_handler);
    /* a non-chief slot writes nothing */
    snprintf(mo, sizeof mo, "%s/other.jsonl", g_root);
    lo.chief = false;
    lo.metrics_out = mo;
    c = dt_core_local_new(&lo);
    CHECK(dt_core_start(c, 0) == DT_OK && c->tb == NULL);
    CHECK(dt_core_report_training_metrics(c, &at, &m, &tm) == DT_OK);
    CHECK(count_lines(mo) == -1);
    dt_core_free(c);
    /* a metrics file that cannot be written */
    lo.chief = true;
    lo.metrics_out = "/nonexistent-dir/m.jsonl";
    c = dt_core_local_new(&lo);
    CHECK(dt_core_start(c, 0) == DT_ERR_IO);
    CHECK(strstr(dt_last_error(), "cannot write metrics to /nonexistent-dir/m.jsonl") != NULL);
    dt_core_free(c);
    /* NULL cores and operations are no-ops */
    dt_core_free(NULL);
    CHECK(!dt_core_should_preempt(NULL) && dt_core_start(NULL, 0) == DT_OK);
    CHECK(dt_core_searcher_op(NULL, &op) == DT_OK && op.length.n == 0);
}

int main(void) {
    toy_cfg = toy_defaults();
    toy_cfg.dim = 6;
    toy_cfg.hidden = 0;
    toy_cfg.batch = 8;
    toy_data(1, toy_cfg.n_train);
    if (!fx_tmpdir(g_root, sizeof g_root, "test-core")) return 1;
    TEST_RUN(test_fit_reports_through_core);
    TEST_RUN(test_local_core);
    if (!fx_rmtree(g_root)) fprintf(stderr, "could not remove %s\n", g_root);
    TEST_END();
}
