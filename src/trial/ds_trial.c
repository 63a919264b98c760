/* ds_trial.c — engine-based trials (the reference's DeepSpeedTrial): wrapped engines, the
 * micro-batch iterators, automatic gradient accumulation, the model-parallel unit, the
 * DeepSpeed config from hyperparameters, and engine checkpoints inside trial checkpoints.
 *
 * The fit loop (fit.c) drives an engine-based trial through the dt__ds_* functions below:
 *
 *   batches   One batch of the fit loop is one GLOBAL batch of the first wrapped engine:
 *             train_batch_size records over the data-parallel group, made of
 *             gradient_accumulation_steps (gas) micro-batches per slot. ds_train_batch is
 *             called gas times per batch (once with auto accumulation disabled) and its
 *             metrics are averaged over the calls. An epoch is floor(micro-batches of the
 *             training loader / gas) batches.
 *   stream    The training iterator hands out the loader's micro-batches one after another
 *             and runs on into the next epoch of the loader at its end (so a loader whose
 *             length is not a multiple of gas still feeds whole global batches, as in the
 *             reference). Its position — the loader epoch and the batches taken from it — is
 *             saved in state.json ("ds_stream") and restored on resume, so a resumed run sees
 *             the same micro-batches as an uninterrupted one.
 *   ckpt      Every slot saves its engines' shards into the checkpoint's temporary directory
 *             (the chief's dt_ckpt_dir, broadcast to every slot) before the chief commits it;
 *             fit.c describes the order.
 *   pipeline  A wrapped pipeline engine (dt_wrap_pipe_engine; it must be the first engine)
 *             takes its stage's engine as engine 0 for the batch accounting, makes one
 *             ds_train_batch call per global batch (dt_pipe_train_batch consumes all
 *             gradient_accumulation_steps micro-batches), and sets the model-parallel unit
 *             from its grid: the data is sharded over the data-parallel rank / size, only the
 *             first and last stage build loaders, only the last stage reports metrics.
 *             Validation runs floor(micro-batches / gas) dt_pipe_eval_batch calls, a number
 *             the slots agree on when the loaders are attached (a loader shorter than one
 *             batch is refused there).
 *
 * Everything here is per context: the state hangs off the trial context (context.c keeps
 * the pointer next to the context). */
#include "trial_impl.h"

#include "dtrain/engine.h"
#include "dtrain/pipe.h"
#include "engine/engine_iface.h"
#include "data/data_iface.h"
#include "trial/trial_iface.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- state ---- */

struct dt_batch_iter {
    dt_loader *loader; /* NULL on a slot that builds no data loader */
    bool training;     /* a stream over epochs (training) or one pass (validation) */
    bool started;
    int64_t epoch;    /* the loader epoch being read */
    int64_t taken;    /* batches taken from it (padding batches included) */
    dt_batch *peeked; /* validation: the batch dt__ds_eval_more looked at */
    int64_t records;  /* records handed out since the controller's last reset */
    int64_t pulled;   /* batches handed out since then */
};

struct dt_ds_state {
    int n_engines;
    dt_engine *engines[DT_TRIAL_MAX_MODELS];
    /* pipes[i] != NULL: engine i is that pipeline engine's stage engine (the pipeline owns it) */
    dt_pipe_engine *pipes[DT_TRIAL_MAX_MODELS];
    int64_t val_calls; /* pipeline: dt_pipe_eval_batch calls per validation pass */
    bool auto_accum_disabled;
    bool has_mpu;
    dt_model_parallel_unit mpu;
    char model_dir[1024];
    bool warned_boundary;
    dt_batch_iter train_it, val_it;
};

static dt_ds_state *ds_get(const dt_trial_ctx *c, bool create) {
    dt_ds_state **slot = &((dt_trial_ctx *)c)->ds;
    if (!*slot && create) {
        *slot = calloc(1, sizeof **slot);
        if (!*slot) dt_error(DT_ERR_OOM, "engine-based trial state");
    }
    return *slot;
}

bool dt__ds_owns_module(const dt_trial_ctx *c, const dt_module *m) {
    const dt_ds_state *s = ds_get(c, false);
    for (int i = 0; s && i < s->n_engines; i++)
        if (dt_engine_module(s->engines[i]) == m) return true;
    return false;
}

/* Free the engines, then their models (unless dt_wrap_model owns a model too). */
void dt__ds_free(dt_trial_ctx *c) {
    dt_ds_state *s = ds_get(c, false);
    if (!s) return;
    for (int i = s->n_engines - 1; i >= 0; i--) {
        if (s->pipes[i]) { /* the pipeline frees its stage's engine, module and context */
            dt_pipe_engine_free(s->pipes[i]);
            continue;
        }
        dt_module *m = dt_engine_module(s->engines[i]);
        dt_engine_free(s->engines[i]);
        bool wrapped = false;
        for (int k = 0; k < c->n_models; k++) wrapped |= c->models[k] == m;
        for (int k = 0; k < i; k++) wrapped |= dt_engine_module(s->engines[k]) == m;
        if (!wrapped) dt_module_free(m);
    }
    free(s);
    c->ds = NULL;
}

int dt__ds_engine_count(const dt_trial_ctx *c) {
    const dt_ds_state *s = ds_get(c, false);
    return s ? s->n_engines : 0;
}

void dt__ds_set_model_dir(dt_trial_ctx *c, const char *dir) {
    dt_ds_state *s = ds_get(c, true);
    if (s) snprintf(s->model_dir, sizeof s->model_dir, "%s", dir ? dir : "");
}

const char *dt_trial_model_dir(const dt_trial_ctx *c) {
    const dt_ds_state *s = ds_get(c, false);
    return s && s->model_dir[0] ? s->model_dir : NULL;
}

/* ---- the context API ---- */

dt_engine *dt_wrap_model_engine(dt_trial_ctx *c, dt_engine *e) {
    if (!e) return NULL; /* dt_engine_init's error stays in dt_last_error */
    dt_module *m = dt_engine_module(e);
    if (m && m->type && !strcmp(m->type, "PipelineStage")) {
        /* a pipeline's stage engine: the pipeline owns it, so it is left alone */
        dt_error(DT_ERR_STATE, "wrap_model_engine: this is a pipeline stage's engine "
                               "(dt_pipe_stage_engine); hint: wrap the pipeline engine itself "
                               "with dt_wrap_pipe_engine");
        return NULL;
    }
    dt_ds_state *s = ds_get(c, true);
    const char *why = NULL;
    char buf[256];
    if (!s)
        why = "out of memory";
    else if (s->n_engines == DT_TRIAL_MAX_MODELS) {
        snprintf(buf, sizeof buf, "at most %d engines per trial", DT_TRIAL_MAX_MODELS);
        why = buf;
    } else if (dt_module_ctx(m) != c->rt) {
        why = "the engine's model was built on another context; hint: build it with "
              "dt_module_build(model, dt_trial_runtime(ctx), dt_trial_seed(ctx)) before "
              "dt_engine_init";
    } else {
        for (int i = 0; i < s->n_engines; i++)
            if (s->engines[i] == e || dt_engine_module(s->engines[i]) == m)
                why = "this engine (or its model) is already wrapped; hint: wrap each engine "
                      "once, and give each its own model";
    }
    if (why) {
        char msg[512];
        snprintf(msg, sizeof msg, "wrap_model_engine: %s", why);
        bool wrapped = false;
        for (int k = 0; k < c->n_models; k++) wrapped |= c->models[k] == m;
        bool shared = false;
        for (int i = 0; s && i < s->n_engines; i++) shared |= s->engines[i] == e;
        if (!shared) {
            dt_engine_free(e);
            if (!wrapped && !dt__ds_owns_module(c, m)) dt_module_free(m);
        }
        dt_error(DT_ERR_STATE, "%s", msg);
        return NULL;
    }
    s->engines[s->n_engines++] = e;
    return e;
}

/* ---- pipeline engines ---- */

/* The model-parallel unit of a pipeline grid (user = the pipeline engine). */
static int pipe_mpu_rank(void *u) {
    return dt_pipe_dp_rank(u);
}
static int pipe_mpu_world(void *u) {
    return dt_pipe_dp_size(u);
}
static bool pipe_mpu_report(void *u) {
    return dt_pipe_stage_id(u) == dt_pipe_num_stages(u) - 1;
}
static bool pipe_mpu_build(void *u) {
    return dt_pipe_stage_id(u) == 0 || dt_pipe_stage_id(u) == dt_pipe_num_stages(u) - 1;
}

dt_pipe_engine *dt_wrap_pipe_engine(dt_trial_ctx *c, dt_pipe_engine *p) {
    if (!p) return NULL; /* dt_pipe_engine_init's error stays in dt_last_error */
    dt_ds_state *s = ds_get(c, true);
    const char *why = NULL;
    char buf[256];
    bool shared = false;
    for (int i = 0; s && i < s->n_engines; i++) shared |= s->pipes[i] == p;
    if (!s)
        why = "out of memory";
    else if (shared)
        why = "this pipeline engine is already wrapped; hint: wrap it once";
    else if (s->n_engines == DT_TRIAL_MAX_MODELS) {
        snprintf(buf, sizeof buf, "at most %d engines per trial", DT_TRIAL_MAX_MODELS);
        why = buf;
    } else if (s->n_engines > 0)
        why = "a pipeline engine must be the first engine wrapped (its stage's batch settings "
              "drive the controller); hint: call dt_wrap_pipe_engine before "
              "dt_wrap_model_engine";
    if (why) {
        if (!shared) dt_pipe_engine_free(p);
        dt_error(DT_ERR_STATE, "wrap_pipe_engine: %s", why);
        return NULL;
    }
    s->engines[s->n_engines] = dt_pipe_stage_engine(p);
    s->pipes[s->n_engines++] = p;
    /* the grid is the model-parallel unit (a later dt_set_mpu replaces it) */
    dt_model_parallel_unit mpu = {.user = p,
                                  .data_parallel_rank = pipe_mpu_rank,
                                  .data_parallel_world_size = pipe_mpu_world,
                                  .should_report_metrics = pipe_mpu_report,
                                  .should_build_data_loader = pipe_mpu_build};
    if (dt_set_mpu(c, &mpu) != DT_OK) {
        /* the context owns the engine now: it is freed with the context */
        dt_error(DT_ERR_STATE, "wrap_pipe_engine: %s", dt_last_error());
        return NULL;
    }
    return p;
}

dt_pipe_engine *dt_trial_pipe_engine(const dt_trial_ctx *c, int i) {
    const dt_ds_state *s = ds_get(c, false);
    return s && i >= 0 && i < s->n_engines ? s->pipes[i] : NULL;
}

/* Field `name` of b, else field `k` (the default collate's order: the dataset's fields). */
static dt_tensor *batch_field(const dt_batch *b, const char *name, int k) {
    dt_tensor *t = dt_batch_get(b, name);
    return t ? t : k < b->nfields ? b->tensors[k] : NULL;
}

/* A copy of t in ctx (the pipeline keeps a micro-batch's tensors until the batch ends, while
 * the loader reuses its batch storage). */
static dt_tensor *copy_into(dt_ctx *ctx, const dt_tensor *t) {
    dt_tensor *o = dt_tensor_new(ctx, t->dtype, t->ndim, t->shape);
    if (o && dt_copy(o, t) != DT_OK) return NULL;
    return o;
}

dt_status dt_batch_iter_pipe_data(void *iter, int64_t micro, dt_ctx *ctx, bool want_inputs,
                                  dt_tensor **inputs, bool want_labels, dt_tensor **labels) {
    dt_batch *b = dt_batch_iter_next(iter);
    if (!b)
        return dt_error(dt_last_status() ? dt_last_status() : DT_ERR_STATE,
                        "pipeline micro-batch %lld: %s", (long long)micro, dt_last_error());
    const char *miss = NULL;
    if (want_inputs) {
        dt_tensor *x = batch_field(b, "x", 0);
        if (!x)
            miss = "inputs (field \"x\")";
        else if (!(*inputs = copy_into(ctx, x)))
            return dt_last_status();
    }
    if (want_labels && !miss) {
        dt_tensor *y = batch_field(b, "y", 1);
        if (!y)
            miss = "labels (field \"y\")";
        else if (!(*labels = copy_into(ctx, y)))
            return dt_last_status();
    }
    if (miss)
        return dt_error(DT_ERR_INVALID,
                        "pipeline micro-batch %lld: the batch has no %s; hint: "
                        "name the dataset's fields \"x\" and \"y\", or write a "
                        "data function of your own",
                        (long long)micro, miss);
    return DT_OK;
}

int dt_trial_engine_count(const dt_trial_ctx *c) {
    return dt__ds_engine_count(c);
}

dt_engine *dt_trial_engine(const dt_trial_ctx *c, int i) {
    const dt_ds_state *s = ds_get(c, false);
    return s && i >= 0 && i < s->n_engines ? s->engines[i] : NULL;
}

int64_t dt_trial_train_micro_batch_size(const dt_trial_ctx *c) {
    const dt_ds_state *s = ds_get(c, false);
    if (!s || !s->n_engines) {
        dt_error(DT_ERR_STATE, "train_micro_batch_size: no engine is wrapped yet; hint: call "
                               "dt_wrap_model_engine in init, before the loaders are built");
        return 0;
    }
    return dt_engine_train_micro_batch_size_per_gpu(s->engines[0]);
}

void dt_disable_auto_grad_accumulation(dt_trial_ctx *c) {
    dt_ds_state *s = ds_get(c, true);
    if (s) s->auto_accum_disabled = true;
}

void dt_disable_dataset_reproducibility_checks(dt_trial_ctx *c) {
    c->repro_disabled = true;
}

dt_status dt_set_mpu(dt_trial_ctx *c, const dt_model_parallel_unit *mpu) {
    if (c->in_fit && c->batches_trained > 0)
        return dt_error(DT_ERR_STATE, "set_mpu must be called in init, before training starts");
    dt_ds_state *s = ds_get(c, true);
    if (!s) return dt_last_status();
    if (!mpu) {
        s->has_mpu = false;
        return DT_OK;
    }
    int r = mpu->data_parallel_rank ? mpu->data_parallel_rank(mpu->user) : c->rank;
    int w = mpu->data_parallel_world_size ? mpu->data_parallel_world_size(mpu->user) : c->size;
    if (w < 1 || r < 0 || r >= w)
        return dt_error(DT_ERR_INVALID,
                        "set_mpu: data-parallel rank %d of world size %d is out of "
                        "range; hint: the rank must be in [0, world size)",
                        r, w);
    s->mpu = *mpu;
    s->has_mpu = true;
    return DT_OK;
}

/* ---- the DeepSpeed config from hyperparameters ---- */

static bool is_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

json_t *dt_ds_config_from_hparams(const dt_trial_ctx *c) {
    const json_t *src = dt_hparam_json(c, "deepspeed_config");
    const json_t *over = dt_hparam_json(c, "overwrite_deepspeed_args");
    if (!src) {
        dt_error(DT_ERR_CONFIG, "hyperparameters.deepspeed_config is not set; hint: add "
                                "`deepspeed_config: ds_config.json` (a path relative to the model "
                                "directory) under hyperparameters");
        return NULL;
    }
    if (over && !json_is_object(over) && !json_is_null(over)) {
        dt_error(DT_ERR_CONFIG,
                 "hyperparameters.overwrite_deepspeed_args must be an object of "
                 "DeepSpeed config keys (e.g. {train_batch_size: 16}), not a %s",
                 json_is_array(over)    ? "list"
                 : json_is_string(over) ? "string"
                                        : "number");
        return NULL;
    }
    json_t *base = NULL;
    if (json_is_object(src)) {
        base = json_deep_copy(src);
        if (!base) dt_error(DT_ERR_OOM, "deepspeed_config: copy");
    } else if (json_is_string(src)) {
        const char *p = json_string_value(src);
        const char *md = dt_trial_model_dir(c);
        char path[2048];
        if (p[0] != '/' && md) {
            snprintf(path, sizeof path, "%s/%s", md, p);
            if (!is_file(path) && is_file(p)) snprintf(path, sizeof path, "%s", p);
        } else {
            snprintf(path, sizeof path, "%s", p);
        }
        if (!is_file(path)) {
            dt_error(DT_ERR_IO,
                     "hyperparameters.deepspeed_config: cannot find %s%s%s%s; hint: "
                     "the path is relative to the model directory",
                     path, md ? " (model directory " : "", md ? md : "", md ? ")" : "");
            return NULL;
        }
        base = dt_ds_config_load(path);
    } else {
        dt_error(DT_ERR_CONFIG, "hyperparameters.deepspeed_config must be a path (string) or a "
                                "DeepSpeed config object");
        return NULL;
    }
    if (!base) return NULL;
    json_t *out = dt_overwrite_config(base, json_is_object(over) ? over : NULL);
    json_decref(base);
    return out;
}

/* ---- checks at the start of the fit loop ---- */

dt_status dt__ds_check_def(const dt_trial_def *def) {
    if (def->train_batch || def->evaluate_batch || def->evaluate_full_dataset)
        return dt_error(DT_ERR_INVALID,
                        "trial %s is engine-based (ds_train_batch is set) but also sets %s; "
                        "hint: an engine-based trial uses ds_train_batch and ds_evaluate_batch "
                        "only",
                        def->name ? def->name : "(unnamed)",
                        def->train_batch      ? "train_batch"
                        : def->evaluate_batch ? "evaluate_batch"
                                              : "evaluate_full_dataset");
    if (!def->ds_evaluate_batch)
        return dt_error(DT_ERR_INVALID,
                        "trial %s is engine-based (ds_train_batch is set) but "
                        "has no ds_evaluate_batch",
                        def->name ? def->name : "(unnamed)");
    return DT_OK;
}

dt_status dt__ds_after_init(dt_trial_ctx *c, const dt_trial_def *def) {
    const dt_ds_state *s = ds_get(c, false);
    if (!s || !s->n_engines)
        return dt_error(DT_ERR_STATE,
                        "trial %s is engine-based (ds_train_batch is set) but its init wrapped "
                        "no engine; hint: call dt_wrap_model_engine(ctx, dt_engine_init(model, "
                        "config)) in init",
                        def->name ? def->name : "(unnamed)");
    /* a global_batch_size hyperparameter that disagrees would convert records wrongly */
    const json_t *g = dt_hparam_json(c, "global_batch_size");
    int64_t tbs = dt_engine_train_batch_size(s->engines[0]);
    if (json_is_integer(g) && json_integer_value(g) != tbs && c->rank == 0)
        dt_log(DT_LOG_WARN,
               "hyperparameters.global_batch_size = %lld but the first engine's "
               "train_batch_size is %lld: batches, records and epochs follow the "
               "engine",
               (long long)json_integer_value(g), (long long)tbs);
    return DT_OK;
}

bool dt__ds_builds_loaders(const dt_trial_ctx *c) {
    const dt_ds_state *s = ds_get(c, false);
    if (!s || !s->has_mpu || !s->mpu.should_build_data_loader) return true;
    return s->mpu.should_build_data_loader(s->mpu.user);
}

bool dt__ds_reports_metrics(const dt_trial_ctx *c) {
    const dt_ds_state *s = ds_get(c, false);
    if (!s || !s->has_mpu || !s->mpu.should_report_metrics) return true;
    return s->mpu.should_report_metrics(s->mpu.user);
}

void dt__ds_shard(const dt_trial_ctx *c, int *rank, int *world) {
    const dt_ds_state *s = ds_get(c, false);
    *rank = c->rank;
    *world = c->size;
    if (!s || !s->has_mpu) return;
    if (s->mpu.data_parallel_rank) *rank = s->mpu.data_parallel_rank(s->mpu.user);
    if (s->mpu.data_parallel_world_size) *world = s->mpu.data_parallel_world_size(s->mpu.user);
}

static int64_t micro_per_batch(const dt_ds_state *s) {
    return dt_engine_gradient_accumulation_steps(s->engines[0]);
}

/* Does any rank's shard of `l` end with an empty padding batch? (built-in loaders only) */
static bool has_padding_batch(dt_loader *l) {
    const dt_loader_opts *o = l ? dt_loader_options(l) : NULL;
    if (!o || o->batch_sampler || o->batch_size <= 0) return false;
    int64_t nb = dt_loader_num_batches(l), nr = dt_loader_num_records(l);
    return nb > 0 && nr <= (nb - 1) * o->batch_size;
}

static dt_status agree_max(dt_trial_ctx *c, int64_t *v) {
    if (c->size == 1) return DT_OK;
    return dt_comm_allreduce(c->comm, v, 1, DT_COMM_DTYPE_I64, DT_REDUCE_OP_MAX);
}

/* Pipeline: every dt_pipe_eval_batch call takes gas micro-batches on the first and the last
 * stage, and every rank must make the same number of calls (they are collective). The count
 * is floor(micro-batches with data on the shortest shard / gas), agreed over all slots (the
 * slots without loaders follow); fewer than gas micro-batches is an error. */
static dt_status pipe_val_calls(dt_trial_ctx *c, dt_ds_state *s, dt_loader *val, int64_t gas) {
    dt_status st = DT_OK;
    int64_t nv = INT64_MAX; /* a slot without loaders */
    if (val) {
        nv = dt_loader_num_batches(val);
        if (nv < 0)
            st = dt_last_status();
        else if (has_padding_batch(val))
            nv--;
    }
    int64_t v = st == DT_OK ? nv : -1;
    if (c->size > 1) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", dt_last_error());
        dt_status cst = dt_comm_allreduce(c->comm, &v, 1, DT_COMM_DTYPE_I64, DT_REDUCE_OP_MIN);
        if (cst != DT_OK) return cst;
        if (st != DT_OK) return dt_error(st, "%s", msg);
    }
    if (st != DT_OK) return st;
    if (v < 0) return dt_error(DT_ERR_STATE, "another slot failed (see its output)");
    if (v < gas)
        return dt_error(DT_ERR_CONFIG,
                        "the validation loader has %lld micro-batches%s, fewer than the %lld "
                        "(gradient_accumulation_steps) that one pipeline evaluation "
                        "(dt_pipe_eval_batch) takes; hint: use a validation set of at least "
                        "train_micro_batch_size_per_gpu x gradient_accumulation_steps x "
                        "data-parallel size records, or a smaller micro-batch size",
                        (long long)v, c->size > 1 ? " on a data-parallel slot" : "",
                        (long long)gas);
    s->val_calls = v / gas;
    return DT_OK;
}

dt_status dt__ds_attach_loaders(dt_trial_ctx *c, dt_loader *train, dt_loader *val,
                                int64_t *batches_per_epoch) {
    dt_ds_state *s = ds_get(c, false);
    int64_t micro = dt_engine_train_micro_batch_size_per_gpu(s->engines[0]);
    int64_t gas = micro_per_batch(s);
    dt_status st = DT_OK;
    const dt_loader_opts *o = train ? dt_loader_options(train) : NULL;
    if (!c->repro_disabled && o && !o->batch_sampler && o->batch_size != micro)
        st = dt_error(DT_ERR_CONFIG,
                      "the training loader's batch_size is %lld but the first engine's "
                      "train_micro_batch_size_per_gpu is %lld; hint: build the loaders with "
                      "dt_trial_train_micro_batch_size(ctx) (the engine accumulates gradients "
                      "over micro-batches itself), or call "
                      "dt_disable_dataset_reproducibility_checks to use the loader as it is",
                      (long long)o->batch_size, (long long)micro);
    int64_t nb = train ? dt_loader_num_batches(train) : 0;
    if (st == DT_OK && nb < 0) st = dt_last_status();
    /* a slot without loaders (set_mpu) takes the epoch length from the others */
    int64_t v[2] = {st == DT_OK ? nb : -1, 0};
    if ((st = dt_comm_agree(c->comm, st, "attaching the loaders")) != DT_OK) return st;
    dt_status cst = agree_max(c, &v[0]);
    if (cst != DT_OK) return cst;
    nb = v[0];
    if (nb < gas)
        return dt_error(DT_ERR_CONFIG,
                        "the training loader has %lld micro-batches per epoch on each slot, "
                        "fewer than the %lld (gradient_accumulation_steps) of one global batch; "
                        "hint: use more data or a smaller train_batch_size",
                        (long long)nb, (long long)gas);
    /* ZeRO-3 forwards gather parameters collectively: every slot must run the same number of
     * validation forwards, so no slot may be left an empty padding batch */
    bool stage3 = false;
    for (int i = 0; i < s->n_engines; i++) stage3 |= dt_engine_zero_stage(s->engines[i]) == 3;
    int64_t pad = stage3 && c->size > 1 && has_padding_batch(val);
    if ((cst = agree_max(c, &pad)) != DT_OK) return cst;
    if (pad)
        return dt_error(DT_ERR_CONFIG,
                        "the validation loader leaves a slot an empty last batch, but ZeRO "
                        "stage 3 runs every validation forward on all slots together; hint: "
                        "set drop_last = true in the validation loader, or use a validation "
                        "set whose size is a multiple of batch_size x slots");
    if (s->pipes[0] && (cst = pipe_val_calls(c, s, val, gas)) != DT_OK) return cst;
    memset(&s->train_it, 0, sizeof s->train_it);
    memset(&s->val_it, 0, sizeof s->val_it);
    s->train_it.loader = train;
    s->train_it.training = true;
    s->val_it.loader = val;
    *batches_per_epoch = nb / gas;
    return DT_OK;
}

/* ---- the iterator ---- */

static dt_batch *iter_fetch(dt_batch_iter *it, dt_status *st) {
    *st = DT_OK;
    if (!it->started) {
        *st = dt_loader_start_epoch(it->loader, it->epoch, it->taken);
        if (*st != DT_OK) return NULL;
        it->started = true;
    }
    int ends = 0;
    for (;;) {
        dt_batch *b;
        if ((*st = dt_loader_next(it->loader, &b)) != DT_OK) return NULL;
        if (!b) {
            if (!it->training) return NULL;
            if (++ends > 1) {
                *st = dt_error(DT_ERR_STATE,
                               "the training loader handed out no batch in epoch "
                               "%lld; hint: check the dataset and batch size",
                               (long long)it->epoch);
                return NULL;
            }
            it->epoch++;
            it->taken = 0;
            if ((*st = dt_loader_start_epoch(it->loader, it->epoch, 0)) != DT_OK) return NULL;
            continue;
        }
        it->taken++;
        if (b->records == 0) continue; /* a shard's padding batch: nothing to hand out */
        return b;
    }
}

dt_batch *dt_batch_iter_next(dt_batch_iter *it) {
    if (!it || !it->loader) {
        dt_error(DT_ERR_STATE, "batch_iter_next: this slot builds no data loader (see "
                               "should_build_data_loader of the model-parallel unit)");
        return NULL;
    }
    dt_batch *b = it->peeked;
    it->peeked = NULL;
    if (!b) {
        dt_status st;
        b = iter_fetch(it, &st);
        if (!b && st == DT_OK)
            dt_error(DT_ERR_STATE, "batch_iter_next: the validation data is "
                                   "exhausted");
    }
    if (b) {
        it->records += b->records;
        it->pulled++;
    }
    return b;
}

/* ---- training ---- */

int64_t dt__ds_records_per_batch(const dt_trial_ctx *c) {
    const dt_ds_state *s = ds_get(c, false);
    return dt_engine_train_batch_size(s->engines[0]);
}

dt_metrics dt__ds_train_batch(dt_trial_ctx *c, const dt_trial_def *def, void *self, int64_t epoch,
                              int64_t batch) {
    dt_ds_state *s = ds_get(c, false);
    dt_engine *e0 = s->engines[0];
    /* a pipeline engine's train_batch consumes the whole global batch in one call */
    int64_t calls = s->auto_accum_disabled || s->pipes[0] ? 1 : micro_per_batch(s);
    dt_batch_iter *it = s->train_it.loader ? &s->train_it : NULL;
    /* the metrics of the calls, averaged per name */
    dt_metrics sum = dt_metrics_empty();
    int64_t count[DT_METRICS_MAX] = {0};
    for (int64_t k = 0; k < calls; k++) {
        dt_metrics m = def->ds_train_batch(self, it, epoch, batch);
        if (m.status != DT_OK) return m;
        for (int i = 0; i < m.n; i++) {
            double prev = 0;
            bool had = dt_metrics_get(&sum, m.m[i].name, &prev);
            if (!dt_metrics_set(&sum, m.m[i].name, prev + m.m[i].value)) continue;
            int j = 0;
            while (j < sum.n && strcmp(sum.m[j].name, m.m[i].name)) j++;
            count[j] = had ? count[j] + 1 : 1;
        }
    }
    for (int j = 0; j < sum.n; j++) sum.m[j].value /= (double)(count[j] ? count[j] : 1);
    if (!s->warned_boundary && !s->pipes[0] &&
        dt_engine_micro_steps(e0) % micro_per_batch(s) != 0) {
        s->warned_boundary = true;
        if (c->rank == 0)
            dt_log(DT_LOG_WARN,
                   "after global batch %lld the first engine is at micro-step %lld, "
                   "not at a gradient accumulation boundary (every %lld): "
                   "ds_train_batch should run dt_engine_forward / backward / step "
                   "once per micro-batch",
                   (long long)batch, (long long)dt_engine_micro_steps(e0),
                   (long long)micro_per_batch(s));
    }
    return sum;
}

/* ---- validation ---- */

dt_status dt__ds_eval_begin(dt_trial_ctx *c) {
    dt_ds_state *s = ds_get(c, false);
    dt_batch_iter *it = &s->val_it;
    it->peeked = NULL;
    it->started = true;
    it->epoch = 0;
    it->taken = 0;
    return it->loader ? dt_loader_start_epoch(it->loader, 0, 0) : DT_OK;
}

/* Is there another validation batch? Looks one batch ahead. With a model-parallel unit the
 * slots agree (a slot without loaders follows the others). */
bool dt__ds_eval_more(dt_trial_ctx *c, int64_t vb, dt_status *st) {
    dt_ds_state *s = ds_get(c, false);
    dt_batch_iter *it = &s->val_it;
    *st = DT_OK;
    if (s->pipes[0]) return vb < s->val_calls; /* agreed when the loaders were attached */
    int64_t more = 0;
    if (it->loader) {
        if (!it->peeked) it->peeked = iter_fetch(it, st);
        more = it->peeked != NULL;
    }
    if (s->has_mpu && c->size > 1) {
        int64_t v[1] = {*st != DT_OK ? -1 : more};
        int64_t lo = v[0];
        dt_status cst = dt_comm_allreduce(c->comm, v, 1, DT_COMM_DTYPE_I64, DT_REDUCE_OP_MAX);
        if (cst == DT_OK)
            cst = dt_comm_allreduce(c->comm, &lo, 1, DT_COMM_DTYPE_I64, DT_REDUCE_OP_MIN);
        if (cst != DT_OK)
            *st = cst;
        else if (lo < 0 && *st == DT_OK)
            *st = dt_error(DT_ERR_STATE, "another slot failed (see its output)");
        more = v[0] > 0;
    }
    return *st == DT_OK && more;
}

dt_metrics dt__ds_evaluate_batch(dt_trial_ctx *c, const dt_trial_def *def, void *self, int64_t vb,
                                 int64_t *weight) {
    dt_ds_state *s = ds_get(c, false);
    dt_batch_iter *it = &s->val_it;
    it->records = 0;
    it->pulled = 0;
    /* a pipeline's stages compute on contexts of their own: evaluation mode there too */
    dt_ctx *pc[DT_TRIAL_MAX_MODELS] = {0};
    bool was[DT_TRIAL_MAX_MODELS] = {0};
    for (int i = 0; i < s->n_engines; i++)
        if (s->pipes[i]) {
            pc[i] = dt_module_ctx(dt_pipe_stage_module(s->pipes[i]));
            was[i] = dt_ctx_training(pc[i]);
            dt_ctx_set_training(pc[i], false);
        }
    dt_metrics m = def->ds_evaluate_batch(self, it->loader ? it : NULL, vb);
    for (int i = 0; i < s->n_engines; i++)
        if (pc[i]) dt_ctx_set_training(pc[i], was[i]);
    *weight = it->records > 0 ? it->records : 1;
    return m;
}

/* ---- checkpoints ---- */

json_t *dt__ds_state_json(const dt_trial_ctx *c) {
    const dt_ds_state *s = ds_get(c, false);
    json_t *j = json_object();
    json_object_set_new(j, "epoch", json_integer(s->train_it.epoch));
    json_object_set_new(j, "taken", json_integer(s->train_it.taken));
    json_object_set_new(j, "engines", json_integer(s->n_engines));
    return j;
}

dt_status dt_save_model_engines(dt_trial_ctx *c, const char *dir) {
    const dt_ds_state *s = ds_get(c, false);
    for (int i = 0; s && i < s->n_engines; i++) {
        char tag[32];
        snprintf(tag, sizeof tag, "model%d", i);
        dt_status st = s->pipes[i] ? dt_pipe_save_checkpoint(s->pipes[i], dir, tag, NULL)
                                   : dt_engine_save_checkpoint(s->engines[i], dir, tag, NULL);
        if (st != DT_OK) return dt_error(st, "saving engine %d: %s", i, dt_last_error());
    }
    return DT_OK;
}

dt_status dt_load_model_engines(dt_trial_ctx *c, const char *dir) {
    const dt_ds_state *s = ds_get(c, false);
    for (int i = 0; s && i < s->n_engines; i++) {
        char tag[32];
        snprintf(tag, sizeof tag, "model%d", i);
        dt_status st = s->pipes[i] ? dt_pipe_load_checkpoint(s->pipes[i], dir, tag, NULL)
                                   : dt_engine_load_checkpoint(s->engines[i], dir, tag, NULL, NULL);
        if (st != DT_OK)
            return dt_error(st, "loading engine %d from %s/%s: %s", i, dir, tag, dt_last_error());
    }
    return DT_OK;
}

/* Every slot: the trial's save hook, or every engine into `dir` (the checkpoint being built). */
dt_status dt__ds_save(dt_trial_ctx *c, const dt_trial_def *def, void *self, const char *dir) {
    return def->save ? def->save(self, dir) : dt_save_model_engines(c, dir);
}

/* Every slot, with the status of reading the rest of the checkpoint: agree on it, then load
 * the engines (or run the trial's load hook) and the stream position. */
dt_status dt__ds_resume(dt_trial_ctx *c, const dt_trial_def *def, void *self, const char *dir,
                        const json_t *state, dt_status st) {
    dt_ds_state *s = ds_get(c, false);
    if ((st = dt_comm_agree(c->comm, st, "reading the checkpoint")) != DT_OK) return st;
    const json_t *j = json_object_get(state, "ds_stream");
    if (!j)
        return dt_error(DT_ERR_FORMAT,
                        "%s: the checkpoint was not written by an engine-based "
                        "trial (no ds_stream in state.json); hint: resume with "
                        "the trial that wrote it",
                        dir);
    int64_t n = json_integer_value(json_object_get(j, "engines"));
    if (n != s->n_engines)
        return dt_error(DT_ERR_FORMAT,
                        "%s: the checkpoint holds %lld engines, the trial wraps %d; "
                        "hint: resume with the same trial code",
                        dir, (long long)n, s->n_engines);
    st = def->load ? def->load(self, dir) : dt_load_model_engines(c, dir);
    if (st != DT_OK) return st;
    s->train_it.epoch = json_integer_value(json_object_get(j, "epoch"));
    s->train_it.taken = json_integer_value(json_object_get(j, "taken"));
    s->train_it.started = false;
    return DT_OK;
}
