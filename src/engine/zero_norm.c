/*
 * zero_norm.c — the squared gradient norm over the data-parallel group (and the pipeline
 * stages): fixed chunks summed in order, or in the deterministic mode one tree of additions
 * that is the same at every stage and world size.
 */
#include "engine/zero_impl.h"

#include <stdlib.h>

/* ---- the mode's gradient norm: one tree of additions for every partitioning ----
 * Leaves are 16 consecutive elements of the flat buffer (elements past n and in norm_skip
 * ranges count as zero), their squares added in order (a float's square is exact in double).
 * Nodes add their two children, up a binary tree over 2^T leaves whose shape depends on n
 * only. Blocks start at multiples of 16, so each rank computes the largest whole subtrees of
 * its leaf range; the subtrees' roots of every rank are gathered and combined in the same tree
 * on every rank: the same additions at every stage and world size. */

#define DET_LEAF 16
#define DET_PAR 12        /* subtrees of 2^12 leaves are the parallel unit */
#define DET_MAX_NODES 128 /* a leaf range splits into at most 2 * 62 whole subtrees */

typedef struct det_norm {
    const dt_engine *e;
    const float *g;
    int64_t base, L; /* g[0] is flat element base; L leaves hold elements [0, n) */
} det_norm;

typedef struct det_node {
    double v;
    int64_t level, index; /* leaves [index << level, (index + 1) << level); level -1: unused */
} det_node;

static bool det_skipped(const dt_engine *e, int64_t j) {
    for (int k = 0; k < e->n_norm_skip; k++)
        if (j >= e->norm_skip[k][0] && j < e->norm_skip[k][1]) return true;
    return false;
}

static double det_leaf(const det_norm *d, int64_t i) {
    int64_t a = i * DET_LEAF, b = min64(a + DET_LEAF, d->e->n);
    double s = 0;
    for (int64_t j = a; j < b; j++) {
        if (d->e->n_norm_skip && det_skipped(d->e, j)) continue;
        double x = d->g[j - d->base];
        s += x * x;
    }
    return s;
}

static double det_subtree(const det_norm *d, int64_t level, int64_t index) {
    if ((index << level) >= d->L) return 0; /* all zeros: what the additions would give */
    if (level == 0) return det_leaf(d, index);
    int64_t k = level > DET_PAR ? (int64_t)1 << (level - DET_PAR) : 0;
    double *v = k ? malloc((size_t)k * sizeof *v) : NULL;
    if (!v) /* small, or no memory for the parallel split: the same additions in recursion */
        return det_subtree(d, level - 1, 2 * index) + det_subtree(d, level - 1, 2 * index + 1);
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t j = 0; j < k; j++)
        v[j] = det_subtree(d, DET_PAR, (index << (level - DET_PAR)) + j);
    for (int64_t w = k; w > 1; w /= 2)
        for (int64_t j = 0; j < w / 2; j++) v[j] = v[2 * j] + v[2 * j + 1];
    double r = v[0];
    free(v);
    return r;
}

/* Combine the subtree roots `nodes` (in leaf order, tiling [0, 2^T)) into the root. */
static dt_status det_combine(det_node *nodes, int count, int64_t T, double *out) {
    int k = 0; /* nodes[0..k) is the stack */
    for (int i = 0; i < count; i++) {
        if (nodes[i].level < 0) continue;
        nodes[k++] = nodes[i];
        while (k >= 2 && nodes[k - 2].level == nodes[k - 1].level && nodes[k - 2].index % 2 == 0 &&
               nodes[k - 1].index == nodes[k - 2].index + 1) {
            nodes[k - 2].v += nodes[k - 1].v;
            nodes[k - 2].level++;
            nodes[k - 2].index /= 2;
            k--;
        }
    }
    if (k != 1 || nodes[0].level != T)
        return dt_error(DT_ERR_STATE,
                        "engine: gradient norm: the ranks' subtrees do not "
                        "tile the tree (%d left)",
                        k);
    *out = nodes[0].v;
    return DT_OK;
}

static dt_status det_sumsq(dt_engine *e, const float *g, double *out) {
    det_norm d = {e, g, e->stage == 0 ? 0 : e->lo, (e->n + DET_LEAF - 1) / DET_LEAF};
    int64_t T = 0;
    while (((int64_t)1 << T) < d.L) T++;
    int64_t top = (int64_t)1 << T, la = 0, lb = top;
    bool split = e->stage >= 1 && e->W > 1;
    if (split) {
        la = min64(e->lo / DET_LEAF, top);
        lb = e->rank == e->W - 1 ? top : min64((e->lo + e->block) / DET_LEAF, top);
    }
    det_node mine[DET_MAX_NODES];
    int cnt = 0;
    for (int64_t i = la; i < lb; cnt++) { /* the largest whole subtrees, left to right */
        int64_t l = 0;
        while (l < T && i % ((int64_t)2 << l) == 0 && i + ((int64_t)2 << l) <= lb) l++;
        mine[cnt] = (det_node){det_subtree(&d, l, i >> l), l, i >> l};
        i += (int64_t)1 << l;
    }
    for (int c = cnt; c < DET_MAX_NODES; c++) mine[c] = (det_node){0, -1, 0};
    if (!split) return det_combine(mine, cnt, T, out);
    det_node *all = malloc((size_t)e->W * sizeof mine);
    if (!all) return dt_error(DT_ERR_OOM, "engine: gradient norm: out of memory");
    dt_status st = dt_comm_allgather(e->comm, mine, all, sizeof mine);
    if (st == DT_OK) st = det_combine(all, e->W * DET_MAX_NODES, T, out);
    free(all);
    return st;
}

dt_status dt__zero_global_sumsq(dt_engine *e, const float *g, int64_t gn, double *out) {
    if (e->cfg.deterministic) { /* g holds [0, n) (stage 0) or the block (stage >= 1) */
        double s = 0;
        dt_status st = det_sumsq(e, g, &s);
        /* pipeline: the stages' sums, added in stage order on every stage */
        if (st == DT_OK && e->mp_comm && dt_comm_size(e->mp_comm) > 1)
            st = dt_comm_allreduce(e->mp_comm, &s, 1, DT_COMM_DTYPE_F64, DT_REDUCE_OP_SUM);
        *out = s;
        return st;
    }
    /* fixed chunks of 4096 summed in order: the result does not depend on the thread count */
    const int64_t CH = 4096;
    int64_t nch = (gn + CH - 1) / CH;
    double *part = malloc((size_t)(nch > 0 ? nch : 1) * sizeof(double));
    if (!part) return dt_error(DT_ERR_OOM, "engine: gradient norm: out of memory");
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < nch; c++) {
        double s = 0;
        for (int64_t i = c * CH; i < min64(gn, (c + 1) * CH); i++) s += (double)g[i] * g[i];
        part[c] = s;
    }
    double s = 0;
    for (int64_t c = 0; c < nch; c++) s += part[c];
    free(part);
    /* ranges counted by another stage (pipeline tied copies) */
    int64_t base = e->stage == 0 ? 0 : e->lo;
    for (int k = 0; k < e->n_norm_skip; k++) {
        int64_t a = max64(e->norm_skip[k][0], base), b = min64(e->norm_skip[k][1], base + gn);
        for (int64_t i = a; i < b; i++) s -= (double)g[i - base] * g[i - base];
    }
    if (e->stage >= 1 && e->W > 1) {
        /* every rank's partial sum, added in rank order on every rank */
        double *all = malloc((size_t)e->W * sizeof(double));
        if (!all) return dt_error(DT_ERR_OOM, "engine: gradient norm: out of memory");
        dt_status st = dt_comm_allgather(e->comm, &s, all, sizeof s);
        if (st != DT_OK) {
            free(all);
            return st;
        }
        s = 0;
        for (int j = 0; j < e->W; j++) s += all[j];
        free(all);
    }
    /* pipeline: the stages' sums, added in stage order on every stage */
    if (e->mp_comm && dt_comm_size(e->mp_comm) > 1) {
        dt_status st = dt_comm_allreduce(e->mp_comm, &s, 1, DT_COMM_DTYPE_F64, DT_REDUCE_OP_SUM);
        if (st != DT_OK) return st;
    }
    *out = s;
    return DT_OK;
}
