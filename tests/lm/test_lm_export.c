/* test_lm_export.c — dt_lm_save: the exported directory re-loads bit-identically, holds the
 * Hugging Face names and layouts (the `transformer.` prefix, Conv1D (in, out), no tied head,
 * f32, metadata format pt), a config.json transformers reads, and the tokenizer; its loss is
 * the fixture's transformers loss. With DT_LM_KEEP_EXPORT=DIR the export of each fixture is
 * kept under DIR/<fixture> for tools/lm_fixtures/make_model_fixtures.py --check-export.
 * With DT_LM_CHECK_DIR=DIR (and DT_LM_CHECK_GPT2=1 for the GPT-2 layout) only that directory
 * is checked — the files, names and layouts, and that it loads — for tests/lm/test_lm_cli.sh's
 * `dtrain lm finetune` exports. */
#include "lm/lm_fixture.h"

#include <dtrain/tensor.h>
#include <unistd.h>

static void export_dir(const char *name, char *out, size_t cap) {
    const char *keep = getenv("DT_LM_KEEP_EXPORT");
    if (keep) {
        snprintf(out, cap, "%s/%s", keep, name);
        return;
    }
    snprintf(out, cap, "/tmp/dt_lm_export_XXXXXX");
    CHECK(mkdtemp(out) != NULL);
}

static void remove_dir(const char *dir) {
    if (getenv("DT_LM_KEEP_EXPORT")) return;
    const char *files[] = {
        "config.json",           "model.safetensors",       "tokenizer.json",
        "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"};
    char p[1200];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* The file's names and layouts are the family's. */
static void check_file(const char *dir, bool gpt2) {
    char p[1200];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    dt_safetensors *f = dt_safetensors_open(p);
    CHECK_MSG(f != NULL, "%s", dt_last_error());
    if (!f) return;
    CHECK(dt_safetensors_metadata(f, "format") &&
          !strcmp(dt_safetensors_metadata(f, "format"), "pt"));
    for (int i = 0; i < dt_safetensors_count(f); i++)
        CHECK(dt_safetensors_dtype(f, i) == DT_DTYPE_F32);
    if (gpt2) {
        int i = dt_safetensors_find(f, "transformer.h.0.mlp.c_fc.weight");
        CHECK(i >= 0 && dt_safetensors_shape(f, i)[0] == 32 &&
              dt_safetensors_shape(f, i)[1] == 128);
        CHECK(dt_safetensors_find(f, "lm_head.weight") < 0);
        CHECK(dt_safetensors_find(f, "transformer.h.0.attn.bias") < 0);
    }
    dt_safetensors_close(f);
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    CHECK(access(p, R_OK) == 0);
}

static void check_round_trip(const char *name) {
    char dir[1024];
    export_dir(name, dir, sizeof dir);
    json_t *exp = lm_expected(name);
    dt_lm *m = lm_load_fixture(name), *back = NULL;
    if (!m || !exp) goto out;
    CHECK_MSG(dt_lm_save(m, dir) == DT_OK, "%s: %s", name, dt_last_error());
    check_file(dir, strncmp(name, "gpt2", 4) == 0);
    CHECK_MSG(dt_lm_load(&back, dir) == DT_OK, "%s: %s", name, dt_last_error());
    if (!back) goto out;
    int64_t n1, n2;
    float *a = dt_module_flat_params(dt_lm_module(m), &n1);
    float *b = dt_module_flat_params(dt_lm_module(back), &n2);
    CHECK_MSG(n1 == n2 && memcmp(a, b, (size_t)n1 * sizeof *a) == 0, "%s: weights differ", name);
    size_t n;
    int32_t *ids = lm_ids(json_object_get(exp, "eval_ids"), &n);
    json_t *e = json_array_get(json_object_get(exp, "eval"), 0);
    double loss = 0, want = json_real_value(json_object_get(e, "loss"));
    CHECK(dt_lm_eval_ids(back, ids, n, json_integer_value(json_object_get(e, "seq")), &loss,
                         NULL) == DT_OK);
    CHECK_MSG(lm_rel_close(loss, want, 1e-4), "%s: exported loss %.9g vs %.9g", name, loss, want);
    free(ids);
    /* saving over the export again works (the files are replaced whole) */
    CHECK(dt_lm_save(back, dir) == DT_OK);
out:
    dt_lm_free(back);
    dt_lm_free(m);
    json_decref(exp);
    remove_dir(dir);
}

static void test_gpt2(void) {
    for (size_t i = 0; i < sizeof LM_GPT2_FIXTURES / sizeof *LM_GPT2_FIXTURES; i++)
        check_round_trip(LM_GPT2_FIXTURES[i]);
}

static void test_llama(void) {
    for (size_t i = 0; i < sizeof LM_LLAMA_FIXTURES / sizeof *LM_LLAMA_FIXTURES; i++)
        check_round_trip(LM_LLAMA_FIXTURES[i]);
}

/* A trained model exports what it learned: change a weight, save, load, find it. */
static void test_changed_weights(void) {
    char dir[1024];
    export_dir("gpt2_changed", dir, sizeof dir);
    dt_lm *m = lm_load_fixture("gpt2"), *back = NULL;
    if (!m) return;
    dt_tensor *w = dt_module_find_param(dt_lm_module(m), "transformer.h.1.attn.c_proj.weight");
    ((float *)w->data)[3 * w->stride[0] + 5] = 1.25f; /* (out 3, in 5) */
    CHECK(dt_lm_save(m, dir) == DT_OK);
    char p[1200];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    dt_safetensors *f = dt_safetensors_open(p);
    dt_ctx *ctx = dt_ctx_new(NULL, 0);
    dt_tensor *t = f ? dt_safetensors_get(f, ctx, "transformer.h.1.attn.c_proj.weight") : NULL;
    CHECK(t && ((float *)t->data)[5 * 32 + 3] == 1.25f); /* stored (in 5, out 3) */
    dt_safetensors_close(f);
    dt_ctx_free(ctx);
    CHECK(dt_lm_load(&back, dir) == DT_OK);
    dt_tensor *w2 =
        back ? dt_module_find_param(dt_lm_module(back), "transformer.h.1.attn.c_proj.weight")
             : NULL;
    CHECK(w2 && ((float *)w2->data)[3 * w2->stride[0] + 5] == 1.25f);
    dt_lm_free(back);
    dt_lm_free(m);
    remove_dir(dir);
}

/* A checkpoint's model.safetensors (dtrain's names and layouts, as trial and engine checkpoints
 * write it) read into a fresh model gives the trained weights; a foreign file is refused. */
static void test_checkpoint_weights(void) {
    char path[] = "/tmp/dt_lm_ckpt_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    dt_lm *m = lm_load_fixture("llama"), *fresh = lm_load_fixture("llama");
    if (!m || !fresh) goto out;
    dt_module *root = dt_lm_module(m);
    int n = dt_module_param_count(root);
    const char *names[64];
    dt_tensor *ts[64];
    for (int i = 0; i < n && i < 64; i++) {
        names[i] = dt_module_param_name(root, i);
        ts[i] = dt_module_param_tensor(root, i);
        ((float *)ts[i]->data)[0] += 0.5f; /* "trained" */
    }
    CHECK(dt_safetensors_write(path, n, names, ts, 0, NULL) == DT_OK);
    CHECK_MSG(dt_lm_load_checkpoint_weights(fresh, path) == DT_OK, "%s", dt_last_error());
    int64_t n1, n2;
    float *a = dt_module_flat_params(root, &n1),
          *b = dt_module_flat_params(dt_lm_module(fresh), &n2);
    CHECK(n1 == n2 && memcmp(a, b, (size_t)n1 * sizeof *a) == 0);
    CHECK(dt_safetensors_write(path, n - 1, names, ts, 0, NULL) == DT_OK);
    CHECK(dt_lm_load_checkpoint_weights(fresh, path) == DT_ERR_FORMAT);
    CHECK(strstr(dt_last_error(), path) != NULL);
out:
    dt_lm_free(m);
    dt_lm_free(fresh);
    unlink(path);
}

/* An export made elsewhere (DT_LM_CHECK_DIR) has the family's files and loads. */
static void test_given_dir(const char *dir) {
    const char *gpt2 = getenv("DT_LM_CHECK_GPT2");
    check_file(dir, gpt2 && !strcmp(gpt2, "1"));
    dt_lm *m = NULL;
    CHECK_MSG(dt_lm_load(&m, dir) == DT_OK, "%s: %s", dir, dt_last_error());
    dt_lm_free(m);
}

int main(void) {
    const char *given = getenv("DT_LM_CHECK_DIR");
    if (given) {
        test_given_dir(given);
        TEST_END();
    }
    TEST_RUN(test_checkpoint_weights);
    TEST_RUN(test_gpt2);
    TEST_RUN(test_llama);
    TEST_RUN(test_changed_weights);
    TEST_END();
}
