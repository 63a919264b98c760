/* test_lm_errors.c — bad model directories are refused with an error that names the file and
 * the problem: no config.json, an unknown model_type (the supported ones listed), a truncated
 * safetensors file, a tensor of the wrong shape or dtype, a missing tensor, an unknown tensor,
 * an index naming a missing shard; and a file of the right names passes. */
#include "fixtures/files.h"
#include "lm/lm_fixture.h"

#include <dtrain/tensor.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_tmp[256];

/* A fresh directory under the test's temporary one. */
static const char *fresh(const char *name, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s", g_tmp, name);
    mkdir(buf, 0777);
    return buf;
}

static void copy(const char *src, const char *dst) {
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    char b[1 << 15];
    size_t n;
    while (in && out && (n = fread(b, 1, sizeof b, in)) > 0) fwrite(b, 1, n, out);
    if (in) fclose(in);
    if (out) fclose(out);
}

static void copy_fixture_file(const char *fixture, const char *file, const char *dir) {
    char src[1200], fd[1024], dst[1200];
    snprintf(src, sizeof src, "%s/%s", lm_fixture_dir(fixture, fd, sizeof fd), file);
    snprintf(dst, sizeof dst, "%s/%s", dir, file);
    copy(src, dst);
}

static void write_text(const char *dir, const char *file, const char *text) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
}

/* Write dir/model.safetensors as the gpt2 fixture's weights, with tensor `drop` left out,
 * tensor `swap` replaced by `repl` (any shape/dtype) and `extra` added when not NULL. */
static void rewrite(const char *dir, const char *drop, const char *swap, dt_tensor *repl,
                    const char *extra) {
    char src[1200], fd[1024], dst[1200];
    snprintf(src, sizeof src, "%s/model.safetensors", lm_fixture_dir("gpt2", fd, sizeof fd));
    snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
    dt_safetensors *f = dt_safetensors_open(src);
    dt_ctx *ctx = repl ? repl->ctx : dt_ctx_new(NULL, 0);
    const char *names[64];
    dt_tensor *ts[64];
    int n = 0;
    for (int i = 0; f && i < dt_safetensors_count(f); i++) {
        const char *name = dt_safetensors_name(f, i);
        if (drop && !strcmp(name, drop)) continue;
        names[n] = name;
        ts[n++] = swap && !strcmp(name, swap) ? repl : dt_safetensors_get(f, ctx, name);
    }
    if (extra) {
        names[n] = extra;
        ts[n++] = dt_tensor_new(ctx, DT_DTYPE_F32, 1, (int64_t[]){4});
    }
    CHECK_MSG(dt_safetensors_write(dst, n, names, ts, 0, NULL) == DT_OK, "%s", dt_last_error());
    dt_safetensors_close(f);
    if (!repl) dt_ctx_free(ctx);
}

/* Loading dir fails with st and a message holding both strings. */
static void refused(const char *dir, dt_status st, const char *s1, const char *s2) {
    dt_lm *m = NULL;
    dt_status got = dt_lm_load(&m, dir);
    const char *msg = dt_last_error();
    CHECK_MSG(got == st && m == NULL, "%s: status %d, want %d (%s)", dir, got, st, msg);
    CHECK_MSG(strstr(msg, s1) && (!s2 || strstr(msg, s2)), "%s: message '%s' lacks '%s'/'%s'", dir,
              msg, s1, s2 ? s2 : "");
    dt_lm_free(m);
}

static void test_config(void) {
    char d[600];
    refused(fresh("empty", d, sizeof d), DT_ERR_IO, "config.json", "missing");
    fresh("bert", d, sizeof d);
    write_text(d, "config.json", "{\"model_type\": \"bert\", \"vocab_size\": 10}");
    refused(d, DT_ERR_FORMAT, "model_type 'bert' is not supported", "gpt2, llama, mistral, qwen2");
    fresh("badjson", d, sizeof d);
    write_text(d, "config.json", "{\"model_type\": \"gpt2\",");
    refused(d, DT_ERR_FORMAT, "config.json", "not valid JSON");
    fresh("nokey", d, sizeof d);
    write_text(d, "config.json", "{\"model_type\": \"gpt2\", \"vocab_size\": 10}");
    refused(d, DT_ERR_FORMAT, "config.json", "'n_positions' is missing");
    fresh("act", d, sizeof d);
    write_text(d, "config.json",
               "{\"model_type\": \"gpt2\", \"vocab_size\": 10, \"n_positions\": 8,"
               " \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2, \"activation_function\": \"relu\"}");
    refused(d, DT_ERR_FORMAT, "activation_function 'relu' is not supported", NULL);
}

static void test_weights(void) {
    char d[600];
    fresh("noweights", d, sizeof d);
    copy_fixture_file("gpt2", "config.json", d);
    refused(d, DT_ERR_IO, "no model.safetensors", NULL);

    fresh("truncated", d, sizeof d);
    copy_fixture_file("gpt2", "config.json", d);
    copy_fixture_file("gpt2", "model.safetensors", d);
    char p[1200];
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    CHECK(truncate(p, 100000) == 0);
    refused(d, DT_ERR_FORMAT, "model.safetensors", NULL);

    dt_ctx *ctx = dt_ctx_new(NULL, 0);
    fresh("shape", d, sizeof d);
    copy_fixture_file("gpt2", "config.json", d);
    rewrite(d, NULL, "transformer.h.1.mlp.c_fc.weight",
            dt_tensor_new(ctx, DT_DTYPE_F32, 2, (int64_t[]){128, 32}), NULL);
    refused(d, DT_ERR_FORMAT, "'transformer.h.1.mlp.c_fc.weight' has shape [128, 32]", "[32, 128]");
    fresh("dtype", d, sizeof d);
    copy_fixture_file("gpt2", "config.json", d);
    rewrite(d, NULL, "transformer.ln_f.bias", dt_tensor_new(ctx, DT_DTYPE_I32, 1, (int64_t[]){32}),
            NULL);
    refused(d, DT_ERR_FORMAT, "'transformer.ln_f.bias' is i32", "F32, F16 or BF16");
    fresh("missing", d, sizeof d);
    copy_fixture_file("gpt2", "config.json", d);
    rewrite(d, "transformer.h.0.ln_2.weight", NULL, NULL, NULL);
    refused(d, DT_ERR_FORMAT, "'transformer.h.0.ln_2.weight' is missing", "model.safetensors");
    fresh("extra", d, sizeof d);
    copy_fixture_file("gpt2", "config.json", d);
    rewrite(d, NULL, NULL, NULL, "transformer.h.0.attn.q_norm.weight");
    refused(d, DT_ERR_FORMAT, "'transformer.h.0.attn.q_norm.weight' is not part of a gpt2 model",
            "model.safetensors");
    /* the same file without changes loads: the checks above fail for their reason alone */
    fresh("fine", d, sizeof d);
    copy_fixture_file("gpt2", "config.json", d);
    rewrite(d, NULL, NULL, NULL, NULL);
    dt_lm *m = NULL;
    CHECK_MSG(dt_lm_load(&m, d) == DT_OK, "%s", dt_last_error());
    dt_lm_free(m);
    dt_ctx_free(ctx);
}

static void test_shards(void) {
    char d[600];
    fresh("shards", d, sizeof d);
    const char *files[] = {"config.json", "model.safetensors.index.json",
                           "model-00001-of-00003.safetensors", "model-00003-of-00003.safetensors"};
    for (int i = 0; i < 4; i++) copy_fixture_file("gpt2_sharded_bf16", files[i], d);
    refused(d, DT_ERR_IO,
            "model.safetensors.index.json: names shard "
            "'model-00002-of-00003.safetensors'",
            "which is missing");
    copy_fixture_file("gpt2_sharded_bf16", "model-00002-of-00003.safetensors", d);
    dt_lm *m = NULL;
    CHECK_MSG(dt_lm_load(&m, d) == DT_OK, "%s", dt_last_error());
    dt_lm_free(m);
}

int main(void) {
    if (!fx_tmpdir(g_tmp, sizeof g_tmp, "test-lm-errors")) return 1;
    TEST_RUN(test_config);
    TEST_RUN(test_weights);
    TEST_RUN(test_shards);
    if (!fx_rmtree(g_tmp)) fprintf(stderr, "could not remove %s\n", g_tmp);
    TEST_END();
}
