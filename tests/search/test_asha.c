/* Tests for src/search/asha.c: adaptive_asha's arithmetic against a table of cases
 * written from the documented algorithm (rung counts with the logarithm guard, brackets per
 * mode, trials and concurrency per bracket, rung lengths), the stopping rule on synthetic
 * metric curves for smaller- and larger-is-better metrics (several rungs in one validation,
 * errored and invalid-hyperparameter exits, the room a closed trial makes), progress, and a
 * whole simulated search driven to SHUTDOWN with a deterministic fake metric. */
#include "dtrain/config.h"
#include "search/search_impl.h"
#include "search_sim.h"
#include "test.h"
#include "search/searcher.h"

#include <float.h>
#include <string.h>

static dt_expconf *cload(const char *text) {
    dt_expconf *c = NULL;
    dt_status st = dt_expconf_load_string(text, "config.yaml", 0, &c);
    CHECK_MSG(st == DT_OK && c, "load failed: %s", dt_last_error());
    return c;
}

/* ---- arithmetic ---------------------------------------------------------------------------- */

static void test_max_rungs(void) {
    static const struct {
        int64_t max_rungs;
        double d;
        int64_t L, T;
        int want;
    } cases[] = {
        {5, 4, 1000, 16, 3},    /* ⌊log4 1000⌋+1 = 5, ⌊log4 16⌋+1 = 3 */
        {5, 10, 1000, 1000, 4}, /* ln 1000/ln 10 < 3 in floating point: the guard gives 4 */
        {5, 10, 999, 1000, 3},  {5, 3, 9000, 100, 5},  /* log3 9000 → 9, log3 100 → 5 */
        {2, 3, 9000, 100, 2},                          /* max_rungs */
        {5, 2, 1, 1, 1},        {5, 4, 64, 1000, 4},   /* 4^3 = 64 exactly */
        {5, 4, 63, 1000, 3},    {5, 2.5, 100, 100, 5}, /* 2.5^5 = 97.66 ≤ 100 → 6, capped at 5 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = dt__asha_max_rungs(cases[i].max_rungs, cases[i].d, cases[i].L, cases[i].T);
        CHECK_MSG(got == cases[i].want, "case %zu: %d rungs, want %d", i, got, cases[i].want);
    }
}

static void test_brackets(void) {
    int r[16];
    int n = dt__asha_brackets("aggressive", 5, r);
    CHECK(n == 1 && r[0] == 5);
    n = dt__asha_brackets("standard", 5, r);
    CHECK(n == 3 && r[0] == 5 && r[1] == 4 && r[2] == 3);
    n = dt__asha_brackets("standard", 4, r); /* (4 − 1)/2 + 1 = 2 */
    CHECK(n == 3 && r[0] == 4 && r[2] == 2);
    n = dt__asha_brackets("standard", 1, r);
    CHECK(n == 1 && r[0] == 1);
    n = dt__asha_brackets("conservative", 5, r);
    CHECK(n == 5 && r[0] == 5 && r[4] == 1);
    CHECK(dt__asha_brackets("eager", 5, r) == 0);
}

static void test_bracket_trials(void) {
    static const struct {
        int64_t T;
        double d;
        int n;
        int rungs[5];
        int64_t want[5];
    } cases[] = {
        /* weights d^(r−1)/r: 16/3, 2, 1 of 8.33 → ⌊10.24⌋, ⌊3.84⌋, ⌊1.92⌋ + remainder 2 */
        {16, 4, 3, {3, 2, 1}, {12, 3, 1}},
        {16, 4, 3, {5, 4, 3}, {12, 3, 1}},
        {100, 3, 5, {5, 4, 3, 2, 1}, {59, 23, 10, 5, 3}},
        {2, 4, 3, {3, 2, 1}, {1, 1, 1}}, /* at least one each, even past max_trials */
        {7, 2, 1, {3}, {7}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t got[5];
        dt__asha_bracket_trials(cases[i].T, cases[i].d, cases[i].n, cases[i].rungs, got);
        for (int k = 0; k < cases[i].n; k++)
            CHECK_MSG(got[k] == cases[i].want[k], "case %zu bracket %d: %lld trials, want %lld", i,
                      k, (long long)got[k], (long long)cases[i].want[k]);
    }
    int64_t c[5];
    dt__asha_bracket_concurrency(16, 3, c);
    CHECK(c[0] == 6 && c[1] == 5 && c[2] == 5);
    dt__asha_bracket_concurrency(2, 3, c); /* at least one per bracket */
    CHECK(c[0] == 1 && c[1] == 1 && c[2] == 1);
    dt__asha_bracket_concurrency(8, 1, c);
    CHECK(c[0] == 8);
}

static void test_rung_units(void) {
    CHECK(dt__asha_rung_units(9000, 3, 3, 0) == 1000);
    CHECK(dt__asha_rung_units(9000, 3, 3, 1) == 3000);
    CHECK(dt__asha_rung_units(9000, 3, 3, 2) == 9000);
    CHECK(dt__asha_rung_units(1000, 4, 3, 0) == 62); /* ⌊1000/16⌋ */
    CHECK(dt__asha_rung_units(1000, 4, 3, 1) == 250);
    CHECK(dt__asha_rung_units(2, 4, 3, 0) == 1); /* never below 1 */
    CHECK(dt__asha_rung_units(2, 4, 3, 1) == 1);
    CHECK(dt__asha_rung_units(2, 4, 3, 2) == 2);
}

/* ---- the stopping rule --------------------------------------------------------------------- */

/* One bracket of 3 rungs at 2, 4, 8 batches (max_length 8, divisor 2, max_trials 4 → maxRungs
 * 3, aggressive), two trials at a time; the stopping rule unless ONE_BRACKET_RULE says else. */
#define ONE_BRACKET_RULE(sib, once)                                                                \
    "entrypoint: m:T\n"                                                                            \
    "hyperparameters: {x: {type: double, minval: 0, maxval: 1}}\n"                                 \
    "searcher: {name: adaptive_asha, metric: m, smaller_is_better: " sib ",\n"                     \
    "           max_length: {batches: 8}, max_trials: 4, divisor: 2, mode: aggressive,\n"          \
    "           max_concurrent_trials: 2, stop_once: " once "}\n"
#define ONE_BRACKET(sib) ONE_BRACKET_RULE(sib, "true")

typedef struct drive {
    dt_searcher *s;
    dt_search_ops ops;
    double sign; /* -1: report 1 − m as an accuracy (larger is better) */
} drive;

/* The operations of the last event as text: "N3" create, "V3@8" validate after 8, "C3"
 * close, "S" shutdown. */
static const char *ops_text(drive *d) {
    static char buf[512];
    buf[0] = 0;
    for (int i = 0; i < d->ops.n; i++) {
        const dt_search_op *op = &d->ops.v[i];
        size_t u = strlen(buf);
        if (op->kind == DT_SEARCH_VALIDATE_AFTER)
            snprintf(buf + u, sizeof buf - u, "V%lld@%lld ", (long long)op->request_id,
                     (long long)op->length.n);
        else if (op->kind == DT_SEARCH_SHUTDOWN)
            snprintf(buf + u, sizeof buf - u, "S ");
        else
            snprintf(buf + u, sizeof buf - u, "%c%lld ", op->kind == DT_SEARCH_CLOSE ? 'C' : 'N',
                     (long long)op->request_id);
    }
    return buf;
}

/* Report a validation of `id` at `len` batches with metric m (as a loss); the ops, as text. */
static const char *val(drive *d, int64_t id, int64_t len, double m) {
    dt_search_ops_free(&d->ops);
    double v = d->sign < 0 ? 1 - m : m;
    dt_status st =
        dt_searcher_validation_completed(d->s, id, v, (dt_length){DT_UNIT_BATCHES, len}, &d->ops);
    CHECK_MSG(st == DT_OK, "%s", dt_last_error());
    return ops_text(d);
}

/* The same for the other events: 'c' created, 'x' exited early, 'd' closed. */
static const char *ev(drive *d, char what, int64_t id, dt_search_exit why) {
    dt_search_ops_free(&d->ops);
    dt_status st = what == 'c'   ? dt_searcher_trial_created(d->s, id, &d->ops)
                   : what == 'x' ? dt_searcher_trial_exited_early(d->s, id, why, &d->ops)
                                 : dt_searcher_trial_closed(d->s, id, &d->ops);
    CHECK_MSG(st == DT_OK, "%s", dt_last_error());
    return ops_text(d);
}

/* A searcher over ONE_BRACKET (smaller is better) whose first two trials are created. */
static bool drive_open_rule(drive *d, dt_expconf **c, const char *text) {
    *d = (drive){.sign = 1};
    *c = cload(text);
    CHECK(*c && dt_searcher_new(*c, 1, &d->s) == DT_OK);
    if (!d->s) {
        dt_expconf_free(*c);
        return false;
    }
    CHECK(dt_searcher_initial_operations(d->s, &d->ops) == DT_OK);
    ev(d, 'c', 1, 0);
    ev(d, 'c', 2, 0);
    return true;
}

static bool drive_open(drive *d, dt_expconf **c) {
    return drive_open_rule(d, c, ONE_BRACKET("true"));
}

static void drive_close(drive *d, dt_expconf *c) {
    dt_search_ops_free(&d->ops);
    dt_searcher_free(d->s);
    dt_expconf_free(c);
}

#define CHECK_OPS(got, want)                                                                       \
    CHECK_MSG(!strcmp((got), (want)), "ops \"%s\", want \"%s\"", (got), (want))

/* The metrics of rung r (of the only bracket) in the snapshot, as "id:metric ..." text. */
static const char *rung_text(drive *d, int r) {
    static char buf[512];
    json_t *snap = dt_searcher_save(d->s);
    json_t *g = json_array_get(
        json_object_get(
            json_array_get(json_object_get(json_object_get(snap, "method"), "brackets"), 0),
            "rungs"),
        (size_t)r);
    buf[0] = 0;
    for (size_t i = 0; i + 1 < json_array_size(g); i += 2) {
        size_t u = strlen(buf);
        double m = json_number_value(json_array_get(g, i + 1));
        if (m == DBL_MAX)
            snprintf(buf + u, sizeof buf - u, "%lld:worst ",
                     (long long)json_integer_value(json_array_get(g, i)));
        else
            snprintf(buf + u, sizeof buf - u, "%lld:%g ",
                     (long long)json_integer_value(json_array_get(g, i)), m);
    }
    json_decref(snap);
    return buf;
}

static void stopping_rule(bool smaller) {
    dt_expconf *c = cload(ONE_BRACKET("true"));
    if (!c) return;
    c->searcher.smaller_is_better = smaller;
    drive d = {.sign = smaller ? 1 : -1};
    CHECK(dt_searcher_new(c, 1, &d.s) == DT_OK);
    if (!d.s) return;
    CHECK(dt_searcher_initial_operations(d.s, &d.ops) == DT_OK && d.ops.n == 4);
    CHECK(d.ops.v[1].kind == DT_SEARCH_VALIDATE_AFTER && d.ops.v[1].length.n == 2);
    ev(&d, 'c', 1, 0);
    ev(&d, 'c', 2, 0);
    CHECK_NEAR(dt_searcher_progress(d.s), 0, 0);
    /* rung 0 (2 batches): alone, a trial is the best so far and continues */
    CHECK_OPS(val(&d, 1, 2, 0.5), "V1@4 ");
    CHECK_NEAR(dt_searcher_progress(d.s), 1 / (1.2 * 4), 1e-12);
    /* second of two: index 1 ≥ max(⌊2/2⌋, 1) → stopped */
    CHECK_OPS(val(&d, 2, 2, 0.7), "C2 ");
    /* its close makes room: created − invalid (2) < 4 → a new trial at rung 0 */
    CHECK_OPS(ev(&d, 'd', 2, 0), "N3 V3@2 ");
    ev(&d, 'c', 3, 0);
    /* the best at rung 0: continues */
    CHECK_OPS(val(&d, 3, 2, 0.3), "V3@4 ");
    CHECK_OPS(rung_text(&d, 0), smaller ? "3:0.3 1:0.5 2:0.7 " : "3:-0.7 1:-0.5 2:-0.3 ");
    /* trial 1 at rung 1 (4 batches): alone there → continues to 8 */
    CHECK_OPS(val(&d, 1, 4, 0.45), "V1@8 ");
    /* trial 3 errors: the worst value in its rung (1) */
    CHECK_OPS(ev(&d, 'x', 3, DT_SEARCH_EXIT_ERRORED), "");
    CHECK_OPS(rung_text(&d, 1), smaller ? "1:0.45 3:worst " : "1:-0.55 3:worst ");
    CHECK_OPS(ev(&d, 'd', 3, 0), "N4 V4@2 ");
    ev(&d, 'c', 4, 0);
    /* trial 4 reports 8 batches at once: judged at rung 0 (4 entries → keep 2, index 0), rung 1
     * (3 entries → keep 1, index 0) and the top rung, which closes it */
    CHECK_OPS(val(&d, 4, 8, 0.1), "C4 ");
    CHECK_OPS(rung_text(&d, 1), smaller ? "4:0.1 1:0.45 3:worst " : "4:-0.9 1:-0.55 3:worst ");
    CHECK_OPS(rung_text(&d, 2), smaller ? "4:0.1 " : "4:-0.9 ");
    /* created − invalid = 4 = max_trials: no more trials; trial 1 tops out and the search ends */
    CHECK_OPS(ev(&d, 'd', 4, 0), "");
    CHECK_OPS(val(&d, 1, 8, 0.4), "C1 ");
    CHECK(dt_searcher_progress(d.s) < 1);
    CHECK_OPS(ev(&d, 'd', 1, 0), "S ");
    CHECK_NEAR(dt_searcher_progress(d.s), 1, 0);
    drive_close(&d, c);
}

static void test_stopping_smaller(void) {
    stopping_rule(true);
}

static void test_stopping_larger(void) {
    /* The same curves reported as accuracies 1 − loss with smaller_is_better false: negated,
     * they rank as the losses did (stored as loss − 1), so every operation is the same. */
    stopping_rule(false);
}

static void test_invalid_hp(void) {
    drive d;
    dt_expconf *c;
    if (!drive_open(&d, &c)) return;
    CHECK_OPS(val(&d, 1, 2, 0.5), "V1@4 ");
    /* trial 1 turns out invalid: its metrics leave every rung, and it does not count */
    CHECK_OPS(ev(&d, 'x', 1, DT_SEARCH_EXIT_INVALID_HP), "");
    CHECK_OPS(rung_text(&d, 0), "");
    CHECK_OPS(ev(&d, 'd', 1, 0), "N3 V3@2 ");
    /* a later validation of the exited trial is ignored */
    CHECK_OPS(val(&d, 2, 2, 0.9), "V2@4 "); /* alone in rung 0 again: continues */
    json_t *snap = dt_searcher_save(d.s);
    CHECK(json_integer_value(json_object_get(
              json_array_get(json_object_get(json_object_get(snap, "method"), "brackets"), 0),
              "invalid")) == 1);
    json_decref(snap);
    drive_close(&d, c);
}

static void test_nan_metric(void) {
    drive d;
    dt_expconf *c;
    if (!drive_open(&d, &c)) return;
    CHECK_OPS(val(&d, 1, 2, NAN), "V1@4 "); /* alone: continues, but as the worst value */
    CHECK_OPS(val(&d, 2, 2, 1e300), "V2@4 ");
    CHECK_OPS(rung_text(&d, 0), "2:1e+300 1:worst ");
    json_t *snap = dt_searcher_save(d.s); /* a snapshot of it is still JSON */
    char *txt = json_dumps(snap, 0);
    CHECK(txt != NULL);
    free(txt);
    json_decref(snap);
    drive_close(&d, c);
}

/* ---- stop_once ----------------------------------------------------------------------------- */

/* A trial stopped at its rung never gets another operation, whatever the later results, with
 * stop_once true or false (the reference's current searcher keeps only the stopping rule). */
static void stop_once_never_resumes(const char *text) {
    drive d;
    dt_expconf *c;
    if (!drive_open_rule(&d, &c, text)) return;
    CHECK_OPS(val(&d, 1, 2, 0.5), "V1@4 ");
    CHECK_OPS(val(&d, 2, 2, 0.7), "C2 ");
    CHECK_OPS(ev(&d, 'd', 2, 0), "N3 V3@2 ");
    ev(&d, 'c', 3, 0);
    /* results that would have promoted trial 2 under a promotion rule promote nobody */
    CHECK_OPS(val(&d, 3, 2, 0.9), "C3 ");
    CHECK_OPS(ev(&d, 'd', 3, 0), "N4 V4@2 ");
    ev(&d, 'c', 4, 0);
    CHECK_OPS(val(&d, 4, 2, 0.95), "C4 ");
    CHECK(!strstr(ops_text(&d), "V2"));
    drive_close(&d, c);
}

static void test_stop_once_never_resumes(void) {
    stop_once_never_resumes(ONE_BRACKET_RULE("true", "true"));
    stop_once_never_resumes(ONE_BRACKET_RULE("true", "false"));
}

/* async_halving: the one bracket of num_rungs rungs that aggressive adaptive_asha builds above
 * (not capped by max_rungs), so it runs the same operations; its plan shows that bracket. */
#define ASYNC_HALVING(rungs)                                                                       \
    "entrypoint: m:T\n"                                                                            \
    "hyperparameters: {x: {type: double, minval: 0, maxval: 1}}\n"                                 \
    "searcher: {name: async_halving, metric: m, num_rungs: " rungs ", max_length: {batches: 8},\n" \
    "           max_trials: 4, divisor: 2, max_concurrent_trials: 2}\n"

static void test_async_halving(void) {
    stop_once_never_resumes(ASYNC_HALVING("3"));
    dt_expconf *c = cload(ASYNC_HALVING("5"));
    if (!c) return;
    json_t *plan = NULL;
    CHECK(dt_searcher_plan(c, &plan) == DT_OK);
    const json_t *bs = json_object_get(plan, "brackets");
    const json_t *rs = json_object_get(json_array_get(bs, 0), "rungs");
    /* five rungs at 8 / 2^(4-i), at least 1 batch: 1, 1, 2, 4, 8 */
    CHECK(json_array_size(bs) == 1 && json_array_size(rs) == 5);
    CHECK(json_integer_value(json_array_get(rs, 0)) == 1 &&
          json_integer_value(json_array_get(rs, 4)) == 8);
    json_decref(plan);
    dt_expconf_free(c);
}

/* ---- searcher.max_time with a reported time metric ---------------------------------------- */

/* Rungs in the metric's own units: max_time 900 seconds, d 4, 16 trials → [56, 225, 900] and
 * [225, 900]; a result counts at a rung once the reported time reaches it; such a search always
 * stops (a trial that trains by the clock is never paused and resumed). */
static void test_time_metric_rungs(void) {
    const char *text = "entrypoint: m:T\n"
                       "hyperparameters: {x: {type: double, minval: 0, maxval: 1}}\n"
                       "searcher: {name: adaptive_asha, metric: m, max_trials: 16,\n"
                       "           time_metric: seconds, max_time: 900,\n"
                       "           max_length: {batches: 100000}, max_concurrent_trials: 4}\n";
    dt_expconf *c = cload(text);
    if (!c) return;
    CHECK(dt_searcher_time_metric(c) && !strcmp(dt_searcher_time_metric(c), "seconds"));
    json_t *plan = NULL;
    CHECK(dt_searcher_plan(c, &plan) == DT_OK && plan);
    char *txt = json_dumps(json_object_get(plan, "brackets"), JSON_COMPACT);
    CHECK_MSG(txt && strstr(txt, "\"rungs\":[56,225,900]") && strstr(txt, "\"rungs\":[225,900]"),
              "%s", txt ? txt : "");
    CHECK(!strcmp(json_string_value(json_object_get(plan, "unit")), "seconds"));
    free(txt);
    json_decref(plan);
    drive d = {.sign = 1};
    CHECK(dt_searcher_new(c, 1, &d.s) == DT_OK);
    if (!d.s) {
        dt_expconf_free(c);
        return;
    }
    CHECK(dt_searcher_initial_operations(d.s, &d.ops) == DT_OK);
    CHECK_OPS(ops_text(&d), "N1 V1@56 N2 V2@56 N3 V3@225 N4 V4@225 ");
    for (int i = 1; i <= 4; i++) ev(&d, 'c', i, 0);
    CHECK_OPS(val(&d, 1, 30, 0.5), "");        /* 30 s: below rung 0 */
    CHECK_OPS(val(&d, 1, 60, 0.5), "V1@225 "); /* alone at 56 s: goes on */
    /* worse at 70 s: stopped at once although stop_once is false */
    CHECK_OPS(val(&d, 2, 70, 0.7), "C2 ");
    /* one report past two rungs is judged at both */
    CHECK_OPS(val(&d, 3, 950, 0.1), "C3 ");
    CHECK_OPS(rung_text(&d, 0), "1:0.5 2:0.7 ");
    drive_close(&d, c);
}

/* With a time metric that is the trial's unit, max_time is max_length. */
static void test_time_metric_unit(void) {
    dt_expconf *c = cload("entrypoint: m:T\n"
                          "hyperparameters: {x: {type: double, minval: 0, maxval: 1}}\n"
                          "searcher: {name: adaptive_asha, metric: m, max_trials: 16,\n"
                          "           time_metric: batches, max_time: 937}\n");
    if (!c) return;
    CHECK(!dt_searcher_time_metric(c));
    CHECK(c->searcher.max_length.unit == DT_UNIT_BATCHES && c->searcher.max_length.n == 937);
    dt_expconf_free(c);
}

/* ---- a whole search ------------------------------------------------------------------------ */

static double fake_loss(const sim_trial *t, int64_t length) {
    return t->x + 10.0 / (double)length; /* improves with training; x sets the trial's floor */
}

/* The whole search under either rule. Both: 16 trials, SHUTDOWN once, progress monotone to 1,
 * each bracket's best trial reaches the top, most stop early, at most 4 trials train at once.
 * Stopping rule: a trial that got no operation after a result never gets one later, and at
 * most 4 are open, with stop_once true or false. */
static void full_search(bool once) {
    char text[512];
    snprintf(text, sizeof text,
             "entrypoint: m:T\n"
             "hyperparameters: {x: {type: double, minval: 0, maxval: 1}}\n"
             "searcher: {name: adaptive_asha, metric: loss, max_trials: 16,\n"
             "           max_length: {batches: 81}, divisor: 3, max_rungs: 5,\n"
             "           max_concurrent_trials: 4, stop_once: %s}\n",
             once ? "true" : "false");
    dt_expconf *c = cload(text);
    if (!c) return;
    /* maxRungs = min(5, ⌊log3 81⌋ + 1 = 5, ⌊log3 16⌋ + 1 = 3) = 3; standard: brackets [3, 2];
     * trials ∝ 9/3, 3/2 → ⌊10.67⌋ = 10, ⌊5.33⌋ = 5, remainder 1 → [11, 5]; concurrency [2, 2];
     * rungs [9, 27, 81] and [27, 81] batches. */
    sim m = {.metric = fake_loss};
    CHECK(dt_searcher_new(c, 2024, &m.s) == DT_OK);
    if (!m.s) return;
    sim_start(&m);
    CHECK(m.n == 4);
    CHECK_MSG(strstr(m.log, "VALIDATE 1 batches 9\n") && strstr(m.log, "VALIDATE 3 batches 27\n"),
              "%s", m.log);
    double last = 0;
    bool monotone = true;
    int steps = 0, resumed = 0;
    while (true) {
        bool waiting[SIM_MAX + 1] = {0};
        for (int64_t i = 1; i <= m.n; i++)
            waiting[i] = m.t[i].created && !m.t[i].closed && !m.t[i].close_asked &&
                         m.t[i].reached > 0 && m.t[i].target <= m.t[i].reached;
        if (!sim_step(&m)) break;
        for (int64_t i = 1; i <= m.n; i++) resumed += waiting[i] && m.t[i].target > m.t[i].reached;
        double p = dt_searcher_progress(m.s);
        monotone &= p >= last - 1e-12;
        last = p;
        int open = 0, training = 0;
        for (int64_t i = 1; i <= m.n; i++) {
            open += m.t[i].created && !m.t[i].closed;
            training += m.t[i].created && !m.t[i].closed && !m.t[i].close_asked &&
                        m.t[i].target > m.t[i].reached;
        }
        CHECK(training <= 4 && open <= 4);
        steps++;
    }
    CHECK(!m.failed && m.shutdowns == 1 && monotone && last == 1);
    CHECK_MSG(resumed == 0, "%d trials resumed", resumed);
    CHECK(m.log_len > 9 && !strcmp(m.log + m.log_len - 9, "SHUTDOWN\n"));
    CHECK_MSG(m.n == 16, "%lld trials", (long long)m.n);
    /* the best trial of each bracket trains to max_length (it leads every rung it reaches) */
    int64_t best[2] = {0, 0}, top = 0;
    json_t *snap = dt_searcher_save(m.s);
    json_t *ts = json_object_get(json_object_get(snap, "method"), "trials");
    for (int64_t i = 1; i <= m.n; i++) {
        CHECK(m.t[i].closed);
        int k = (int)json_integer_value(json_array_get(ts, (size_t)(i - 1) * 3));
        if (k < 0 || k > 1) continue;
        if (!best[k] || m.t[i].x < m.t[best[k]].x) best[k] = i;
        top += m.t[i].reached == 81;
    }
    CHECK(best[0] && m.t[best[0]].reached == 81);
    CHECK(best[1] && m.t[best[1]].reached == 81);
    CHECK(top >= 2 && top < 16); /* and most stop early */
    json_t *bs = json_object_get(json_object_get(snap, "method"), "brackets");
    CHECK(json_array_size(bs) == 2);
    CHECK(json_integer_value(json_object_get(json_array_get(bs, 0), "created")) == 11);
    CHECK(json_integer_value(json_object_get(json_array_get(bs, 1), "created")) == 5);
    CHECK(json_integer_value(json_object_get(snap, "counts")
                                 ? json_object_get(json_object_get(snap, "counts"), "closed")
                                 : NULL) == 16);
    json_decref(snap);
    dt_searcher_free(m.s);
    sim_free(&m);
    dt_expconf_free(c);
}

static void test_full_search_stopping(void) {
    full_search(true);
}

static void test_full_search_stop_once_false(void) {
    full_search(false);
}

static void test_config_errors(void) {
    dt_expconf *c = cload(ONE_BRACKET("true"));
    if (!c) return;
    dt_searcher *s = NULL;
    free(c->searcher.mode);
    c->searcher.mode = strdup("eager");
    CHECK(dt_searcher_new(c, 1, &s) == DT_ERR_CONFIG && !s);
    CHECK(strstr(dt_last_error(), "searcher.mode must be one of aggressive, standard"));
    dt_expconf_free(c);
}

int main(void) {
    TEST_RUN(test_max_rungs);
    TEST_RUN(test_brackets);
    TEST_RUN(test_bracket_trials);
    TEST_RUN(test_rung_units);
    TEST_RUN(test_stopping_smaller);
    TEST_RUN(test_stopping_larger);
    TEST_RUN(test_invalid_hp);
    TEST_RUN(test_nan_metric);
    TEST_RUN(test_stop_once_never_resumes);
    TEST_RUN(test_async_halving);
    TEST_RUN(test_time_metric_rungs);
    TEST_RUN(test_time_metric_unit);
    TEST_RUN(test_full_search_stopping);
    TEST_RUN(test_full_search_stop_once_false);
    TEST_RUN(test_config_errors);
    TEST_END();
}
