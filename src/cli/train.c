/* train.c — `dtrain train CONFIG.yaml MODEL_DIR [options]`: local training of one trial.
 *
 * Parses the options, loads the experiment config and hands the trial to the runner
 * (dt_trial_launch_local: build the model directory, run the fit loop), or, for several
 * slots, re-runs this command under mpirun (dt_launch_mpirun). Exit codes: 0 trained (or
 * stopped and checkpointed), 1 an error, 2 a usage error. */
#include "args.h"
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

typedef struct train_args {
    const char *pos[2]; /* CONFIG.yaml MODEL_DIR */
    const char *max_len, *ckpt_dir, *resume, *metrics_out, *seed, *slots, *hostfile;
    bool test_mode, quiet;
} train_args;

/* 0 parsed, else the exit code (0 after --help, 2 for a usage error). */
static int parse(int argc, char **argv, train_args *a, bool *help) {
    const dt_cli_opt opts[] = {
        {.name = "--max-length", .value = &a->max_len},
        {.name = "--checkpoint-dir", .value = &a->ckpt_dir},
        {.name = "--resume", .value = &a->resume},
        {.name = "--metrics-out", .value = &a->metrics_out},
        {.name = "--seed", .value = &a->seed},
        {.name = "--slots", .value = &a->slots},
        {.name = "--hostfile", .value = &a->hostfile},
        {.name = "--test-mode", .flag = &a->test_mode},
        {.name = "--quiet", .flag = &a->quiet},
    };
    char err[512];
    int np = dt_cli_parse(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), a->pos, 2, 2,
                          "CONFIG.yaml MODEL_DIR", err, sizeof err);
    *help = np == DT_CLI_HELP;
    if (np == DT_CLI_HELP) train_usage(stdout);
    if (np != DT_CLI_BAD) return 0;
    fprintf(stderr, "dtrain train: %s\n", err);
    train_usage(stderr);
    return 2;
}

/* The config, checked against the model directory as `config check` does; its warnings on
 * stderr (once: not on the ranks mpirun started). */
static dt_expconf *load(const train_args *a) {
    dt_expconf *cfg = NULL;
    unsigned flags = a->max_len ? DT_EXPCONF_MAX_LENGTH_OPTIONAL : 0;
    if (dt_expconf_load_file(a->pos[0], flags, &cfg) != DT_OK ||
        dt_expconf_check_model_dir(cfg, a->pos[1]) != DT_OK) {
        fail("");
        dt_expconf_free(cfg);
        return NULL;
    }
    for (int i = 0; i < cfg->n_warnings && !getenv("OMPI_COMM_WORLD_RANK"); i++)
        fprintf(stderr, "warning: %s\n", cfg->warnings[i]);
    return cfg;
}

/* Train in this process: the options that reach the runner, then the fit loop. */
static int train_here(const train_args *a, dt_expconf *cfg) {
    dt_launch_opts o = {.checkpoint_dir = a->ckpt_dir,
                        .resume = a->resume,
                        .test_mode = a->test_mode,
                        .metrics_out = a->metrics_out,
                        .progress = !a->quiet && isatty(STDERR_FILENO),
                        .quiet = a->quiet};
    dt_length l;
    if (a->max_len &&
        (dt_length_parse(a->max_len, &l) != DT_OK || dt_expconf_set_max_length(cfg, l) != DT_OK)) {
        fail("--max-length: ");
        return 1;
    }
    if (a->seed) {
        char *end;
        o.seed = strtoull(a->seed, &end, 10);
        o.has_seed = true;
        if (*end || !*a->seed || a->seed[0] == '-') {
            fprintf(stderr, "dtrain train: --seed needs a non-negative integer, got '%s'\n",
                    a->seed);
            return 2;
        }
    }
    if (dt_trial_launch_local(cfg, a->pos[1], &o) != DT_OK) {
        fail("");
        return 1;
    }
    return 0;
}

int dt_cli_train(int argc, char **argv) {
    train_args a = {0};
    bool help = false;
    int rc = parse(argc, argv, &a, &help);
    if (rc || help) return rc;
    dt_expconf *cfg = load(&a);
    if (!cfg) return 1;
    /* several slots, or any over a hostfile: re-run this command under mpirun, once per slot
     * (the ranks get neither option) */
    int64_t slots = cfg->slots_per_trial;
    if (a.slots) {
        char *end;
        slots = strtoll(a.slots, &end, 10);
        if (*end || slots < 1) {
            fprintf(stderr, "dtrain train: --slots needs a positive integer, got '%s'\n", a.slots);
            dt_expconf_free(cfg);
            return 2;
        }
    }
    if (a.hostfile && !getenv("OMPI_COMM_WORLD_SIZE")) {
        dt_expconf_free(cfg);
        dt_launch_mpirun_hosts((int)slots, a.hostfile, "train", argc, argv);
        fail("--hostfile: ");
        return 1;
    }
    if (dt_launch_needs_mpirun(slots)) {
        dt_expconf_free(cfg);
        return dt_cli_mpirun(argc, argv, (int)slots, "train");
    }
    rc = train_here(&a, cfg);
    dt_expconf_free(cfg);
    return rc;
}

int dt_cli_mpirun(int argc, char **argv, int slots, const char *subcommand) {
    dt_launch_mpirun(slots, subcommand, argc, argv);
    fprintf(stderr, "dtrain: %s\n", dt_last_error());
    return 1;
}
