/* fit_impl.h — the fit loop's state and the one interface behind which its two kinds of trial
 * differ (fit.c, fit_plain.c, fit_engine.c).
 *
 * A plain trial (PyTorchTrial's shape) hands the loop its data loaders: the loop reads a batch
 * and calls train_batch / evaluate_batch with it, and the trial steps its own optimisers. An
 * engine trial (DeepSpeedTrial's shape) wraps engines that own the optimiser step and read
 * micro-batches themselves: the loop calls ds_train_batch, and each slot saves its engines'
 * shards into the chief's checkpoint. dt_trainer_fit picks the kind once from the definition;
 * the loop itself never asks which kind it runs. */
#ifndef DT_FIT_IMPL_H
#define DT_FIT_IMPL_H

#include "trial_impl.h"

#include "dtrain/core.h"
#include "dtrain/trialio.h"

#define DT_FIT_MAX_CALLBACKS 16

/* The training metrics of one reporting window, per name (mean over batches). */
typedef struct dt__fit_window {
    int n;
    char name[DT_METRICS_MAX][DT_METRIC_NAME_MAX];
    double sum[DT_METRICS_MAX];
    int64_t count[DT_METRICS_MAX];
} dt__fit_window;

typedef struct dt__fit_kind dt__fit_kind;

typedef struct dt__trainer {
    const dt_trial_def *def;
    const dt_fit_opts *o;
    const dt__fit_kind *kind;
    dt_trial_ctx *c;
    void *self;
    bool report; /* this slot's metrics count (false only with a model-parallel unit) */
    dt_loader *train, *val;
    int n_cb;
    dt_callback cb[DT_FIT_MAX_CALLBACKS];
    const char *cb_name[DT_FIT_MAX_CALLBACKS];
    int64_t batches_per_epoch;
    int64_t max_batches;
    int64_t val_every, ckpt_every, report_every; /* periods in batches (0 = none / default) */
    int64_t last_ckpt_batch;
    dt__fit_record rec; /* records trained, last / best validation: saved in checkpoints */
    dt__fit_window win;
    dt_metrics last_batch;
    dt_core *core; /* where reports go (opts->core, or a local core of our own) */
    dt_core_op op; /* the current searcher operation */
    double t_start, t_window;
    int64_t window_records;
    /* the window's time getting batches from the loader and inside train_batch, and its
     * batches: the training lines' data_ms and train_batch_ms */
    double window_data_s, window_train_s;
    int64_t window_batches;
} dt__trainer;

/* What differs between a plain and an engine trial, as the fit loop sees it. */
struct dt__fit_kind {
    /* the callbacks the definition must set: an error naming what is missing */
    dt_status (*check)(const dt_trial_def *def);
    /* after init and build_callbacks: the loaders (built and sharded), batches per epoch and
     * whether this slot's metrics count */
    dt_status (*open)(dt__trainer *t);
    /* records in one global batch (lengths given in records) */
    int64_t (*global_batch_size)(const dt__trainer *t);
    /* the training position enters epoch `e` at its batch `in_epoch` */
    dt_status (*start_epoch)(dt__trainer *t, int64_t e, int64_t in_epoch);
    /* the next training batch (NULL when the trial reads its own data inside train) */
    dt_status (*next_batch)(dt__trainer *t, int64_t e, int64_t in_epoch, dt_batch **b);
    /* train one batch; *records: what it held across all slots */
    dt_metrics (*train)(dt__trainer *t, dt_batch *b, int64_t e, int64_t *records);
    /* validation: begin, then one batch at a time (false at the end or on error, *st) with
     * its metrics and weight (records) */
    dt_status (*eval_begin)(dt__trainer *t);
    bool (*eval_batch)(dt__trainer *t, int64_t vb, dt_metrics *m, int64_t *len, dt_status *st);
    /* checkpoints: open "name" in the checkpoint directory. The chief gets a writer, or NULL
     * with *skip when that position is saved already; with every_slot_saves each slot takes
     * part (and the others are done when it returns). */
    bool every_slot_saves;
    dt_status (*ckpt_begin)(dt__trainer *t, const char *name, dt_ckpt_writer **w, bool *skip);
    /* the kind's own part of state.json (may be NULL) */
    void (*ckpt_state)(const dt__trainer *t, json_t *state);
    /* train reads its data itself, so the loop cannot time data loading apart */
    bool loads_in_train;
};

extern const dt__fit_kind dt__fit_plain;
extern const dt__fit_kind dt__fit_engine;

/* Build the trial's loaders (when `build`: a model-parallel slot may read none) and shard them
 * over shard_world slots (fit_plain.c; the engine kind shards by its data-parallel rank). */
dt_status dt__fit_build_loaders(dt__trainer *t, bool build, int shard_rank, int shard_world);

/* The same status on every slot: the worst one (a failing slot's message stays local). */
static inline dt_status dt__fit_agree(const dt__trainer *t, dt_status st) {
    return dt_comm_agree(t->c->comm, st, "trial");
}

static inline bool dt__fit_chief(const dt__trainer *t) {
    return t->c->rank == 0;
}

/* A batch's weight: the trial's get_batch_length, or its records. */
static inline int64_t dt__fit_batch_length(const dt__trainer *t, dt_batch *b) {
    return t->def->get_batch_length ? t->def->get_batch_length(t->self, b) : b->records;
}

#endif
