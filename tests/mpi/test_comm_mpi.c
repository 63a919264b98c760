/* Multi-process tests of dt_comm on the mpi backend (ctest runs them under mpirun -np 2 and
 * -np 4): every collective against values computed here from rank-dependent inputs, bit for
 * bit (the reductions add ranks in order 0..W-1), identical AVG bits on every rank, the
 * chunked paths (tiny chunk size), point-to-point incl. size mismatches, object collectives
 * with variable and 0 lengths, 2x2 process grids, the agreement check turning mismatches into
 * errors on every rank, scratch accounting, and the finalize rules. */
#define _GNU_SOURCE /* dl_iterate_phdr in mpi_test.h */
#include "dtrain/dist.h"
#include "dist/comm_impl.h"
#include "mpi_test.h"
#include "base/base_impl.h"

#include <stdlib.h>
#include <string.h>

static int W, R;

static float ref_f32(float acc, float v, dt_reduce_op op) {
    switch (op) {
    case DT_REDUCE_OP_MAX:
        return v > acc ? v : acc;
    case DT_REDUCE_OP_MIN:
        return v < acc ? v : acc;
    default:
        return acc + v;
    }
}

static double ref_f64(double acc, double v, dt_reduce_op op) {
    switch (op) {
    case DT_REDUCE_OP_MAX:
        return v > acc ? v : acc;
    case DT_REDUCE_OP_MIN:
        return v < acc ? v : acc;
    default:
        return acc + v;
    }
}

static int64_t val_i64(int r, int64_t i) {
    return (int64_t)(r + 1) * (i + 1) * (i % 3 == 0 ? -1 : 1) + (int64_t)r * 1000003;
}

/* Every rank holds the same bytes in buf (n bytes)? */
static bool same_on_all_ranks(dt_comm *c, const void *buf, size_t n) {
    int P = dt_comm_size(c);
    char *all = malloc((size_t)P * n);
    bool ok = all && dt_comm_allgather(c, buf, all, n) == DT_OK;
    for (int r = 1; ok && r < P; r++) ok = memcmp(all, all + (size_t)r * n, n) == 0;
    free(all);
    return ok;
}

static void check_allreduce_f32(dt_comm *c, int64_t n) {
    float *buf = malloc((size_t)n * sizeof(float)), *exp = malloc((size_t)n * sizeof(float));
    for (int op = 0; op < DT_REDUCE_OP_COUNT; op++) {
        for (int64_t i = 0; i < n; i++) {
            buf[i] = mt_valf(R, i);
            float acc = mt_valf(0, i);
            for (int r = 1; r < W; r++) acc = ref_f32(acc, mt_valf(r, i), op);
            exp[i] = op == DT_REDUCE_OP_AVG ? acc / (float)W : acc;
        }
        CHECK(dt_comm_allreduce(c, buf, n, DT_COMM_DTYPE_F32, op) == DT_OK);
        CHECK_MSG(memcmp(buf, exp, (size_t)n * sizeof(float)) == 0, "f32 op %d n %lld", op,
                  (long long)n);
        CHECK(same_on_all_ranks(c, buf, (size_t)n * sizeof(float)));
    }
    free(buf);
    free(exp);
}

static void check_allreduce_f64_i64(dt_comm *c, int64_t n) {
    double *d = malloc((size_t)n * sizeof(double)), *de = malloc((size_t)n * sizeof(double));
    int64_t *q = malloc((size_t)n * sizeof(int64_t)), *qe = malloc((size_t)n * sizeof(int64_t));
    for (int op = 0; op < DT_REDUCE_OP_COUNT; op++) {
        for (int64_t i = 0; i < n; i++) {
            d[i] = mt_vald(R, i);
            q[i] = val_i64(R, i);
            double acc = mt_vald(0, i);
            int64_t qa = val_i64(0, i);
            for (int r = 1; r < W; r++) {
                acc = ref_f64(acc, mt_vald(r, i), op);
                int64_t v = val_i64(r, i);
                qa = op == DT_REDUCE_OP_MAX   ? (v > qa ? v : qa)
                     : op == DT_REDUCE_OP_MIN ? (v < qa ? v : qa)
                                              : qa + v;
            }
            de[i] = op == DT_REDUCE_OP_AVG ? acc / (double)W : acc;
            qe[i] = op == DT_REDUCE_OP_AVG ? qa / W : qa;
        }
        CHECK(dt_comm_allreduce(c, d, n, DT_COMM_DTYPE_F64, op) == DT_OK);
        CHECK_MSG(memcmp(d, de, (size_t)n * sizeof(double)) == 0, "f64 op %d", op);
        CHECK(dt_comm_allreduce(c, q, n, DT_COMM_DTYPE_I64, op) == DT_OK);
        CHECK_MSG(memcmp(q, qe, (size_t)n * sizeof(int64_t)) == 0, "i64 op %d", op);
    }
    free(d);
    free(de);
    free(q);
    free(qe);
}

static void test_allreduce(dt_comm *c) {
    int64_t counts[] = {1, 3, 7, 1000};
    for (int k = 0; k < 4; k++) {
        check_allreduce_f32(c, counts[k]);
        check_allreduce_f64_i64(c, counts[k]);
    }
    CHECK(dt_comm_allreduce(c, NULL, 0, DT_COMM_DTYPE_F32, DT_REDUCE_OP_SUM) == DT_OK);
    /* chunked: segments of 16 floats / 8 doubles, slices of 2..8 elements */
    dt__comm_set_chunk_bytes(c, 64);
    check_allreduce_f32(c, 1000);
    check_allreduce_f32(c, 37);
    check_allreduce_f64_i64(c, 101);
    dt__comm_set_chunk_bytes(c, DT__COMM_CHUNK_BYTES);

    /* the test data is order-sensitive: summing ranks in reverse gives other bits somewhere
     * (so the bit checks above do pin the order) */
    if (W >= 3) {
        int differs = 0;
        for (int64_t i = 0; i < 1000; i++) {
            float fwd = mt_valf(0, i), bwd = mt_valf(W - 1, i);
            for (int r = 1; r < W; r++) fwd += mt_valf(r, i);
            for (int r = W - 2; r >= 0; r--) bwd += mt_valf(r, i);
            differs += fwd != bwd;
        }
        CHECK(differs > 0);
    }

    /* NaN on the last rank wins for MAX/MIN/SUM on every rank */
    for (int op = 0; op < DT_REDUCE_OP_COUNT; op++) {
        float x[3] = {1.0f + (float)R, -(float)R, (R == W - 1) ? NAN : 2.0f};
        CHECK(dt_comm_allreduce(c, x, 3, DT_COMM_DTYPE_F32, op) == DT_OK);
        CHECK(isnan(x[2]) && !isnan(x[0]));
    }

    /* AVG of a larger buffer: identical bits on every rank */
    int64_t n = 4099;
    float *g = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) g[i] = mt_valf(R, i) * 1e-3f;
    CHECK(dt_comm_allreduce(c, g, n, DT_COMM_DTYPE_F32, DT_REDUCE_OP_AVG) == DT_OK);
    uint32_t crc = dt_crc32c(0, g, (size_t)n * sizeof(float));
    CHECK(same_on_all_ranks(c, &crc, sizeof crc));
    CHECK(same_on_all_ranks(c, g, (size_t)n * sizeof(float)));
    free(g);
}

static void check_reduce_scatter(dt_comm *c, int64_t block) {
    int64_t n = (int64_t)W * block;
    float *send = malloc((size_t)n * sizeof(float)), *recv = malloc((size_t)block * 4);
    float *full = malloc((size_t)n * sizeof(float));
    for (int op = 0; op < DT_REDUCE_OP_COUNT; op++) {
        for (int64_t i = 0; i < n; i++) send[i] = full[i] = mt_valf(R, i);
        CHECK(dt_comm_reduce_scatter(c, send, recv, block, op) == DT_OK);
        int bad = 0;
        for (int64_t k = 0; k < block; k++) {
            int64_t i = (int64_t)R * block + k;
            float acc = mt_valf(0, i);
            for (int r = 1; r < W; r++) acc = ref_f32(acc, mt_valf(r, i), op);
            if (op == DT_REDUCE_OP_AVG) acc = acc / (float)W;
            bad += memcmp(&acc, &recv[k], 4) != 0;
        }
        CHECK_MSG(bad == 0, "reduce_scatter op %d block %lld: %d wrong", op, (long long)block, bad);
        /* the same bits as the matching block of an allreduce */
        CHECK(dt_comm_allreduce(c, full, n, DT_COMM_DTYPE_F32, op) == DT_OK);
        CHECK(memcmp(full + (size_t)R * (size_t)block, recv, (size_t)block * 4) == 0);
        /* in place: recv = send + rank*block */
        CHECK(dt_comm_reduce_scatter(c, send, send + (size_t)R * (size_t)block, block, op) ==
              DT_OK);
        CHECK(memcmp(send + (size_t)R * (size_t)block, recv, (size_t)block * 4) == 0);
    }
    free(send);
    free(recv);
    free(full);
}

static void test_reduce_scatter(dt_comm *c) {
    check_reduce_scatter(c, 1);
    check_reduce_scatter(c, 5);
    check_reduce_scatter(c, 300);
    dt__comm_set_chunk_bytes(c, 64); /* rounds of 16/W elements per block */
    check_reduce_scatter(c, 5);
    check_reduce_scatter(c, 77);
    dt__comm_set_chunk_bytes(c, DT__COMM_CHUNK_BYTES);
    CHECK(dt_comm_reduce_scatter(c, NULL, NULL, 0, DT_REDUCE_OP_SUM) == DT_OK);
}

/* Uneven pieces: counts[j] = base + j*step (some zero), compared with an allreduce. */
static void check_reduce_scatterv(dt_comm *c, int64_t base, int64_t step) {
    int64_t *counts = malloc((size_t)W * sizeof *counts), n = 0, off = 0;
    for (int j = 0; j < W; j++) {
        counts[j] = base + j * step > 0 ? base + j * step : 0;
        if (j < R) off += counts[j];
        n += counts[j];
    }
    float *send = malloc((size_t)(n + 1) * 4), *full = malloc((size_t)(n + 1) * 4);
    float *recv = malloc((size_t)(counts[R] + 1) * 4);
    for (int op = 0; op < DT_REDUCE_OP_COUNT; op++) {
        for (int64_t i = 0; i < n; i++) send[i] = full[i] = mt_valf(R, i);
        CHECK(dt_comm_reduce_scatterv(c, send, recv, counts, op) == DT_OK);
        CHECK(dt_comm_allreduce(c, full, n, DT_COMM_DTYPE_F32, op) == DT_OK);
        CHECK_MSG(memcmp(full + off, recv, (size_t)counts[R] * 4) == 0,
                  "reduce_scatterv op %d base %lld step %lld", op, (long long)base, (long long)step);
        /* in place into this rank's piece */
        CHECK(dt_comm_reduce_scatterv(c, send, send + off, counts, op) == DT_OK);
        CHECK(memcmp(send + off, recv, (size_t)counts[R] * 4) == 0);
    }
    /* allgatherv of each rank's piece rebuilds the allreduced buffer */
    size_t *bytes = malloc((size_t)W * sizeof *bytes);
    for (int j = 0; j < W; j++) bytes[j] = (size_t)counts[j] * 4;
    float *all = malloc((size_t)(n + 1) * 4);
    CHECK(dt_comm_allgatherv(c, recv, all, bytes) == DT_OK);
    CHECK(memcmp(all, full, (size_t)n * 4) == 0);
    memset(all, 0, (size_t)n * 4);
    memcpy(all + off, recv, (size_t)counts[R] * 4);
    CHECK(dt_comm_allgatherv(c, all + off, all, bytes) == DT_OK); /* in place */
    CHECK(memcmp(all, full, (size_t)n * 4) == 0);
    free(all);
    free(bytes);
    free(counts);
    free(send);
    free(full);
    free(recv);
}

static void test_reduce_scatterv(dt_comm *c) {
    check_reduce_scatterv(c, 3, 2);
    check_reduce_scatterv(c, 0, 5); /* rank 0 gets nothing */
    check_reduce_scatterv(c, 100, -40); /* the last ranks get nothing */
    dt__comm_set_chunk_bytes(c, 64);
    check_reduce_scatterv(c, 9, 13);
    dt__comm_set_chunk_bytes(c, DT__COMM_CHUNK_BYTES);
    /* a rank with a different layout: every rank gets an error, none hangs */
    int64_t counts[64] = {0};
    for (int j = 0; j < W; j++) counts[j] = 2 + (j == 0 && R == 1);
    float buf[256] = {0}, out[8];
    CHECK(dt_comm_reduce_scatterv(c, buf, out, counts, DT_REDUCE_OP_SUM) == DT_ERR_COMM);
}

static void check_allgather(dt_comm *c, size_t bytes) {
    unsigned char *send = malloc(bytes), *recv = malloc((size_t)W * bytes);
    for (size_t k = 0; k < bytes; k++) send[k] = (unsigned char)(R * 31 + k * 7);
    memset(recv, 0xee, (size_t)W * bytes);
    CHECK(dt_comm_allgather(c, send, recv, bytes) == DT_OK);
    int bad = 0;
    for (int r = 0; r < W; r++)
        for (size_t k = 0; k < bytes; k++)
            bad += recv[(size_t)r * bytes + k] != (unsigned char)(r * 31 + k * 7);
    CHECK_MSG(bad == 0, "allgather %zu bytes: %d wrong", bytes, bad);
    /* in place */
    memset(recv, 0, (size_t)W * bytes);
    memcpy(recv + (size_t)R * bytes, send, bytes);
    CHECK(dt_comm_allgather(c, recv + (size_t)R * bytes, recv, bytes) == DT_OK);
    bad = 0;
    for (int r = 0; r < W; r++)
        for (size_t k = 0; k < bytes; k++)
            bad += recv[(size_t)r * bytes + k] != (unsigned char)(r * 31 + k * 7);
    CHECK_MSG(bad == 0, "allgather in place %zu bytes: %d wrong", bytes, bad);
    free(send);
    free(recv);
}

static void test_allgather_broadcast(dt_comm *c) {
    check_allgather(c, 1);
    check_allgather(c, 13);
    CHECK(dt_comm_allgather(c, NULL, NULL, 0) == DT_OK);
    dt__comm_set_chunk_bytes(c, 16);
    check_allgather(c, 50);
    dt__comm_set_chunk_bytes(c, DT__COMM_CHUNK_BYTES);

    for (int pass = 0; pass < 2; pass++) {
        if (pass) dt__comm_set_chunk_bytes(c, 16);
        int root = W - 1;
        unsigned char buf[100];
        for (int k = 0; k < 100; k++) buf[k] = R == root ? (unsigned char)(k * 3 + 1) : 0;
        CHECK(dt_comm_broadcast(c, buf, sizeof buf, root) == DT_OK);
        int bad = 0;
        for (int k = 0; k < 100; k++) bad += buf[k] != (unsigned char)(k * 3 + 1);
        CHECK(bad == 0);
        double v = R == 0 ? 3.25 : -1;
        CHECK(dt_comm_broadcast(c, &v, sizeof v, 0) == DT_OK && v == 3.25);
    }
    dt__comm_set_chunk_bytes(c, DT__COMM_CHUNK_BYTES);
    CHECK(dt_comm_broadcast(c, NULL, 0, 0) == DT_OK);
    CHECK(dt_comm_barrier(c) == DT_OK);
}

static void fill(unsigned char *p, size_t n, int seed) {
    for (size_t k = 0; k < n; k++) p[k] = (unsigned char)(seed * 13 + k);
}

static bool filled(const unsigned char *p, size_t n, int seed) {
    for (size_t k = 0; k < n; k++)
        if (p[k] != (unsigned char)(seed * 13 + k)) return false;
    return true;
}

/* Ring: rank r sends to r+1 and receives from r-1 (even ranks send first, so blocking sends
 * never wait on each other in a cycle). Message sizes depend on the sender. */
static void ring(dt_comm *c, size_t base, int tag) {
    int next = (R + 1) % W, prev = (R + W - 1) % W;
    size_t ns = base + (size_t)R, nr = base + (size_t)prev;
    unsigned char *s = malloc(ns + 1), *r = malloc(nr + 1);
    fill(s, ns, R);
    dt_status st1, st2;
    if (R % 2 == 0) {
        st1 = dt_comm_send(c, s, ns, next, tag);
        st2 = dt_comm_recv(c, r, nr, prev, tag);
    } else {
        st2 = dt_comm_recv(c, r, nr, prev, tag);
        st1 = dt_comm_send(c, s, ns, next, tag);
    }
    CHECK(st1 == DT_OK && st2 == DT_OK);
    CHECK_MSG(filled(r, nr, prev), "ring message of %zu bytes from rank %d", nr, prev);
    free(s);
    free(r);
}

static void test_send_recv(dt_comm *c) {
    ring(c, 10, 3);
    ring(c, 0, 4); /* rank 0 sends an empty message */
    dt__comm_set_chunk_bytes(c, 64);
    ring(c, 300, 5);
    dt__comm_set_chunk_bytes(c, DT__COMM_CHUNK_BYTES);

    /* to oneself: buffered */
    int x = 100 + R, y = 0;
    CHECK(dt_comm_send(c, &x, sizeof x, R, 8) == DT_OK);
    CHECK(dt_comm_recv(c, &y, sizeof y, R, 8) == DT_OK && y == 100 + R);

    /* size mismatches between ranks 0 and 1 */
    char msg[20] = "0123456789abcdefghi";
    if (R == 0) {
        CHECK(dt_comm_send(c, msg, 10, 1, 9) == DT_OK);
        CHECK(dt_comm_send(c, msg, 20, 1, 10) == DT_OK);
    } else if (R == 1) {
        char got[20];
        CHECK(dt_comm_recv(c, got, 20, 0, 9) == DT_ERR_COMM); /* shorter than expected */
        CHECK(strstr(dt_last_error(), "size mismatch") != NULL);
        CHECK(dt_comm_recv(c, got, 10, 0, 10) == DT_ERR_COMM); /* longer than the buffer */
        CHECK(strstr(dt_last_error(), "size mismatch") != NULL);
    }
    CHECK(dt_comm_send(c, &x, sizeof x, W, 0) == DT_ERR_INVALID);
    CHECK(dt_comm_recv(c, &x, sizeof x, 0, DT_COMM_TAG_MAX + 1) == DT_ERR_INVALID);
    CHECK(dt_comm_barrier(c) == DT_OK);
}

static void check_objects(dt_comm *c, size_t scale, size_t extra) {
    size_t len = scale * (size_t)R + (R ? extra : 0); /* rank 0 sends nothing */
    unsigned char *mine = malloc(len + 1);
    fill(mine, len, R);
    int root = W - 1;
    dt_bytes_list *l = (dt_bytes_list *)1;
    CHECK(dt_comm_gather_bytes(c, len ? mine : NULL, len, root, &l) == DT_OK);
    if (R == root) {
        CHECK(l && l->count == W);
        for (int r = 0; l && r < W; r++) {
            size_t lr = scale * (size_t)r + (r ? extra : 0);
            CHECK(l->items[r].len == lr && filled(l->items[r].data, lr, r));
            CHECK(l->items[r].data && ((uintptr_t)l->items[r].data & 15) == 0);
        }
    } else {
        CHECK(l == NULL);
    }
    dt_bytes_list_free(l);
    CHECK(dt_comm_allgather_bytes(c, mine, len, &l) == DT_OK);
    CHECK(l && l->count == W);
    for (int r = 0; l && r < W; r++) {
        size_t lr = scale * (size_t)r + (r ? extra : 0);
        CHECK_MSG(l->items[r].len == lr && filled(l->items[r].data, lr, r), "rank %d's item", r);
    }
    dt_bytes_list_free(l);
    dt_bytes b = {0};
    CHECK(dt_comm_broadcast_bytes(c, mine, len, 1, &b) == DT_OK); /* root 1 */
    size_t l1 = scale + extra;
    CHECK(b.len == l1 && filled(b.data, l1, 1));
    dt_bytes_free(&b);
    CHECK(dt_comm_broadcast_bytes(c, mine, len, 0, &b) == DT_OK); /* rank 0: 0 bytes */
    CHECK(b.len == 0 && b.data != NULL);
    dt_bytes_free(&b);
    free(mine);
}

/* Every rank sends a large message to both neighbours before receiving (with blocking sends
 * above the eager limit this would deadlock), in chunks too; then waits. */
static void test_isend(dt_comm *c) {
    for (int pass = 0; pass < 2; pass++) {
        if (pass) dt__comm_set_chunk_bytes(c, 4096);
        size_t n = (size_t)1 << 20;
        int right = (R + 1) % W, left = (R + W - 1) % W;
        unsigned char *out = malloc(n), *in_l = malloc(n), *in_r = malloc(n);
        fill(out, n, R);
        dt_comm_req *a = NULL, *b = NULL;
        CHECK(dt_comm_isend(c, out, n, right, 7, &a) == DT_OK && a);
        CHECK(dt_comm_isend(c, out, n, left, 8, &b) == DT_OK && b);
        CHECK(dt_comm_recv(c, in_l, n, left, 7) == DT_OK);
        CHECK(dt_comm_recv(c, in_r, n, right, 8) == DT_OK);
        CHECK(dt_comm_wait(c, a) == DT_OK && dt_comm_wait(c, b) == DT_OK);
        unsigned char *want = malloc(n);
        fill(want, n, left);
        CHECK(memcmp(in_l, want, n) == 0);
        fill(want, n, right);
        CHECK(memcmp(in_r, want, n) == 0);
        free(want);
        free(out);
        free(in_l);
        free(in_r);
    }
    dt__comm_set_chunk_bytes(c, DT__COMM_CHUNK_BYTES);
    /* to self: buffered at once */
    int v = 42, got = 0;
    dt_comm_req *r = NULL;
    CHECK(dt_comm_isend(c, &v, sizeof v, R, 9, &r) == DT_OK);
    CHECK(dt_comm_recv(c, &got, sizeof got, R, 9) == DT_OK && got == 42);
    CHECK(dt_comm_wait(c, r) == DT_OK);
    CHECK(dt_comm_wait(c, NULL) == DT_OK);
    CHECK(dt_comm_isend(c, &v, sizeof v, W, 9, &r) == DT_ERR_INVALID && r == NULL);
    CHECK(dt_comm_isend(c, &v, sizeof v, 0, 9, NULL) == DT_ERR_INVALID);
}

static void test_objects(dt_comm *c) {
    check_objects(c, 3, 0);
    check_objects(c, 0, 0);          /* everyone 0 bytes */
    dt__comm_set_chunk_bytes(c, 16); /* rounds of 16/W bytes per rank */
    check_objects(c, 20, 3);
    dt__comm_set_chunk_bytes(c, DT__COMM_CHUNK_BYTES);
    dt_bytes_list *l;
    CHECK(dt_comm_gather_bytes(c, NULL, 0, W, &l) == DT_ERR_INVALID); /* every rank: bad root */
}

static void test_split(dt_comm *c) {
    /* a rows x 2 grid: 4 ranks are 2 x 2 */
    int rows = W / 2, row = R / 2, col = R % 2;
    dt_comm *rc = NULL, *cc = NULL, *rev = NULL, *even = (dt_comm *)1;
    CHECK(dt_comm_split(c, row, col, &rc) == DT_OK && rc);
    CHECK(dt_comm_split(c, col, row, &cc) == DT_OK && cc);
    CHECK(dt_comm_size(rc) == 2 && dt_comm_rank(rc) == col);
    CHECK(dt_comm_size(cc) == rows && dt_comm_rank(cc) == row);
    CHECK(strcmp(dt_comm_backend_name(rc), "mpi") == 0);
    int64_t v = R;
    CHECK(dt_comm_allreduce(rc, &v, 1, DT_COMM_DTYPE_I64, DT_REDUCE_OP_SUM) == DT_OK);
    CHECK(v == 4 * row + 1);
    v = R;
    CHECK(dt_comm_allreduce(cc, &v, 1, DT_COMM_DTYPE_I64, DT_REDUCE_OP_SUM) == DT_OK);
    CHECK(v == (int64_t)rows * (rows - 1) + (int64_t)rows * col);
    /* AVG over the column group: identical bits inside the group, equal to the ordered sum */
    float f[64], e[64];
    for (int i = 0; i < 64; i++) {
        f[i] = mt_valf(R, i);
        float acc = mt_valf(col, i);
        for (int k = 1; k < rows; k++) acc = acc + mt_valf(2 * k + col, i);
        e[i] = acc / (float)rows;
    }
    CHECK(dt_comm_allreduce(cc, f, 64, DT_COMM_DTYPE_F32, DT_REDUCE_OP_AVG) == DT_OK);
    CHECK(memcmp(f, e, sizeof f) == 0);
    CHECK(same_on_all_ranks(cc, f, sizeof f));
    /* broadcast inside a row from its second member */
    int w = R == 2 * row + 1 ? 1000 + row : -1;
    CHECK(dt_comm_broadcast(rc, &w, sizeof w, 1) == DT_OK && w == 1000 + row);
    /* a group inside a group */
    dt_comm *single = NULL;
    CHECK(dt_comm_split(rc, col, 0, &single) == DT_OK && dt_comm_size(single) == 1);
    dt_comm_free(single);
    /* keys order the new ranks */
    CHECK(dt_comm_split(c, 0, -R, &rev) == DT_OK && dt_comm_rank(rev) == W - 1 - R);
    /* odd ranks join nothing */
    CHECK(dt_comm_split(c, R % 2 ? DT_COMM_UNDEFINED : 7, R, &even) == DT_OK);
    if (R % 2)
        CHECK(even == NULL);
    else
        CHECK(even && dt_comm_size(even) == (W + 1) / 2 && dt_comm_rank(even) == R / 2);
    dt_comm_free(even);
    dt_comm_free(rev);
    dt_comm_free(cc);
    dt_comm_free(rc);
}

static void test_agreement(dt_comm *c) {
    float buf[12] = {0};
    /* different counts: every rank gets the error, nobody hangs */
    dt_status st = dt_comm_allreduce(c, buf, R == 0 ? 10 : 12, DT_COMM_DTYPE_F32, DT_REDUCE_OP_SUM);
    CHECK(st == DT_ERR_COMM);
    CHECK(strstr(dt_last_error(), "size mismatch") && strstr(dt_last_error(), "element count"));
    st = dt_comm_allreduce(c, buf, 4, R == 0 ? DT_COMM_DTYPE_F64 : DT_COMM_DTYPE_F32,
                           DT_REDUCE_OP_SUM);
    CHECK(st == DT_ERR_COMM && strstr(dt_last_error(), "dtype"));
    st = dt_comm_broadcast(c, buf, 8, R == 0 ? 0 : 1);
    CHECK(st == DT_ERR_COMM && strstr(dt_last_error(), "root"));
    /* different collectives at the same point */
    if (R == 0)
        st = dt_comm_broadcast(c, buf, 8, 0);
    else
        st = dt_comm_allreduce(c, buf, 2, DT_COMM_DTYPE_F32, DT_REDUCE_OP_SUM);
    CHECK(st == DT_ERR_COMM && strstr(dt_last_error(), "different collectives"));
    /* an invalid argument on rank 1 */
    st = dt_comm_allreduce(c, R == 1 ? NULL : buf, 4, DT_COMM_DTYPE_F32, DT_REDUCE_OP_SUM);
    if (R == 1)
        CHECK(st == DT_ERR_INVALID);
    else
        CHECK(st == DT_ERR_COMM && strstr(dt_last_error(), "rank 1"));
    /* the communicator still works */
    int64_t one = 1;
    CHECK(dt_comm_allreduce(c, &one, 1, DT_COMM_DTYPE_I64, DT_REDUCE_OP_SUM) == DT_OK);
    CHECK(one == W);
}

static void test_scratch_accounting(dt_comm *c) {
    dt_comm *s = NULL;
    CHECK(dt_comm_split(c, 0, R, &s) == DT_OK);
    dt_device *dev = dt_device_new("cpu", 0);
    dt_comm_set_device(s, dev);
    float *x = calloc(1000, sizeof(float));
    CHECK(dt_comm_allreduce(s, x, 1000, DT_COMM_DTYPE_F32, DT_REDUCE_OP_SUM) == DT_OK);
    dt_mem_stats ms;
    dt_device_stats(dev, &ms);
    CHECK(ms.current[DT_MEM_COMM] >= 1000 * 4 / W);
    /* a budget too small on rank 0 only: rank 0 reports OOM, the others name it, no hang */
    dt_device_set_budget(dev, R == 0 ? ms.current[DT_MEM_COMM] + 1024 : 0);
    float *big = calloc(100000, sizeof(float));
    dt_status st = dt_comm_allreduce(s, big, 100000, DT_COMM_DTYPE_F32, DT_REDUCE_OP_SUM);
    if (R == 0)
        CHECK(st == DT_ERR_OOM);
    else
        CHECK(st == DT_ERR_COMM && strstr(dt_last_error(), "rank 0"));
    dt_device_set_budget(dev, 0);
    CHECK(dt_comm_allreduce(s, big, 100000, DT_COMM_DTYPE_F32, DT_REDUCE_OP_SUM) == DT_OK);
    dt_comm_free(s);
    dt_device_stats(dev, &ms);
    CHECK(ms.current[DT_MEM_COMM] == 0);
    dt_device_free(dev);
    free(x);
    free(big);
}

int main(void) {
    dt_comm *c = NULL;
    if (!mt_begin(&c)) return 1;
    R = dt_comm_rank(c);
    W = dt_comm_size(c);
    CHECK(strcmp(dt_comm_backend_name(c), "mpi") == 0);
    const char *ws = getenv("OMPI_COMM_WORLD_SIZE"), *wr = getenv("OMPI_COMM_WORLD_RANK");
    CHECK(ws && atoi(ws) == W && wr && atoi(wr) == R);
    CHECK(W >= 2 && W % 2 == 0); /* the grid tests want an even world */

    MT_RUN(test_allreduce, c);
    MT_RUN(test_reduce_scatter, c);
    MT_RUN(test_reduce_scatterv, c);
    MT_RUN(test_allgather_broadcast, c);
    MT_RUN(test_send_recv, c);
    MT_RUN(test_isend, c);
    MT_RUN(test_objects, c);
    MT_RUN(test_split, c);
    MT_RUN(test_agreement, c);
    MT_RUN(test_scratch_accounting, c);

    /* a second init attaches to the same MPI world; MPI ends with the last world */
    dt_comm *c2 = NULL;
    CHECK(dt_comm_init(&c2) == DT_OK && c2 && dt_comm_rank(c2) == R && dt_comm_size(c2) == W);
    dt_comm *child = NULL;
    CHECK(dt_comm_split(c, 0, R, &child) == DT_OK);
    CHECK(dt_comm_finalize(c) == DT_ERR_STATE); /* a group is still alive */
    dt_comm_free(child);
    CHECK(dt_comm_finalize(c) == DT_OK);
    CHECK(dt_comm_barrier(c2) == DT_OK); /* MPI is still up */
    int rc = mt_end(c2);
    if (dt_comm_finalize(c2) != DT_OK) {
        fprintf(stderr, "rank %d: dt_comm_finalize: %s\n", R, dt_last_error());
        rc = 1;
    }
    return rc;
}
