/*
 * pipe_partition.c — which layers each pipeline stage owns: uniform counts, balanced
 * parameter counts, or balanced counts of the layers whose type name matches a regex. The
 * results equal DeepSpeed's PipelineModule partitioning (partition_uniform /
 * partition_balanced) on the same inputs, so a model splits the same way under both.
 */
#include "engine/pipe_impl.h"

#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void dt__pipe_partition_uniform(int n, int num_parts, int *parts) {
    if (n <= num_parts) {
        for (int p = 0; p <= num_parts; p++) parts[p] = p < n ? p : n;
        return;
    }
    /* every part gets n / num_parts items; the first n % num_parts get one more */
    int chunk = n / num_parts, extra = n % num_parts;
    parts[0] = 0;
    for (int p = 0; p < num_parts; p++) parts[p + 1] = parts[p] + chunk + (p < extra);
}

dt_status dt__pipe_partition_balanced(const int64_t *weights, int n, int num_parts, int *parts) {
    if (n <= num_parts) {
        dt__pipe_partition_uniform(n, num_parts, parts);
        return DT_OK;
    }
    const int m = num_parts;
    const size_t cols = (size_t)m + 1, cells = ((size_t)n + 1) * cols;
    /* state (i, j): the first i weights cut into j non-empty parts. hi / lo are the largest and
     * smallest part sums of the split kept for the state, cut the start of its last part. */
    int64_t *prefix = malloc(((size_t)n + 1) * sizeof *prefix);
    int64_t *hi = malloc(cells * sizeof *hi);
    int64_t *lo = malloc(cells * sizeof *lo);
    int *cut = malloc(cells * sizeof *cut);
    if (!prefix || !hi || !lo || !cut) {
        free(prefix);
        free(hi);
        free(lo);
        free(cut);
        return dt_error(DT_ERR_OOM,
                        "pipeline partition: out of memory balancing %d layers over "
                        "%d stages",
                        n, m);
    }
    prefix[0] = 0;
    for (int i = 0; i < n; i++) prefix[i + 1] = prefix[i] + weights[i];
#define AT(a, i, j) (a)[(size_t)(i)*cols + (size_t)(j)]
    for (int i = 1; i <= n; i++) {
        int jmax = i < m ? i : m;
        for (int j = 1; j <= jmax; j++) {
            /* the previous j - 1 parts need at least j - 1 weights (none when j == 1) */
            int k0 = j == 1 ? 0 : j - 1, k1 = j == 1 ? 0 : i - 1;
            int64_t best = 0;
            for (int k = k0; k <= k1; k++) {
                int64_t seg = prefix[i] - prefix[k];
                int64_t h = seg, l = seg;
                if (j > 1) {
                    if (AT(hi, k, j - 1) > h) h = AT(hi, k, j - 1);
                    if (AT(lo, k, j - 1) < l) l = AT(lo, k, j - 1);
                }
                /* "<=": of equally spread splits the one with the latest cut wins */
                if (k == k0 || h - l <= best) {
                    best = h - l;
                    AT(hi, i, j) = h;
                    AT(lo, i, j) = l;
                    AT(cut, i, j) = k;
                }
            }
        }
    }
    parts[m] = n;
    for (int j = m; j >= 1; j--) parts[j - 1] = AT(cut, parts[j], j);
#undef AT
    free(prefix);
    free(hi);
    free(lo);
    free(cut);
    return DT_OK;
}

static const char valid_methods[] = "uniform, parameters, type:REGEX";

static dt_status by_type(const char *re_src, int n, const char *const *types, int num_stages,
                         int *parts) {
    if (!*re_src)
        return dt_error(DT_ERR_CONFIG, "pipeline partition: \"type:\" needs a regex; hint: name "
                                       "the layer type to balance, e.g. type:transformer");
    regex_t re;
    int rc = regcomp(&re, re_src, REG_EXTENDED | REG_ICASE | REG_NOSUB);
    if (rc) {
        char why[128];
        regerror(rc, &re, why, sizeof why);
        return dt_error(DT_ERR_CONFIG,
                        "pipeline partition: bad regex \"%s\" in type:%s: %s; hint: use a POSIX "
                        "extended regular expression",
                        re_src, re_src, why);
    }
    int64_t *w = malloc((size_t)(n > 0 ? n : 1) * sizeof *w);
    if (!w) {
        regfree(&re);
        return dt_error(DT_ERR_OOM, "pipeline partition: out of memory");
    }
    int hits = 0;
    for (int i = 0; i < n; i++) {
        w[i] = types[i] && regexec(&re, types[i], 0, NULL, 0) == 0;
        hits += (int)w[i];
    }
    regfree(&re);
    dt_status st = DT_OK;
    if (!hits)
        st = dt_error(DT_ERR_CONFIG,
                      "pipeline partition: type:%s matches none of the %d layers' type names; "
                      "hint: check the regex against the layer types (matching ignores case)",
                      re_src, n);
    else
        st = dt__pipe_partition_balanced(w, n, num_stages, parts);
    free(w);
    return st;
}

dt_status dt__pipe_partition(const char *method, int n_layers, const int64_t *params,
                             const char *const *types, int num_stages, int *parts) {
    if (!parts) return dt_error(DT_ERR_INVALID, "dt__pipe_partition: parts is NULL");
    if (num_stages < 1)
        return dt_error(DT_ERR_INVALID, "pipeline partition: num_stages must be >= 1 (got %d)",
                        num_stages);
    if (n_layers < 0)
        return dt_error(DT_ERR_INVALID, "pipeline partition: negative layer count %d", n_layers);
    if (!method || !*method)
        return dt_error(DT_ERR_CONFIG,
                        "pipeline partition: no partition method; hint: use one "
                        "of %s",
                        valid_methods);
    if (num_stages > n_layers)
        return dt_error(DT_ERR_CONFIG,
                        "pipeline partition: %d stages but only %d layers; hint: every stage "
                        "needs at least one layer, so use at most %d stages",
                        num_stages, n_layers, n_layers);

    if (strcasecmp(method, "uniform") == 0) {
        dt__pipe_partition_uniform(n_layers, num_stages, parts);
        return DT_OK;
    }
    if (strcasecmp(method, "parameters") == 0) {
        if (!params)
            return dt_error(DT_ERR_INVALID, "pipeline partition: method \"parameters\" needs "
                                            "the layers' parameter counts");
        for (int i = 0; i < n_layers; i++)
            if (params[i] < 0)
                return dt_error(DT_ERR_INVALID,
                                "pipeline partition: layer %d has a negative parameter count "
                                "(%lld)",
                                i, (long long)params[i]);
        return dt__pipe_partition_balanced(params, n_layers, num_stages, parts);
    }
    if (strncasecmp(method, "type:", 5) == 0) {
        if (!types)
            return dt_error(DT_ERR_INVALID,
                            "pipeline partition: method \"%s\" needs the "
                            "layers' type names",
                            method);
        return by_type(method + 5, n_layers, types, num_stages, parts);
    }
    return dt_error(DT_ERR_CONFIG,
                    "pipeline partition: unknown partition method \"%s\"; hint: valid methods "
                    "are %s",
                    method, valid_methods);
}
