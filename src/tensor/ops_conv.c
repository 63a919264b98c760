/* ops_conv.c — conv2d, max_pool2d and avg_pool2d (NCHW, f32) with forward, backward and FLOP
 * counts. Kernels live in cpu/conv.c.
 *
 * conv2d picks one of three paths by shape:
 *   - Winograd F(2x2, 3x3) for the forward and the input gradient of 3x3 stride-1
 *     convolutions with C, OC >= 4 (the AVX2 and AVX-512 kernels): 16 GEMMs over channels per
 *     chunk of images, 2.25x fewer multiplies than im2col (their weight gradient uses im2col);
 *   - a direct sliding kernel for single-channel stride-1 convolutions (a first layer, where
 *     C*KH*KW is too small for a GEMM to pay off);
 *   - im2col + GEMM otherwise: a chunk's patches form one matrix col (C*KH*KW, nb*OH*OW), so
 *     the GEMMs are wide even for small images, and the weight gradient of a chunk is one GEMM
 *     with K = nb*OH*OW.
 * Work is split into chunks of images whose size depends on the shapes only. Chunks run in
 * parallel (each GEMM then single-threaded inside its OpenMP thread) when there are enough of
 * them, otherwise one after the other with threaded GEMMs. Weight / bias gradients are summed
 * per group of consecutive chunks and the groups folded in order, so results do not depend on
 * the thread count. Scratch (patch or transform matrices, partial sums) is arena memory of the
 * call, sized per thread, not per batch. */
#include "tensor_impl.h"

#include "cpu/conv_impl.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>

#define PAR_MIN 32768
/* Target columns (images x output positions) of one chunk's patch matrix. */
#define CONV_CHUNK_COLS 512

/* ---- geometry -------------------------------------------------------------------------- */

static void geom_of(const dt_tensor *x, const dt_tensor *w, int64_t stride, int64_t pad,
                    dt__conv_geom *g) {
    g->N = x->shape[0];
    g->C = x->shape[1];
    g->H = x->shape[2];
    g->W = x->shape[3];
    g->OC = w->shape[0];
    g->KH = w->shape[2];
    g->KW = w->shape[3];
    g->stride = stride;
    g->pad = pad;
    g->OH = (g->H + 2 * pad - g->KH) / stride + 1;
    g->OW = (g->W + 2 * pad - g->KW) / stride + 1;
}

static int64_t chunk_images(const dt__conv_geom *g) {
    int64_t ohw = g->OH * g->OW;
    int64_t b = (CONV_CHUNK_COLS + ohw - 1) / ohw;
    if (b > g->N) b = g->N;
    return b < 1 ? 1 : b;
}

/* Run chunks in parallel (true) or one after the other with threaded GEMMs (false). */
static bool chunks_parallel(int64_t nchunk, int64_t flops_per_chunk) {
    int nt = omp_get_max_threads();
    return nt > 1 && nchunk >= nt && flops_per_chunk * nchunk > 4 * PAR_MIN;
}

/* Backward passes gather consecutive chunks into at most CONV_GROUPS groups: a group's partial
 * weight / bias gradients accumulate over its chunks in order, the groups run in parallel and
 * are folded in group order. The grouping depends on the shapes only. Big layers get fewer
 * groups so the partials stay within CONV_PARTIAL_FLOATS. */
#define CONV_GROUPS 8
#define CONV_PARTIAL_FLOATS (4 << 20)

typedef struct groups {
    int64_t n, per; /* groups, chunks per group */
} groups;

static groups make_groups(int64_t nchunk, int64_t partial_floats) {
    groups gr;
    int64_t cap = CONV_PARTIAL_FLOATS / (partial_floats > 0 ? partial_floats : 1);
    if (cap > CONV_GROUPS) cap = CONV_GROUPS;
    if (cap < 1) cap = 1;
    gr.n = nchunk < cap ? nchunk : cap;
    gr.per = (nchunk + gr.n - 1) / gr.n;
    gr.n = (nchunk + gr.per - 1) / gr.per; /* no empty group */
    return gr;
}

static inline int thread_id(void) {
    return omp_in_parallel() ? omp_get_thread_num() : 0;
}

/* ---- conv2d ----------------------------------------------------------------------------
 * iattr: [0]=stride [1]=pad */

static int64_t conv_fwd_flops(const dt_node *n) {
    dt__conv_geom g;
    geom_of(n->in[0], n->in[1], n->iattr[0], n->iattr[1], &g);
    return 2 * g.N * g.OC * g.OH * g.OW * g.C * g.KH * g.KW;
}

/* Backward: one forward's worth for dW, another for dx (only when x wants a gradient). */
static int64_t conv_bwd_flops(const dt_node *n) {
    int64_t f = conv_fwd_flops(n);
    return (dt__wants_grad(n->in[1]) ? f : 0) + (dt__wants_grad(n->in[0]) ? f : 0);
}

static void conv_backward(dt_node *n);
DT_OP(op_conv2d, "conv2d", conv_backward, conv_fwd_flops, conv_bwd_flops);

/* false on OOM (scratch) */
static bool conv_forward_gemm(dt_ctx *ctx, const dt__conv_geom *g, const float *X, const float *Wt,
                              const float *B, float *Y) {
    const int64_t CKK = g->C * g->KH * g->KW, OHW = g->OH * g->OW, CHW = g->C * g->H * g->W;
    const int64_t bc = chunk_images(g), nchunk = (g->N + bc - 1) / bc;
    bool par = chunks_parallel(nchunk, 2 * g->OC * CKK * bc * OHW);
    int nbuf = par ? omp_get_max_threads() : 1;
    int64_t per = CKK * bc * OHW + (bc > 1 ? g->OC * bc * OHW : 0);
    float *scr = dt__scratch(ctx, (size_t)(nbuf * per) * sizeof(float));
    if (!scr) return false;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t ch = 0; ch < nchunk; ch++) {
        float *col = scr + thread_id() * per, *tmp = col + CKK * bc * OHW;
        int64_t n0 = ch * bc, nb = g->N - n0 < bc ? g->N - n0 : bc, cols = nb * OHW;
        for (int64_t i = 0; i < nb; i++)
            dt__conv()->im2col(g, X + (n0 + i) * CHW, col + i * OHW, cols);
        if (nb == 1) { /* straight into y: (OC, OHW) = w (OC, CKK) · col (CKK, OHW) */
            float *y = Y + n0 * g->OC * OHW;
            if (B)
                for (int64_t oc = 0; oc < g->OC; oc++) {
                    float bv = B[oc];
#pragma omp simd
                    for (int64_t q = 0; q < OHW; q++) y[oc * OHW + q] = bv;
                }
            dt__gemm(ctx, false, false, g->OC, OHW, CKK, 1.f, Wt, CKK, col, cols, B ? 1.f : 0.f, y,
                     OHW);
            continue;
        }
        // tmp (OC, nb*OHW) = w (OC, CKK) · col (CKK, nb*OHW), then scattered per image
        dt__gemm(ctx, false, false, g->OC, cols, CKK, 1.f, Wt, CKK, col, cols, 0.f, tmp, cols);
        for (int64_t i = 0; i < nb; i++)
            for (int64_t oc = 0; oc < g->OC; oc++) {
                float *y = Y + ((n0 + i) * g->OC + oc) * OHW;
                const float *t = tmp + oc * cols + i * OHW;
                float bv = B ? B[oc] : 0.f;
#pragma omp simd
                for (int64_t q = 0; q < OHW; q++) y[q] = t[q] + bv;
            }
    }
    return true;
}

static bool conv_forward_direct(dt_ctx *ctx, const dt__conv_geom *g, const float *X,
                                const float *Wt, const float *B, float *Y) {
    int64_t per = dt__conv()->conv_direct_scratch(g);
    bool par = omp_get_max_threads() > 1 && g->N > 1 &&
               2 * g->N * g->OC * g->OH * g->OW * g->KH * g->KW > 4 * PAR_MIN;
    int nbuf = par ? omp_get_max_threads() : 1;
    float *scr = dt__scratch(ctx, (size_t)(nbuf * per) * sizeof(float));
    if (!scr) return false;
    const int64_t HW = g->H * g->W, YS = g->OC * g->OH * g->OW;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t n = 0; n < g->N; n++)
        dt__conv()->conv_direct_fwd(g, X + n * HW, Wt, B, Y + n * YS, scr + thread_id() * per);
    return true;
}

/* ---- Winograd path (see cpu/conv.c) ---- */

#define CONV_WINO_TILES 64 /* target tile columns of one Winograd chunk */

static int64_t wino_chunk_images(const dt__conv_geom *g) {
    int64_t t = dt__conv()->wino_tiles(g);
    int64_t b = (CONV_WINO_TILES + t - 1) / t;
    if (b > g->N) b = g->N;
    return b < 1 ? 1 : b;
}

/* What the Winograd forward and dx share: chunks of bc images (Tc tiles), per-thread scratch of
 * `per` floats (the transformed chunk of C channels, its product of OC, and the transforms'
 * own), and the transformed weights U (16 x OC x C). */
typedef struct wino_plan {
    int64_t T, bc, nchunk, Tc, per;
    bool par;
    float *U, *scr;
} wino_plan;

static bool wino_plan_make(dt_ctx *ctx, const dt__conv_geom *g, const float *Wt, wino_plan *p) {
    const int64_t C = g->C, OC = g->OC;
    p->T = dt__conv()->wino_tiles(g);
    p->bc = wino_chunk_images(g);
    p->nchunk = (g->N + p->bc - 1) / p->bc;
    p->Tc = p->bc * p->T;
    p->par = chunks_parallel(p->nchunk, 32 * OC * C * p->Tc);
    int nbuf = p->par ? omp_get_max_threads() : 1;
    p->per = 16 * C * p->Tc + 16 * OC * p->Tc + dt__conv()->wino_scratch(g);
    p->U = dt__scratch(ctx, (size_t)(16 * OC * C) * sizeof(float));
    p->scr = dt__scratch(ctx, (size_t)(nbuf * p->per) * sizeof(float));
    if (!p->U || !p->scr) return false;
    dt__conv()->wino_weights(g, Wt, p->U);
    return true;
}

static bool conv_forward_wino(dt_ctx *ctx, const dt__conv_geom *g, const float *X, const float *Wt,
                              const float *B, float *Y) {
    const int64_t C = g->C, OC = g->OC, CHW = C * g->H * g->W, YS = OC * g->OH * g->OW;
    wino_plan p;
    if (!wino_plan_make(ctx, g, Wt, &p)) return false;
    const int64_t T = p.T, bc = p.bc, Tc = p.Tc;
    const float *U = p.U;
#pragma omp parallel for schedule(static) if (p.par)
    for (int64_t ch = 0; ch < p.nchunk; ch++) {
        float *V = p.scr + thread_id() * p.per, *M = V + 16 * C * Tc, *tmp = M + 16 * OC * Tc;
        int64_t n0 = ch * bc, nb = g->N - n0 < bc ? g->N - n0 : bc, cols = nb * T;
        for (int64_t i = 0; i < nb; i++)
            dt__conv()->wino_input(g, X + (n0 + i) * CHW, V + i * T, cols, tmp);
        for (int x = 0; x < 16; x++) // M[ξ] (OC, cols) = U[ξ] (OC, C) · V[ξ] (C, cols)
            dt__gemm(ctx, false, false, OC, cols, C, 1.f, U + x * OC * C, C, V + x * C * cols, cols,
                     0.f, M + x * OC * cols, cols);
        for (int64_t i = 0; i < nb; i++)
            dt__conv()->wino_output(g, M + i * T, cols, B, Y + (n0 + i) * YS);
    }
    return true;
}

/* dx of the Winograd path: dM = A dY A^T, dV[ξ] = U[ξ]^T dM[ξ], dx += B dV B^T. */
static void conv_backward_wino(dt_ctx *ctx, const dt__conv_geom *g, const float *Wt,
                               const float *dY, float *dX) {
    const int64_t C = g->C, OC = g->OC, CHW = C * g->H * g->W, YS = OC * g->OH * g->OW;
    wino_plan p;
    if (!wino_plan_make(ctx, g, Wt, &p)) return;
    const int64_t T = p.T, bc = p.bc, Tc = p.Tc;
    const float *U = p.U;
#pragma omp parallel for schedule(static) if (p.par)
    for (int64_t ch = 0; ch < p.nchunk; ch++) {
        float *dV = p.scr + thread_id() * p.per, *dM = dV + 16 * C * Tc, *tmp = dM + 16 * OC * Tc;
        int64_t n0 = ch * bc, nb = g->N - n0 < bc ? g->N - n0 : bc, cols = nb * T;
        for (int64_t i = 0; i < nb; i++)
            dt__conv()->wino_dout(g, dY + (n0 + i) * YS, dM + i * T, cols);
        for (int x = 0; x < 16; x++) // dV[ξ] (C, cols) = U[ξ]ᵀ (C, OC) · dM[ξ] (OC, cols)
            dt__gemm(ctx, true, false, C, cols, OC, 1.f, U + x * OC * C, C, dM + x * OC * cols,
                     cols, 0.f, dV + x * C * cols, cols);
        for (int64_t i = 0; i < nb; i++)
            dt__conv()->wino_dinput(g, dV + i * T, cols, dX + (n0 + i) * CHW, tmp);
    }
}

/* dW / db / dx of the GEMM path. Partial dW, db per chunk, folded in chunk order. */
static void conv_backward_gemm(dt_ctx *ctx, const dt__conv_geom *g, const float *X, const float *Wt,
                               const float *dY, float *dX, float *dW, float *dB) {
    const int64_t CKK = g->C * g->KH * g->KW, OHW = g->OH * g->OW, CHW = g->C * g->H * g->W;
    const int64_t bc = chunk_images(g), nchunk = (g->N + bc - 1) / bc, nw = g->OC * CKK;
    groups gr = make_groups(nchunk, nw + g->OC);
    int64_t fl = 2 * g->OC * CKK * bc * OHW * ((dW ? 1 : 0) + (dX ? 1 : 0));
    bool par = chunks_parallel(gr.n, gr.per * fl);
    int nbuf = par ? omp_get_max_threads() : 1;
    /* per thread: col (CKK, cols) reused as dcol, and the gathered dy (OC, cols) */
    int64_t per = CKK * bc * OHW + (bc > 1 ? g->OC * bc * OHW : 0);
    float *scr = dt__scratch(ctx, (size_t)(nbuf * per) * sizeof(float));
    float *pw = dW ? dt__scratch(ctx, (size_t)(gr.n * nw) * sizeof(float)) : NULL;
    float *pb = dB ? dt__scratch(ctx, (size_t)(gr.n * g->OC) * sizeof(float)) : NULL;
    if (!scr || (dW && !pw) || (dB && !pb)) return;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t grp = 0; grp < gr.n; grp++) {
        float *col = scr + thread_id() * per, *dyg = col + CKK * bc * OHW;
        int64_t c0 = grp * gr.per, c1 = c0 + gr.per < nchunk ? c0 + gr.per : nchunk;
        for (int64_t ch = c0; ch < c1; ch++) {
            int64_t n0 = ch * bc, nb = g->N - n0 < bc ? g->N - n0 : bc, cols = nb * OHW;
            float beta = ch == c0 ? 0.f : 1.f; /* the group's partials start at its first chunk */
            const float *dy = dY + n0 * g->OC * OHW;
            if (nb > 1) { // dyg (OC, nb*OHW) <- dy (nb, OC, OHW)
                for (int64_t i = 0; i < nb; i++)
                    for (int64_t oc = 0; oc < g->OC; oc++)
                        memcpy(dyg + oc * cols + i * OHW, dy + (i * g->OC + oc) * OHW,
                               (size_t)OHW * sizeof(float));
                dy = dyg;
            }
            if (pb)
                for (int64_t oc = 0; oc < g->OC; oc++)
                    pb[grp * g->OC + oc] =
                        beta * pb[grp * g->OC + oc] + dt__conv()->sum_f32(dy + oc * cols, cols);
            if (pw) { // dWᵀ part (CKK, OC) += col (CKK, cols) · dy (OC, cols)ᵀ
                /* transposed: OpenBLAS runs this shape ~15% faster than dy · colᵀ */
                for (int64_t i = 0; i < nb; i++)
                    dt__conv()->im2col(g, X + (n0 + i) * CHW, col + i * OHW, cols);
                dt__gemm(ctx, false, true, CKK, g->OC, cols, 1.f, col, cols, dy, cols, beta,
                         pw + grp * nw, g->OC);
            }
            if (dX) { // dcol (CKK, cols) = wᵀ (CKK, OC) · dy (OC, cols), folded back per image
                dt__gemm(ctx, true, false, CKK, cols, g->OC, 1.f, Wt, CKK, dy, cols, 0.f, col,
                         cols);
                for (int64_t i = 0; i < nb; i++)
                    dt__conv()->col2im_add(g, col + i * OHW, cols, dX + (n0 + i) * CHW);
            }
        }
    }
    if (dW) { /* group 0's partial accumulates the others, in group order */
        for (int64_t grp = 1; grp < gr.n; grp++) {
            const float *src = pw + grp * nw;
#pragma omp simd
            for (int64_t e = 0; e < nw; e++) pw[e] += src[e];
        }
        for (int64_t oc = 0; oc < g->OC; oc++) // dW (OC, CKK) += (dWᵀ)ᵀ
            for (int64_t k = 0; k < CKK; k++) dW[oc * CKK + k] += pw[k * g->OC + oc];
    }
    if (dB)
        for (int64_t oc = 0; oc < g->OC; oc++) {
            float s = 0.f;
            for (int64_t grp = 0; grp < gr.n; grp++) s += pb[grp * g->OC + oc];
            dB[oc] += s;
        }
}

/* dW / db of the direct path: lane-wise partials per chunk of images, folded in order. */
static void conv_wgrad_direct(dt_ctx *ctx, const dt__conv_geom *g, const float *X, const float *dY,
                              float *dW, float *dB) {
    const int64_t KK = g->KH * g->KW, OHW = g->OH * g->OW;
    const int64_t bc = chunk_images(g), nchunk = (g->N + bc - 1) / bc;
    groups gr = make_groups(nchunk, g->OC * (KK + 1) * 16);
    bool par = chunks_parallel(gr.n, gr.per * 2 * g->OC * KK * bc * OHW);
    int nbuf = par ? omp_get_max_threads() : 1;
    int64_t per = dt__conv()->conv_direct_scratch(g);
    int64_t nv = g->OC * KK * 16, nvb = g->OC * 16, nall = nv + nvb; /* lane partials */
    float *scr = dt__scratch(ctx, (size_t)(nbuf * per) * sizeof(float));
    float *vw = dt__scratch(ctx, (size_t)(gr.n * nall) * sizeof(float));
    if (!scr || !vw) return;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t grp = 0; grp < gr.n; grp++) {
        float *v = vw + grp * nall;
        memset(v, 0, (size_t)nall * sizeof(float));
        int64_t n0 = grp * gr.per * bc, n1 = (grp + 1) * gr.per * bc;
        if (n1 > g->N) n1 = g->N;
        dt__conv()->conv_direct_wgrad(g, X, dY, n0, n1 - n0, v, dB ? v + nv : NULL,
                                      scr + thread_id() * per);
    }
    /* fold groups (in order) lane-wise, then the 16 lanes */
    for (int64_t grp = 1; grp < gr.n; grp++) {
        const float *v = vw + grp * nall;
#pragma omp simd
        for (int64_t e = 0; e < nall; e++) vw[e] += v[e];
    }
    float red[DT__CONV_DIRECT_MAX_TAPS];
    for (int64_t oc = 0; oc < g->OC; oc++) {
        if (dW) {
            dt__conv()->conv_lanes_reduce(vw + oc * KK * 16, KK, red);
            for (int64_t k = 0; k < KK; k++) dW[oc * KK + k] += red[k];
        }
        if (dB) {
            dt__conv()->conv_lanes_reduce(vw + nv + oc * 16, 1, red);
            dB[oc] += red[0];
        }
    }
}

static void conv_backward(dt_node *n) {
    dt_tensor *x = n->in[0], *w = n->in[1], *b = n->n_in > 2 ? n->in[2] : NULL;
    dt__conv_geom g;
    geom_of(x, w, n->iattr[0], n->iattr[1], &g);
    if (g.N == 0) return;
    dt_ctx *ctx = n->out->ctx;
    const float *dY = n->out->grad->data;
    float *dX = dt__wants_grad(x) ? dt__grad_f32(x) : NULL;
    float *dW = dt__wants_grad(w) ? dt__grad_f32(w) : NULL;
    float *dB = b && dt__wants_grad(b) ? dt__grad_f32(b) : NULL;
    if (dt__conv()->wino_ok(&g)) {
        /* Winograd for dx only: its weight gradient (G^T dU G) turns exact zeros (say, a
         * weight whose every product meets a dead unit or padding) into rounding noise of
         * ~1e-10, which AdamW's m / (sqrt(v) + eps) scales up to a sizeable step. The im2col
         * GEMM sums only the true products, so those stay exactly zero. */
        if (dW || dB) conv_backward_gemm(ctx, &g, x->data, w->data, dY, NULL, dW, dB);
        if (dX) conv_backward_wino(ctx, &g, w->data, dY, dX);
    } else if (dt__conv()->conv_direct_ok(&g)) {
        if (dW || dB) conv_wgrad_direct(ctx, &g, x->data, dY, dW, dB);
        if (dX) conv_backward_gemm(ctx, &g, x->data, w->data, dY, dX, NULL, NULL);
    } else if (dW || dB || dX) {
        conv_backward_gemm(ctx, &g, x->data, w->data, dY, dX, dW, dB);
    }
}

dt_tensor *dt_conv2d(dt_tensor *x, dt_tensor *w, dt_tensor *b, int stride, int padding) {
    DT_CHECK_INPUTS(x, w);
    if (!dt__need_f32(x, "conv2d") || !dt__need_f32(w, "conv2d")) return NULL;
    if (b && !dt__need_f32(b, "conv2d")) return NULL;
    char s1[96], s2[96];
    if (x->ndim != 4 || w->ndim != 4) {
        dt_error(DT_ERR_INVALID,
                 "conv2d: want x (N, C, H, W) and w (OC, C, KH, KW), got x %s and w %s; hint: "
                 "add a batch dim with dt_reshape",
                 dt_shape_str(x, s1, 96), dt_shape_str(w, s2, 96));
        return NULL;
    }
    if (x->shape[1] != w->shape[1]) {
        dt_error(DT_ERR_INVALID, "conv2d: x %s has %lld channels but w %s expects %lld",
                 dt_shape_str(x, s1, 96), (long long)x->shape[1], dt_shape_str(w, s2, 96),
                 (long long)w->shape[1]);
        return NULL;
    }
    if (b && (b->ndim != 1 || b->shape[0] != w->shape[0])) {
        dt_error(DT_ERR_INVALID, "conv2d: bias %s does not fit w %s (want (%lld))",
                 dt_shape_str(b, s1, 96), dt_shape_str(w, s2, 96), (long long)w->shape[0]);
        return NULL;
    }
    if (stride < 1 || padding < 0) {
        dt_error(DT_ERR_INVALID, "conv2d: stride %d must be >= 1 and padding %d >= 0", stride,
                 padding);
        return NULL;
    }
    dt__conv_geom g;
    geom_of(x, w, stride, padding, &g);
    if (g.KH < 1 || g.KW < 1 || g.H + 2 * padding < g.KH || g.W + 2 * padding < g.KW || g.OH <= 0 ||
        g.OW <= 0) {
        dt_error(DT_ERR_INVALID,
                 "conv2d: kernel %lldx%lld does not fit input %s with padding %d (output would "
                 "be empty); hint: use a larger input or more padding",
                 (long long)g.KH, (long long)g.KW, dt_shape_str(x, s1, 96), padding);
        return NULL;
    }
    bool has_b = b != NULL;
    x = dt__contig(x);
    w = dt__contig(w);
    if (has_b) b = dt__contig(b);
    if (!x || !w || (has_b && !b)) return NULL;
    int64_t shape[4] = {g.N, g.OC, g.OH, g.OW};
    dt_tensor *y = dt__empty(x->ctx, DT_DTYPE_F32, 4, shape);
    dt_node *n = dt__node_new(&op_conv2d, y, has_b ? 3 : 2, (dt_tensor *[]){x, w, b});
    if (!n) return NULL;
    n->iattr[0] = stride;
    n->iattr[1] = padding;
    const float *B = has_b ? b->data : NULL;
    bool ok = true;
    if (g.N == 0)
        ok = true;
    else if (dt__conv()->wino_ok(&g))
        ok = conv_forward_wino(x->ctx, &g, x->data, w->data, B, y->data);
    else if (dt__conv()->conv_direct_ok(&g))
        ok = conv_forward_direct(x->ctx, &g, x->data, w->data, B, y->data);
    else
        ok = conv_forward_gemm(x->ctx, &g, x->data, w->data, B, y->data);
    if (!ok) return NULL;
    return dt__node_commit(n);
}

/* ---- pooling ---------------------------------------------------------------------------
 * iattr: [0]=kernel [1]=stride [2]=pad [3]=H [4]=W [5]=OH [6]=OW [7]=relu first; max pool
 * saves the argmax offsets (int32, inside each input plane) in n->saved when recorded.
 *
 * relu_max_pool2d is max_pool2d(relu(x)) as one op (a CNN's conv → ReLU → pool): relu is
 * monotonic, so it is relu applied to the pooled maxima of x, and the gradient goes to the
 * window's argmax only where the pooled value is > 0 (elsewhere relu's backward would zero it).
 * The full-size ReLU output is never written nor kept, and its backward pass over it is gone.
 * The bits are the unfused chain's (a NaN wins its window and stays NaN in both): where the
 * maximum is <= 0 the chains pick different argmaxes among the ties at 0, but both pass a zero
 * gradient. */

static int64_t pool_flops(const dt_node *n) {
    return dt_numel(n->out) * n->iattr[0] * n->iattr[0];
}
static int64_t pool_bwd_flops(const dt_node *n) {
    return dt_numel(n->out);
}

/* x's gradient buffer for a kernel that writes every element: a fresh one is left
 * uninitialised (*add = false) instead of zeroed; an existing one is accumulated into. */
static float *grad_for_overwrite(dt_tensor *x, bool *add) {
    bool fresh;
    float *g = dt__grad_f32_fresh(x, &fresh);
    *add = !fresh;
    return g;
}

static void max_pool_backward(dt_node *n) {
    dt_tensor *x = n->in[0];
    if (!dt__wants_grad(x) || !n->saved) return;
    const float *gy = n->out->grad->data;
    if (n->iattr[7]) { /* relu first: no gradient through windows whose output is 0 */
        int64_t NO = dt_numel(n->out);
        float *gm = dt__scratch(x->ctx, (size_t)(NO ? NO : 1) * sizeof(float));
        if (!gm) return; /* OOM is reported by the tape walk */
        const float *Y = n->out->data;
#pragma omp parallel for simd schedule(static) if (NO > PAR_MIN)
        for (int64_t i = 0; i < NO; i++) gm[i] = Y[i] > 0.f ? gy[i] : 0.f;
        gy = gm;
    }
    const int32_t *idx = n->saved;
    int64_t planes = x->shape[0] * x->shape[1], H = n->iattr[3], W = n->iattr[4];
    int64_t OH = n->iattr[5], OW = n->iattr[6], HW = H * W, OHW = OH * OW;
    if (n->iattr[0] == 2 && n->iattr[1] == 2 && n->iattr[2] == 0) {
        bool add;
        float *gx = grad_for_overwrite(x, &add);
        if (!gx) return;
#pragma omp parallel for schedule(static) if (planes * HW > PAR_MIN)
        for (int64_t p = 0; p < planes; p++)
            dt__conv()->max_pool_2x2_bwd(gy, idx, gx, p, p + 1, H, W, OH, OW, add);
        return;
    }
    float *gx = dt__grad_f32(x);
    if (!gx) return;
#pragma omp parallel for schedule(static) if (planes * OHW > PAR_MIN)
    for (int64_t p = 0; p < planes; p++) {
        float *g = gx + p * HW;
        const int32_t *ip = idx + p * OHW;
        const float *gp = gy + p * OHW;
        for (int64_t o = 0; o < OHW; o++) g[ip[o]] += gp[o];
    }
}

static void avg_pool_backward(dt_node *n) {
    dt_tensor *x = n->in[0];
    if (!dt__wants_grad(x)) return;
    float *gx = dt__grad_f32(x);
    if (!gx) return;
    int64_t planes = x->shape[0] * x->shape[1], H = n->iattr[3], W = n->iattr[4];
    int64_t OH = n->iattr[5], OW = n->iattr[6];
    int k = (int)n->iattr[0], s = (int)n->iattr[1], p = (int)n->iattr[2];
    const float *gy = n->out->grad->data;
#pragma omp parallel for schedule(static) if (planes * OH * OW * k * k > PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++)
        dt__conv()->avg_pool_bwd(gy, gx, pl, pl + 1, H, W, OH, OW, k, s, p);
}

/* relu_max_pool2d counts what the unfused relu (1 per input element, 2 backward) and max
 * pool count */
static int64_t relu_pool_flops(const dt_node *n) {
    return dt_numel(n->in[0]) + pool_flops(n);
}
static int64_t relu_pool_bwd_flops(const dt_node *n) {
    return 2 * dt_numel(n->in[0]) + pool_bwd_flops(n);
}

DT_OP(op_max_pool2d, "max_pool2d", max_pool_backward, pool_flops, pool_bwd_flops);
DT_OP(op_relu_max_pool2d, "relu_max_pool2d", max_pool_backward, relu_pool_flops,
      relu_pool_bwd_flops);
DT_OP(op_avg_pool2d, "avg_pool2d", avg_pool_backward, pool_flops, pool_bwd_flops);

static dt_tensor *pool(dt_tensor *x, int kernel, int stride, int padding, bool is_max, bool relu) {
    const char *name = relu ? "relu_max_pool2d" : is_max ? "max_pool2d" : "avg_pool2d";
    DT_CHECK_INPUTS(x);
    if (!dt__need_f32(x, name)) return NULL;
    char s1[96];
    if (x->ndim != 4) {
        dt_error(DT_ERR_INVALID,
                 "%s: want x (N, C, H, W), got %s; hint: add a batch dim with "
                 "dt_reshape",
                 name, dt_shape_str(x, s1, 96));
        return NULL;
    }
    if (kernel < 1 || stride < 1 || padding < 0 || padding > kernel / 2) {
        dt_error(DT_ERR_INVALID,
                 "%s: kernel %d, stride %d, padding %d: want kernel >= 1, stride >= 1 and "
                 "0 <= padding <= kernel/2",
                 name, kernel, stride, padding);
        return NULL;
    }
    int64_t H = x->shape[2], W = x->shape[3];
    int64_t OH = H + 2 * padding >= kernel ? (H + 2 * padding - kernel) / stride + 1 : 0;
    int64_t OW = W + 2 * padding >= kernel ? (W + 2 * padding - kernel) / stride + 1 : 0;
    if (OH <= 0 || OW <= 0) {
        dt_error(DT_ERR_INVALID,
                 "%s: kernel %d does not fit input %s with padding %d (output would be empty)",
                 name, kernel, dt_shape_str(x, s1, 96), padding);
        return NULL;
    }
    if (!(x = dt__contig(x))) return NULL;
    int64_t planes = x->shape[0] * x->shape[1];
    int64_t shape[4] = {x->shape[0], x->shape[1], OH, OW};
    dt_tensor *y = dt__empty(x->ctx, DT_DTYPE_F32, 4, shape);
    dt_node *n = dt__node_new(relu     ? &op_relu_max_pool2d
                              : is_max ? &op_max_pool2d
                                       : &op_avg_pool2d,
                              y, 1, &x);
    if (!n) return NULL;
    int64_t at[8] = {kernel, stride, padding, H, W, OH, OW, relu};
    memcpy(n->iattr, at, sizeof at);
    int32_t *idx = NULL;
    if (is_max && n->record) {
        idx = dt__scratch(x->ctx, (size_t)(planes * OH * OW) * sizeof(int32_t));
        if (!idx) return NULL;
        n->saved = idx;
    }
    const float *X = x->data;
    float *Y = y->data;
#pragma omp parallel for schedule(static) if (planes * OH * OW * kernel * kernel > PAR_MIN)
    for (int64_t p = 0; p < planes; p++) {
        if (is_max)
            dt__conv()->max_pool_fwd(X, Y, idx, p, p + 1, H, W, OH, OW, kernel, stride, padding);
        else
            dt__conv()->avg_pool_fwd(X, Y, p, p + 1, H, W, OH, OW, kernel, stride, padding);
        if (relu) {
            float *yp = Y + p * OH * OW;
#pragma omp simd
            for (int64_t i = 0; i < OH * OW; i++) yp[i] = !(yp[i] <= 0.f) ? yp[i] : 0.f;
        }
    }
    return dt__node_commit(n);
}

dt_tensor *dt_max_pool2d(dt_tensor *x, int kernel, int stride, int padding) {
    return pool(x, kernel, stride, padding, true, false);
}

dt_tensor *dt_relu_max_pool2d(dt_tensor *x, int kernel, int stride, int padding) {
    return pool(x, kernel, stride, padding, true, true);
}

dt_tensor *dt_avg_pool2d(dt_tensor *x, int kernel, int stride, int padding) {
    return pool(x, kernel, stride, padding, false, false);
}
