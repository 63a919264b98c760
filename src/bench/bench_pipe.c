/* bench_pipe.c — the benchmark's gpt training step through the pipeline engine: embedding,
 * blocks and head (dt_pipe_gpt_layers) cut into `pipe_stages` stages on the job's ranks (stages x data-parallel),
 * a global batch of `micro_batches` micro-batches per step under the 1F1B schedule. Rank 0
 * gathers every rank's median step time, waiting fraction and activation peak, to set next to
 * the schedule's ideal bubble. */
#include "bench_impl.h"

#include "dtrain/pipe.h"
#include "engine/engine_iface.h"

#include <stdlib.h>
#include <string.h>

typedef struct pipe_bench {
    dt_gpt_config g;
    const dt_tensor *x, *y; /* one fixed micro-batch of tokens and targets (heap) */
} pipe_bench;

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

/* warmup + steps global batches; this rank's median step time and waiting fraction. */
static dt_status pipe_steps(const dt_bench_opts *a, dt_pipe_engine *p, pipe_bench *pb,
                            dt_bench_rank *mine, float *loss) {
    int total = a->warmup + a->steps;
    double *ms = calloc((size_t)a->steps, sizeof(double)),
           *wait = calloc((size_t)a->steps, sizeof(double));
    dt_status st = ms && wait ? DT_OK : dt_error(DT_ERR_OOM, "out of memory");
    for (int s = 0; st == DT_OK && s < total; s++) {
        double t0 = dt_now_sec();
        *loss = dt_pipe_train_batch(p, pb_data, pb, &st);
        if (st != DT_OK) {
            st = dt_error(st, "pipeline step %d: %s", s, dt_last_error());
            break;
        }
        if (s >= a->warmup) {
            ms[s - a->warmup] = (dt_now_sec() - t0) * 1e3;
            wait[s - a->warmup] = dt_pipe_last_wait_fraction(p);
        }
    }
    if (st == DT_OK) {
        dt__bench_sort(ms, a->steps);
        dt__bench_sort(wait, a->steps);
        mine->step_ms_median = ms[a->steps / 2];
        mine->wait_fraction = wait[a->steps / 2];
    }
    free(ms);
    free(wait);
    return st;
}

dt_status dt__bench_pipe(const dt_bench_opts *a, const dt_tensor *x, const dt_tensor *y,
                         dt_bench_result *r) {
    int M = a->micro_batches ? a->micro_batches : 8;
    r->opts.micro_batches = M;
    pipe_bench pb = {{.vocab = a->vocab,
                      .seq = a->seq,
                      .d_model = a->d_model,
                      .n_head = a->heads,
                      .n_layer = a->layers},
                     x,
                     y};
    int nl = 0;
    dt_pipe_layer *layers = dt_pipe_gpt_layers(&pb.g, &nl);
    if (!layers) return dt_last_status();
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
    o.num_stages = a->pipe_stages; /* the default loss: cross-entropy on the token targets */
    dt_pipe_engine *p = j && dt_comm_init(&w) == DT_OK
                            ? (o.world = w, dt_pipe_engine_init(nl, layers, &o, j))
                            : NULL;
    json_decref(j);
    if (!p) {
        dt_status st = dt_error(dt_last_status(), "pipeline: %s", dt_last_error());
        if (w) dt_comm_finalize(w);
        free(layers);
        return st;
    }
    dt_bench_rank mine = {0};
    float loss = 0;
    dt_status st = pipe_steps(a, p, &pb, &mine, &loss);
    /* a step failed on one rank while the others may wait in a collective: finalizing would
     * wait for them too, so leave the communicator; the process exits and mpirun ends the job */
    if (st != DT_OK && dt_comm_size(w) > 1) {
        free(layers);
        return st;
    }
    dt_bytes_list *l = NULL;
    if (st == DT_OK) {
        /* every rank's step time, waiting fraction and activation peak, to rank 0 */
        dt_mem_stats ms_stats;
        dt_device_stats(dt_ctx_device(dt_module_ctx(dt_pipe_stage_module(p))), &ms_stats);
        mine.activation_peak = (double)ms_stats.peak[DT_MEM_ACTIVATIONS];
        r->stages = dt_pipe_num_stages(p);
        r->data_parallel = dt_pipe_dp_size(p);
        r->world = dt_comm_size(w);
        r->root = dt_comm_rank(w) == 0;
        r->final_loss = (double)loss;
        dt_comm_gather_bytes(w, &mine, sizeof mine, 0, &l);
    }
    if (st == DT_OK && r->root && l) {
        r->ranks = calloc((size_t)l->count, sizeof *r->ranks);
        if (!r->ranks) st = dt_error(DT_ERR_OOM, "out of memory");
        double worst = 0;
        for (int i = 0; r->ranks && i < l->count; i++) {
            memcpy(&r->ranks[i], l->items[i].data, sizeof r->ranks[i]);
            worst = r->ranks[i].step_ms_median > worst ? r->ranks[i].step_ms_median : worst;
        }
        r->n_ranks = r->ranks ? l->count : 0;
        int S = r->stages, D = r->data_parallel;
        int64_t tokens = a->batch * a->seq * M * D;
        r->step_ms_median = worst;
        r->per_s = (double)tokens / (worst / 1e3);
        r->ideal_bubble = (double)(S - 1) / (double)(M + S - 1);
    } else if (st == DT_OK) {
        r->root = false; /* the gather failed: nothing to report */
    }
    dt_bytes_list_free(l);
    dt_pipe_engine_free(p);
    dt_comm_finalize(w);
    free(layers);
    return st;
}
