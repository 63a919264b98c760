/* Tests for src/dsat/search_*.c: the binary, random and asha methods' decisions on
 * scripted results (an OOM above a micro-batch, plateaus, failing lineages, budget skips,
 * promotions), spaces where nothing or only offload fits, the same seed giving the same
 * trials, snapshot -> free -> load mid-search giving the same next configurations, max_trials,
 * bad options, and — checked on every proposal of every run — that nothing `fits` rejects is
 * ever proposed. */
#include "dsat/dsat_search_impl.h"
#include "test.h"

#include <math.h>
#include <string.h>

/* ---- a fake memory model and scripted trials ----------------------------------------------- */

typedef struct fake {
    int64_t limit[4];   /* largest micro-batch that fits per stage (0: nothing) */
    int64_t offload[4]; /* the same with the optimizer offloaded */
    int64_t big_bucket; /* subtracted from the limit for buckets >= 1e9 (comm buffers) */
} fake;

static bool fake_fits(void *arg, const dt_dsat_knobs *k) {
    const fake *f = arg;
    int64_t lim = k->offload_optimizer ? f->offload[k->zero_stage] : f->limit[k->zero_stage];
    if (k->reduce_bucket_size >= 1000000000) lim -= f->big_bucket;
    return k->mbs >= 1 && k->mbs <= lim;
}

/* What a trial "measures": OOM above oom_at[stage] (the real limit), else a metric. */
typedef struct script {
    int64_t oom_at[4];
    int64_t plateau;        /* metric = min(mbs, plateau) when > 0, else mbs */
    double bonus[8];        /* added per lineage (asha ranking) */
    int64_t lineage_cap[8]; /* per lineage: OOM above this when > 0 */
    bool error_stage[4];    /* every trial of the stage fails (not an OOM) */
} script;

static dt_dsat_result play(const script *s, const dt__dsat_method *m, int64_t id) {
    const dt__dsat_trial *t = &m->t[id];
    int64_t mbs = t->k.mbs, L = t->lineage;
    if (s->error_stage[t->k.zero_stage]) return (dt_dsat_result){.error = true};
    if (mbs > s->oom_at[t->k.zero_stage] || (L < 8 && s->lineage_cap[L] && mbs > s->lineage_cap[L]))
        return (dt_dsat_result){.oom = true};
    double v = (double)(s->plateau > 0 && mbs > s->plateau ? s->plateau : mbs);
    return (dt_dsat_result){.metric = v + (L < 8 ? s->bonus[L] : 0)};
}

/* The caller's side: what runs (oldest first), and every proposal in order. */
#define MAXLOG 4096
typedef struct driver {
    int64_t running[256];
    int nrun;
    dt__dsat_config log[MAXLOG];
    int n;
    int violations;           /* proposals fits rejects, or outside the stages */
    int smaller_than_success; /* random: proposals below a reported success of the stage */
    int stage3_after12;       /* random: stage-3 proposals after a stage 1/2 success */
    int64_t best_ok[4];       /* largest reported successful mbs per stage */
} driver;

/* next() to fill `conc` slots; false when nothing more comes. */
static bool fill(dt__dsat_method *m, driver *d, int conc) {
    dt__dsat_config c[256];
    int got = -1;
    dt_status st = dt__dsat_next(m, conc - d->nrun, c, &got);
    CHECK_MSG(st == DT_OK, "next: %s", dt_last_error());
    for (int i = 0; i < got; i++) {
        if (!fake_fits(m->sp.arg, &c[i].knobs)) d->violations++;
        if (c[i].knobs.mbs < d->best_ok[c[i].knobs.zero_stage]) d->smaller_than_success++;
        if (c[i].knobs.zero_stage == 3 && (d->best_ok[1] || d->best_ok[2])) d->stage3_after12++;
        if (d->n < MAXLOG) d->log[d->n++] = c[i];
        d->running[d->nrun++] = c[i].id;
    }
    return d->nrun > 0;
}

/* Report the oldest running trial. */
static void report_one(dt__dsat_method *m, driver *d, const script *s) {
    int64_t id = d->running[0];
    memmove(d->running, d->running + 1, (size_t)--d->nrun * sizeof *d->running);
    dt_dsat_result r = play(s, m, id);
    const dt_dsat_knobs *k = &m->t[id].k;
    if (!r.oom && !r.error && k->mbs > d->best_ok[k->zero_stage])
        d->best_ok[k->zero_stage] = k->mbs;
    CHECK_MSG(dt__dsat_report(m, id, r) == DT_OK, "report: %s", dt_last_error());
}

/* Until done or `steps` results. */
static void drive(dt__dsat_method *m, driver *d, const script *s, int conc, int steps) {
    for (int i = 0; i < steps && fill(m, d, conc); i++) report_one(m, d, s);
}

static dt_dsat_space space_of(fake *f, int n, const int *stages, int64_t approx) {
    dt_dsat_space sp = {
        .n_stages = n, .search_range_factor = 1.0, .fits = fake_fits, .arg = f, .seed = 42};
    for (int i = 0; i < n; i++) sp.zero_stages[i] = stages[i];
    for (int s = 0; s < 4; s++) sp.approx_max_mbs[s] = approx;
    return sp;
}

static dt__dsat_method *mk(const char *name, const dt__dsat_opts *o, const dt_dsat_space *sp) {
    dt__dsat_method *m = NULL;
    dt_status st = dt__dsat_method_new(name, o, sp, &m);
    CHECK_MSG(st == DT_OK && m, "new %s: %s", name, dt_last_error());
    return m;
}

static dt__dsat_opts opts(bool smaller) {
    dt__dsat_opts o;
    dt__dsat_opts_default(&o);
    o.smaller_is_better = smaller;
    return o;
}

/* ---- binary -------------------------------------------------------------------------------- */

static void test_binary_oom(void) {
    fake f = {.limit = {0, 100, 100, 100}};
    int st1[] = {1};
    dt_dsat_space sp = space_of(&f, 1, st1, 16); /* [1, 16] */
    dt__dsat_opts o = opts(false);
    dt__dsat_method *m = mk("binary", &o, &sp);
    script s = {.oom_at = {0, 10, 0, 0}};
    driver d = {0};
    drive(m, &d, &s, 1, 5);
    int64_t want[] = {8, 12, 10, 11}; /* ok, OOM, ok, OOM: lo 11 > hi 10 */
    for (int i = 0; i < 4; i++)
        CHECK_MSG(d.log[i].knobs.mbs == want[i], "trial %d: mbs %lld, want %lld", i,
                  (long long)d.log[i].knobs.mbs, (long long)want[i]);
    CHECK(m->t[3].lineage == 0 && m->t[4].lineage == 1 && d.log[4].knobs.mbs == 8);
    const dt_dsat_knobs *k = &d.log[0].knobs;
    CHECK(k->zero_stage == 1 && k->reduce_bucket_size >= 1000000 && k->overlap_comm == -1 &&
          k->allgather_partitions == -1 && !k->offload_optimizer);
    int64_t id;
    double best;
    CHECK(dt__dsat_best(m, &id, NULL, &best) && best == 10 && d.log[id].knobs.mbs == 10);
    dt__dsat_stats st;
    dt__dsat_get_stats(m, &st);
    CHECK(st.oom == 2 && st.succeeded == 3 && st.skipped == 0 && st.lineages == 2);
    dt__dsat_method_free(m);
}

static void test_binary_skips_what_does_not_fit(void) {
    fake f = {.limit = {0, 20, 0, 0}};
    int st1[] = {1};
    dt_dsat_space sp = space_of(&f, 1, st1, 16);
    sp.search_range_factor = 4.0; /* [1, 64]: 32 does not fit -> hi 31 -> 16 */
    dt__dsat_opts o = opts(false);
    dt__dsat_method *m = mk("binary", &o, &sp);
    script s = {.oom_at = {0, 100, 0, 0}};
    driver d = {0};
    drive(m, &d, &s, 1, 3); /* 16 ok -> 24 skipped -> 20 ok -> 22, 21 skipped: over */
    CHECK(d.log[0].knobs.mbs == 16 && d.log[1].knobs.mbs == 20 && d.log[2].knobs.mbs == 16);
    CHECK(m->t[2].lineage == 1); /* the first lineage ended on budget skips */
    dt__dsat_stats st;
    dt__dsat_get_stats(m, &st);
    CHECK_MSG(st.skipped == 5, "skipped %lld", (long long)st.skipped); /* 32 24 22 21, 32 */
    CHECK(d.violations == 0);
    dt__dsat_method_free(m);
}

/* ---- random -------------------------------------------------------------------------------- */

static void test_random_rules(void) {
    /* every stage-2 trial OOMs: each lineage walks down until it fails at its lo */
    fake f = {.limit = {0, 0, 64, 0}};
    int st2[] = {2};
    dt_dsat_space sp = space_of(&f, 1, st2, 64);
    dt__dsat_opts o = opts(false);
    o.max_trials = 40;
    dt__dsat_method *m = mk("random", &o, &sp);
    script s = {0};
    driver d = {0};
    drive(m, &d, &s, 1, 40);
    int bad = 0;
    for (int64_t i = 0; i < m->nt; i++) {
        const dt__dsat_trial *t = &m->t[i];
        bad += t->k.mbs < t->lo || t->k.mbs > t->hi;
        if (i + 1 < m->nt && m->t[i + 1].lineage == t->lineage)
            bad += m->t[i + 1].k.mbs >= t->k.mbs || t->k.mbs <= t->lo; /* down, never past lo */
        else if (i + 1 < m->nt)
            bad += t->k.mbs > t->lo && m->l[t->lineage].n_done < 5; /* stopped: failed at lo */
    }
    CHECK_MSG(bad == 0, "%d trials broke the random lineage rules", bad);
    CHECK(dt__dsat_done(m) && !dt__dsat_best(m, NULL, NULL, NULL));
    const char *why = dt__dsat_done_reason(m);
    CHECK_MSG(why && strstr(why, "no trial succeeded"), "reason: %s", why ? why : "(null)");
    dt__dsat_method_free(m);

    /* trials_per_random_config 2, everything succeeds: no lineage has more than 2 trials */
    f = (fake){.limit = {0, 64, 64, 64}};
    int st123[] = {1, 2, 3};
    sp = space_of(&f, 3, st123, 32);
    o = opts(false);
    o.trials_per_random_config = 2;
    m = mk("random", &o, &sp);
    s = (script){.oom_at = {0, 1000, 1000, 1000}};
    d = (driver){0};
    drive(m, &d, &s, 8, 30); /* 8 at once: stage-3 lineages run when stage 1/2 succeed */
    int too_long = 0, stage3 = 0;
    for (int64_t i = 0; i < m->nt; i++) {
        too_long += m->l[m->t[i].lineage].n_done > 2;
        stage3 += m->t[i].k.zero_stage == 3;
    }
    CHECK_MSG(too_long == 0 && stage3 > 0, "%d too long, %d at stage 3", too_long, stage3);
    CHECK_MSG(d.stage3_after12 == 0, "%d stage-3 trials after stage 1/2 succeeded",
              d.stage3_after12);
    CHECK_MSG(d.smaller_than_success == 0, "%d proposals below a success of their stage",
              d.smaller_than_success);
    dt__dsat_stats st;
    dt__dsat_get_stats(m, &st);
    CHECK(d.violations == 0);
    dt__dsat_method_free(m);
}

static void test_random_early_stopping(void) {
    fake f = {.limit = {0, 64, 0, 0}};
    int st1[] = {1};
    dt_dsat_space sp = space_of(&f, 1, st1, 64);
    dt__dsat_opts o = opts(false);
    o.early_stopping = 3;
    dt__dsat_method *m = mk("random", &o, &sp);
    script s = {.oom_at = {0, 64, 0, 0}, .plateau = 4}; /* nothing beats mbs 4 */
    driver d = {0};
    drive(m, &d, &s, 1, 100);
    const char *why = dt__dsat_done_reason(m);
    CHECK(dt__dsat_done(m) && m->nt < o.max_trials);
    CHECK_MSG(why && strstr(why, "early stopping: 3 trials"), "reason: %s", why ? why : "");
    CHECK(m->since_best == 3);
    dt__dsat_method_free(m);

    /* 0: never */
    o.early_stopping = 0;
    o.max_trials = 20;
    m = mk("random", &o, &sp);
    d = (driver){0};
    drive(m, &d, &s, 1, 100);
    why = dt__dsat_done_reason(m);
    CHECK(m->nt == 20 && why && strstr(why, "max_trials reached"));
    dt__dsat_stats st;
    dt__dsat_get_stats(m, &st);
    CHECK_MSG(st.discarded > 0 && d.smaller_than_success == 0,
              "%lld discarded, %d proposals below a success of their stage",
              (long long)st.discarded, d.smaller_than_success);
    dt__dsat_method_free(m);
}

/* ---- asha ---------------------------------------------------------------------------------- */

static void test_asha_promotion(void) {
    fake f = {.limit = {0, 100, 0, 0}};
    int st1[] = {1};
    dt_dsat_space sp = space_of(&f, 1, st1, 8); /* [1, 8]: 4, 6, 7, (8) */
    dt__dsat_opts o = opts(false);
    o.max_trials = 13;
    dt__dsat_method *m = mk("asha", &o, &sp);
    /* lineage 0 is the best but its search ends (OOM above 4); lineage 1 is second */
    script s = {.oom_at = {0, 100, 0, 0}, .bonus = {1000, 500, 0, 0}, .lineage_cap = {4, 0, 0, 0}};
    driver d = {0};
    drive(m, &d, &s, 1, 100);
    /* L0: 4 ok, 6 OOM, 5 OOM (over); L1, L2, L3: 4, 6, 7 (rung 0 budget 3); with 4 lineages in
     * rung 0 the top 2 are L0 (over) and L1: L1 is promoted and tries 8 */
    static const int lin[] = {0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 1};
    static const int64_t mbs[] = {4, 6, 5, 4, 6, 7, 4, 6, 7, 4, 6, 7, 8};
    CHECK(m->nt == 13);
    for (int i = 0; i < 13 && i < m->nt; i++)
        CHECK_MSG(m->t[i].lineage == lin[i] && m->t[i].k.mbs == mbs[i],
                  "trial %d: lineage %d mbs %lld, want %d %lld", i, m->t[i].lineage,
                  (long long)m->t[i].k.mbs, lin[i], (long long)mbs[i]);
    CHECK(m->t[12].rung == 1 && m->l[1].rung == 1);
    dt__dsat_method_free(m);
}

static void test_asha_budgets(void) {
    fake f = {.limit = {0, 1 << 20, 0, 0}};
    int st1[] = {1};
    dt_dsat_space sp = space_of(&f, 1, st1, 1 << 20); /* room for long binary searches */
    dt__dsat_opts o = opts(true);                     /* smaller is better: plain mbs */
    o.max_trials = 60;
    dt__dsat_method *m = mk("asha", &o, &sp);
    script s = {.oom_at = {0, 1 << 20, 0, 0}};
    driver d = {0};
    drive(m, &d, &s, 1, 100);
    /* no lineage ever holds more trials in a rung than the budget 3, 6, 12, ... allows */
    int over = 0, top = 0;
    for (int32_t L = 0; L < m->nl; L++) {
        int64_t budget = 3;
        for (int r = 0; r < m->l[L].rung; r++) budget *= 2;
        over += m->l[L].n_done > budget;
        if (m->l[L].rung > top) top = m->l[L].rung;
    }
    CHECK(over == 0 && top >= 2 && top <= 4);
    dt__dsat_method_free(m);
}

/* ---- spaces -------------------------------------------------------------------------------- */

static void test_nothing_fits(void) {
    fake f = {0};
    int st123[] = {1, 2, 3};
    dt_dsat_space sp = space_of(&f, 3, st123, 4);
    const char *names[] = {"binary", "random", "asha"};
    for (int i = 0; i < 3; i++) {
        dt__dsat_opts o = opts(false);
        dt__dsat_method *m = mk(names[i], &o, &sp);
        dt__dsat_config c[4];
        int got = -1;
        CHECK(dt__dsat_done(m) && dt__dsat_next(m, 4, c, &got) == DT_OK && got == 0);
        const char *why = dt__dsat_done_reason(m);
        CHECK_MSG(why && strstr(why, "nothing fits") && strstr(why, "1 2 3"), "%s", why ? why : "");
        dt__dsat_method_free(m);
    }
    /* stage 1 never fits, stage 2 only offloaded; big buckets need more room */
    f = (fake){.limit = {0, 0, 0, 0}, .offload = {0, 6, 6, 0}, .big_bucket = 3}; /* 1: no */
    int st12[] = {2, 1};
    sp = space_of(&f, 2, st12, 1);
    dt__dsat_opts o = opts(false);
    dt__dsat_method *m = mk("binary", &o, &sp);
    script s = {.oom_at = {0, 100, 100, 100}};
    driver d = {0};
    drive(m, &d, &s, 2, 100);
    int wrong = 0, big = 0;
    for (int i = 0; i < d.n; i++) {
        wrong += d.log[i].knobs.zero_stage != 2 || !d.log[i].knobs.offload_optimizer;
        big += d.log[i].knobs.reduce_bucket_size >= 1000000000 && d.log[i].knobs.mbs > 3;
    }
    CHECK(d.n == 50 && wrong == 0 && big == 0 && d.violations == 0);
    /* an offloaded set's range is the largest micro-batch that fits: 6, or 3 with big buckets */
    int64_t hi_max = 0;
    for (int64_t i = 0; i < m->nt; i++)
        if (m->t[i].hi > hi_max) hi_max = m->t[i].hi;
    CHECK(hi_max == 6);
    dt__dsat_method_free(m);
}

/* ---- determinism, snapshots, limits ------------------------------------------------------ */

static bool same_config(const dt__dsat_config *a, const dt__dsat_config *b) {
    const dt_dsat_knobs *x = &a->knobs, *y = &b->knobs;
    return a->id == b->id && x->zero_stage == y->zero_stage && x->mbs == y->mbs &&
           x->reduce_bucket_size == y->reduce_bucket_size &&
           x->allgather_bucket_size == y->allgather_bucket_size &&
           x->overlap_comm == y->overlap_comm && x->reduce_scatter == y->reduce_scatter &&
           x->contiguous_gradients == y->contiguous_gradients &&
           x->allgather_partitions == y->allgather_partitions &&
           x->offload_optimizer == y->offload_optimizer;
}

/* The first n proposals of a and b are the same (all of them, and as many, when n < 0). */
static bool same_log(const driver *a, const driver *b, int n) {
    if (n < 0 && a->n != b->n) return false;
    if (n < 0) n = a->n;
    if (a->n < n || b->n < n) return false;
    for (int i = 0; i < n; i++)
        if (!same_config(&a->log[i], &b->log[i])) return false;
    return true;
}

static void test_seed_and_snapshot(void) {
    fake f = {.limit = {0, 40, 30, 60}, .offload = {0, 0, 50, 90}, .big_bucket = 5};
    int st123[] = {1, 2, 3};
    script s = {.oom_at = {0, 33, 25, 50}, .plateau = 20, .error_stage = {0, 0, 0, 0}};
    const char *names[] = {"binary", "random", "asha"};
    for (int i = 0; i < 3; i++) {
        dt_dsat_space sp = space_of(&f, 3, st123, 36);
        dt__dsat_opts o = opts(false);
        o.early_stopping = i == 1 ? 12 : 0;
        /* the same seed: the same trials */
        dt__dsat_method *a = mk(names[i], &o, &sp), *b = mk(names[i], &o, &sp);
        static driver da, db, dc;
        da = (driver){0}, db = (driver){0};
        drive(a, &da, &s, 3, 200);
        drive(b, &db, &s, 3, 200);
        CHECK_MSG(da.n > 10 && same_log(&da, &db, -1), "%s: seeds", names[i]);
        CHECK(da.violations == 0 && dt__dsat_done(a));
        dt__dsat_method_free(b);
        /* another seed: other trials */
        sp.seed = 7;
        b = mk(names[i], &o, &sp);
        db = (driver){0};
        drive(b, &db, &s, 3, 200);
        CHECK_MSG(!same_log(&da, &db, -1), "%s: seed 7 gave seed 42's trials", names[i]);
        dt__dsat_method_free(b);
        sp.seed = 42;

        /* snapshot mid-search, through text, into a fresh method: after a result (2 running,
         * a decision pending) and after the next proposals (3 running) */
        json_t *back = NULL;
        for (int cut = 0; cut < 2; cut++) {
            b = mk(names[i], &o, &sp);
            db = (driver){0};
            drive(b, &db, &s, 3, 9);
            if (cut) fill(b, &db, 3);
            json_t *snap = dt__dsat_save(b);
            char *text = snap ? json_dumps(snap, JSON_COMPACT) : NULL;
            json_decref(snap);
            dt__dsat_method_free(b);
            json_decref(back);
            back = text ? json_loads(text, 0, NULL) : NULL;
            free(text);
            dt__dsat_method *c = mk(names[i], &o, &sp);
            CHECK_MSG(back && dt__dsat_load(c, back) == DT_OK, "%s: load: %s", names[i],
                      dt_last_error());
            CHECK(json_array_size(json_object_get(back, "pending")) == (size_t)!cut);
            drive(c, &db, &s, 3, 200); /* continues the caller's running trials */
            CHECK_MSG(same_log(&da, &db, -1), "%s: snapshot %d -> load changed the trials",
                      names[i], cut);
            double ma = 0, mc = 0;
            CHECK(dt__dsat_best(a, NULL, NULL, &ma) && dt__dsat_best(c, NULL, NULL, &mc) &&
                  ma == mc);
            dt__dsat_method_free(c);
        }
        dt__dsat_method *c;

        /* refused: another seed, another method, a broken snapshot; the method unchanged */
        sp.seed = 43;
        c = mk(names[i], &o, &sp);
        CHECK(dt__dsat_load(c, back) == DT_ERR_FORMAT && strstr(dt_last_error(), "another"));
        dt__dsat_method_free(c);
        sp.seed = 42;
        c = mk(names[(i + 1) % 3], &o, &sp);
        CHECK(dt__dsat_load(c, back) == DT_ERR_FORMAT);
        dt__dsat_method_free(c);
        c = mk(names[i], &o, &sp);
        json_t *rows = json_object_get(back, "trials");
        json_array_set_new(json_array_get(rows, 0), 9, json_integer(999)); /* no such lineage */
        CHECK(dt__dsat_load(c, back) == DT_ERR_FORMAT && strstr(dt_last_error(), "trial"));
        dc = (driver){0};
        drive(c, &dc, &s, 3, 3); /* still the fresh search */
        CHECK(same_log(&da, &dc, 3));
        json_decref(back);
        dt__dsat_method_free(c);
        dt__dsat_method_free(a);
    }
}

static void test_max_trials_and_errors(void) {
    fake f = {.limit = {0, 64, 64, 64}};
    int st123[] = {1, 2, 3};
    dt_dsat_space sp = space_of(&f, 3, st123, 64);
    dt__dsat_opts o = opts(false);
    o.max_trials = 7;
    const char *names[] = {"binary", "random", "asha"};
    for (int i = 0; i < 3; i++) {
        dt__dsat_method *m = mk(names[i], &o, &sp);
        dt__dsat_config c[100];
        int got = 0;
        CHECK(dt__dsat_next(m, 100, c, &got) == DT_OK && got == 7);
        CHECK(dt__dsat_next(m, 100, c, &got) == DT_OK && got == 0 && !dt__dsat_done(m));
        CHECK(dt__dsat_report(m, 9, (dt_dsat_result){0}) == DT_ERR_STATE);
        for (int j = 0; j < 7; j++)
            CHECK(dt__dsat_report(m, j, (dt_dsat_result){.metric = j ? 1 : NAN}) == DT_OK);
        CHECK(dt__dsat_report(m, 3, (dt_dsat_result){0}) == DT_ERR_STATE &&
              strstr(dt_last_error(), "already reported"));
        dt__dsat_stats st;
        dt__dsat_get_stats(m, &st);
        CHECK(dt__dsat_done(m) && st.proposed == 7 && st.errors == 1 && st.succeeded == 6);
        CHECK(dt__dsat_progress(m) == 1.0);
        dt__dsat_method_free(m);
    }
    /* a stage whose trials all fail (not OOM) */
    script s = {.oom_at = {0, 64, 64, 64}, .error_stage = {0, 1, 1, 1}};
    o.max_trials = 10;
    dt__dsat_method *m = mk("binary", &o, &sp);
    driver d = {0};
    drive(m, &d, &s, 2, 100);
    const char *why = dt__dsat_done_reason(m);
    CHECK_MSG(why && strstr(why, "no trial succeeded (0 OOM, 10 failed otherwise)"), "%s",
              why ? why : "");
    dt__dsat_method_free(m);
}

static void test_bad_input(void) {
    fake f = {.limit = {0, 64, 64, 64}};
    int st[] = {1, 2};
    dt_dsat_space sp = space_of(&f, 2, st, 8);
    dt__dsat_opts o = opts(false);
    dt__dsat_method *m = NULL;
    CHECK(dt__dsat_method_new("grid", &o, &sp, &m) == DT_ERR_CONFIG && !m &&
          strstr(dt_last_error(), "binary, random or asha"));
    o.divisor = 1;
    CHECK(dt__dsat_method_new("asha", &o, &sp, &m) == DT_ERR_CONFIG &&
          strstr(dt_last_error(), "divisor"));
    o = opts(false);
    o.trials_per_random_config = 0;
    CHECK(dt__dsat_method_new("random", &o, &sp, &m) == DT_ERR_CONFIG);
    o = opts(false);
    int dup[] = {2, 2};
    dt_dsat_space bad = space_of(&f, 2, dup, 8);
    CHECK(dt__dsat_method_new("binary", &o, &bad, &m) == DT_ERR_CONFIG &&
          strstr(dt_last_error(), "twice"));
    int four[] = {4};
    bad = space_of(&f, 1, four, 8);
    CHECK(dt__dsat_method_new("binary", &o, &bad, &m) == DT_ERR_CONFIG);
    bad = space_of(&f, 2, st, 8);
    bad.search_range_factor = 0;
    CHECK(dt__dsat_method_new("binary", &o, &bad, &m) == DT_ERR_CONFIG &&
          strstr(dt_last_error(), "search_range_factor"));
    bool smaller = false;
    CHECK(dt__dsat_metric_smaller("latency", &smaller) == DT_OK && smaller);
    CHECK(dt__dsat_metric_smaller("FLOPS_per_gpu", &smaller) == DT_OK && !smaller);
    CHECK(dt__dsat_metric_smaller("loss", &smaller) == DT_ERR_CONFIG &&
          strstr(dt_last_error(), "throughput"));
}

int main(void) {
    TEST_RUN(test_binary_oom);
    TEST_RUN(test_binary_skips_what_does_not_fit);
    TEST_RUN(test_random_rules);
    TEST_RUN(test_random_early_stopping);
    TEST_RUN(test_asha_promotion);
    TEST_RUN(test_asha_budgets);
    TEST_RUN(test_nothing_fits);
    TEST_RUN(test_seed_and_snapshot);
    TEST_RUN(test_max_trials_and_errors);
    TEST_RUN(test_bad_input);
    TEST_END();
}
