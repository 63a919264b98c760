/* worker.c — `dtrain worker` (dt_worker_main, master/master.h): the process the master runs
 * for a trial run, one per slot (under mpirun for several).
 *
 * It reads its trial from the environment (trial_env.h), gets the spec from the master (on
 * the chief, shared with every slot), opens the experiment's already built model directory,
 * prepares the trial with the spec's hyperparameters, seed, checkpoint directory and resume
 * point, and runs the fit loop with the master-backed core (a trial of the dsat search runner,
 * whose hyperparameters carry `dsat`, through dt_dsat_trial_run). A command entrypoint is executed
 * instead, in the model directory, with the same environment (it uses the Core API).
 *
 * Exit status: 0 done (or stopped with a checkpoint); 3 the trial called its hyperparameters
 * invalid (DT_ERR_INVALID_HP: early_exit invalid_hp is posted, the searcher is told, no
 * restart); 1 anything else, with the error on stderr (the master keeps it as a log line).
 */
#include "trial_env.h"

#include "dsat/dsat.h"
#include "master/master.h"
#include "launch/launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Tell the master the trial's hyperparameters are invalid (best effort: the exit status
 * says it too). */
static void post_invalid_hp(int64_t trial, int64_t run) {
    dt_client *c = dt_client_new(NULL);
    char path[128];
    snprintf(path, sizeof path, "/api/v1/trials/%lld/early_exit", (long long)trial);
    json_t *body = json_pack("{s:I,s:s}", "run", (json_int_t)run, "reason", "invalid_hp");
    if (!c || dt_client_call(c, "POST", path, body, NULL, NULL) != DT_OK)
        fprintf(stderr, "warning: cannot tell the master about the invalid hyperparameters: %s\n",
                dt_last_error());
    json_decref(body);
    dt_client_free(c);
}

/* Replace this process with the command entrypoint, run by sh in the model directory.
 * Returns only on failure (DT_ERR_IO). */
static dt_status exec_command(const char *cmd, const char *model_dir) {
    if (model_dir && chdir(model_dir) != 0)
        return dt_error(DT_ERR_IO, "cannot enter the model directory %s", model_dir);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    return dt_error(DT_ERR_IO, "cannot run the entrypoint command \"%s\" with /bin/sh", cmd);
}

/* Prepare and run the trial of `spec`; its status. */
static dt_status run_spec(const json_t *spec, int64_t trial, int64_t run, dt_comm *world) {
    const json_t *config = json_object_get(spec, "config");
    const char *model_dir = json_string_value(json_object_get(spec, "model_dir"));
    const char *so_path = json_string_value(json_object_get(spec, "so_path"));
    const char *ckdir = json_string_value(json_object_get(spec, "checkpoint_dir"));
    dt_expconf *cfg = NULL;
    dt_status st = dt_expconf_from_json(config, DT_EXPCONF_MAX_LENGTH_OPTIONAL, &cfg);
    if (st != DT_OK) return st;
    if ((st = dt_trial_apply_env(cfg)) != DT_OK) goto out;
    if (cfg->entry_command) {
        dt_comm_finalize(world); /* the command starts its own */
        exec_command(cfg->entry_command, model_dir);
        fprintf(stderr, "error: %s\n", dt_last_error());
        _exit(1); /* (its communicator is gone: nothing more to do in this process) */
    }
    if (!so_path || !ckdir) {
        st = dt_error(DT_ERR_FORMAT, "the spec of trial %lld lacks so_path or checkpoint_dir",
                      (long long)trial);
        goto out;
    }
    dt_trial_lib *lib = NULL;
    dt_prepared_trial *pt = NULL;
    dt_launch_opts lo = {
        .hparams = json_object_get(spec, "hparams"),
        .checkpoint_dir = ckdir,
        .resume = json_string_value(json_object_get(spec, "resume")),
        .has_seed = json_is_integer(json_object_get(spec, "seed")),
        .seed = (uint64_t)json_integer_value(json_object_get(spec, "seed")),
        .quiet = true,
    };
    st = dt_trial_lib_open(so_path, cfg->entry_symbol, model_dir, &lib);
    if (st == DT_OK) st = dt_trial_prepare(cfg, &lo, &pt);
    dt_core *core = NULL;
    if (st == DT_OK) {
        dt_core_master_opts mo = {.trial_id = trial,
                                  .run = run,
                                  .chief = dt_comm_rank(world) == 0,
                                  .checkpoint_dir = pt->checkpoint_dir};
        if (!(core = dt_core_master_new(&mo))) st = dt_last_status();
    }
    if (st == DT_OK) {
        pt->fit.core = core;
        /* a trial of the dsat search runner measures itself (docs/dsat.md) */
        bool dsat = false;
        dt_dsat_run how;
        st = dt_dsat_run_from_hparams(lo.hparams, &dsat, &how);
        if (st == DT_OK)
            st = dsat ? dt_dsat_trial_run(lib, pt, NULL, NULL) : dt_trial_run_local(lib, pt);
    }
    DT_KEEP_ERROR(dt_core_free(core); dt_prepared_trial_free(pt); dt_trial_lib_free(lib));
out:
    DT_KEEP_ERROR(dt_expconf_free(cfg));
    return st;
}

int dt_worker_main(void) {
    bool from_master = false;
    int64_t trial = 0, run = 0;
    dt_status st = dt__trial_env(&from_master, &trial, &run);
    if (st == DT_OK && !from_master)
        st = dt_error(DT_ERR_CONFIG, "dtrain worker runs a trial for the master and needs "
                                     "DTRAIN_TRIAL_ID and DTRAIN_TRIAL_RUN; hint: start trials "
                                     "with `dtrain experiment create`, or train locally with "
                                     "`dtrain train`");
    dt_comm *world = NULL;
    if (st == DT_OK) st = dt_comm_init(&world);
    json_t *spec = NULL;
    if (st == DT_OK) st = dt__trial_spec(world, trial, run, &spec);
    if (st == DT_OK) st = run_spec(spec, trial, run, world);
    json_decref(spec);
    bool chief = !world || dt_comm_rank(world) == 0;
    if (world) DT_KEEP_ERROR(dt_comm_finalize(world));
    if (st == DT_OK) return 0;
    if (st == DT_ERR_INVALID_HP) {
        fprintf(stderr, "trial %lld: invalid hyperparameters: %s\n", (long long)trial,
                dt_last_error());
        if (chief) post_invalid_hp(trial, run);
        return DT_WORKER_EXIT_INVALID_HP;
    }
    fprintf(stderr, "error: %s\n", dt_last_error());
    return 1;
}
