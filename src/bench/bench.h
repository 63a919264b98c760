/*
 * bench/bench.h — the benchmark harness behind `dtrain bench`: a training step of a built-in
 * model (mlp, cnn, gpt) timed plain, through the engine (ZeRO, offload, accumulation, several
 * ranks under mpirun) or through the pipeline engine, and the GEMM rate. A run fills a result;
 * the writers turn it into one JSON line (the shape the scripts in bench/ parse) or one line of
 * text. docs/cli.md describes the options and every key of the JSON.
 */
#ifndef DTRAIN_BENCH_H
#define DTRAIN_BENCH_H

#include "dtrain/base.h"
#include "dtrain/engine.h"
#include "dtrain/tensor.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dt_bench_job { DT_BENCH_TRAIN = 0, DT_BENCH_GEMM } dt_bench_job;

/* What to run. Start from dt_bench_defaults(); 0 in a size field means the default. */
typedef struct dt_bench_opts {
    const char *model;                  /* train: "mlp", "cnn" or "gpt" */
    int64_t batch;                      /* mlp, cnn 128; gpt 8 (per rank, engine) */
    int64_t layers;                     /* mlp hidden layers 2; gpt blocks 4 */
    int64_t hidden;                     /* mlp width 512 */
    int64_t d_model, heads, seq, vocab; /* gpt: 256, 4, 128, 256 */
    int steps, warmup;                  /* timed steps 20, after 3 untimed */
    int threads;                        /* 0: all cores (a rank: OMP_NUM_THREADS) */
    int reps;                           /* gemm: timed repetitions 10 */
    int64_t size;                       /* gemm: n of the n x n x n product, 1024 */
    int64_t m, n, k;                    /* gemm: an M x N x K product instead (0: size) */
    bool ta, tb;                        /* gemm: A is (K, M), B is (N, K) (transposed) */
    dt_dtype dtype;                     /* DT_DTYPE_F32, or DT_DTYPE_BF16 (autocast) */
    bool profile;                       /* plain steps: per-phase and per-op times */
    bool openblas;                      /* gemm: cblas_sgemm instead of dt_matmul */
    int slots;                          /* ranks (mpirun runs one process each) */
    int zero_stage;                     /* -1: a plain step; 0..3: the engine's */
    int gas;                            /* micro-batches per engine step, 1 */
    const char *offload, *nvme_path;    /* "none"|"cpu"|"nvme"; /tmp/dtrain_nvme */
    const char *ds_config;              /* merged over the generated config, or NULL */
    int pipe_stages, micro_batches;     /* gpt as a pipeline; micro-batches 8 */
} dt_bench_opts;

/* steps 20, warmup 3, fp32, a plain step (zero_stage -1), gas 1, one slot; the rest 0. */
DT_API dt_bench_opts dt_bench_defaults(void);

/* Settle the options of `job`: an offload, nvme path, gas > 1, DeepSpeed config or several
 * slots (without a pipeline) mean the engine (zero_stage 0 unless given); the model's
 * defaults fill the sizes left 0. DT_ERR_INVALID saying which option is wrong: an unknown
 * model, d_model not divisible by heads, --pipeline-stages without gpt, --offload at ZeRO
 * stage 0, --profile outside plain steps, --backend openblas in bf16. Idempotent. */
DT_API dt_status dt_bench_resolve(dt_bench_opts *o, dt_bench_job job);

/* One rank's figures in engine and pipeline mode. */
typedef struct dt_bench_rank {
    double step_ms_median;
    dt_engine_memory mem;    /* engine: device (peaks over the timed loop), host, nvme */
    int64_t rss_added_bytes; /* engine: peak RSS over the RSS before the model */
    dt_engine_timers timers; /* engine: summed since the start (warm-up included) */
    double wait_fraction;    /* pipeline: median share of a step spent waiting */
    double activation_peak;  /* pipeline: bytes */
} dt_bench_rank;

typedef enum dt_bench_kind {
    DT_BENCH_KIND_STEP = 0, /* a plain training step */
    DT_BENCH_KIND_ENGINE,
    DT_BENCH_KIND_PIPELINE,
    DT_BENCH_KIND_GEMM,
} dt_bench_kind;

/* What a run measured (times in ms). Free with dt_bench_result_free. */
typedef struct dt_bench_result {
    dt_bench_kind kind;
    dt_bench_opts opts; /* as run, defaults filled in (strings borrowed from the caller's) */
    bool root;          /* this process reports (rank 0); other ranks' results are empty */
    int threads;        /* per process */
    int64_t params;
    double step_ms_median, step_ms_min, step_ms_mean; /* engine, pipeline: the slowest rank's
                                                       * median in step_ms_median */
    double per_s;                                     /* tokens (gpt) or samples a second */
    int64_t flops_per_step;                           /* model FLOPs (a micro-batch, engine) */
    double final_loss;
    /* plain step */
    dt_mem_stats mem;                           /* the device's accounting */
    int64_t peak_rss_bytes, baseline_rss_bytes; /* VmHWM at the end; VmRSS before the model */
    double phase_ms[4];                         /* profile: reset, forward, backward, optimizer */
    int n_ops;                                  /* profile: ops, the dearest first */
    dt_op_time *ops;
    /* engine and pipeline */
    int world;                 /* ranks */
    int stages, data_parallel; /* pipeline */
    double ideal_bubble;       /* pipeline: (S - 1) / (M + S - 1) */
    int n_ranks;               /* root: every rank's figures */
    dt_bench_rank *ranks;
    /* gemm */
    double gemm_ms_median, gemm_gflops;
} dt_bench_result;

/* Time `o` (resolved for DT_BENCH_TRAIN): build the model and one fixed batch from fixed
 * seeds, run warmup + steps steps, and fill *out. In engine and pipeline mode every rank of
 * the job calls it (collective); rank 0's result holds every rank's figures. On error returns
 * the status with a message naming the phase ("engine: ...", "rank 0 step 3 failed: ..."),
 * *out = NULL. */
DT_API dt_status dt_bench_train(const dt_bench_opts *o, dt_bench_result **out);
/* Time an M x N x K fp32 (or bf16 autocast) GEMM, A or B stored transposed as asked (n x n x
 * n when m, n, k are 0): 2 untimed, then reps timed. */
DT_API dt_status dt_bench_gemm(const dt_bench_opts *o, dt_bench_result **out);
DT_API void dt_bench_result_free(dt_bench_result *r);

/* The result as one JSON object and a newline (nothing on a non-root rank). */
DT_API void dt_bench_write_json(const dt_bench_result *r, FILE *f);
/* The result as a line of text (the profile as a table after it); a pipeline's result is
 * always its JSON line. Nothing on a non-root rank. */
DT_API void dt_bench_write_text(const dt_bench_result *r, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
