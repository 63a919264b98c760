/* Tests for dt_loader (src/data/loader.c, sampler.c): batching, drop_last, reproducible
 * shuffling, bit-identical results whatever num_workers, resume mid-epoch, sharding over 2 and
 * 3 ranks (coverage, equal batch counts, the remainder rule), user samplers, batch samplers
 * and their exclusivity errors, user collate, worker errors, the prefetch hint, user loaders,
 * memory accounting. */
#include "dtrain/data.h"
#include "test.h"

#include <stdint.h>
#include <string.h>

enum { NX = 3 };

static dt_device *dev;
static dt_ctx *ctx;

/* n samples: "x" f32 (NX) = {i, i + 0.5, -i}, "y" i64 = i. */
static dt_dataset *make_ds(int64_t n) {
    float *x = malloc((size_t)n * NX * sizeof *x);
    int64_t *y = malloc((size_t)n * sizeof *y);
    for (int64_t i = 0; i < n; i++) {
        x[i * NX] = (float)i;
        x[i * NX + 1] = (float)i + 0.5f;
        x[i * NX + 2] = -(float)i;
        y[i] = i;
    }
    dt_array_field a[2] = {
        {.field = {.name = "x", .dtype = DT_DTYPE_F32, .ndim = 1, .shape = {NX}}, .data = x},
        {.field = {.name = "y", .dtype = DT_DTYPE_I64, .ndim = 0}, .data = y}};
    dt_dataset *ds = dt_dataset_from_arrays(2, a, n, true);
    free(x);
    free(y);
    return ds;
}

/* An epoch's stream, flattened: per batch its record count, indices and tensor bytes. */
typedef struct stream {
    int64_t nb;
    int64_t *idx, n_idx; /* all indices in order */
    int64_t *sizes;      /* records per batch */
    uint8_t *bytes;
    size_t n_bytes;
    int bad; /* batches whose tensors disagree with their indices */
} stream;

static void stream_free(stream *s) {
    free(s->idx);
    free(s->sizes);
    free(s->bytes);
    memset(s, 0, sizeof *s);
}

static void append(void **buf, size_t *len, const void *p, size_t n, size_t elem) {
    *buf = realloc(*buf, (*len + n) * elem + 1);
    if (n) memcpy((char *)*buf + *len * elem, p, n * elem);
    *len += n;
}

/* Read the rest of the running epoch into s; returns the dt_loader_next status that ended it. */
static dt_status drain(dt_loader *l, stream *s, int64_t max_batches) {
    dt_batch *b;
    dt_status st = DT_OK;
    while (max_batches-- != 0 && (st = dt_loader_next(l, &b)) == DT_OK && b) {
        size_t nidx = (size_t)s->n_idx, nb = (size_t)s->nb;
        append((void **)&s->idx, &nidx, b->indices, (size_t)b->n_indices, sizeof(int64_t));
        append((void **)&s->sizes, &nb, &b->records, 1, sizeof(int64_t));
        s->n_idx = (int64_t)nidx;
        s->nb = (int64_t)nb;
        dt_tensor *x = dt_batch_get(b, "x"), *y = dt_batch_get(b, "y");
        if (!x || !y || x->ndim != 2 || x->shape[0] != b->records || x->shape[1] != NX ||
            y->ndim != 1 || y->shape[0] != b->records || x->dtype != DT_DTYPE_F32 ||
            y->dtype != DT_DTYPE_I64 || b->records != b->n_indices) {
            s->bad++;
            continue;
        }
        const float *xd = x->data;
        const int64_t *yd = y->data;
        for (int64_t r = 0; r < b->records; r++)
            if (yd[r] != b->indices[r] || xd[r * NX] != (float)b->indices[r] ||
                xd[r * NX + 2] != -(float)b->indices[r])
                s->bad++;
        append((void **)&s->bytes, &s->n_bytes, x->data, dt_nbytes(x), 1);
        append((void **)&s->bytes, &s->n_bytes, y->data, dt_nbytes(y), 1);
    }
    return max_batches == -1 ? DT_OK : st;
}

static stream epoch_stream(dt_loader *l, int64_t epoch, int64_t skip) {
    stream s = {0};
    dt_status st = dt_loader_start_epoch(l, epoch, skip);
    CHECK_MSG(st == DT_OK, "%s", dt_last_error());
    if (st == DT_OK) CHECK(drain(l, &s, -1) == DT_OK);
    return s;
}

static bool stream_eq(const stream *a, const stream *b) {
    if (a->nb != b->nb || a->n_idx != b->n_idx || a->n_bytes != b->n_bytes) return false;
    return (!a->n_idx || !memcmp(a->idx, b->idx, (size_t)a->n_idx * sizeof(int64_t))) &&
           (!a->nb || !memcmp(a->sizes, b->sizes, (size_t)a->nb * sizeof(int64_t))) &&
           (!a->n_bytes || !memcmp(a->bytes, b->bytes, a->n_bytes));
}

/* Each index in [0, n) appears exactly `times` times in s. */
static bool covers(const stream *s, int64_t n, int times) {
    int *seen = calloc((size_t)n, sizeof *seen);
    bool ok = true;
    for (int64_t i = 0; i < s->n_idx; i++) {
        if (s->idx[i] < 0 || s->idx[i] >= n)
            ok = false;
        else
            seen[s->idx[i]]++;
    }
    for (int64_t i = 0; i < n; i++) ok = ok && seen[i] == times;
    free(seen);
    return ok;
}

static dt_loader *loader(dt_dataset *ds, dt_loader_opts o) {
    dt_loader *l = dt_loader_new(ctx, ds, &o);
    CHECK_MSG(l != NULL, "%s", dt_last_error());
    return l;
}

static void test_sequential(void) {
    dt_dataset *ds = make_ds(103);
    dt_loader *l = loader(ds, (dt_loader_opts){.batch_size = 10});
    CHECK(dt_loader_num_batches(l) == 11 && dt_loader_num_records(l) == 103);
    stream s = epoch_stream(l, 0, 0);
    CHECK(s.nb == 11 && s.bad == 0 && s.sizes[10] == 3 && s.sizes[0] == 10);
    bool seq = s.n_idx == 103;
    for (int64_t i = 0; seq && i < 103; i++) seq = s.idx[i] == i;
    CHECK(seq);
    /* the end of the epoch is sticky: more calls keep saying "no batch" */
    dt_batch *b = (dt_batch *)1;
    CHECK(dt_loader_next(l, &b) == DT_OK && b == NULL);
    CHECK(dt_loader_next(l, &b) == DT_OK && b == NULL);
    int64_t e, k;
    dt_loader_position(l, &e, &k);
    CHECK(e == 0 && k == 11);
    stream_free(&s);
    dt_loader_free(l);

    l = loader(ds, (dt_loader_opts){.batch_size = 10, .drop_last = true});
    CHECK(dt_loader_num_batches(l) == 10 && dt_loader_num_records(l) == 100);
    s = epoch_stream(l, 0, 0);
    CHECK(s.nb == 10 && s.n_idx == 100 && s.bad == 0);
    stream_free(&s);
    dt_loader_free(l);

    /* a batch larger than the dataset; an empty dataset */
    l = loader(ds, (dt_loader_opts){.batch_size = 500});
    s = epoch_stream(l, 0, 0);
    CHECK(s.nb == 1 && s.sizes[0] == 103 && s.bad == 0);
    stream_free(&s);
    dt_loader_free(l);
    dt_dataset *empty = dt_dataset_subset(ds, 5, 5, false);
    l = loader(empty, (dt_loader_opts){.batch_size = 4, .shuffle = true, .take_dataset = true});
    CHECK(dt_loader_num_batches(l) == 0);
    s = epoch_stream(l, 0, 0);
    CHECK(s.nb == 0);
    stream_free(&s);
    dt_loader_free(l);
    dt_dataset_free(ds);
}

static void test_shuffle(void) {
    dt_dataset *ds = make_ds(103);
    dt_loader_opts o = {.batch_size = 8, .shuffle = true, .seed = 42};
    dt_loader *a = loader(ds, o), *b = loader(ds, o);
    o.seed = 43;
    dt_loader *c = loader(ds, o);
    stream a0 = epoch_stream(a, 0, 0), a1 = epoch_stream(a, 1, 0);
    stream b1 = epoch_stream(b, 1, 0), b0 = epoch_stream(b, 0, 0); /* any order of epochs */
    stream c0 = epoch_stream(c, 0, 0);
    CHECK(stream_eq(&a0, &b0) && stream_eq(&a1, &b1));
    CHECK(!stream_eq(&a0, &a1));
    CHECK(!stream_eq(&a0, &c0));
    CHECK(covers(&a0, 103, 1) && covers(&a1, 103, 1) && covers(&c0, 103, 1));
    CHECK(a0.bad == 0 && a1.bad == 0);
    bool identity = true;
    for (int64_t i = 0; i < a0.n_idx; i++) identity = identity && a0.idx[i] == i;
    CHECK(!identity);
    stream_free(&a0);
    stream_free(&a1);
    stream_free(&b0);
    stream_free(&b1);
    stream_free(&c0);
    dt_loader_free(a);
    dt_loader_free(b);
    dt_loader_free(c);
    dt_dataset_free(ds);
}

static void test_workers_bitwise(void) {
    dt_dataset *ds = make_ds(257);
    const int workers[][2] = {{0, 0}, {1, 1}, {2, 0}, {2, 3}, {3, 1}};
    stream ref[3];
    for (int w = 0; w < 5; w++) {
        dt_loader_opts o = {.batch_size = 7,
                            .shuffle = true,
                            .seed = 9,
                            .num_workers = workers[w][0],
                            .prefetch_factor = workers[w][1]};
        dt_loader *l = loader(ds, o);
        for (int e = 0; e < 3; e++) {
            stream s = epoch_stream(l, e, 0);
            CHECK(s.bad == 0 && s.nb == 37);
            if (w == 0) {
                ref[e] = s;
                continue;
            }
            CHECK_MSG(stream_eq(&s, &ref[e]), "workers %d prefetch %d epoch %d", workers[w][0],
                      workers[w][1], e);
            stream_free(&s);
        }
        dt_loader_free(l);
    }
    for (int e = 0; e < 3; e++) stream_free(&ref[e]);
    dt_dataset_free(ds);
}

static void test_resume(void) {
    dt_dataset *ds = make_ds(103);
    for (int nw = 0; nw <= 2; nw += 2) {
        dt_loader_opts o = {.batch_size = 10, .shuffle = true, .seed = 5, .num_workers = nw};
        dt_loader *l = loader(ds, o);
        stream full = epoch_stream(l, 3, 0);
        const int64_t skips[] = {1, 4, 10, 11};
        for (int i = 0; i < 4; i++) {
            /* a fresh loader (a restarted process) resumes at batch skips[i] */
            dt_loader *r = loader(ds, o);
            stream s = epoch_stream(r, 3, skips[i]);
            int64_t off = 0;
            for (int64_t k = 0; k < skips[i]; k++) off += full.sizes[k];
            CHECK(s.nb == full.nb - skips[i] && s.n_idx == full.n_idx - off);
            CHECK(s.n_idx == 0 ||
                  !memcmp(s.idx, full.idx + off, (size_t)s.n_idx * sizeof(int64_t)));
            CHECK(s.bad == 0);
            int64_t e, k;
            dt_loader_position(r, &e, &k);
            CHECK(e == 3 && k == full.nb);
            stream_free(&s);
            dt_loader_free(r);
        }
        /* abandon an epoch mid-way (workers busy), then resume it where it was left */
        CHECK(dt_loader_start_epoch(l, 3, 0) == DT_OK);
        stream head = {0};
        CHECK(drain(l, &head, 4) == DT_OK && head.nb == 4);
        int64_t e, k;
        dt_loader_position(l, &e, &k);
        CHECK(e == 3 && k == 4);
        CHECK(dt_loader_start_epoch(l, 7, 0) == DT_OK); /* workers of epoch 3 stopped here */
        stream tail = epoch_stream(l, 3, k);
        size_t n = (size_t)head.n_idx;
        append((void **)&head.idx, &n, tail.idx, (size_t)tail.n_idx, sizeof(int64_t));
        CHECK((int64_t)n == full.n_idx && !memcmp(head.idx, full.idx, n * sizeof(int64_t)));
        CHECK(dt_loader_start_epoch(l, 3, 12) == DT_ERR_INVALID);
        CHECK(strstr(dt_last_error(), "skip_batches 12") != NULL);
        dt_batch *b;
        CHECK(dt_loader_next(l, &b) == DT_ERR_STATE && b == NULL); /* no epoch running */
        CHECK(dt_loader_start_epoch(l, -1, 0) == DT_ERR_INVALID);
        stream_free(&head);
        stream_free(&tail);
        stream_free(&full);
        dt_loader_free(l);
    }
    dt_dataset_free(ds);
}

/* Shard over `world` ranks: equal counts, the counts the loader announces, exact coverage (or
 * exactly the first rounds with drop_last), and rank r's full batch j == global batch jW + r. */
static void check_sharding(int64_t n, int64_t bs, int world, bool drop_last, int nw) {
    dt_dataset *ds = make_ds(n);
    dt_loader_opts o = {
        .batch_size = bs, .shuffle = true, .seed = 77, .drop_last = drop_last, .num_workers = nw};
    dt_loader *g = loader(ds, o);
    stream global = epoch_stream(g, 2, 0); /* unsharded, world 1 */
    stream all = {0};
    int64_t nb0 = -1, rec_sum = 0, round = bs * world, full = n / round, rem = n % round;
    bool counts_ok = true, layout_ok = true, empty_ok = true;
    for (int r = 0; r < world; r++) {
        dt_loader *l = loader(ds, o);
        CHECK(dt_loader_set_shard(l, r, world) == DT_OK);
        int64_t nb = dt_loader_num_batches(l);
        rec_sum += dt_loader_num_records(l);
        if (nb0 < 0) nb0 = nb;
        counts_ok = counts_ok && nb == nb0;
        stream s = epoch_stream(l, 2, 0);
        counts_ok = counts_ok && s.nb == nb && s.bad == 0;
        int64_t pos = 0;
        for (int64_t j = 0; j < full && j < s.nb; j++) {
            /* with batches of bs, global batch j*W + r */
            layout_ok = layout_ok && s.sizes[j] == bs &&
                        !memcmp(s.idx + pos, global.idx + (j * world + r) * bs,
                                (size_t)bs * sizeof(int64_t));
            pos += bs;
        }
        if (!drop_last && rem) {
            int64_t want = rem / world + (r < rem % world ? 1 : 0);
            empty_ok = empty_ok && s.nb == full + 1 && s.sizes[full] == want;
        } else {
            empty_ok = empty_ok && s.nb == full;
        }
        size_t ni = (size_t)all.n_idx;
        append((void **)&all.idx, &ni, s.idx, (size_t)s.n_idx, sizeof(int64_t));
        all.n_idx = (int64_t)ni;
        /* the unsharded pass of a sharded loader is the whole dataset */
        if (r == world - 1) {
            stream u = {0};
            CHECK(dt_loader_start_unsharded(l, 2) == DT_OK && drain(l, &u, -1) == DT_OK);
            CHECK(stream_eq(&u, &global));
            CHECK(dt_loader_num_batches_unsharded(l) == global.nb);
            CHECK(dt_loader_num_records_unsharded(l) == global.n_idx);
            stream_free(&u);
        }
        stream_free(&s);
        dt_loader_free(l);
    }
    CHECK_MSG(counts_ok && layout_ok && empty_ok, "n %lld bs %lld world %d drop_last %d",
              (long long)n, (long long)bs, world, drop_last);
    if (drop_last) {
        CHECK(all.n_idx == full * round && rec_sum == full * round);
        /* exactly the first full*round positions of the epoch's order, each once */
        int *seen = calloc((size_t)n, sizeof *seen);
        for (int64_t i = 0; i < all.n_idx; i++) seen[all.idx[i]]++;
        bool once = true;
        stream ord = {0};
        dt_loader_opts o1 = o;
        o1.batch_size = 1;
        dt_loader *l1 = loader(ds, o1);
        CHECK(dt_loader_start_epoch(l1, 2, 0) == DT_OK && drain(l1, &ord, -1) == DT_OK);
        for (int64_t i = 0; i < n; i++) once = once && seen[ord.idx[i]] == (i < full * round);
        CHECK(once);
        stream_free(&ord);
        dt_loader_free(l1);
        free(seen);
    } else {
        CHECK_MSG(covers(&all, n, 1) && rec_sum == n, "n %lld bs %lld world %d", (long long)n,
                  (long long)bs, world);
    }
    stream_free(&all);
    stream_free(&global);
    dt_loader_free(g);
    dt_dataset_free(ds);
}

static void test_sharding(void) {
    for (int world = 2; world <= 3; world++)
        for (int drop = 0; drop <= 1; drop++) {
            check_sharding(103, 10, world, drop, 0);       /* remainder >= world */
            check_sharding(41, 4, world, drop, world - 2); /* remainder 1 or 5 */
            check_sharding(48, 4, world, drop, 0);         /* divides evenly for world 2 and 3 */
            check_sharding(2, 4, world, drop, 0);          /* fewer samples than ranks (world 3) */
        }
    /* the empty padding batch: 41 = 5 rounds of 8 + 1 over 2 ranks -> rank 1 ends empty */
    dt_dataset *ds = make_ds(41);
    dt_loader *l = loader(ds, (dt_loader_opts){.batch_size = 4, .num_workers = 1});
    CHECK(dt_loader_set_shard(l, 1, 2) == DT_OK);
    CHECK(dt_loader_num_batches(l) == 6 && dt_loader_num_records(l) == 20);
    CHECK(dt_loader_start_epoch(l, 0, 5) == DT_OK);
    dt_batch *b;
    CHECK(dt_loader_next(l, &b) == DT_OK && b && b->records == 0 && b->n_indices == 0);
    if (b) {
        dt_tensor *x = dt_batch_get(b, "x");
        CHECK(x && x->shape[0] == 0 && x->shape[1] == NX && dt_numel(x) == 0 && b->batch == 5);
    }
    CHECK(dt_loader_next(l, &b) == DT_OK && b == NULL);
    CHECK(dt_loader_set_shard(l, 2, 2) == DT_ERR_INVALID);
    CHECK(dt_loader_set_shard(l, 0, 0) == DT_ERR_INVALID);
    dt_loader_free(l);
    dt_dataset_free(ds);
}

/* ---- samplers -------------------------------------------------------------------------- */

/* every third index, rotated by the epoch */
static int64_t thirds_len(void *user, int64_t epoch) {
    (void)epoch;
    return *(int64_t *)user / 3;
}
static dt_status thirds_fill(void *user, int64_t epoch, uint64_t seed, int64_t *out) {
    int64_t m = *(int64_t *)user / 3;
    for (int64_t i = 0; i < m; i++) out[i] = 3 * ((i + epoch + (int64_t)seed) % m);
    return DT_OK;
}

static void test_sampler(void) {
    dt_dataset *ds = make_ds(30);
    int64_t list[] = {29, 0, 7, 7, 3};
    dt_sampler fixed = {.indices = list, .n = 5};
    dt_loader *l = loader(ds, (dt_loader_opts){.batch_size = 2, .sampler = &fixed});
    list[0] = 1; /* the loader copied the list */
    stream s = epoch_stream(l, 0, 0);
    const int64_t want[] = {29, 0, 7, 7, 3};
    CHECK(s.nb == 3 && s.n_idx == 5 && !memcmp(s.idx, want, sizeof want) && s.bad == 0);
    stream_free(&s);
    dt_loader_free(l);

    int64_t n = 30;
    dt_sampler cb = {.len = thirds_len, .fill = thirds_fill, .user = &n};
    dt_loader_opts o = {.batch_size = 4, .sampler = &cb, .seed = 1, .num_workers = 2};
    l = loader(ds, o);
    CHECK(dt_loader_set_shard(l, 1, 2) == DT_OK);
    CHECK(dt_loader_num_batches(l) == 2 && dt_loader_num_records(l) == 5);
    s = epoch_stream(l, 2, 0);
    /* order 3*((i+3)%10) = 9,12,..,27,0,3,6; rank 1 gets positions 4..7, then 9 of the tail */
    const int64_t want1[] = {21, 24, 27, 0, 6};
    CHECK(s.n_idx == 5 && !memcmp(s.idx, want1, sizeof want1));
    stream_free(&s);
    dt_loader_free(l);

    /* errors */
    list[0] = 30;
    CHECK(dt_loader_new(ctx, ds, &(dt_loader_opts){.batch_size = 2, .sampler = &fixed}) == NULL);
    CHECK(dt_last_status() == DT_ERR_INVALID && strstr(dt_last_error(), "sampler index 30"));
    CHECK(dt_loader_new(ctx, ds,
                        &(dt_loader_opts){.batch_size = 2, .sampler = &cb, .shuffle = true}) ==
          NULL);
    CHECK(dt_last_status() == DT_ERR_CONFIG && strstr(dt_last_error(), "shuffle"));
    n = 300; /* the callback now hands out indices beyond the dataset */
    l = loader(ds, (dt_loader_opts){.batch_size = 2, .sampler = &cb});
    CHECK(dt_loader_start_epoch(l, 0, 0) == DT_ERR_INVALID);
    CHECK(strstr(dt_last_error(), "outside the dataset [0, 30)") != NULL);
    dt_loader_free(l);
    dt_dataset_free(ds);
}

/* batches of sizes 1, 2, 3, ... over a rotated order; epoch 1 makes larger batches */
static dt_status growing_batches(void *user, int64_t epoch, uint64_t seed, dt_batch_plan *out) {
    int64_t n = *(int64_t *)user, idx[64], pos = 0, size = 1 + epoch * 4;
    while (pos < n) {
        int64_t k = size < n - pos ? size : n - pos;
        for (int64_t i = 0; i < k; i++) idx[i] = (pos + i + (int64_t)seed) % n;
        dt_status st = dt_batch_plan_add(out, idx, k);
        if (st != DT_OK) return st;
        pos += k;
        size++;
    }
    return DT_OK;
}

static void test_batch_sampler(void) {
    dt_dataset *ds = make_ds(40);
    int64_t n = 40;
    dt_batch_sampler bsm = {.epoch = growing_batches, .user = &n};
    dt_mem_stats m0, m1;
    dt_device_stats(dev, &m0);
    dt_loader *l = loader(
        ds,
        (dt_loader_opts){.batch_sampler = &bsm, .seed = 3, .num_workers = 2, .prefetch_factor = 1});
    /* epoch 0: sizes 1..8 (36 samples) then 4 -> 9 batches */
    CHECK(dt_loader_num_batches(l) == 9 && dt_loader_num_records(l) == 40);
    stream s = epoch_stream(l, 0, 0);
    CHECK(s.nb == 9 && s.bad == 0 && s.sizes[0] == 1 && s.sizes[7] == 8 && s.sizes[8] == 4);
    CHECK(s.idx[0] == 3 && covers(&s, 40, 1));
    stream_free(&s);
    /* epoch 1: sizes 5, 6, 7, 8, 9, 5 -> the slots grow to 9 */
    s = epoch_stream(l, 1, 0);
    CHECK(s.nb == 6 && s.sizes[4] == 9 && s.bad == 0 && covers(&s, 40, 1));
    CHECK(dt_loader_num_batches(l) == 6);
    stream_free(&s);
    /* sharded over 3: 6 batches -> 2 each; over 4: 6 -> 2 each, ranks 2, 3 end empty */
    CHECK(dt_loader_set_shard(l, 2, 4) == DT_OK);
    CHECK(dt_loader_num_batches(l) == 2 && dt_loader_num_records(l) == 7);
    s = epoch_stream(l, 1, 0);
    CHECK(s.nb == 2 && s.sizes[0] == 7 && s.sizes[1] == 0);
    stream_free(&s);
    stream all = {0};
    for (int r = 0; r < 3; r++) {
        CHECK(dt_loader_set_shard(l, r, 3) == DT_OK);
        stream t = epoch_stream(l, 0, 0);
        CHECK(t.nb == 3);
        size_t ni = (size_t)all.n_idx;
        append((void **)&all.idx, &ni, t.idx, (size_t)t.n_idx, sizeof(int64_t));
        all.n_idx = (int64_t)ni;
        stream_free(&t);
    }
    CHECK(covers(&all, 40, 1));
    stream_free(&all);
    dt_loader_free(l);
    dt_device_stats(dev, &m1);
    CHECK(m1.current[DT_MEM_OTHER] == m0.current[DT_MEM_OTHER]);

    /* mutually exclusive with batch_size, shuffle, sampler and drop_last */
    dt_sampler fixed = {.indices = (int64_t[]){1, 2}, .n = 2};
    dt_loader_opts bad[4] = {{.batch_sampler = &bsm, .batch_size = 4},
                             {.batch_sampler = &bsm, .shuffle = true},
                             {.batch_sampler = &bsm, .sampler = &fixed},
                             {.batch_sampler = &bsm, .drop_last = true}};
    for (int i = 0; i < 4; i++) {
        CHECK(dt_loader_new(ctx, ds, &bad[i]) == NULL && dt_last_status() == DT_ERR_CONFIG);
        CHECK(strstr(dt_last_error(), "mutually exclusive") != NULL);
    }
    CHECK(dt_loader_new(ctx, ds, &(dt_loader_opts){0}) == NULL);
    CHECK(dt_last_status() == DT_ERR_CONFIG && strstr(dt_last_error(), "batch_size must be >= 1"));
    CHECK(dt_loader_new(ctx, ds, &(dt_loader_opts){.batch_size = 2, .num_workers = -1}) == NULL);
    CHECK(dt_last_status() == DT_ERR_CONFIG);
    dt_dataset_free(ds);
}

/* ---- collate, errors, user loaders, memory --------------------------------------------- */

typedef struct sums {
    int64_t cap;
    double total; /* sum of x[0] over the batch */
} sums;

static void *sums_new(void *user, int64_t max_batch) {
    (*(int *)user)++;
    sums *s = calloc(1, sizeof *s);
    s->cap = max_batch;
    return s;
}
static void sums_free(void *user, void *obj) {
    (*(int *)user)--;
    free(obj);
}
static dt_status sums_fill(void *user, const dt_dataset *ds, const int64_t *idx, int64_t n,
                           dt_batch *b) {
    (void)user;
    sums *s = b->custom;
    float x[NX];
    int64_t y;
    void *out[2] = {x, &y};
    s->total = 0;
    for (int64_t i = 0; i < n; i++) {
        dt_status st = dt_dataset_get(ds, idx[i], out);
        if (st != DT_OK) return st;
        s->total += x[0];
    }
    b->records = 2 * n; /* a custom record count */
    return DT_OK;
}

static void test_collate(void) {
    dt_dataset *ds = make_ds(20);
    int live = 0;
    dt_collate c = {.slot_new = sums_new, .fill = sums_fill, .slot_free = sums_free, .user = &live};
    /* a user collate needs no ctx */
    dt_loader_opts o = {.batch_size = 6, .collate = &c, .num_workers = 2};
    dt_loader *l = dt_loader_new(NULL, ds, &o);
    CHECK(l != NULL && live == 2 * 2 + 1);
    CHECK(dt_loader_start_epoch(l, 0, 0) == DT_OK);
    dt_batch *b;
    double total = 0;
    int64_t recs = 0, nb = 0;
    while (dt_loader_next(l, &b) == DT_OK && b) {
        CHECK(b->nfields == 0 && b->custom && dt_batch_get(b, "x") == NULL);
        total += ((sums *)b->custom)->total;
        recs += b->records;
        nb++;
    }
    CHECK(nb == 4 && recs == 40 && total == 190.0);
    dt_loader_free(l);
    CHECK(live == 0);
    dt_dataset_free(ds);
}

/* a dataset whose sample `bad` fails */
typedef struct failing {
    dt_dataset *base;
    int64_t bad;
} failing;
static int64_t failing_len(const dt_dataset *self) {
    return dt_dataset_len(((failing *)self->state)->base);
}
static dt_status failing_get(const dt_dataset *self, int64_t i, void *const *out) {
    failing *f = self->state;
    if (i == f->bad) return dt_error(DT_ERR_IO, "disk on fire at sample %lld", (long long)i);
    return f->base->get(f->base, i, out);
}

static void test_worker_errors(void) {
    dt_dataset *base = make_ds(50);
    failing fs = {base, 37};
    dt_dataset ds = {.len = failing_len, .get = failing_get, .nfields = 2, .state = &fs};
    memcpy(ds.fields, base->fields, sizeof ds.fields);
    for (int nw = 0; nw <= 2; nw++) {
        dt_loader *l = loader(&ds, (dt_loader_opts){.batch_size = 5, .num_workers = nw});
        for (int round = 0; round < 2; round++) {
            CHECK(dt_loader_start_epoch(l, 0, 0) == DT_OK);
            stream s = {0};
            dt_status st = drain(l, &s, -1);
            CHECK(st == DT_ERR_IO && s.nb == 7 && s.bad == 0); /* batches 0..6 fine */
            CHECK_MSG(strstr(dt_last_error(), "batch 7 of epoch 0: dataset index 37: disk on "
                                              "fire at sample 37") != NULL,
                      "%s", dt_last_error());
            dt_batch *b = (dt_batch *)1;
            CHECK(dt_loader_next(l, &b) == DT_ERR_IO && b == NULL); /* sticky */
            stream_free(&s);
        }
        /* resuming past the bad batch works */
        stream s = epoch_stream(l, 0, 8);
        CHECK(s.nb == 2 && s.idx[0] == 40);
        stream_free(&s);
        dt_loader_free(l);
    }
    dt_dataset_free(base);
}

/* Batches of >= 32 samples built on the caller's thread are filled by the OpenMP threads: the
 * same bits as the serial fill, and the lowest failing index in the batch is the one reported. */
static void test_parallel_fill(void) {
    dt_dataset *base = make_ds(50);
    dt_loader *a = loader(base, (dt_loader_opts){.batch_size = 40, .num_workers = 0});
    dt_loader *w = loader(base, (dt_loader_opts){.batch_size = 40, .num_workers = 1});
    CHECK(dt_loader_start_epoch(a, 0, 0) == DT_OK && dt_loader_start_epoch(w, 0, 0) == DT_OK);
    dt_batch *ba = NULL, *bw = NULL;
    CHECK(dt_loader_next(a, &ba) == DT_OK && dt_loader_next(w, &bw) == DT_OK && ba && bw);
    for (int f = 0; ba && bw && f < ba->nfields; f++)
        CHECK(!memcmp(ba->tensors[f]->data, bw->tensors[f]->data, dt_nbytes(ba->tensors[f])));
    dt_loader_free(a);
    dt_loader_free(w);
    failing fs = {base, 33};
    dt_dataset ds = {.len = failing_len, .get = failing_get, .nfields = 2, .state = &fs};
    memcpy(ds.fields, base->fields, sizeof ds.fields);
    dt_loader *l = loader(&ds, (dt_loader_opts){.batch_size = 40, .num_workers = 0});
    CHECK(dt_loader_start_epoch(l, 0, 0) == DT_OK);
    dt_batch *b = NULL;
    CHECK(dt_loader_next(l, &b) == DT_ERR_IO && b == NULL);
    CHECK_MSG(strstr(dt_last_error(), "dataset index 33: disk on fire at sample 33") != NULL, "%s",
              dt_last_error());
    dt_loader_free(l);
    dt_dataset_free(base);
}

/* The prefetch hint: called for samples before they are read, never beyond the batch, and
 * the batches are the same bits as without it (serial, OpenMP-filled and worker-built). */
typedef struct hinted {
    dt_dataset *base;
    _Atomic int64_t hints, early; /* hints given; hints given before get of that index */
    _Atomic int64_t *seen;        /* per index: 1 = hinted, 2 = read */
    _Atomic int64_t out_of_range;
} hinted;
static int64_t hinted_len(const dt_dataset *self) {
    return dt_dataset_len(((hinted *)self->state)->base);
}
static dt_status hinted_get(const dt_dataset *self, int64_t i, void *const *out) {
    hinted *h = self->state;
    if (h->seen[i] == 1) h->early++;
    h->seen[i] = 2;
    return h->base->get(h->base, i, out);
}
static void hinted_prefetch(const dt_dataset *self, int64_t i) {
    hinted *h = self->state;
    if (i < 0 || i >= dt_dataset_len(h->base)) {
        h->out_of_range++;
        return;
    }
    h->hints++;
    if (h->seen[i] == 0) h->seen[i] = 1;
}

static void test_prefetch_hint(void) {
    const int64_t n = 200;
    dt_dataset *base = make_ds(n);
    /* the built-in in-memory datasets give the hint (a subset through its base) */
    dt_dataset *sub = dt_dataset_subset(base, 10, 20, false);
    CHECK(base->prefetch && sub && sub->prefetch);
    dt_dataset_free(sub);
    for (int nw = 0; nw <= 1; nw++)
        for (int bs = 5; bs <= 64; bs += 59) { /* 5: serial fill; 64: OpenMP fill (nw 0) */
            hinted h = {.base = base, .seen = calloc((size_t)n, sizeof(_Atomic int64_t))};
            dt_dataset ds = {.len = hinted_len,
                             .get = hinted_get,
                             .nfields = 2,
                             .state = &h,
                             .prefetch = hinted_prefetch};
            memcpy(ds.fields, base->fields, sizeof ds.fields);
            dt_loader_opts o = {.batch_size = bs, .shuffle = true, .seed = 9, .num_workers = nw};
            dt_loader *with = loader(&ds, o), *plain = loader(base, o);
            stream a = epoch_stream(with, 3, 0), b = epoch_stream(plain, 3, 0);
            CHECK_MSG(stream_eq(&a, &b) && a.bad == 0, "nw %d bs %d", nw, bs);
            CHECK(h.out_of_range == 0);
            /* every sample read was hinted first (the first few of each thread's share too) */
            CHECK_MSG(h.hints == a.n_idx && h.early == a.n_idx,
                      "nw %d bs %d: %lld hints, %lld "
                      "early, %lld read",
                      nw, bs, (long long)h.hints, (long long)h.early, (long long)a.n_idx);
            stream_free(&a);
            stream_free(&b);
            dt_loader_free(with);
            dt_loader_free(plain);
            free((void *)h.seen);
        }
    dt_dataset_free(base);
}

typedef struct counter {
    int64_t epoch, next, n;
    bool freed;
    dt_batch b;
} counter;
static dt_status cnt_start(void *u, int64_t epoch, int64_t skip) {
    counter *c = u;
    c->epoch = epoch;
    c->next = skip;
    return DT_OK;
}
static dt_status cnt_next(void *u, dt_batch **out) {
    counter *c = u;
    if (c->next >= c->n) return DT_OK;
    c->b.batch = c->next++;
    c->b.records = 1;
    *out = &c->b;
    return DT_OK;
}
static int64_t cnt_nb(void *u) {
    return ((counter *)u)->n;
}
static void cnt_free(void *u) {
    ((counter *)u)->freed = true;
}

static void test_custom_loader(void) {
    counter c = {.n = 3};
    dt_loader_ops ops = {
        .start_epoch = cnt_start, .next = cnt_next, .num_batches = cnt_nb, .free = cnt_free};
    dt_loader *l = dt_loader_new_custom(&ops, &c);
    CHECK(l && dt_loader_num_batches(l) == 3 && dt_loader_num_records(l) == -1);
    CHECK(dt_loader_set_shard(l, 1, 2) == DT_OK); /* ignored: the user's responsibility */
    CHECK(dt_loader_start_epoch(l, 4, 1) == DT_OK && c.epoch == 4);
    dt_batch *b;
    int got = 0;
    while (dt_loader_next(l, &b) == DT_OK && b) got++;
    CHECK(got == 2);
    int64_t e, k;
    dt_loader_position(l, &e, &k);
    CHECK(e == 4 && k == 3);
    dt_loader_free(l);
    CHECK(c.freed);
    CHECK(dt_loader_new_custom(&(dt_loader_ops){.next = cnt_next}, &c) == NULL);
}

static void test_memory(void) {
    dt_dataset *ds = make_ds(100);
    dt_mem_stats m0, m1, m2;
    dt_device_stats(dev, &m0);
    dt_loader *l =
        loader(ds, (dt_loader_opts){.batch_size = 16, .num_workers = 2, .prefetch_factor = 2});
    dt_device_stats(dev, &m1);
    dt_device_reset_peak(dev);
    /* 5 slots, each x (16, 3) f32 + y (16) i64, allocated once, charged to DT_MEM_OTHER */
    int64_t slot = 16 * NX * 4 + 16 * 8;
    CHECK(m1.current[DT_MEM_OTHER] - m0.current[DT_MEM_OTHER] == 5 * slot);
    for (int e = 0; e < 3; e++) {
        stream s = epoch_stream(l, e, 0);
        stream_free(&s);
    }
    dt_device_stats(dev, &m2);
    CHECK(m2.current[DT_MEM_OTHER] == m1.current[DT_MEM_OTHER]);
    CHECK(m2.peak[DT_MEM_OTHER] == m1.current[DT_MEM_OTHER]); /* nothing allocated per batch */
    dt_loader_free(l);
    dt_device_stats(dev, &m2);
    CHECK(m2.current[DT_MEM_OTHER] == m0.current[DT_MEM_OTHER]);
    /* over budget: a clean OOM and nothing left charged */
    dt_device *small = dt_device_new("cpu", 1000);
    dt_ctx *sc = dt_ctx_new(small, 1);
    dt_mem_stats s0, s1;
    dt_device_stats(small, &s0);
    CHECK(dt_loader_new(sc, ds, &(dt_loader_opts){.batch_size = 64, .num_workers = 2}) == NULL);
    CHECK(dt_last_status() == DT_ERR_OOM && strstr(dt_last_error(), "batch buffer"));
    dt_device_stats(small, &s1);
    CHECK(s1.current[DT_MEM_OTHER] == s0.current[DT_MEM_OTHER]);
    dt_ctx_free(sc);
    dt_device_free(small);
    /* take_dataset frees the dataset with the loader (ASan would report a leak otherwise) */
    dt_loader *own = loader(ds, (dt_loader_opts){.batch_size = 4, .take_dataset = true});
    dt_loader_free(own);
}

int main(void) {
    dev = dt_device_new("cpu", 0);
    ctx = dt_ctx_new(dev, 1);
    TEST_RUN(test_sequential);
    TEST_RUN(test_shuffle);
    TEST_RUN(test_workers_bitwise);
    TEST_RUN(test_resume);
    TEST_RUN(test_sharding);
    TEST_RUN(test_sampler);
    TEST_RUN(test_batch_sampler);
    TEST_RUN(test_collate);
    TEST_RUN(test_worker_errors);
    TEST_RUN(test_parallel_fill);
    TEST_RUN(test_prefetch_hint);
    TEST_RUN(test_custom_loader);
    TEST_RUN(test_memory);
    dt_ctx_free(ctx);
    dt_device_free(dev);
    TEST_END();
}
