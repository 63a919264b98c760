/* main.c — the dtrain command: argument parsing and dispatch; the only place that exits. */
#include "cli.h"

#include "master/master.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: dtrain <command> [args]\n"
               "commands:\n"
               "  train CONFIG.yaml MODEL_DIR [options]                train one trial locally\n"
               "  bench train --model mlp|cnn|gpt [options] [--json]   time training steps\n"
               "  bench gemm [--size N] [--backend dtrain|openblas] [--json]  the sgemm rate\n"
               "  master [--host H] [--port P] [--slots N] | stop | status   the master\n"
               "  dsat asha|binary|random CONFIG.yaml MODEL_DIR [flags]  tune DeepSpeed configs\n"
               "  experiment create|list|describe|logs|pause|activate|cancel|kill|delete|wait\n"
               "  trial list|describe|logs|metrics|kill\n"
               "  checkpoint list|describe|export|delete\n"
               "  model create|register-version|list|describe          the model registry\n"
               "  lm tokenize|eval|generate|finetune MODEL_DIR ...     Hugging Face models\n"
               "  config check CONFIG.yaml [MODEL_DIR]                 check a config, no master\n"
               "  version                                              print the version\n"
               "run 'dtrain <command> --help' for a command's options; exit codes: 0 done,\n"
               "1 failed, 2 usage error, 3 the master cannot be reached\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "bench")) return dt_cli_bench(argc - 2, argv + 2);
    if (!strcmp(argv[1], "train")) return dt_cli_train(argc - 2, argv + 2);
    if (!strcmp(argv[1], "worker")) return dt_cli_worker(argc - 2, argv + 2); /* (the master's) */
    if (!strcmp(argv[1], "master")) return dt_cli_master(argc - 2, argv + 2);
    if (!strcmp(argv[1], "experiment")) return dt_cli_experiment(argc - 2, argv + 2);
    if (!strcmp(argv[1], "dsat")) return dt_cli_dsat(argc - 2, argv + 2);
    if (!strcmp(argv[1], "trial")) return dt_cli_trial(argc - 2, argv + 2);
    if (!strcmp(argv[1], "checkpoint")) return dt_cli_checkpoint(argc - 2, argv + 2);
    if (!strcmp(argv[1], "model")) return dt_cli_model(argc - 2, argv + 2);
    if (!strcmp(argv[1], "lm")) return dt_cli_lm(argc - 2, argv + 2);
    if (!strcmp(argv[1], "config")) return dt_cli_config(argc - 2, argv + 2);
    if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
        printf("dtrain 0.1.0\n");
        return 0;
    }
    if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "dtrain: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
