/* loader.c — dt_loader: hands out the batches of an epoch plan (sampler.c), built by the
 * default stacking collate or a user collate, either on the caller's thread (num_workers 0) or
 * by worker pthreads that fill a ring of slots ahead of the consumer.
 *
 * The ring. With S slots, batch k (this shard's k-th batch of the epoch) always goes to slot
 * k % S, and its content is a function of the plan alone, so which worker fills it, and when,
 * never shows. A worker may start batch k once batch k - S has been released by the consumer
 * (`released` = every batch below it is released); the consumer holds the batch it last
 * returned until its next call. Workers take batch numbers in order under the mutex and
 * publish a filled slot by setting its `done` to k. Starting another epoch, resharding or
 * freeing sets `stop` and joins the workers; a worker checks `stop` between samples. */
#include "data_impl.h"
#include "data/data_iface.h"

#include <pthread.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WORKERS 256
#define MAX_PREFETCH 64

typedef struct slot {
    dt_batch b;
    int64_t cap;  /* samples the slot's tensors (or custom object) can hold */
    int64_t done; /* the batch number the slot holds, ready; -1 if none (under mu) */
    dt_status st; /* fill result of batch `done` */
    char msg[1024];
} slot;

struct dt_loader {
    /* a user loader (dt_loader_new_custom) when ops != NULL; nothing below is used then */
    const dt_loader_ops *ops;
    void *user;
    int rank, world;

    dt_ctx *ctx;
    dt_dataset *ds;
    dt_loader_opts o;
    dt_sampler sampler; /* a copy of opts.sampler, its fixed list copied to fixed_idx */
    int64_t *fixed_idx;
    dt__sampling cfg;
    dt__plan_scratch scr;

    dt_batch_plan plan;       /* the running epoch's batches on this shard */
    bool started;             /* an epoch is running: dt_loader_next hands out batches */
    bool ended;               /* the epoch ran to its end: dt_loader_next returns no batch */
    int64_t epoch, pos, held; /* pos: next batch to hand out; held: batch out with the user */
    dt_status err;            /* sticky error of the running epoch */
    char errmsg[1200];

    int nslots;
    slot *slots;

    /* workers */
    pthread_t *threads;
    int nthreads; /* running */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    int64_t next_assign, released;
    atomic_bool stop;
};

/* ---- slots ----------------------------------------------------------------------------- */

static void slot_free_contents(dt_loader *l, slot *s) {
    for (int f = 0; f < DT_DATASET_MAX_FIELDS; f++) {
        dt_tensor *t = s->b.tensors[f];
        if (!t) continue;
        t->shape[0] = s->cap; /* dt_tensor_free releases numel * size bytes */
        dt_tensor_free(t);
        s->b.tensors[f] = NULL;
    }
    if (s->b.custom && l->o.collate && l->o.collate->slot_free)
        l->o.collate->slot_free(l->o.collate->user, s->b.custom);
    s->b.custom = NULL;
    s->cap = 0;
}

/* Make every slot able to hold `cap` samples (grows only; runs with no worker alive). */
static dt_status ensure_capacity(dt_loader *l, int64_t cap) {
    if (cap < 1) cap = 1;
    for (int i = 0; i < l->nslots; i++) {
        slot *s = &l->slots[i];
        if (s->cap >= cap) continue;
        slot_free_contents(l, s);
        if (l->o.collate) {
            if (l->o.collate->slot_new) {
                dt_clear_error();
                s->b.custom = l->o.collate->slot_new(l->o.collate->user, cap);
                if (!s->b.custom)
                    return dt_error(dt_last_status() != DT_OK ? dt_last_status() : DT_ERR_OOM,
                                    "collate slot_new(%lld) failed: %s", (long long)cap,
                                    dt_last_error());
            }
        } else {
            s->b.nfields = l->ds->nfields;
            for (int f = 0; f < l->ds->nfields; f++) {
                const dt_field *fd = &l->ds->fields[f];
                int64_t shape[DT_MAX_DIMS];
                shape[0] = cap; // the batch is (cap, field shape...)
                for (int d = 0; d < fd->ndim; d++) shape[d + 1] = fd->shape[d];
                dt_tensor *t =
                    dt_tensor_new_heap(l->ctx, fd->dtype, fd->ndim + 1, shape, DT_MEM_OTHER);
                if (!t) {
                    s->cap = cap; /* so slot_free_contents restores the right size */
                    return dt_error(dt_last_status(),
                                    "data loader: batch buffer for field "
                                    "'%s' (%lld samples): %s",
                                    fd->name, (long long)cap, dt_last_error());
                }
                t->name = fd->name;
                s->b.tensors[f] = t;
            }
        }
        s->cap = cap;
    }
    return DT_OK;
}

/* samples whose reads are started (dataset prefetch hint) before the one being built */
#define PREFETCH_AHEAD 8

/* Where sample i of the batch goes: row i of each field's tensor. */
static void sample_rows(const dt_dataset *ds, dt_batch *b, const size_t *nbytes, int64_t i,
                        void **out) {
    for (int f = 0; f < ds->nfields; f++)
        out[f] = (char *)b->tensors[f]->data + (size_t)i * nbytes[f];
}

/* s->msg for batch k whose dataset index `index` failed with `msg`. */
static void index_error(const dt_loader *l, slot *s, int64_t k, int64_t index, const char *msg) {
    snprintf(s->msg, sizeof s->msg, "loading batch %lld of epoch %lld: dataset index %lld: %s",
             (long long)k, (long long)l->epoch, (long long)index, msg);
}

/* Built on the training thread: spread the samples over the compute threads (datasets' get
 * is thread-safe by contract). Each sample lands in its own row, so the batch is the same
 * bits whatever the thread count; the failing index reported is the lowest. */
static dt_status fill_parallel(dt_loader *l, slot *s, int64_t k, const int64_t *idx, int64_t n,
                               const size_t *nbytes) {
    const dt_dataset *ds = l->ds;
    dt_batch *b = &s->b;
    int64_t bad = n;
    dt_status bad_st = DT_OK;
    char bad_msg[512];
#pragma omp parallel
    {
        int nt = omp_get_num_threads(), me = omp_get_thread_num();
        int64_t lo = n * me / nt, hi = n * (me + 1) / nt;
        if (ds->prefetch)
            for (int64_t i = lo; i < hi && i < lo + PREFETCH_AHEAD; i++) ds->prefetch(ds, idx[i]);
        for (int64_t i = lo; i < hi; i++) {
            if (ds->prefetch && i + PREFETCH_AHEAD < hi) ds->prefetch(ds, idx[i + PREFETCH_AHEAD]);
            void *o[DT_DATASET_MAX_FIELDS];
            sample_rows(ds, b, nbytes, i, o);
            dt_clear_error();
            dt_status e = ds->get(ds, idx[i], o);
            if (e != DT_OK) {
#pragma omp critical(dt_loader_fill)
                if (i < bad) {
                    bad = i;
                    bad_st = e;
                    snprintf(bad_msg, sizeof bad_msg, "%s",
                             dt_last_error()[0] ? dt_last_error() : dt_status_name(e));
                }
            }
        }
    }
    if (bad < n) index_error(l, s, k, idx[bad], bad_msg);
    return bad < n ? bad_st : DT_OK;
}

/* One sample after another (a worker thread, or a small batch); stops early when the loader
 * is stopping. */
static dt_status fill_serial(dt_loader *l, slot *s, int64_t k, const int64_t *idx, int64_t n,
                             const size_t *nbytes) {
    const dt_dataset *ds = l->ds;
    void *out[DT_DATASET_MAX_FIELDS];
    if (ds->prefetch)
        for (int64_t i = 0; i < n && i < PREFETCH_AHEAD; i++) ds->prefetch(ds, idx[i]);
    for (int64_t i = 0; i < n; i++) {
        if (atomic_load_explicit(&l->stop, memory_order_relaxed)) return DT_ERR_STATE;
        if (ds->prefetch && i + PREFETCH_AHEAD < n) ds->prefetch(ds, idx[i + PREFETCH_AHEAD]);
        sample_rows(ds, &s->b, nbytes, i, out);
        dt_clear_error();
        dt_status st = ds->get(ds, idx[i], out);
        if (st != DT_OK) {
            index_error(l, s, k, idx[i], dt_last_error()[0] ? dt_last_error() : dt_status_name(st));
            return st;
        }
    }
    return DT_OK;
}

/* Build batch k of the plan into slot s. Returns its status; on error s->msg has the text. */
static dt_status fill_slot(dt_loader *l, slot *s, int64_t k) {
    const int64_t *idx = l->plan.idx + l->plan.off[k];
    int64_t n = l->plan.off[k + 1] - l->plan.off[k];
    dt_batch *b = &s->b;
    b->records = n;
    b->indices = idx;
    b->n_indices = n;
    b->epoch = l->epoch;
    b->batch = k;
    if (l->o.collate) {
        dt_clear_error();
        dt_status st = l->o.collate->fill(l->o.collate->user, l->ds, idx, n, b);
        if (st != DT_OK)
            snprintf(s->msg, sizeof s->msg, "loading batch %lld of epoch %lld: collate failed: %s",
                     (long long)k, (long long)l->epoch, dt_last_error());
        return st;
    }
    const dt_dataset *ds = l->ds;
    size_t nbytes[DT_DATASET_MAX_FIELDS];
    for (int f = 0; f < ds->nfields; f++) {
        nbytes[f] = dt_field_nbytes(&ds->fields[f]);
        b->tensors[f]->shape[0] = n; // (n, field shape...)
    }
    if (!l->o.num_workers && n >= 32 && !omp_in_parallel())
        return fill_parallel(l, s, k, idx, n, nbytes);
    return fill_serial(l, s, k, idx, n, nbytes);
}

/* ---- workers --------------------------------------------------------------------------- */

static void *worker_main(void *arg) {
    dt_loader *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!atomic_load(&l->stop)) {
        int64_t k = l->next_assign;
        if (k < l->plan.nb && k < l->released + l->nslots) {
            l->next_assign++;
            slot *s = &l->slots[k % l->nslots];
            pthread_mutex_unlock(&l->mu);
            dt_status st = fill_slot(l, s, k);
            pthread_mutex_lock(&l->mu);
            s->st = st;
            s->done = k;
            pthread_cond_broadcast(&l->cv_done);
        } else {
            pthread_cond_wait(&l->cv_work, &l->mu);
        }
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static void stop_workers(dt_loader *l) {
    if (!l->nthreads) return;
    pthread_mutex_lock(&l->mu);
    atomic_store(&l->stop, true);
    pthread_cond_broadcast(&l->cv_work);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->nthreads; i++) pthread_join(l->threads[i], NULL);
    l->nthreads = 0;
    atomic_store(&l->stop, false);
}

static dt_status start_workers(dt_loader *l) {
    for (int i = 0; i < l->o.num_workers; i++) {
        int e = pthread_create(&l->threads[i], NULL, worker_main, l);
        if (e) {
            stop_workers(l);
            return dt_error(DT_ERR_OOM,
                            "data loader: cannot start worker thread %d (error %d); "
                            "hint: lower num_workers",
                            i, e);
        }
        l->nthreads = i + 1;
    }
    return DT_OK;
}

/* End the running epoch: workers joined, nothing handed out any more. */
static void end_epoch(dt_loader *l) {
    stop_workers(l);
    l->started = false;
    l->ended = false;
    l->held = -1;
}

/* ---- construction ---------------------------------------------------------------------- */

static dt_status check_opts(dt_ctx *ctx, const dt_dataset *ds, const dt_loader_opts *o) {
    if (o->batch_sampler) {
        if (o->batch_size || o->shuffle || o->sampler || o->drop_last)
            return dt_error(DT_ERR_CONFIG,
                            "batch_sampler is mutually exclusive with batch_size, "
                            "shuffle, sampler and drop_last (got batch_size=%lld shuffle=%d "
                            "sampler=%s drop_last=%d); hint: leave those unset, the batch "
                            "sampler decides every batch",
                            (long long)o->batch_size, o->shuffle, o->sampler ? "set" : "NULL",
                            o->drop_last);
        if (!o->batch_sampler->epoch)
            return dt_error(DT_ERR_CONFIG, "batch_sampler has no epoch callback");
    } else if (o->batch_size < 1) {
        return dt_error(DT_ERR_CONFIG,
                        "batch_size must be >= 1 (got %lld); hint: set "
                        "opts.batch_size (the per-rank batch size)",
                        (long long)o->batch_size);
    }
    if (o->sampler) {
        if (o->shuffle)
            return dt_error(DT_ERR_CONFIG,
                            "sampler is mutually exclusive with shuffle; hint: "
                            "shuffle inside the sampler (it gets the seed and epoch)");
        if (!o->sampler->indices && (!o->sampler->len || !o->sampler->fill))
            return dt_error(DT_ERR_CONFIG, "sampler needs either an index list or both len and "
                                           "fill callbacks");
        if (o->sampler->indices && o->sampler->n < 0)
            return dt_error(DT_ERR_CONFIG, "sampler index list has n = %lld",
                            (long long)o->sampler->n);
    }
    if (o->num_workers < 0 || o->num_workers > MAX_WORKERS)
        return dt_error(DT_ERR_CONFIG, "num_workers = %d is outside [0, %d]", o->num_workers,
                        MAX_WORKERS);
    if (o->prefetch_factor < 0 || o->prefetch_factor > MAX_PREFETCH)
        return dt_error(DT_ERR_CONFIG, "prefetch_factor = %d is outside [0, %d] (0 means 2)",
                        o->prefetch_factor, MAX_PREFETCH);
    if (o->collate && !o->collate->fill)
        return dt_error(DT_ERR_CONFIG, "collate has no fill callback");
    if (!o->collate) {
        if (!ctx)
            return dt_error(DT_ERR_INVALID, "dt_loader_new: NULL ctx (needed for the batch "
                                            "tensors unless a user collate is given)");
        if (ds->nfields < 1 || ds->nfields > DT_DATASET_MAX_FIELDS)
            return dt_error(DT_ERR_CONFIG,
                            "dataset has %d fields; the default collate needs "
                            "1..%d; hint: describe the fields or give a user collate",
                            ds->nfields, DT_DATASET_MAX_FIELDS);
        for (int f = 0; f < ds->nfields; f++)
            if (dt__field_check(&ds->fields[f], "dataset") != DT_OK) return DT_ERR_INVALID;
    }
    return DT_OK;
}

dt_loader *dt_loader_new(dt_ctx *ctx, dt_dataset *ds, const dt_loader_opts *opts) {
    if (!ds || !opts || !ds->len || !ds->get) {
        dt_error(DT_ERR_INVALID, "dt_loader_new: NULL dataset/options, or a dataset without "
                                 "len/get");
        if (ds && opts && opts->take_dataset) dt_dataset_free(ds);
        return NULL;
    }
    if (check_opts(ctx, ds, opts) != DT_OK) {
        if (opts->take_dataset) dt_dataset_free(ds);
        return NULL;
    }
    dt_loader *l = calloc(1, sizeof *l);
    if (!l) {
        dt_error(DT_ERR_OOM, "dt_loader_new: loader");
        if (opts->take_dataset) dt_dataset_free(ds);
        return NULL;
    }
    l->ctx = ctx;
    l->ds = ds;
    l->o = *opts;
    if (!l->o.prefetch_factor) l->o.prefetch_factor = 2;
    l->rank = 0;
    l->world = 1;
    l->epoch = -1;
    l->held = -1;
    l->scr.global_epoch = -1;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv_work, NULL);
    pthread_cond_init(&l->cv_done, NULL);
    atomic_init(&l->stop, false);
    l->nslots = l->o.num_workers ? l->o.num_workers * l->o.prefetch_factor + 1 : 1;
    l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
    l->threads = calloc((size_t)(l->o.num_workers ? l->o.num_workers : 1), sizeof *l->threads);
    if (!l->slots || !l->threads) {
        dt_error(DT_ERR_OOM, "dt_loader_new: %d slots", l->nslots);
        dt_loader_free(l);
        return NULL;
    }
    if (opts->sampler) {
        l->sampler = *opts->sampler;
        if (opts->sampler->indices) {
            int64_t n = opts->sampler->n, len = ds->len(ds);
            l->fixed_idx = malloc((size_t)(n ? n : 1) * sizeof *l->fixed_idx);
            if (!l->fixed_idx) {
                dt_error(DT_ERR_OOM, "dt_loader_new: sampler list of %lld", (long long)n);
                dt_loader_free(l);
                return NULL;
            }
            for (int64_t i = 0; i < n; i++) {
                if (opts->sampler->indices[i] < 0 || opts->sampler->indices[i] >= len) {
                    dt_error(DT_ERR_INVALID,
                             "sampler index %lld (position %lld) is outside the "
                             "dataset [0, %lld)",
                             (long long)opts->sampler->indices[i], (long long)i, (long long)len);
                    dt_loader_free(l);
                    return NULL;
                }
                l->fixed_idx[i] = opts->sampler->indices[i];
            }
            l->sampler.indices = l->fixed_idx;
        }
        l->o.sampler = &l->sampler;
    }
    l->cfg = (dt__sampling){.ds = ds,
                            .batch_size = l->o.batch_size,
                            .shuffle = l->o.shuffle,
                            .drop_last = l->o.drop_last,
                            .seed = l->o.seed,
                            .sampler = l->o.sampler,
                            .batch_sampler = l->o.batch_sampler};
    /* the batch buffers now (a batch sampler's size is known only per epoch) */
    if (!l->o.batch_sampler && ensure_capacity(l, l->o.batch_size) != DT_OK) {
        dt_loader_free(l);
        return NULL;
    }
    return l;
}

dt_loader *dt_loader_new_custom(const dt_loader_ops *ops, void *user) {
    if (!ops || !ops->start_epoch || !ops->next || !ops->num_batches) {
        dt_error(DT_ERR_INVALID, "dt_loader_new_custom: ops needs start_epoch, next and "
                                 "num_batches");
        return NULL;
    }
    dt_loader *l = calloc(1, sizeof *l);
    if (!l) {
        dt_error(DT_ERR_OOM, "dt_loader_new_custom: loader");
        return NULL;
    }
    l->ops = ops;
    l->user = user;
    l->world = 1;
    l->epoch = -1;
    return l;
}

void dt_loader_free(dt_loader *l) {
    if (!l) return;
    if (l->ops) {
        if (l->ops->free) l->ops->free(l->user);
        free(l);
        return;
    }
    stop_workers(l);
    for (int i = 0; l->slots && i < l->nslots; i++) slot_free_contents(l, &l->slots[i]);
    free(l->slots);
    free(l->threads);
    free(l->fixed_idx);
    dt__plan_release(&l->plan);
    dt__scratch_release(&l->scr);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv_work);
    pthread_cond_destroy(&l->cv_done);
    if (l->o.take_dataset) dt_dataset_free(l->ds);
    free(l);
}

/* ---- epochs ---------------------------------------------------------------------------- */

dt_status dt_loader_set_shard(dt_loader *l, int rank, int world) {
    if (!l) return dt_error(DT_ERR_INVALID, "dt_loader_set_shard: NULL loader");
    if (world < 1 || rank < 0 || rank >= world)
        return dt_error(DT_ERR_INVALID,
                        "dt_loader_set_shard: rank %d of world %d; need 0 <= "
                        "rank < world",
                        rank, world);
    if (l->ops) {
        dt_status st = l->ops->set_shard ? l->ops->set_shard(l->user, rank, world) : DT_OK;
        if (st == DT_OK) {
            l->rank = rank;
            l->world = world;
        }
        return st;
    }
    if (rank != l->rank || world != l->world) end_epoch(l);
    l->rank = rank;
    l->world = world;
    return DT_OK;
}

static dt_status start(dt_loader *l, int64_t epoch, int64_t skip, int rank, int world) {
    end_epoch(l);
    if (epoch < 0)
        return dt_error(DT_ERR_INVALID, "dt_loader_start_epoch: epoch %lld < 0", (long long)epoch);
    dt_status st = dt__plan_build(&l->cfg, &l->scr, epoch, rank, world, &l->plan);
    if (st != DT_OK) return st;
    if (skip < 0 || skip > l->plan.nb)
        return dt_error(DT_ERR_INVALID,
                        "dt_loader_start_epoch: skip_batches %lld is outside "
                        "[0, %lld] (the batches of epoch %lld on rank %d of %d)",
                        (long long)skip, (long long)l->plan.nb, (long long)epoch, rank, world);
    if (l->o.batch_sampler && (st = ensure_capacity(l, dt__plan_max_batch(&l->plan))) != DT_OK)
        return st;
    l->epoch = epoch;
    l->pos = skip;
    l->held = -1;
    l->err = DT_OK;
    l->errmsg[0] = 0;
    l->next_assign = skip;
    l->released = skip;
    for (int i = 0; i < l->nslots; i++) l->slots[i].done = -1;
    l->started = true;
    if (l->o.num_workers && skip < l->plan.nb && (st = start_workers(l)) != DT_OK) {
        l->started = false;
        return st;
    }
    return DT_OK;
}

dt_status dt_loader_start_epoch(dt_loader *l, int64_t epoch, int64_t skip_batches) {
    if (!l) return dt_error(DT_ERR_INVALID, "dt_loader_start_epoch: NULL loader");
    if (l->ops) {
        dt_status st = l->ops->start_epoch(l->user, epoch, skip_batches);
        if (st == DT_OK) {
            l->epoch = epoch;
            l->pos = skip_batches;
        }
        return st;
    }
    return start(l, epoch, skip_batches, l->rank, l->world);
}

dt_status dt_loader_start_unsharded(dt_loader *l, int64_t epoch) {
    if (!l) return dt_error(DT_ERR_INVALID, "dt_loader_start_unsharded: NULL loader");
    if (l->ops) return dt_loader_start_epoch(l, epoch, 0);
    return start(l, epoch, 0, 0, 1);
}

dt_status dt_loader_next(dt_loader *l, dt_batch **out) {
    if (out) *out = NULL;
    if (!l || !out) return dt_error(DT_ERR_INVALID, "dt_loader_next: NULL loader or out");
    if (l->ops) {
        dt_status st = l->ops->next(l->user, out);
        if (st == DT_OK && *out) l->pos++;
        return st;
    }
    if (l->err != DT_OK) return dt_error(l->err, "%s", l->errmsg);
    if (!l->started) {
        if (l->ended) return DT_OK; /* still at the end */
        return dt_error(DT_ERR_STATE, "dt_loader_next: no epoch started; hint: call "
                                      "dt_loader_start_epoch(loader, epoch, skip_batches) first");
    }
    int64_t k = l->pos;
    if (k >= l->plan.nb) {
        end_epoch(l); /* idle workers are joined at the end of the epoch */
        l->ended = true;
        return DT_OK;
    }
    slot *s = &l->slots[k % l->nslots];
    dt_status st;
    if (!l->o.num_workers) {
        st = fill_slot(l, s, k);
    } else {
        pthread_mutex_lock(&l->mu);
        if (l->held >= 0) {
            l->released = l->held + 1;
            l->held = -1;
            pthread_cond_broadcast(&l->cv_work);
        }
        while (s->done != k) pthread_cond_wait(&l->cv_done, &l->mu);
        st = s->st;
        pthread_mutex_unlock(&l->mu);
    }
    if (st != DT_OK) {
        l->err = st;
        snprintf(l->errmsg, sizeof l->errmsg, "%s", s->msg);
        return dt_error(st, "%s", l->errmsg);
    }
    l->held = k;
    l->pos = k + 1;
    *out = &s->b;
    return DT_OK;
}

/* ---- queries --------------------------------------------------------------------------- */

static int64_t count(dt_loader *l, bool unsharded, bool records) {
    if (!l) return -1;
    if (l->ops) {
        if (records) return l->ops->num_records ? l->ops->num_records(l->user) : -1;
        return l->ops->num_batches(l->user);
    }
    int64_t nb, nrec;
    int64_t epoch = l->epoch >= 0 ? l->epoch : 0;
    if (dt__plan_count(&l->cfg, &l->scr, epoch, unsharded ? 0 : l->rank, unsharded ? 1 : l->world,
                       &nb, &nrec) != DT_OK)
        return -1;
    return records ? nrec : nb;
}

int64_t dt_loader_num_batches(dt_loader *l) {
    return count(l, false, false);
}
int64_t dt_loader_num_records(dt_loader *l) {
    return count(l, false, true);
}
int64_t dt_loader_num_batches_unsharded(dt_loader *l) {
    return count(l, true, false);
}
int64_t dt_loader_num_records_unsharded(dt_loader *l) {
    return count(l, true, true);
}

void dt_loader_position(const dt_loader *l, int64_t *epoch, int64_t *batch) {
    if (epoch) *epoch = l && l->epoch >= 0 ? l->epoch : -1;
    if (batch) *batch = l && l->epoch >= 0 ? l->pos : 0;
}

const dt_dataset *dt_loader_dataset(const dt_loader *l) {
    return l && !l->ops ? l->ds : NULL;
}

const dt_loader_opts *dt_loader_options(const dt_loader *l) {
    return l && !l->ops ? &l->o : NULL;
}

dt_tensor *dt_batch_get(const dt_batch *b, const char *name) {
    if (!b || !name) return NULL;
    for (int f = 0; f < b->nfields; f++)
        if (b->tensors[f] && b->tensors[f]->name && strcmp(b->tensors[f]->name, name) == 0)
            return b->tensors[f];
    return NULL;
}
