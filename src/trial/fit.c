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
 * What a checkpoint holds is trial_ckpt.c's; this file decides when and where one is made. What
 * differs between a plain and an engine trial is behind fit_impl.h's dt__fit_kind.
 * The chief holds the checkpoint directory's lock for the whole run, and a process whose
 * launcher is gone does not start (launcher_watch.c).
 * Exact resume: the data order depends only on (seed, epoch), the loader restarts at the saved
 * batch, and the runtime RNG (dropout) is restored, so N batches trained in one run and in two
 * halves give the same bits. */
#include "fit_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef dt__trainer trainer;

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
        .global_batch_size = t->kind->global_batch_size(t),
        .batches_per_epoch = t->batches_per_epoch,
    };
    return dt_length_batches(l, &s, DT_LENGTH_MIN_ONE, what, out);
}

static bool period_hit(int64_t every, int64_t done) {
    return every > 0 && done % every == 0;
}

static void window_add(dt__fit_window *w, const dt_metrics *m) {
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
    if (!t->kind->loads_in_train) dt_metrics_set(&p, "data_ms", data_sec * 1e3);
    dt_metrics_set(&p, "gflops", sec > 0 ? (double)(f.forward + f.backward) / sec / 1e9 : 0);
    dt_metrics_set(&p, "activation_peak_mb", (double)ms.peak[DT_MEM_ACTIVATIONS] / 1048576.0);
    /* recorded at the batch being trained (batches_trained is advanced after this) */
    dt_core_at a = at(t);
    a.batches++;
    a.epochs = t->batches_per_epoch ? (double)a.batches / t->batches_per_epoch : 0;
    dt_core_report_profiler_metrics(t->core, &a, &p);
}

/* ---- validation ---- */

/* One slot's validation metrics as they accumulate, per name with its reducer. */
typedef struct val_acc {
    int n;
    part_metric p[DT_METRICS_MAX];
} val_acc;

static void val_acc_add(trainer *t, val_acc *a, const dt_metrics *m, int64_t len) {
    for (int i = 0; i < m->n; i++) {
        int k = 0;
        while (k < a->n && strcmp(a->p[k].name, m->m[i].name)) k++;
        part_metric *p = &a->p[k];
        if (k == a->n) {
            if (a->n == DT_METRICS_MAX) continue;
            snprintf(p->name, DT_METRIC_NAME_MAX, "%s", m->m[i].name);
            p->reducer = t->def->evaluation_reducer ? t->def->evaluation_reducer(t->self, p->name)
                                                    : DT_REDUCER_AVG;
            p->acc = p->reducer == DT_REDUCER_MAX   ? -INFINITY
                     : p->reducer == DT_REDUCER_MIN ? INFINITY
                                                    : 0;
            p->weight = 0;
            a->n++;
        }
        double v = m->m[i].value;
        switch ((dt_reducer)p->reducer) {
        case DT_REDUCER_AVG:
            p->acc += v * (double)len;
            p->weight += (double)len;
            break;
        case DT_REDUCER_SUM:
            p->acc += v;
            break;
        case DT_REDUCER_MAX:
            p->acc = fmax(p->acc, v);
            break;
        case DT_REDUCER_MIN:
            p->acc = fmin(p->acc, v);
            break;
        }
    }
}

/* evaluate_batch over this slot's shard, then the slots' parts combined per reducer (AVG is
 * weighted by batch length, so a smaller last batch counts less). */
static dt_status validate_batches(trainer *t, dt_metrics *out) {
    val_acc a = {0};
    dt_status st = t->kind->eval_begin(t);
    for (int64_t vb = 0; st == DT_OK; vb++) {
        dt_metrics m;
        int64_t len = 0;
        if (!t->kind->eval_batch(t, vb, &m, &len, &st)) break;
        if (m.status != DT_OK) {
            st = dt_error(m.status, "evaluate_batch failed at validation batch %lld: %s",
                          (long long)vb, dt_last_error());
            break;
        }
        val_acc_add(t, &a, &m, len);
        dt_core_heartbeat(t->core); /* a long validation is no hang */
        if (t->o->test_mode) break;
    }
    st = dt__fit_agree(t, st);
    if (!t->report) a.n = 0; /* a slot the model-parallel unit keeps out of the metrics */
    return st == DT_OK ? merge_parts(t, a.p, a.n, out) : st;
}

/* evaluate_full_dataset is not distributable: the chief evaluates the whole dataset and
 * shares the result. */
static dt_status validate_full(trainer *t, dt_metrics *out) {
    dt_status st = DT_OK;
    if (dt__fit_chief(t)) {
        st = dt_loader_start_unsharded(t->val, 0);
        if (st == DT_OK) {
            *out = t->def->evaluate_full_dataset(t->self, t->val);
            st = out->status;
        }
    }
    st = dt__fit_agree(t, st);
    if (st == DT_OK && t->c->size > 1) st = dt_comm_broadcast(t->c->comm, out, sizeof *out, 0);
    return st;
}

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
    dt_status st = t->def->evaluate_full_dataset ? validate_full(t, out) : validate_batches(t, out);
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

/* Write checkpoint "batch_<N>" of the current position into the checkpoint directory (unless
 * it is there already) and report it stored: it becomes the latest, and the best when `best`.
 * The chief's work, and every slot's part for a kind whose slots save shards. */
static dt_status save_checkpoint(trainer *t, bool best) {
    dt_trial_ctx *c = t->c;
    char name[64];
    snprintf(name, sizeof name, "batch_%lld", (long long)c->batches_trained);
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", t->o->checkpoint_dir, name);
    dt_ckpt_writer *w = NULL;
    bool skip = false; /* this position is already saved */
    dt_status st = t->kind->ckpt_begin(t, name, &w, &skip);
    if (st != DT_OK) return dt_error(st, "saving checkpoint %s: %s", path, dt_last_error());
    if (!dt__fit_chief(t)) return DT_OK; /* a slot's shards are in the chief's directory */
    json_t *extra = NULL;
    if (!skip) {
        json_t *state = dt__trial_ckpt_state(c, &t->rec, t->n_cb, t->cb, t->cb_name);
        if (t->kind->ckpt_state) t->kind->ckpt_state(t, state);
        CB(t, on_checkpoint_save_start, state);
        st = dt__trial_ckpt_write(w, c, t->def, t->self, state);
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
    st = dt_core_checkpoint_stored(t->core, &ck);
    json_decref(extra);
    if (st != DT_OK) return st;
    if (!skip) CB(t, on_checkpoint_upload_end, name);
    return DT_OK;
}

static dt_status checkpoint(trainer *t, bool best) {
    /* replicated states: the chief writes, the others wait for the outcome; sharded ones:
     * every slot writes its shards first */
    bool part = dt__fit_chief(t) || t->kind->every_slot_saves;
    dt_status st = dt__fit_agree(t, part ? save_checkpoint(t, best) : DT_OK);
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

/* Train batch c->batches_trained (in epoch e) into *m: the batch from the kind, the trial's
 * step, the profile of a profiled batch, and the window's records and times. */
static dt_status train_one(trainer *t, int64_t e, dt_metrics *m) {
    dt_trial_ctx *c = t->c;
    dt_batch *b = NULL;
    double d0 = dt_now_sec();
    dt_status st = t->kind->next_batch(t, e, c->batches_trained % t->batches_per_epoch, &b);
    double data_sec = dt_now_sec() - d0;
    if (st != DT_OK) return st;
    dt_ctx_reset(c->rt);
    c->in_fit = true;
    /* (a shard's padding batch, with no records, is not profiled) */
    bool prof = c->profile && c->batches_trained >= c->profile_begin &&
                c->batches_trained <= c->profile_end && !(b && b->records == 0);
    if (prof) {
        dt_ctx_flops_reset(c->rt);
        dt_device_reset_peak(dt_ctx_device(c->rt));
    }
    int64_t recs = 0;
    double tb0 = dt_now_sec();
    *m = t->kind->train(t, b, e, &recs);
    double tb1 = dt_now_sec();
    t->window_train_s += tb1 - tb0;
    if (prof && m->status == DT_OK) profile_batch(t, tb1 - tb0, data_sec);
    if (m->status != DT_OK)
        return dt_error(m->status, "train_batch failed at batch %lld (epoch %lld): %s",
                        (long long)c->batches_trained, (long long)e, dt_last_error());
    double loss;
    if (!t->report) *m = dt_metrics_empty(); /* kept out of the metrics by the unit */
    if (dt_metrics_get(m, "loss", &loss) && !isfinite(loss))
        return dt_error(DT_ERR_INVALID,
                        "train_batch returned loss = %g at batch %lld (epoch "
                        "%lld); hint: lower the learning rate, enable gradient "
                        "clipping or check the data",
                        loss, (long long)c->batches_trained, (long long)e);
    t->rec.records_trained += recs;
    t->window_records += recs;
    t->window_data_s += data_sec;
    t->window_batches++;
    return DT_OK;
}

/* Should every slot stop here? 1: checkpoint and stop; 2: the platform disowned this run:
 * stop and write nothing (an error). The slots agree on the answer. */
static dt_status stop_check(trainer *t, int64_t *stop) {
    dt_trial_ctx *c = t->c;
    *stop = dt_core_should_preempt(t->core) || c->stop_requested;
    if (*stop && t->core->lost) *stop = 2;
    dt_status st = c->size > 1 ? dt_comm_allreduce(c->comm, stop, 1, DT_COMM_DTYPE_I64,
                                                   DT_REDUCE_OP_MAX)
                               : DT_OK;
    if (st == DT_OK && *stop == 2)
        return dt_error(DT_ERR_STATE,
                        "stopped at batch %lld without a checkpoint: this trial run was "
                        "replaced or lost its master",
                        (long long)c->batches_trained);
    return st;
}

/* After a batch: schedules, epoch end, progress, the periodic reports, validations and
 * checkpoints, then whether to stop (*stop, stop_check's answer). */
static dt_status after_batch(trainer *t, int64_t e, const dt_metrics *m, int64_t *stop) {
    dt_trial_ctx *c = t->c;
    dt_status st = DT_OK;
    t->last_batch = *m;
    window_add(&t->win, m);
    dt__trial_step_scheds(c, DT_LR_STEP_EVERY_BATCH);
    c->batches_trained++;
    if (c->batches_trained % t->batches_per_epoch == 0) {
        CB(t, on_training_epoch_end, e);
        dt__trial_step_scheds(c, DT_LR_STEP_EVERY_EPOCH);
    }
    report_progress(t);
    bool last = c->batches_trained >= t->max_batches || t->o->test_mode;
    int64_t report_every = t->report_every > 0 ? t->report_every : 100;
    if (period_hit(report_every, c->batches_trained) || last)
        if ((st = report_training(t)) != DT_OK) return st;
    if (t->o->on_batch_end && (st = t->o->on_batch_end(t->o->batch_user, c)) != DT_OK) return st;
    if (period_hit(t->val_every, c->batches_trained) && !last)
        if ((st = validate_and_policy(t)) != DT_OK) return st;
    if (period_hit(t->ckpt_every, c->batches_trained) && !last)
        if ((st = checkpoint(t, false)) != DT_OK) return st;
    return stop_check(t, stop);
}

/* Each searcher operation: train to its length, validate, report the searcher metric; then
 * a final checkpoint. */
static dt_status train_loop(trainer *t) {
    dt_trial_ctx *c = t->c;
    dt_status st = DT_OK;
    if (t->o->step_zero_validation && c->batches_trained == 0 &&
        (st = validate(t, &t->rec.last_val)) != DT_OK)
        return st;
    CB(t, on_training_start);
    int64_t epoch = -1, stop = 0;
    while (!stop) {
        while (c->batches_trained < t->max_batches && !stop) {
            int64_t e = c->batches_trained / t->batches_per_epoch;
            int64_t in_epoch = c->batches_trained % t->batches_per_epoch;
            if (e != epoch) {
                epoch = e;
                if ((st = t->kind->start_epoch(t, e, in_epoch)) != DT_OK) return st;
                if (in_epoch == 0) CB(t, on_training_epoch_start, e);
            }
            dt_metrics m;
            if ((st = train_one(t, e, &m)) != DT_OK || (st = after_batch(t, e, &m, &stop)) != DT_OK)
                return st;
            if (t->o->test_mode) break;
        }
        if (stop) break;
        /* the end of the operation: a validation (and the checkpoint the policy asks for) */
        if (t->rec.last_val_batch != c->batches_trained)
            if ((st = validate_and_policy(t)) != DT_OK) return st;
        if ((st = complete_op(t)) != DT_OK) return st;
        if (t->o->test_mode || t->max_batches <= c->batches_trained) break;
    }
    /* the end of training: a final checkpoint */
    if (t->last_ckpt_batch != c->batches_trained) st = checkpoint(t, false);
    if (st == DT_OK && stop) dt_core_report_stopped(t->core, c->batches_trained);
    return st;
}

/* The core reports go to: the caller's, or dtrain train's local one (files in the
 * checkpoint directory, stderr, SIGINT / SIGTERM). */
static dt_status open_core(trainer *t) {
    const dt_fit_opts *o = t->o;
    t->core = o->core;
    if (!t->core) {
        dt_core_local_opts lo = {.chief = dt__fit_chief(t),
                                 .max_length = o->max_length,
                                 .checkpoint_dir = o->checkpoint_dir,
                                 .metrics_out = o->metrics_out,
                                 .progress = o->progress,
                                 .quiet = o->quiet,
                                 .save_trial_best = o->save_trial_best,
                                 .save_trial_latest = o->save_trial_latest};
        if (!(t->core = dt_core_local_new(&lo))) return dt_last_status();
    }
    snprintf(t->c->tb_path, sizeof t->c->tb_path, "%s", t->core->tb_path);
    t->core->comm = t->c->comm; /* a core asking a server on the chief broadcasts over it */
    return DT_OK;
}

/* The trial's init, callbacks and data (through its kind), then the lengths in batches. */
static dt_status open_trial(trainer *t) {
    const dt_trial_def *def = t->def;
    const dt_fit_opts *o = t->o;
    dt_trial_ctx *c = t->c;
    /* the experiment config's profiling section; a trial that sets its own profiler in init
     * overrides it */
    dt_status st = DT_OK;
    if (o->profile &&
        (st = dt_trial_set_profiler(c, true, o->profile_begin, o->profile_end)) != DT_OK)
        return st;
    t->self = def->init(c);
    if (!t->self)
        return dt_error(dt_last_status() ? dt_last_status() : DT_ERR_STATE,
                        "trial %s init failed: %s", def->name ? def->name : "", dt_last_error());
    if (def->build_callbacks) {
        t->n_cb = def->build_callbacks(t->self, t->cb, t->cb_name, DT_FIT_MAX_CALLBACKS);
        if (t->n_cb < 0 || t->n_cb > DT_FIT_MAX_CALLBACKS) t->n_cb = 0;
    }
    if ((st = t->kind->open(t)) != DT_OK) return st;
    if (t->batches_per_epoch <= 0)
        return dt_error(DT_ERR_CONFIG,
                        "the training loader has no batches (%lld); hint: check the "
                        "dataset and batch size",
                        (long long)t->batches_per_epoch);
    c->batches_per_epoch = t->batches_per_epoch;
    if ((st = take_op(t, "max_length")) != DT_OK) return st;
    if (t->op.length.n <= 0) return no_length();
    if ((st = to_batches(t, o->validation_period, "validation_period", &t->val_every)) != DT_OK ||
        (st = to_batches(t, o->checkpoint_period, "checkpoint_period", &t->ckpt_every)) != DT_OK)
        return st;
    return to_batches(t, o->reporting_period, "reporting_period", &t->report_every);
}

/* Continue from the checkpoint the options name: the trial's state, then the loop's record
 * (callbacks see the raw state before it is applied). */
static dt_status resume(trainer *t) {
    const char *from = t->o->latest_checkpoint;
    json_t *state = NULL;
    dt_status st = dt__trial_resume(t->c, t->def, t->self, from, &state);
    if (st != DT_OK) return dt_error(st, "cannot resume from %s: %s", from, dt_last_error());
    CB(t, on_checkpoint_load_start, state);
    st = dt__trial_ckpt_restore_fit(state, &t->rec, t->n_cb, t->cb, t->cb_name);
    t->last_ckpt_batch = t->c->batches_trained;
    json_decref(state);
    return st;
}

static dt_status run(trainer *t) {
    const dt_fit_opts *o = t->o;
    dt_trial_ctx *c = t->c;
    if (o->model_dir) dt__ds_set_model_dir(c, o->model_dir);
    dt_status st = open_core(t);
    if (st == DT_OK) st = open_trial(t);
    if (st == DT_OK && o->latest_checkpoint) st = resume(t);
    if (st != DT_OK) return st;
    if (o->test_mode) t->max_batches = c->batches_trained + 1;
    st = dt_core_start(t->core, c->batches_trained);
    c->tb = t->core->tb; /* lent to the trial (dt_trial_tensorboard_writer) */
    if ((st = dt__fit_agree(t, st)) != DT_OK) return st;
    CB(t, on_trial_startup, c->batches_trained, o->latest_checkpoint);
    t->t_start = t->t_window = dt_now_sec();
    st = train_loop(t);
    CB(t, on_trial_shutdown);
    return st;
}

dt_status dt_trainer_fit(const dt_trial_def *def, const json_t *config, uint64_t seed,
                         const dt_fit_opts *opts) {
    if (!def) return dt_error(DT_ERR_INVALID, "dt_trainer_fit: no trial definition");
    const dt__fit_kind *kind = def->ds_train_batch ? &dt__fit_engine : &dt__fit_plain;
    if (kind->check(def) != DT_OK) return dt_last_status();
    if (!opts->core && opts->max_length.n <= 0) return no_length();
    if (!opts->checkpoint_dir) return dt_error(DT_ERR_CONFIG, "a checkpoint directory is required");
    if (dt_ckpt_watch_launcher() != DT_OK) return dt_last_status(); /* before any work */
    trainer t;
    memset(&t, 0, sizeof t);
    t.def = def;
    t.o = opts;
    t.kind = kind;
    t.report = true;
    t.rec.last_val_batch = -1;
    t.last_ckpt_batch = -1;
    t.rec.last_val = dt_metrics_empty();
    int lock_fd = -1; /* the chief's lock on the checkpoint directory */
    t.c = dt_trial_ctx_new(config, seed);
    if (!t.c) return dt_last_status();
    dt_trial_ctx *c = t.c;
    /* one run writes to a checkpoint directory: a second one stops here, naming the first */
    dt_status st = dt__fit_chief(&t) ? dt__ckpt_dir_lock(opts->checkpoint_dir, &lock_fd) : DT_OK;
    if ((st = dt__fit_agree(&t, st)) == DT_OK) st = run(&t);
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
