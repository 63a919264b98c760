/* model.c — dsat's memory model and the DeepSpeed config of a knob set.
 *
 * The model predicts one slot's peak device bytes for a knob set from what the profile trial
 * measured (dt_dsat_profile), following where the engine keeps each byte (docs/engine.md,
 * "Where the state lives"; W slots, n parameters, s = the optimizer's state bytes per
 * parameter, read from the engine):
 *
 *   parameters   4n (fp32 whatever the precision: bf16 is autocast, fp16 runs on f32); at
 *                stage 3 the 4n/W partition plus what is gathered at once (persistent groups
 *                and the largest prefetch run, from the module tree)
 *   gradients    4n at stages 0-1; from stage 2 the 4n/W partition (on the host with offload)
 *                plus the live gradient window, up to one bucket (reduce_bucket_size + the
 *                largest group), and the bucket's pack buffer of the same size
 *   optimizer    s*n at stage 0; from stage 1 an fp32 master and the moments, (4 + s) n/W, on
 *                the host with offload_optimizer (the reference counts the master only for
 *                fp16; the engine keeps it at every precision from stage 1)
 *   activations  max(floor, base + mbs x per example, hw base + 2 x mbs x hw per example):
 *                the category's peak measured at micro-batches 1 and 2, and the first step's
 *                blocks: the arena opens a block when an allocation does not fit in the
 *                current one, so each tail it leaves is smaller than the allocation after it
 *                and the blocks hold at most about twice what the examples use
 *   other        the profile's "other" peak plus its growth per example (GEMM operand buffers
 *                and scratch grow with the rows)
 *
 * dt_dsat_ds_config writes a knob set into the user's DeepSpeed JSON. */
#include "dsat/dsat.h"

#include <string.h>

#define DEFAULT_BUCKET 500000000LL /* reduce_bucket_size's default (elements) */

static int64_t max64(int64_t a, int64_t b) {
    return a > b ? a : b;
}
static int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}
static int64_t cdiv(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

dt_dsat_knobs dt_dsat_knobs_default(void) {
    return (dt_dsat_knobs){.zero_stage = 1,
                           .mbs = 1,
                           .overlap_comm = -1,
                           .reduce_scatter = -1,
                           .contiguous_gradients = -1,
                           .allgather_partitions = -1};
}

int64_t dt_dsat_model_state_bytes(const dt_dsat_profile *p, const dt_dsat_knobs *k) {
    int64_t W = p->slots > 1 ? p->slots : 1, n = p->params, T = p->trainable_params;
    int64_t s = p->optimizer_bytes_per_param, part = cdiv(T, W);
    bool off = k->offload_optimizer && k->zero_stage >= 1;
    int64_t rbs = k->reduce_bucket_size > 0   ? k->reduce_bucket_size
                  : p->reduce_bucket_size > 0 ? p->reduce_bucket_size
                                              : DEFAULT_BUCKET;
    int64_t bucket = 4 * min64(rbs + max64(p->largest_group, 0), T);
    int64_t params = 4 * n, grads = 4 * T, optim = s * T, comm = 0;
    if (k->zero_stage >= 1) optim = off ? 0 : (4 + s) * part;
    if (k->zero_stage >= 2) {
        grads = (off ? 0 : 4 * part) + bucket; /* the partition and the live window */
        comm = bucket;                         /* the bucket's pack buffer */
    }
    if (k->zero_stage >= 3) /* the partition and what is gathered at once */
        params =
            4 * cdiv(n, W) + 4 * min64(n, p->stage3_live_params > 0 ? p->stage3_live_params : n);
    return params + grads + optim + comm;
}

int64_t dt_dsat_activation_bytes(const dt_dsat_profile *p, int64_t mbs) {
    mbs = max64(mbs, 1);
    int64_t hw = p->activation_hw_per_example,
            hw_base = p->activation_high_water - p->micro_batch * hw;
    return max64(max64(p->activation_floor, p->activation_base + mbs * p->activation_per_example),
                 hw > 0 ? hw_base + 2 * mbs * hw : 0);
}

/* The "other" category at mbs: the profile's peak and its growth above the profiled size. */
static int64_t other_bytes(const dt_dsat_profile *p, int64_t mbs) {
    return p->other_bytes + max64(mbs - max64(p->micro_batch, 1), 0) * p->other_per_example;
}

int64_t dt_dsat_predict_bytes(const dt_dsat_profile *p, const dt_dsat_knobs *k) {
    return dt_dsat_model_state_bytes(p, k) + dt_dsat_activation_bytes(p, k->mbs) +
           other_bytes(p, k->mbs);
}

int64_t dt_dsat_max_mbs(const dt_dsat_profile *p, const dt_dsat_knobs *k) {
    if (p->activation_per_example <= 0 && p->activation_hw_per_example <= 0) return 1;
    dt_dsat_knobs t = *k;
    t.mbs = 1;
    if (dt_dsat_predict_bytes(p, &t) > p->device_budget) return 1;
    /* the prediction grows with the micro-batch: the largest that fits, by bisection */
    int64_t lo = 1, hi = 2;
    for (t.mbs = hi; hi < ((int64_t)1 << 40) && dt_dsat_predict_bytes(p, &t) <= p->device_budget;
         t.mbs = hi)
        lo = hi, hi *= 2;
    while (hi - lo > 1) {
        t.mbs = lo + (hi - lo) / 2;
        *(dt_dsat_predict_bytes(p, &t) <= p->device_budget ? &lo : &hi) = t.mbs;
    }
    return lo;
}

/* ---- the DeepSpeed config of a knob set ---- */

static dt_status check_knobs(const dt_dsat_knobs *k, int slots) {
    if (!k || k->zero_stage < 0 || k->zero_stage > 3 || k->mbs < 1 || slots < 1 ||
        k->reduce_bucket_size < 0 || k->allgather_bucket_size < 0)
        return dt_error(DT_ERR_INVALID,
                        "dsat: knobs out of range (stage %d, micro-batch %lld, %d slots); hint: "
                        "stage 0..3, micro-batch and slots >= 1, bucket sizes >= 0",
                        k ? k->zero_stage : -1, k ? (long long)k->mbs : 0LL, slots);
    return DT_OK;
}

/* A tri-state knob into `z` (-1: the user's value stays). */
static void set_flag(json_t *z, const char *key, int v) {
    if (v >= 0) json_object_set_new(z, key, json_boolean(v != 0));
}

/* The user's gradient_accumulation_steps when it is an integer >= 1, else 1. */
static int64_t user_gas(const json_t *user) {
    const json_t *g = json_object_get(user, "gradient_accumulation_steps");
    double v = json_is_number(g) ? json_number_value(g) : 1;
    return v >= 1 && v == (double)(int64_t)v ? (int64_t)v : 1;
}

json_t *dt_dsat_ds_config(const json_t *user, const dt_dsat_knobs *k, int slots) {
    if (user && !json_is_object(user)) {
        dt_error(DT_ERR_CONFIG, "dsat: the DeepSpeed config must be an object");
        return NULL;
    }
    if (check_knobs(k, slots) != DT_OK) return NULL;
    json_t *c = user ? json_deep_copy(user) : json_object();
    json_t *z = c ? json_object_get(c, "zero_optimization") : NULL;
    z = json_is_object(z) ? json_deep_copy(z) : json_object(); /* the old boolean form too */
    if (!c || !z) {
        json_decref(c);
        json_decref(z);
        dt_error(DT_ERR_OOM, "dsat: out of memory");
        return NULL;
    }
    /* DeepSpeed's own autotuner section and the old top-level allgather size go */
    json_object_del(c, "autotuning");
    json_object_del(c, "allgather_size");
    int64_t gas = user_gas(user);
    json_object_set_new(c, "train_micro_batch_size_per_gpu", json_integer(k->mbs));
    json_object_set_new(c, "gradient_accumulation_steps", json_integer(gas));
    json_object_set_new(c, "train_batch_size", json_integer(k->mbs * gas * slots));
    json_object_set_new(z, "stage", json_integer(k->zero_stage));
    if (k->reduce_bucket_size > 0)
        json_object_set_new(z, "reduce_bucket_size", json_integer(k->reduce_bucket_size));
    if (k->allgather_bucket_size > 0)
        json_object_set_new(z, "allgather_bucket_size", json_integer(k->allgather_bucket_size));
    set_flag(z, "overlap_comm", k->overlap_comm);
    set_flag(z, "reduce_scatter", k->reduce_scatter);
    set_flag(z, "contiguous_gradients", k->contiguous_gradients);
    set_flag(z, "allgather_partitions", k->allgather_partitions);
    /* offload where the stage allows it: the optimizer from stage 1, parameters at stage 3 */
    json_object_del(z, "cpu_offload");
    json_object_del(z, "cpu_offload_param");
    if (k->offload_optimizer && k->zero_stage >= 1)
        json_object_set_new(z, "offload_optimizer", json_pack("{s:s}", "device", "cpu"));
    if (k->zero_stage == 0) json_object_del(z, "offload_optimizer");
    if (k->zero_stage < 3) json_object_del(z, "offload_param");
    json_object_set_new(c, "zero_optimization", z);
    return c;
}

/* ---- trial hyperparameters ---- */

json_t *dt_dsat_trial_hparams(const json_t *user_hparams, const json_t *user_ds,
                              const dt_dsat_knobs *k, int slots, const dt_dsat_run *run) {
    if (!run || run->start_profile_step < 1 || run->end_profile_step < run->start_profile_step) {
        dt_error(DT_ERR_INVALID, "dsat: the profile steps must satisfy 1 <= start <= end");
        return NULL;
    }
    json_t *ds = dt_dsat_ds_config(user_ds, k, slots);
    if (!ds) return NULL;
    /* keys of the user's config that the knob set removes are overridden with null, which
     * the config parse reads as absent */
    json_t *z = json_object_get(ds, "zero_optimization");
    const json_t *uz = json_object_get(user_ds, "zero_optimization");
    const char *gone[] = {"offload_optimizer", "offload_param", "cpu_offload", "cpu_offload_param"};
    for (size_t i = 0; i < sizeof gone / sizeof *gone; i++)
        if (json_is_object(uz) && json_object_get(uz, gone[i]) && !json_object_get(z, gone[i]))
            json_object_set_new(z, gone[i], json_null());
    if (json_object_get(user_ds, "autotuning")) json_object_set_new(ds, "autotuning", json_null());
    if (json_object_get(user_ds, "allgather_size"))
        json_object_set_new(ds, "allgather_size", json_null());
    json_t *hp = user_hparams ? json_deep_copy(user_hparams) : json_object();
    json_t *d = json_pack("{s:s,s:i,s:i}", "mode",
                          run->mode == DT_DSAT_PROFILE ? "profile" : "trial", "start_profile_step",
                          run->start_profile_step, "end_profile_step", run->end_profile_step);
    if (d && run->predicted_bytes > 0)
        json_object_set_new(d, "predicted_bytes", json_integer(run->predicted_bytes));
    if (!hp || !d || json_object_set_new(hp, "overwrite_deepspeed_args", ds) ||
        json_object_set_new(hp, "dsat", d)) {
        json_decref(hp);
        dt_error(DT_ERR_OOM, "dsat: out of memory");
        return NULL;
    }
    return hp;
}

dt_status dt_dsat_run_from_hparams(const json_t *hparams, bool *is_dsat, dt_dsat_run *out) {
    *is_dsat = false;
    const json_t *d = json_object_get(hparams, "dsat");
    if (!d) return DT_OK;
    const char *mode = json_string_value(json_object_get(d, "mode"));
    const json_t *s = json_object_get(d, "start_profile_step");
    const json_t *e = json_object_get(d, "end_profile_step");
    bool profile = mode && !strcmp(mode, "profile");
    if (!json_is_object(d) || !mode || (!profile && strcmp(mode, "trial")))
        return dt_error(DT_ERR_CONFIG, "hyperparameters.dsat.mode must be \"profile\" or "
                                       "\"trial\"; hint: dsat trials are made by `dtrain dsat`");
    int64_t a = json_is_integer(s) ? json_integer_value(s) : profile ? 1 : 0;
    int64_t b = json_is_integer(e) ? json_integer_value(e) : profile ? 1 : 0;
    if (a < 1 || b < a || b > 1000000)
        return dt_error(DT_ERR_CONFIG,
                        "hyperparameters.dsat: start_profile_step %lld and end_profile_step "
                        "%lld must be integers with 1 <= start <= end",
                        (long long)a, (long long)b);
    const json_t *pb = json_object_get(d, "predicted_bytes");
    *out = (dt_dsat_run){.mode = profile ? DT_DSAT_PROFILE : DT_DSAT_TRIAL,
                         .start_profile_step = (int)a,
                         .end_profile_step = (int)b,
                         .predicted_bytes = json_is_integer(pb) ? json_integer_value(pb) : 0};
    *is_dsat = true;
    return DT_OK;
}
