/* train.c — `dtrain train CONFIG.yaml MODEL_DIR [options]`: local training of one trial.
 *
 * Loads and validates the experiment config, applies its environment variables, builds the
 * model directory into a shared object, loads the trial named by the entrypoint and runs the
 * Trainer's fit loop with checkpoints under the checkpoint directory. */
#define _GNU_SOURCE
#include "cli.h"

#include "dtrain/config.h"
#include "dtrain/runner.h"
#include "dtrain/trial.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void train_usage(FILE *f) {
    fprintf(
        f, "usage: dtrain train CONFIG.yaml MODEL_DIR [options]\n"
           "options:\n"
           "  --max-length L        train for L: 100b (batches), 5e (epochs), 20000r (records);\n"
           "                        overrides searcher.max_length\n"
           "  --checkpoint-dir DIR  where checkpoints go (default: checkpoint_storage.host_path/\n"
           "                        <name>, else ./checkpoints/<name>)\n"
           "  --resume latest|PATH  continue from the latest checkpoint in the checkpoint dir, or\n"
           "                        from a checkpoint directory\n"
           "  --test-mode           train and validate one batch, then checkpoint\n"
           "  --seed N              trial seed (default: reproducibility.experiment_seed, else 0)\n"
           "  --metrics-out FILE    write metrics as JSON lines\n"
           "  --slots N             train data-parallel on N processes (mpirun; default:\n"
           "                        resources.slots_per_trial), one thread each unless the\n"
           "                        cores allow more\n"
           "  --quiet               no progress output\n");
}

static void fail(const char *what) {
    fprintf(stderr, "dtrain train: error: %s%s\n", what, dt_last_error());
}

/* Read the name stored in DIR/latest. */
static bool read_latest(const char *dir, char *out, size_t n) {
    char p[PATH_MAX + 16];
    snprintf(p, sizeof p, "%s/latest", dir);
    FILE *f = fopen(p, "r");
    if (!f) return false;
    bool ok = fgets(out, (int)n, f) != NULL;
    fclose(f);
    if (ok) out[strcspn(out, "\n")] = 0;
    return ok && out[0];
}

int dt_cli_train(int argc, char **argv) {
    const char *cfg_path = NULL, *model_dir = NULL, *max_len = NULL, *ckpt_dir = NULL;
    const char *resume = NULL, *metrics_out = NULL, *seed_s = NULL, *slots_s = NULL;
    bool test_mode = false, quiet = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char **slot = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            train_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--test-mode")) {
            test_mode = true;
        } else if (!strcmp(a, "--quiet")) {
            quiet = true;
        } else if (!strcmp(a, "--max-length"))
            slot = &max_len;
        else if (!strcmp(a, "--checkpoint-dir"))
            slot = &ckpt_dir;
        else if (!strcmp(a, "--resume"))
            slot = &resume;
        else if (!strcmp(a, "--metrics-out"))
            slot = &metrics_out;
        else if (!strcmp(a, "--seed"))
            slot = &seed_s;
        else if (!strcmp(a, "--slots"))
            slot = &slots_s;
        else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "dtrain train: unknown option '%s'\n", a);
            train_usage(stderr);
            return 2;
        } else if (!cfg_path)
            cfg_path = a;
        else if (!model_dir)
            model_dir = a;
        else {
            fprintf(stderr, "dtrain train: unexpected argument '%s'\n", a);
            train_usage(stderr);
            return 2;
        }
        if (slot) {
            if (!v) {
                fprintf(stderr, "dtrain train: %s needs a value\n", a);
                return 2;
            }
            *slot = v;
            i++;
        }
    }
    if (!cfg_path || !model_dir) {
        train_usage(stderr);
        return 2;
    }
    dt_expconf *cfg = NULL;
    if (dt_expconf_load_file(cfg_path, max_len ? DT_EXPCONF_MAX_LENGTH_OPTIONAL : 0, &cfg) !=
        DT_OK) {
        fail("");
        return 1;
    }
    /* several slots: re-run this command under mpirun, once per slot */
    int64_t slots = cfg->slots_per_trial;
    if (slots_s) {
        char *end;
        slots = strtoll(slots_s, &end, 10);
        if (*end || slots < 1) {
            fprintf(stderr, "dtrain train: --slots needs a positive integer, got '%s'\n", slots_s);
            dt_expconf_free(cfg);
            return 2;
        }
    }
    if (slots > 1 && !getenv("OMPI_COMM_WORLD_SIZE")) {
        dt_expconf_free(cfg);
        return dt_cli_mpirun(argc, argv, (int)slots, "train");
    }
    int rc = 1;
    void *handle = NULL;
    json_t *run_cfg = NULL, *hp = NULL;
    char build_dir[] = "/tmp/dtrain-build-XXXXXX";
    bool have_build_dir = false;
    if (max_len) {
        dt_length l;
        if (dt_length_parse(max_len, &l) != DT_OK || dt_expconf_set_max_length(cfg, l) != DT_OK) {
            fail("--max-length: ");
            goto out;
        }
    }
    if (dt_expconf_require_const(cfg) != DT_OK || dt_expconf_hparam_values(cfg, &hp) != DT_OK) {
        fail("");
        goto out;
    }
    for (int i = 0; i < cfg->n_env; i++) setenv(cfg->env_keys[i], cfg->env_values[i], 1);
    uint64_t seed = cfg->has_experiment_seed ? cfg->experiment_seed : 0;
    if (seed_s) {
        char *end;
        unsigned long long s = strtoull(seed_s, &end, 10);
        if (*end || !*seed_s) {
            fprintf(stderr, "dtrain train: --seed needs a non-negative integer, got '%s'\n",
                    seed_s);
            goto out;
        }
        seed = s;
    }
    /* the checkpoint directory */
    char ck[PATH_MAX];
    if (ckpt_dir)
        snprintf(ck, sizeof ck, "%s", ckpt_dir);
    else if (cfg->checkpoint_storage.host_path)
        snprintf(ck, sizeof ck, "%s/%s", cfg->checkpoint_storage.host_path, cfg->name);
    else
        snprintf(ck, sizeof ck, "checkpoints/%s", cfg->name);
    char resume_path[PATH_MAX + 512] = "";
    if (resume) {
        char name[256];
        if (!strcmp(resume, "latest")) {
            if (!read_latest(ck, name, sizeof name)) {
                fprintf(stderr,
                        "dtrain train: error: --resume latest: no checkpoint in %s (no "
                        "'latest' file); hint: train without --resume first, or pass a "
                        "checkpoint directory\n",
                        ck);
                goto out;
            }
            snprintf(resume_path, sizeof resume_path, "%s/%s", ck, name);
        } else {
            snprintf(resume_path, sizeof resume_path, "%s", resume);
        }
    }
    /* build and load the trial */
    if (!mkdtemp(build_dir)) {
        fprintf(stderr, "dtrain train: error: cannot create a build directory: %s\n",
                strerror(errno));
        goto out;
    }
    have_build_dir = true;
    char so[PATH_MAX];
    if (dt_modeldir_build(model_dir, cfg->entry_module, build_dir, so, sizeof so) != DT_OK) {
        fail("");
        goto out;
    }
    const dt_trial_def *def = dt_modeldir_load(so, cfg->entry_symbol, &handle);
    if (!def) {
        fail("");
        goto out;
    }
    run_cfg = json_deep_copy(cfg->json);
    json_object_set(run_cfg, "hyperparameters", hp);
    int64_t max_b = 0;
    dt_fit_opts o;
    memset(&o, 0, sizeof o);
    o.max_length = cfg->searcher.max_length;
    /* epochs mean records_per_epoch records when the config gives it; otherwise one pass of
     * the training loader (converted by the fit loop) */
    if (o.max_length.unit == DT_UNIT_RECORDS ||
        (o.max_length.unit == DT_UNIT_EPOCHS && cfg->records_per_epoch > 0)) {
        if (dt_expconf_length_batches(cfg, o.max_length, "max_length", &max_b) != DT_OK) {
            fail("");
            goto out;
        }
        o.max_length = (dt_length){DT_UNIT_BATCHES, max_b};
    }
    o.validation_period = cfg->min_validation_period;
    o.checkpoint_period = cfg->min_checkpoint_period;
    o.reporting_period = (dt_length){DT_UNIT_BATCHES, cfg->scheduling_unit};
    o.checkpoint_policy = cfg->checkpoint_policy;
    o.checkpoint_dir = ck;
    o.latest_checkpoint = resume ? resume_path : NULL;
    o.step_zero_validation = cfg->perform_initial_validation;
    o.test_mode = test_mode;
    o.searcher_metric = cfg->searcher.metric;
    o.larger_is_better = !cfg->searcher.smaller_is_better;
    o.save_trial_best = (int)cfg->checkpoint_storage.save_trial_best;
    o.save_trial_latest = (int)cfg->checkpoint_storage.save_trial_latest;
    o.metrics_out = metrics_out;
    o.model_dir = model_dir;
    o.progress = !quiet && isatty(STDERR_FILENO);
    o.quiet = quiet;
    o.profile = cfg->profiling_enabled;
    o.profile_begin = cfg->profiling_begin;
    o.profile_end = cfg->profiling_end;
    if (dt_trainer_fit(def, run_cfg, seed, &o) != DT_OK) {
        fail("");
        goto out;
    }
    rc = 0;
out:
    if (handle) dlclose(handle);
    if (have_build_dir) {
        char so2[PATH_MAX + 64];
        snprintf(so2, sizeof so2, "%s/%s.so", build_dir, cfg->entry_module);
        unlink(so2);
        rmdir(build_dir);
    }
    json_decref(run_cfg);
    json_decref(hp);
    dt_expconf_free(cfg);
    return rc;
}

int dt_cli_mpirun(int argc, char **argv, int slots, const char *subcommand) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    int threads = (int)(cores / slots) > 0 ? (int)(cores / slots) : 1;
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) {
        fprintf(stderr, "dtrain: cannot locate the dtrain binary: %s\n", strerror(errno));
        return 1;
    }
    exe[k] = 0;
    char np[16], omp[48];
    snprintf(np, sizeof np, "%d", slots);
    snprintf(omp, sizeof omp, "OMP_NUM_THREADS=%d", threads);
    char **av = calloc((size_t)argc + 16, sizeof *av);
    int n = 0;
    av[n++] = "mpirun";
    av[n++] = "-np";
    av[n++] = np;
    if (geteuid() == 0) av[n++] = "--allow-run-as-root";
    if (slots > cores) av[n++] = "--oversubscribe";
    av[n++] = "-x";
    av[n++] = omp;
    av[n++] = exe;
    av[n++] = (char *)subcommand;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--slots")) {
            i++;
            continue;
        }
        av[n++] = argv[i];
    }
    av[n] = NULL;
    execvp("mpirun", av);
    fprintf(stderr, "dtrain: cannot run mpirun for %d slots: %s; hint: install openmpi-bin\n",
            slots, strerror(errno));
    free(av);
    return 1;
}
