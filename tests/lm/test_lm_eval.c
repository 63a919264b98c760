/* test_lm_eval.c — dt_lm_eval_ids against the loss transformers computes with the same
 * windowing rule (windows of seq, a last window of >= 2 tokens kept, tokens 2..n predicted),
 * to 1e-4 relative, and the count of predicted tokens exactly; bad arguments refused. */
#include "lm/lm_fixture.h"

static void check_eval(const char *name, dt_lm *m, json_t *exp) {
    size_t n, i;
    int32_t *ids = lm_ids(json_object_get(exp, "eval_ids"), &n);
    json_t *e;
    json_array_foreach(json_object_get(exp, "eval"), i, e) {
        int64_t seq = json_integer_value(json_object_get(e, "seq")), pred = -1;
        double loss = 0, want = json_real_value(json_object_get(e, "loss"));
        CHECK_MSG(dt_lm_eval_ids(m, ids, n, seq, &loss, &pred) == DT_OK, "%s", dt_last_error());
        CHECK_MSG(lm_rel_close(loss, want, 1e-4), "%s seq %lld: loss %.9g, transformers %.9g", name,
                  (long long)seq, loss, want);
        CHECK(pred == json_integer_value(json_object_get(e, "predicted")));
    }
    free(ids);
    /* the fixture's text, as the tokenizers library encoded it */
    json_t *text = json_object_get(exp, "text");
    ids = lm_ids(json_object_get(text, "ids"), &n);
    double loss = 0, want = json_real_value(json_object_get(text, "loss"));
    int64_t pred = 0;
    CHECK(dt_lm_eval_ids(m, ids, n, json_integer_value(json_object_get(text, "seq")), &loss,
                         &pred) == DT_OK);
    CHECK_MSG(lm_rel_close(loss, want, 1e-4), "%s text: %.9g vs %.9g", name, loss, want);
    CHECK(pred == json_integer_value(json_object_get(text, "predicted")));
    free(ids);
}

static void test_gpt2(void) {
    LM_EACH_GPT2(check_eval);
}

static void test_llama(void) {
    LM_EACH_LLAMA(check_eval);
}

/* The rule's edges: a last window of one token is dropped, of two kept; errors are errors. */
static void test_windows(void) {
    dt_lm *m = lm_load_fixture("gpt2");
    if (!m) return;
    int32_t ids[22];
    for (int i = 0; i < 22; i++) ids[i] = (i * 37 + 5) % 320;
    double a, b;
    int64_t pa, pb;
    CHECK(dt_lm_eval_ids(m, ids, 20, 10, &a, &pa) == DT_OK && pa == 18);
    CHECK(dt_lm_eval_ids(m, ids, 21, 10, &b, &pb) == DT_OK && pb == 18 && a == b);
    CHECK(dt_lm_eval_ids(m, ids, 22, 10, &b, &pb) == DT_OK && pb == 19 && a != b);
    CHECK(dt_lm_eval_ids(m, ids, 1, 10, &a, &pa) == DT_ERR_INVALID);
    CHECK(dt_lm_eval_ids(m, ids, 20, 65, &a, &pa) == DT_ERR_INVALID); /* > n_positions */
    ids[3] = 320;
    CHECK(dt_lm_eval_ids(m, ids, 20, 10, &a, &pa) == DT_ERR_INVALID);
    CHECK(strstr(dt_last_error(), "vocabulary") != NULL);
    dt_lm_free(m);
}

int main(void) {
    TEST_RUN(test_gpt2);
    TEST_RUN(test_llama);
    TEST_RUN(test_windows);
    TEST_END();
}
