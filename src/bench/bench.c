/* bench.c — the benchmark harness's options and its plain training step.
 *
 * A training step is: zero grads, forward, cross-entropy loss, backward, AdamW step, on one
 * batch of random data from a fixed seed (made once, outside the timed loop). In plain steps
 * the AdamW step leaves the gradients zeroed lazily (dt_optim_step_module_zero_grad: the next
 * backward stores the first gradients instead of adding them to zeros; the first step's are
 * zeroed before the loop). The step time is the median over `steps` timed steps after
 * `warmup` untimed ones; `gflops` is the model FLOPs of one step (forward + backward, from
 * the op table's counts) over the median time. With a ZeRO stage the step runs through the
 * engine (bench_engine.c), with pipeline stages through the pipeline engine (bench_pipe.c);
 * the GEMM rate is bench_gemm.c and the writers bench_report.c. */
#include "bench_impl.h"
#include "tensor/tensor_iface.h"

#include "dtrain/optim.h"

#include <stdlib.h>
#include <string.h>

dt_bench_opts dt_bench_defaults(void) {
    return (dt_bench_opts){.model = NULL,
                           .steps = 20,
                           .warmup = 3,
                           .dtype = DT_DTYPE_F32,
                           .zero_stage = -1,
                           .gas = 1,
                           .slots = 1};
}

dt_status dt_bench_resolve(dt_bench_opts *a, dt_bench_job job) {
    if ((a->offload || a->nvme_path || a->gas > 1 || a->ds_config) && a->zero_stage < 0)
        a->zero_stage = 0;
    if (a->slots > 1 && a->zero_stage < 0 && !a->pipe_stages) a->zero_stage = 0;
    if (a->profile && (a->pipe_stages > 0 || a->zero_stage >= 0))
        return dt_error(DT_ERR_INVALID,
                        "--profile times plain steps only; hint: drop --slots, --zero-stage, "
                        "--offload, --gas, --ds-config and --pipeline-stages");
    if (job == DT_BENCH_GEMM) {
        if (a->openblas && a->dtype != DT_DTYPE_F32)
            return dt_error(DT_ERR_INVALID, "--backend openblas measures fp32 only (OpenBLAS has "
                                            "no bf16 GEMM here)");
        if (!a->m) {
            if (!a->size) a->size = 1024;
            a->m = a->n = a->k = a->size;
        } else if (a->size && (a->m != a->size || a->n != a->size || a->k != a->size)) {
            return dt_error(DT_ERR_INVALID, "--size and --shape both give the product's size; "
                                            "hint: use one");
        }
        if (a->m * a->k > ((int64_t)1 << 31) || a->k * a->n > ((int64_t)1 << 31) ||
            a->m * a->n > ((int64_t)1 << 31))
            return dt_error(DT_ERR_INVALID,
                            "--shape %lldx%lldx%lld: a matrix over 2^31 "
                            "elements; hint: use smaller sizes",
                            (long long)a->m, (long long)a->n, (long long)a->k);
        return DT_OK;
    }
    const char *m = a->model ? a->model : "";
    bool gpt = !strcmp(m, "gpt");
    if (!gpt && strcmp(m, "cnn") && strcmp(m, "mlp"))
        return dt_error(DT_ERR_INVALID, "unknown model '%s'; hint: use --model mlp, cnn or gpt", m);
    if (!a->batch) a->batch = gpt ? 8 : 128;
    if (!a->layers) a->layers = gpt ? 4 : 2;
    if (!a->hidden) a->hidden = 512;
    if (!a->d_model) a->d_model = 256;
    if (!a->heads) a->heads = 4;
    if (!a->seq) a->seq = 128;
    if (!a->vocab) a->vocab = 256;
    if (gpt && a->d_model % a->heads)
        return dt_error(DT_ERR_INVALID, "--d-model %lld is not divisible by --heads %lld",
                        (long long)a->d_model, (long long)a->heads);
    if (a->pipe_stages > 0 && !gpt)
        return dt_error(DT_ERR_INVALID, "--pipeline-stages needs --model gpt");
    if (a->pipe_stages <= 0 && a->zero_stage == 0 && a->offload && strcmp(a->offload, "none"))
        return dt_error(DT_ERR_INVALID, "--offload needs --zero-stage 1 or higher");
    return DT_OK;
}

static int cmp_op_time(const void *pa, const void *pb) {
    const dt_op_time *a = pa, *b = pb;
    double ta = a->fwd_sec + a->bwd_sec, tb = b->fwd_sec + b->bwd_sec;
    return ta < tb ? 1 : ta > tb ? -1 : 0;
}

/* --profile: every op's row, the dearest first, into r. */
static dt_status take_op_times(dt_ctx *ctx, dt_bench_result *r) {
    int n = dt_ctx_op_times(ctx, NULL, 0);
    r->ops = calloc((size_t)(n ? n : 1), sizeof *r->ops);
    if (!r->ops) return dt_error(DT_ERR_OOM, "out of memory");
    r->n_ops = dt_ctx_op_times(ctx, r->ops, n);
    qsort(r->ops, (size_t)r->n_ops, sizeof *r->ops, cmp_op_time);
    return DT_OK;
}

/* The timed loop of plain steps: forward, loss, backward, AdamW with lazily zeroed grads. */
static dt_status plain_steps(const dt_bench_opts *a, dt_ctx *ctx, dt_module *net, dt_optimizer *opt,
                             dt_tensor *x, dt_tensor *y, bool gpt, dt_bench_result *r) {
    if (a->dtype == DT_DTYPE_BF16) dt_ctx_set_autocast(ctx, DT_DTYPE_BF16);
    int total = a->warmup + a->steps;
    double *ms = calloc((size_t)a->steps, sizeof(double));
    if (!ms) return dt_error(DT_ERR_OOM, "out of memory");
    int64_t flops = 0;
    double loss = 0, phase[4] = {0}; /* timed steps: reset, forward, backward, optimizer */
    dt_module_zero_grad(net);        /* later steps find them zeroed by the optimizer step */
    for (int s = 0; s < total; s++) {
        if (a->profile && s == a->warmup && dt_ctx_set_profile(ctx, true) != DT_OK) {
            free(ms);
            return dt_error(dt_last_status(), "--profile: %s", dt_last_error());
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
            free(ms);
            return dt_error(dt_last_status(), "step %d failed: %s", s, dt_last_error());
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
    dt__bench_sort(ms, a->steps);
    double med = a->steps % 2 ? ms[a->steps / 2] : 0.5 * (ms[a->steps / 2 - 1] + ms[a->steps / 2]);
    r->step_ms_median = med;
    r->step_ms_min = ms[0];
    r->step_ms_mean = mean;
    free(ms);
    r->flops_per_step = flops;
    r->final_loss = loss;
    r->params = dt_module_num_params(net);
    r->per_s = (gpt ? (double)(a->batch * a->seq) : (double)a->batch) / (med / 1e3);
    dt_device_stats(dt_ctx_device(ctx), &r->mem);
    r->peak_rss_bytes = dt__bench_proc_bytes("VmHWM:");
    memcpy(r->phase_ms, phase, sizeof phase);
    return a->profile ? take_op_times(ctx, r) : DT_OK;
}

/* The model of `a` built on ctx, or NULL with the error set. */
static dt_module *build_model(const dt_bench_opts *a, dt_ctx *ctx) {
    dt_module *net;
    if (!strcmp(a->model, "mlp"))
        net = dt_model_mlp(784, a->hidden, (int)a->layers, 10);
    else if (!strcmp(a->model, "cnn"))
        net = dt_model_cnn();
    else {
        dt_gpt_config g = {.vocab = a->vocab,
                           .seq = a->seq,
                           .d_model = a->d_model,
                           .n_head = a->heads,
                           .n_layer = a->layers,
                           .dropout = 0.f};
        net = dt_model_gpt(&g);
    }
    if (!net || dt_module_build(net, ctx, 42) != DT_OK) {
        dt_error(dt_last_status(), "cannot build the %s model: %s", a->model, dt_last_error());
        dt_module_free(net);
        return NULL;
    }
    return net;
}

/* One fixed batch, made once: tokens and next tokens (gpt) or inputs and class labels. */
static dt_status make_batch(const dt_bench_opts *a, dt_ctx *ctx, dt_tensor **xo, dt_tensor **yo) {
    bool gpt = !strcmp(a->model, "gpt"), cnn = !strcmp(a->model, "cnn");
    int64_t classes = gpt ? a->vocab : 10, B = a->batch;
    dt_rng rng;
    dt_rng_init(&rng, 7);
    dt_tensor *x, *y;
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
    *xo = x;
    *yo = y;
    return x && y ? DT_OK : dt_last_status();
}

dt_bench_result *dt__bench_result_new(const dt_bench_opts *o, dt_bench_job job) {
    dt_bench_result *r = calloc(1, sizeof *r);
    if (!r) {
        dt_error(DT_ERR_OOM, "out of memory");
        return NULL;
    }
    r->opts = *o;
    if (dt_bench_resolve(&r->opts, job) != DT_OK) {
        free(r);
        return NULL;
    }
    r->root = true;
    r->world = 1;
    return r;
}

dt_status dt_bench_train(const dt_bench_opts *opts, dt_bench_result **out) {
    *out = NULL;
    dt_bench_result *r = dt__bench_result_new(opts, DT_BENCH_TRAIN);
    if (!r) return dt_last_status();
    dt_bench_opts *a = &r->opts;
    bool gpt = !strcmp(a->model, "gpt");
    r->kind = a->pipe_stages > 0   ? DT_BENCH_KIND_PIPELINE
              : a->zero_stage >= 0 ? DT_BENCH_KIND_ENGINE
                                   : DT_BENCH_KIND_STEP;
    /* under mpirun (--slots), the launcher's OMP_NUM_THREADS (cores / ranks) is the default */
    const char *omp = getenv("OMP_NUM_THREADS");
    if (!a->threads && getenv("OMPI_COMM_WORLD_SIZE") && omp && atoi(omp) > 0)
        a->threads = atoi(omp);
    dt_set_num_threads(a->threads);
    r->threads = dt_get_num_threads();
    /* resident memory before any model state: the program and its libraries */
    int64_t rss0 = dt__bench_proc_bytes("VmRSS:");
    r->baseline_rss_bytes = rss0;
    dt_ctx *ctx = dt_ctx_new(NULL, 1234);
    if (!ctx) {
        free(r);
        return dt_last_status();
    }
    dt_module *net = build_model(a, ctx);
    /* the plain step's optimiser (the engine makes its own from the config) */
    dt_optim_config oc = dt_optim_defaults(DT_OPTIM_ADAMW);
    dt_optimizer *opt = NULL;
    dt_tensor *x = NULL, *y = NULL;
    dt_status st = net ? DT_OK : dt_last_status();
    if (st == DT_OK && r->kind == DT_BENCH_KIND_STEP && !(opt = dt_optim_new_for_module(&oc, net)))
        st = dt_last_status();
    if (st == DT_OK) st = make_batch(a, ctx, &x, &y);
    if (st == DT_OK && r->kind == DT_BENCH_KIND_PIPELINE) {
        dt_module_free(net); /* the stages build their own layers */
        net = NULL;
        st = dt__bench_pipe(a, x, y, r);
    } else if (st == DT_OK && r->kind == DT_BENCH_KIND_ENGINE) {
        st = dt__bench_engine(a, net, x, y, gpt, rss0, r);
    } else if (st == DT_OK) {
        st = plain_steps(a, ctx, net, opt, x, y, gpt, r);
    }
    dt_tensor_free(x);
    dt_tensor_free(y);
    dt_optim_free(opt);
    dt_module_free(net);
    dt_ctx_free(ctx);
    if (st != DT_OK) {
        dt_bench_result_free(r);
        return st;
    }
    *out = r;
    return DT_OK;
}

void dt_bench_result_free(dt_bench_result *r) {
    if (!r) return;
    free(r->ops);
    free(r->ranks);
    free(r);
}
