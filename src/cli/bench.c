/* bench.c — `dtrain bench`: the performance contract.
 *
 *   dtrain bench train --model mlp|cnn|gpt [--batch N] [--layers L] [--hidden H] [--d-model D]
 *       [--heads NH] [--seq T] [--vocab V] [--steps S] [--warmup W] [--threads N]
 *       [--dtype fp32|bf16] [--json]
 *       [--slots N] [--zero-stage S] [--offload none|cpu|nvme] [--nvme-path DIR] [--gas G]
 *   dtrain bench gemm [--size N] [--threads N] [--dtype fp32|bf16] [--reps R]
 *                     [--backend dtrain|openblas] [--json]
 *
 * With --zero-stage (or --slots) the step runs through the engine (dt_engine_*) with a
 * DeepSpeed config built from the options, on N data-parallel ranks under mpirun (one thread
 * each by default): --batch is the micro-batch per rank, a step is --gas micro-batches, and
 * the JSON adds the global throughput and every rank's memory by category (rank 0 prints).
 *
 * A training step is: zero grads, forward, cross-entropy loss, backward, AdamW step, on one
 * batch of random data from a fixed seed (made once, outside the timed loop). In plain steps
 * the AdamW step leaves the gradients zeroed lazily (dt_optim_step_module_zero_grad: the next
 * backward stores the first gradients instead of adding them to zeros; the first step's are
 * zeroed before the loop). The step time
 * is the median over --steps timed steps after --warmup untimed ones. `gflops` is the model
 * FLOPs of one step (forward + backward, from the op table's counts) over the median time. */
#include "cli.h"

#include "dtrain/dtrain.h"
#include "dtrain/pipe.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench_args {
    const char *model;
    int64_t batch, layers, hidden, d_model, heads, seq, vocab;
    int steps, warmup, threads, reps;
    int64_t size;
    dt_dtype dtype;
    bool json;
    bool profile;  /* bench train: time per step phase and per op */
    bool openblas; /* bench gemm --backend openblas: cblas_sgemm itself */
    /* engine mode */
    int slots, zero_stage, gas; /* zero_stage -1: plain optimiser step, no engine */
    const char *offload, *nvme_path;
    const char *ds_config;          /* merged over the generated config (a path or JSON text) */
    int pipe_stages, micro_batches; /* pipeline mode (gpt) */
} bench_args;

static void bench_usage(FILE *f) {
    fprintf(f,
            "usage: dtrain bench train --model mlp|cnn|gpt [options] [--json]\n"
            "       dtrain bench gemm [--size N] [--threads N] [--dtype fp32|bf16]\n"
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

static int parse(int argc, char **argv, bench_args *a) {
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t *iv = NULL;
        int *sv = NULL;
        if (!strcmp(o, "--json")) {
            a->json = true;
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

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A field of /proc/self/status in bytes ("VmHWM:" = peak RSS, "VmRSS:" = current). */
static int64_t proc_status_bytes(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    int64_t kb = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, n)) kb = strtoll(line + n, NULL, 10);
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

/* "key":{category: bytes, ..., "total": bytes} of the peaks or the current values. */
static void print_stats(const char *key, const dt_mem_stats *s, bool peak) {
    printf("\"%s\":{", key);
    for (int c = 0; c < DT_MEM_NCAT; c++)
        printf("\"%s\":%lld,", dt_mem_category_name((dt_mem_category)c),
               (long long)(peak ? s->peak[c] : s->current[c]));
    printf("\"total\":%lld}", (long long)(peak ? s->total_peak : s->total_current));
}

static void print_peaks(const dt_mem_stats *s) {
    printf("\"peak_bytes\":{");
    for (int c = 0; c < DT_MEM_NCAT; c++)
        printf("\"%s\":%lld,", dt_mem_category_name((dt_mem_category)c), (long long)s->peak[c]);
    printf("\"total\":%lld}", (long long)s->total_peak);
}

/* One training step through the engine on every rank; rank 0 prints the job's figures. */
static int bench_engine(bench_args *a, dt_module *net, dt_tensor *x, dt_tensor *y, bool gpt,
                        int threads, int64_t rss0) {
    char cfg[1024], off[600] = "";
    const char *ofl = a->offload ? a->offload : "none";
    const char *nvp = a->nvme_path ? a->nvme_path : "/tmp/dtrain_nvme";
    if (strcmp(ofl, "none")) {
        if (a->zero_stage == 0) {
            fprintf(stderr, "dtrain bench: --offload needs --zero-stage 1 or higher\n");
            return 2;
        }
        snprintf(off, sizeof off,
                 ", \"offload_optimizer\": {\"device\": \"%s\", \"nvme_path\": \"%s\"}%s", ofl, nvp,
                 a->zero_stage == 3 ? "" : "");
        if (a->zero_stage == 3) {
            size_t k = strlen(off);
            snprintf(off + k, sizeof off - k,
                     ", \"offload_param\": {\"device\": \"%s\", \"nvme_path\": \"%s\"}", ofl, nvp);
        }
    }
    snprintf(cfg, sizeof cfg,
             "{\"train_micro_batch_size_per_gpu\": %lld, \"gradient_accumulation_steps\": %d,"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001}},"
             " \"bf16\": {\"enabled\": %s}, \"steps_per_print\": 1000000000,"
             " \"zero_optimization\": {\"stage\": %d%s}}",
             (long long)a->batch, a->gas, a->dtype == DT_DTYPE_BF16 ? "true" : "false",
             a->zero_stage, off);
    json_t *j = dt_ds_config_load(cfg);
    if (j && a->ds_config) {
        json_t *over = dt_ds_config_load(a->ds_config);
        json_t *merged = over ? dt_overwrite_config(j, over) : NULL;
        json_decref(over);
        json_decref(j);
        j = merged;
    }
    dt_engine *e = j ? dt_engine_init(net, j) : NULL;
    json_decref(j);
    if (!e) {
        fprintf(stderr, "dtrain bench: engine: %s\n", dt_last_error());
        return 1;
    }
    dt_comm *comm = dt_engine_comm(e);
    int rank = dt_comm_rank(comm), W = dt_comm_size(comm);
    /* peaks over the training steps (building the model charged its full buffers once) */
    dt_device_reset_peak(dt_ctx_device(dt_module_ctx(net)));
    dt_ctx *ctx = dt_module_ctx(net);
    int total = a->warmup + a->steps;
    double *ms = calloc((size_t)a->steps, sizeof(double)), loss = 0;
    int64_t flops = 0;
    for (int s = 0; s < total; s++) {
        double t0 = dt_now_sec();
        dt_ctx_flops_reset(ctx);
        for (int m = 0; m < a->gas; m++) {
            dt_tensor *l = dt_cross_entropy(dt_engine_forward(e, x), y, -100);
            if (l) loss = dt_item(l);
            if (!l || dt_engine_backward(e, l) != DT_OK || dt_engine_step(e) != DT_OK) {
                fprintf(stderr, "dtrain bench: rank %d step %d failed: %s\n", rank, s,
                        dt_last_error());
                return 1;
            }
            if (m == 0) {
                dt_flops f = dt_ctx_flops(ctx);
                flops = f.forward + f.backward;
            }
        }
        double t1 = dt_now_sec();
        if (s >= a->warmup) ms[s - a->warmup] = (t1 - t0) * 1e3;
    }
    qsort(ms, (size_t)a->steps, sizeof(double), cmp_double);
    double med = a->steps % 2 ? ms[a->steps / 2] : 0.5 * (ms[a->steps / 2 - 1] + ms[a->steps / 2]);
    /* every rank's memory and time, to rank 0 */
    dt_engine_memory mem;
    dt_engine_memory_stats(e, &mem);
    dt_engine_timers tm;
    dt_engine_get_timers(e, &tm);
    struct {
        dt_engine_memory mem;
        double med;
        int64_t rss;
        dt_engine_timers tm;
    } mine = {mem, med, proc_status_bytes("VmHWM:") - rss0, tm}, *all = NULL;
    dt_bytes_list *l = NULL;
    if (dt_comm_gather_bytes(comm, &mine, sizeof mine, 0, &l) != DT_OK) {
        fprintf(stderr, "dtrain bench: %s\n", dt_last_error());
        return 1;
    }
    if (rank == 0) {
        double worst = 0;
        for (int r = 0; r < W; r++) {
            all = l->items[r].data;
            worst = all->med > worst ? all->med : worst;
        }
        int64_t per_step = (gpt ? a->batch * a->seq : a->batch) * a->gas * W;
        double per_s = (double)per_step / (worst / 1e3);
        if (a->json) {
            printf("{\"model\":\"%s\",\"dtype\":\"%s\",\"engine\":true,\"slots\":%d,"
                   "\"threads_per_rank\":%d,\"zero_stage\":%d,\"offload\":\"%s\",\"gas\":%d,"
                   "\"micro_batch\":%lld,\"global_batch\":%lld,\"params\":%lld,"
                   "\"step_ms_median\":%.3f,\"%s\":%.1f,\"gflops_per_rank\":%.2f,"
                   "\"final_loss\":%.6f,\"ranks\":[",
                   a->model, a->dtype == DT_DTYPE_BF16 ? "bf16" : "fp32", W, threads, a->zero_stage,
                   ofl, a->gas, (long long)a->batch, (long long)(a->batch * a->gas * W),
                   (long long)dt_module_num_params(net), worst,
                   gpt ? "tokens_per_s" : "samples_per_s", per_s,
                   (double)flops * a->gas / (worst / 1e3) / 1e9, loss);
            for (int r = 0; r < W; r++) {
                all = l->items[r].data;
                printf("%s{\"rank\":%d,\"step_ms_median\":%.3f,", r ? "," : "", r, all->med);
                print_stats("device_peak_bytes", &all->mem.device, true);
                printf(",");
                print_stats("device_current_bytes", &all->mem.device, false);
                printf(",");
                print_stats("host_peak_bytes", &all->mem.host, true);
                /* engine timers per optimizer step (warm-up included) */
                double k = all->tm.steps > 0 ? 1e3 / (double)all->tm.steps : 0;
                printf(",\"nvme_bytes\":%lld,\"rss_added_bytes\":%lld,\"ms_per_step\":{"
                       "\"forward\":%.2f,\"backward\":%.2f,\"step\":%.2f,\"reduce\":%.2f,"
                       "\"gather\":%.2f,\"offload\":%.2f}}",
                       (long long)all->mem.nvme_bytes, (long long)all->rss, all->tm.forward_s * k,
                       all->tm.backward_s * k, all->tm.step_s * k, all->tm.reduce_s * k,
                       all->tm.gather_s * k, all->tm.offload_s * k);
            }
            printf("]}\n");
        } else {
            printf("%s %s engine, %d ranks x %d threads, ZeRO-%d, offload %s: %.3f ms/step, %.1f "
                   "%s/s\n",
                   a->model, a->dtype == DT_DTYPE_BF16 ? "bf16" : "fp32", W, threads, a->zero_stage,
                   ofl, worst, per_s, gpt ? "tokens" : "samples");
        }
    }
    dt_bytes_list_free(l);
    free(ms);
    dt_engine_free(e);
    return 0;
}

/* ---- pipeline mode ---- */

typedef struct pipe_bench {
    dt_gpt_config g;
    const dt_tensor *x, *y; /* one fixed micro-batch of tokens and targets (heap) */
} pipe_bench;

static dt_module *pb_embed(void *u) {
    return dt_gpt_embedding(&((pipe_bench *)u)->g);
}
static dt_module *pb_block(void *u) {
    return dt_gpt_block(&((pipe_bench *)u)->g);
}
static dt_module *pb_head(void *u) {
    return dt_gpt_head(&((pipe_bench *)u)->g);
}

static dt_tensor *pb_loss(dt_tensor *logits, dt_tensor *y, void *u) {
    int64_t V = ((pipe_bench *)u)->g.vocab;
    return dt_cross_entropy(dt_reshape(logits, 2, (int64_t[]){dt_numel(logits) / V, V}),
                            dt_reshape(y, 1, (int64_t[]){dt_numel(y)}), -100);
}

static dt_status pb_data(void *u, int64_t micro, dt_ctx *c, bool want_in, dt_tensor **in,
                         bool want_lab, dt_tensor **lab) {
    (void)micro;
    pipe_bench *b = u;
    if (want_in && !(*in = dt_tensor_wrap(c, DT_DTYPE_I64, 2, b->x->shape, b->x->data)))
        return dt_last_status();
    if (want_lab && !(*lab = dt_tensor_wrap(c, DT_DTYPE_I64, 2, b->y->shape, b->y->data)))
        return dt_last_status();
    return DT_OK;
}

/* A global batch of --micro-batches micro-batches through the pipeline per step; rank 0
 * prints the throughput and every stage's waiting fraction next to the 1F1B ideal bubble. */
static int bench_pipe(bench_args *a, const dt_tensor *x, const dt_tensor *y, int threads) {
    int M = a->micro_batches ? a->micro_batches : 8;
    pipe_bench pb = {{.vocab = a->vocab,
                      .seq = a->seq,
                      .d_model = a->d_model,
                      .n_head = a->heads,
                      .n_layer = a->layers},
                     x,
                     y};
    int nl = (int)a->layers + 2;
    dt_pipe_layer *layers = calloc((size_t)nl, sizeof *layers);
    layers[0] = (dt_pipe_layer){.type = "GPTEmbedding", .build = pb_embed, .arg = &pb};
    for (int i = 1; i <= a->layers; i++)
        layers[i] = (dt_pipe_layer){.type = "Block", .build = pb_block, .arg = &pb};
    layers[nl - 1] = (dt_pipe_layer){.type = "GPTHead", .build = pb_head, .arg = &pb};
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "{\"train_micro_batch_size_per_gpu\": %lld, \"gradient_accumulation_steps\": %d,"
             " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001}},"
             " \"bf16\": {\"enabled\": %s}, \"zero_optimization\": {\"stage\": %d}}",
             (long long)a->batch, M, a->dtype == DT_DTYPE_BF16 ? "true" : "false",
             a->zero_stage > 0 ? a->zero_stage : 0);
    json_t *j = dt_ds_config_load(cfg);
    dt_comm *w = NULL;
    dt_pipe_opts o = dt_pipe_defaults();
    o.num_stages = a->pipe_stages;
    o.loss = pb_loss;
    o.loss_user = &pb;
    dt_pipe_engine *p = j && dt_comm_init(&w) == DT_OK
                            ? (o.world = w, dt_pipe_engine_init(nl, layers, &o, j))
                            : NULL;
    json_decref(j);
    if (!p) {
        fprintf(stderr, "dtrain bench: pipeline: %s\n", dt_last_error());
        if (w) dt_comm_finalize(w);
        free(layers);
        return 1;
    }
    int total = a->warmup + a->steps;
    double *ms = calloc((size_t)a->steps, sizeof(double)),
           *wait = calloc((size_t)a->steps, sizeof(double));
    float loss = 0;
    for (int s = 0; s < total; s++) {
        double t0 = dt_now_sec();
        dt_status st;
        loss = dt_pipe_train_batch(p, pb_data, &pb, &st);
        if (st != DT_OK) {
            fprintf(stderr, "dtrain bench: pipeline step %d: %s\n", s, dt_last_error());
            return 1;
        }
        if (s >= a->warmup) {
            ms[s - a->warmup] = (dt_now_sec() - t0) * 1e3;
            wait[s - a->warmup] = dt_pipe_last_wait_fraction(p);
        }
    }
    qsort(ms, (size_t)a->steps, sizeof(double), cmp_double);
    qsort(wait, (size_t)a->steps, sizeof(double), cmp_double);
    double med = ms[a->steps / 2], wmed = wait[a->steps / 2];
    /* every rank's step time, waiting fraction and activation peak, to rank 0 */
    int S = dt_pipe_num_stages(p), D = dt_pipe_dp_size(p);
    dt_mem_stats ms_stats;
    dt_device_stats(dt_ctx_device(dt_module_ctx(dt_pipe_stage_module(p))), &ms_stats);
    double mine[3] = {med, wmed, (double)ms_stats.peak[DT_MEM_ACTIVATIONS]};
    dt_bytes_list *l = NULL;
    dt_comm_gather_bytes(w, mine, sizeof mine, 0, &l);
    if (dt_comm_rank(w) == 0 && l) {
        double worst = 0;
        for (int r = 0; r < l->count; r++) {
            const double *v = l->items[r].data;
            worst = v[0] > worst ? v[0] : worst;
        }
        int64_t tokens = a->batch * a->seq * M * D;
        double ideal = (double)(S - 1) / (double)(M + S - 1);
        printf("{\"model\":\"gpt\",\"pipeline_stages\":%d,\"data_parallel\":%d,"
               "\"threads_per_rank\":%d,\"micro_batches\":%d,\"micro_batch\":%lld,"
               "\"global_batch\":%lld,\"step_ms_median\":%.3f,\"tokens_per_s\":%.1f,"
               "\"ideal_bubble\":%.4f,\"final_loss\":%.6f,\"wait_fraction_per_rank\":[",
               S, D, threads, M, (long long)a->batch, (long long)(a->batch * M * D), worst,
               (double)tokens / (worst / 1e3), ideal, (double)loss);
        for (int r = 0; r < l->count; r++)
            printf("%s%.4f", r ? "," : "", ((const double *)l->items[r].data)[1]);
        printf("],\"activation_peak_bytes_per_rank\":[");
        for (int r = 0; r < l->count; r++)
            printf("%s%.0f", r ? "," : "", ((const double *)l->items[r].data)[2]);
        printf("]}\n");
    }
    dt_bytes_list_free(l);
    dt_pipe_engine_free(p);
    dt_comm_finalize(w);
    free(ms);
    free(wait);
    free(layers);
    return 0;
}

static int cmp_op_time(const void *pa, const void *pb) {
    const dt_op_time *a = pa, *b = pb;
    double ta = a->fwd_sec + a->bwd_sec, tb = b->fwd_sec + b->bwd_sec;
    return ta < tb ? 1 : ta > tb ? -1 : 0;
}

/* --profile: the step's phases and each op's forward and backward, per timed step, the
 * dearest op first; as a JSON member "profile" or as a table. */
static void print_profile(dt_ctx *ctx, const double phase[4], int steps, bool json) {
    int n = dt_ctx_op_times(ctx, NULL, 0);
    dt_op_time *t = calloc((size_t)(n ? n : 1), sizeof *t);
    if (!t) return;
    n = dt_ctx_op_times(ctx, t, n);
    qsort(t, (size_t)n, sizeof *t, cmp_op_time);
    /* reset: the context and FLOP counters; optimizer: the step with the gradients zeroed */
    static const char *names[4] = {"reset", "forward", "backward", "optimizer"};
    if (json) {
        printf(",\"profile\":{");
        for (int k = 0; k < 4; k++) printf("\"%s_ms\":%.3f,", names[k], phase[k]);
        printf("\"ops\":[");
        for (int i = 0; i < n; i++)
            printf("%s{\"op\":\"%s\",\"fwd_calls\":%.2f,\"fwd_ms\":%.3f,\"bwd_calls\":%.2f,"
                   "\"bwd_ms\":%.3f}",
                   i ? "," : "", t[i].op, (double)t[i].fwd_calls / steps,
                   t[i].fwd_sec * 1e3 / steps, (double)t[i].bwd_calls / steps,
                   t[i].bwd_sec * 1e3 / steps);
        printf("]}");
    } else {
        printf("per step (ms):");
        for (int k = 0; k < 4; k++) printf(" %s %.3f", names[k], phase[k]);
        printf("\n%-28s %8s %10s %8s %10s\n", "op", "fwd/step", "fwd ms", "bwd/step", "bwd ms");
        for (int i = 0; i < n; i++)
            printf("%-28s %8.2f %10.3f %8.2f %10.3f\n", t[i].op, (double)t[i].fwd_calls / steps,
                   t[i].fwd_sec * 1e3 / steps, (double)t[i].bwd_calls / steps,
                   t[i].bwd_sec * 1e3 / steps);
    }
    free(t);
}

static int bench_train(bench_args *a) {
    bool gpt = !strcmp(a->model, "gpt"), cnn = !strcmp(a->model, "cnn"),
         mlp = !strcmp(a->model, "mlp");
    if (!gpt && !cnn && !mlp) {
        fprintf(stderr, "dtrain bench: unknown model '%s'; hint: use --model mlp, cnn or gpt\n",
                a->model);
        return 2;
    }
    if (!a->batch) a->batch = gpt ? 8 : 128;
    if (!a->layers) a->layers = gpt ? 4 : 2;
    if (!a->hidden) a->hidden = 512;
    if (!a->d_model) a->d_model = 256;
    if (!a->heads) a->heads = 4;
    if (!a->seq) a->seq = 128;
    if (!a->vocab) a->vocab = 256;
    if (gpt && a->d_model % a->heads) {
        fprintf(stderr, "dtrain bench: --d-model %lld is not divisible by --heads %lld\n",
                (long long)a->d_model, (long long)a->heads);
        return 2;
    }
    /* under mpirun (--slots), the launcher's OMP_NUM_THREADS (cores / ranks) is the default */
    const char *omp = getenv("OMP_NUM_THREADS");
    if (!a->threads && getenv("OMPI_COMM_WORLD_SIZE") && omp && atoi(omp) > 0)
        a->threads = atoi(omp);
    dt_set_num_threads(a->threads);
    int threads = dt_get_num_threads();
    /* resident memory before any model state: the program and its libraries */
    int64_t rss0 = proc_status_bytes("VmRSS:");
    dt_ctx *ctx = dt_ctx_new(NULL, 1234);
    if (!ctx) {
        fprintf(stderr, "dtrain bench: %s\n", dt_last_error());
        return 1;
    }
    dt_module *net;
    int64_t classes = 10;
    if (mlp)
        net = dt_model_mlp(784, a->hidden, (int)a->layers, 10);
    else if (cnn)
        net = dt_model_cnn();
    else {
        dt_gpt_config g = {.vocab = a->vocab,
                           .seq = a->seq,
                           .d_model = a->d_model,
                           .n_head = a->heads,
                           .n_layer = a->layers,
                           .dropout = 0.f};
        net = dt_model_gpt(&g);
        classes = a->vocab;
    }
    if (!net || dt_module_build(net, ctx, 42) != DT_OK) {
        fprintf(stderr, "dtrain bench: cannot build the %s model: %s\n", a->model, dt_last_error());
        dt_module_free(net);
        dt_ctx_free(ctx);
        return 1;
    }
    /* the plain step's optimiser (the engine makes its own from the config) */
    dt_optim_config oc = dt_optim_defaults(DT_OPTIM_ADAMW);
    bool plain = a->zero_stage < 0 && !a->pipe_stages;
    dt_optimizer *opt = plain ? dt_optim_new_for_module(&oc, net) : NULL;
    /* one fixed batch, made once */
    dt_rng rng;
    dt_rng_init(&rng, 7);
    dt_tensor *x, *y;
    int64_t B = a->batch;
    if (gpt) {
        int64_t shape[2] = {B, a->seq};
        x = dt_tensor_new_heap(ctx, DT_DTYPE_I64, 2, shape, DT_MEM_OTHER);
        y = dt_tensor_new_heap(ctx, DT_DTYPE_I64, 2, shape, DT_MEM_OTHER);
        for (int64_t i = 0; x && y && i < B * a->seq; i++) {
            ((int64_t *)x->data)[i] = (int64_t)dt_rng_below(&rng, (uint64_t)a->vocab);
            ((int64_t *)y->data)[i] = (int64_t)dt_rng_below(&rng, (uint64_t)a->vocab);
        }
    } else {
        int64_t xs4[4] = {B, 1, 28, 28}, xs2[2] = {B, 784};
        x = cnn ? dt_tensor_new_heap(ctx, DT_DTYPE_F32, 4, xs4, DT_MEM_OTHER)
                : dt_tensor_new_heap(ctx, DT_DTYPE_F32, 2, xs2, DT_MEM_OTHER);
        y = dt_tensor_new_heap(ctx, DT_DTYPE_I64, 1, &B, DT_MEM_OTHER);
        if (x) dt_rng_fill_normal(&rng, x->data, dt_numel(x), 0.f, 1.f);
        for (int64_t i = 0; y && i < B; i++)
            ((int64_t *)y->data)[i] = (int64_t)dt_rng_below(&rng, (uint64_t)classes);
    }
    if ((plain && !opt) || !x || !y) {
        fprintf(stderr, "dtrain bench: %s\n", dt_last_error());
        return 1;
    }
    if (a->pipe_stages > 0) {
        if (!gpt) {
            fprintf(stderr, "dtrain bench: --pipeline-stages needs --model gpt\n");
            return 2;
        }
        dt_module_free(net); /* the stages build their own layers */
        net = NULL;
        int rc = bench_pipe(a, x, y, threads);
        dt_tensor_free(x);
        dt_tensor_free(y);
        dt_optim_free(opt);
        dt_ctx_free(ctx);
        return rc;
    }
    if (a->zero_stage >= 0) {
        int rc = bench_engine(a, net, x, y, gpt, threads, rss0);
        dt_tensor_free(x);
        dt_tensor_free(y);
        dt_optim_free(opt);
        dt_module_free(net);
        dt_ctx_free(ctx);
        return rc;
    }
    if (a->dtype == DT_DTYPE_BF16) dt_ctx_set_autocast(ctx, DT_DTYPE_BF16);
    int total = a->warmup + a->steps;
    double *ms = calloc((size_t)a->steps, sizeof(double));
    int64_t flops = 0;
    double loss = 0, phase[4] = {0}; /* timed steps: reset, forward, backward, optimizer */
    dt_module_zero_grad(net);        /* later steps find them zeroed by the optimizer step */
    for (int s = 0; s < total; s++) {
        if (a->profile && s == a->warmup && dt_ctx_set_profile(ctx, true) != DT_OK) {
            fprintf(stderr, "dtrain bench: --profile: %s\n", dt_last_error());
            return 1;
        }
        double t[5];
        t[0] = dt_now_sec();
        dt_ctx_reset(ctx);
        dt_ctx_flops_reset(ctx);
        t[1] = dt_now_sec();
        dt_tensor *logits = dt_module_forward(net, x);
        dt_tensor *l = dt_cross_entropy(logits, y, -100);
        t[2] = dt_now_sec();
        bool ok = l && dt_backward(l) == DT_OK;
        t[3] = dt_now_sec();
        if (!ok || dt_optim_step_module_zero_grad(opt, net) != DT_OK) {
            fprintf(stderr, "dtrain bench: step %d failed: %s\n", s, dt_last_error());
            return 1;
        }
        loss = dt_item(l);
        t[4] = dt_now_sec();
        if (s >= a->warmup) {
            ms[s - a->warmup] = (t[4] - t[0]) * 1e3;
            for (int k = 0; k < 4; k++) phase[k] += (t[k + 1] - t[k]) * 1e3 / a->steps;
        }
        dt_flops f = dt_ctx_flops(ctx);
        flops = f.forward + f.backward;
    }
    double mean = 0;
    for (int s = 0; s < a->steps; s++) mean += ms[s] / a->steps;
    qsort(ms, (size_t)a->steps, sizeof(double), cmp_double);
    double med = a->steps % 2 ? ms[a->steps / 2] : 0.5 * (ms[a->steps / 2 - 1] + ms[a->steps / 2]);
    dt_mem_stats st;
    dt_device_stats(dt_ctx_device(ctx), &st);
    int64_t rss = proc_status_bytes("VmHWM:");
    double per_s = (gpt ? (double)(B * a->seq) : (double)B) / (med / 1e3);
    if (a->json) {
        printf("{\"model\":\"%s\",\"dtype\":\"%s\",\"threads\":%d,\"batch\":%lld,", a->model,
               a->dtype == DT_DTYPE_BF16 ? "bf16" : "fp32", threads, (long long)B);
        if (gpt)
            printf("\"layers\":%lld,\"d_model\":%lld,\"heads\":%lld,\"seq\":%lld,\"vocab\":%lld,",
                   (long long)a->layers, (long long)a->d_model, (long long)a->heads,
                   (long long)a->seq, (long long)a->vocab);
        else if (mlp)
            printf("\"layers\":%lld,\"hidden\":%lld,", (long long)a->layers, (long long)a->hidden);
        printf("\"params\":%lld,\"step_ms_median\":%.3f,\"step_ms_min\":%.3f,"
               "\"step_ms_mean\":%.3f,\"%s\":%.1f,"
               "\"gflops\":%.2f,\"flops_per_step\":%lld,\"final_loss\":%.6f,",
               (long long)dt_module_num_params(net), med, ms[0], mean,
               gpt ? "tokens_per_s" : "samples_per_s", per_s, (double)flops / (med / 1e3) / 1e9,
               (long long)flops, loss);
        print_peaks(&st);
        /* the RSS the run added over the loaded program, against the accounted peak */
        printf(",\"peak_rss_bytes\":%lld,\"baseline_rss_bytes\":%lld,\"rss_over_accounted\":%.3f",
               (long long)rss, (long long)rss0,
               st.total_peak > 0 ? (double)(rss - rss0) / (double)st.total_peak : 0.0);
        if (a->profile) print_profile(ctx, phase, a->steps, true);
        printf("}\n");
    } else {
        printf("%s %s, %d threads, %lld params: %.3f ms/step (median of %d), %.1f %s/s, %.2f "
               "GFLOP/s, peak accounted %.1f MiB, peak RSS %.1f MiB\n",
               a->model, a->dtype == DT_DTYPE_BF16 ? "bf16" : "fp32", threads,
               (long long)dt_module_num_params(net), med, a->steps, per_s,
               gpt ? "tokens" : "samples", (double)flops / (med / 1e3) / 1e9,
               st.total_peak / 1048576.0, rss / 1048576.0);
        if (a->profile) print_profile(ctx, phase, a->steps, false);
    }
    free(ms);
    dt_tensor_free(x);
    dt_tensor_free(y);
    dt_optim_free(opt);
    dt_module_free(net);
    dt_ctx_free(ctx);
    return 0;
}

static int bench_gemm(bench_args *a) {
    if (a->openblas && a->dtype != DT_DTYPE_F32) {
        fprintf(stderr, "dtrain bench: --backend openblas measures fp32 only (OpenBLAS has no "
                        "bf16 GEMM here)\n");
        return 2;
    }
    int64_t n = a->size ? a->size : 1024;
    dt_set_num_threads(a->threads);
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    int64_t shape[2] = {n, n};
    dt_tensor *A = dt_tensor_new_heap(ctx, DT_DTYPE_F32, 2, shape, DT_MEM_OTHER);
    dt_tensor *B = dt_tensor_new_heap(ctx, DT_DTYPE_F32, 2, shape, DT_MEM_OTHER);
    if (!A || !B) {
        fprintf(stderr, "dtrain bench: %s\n", dt_last_error());
        return 1;
    }
    dt_rng r;
    dt_rng_init(&r, 3);
    dt_rng_fill_uniform(&r, A->data, n * n, -1, 1);
    dt_rng_fill_uniform(&r, B->data, n * n, -1, 1);
    dt_ctx_set_autocast(ctx, a->dtype);
    int64_t cshape[2] = {n, n};
    dt_tensor *C =
        a->openblas ? dt_tensor_new_heap(ctx, DT_DTYPE_F32, 2, cshape, DT_MEM_OTHER) : NULL;
    if (a->openblas && !C) {
        fprintf(stderr, "dtrain bench: %s\n", dt_last_error());
        return 1;
    }
    int reps = a->reps ? a->reps : 10;
    double *ms = calloc((size_t)reps, sizeof(double));
    for (int i = -2; i < reps; i++) {
        double t0 = dt_now_sec();
        if (a->openblas) /* OpenBLAS (OpenMP build) threads follow dt_set_num_threads */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.f,
                        A->data, (int)n, B->data, (int)n, 0.f, C->data, (int)n);
        else
            dt_matmul(A, B);
        double t1 = dt_now_sec();
        dt_ctx_reset(ctx);
        if (i >= 0) ms[i] = (t1 - t0) * 1e3;
    }
    qsort(ms, (size_t)reps, sizeof(double), cmp_double);
    double med = ms[reps / 2], gf = 2.0 * n * n * n / (med / 1e3) / 1e9;
    if (a->json)
        printf("{\"bench\":\"gemm\",\"backend\":\"%s\",\"dtype\":\"%s\",\"threads\":%d,"
               "\"size\":%lld,\"ms_median\":%.3f,\"gflops\":%.1f}\n",
               a->openblas ? "openblas" : "dtrain", a->dtype == DT_DTYPE_BF16 ? "bf16" : "fp32",
               dt_get_num_threads(), (long long)n, med, gf);
    else
        printf("gemm %lldx%lld %s (%s), %d threads: %.3f ms, %.1f GFLOP/s\n", (long long)n,
               (long long)n, a->dtype == DT_DTYPE_BF16 ? "bf16" : "fp32",
               a->openblas ? "openblas" : "dtrain", dt_get_num_threads(), med, gf);
    free(ms);
    dt_tensor_free(C);
    dt_tensor_free(A);
    dt_tensor_free(B);
    dt_ctx_free(ctx);
    return 0;
}

int dt_cli_bench(int argc, char **argv) {
    if (argc < 1) {
        bench_usage(stderr);
        return 2;
    }
    bench_args a = {.model = NULL,
                    .steps = 20,
                    .warmup = 3,
                    .dtype = DT_DTYPE_F32,
                    .zero_stage = -1,
                    .gas = 1,
                    .slots = 1};
    int r = parse(argc - 1, argv + 1, &a);
    if (r) return r < 0 ? 2 : 0;
    if ((a.offload || a.nvme_path || a.gas > 1 || a.ds_config) && a.zero_stage < 0)
        a.zero_stage = 0;
    if (a.slots > 1 && a.zero_stage < 0 && !a.pipe_stages) a.zero_stage = 0;
    if (a.profile && (a.pipe_stages > 0 || a.zero_stage >= 0)) {
        fprintf(stderr, "dtrain bench: --profile times plain steps only; hint: drop --slots, "
                        "--zero-stage, --offload, --gas, --ds-config and --pipeline-stages\n");
        return 2;
    }
    /* several ranks: run this command again under mpirun */
    if (a.slots > 1 && !getenv("OMPI_COMM_WORLD_SIZE"))
        return dt_cli_mpirun(argc, argv, a.slots, "bench");
    if (!strcmp(argv[0], "train")) {
        if (!a.model) {
            fprintf(stderr, "dtrain bench train: --model is required (mlp, cnn or gpt)\n");
            return 2;
        }
        return bench_train(&a);
    }
    if (!strcmp(argv[0], "gemm")) return bench_gemm(&a);
    if (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        bench_usage(stdout);
        return 0;
    }
    fprintf(stderr, "dtrain bench: unknown benchmark '%s' (train or gemm)\n", argv[0]);
    return 2;
}
