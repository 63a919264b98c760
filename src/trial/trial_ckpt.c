/* trial_ckpt.c — what a trial's checkpoint holds, written and read back: the fit loop (fit.c)
 * decides when and where a checkpoint is made, this file what goes into it.
 *
 * Contents (docs/checkpoints.md):
 *   model.safetensors, model_1.safetensors, ...   wrapped models' parameters by name
 *   optimizer.safetensors                          "opt<i>.<state name>" for every optimiser
 *   state.json                                     position, RNG, optimiser steps and lr,
 *                                                  schedules, loss scaler, callbacks, the fit
 *                                                  loop's record (records trained, last/best
 *                                                  validation)
 *   (anything the trial's save hook writes)
 * and in metadata.json: steps_completed, framework, hparams. Engine-based trials add their
 * engines' shards (ds_trial.c) and the stream position ("ds_stream") around these. */
#include "trial_impl.h"

#include "dtrain/trialio.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATE_FORMAT 1


json_t *dt_metrics_to_json(const dt_metrics *m) {
    json_t *o = json_object();
    for (int i = 0; i < m->n; i++)
        json_object_set_new(o, m->m[i].name,
                            isfinite(m->m[i].value) ? json_real(m->m[i].value) : json_null());
    return o;
}

json_t *dt__trial_ckpt_state(dt_trial_ctx *c, const dt__fit_record *fit, int n_cb,
                             const dt_callback *cb, const char *const *cb_name) {
    json_t *state = json_object();
    json_object_set_new(state, "format_version", json_integer(STATE_FORMAT));
    json_object_set_new(state, "batches_trained", json_integer(c->batches_trained));
    json_object_set_new(state, "records_trained", json_integer(fit->records_trained));
    json_object_set_new(state, "optimizer_steps", json_integer(c->optimizer_steps));
    json_object_set_new(state, "trial_seed", json_integer((json_int_t)c->seed));
    dt_rng *rng = dt_ctx_rng(c->rt);
    json_t *jr = json_object();
    json_object_set_new(jr, "seed", json_integer((json_int_t)rng->seed));
    json_object_set_new(jr, "counter", json_integer((json_int_t)rng->counter));
    json_object_set_new(state, "rng", jr);
    json_t *jo = json_array();
    for (int i = 0; i < c->n_optims; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "steps", json_integer(dt_optim_step_count(c->optims[i].opt)));
        json_object_set_new(e, "lr", json_real(dt_optim_lr(c->optims[i].opt)));
        json_array_append_new(jo, e);
    }
    json_object_set_new(state, "optimizers", jo);
    json_t *js = json_array();
    for (int i = 0; i < c->n_scheds; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "last_step", json_integer(dt_sched_last_step(c->scheds[i].sched)));
        json_object_set_new(e, "units", json_integer(c->scheds[i].units));
        json_array_append_new(js, e);
    }
    json_object_set_new(state, "schedulers", js);
    json_t *jc = json_object();
    for (int i = 0; i < n_cb; i++)
        if (cb[i].state_dict) json_object_set_new(jc, cb_name[i], cb[i].state_dict(cb[i].self));
    json_object_set_new(state, "callbacks", jc);
    if (c->scaler) {
        dt_loss_scaler_state ls;
        dt_loss_scaler_get_state(c->scaler, &ls);
        json_t *jl = json_object();
        json_object_set_new(jl, "scale", json_real(ls.scale));
        json_object_set_new(jl, "cur_iter", json_integer(ls.cur_iter));
        json_object_set_new(jl, "last_overflow_iter", json_integer(ls.last_overflow_iter));
        json_object_set_new(jl, "cur_hysteresis", json_integer(ls.cur_hysteresis));
        json_object_set_new(state, "loss_scaler", jl);
    }
    json_object_set_new(state, "skipped_steps", json_integer(c->skipped_steps));
    json_object_set_new(state, "last_validation", dt_metrics_to_json(&fit->last_val));
    json_object_set_new(state, "last_validation_batch", json_integer(fit->last_val_batch));
    if (fit->have_best) json_object_set_new(state, "best_validation", json_real(fit->best));
    return state;
}

dt_status dt__trial_ckpt_write(dt_ckpt_writer *w, dt_trial_ctx *c, const dt_trial_def *def,
                               void *self, const json_t *state) {
    dt_optimizer *optims[DT_TRIAL_MAX_OPTIMS];
    for (int i = 0; i < c->n_optims; i++) optims[i] = c->optims[i].opt;
    dt_status st = dt__params_save(dt_ckpt_dir(w), c->rt, c->n_models, c->models, c->n_optims,
                                   optims);
    if (st == DT_OK) st = dt_ckpt_add_json(w, "state.json", state);
    /* (engine-based trials ran their save on every slot above) */
    if (st == DT_OK && def->save && !def->ds_train_batch) st = def->save(self, dt_ckpt_dir(w));
    return st;
}

json_t *dt__trial_ckpt_metadata(const dt_trial_ctx *c) {
    json_t *extra = json_object();
    json_object_set_new(extra, "steps_completed", json_integer(c->batches_trained));
    json_object_set_new(extra, "framework", json_string("dtrain"));
    json_t *hp = json_object_get(c->config, "hyperparameters");
    if (hp)
        json_object_set(extra, "hparams", hp);
    else
        json_object_set_new(extra, "hparams", json_object());
    return extra;
}

dt_status dt__trial_ckpt_restore_fit(const json_t *state, dt__fit_record *fit, int n_cb,
                                     const dt_callback *cb, const char *const *cb_name) {
    dt_status st = DT_OK;
    json_t *jc = json_object_get(state, "callbacks");
    for (int i = 0; i < n_cb && st == DT_OK; i++)
        if (cb[i].load_state_dict && json_object_get(jc, cb_name[i]))
            st = cb[i].load_state_dict(cb[i].self, json_object_get(jc, cb_name[i]));
    fit->records_trained = json_integer_value(json_object_get(state, "records_trained"));
    fit->last_val_batch = json_integer_value(json_object_get(state, "last_validation_batch"));
    json_t *lv = json_object_get(state, "last_validation");
    const char *k;
    json_t *v;
    json_object_foreach(lv, k, v) dt_metrics_set(&fit->last_val, k, json_number_value(v));
    if (json_is_number(json_object_get(state, "best_validation"))) {
        fit->have_best = true;
        fit->best = json_number_value(json_object_get(state, "best_validation"));
    }
    return st;
}

/* Load a checkpoint into a trial whose init has run: weights, optimiser state, schedules, RNG
 * and (if state_out) the state.json for the fit loop. Nothing is changed on error. */
dt_status dt__trial_resume(dt_trial_ctx *c, const dt_trial_def *def, void *self, const char *path,
                           json_t **state_out) {
    dt_ckpt *ck = dt_ckpt_open(path);
    if (!ck) /* an engine-based trial's slots agree on the failure */
        return def->ds_train_batch ? dt__ds_resume(c, def, self, path, NULL, dt_last_status())
                                   : dt_last_status();
    json_error_t je;
    const char *sp = dt_ckpt_path(ck, "state.json");
    json_t *state = sp ? json_load_file(sp, 0, &je) : NULL;
    dt_status st = DT_OK;
    if (!state) {
        st = dt_error(DT_ERR_FORMAT, "%s: no readable state.json%s%s", path, sp ? ": " : "",
                      sp ? je.text : "");
        goto done;
    }
    if (json_integer_value(json_object_get(state, "format_version")) > STATE_FORMAT) {
        st = dt_error(DT_ERR_FORMAT,
                      "%s: state.json format %lld is newer than this dtrain "
                      "supports (%d); hint: resume with a newer dtrain",
                      path, (long long)json_integer_value(json_object_get(state, "format_version")),
                      STATE_FORMAT);
        goto done;
    }
    json_t *jo = json_object_get(state, "optimizers"), *js = json_object_get(state, "schedulers");
    if ((int)json_array_size(jo) != c->n_optims || (int)json_array_size(js) != c->n_scheds) {
        st = dt_error(DT_ERR_FORMAT,
                      "%s: the checkpoint has %zu optimisers and %zu schedules, the "
                      "trial wraps %d and %d; hint: resume with the same trial code",
                      path, json_array_size(jo), json_array_size(js), c->n_optims, c->n_scheds);
        goto done;
    }
    /* Read everything into the live buffers. A failure after this point leaves the trial in an
     * unspecified state, so the caller aborts the run (nothing on disk changes). */
    dt_optimizer *optims[DT_TRIAL_MAX_OPTIMS];
    for (int i = 0; i < c->n_optims; i++) optims[i] = c->optims[i].opt;
    st = dt__params_load(dt_ckpt_path(ck, NULL), c->rt, c->n_models, c->models, c->n_optims,
                         optims);
    for (int i = 0; st == DT_OK && i < c->n_optims; i++) {
        json_t *e = json_array_get(jo, (size_t)i);
        dt_optim_set_step_count(optims[i], json_integer_value(json_object_get(e, "steps")));
    }
    for (int i = 0; st == DT_OK && i < c->n_scheds; i++) {
        json_t *e = json_array_get(js, (size_t)i);
        dt_sched_set_last_step(c->scheds[i].sched,
                               json_integer_value(json_object_get(e, "last_step")));
        c->scheds[i].units = json_integer_value(json_object_get(e, "units"));
    }
    if (st == DT_OK) {
        /* the optimiser lr as saved wins over the schedule's recomputation */
        for (int i = 0; i < c->n_optims; i++)
            dt_optim_set_lr(c->optims[i].opt, (float)json_number_value(json_object_get(
                                                  json_array_get(jo, (size_t)i), "lr")));
        json_t *jr = json_object_get(state, "rng");
        dt_rng *rng = dt_ctx_rng(c->rt);
        rng->seed = (uint64_t)json_integer_value(json_object_get(jr, "seed"));
        rng->counter = (uint64_t)json_integer_value(json_object_get(jr, "counter"));
        json_t *jl = json_object_get(state, "loss_scaler");
        if (c->scaler && jl) {
            dt_loss_scaler_state ls = {
                .scale = json_number_value(json_object_get(jl, "scale")),
                .cur_iter = json_integer_value(json_object_get(jl, "cur_iter")),
                .last_overflow_iter = json_integer_value(json_object_get(jl, "last_overflow_iter")),
                .cur_hysteresis = (int)json_integer_value(json_object_get(jl, "cur_hysteresis")),
            };
            st = dt_loss_scaler_set_state(c->scaler, &ls);
        } else if (c->scaler || jl) {
            st =
                dt_error(DT_ERR_FORMAT,
                         "%s: the checkpoint was %s fp16 loss scaling but the trial "
                         "now runs %s it; hint: keep use_amp as when it was saved",
                         path, jl ? "saved with" : "saved without", c->scaler ? "with" : "without");
        }
        c->skipped_steps = json_integer_value(json_object_get(state, "skipped_steps"));
        c->batches_trained = json_integer_value(json_object_get(state, "batches_trained"));
        c->optimizer_steps = json_integer_value(json_object_get(state, "optimizer_steps"));
        if (st == DT_OK && def->load && !def->ds_train_batch)
            st = def->load(self, dt_ckpt_path(ck, NULL));
    }
done:
    /* engine-based: every slot loads its engines (collective) once all could read the rest */
    if (def->ds_train_batch) st = dt__ds_resume(c, def, self, dt_ckpt_path(ck, NULL), state, st);
    if (st == DT_OK && state_out)
        *state_out = state;
    else
        json_decref(state);
    dt_ckpt_close(ck);
    return st;
}

void *dt_trial_load_from_checkpoint(const dt_trial_def *def, const char *path, const json_t *config,
                                    dt_trial_ctx **ctx_out) {
    *ctx_out = NULL;
    if (!def || !def->init) {
        dt_error(DT_ERR_INVALID, "load_from_checkpoint: the trial definition has no init");
        return NULL;
    }
    json_t *cfg = NULL;
    uint64_t seed = 0;
    dt_ckpt *ck = dt_ckpt_open(path); /* verifies the files; read the hparams and seed */
    if (!ck) return NULL;
    if (config) {
        cfg = json_deep_copy(config);
    } else {
        cfg = json_object();
        const json_t *hp = json_object_get(dt_ckpt_metadata(ck), "hparams");
        json_object_set_new(cfg, "hyperparameters", hp ? json_deep_copy(hp) : json_object());
    }
    json_error_t je;
    const char *sp = dt_ckpt_path(ck, "state.json");
    json_t *state = sp ? json_load_file(sp, 0, &je) : NULL;
    seed = (uint64_t)json_integer_value(json_object_get(state, "trial_seed"));
    json_decref(state);
    dt_ckpt_close(ck);
    dt_trial_ctx *c = dt_trial_ctx_new(cfg, seed);
    json_decref(cfg);
    if (!c) return NULL;
    void *self = def->init(c);
    if (!self) {
        dt_trial_ctx_free(c);
        return NULL;
    }
    if (dt__trial_resume(c, def, self, path, NULL) != DT_OK) {
        dt_status st = dt_last_status();
        DT_KEEP_ERROR({
            if (def->free) def->free(self);
            dt_trial_ctx_free(c);
        });
        dt_error(st, "loading %s: %s", path, dt_last_error());
        return NULL;
    }
    /* ready for inference: no gradients, evaluation mode */
    dt_set_grad_enabled(c->rt, false);
    dt_ctx_set_training(c->rt, false);
    *ctx_out = c;
    return self;
}
