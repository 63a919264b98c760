/* Tests for src/search/ (search.c, hparams.c, random.c, grid.c): grid counts and values
 * per hyperparameter type (nested groups, categorical and const objects included), random
 * values reproducible from the seed, single, the random and grid lifecycles with
 * invalid-hyperparameter and errored exits, the driver's event checks, a custom method, and a
 * snapshot taken mid-search giving the same next operations as the uninterrupted searcher. */
#include "search/search_impl.h"
#include "dtrain/config.h"
#include "search_sim.h"
#include "test.h"
#include "search/searcher.h"

#include <math.h>
#include <string.h>

#define HAS(s, sub) (strstr((s), (sub)) != NULL)
#define CHECK_HAS(s, sub) CHECK_MSG(HAS((s), (sub)), "\"%s\" lacks \"%s\"", (s), (sub))

static dt_expconf *cload(const char *text) {
    dt_expconf *c = NULL;
    dt_status st = dt_expconf_load_string(text, "config.yaml", 0, &c);
    CHECK_MSG(st == DT_OK && c, "load failed: %s", dt_last_error());
    return c;
}

static dt_searcher *snew(const dt_expconf *c, uint64_t seed) {
    dt_searcher *s = NULL;
    dt_status st = dt_searcher_new(c, seed, &s);
    CHECK_MSG(st == DT_OK && s, "dt_searcher_new: %s", dt_last_error());
    return s;
}

static json_t *jget(const json_t *o, const char *path) { /* "a.b" */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const json_t *x = o;
    for (char *k = strtok(buf, "."); k && x; k = strtok(NULL, ".")) x = json_object_get(x, k);
    return (json_t *)x;
}

/* ---- grid ------------------------------------------------------------------------------------ */

#define GRID_HP                                                                                    \
    "hyperparameters:\n"                                                                           \
    "  global_batch_size: 32\n"                                                                    \
    "  deepspeed_config: ds_config.json\n"                                                         \
    "  overwrite_deepspeed_args: {type: const, val: {zero_optimization: {stage: 2}}}\n"            \
    "  units: {type: int, minval: 1, maxval: 10, count: 4}\n"                                      \
    "  optimizer:\n"                                                                               \
    "    lr: {type: log, minval: -3, maxval: -1, base: 10, count: 3}\n"                            \
    "    momentum: {type: double, minval: 0.5, maxval: 0.9, count: 2}\n"                           \
    "    name: {type: categorical, vals: [sgd, adam]}\n"

static void test_grid_values(void) {
    dt_expconf *c = cload("entrypoint: m:T\n" GRID_HP
                          "searcher: {name: grid, metric: loss, max_length: {batches: 10}}\n");
    if (!c) return;
    int64_t n = 0;
    CHECK(dt__hp_grid_size(c, &n) == DT_OK && n == 4 * 3 * 2 * 2);
    json_t *p = NULL;
    /* point 0: every axis at its first value */
    CHECK(dt__hp_grid_point(c, 0, &p) == DT_OK && p);
    CHECK(json_integer_value(jget(p, "global_batch_size")) == 32);
    CHECK(!strcmp(json_string_value(jget(p, "deepspeed_config")), "ds_config.json"));
    CHECK(json_integer_value(jget(p, "overwrite_deepspeed_args.zero_optimization.stage")) == 2);
    CHECK(json_integer_value(jget(p, "units")) == 1);
    CHECK_NEAR(json_real_value(jget(p, "optimizer.lr")), 1e-3, 1e-15);
    CHECK_NEAR(json_real_value(jget(p, "optimizer.momentum")), 0.5, 1e-15);
    CHECK(!strcmp(json_string_value(jget(p, "optimizer.name")), "sgd"));
    CHECK(json_object_size(p) == 5 && json_object_size(jget(p, "optimizer")) == 3);
    json_decref(p);
    /* the last axis varies fastest: point 1 changes only optimizer.name */
    CHECK(dt__hp_grid_point(c, 1, &p) == DT_OK && p);
    CHECK(!strcmp(json_string_value(jget(p, "optimizer.name")), "adam"));
    CHECK(json_integer_value(jget(p, "units")) == 1);
    json_decref(p);
    /* every value of every axis, over the whole grid */
    int seen_units[11] = {0}, seen_lr[3] = {0}, seen_mom[2] = {0};
    for (int64_t i = 0; i < n; i++) {
        CHECK(dt__hp_grid_point(c, i, &p) == DT_OK);
        int64_t u = json_integer_value(jget(p, "units"));
        if (u >= 0 && u <= 10) seen_units[u]++;
        double lr = json_real_value(jget(p, "optimizer.lr"));
        for (int k = 0; k < 3; k++) seen_lr[k] += fabs(lr - pow(10, -3 + k)) < 1e-12 * pow(10, k);
        double mo = json_real_value(jget(p, "optimizer.momentum"));
        seen_mom[0] += fabs(mo - 0.5) < 1e-12;
        seen_mom[1] += fabs(mo - 0.9) < 1e-12;
        json_decref(p);
    }
    /* int 1..10, count 4: round(1 + i·9/3) = 1, 4, 7, 10 */
    CHECK(seen_units[1] == 12 && seen_units[4] == 12 && seen_units[7] == 12 &&
          seen_units[10] == 12);
    CHECK(seen_lr[0] == 16 && seen_lr[1] == 16 && seen_lr[2] == 16);
    CHECK(seen_mom[0] == 24 && seen_mom[1] == 24);
    dt_expconf_free(c);
}

static void test_grid_axes(void) {
    /* int count clamped to the range; count 1 → the midpoint (int rounded half away from 0) */
    dt_expconf *c = cload("entrypoint: m:T\n"
                          "hyperparameters:\n"
                          "  a: {type: int, minval: 0, maxval: 2, count: 5}\n"
                          "  b: {type: int, minval: 1, maxval: 4, count: 1}\n"
                          "  d: {type: double, minval: 0, maxval: 1, count: 1}\n"
                          "  l: {type: log, minval: 1, maxval: 3, base: 2, count: 1}\n"
                          "  i: {type: int, minval: 0, maxval: 10, count: 3}\n"
                          "searcher: {name: grid, metric: loss, max_length: {batches: 10}}\n");
    if (!c) return;
    int64_t n = 0;
    CHECK(dt__hp_grid_size(c, &n) == DT_OK && n == 3 * 3);
    json_t *p = NULL;
    static const int64_t i_vals[3] = {0, 5, 10};
    for (int64_t k = 0; k < n; k++) {
        CHECK(dt__hp_grid_point(c, k, &p) == DT_OK);
        CHECK(json_integer_value(jget(p, "a")) == k / 3);
        CHECK(json_integer_value(jget(p, "b")) == 3);
        CHECK_NEAR(json_real_value(jget(p, "d")), 0.5, 0);
        CHECK_NEAR(json_real_value(jget(p, "l")), 4.0, 1e-12);
        CHECK(json_integer_value(jget(p, "i")) == i_vals[k % 3]);
        json_decref(p);
    }
    dt_expconf_free(c);
}

static void test_grid_errors(void) {
    /* the config refuses a range without count under grid (expconf's check, named) */
    dt_expconf *c = NULL;
    CHECK(dt_expconf_load_string("entrypoint: m:T\n"
                                 "hyperparameters: {lr: {type: double, minval: 0, maxval: 1}}\n"
                                 "searcher: {name: grid, metric: loss, max_length: {batches: 1}}\n",
                                 "config.yaml", 0, &c) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "hyperparameters.lr needs `count` with the grid searcher");
    /* and the grid itself refuses one that reaches it another way */
    c = cload("entrypoint: m:T\n"
              "hyperparameters: {opt: {lr: {type: double, minval: 0, maxval: 1}}}\n"
              "searcher: {name: random, max_trials: 2, metric: loss, max_length: {batches: 1}}\n");
    int64_t n;
    if (c) {
        CHECK(dt__hp_grid_size(c, &n) == DT_ERR_CONFIG);
        CHECK_HAS(dt_last_error(), "hyperparameters.opt.lr needs `count`");
        dt_expconf_free(c);
    }
    /* a grid too large to be meant */
    c = cload("entrypoint: m:T\n"
              "hyperparameters:\n"
              "  a: {type: int, minval: 0, maxval: 100000, count: 1000}\n"
              "  b: {type: int, minval: 0, maxval: 100000, count: 1001}\n"
              "searcher: {name: grid, metric: loss, max_length: {batches: 1}}\n");
    if (c) {
        dt_searcher *s = NULL;
        CHECK(dt_searcher_new(c, 1, &s) == DT_ERR_CONFIG && !s);
        CHECK_HAS(dt_last_error(), "the grid has more than 1000000 points (at hyperparameters.b)");
        dt_expconf_free(c);
    }
}

/* ---- random values ------------------------------------------------------------------------- */

#define RANDOM_CFG(extra)                                                                          \
    "entrypoint: m:T\n"                                                                            \
    "hyperparameters:\n"                                                                           \
    "  global_batch_size: 32\n"                                                                    \
    "  x: {type: double, minval: 0, maxval: 1}\n"                                                  \
    "  n: {type: int, minval: -2, maxval: 2}\n"                                                    \
    "  opt:\n"                                                                                     \
    "    lr: {type: log, minval: -4, maxval: -2, base: 10}\n"                                      \
    "    kind: {type: categorical, vals: [a, b, c]}\n"                                             \
    "    extra: {type: const, val: {k: [1, 2]}}\n"                                                 \
    "searcher: {name: random, metric: loss, max_length: {batches: 100}" extra "}\n"

/* The CREATE lines of a fresh searcher's initial operations. */
static char *initial_log(const dt_expconf *c, uint64_t seed) {
    sim m = {.s = snew(c, seed)};
    if (!m.s) return strdup("");
    sim_start(&m);
    dt_searcher_free(m.s);
    return m.log ? m.log : strdup("");
}

static void test_random_values(void) {
    dt_expconf *c = cload(RANDOM_CFG(", max_trials: 400, max_concurrent_trials: 400"));
    if (!c) return;
    char *a = initial_log(c, 7), *b = initial_log(c, 7), *d = initial_log(c, 8);
    CHECK(!strcmp(a, b)); /* the seed gives the trials */
    CHECK(strcmp(a, d));  /* another seed, others */
    free(a);
    free(b);
    free(d);
    dt_searcher *s = snew(c, 3);
    dt_search_ops ops = {0};
    CHECK(dt_searcher_initial_operations(s, &ops) == DT_OK && ops.n == 800);
    int n_seen[5] = {0}, kinds[3] = {0}, bad = 0;
    for (int i = 0; i < ops.n; i += 2) {
        const dt_search_op *op = &ops.v[i];
        CHECK(op->kind == DT_SEARCH_CREATE && op->request_id == i / 2 + 1);
        CHECK(ops.v[i + 1].kind == DT_SEARCH_VALIDATE_AFTER && ops.v[i + 1].length.n == 100);
        double x = json_real_value(jget(op->hparams, "x"));
        json_int_t n = json_integer_value(jget(op->hparams, "n"));
        double lr = json_real_value(jget(op->hparams, "opt.lr"));
        const char *k = json_string_value(jget(op->hparams, "opt.kind"));
        bad += !(x >= 0 && x < 1) || !json_is_integer(jget(op->hparams, "n")) || n < -2 || n > 2 ||
               !(lr >= 1e-4 && lr <= 1e-2) || !k || strlen(k) != 1 || k[0] < 'a' || k[0] > 'c';
        bad += json_integer_value(jget(op->hparams, "global_batch_size")) != 32;
        bad += json_integer_value(json_array_get(jget(op->hparams, "opt.extra.k"), 1)) != 2;
        if (n >= -2 && n <= 2) n_seen[n + 2]++;
        if (k && k[0] >= 'a' && k[0] <= 'c') kinds[k[0] - 'a']++;
    }
    CHECK(bad == 0);
    for (int i = 0; i < 5; i++) CHECK(n_seen[i] > 40); /* inclusive at both ends */
    for (int i = 0; i < 3; i++) CHECK(kinds[i] > 80);
    dt_search_ops_free(&ops);
    CHECK(ops.n == 0 && ops.v == NULL);
    dt_searcher_free(s);
    dt_expconf_free(c);
}

/* ---- lifecycles ---------------------------------------------------------------------------- */

static double metric_x(const sim_trial *t, int64_t length) {
    return t->x + 1.0 / (double)length;
}

static void test_single(void) {
    dt_expconf *c = cload(RANDOM_CFG(", max_trials: 9")); /* single runs one trial regardless */
    if (!c) return;
    free(c->searcher.name);
    c->searcher.name = strdup("single");
    sim m = {.s = snew(c, 1), .metric = metric_x};
    if (m.s) {
        CHECK(dt_searcher_progress(m.s) == 0);
        sim_start(&m);
        CHECK(m.n == 1);
        sim_run(&m, 100);
        CHECK_MSG(!strncmp(m.log, "CREATE 1 ", 9), "%s", m.log);
        CHECK_HAS(m.log, "VALIDATE 1 batches 100\nCLOSE 1\nSHUTDOWN\n");
        CHECK(m.shutdowns == 1 && !m.failed && dt_searcher_progress(m.s) == 1);
        json_t *snap = dt_searcher_save(m.s);
        CHECK(json_integer_value(jget(snap, "counts.requested")) == 1);
        CHECK(json_integer_value(jget(snap, "counts.closed")) == 1);
        CHECK(!strcmp(json_string_value(jget(snap, "searcher")), "single"));
        json_decref(snap);
    }
    dt_searcher_free(m.s);
    sim_free(&m);
    dt_expconf_free(c);
}

static void test_random_lifecycle(void) {
    dt_expconf *c = cload(RANDOM_CFG(", max_trials: 5, max_concurrent_trials: 2"));
    if (!c) return;
    sim m = {.s = snew(c, 11), .metric = metric_x};
    if (!m.s) return;
    sim_start(&m);
    CHECK(m.n == 2); /* min(max_trials, max_concurrent_trials) at once */
    m.t[1].exit_at = 1, m.t[1].exit_why = DT_SEARCH_EXIT_INVALID_HP; /* replaced */
    m.t[2].exit_at = 1, m.t[2].exit_why = DT_SEARCH_EXIT_ERRORED;    /* counts as a trial */
    int steps = 0;
    double last = 0;
    bool monotone = true;
    while (sim_step(&m)) {
        double p = dt_searcher_progress(m.s);
        monotone &= p >= last;
        last = p;
        int open = 0;
        for (int64_t i = 1; i <= m.n; i++) open += !m.t[i].closed;
        CHECK(open <= 2);
        steps++;
    }
    CHECK(monotone && last == 1);
    CHECK(!m.failed && m.shutdowns == 1);
    CHECK_MSG(m.n == 6, "requested %lld", (long long)m.n); /* 5 + the invalid one's replacement */
    for (int64_t i = 1; i <= m.n; i++) CHECK(m.t[i].closed);
    CHECK(m.log_len > 9 && !strcmp(m.log + m.log_len - 9, "SHUTDOWN\n"));
    json_t *snap = dt_searcher_save(m.s);
    CHECK(json_integer_value(jget(snap, "counts.invalid_hp")) == 1);
    CHECK(json_integer_value(jget(snap, "counts.errored")) == 1);
    CHECK(json_integer_value(jget(snap, "counts.created")) == 6);
    CHECK(json_is_true(jget(snap, "counts.shutdown")));
    json_decref(snap);
    /* after SHUTDOWN the method hears nothing more */
    dt_search_ops ops = {0};
    CHECK(dt_searcher_trial_closed(m.s, 3, &ops) == DT_OK && ops.n == 0);
    dt_searcher_free(m.s);
    sim_free(&m);
    dt_expconf_free(c);
}

static void test_grid_lifecycle(void) {
    dt_expconf *c = cload("entrypoint: m:T\n"
                          "hyperparameters: {x: {type: double, minval: 0, maxval: 1, count: 4}}\n"
                          "searcher: {name: grid, metric: loss, max_length: {batches: 50},\n"
                          "           max_concurrent_trials: 2}\n");
    if (!c) return;
    sim m = {.s = snew(c, 5), .metric = metric_x};
    if (!m.s) return;
    sim_start(&m);
    CHECK(m.n == 2);
    m.t[1].exit_at = 1, m.t[1].exit_why = DT_SEARCH_EXIT_INVALID_HP; /* not replaced */
    m.t[2].exit_at = 1, m.t[2].exit_why = DT_SEARCH_EXIT_ERRORED;
    sim_run(&m, 1000);
    CHECK(!m.failed && m.shutdowns == 1 && m.n == 4);
    CHECK_HAS(m.log, "CREATE 1 {\"x\":0.0}\nVALIDATE 1 batches 50\n");
    CHECK_HAS(m.log, "CREATE 4 {\"x\":1.0}\nVALIDATE 4 batches 50\n");
    CHECK(m.log_len > 9 && !strcmp(m.log + m.log_len - 9, "SHUTDOWN\n"));
    CHECK(dt_searcher_progress(m.s) == 1);
    dt_searcher_free(m.s);
    sim_free(&m);
    dt_expconf_free(c);
}

/* ---- the driver ---------------------------------------------------------------------------- */

static void test_names_and_events(void) {
    dt_expconf *c = cload(RANDOM_CFG(", max_trials: 2"));
    if (!c) return;
    dt_searcher *s = NULL;
    free(c->searcher.name);
    c->searcher.name = strdup("hyperband");
    CHECK(dt_searcher_new(c, 1, &s) == DT_ERR_CONFIG && !s);
    CHECK_HAS(dt_last_error(), "unknown searcher 'hyperband'; hint: use single, random, grid, "
                               "adaptive_asha, async_halving or custom");
    free(c->searcher.name);
    c->searcher.name = strdup("custom");
    CHECK(dt_searcher_new(c, 1, &s) == DT_ERR_CONFIG && !s);
    CHECK_HAS(dt_last_error(), "dt_searcher_new_custom");
    free(c->searcher.name);
    c->searcher.name = strdup("random");
    s = snew(c, 1);
    if (!s) return;
    dt_search_ops ops = {0};
    CHECK(dt_searcher_trial_created(s, 1, &ops) == DT_ERR_STATE); /* nothing requested yet */
    CHECK_HAS(dt_last_error(), "request 1, which the searcher never made");
    CHECK(dt_searcher_initial_operations(s, &ops) == DT_OK && ops.n == 4);
    CHECK(dt_searcher_initial_operations(s, &ops) == DT_ERR_STATE && ops.n == 4);
    dt_search_ops_free(&ops);
    dt_length len = {DT_UNIT_BATCHES, 100};
    CHECK(dt_searcher_validation_completed(s, 1, 0.5, len, &ops) == DT_ERR_STATE);
    CHECK_HAS(dt_last_error(), "before its trial was created");
    CHECK(dt_searcher_trial_created(s, 1, &ops) == DT_OK && ops.n == 0);
    CHECK(dt_searcher_trial_created(s, 1, &ops) == DT_ERR_STATE);
    CHECK(dt_searcher_trial_created(s, 3, &ops) == DT_ERR_STATE);
    CHECK(dt_searcher_validation_completed(s, 1, 0.5, len, &ops) == DT_OK && ops.n == 1);
    CHECK(ops.v[0].kind == DT_SEARCH_CLOSE && ops.v[0].request_id == 1);
    dt_search_ops_free(&ops);
    CHECK(dt_searcher_trial_closed(s, 1, &ops) == DT_OK && ops.n == 0); /* max_trials reached */
    CHECK(dt_searcher_trial_closed(s, 1, &ops) == DT_OK && ops.n == 0); /* repeated: ignored */
    CHECK(dt_searcher_validation_completed(s, 1, 0.5, len, &ops) == DT_ERR_STATE);
    CHECK_HAS(dt_last_error(), "after it closed");
    CHECK(dt_searcher_trial_exited_early(s, 2, (dt_search_exit)9, &ops) == DT_ERR_INVALID);
    CHECK(dt_searcher_trial_exited_early(s, 2, DT_SEARCH_EXIT_USER_CANCELED, &ops) == DT_OK);
    CHECK(dt_searcher_trial_closed(s, 2, &ops) == DT_OK && ops.n == 1);
    CHECK(ops.v[0].kind == DT_SEARCH_SHUTDOWN && !ops.v[0].cancel && !ops.v[0].failure);
    dt_search_ops_free(&ops);
    CHECK(dt_search_validate_after(&ops, 1, (dt_length){DT_UNIT_BATCHES, 0}) == DT_ERR_INVALID);
    dt_searcher_free(s);
    dt_expconf_free(c);
}

/* A custom method: two trials with given values, the second after the first closes. */
typedef struct custom {
    int64_t created, closed;
    int freed;
    int *freed_flag;
} custom;

static dt_status cu_initial(void *st, dt_search_ctx *sc, dt_search_ops *out) {
    custom *u = st;
    json_t *hp = json_pack("{s:i}", "w", 1);
    int64_t id = 0;
    dt_status r = dt_search_create_with(sc, hp, out, &id);
    json_decref(hp);
    if (!r) r = dt_search_validate_after(out, id, (dt_length){DT_UNIT_EPOCHS, 2});
    u->created++;
    return r;
}

static dt_status cu_validated(void *st, dt_search_ctx *sc, int64_t id, double metric, dt_length len,
                              dt_search_ops *out) {
    (void)st, (void)len;
    CHECK(dt_search_config(sc) != NULL);
    double u = dt_search_uniform(sc);
    CHECK(u >= 0 && u < 1);
    return metric > 100 ? dt_error(DT_ERR_INVALID, "metric too large") : dt_search_close(out, id);
}

static dt_status cu_closed(void *st, dt_search_ctx *sc, int64_t id, dt_search_ops *out) {
    custom *u = st;
    (void)id;
    u->closed++;
    if (u->created < 2) {
        int64_t nid;
        u->created++;
        dt_status r = dt_search_create_random(sc, out, &nid);
        return r ? r : dt_search_validate_after(out, nid, (dt_length){DT_UNIT_EPOCHS, 2});
    }
    return dt_search_shutdown(out, false, false);
}

static json_t *cu_save(void *st) {
    custom *u = st;
    return json_pack("{s:I, s:I}", "created", (json_int_t)u->created, "closed",
                     (json_int_t)u->closed);
}

static dt_status cu_load(void *st, const json_t *j) {
    custom *u = st;
    json_int_t a, b;
    if (json_unpack((json_t *)j, "{s:I, s:I}", "created", &a, "closed", &b))
        return dt_error(DT_ERR_FORMAT, "bad custom state");
    u->created = a, u->closed = b;
    return DT_OK;
}

static void cu_free(void *st) {
    custom *u = st;
    (*u->freed_flag)++;
}

static void test_custom(void) {
    dt_expconf *c = cload(RANDOM_CFG(", max_trials: 2"));
    if (!c) return;
    int freed = 0;
    custom u = {.freed_flag = &freed};
    dt_search_method meth = {.name = "two",
                             .state = &u,
                             .initial_operations = cu_initial,
                             .on_validation_completed = cu_validated,
                             .on_trial_closed = cu_closed,
                             .save = cu_save,
                             .load = cu_load,
                             .free = cu_free};
    dt_searcher *s = NULL;
    CHECK(dt_searcher_new_custom(c, 9, &meth, &s) == DT_OK && s);
    sim m = {.s = s, .metric = metric_x};
    sim_start(&m);
    CHECK_HAS(m.log, "CREATE 1 {\"w\":1}\nVALIDATE 1 epochs 2\n");
    sim_run(&m, 100);
    CHECK(!m.failed && m.shutdowns == 1 && m.n == 2);
    CHECK_HAS(m.log, "CLOSE 1\nCREATE 2 {\"global_batch_size\":32,\"n\":");
    json_t *snap = dt_searcher_save(s);
    CHECK(json_integer_value(jget(snap, "method.closed")) == 2);
    json_decref(snap);
    /* an error from a handler drops what it appended and reaches the caller */
    dt_searcher *s2 = NULL;
    custom u2 = {.freed_flag = &freed};
    meth.state = &u2;
    CHECK(dt_searcher_new_custom(c, 9, &meth, &s2) == DT_OK);
    dt_search_ops ops = {0};
    CHECK(dt_searcher_initial_operations(s2, &ops) == DT_OK && ops.n == 2);
    dt_search_ops_free(&ops);
    CHECK(dt_searcher_trial_created(s2, 1, &ops) == DT_OK);
    CHECK(dt_searcher_validation_completed(s2, 1, 1e9, (dt_length){DT_UNIT_EPOCHS, 2}, &ops) ==
              DT_ERR_INVALID &&
          ops.n == 0);
    CHECK_HAS(dt_last_error(), "metric too large");
    dt_searcher_free(s2);
    dt_searcher_free(s);
    CHECK(freed == 2);
    sim_free(&m);
    dt_expconf_free(c);
}

/* ---- snapshots ----------------------------------------------------------------------------- */

/* Run `cfg`'s search to `split` events, snapshot, restore into a new searcher, and check both
 * give the same operations from there on (and that the snapshot survives text). */
static void snapshot_case(const char *cfg_text, int split, void (*plan)(sim *)) {
    dt_expconf *c = cload(cfg_text);
    if (!c) return;
    sim a = {.s = snew(c, 42), .metric = metric_x};
    if (!a.s) return;
    sim_start(&a);
    if (plan) plan(&a);
    CHECK(sim_run(&a, split) == split);
    json_t *snap = dt_searcher_save(a.s);
    char *text = json_dumps(snap, JSON_COMPACT);
    json_decref(snap);
    json_t *back = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    sim b = a; /* the master's own record of the trials, as its store would keep it */
    b.log = NULL, b.log_len = b.log_cap = 0;
    b.s = snew(c, 999); /* another seed: the snapshot's RNG must win */
    CHECK(b.s && back && dt_searcher_load(b.s, back) == DT_OK);
    json_decref(back);
    size_t from = a.log_len;
    sim_run(&a, 100000);
    sim_run(&b, 100000);
    CHECK(a.shutdowns == 1 && b.shutdowns == 1 && !a.failed && !b.failed);
    CHECK_MSG(a.log && b.log && !strcmp(a.log + from, b.log), "after the split:\n%s\nvs\n%s",
              a.log + from, b.log);
    CHECK(b.log && strstr(b.log, "CREATE")); /* the restored searcher did create trials */
    json_t *sa = dt_searcher_save(a.s), *sb = dt_searcher_save(b.s);
    CHECK(json_equal(sa, sb));
    json_decref(sa);
    json_decref(sb);
    dt_searcher_free(a.s);
    dt_searcher_free(b.s);
    sim_free(&a);
    sim_free(&b);
    dt_expconf_free(c);
}

static void plan_exits(sim *m) {
    m->t[2].exit_at = 1, m->t[2].exit_why = DT_SEARCH_EXIT_INVALID_HP;
    m->t[3].exit_at = 2, m->t[3].exit_why = DT_SEARCH_EXIT_ERRORED;
}

static void test_snapshot_restore(void) {
    snapshot_case(RANDOM_CFG(", max_trials: 8, max_concurrent_trials: 3"), 7, plan_exits);
    snapshot_case("entrypoint: m:T\n"
                  "hyperparameters: {x: {type: double, minval: 0, maxval: 1}}\n"
                  "searcher: {name: adaptive_asha, metric: loss, max_length: {batches: 64},\n"
                  "           max_trials: 24, divisor: 2, max_concurrent_trials: 4}\n",
                  25, plan_exits);
    snapshot_case("entrypoint: m:T\n"
                  "hyperparameters: {x: {type: int, minval: 0, maxval: 9, count: 10}}\n"
                  "searcher: {name: grid, metric: loss, max_length: {batches: 5},\n"
                  "           max_concurrent_trials: 3}\n",
                  9, NULL);
}

static void test_snapshot_refused(void) {
    dt_expconf *c = cload(RANDOM_CFG(", max_trials: 3"));
    if (!c) return;
    dt_searcher *s = snew(c, 1);
    if (!s) return;
    dt_search_ops ops = {0};
    CHECK(dt_searcher_initial_operations(s, &ops) == DT_OK);
    dt_search_ops_free(&ops);
    json_t *snap = dt_searcher_save(s), *before = dt_searcher_save(s);
    json_object_set_new(snap, "searcher", json_string("grid"));
    CHECK(dt_searcher_load(s, snap) == DT_ERR_FORMAT);
    CHECK_HAS(dt_last_error(), "it is the grid searcher's, not the random searcher's");
    json_object_set_new(snap, "searcher", json_string("random"));
    json_object_set_new(snap, "version", json_integer(2));
    CHECK(dt_searcher_load(s, snap) == DT_ERR_FORMAT);
    CHECK_HAS(dt_last_error(), "version 2 is not supported");
    json_object_set_new(snap, "version", json_integer(1));
    json_object_set_new(json_object_get(snap, "counts"), "created", json_integer(2));
    CHECK(dt_searcher_load(s, snap) == DT_ERR_FORMAT);
    CHECK_HAS(dt_last_error(), "the counts do not match the requests");
    json_object_set_new(json_object_get(snap, "counts"), "created", json_integer(0));
    json_object_set_new(snap, "method", json_string("?"));
    CHECK(dt_searcher_load(s, snap) == DT_ERR_FORMAT);
    CHECK_HAS(dt_last_error(), "random searcher's state lacks a count 'requested'");
    CHECK(dt_searcher_load(s, json_null()) == DT_ERR_FORMAT);
    json_t *after = dt_searcher_save(s); /* nothing changed by the refused loads */
    CHECK(json_equal(before, after));
    json_decref(after);
    json_decref(before);
    json_decref(snap);
    dt_searcher_free(s);
    dt_expconf_free(c);
}

int main(void) {
    TEST_RUN(test_grid_values);
    TEST_RUN(test_grid_axes);
    TEST_RUN(test_grid_errors);
    TEST_RUN(test_random_values);
    TEST_RUN(test_single);
    TEST_RUN(test_random_lifecycle);
    TEST_RUN(test_grid_lifecycle);
    TEST_RUN(test_names_and_events);
    TEST_RUN(test_custom);
    TEST_RUN(test_snapshot_restore);
    TEST_RUN(test_snapshot_refused);
    TEST_END();
}
