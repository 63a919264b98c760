/* train.c — `dtrain train CONFIG.yaml MODEL_DIR [options]`: local training of one trial.
 *
 * Parses the options, loads the experiment config and hands the trial to the runner
 * (dt_trial_launch_local: build the model directory, run the fit loop), or, for several
 * slots, re-runs this command under mpirun (dt_launch_mpirun). Exit codes: 0 trained (or
 * stopped and checkpointed), 1 an error, 2 a usage error. */
#include "cli.h"

#include "launch/launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
           "  --hostfile FILE       place the slots on the hosts of an MPI hostfile (lines\n"
           "                        'HOST slots=N'; mpirun reaches them); docs/clusters.md\n"
           "  --quiet               no progress output\n");
}

static void fail(const char *what) {
    fprintf(stderr, "dtrain train: error: %s%s\n", what, dt_last_error());
}

int dt_cli_train(int argc, char **argv) {
    const char *cfg_path = NULL, *model_dir = NULL, *max_len = NULL, *ckpt_dir = NULL;
    const char *resume = NULL, *metrics_out = NULL, *seed_s = NULL, *slots_s = NULL;
    const char *hostfile = NULL;
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
        else if (!strcmp(a, "--hostfile"))
            slot = &hostfile;
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
    if (dt_expconf_check_model_dir(cfg, model_dir) != DT_OK) { /* as config check does */
        fail("");
        dt_expconf_free(cfg);
        return 1;
    }
    for (int i = 0; i < cfg->n_warnings && !getenv("OMPI_COMM_WORLD_RANK"); i++)
        fprintf(stderr, "warning: %s\n", cfg->warnings[i]);
    /* several slots, or any over a hostfile: re-run this command under mpirun, once per slot
     * (the ranks get neither option) */
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
    if (hostfile && !getenv("OMPI_COMM_WORLD_SIZE")) {
        dt_expconf_free(cfg);
        dt_launch_mpirun_hosts((int)slots, hostfile, "train", argc, argv);
        fail("--hostfile: ");
        return 1;
    }
    if (dt_launch_needs_mpirun(slots)) {
        dt_expconf_free(cfg);
        return dt_cli_mpirun(argc, argv, (int)slots, "train");
    }
    int rc = 1;
    dt_launch_opts o = {.checkpoint_dir = ckpt_dir,
                        .resume = resume,
                        .test_mode = test_mode,
                        .metrics_out = metrics_out,
                        .progress = !quiet && isatty(STDERR_FILENO),
                        .quiet = quiet};
    if (max_len) {
        dt_length l;
        if (dt_length_parse(max_len, &l) != DT_OK || dt_expconf_set_max_length(cfg, l) != DT_OK) {
            fail("--max-length: ");
            goto out;
        }
    }
    if (seed_s) {
        char *end;
        unsigned long long s = strtoull(seed_s, &end, 10);
        if (*end || !*seed_s) {
            fprintf(stderr, "dtrain train: --seed needs a non-negative integer, got '%s'\n",
                    seed_s);
            goto out;
        }
        o.has_seed = true;
        o.seed = s;
    }
    if (dt_trial_launch_local(cfg, model_dir, &o) != DT_OK) {
        fail("");
        goto out;
    }
    rc = 0;
out:
    dt_expconf_free(cfg);
    return rc;
}

int dt_cli_mpirun(int argc, char **argv, int slots, const char *subcommand) {
    dt_launch_mpirun(slots, subcommand, argc, argv);
    fprintf(stderr, "dtrain: %s\n", dt_last_error());
    return 1;
}
