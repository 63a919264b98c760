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
#include "args.h"
#include "cli.h"

#include "bench/bench.h"
#include "launch/launch.h"

#include <limits.h>
#include <math.h>
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

/* The options whose value is a word from a short list, or a shape: 0, or -1 after the error. */
static int word_args(dt_bench_opts *a, const char *dtype, const char *backend, const char *shape,
                     const char *trans, const char *offload, const char *zero) {
    long long m, n, k;
    int used = 0;
    dt_dtype t = dtype ? dt_dtype_from_name(dtype) : DT_DTYPE_F32;
    const char *bad = NULL, *what = NULL, *got = NULL;
    if (t != DT_DTYPE_F32 && t != DT_DTYPE_BF16)
        bad = "--dtype", what = "fp32 or bf16", got = dtype;
    else if (backend && strcmp(backend, "dtrain") && strcmp(backend, "openblas"))
        bad = "--backend", got = backend,
        what = "dtrain (dt_matmul, the GEMM every op uses) or openblas (cblas_sgemm)";
    else if (shape && (sscanf(shape, "%lldx%lldx%lld%n", &m, &n, &k, &used) != 3 || shape[used] ||
                       m <= 0 || n <= 0 || k <= 0))
        bad = "--shape", what = "MxNxK (positive sizes, e.g. 1024x768x256)", got = shape;
    else if (trans && (strlen(trans) != 2 || !strchr("NT", trans[0]) || !strchr("NT", trans[1])))
        bad = "--trans", what = "NN, NT, TN or TT (A and B: N as stored, T transposed)",
        got = trans;
    else if (offload && strcmp(offload, "none") && strcmp(offload, "cpu") &&
             strcmp(offload, "nvme"))
        bad = "--offload", what = "none, cpu or nvme", got = offload;
    else if (zero && (strlen(zero) != 1 || zero[0] < '0' || zero[0] > '3'))
        bad = "--zero-stage", what = "0, 1, 2 or 3", got = zero;
    if (bad) {
        fprintf(stderr, "dtrain bench: %s takes %s, got '%s'\n", bad, what, got);
        return -1;
    }
    if (dtype) a->dtype = t;
    if (backend) a->openblas = !strcmp(backend, "openblas");
    if (shape) a->m = m, a->n = n, a->k = k;
    if (trans) a->ta = trans[0] == 'T', a->tb = trans[1] == 'T';
    if (offload) a->offload = offload;
    if (zero) a->zero_stage = zero[0] - '0';
    return 0;
}

/* 0 parsed, 1 after --help, -1 after a usage error (printed). */
static int parse(int argc, char **argv, bench_args *args) {
    dt_bench_opts *a = &args->o;
    struct {
        const char *name;
        int64_t *i64; /* or */
        int *i32;
    } num[] = {
        {.name = "--batch", .i64 = &a->batch},
        {.name = "--layers", .i64 = &a->layers},
        {.name = "--hidden", .i64 = &a->hidden},
        {.name = "--d-model", .i64 = &a->d_model},
        {.name = "--heads", .i64 = &a->heads},
        {.name = "--seq", .i64 = &a->seq},
        {.name = "--vocab", .i64 = &a->vocab},
        {.name = "--size", .i64 = &a->size},
        {.name = "--steps", .i32 = &a->steps},
        {.name = "--warmup", .i32 = &a->warmup},
        {.name = "--threads", .i32 = &a->threads},
        {.name = "--reps", .i32 = &a->reps},
        {.name = "--slots", .i32 = &a->slots},
        {.name = "--gas", .i32 = &a->gas},
        {.name = "--pipeline-stages", .i32 = &a->pipe_stages},
        {.name = "--micro-batches", .i32 = &a->micro_batches},
    };
    enum { NUM = sizeof num / sizeof num[0] };
    const char *dtype = NULL, *backend = NULL, *shape = NULL, *trans = NULL, *offload = NULL;
    const char *zero = NULL;
    dt_cli_opt opts[NUM + 11] = {
        {.name = "--json", .flag = &args->json},  {.name = "--profile", .flag = &a->profile},
        {.name = "--model", .value = &a->model},  {.name = "--dtype", .value = &dtype},
        {.name = "--backend", .value = &backend}, {.name = "--shape", .value = &shape},
        {.name = "--trans", .value = &trans},     {.name = "--ds-config", .value = &a->ds_config},
        {.name = "--offload", .value = &offload}, {.name = "--nvme-path", .value = &a->nvme_path},
        {.name = "--zero-stage", .value = &zero},
    };
    long long v[NUM];
    for (int k = 0; k < NUM; k++) {
        v[k] = LLONG_MIN; /* not given */
        /* --warmup 0 is the one count that may be zero */
        opts[11 + k] = (dt_cli_opt){.name = num[k].name,
                                    .integer = &v[k],
                                    .lo = !strcmp(num[k].name, "--warmup") ? 0 : 1,
                                    .hi = num[k].i32 ? (double)INT_MAX : (double)INFINITY};
    }
    int rc, np = dt_cli_parse_verb("dtrain bench", bench_usage, argc, argv, opts, NUM + 11, NULL, 0,
                                   0, "", &rc);
    if (np < 0) return rc == DT_EXIT_OK ? 1 : -1;
    for (int k = 0; k < NUM; k++) {
        if (v[k] == LLONG_MIN) continue;
        if (num[k].i64)
            *num[k].i64 = v[k];
        else
            *num[k].i32 = (int)v[k];
    }
    return word_args(a, dtype, backend, shape, trans, offload, zero);
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
