/* Tests for src/bench/bench*.c: the options' defaults and the combinations refused, and the
 * JSON lines of a small plain step, an engine step and a GEMM with their keys in the order
 * the scripts in bench/ read them. */
#define _GNU_SOURCE
#include "bench/bench.h"
#include "test.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define HAS(s, sub) (strstr((s), (sub)) != NULL)
#define CHECK_HAS(s, sub) CHECK_MSG(HAS((s), (sub)), "\"%s\" lacks \"%s\"", (s), (sub))

/* The message of options that must be refused ("" if they were accepted). */
static const char *refused(dt_bench_opts o, dt_bench_job job) {
    if (dt_bench_resolve(&o, job) == DT_OK) return "";
    CHECK(dt_last_status() == DT_ERR_INVALID);
    return dt_last_error();
}

static void test_resolve(void) {
    dt_bench_opts o = dt_bench_defaults();
    CHECK(o.steps == 20 && o.warmup == 3 && o.zero_stage == -1 && o.gas == 1 && o.slots == 1);
    o.model = "gpt";
    CHECK(dt_bench_resolve(&o, DT_BENCH_TRAIN) == DT_OK);
    CHECK(o.batch == 8 && o.layers == 4 && o.d_model == 256 && o.heads == 4 && o.seq == 128 &&
          o.vocab == 256 && o.zero_stage == -1);
    o = dt_bench_defaults();
    o.model = "mlp";
    o.slots = 2; /* several slots: the engine */
    CHECK(dt_bench_resolve(&o, DT_BENCH_TRAIN) == DT_OK && o.zero_stage == 0 && o.batch == 128);
    o = dt_bench_defaults();
    o.model = "mlp";
    o.gas = 2;
    CHECK(dt_bench_resolve(&o, DT_BENCH_TRAIN) == DT_OK && o.zero_stage == 0);

    dt_bench_opts b = dt_bench_defaults();
    b.model = "resnet";
    CHECK_HAS(refused(b, DT_BENCH_TRAIN), "unknown model 'resnet'");
    b.model = NULL;
    CHECK_HAS(refused(b, DT_BENCH_TRAIN), "unknown model");
    b.model = "gpt";
    b.d_model = 10;
    b.heads = 3;
    CHECK_HAS(refused(b, DT_BENCH_TRAIN), "not divisible by --heads 3");
    b = dt_bench_defaults();
    b.model = "cnn";
    b.pipe_stages = 2;
    CHECK_HAS(refused(b, DT_BENCH_TRAIN), "--pipeline-stages needs --model gpt");
    b = dt_bench_defaults();
    b.model = "mlp";
    b.offload = "cpu";
    CHECK_HAS(refused(b, DT_BENCH_TRAIN), "--offload needs --zero-stage 1");
    b.zero_stage = 1;
    CHECK(*refused(b, DT_BENCH_TRAIN) == 0);
    b = dt_bench_defaults();
    b.model = "mlp";
    b.profile = true;
    b.zero_stage = 2;
    CHECK_HAS(refused(b, DT_BENCH_TRAIN), "plain steps only");
    b = dt_bench_defaults();
    b.openblas = true;
    b.dtype = DT_DTYPE_BF16;
    CHECK_HAS(refused(b, DT_BENCH_GEMM), "fp32 only");
}

/* `f` written to a string. */
static char *written(const dt_bench_result *r, bool json) {
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (json)
        dt_bench_write_json(r, f);
    else
        dt_bench_write_text(r, f);
    fclose(f);
    return s;
}

/* The JSON line parses and has exactly `keys` at the top level, in that order. */
static void check_keys(const char *line, const char *const *keys) {
    CHECK_MSG(line[0] == '{' && line[strlen(line) - 1] == '\n' && !strchr(line, '\n')[1],
              "not one line: %s", line);
    json_error_t err;
    json_t *j = json_loads(line, JSON_PRESERVE_ORDER, &err);
    CHECK_MSG(j != NULL, "%s: %s", err.text, line);
    if (!j) return;
    const char *k;
    json_t *v;
    int i = 0;
    json_object_foreach(j, k, v) {
        CHECK_MSG(keys[i] && !strcmp(k, keys[i]), "key %d: %s, expected %s", i, k,
                  keys[i] ? keys[i] : "(end)");
        if (!keys[i]) break;
        i++;
    }
    CHECK_MSG(!keys[i], "missing key %s", keys[i]);
    json_decref(j);
}

/* A small mlp on one thread: `steps` timed steps after one untimed. */
static dt_bench_opts small_mlp(int steps) {
    dt_bench_opts o = dt_bench_defaults();
    o.model = "mlp";
    o.hidden = 16;
    o.batch = 8;
    o.steps = steps;
    o.warmup = 1;
    o.threads = 1;
    return o;
}

static void test_plain_step(void) {
    dt_bench_opts o = small_mlp(3);
    o.profile = true;
    dt_bench_result *r = NULL;
    CHECK_MSG(dt_bench_train(&o, &r) == DT_OK && r, "%s", dt_last_error());
    if (!r) return;
    CHECK(r->kind == DT_BENCH_KIND_STEP && r->root && r->threads == 1);
    CHECK(r->params == 784 * 16 + 16 + 16 * 16 + 16 + 16 * 10 + 10);
    CHECK(r->step_ms_min > 0 && r->step_ms_min <= r->step_ms_median && r->per_s > 0);
    CHECK(r->flops_per_step > 0 && r->final_loss > 0 && r->mem.total_peak > 0);
    CHECK(r->n_ops >= 3 && r->phase_ms[1] > 0);
    static const char *const keys[] = {"model",
                                       "dtype",
                                       "threads",
                                       "batch",
                                       "layers",
                                       "hidden",
                                       "params",
                                       "step_ms_median",
                                       "step_ms_min",
                                       "step_ms_mean",
                                       "samples_per_s",
                                       "gflops",
                                       "flops_per_step",
                                       "final_loss",
                                       "peak_bytes",
                                       "peak_rss_bytes",
                                       "baseline_rss_bytes",
                                       "rss_over_accounted",
                                       "isa",
                                       "matmul",
                                       "profile",
                                       NULL};
    char *s = written(r, true);
    check_keys(s, keys);
    CHECK_HAS(s, "\"peak_bytes\":{\"params\":");
    CHECK_HAS(s, "\"profile\":{\"reset_ms\":");
    CHECK_HAS(s, "{\"op\":\"linear_relu\",\"fwd_calls\":2.00,");
    free(s);
    s = written(r, false);
    CHECK_HAS(s, "mlp fp32, 1 threads, ");
    CHECK_HAS(s, "ms/step (median of 3)");
    CHECK_HAS(s, "; kernels ");
    CHECK_HAS(s, ", matmul f32-");
    CHECK_HAS(s, "per step (ms): reset ");
    free(s);
    r->root = false; /* another rank's result: nothing written */
    s = written(r, true);
    CHECK(s && !*s);
    free(s);
    dt_bench_result_free(r);
}

static void test_engine_step(void) {
    dt_bench_opts o = small_mlp(2);
    o.zero_stage = 1;
    o.gas = 2;
    dt_bench_result *r = NULL;
    CHECK_MSG(dt_bench_train(&o, &r) == DT_OK && r, "%s", dt_last_error());
    if (!r) return;
    CHECK(r->kind == DT_BENCH_KIND_ENGINE && r->world == 1 && r->n_ranks == 1);
    static const char *const keys[] = {"model",
                                       "dtype",
                                       "engine",
                                       "slots",
                                       "threads_per_rank",
                                       "zero_stage",
                                       "offload",
                                       "gas",
                                       "micro_batch",
                                       "global_batch",
                                       "params",
                                       "step_ms_median",
                                       "samples_per_s",
                                       "gflops_per_rank",
                                       "final_loss",
                                       "ranks",
                                       NULL};
    char *s = written(r, true);
    check_keys(s, keys);
    CHECK_HAS(s, "\"global_batch\":16,");
    CHECK_HAS(s, "\"ranks\":[{\"rank\":0,\"step_ms_median\":");
    CHECK_HAS(s, "\"ms_per_step\":{\"forward\":");
    free(s);
    s = written(r, false);
    CHECK_HAS(s, "mlp fp32 engine, 1 ranks x 1 threads, ZeRO-1, offload none: ");
    free(s);
    dt_bench_result_free(r);
    o.model = "transformer";
    CHECK(dt_bench_train(&o, &r) == DT_ERR_INVALID && !r);
}

static void test_gemm(void) {
    dt_bench_opts o = dt_bench_defaults();
    o.size = 48;
    o.reps = 3;
    o.threads = 1;
    dt_bench_result *r = NULL;
    CHECK_MSG(dt_bench_gemm(&o, &r) == DT_OK && r, "%s", dt_last_error());
    if (!r) return;
    CHECK(r->kind == DT_BENCH_KIND_GEMM && r->gemm_ms_median > 0 && r->gemm_gflops > 0);
    static const char *const keys[] = {"bench",  "backend", "dtype",  "threads", "size",
                                       "m",      "n",       "k",      "trans",   "ms_median",
                                       "gflops", "isa",     "matmul", NULL};
    char *s = written(r, true);
    check_keys(s, keys);
    CHECK_HAS(s, "{\"bench\":\"gemm\",\"backend\":\"dtrain\",\"dtype\":\"fp32\",\"threads\":1,"
                 "\"size\":48,");
    free(s);
    s = written(r, false);
    CHECK_HAS(s, "gemm 48x48x48 NN fp32 (dtrain), 1 threads: ");
    CHECK(!strstr(s, ", bf16 "));
    free(s);
    dt_bench_result_free(r);
    /* under bf16 both say which bf16 path ran */
    o.dtype = DT_DTYPE_BF16;
    CHECK_MSG(dt_bench_gemm(&o, &r) == DT_OK && r, "%s", dt_last_error());
    if (!r) return;
    char want[64];
    snprintf(want, sizeof want, "\"matmul\":\"%s\",\"bf16\":\"%s\"",
             dt_matmul_compute(DT_DTYPE_BF16), dt_bf16_path());
    s = written(r, true);
    CHECK_HAS(s, want);
    free(s);
    snprintf(want, sizeof want, ", bf16 %s", dt_bf16_path());
    s = written(r, false);
    CHECK_HAS(s, want);
    free(s);
    dt_bench_result_free(r);
    /* a linear layer's weight-gradient product: A stored transposed */
    o = dt_bench_defaults();
    o.m = 40, o.n = 24, o.k = 56, o.ta = true, o.reps = 3, o.threads = 1;
    CHECK(dt_bench_resolve(&o, DT_BENCH_GEMM) == DT_OK && o.size == 0);
    r = NULL;
    CHECK_MSG(dt_bench_gemm(&o, &r) == DT_OK && r, "%s", dt_last_error());
    if (!r) return;
    s = written(r, true);
    CHECK_HAS(s, "\"size\":0,\"m\":40,\"n\":24,\"k\":56,\"trans\":\"TN\",");
    CHECK(r->gemm_gflops > 0);
    free(s);
    dt_bench_result_free(r);
    o.size = 40; /* both a size and a different shape */
    CHECK(dt_bench_resolve(&o, DT_BENCH_GEMM) == DT_ERR_INVALID && HAS(dt_last_error(), "use one"));
}

int main(void) {
    TEST_RUN(test_resolve);
    TEST_RUN(test_plain_step);
    TEST_RUN(test_engine_step);
    TEST_RUN(test_gemm);
    TEST_END();
}
