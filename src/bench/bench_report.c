/* bench_report.c — a benchmark result as one JSON line or one line of text. The JSON's keys
 * and their order are a contract: bench/side_by_side.py, engine_scaling.py, pipe_scaling.py,
 * gemm_rate.py and fit_overhead.sh parse them (docs/cli.md lists them). */
#include "bench_impl.h"
#include "base/base_impl.h"

#include <string.h>

static const char *dtype_name(const dt_bench_result *r) {
    return r->opts.dtype == DT_DTYPE_BF16 ? "bf16" : "fp32";
}

/* How the run computed: this process's kernel level, how its matmuls computed (see
 * dt_matmul_compute) and, under bf16, which bf16 path ran (dt_bf16_path), as JSON members
 * (`sep` first) or as the text line's tail. */
static void write_isa(FILE *f, const dt_bench_result *r, bool json, const char *sep) {
    const char *isa = dt_cpu_isa_name(dt_cpu_isa_level());
    const char *mm = r->opts.openblas ? "f32-openblas" : dt_matmul_compute(r->opts.dtype);
    const char *bf16 = r->opts.dtype == DT_DTYPE_BF16 ? dt_bf16_path() : NULL;
    if (json)
        fprintf(f, "%s\"isa\":\"%s\",\"matmul\":\"%s\"", sep, isa, mm);
    else
        fprintf(f, "%skernels %s, matmul %s", sep, isa, mm);
    if (bf16) fprintf(f, json ? ",\"bf16\":\"%s\"" : ", bf16 %s", bf16);
}

static bool is_gpt(const dt_bench_result *r) {
    return r->opts.model && !strcmp(r->opts.model, "gpt");
}

/* "key":{category: bytes, ..., "total": bytes} of the peaks or the current values. */
static void write_stats(FILE *f, const char *key, const dt_mem_stats *s, bool peak) {
    fprintf(f, "\"%s\":{", key);
    for (int c = 0; c < DT_MEM_NCAT; c++)
        fprintf(f, "\"%s\":%lld,", dt_mem_category_name((dt_mem_category)c),
                (long long)(peak ? s->peak[c] : s->current[c]));
    fprintf(f, "\"total\":%lld}", (long long)(peak ? s->total_peak : s->total_current));
}

/* --profile: the step's phases and each op's forward and backward, per timed step, the
 * dearest op first; as a JSON member "profile" or as a table. */
static void write_profile(FILE *f, const dt_bench_result *r, bool json) {
    const dt_op_time *t = r->ops;
    int n = r->n_ops, steps = r->opts.steps;
    const double *phase = r->phase_ms;
    /* reset: the context and FLOP counters; optimizer: the step with the gradients zeroed */
    static const char *names[4] = {"reset", "forward", "backward", "optimizer"};
    if (json) {
        fprintf(f, ",\"profile\":{");
        for (int k = 0; k < 4; k++) fprintf(f, "\"%s_ms\":%.3f,", names[k], phase[k]);
        fprintf(f, "\"ops\":[");
        for (int i = 0; i < n; i++)
            fprintf(f,
                    "%s{\"op\":\"%s\",\"fwd_calls\":%.2f,\"fwd_ms\":%.3f,\"bwd_calls\":%.2f,"
                    "\"bwd_ms\":%.3f}",
                    i ? "," : "", t[i].op, (double)t[i].fwd_calls / steps,
                    t[i].fwd_sec * 1e3 / steps, (double)t[i].bwd_calls / steps,
                    t[i].bwd_sec * 1e3 / steps);
        fprintf(f, "]}");
    } else {
        fprintf(f, "per step (ms):");
        for (int k = 0; k < 4; k++) fprintf(f, " %s %.3f", names[k], phase[k]);
        fprintf(f, "\n%-28s %8s %10s %8s %10s\n", "op", "fwd/step", "fwd ms", "bwd/step", "bwd ms");
        for (int i = 0; i < n; i++)
            fprintf(f, "%-28s %8.2f %10.3f %8.2f %10.3f\n", t[i].op, (double)t[i].fwd_calls / steps,
                    t[i].fwd_sec * 1e3 / steps, (double)t[i].bwd_calls / steps,
                    t[i].bwd_sec * 1e3 / steps);
    }
}

static void step_json(FILE *f, const dt_bench_result *r) {
    const dt_bench_opts *a = &r->opts;
    bool gpt = is_gpt(r), mlp = !strcmp(a->model, "mlp");
    double med = r->step_ms_median;
    fprintf(f, "{\"model\":\"%s\",\"dtype\":\"%s\",\"threads\":%d,\"batch\":%lld,", a->model,
            dtype_name(r), r->threads, (long long)a->batch);
    if (gpt)
        fprintf(f, "\"layers\":%lld,\"d_model\":%lld,\"heads\":%lld,\"seq\":%lld,\"vocab\":%lld,",
                (long long)a->layers, (long long)a->d_model, (long long)a->heads, (long long)a->seq,
                (long long)a->vocab);
    else if (mlp)
        fprintf(f, "\"layers\":%lld,\"hidden\":%lld,", (long long)a->layers, (long long)a->hidden);
    fprintf(f,
            "\"params\":%lld,\"step_ms_median\":%.3f,\"step_ms_min\":%.3f,"
            "\"step_ms_mean\":%.3f,\"%s\":%.1f,"
            "\"gflops\":%.2f,\"flops_per_step\":%lld,\"final_loss\":%.6f,",
            (long long)r->params, med, r->step_ms_min, r->step_ms_mean,
            gpt ? "tokens_per_s" : "samples_per_s", r->per_s,
            (double)r->flops_per_step / (med / 1e3) / 1e9, (long long)r->flops_per_step,
            r->final_loss);
    write_stats(f, "peak_bytes", &r->mem, true);
    /* the RSS the run added over the loaded program, against the accounted peak */
    int64_t rss = r->peak_rss_bytes, rss0 = r->baseline_rss_bytes;
    fprintf(f, ",\"peak_rss_bytes\":%lld,\"baseline_rss_bytes\":%lld,\"rss_over_accounted\":%.3f",
            (long long)rss, (long long)rss0,
            r->mem.total_peak > 0 ? (double)(rss - rss0) / (double)r->mem.total_peak : 0.0);
    write_isa(f, r, true, ",");
    if (a->profile) write_profile(f, r, true);
    fprintf(f, "}\n");
}

static void engine_json(FILE *f, const dt_bench_result *r) {
    const dt_bench_opts *a = &r->opts;
    int W = r->world;
    double worst = r->step_ms_median;
    fprintf(f,
            "{\"model\":\"%s\",\"dtype\":\"%s\",\"engine\":true,\"slots\":%d,"
            "\"threads_per_rank\":%d,\"zero_stage\":%d,\"offload\":\"%s\",\"gas\":%d,"
            "\"micro_batch\":%lld,\"global_batch\":%lld,\"params\":%lld,"
            "\"step_ms_median\":%.3f,\"%s\":%.1f,\"gflops_per_rank\":%.2f,"
            "\"final_loss\":%.6f,\"ranks\":[",
            a->model, dtype_name(r), W, r->threads, a->zero_stage, a->offload ? a->offload : "none",
            a->gas, (long long)a->batch, (long long)(a->batch * a->gas * W), (long long)r->params,
            worst, is_gpt(r) ? "tokens_per_s" : "samples_per_s", r->per_s,
            (double)r->flops_per_step * a->gas / (worst / 1e3) / 1e9, r->final_loss);
    for (int i = 0; i < r->n_ranks; i++) {
        const dt_bench_rank *k = &r->ranks[i];
        fprintf(f, "%s{\"rank\":%d,\"step_ms_median\":%.3f,", i ? "," : "", i, k->step_ms_median);
        write_stats(f, "device_peak_bytes", &k->mem.device, true);
        fprintf(f, ",");
        write_stats(f, "device_current_bytes", &k->mem.device, false);
        fprintf(f, ",");
        write_stats(f, "host_peak_bytes", &k->mem.host, true);
        /* engine timers per optimizer step (warm-up included) */
        const dt_engine_timers *tm = &k->timers;
        double s = tm->steps > 0 ? 1e3 / (double)tm->steps : 0;
        fprintf(f,
                ",\"nvme_bytes\":%lld,\"rss_added_bytes\":%lld,\"ms_per_step\":{"
                "\"forward\":%.2f,\"backward\":%.2f,\"step\":%.2f,\"reduce\":%.2f,"
                "\"gather\":%.2f,\"offload\":%.2f}}",
                (long long)k->mem.nvme_bytes, (long long)k->rss_added_bytes, tm->forward_s * s,
                tm->backward_s * s, tm->step_s * s, tm->reduce_s * s, tm->gather_s * s,
                tm->offload_s * s);
    }
    fprintf(f, "]}\n");
}

static void pipe_json(FILE *f, const dt_bench_result *r) {
    const dt_bench_opts *a = &r->opts;
    int M = a->micro_batches, D = r->data_parallel;
    fprintf(f,
            "{\"model\":\"gpt\",\"pipeline_stages\":%d,\"data_parallel\":%d,"
            "\"threads_per_rank\":%d,\"micro_batches\":%d,\"micro_batch\":%lld,"
            "\"global_batch\":%lld,\"step_ms_median\":%.3f,\"tokens_per_s\":%.1f,"
            "\"ideal_bubble\":%.4f,\"final_loss\":%.6f,\"wait_fraction_per_rank\":[",
            r->stages, D, r->threads, M, (long long)a->batch, (long long)(a->batch * M * D),
            r->step_ms_median, r->per_s, r->ideal_bubble, r->final_loss);
    for (int i = 0; i < r->n_ranks; i++)
        fprintf(f, "%s%.4f", i ? "," : "", r->ranks[i].wait_fraction);
    fprintf(f, "],\"activation_peak_bytes_per_rank\":[");
    for (int i = 0; i < r->n_ranks; i++)
        fprintf(f, "%s%.0f", i ? "," : "", r->ranks[i].activation_peak);
    fprintf(f, "]}\n");
}

static const char *gemm_backend(const dt_bench_result *r) {
    return r->opts.openblas ? "openblas" : "dtrain";
}

void dt_bench_write_json(const dt_bench_result *r, FILE *f) {
    if (!r || !r->root) return;
    switch (r->kind) {
    case DT_BENCH_KIND_STEP:
        step_json(f, r);
        break;
    case DT_BENCH_KIND_ENGINE:
        engine_json(f, r);
        break;
    case DT_BENCH_KIND_PIPELINE:
        pipe_json(f, r);
        break;
    case DT_BENCH_KIND_GEMM:
        fprintf(f,
                "{\"bench\":\"gemm\",\"backend\":\"%s\",\"dtype\":\"%s\",\"threads\":%d,"
                "\"size\":%lld,\"m\":%lld,\"n\":%lld,\"k\":%lld,\"trans\":\"%c%c\","
                "\"ms_median\":%.4f,\"gflops\":%.1f",
                gemm_backend(r), dtype_name(r), r->threads, (long long)r->opts.size,
                (long long)r->opts.m, (long long)r->opts.n, (long long)r->opts.k,
                r->opts.ta ? 'T' : 'N', r->opts.tb ? 'T' : 'N', r->gemm_ms_median, r->gemm_gflops);
        write_isa(f, r, true, ",");
        fprintf(f, "}\n");
        break;
    }
}

void dt_bench_write_text(const dt_bench_result *r, FILE *f) {
    if (!r || !r->root) return;
    const dt_bench_opts *a = &r->opts;
    const char *unit = is_gpt(r) ? "tokens" : "samples";
    switch (r->kind) {
    case DT_BENCH_KIND_STEP:
        fprintf(f,
                "%s %s, %d threads, %lld params: %.3f ms/step (median of %d), %.1f %s/s, %.2f "
                "GFLOP/s, peak accounted %.1f MiB, peak RSS %.1f MiB",
                a->model, dtype_name(r), r->threads, (long long)r->params, r->step_ms_median,
                a->steps, r->per_s, unit,
                (double)r->flops_per_step / (r->step_ms_median / 1e3) / 1e9,
                r->mem.total_peak / 1048576.0, r->peak_rss_bytes / 1048576.0);
        write_isa(f, r, false, "; ");
        fprintf(f, "\n");
        if (a->profile) write_profile(f, r, false);
        break;
    case DT_BENCH_KIND_ENGINE:
        fprintf(f,
                "%s %s engine, %d ranks x %d threads, ZeRO-%d, offload %s: %.3f ms/step, %.1f "
                "%s/s\n",
                a->model, dtype_name(r), r->world, r->threads, a->zero_stage,
                a->offload ? a->offload : "none", r->step_ms_median, r->per_s, unit);
        break;
    case DT_BENCH_KIND_PIPELINE:
        pipe_json(f, r);
        break;
    case DT_BENCH_KIND_GEMM:
        fprintf(f, "gemm %lldx%lldx%lld %c%c %s (%s), %d threads: %.3f ms, %.1f GFLOP/s",
                (long long)a->m, (long long)a->n, (long long)a->k, a->ta ? 'T' : 'N',
                a->tb ? 'T' : 'N', dtype_name(r), gemm_backend(r), r->threads, r->gemm_ms_median,
                r->gemm_gflops);
        write_isa(f, r, false, "; ");
        fprintf(f, "\n");
        break;
    }
}
