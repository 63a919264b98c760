/* test_lm_generate.c — greedy generation with the KV cache, token for token against
 * transformers' generate(do_sample=False); the EOS stop; sampling reproducible by seed, and
 * top-k 1 / a tiny top-p equal to greedy. */
#include "lm/lm_fixture.h"

static void check_greedy(const char *name, dt_lm *m, json_t *exp) {
    json_t *g = json_object_get(exp, "generate");
    size_t np, nw;
    int32_t *prompt = lm_ids(json_object_get(g, "prompt"), &np);
    int32_t *want = lm_ids(json_object_get(g, "ids"), &nw);
    dt_lm_gen_opts o = dt_lm_gen_defaults();
    o.eos_id = json_integer_value(json_object_get(g, "eos_id"));
    int32_t *got = NULL;
    size_t ng = 0;
    dt_status st = dt_lm_generate(m, prompt, np,
                                  (size_t)json_integer_value(json_object_get(g, "max_new_tokens")),
                                  &o, &got, &ng);
    CHECK_MSG(st == DT_OK, "%s: %s", name, dt_last_error());
    size_t same = 0;
    while (got && same < ng && same < nw && got[same] == want[same]) same++;
    CHECK_MSG(ng == nw && same == nw, "%s: %zu of %zu ids agree (got %zu)", name, same, nw, ng);
    /* stop at an EOS the greedy path reaches: the first new token equal to it ends the run */
    if (got && nw > np + 3) {
        o.eos_id = want[np + 2];
        size_t stop = np;
        while (want[stop] != o.eos_id) stop++;
        int32_t *got2 = NULL;
        size_t ng2 = 0;
        CHECK(dt_lm_generate(m, prompt, np, 24, &o, &got2, &ng2) == DT_OK);
        CHECK_MSG(ng2 == stop + 1 && got2 && got2[stop] == o.eos_id,
                  "%s: EOS stop at %zu, "
                  "got %zu",
                  name, stop + 1, ng2);
        free(got2);
    }
    free(got);
    free(prompt);
    free(want);
}

static void test_gpt2(void) {
    LM_EACH_GPT2(check_greedy);
}

static void test_llama(void) {
    LM_EACH_LLAMA(check_greedy);
}

static int32_t *gen(dt_lm *m, float temp, int64_t k, float p, uint64_t seed, size_t *n) {
    int32_t prompt[] = {5, 17, 101};
    dt_lm_gen_opts o = {.temperature = temp, .top_k = k, .top_p = p, .seed = seed, .eos_id = -1};
    int32_t *out = NULL;
    CHECK_MSG(dt_lm_generate(m, prompt, 3, 16, &o, &out, n) == DT_OK, "%s", dt_last_error());
    return out;
}

static void test_sampling(void) {
    dt_lm *m = lm_load_fixture("gpt2");
    if (!m) return;
    size_t n1, n2, n3, n4, n5;
    int32_t *greedy = gen(m, 0.f, 0, 0.f, 0, &n1);
    int32_t *a = gen(m, 1.5f, 0, 0.f, 42, &n2), *b = gen(m, 1.5f, 0, 0.f, 42, &n3);
    int32_t *k1 = gen(m, 1.0f, 1, 0.f, 9, &n4), *p0 = gen(m, 1.0f, 0, 1e-6f, 9, &n5);
    CHECK(n1 == 19 && n2 == 19 && n3 == 19 && n4 == 19 && n5 == 19);
    CHECK(a && b && memcmp(a, b, n2 * sizeof *a) == 0);             /* same seed, same draw */
    CHECK(k1 && greedy && memcmp(k1, greedy, n1 * sizeof *a) == 0); /* top-k 1 is greedy */
    CHECK(p0 && greedy && memcmp(p0, greedy, n1 * sizeof *a) == 0); /* so is a tiny top-p */
    int differ = 0; /* at temperature 1.5 some of 16 draws leave the greedy path */
    for (size_t i = 3; a && greedy && i < n1; i++) differ += a[i] != greedy[i];
    CHECK(differ > 0);
    size_t n6;
    int32_t *c = gen(m, 1.5f, 0, 0.f, 43, &n6);
    CHECK(c && a && memcmp(a, c, n2 * sizeof *a) != 0); /* another seed, another draw */
    int32_t prompt[60] = {0};
    int32_t *out = NULL;
    size_t n;
    CHECK(dt_lm_generate(m, prompt, 60, 5, NULL, &out, &n) == DT_ERR_INVALID); /* > 64 */
    free(greedy), free(a), free(b), free(k1), free(p0), free(c);
    dt_lm_free(m);
}

int main(void) {
    TEST_RUN(test_gpt2);
    TEST_RUN(test_llama);
    TEST_RUN(test_sampling);
    TEST_END();
}
