/* Tests for src/base/yaml.c and src/config/expconf.c: YAML typing and positions, malformed
 * input, anchors/merges, the experiment config's validation (types, required keys, enums,
 * unknown-key suggestions, positions in messages), hyperparameters, lengths and their
 * conversion to batches, environment variables and defaults. */
#include "dtrain/config.h"
#include "dtrain/trial.h"
#include "test.h"
#include "base/yaml.h"
#include "base/base_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define HAS(s, sub) (strstr((s), (sub)) != NULL)
#define CHECK_HAS(s, sub) CHECK_MSG(HAS((s), (sub)), "\"%s\" lacks \"%s\"", (s), (sub))

static dt_yaml_doc *yload(const char *text) {
    return dt_yaml_load_string(text, strlen(text), "t.yaml");
}

/* The error message of a YAML text that must fail to load ("" if it loaded). */
static const char *yerr(const char *text) {
    dt_yaml_doc *d = yload(text);
    if (d) {
        dt_yaml_free(d);
        return "";
    }
    CHECK(dt_last_status() == DT_ERR_CONFIG);
    return dt_last_error();
}

static dt_expconf *cload(const char *text, unsigned flags) {
    dt_expconf *c = NULL;
    dt_status st = dt_expconf_load_string(text, "config.yaml", flags, &c);
    CHECK_MSG(st == DT_OK && c, "load failed: %s", dt_last_error());
    return c;
}

/* The error message of a config that must fail validation ("" if it was accepted). */
static const char *cerr(const char *text, unsigned flags) {
    dt_expconf *c = NULL;
    dt_status st = dt_expconf_load_string(text, "config.yaml", flags, &c);
    if (st == DT_OK) {
        dt_expconf_free(c);
        return "";
    }
    CHECK(c == NULL);
    CHECK(st == DT_ERR_CONFIG);
    return dt_last_error();
}

/* A valid config's head; tests append keys to it. */
#define BASE                                                                                       \
    "entrypoint: model_def:MyTrial\n"                                                              \
    "searcher:\n"                                                                                  \
    "  metric: validation_loss\n"                                                                  \
    "  max_length: {batches: 100}\n"

/* ---- YAML ---------------------------------------------------------------------------------- */

static void test_yaml_scalars(void) {
    const char *y = "n1: ~\nn2: null\nn3: NULL\nn4:\n"
                    "b1: true\nb2: False\nb3: yes\nb4: 'true'\n"
                    "i1: 42\ni2: -7\ni3: +8\ni4: 0x1F\ni5: 0o17\ni6: 007\n"
                    "f1: 1.5\nf2: 1e-3\nf3: -2.5E+4\nf4: .5\nf5: 3.\n"
                    "x1: .inf\nx2: -.Inf\nx3: .NaN\n"
                    "s1: \"123\"\ns2: 1_000\ns3: hello world\ns4: |\n  line1\n  line2\n"
                    "s5: 0x\ns6: 1e\ns7: .\n"
                    "t1: !!str 12\nt2: !!int \"12\"\nt3: !!float 1\nt4: !!bool \"true\"\n"
                    "t5: !!null \"\"\nt6: ! 12\n";
    dt_yaml_doc *d = yload(y);
    CHECK_MSG(d != NULL, "%s", dt_last_error());
    if (!d) return;
    json_t *r = dt_yaml_root(d);
#define G(k) json_object_get(r, k)
    CHECK(json_is_null(G("n1")) && json_is_null(G("n2")) && json_is_null(G("n3")) &&
          json_is_null(G("n4")));
    CHECK(json_is_true(G("b1")) && json_is_false(G("b2")));
    CHECK(json_is_string(G("b3")) && !strcmp(json_string_value(G("b3")), "yes"));
    CHECK(json_is_string(G("b4")));
    CHECK(json_integer_value(G("i1")) == 42 && json_integer_value(G("i2")) == -7);
    CHECK(json_integer_value(G("i3")) == 8 && json_integer_value(G("i4")) == 31);
    CHECK(json_integer_value(G("i5")) == 15 && json_integer_value(G("i6")) == 7);
    CHECK(json_is_real(G("f1")) && json_real_value(G("f1")) == 1.5);
    CHECK(json_is_real(G("f2")) && json_real_value(G("f2")) == 1e-3);
    CHECK(json_is_real(G("f3")) && json_real_value(G("f3")) == -2.5e4);
    CHECK(json_is_real(G("f4")) && json_real_value(G("f4")) == 0.5);
    CHECK(json_is_real(G("f5")) && json_real_value(G("f5")) == 3.0);
    double x = 0;
    CHECK(!strcmp(json_string_value(G("x1")), ".inf") && dt_json_number(G("x1"), &x) && isinf(x) &&
          x > 0);
    CHECK(!strcmp(json_string_value(G("x2")), "-.inf") && dt_json_number(G("x2"), &x) && isinf(x) &&
          x < 0);
    CHECK(dt_json_number(G("x3"), &x) && isnan(x));
    CHECK(!dt_json_number(G("s3"), &x) && dt_json_number(G("i1"), &x) && x == 42);
    CHECK(json_is_string(G("s1")) && !strcmp(json_string_value(G("s1")), "123"));
    CHECK(json_is_string(G("s2")) && json_is_string(G("s3")));
    CHECK(!strcmp(json_string_value(G("s4")), "line1\nline2\n"));
    CHECK(json_is_string(G("s5")) && json_is_string(G("s6")) && json_is_string(G("s7")));
    CHECK(json_is_string(G("t1")) && !strcmp(json_string_value(G("t1")), "12"));
    CHECK(json_is_integer(G("t2")) && json_integer_value(G("t2")) == 12);
    CHECK(json_is_real(G("t3")) && json_real_value(G("t3")) == 1.0);
    CHECK(json_is_true(G("t4")) && json_is_null(G("t5")));
    CHECK(json_is_string(G("t6")));
#undef G
    dt_yaml_free(d);

    CHECK_HAS(yerr("a: 99999999999999999999\n"), "t.yaml:1:4: integer");
    CHECK_HAS(yerr("a: 99999999999999999999\n"), "out of range");
    CHECK_HAS(yerr("a: !!int abc\n"), "not a valid !!int");
    CHECK_HAS(yerr("a: !custom 1\n"), "unsupported tag '!custom'");
    CHECK_HAS(yerr("a: !!set {x}\n"), "unsupported tag");
    /* empty input: a null root */
    d = yload("");
    CHECK(d && json_is_null(dt_yaml_root(d)));
    dt_yaml_free(d);
    d = yload("# only a comment\n");
    CHECK(d && json_is_null(dt_yaml_root(d)));
    dt_yaml_free(d);
    /* a top-level list, and flow style */
    d = yload("- 1\n- {a: [x, y]}\n");
    CHECK(d && json_is_array(dt_yaml_root(d)) && json_array_size(dt_yaml_root(d)) == 2);
    dt_yaml_free(d);
}

static void test_yaml_positions(void) {
    const char *y = "name: exp\n"       /* line 1 */
                    "searcher:\n"       /* line 2 */
                    "  metric: loss\n"  /* line 3 */
                    "  smaller: true\n" /* line 4 */
                    "  list:\n"         /* line 5 */
                    "    - 10\n"        /* line 6 */
                    "    -   false\n"   /* line 7 */
                    "flow: {a: 1, b: null}\n";
    dt_yaml_doc *d = yload(y);
    CHECK(d != NULL);
    if (!d) return;
    json_t *r = dt_yaml_root(d);
    json_t *s = json_object_get(r, "searcher");
    dt_yaml_pos p = dt_yaml_value_pos(d, r, "name");
    CHECK(p.line == 1 && p.col == 7);
    p = dt_yaml_key_pos(d, r, "name");
    CHECK(p.line == 1 && p.col == 1);
    p = dt_yaml_value_pos(d, s, "metric");
    CHECK(p.line == 3 && p.col == 11);
    p = dt_yaml_key_pos(d, s, "smaller");
    CHECK(p.line == 4 && p.col == 3);
    p = dt_yaml_value_pos(d, s, "smaller"); /* a singleton: found through its parent */
    CHECK(p.line == 4 && p.col == 12);
    json_t *l = json_object_get(s, "list");
    p = dt_yaml_item_pos(d, l, 0);
    CHECK(p.line == 6 && p.col == 7);
    p = dt_yaml_item_pos(d, l, 1);
    CHECK(p.line == 7 && p.col == 9);
    p = dt_yaml_node_pos(d, json_array_get(l, 0));
    CHECK(p.line == 6 && p.col == 7);
    p = dt_yaml_node_pos(d, json_array_get(l, 1)); /* false is a singleton: unknown */
    CHECK(p.line == 0);
    p = dt_yaml_node_pos(d, s); /* a block mapping starts at its first key */
    CHECK(p.line == 3 && p.col == 3);
    json_t *f = json_object_get(r, "flow");
    p = dt_yaml_node_pos(d, f);
    CHECK(p.line == 8 && p.col == 7);
    p = dt_yaml_value_pos(d, f, "b");
    CHECK(p.line == 8 && p.col == 17);
    p = dt_yaml_value_pos(d, r, "nope");
    CHECK(p.line == 0);
    char buf[64];
    CHECK(!strcmp(dt_yaml_where(d, (dt_yaml_pos){12, 5}, buf, sizeof buf), "t.yaml:12:5"));
    CHECK(!strcmp(dt_yaml_where(d, (dt_yaml_pos){0, 0}, buf, sizeof buf), "t.yaml"));
    CHECK(!strcmp(dt_yaml_where(NULL, (dt_yaml_pos){3, 1}, buf, sizeof buf), ""));
    CHECK(!strcmp(dt_yaml_name(d), "t.yaml"));
    dt_yaml_free(d);

    /* many keys: the position tables grow and rehash */
    char big[20000];
    size_t n = 0;
    for (int i = 0; i < 500; i++) n += (size_t)snprintf(big + n, sizeof big - n, "k%d: %d\n", i, i);
    d = yload(big);
    CHECK(d != NULL);
    if (d) {
        int bad = 0;
        for (int i = 0; i < 500; i++) {
            char k[16];
            snprintf(k, sizeof k, "k%d", i);
            dt_yaml_pos q = dt_yaml_value_pos(d, dt_yaml_root(d), k);
            bad += q.line != i + 1;
        }
        CHECK(bad == 0);
    }
    dt_yaml_free(d);
}

static void test_yaml_errors(void) {
    /* the parser's own message, at the parser's position */
    const char *e = yerr("a: 1\nb: [1, 2\nc: 3\n");
    CHECK_HAS(e, "t.yaml:");
    CHECK_MSG(HAS(e, "flow sequence"), "%s", e);
    e = yerr("a:\n\tb: 1\n");
    CHECK_HAS(e, "t.yaml:2:1: found character that cannot start any token");
    e = yerr("a: b: c\n");
    CHECK_HAS(e, "t.yaml:1:5: mapping values are not allowed in this context");
    e = yerr("key: \"unterminated\n");
    CHECK_HAS(e, "t.yaml:");
    CHECK_HAS(e, "quoted scalar");
    /* duplicate keys name both places */
    e = yerr("lr: 1\nbatch: 2\nlr: 3\n");
    CHECK_HAS(e, "t.yaml:3:1: duplicate key 'lr' (first defined at line 1, column 1)");
    e = yerr("outer:\n  a: 1\n  b: 2\n  a: 3\n");
    CHECK_HAS(e, "t.yaml:4:3: duplicate key 'a' (first defined at line 2, column 3)");
    /* documents, complex keys */
    CHECK_HAS(yerr("a: 1\n---\nb: 2\n"), "more than one YAML document");
    CHECK_HAS(yerr("? [a, b]\n: 1\n"), "keys must be scalars");
    CHECK_HAS(yerr("? {a: 1}\n: 1\n"), "t.yaml:1:3:");
    /* files */
    dt_yaml_doc *d = dt_yaml_load_file("/nonexistent/dir/config.yaml");
    CHECK(d == NULL && dt_last_status() == DT_ERR_IO);
    CHECK_HAS(dt_last_error(), "/nonexistent/dir/config.yaml");
    char path[64];
    snprintf(path, sizeof path, "/tmp/dtrain_test_expconf_%d.yaml", (int)getpid());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("a: 1\nb:\n  - x\n  - [y\n", f);
    fclose(f);
    d = dt_yaml_load_file(path);
    CHECK(d == NULL && dt_last_status() == DT_ERR_CONFIG);
    char want[128];
    snprintf(want, sizeof want, "%s:", path);
    CHECK_HAS(dt_last_error(), want);
    f = fopen(path, "w");
    fputs("a: 1\nb:\n  - x\n", f);
    fclose(f);
    d = dt_yaml_load_file(path);
    CHECK(d != NULL && !strcmp(dt_yaml_name(d), path));
    if (d) {
        json_t *b = json_object_get(dt_yaml_root(d), "b");
        CHECK(dt_yaml_item_pos(d, b, 0).line == 3);
    }
    dt_yaml_free(d);
    unlink(path);
}

static void test_yaml_anchors(void) {
    const char *y = "base: &b\n"                  /* 1 */
                    "  lr: 0.1\n"                 /* 2 */
                    "  layers: [1, 2]\n"          /* 3 */
                    "copy: *b\n"                  /* 4 */
                    "merged:\n"                   /* 5 */
                    "  <<: *b\n"                  /* 6 */
                    "  lr: 0.5\n"                 /* 7 */
                    "multi:\n"                    /* 8 */
                    "  <<: [{x: 1, lr: 9}, *b]\n" /* 9 */
                    "s: &s hello\n"               /* 10 */
                    "t: *s\n";                    /* 11 */
    dt_yaml_doc *d = yload(y);
    CHECK_MSG(d != NULL, "%s", dt_last_error());
    if (!d) return;
    json_t *r = dt_yaml_root(d);
    json_t *base = json_object_get(r, "base"), *copy = json_object_get(r, "copy");
    CHECK(json_equal(base, copy) && base != copy);
    /* the copy sits at the alias; its children keep the anchor's positions */
    CHECK(dt_yaml_value_pos(d, r, "copy").line == 4);
    CHECK(dt_yaml_value_pos(d, copy, "lr").line == 2);
    CHECK(dt_yaml_item_pos(d, json_object_get(copy, "layers"), 1).line == 3);
    json_t *m = json_object_get(r, "merged");
    CHECK(json_real_value(json_object_get(m, "lr")) == 0.5); /* explicit key wins */
    CHECK(json_equal(json_object_get(m, "layers"), json_object_get(base, "layers")));
    CHECK(dt_yaml_value_pos(d, m, "lr").line == 7);
    CHECK(dt_yaml_value_pos(d, m, "layers").line == 3);
    CHECK(json_object_get(m, "<<") == NULL);
    json_t *mu = json_object_get(r, "multi");
    CHECK(json_integer_value(json_object_get(mu, "lr")) == 9); /* earlier source wins */
    CHECK(json_integer_value(json_object_get(mu, "x")) == 1);
    CHECK(json_object_get(mu, "layers") != NULL);
    CHECK(!strcmp(json_string_value(json_object_get(r, "t")), "hello"));
    /* mutating the copy leaves the original alone */
    json_object_set_new(copy, "lr", json_integer(3));
    CHECK(json_real_value(json_object_get(base, "lr")) == 0.1);
    dt_yaml_free(d);

    CHECK_HAS(yerr("a: *nope\n"), "t.yaml:1:4: unknown alias *nope");
    CHECK_HAS(yerr("a: &x [1, *x]\n"), "recursive alias *x");
    CHECK_HAS(yerr("a: &x 1\nb:\n  <<: *x\n"), "merge key");
    CHECK_HAS(yerr("a: &k key\n*k : 1\n"), "as a key is not supported");
    /* a "billion laughs" document fails cleanly */
    const char *bomb = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
                       "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                       "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                       "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                       "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
                       "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
                       "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n";
    CHECK_HAS(yerr(bomb), "document too large");
}

/* ---- experiment config ---------------------------------------------------------------------- */

static void test_minimal_and_defaults(void) {
    dt_log_set_level(DT_LOG_ERROR);
    dt_expconf *c = cload(BASE, 0);
    if (!c) return;
    CHECK(!strcmp(c->entrypoint, "model_def:MyTrial"));
    CHECK(!strcmp(c->entry_module, "model_def") && !strcmp(c->entry_symbol, "MyTrial"));
    CHECK(!strcmp(c->name, "MyTrial") && c->description == NULL);
    CHECK(c->n_hparams == 0);
    CHECK(!strcmp(c->searcher.name, "single") && !strcmp(c->searcher.metric, "validation_loss"));
    CHECK(c->searcher.smaller_is_better);
    CHECK(c->searcher.max_length.unit == DT_UNIT_BATCHES && c->searcher.max_length.n == 100);
    CHECK(c->searcher.max_trials == 0 && c->searcher.max_concurrent_trials == 0);
    CHECK(!strcmp(c->searcher.mode, "standard") && c->searcher.divisor == 4);
    CHECK(c->searcher.max_rungs == 5 && !c->searcher.stop_once);
    CHECK(c->min_validation_period.n == 0 && c->min_checkpoint_period.n == 0);
    CHECK(c->records_per_epoch == 0 && c->scheduling_unit == 100);
    CHECK(!c->perform_initial_validation);
    CHECK(c->checkpoint_policy == DT_CKPT_BEST);
    CHECK(!strcmp(c->checkpoint_storage.type, "shared_fs"));
    CHECK(c->checkpoint_storage.host_path == NULL && c->checkpoint_storage.storage_path == NULL);
    CHECK(c->checkpoint_storage.save_trial_best == 1 &&
          c->checkpoint_storage.save_trial_latest == 1);
    CHECK(c->checkpoint_storage.save_experiment_best == 0);
    CHECK(c->aggregation_frequency == 1 && c->average_aggregated_gradients);
    CHECK(c->average_training_metrics);
    CHECK(!c->has_experiment_seed);
    CHECK(c->n_env == 0);
    CHECK(c->slots_per_trial == 1 && c->max_restarts == 5 && c->max_slots == 0);
    CHECK(c->max_silence == 600);
    CHECK(json_is_object(c->data) && json_object_size(c->data) == 0);
    CHECK(c->n_warnings == 0);
    CHECK(c->doc != NULL && c->json == dt_yaml_root(c->doc));
    dt_expconf_free(c);
    /* null means "not given" for optional keys */
    c = cload(BASE "records_per_epoch:\ncheckpoint_storage: ~\n", 0);
    if (c) CHECK(c->records_per_epoch == 0 && c->checkpoint_storage.save_trial_best == 1);
    dt_expconf_free(c);
}

static void test_full_config(void) {
    const char *y = "name: fashion-mnist\n"
                    "description: an MLP\n"
                    "entrypoint: models.mnist:FashionTrial\n"
                    "hyperparameters:\n"
                    "  global_batch_size: 64\n"
                    "  lr: {type: const, val: 0.01}\n"
                    "  optimizer:\n"
                    "    name: adamw\n"
                    "    betas: [0.9, 0.99]\n"
                    "searcher:\n"
                    "  name: single\n"
                    "  metric: accuracy\n"
                    "  smaller_is_better: false\n"
                    "  max_length: {epochs: 3}\n"
                    "min_validation_period: {batches: 50}\n"
                    "min_checkpoint_period: {records: 6400}\n"
                    "records_per_epoch: 60000\n"
                    "scheduling_unit: 10\n"
                    "perform_initial_validation: true\n"
                    "checkpoint_policy: all\n"
                    "checkpoint_storage:\n"
                    "  type: shared_fs\n"
                    "  host_path: /tmp/ckpt\n"
                    "  storage_path: /tmp/ckpt/exp1\n"
                    "  save_trial_best: 2\n"
                    "  save_trial_latest: 0\n"
                    "  save_experiment_best: 3\n"
                    "optimizations:\n"
                    "  aggregation_frequency: 4\n"
                    "  average_aggregated_gradients: false\n"
                    "reproducibility: {experiment_seed: 1234}\n"
                    "environment:\n"
                    "  environment_variables:\n"
                    "    - OMP_NUM_THREADS=2\n"
                    "    - EMPTY=\n"
                    "    - EQ=a=b\n"
                    "  image: ignored/image:tag\n"
                    "resources: {slots_per_trial: 2, resource_pool: default, max_silence: 90}\n"
                    "data: {url: /data/fashion, shuffle: true}\n"
                    "max_restarts: 0\n"
                    "bind_mounts:\n"
                    "  - {host_path: /data, container_path: /data}\n"
                    "labels: [mlp, test]\n"
                    "profiling: {enabled: true}\n"
                    "workspace: w\n"
                    "project: p\n";
    dt_expconf *c = cload(y, 0);
    if (!c) return;
    CHECK(!strcmp(c->name, "fashion-mnist") && !strcmp(c->description, "an MLP"));
    CHECK(!strcmp(c->entry_module, "models.mnist") && !strcmp(c->entry_symbol, "FashionTrial"));
    CHECK(c->n_hparams == 4);
    const dt_hparam *h = dt_expconf_hparam(c, "global_batch_size");
    CHECK(h && h->type == DT_HP_CONST && json_integer_value(h->val) == 64 && h->pos.line == 5);
    h = dt_expconf_hparam(c, "lr");
    CHECK(h && h->type == DT_HP_CONST && json_real_value(h->val) == 0.01);
    h = dt_expconf_hparam(c, "optimizer.name");
    CHECK(h && !strcmp(json_string_value(h->val), "adamw") && h->pos.line == 8);
    h = dt_expconf_hparam(c, "optimizer.betas");
    CHECK(h && json_is_array(h->val));
    CHECK(dt_expconf_hparam(c, "optimizer") == NULL);
    CHECK(!c->searcher.smaller_is_better && !strcmp(c->searcher.metric, "accuracy"));
    CHECK(c->searcher.max_length.unit == DT_UNIT_EPOCHS && c->searcher.max_length.n == 3);
    CHECK(c->min_validation_period.unit == DT_UNIT_BATCHES && c->min_validation_period.n == 50);
    CHECK(c->min_checkpoint_period.unit == DT_UNIT_RECORDS && c->min_checkpoint_period.n == 6400);
    CHECK(c->records_per_epoch == 60000 && c->scheduling_unit == 10);
    CHECK(c->perform_initial_validation && c->checkpoint_policy == DT_CKPT_ALL);
    CHECK(!strcmp(c->checkpoint_storage.host_path, "/tmp/ckpt"));
    CHECK(!strcmp(c->checkpoint_storage.storage_path, "/tmp/ckpt/exp1"));
    CHECK(c->checkpoint_storage.save_trial_best == 2 &&
          c->checkpoint_storage.save_trial_latest == 0);
    CHECK(c->checkpoint_storage.save_experiment_best == 3);
    CHECK(c->aggregation_frequency == 4 && !c->average_aggregated_gradients);
    CHECK(c->has_experiment_seed && c->experiment_seed == 1234);
    CHECK(c->n_env == 3);
    if (c->n_env == 3) {
        CHECK(!strcmp(c->env_keys[0], "OMP_NUM_THREADS") && !strcmp(c->env_values[0], "2"));
        CHECK(!strcmp(c->env_keys[1], "EMPTY") && !strcmp(c->env_values[1], ""));
        CHECK(!strcmp(c->env_keys[2], "EQ") && !strcmp(c->env_values[2], "a=b"));
    }
    CHECK(c->slots_per_trial == 2 && c->max_restarts == 0 && c->max_silence == 90);
    CHECK(!strcmp(json_string_value(json_object_get(c->data, "url")), "/data/fashion"));
    CHECK(json_array_size(json_object_get(c->json, "labels")) == 2);
    CHECK(json_is_array(json_object_get(c->json, "bind_mounts")));
    /* the keys without effect here: one warning each, file and line, in the table's order */
    static const char *const want[] = {
        "config.yaml:45: workspace has no effect: dtrain has no workspaces",
        "config.yaml:46: project has no effect",
        "config.yaml:41: bind_mounts has no effect: trials run as processes on this host",
        "config.yaml:37: environment.image has no effect: trials run as processes on this host",
        "config.yaml:38: resources.resource_pool has no effect: the master schedules"};
    CHECK_MSG(c->n_warnings == 5, "%d warnings", c->n_warnings);
    for (int i = 0; i < 5 && i < c->n_warnings; i++) CHECK_HAS(c->warnings[i], want[i]);
    /* the values a trial sees: nested groups stay nested */
    json_t *vals = NULL;
    CHECK(dt_expconf_hparam_values(c, &vals) == DT_OK);
    CHECK(json_integer_value(json_object_get(vals, "global_batch_size")) == 64);
    CHECK(json_real_value(json_object_get(vals, "lr")) == 0.01);
    json_t *opt = json_object_get(vals, "optimizer");
    CHECK(json_is_object(opt) && !strcmp(json_string_value(json_object_get(opt, "name")), "adamw"));
    CHECK(json_array_size(json_object_get(opt, "betas")) == 2);
    json_decref(vals);
    /* conversions with the config's own values: 3 epochs * 60000 / 64 = 2812 (truncated) */
    int64_t b = 0;
    CHECK(dt_expconf_length_batches(c, c->searcher.max_length, "searcher.max_length", &b) == DT_OK);
    CHECK(b == 2812);
    CHECK(dt_expconf_length_batches(c, c->min_checkpoint_period, "min_checkpoint_period", &b) ==
              DT_OK &&
          b == 100);
    CHECK(dt_expconf_length_batches(c, c->min_validation_period, "x", &b) == DT_OK && b == 50);
    CHECK(dt_expconf_global_batch_size(c, "test", &b) == DT_OK && b == 64);
    dt_expconf_free(c);
}

static void test_type_errors(void) {
    /* a value of the wrong type, reported with its position */
    const char *e = cerr("entrypoint: model_def:T\n"
                         "searcher:\n"
                         "  metric: loss\n"
                         "  max_length:\n"
                         "    batches: ten\n",
                         0);
    CHECK_HAS(e, "config.yaml:5:14: searcher.max_length.batches must be a positive integer, "
                 "got \"ten\"");
    e = cerr(BASE "records_per_epoch: -5\n", 0);
    CHECK_HAS(e, "config.yaml:5:20: records_per_epoch must be a non-negative integer, got -5");
    e = cerr(BASE "scheduling_unit: 2.5\n", 0);
    CHECK_HAS(e, "config.yaml:5:18: scheduling_unit must be a positive integer, got 2.5");
    e = cerr(BASE "scheduling_unit: 0\n", 0);
    CHECK_HAS(e, "scheduling_unit must be a positive integer, got 0");
    /* integral reals are integers */
    dt_expconf *c = cload(BASE "records_per_epoch: 6e4\n", 0);
    if (c) CHECK(c->records_per_epoch == 60000);
    dt_expconf_free(c);
    e = cerr(BASE "perform_initial_validation: yes\n", 0);
    CHECK_HAS(e, "config.yaml:5:29: perform_initial_validation must be true or false, got \"yes\"");
    CHECK_HAS(e, "YAML 1.2");
    e = cerr(BASE "optimizations: {average_aggregated_gradients: 1}\n", 0);
    CHECK_HAS(e, "optimizations.average_aggregated_gradients must be true or false, got 1");
    e = cerr(BASE "optimizations: {aggregation_frequency: 0}\n", 0);
    CHECK_HAS(e, "config.yaml:5:40: optimizations.aggregation_frequency must be a positive");
    e = cerr(BASE "resources: [1]\n", 0);
    CHECK_HAS(e, "config.yaml:5:12: resources must be a mapping, got a list");
    e = cerr(BASE "resources: {slots_per_trial: -1}\n", 0);
    CHECK_HAS(e, "resources.slots_per_trial must be a non-negative integer, got -1");
    e = cerr(BASE "resources: {slots_per_trial: 4, max_slots: 2}\n", 0);
    CHECK_HAS(e, "resources.max_slots is 2, less than slots_per_trial (4)");
    e = cerr(BASE "resources: {max_silence: -1}\n", 0);
    CHECK_HAS(e, "resources.max_silence must be");
    e = cerr(BASE "resources: {max_silence: 0.5}\n", 0);
    CHECK_HAS(e, "resources.max_silence is 0.5 s: a run could not start");
    e = cerr(BASE "resources: {max_silence: ten}\n", 0);
    CHECK_HAS(e, "resources.max_silence must be");
    e = cerr(BASE "name: 12\n", 0);
    CHECK_HAS(e, "config.yaml:5:7: name must be a string, got 12 (quote it");
    e = cerr(BASE "data: [1, 2]\n", 0);
    CHECK_HAS(e, "data must be a mapping");
    e = cerr(BASE "max_restarts: -1\n", 0);
    CHECK_HAS(e, "max_restarts must be a non-negative integer");
    e = cerr(BASE "reproducibility: {experiment_seed: 4294967296}\n", 0);
    CHECK_HAS(e, "reproducibility.experiment_seed must be at most 2147483647");
    e = cerr(BASE "labels: [a, {b: 1}]\n", 0);
    CHECK_HAS(e, "config.yaml:5:13: labels[1] must be a string, got a mapping");
    e = cerr(BASE "bind_mounts: {a: 1}\n", 0);
    CHECK_HAS(e, "bind_mounts must be a list");
    /* lengths */
    e = cerr(BASE "min_validation_period: 100\n", 0);
    CHECK_HAS(e, "config.yaml:5:24: min_validation_period must be a mapping like {batches: N}");
    e = cerr(BASE "min_validation_period: {batches: 1, epochs: 2}\n", 0);
    CHECK_HAS(e, "min_validation_period must have exactly one of batches, epochs, records");
    e = cerr(BASE "min_checkpoint_period: {batch: 10}\n", 0);
    CHECK_HAS(e, "config.yaml:5:25: min_checkpoint_period: unknown unit 'batch'");
    CHECK_HAS(e, "did you mean 'batches'?");
    c = cload(BASE "min_validation_period: {epochs: 0}\n", 0); /* 0 = not set */
    if (c) CHECK(c->min_validation_period.n == 0);
    dt_expconf_free(c);
    e = cerr("entrypoint: m:T\nsearcher: {metric: l, max_length: {records: 0}}\n", 0);
    CHECK_HAS(e, "searcher.max_length.records must be a positive integer, got 0");
    /* the root */
    CHECK_HAS(cerr("", 0), "config.yaml: the config is empty");
    CHECK_HAS(cerr("- a\n- b\n", 0), "config.yaml:1:1: the experiment config must be a mapping");
}

static void test_required(void) {
    const char *e = cerr("searcher: {metric: l, max_length: {batches: 1}}\n", 0);
    CHECK_HAS(e, "config.yaml: entrypoint is required; hint:");
    /* a typo of a required key is named in the error */
    e = cerr("entrypiont: m:T\nsearcher: {metric: l, max_length: {batches: 1}}\n", 0);
    CHECK_HAS(e, "entrypoint is required (is 'entrypiont' on line 1 a typo?)");
    e = cerr("entrypoint: m:T\n", 0);
    CHECK_HAS(e, "searcher is required");
    e = cerr("entrypoint: m:T\nsearcher:\n  name: single\n  max_length: {batches: 1}\n", 0);
    CHECK_HAS(e, "config.yaml:3:3: searcher.metric is required; hint:");
    e = cerr("entrypoint: m:T\nsearcher:\n  metrc: loss\n  max_length: {batches: 1}\n", 0);
    CHECK_HAS(e, "config.yaml:3:3: searcher.metric is required (is 'metrc' on line 3 a typo?)");
    e = cerr("entrypoint: m:T\nsearcher:\n  metric: ''\n  max_length: {batches: 1}\n", 0);
    CHECK_HAS(e, "config.yaml:3:11: searcher.metric must not be empty");
    /* max_length: required unless the command line gives it */
    const char *nolen = "entrypoint: m:T\nsearcher:\n  metric: loss\n";
    e = cerr(nolen, 0);
    CHECK_HAS(e, "config.yaml:3:3: searcher.max_length is required");
    dt_expconf *c = cload(nolen, DT_EXPCONF_MAX_LENGTH_OPTIONAL);
    if (c) {
        CHECK(c->searcher.max_length.n == 0);
        CHECK(dt_expconf_set_max_length(c, (dt_length){DT_UNIT_EPOCHS, 2}) == DT_OK);
        CHECK(c->searcher.max_length.unit == DT_UNIT_EPOCHS && c->searcher.max_length.n == 2);
        json_t *ml = json_object_get(json_object_get(c->json, "searcher"), "max_length");
        CHECK(json_integer_value(json_object_get(ml, "epochs")) == 2);
        CHECK(dt_expconf_set_max_length(c, (dt_length){DT_UNIT_BATCHES, 0}) == DT_ERR_CONFIG);
    }
    dt_expconf_free(c);
    /* searcher-specific requirements */
    e = cerr("entrypoint: m:T\nsearcher: {name: random, metric: l, max_length: {batches: 1}}\n", 0);
    CHECK_HAS(e, "searcher.max_trials is required; hint: the random searcher needs");
    c = cload("entrypoint: m:T\nsearcher: {name: adaptive_asha, metric: l, max_trials: 16,\n"
              "  max_length: {batches: 1000}, mode: aggressive, divisor: 3, max_rungs: 4,\n"
              "  max_concurrent_trials: 2, stop_once: true}\n",
              0);
    if (c) {
        CHECK(!strcmp(c->searcher.name, "adaptive_asha") && c->searcher.max_trials == 16);
        CHECK(!strcmp(c->searcher.mode, "aggressive") && c->searcher.divisor == 3);
        CHECK(c->searcher.max_rungs == 4 && c->searcher.max_concurrent_trials == 2);
        CHECK(c->searcher.stop_once);
    }
    dt_expconf_free(c);
    e = cerr("entrypoint: m:T\nsearcher: {name: adaptive_asha, max_trials: 2, metric: l, "
             "max_length: {batches: 1}, divisor: 1}\n",
             0);
    CHECK_HAS(e, "searcher.divisor must be a number > 1, got 1");
}

static void test_enums(void) {
    const char *e = cerr(BASE "checkpoint_policy: sometimes\n", 0);
    CHECK_HAS(e, "config.yaml:5:20: checkpoint_policy must be one of best, all, none; got "
                 "\"sometimes\"");
    e = cerr(BASE "checkpoint_policy: nonе\n", 0); /* a look-alike: not accepted */
    CHECK_HAS(e, "checkpoint_policy must be one of best, all, none");
    dt_expconf *c = cload(BASE "checkpoint_policy: none\n", 0);
    if (c) CHECK(c->checkpoint_policy == DT_CKPT_NONE);
    dt_expconf_free(c);
    e = cerr("entrypoint: m:T\nsearcher: {name: custom, metric: l, max_length: {batches: 1}}\n", 0);
    CHECK_HAS(e, "searcher.method");
    c = cload("entrypoint: m:T\nsearcher: {name: custom, method: my_search, metric: l, "
              "max_length: {batches: 1}}\n",
              0);
    if (c) CHECK(!strcmp(c->searcher.method, "my_search"));
    dt_expconf_free(c);
    e = cerr("entrypoint: m:T\nsearcher: {name: singel, metric: l, max_length: {batches: 1}}\n", 0);
    CHECK_HAS(e, "searcher.name must be one of single, grid, random, adaptive_asha, "
                 "async_halving, custom, dsat; got \"singel\" (did you mean 'single'?)");
    /* dsat: the method is one of three, searcher.dsat typed with the reference's defaults */
    c = cload(
        "entrypoint: m:T\nsearcher: {name: dsat, method: asha, metric: throughput, max_length: "
        "{batches: 5}, dsat: {zero_stages: [2, 0], divisor: 3}}\n",
        0);
    if (c)
        CHECK(c->searcher.dsat.n_zero_stages == 2 && c->searcher.dsat.zero_stages[1] == 0 &&
              c->searcher.dsat.divisor == 3 && c->searcher.dsat.end_profile_step == 5 &&
              c->searcher.dsat.random_seed == 42 && !strcmp(c->searcher.method, "asha"));
    dt_expconf_free(c);
    e = cerr("entrypoint: m:T\nsearcher: {name: dsat, method: grid, metric: l, max_length: "
             "{batches: 1}}\n",
             0);
    CHECK_HAS(e, "searcher.method must be one of binary, random, asha");
    e = cerr("entrypoint: m:T\nsearcher: {name: dsat, method: binary, metric: l, max_length: "
             "{batches: 1}, dsat: {zero_stages: [1, 1]}}\n",
             0);
    CHECK_HAS(e, "zero_stages must be a list of 1 to 4 distinct stages 0..3");
    e = cerr("entrypoint: m:T\nsearcher: {name: dsat, method: binary, metric: l, max_length: "
             "{batches: 1}, dsat: {start_profile_step: 4, end_profile_step: 2}}\n",
             0);
    CHECK_HAS(e, "end_profile_step (2) is below start_profile_step (4)");
    e = cerr("entrypoint: m:T\nsearcher: {name: pbx, metric: l, max_length: {batches: 1}}\n", 0);
    CHECK_HAS(e, "searcher.name must be one of");
    CHECK(!HAS(e, "did you mean"));
    e = cerr("entrypoint: m:T\nsearcher: {name: adaptive_asha, max_trials: 2, mode: fast, metric: "
             "l, max_length: {batches: 1}}\n",
             0);
    CHECK_HAS(e, "searcher.mode must be one of aggressive, standard, conservative");
    e = cerr(BASE "checkpoint_storage: {type: s3, bucket: b}\n", 0);
    CHECK_HAS(e, "config.yaml:5:28: checkpoint_storage.type 's3' cannot be used here");
    e = cerr(BASE "checkpoint_storage: {type: nfs}\n", 0);
    CHECK_HAS(e, "checkpoint_storage.type must be one of shared_fs");
    e = cerr(BASE "checkpoint_storage: {host_path: /a/b, storage_path: /a/bc}\n", 0);
    CHECK_HAS(e, "storage_path \"/a/bc\" is absolute but not under host_path \"/a/b\"");
    c = cload(BASE "checkpoint_storage: {host_path: /a/b/, storage_path: rel/dir}\n", 0);
    if (c) CHECK(!strcmp(c->checkpoint_storage.storage_path, "rel/dir"));
    dt_expconf_free(c);
    c = cload(BASE "checkpoint_storage: {host_path: /a/b, storage_path: /a/b/x}\n", 0);
    dt_expconf_free(c);
}

/* checkpoint_storage.storage_path stays inside host_path (dt_path_within, on the strings) */
static void test_storage_path(void) {
    /* refused, naming the field, its position and what is allowed: relative and climbing out,
     * absolute outside host_path, absolute without host_path or under a relative one */
    static const char *const bad[][2] = {
        {"{host_path: /data/ckpts, storage_path: ../../../etc/cron.d}",
         "config.yaml:5:60: checkpoint_storage.storage_path \"../../../etc/cron.d\" climbs out of "
         "host_path \"/data/ckpts\" with \"..\"; hint: storage_path names a directory inside "
         "host_path"},
        {"{host_path: /data/ckpts, storage_path: a/../../x}",
         "storage_path \"a/../../x\" climbs out of host_path \"/data/ckpts\""},
        {"{storage_path: ../x}", "storage_path \"../x\" climbs out of the checkpoint directory"},
        {"{host_path: /data/ckpts, storage_path: /data/ckpts/../x}",
         "is absolute but not under host_path \"/data/ckpts\"; hint: make it relative"},
        {"{storage_path: /srv/x}", "storage_path \"/srv/x\" is absolute but no host_path is given"},
        {"{host_path: ckpts, storage_path: /srv/x}",
         "host_path \"ckpts\" is relative, so it cannot be checked"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[256];
        snprintf(text, sizeof text, BASE "checkpoint_storage: %s\n", bad[i][0]);
        const char *e = cerr(text, 0);
        CHECK_HAS(e, bad[i][1]);
    }
    /* the root "/" holds every absolute path */
    const char *ok[] = {"{host_path: /, storage_path: /srv/x}",
                        "{host_path: /, storage_path: srv/x}",
                        "{host_path: /data/ckpts, storage_path: a/../b}",
                        "{host_path: /data/ckpts/, storage_path: /data/ckpts}",
                        "{host_path: ckpts, storage_path: exp/1}",
                        "{storage_path: exp/1}"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        char text[256];
        snprintf(text, sizeof text, BASE "checkpoint_storage: %s\n", ok[i]);
        dt_expconf *c = cload(text, 0);
        CHECK_MSG(c != NULL, "%s refused", ok[i]);
        dt_expconf_free(c);
    }
}

static void test_unknown_keys(void) {
    dt_expconf *c = cload(BASE "min_validaton_period: {batches: 5}\n"
                               "optimisations: {}\n"
                               "completely_unrelated: 1\n"
                               "resources: {slots_per_trail: 2, resource_pool: x}\n"
                               "debug: true\n"
                               "checkpoint_storage: {host_path: /x, save_trial_bset: 1}\n",
                          0);
    if (!c) return;
    /* the unknown keys, then the keys without effect (debug, resources.resource_pool) */
    CHECK(c->n_warnings == 7);
    if (c->n_warnings == 7) {
        CHECK_HAS(c->warnings[5], "config.yaml:9: debug has no effect");
        CHECK_HAS(c->warnings[6], "config.yaml:8: resources.resource_pool has no effect");
        CHECK_HAS(c->warnings[0], "config.yaml:5:1: unknown key 'min_validaton_period' "
                                  "(ignored); did you mean 'min_validation_period'?");
        CHECK_HAS(c->warnings[1], "did you mean 'optimizations'?");
        CHECK_HAS(c->warnings[2], "config.yaml:7:1: unknown key 'completely_unrelated' (ignored)");
        CHECK(!HAS(c->warnings[2], "did you mean"));
        /* nested keys are reported with their full path */
        CHECK_HAS(c->warnings[3], "config.yaml:10:37: unknown key "
                                  "'checkpoint_storage.save_trial_bset' (ignored); did you mean "
                                  "'save_trial_best'?");
        CHECK_HAS(c->warnings[4], "config.yaml:8:13: unknown key 'resources.slots_per_trail' "
                                  "(ignored); did you mean 'slots_per_trial'?");
    }
    CHECK(c->min_validation_period.n == 0); /* the misspelt key had no effect */
    CHECK(c->slots_per_trial == 1);
    dt_expconf_free(c);
    /* searcher and hyperparameter definitions too */
    c = cload("entrypoint: m:T\nsearcher: {metric: l, max_length: {batches: 1}, smaler_is_better: "
              "false}\nhyperparameters:\n  lr: {type: double, minval: 0.1, maxval: 1, cout: 3}\n",
              0);
    if (c) {
        CHECK(c->n_warnings == 2);
        if (c->n_warnings == 2) {
            /* in validation order: hyperparameters come before the searcher */
            CHECK_HAS(c->warnings[0], "config.yaml:4:46: unknown key 'hyperparameters.lr.cout'");
            CHECK_HAS(c->warnings[0], "did you mean 'count'?");
            CHECK_HAS(c->warnings[1], "config.yaml:2:49: unknown key 'searcher.smaler_is_better'");
            CHECK_HAS(c->warnings[1], "did you mean 'smaller_is_better'?");
        }
    }
    dt_expconf_free(c);
    CHECK(dt_edit_distance("kitten", "sitting") == 3);
    CHECK(dt_edit_distance("", "abc") == 3 && dt_edit_distance("abc", "") == 3);
    CHECK(dt_edit_distance("max_lenght", "max_length") == 1); /* a transposition */
    CHECK(dt_edit_distance("same", "same") == 0);
}

/* profiling: the fit loop's profiler for a range of batches */
static void test_profiling(void) {
    dt_expconf *c = cload(BASE, 0);
    if (c) CHECK(!c->profiling_enabled && c->profiling_begin == 0 && c->profiling_end == INT64_MAX);
    dt_expconf_free(c);
    c = cload(BASE "profiling:\n  enabled: true\n  begin_on_batch: 3\n  end_after_batch: 9\n"
                   "  sync_timings: false\n",
              0);
    if (c) {
        CHECK(c->profiling_enabled && c->profiling_begin == 3 && c->profiling_end == 9);
        CHECK(c->n_warnings == 0);
    }
    dt_expconf_free(c);
    c = cload(BASE "profiling: {enabled: true, end_after_batch: null}\n", 0);
    if (c) CHECK(c->profiling_enabled && c->profiling_begin == 0 && c->profiling_end == INT64_MAX);
    dt_expconf_free(c);
    const char *e =
        cerr(BASE "profiling: {enabled: true, begin_on_batch: 5, end_after_batch: 2}\n", 0);
    CHECK_HAS(e, "config.yaml:5:64: profiling.end_after_batch (2) is before begin_on_batch (5)");
    e = cerr(BASE "profiling: {enabled: 1}\n", 0);
    CHECK_HAS(e, "profiling.enabled must be true or false, got 1");
    e = cerr(BASE "profiling: {begin_on_batch: -1}\n", 0);
    CHECK_HAS(e, "profiling.begin_on_batch must be a non-negative integer, got -1");
    e = cerr(BASE "profiling: true\n", 0);
    CHECK_HAS(e, "profiling must be a mapping");
    c = cload(BASE "profiling: {enabled: true, end_after_bach: 4}\n", 0);
    if (c) {
        CHECK(c->n_warnings == 1);
        if (c->n_warnings == 1)
            CHECK_HAS(c->warnings[0], "unknown key 'profiling.end_after_bach' (ignored); did you "
                                      "mean 'end_after_batch'?");
    }
    dt_expconf_free(c);
}

/* resources.launcher and the slurm section (the slurm launcher's options). */
static void test_launcher_slurm(void) {
    dt_expconf *c = cload(BASE, 0);
    if (c) CHECK(!c->launcher && !c->slurm.partition && c->slurm.cpus_per_slot == 1);
    dt_expconf_free(c);
    c = cload(BASE
              "resources: {launcher: slurm}\n"
              "slurm: {partition: gpu, account: proj, time: '1:00:00', slots_per_node: 4,\n"
              "        cpus_per_slot: 2, sbatch_args: [--qos=low, --exclusive], gpu_type: a100}\n",
              0);
    if (c) {
        CHECK(c->launcher && !strcmp(c->launcher, "slurm"));
        CHECK(c->slurm.partition && !strcmp(c->slurm.partition, "gpu"));
        CHECK(c->slurm.account && !strcmp(c->slurm.account, "proj"));
        CHECK(c->slurm.time && !strcmp(c->slurm.time, "1:00:00"));
        CHECK(c->slurm.slots_per_node == 4 && c->slurm.cpus_per_slot == 2);
        CHECK(c->slurm.n_sbatch_args == 2 && !strcmp(c->slurm.sbatch_args[1], "--exclusive"));
        CHECK(c->n_warnings == 1 && HAS(c->warnings[0], "slurm.gpu_type has no effect"));
    }
    dt_expconf_free(c);
    const char *e = cerr(BASE "resources: {launcher: slrum}\n", 0);
    CHECK_HAS(e, "resources.launcher");
    CHECK_HAS(e, "slurm");
    e = cerr(BASE "slurm: {sbatch_args: [--qos=low, 3]}\n", 0);
    CHECK_HAS(e, "sbatch_args[1] must be a string, got 3");
    e = cerr(BASE "slurm: {cpus_per_slot: 0}\n", 0);
    CHECK_HAS(e, "slurm.cpus_per_slot");
    e = cerr(BASE "slurm: {partition: ''}\n", 0);
    CHECK_HAS(e, "slurm.partition");
    c = cload(BASE "slurm: {partiton: gpu}\n", 0);
    if (c) {
        CHECK(c->n_warnings == 1);
        if (c->n_warnings == 1) CHECK_HAS(c->warnings[0], "did you mean 'partition'?");
    }
    dt_expconf_free(c);
}

static void test_entrypoint(void) {
    static const char *const good[] = {"model_def:MyTrial", "a:_T1", "models.mnist:T",
                                       "my-model:Trial_2", NULL};
    /* a ':' without a space or '/' names a trial: a malformed one is refused */
    static const char *const bad[] = {
        "model_def:", ":T",        "model_def:1T", "model_def:My-Trial",
        "a:b:c",      ".hidden:T", "a..b:T",       NULL};
    /* anything with a '/' or a space, or without a ':', is a command (a program using the Core
     * API), as the reference reads it */
    static const char *const commands[] = {
        "./train", "python3 train.py", "dir/model:T", "model_def", "ls", NULL};
    for (int i = 0; commands[i]; i++) {
        char y[256];
        snprintf(y, sizeof y,
                 "entrypoint: \"%s\"\nsearcher: {metric: l, max_length: {batches: 1}}\n",
                 commands[i]);
        dt_expconf *c = cload(y, 0);
        CHECK(c && c->entry_command && !strcmp(c->entry_command, commands[i]) && !c->entry_symbol &&
              !c->entry_module && !strcmp(c->name, commands[i]));
        dt_expconf_free(c);
    }
    for (int i = 0; good[i]; i++) {
        char y[256];
        snprintf(y, sizeof y,
                 "entrypoint: \"%s\"\nsearcher: {metric: l, max_length: {batches: 1}}\n", good[i]);
        dt_expconf *c = cload(y, 0);
        dt_expconf_free(c);
    }
    for (int i = 0; bad[i]; i++) {
        char y[256];
        snprintf(y, sizeof y,
                 "entrypoint: \"%s\"\nsearcher: {metric: l, max_length: {batches: 1}}\n", bad[i]);
        const char *e = cerr(y, 0);
        CHECK_MSG(HAS(e, "config.yaml:1:13: entrypoint must be \"<file stem>:<trial symbol>\""),
                  "%s: %s", bad[i], e);
    }
    const char *e = cerr("entrypoint: 3\nsearcher: {metric: l, max_length: {batches: 1}}\n", 0);
    CHECK_HAS(e, "entrypoint must be a string, got 3");
    /* a list is the command's arguments, quoted for /bin/sh */
    dt_expconf *c = cload("entrypoint: [python3, -m, my mod, \"it's\"]\n"
                          "searcher: {metric: l}\n",
                          0);
    CHECK(c && c->entry_command && !strcmp(c->entry_command, "python3 -m 'my mod' 'it'\\''s'") &&
          !c->entry_symbol);
    if (c) CHECK(c->searcher.max_length.n == 0); /* a command may leave max_length out */
    dt_expconf_free(c);
    e = cerr("entrypoint: [python3, 3]\nsearcher: {metric: l}\n", 0);
    CHECK_HAS(e, "config.yaml:1:23: entrypoint[1] must be a string");
    e = cerr("entrypoint: []\nsearcher: {metric: l}\n", 0);
    CHECK_HAS(e, "entrypoint is an empty list");
    /* a trial symbol still needs the length */
    e = cerr("entrypoint: m:T\nsearcher: {metric: l}\n", 0);
    CHECK_HAS(e, "searcher.max_length is required");
}

static void test_hyperparameters(void) {
    const char *y = BASE "hyperparameters:\n"                                         /* 5 */
                         "  global_batch_size: 32\n"                                  /* 6 */
                         "  hidden: {type: int, minval: 16, maxval: 256, count: 4}\n" /* 7 */
                         "  dropout: {type: double, minval: 0.0, maxval: 0.5}\n"      /* 8 */
                         "  lr: {type: log, minval: -4, maxval: -1, base: 10}\n"      /* 9 */
                         "  wd: {type: log, minval: -3, maxval: 0}\n"                 /* 10 */
                         "  act: {type: categorical, vals: [relu, gelu]}\n"           /* 11 */
                         "  model:\n"                                                 /* 12 */
                         "    depth: {type: int, minval: 1, maxval: 3}\n"             /* 13 */
                         "    arch: {type: const, val: {kind: mlp}}\n"                /* 14 */
                         "  empty: {}\n"                                              /* 15 */
                         "  nothing: null\n";                                         /* 16 */
    dt_expconf *c = cload(y, 0);
    if (!c) return;
    CHECK(c->n_hparams == 10);
    const dt_hparam *h = dt_expconf_hparam(c, "hidden");
    CHECK(h && h->type == DT_HP_INT && h->minval == 16 && h->maxval == 256 && h->count == 4);
    CHECK(h && h->pos.line == 7 && h->pos.col == 11);
    h = dt_expconf_hparam(c, "dropout");
    CHECK(h && h->type == DT_HP_DOUBLE && h->minval == 0 && h->maxval == 0.5 && h->count == 0);
    h = dt_expconf_hparam(c, "lr");
    CHECK(h && h->type == DT_HP_LOG && h->minval == -4 && h->maxval == -1 && h->base == 10);
    h = dt_expconf_hparam(c, "wd");
    CHECK(h && h->type == DT_HP_LOG && h->base == 10);
    h = dt_expconf_hparam(c, "act");
    CHECK(h && h->type == DT_HP_CATEGORICAL && json_array_size(h->vals) == 2);
    h = dt_expconf_hparam(c, "model.depth");
    CHECK(h && h->type == DT_HP_INT && h->pos.line == 13);
    h = dt_expconf_hparam(c, "model.arch");
    CHECK(h && h->type == DT_HP_CONST && json_is_object(h->val));
    h = dt_expconf_hparam(c, "empty");
    CHECK(h && h->type == DT_HP_CONST && json_is_object(h->val));
    h = dt_expconf_hparam(c, "nothing");
    CHECK(h && h->type == DT_HP_CONST && json_is_null(h->val));
    /* local mode needs constants: the first searched one is named, with its position */
    CHECK(dt_expconf_require_const(c) == DT_ERR_CONFIG);
    const char *e = dt_last_error();
    CHECK_HAS(e, "hyperparameters.hidden (config.yaml:7:11) has type 'int', but local");
    CHECK_HAS(e, "experiment runner");
    CHECK_HAS(e, "searches it");
    json_t *vals = (json_t *)1;
    CHECK(dt_expconf_hparam_values(c, &vals) == DT_ERR_CONFIG && vals == NULL);
    /* a searched global_batch_size can't convert epochs by itself */
    dt_expconf_free(c);
    c = cload(BASE "records_per_epoch: 100\nhyperparameters:\n"
                   "  global_batch_size: {type: categorical, vals: [8, 16]}\n",
              0);
    if (c) {
        int64_t b;
        CHECK(dt_expconf_length_batches(c, (dt_length){DT_UNIT_EPOCHS, 1}, "searcher.max_length",
                                        &b) == DT_ERR_CONFIG);
        CHECK_HAS(dt_last_error(), "hyperparameters.global_batch_size (config.yaml:7:22) has type "
                                   "'categorical'");
        /* the runner converts with each trial's value */
        CHECK(dt_length_to_batches((dt_length){DT_UNIT_EPOCHS, 1}, 16, c->records_per_epoch,
                                   "searcher.max_length", &b) == DT_OK &&
              b == 6);
        CHECK(dt_expconf_length_batches(c, (dt_length){DT_UNIT_BATCHES, 7}, "x", &b) == DT_OK &&
              b == 7);
    }
    dt_expconf_free(c);
    /* const forms all count as const */
    c = cload(BASE "hyperparameters:\n  a: 1\n  b: {type: const, val: [1, 2]}\n  c: {x: {y: 2}}\n",
              0);
    if (c) {
        CHECK(dt_expconf_require_const(c) == DT_OK);
        json_t *v = NULL;
        CHECK(dt_expconf_hparam_values(c, &v) == DT_OK);
        json_t *want = json_loads("{\"a\": 1, \"b\": [1, 2], \"c\": {\"x\": {\"y\": 2}}}", 0, NULL);
        CHECK(json_equal(v, want));
        json_decref(want);
        json_decref(v);
        CHECK(dt_expconf_hparam(c, "c.x.y") != NULL);
    }
    dt_expconf_free(c);

    /* invalid definitions */
    e = cerr(BASE "hyperparameters:\n  opt: {type: adam, lr: 1}\n", 0);
    CHECK_HAS(e, "config.yaml:6:15: hyperparameters.opt.type must be one of const, int, double, "
                 "log, categorical; got \"adam\"");
    CHECK_HAS(e, "{type: const, val:");
    e = cerr(BASE "hyperparameters:\n  opt: {type: categorial, vals: [1]}\n", 0);
    CHECK_HAS(e, "did you mean 'categorical'?");
    e = cerr(BASE "hyperparameters:\n  h: {type: int, minval: 1.5, maxval: 4}\n", 0);
    CHECK_HAS(e, "config.yaml:6:26: hyperparameters.h.minval must be an integer, got 1.5");
    e = cerr(BASE "hyperparameters:\n  h: {type: int, minval: 1}\n", 0);
    CHECK_HAS(e, "config.yaml:6:6: hyperparameters.h.maxval is required");
    e = cerr(BASE "hyperparameters:\n  h: {type: double, minval: 1, maxval: 0.5}\n", 0);
    CHECK_HAS(e, "hyperparameters.h: maxval (0.5) must not be less than minval (1)");
    e = cerr(BASE "hyperparameters:\n  h: {type: double, minval: .nan, maxval: 1}\n", 0);
    CHECK_HAS(e, "hyperparameters.h.minval must be a finite number, got \".nan\"");
    e = cerr(BASE "hyperparameters:\n  h: {type: log, minval: 1, maxval: 2, base: 1}\n", 0);
    CHECK_HAS(e, "hyperparameters.h.base must be positive and not 1");
    e = cerr(BASE "hyperparameters:\n  h: {type: categorical, vals: []}\n", 0);
    CHECK_HAS(e, "hyperparameters.h.vals must be a non-empty list, got a list");
    e = cerr(BASE "hyperparameters:\n  h: {type: categorical}\n", 0);
    CHECK_HAS(e, "hyperparameters.h.vals is required");
    e = cerr(BASE "hyperparameters:\n  h: {type: const}\n", 0);
    CHECK_HAS(e, "hyperparameters.h.val is required for a const hyperparameter");
    e = cerr(BASE "hyperparameters:\n  g:\n    h: {type: int, minval: 1, maxval: 2, count: 0}\n",
             0);
    CHECK_HAS(e, "config.yaml:7:49: hyperparameters.g.h.count must be a positive integer, got 0");
    e = cerr(BASE "hyperparameters: [1, 2]\n", 0);
    CHECK_HAS(e, "hyperparameters must be a mapping, got a list");
    /* grid needs counts */
    e = cerr("entrypoint: m:T\nsearcher: {name: grid, metric: l, max_length: {batches: 1}}\n"
             "hyperparameters:\n  a: {type: int, minval: 1, maxval: 3, count: 3}\n"
             "  b: {type: double, minval: 0, maxval: 1}\n",
             0);
    CHECK_HAS(e, "config.yaml:5:6: hyperparameters.b needs `count` with the grid searcher");
    /* global_batch_size problems */
    c = cload(BASE "hyperparameters: {global_batch_size: \"32\"}\n", 0);
    if (c) {
        int64_t b;
        CHECK(dt_expconf_global_batch_size(c, "test", &b) == DT_ERR_CONFIG);
        CHECK_HAS(dt_last_error(), "global_batch_size (config.yaml:5:38) must be a positive "
                                   "integer, got \"32\"");
    }
    dt_expconf_free(c);
    c = cload(BASE "records_per_epoch: 1000\n", 0);
    if (c) {
        int64_t b;
        CHECK(dt_expconf_length_batches(c, (dt_length){DT_UNIT_EPOCHS, 2}, "searcher.max_length",
                                        &b) == DT_ERR_CONFIG);
        CHECK_HAS(dt_last_error(), "hyperparameters.global_batch_size is required: converting "
                                   "searcher.max_length (2 epochs) to batches needs it");
    }
    dt_expconf_free(c);
}

/* Every hyperparameter name is given by one key: a '.' in a key names like nesting does, so a
 * dotted key and a nested group must not both give a name; and the trial reads each by the name
 * the config gives it. */
static void test_hparam_names(void) {
    /* the input: two hyperparameters both named a.b */
    const char *e = cerr(BASE "hyperparameters: {a.b: 1, a: {b: 2}}\n", 0);
    CHECK_HAS(e, "config.yaml:5:31: hyperparameters.a.b is defined twice: by the key 'a.b' "
                 "(config.yaml:5:19) and by the key 'b' under 'a' (config.yaml:5:31); hint: ");
    /* either order, block style, and deeper in a group */
    e = cerr(BASE "hyperparameters:\n  a:\n    b: {type: int, minval: 1, maxval: 2}\n"
                  "  a.b: {type: const, val: 3}\n",
             0);
    CHECK_HAS(e, "config.yaml:8:3: hyperparameters.a.b is defined twice: by the key 'b' under "
                 "'a' (config.yaml:7:5) and by the key 'a.b' (config.yaml:8:3)");
    e = cerr(BASE "hyperparameters:\n  m:\n    x.y: 1\n    x: {y: 2}\n", 0);
    CHECK_HAS(e, "hyperparameters.m.x.y is defined twice: by the key 'x.y' under 'm' "
                 "(config.yaml:7:5) and by the key 'y' under 'm.x' (config.yaml:8:9)");
    e = cerr(BASE "hyperparameters: {a.b.c: 1, a: {b.c: 2}}\n", 0);
    CHECK_HAS(e, "hyperparameters.a.b.c is defined twice");
    /* a name given both to a hyperparameter and to a group of them */
    e = cerr(BASE "hyperparameters: {a.b: 1, a: {b: {c: 2}}}\n", 0);
    CHECK_HAS(e, "hyperparameters.a.b names both a hyperparameter, by the key 'a.b' "
                 "(config.yaml:5:19), and a group of them, by the key 'b' under 'a' "
                 "(config.yaml:5:31)");
    e = cerr(BASE "hyperparameters: {a: 1, a.b: 2}\n", 0);
    CHECK_HAS(e, "hyperparameters.a names both a hyperparameter, by the key 'a' "
                 "(config.yaml:5:19), and a group of them, by the key 'a.b' (config.yaml:5:25)");
    /* from JSON: no positions, the keys still named */
    json_t *j = json_pack("{s:s, s:{s:s, s:{s:i}}, s:{s:i, s:{s:i}}}", "entrypoint", "m:T",
                          "searcher", "metric", "loss", "max_length", "batches", 10,
                          "hyperparameters", "a.b", 1, "a", "b", 2);
    dt_expconf *c = NULL;
    CHECK(dt_expconf_from_json(j, 0, &c) == DT_ERR_CONFIG && c == NULL);
    CHECK_HAS(dt_last_error(), "hyperparameters.a.b is defined twice: by the key 'a.b' and by "
                               "the key 'b' under 'a'; hint: ");
    json_decref(j);

    /* distinct names load, however they are written: a group filled from several keys */
    c = cload(BASE "hyperparameters:\n  opt.lr: 0.1\n  opt: {wd: 0.01, sched: {warm.up: 5}}\n"
                   "  opt.sched.kind: cos\n  a.b.c: {type: const, val: 7}\n  x: 3\n",
              0);
    if (!c) return;
    static const char *const names[] = {"opt.lr",         "opt.wd", "opt.sched.warm.up",
                                        "opt.sched.kind", "a.b.c",  "x"};
    CHECK(c->n_hparams == 6);
    json_t *values = NULL, *cfg = json_object();
    CHECK(dt_expconf_hparam_values(c, &values) == DT_OK && values);
    json_object_set_new(cfg, "hyperparameters", values);
    dt_trial_ctx *t = dt_trial_ctx_new(cfg, 1);
    /* the trial reads each by the name the config gives it, to the same value */
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const dt_hparam *h = dt_expconf_hparam(c, names[i]);
        const json_t *got = t ? dt_hparam_json(t, names[i]) : NULL;
        CHECK_MSG(h && got && json_equal(h->val, (json_t *)got), "%s", names[i]);
    }
    if (t) {
        CHECK(dt_hparam_double(t, "opt.lr", 0) == 0.1);
        CHECK(dt_hparam_int(t, "opt.sched.warm.up", 0) == 5);
        CHECK(json_is_object(dt_hparam_json(t, "opt.sched")));
        CHECK(dt_hparam_int(t, "opt.nope", -1) == -1 && dt_hparam_int(t, "x.y", -1) == -1);
    }
    dt_trial_ctx_free(t);
    json_decref(cfg);
    dt_expconf_free(c);
}

static void test_lengths(void) {
    struct {
        const char *s;
        dt_unit u;
        int64_t n;
    } ok[] = {{"100b", DT_UNIT_BATCHES, 100},     {"5e", DT_UNIT_EPOCHS, 5},
              {"20000r", DT_UNIT_RECORDS, 20000}, {"100", DT_UNIT_BATCHES, 100},
              {"7 epochs", DT_UNIT_EPOCHS, 7},    {"3Batches", DT_UNIT_BATCHES, 3},
              {" 1 batch ", DT_UNIT_BATCHES, 1},  {"64R", DT_UNIT_RECORDS, 64},
              {"2epoch", DT_UNIT_EPOCHS, 2},      {"9record", DT_UNIT_RECORDS, 9}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        dt_length l = {DT_UNIT_BATCHES, 0};
        CHECK_MSG(dt_length_parse(ok[i].s, &l) == DT_OK && l.unit == ok[i].u && l.n == ok[i].n,
                  "%s", ok[i].s);
    }
    static const char *const bad[] = {"",     "b",   "0",   "0e",    "-5b",
                                      "1.5e", "10x", "1e3", "5 e s", "99999999999999999999b",
                                      "ten",  NULL};
    for (int i = 0; bad[i]; i++) {
        dt_length l;
        CHECK_MSG(dt_length_parse(bad[i], &l) == DT_ERR_CONFIG, "%s", bad[i]);
    }
    CHECK(dt_length_parse(NULL, &(dt_length){0}) == DT_ERR_CONFIG);
    dt_length l;
    dt_length_parse("10x", &l);
    CHECK_HAS(dt_last_error(), "bad length \"10x\"; hint: write 100b");
    char buf[64];
    CHECK(!strcmp(dt_length_format((dt_length){DT_UNIT_BATCHES, 100}, buf, sizeof buf),
                  "100 batches"));
    CHECK(!strcmp(dt_length_format((dt_length){DT_UNIT_BATCHES, 1}, buf, sizeof buf), "1 batch"));
    CHECK(!strcmp(dt_length_format((dt_length){DT_UNIT_EPOCHS, 1}, buf, sizeof buf), "1 epoch"));
    CHECK(!strcmp(dt_length_format((dt_length){DT_UNIT_RECORDS, 5}, buf, sizeof buf), "5 records"));
    CHECK(!strcmp(dt_length_format((dt_length){DT_UNIT_RECORDS, 0}, buf, sizeof buf), "(unset)"));
    CHECK(!strcmp(dt_unit_name(DT_UNIT_EPOCHS), "epochs"));

    /* conversions (Determined truncates) */
    int64_t b = -1;
    CHECK(dt_length_to_batches((dt_length){DT_UNIT_BATCHES, 100}, 0, 0, "x", &b) == DT_OK &&
          b == 100);
    CHECK(dt_length_to_batches((dt_length){DT_UNIT_RECORDS, 1000}, 64, 0, "x", &b) == DT_OK &&
          b == 15);
    CHECK(dt_length_to_batches((dt_length){DT_UNIT_EPOCHS, 2}, 32, 1000, "x", &b) == DT_OK &&
          b == 62);
    CHECK(dt_length_to_batches((dt_length){DT_UNIT_EPOCHS, 0}, 0, 0, "x", &b) == DT_OK && b == 0);
    CHECK(dt_length_to_batches((dt_length){DT_UNIT_RECORDS, 100}, 0, 0, "min_checkpoint_period",
                               &b) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "min_checkpoint_period is 100 records, which needs the global "
                               "batch size");
    CHECK(dt_length_to_batches((dt_length){DT_UNIT_EPOCHS, 3}, 32, 0, "searcher.max_length", &b) ==
          DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "searcher.max_length is 3 epochs, which needs records_per_epoch");
    CHECK(dt_length_to_batches((dt_length){DT_UNIT_RECORDS, 10}, 32, 0, "x", &b) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "less than one batch of 32");
    CHECK(dt_length_to_batches((dt_length){DT_UNIT_EPOCHS, INT64_MAX / 2}, 32, 1000, "x", &b) ==
          DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "overflows");
}

static void test_environment(void) {
    dt_expconf *c = cload(BASE "environment:\n"
                               "  environment_variables:\n"
                               "    cpu: [A=1, B=2, A=3]\n"
                               "    cuda: [C=3]\n"
                               "    rocm: [D=4]\n",
                          0);
    if (c) {
        CHECK(c->n_env == 2); /* only the cpu list; a later A replaces the first */
        if (c->n_env == 2) {
            CHECK(!strcmp(c->env_keys[0], "A") && !strcmp(c->env_values[0], "3"));
            CHECK(!strcmp(c->env_keys[1], "B") && !strcmp(c->env_values[1], "2"));
        }
        CHECK(c->n_warnings == 2 &&
              HAS(c->warnings[0], "environment.environment_variables.cuda has no effect") &&
              HAS(c->warnings[1], "config.yaml:9: environment.environment_variables.rocm"));
    }
    dt_expconf_free(c);
    const char *e =
        cerr(BASE "environment:\n  environment_variables:\n    - A=1\n    - NOEQUALS\n", 0);
    CHECK_HAS(e, "config.yaml:8:7: environment.environment_variables[1] must be a \"NAME=value\" "
                 "string, got \"NOEQUALS\"");
    e = cerr(BASE "environment:\n  environment_variables:\n    - FOO: bar\n", 0);
    CHECK_HAS(e, "got a mapping (write `- NAME=value`, not `- NAME: value`)");
    e = cerr(BASE "environment:\n  environment_variables:\n    - 1BAD=x\n", 0);
    CHECK_HAS(e, "\"1BAD\" is not a valid environment variable name");
    e = cerr(BASE "environment:\n  environment_variables:\n    - =x\n", 0);
    CHECK_HAS(e, "environment.environment_variables[0]");
    e = cerr(BASE "environment: {environment_variables: {cpu: [X=1], cuda: [BAD]}}\n", 0);
    CHECK_HAS(e, "environment.environment_variables.cuda[0] must be a \"NAME=value\" string");
    e = cerr(BASE "environment: {environment_variables: FOO=1}\n", 0);
    CHECK_HAS(e, "environment.environment_variables must be a list of \"NAME=value\" strings");
    c = cload(BASE "environment: {environment_variables: {cpus: [X=1]}}\n", 0);
    if (c) {
        CHECK(c->n_env == 0 && c->n_warnings == 1);
        if (c->n_warnings) CHECK_HAS(c->warnings[0], "did you mean 'cpu'?");
    }
    dt_expconf_free(c);
}

static void test_from_json_and_file(void) {
    /* from json: no positions, messages start with the key */
    json_t *j = json_pack("{s:s, s:{s:s, s:{s:i}}}", "entrypoint", "m:T", "searcher", "metric",
                          "loss", "max_length", "batches", 10);
    dt_expconf *c = NULL;
    CHECK(dt_expconf_from_json(j, 0, &c) == DT_OK && c);
    if (c) {
        CHECK(c->doc == NULL && c->json != j && c->searcher.max_length.n == 10);
        CHECK(json_object_get(j, "data") == NULL); /* the caller's json is untouched */
    }
    dt_expconf_free(c);
    json_object_set_new(json_object_get(j, "searcher"), "max_length",
                        json_pack("{s:s}", "batches", "ten"));
    CHECK(dt_expconf_from_json(j, 0, &c) == DT_ERR_CONFIG && c == NULL);
    CHECK_MSG(
        !strncmp(dt_last_error(), "searcher.max_length.batches must be a positive integer", 54),
        "%s", dt_last_error());
    json_decref(j);
    CHECK(dt_expconf_from_json(NULL, 0, &c) == DT_ERR_CONFIG && c == NULL);

    /* from a file: the path is in the messages */
    char path[64];
    snprintf(path, sizeof path, "/tmp/dtrain_test_expconf_%d.yaml", (int)getpid());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("entrypoint: model_def:T\nsearcher:\n  metric: loss\n  max_length: {batches: 0}\n", f);
    fclose(f);
    CHECK(dt_expconf_load_file(path, 0, &c) == DT_ERR_CONFIG && c == NULL);
    char want[128];
    snprintf(want, sizeof want, "%s:4:25: searcher.max_length.batches", path);
    CHECK_HAS(dt_last_error(), want);
    f = fopen(path, "w");
    fputs("entrypoint: model_def:T\nsearcher:\n  metric: loss\n  max_length: {batches: 5}\n", f);
    fclose(f);
    CHECK(dt_expconf_load_file(path, 0, &c) == DT_OK && c && c->searcher.max_length.n == 5);
    dt_expconf_free(c);
    unlink(path);
    CHECK(dt_expconf_load_file("/nonexistent/c.yaml", 0, &c) == DT_ERR_IO && c == NULL);
    /* malformed YAML comes through as the loader's error */
    CHECK(dt_expconf_load_string("a: [\n", "config.yaml", 0, &c) == DT_ERR_CONFIG);
    CHECK_HAS(dt_last_error(), "config.yaml:");
}

int main(void) {
    dt_log_set_level(DT_LOG_ERROR); /* warnings are checked through cfg->warnings */
    TEST_RUN(test_yaml_scalars);
    TEST_RUN(test_yaml_positions);
    TEST_RUN(test_yaml_errors);
    TEST_RUN(test_yaml_anchors);
    TEST_RUN(test_minimal_and_defaults);
    TEST_RUN(test_full_config);
    TEST_RUN(test_type_errors);
    TEST_RUN(test_required);
    TEST_RUN(test_enums);
    TEST_RUN(test_storage_path);
    TEST_RUN(test_unknown_keys);
    TEST_RUN(test_profiling);
    TEST_RUN(test_launcher_slurm);
    TEST_RUN(test_entrypoint);
    TEST_RUN(test_hyperparameters);
    TEST_RUN(test_hparam_names);
    TEST_RUN(test_lengths);
    TEST_RUN(test_environment);
    TEST_RUN(test_from_json_and_file);
    TEST_END();
}
