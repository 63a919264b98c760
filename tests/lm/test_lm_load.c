/* test_lm_load.c — loading Hugging Face directories: the logits of a fixed id sequence against
 * what transformers computed for the same directory (tools/lm_fixtures/make_model_fixtures.py),
 * for every layout the fixtures cover (prefix or not, old mask buffers, shards, f32/f16/bf16,
 * tied and untied heads), and the module tree's names. */
#include "lm/lm_fixture.h"

static void check_logits(const char *name, dt_lm *m, json_t *exp) {
    size_t n;
    int32_t *ids = lm_ids(json_object_get(exp, "ids"), &n);
    dt_ctx *ctx = dt_module_ctx(dt_lm_module(m));
    dt_set_grad_enabled(ctx, false);
    dt_tensor *x = dt_tensor_new(ctx, DT_DTYPE_I32, 2, (int64_t[]){1, (int64_t)n});
    memcpy(x->data, ids, n * sizeof *ids);
    dt_tensor *logits = dt_contiguous(dt_lm_forward(m, x)); // (1, T, V)
    CHECK_MSG(logits != NULL, "%s: forward: %s", name, dt_last_error());
    if (logits) {
        int64_t V = logits->shape[2];
        const float *L = logits->data;
        double sum = 0, abs_sum = 0;
        int argmax_ok = 0;
        for (int64_t i = 0; i < (int64_t)n * V; i++) sum += L[i], abs_sum += fabs(L[i]);
        json_t *am = json_object_get(exp, "logits_argmax");
        for (size_t t = 0; t < n; t++) {
            int64_t best = 0;
            for (int64_t v = 1; v < V; v++)
                if (L[t * V + v] > L[t * V + best]) best = v;
            argmax_ok += best == json_integer_value(json_array_get(am, t));
        }
        double want_abs = json_real_value(json_object_get(exp, "logits_abs_sum"));
        CHECK_MSG(lm_rel_close(abs_sum, want_abs, 1e-5), "%s: |logits| sum %.9g vs %.9g", name,
                  abs_sum, want_abs);
        CHECK_NEAR(sum, json_real_value(json_object_get(exp, "logits_sum")), 1e-5 * want_abs);
        CHECK_MSG(argmax_ok == (int)n, "%s: argmax agrees at %d of %zu positions", name, argmax_ok,
                  n);
        size_t k;
        json_t *pick;
        json_array_foreach(json_object_get(exp, "logits_picks"), k, pick) {
            int64_t t = json_integer_value(json_array_get(pick, 0));
            int64_t v = json_integer_value(json_array_get(pick, 1));
            CHECK_NEAR(L[t * V + v], json_real_value(json_array_get(pick, 2)), 2e-4);
        }
    }
    free(ids);
}

static void test_gpt2_layouts(void) {
    LM_EACH_GPT2(check_logits);
}

static void test_llama_layouts(void) {
    LM_EACH_LLAMA(check_logits);
}

/* The tree carries the Hugging Face names; a tied GPT-2 has no lm_head of its own. */
static void test_names_and_config(void) {
    dt_lm *m = lm_load_fixture("gpt2_legacy_fp16");
    if (!m) return;
    dt_module *root = dt_lm_module(m);
    CHECK(dt_module_find_param(root, "transformer.h.1.attn.c_attn.weight") != NULL);
    CHECK(dt_module_find_param(root, "transformer.wte.weight") != NULL);
    CHECK(dt_module_find_param(root, "lm_head.weight") == NULL);
    dt_tensor *w = dt_module_find_param(root, "transformer.h.0.mlp.c_fc.weight");
    CHECK(w && w->shape[0] == 128 && w->shape[1] == 32); /* dtrain's (out, in) */
    const dt_lm_config *c = dt_lm_get_config(m);
    CHECK(c->tied && c->vocab == 320 && c->max_pos == 64 && c->n_layer == 2 && c->d_ff == 128);
    CHECK(c->eos_id == 0 && c->norm == DT_LM_NORM_LAYER);
    dt_lm_free(m);
}

/* dt_lm_open + a module built elsewhere + dt_lm_load_weights: the trial's path. */
static void test_open_then_weights(void) {
    char dir[1024];
    dt_lm *m = NULL;
    CHECK(dt_lm_open(&m, lm_fixture_dir("gpt2", dir, sizeof dir)) == DT_OK);
    if (!m) return;
    CHECK(dt_lm_load_weights(m) == DT_ERR_STATE); /* not built yet */
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    dt_module *root = dt_lm_take_module(m);
    CHECK(dt_module_build(root, ctx, 7) == DT_OK);
    CHECK_MSG(dt_lm_load_weights(m) == DT_OK, "%s", dt_last_error());
    dt_lm *ref = lm_load_fixture("gpt2");
    if (ref) {
        int64_t n1, n2;
        float *a = dt_module_flat_params(root, &n1);
        float *b = dt_module_flat_params(dt_lm_module(ref), &n2);
        CHECK(n1 == n2 && memcmp(a, b, (size_t)n1 * sizeof *a) == 0);
    }
    dt_lm_free(ref);
    dt_lm_free(m);
    dt_module_free(root);
    dt_ctx_free(ctx);
}

int main(void) {
    TEST_RUN(test_gpt2_layouts);
    TEST_RUN(test_llama_layouts);
    TEST_RUN(test_names_and_config);
    TEST_RUN(test_open_then_weights);
    TEST_END();
}
