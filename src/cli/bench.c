/* bench.c — `dtrain bench`: the performance contract's command line.
 *
 *   dtrain bench train --model mlp|cnn|gpt [--batch N] [--layers L] [--hidden H] [--d-model D]
 *       [--heads NH] [--seq T] [--vocab V] [--steps S] [--warmup W] [--threads N]
 *       [--dtype fp32|bf16] [--profile] [--json]
 *       [--slots N] [--zero-stage S] [--offload none|cpu|nvme] [--nvme-path DIR] [--gas G]
 *       [--pipeline-stages S] [--micro-batches M] [--ds-config C]
 *   dtrain bench gemm [--size N | --shape MxNxK] [--trans NN|NT|TN|TT] [--threads N]
 *                     [--dtype fp32|bf16] [--reps R] [--backend dtrain|openblas] [--json]
 *
 * Parses the flags into dt_bench_opts, settles them (dt_bench_resolve), re-runs itself under
 * mpirun for several slots, runs the benchmark (bench/bench.h, src/bench/bench*.c) and
 * prints its result as a JSON line (--json) or text. Exit codes: 0, 1 a failed run, 2 a
 * usage error. */
#include "cli.h"

#include "bench/bench.h"
#include "launch/launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench_args {
    dt_bench_opts o;
    bool json;
} bench_args;

static void bench_usage(FILE *f) {
    fprintf(f,
            "usage: dtrain bench train --model mlp|cnn|gpt [options] [--json]\n"
            "       dtrain bench gemm [--size N | --shape MxNxK] [--trans NN|NT|TN|TT]\n"
            "                         [--threads N] [--dtype fp32|bf16] [--reps R]\n"
            "                         [--backend dtrain|openblas] [--json]\n"
            "options:\n"
            "  --batch N       batch size (mlp, cnn 128; gpt 8)\n"
            "  --layers L      hidden layers (mlp 2) or transformer blocks (gpt 4)\n"
            "  --hidden H      mlp hidden width (512)\n"
            "  --d-model D     gpt width (256)      --heads NH  gpt heads (4)\n"
            "  --seq T         gpt context (128)    --vocab V   gpt vocabulary (256)\n"
            "  --steps S       timed steps (20)     --warmup W  untimed steps first (3)\n"
            "  --threads N     threads (default: all cores)\n"
            "  --dtype fp32|bf16  compute dtype for matmuls (bf16 = autocast; default fp32)\n"
            "  --profile       also time the step's phases and every op (forward, backward),\n"
            "                  per timed step (plain steps only, not engine or pipeline mode)\n"
            "engine mode (a step through dt_engine with a DeepSpeed config):\n"
            "  --slots N       data-parallel ranks under mpirun (1 thread each by default)\n"
            "  --zero-stage S  ZeRO stage 0-3 (default 0 when --slots is given)\n"
            "  --offload none|cpu|nvme  optimizer offload (and parameters at stage 3)\n"
            "  --nvme-path DIR files for nvme offload (default /tmp/dtrain_nvme)\n"
            "  --gas G         micro-batches per step (gradient_accumulation_steps, 1)\n"
            "  --pipeline-stages S  gpt as a pipeline of S stages (embedding, blocks, head) on\n"
            "                  --slots ranks (S x data-parallel), 1F1B over --micro-batches M (8)\n"
            "  --ds-config C   a DeepSpeed config (file or JSON text) merged over the one the\n"
            "                  options make, e.g. '{\"zero_optimization\": "
            "{\"stage3_prefetch_bucket_size\": 1e5}}'\n");
}

/* Parse a positive integer option value; prints the error and returns -1 on a bad one. */
static int64_t int_arg(const char *opt, const char *v) {
    char *end;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || *end || x <= 0) {
        fprintf(stderr, "dtrain bench: %s needs a positive integer, got '%s'\n", opt, v ? v : "");
        return -1;
    }
    return x;
}

static int parse(int argc, char **argv, bench_args *args) {
    dt_bench_opts *a = &args->o;
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t *iv = NULL;
        int *sv = NULL;
        if (!strcmp(o, "--json")) {
            args->json = true;
            continue;
        }
        if (!strcmp(o, "--profile")) {
            a->profile = true;
            continue;
        }
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            bench_usage(stdout);
            return 1;
        }
        if (!strcmp(o, "--model")) {
            if (!v) {
                fprintf(stderr, "dtrain bench: --model needs mlp, cnn or gpt\n");
                return -1;
            }
            a->model = v;
            i++;
            continue;
        }
        if (!strcmp(o, "--dtype")) {
            dt_dtype t = v ? dt_dtype_from_name(v) : DT_DTYPE_COUNT;
            if (t != DT_DTYPE_F32 && t != DT_DTYPE_BF16) {
                fprintf(stderr, "dtrain bench: --dtype takes fp32 or bf16, got '%s'\n", v ? v : "");
                return -1;
            }
            a->dtype = t;
            i++;
            continue;
        }
        if (!strcmp(o, "--backend")) {
            if (!v || (strcmp(v, "dtrain") && strcmp(v, "openblas"))) {
                fprintf(stderr,
                        "dtrain bench: --backend takes dtrain (dt_matmul, the GEMM every "
                        "op uses) or openblas (cblas_sgemm), got '%s'\n",
                        v ? v : "");
                return -1;
            }
            a->openblas = !strcmp(v, "openblas");
            i++;
            continue;
        }
        if (!strcmp(o, "--shape")) {
            long long m, n, k;
            int used = 0;
            if (!v || sscanf(v, "%lldx%lldx%lld%n", &m, &n, &k, &used) != 3 || v[used] || m <= 0 ||
                n <= 0 || k <= 0) {
                fprintf(stderr,
                        "dtrain bench: --shape takes MxNxK (positive sizes, e.g. "
                        "1024x768x256), got '%s'\n",
                        v ? v : "");
                return -1;
            }
            a->m = m;
            a->n = n;
            a->k = k;
            i++;
            continue;
        }
        if (!strcmp(o, "--trans")) {
            if (!v || strlen(v) != 2 || (v[0] != 'N' && v[0] != 'T') ||
                (v[1] != 'N' && v[1] != 'T')) {
                fprintf(stderr,
                        "dtrain bench: --trans takes NN, NT, TN or TT (A and B: N as "
                        "stored, T transposed), got '%s'\n",
                        v ? v : "");
                return -1;
            }
            a->ta = v[0] == 'T';
            a->tb = v[1] == 'T';
            i++;
            continue;
        }
        if (!strcmp(o, "--ds-config")) {
            if (!v) {
                fprintf(stderr, "dtrain bench: --ds-config needs a file or JSON text\n");
                return -1;
            }
            a->ds_config = v;
            i++;
            continue;
        }
        if (!strcmp(o, "--offload") || !strcmp(o, "--nvme-path")) {
            if (!v) {
                fprintf(stderr, "dtrain bench: %s needs a value\n", o);
                return -1;
            }
            if (!strcmp(o, "--offload")) {
                if (strcmp(v, "none") && strcmp(v, "cpu") && strcmp(v, "nvme")) {
                    fprintf(stderr, "dtrain bench: --offload takes none, cpu or nvme, got '%s'\n",
                            v);
                    return -1;
                }
                a->offload = v;
            } else {
                a->nvme_path = v;
            }
            i++;
            continue;
        }
        if (!strcmp(o, "--zero-stage")) {
            if (!v || strlen(v) != 1 || v[0] < '0' || v[0] > '3') {
                fprintf(stderr, "dtrain bench: --zero-stage takes 0, 1, 2 or 3, got '%s'\n",
                        v ? v : "");
                return -1;
            }
            a->zero_stage = v[0] - '0';
            i++;
            continue;
        }
        if (!strcmp(o, "--batch"))
            iv = &a->batch;
        else if (!strcmp(o, "--layers"))
            iv = &a->layers;
        else if (!strcmp(o, "--hidden"))
            iv = &a->hidden;
        else if (!strcmp(o, "--d-model"))
            iv = &a->d_model;
        else if (!strcmp(o, "--heads"))
            iv = &a->heads;
        else if (!strcmp(o, "--seq"))
            iv = &a->seq;
        else if (!strcmp(o, "--vocab"))
            iv = &a->vocab;
        else if (!strcmp(o, "--size"))
            iv = &a->size;
        else if (!strcmp(o, "--steps"))
            sv = &a->steps;
        else if (!strcmp(o, "--warmup"))
            sv = &a->warmup;
        else if (!strcmp(o, "--threads"))
            sv = &a->threads;
        else if (!strcmp(o, "--reps"))
            sv = &a->reps;
        else if (!strcmp(o, "--slots"))
            sv = &a->slots;
        else if (!strcmp(o, "--gas"))
            sv = &a->gas;
        else if (!strcmp(o, "--pipeline-stages"))
            sv = &a->pipe_stages;
        else if (!strcmp(o, "--micro-batches"))
            sv = &a->micro_batches;
        else {
            fprintf(stderr, "dtrain bench: unknown option '%s'\n", o);
            bench_usage(stderr);
            return -1;
        }
        int64_t x = !strcmp(o, "--warmup") && v && !strcmp(v, "0") ? 0 : int_arg(o, v);
        if (x < 0) return -1;
        if (iv)
            *iv = x;
        else
            *sv = (int)x;
        i++;
    }
    return 0;
}

int dt_cli_bench(int argc, char **argv) {
    if (argc < 1) {
        bench_usage(stderr);
        return 2;
    }
    bench_args a = {.o = dt_bench_defaults()};
    int r = parse(argc - 1, argv + 1, &a);
    if (r) return r < 0 ? 2 : 0;
    dt_bench_job job;
    if (!strcmp(argv[0], "train")) {
        if (!a.o.model) {
            fprintf(stderr, "dtrain bench train: --model is required (mlp, cnn or gpt)\n");
            return 2;
        }
        job = DT_BENCH_TRAIN;
    } else if (!strcmp(argv[0], "gemm")) {
        job = DT_BENCH_GEMM;
    } else if (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        bench_usage(stdout);
        return 0;
    } else {
        fprintf(stderr, "dtrain bench: unknown benchmark '%s' (train or gemm)\n", argv[0]);
        return 2;
    }
    if (dt_bench_resolve(&a.o, job) != DT_OK) {
        fprintf(stderr, "dtrain bench: %s\n", dt_last_error());
        return 2;
    }
    /* several ranks: run this command again under mpirun */
    if (dt_launch_needs_mpirun(a.o.slots)) return dt_cli_mpirun(argc, argv, a.o.slots, "bench");
    dt_bench_result *res = NULL;
    dt_status st = job == DT_BENCH_TRAIN ? dt_bench_train(&a.o, &res) : dt_bench_gemm(&a.o, &res);
    if (st != DT_OK) {
        fprintf(stderr, "dtrain bench: %s\n", dt_last_error());
        return 1;
    }
    if (a.json)
        dt_bench_write_json(res, stdout);
    else
        dt_bench_write_text(res, stdout);
    dt_bench_result_free(res);
    return 0;
}
