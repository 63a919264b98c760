/* Tests for adaptive_asha on the shipped example, examples/fashion_mnist/adaptive.yaml, whose
 * max_length is in epochs: the searcher's plan (rungs in the unit trials train in: 2 epochs of
 * 60000 records at 64 a batch = 1875 batches, rungs 117, 468, 1875) against the numbers the
 * example's comment promises, and a simulated search in which trials stop at the lower rungs.
 * The same plan with a batch size that is searched stays in records. */
#include "dtrain/config.h"
#include "search_sim.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

static char g_path[4096];

static dt_expconf *load_example(void) {
    dt_expconf *c = NULL;
    CHECK_MSG(dt_expconf_load_file(g_path, 0, &c) == DT_OK, "%s", dt_last_error());
    return c;
}

/* The integers of `a` into out (at most n); their count. */
static int ints(const json_t *a, int64_t *out, int n) {
    int k = 0;
    for (size_t i = 0; i < json_array_size(a) && k < n; i++)
        out[k++] = (int64_t)json_integer_value(json_array_get(a, i));
    return k;
}

/* The example's comment: "... N trials, rungs at A, B and C batches (divisor D)". */
static int comment_rungs(int64_t *out, int n, int64_t *trials) {
    FILE *f = fopen(g_path, "r");
    char text[4096] = "";
    if (f) {
        size_t r = fread(text, 1, sizeof text - 1, f);
        text[r] = 0;
        fclose(f);
    }
    const char *t = strstr(text, " trials, rungs at");
    const char *p = t;
    while (p > text && p[-1] >= '0' && p[-1] <= '9') p--;
    *trials = t ? strtoll(p, NULL, 10) : 0;
    int k = 0;
    for (p = t ? t + strlen(" trials, rungs at") : ""; *p && k < n; p++) {
        if (*p >= '0' && *p <= '9') out[k++] = strtoll(p, (char **)&p, 10);
        if (!strncmp(p, " batches", 8)) break;
    }
    return k;
}

static void test_plan_matches_comment(void) {
    dt_expconf *c = load_example();
    if (!c) return;
    json_t *plan = NULL;
    CHECK(dt_searcher_plan(c, &plan) == DT_OK && plan);
    const json_t *b = json_array_get(json_object_get(plan, "brackets"), 0);
    int64_t rungs[8], per[8], want[8], trials = 0;
    int n = ints(json_object_get(b, "rungs"), rungs, 8);
    int np = ints(json_object_get(b, "trials"), per, 8);
    int nw = comment_rungs(want, 8, &trials);
    CHECK(!strcmp(json_string_value(json_object_get(plan, "unit")), "batches"));
    CHECK(json_array_size(json_object_get(plan, "brackets")) == 1); /* mode: aggressive */
    CHECK_MSG(n == 3 && rungs[0] == 117 && rungs[1] == 468 && rungs[2] == 1875, "%d rungs", n);
    CHECK(np == 3 && per[0] == 16 && per[1] == 4 && per[2] == 1);
    /* the comment says what the searcher plans */
    CHECK_MSG(nw == n && trials == json_integer_value(json_object_get(b, "max_trials")),
              "comment: %d rungs, %lld trials", nw, (long long)trials);
    for (int i = 0; i < n && i < nw; i++) CHECK_MSG(want[i] == rungs[i], "rung %d", i);
    json_decref(plan);
    dt_expconf_free(c);
}

/* A trial's loss: its floor from its request id, improving with training. */
static sim g_sim;
static double loss(const sim_trial *t, int64_t length) {
    int64_t id = t - g_sim.t;
    return (double)(id % 7) + 100.0 / (double)length;
}

static void test_trials_stop_early(void) {
    dt_expconf *c = load_example();
    if (!c) return;
    g_sim = (sim){.metric = loss};
    CHECK(dt_searcher_new(c, 7, &g_sim.s) == DT_OK);
    if (!g_sim.s) {
        dt_expconf_free(c);
        return;
    }
    sim_start(&g_sim);
    sim_run(&g_sim, 100000);
    int at[4] = {0}; /* trials by the rung they stopped at (their validations) */
    for (int64_t i = 1; i <= g_sim.n; i++)
        if (g_sim.t[i].validations >= 1 && g_sim.t[i].validations <= 3)
            at[g_sim.t[i].validations]++;
    CHECK_MSG(!g_sim.failed && g_sim.shutdowns == 1 && g_sim.n == 16, "%lld trials",
              (long long)g_sim.n);
    /* most trials stop at the first rung (117 batches); a few go on; none trains past 1875 */
    CHECK_MSG(at[1] >= 10 && at[1] < 16 && at[3] >= 1 && at[1] + at[2] + at[3] == 16,
              "stopped at rungs: %d %d %d\n%s", at[1], at[2], at[3], g_sim.log);
    CHECK(strstr(g_sim.log, "VALIDATE 1 batches 117\n") && !strstr(g_sim.log, "epochs"));
    for (int64_t i = 1; i <= g_sim.n; i++) CHECK(g_sim.t[i].reached <= 1875);
    dt_searcher_free(g_sim.s);
    sim_free(&g_sim);
    dt_expconf_free(c);
}

/* A searched batch size: the rungs stay in records (each trial converts with its own). */
static void test_searched_batch_size(void) {
    dt_expconf *c = NULL;
    CHECK(dt_expconf_load_string("entrypoint: m:T\nrecords_per_epoch: 60000\n"
                                 "hyperparameters: {global_batch_size: {type: categorical, vals: "
                                 "[32, 64]}}\n"
                                 "searcher: {name: adaptive_asha, metric: l, max_trials: 16, "
                                 "max_length: {epochs: 2}, max_rungs: 3, mode: aggressive}\n",
                                 "c.yaml", 0, &c) == DT_OK);
    json_t *plan = NULL;
    if (c) CHECK(dt_searcher_plan(c, &plan) == DT_OK);
    const json_t *b = json_array_get(json_object_get(plan, "brackets"), 0);
    int64_t rungs[8];
    CHECK(!strcmp(json_string_value(json_object_get(plan, "unit")) ?: "", "records"));
    CHECK(ints(json_object_get(b, "rungs"), rungs, 8) == 3 && rungs[0] == 7500 &&
          rungs[2] == 120000);
    json_decref(plan);
    dt_expconf_free(c);
}

int main(void) {
    const char *src = getenv("DT_SOURCE_DIR");
    snprintf(g_path, sizeof g_path, "%s/examples/fashion_mnist/adaptive.yaml", src ? src : ".");
    TEST_RUN(test_plan_matches_comment);
    TEST_RUN(test_trials_stop_early);
    TEST_RUN(test_searched_batch_size);
    TEST_END();
}
