/*
 * test_pipe_partition.c — assigning layers to pipeline stages (src/engine/pipe_partition.c).
 *
 * Expected splits are worked out by hand from DeepSpeed 0.19.8's runtime/utils.py:
 *   - partition_uniform(n, p): every part gets n // p items and the first n % p parts one
 *     more (e.g. 10 over 4 -> 3 3 2 2, boundaries 0 3 6 8 10); n <= p gives part i the item i
 *     and leaves the rest empty.
 *   - partition_balanced(w, p): for n <= p the uniform split; otherwise a dynamic program over
 *     (first i items, j parts) that keeps, for each state, the (max, min) part sums of the
 *     candidate whose spread max - min is smallest, scanning the start k of the last part
 *     upwards and replacing on ">=" (so the latest cut wins ties); boundaries are read back
 *     from the stored cuts. Note it minimises the spread state by state, not the largest part:
 *     the cases under "not minimax" show splits with a larger maximum than the best possible.
 *   - PipelineModule "type:REGEX": weight 1 for layers whose class name matches (re.search,
 *     IGNORECASE), 0 otherwise, then partition_balanced; no match is an error.
 * The same tables were also checked once against DeepSpeed's own functions.
 */
#include "engine/pipe_impl.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int same(const int *a, const int *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

static void fmt_parts(const int *p, int n, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < n && len + 12 < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%d", i ? " " : "", p[i]);
}

#define EXPECT_PARTS(got, want, np, ...)                                                           \
    do {                                                                                           \
        char g_[256], w_[256];                                                                     \
        fmt_parts(got, np, g_, sizeof g_);                                                         \
        fmt_parts(want, np, w_, sizeof w_);                                                        \
        CHECK_MSG(same(got, want, np), "%s: got [%s], want [%s]", __VA_ARGS__, g_, w_);            \
    } while (0)

/* ---- uniform ----------------------------------------------------------------------------- */

static void uniform_case(int n, int p, const int *want) {
    int parts[16];
    dt__pipe_partition_uniform(n, p, parts);
    char what[64];
    snprintf(what, sizeof what, "uniform n=%d p=%d", n, p);
    EXPECT_PARTS(parts, want, p + 1, what);
}

static void test_uniform(void) {
    /* the first n % p stages take the extra layers */
    uniform_case(10, 4, (const int[]){0, 3, 6, 8, 10});
    uniform_case(7, 3, (const int[]){0, 3, 5, 7});
    uniform_case(13, 5, (const int[]){0, 3, 6, 9, 11, 13});
    uniform_case(11, 6, (const int[]){0, 2, 4, 6, 8, 10, 11});
    uniform_case(9, 2, (const int[]){0, 5, 9});
    uniform_case(8, 4, (const int[]){0, 2, 4, 6, 8});
    uniform_case(5, 5, (const int[]){0, 1, 2, 3, 4, 5});
    uniform_case(1, 1, (const int[]){0, 1});
    uniform_case(3, 5, (const int[]){0, 1, 2, 3, 3, 3}); /* the helper allows empty parts */

    /* properties over a range: contiguous, sizes differ by <= 1, larger ones first */
    int bad = 0;
    for (int n = 1; n <= 40; n++)
        for (int p = 1; p <= n; p++) {
            int parts[41];
            dt__pipe_partition_uniform(n, p, parts);
            bad += parts[0] != 0 || parts[p] != n;
            for (int i = 0; i < p; i++) {
                int sz = parts[i + 1] - parts[i];
                bad += sz != n / p + (i < n % p);
            }
        }
    CHECK(bad == 0);

    int parts[5];
    CHECK(dt__pipe_partition("uniform", 10, NULL, NULL, 4, parts) == DT_OK);
    EXPECT_PARTS(parts, ((const int[]){0, 3, 6, 8, 10}), 5, "method uniform");
    CHECK(dt__pipe_partition("UniForm", 10, NULL, NULL, 4, parts) == DT_OK);
    EXPECT_PARTS(parts, ((const int[]){0, 3, 6, 8, 10}), 5, "method UniForm");
}

/* ---- balanced ---------------------------------------------------------------------------- */

static void balanced_case(const int64_t *w, int n, int p, const int *want) {
    int parts[16];
    CHECK(dt__pipe_partition_balanced(w, n, p, parts) == DT_OK);
    char what[64];
    snprintf(what, sizeof what, "balanced n=%d p=%d", n, p);
    EXPECT_PARTS(parts, want, p + 1, what);
    /* the same through the "parameters" method */
    int parts2[16];
    CHECK(dt__pipe_partition("parameters", n, w, NULL, p, parts2) == DT_OK);
    EXPECT_PARTS(parts2, want, p + 1, "parameters");
}

static void test_balanced(void) {
    /* equal weights: 2 2 2 */
    balanced_case((const int64_t[]){1, 1, 1, 1, 1, 1}, 6, 3, (const int[]){0, 2, 4, 6});
    /* [10 1 1 | 1 1 10]: 12 / 12 */
    balanced_case((const int64_t[]){10, 1, 1, 1, 1, 10}, 6, 2, (const int[]){0, 3, 6});
    /* a heavy layer alone in the middle stage: 12 / 100 / 8 */
    balanced_case((const int64_t[]){4, 4, 4, 100, 4, 4}, 6, 3, (const int[]){0, 3, 4, 6});
    /* GPT-like: embedding 100, four blocks of 50, norm 2, head 100.
     * 2 stages: [100 50 50 | 50 50 2 100] = 200 / 202, spread 2 (best).
     * 3 stages: [100 50 | 50 50 50 | 2 100]... the DP's pick is 150 / 150 / 102. */
    balanced_case((const int64_t[]){100, 50, 50, 50, 50, 2, 100}, 7, 2, (const int[]){0, 3, 7});
    balanced_case((const int64_t[]){100, 50, 50, 50, 50, 2, 100}, 7, 3, (const int[]){0, 2, 5, 7});
    /* all zero: every cut ties, the latest wins: [0 0 0 | 0] */
    balanced_case((const int64_t[]){0, 0, 0, 0}, 4, 2, (const int[]){0, 3, 4});
    /* 5 | 1 1 1 1 | 1 1 1 1 | 5: spread 1 */
    balanced_case((const int64_t[]){5, 1, 1, 1, 1, 1, 1, 1, 1, 5}, 10, 4,
                  (const int[]){0, 1, 5, 9, 10});
    balanced_case((const int64_t[]){3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}, 11, 3,
                  (const int[]){0, 5, 8, 11});
    /* one part, and as many parts as items (uniform) */
    balanced_case((const int64_t[]){1, 2, 3}, 3, 1, (const int[]){0, 3});
    balanced_case((const int64_t[]){7, 7}, 2, 2, (const int[]){0, 1, 2});
    /* not minimax: [1 9 | 2 | 5] has largest part 10 where [1 | 9 | 2 5] has 9 (both spread
     * 8); [0 7 | 4 | 3 | 9 1] has 10 where [0 7 | 4 3 | 9 | 1] has 9 */
    balanced_case((const int64_t[]){1, 9, 2, 5}, 4, 3, (const int[]){0, 2, 3, 4});
    balanced_case((const int64_t[]){0, 7, 4, 3, 9, 1}, 6, 4, (const int[]){0, 2, 3, 4, 6});
    balanced_case((const int64_t[]){2, 9, 1, 3, 1, 6}, 6, 3, (const int[]){0, 2, 5, 6});
    balanced_case((const int64_t[]){2, 8, 9, 8, 4, 9, 3}, 7, 3, (const int[]){0, 3, 5, 7});

    /* properties: contiguous, non-empty parts; large counts do not overflow */
    int bad = 0;
    uint32_t rng = 7;
    for (int t = 0; t < 300; t++) {
        int64_t w[24];
        int n = 2 + t % 23, p = 1 + (t * 7) % (n - 1 > 0 ? n - 1 : 1), parts[24];
        for (int i = 0; i < n; i++) {
            rng = rng * 1664525u + 1013904223u;
            w[i] = (int64_t)(rng >> 8) * (t % 3 == 0 ? 1000000 : 1) % 100000000000LL;
        }
        if (dt__pipe_partition_balanced(w, n, p, parts) != DT_OK) {
            bad++;
            continue;
        }
        bad += parts[0] != 0 || parts[p] != n;
        for (int i = 0; i < p; i++) bad += parts[i + 1] <= parts[i];
    }
    CHECK(bad == 0);
    /* parameter counts of a real size */
    int parts[3];
    CHECK(dt__pipe_partition_balanced(
              (const int64_t[]){3000000000LL, 1000000000LL, 1000000000LL, 1000000000LL}, 4, 2,
              parts) == DT_OK);
    EXPECT_PARTS(parts, ((const int[]){0, 1, 4}), 3, "billions");
}

/* ---- type:REGEX -------------------------------------------------------------------------- */

static const char *const gpt_types[] = {"Embedding",
                                        "TransformerBlock",
                                        "TransformerBlock",
                                        "TransformerBlock",
                                        "TransformerBlock",
                                        "LayerNorm",
                                        "Linear"};

static void test_type(void) {
    int parts[5];
    /* weights 0 1 1 1 1 0 0: [Embedding Block Block | Block Block LayerNorm Linear] */
    CHECK(dt__pipe_partition("type:transformer", 7, NULL, gpt_types, 2, parts) == DT_OK);
    EXPECT_PARTS(parts, ((const int[]){0, 3, 7}), 3, "type:transformer / 2");
    /* 3 stages: [Emb B B | B | B LN Lin] (spreads 2 - 1 = 1) */
    CHECK(dt__pipe_partition("type:TRANSFORMER", 7, NULL, gpt_types, 3, parts) == DT_OK);
    EXPECT_PARTS(parts, ((const int[]){0, 3, 4, 7}), 4, "type:TRANSFORMER / 3");
    /* anchored regex, alternation */
    CHECK(dt__pipe_partition("Type:^transformerblock$", 7, NULL, gpt_types, 2, parts) == DT_OK);
    EXPECT_PARTS(parts, ((const int[]){0, 3, 7}), 3, "anchored");
    CHECK(dt__pipe_partition("type:embed|linear", 7, NULL, gpt_types, 2, parts) == DT_OK);
    /* weights 1 0 0 0 0 0 1: the cut goes as late as the spread allows: [.. 6 | 1] */
    EXPECT_PARTS(parts, ((const int[]){0, 6, 7}), 3, "alternation");

    /* 6 blocks among 9 layers over 4 stages: 0 1 1 | 1 1 | 1 | 1 0 0 */
    const char *const t9[] = {"Embedding", "Block", "Block", "Block", "Block",
                              "Block",     "Block", "Norm",  "Head"};
    CHECK(dt__pipe_partition("type:block", 9, NULL, t9, 4, parts) == DT_OK);
    EXPECT_PARTS(parts, ((const int[]){0, 3, 5, 6, 9}), 5, "type:block / 4");
    /* one matching layer in three: weights 1 0 0 1 0 0 1 0 0 1 0 0 over 2 -> 6 / 6 */
    const char *const t12[] = {"Attn", "Mlp", "Mlp", "Attn", "Mlp", "Mlp",
                               "Attn", "Mlp", "Mlp", "Attn", "Mlp", "Mlp"};
    CHECK(dt__pipe_partition("type:attn", 12, NULL, t12, 2, parts) == DT_OK);
    EXPECT_PARTS(parts, ((const int[]){0, 6, 12}), 3, "type:attn / 2");
    /* a layer without a type name never matches */
    const char *const tn[] = {"Block", NULL, "Block", NULL};
    CHECK(dt__pipe_partition("type:.", 4, NULL, tn, 2, parts) == DT_OK);
    EXPECT_PARTS(parts, ((const int[]){0, 2, 4}), 3, "NULL type");
}

/* ---- errors ------------------------------------------------------------------------------ */

static void expect_err(dt_status want, const char *needle, const char *method, int n,
                       const int64_t *params, const char *const *types, int stages) {
    int parts[16];
    dt_clear_error();
    dt_status rc = dt__pipe_partition(method, n, params, types, stages, parts);
    CHECK_MSG(rc == want, "%s n=%d stages=%d: status %s, want %s", method ? method : "(null)", n,
              stages, dt_status_name(rc), dt_status_name(want));
    CHECK_MSG(strstr(dt_last_error(), needle) != NULL, "message \"%s\" lacks \"%s\"",
              dt_last_error(), needle);
}

static void test_errors(void) {
    const int64_t p4[] = {1, 2, 3, 4};
    const char *const t4[] = {"Linear", "ReLU", "Linear", "ReLU"};
    expect_err(DT_ERR_CONFIG, "5 stages but only 4 layers", "uniform", 4, p4, t4, 5);
    expect_err(DT_ERR_CONFIG, "5 stages but only 4 layers", "parameters", 4, p4, t4, 5);
    expect_err(DT_ERR_CONFIG, "2 stages but only 0 layers", "uniform", 0, p4, t4, 2);
    expect_err(DT_ERR_CONFIG, "valid methods are uniform, parameters, type:REGEX", "profile", 4, p4,
               t4, 2);
    expect_err(DT_ERR_CONFIG, "unknown partition method \"balanced\"", "balanced", 4, p4, t4, 2);
    expect_err(DT_ERR_CONFIG, "no partition method", "", 4, p4, t4, 2);
    expect_err(DT_ERR_CONFIG, "no partition method", NULL, 4, p4, t4, 2);
    expect_err(DT_ERR_CONFIG, "bad regex \"lin(ear\"", "type:lin(ear", 4, p4, t4, 2);
    expect_err(DT_ERR_CONFIG, "bad regex", "type:[relu", 4, p4, t4, 2);
    expect_err(DT_ERR_CONFIG, "needs a regex", "type:", 4, p4, t4, 2);
    expect_err(DT_ERR_CONFIG, "type:conv matches none of the 4 layers", "type:conv", 4, p4, t4, 2);
    expect_err(DT_ERR_INVALID, "num_stages must be >= 1 (got 0)", "uniform", 4, p4, t4, 0);
    expect_err(DT_ERR_INVALID, "needs the layers' parameter counts", "parameters", 4, NULL, t4, 2);
    expect_err(DT_ERR_INVALID, "needs the layers' type names", "type:relu", 4, p4, NULL, 2);
    expect_err(DT_ERR_INVALID, "layer 2 has a negative parameter count (-3)", "parameters", 4,
               (const int64_t[]){1, 2, -3, 4}, t4, 2);
    dt_clear_error();
    CHECK(dt__pipe_partition("uniform", 4, NULL, NULL, 2, NULL) == DT_ERR_INVALID);

    /* the edges that are fine: as many stages as layers, one stage */
    int parts[5];
    CHECK(dt__pipe_partition("parameters", 4, p4, NULL, 4, parts) == DT_OK);
    EXPECT_PARTS(parts, ((const int[]){0, 1, 2, 3, 4}), 5, "n == stages");
    CHECK(dt__pipe_partition("type:relu", 4, NULL, t4, 1, parts) == DT_OK);
    EXPECT_PARTS(parts, ((const int[]){0, 4}), 2, "one stage");
}

int main(void) {
    TEST_RUN(test_uniform);
    TEST_RUN(test_balanced);
    TEST_RUN(test_type);
    TEST_RUN(test_errors);
    TEST_END();
}
