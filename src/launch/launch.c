/* launch.c — running one trial of an experiment config: the model directory built once into a
 * trial library, a trial prepared from the config and its hyperparameters (seed, checkpoint
 * directory, resume point, lengths in batches where the config can convert them), run in this
 * process; and the mpirun re-launch of this program for a trial of several slots.
 *
 * `dtrain train` is dt_trial_launch_local (after dt_launch_mpirun when it has several slots);
 * an experiment runner builds the library once and prepares and runs each trial itself. */
#define _GNU_SOURCE
#include "dtrain/core.h"
#include "launch/launch.h"
#include "base/path.h"
#include "dtrain/trialio.h"
#include "trial/trial_iface.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct dt_trial_lib {
    void *handle;
    const dt_trial_def *def;
    char *model_dir; /* NULL if not known */
    char *build_dir; /* the temporary build directory (removed on free), or NULL */
    char *built_so;  /* the object dt_modeldir_build would leave there, or NULL */
};

/* strdup that treats NULL as "no string"; *ok = false on an allocation failure. */
static char *dup_or_null(const char *s, bool *ok) {
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *ok = false;
    return d;
}

static dt_status lib_load(dt_trial_lib *lib, const char *so_path, const char *symbol) {
    lib->def = dt_modeldir_load(so_path, symbol, &lib->handle);
    return lib->def ? DT_OK : dt_last_status();
}

dt_status dt_trial_lib_build(const dt_expconf *cfg, const char *model_dir, dt_trial_lib **out) {
    *out = NULL;
    if (!cfg || !model_dir) return dt_error(DT_ERR_INVALID, "dt_trial_lib_build: NULL argument");
    if (cfg->entry_command)
        return dt_error(DT_ERR_CONFIG,
                        "the entrypoint \"%s\" is a command: it runs under the master (dtrain "
                        "experiment create) or by itself, not as a trial definition; hint: run "
                        "it in %s (without a master it trains with the Core API's local fallback)",
                        cfg->entry_command, model_dir);
    dt_trial_lib *lib = calloc(1, sizeof *lib);
    bool ok = lib != NULL;
    if (lib) {
        lib->model_dir = dup_or_null(model_dir, &ok);
        lib->build_dir = dup_or_null("/tmp/dtrain-build-XXXXXX", &ok);
    }
    if (!ok) {
        dt_trial_lib_free(lib);
        return dt_error(DT_ERR_OOM, "out of memory");
    }
    if (!mkdtemp(lib->build_dir)) {
        dt_status st = dt_error(DT_ERR_IO, "cannot create a build directory: %s", strerror(errno));
        free(lib->build_dir);
        lib->build_dir = NULL;
        dt_trial_lib_free(lib);
        return st;
    }
    char so[PATH_MAX];
    if (asprintf(&lib->built_so, "%s/%s.so", lib->build_dir, cfg->entry_module) < 0) {
        lib->built_so = NULL;
        dt_trial_lib_free(lib);
        return dt_error(DT_ERR_OOM, "out of memory");
    }
    dt_status st = dt_modeldir_build(model_dir, cfg->entry_module, lib->build_dir, so, sizeof so);
    if (st == DT_OK) st = lib_load(lib, so, cfg->entry_symbol);
    if (st != DT_OK) {
        dt_trial_lib_free(lib); /* keeps the message: cleanup raises no error */
        return st;
    }
    *out = lib;
    return DT_OK;
}

dt_status dt_trial_lib_open(const char *so_path, const char *symbol, const char *model_dir,
                            dt_trial_lib **out) {
    *out = NULL;
    if (!so_path || !symbol) return dt_error(DT_ERR_INVALID, "dt_trial_lib_open: NULL argument");
    dt_trial_lib *lib = calloc(1, sizeof *lib);
    bool ok = lib != NULL;
    if (lib) lib->model_dir = dup_or_null(model_dir, &ok);
    if (!ok) {
        dt_trial_lib_free(lib);
        return dt_error(DT_ERR_OOM, "out of memory");
    }
    dt_status st = lib_load(lib, so_path, symbol);
    if (st != DT_OK) {
        dt_trial_lib_free(lib);
        return st;
    }
    *out = lib;
    return DT_OK;
}

const dt_trial_def *dt_trial_lib_def(const dt_trial_lib *lib) {
    return lib ? lib->def : NULL;
}

void dt_trial_lib_free(dt_trial_lib *lib) {
    if (!lib) return;
    if (lib->handle) dlclose(lib->handle);
    if (lib->built_so) unlink(lib->built_so);
    if (lib->build_dir) rmdir(lib->build_dir);
    free(lib->built_so);
    free(lib->build_dir);
    free(lib->model_dir);
    free(lib);
}

/* The checkpoint directory and resume point of `t` from the options (see dt_launch_opts). */
static dt_status place_checkpoints(const dt_expconf *cfg, const dt_launch_opts *o,
                                   dt_prepared_trial *t) {
    char ck[PATH_MAX];
    const char *root =
        cfg->checkpoint_storage.host_path ? cfg->checkpoint_storage.host_path : "checkpoints";
    if (o->checkpoint_dir)
        snprintf(ck, sizeof ck, "%s", o->checkpoint_dir);
    else if (dt_path_within(root, cfg->name, DT_PATH_LEXICAL, ck, sizeof ck) != DT_OK)
        return dt_error(DT_ERR_CONFIG,
                        "name: the experiment's checkpoints go to <host_path>/<name>, and %s; "
                        "hint: choose a name that stays inside it, or pass --checkpoint-dir",
                        dt_last_error());
    if (!(t->checkpoint_dir = strdup(ck))) return dt_error(DT_ERR_OOM, "out of memory");
    if (!o->resume) return DT_OK;
    char resume[PATH_MAX + 512];
    if (!strcmp(o->resume, "latest")) {
        char name[256];
        if (!dt_core_local_latest(ck, name, sizeof name))
            return dt_error(DT_ERR_CONFIG,
                            "--resume latest: no checkpoint in %s (no 'latest' file); hint: train "
                            "without --resume first, or pass a checkpoint directory",
                            ck);
        if (dt_path_within(ck, name, DT_PATH_NOFOLLOW, resume, sizeof resume) != DT_OK)
            return dt_error(DT_ERR_FORMAT,
                            "--resume latest: %s/latest names no checkpoint inside %s (%s); "
                            "hint: write a checkpoint's name in it, or pass the checkpoint's path",
                            ck, ck, dt_last_error());
    } else {
        snprintf(resume, sizeof resume, "%s", o->resume);
    }
    if (!(t->resume_path = strdup(resume))) return dt_error(DT_ERR_OOM, "out of memory");
    return DT_OK;
}

/* The fit options of `t`: the config's lengths and checkpoint settings, the launch options. */
static dt_status fill_fit_opts(const dt_expconf *cfg, const dt_launch_opts *o,
                               dt_prepared_trial *t) {
    dt_fit_opts *f = &t->fit;
    f->max_length = cfg->searcher.max_length;
    /* epochs mean records_per_epoch records when the config gives it; otherwise one pass of
     * the training loader (converted by the fit loop) */
    if (f->max_length.unit == DT_UNIT_RECORDS ||
        (f->max_length.unit == DT_UNIT_EPOCHS && cfg->records_per_epoch > 0)) {
        int64_t max_b = 0;
        if (dt_expconf_length_batches(cfg, f->max_length, "max_length", &max_b) != DT_OK)
            return dt_last_status();
        f->max_length = (dt_length){DT_UNIT_BATCHES, max_b};
    }
    f->validation_period = cfg->min_validation_period;
    f->checkpoint_period = cfg->min_checkpoint_period;
    f->reporting_period = (dt_length){DT_UNIT_BATCHES, cfg->scheduling_unit};
    f->checkpoint_policy = cfg->checkpoint_policy;
    f->checkpoint_dir = t->checkpoint_dir;
    f->latest_checkpoint = t->resume_path;
    f->step_zero_validation = cfg->perform_initial_validation;
    f->test_mode = o->test_mode;
    f->larger_is_better = !cfg->searcher.smaller_is_better;
    f->save_trial_best = (int)cfg->checkpoint_storage.save_trial_best;
    f->save_trial_latest = (int)cfg->checkpoint_storage.save_trial_latest;
    f->progress = o->progress;
    f->quiet = o->quiet;
    f->profile = cfg->profiling_enabled;
    f->profile_begin = cfg->profiling_begin;
    f->profile_end = cfg->profiling_end;
    bool ok = true;
    f->searcher_metric = dup_or_null(cfg->searcher.metric, &ok);
    f->metrics_out = dup_or_null(o->metrics_out, &ok);
    return ok ? DT_OK : dt_error(DT_ERR_OOM, "out of memory");
}

dt_status dt_trial_prepare(const dt_expconf *cfg, const dt_launch_opts *o,
                           dt_prepared_trial **out) {
    *out = NULL;
    if (!cfg || !o) return dt_error(DT_ERR_INVALID, "dt_trial_prepare: NULL argument");
    json_t *hp = NULL;
    if (o->hparams) {
        if (!json_is_object(o->hparams))
            return dt_error(DT_ERR_INVALID,
                            "the trial's hyperparameters must be an object of values");
        hp = json_deep_copy(o->hparams);
        if (!hp) return dt_error(DT_ERR_OOM, "out of memory");
    } else if (dt_expconf_require_const(cfg) != DT_OK ||
               dt_expconf_hparam_values(cfg, &hp) != DT_OK) {
        return dt_last_status();
    }
    dt_prepared_trial *t = calloc(1, sizeof *t);
    if (t) t->config = json_deep_copy(cfg->json);
    if (!t || !t->config || json_object_set(t->config, "hyperparameters", hp)) {
        json_decref(hp);
        dt_prepared_trial_free(t);
        return dt_error(DT_ERR_OOM, "out of memory");
    }
    json_decref(hp);
    t->seed = o->has_seed ? o->seed : cfg->has_experiment_seed ? cfg->experiment_seed : 0;
    dt_status st = place_checkpoints(cfg, o, t);
    if (st == DT_OK) st = fill_fit_opts(cfg, o, t);
    if (st != DT_OK) {
        dt_prepared_trial_free(t);
        return st;
    }
    *out = t;
    return DT_OK;
}

void dt_prepared_trial_free(dt_prepared_trial *t) {
    if (!t) return;
    json_decref(t->config);
    free(t->checkpoint_dir);
    free(t->resume_path);
    free((char *)t->fit.searcher_metric);
    free((char *)t->fit.metrics_out);
    free(t);
}

dt_status dt_trial_apply_env(const dt_expconf *cfg) {
    for (int i = 0; i < cfg->n_env; i++)
        if (setenv(cfg->env_keys[i], cfg->env_values[i], 1))
            return dt_error(DT_ERR_OOM, "cannot set %s: %s", cfg->env_keys[i], strerror(errno));
    return DT_OK;
}

dt_status dt_trial_run_local(const dt_trial_lib *lib, const dt_prepared_trial *t) {
    if (!lib || !t) return dt_error(DT_ERR_INVALID, "dt_trial_run_local: NULL argument");
    dt_fit_opts f = t->fit;
    f.model_dir = lib->model_dir;
    return dt_trainer_fit(lib->def, t->config, t->seed, &f);
}

dt_status dt_trial_launch_local(const dt_expconf *cfg, const char *model_dir,
                                const dt_launch_opts *opts) {
    dt_prepared_trial *t = NULL;
    dt_trial_lib *lib = NULL;
    /* a rank of mpirun dies with it from here on, before the model is built */
    dt_status st = dt_ckpt_watch_launcher();
    if (st == DT_OK) st = dt_trial_prepare(cfg, opts, &t);
    if (st == DT_OK) st = dt_trial_apply_env(cfg);
    if (st == DT_OK) st = dt_trial_lib_build(cfg, model_dir, &lib);
    if (st == DT_OK) st = dt_trial_run_local(lib, t);
    dt_trial_lib_free(lib);
    dt_prepared_trial_free(t);
    return st;
}

/* ---- mpirun ---- */

bool dt_launch_needs_mpirun(int64_t slots) {
    return slots > 1 && !getenv("OMPI_COMM_WORLD_SIZE");
}

void dt_launch_argv_free(char **argv) {
    if (!argv) return;
    for (char **p = argv; *p; p++) free(*p);
    free(argv);
}

/* The most slots any host of `hostfile` has, after checking `slots` fit (DT_OK, *most set). */
static dt_status hostfile_most(const char *hostfile, int slots, int *most) {
    dt_hostfile *h = NULL;
    if (dt_hostfile_load(hostfile, &h) != DT_OK) return dt_last_status();
    dt_status st = dt_hostfile_check(h, hostfile, slots);
    *most = 1;
    for (int i = 0; i < h->n_hosts; i++)
        if (h->slots[i] > *most) *most = h->slots[i];
    dt_hostfile_free(h);
    return st;
}

/* Is argv[i] an option of the launch itself (dropped for the ranks, with its value)? */
static bool launch_option(const char *a, const char *hostfile) {
    return !strcmp(a, "--slots") || (hostfile && !strcmp(a, "--hostfile"));
}

dt_status dt_launch_mpirun_hosts_argv(int slots, const char *hostfile, const char *subcommand,
                                      int argc, char *const *argv, char ***out) {
    *out = NULL;
    if (slots < 1 || !subcommand || argc < 0)
        return dt_error(DT_ERR_INVALID, "dt_launch_mpirun_argv: bad argument");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    /* the ranks of one host share its cores; hosts are taken to have as many as this one */
    int per_host = slots;
    if (hostfile && hostfile_most(hostfile, slots, &per_host) != DT_OK) return dt_last_status();
    if (per_host > slots) per_host = slots;
    int threads = (int)(cores / per_host) > 0 ? (int)(cores / per_host) : 1;
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return dt_error(DT_ERR_IO, "cannot locate the dtrain binary: %s", strerror(errno));
    exe[k] = 0;
    char np[16], omp[48], lpid[64], lhost[300], host[256] = "";
    snprintf(np, sizeof np, "%d", slots);
    snprintf(omp, sizeof omp, "OMP_NUM_THREADS=%d", threads);
    /* mpirun is this process after exec: the ranks (its children) die with it and commit no
     * checkpoint after it (dt_ckpt_watch_launcher) */
    snprintf(lpid, sizeof lpid, "DTRAIN_LAUNCHER_PID=%ld", (long)getpid());
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "localhost");
    snprintf(lhost, sizeof lhost, "DTRAIN_LAUNCHER_HOST=%s", host);
    /* ranks on other hosts start with their MPI daemon's environment (as under ssh): the
     * trial's own variables go with them by name */
    int n_env = 0;
    for (char **e = environ; hostfile && *e; e++) n_env += !strncmp(*e, "DTRAIN_", 7);
    size_t cap = (size_t)argc + 20 + 2 * (size_t)n_env;
    const char **src = calloc(cap, sizeof *src);
    char **av = calloc(cap, sizeof *av);
    char **names = calloc((size_t)n_env + 1, sizeof *names);
    if (!src || !av || !names) {
        free(src);
        free(av);
        free(names);
        return dt_error(DT_ERR_OOM, "out of memory");
    }
    int n = 0, n_names = 0;
    bool ok = true;
    src[n++] = "mpirun";
    src[n++] = "-np";
    src[n++] = np;
    if (hostfile) {
        src[n++] = "--hostfile";
        src[n++] = hostfile;
    }
    if (geteuid() == 0) src[n++] = "--allow-run-as-root";
    if (!hostfile && slots > cores) src[n++] = "--oversubscribe";
    src[n++] = "--tag-output"; /* "[job,rank]<stdout>:": a launcher tells the ranks apart */
    src[n++] = "-x";
    src[n++] = omp;
    src[n++] = "-x";
    src[n++] = lpid;
    if (hostfile) {
        src[n++] = "-x";
        src[n++] = lhost;
        for (char **e = environ; *e && ok; e++) {
            const char *eq = strchr(*e, '=');
            if (strncmp(*e, "DTRAIN_", 7) || !eq || !strncmp(*e, "DTRAIN_LAUNCHER_", 16)) continue;
            ok = (names[n_names] = strndup(*e, (size_t)(eq - *e))) != NULL;
            if (ok) {
                src[n++] = "-x";
                src[n++] = names[n_names++];
            }
        }
    }
    src[n++] = exe;
    src[n++] = subcommand;
    for (int i = 0; i < argc; i++) {
        if (launch_option(argv[i], hostfile)) {
            i++;
            continue;
        }
        src[n++] = argv[i];
    }
    for (int i = 0; i < n && ok; i++) ok = (av[i] = strdup(src[i])) != NULL;
    free(src);
    for (int i = 0; i < n_names; i++) free(names[i]);
    free(names);
    if (!ok) {
        dt_launch_argv_free(av);
        return dt_error(DT_ERR_OOM, "out of memory");
    }
    *out = av;
    return DT_OK;
}

dt_status dt_launch_mpirun_argv(int slots, const char *subcommand, int argc, char *const *argv,
                                char ***out) {
    return dt_launch_mpirun_hosts_argv(slots, NULL, subcommand, argc, argv, out);
}

dt_status dt_launch_mpirun_hosts(int slots, const char *hostfile, const char *subcommand, int argc,
                                 char *const *argv) {
    char **av = NULL;
    if (dt_launch_mpirun_hosts_argv(slots, hostfile, subcommand, argc, argv, &av) != DT_OK)
        return dt_last_status();
    execvp("mpirun", av);
    dt_status st =
        dt_error(DT_ERR_IO, "cannot run mpirun for %d slots: %s; hint: install openmpi-bin", slots,
                 strerror(errno));
    dt_launch_argv_free(av);
    return st;
}

dt_status dt_launch_mpirun(int slots, const char *subcommand, int argc, char *const *argv) {
    return dt_launch_mpirun_hosts(slots, NULL, subcommand, argc, argv);
}
