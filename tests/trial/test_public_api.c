/* test_public_api.c — the corners of the public API an outside program reaches through
 * <dtrain/...> alone (tools/check_public_api.py counts this file as such a user): tensor
 * flags and conversions, custom modules, a trial context made outside the platform, the
 * local core, TensorBoard and checkpoint listing, a self communicator, and the REST client's
 * handling of an address where nothing answers. */
#include <dtrain/client.h>
#include <dtrain/config.h>
#include <dtrain/core.h>
#include <dtrain/dtrain.h>

#include "fixtures/files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

static void test_errors_and_rng(void) {
    dt_error(DT_ERR_CONFIG, "first failure");
    dt_error_saved saved;
    dt_error_save(&saved);
    dt_error(DT_ERR_IO, "clean-up failed too");
    CHECK(dt_error_restore(&saved) == DT_ERR_CONFIG);
    CHECK(strcmp(dt_last_error(), "first failure") == 0);
    dt_clear_error();

    dt_rng a, b;
    dt_rng_init(&a, 7);
    dt_rng_init(&b, 7);
    double lo = 1, hi = 0;
    for (int i = 0; i < 1000; i++) {
        double u = dt_rng_uniform(&a);
        CHECK(u == dt_rng_uniform(&b)); /* the same seed gives the same stream */
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
    }
    CHECK(lo >= 0 && lo < 0.01 && hi < 1 && hi > 0.99);
}

static void test_dtypes_and_conversions(void) {
    CHECK(dt_dtype_size(DT_DTYPE_F32) == 4 && dt_dtype_size(DT_DTYPE_BF16) == 2);
    CHECK(dt_dtype_from_name(dt_dtype_name(DT_DTYPE_BF16)) == DT_DTYPE_BF16);
    CHECK(dt_dtype_from_name("float16") == DT_DTYPE_F16);
    CHECK(dt_dtype_from_name("complex64") == DT_DTYPE_COUNT);

    /* IEEE half and bfloat16 bit patterns: 1, -2, 65504 (half's largest), 1/3 rounded */
    const float src[4] = {1.0f, -2.0f, 65504.0f, 1.0f / 3.0f};
    uint16_t h[4], bf[4];
    float back[4];
    dt_f32_to_f16(src, h, 4);
    CHECK(h[0] == 0x3C00 && h[1] == 0xC000 && h[2] == 0x7BFF && h[3] == 0x3555);
    dt_f16_to_f32(h, back, 4);
    CHECK(back[0] == 1.0f && back[2] == 65504.0f && fabsf(back[3] - 1.0f / 3.0f) < 1e-3f);
    dt_f32_to_bf16(src, bf, 4);
    CHECK(bf[0] == 0x3F80 && bf[1] == 0xC000 && bf[3] == 0x3EAB);
    dt_bf16_to_f32(bf, back, 4);
    CHECK(back[0] == 1.0f && back[1] == -2.0f && fabsf(back[3] - 1.0f / 3.0f) < 2e-3f);
}

static void test_tensor_flags(dt_ctx *ctx) {
    CHECK(dt_ctx_autocast(ctx) == DT_DTYPE_F32);
    CHECK(dt_grad_enabled(ctx));
    dt_ctx_set_training(ctx, false);
    CHECK(!dt_ctx_training(ctx));
    dt_ctx_set_training(ctx, true);

    dt_tensor *w = dt_tensor_new(ctx, DT_DTYPE_F32, 1, (int64_t[]){3});
    dt_fill_(w, 2.0f);
    dt_set_requires_grad(w, true);
    CHECK(dt_requires_grad(w));
    dt_tensor *d = dt_detach(w);
    CHECK(!dt_requires_grad(d));
    CHECK(dt_item(dt_sum_all(d)) == 6.0); /* shares w's data */
    dt_zero_(w);
    CHECK(dt_item(dt_sum_all(d)) == 0.0);
    dt_ctx_reset(ctx);
}

/* y = x * scale, a custom layer with one declared parameter */
static dt_tensor *scale_forward(dt_module *m, dt_tensor *x) {
    return dt_mul(x, dt_module_param(m, 0));
}

static void test_modules(dt_ctx *ctx) {
    dt_module *scale = dt_module_new("Scale", scale_forward);
    CHECK(dt_module_add_param(scale, "scale", 1, (int64_t[]){2}, DT_INIT_ONES, 0, 0) == 0);
    dt_module *net = dt_nn_sequential(scale, dt_nn_tanh(), NULL);
    CHECK(dt_module_build(net, ctx, 1) == DT_OK);
    dt_fill_(dt_module_find_param(net, "0.scale"), 0.5f);
    dt_tensor *x = dt_tensor_from_f32(ctx, 1, (int64_t[]){2}, (float[]){1.0f, -4.0f});
    const float *y = dt_module_forward(net, x)->data;
    CHECK_NEAR(y[0], tanh(0.5), 1e-6);
    CHECK_NEAR(y[1], tanh(-2.0), 1e-6);
    dt_module_free(net);

    /* the activation modules against their formulas at one point */
    struct {
        dt_module *m;
        double want;
    } acts[] = {
        {dt_nn_sigmoid(), 1 / (1 + exp(-0.7))},
        {dt_nn_silu(), 0.7 / (1 + exp(-0.7))},
        {dt_nn_gelu(false), 0.5 * 0.7 * (1 + erf(0.7 / sqrt(2)))},
    };
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        CHECK(dt_module_build(acts[i].m, ctx, 1) == DT_OK);
        dt_tensor *v = dt_tensor_from_f32(ctx, 1, (int64_t[]){1}, (float[]){0.7f});
        CHECK_NEAR(dt_item(dt_module_forward(acts[i].m, v)), acts[i].want, 1e-6);
        dt_module_free(acts[i].m);
    }
    dt_ctx_reset(ctx);
}

static double mean_of(const double *v, int64_t n, void *user) {
    (void)user;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += v[i];
    return n ? s / n : 0;
}

static void test_trial_ctx(void) {
    json_t *cfg = json_loads("{\"hyperparameters\": {\"lr\": 0.01, \"warm\": true, "
                             "\"opt\": {\"name\": \"adam\"}}}",
                             0, NULL);
    dt_trial_ctx *c = dt_trial_ctx_new(cfg, 1);
    CHECK(c != NULL);
    CHECK(json_is_object(dt_hparams(c)) && json_object_size(dt_hparams(c)) == 3);
    CHECK(dt_hparam_bool(c, "warm", false) && dt_hparam_bool(c, "missing", true));
    CHECK(json_is_object(dt_hparam_json(c, "opt")) && !dt_hparam_json(c, "nope"));
    CHECK(json_is_object(dt_trial_experiment_config(c)));
    CHECK(dt_trial_id(c) == 1 && dt_trial_experiment_id(c) == 1); /* a local run is trial 1 */
    CHECK(dt_trial_size(c) == 1);
    CHECK(!dt_trial_is_epoch_end(c));
    dt_trial_set_stop_requested(c, true);
    CHECK(dt_trial_get_stop_requested(c));
    dt_fn_reducer *r = dt_wrap_reducer_fn(c, mean_of, NULL, "mean_x", false);
    CHECK(r && dt_fn_reducer_update(r, 1.0) == DT_OK && dt_fn_reducer_update(r, 3.0) == DT_OK);
    dt_trial_ctx_free(c);
    json_decref(cfg);

    dt_metrics m = dt_metrics_scalar("loss", 0.25);
    json_t *j = dt_metrics_to_json(&m);
    CHECK(json_real_value(json_object_get(j, "loss")) == 0.25);
    json_decref(j);

    char buf[64];
    CHECK(strcmp(dt_length_format((dt_length){DT_UNIT_EPOCHS, 1}, buf, sizeof buf), "1 epoch") ==
          0);
    CHECK(strcmp(dt_unit_name(DT_UNIT_RECORDS), "records") == 0);
}

static void test_core_and_files(const char *dir) {
    char ckdir[512], tbdir[512];
    snprintf(ckdir, sizeof ckdir, "%s/checkpoints", dir);
    snprintf(tbdir, sizeof tbdir, "%s/tb", dir);
    dt_core *core = NULL;
    dt_core_init_opts o = {.max_length = {DT_UNIT_BATCHES, 10}, .checkpoint_dir = ckdir,
                           .quiet = true};
    CHECK(dt_core_init(&o, &core) == DT_OK);
    CHECK(core && !dt_core_should_preempt(core)); /* nothing asks a local run to stop */
    dt_core_free(core);

    char **names = NULL;
    int n = -1;
    mkdir(ckdir, 0755);
    CHECK(dt_ckpt_list(ckdir, &names, &n) == DT_OK && n == 0);
    dt_ckpt_list_free(names);

    dt_tb_writer *tb = dt_tb_open(tbdir);
    CHECK(tb != NULL);
    const char *tags[2] = {"a", "b"};
    CHECK(dt_tb_add_scalar(tb, "loss", 0.5f, 1) == DT_OK);
    CHECK(dt_tb_add_scalars(tb, 2, tags, (float[]){1, 2}, 2) == DT_OK);
    CHECK(dt_tb_add_text(tb, "note", "hello", 2) == DT_OK);
    CHECK(dt_tb_flush(tb) == DT_OK);
    struct stat sb;
    CHECK(stat(dt_tb_path(tb), &sb) == 0 && sb.st_size > 0);
    CHECK(dt_tb_close(tb) == DT_OK);
}

/* An IDX file (MNIST's format) of 3 labels, read back. */
static void test_idx(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/labels.idx1", dir);
    const unsigned char bytes[] = {0, 0, 8, 1, 0, 0, 0, 3, 7, 2, 9};
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(bytes, 1, sizeof bytes, f) == sizeof bytes && fclose(f) == 0);
    dt_idx x = {0};
    CHECK(dt_idx_read(path, &x) == DT_OK);
    CHECK(x.ndim == 1 && x.dims[0] == 3 && x.data[0] == 7 && x.data[2] == 9);
    dt_idx_free(&x);
}

static void test_self_comm(void) {
    dt_comm *c = NULL;
    CHECK(dt_comm_init_self(&c) == DT_OK);
    int out = 42, in = 0;
    dt_comm_req *req = NULL;
    CHECK(dt_comm_isend(c, &out, sizeof out, 0, 5, &req) == DT_OK);
    CHECK(dt_comm_recv(c, &in, sizeof in, 0, 5) == DT_OK && in == 42);
    CHECK(dt_comm_wait(c, req) == DT_OK);
    CHECK(dt_comm_finalize(c) == DT_OK);
}

static void test_client_without_master(void) {
    /* port 1 on loopback: nothing listens there, so the client must say so, quickly */
    dt_client *cl = dt_client_new("http://127.0.0.1:1");
    CHECK(cl && strcmp(dt_client_url(cl), "http://127.0.0.1:1") == 0);
    dt_client_set_timeout(cl, 2);
    dt_client_set_answer_timeout(cl, 1);
    CHECK(!dt_client_ping(cl));
    CHECK(!dt_client_hung(cl)); /* refused: unreachable, not hung */
    dt_client_free(cl);
    CHECK(dt_client_new("ftp://x") == NULL && dt_last_status() == DT_ERR_CONFIG);
}

/* A listening socket nobody answers on (the kernel accepts the connection): hung, said as
 * such, once the answer timeout has passed. */
static void test_client_hung_master(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    CHECK(s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 && listen(s, 4) == 0 &&
          getsockname(s, (struct sockaddr *)&a, &n) == 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(a.sin_port));
    dt_client *cl = dt_client_new(url);
    dt_client_set_answer_timeout(cl, 1);
    CHECK(cl && dt_client_call(cl, "GET", "/api/v1/master", NULL, NULL, NULL) == DT_ERR_COMM);
    CHECK(cl && dt_client_hung(cl));
    CHECK(strstr(dt_last_error(), "accepted the connection but did not answer within 1 s"));
    dt_client_free(cl);
    close(s);
}

int main(void) {
    char dir[64];
    if (!fx_tmpdir(dir, sizeof dir, "public-api")) return 1;
    dt_device *dev = dt_device_new("cpu", 0);
    dt_ctx *ctx = dt_ctx_new(dev, 1);
    test_errors_and_rng();
    test_dtypes_and_conversions();
    test_tensor_flags(ctx);
    test_modules(ctx);
    test_trial_ctx();
    test_core_and_files(dir);
    test_idx(dir);
    test_self_comm();
    test_client_without_master();
    test_client_hung_master();
    dt_ctx_free(ctx);
    dt_device_free(dev);
    if (!fx_rmtree(dir)) fprintf(stderr, "could not remove %s\n", dir);
    TEST_END();
}
