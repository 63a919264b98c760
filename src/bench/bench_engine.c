/* bench_engine.c — the benchmark's training step through the engine (dt_engine_*): a
 * DeepSpeed config built from the options (micro-batch, accumulation, bf16, ZeRO stage,
 * offload) with --ds-config merged over it, on every data-parallel rank of the job (one
 * process each under mpirun). A step is `gas` micro-batches; rank 0 gathers every rank's
 * median step time, memory by category and engine timers. */
#include "bench_impl.h"

#include <stdlib.h>
#include <string.h>

/* The DeepSpeed config the options describe, with o->ds_config merged over it; NULL with the
 * error set. */
static json_t *engine_config(const dt_bench_opts *a) {
    char cfg[1024], off[600] = "";
    const char *ofl = a->offload ? a->offload : "none";
    const char *nvp = a->nvme_path ? a->nvme_path : "/tmp/dtrain_nvme";
    if (strcmp(ofl, "none")) {
        snprintf(off, sizeof off,
                 ", \"offload_optimizer\": {\"device\": \"%s\", \"nvme_path\": \"%s\"}", ofl, nvp);
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
    return j;
}

/* warmup + steps timed steps of gas micro-batches; this rank's sorted times in ms. */
static dt_status engine_steps(const dt_bench_opts *a, dt_engine *e, dt_module *net, dt_tensor *x,
                              dt_tensor *y, double *ms, dt_bench_result *r) {
    dt_ctx *ctx = dt_module_ctx(net);
    int rank = dt_comm_rank(dt_engine_comm(e));
    int total = a->warmup + a->steps;
    double loss = 0;
    int64_t flops = 0;
    for (int s = 0; s < total; s++) {
        double t0 = dt_now_sec();
        dt_ctx_flops_reset(ctx);
        for (int m = 0; m < a->gas; m++) {
            dt_tensor *l = dt_cross_entropy(dt_engine_forward(e, x), y, -100);
            if (l) loss = dt_item(l);
            if (!l || dt_engine_backward(e, l) != DT_OK || dt_engine_step(e) != DT_OK)
                return dt_error(dt_last_status(), "rank %d step %d failed: %s", rank, s,
                                dt_last_error());
            if (m == 0) {
                dt_flops f = dt_ctx_flops(ctx);
                flops = f.forward + f.backward;
            }
        }
        double t1 = dt_now_sec();
        if (s >= a->warmup) ms[s - a->warmup] = (t1 - t0) * 1e3;
    }
    dt__bench_sort(ms, a->steps);
    r->final_loss = loss;
    r->flops_per_step = flops;
    return DT_OK;
}

dt_status dt__bench_engine(const dt_bench_opts *a, dt_module *net, dt_tensor *x, dt_tensor *y,
                           bool gpt, int64_t rss0, dt_bench_result *r) {
    json_t *j = engine_config(a);
    dt_engine *e = j ? dt_engine_init(net, j) : NULL;
    json_decref(j);
    if (!e) return dt_error(dt_last_status(), "engine: %s", dt_last_error());
    dt_comm *comm = dt_engine_comm(e);
    int rank = dt_comm_rank(comm), W = dt_comm_size(comm);
    /* peaks over the training steps (building the model charged its full buffers once) */
    dt_device_reset_peak(dt_ctx_device(dt_module_ctx(net)));
    double *ms = calloc((size_t)a->steps, sizeof(double));
    dt_status st =
        ms ? engine_steps(a, e, net, x, y, ms, r) : dt_error(DT_ERR_OOM, "out of memory");
    /* a step failed on one rank while the others may wait in a collective: freeing the engine
     * would finalize its communicator and wait for them too; the process exits instead */
    if (st != DT_OK && W > 1) {
        free(ms);
        return st;
    }
    dt_bytes_list *l = NULL;
    if (st == DT_OK) {
        /* every rank's memory and time, to rank 0 */
        dt_bench_rank mine = {0};
        mine.step_ms_median =
            a->steps % 2 ? ms[a->steps / 2] : 0.5 * (ms[a->steps / 2 - 1] + ms[a->steps / 2]);
        dt_engine_memory_stats(e, &mine.mem);
        dt_engine_get_timers(e, &mine.timers);
        mine.rss_added_bytes = dt__bench_proc_bytes("VmHWM:") - rss0;
        st = dt_comm_gather_bytes(comm, &mine, sizeof mine, 0, &l);
    }
    if (st == DT_OK) {
        r->world = W;
        r->root = rank == 0;
        r->params = dt_module_num_params(net);
    }
    if (st == DT_OK && rank == 0) {
        r->ranks = calloc((size_t)W, sizeof *r->ranks);
        if (!r->ranks) st = dt_error(DT_ERR_OOM, "out of memory");
        double worst = 0;
        for (int i = 0; r->ranks && i < W; i++) {
            memcpy(&r->ranks[i], l->items[i].data, sizeof r->ranks[i]);
            worst = r->ranks[i].step_ms_median > worst ? r->ranks[i].step_ms_median : worst;
        }
        r->n_ranks = r->ranks ? W : 0;
        r->step_ms_median = worst;
        int64_t per_step = (gpt ? a->batch * a->seq : a->batch) * a->gas * W;
        r->per_s = (double)per_step / (worst / 1e3);
    }
    dt_bytes_list_free(l);
    free(ms);
    dt_engine_free(e);
    return st;
}
