/*
 * test_ds_config.c — the DeepSpeed config layer (src/engine/ds_config.c).
 *
 * The goldens in tests/golden/ds_config/ (batch, sections, optimizer, scheduler .json) were written
 * by tools/golden_ds_config.py from DeepSpeed's own config code: every row is a config (and a
 * data-parallel world size) with what DeepSpeed resolved, or "error" where DeepSpeed refused it.
 * This test parses every row and checks the same resolved numbers, or a DT_ERR_CONFIG where
 * DeepSpeed errs. Rows marked "dtrain": {"differs": ...} are the documented deliberate differences:
 * "error" = dtrain refuses what DeepSpeed's config code accepts, "accept" = dtrain accepts (with a
 * warning) what DeepSpeed refuses.
 *
 * Then unit tests: the defaults, every error message (key path, what is wrong, hint), the
 * merge semantics of dt_overwrite_config, loading files and text (malformed JSON positions,
 * unreadable files, non-object roots), the one unknown-key warning (stderr captured) and
 * integral reals for integer keys. No Python or DeepSpeed is needed: the goldens are files.
 */
#include "dtrain/engine.h"
#include "fixtures/files.h"
#include "test.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>

static const char *g_src;

/* ---- helpers ------------------------------------------------------------------------------ */

static json_t *load_golden(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/golden/ds_config/%s.json", g_src, name);
    json_error_t err;
    json_t *doc = json_load_file(path, 0, &err);
    CHECK_MSG(doc != NULL, "cannot load %s: %s; hint: run tools/golden_ds_config.py", path,
              err.text);
    return doc;
}

static json_t *J(const char *text) {
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    if (!j) fprintf(stderr, "bad test JSON: %s: %s\n", text, err.text);
    return j;
}

/* Parse JSON text on `ws` ranks. */
static dt_status parse_text(const char *text, int ws, dt_ds_config *out) {
    json_t *j = J(text);
    if (!j) return DT_ERR_INVALID;
    dt_status st = dt_ds_config_parse(j, ws, out);
    json_decref(j);
    return st;
}

/* Expect a DT_ERR_CONFIG whose message holds every one of the NULL-terminated strings. */
static void expect_error_v(const char *text, int ws, dt_status want, const char *const *subs) {
    dt_ds_config c;
    dt_status st = parse_text(text, ws, &c);
    CHECK_MSG(st == want, "%s: status %d, want %d (%s)", text, (int)st, (int)want, dt_last_error());
    for (; *subs; subs++)
        CHECK_MSG(strstr(dt_last_error(), *subs) != NULL, "%s: message lacks \"%s\": %s", text,
                  *subs, dt_last_error());
}
#define EXPECT_ERROR(text, ...)                                                                    \
    do {                                                                                           \
        const char *subs_[] = {__VA_ARGS__, NULL};                                                 \
        expect_error_v(text, 1, DT_ERR_CONFIG, subs_);                                             \
    } while (0)
#define EXPECT_ERROR_W(text, ws, ...)                                                              \
    do {                                                                                           \
        const char *subs_[] = {__VA_ARGS__, NULL};                                                 \
        expect_error_v(text, ws, DT_ERR_CONFIG, subs_);                                            \
    } while (0)

static bool near_eq(double a, double b) {
    return a == b || fabs(a - b) <= 1e-6 * fmax(fabs(a), fabs(b));
}

/* Compare one expected JSON value (number, bool, null) with an actual number. */
static void cmp_num(const char *row, const char *field, const json_t *want, double got,
                    double if_null) {
    double w = json_is_null(want)      ? if_null
               : json_is_boolean(want) ? (json_is_true(want) ? 1 : 0)
                                       : json_number_value(want);
    CHECK_MSG(want && (json_is_number(want) || json_is_boolean(want) || json_is_null(want)) &&
                  near_eq(w, got),
              "row %s: %s = %.9g, DeepSpeed %.9g", row, field, got, w);
}

static void cmp_str(const char *row, const char *field, const json_t *want, const char *got) {
    const char *w = json_is_null(want) ? "" : json_string_value(want);
    CHECK_MSG(w && !strcmp(w, got), "row %s: %s = \"%s\", DeepSpeed \"%s\"", row, field, got,
              w ? w : "(not a string)");
}

static const char *dev_name(dt_offload_device d) {
    return d == DT_OFFLOAD_CPU ? "cpu" : d == DT_OFFLOAD_NVME ? "nvme" : "none";
}

/* Run one golden row through the parser; returns true (and fills *c) when the row expects a
 * successful parse and dtrain parsed it. */
static bool run_row(const json_t *row, dt_ds_config *c, int *n_err, int *n_diff) {
    const char *name = json_string_value(json_object_get(row, "name"));
    const json_t *ws = json_object_get(row, "world_size");
    const json_t *diff = json_object_get(json_object_get(row, "dtrain"), "differs");
    bool ds_ok = json_object_get(row, "expect") != NULL;
    bool want_ok = ds_ok;
    if (diff) {
        (*n_diff)++;
        want_ok = !strcmp(json_string_value(diff), "accept");
        CHECK_MSG(want_ok != ds_ok, "row %s: a 'differs' row where DeepSpeed agrees", name);
    }
    if (!ds_ok) (*n_err)++;
    dt_status st =
        dt_ds_config_parse(json_object_get(row, "config"), ws ? (int)json_integer_value(ws) : 1, c);
    if (want_ok) {
        CHECK_MSG(st == DT_OK, "row %s: DeepSpeed accepts it, dtrain refuses: %s", name,
                  dt_last_error());
        return st == DT_OK && ds_ok;
    }
    CHECK_MSG(st == DT_ERR_CONFIG, "row %s: DeepSpeed refuses it (%s), dtrain gives status %d",
              name, json_string_value(json_object_get(row, "error")), (int)st);
    /* every refusal carries a hint */
    if (st == DT_ERR_CONFIG)
        CHECK_MSG(strstr(dt_last_error(), "hint:") != NULL, "row %s: no hint in: %s", name,
                  dt_last_error());
    return false;
}

/* ---- golden rows -------------------------------------------------------------------------- */

static void cmp_batch(const char *name, const json_t *e, const dt_ds_config *c) {
    cmp_num(name, "train_batch_size", json_object_get(e, "train_batch_size"),
            (double)c->train_batch_size, NAN);
    cmp_num(name, "train_micro_batch_size_per_gpu",
            json_object_get(e, "train_micro_batch_size_per_gpu"),
            (double)c->train_micro_batch_size_per_gpu, NAN);
    cmp_num(name, "gradient_accumulation_steps", json_object_get(e, "gradient_accumulation_steps"),
            (double)c->gradient_accumulation_steps, NAN);
}

static void test_golden_batch(void) {
    json_t *doc = load_golden("batch");
    if (!doc) return;
    size_t i;
    json_t *row;
    int n = 0, n_err = 0, n_diff = 0;
    json_array_foreach(json_object_get(doc, "rows"), i, row) {
        dt_ds_config c;
        n++;
        if (run_row(row, &c, &n_err, &n_diff)) {
            cmp_batch(json_string_value(json_object_get(row, "name")),
                      json_object_get(row, "expect"), &c);
            CHECK(c.dp_world_size == (int)json_integer_value(json_object_get(row, "world_size")));
        }
    }
    fprintf(stderr, "  batch.json: %d rows (%d refused by DeepSpeed, %d deliberate differences)\n",
            n, n_err, n_diff);
    CHECK(n >= 600);
    json_decref(doc);
}

static void cmp_sections(const char *n, const json_t *e, const dt_ds_config *c) {
#define G(obj, k) json_object_get(obj, k)
    cmp_batch(n, e, c);
    cmp_num(n, "gradient_clipping", G(e, "gradient_clipping"), c->gradient_clipping, NAN);
    cmp_num(n, "prescale_gradients", G(e, "prescale_gradients"), c->prescale_gradients, NAN);
    cmp_num(n, "gradient_predivide_factor", G(e, "gradient_predivide_factor"),
            c->gradient_predivide_factor, NAN);
    cmp_num(n, "steps_per_print", G(e, "steps_per_print"), (double)c->steps_per_print, 0);
    cmp_num(n, "wall_clock_breakdown", G(e, "wall_clock_breakdown"), c->wall_clock_breakdown, NAN);
    const json_t *f = G(e, "fp16");
    cmp_num(n, "fp16.enabled", G(f, "enabled"), c->fp16.enabled, NAN);
    cmp_num(n, "fp16.loss_scale", G(f, "loss_scale"), c->fp16.loss_scale, NAN);
    cmp_num(n, "fp16.initial_scale_power", G(f, "initial_scale_power"), c->fp16.initial_scale_power,
            NAN);
    cmp_num(n, "fp16.loss_scale_window", G(f, "loss_scale_window"),
            (double)c->fp16.loss_scale_window, NAN);
    cmp_num(n, "fp16.hysteresis", G(f, "hysteresis"), c->fp16.hysteresis, NAN);
    cmp_num(n, "fp16.consecutive_hysteresis", G(f, "consecutive_hysteresis"),
            c->fp16.consecutive_hysteresis, NAN);
    cmp_num(n, "fp16.min_loss_scale", G(f, "min_loss_scale"), c->fp16.min_loss_scale, NAN);
    cmp_num(n, "bf16", G(e, "bf16"), c->bf16, NAN);
    const json_t *z = G(e, "zero");
    cmp_num(n, "zero.stage", G(z, "stage"), c->zero.stage, NAN);
    cmp_num(n, "zero.overlap_comm", G(z, "overlap_comm"), c->zero.overlap_comm, NAN);
    cmp_num(n, "zero.contiguous_gradients", G(z, "contiguous_gradients"),
            c->zero.contiguous_gradients, NAN);
    cmp_num(n, "zero.reduce_scatter", G(z, "reduce_scatter"), c->zero.reduce_scatter, NAN);
    cmp_num(n, "zero.reduce_bucket_size", G(z, "reduce_bucket_size"),
            (double)c->zero.reduce_bucket_size, NAN);
    cmp_num(n, "zero.allgather_bucket_size", G(z, "allgather_bucket_size"),
            (double)c->zero.allgather_bucket_size, NAN);
    cmp_str(n, "zero.offload_optimizer", G(z, "offload_optimizer"),
            dev_name(c->zero.offload_optimizer));
    cmp_str(n, "zero.offload_optimizer_nvme_path", G(z, "offload_optimizer_nvme_path"),
            c->zero.offload_optimizer_nvme_path);
    cmp_str(n, "zero.offload_param", G(z, "offload_param"), dev_name(c->zero.offload_param));
    cmp_str(n, "zero.offload_param_nvme_path", G(z, "offload_param_nvme_path"),
            c->zero.offload_param_nvme_path);
    cmp_num(n, "zero.param_persistence_threshold", G(z, "param_persistence_threshold"),
            (double)c->zero.param_persistence_threshold, NAN);
    cmp_num(n, "zero.prefetch_bucket_size", G(z, "prefetch_bucket_size"),
            (double)c->zero.prefetch_bucket_size, NAN);
    cmp_num(n, "zero.max_live_parameters", G(z, "max_live_parameters"),
            (double)c->zero.max_live_parameters, NAN);
    const json_t *a = G(e, "activation_checkpointing");
    const dt_activation_ckpt_config *ac = &c->activation_checkpointing;
    cmp_num(n, "ac.partition_activations", G(a, "partition_activations"), ac->partition_activations,
            NAN);
    cmp_num(n, "ac.cpu_checkpointing", G(a, "cpu_checkpointing"), ac->cpu_checkpointing, NAN);
    cmp_num(n, "ac.contiguous_memory_optimization", G(a, "contiguous_memory_optimization"),
            ac->contiguous_memory_optimization, NAN);
    cmp_num(n, "ac.number_checkpoints", G(a, "number_checkpoints"), (double)ac->number_checkpoints,
            -1);
    cmp_num(n, "ac.synchronize_checkpoint_boundary", G(a, "synchronize_checkpoint_boundary"),
            ac->synchronize_checkpoint_boundary, NAN);
    cmp_num(n, "ac.profile", G(a, "profile"), ac->profile, NAN);
    const json_t *p = G(e, "flops_profiler");
    const dt_flops_profiler_config *fp = &c->flops_profiler;
    cmp_num(n, "fp.enabled", G(p, "enabled"), fp->enabled, NAN);
    cmp_num(n, "fp.profile_step", G(p, "profile_step"), (double)fp->profile_step, NAN);
    cmp_num(n, "fp.module_depth", G(p, "module_depth"), (double)fp->module_depth, NAN);
    cmp_num(n, "fp.top_modules", G(p, "top_modules"), (double)fp->top_modules, NAN);
    cmp_num(n, "fp.detailed", G(p, "detailed"), fp->detailed, NAN);
    cmp_str(n, "fp.output_file", G(p, "output_file"), fp->output_file);
#undef G
}

static void test_golden_sections(void) {
    json_t *doc = load_golden("sections");
    if (!doc) return;
    size_t i;
    json_t *row;
    int n = 0, n_err = 0, n_diff = 0;
    json_array_foreach(json_object_get(doc, "rows"), i, row) {
        dt_ds_config c;
        n++;
        if (run_row(row, &c, &n_err, &n_diff))
            cmp_sections(json_string_value(json_object_get(row, "name")),
                         json_object_get(row, "expect"), &c);
    }
    fprintf(stderr,
            "  sections.json: %d rows (%d refused by DeepSpeed, %d deliberate differences)\n", n,
            n_err, n_diff);
    CHECK(n >= 100);
    json_decref(doc);
}

static void test_golden_optimizer(void) {
    json_t *doc = load_golden("optimizer");
    if (!doc) return;
    size_t i;
    json_t *row;
    int n = 0, n_err = 0, n_diff = 0;
    json_array_foreach(json_object_get(doc, "rows"), i, row) {
        dt_ds_config c;
        n++;
        if (!run_row(row, &c, &n_err, &n_diff)) continue;
        const char *rn = json_string_value(json_object_get(row, "name"));
        const json_t *e = json_object_get(row, "expect");
        const char *ds = json_string_value(json_object_get(e, "name"));
        dt_optim_type want = !strcmp(ds, "adam")    ? DT_OPTIM_ADAM
                             : !strcmp(ds, "adamw") ? DT_OPTIM_ADAMW
                             : !strcmp(ds, "lamb")  ? DT_OPTIM_LAMB
                                                    : DT_OPTIM_SGD;
        CHECK_MSG(c.has_optimizer && c.optimizer.type == want, "row %s: type %d, want %d", rn,
                  (int)c.optimizer.type, (int)want);
        const dt_optim_config *o = &c.optimizer;
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)e, key, v) {
            if (!strcmp(key, "name") || !strcmp(key, "class")) continue;
            if (!strcmp(key, "betas")) {
                cmp_num(rn, "beta1", json_array_get(v, 0), o->beta1, NAN);
                cmp_num(rn, "beta2", json_array_get(v, 1), o->beta2, NAN);
                continue;
            }
            double got = !strcmp(key, "lr")                ? o->lr
                         : !strcmp(key, "eps")             ? o->eps
                         : !strcmp(key, "weight_decay")    ? o->weight_decay
                         : !strcmp(key, "adam_w_mode")     ? o->adam_w_mode
                         : !strcmp(key, "bias_correction") ? o->bias_correction
                         : !strcmp(key, "momentum")        ? o->momentum
                         : !strcmp(key, "dampening")       ? o->dampening
                         : !strcmp(key, "nesterov")        ? o->nesterov
                         : !strcmp(key, "max_coeff")       ? o->max_coeff
                         : !strcmp(key, "min_coeff")       ? o->min_coeff
                                                           : NAN;
            CHECK_MSG(!isnan(got), "row %s: no dtrain field for DeepSpeed's '%s'", rn, key);
            cmp_num(rn, key, v, got, NAN);
        }
    }
    fprintf(stderr,
            "  optimizer.json: %d rows (%d refused by DeepSpeed, %d deliberate differences)\n", n,
            n_err, n_diff);
    CHECK(n >= 20);
    json_decref(doc);
}

static void test_golden_scheduler(void) {
    json_t *doc = load_golden("scheduler");
    if (!doc) return;
    size_t i;
    json_t *row;
    int n = 0, n_err = 0, n_diff = 0;
    json_array_foreach(json_object_get(doc, "rows"), i, row) {
        dt_ds_config c;
        n++;
        if (!run_row(row, &c, &n_err, &n_diff)) continue;
        const char *rn = json_string_value(json_object_get(row, "name"));
        const json_t *e = json_object_get(row, "expect");
        CHECK_MSG(c.has_scheduler &&
                      (int)c.scheduler.type ==
                          dt_sched_type_from_name(json_string_value(json_object_get(e, "type"))),
                  "row %s: scheduler type %d", rn, (int)c.scheduler.type);
        const dt_sched_config *s = &c.scheduler;
        CHECK_MSG(near_eq(s->base_lr, c.optimizer.lr), "row %s: base_lr", rn);
        const char *key;
        json_t *v;
        json_object_foreach(json_object_get(e, "params"), key, v) {
            if (!strcmp(key, "warmup_type")) {
                CHECK_MSG(s->warmup_linear == !strcmp(json_string_value(v), "linear"),
                          "row %s: warmup_type", rn);
                continue;
            }
            double if_null = NAN;
            if (!strcmp(key, "warmup_max_lr")) if_null = c.optimizer.lr; /* WarmupLR: the lr */
            if (!strcmp(key, "cycle_second_step_size")) if_null = 0;     /* = the first */
            if (!strcmp(key, "cycle_second_stair_count")) if_null = -1;  /* = the first */
#define F(name, field) !strcmp(key, name) ? (double)s->field:
            double got = F("warmup_min_lr", warmup_min_lr) F("warmup_max_lr", warmup_max_lr) F(
                "warmup_num_steps", warmup_num_steps) F("total_num_steps", total_num_steps)
                F("warmup_min_ratio", warmup_min_ratio) F("cos_min_ratio", cos_min_ratio) F(
                    "cycle_min_lr", cycle_min_lr) F("cycle_max_lr", cycle_max_lr) F("decay_lr_rate",
                                                                                    decay_lr_rate)
                    F("cycle_first_step_size", cycle_first_step_size) F("cycle_second_step_size",
                                                                        cycle_second_step_size)
                        F("cycle_first_stair_count", cycle_first_stair_count) F(
                            "cycle_second_stair_count",
                            cycle_second_stair_count) F("decay_step_size", decay_step_size)
                            F("cycle_momentum", cycle_momentum) F("cycle_min_mom", cycle_min_mom) F(
                                "cycle_max_mom", cycle_max_mom) F("decay_mom_rate", decay_mom_rate)
                                F("lr_range_test_min_lr", lr_range_test_min_lr)
                                    F("lr_range_test_step_size", lr_range_test_step_size)
                                        F("lr_range_test_step_rate", lr_range_test_step_rate)
                                            F("lr_range_test_staircase", lr_range_test_staircase)
                                                F("step_size", step_size) F("gamma", gamma)
                                                    F("T_max", t_max) F("eta_min", eta_min) NAN;
#undef F
            CHECK_MSG(!isnan(got), "row %s: no dtrain field for DeepSpeed's '%s'", rn, key);
            cmp_num(rn, key, v, got, if_null);
        }
    }
    fprintf(stderr,
            "  scheduler.json: %d rows (%d refused by DeepSpeed, %d deliberate differences)\n", n,
            n_err, n_diff);
    CHECK(n >= 20);
    json_decref(doc);
}

/* ---- defaults ----------------------------------------------------------------------------- */

static void test_defaults(void) {
    dt_ds_config c;
    memset(&c, 0xAB, sizeof c); /* every field must be written */
    CHECK(parse_text("{\"train_batch_size\": 8}", 2, &c) == DT_OK);
    CHECK(c.train_batch_size == 8 && c.train_micro_batch_size_per_gpu == 4 &&
          c.gradient_accumulation_steps == 1 && c.dp_world_size == 2);
    CHECK(!c.has_optimizer && !c.has_scheduler);
    CHECK(c.gradient_clipping == 1.0); /* DeepSpeed's GRADIENT_CLIPPING_DEFAULT */
    CHECK(!c.prescale_gradients && c.gradient_predivide_factor == 1.0);
    CHECK(c.steps_per_print == 0 && !c.wall_clock_breakdown && c.memory_budget_bytes == 0);
    CHECK(!c.deterministic);
    dt_loss_scaler_config ls = dt_loss_scaler_defaults();
    CHECK(!c.fp16.enabled && c.fp16.loss_scale == 0 && c.fp16.initial_scale_power == 16);
    CHECK(c.fp16.loss_scale_window == 1000 && c.fp16.hysteresis == 2);
    CHECK(!c.fp16.consecutive_hysteresis && c.fp16.min_loss_scale == 1);
    CHECK(c.fp16.raise_error_at_min_scale == ls.raise_error_at_min_scale);
    CHECK(!c.bf16);
    CHECK(c.zero.stage == 0 && !c.zero.overlap_comm && c.zero.contiguous_gradients &&
          c.zero.reduce_scatter);
    CHECK(c.zero.reduce_bucket_size == 500000000 && c.zero.allgather_bucket_size == 500000000);
    CHECK(c.zero.offload_optimizer == DT_OFFLOAD_NONE && c.zero.offload_param == DT_OFFLOAD_NONE);
    CHECK(c.zero.offload_optimizer_nvme_path[0] == 0 && c.zero.offload_param_nvme_path[0] == 0);
    CHECK(c.zero.param_persistence_threshold == 100000 && c.zero.prefetch_bucket_size == 50000000 &&
          c.zero.max_live_parameters == 1000000000);
    CHECK(!c.activation_checkpointing.partition_activations &&
          !c.activation_checkpointing.cpu_checkpointing &&
          !c.activation_checkpointing.contiguous_memory_optimization &&
          c.activation_checkpointing.number_checkpoints == -1 &&
          !c.activation_checkpointing.synchronize_checkpoint_boundary &&
          !c.activation_checkpointing.profile);
    CHECK(!c.flops_profiler.enabled && c.flops_profiler.profile_step == 1 &&
          c.flops_profiler.module_depth == -1 && c.flops_profiler.top_modules == 1 &&
          c.flops_profiler.detailed && c.flops_profiler.output_file[0] == 0);

    /* fp16 enabled: exactly dtrain's loss scaler defaults */
    CHECK(parse_text("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}}", 1, &c) == DT_OK);
    CHECK(c.fp16.enabled == ls.enabled && c.fp16.loss_scale == ls.loss_scale &&
          c.fp16.initial_scale_power == ls.initial_scale_power &&
          c.fp16.loss_scale_window == ls.loss_scale_window && c.fp16.hysteresis == ls.hysteresis &&
          c.fp16.consecutive_hysteresis == ls.consecutive_hysteresis &&
          c.fp16.min_loss_scale == ls.min_loss_scale &&
          c.fp16.raise_error_at_min_scale == ls.raise_error_at_min_scale);
    /* stage 3 turns overlap_comm on */
    CHECK(parse_text("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3}}", 1, &c) ==
          DT_OK);
    CHECK(c.zero.stage == 3 && c.zero.overlap_comm);

    /* optimizer defaults: dt_optim_defaults with DeepSpeed's differences */
    CHECK(parse_text("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"Adam\"}}", 1, &c) ==
          DT_OK);
    dt_optim_config od = dt_optim_defaults(DT_OPTIM_ADAM);
    CHECK(c.has_optimizer && c.optimizer.type == DT_OPTIM_ADAM && c.optimizer.adam_w_mode);
    CHECK(c.optimizer.lr == od.lr && c.optimizer.beta1 == od.beta1 &&
          c.optimizer.beta2 == od.beta2 && c.optimizer.eps == od.eps &&
          c.optimizer.weight_decay == 0 && c.optimizer.bias_correction);
    CHECK(parse_text("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"AdamW\"}}", 1, &c) ==
          DT_OK);
    CHECK(c.optimizer.type == DT_OPTIM_ADAMW && c.optimizer.weight_decay == 0); /* fused Adam */
    CHECK(parse_text("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"AdamW\", \"params\": "
                     "{\"torch_adam\": true}}}",
                     1, &c) == DT_OK);
    CHECK(near_eq(c.optimizer.weight_decay, 0.01)); /* torch.optim.AdamW */
    CHECK(parse_text("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"lamb\"}}", 1, &c) ==
          DT_OK);
    CHECK(c.optimizer.type == DT_OPTIM_LAMB && near_eq(c.optimizer.max_coeff, 10) &&
          near_eq(c.optimizer.min_coeff, 0.01));
    /* scheduler: WarmupLR warms up to the optimizer's lr; WarmupDecayLR to 0.001 */
    CHECK(parse_text("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"Adam\", \"params\": "
                     "{\"lr\": 0.01}}, \"scheduler\": {\"type\": \"WarmupLR\"}}",
                     1, &c) == DT_OK);
    CHECK(c.has_scheduler && c.scheduler.type == DT_SCHED_WARMUP_LR);
    CHECK(near_eq(c.scheduler.warmup_max_lr, 0.01) && near_eq(c.scheduler.base_lr, 0.01));
    CHECK(c.scheduler.warmup_num_steps == 1000 && !c.scheduler.warmup_linear);
    CHECK(parse_text("{\"train_batch_size\": 8, \"optimizer\": {\"type\": \"Adam\", \"params\": "
                     "{\"lr\": 0.01}}, \"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": "
                     "{\"total_num_steps\": 100}}}",
                     1, &c) == DT_OK);
    CHECK(near_eq(c.scheduler.warmup_max_lr, 0.001) && c.scheduler.total_num_steps == 100);
}

/* ---- values ------------------------------------------------------------------------------- */

static void test_values(void) {
    dt_ds_config c;
    /* integral reals for integer keys */
    CHECK(parse_text("{\"train_batch_size\": 6.4e1, \"train_micro_batch_size_per_gpu\": 8.0, "
                     "\"zero_optimization\": {\"stage\": 2.0, \"reduce_bucket_size\": 5e7}, "
                     "\"steps_per_print\": 1e2}",
                     4, &c) == DT_OK);
    CHECK(c.train_batch_size == 64 && c.train_micro_batch_size_per_gpu == 8 &&
          c.gradient_accumulation_steps == 2 && c.zero.stage == 2 &&
          c.zero.reduce_bucket_size == 50000000 && c.steps_per_print == 100);
    /* memory_budget: bytes or a size string */
    CHECK(parse_text("{\"train_batch_size\": 8, \"memory_budget\": \"2GiB\"}", 1, &c) == DT_OK);
    CHECK(c.memory_budget_bytes == 2LL << 30);
    CHECK(parse_text("{\"train_batch_size\": 8, \"memory_budget\": \"512M\"}", 1, &c) == DT_OK);
    CHECK(c.memory_budget_bytes == 512LL << 20);
    CHECK(parse_text("{\"train_batch_size\": 8, \"memory_budget\": 1e9}", 1, &c) == DT_OK);
    CHECK(c.memory_budget_bytes == 1000000000);
    CHECK(parse_text("{\"train_batch_size\": 8, \"memory_budget\": 1048576}", 1, &c) == DT_OK);
    CHECK(c.memory_budget_bytes == 1048576);
    CHECK(parse_text("{\"train_batch_size\": 8, \"memory_budget\": null}", 1, &c) == DT_OK);
    CHECK(c.memory_budget_bytes == 0);
    /* "auto" in pydantic sections is the default; null anywhere is the default */
    CHECK(parse_text("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, "
                     "\"stage3_max_live_parameters\": \"auto\", \"overlap_comm\": null}}",
                     1, &c) == DT_OK);
    CHECK(c.zero.max_live_parameters == 1000000000 && c.zero.overlap_comm);
    /* the field names pydantic accepts next to the stage3_ aliases */
    CHECK(parse_text("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, "
                     "\"prefetch_bucket_size\": 123}}",
                     1, &c) == DT_OK);
    CHECK(c.zero.prefetch_bucket_size == 123);
    /* booleans as 0 / 1, as pydantic reads them */
    CHECK(parse_text("{\"train_batch_size\": 8, \"bf16\": {\"enabled\": 1}, "
                     "\"prescale_gradients\": 0}",
                     1, &c) == DT_OK);
    CHECK(c.bf16 && !c.prescale_gradients);
    /* offload settings */
    CHECK(parse_text("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3, "
                     "\"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"/tmp/a\"}, "
                     "\"offload_param\": {\"device\": \"cpu\", \"pin_memory\": false}}}",
                     1, &c) == DT_OK);
    CHECK(c.zero.offload_optimizer == DT_OFFLOAD_NVME &&
          !strcmp(c.zero.offload_optimizer_nvme_path, "/tmp/a") &&
          c.zero.offload_param == DT_OFFLOAD_CPU);
    /* the parse leaves its input alone */
    json_t *j = J("{\"train_batch_size\": 8, \"fp16\": {\"enabled\": true}, "
                  "\"zero_optimization\": {\"stage\": 1}}");
    char *before = json_dumps(j, JSON_SORT_KEYS);
    CHECK(dt_ds_config_parse(j, 1, &c) == DT_OK);
    char *after = json_dumps(j, JSON_SORT_KEYS);
    CHECK(!strcmp(before, after));
    free(before);
    free(after);
    json_decref(j);
    /* a warmup_type DeepSpeed does not know falls back to log (with a warning) */
    CHECK(parse_text("{\"train_batch_size\": 8, \"scheduler\": {\"type\": \"WarmupLR\", "
                     "\"params\": {\"warmup_type\": \"linear\"}}}",
                     1, &c) == DT_OK);
    CHECK(c.scheduler.warmup_linear);
}

/* ---- errors ------------------------------------------------------------------------------- */

#define B "{\"train_batch_size\": 8, "

static void test_errors(void) {
    /* batch arithmetic: all four numbers and what to change */
    EXPECT_ERROR_W("{\"train_batch_size\": 10, \"train_micro_batch_size_per_gpu\": 4, "
                   "\"gradient_accumulation_steps\": 1}",
                   2, "train_batch_size 10", "train_micro_batch_size_per_gpu 4",
                   "gradient_accumulation_steps 1", "world size 2", "must be 8");
    EXPECT_ERROR_W("{\"train_batch_size\": 10, \"train_micro_batch_size_per_gpu\": 4}", 1,
                   "train_batch_size 10", "gradient_accumulation_steps 2 (inferred)",
                   "multiple of train_micro_batch_size_per_gpu * world size = 4", "8 or 12");
    EXPECT_ERROR_W("{\"train_batch_size\": 12, \"gradient_accumulation_steps\": 5}", 2,
                   "train_micro_batch_size_per_gpu 1 (inferred)",
                   "multiple of gradient_accumulation_steps * world size = 10");
    EXPECT_ERROR_W("{\"train_batch_size\": 9}", 2, "multiple of the world size 2", "8 or 10");
    EXPECT_ERROR_W("{\"train_batch_size\": 4}", 8, "train_micro_batch_size_per_gpu 0 (inferred)",
                   "world size 8");
    EXPECT_ERROR("{\"gradient_accumulation_steps\": 4}",
                 "neither train_batch_size nor train_micro_batch_size_per_gpu is set", "hint:");
    EXPECT_ERROR("{\"train_batch_sise\": 4}", "is 'train_batch_sise' a misspelling");
    EXPECT_ERROR("{\"train_batch_size\": 12.5}", "train_batch_size must be an integer, got 12.5");
    EXPECT_ERROR("{\"train_batch_size\": \"32\"}", "train_batch_size must be an integer",
                 "the string \"32\"");
    EXPECT_ERROR("{\"train_batch_size\": \"auto\"}", "Hugging Face");
    EXPECT_ERROR("{\"train_micro_batch_size_per_gpu\": 0}",
                 "train_micro_batch_size_per_gpu must be >= 1, got 0");
    EXPECT_ERROR("{\"train_batch_size\": -8}", "train_batch_size must be >= 1, got -8");
    EXPECT_ERROR("{\"train_batch_size\": true}", "train_batch_size must be an integer, got true");
    /* wrong types and ranges, by key path */
    EXPECT_ERROR(B "\"fp16\": 1}", "fp16 must be an object, got 1");
    EXPECT_ERROR(B "\"fp16\": {\"enabled\": \"yes\"}}",
                 "fp16.enabled must be a boolean, got the string \"yes\"");
    EXPECT_ERROR(B "\"fp16\": {\"enabled\": true, \"loss_scale\": -1}}",
                 "fp16.loss_scale must be >= 0, got -1");
    EXPECT_ERROR(B "\"fp16\": {\"enabled\": true, \"min_loss_scale\": 0.5}}",
                 "fp16.min_loss_scale must be an integer, got 0.5");
    EXPECT_ERROR(B "\"fp16\": {\"enabled\": true, \"hysteresis\": 0}}", "fp16.hysteresis");
    EXPECT_ERROR(B "\"fp16\": {\"enabled\": true, \"loss_scale_window\": 0}}",
                 "fp16.loss_scale_window must be > 0");
    EXPECT_ERROR(B "\"zero_optimization\": {\"stage\": 4}}",
                 "zero_optimization.stage must be 0, 1, 2 or 3, got 4");
    EXPECT_ERROR(B "\"zero_optimization\": {\"stage\": 1.5}}", "zero_optimization.stage",
                 "got 1.5");
    EXPECT_ERROR(B "\"zero_optimization\": {\"reduce_bucket_size\": 0}}",
                 "zero_optimization.reduce_bucket_size must be >= 1, got 0");
    EXPECT_ERROR(B "\"zero_optimization\": {\"stage\": 3, \"stage3_max_live_parameters\": -5}}",
                 "zero_optimization.stage3_max_live_parameters must be >= 0, got -5");
    EXPECT_ERROR(B "\"gradient_clipping\": \"1.0\"}", "gradient_clipping must be a number");
    EXPECT_ERROR(B "\"gradient_predivide_factor\": 0}",
                 "gradient_predivide_factor must be > 0, got 0");
    EXPECT_ERROR(B "\"steps_per_print\": 0}", "steps_per_print must be >= 1, got 0");
    EXPECT_ERROR(B "\"memory_budget\": \"lots\"}", "memory_budget must be a byte count", "2GiB");
    EXPECT_ERROR(B "\"memory_budget\": -1}", "memory_budget must be >= 0, got -1");
    /* combinations */
    EXPECT_ERROR(B "\"fp16\": {\"enabled\": true}, \"bf16\": {\"enabled\": true}}",
                 "fp16.enabled and bf16.enabled are both true");
    EXPECT_ERROR(B "\"fp16\": {\"enabled\": true}, \"bfloat16\": {\"enabled\": true}}",
                 "fp16.enabled and bf16.enabled are both true");
    EXPECT_ERROR(B "\"zero_optimization\": {\"offload_optimizer\": {\"device\": \"cpu\"}}}",
                 "zero_optimization.offload_optimizer needs ZeRO stage 1, 2 or 3 (stage is 0)");
    EXPECT_ERROR(B "\"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": "
                   "\"nvme\"}}}",
                 "zero_optimization.offload_param.device is \"nvme\" but nvme_path is not set");
    EXPECT_ERROR(B "\"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": "
                   "\"nvme\"}}}",
                 "zero_optimization.offload_optimizer.device is \"nvme\" but nvme_path");
    EXPECT_ERROR(B "\"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": "
                   "\"gpu\"}}}",
                 "zero_optimization.offload_optimizer.device must be one of \"none\", \"cpu\", "
                 "\"nvme\", got the string \"gpu\"");
    EXPECT_ERROR(B "\"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": "
                   "\"cpu\", \"ratio\": 0.5}}}",
                 "partial offload", "stage 3");
    EXPECT_ERROR(B "\"zero_optimization\": {\"stage\": 2, \"cpu_offload\": true, "
                   "\"offload_optimizer\": {\"device\": \"cpu\"}}}",
                 "cpu_offload (deprecated) and offload_optimizer are both set");
    EXPECT_ERROR(B "\"fp16\": {\"enabled\": true, \"fp16_master_weights_and_grads\": true}}",
                 "fp16.fp16_master_weights_and_grads needs ZeRO stage 1, 2 or 3");
    /* optimizer and scheduler */
    EXPECT_ERROR(B "\"optimizer\": {\"type\": \"Adamm\"}}",
                 "optimizer.type \"Adamm\" is not supported (did you mean \"Adam\"?)",
                 "Adam, AdamW and Lamb", "SGD");
    EXPECT_ERROR(B "\"optimizer\": {\"type\": \"sgd\"}}", "did you mean \"SGD\"?");
    EXPECT_ERROR(B "\"optimizer\": {\"type\": \"RMSprop\"}}", "\"RMSprop\" is not supported");
    EXPECT_ERROR(B "\"optimizer\": {\"params\": {\"lr\": 0.1}}}", "optimizer has no \"type\"");
    EXPECT_ERROR(B "\"optimizer\": {\"type\": \"Adam\", \"params\": {\"max_grad_norm\": 1}}}",
                 "max_grad_norm", "gradient_clipping");
    EXPECT_ERROR(B "\"optimizer\": {\"type\": \"Adam\", \"params\": {\"betas\": 0.9}}}",
                 "optimizer.params.betas must be a list of two numbers");
    EXPECT_ERROR(B "\"optimizer\": {\"type\": \"Adam\", \"params\": {\"betas\": [1.5, 0.9]}}}",
                 "optimizer.params: beta1 must be in [0, 1)");
    EXPECT_ERROR(B "\"optimizer\": {\"type\": \"SGD\", \"params\": {\"nesterov\": true}}}",
                 "nesterov momentum requires momentum > 0");
    EXPECT_ERROR(B "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"amsgrad\": true}}}",
                 "optimizer.params.amsgrad = true is not supported");
    EXPECT_ERROR(B "\"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": -1}}}",
                 "optimizer.params.lr must be >= 0, got -1");
    EXPECT_ERROR(B "\"scheduler\": {\"type\": \"WarmupLr\"}}",
                 "scheduler.type \"WarmupLr\" is not supported (did you mean \"WarmupLR\"?)",
                 "OneCycle");
    EXPECT_ERROR(B "\"scheduler\": {\"params\": {}}}", "scheduler.type (missing)");
    EXPECT_ERROR(B "\"scheduler\": {\"type\": \"WarmupDecayLR\"}}",
                 "scheduler.params.total_num_steps is required by the WarmupDecayLR schedule");
    EXPECT_ERROR(B "\"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_max_lr\": 1}}}",
                 "scheduler.params.cycle_min_lr is required");
    EXPECT_ERROR(B "\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": "
                   "0}}}",
                 "scheduler.params: warmup_num_steps must be a positive integer");
    EXPECT_ERROR(B "\"scheduler\": {\"type\": \"WarmupLR\", \"params\": "
                   "{\"last_batch_iteration\": 5}}}",
                 "last_batch_iteration is not supported");
    /* keys DeepSpeed has removed; values it refuses */
    EXPECT_ERROR(B "\"amp\": {\"enabled\": true}}", "amp is no longer supported", "fp16 or bf16");
    EXPECT_ERROR(B "\"zero_optimization\": {\"stage\": 3, \"mics_shard_size\": 2}}",
                 "zero_optimization.mics_shard_size is no longer supported");
    EXPECT_ERROR(B "\"gradient_allreduce_op\": \"sum\"}", "gradient_allreduce_op \"sum\"");
    EXPECT_ERROR(B "\"gradient_allreduce_op\": \"max\"}", "must be \"mean\" or \"sum\"");
    EXPECT_ERROR(B "\"communication_data_type\": \"int8\"}",
                 "communication_data_type must be \"fp16\", \"bf16\" or \"fp32\"");
    /* API misuse */
    dt_ds_config c;
    json_t *j = J("{\"train_batch_size\": 8}");
    CHECK(dt_ds_config_parse(j, 0, &c) == DT_ERR_INVALID);
    CHECK(dt_ds_config_parse(NULL, 1, &c) == DT_ERR_INVALID);
    CHECK(dt_ds_config_parse(j, 1, NULL) == DT_ERR_INVALID);
    json_t *arr = json_array();
    CHECK(dt_ds_config_parse(arr, 1, &c) == DT_ERR_CONFIG);
    json_decref(arr);
    json_decref(j);
}

/* ---- merging ------------------------------------------------------------------------------ */

static void test_merge(void) {
    json_t *base = J("{\"a\": {\"b\": 1, \"c\": {\"d\": 2, \"e\": 3}}, \"l\": [1, 2, 3], "
                     "\"s\": 5, \"o\": {\"x\": 1}, \"keep\": true}");
    json_t *over = J("{\"a\": {\"c\": {\"e\": 30, \"f\": 4}, \"g\": 7}, \"l\": [9], "
                     "\"s\": {\"now\": \"object\"}, \"o\": 0, \"n\": null}");
    char *b0 = json_dumps(base, JSON_SORT_KEYS), *o0 = json_dumps(over, JSON_SORT_KEYS);
    json_t *m = dt_overwrite_config(base, over);
    CHECK(m != NULL);
    json_t *want = J("{\"a\": {\"b\": 1, \"c\": {\"d\": 2, \"e\": 30, \"f\": 4}, \"g\": 7}, "
                     "\"l\": [9], \"s\": {\"now\": \"object\"}, \"o\": 0, \"keep\": true, "
                     "\"n\": null}");
    CHECK(json_equal(m, want));
    /* the inputs are untouched, and the result shares nothing with them */
    json_object_set_new(json_object_get(json_object_get(m, "a"), "c"), "d", json_integer(99));
    json_array_append_new(json_object_get(m, "l"), json_integer(10));
    json_object_set_new(json_object_get(m, "s"), "now", json_integer(1));
    char *b1 = json_dumps(base, JSON_SORT_KEYS), *o1 = json_dumps(over, JSON_SORT_KEYS);
    CHECK(!strcmp(b0, b1) && !strcmp(o0, o1));
    free(b0), free(o0), free(b1), free(o1);
    json_decref(m);
    json_decref(want);
    /* NULL means {} */
    m = dt_overwrite_config(NULL, NULL);
    CHECK(json_is_object(m) && json_object_size(m) == 0);
    json_decref(m);
    m = dt_overwrite_config(NULL, over);
    CHECK(json_equal(m, over) && m != over);
    json_decref(m);
    m = dt_overwrite_config(base, NULL);
    CHECK(json_equal(m, base) && m != base);
    json_decref(m);
    /* non-objects are refused */
    json_t *arr = json_array();
    CHECK(dt_overwrite_config(arr, over) == NULL && dt_last_status() == DT_ERR_CONFIG);
    CHECK(strstr(dt_last_error(), "base config") != NULL);
    CHECK(dt_overwrite_config(base, arr) == NULL && dt_last_status() == DT_ERR_CONFIG);
    CHECK(strstr(dt_last_error(), "overrides") != NULL);
    json_decref(arr);
    /* the typical use: a hyperparameter override of a DeepSpeed config, then the parse */
    json_t *ds = J("{\"train_micro_batch_size_per_gpu\": 4, \"gradient_accumulation_steps\": 2, "
                   "\"zero_optimization\": {\"stage\": 2, \"reduce_bucket_size\": 1000}, "
                   "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001}}}");
    json_t *ov = J("{\"gradient_accumulation_steps\": 4, \"zero_optimization\": {\"stage\": 3}, "
                   "\"optimizer\": {\"params\": {\"lr\": 0.01}}}");
    m = dt_overwrite_config(ds, ov);
    dt_ds_config c;
    CHECK(dt_ds_config_parse(m, 2, &c) == DT_OK);
    CHECK(c.train_batch_size == 32 && c.gradient_accumulation_steps == 4);
    CHECK(c.zero.stage == 3 && c.zero.reduce_bucket_size == 1000);
    CHECK(c.optimizer.type == DT_OPTIM_ADAMW && near_eq(c.optimizer.lr, 0.01));
    /* an override with null restores the default */
    json_t *unset = J("{\"gradient_accumulation_steps\": null}");
    json_t *m2 = dt_overwrite_config(m, unset);
    CHECK(dt_ds_config_parse(m2, 2, &c) == DT_OK);
    CHECK(c.gradient_accumulation_steps == 1 && c.train_batch_size == 8);
    json_decref(m2);
    json_decref(unset);
    json_decref(m);
    json_decref(ds);
    json_decref(ov);
    json_decref(base);
    json_decref(over);
}

/* ---- loading ------------------------------------------------------------------------------ */

static void write_file(const char *path, const char *text) {
    CHECK(fx_write(path, text));
}

static void test_load(void) {
    char dir[] = "/tmp/dt_ds_config_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];

    /* a file */
    snprintf(path, sizeof path, "%s/ds_config.json", dir);
    write_file(path, "{\n  \"train_batch_size\": 16,\n  \"fp16\": {\"enabled\": true}\n}\n");
    json_t *j = dt_ds_config_load(path);
    CHECK(j != NULL);
    dt_ds_config c;
    CHECK(j && dt_ds_config_parse(j, 4, &c) == DT_OK && c.train_micro_batch_size_per_gpu == 4 &&
          c.fp16.enabled);
    json_decref(j);

    /* malformed JSON: name:line:col, jansson's words, a hint */
    write_file(path, "{\n  \"train_batch_size\": 16,\n  \"fp16\": {\"enabled\": true,}\n}\n");
    CHECK(dt_ds_config_load(path) == NULL);
    CHECK(dt_last_status() == DT_ERR_CONFIG);
    char want[320];
    snprintf(want, sizeof want, "%s:3:", path);
    CHECK_MSG(!strncmp(dt_last_error(), want, strlen(want)), "message: %s", dt_last_error());
    CHECK(strstr(dt_last_error(), "malformed JSON: ") != NULL);
    CHECK(strstr(dt_last_error(), "hint:") != NULL);

    /* duplicate keys are refused (DeepSpeed refuses them too) */
    write_file(path, "{\"train_batch_size\": 16, \"train_batch_size\": 8}");
    CHECK(dt_ds_config_load(path) == NULL && dt_last_status() == DT_ERR_CONFIG);
    CHECK(strstr(dt_last_error(), "duplicate") != NULL);

    /* the root must be an object */
    write_file(path, "[1, 2]");
    CHECK(dt_ds_config_load(path) == NULL && dt_last_status() == DT_ERR_CONFIG);
    CHECK(strstr(dt_last_error(), "must be a JSON object") != NULL);

    /* unreadable files */
    snprintf(path, sizeof path, "%s/missing.json", dir);
    CHECK(dt_ds_config_load(path) == NULL && dt_last_status() == DT_ERR_IO);
    CHECK(strstr(dt_last_error(), "missing.json") != NULL);
    CHECK(dt_ds_config_load(dir) == NULL); /* a directory */
    CHECK(dt_last_status() == DT_ERR_IO || dt_last_status() == DT_ERR_CONFIG);

    /* JSON text: the first non-blank character is '{' */
    j = dt_ds_config_load("  \n\t{\"train_micro_batch_size_per_gpu\": 2}");
    CHECK(j != NULL && dt_ds_config_parse(j, 3, &c) == DT_OK && c.train_batch_size == 6);
    json_decref(j);
    CHECK(dt_ds_config_load("{\"a\": 1,\n \"b\": }") == NULL);
    CHECK(dt_last_status() == DT_ERR_CONFIG);
    CHECK_MSG(!strncmp(dt_last_error(), "<config text>:2:", 16), "message: %s", dt_last_error());
    CHECK(dt_ds_config_load("") == NULL && dt_last_status() == DT_ERR_CONFIG);
    CHECK(dt_ds_config_load(NULL) == NULL && dt_last_status() == DT_ERR_INVALID);

    snprintf(path, sizeof path, "%s/ds_config.json", dir);
    remove(path);
    rmdir(dir);
}

/* ---- the unknown-key warning -------------------------------------------------------------- */

/* Run a parse with stderr captured into buf. */
static dt_status parse_capture(const char *text, char *buf, size_t n) {
    char tmpl[] = "/tmp/dt_ds_config_log_XXXXXX";
    int fd = mkstemp(tmpl);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    dt_ds_config c;
    dt_status st = parse_text(text, 1, &c);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    ssize_t got = read(fd, buf, n - 1);
    buf[got > 0 ? got : 0] = 0;
    close(fd);
    unlink(tmpl);
    return st;
}

static int count(const char *hay, const char *needle) {
    int k = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++) k++;
    return k;
}

static void test_unknown_keys(void) {
    dt_log_set_level(DT_LOG_INFO);
    char log[4096];
    dt_status st = parse_capture(
        "{\"train_batch_size\": 8, \"gradient_clippin\": 1.0, \"foo\": 1, "
        "\"fp16\": {\"enabled\": true, \"loss_scal\": 0}, "
        "\"zero_optimization\": {\"stage\": 3, \"stag\": 2, \"offload_param\": {\"device\": "
        "\"cpu\", \"pin_memroy\": true}}, "
        "\"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 0.001, \"momentum\": 0.9}}, "
        "\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_max_lrr\": 0.1}}, "
        "\"activation_checkpointing\": {\"partitioned_activations\": true}}",
        log, sizeof log);
    CHECK(st == DT_OK);
    /* the unknown keys in one line, then fp16's own note (what its fp16 rounds) */
    CHECK_MSG(count(log, "warning") == 2, "want two warning lines: %s", log);
    CHECK(strstr(log, "fp16.enabled: dtrain's fp16 rounds every matmul") != NULL);
    CHECK(strstr(log, "8 unknown keys ignored") != NULL);
    CHECK(strstr(log, "gradient_clippin (did you mean 'gradient_clipping'?)") != NULL);
    CHECK(strstr(log, "foo") != NULL && strstr(log, "foo (did you mean") == NULL);
    CHECK(strstr(log, "fp16.loss_scal (did you mean 'loss_scale'?)") != NULL);
    CHECK(strstr(log, "zero_optimization.stag (did you mean 'stage'?)") != NULL);
    CHECK(strstr(log, "zero_optimization.offload_param.pin_memroy (did you mean 'pin_memory'?)") !=
          NULL);
    CHECK(strstr(log, "optimizer.params.momentum") != NULL); /* not an Adam parameter */
    CHECK(strstr(log, "scheduler.params.warmup_max_lrr (did you mean 'warmup_max_lr'?)") != NULL);
    CHECK(strstr(log, "activation_checkpointing.partitioned_activations (did you mean "
                      "'partition_activations'?)") != NULL);
    if (t_fail) fprintf(stderr, "captured: %s\n", log);

    /* keys DeepSpeed knows and dtrain ignores, set to what asks for nothing: silent */
    st = parse_capture("{\"train_batch_size\": 8, \"communication_data_type\": \"fp32\", "
                       "\"zero_allow_untested_optimizer\": false, \"tensorboard\": {\"enabled\": "
                       "false}, \"zero_optimization\": {\"stage\": 2, \"round_robin_gradients\": "
                       "false, \"offload_optimizer\": {\"device\": \"cpu\", \"fast_init\": "
                       "false}}, \"fp16\": {\"auto_cast\": false}, \"bf16\": "
                       "{\"immediate_grad_update\": false}, \"optimizer\": {\"type\": \"AdamW\", "
                       "\"legacy_fusion\": false, \"params\": {\"torch_adam\": false, "
                       "\"set_grad_none\": false}}}",
                       log, sizeof log);
    CHECK(st == DT_OK);
    CHECK_MSG(log[0] == 0, "unexpected output: %s", log);

    /* the warning also comes before an error, to explain it */
    st = parse_capture("{\"train_micro_batch_size\": 4}", log, sizeof log);
    CHECK(st == DT_ERR_CONFIG);
    CHECK(strstr(log, "train_micro_batch_size (did you mean 'train_micro_batch_size_per_gpu'?)") !=
          NULL);
    CHECK(strstr(dt_last_error(), "is 'train_micro_batch_size' a misspelling") != NULL);

    /* many unknown keys: still one line */
    char big[8192] = "{\"train_batch_size\": 8";
    for (int i = 0; i < 200; i++) {
        char k[48];
        snprintf(k, sizeof k, ", \"unknown_key_number_%03d\": %d", i, i);
        strcat(big, k);
    }
    strcat(big, "}");
    st = parse_capture(big, log, sizeof log);
    CHECK(st == DT_OK && count(log, "warning") == 1 && strstr(log, "200 unknown keys") != NULL);
}

/* Batch products past 64 bits: a clear error with the numbers as given, never a wrapped one. */
static void expect_batch_error(const char *text, int ws, const char *want) {
    const char *subs[] = {want, "hint:", NULL};
    expect_error_v(text, ws, DT_ERR_CONFIG, subs);
    const char *m = dt_last_error();
    for (const char *p = strchr(m, '-'); p; p = strchr(p + 1, '-'))
        CHECK_MSG(!(p[1] >= '0' && p[1] <= '9'), "%s: a negative number in: %s", text, m);
}

static void test_batch_overflow(void) {
    const char *m3 = "train_micro_batch_size_per_gpu * gradient_accumulation_steps * world size";
    char want[256];
    snprintf(want, sizeof want, "%s (4294967296 * 4294967296 * 1) does not fit in 64 bits", m3);
    expect_batch_error("{\"train_batch_size\": 1, \"train_micro_batch_size_per_gpu\": 4294967296, "
                       "\"gradient_accumulation_steps\": 4294967296}",
                       1, want);
    CHECK(strstr(dt_last_error(), "at most 9223372036854775807") != NULL);
    expect_batch_error("{\"train_micro_batch_size_per_gpu\": 4294967296, "
                       "\"gradient_accumulation_steps\": 4294967296}",
                       1, want);
    snprintf(want, sizeof want, "%s (1073741824 * 4294967296 * 2) does not fit in 64 bits", m3);
    expect_batch_error("{\"train_batch_size\": 8, \"train_micro_batch_size_per_gpu\": 1073741824, "
                       "\"gradient_accumulation_steps\": 4294967296}",
                       2, want);
    expect_batch_error("{\"train_micro_batch_size_per_gpu\": 4611686018427387904}", 2,
                       "train_micro_batch_size_per_gpu * world size (4611686018427387904 * 2) does "
                       "not fit in 64 bits");
    /* the inferred setting is 0 and the unit the hint would name is past 64 bits */
    expect_batch_error(
        "{\"train_batch_size\": 1, \"train_micro_batch_size_per_gpu\": 9223372036854775807}", 2,
        "train_micro_batch_size_per_gpu * world size (9223372036854775807 * 2) does not fit");
    expect_batch_error(
        "{\"train_batch_size\": 1, \"gradient_accumulation_steps\": 9223372036854775807}", 2,
        "gradient_accumulation_steps * world size (9223372036854775807 * 2) does not fit");
    /* the next multiple above train_batch_size would not fit: only the one below is offered */
    expect_batch_error(
        "{\"train_batch_size\": 9223372036854775807, \"train_micro_batch_size_per_gpu\": 2}", 1,
        "gradient_accumulation_steps 4611686018427387903 (inferred)");
    CHECK(strstr(dt_last_error(), "(e.g. 9223372036854775806)") != NULL);
    expect_batch_error("{\"train_batch_size\": 9223372036854775807}", 3,
                       "multiple of the world size 3 (e.g. 9223372036854775806)");
    CHECK(strstr(dt_last_error(), "train_micro_batch_size_per_gpu 3074457345618258602 (inferred)"));
}

/* memory_budget strings: whole bytes in [0, 2^63 - 1]; a tiny budget is an error, not "none". */
static void test_memory_budget_range(void) {
    static const char *const bad[] = {"1e300", "nan",    "inf",
                                      "0.1",   "1e-400", "9223372036854775808"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[128];
        snprintf(text, sizeof text, B "\"memory_budget\": \"%s\"}", bad[i]);
        EXPECT_ERROR(text, "memory_budget must be a byte count", "9223372036854775807", "hint:");
    }
    EXPECT_ERROR(B "\"memory_budget\": \"0.1\"}", "not a whole number of bytes");
    EXPECT_ERROR(B "\"memory_budget\": \"1e300\"}", "over the largest size");
    dt_ds_config c;
    CHECK(parse_text(B "\"memory_budget\": \"0\"}", 1, &c) == DT_OK && c.memory_budget_bytes == 0);
    CHECK(parse_text(B "\"memory_budget\": \"0.5K\"}", 1, &c) == DT_OK &&
          c.memory_budget_bytes == 512);
}

/* "deterministic" (dtrain's extension, not DeepSpeed's): a boolean, off unless given. */
static void test_deterministic_key(void) {
    dt_ds_config c;
    CHECK(parse_text("{\"train_batch_size\": 8, \"deterministic\": true}", 2, &c) == DT_OK);
    CHECK(c.deterministic);
    CHECK(parse_text("{\"train_batch_size\": 8, \"deterministic\": false}", 2, &c) == DT_OK);
    CHECK(!c.deterministic);
    EXPECT_ERROR("{\"train_batch_size\": 8, \"deterministic\": \"true\"}", "deterministic",
                 "boolean");
    char log[1024];
    dt_log_set_level(DT_LOG_INFO);
    dt_status st =
        parse_capture("{\"train_batch_size\": 8, \"determinstic\": true}", log, sizeof log);
    CHECK(st == DT_OK && strstr(log, "determinstic (did you mean 'deterministic'?)") != NULL);
}

/* dt_ds_config_check: one warning per key without effect (named with the file), unknown keys
 * too, features dtrain lacks refused with the file's name, offload_param below stage 3 as
 * DeepSpeed does. */
static void test_check(void) {
    json_t *w = NULL;
    json_t *j = J("{\"train_batch_size\": 8, \"tensorboard\": {\"enabled\": true}, "
                  "\"wandb\": {\"enabled\": false}, \"csv_monitor\": {\"enabled\": true}, "
                  "\"fp16\": {\"enabled\": true}, \"foo\": 1, \"zero_optimization\": "
                  "{\"stage\": 1, \"offload_param\": {\"device\": \"cpu\"}}}");
    CHECK(dt_ds_config_check(j, "ds.json", 1, &w) == DT_OK);
    CHECK_MSG(json_array_size(w) == 5, "%zu warnings", json_array_size(w));
    static const char *const want[] = {"ds.json: unknown key 'foo' (ignored)",
                                       "ds.json: tensorboard has no effect: dtrain records",
                                       "ds.json: csv_monitor has no effect",
                                       "ds.json: zero_optimization.offload_param has no "
                                       "effect below ZeRO stage 3",
                                       "ds.json: fp16.enabled: dtrain's fp16 rounds every matmul"};
    for (size_t i = 0; i < 5 && i < json_array_size(w); i++)
        CHECK_MSG(strstr(json_string_value(json_array_get(w, i)), want[i]), "%s",
                  json_string_value(json_array_get(w, i)));
    json_decref(w);
    json_decref(j);
    static const char *const refused[][2] = {
        {"{\"train_batch_size\": 8, \"sequence_parallel_size\": 2}",
         "ds.json: sequence_parallel_size asks for Ulysses sequence parallelism"},
        {"{\"train_batch_size\": 8, \"data_efficiency\": {\"enabled\": true}}",
         "ds.json: data_efficiency asks for the data efficiency library"},
        {"{\"train_batch_size\": 8, \"tensor_parallel\": {\"autotp_size\": 4}}",
         "automatic tensor parallelism, which dtrain does not have"},
        {"{\"train_batch_size\": 3, \"train_micro_batch_size_per_gpu\": 2}",
         "ds.json: batch sizes do not multiply out"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        j = J(refused[i][0]);
        CHECK(dt_ds_config_check(j, "ds.json", 1, &w) == DT_ERR_CONFIG);
        CHECK_MSG(strstr(dt_last_error(), refused[i][1]), "%s", dt_last_error());
        json_decref(w);
        json_decref(j);
    }
    /* what asks for nothing warns about nothing; the parse refuses the feature too */
    j = J("{\"train_batch_size\": 8, \"sequence_parallel_size\": 1, \"tensorboard\": null, "
          "\"data_efficiency\": {\"enabled\": false}}");
    CHECK(dt_ds_config_check(j, "ds.json", 1, &w) == DT_OK && json_array_size(w) == 0);
    json_decref(w);
    json_decref(j);
    dt_ds_config c;
    j = J("{\"train_batch_size\": 8, \"hybrid_engine\": {\"enabled\": true}}");
    CHECK(dt_ds_config_parse(j, 1, &c) == DT_ERR_CONFIG);
    CHECK(strstr(dt_last_error(), "hybrid_engine asks for") != NULL);
    json_decref(j);
}

int main(void) {
    g_src = getenv("DT_SOURCE_DIR");
    if (!g_src) {
        fprintf(stderr, "DT_SOURCE_DIR is not set; hint: run through ctest, or set it to the "
                        "source tree\n");
        return 1;
    }
    TEST_RUN(test_golden_batch);
    TEST_RUN(test_golden_sections);
    TEST_RUN(test_golden_optimizer);
    TEST_RUN(test_golden_scheduler);
    TEST_RUN(test_defaults);
    TEST_RUN(test_values);
    TEST_RUN(test_errors);
    TEST_RUN(test_batch_overflow);
    TEST_RUN(test_memory_budget_range);
    TEST_RUN(test_merge);
    TEST_RUN(test_load);
    TEST_RUN(test_unknown_keys);
    TEST_RUN(test_deterministic_key);
    TEST_RUN(test_check);
    TEST_END();
}
