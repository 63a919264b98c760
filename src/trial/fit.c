/* fit.c — the Trainer's fit loop: trains a trial batch by batch, reports metrics, validates,
 * checkpoints (periodically, by policy, on stop and at the end) and resumes exactly.
 *
 * Everything the platform hears goes through the core context (dtrain/core.h): metrics,
 * progress, stored checkpoints, "should I stop?" and the searcher operations (train to the
 * operation's length, validate, complete it with the searcher metric, take the next). Without
 * one in the options the loop makes a local core (core_local.c: the metrics file, stderr,
 * TensorBoard, the latest / best pointers, SIGINT / SIGTERM).
 *
 * Positions are counted in batches of this process. An epoch is the training loader's
 * batches_per_epoch batches (on this shard); epoch_idx = batches_trained / batches_per_epoch.
 * Lengths given in epochs or records are converted to batches with it by dt_length_batches
 * (records: a batch holds per-slot batch size records on each of `size` ranks; a partial
 * batch is dropped, a length under one batch is one batch).
 *
 * What a checkpoint holds is trial_ckpt.c's; this file decides when and where one is made.
 * The chief holds the checkpoint directory's lock for the whole run, and a process whose
 * launcher is gone does not start (launcher_watch.c).
 * Exact resume: the data order depends only on (seed, epoch), the loader restarts at the saved
 * batch, and the runtime RNG (dropout) is restored, so N batches trained in one run and in two
 * halves give the same bits. */
#include "trial_impl.h"

#include "dtrain/core.h"
#include "dtrain/trialio.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_CALLBACKS 16

typedef struct window {
    int n;
    char name[DT_METRICS_MAX][DT_METRIC_NAME_MAX];
    double sum[DT_METRICS_MAX];
    int64_t count[DT_METRICS_MAX];
} window;

typedef struct trainer {
    const dt_trial_def *def;
    const dt_fit_opts *o;
    dt_trial_ctx *c;
    void *self;
    bool ds;     /* engine-based trial (def->ds_train_batch) */
    bool report; /* this slot's metrics count (false only with a model-parallel unit) */
    dt_loader *train, *val;
    int n_cb;
    dt_callback cb[MAX_CALLBACKS];
    const char *cb_name[MAX_CALLBACKS];
    int64_t batches_per_epoch;
    int64_t max_batches;
    int64_t val_every, ckpt_every, report_every; /* periods in batches (0 = none / default) */
    int64_t last_ckpt_batch;
    dt__fit_record rec; /* records trained, last / best validation: saved in checkpoints */
    window win;
    dt_metrics last_batch;
    dt_core *core; /* where reports go (opts->core, or a local core of our own) */
    dt_core_op op; /* the current searcher operation */
    double t_start, t_window;
    int64_t window_records;
    /* the window's time getting batches from the loader and inside train_batch, and its
     * batches: the training lines' data_ms and train_batch_ms */
    double window_data_s, window_train_s;
    int64_t window_batches;
} trainer;

/* ---- helpers ---- */

#define CB(t, hook, ...)                                                                           \
    do {                                                                                           \
        for (int i_ = 0; i_ < (t)->n_cb; i_++)                                                     \
            if ((t)->cb[i_].hook) (t)->cb[i_].hook((t)->cb[i_].self, ##__VA_ARGS__);               \
    } while (0)

/* A length of the fit loop in batches (dt_length_batches, trial.h: records truncate to whole
 * global batches, at least one; epochs are the training loader's). */
static dt_status to_batches(const trainer *t, dt_length l, const char *what, int64_t *out) {
    dt_length_scale s = {
        .global_batch_size = t->ds ? dt_trial_global_batch_size(t->c)
                                   : dt_trial_per_slot_batch_size(t->c) * t->c->size,
        .batches_per_epoch = t->batches_per_epoch,
    };
    return dt_length_batches(l, &s, DT_LENGTH_MIN_ONE, what, out);
}

static bool period_hit(int64_t every, int64_t done) {
    return every > 0 && done % every == 0;
}

static void window_add(window *w, const dt_metrics *m) {
    for (int i = 0; i < m->n; i++) {
        int k = 0;
        while (k < w->n && strcmp(w->name[k], m->m[i].name)) k++;
        if (k == w->n) {
            if (w->n == DT_METRICS_MAX) continue;
            snprintf(w->name[k], DT_METRIC_NAME_MAX, "%s", m->m[i].name);
            w->sum[k] = 0;
            w->count[k] = 0;
            w->n++;
        }
        w->sum[k] += m->m[i].value;
        w->count[k]++;
    }
}

/* Reduce a custom reducer set (training or validation) into `out`. One process: the slot's
 * bytes are the only part. */
static dt_status run_reducers(trainer *t, bool training, dt_metrics *out) {
    for (int i = 0; i < t->c->n_reducers; i++) {
        wrapped_reducer *w = &t->c->reducers[i];
        if (w->for_training != training) continue;
        size_t len = 0;
        void *part = w->r.per_slot_reduce(w->r.self, &len);
        /* every slot's bytes to every slot, then each combines them (same result everywhere) */
        dt_bytes_list *all = NULL;
        dt_status st = dt_comm_allgather_bytes(t->c->comm, part, len, &all);
        free(part);
        if (st != DT_OK) return st;
        void **parts = malloc(sizeof *parts * (size_t)all->count);
        size_t *lens = malloc(sizeof *lens * (size_t)all->count);
        for (int k = 0; k < all->count; k++) {
            parts[k] = all->items[k].data;
            lens[k] = all->items[k].len;
        }
        dt_metrics m = dt_metrics_empty();
        st = w->r.cross_slot_reduce(w->r.self, all->count, (void *const *)parts, lens, &m);
        free(parts);
        free(lens);
        dt_bytes_list_free(all);
        if (st != DT_OK) return st;
        if (w->name[0] && (m.n != 1 || strcmp(m.m[0].name, w->name)))
            return dt_error(DT_ERR_STATE, "reducer '%s' must produce exactly the metric '%s'",
                            w->name, w->name);
        for (int k = 0; k < m.n; k++) dt_metrics_set(out, m.m[k].name, m.m[k].value);
        if (w->r.reset) w->r.reset(w->r.self);
    }
    return DT_OK;
}

/* One metric's partial reduction on one slot, as exchanged between slots. */
typedef struct part_metric {
    char name[DT_METRIC_NAME_MAX];
    int32_t reducer; /* dt_reducer; training windows use AVG over batches */
    double acc;      /* AVG: sum of value*weight; SUM: sum; MAX/MIN: the extreme */
    double weight;   /* AVG: sum of weights */
} part_metric;

/* Combine every slot's partial metrics (matched by name) into final values in `out`. With one
 * slot this is just the division. */
static dt_status merge_parts(trainer *t, const part_metric *mine, int n, dt_metrics *out) {
    dt_bytes_list *all = NULL;
    dt_status st = dt_comm_allgather_bytes(t->c->comm, mine, sizeof *mine * (size_t)n, &all);
    if (st != DT_OK) return st;
    part_metric acc[DT_METRICS_MAX];
    int na = 0;
    for (int r = 0; r < all->count; r++) {
        const part_metric *p = all->items[r].data;
        int np = (int)(all->items[r].len / sizeof *p);
        for (int i = 0; i < np; i++) {
            int k = 0;
            while (k < na && strcmp(acc[k].name, p[i].name)) k++;
            if (k == na) {
                if (na == DT_METRICS_MAX) continue;
                acc[na++] = p[i];
                continue;
            }
            switch ((dt_reducer)p[i].reducer) {
            case DT_REDUCER_AVG:
                acc[k].acc += p[i].acc;
                acc[k].weight += p[i].weight;
                break;
            case DT_REDUCER_SUM:
                acc[k].acc += p[i].acc;
                break;
            case DT_REDUCER_MAX:
                acc[k].acc = fmax(acc[k].acc, p[i].acc);
                break;
            case DT_REDUCER_MIN:
                acc[k].acc = fmin(acc[k].acc, p[i].acc);
                break;
            }
        }
    }
    dt_bytes_list_free(all);
    for (int k = 0; k < na; k++)
        dt_metrics_set(out, acc[k].name,
                       acc[k].reducer == DT_REDUCER_AVG
                           ? (acc[k].weight > 0 ? acc[k].acc / acc[k].weight : NAN)
                           : acc[k].acc);
    return DT_OK;
}

/* The same status on every slot: the worst one (a failing slot's message stays local). */
static dt_status sync_status(trainer *t, dt_status st) {
    return dt_comm_agree(t->c->comm, st, "trial");
}

static bool chief(const trainer *t) {
    return t->c->rank == 0;
}

/* The position reports carry. */
static dt_core_at at(const trainer *t) {
    int64_t b = t->c->batches_trained;
    return (dt_core_at){.batches = b,
                        .epochs = t->batches_per_epoch ? (double)b / t->batches_per_epoch : 0,
                        .records = t->rec.records_trained};
}

static void report_progress(trainer *t) {
    dt_core_progress p = {.batches = t->c->batches_trained,
                          .total_batches = t->max_batches,
                          .records = t->rec.records_trained,
                          .elapsed_s = dt_now_sec() - t->t_start,
                          .loss = NAN};
    dt_metrics_get(&t->last_batch, "loss", &p.loss);
    dt_core_report_progress(t->core, &p);
}

static dt_status report_training(trainer *t) {
    /* the mean of the per-batch values over the window and over all slots */
    part_metric parts[DT_METRICS_MAX];
    for (int k = 0; k < t->win.n; k++) {
        snprintf(parts[k].name, DT_METRIC_NAME_MAX, "%s", t->win.name[k]);
        parts[k].reducer = DT_REDUCER_AVG;
        parts[k].acc = t->win.sum[k];
        parts[k].weight = (double)t->win.count[k];
    }
    dt_metrics avg = dt_metrics_empty();
    dt_status st = merge_parts(t, parts, t->win.n, &avg);
    if (st == DT_OK) st = run_reducers(t, true, &avg);
    if (st != DT_OK) return st;
    double now = dt_now_sec(), el = now - t->t_window;
    /* throughput, and the mean ms per batch spent getting it from the loader and inside
     * train_batch (the rest of the wall time is the loop's own) */
    dt_core_timing tm = {.records_per_s = el > 0 ? t->window_records / el : 0,
                         .batches = t->window_batches};
    if (tm.batches > 0) {
        tm.data_ms = t->window_data_s / (double)t->window_batches * 1e3;
        tm.train_batch_ms = t->window_train_s / (double)t->window_batches * 1e3;
    }
    dt_core_at a = at(t);
    dt_core_report_training_metrics(t->core, &a, &avg, &tm); /* (a lost report is not fatal) */
    CB(t, on_training_workload_end, &avg, &t->last_batch);
    t->win.n = 0;
    t->t_window = now;
    t->window_records = 0;
    t->window_data_s = t->window_train_s = 0;
    t->window_batches = 0;
    return DT_OK;
}

/* One profiled batch: train_batch's wall time, the time spent getting the batch from the
 * training loader, model FLOP rate, activation peak (chief writes them). */
static void profile_batch(trainer *t, double sec, double data_sec) {
    dt_flops f = dt_ctx_flops(t->c->rt);
    dt_mem_stats ms;
    dt_device_stats(dt_ctx_device(t->c->rt), &ms);
    dt_metrics p = dt_metrics_empty();
    dt_metrics_set(&p, "step_ms", sec * 1e3);
    if (!t->ds) dt_metrics_set(&p, "data_ms", data_sec * 1e3);
    dt_metrics_set(&p, "gflops", sec > 0 ? (double)(f.forward + f.backward) / sec / 1e9 : 0);
    dt_metrics_set(&p, "activation_peak_mb", (double)ms.peak[DT_MEM_ACTIVATIONS] / 1048576.0);
    /* recorded at the batch being trained (batches_trained is advanced after this) */
    dt_core_at a = at(t);
    a.batches++;
    a.epochs = t->batches_per_epoch ? (double)a.batches / t->batches_per_epoch : 0;
    dt_core_report_profiler_metrics(t->core, &a, &p);
}

/* ---- validation ---- */

static dt_status validate(trainer *t, dt_metrics *out) {
    dt_trial_ctx *c = t->c;
    dt_ctx *rt = c->rt;
    *out = dt_metrics_empty();
    CB(t, on_validation_start);
    CB(t, on_validation_epoch_start);
    bool prev_grad = dt_set_grad_enabled(rt, false);
    dt_ctx_set_training(rt, false);
    /* dropout is off and no RNG is drawn here, but keep the runtime RNG untouched anyway */
    dt_rng saved = *dt_ctx_rng(rt);
    dt_status st = DT_OK;
    if (t->def->evaluate_full_dataset) {
        /* not distributable: the chief evaluates the whole dataset and shares the result */
        if (chief(t)) {
            st = dt_loader_start_unsharded(t->val, 0);
            if (st == DT_OK) {
                *out = t->def->evaluate_full_dataset(t->self, t->val);
                st = out->status;
            }
        }
        st = sync_status(t, st);
        if (st == DT_OK && c->size > 1) st = dt_comm_broadcast(c->comm, out, sizeof *out, 0);
    } else {
        st = t->ds ? dt__ds_eval_begin(c) : dt_loader_start_epoch(t->val, 0, 0);
        int n = 0;
        char name[DT_METRICS_MAX][DT_METRIC_NAME_MAX];
        double acc[DT_METRICS_MAX], wsum[DT_METRICS_MAX];
        dt_reducer red[DT_METRICS_MAX];
        int64_t vb = 0;
        while (st == DT_OK) {
            dt_batch *b = NULL;
            dt_metrics m;
            int64_t len = 0;
            if (t->ds) {
                /* engine-based: the trial pulls from the iterator; weight = records it pulled */
                if (!dt__ds_eval_more(c, vb, &st)) break;
                dt_ctx_reset(rt);
                m = dt__ds_evaluate_batch(c, t->def, t->self, vb, &len);
            } else {
                st = dt_loader_next(t->val, &b);
                if (st != DT_OK || !b) break;
                if (b->records == 0) continue; /* a shard's padding batch: nothing to evaluate */
                dt_ctx_reset(rt);
                m = t->def->evaluate_batch(t->self, b, vb);
            }
            if (m.status != DT_OK) {
                st = dt_error(m.status, "evaluate_batch failed at validation batch %lld: %s",
                              (long long)vb, dt_last_error());
                break;
            }
            if (b)
                len = t->def->get_batch_length ? t->def->get_batch_length(t->self, b) : b->records;
            for (int i = 0; i < m.n; i++) {
                int k = 0;
                while (k < n && strcmp(name[k], m.m[i].name)) k++;
                if (k == n) {
                    if (n == DT_METRICS_MAX) continue;
                    snprintf(name[k], DT_METRIC_NAME_MAX, "%s", m.m[i].name);
                    red[k] = t->def->evaluation_reducer
                                 ? t->def->evaluation_reducer(t->self, name[k])
                                 : DT_REDUCER_AVG;
                    acc[k] = red[k] == DT_REDUCER_MAX   ? -INFINITY
                             : red[k] == DT_REDUCER_MIN ? INFINITY
                                                        : 0;
                    wsum[k] = 0;
                    n++;
                }
                double v = m.m[i].value;
                switch (red[k]) {
                case DT_REDUCER_AVG:
                    acc[k] += v * (double)len;
                    wsum[k] += (double)len;
                    break;
                case DT_REDUCER_SUM:
                    acc[k] += v;
                    break;
                case DT_REDUCER_MAX:
                    acc[k] = fmax(acc[k], v);
                    break;
                case DT_REDUCER_MIN:
                    acc[k] = fmin(acc[k], v);
                    break;
                }
            }
            vb++;
            dt_core_heartbeat(t->core); /* a long validation is no hang */
            if (t->o->test_mode) break;
        }
        /* AVG is weighted by batch length (records), so a smaller last batch counts less;
         * slots' partial results are combined per reducer */
        st = sync_status(t, st);
        if (!t->report) n = 0; /* a slot the model-parallel unit keeps out of the metrics */
        part_metric parts[DT_METRICS_MAX];
        for (int k = 0; k < n; k++) {
            memcpy(parts[k].name, name[k], DT_METRIC_NAME_MAX);
            parts[k].reducer = red[k];
            parts[k].acc = acc[k];
            parts[k].weight = wsum[k];
        }
        if (st == DT_OK) st = merge_parts(t, parts, n, out);
    }
    if (st == DT_OK) st = run_reducers(t, false, out);
    dt_ctx_reset(rt);
    *dt_ctx_rng(rt) = saved;
    dt_ctx_set_training(rt, true);
    dt_set_grad_enabled(rt, prev_grad);
    if (st != DT_OK) return st;
    CB(t, on_validation_epoch_end);
    CB(t, on_validation_end, out);
    t->rec.last_val = *out;
    t->rec.last_val_batch = c->batches_trained;
    dt_core_at a = at(t);
    dt_core_report_validation_metrics(t->core, &a, out);
    return DT_OK;
}

/* Is `m` the best validation so far (by the searcher metric)? Updates the best. */
static bool is_best(trainer *t, const dt_metrics *m) {
    const char *metric = t->o->searcher_metric ? t->o->searcher_metric : "validation_loss";
    double v;
    if (!dt_metrics_get(m, metric, &v) || !isfinite(v)) return false;
    bool smaller = !t->o->larger_is_better;
    if (!t->rec.have_best || (smaller ? v < t->rec.best : v > t->rec.best)) {
        t->rec.have_best = true;
        t->rec.best = v;
        return true;
    }
    return false;
}

/* ---- checkpoints ---- */

/* Engine-based trials: what the chief tells every slot before the engines are saved. */
typedef struct ds_ckpt_msg {
    int32_t code; /* 0: write into dir; 1: this position is already saved; 2: the chief failed */
    char dir[4092];
} ds_ckpt_msg;

/* Engine-based trials, on every slot: the chief starts the checkpoint and broadcasts its
 * temporary directory; every slot saves its engines' shards there; the slots agree on the
 * outcome. The chief gets the open writer back in *w (NULL when there is nothing to write:
 * *skip set), the other slots are done when this returns. */
static dt_status ds_save_shards(trainer *t, const char *name, dt_ckpt_writer **w, bool *skip) {
    dt_trial_ctx *c = t->c;
    *w = NULL;
    *skip = false;
    ds_ckpt_msg msg;
    memset(&msg, 0, sizeof msg);
    dt_status st = DT_OK;
    if (chief(t)) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", t->o->checkpoint_dir, name);
        struct stat sb;
        if (stat(path, &sb) == 0) {
            msg.code = 1;
        } else if (!(*w = dt_ckpt_begin(t->o->checkpoint_dir, name))) {
            msg.code = 2;
            st = dt_last_status();
        } else {
            snprintf(msg.dir, sizeof msg.dir, "%s", dt_ckpt_dir(*w));
        }
    }
    if (c->size > 1) {
        char keep[1024];
        snprintf(keep, sizeof keep, "%s", dt_last_error());
        dt_status bst = dt_comm_broadcast(c->comm, &msg, sizeof msg, 0);
        if (bst != DT_OK) {
            dt_ckpt_abort(*w);
            *w = NULL;
            return bst;
        }
        if (st != DT_OK) dt_error(st, "%s", keep);
    }
    if (msg.code == 1) {
        *skip = true;
        return DT_OK;
    }
    if (msg.code == 2)
        return chief(t) ? st : dt_error(DT_ERR_IO, "the chief could not start checkpoint %s", name);
    /* every slot writes its own shards into the chief's temporary directory */
    st = sync_status(t, dt__ds_save(c, t->def, t->self, msg.dir));
    if (st != DT_OK || !chief(t)) {
        dt_ckpt_abort(*w);
        *w = NULL;
        *skip = !chief(t) && st == DT_OK;
    }
    return st;
}

/* Write checkpoint "batch_<N>" of the current position into the checkpoint directory (unless
 * it is there already) and report it stored: it becomes the latest, and the best when `best`.
 * The chief's work, and every slot's for an engine-based trial (see ds_save_shards). */
static dt_status save_checkpoint(trainer *t, bool best) {
    dt_trial_ctx *c = t->c;
    char name[64];
    snprintf(name, sizeof name, "batch_%lld", (long long)c->batches_trained);
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", t->o->checkpoint_dir, name);
    dt_ckpt_writer *ds_w = NULL;
    bool skip = false; /* this position is already saved */
    if (t->ds) {
        /* engine-based: every slot takes part; the chief goes on with the shared files */
        dt_status st = ds_save_shards(t, name, &ds_w, &skip);
        if (st != DT_OK) return dt_error(st, "saving checkpoint %s: %s", path, dt_last_error());
        if (skip && !chief(t)) return DT_OK;
    } else {
        struct stat sb;
        skip = stat(path, &sb) == 0;
    }
    json_t *extra = NULL;
    if (!skip) {
        json_t *state = dt__trial_ckpt_state(c, &t->rec, t->n_cb, t->cb, t->cb_name);
        if (t->ds) json_object_set_new(state, "ds_stream", dt__ds_state_json(c));
        CB(t, on_checkpoint_save_start, state);
        dt_ckpt_writer *w = ds_w ? ds_w : dt_ckpt_begin(t->o->checkpoint_dir, name);
        dt_status st = w ? dt__trial_ckpt_write(w, c, t->def, t->self, state) : dt_last_status();
        json_decref(state);
        if (st != DT_OK) {
            DT_KEEP_ERROR(dt_ckpt_abort(w));
            return dt_error(st, "saving checkpoint %s: %s", path, dt_last_error());
        }
        extra = dt__trial_ckpt_metadata(c);
        st = dt_ckpt_commit(w, extra);
        if (st != DT_OK) {
            json_decref(extra);
            return st;
        }
        CB(t, on_checkpoint_write_end, path);
    }
    dt_core_checkpoint ck = {.uuid = name,
                             .path = path,
                             .metadata = extra,
                             .steps_completed = c->batches_trained,
                             .best = best};
    dt_status st = dt_core_checkpoint_stored(t->core, &ck);
    json_decref(extra);
    if (st != DT_OK) return st;
    if (!skip) CB(t, on_checkpoint_upload_end, name);
    return DT_OK;
}

static dt_status checkpoint(trainer *t, bool best) {
    /* the model and optimiser states are replicated across data-parallel slots: the chief
     * writes, the others wait for the outcome (engine-based trials: every slot writes its
     * engine shards first, see ds_save_shards) */
    dt_status st = chief(t) || t->ds ? save_checkpoint(t, best) : DT_OK;
    st = sync_status(t, st);
    if (st != DT_OK) return st;
    t->last_ckpt_batch = t->c->batches_trained; /* on every slot: they decide alike */
    return DT_OK;
}

/* Validate, then checkpoint per the policy. */
static dt_status validate_and_policy(trainer *t) {
    dt_metrics m;
    dt_status st = validate(t, &m);
    if (st != DT_OK) return st;
    bool best = is_best(t, &m);
    if (t->o->checkpoint_policy == DT_CKPT_ALL || (t->o->checkpoint_policy == DT_CKPT_BEST && best))
        return checkpoint(t, best);
    return DT_OK;
}

/* ---- the loop ---- */

static dt_status no_length(void) {
    return dt_error(DT_ERR_CONFIG, "max_length is required; hint: set searcher.max_length in "
                                   "the config or pass --max-length 100b|5e|20000r");
}

/* Take the current searcher operation: max_batches is its length. DT_OK with max_batches
 * unchanged when there is none. */
static dt_status take_op(trainer *t, const char *what) {
    dt_status st = dt_core_searcher_op(t->core, &t->op);
    if (st == DT_OK && t->op.length.n > 0) st = to_batches(t, t->op.length, what, &t->max_batches);
    return st;
}

/* Complete the operation with the last validation's searcher metric (the same on every
 * slot) and take the next one. */
static dt_status complete_op(trainer *t) {
    const char *metric = t->o->searcher_metric ? t->o->searcher_metric : "validation_loss";
    double v = NAN;
    dt_metrics_get(&t->rec.last_val, metric, &v);
    dt_status st = dt_core_searcher_complete(t->core, &t->op, v);
    return st == DT_OK ? take_op(t, "the searcher operation's length") : st;
}

static dt_status train_loop(trainer *t) {
    dt_trial_ctx *c = t->c;
    int64_t val_every = t->val_every, ckpt_every = t->ckpt_every, report_every = t->report_every;
    if (report_every <= 0) report_every = 100;
    dt_status st = DT_OK;
    if (t->o->step_zero_validation && c->batches_trained == 0 &&
        (st = validate(t, &t->rec.last_val)) != DT_OK)
        return st;
    CB(t, on_training_start);
    int64_t epoch = -1;
    bool stopped = false;
    /* each searcher operation: train to its length, validate, report the searcher metric */
    for (;;) {
        while (c->batches_trained < t->max_batches) {
            int64_t e = c->batches_trained / t->batches_per_epoch;
            int64_t in_epoch = c->batches_trained % t->batches_per_epoch;
            if (e != epoch) {
                epoch = e;
                /* (an engine-based trial's iterator reads the loader as one stream) */
                st = t->ds ? DT_OK : dt_loader_start_epoch(t->train, e, in_epoch);
                if (st != DT_OK) return st;
                if (in_epoch == 0) CB(t, on_training_epoch_start, e);
            }
            dt_batch *b = NULL;
            double d0 = dt_now_sec();
            st = t->ds ? DT_OK : dt_loader_next(t->train, &b);
            double data_sec = dt_now_sec() - d0;
            if (st != DT_OK) return st;
            if (!b && !t->ds)
                return dt_error(DT_ERR_STATE,
                                "the training loader ended epoch %lld after %lld batches "
                                "but reported %lld per epoch",
                                (long long)e, (long long)in_epoch, (long long)t->batches_per_epoch);
            dt_ctx_reset(c->rt);
            c->in_fit = true;
            dt_metrics m = dt_metrics_empty();
            if (b && b->records == 0) {
                /* a shard's padding batch: no data here, but the slot still takes part in the
                 * optimiser steps' gradient averaging (contributing zero gradients) */
                for (int i = 0; i < c->n_optims && m.status == DT_OK; i++)
                    m.status = dt_step_optimizer(c, c->optims[i].opt, NULL);
            } else {
                bool prof = c->profile && c->batches_trained >= c->profile_begin &&
                            c->batches_trained <= c->profile_end;
                double p0 = 0;
                if (prof) {
                    dt_ctx_flops_reset(c->rt);
                    dt_device_reset_peak(dt_ctx_device(c->rt));
                    p0 = dt_now_sec();
                }
                double tb0 = dt_now_sec();
                m = t->ds ? dt__ds_train_batch(c, t->def, t->self, e, c->batches_trained)
                          : t->def->train_batch(t->self, b, e, c->batches_trained);
                double tb1 = dt_now_sec();
                t->window_train_s += tb1 - tb0;
                if (prof && m.status == DT_OK) profile_batch(t, tb1 - p0, data_sec);
            }
            if (m.status != DT_OK)
                return dt_error(m.status, "train_batch failed at batch %lld (epoch %lld): %s",
                                (long long)c->batches_trained, (long long)e, dt_last_error());
            double loss;
            if (!t->report) m = dt_metrics_empty(); /* kept out of the metrics by the unit */
            if (dt_metrics_get(&m, "loss", &loss) && !isfinite(loss))
                return dt_error(DT_ERR_INVALID,
                                "train_batch returned loss = %g at batch %lld (epoch "
                                "%lld); hint: lower the learning rate, enable gradient "
                                "clipping or check the data",
                                loss, (long long)c->batches_trained, (long long)e);
            /* engine-based: a batch is the first engine's train_batch_size records */
            int64_t recs = t->ds ? dt__ds_records_per_batch(c)
                                 : (t->def->get_batch_length ? t->def->get_batch_length(t->self, b)
                                                             : b->records) *
                                       c->size;
            t->rec.records_trained += recs;
            t->window_records += recs;
            t->window_data_s += data_sec; /* (an engine-based trial loads inside train_batch) */
            t->window_batches++;
            t->last_batch = m;
            window_add(&t->win, &m);
            dt__trial_step_scheds(c, DT_LR_STEP_EVERY_BATCH);
            c->batches_trained++;
            bool epoch_end = c->batches_trained % t->batches_per_epoch == 0;
            if (epoch_end) {
                CB(t, on_training_epoch_end, e);
                dt__trial_step_scheds(c, DT_LR_STEP_EVERY_EPOCH);
            }
            report_progress(t);
            bool last = c->batches_trained >= t->max_batches || t->o->test_mode;
            if (period_hit(report_every, c->batches_trained) || last)
                if ((st = report_training(t)) != DT_OK) return st;
            if (t->o->on_batch_end && (st = t->o->on_batch_end(t->o->batch_user, c)) != DT_OK)
                return st;
            if (period_hit(val_every, c->batches_trained) && !last)
                if ((st = validate_and_policy(t)) != DT_OK) return st;
            if (period_hit(ckpt_every, c->batches_trained) && !last)
                if ((st = checkpoint(t, false)) != DT_OK) return st;
            /* 1: checkpoint and stop; 2: the platform disowned this run: stop, write nothing */
            int64_t stop = dt_core_should_preempt(t->core) || c->stop_requested;
            if (stop && t->core->lost) stop = 2;
            if (c->size > 1 && (st = dt_comm_allreduce(c->comm, &stop, 1, DT_COMM_DTYPE_I64,
                                                       DT_REDUCE_OP_MAX)) != DT_OK)
                return st;
            if (stop == 2)
                return dt_error(DT_ERR_STATE,
                                "stopped at batch %lld without a checkpoint: this trial run was "
                                "replaced or lost its master",
                                (long long)c->batches_trained);
            if (stop) {
                stopped = true;
                break;
            }
            if (t->o->test_mode) break;
        }
        if (stopped) break;
        /* the end of the operation: a validation (and the checkpoint the policy asks for) */
        if (t->rec.last_val_batch != c->batches_trained)
            if ((st = validate_and_policy(t)) != DT_OK) return st;
        if ((st = complete_op(t)) != DT_OK) return st;
        if (t->o->test_mode || t->max_batches <= c->batches_trained) break;
    }
    /* the end of training: a final checkpoint */
    if (t->last_ckpt_batch != c->batches_trained) st = checkpoint(t, false);
    if (st == DT_OK && stopped) dt_core_report_stopped(t->core, c->batches_trained);
    return st;
}

dt_status dt_trainer_fit(const dt_trial_def *def, const json_t *config, uint64_t seed,
                         const dt_fit_opts *opts) {
    bool ds = def && def->ds_train_batch; /* an engine-based trial */
    if (ds &&
        (!def->init || !def->build_training_data_loader || !def->build_validation_data_loader))
        return dt_error(DT_ERR_INVALID,
                        "trial %s is incomplete: init, ds_train_batch, "
                        "ds_evaluate_batch, build_training_data_loader and "
                        "build_validation_data_loader are required",
                        def->name ? def->name : "(unnamed)");
    if (ds && dt__ds_check_def(def) != DT_OK) return dt_last_status();
    if (!ds && (!def || !def->init || !def->train_batch || !def->build_training_data_loader ||
                !def->build_validation_data_loader ||
                (!def->evaluate_batch && !def->evaluate_full_dataset)))
        return dt_error(DT_ERR_INVALID,
                        "trial %s is incomplete: init, train_batch, "
                        "build_training_data_loader, build_validation_data_loader "
                        "and evaluate_batch (or evaluate_full_dataset) are required "
                        "(or ds_train_batch and ds_evaluate_batch for an "
                        "engine-based trial)",
                        def && def->name ? def->name : "(unnamed)");
    if (!opts->core && opts->max_length.n <= 0) return no_length();
    if (!opts->checkpoint_dir) return dt_error(DT_ERR_CONFIG, "a checkpoint directory is required");
    if (dt_ckpt_watch_launcher() != DT_OK) return dt_last_status(); /* before any work */
    trainer t;
    memset(&t, 0, sizeof t);
    t.def = def;
    t.o = opts;
    t.ds = ds;
    t.report = true;
    t.rec.last_val_batch = -1;
    t.last_ckpt_batch = -1;
    t.rec.last_val = dt_metrics_empty();
    dt_status st = DT_OK;
    int lock_fd = -1; /* the chief's lock on the checkpoint directory */
    t.c = dt_trial_ctx_new(config, seed);
    if (!t.c) return dt_last_status();
    dt_trial_ctx *c = t.c;
    /* one run writes to a checkpoint directory: a second one stops here, naming the first */
    st = chief(&t) ? dt__ckpt_dir_lock(opts->checkpoint_dir, &lock_fd) : DT_OK;
    if ((st = sync_status(&t, st)) != DT_OK) goto out;
    if (opts->model_dir) dt__ds_set_model_dir(c, opts->model_dir);
    t.core = opts->core;
    if (!t.core) {
        /* dtrain train's: files in the checkpoint directory, stderr, SIGINT / SIGTERM */
        dt_core_local_opts lo = {.chief = chief(&t),
                                 .max_length = opts->max_length,
                                 .checkpoint_dir = opts->checkpoint_dir,
                                 .metrics_out = opts->metrics_out,
                                 .progress = opts->progress,
                                 .quiet = opts->quiet,
                                 .save_trial_best = opts->save_trial_best,
                                 .save_trial_latest = opts->save_trial_latest};
        if (!(t.core = dt_core_local_new(&lo))) {
            st = dt_last_status();
            goto out;
        }
    }
    snprintf(c->tb_path, sizeof c->tb_path, "%s", t.core->tb_path);
    t.core->comm = c->comm; /* a core asking a server on the chief broadcasts over it */

    /* the experiment config's profiling section; a trial that sets its own profiler in init
     * overrides it */
    if (opts->profile &&
        (st = dt_trial_set_profiler(c, true, opts->profile_begin, opts->profile_end)) != DT_OK)
        goto out;
    t.self = def->init(c);
    if (!t.self) {
        st = dt_error(dt_last_status() ? dt_last_status() : DT_ERR_STATE,
                      "trial %s init failed: %s", def->name ? def->name : "", dt_last_error());
        goto out;
    }
    if (ds && (st = dt__ds_after_init(c, def)) != DT_OK) goto out;
    t.report = !ds || dt__ds_reports_metrics(c);
    if (def->build_callbacks) {
        t.n_cb = def->build_callbacks(t.self, t.cb, t.cb_name, MAX_CALLBACKS);
        if (t.n_cb < 0 || t.n_cb > MAX_CALLBACKS) t.n_cb = 0;
    }
    bool build = !ds || dt__ds_builds_loaders(c);
    t.train = build ? def->build_training_data_loader(t.self) : NULL;
    t.val = t.train ? def->build_validation_data_loader(t.self) : NULL;
    if (build && (!t.train || !t.val)) {
        st = dt_error(dt_last_status() ? dt_last_status() : DT_ERR_STATE,
                      "building the %s data loader failed: %s", t.train ? "validation" : "training",
                      dt_last_error());
        goto out;
    }
    int shard_rank = c->rank, shard_world = c->size;
    if (ds) dt__ds_shard(c, &shard_rank, &shard_world); /* the model-parallel unit's view */
    if (!c->repro_disabled && shard_world > 1 && t.train) {
        dt_loader_set_shard(t.train, shard_rank, shard_world);
        dt_loader_set_shard(t.val, shard_rank, shard_world);
    }
    if (ds) {
        /* batches per epoch = the loader's micro-batches / gradient_accumulation_steps */
        if ((st = dt__ds_attach_loaders(c, t.train, t.val, &t.batches_per_epoch)) != DT_OK)
            goto out;
    } else {
        t.batches_per_epoch = dt_loader_num_batches(t.train);
    }
    if (t.batches_per_epoch <= 0) {
        st = dt_error(DT_ERR_CONFIG,
                      "the training loader has no batches (%lld); hint: check the "
                      "dataset and batch size",
                      (long long)t.batches_per_epoch);
        goto out;
    }
    c->batches_per_epoch = t.batches_per_epoch;
    if ((st = take_op(&t, "max_length")) != DT_OK) goto out;
    if (t.op.length.n <= 0) {
        st = no_length();
        goto out;
    }
    if ((st = to_batches(&t, opts->validation_period, "validation_period", &t.val_every)) !=
            DT_OK ||
        (st = to_batches(&t, opts->checkpoint_period, "checkpoint_period", &t.ckpt_every)) !=
            DT_OK ||
        (st = to_batches(&t, opts->reporting_period, "reporting_period", &t.report_every)) != DT_OK)
        goto out;
    if (opts->test_mode) t.max_batches = c->batches_trained + 1;

    /* resume */
    if (opts->latest_checkpoint) {
        json_t *state = NULL;
        /* callbacks see the raw state before it is applied */
        st = dt__trial_resume(c, def, t.self, opts->latest_checkpoint, &state);
        if (st != DT_OK) {
            st =
                dt_error(st, "cannot resume from %s: %s", opts->latest_checkpoint, dt_last_error());
            goto out;
        }
        CB(&t, on_checkpoint_load_start, state);
        st = dt__trial_ckpt_restore_fit(state, &t.rec, t.n_cb, t.cb, t.cb_name);
        t.last_ckpt_batch = c->batches_trained;
        json_decref(state);
        if (st != DT_OK) goto out;
        if (opts->test_mode) t.max_batches = c->batches_trained + 1;
    }
    st = dt_core_start(t.core, c->batches_trained);
    c->tb = t.core->tb; /* lent to the trial (dt_trial_tensorboard_writer) */
    st = sync_status(&t, st);
    if (st != DT_OK) goto out;
    CB(&t, on_trial_startup, c->batches_trained, opts->latest_checkpoint);
    t.t_start = t.t_window = dt_now_sec();
    st = train_loop(&t);
    CB(&t, on_trial_shutdown);
out:
    c->tb = NULL;
    if (t.core != opts->core) dt_core_free(t.core);
    /* the caller's core outlives the context: it must not broadcast over its freed comm (a
     * report after the loop, such as a dsat trial's, then asks the master from each slot) */
    else if (t.core)
        t.core->comm = NULL;
    dt_loader_free(t.train);
    dt_loader_free(t.val);
    if (t.self && def->free) def->free(t.self);
    dt__ckpt_dir_unlock(opts->checkpoint_dir, lock_fd);
    if (st != DT_OK) {
        DT_KEEP_ERROR(dt_trial_ctx_free(c));
        return st;
    }
    dt_trial_ctx_free(c);
    return DT_OK;
}
