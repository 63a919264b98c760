/* lm_fixture.h — the model fixtures of tests/lm/fixtures/models/ (made by
 * tools/lm_fixtures/make_model_fixtures.py with transformers) and their expected.json. */
#ifndef DT_TEST_LM_FIXTURE_H
#define DT_TEST_LM_FIXTURE_H

#include "test.h"

#include <dtrain/lm.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fixtures of the GPT-2 and Llama layouts. */
static const char *const LM_GPT2_FIXTURES[] = {"gpt2", "gpt2_legacy_fp16", "gpt2_sharded_bf16"};
static const char *const LM_LLAMA_FIXTURES[] = {"llama", "llama_tied_bias_bf16", "mistral",
                                                "qwen2"};

/* The fixture directory of `name` into buf. */
static inline const char *lm_fixture_dir(const char *name, char *buf, size_t cap) {
    const char *src = getenv("DT_SOURCE_DIR");
    snprintf(buf, cap, "%s/tests/lm/fixtures/models/%s", src ? src : ".", name);
    return buf;
}

/* expected.json of fixture `name` (caller json_decref's), NULL with a failed check. */
static inline json_t *lm_expected(const char *name) {
    char dir[1024], path[1100];
    lm_fixture_dir(name, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/expected.json", dir);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    CHECK_MSG(j != NULL, "%s: %s", path, e.text);
    return j;
}

/* A JSON array of integers as a malloc'd int32 array of *n. */
static inline int32_t *lm_ids(const json_t *arr, size_t *n) {
    *n = json_array_size(arr);
    int32_t *ids = malloc((*n + 1) * sizeof *ids);
    for (size_t i = 0; i < *n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(arr, i));
    return ids;
}

/* Load fixture `name`; NULL (with the error printed and a failed check) on failure. */
static inline dt_lm *lm_load_fixture(const char *name) {
    char dir[1024];
    dt_lm *m = NULL;
    dt_status st = dt_lm_load(&m, lm_fixture_dir(name, dir, sizeof dir));
    CHECK_MSG(st == DT_OK, "load %s: %s", name, dt_last_error());
    return m;
}

/* fn(name, model, expected.json) for every fixture of the list, each loaded and freed here. */
typedef void (*lm_fixture_fn)(const char *name, dt_lm *m, json_t *exp);
static inline void lm_each(const char *const *names, size_t n, lm_fixture_fn fn) {
    for (size_t i = 0; i < n; i++) {
        json_t *exp = lm_expected(names[i]);
        dt_lm *m = lm_load_fixture(names[i]);
        if (exp && m) fn(names[i], m, exp);
        dt_lm_free(m);
        json_decref(exp);
    }
}
#define LM_EACH_GPT2(fn) lm_each(LM_GPT2_FIXTURES, sizeof LM_GPT2_FIXTURES / sizeof(char *), fn)
#define LM_EACH_LLAMA(fn) lm_each(LM_LLAMA_FIXTURES, sizeof LM_LLAMA_FIXTURES / sizeof(char *), fn)

static inline bool lm_rel_close(double got, double want, double rel) {
    return fabs(got - want) <= rel * fabs(want);
}

#endif
