/*
 * conv_impl.h — CPU kernels behind the conv2d / pooling ops (cpu/conv.c with its parts
 * conv_direct.h, conv_pool.h and conv_winograd.h). Internal.
 *
 * All tensors are f32, contiguous, NCHW. "col" matrices are im2col layouts: one row per
 * (c, kh, kw) tap, OH*OW columns per image; `ldcol` is the row stride, so the columns of
 * several images can sit side by side in one matrix (image i at column offset i*OH*OW).
 *
 * The kernels are one table per instruction-set variant: cpu/conv.c compiled for the build's
 * baseline (dt__conv_generic: portable loops, no Winograd), again for AVX2 + FMA by
 * cpu/conv_avx2.c (dt__conv_avx2) and for AVX-512 by cpu/conv_avx512.c (dt__conv_avx512);
 * dt__conv() gives the one the CPU level picks.
 */
#ifndef DT_CONV_IMPL_H
#define DT_CONV_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base_impl.h"

typedef struct dt__conv_geom {
    int64_t N, C, H, W;  /* input (N, C, H, W) */
    int64_t OC, KH, KW;  /* weight (OC, C, KH, KW) */
    int64_t OH, OW;      /* output (N, OC, OH, OW) */
    int64_t stride, pad; /* same along H and W */
} dt__conv_geom;

#define DT__CONV_DIRECT_MAX_TAPS 49

typedef struct dt__conv_kernels {
    /* col (C*KH*KW rows, ldcol stride) <- patches of one image x (C, H, W); zero padding. */
    void (*im2col)(const dt__conv_geom *g, const float *x, float *col, int64_t ldcol);
    /* x (C, H, W) += the patches in col (the adjoint of dt__im2col). */
    void (*col2im_add)(const dt__conv_geom *g, const float *col, int64_t ldcol, float *x);

    /* The direct first-layer path (C == 1, stride 1, KH*KW <= DT__CONV_DIRECT_MAX_TAPS): the
     * taps are too few for a GEMM to pay off, so these kernels slide over a zero-padded copy of
     * the image instead. */
    bool (*conv_direct_ok)(const dt__conv_geom *g);
    /* Floats of per-thread scratch the direct kernels need. */
    int64_t (*conv_direct_scratch)(const dt__conv_geom *g);
    /* y (OC, OH, OW) = conv(x (1, H, W), w) + b for one image; b may be NULL. */
    void (*conv_direct_fwd)(const dt__conv_geom *g, const float *x, const float *w, const float *b,
                            float *y, float *scratch);
    /* Over images [n0, n0+nb): vw (OC*KH*KW*16 floats) and vb (OC*16, or NULL) accumulate
     * lane-wise partial sums of dW and db; dt__conv_direct_reduce folds the lanes. */
    void (*conv_direct_wgrad)(const dt__conv_geom *g, const float *x, const float *dy, int64_t n0,
                              int64_t nb, float *vw, float *vb, float *scratch);
    /* Sum of p[0..n) in a fixed order (16 lane-wise partial sums, then the lanes, then the tail)
     * that no compiler or flag can change, unlike a vectorised reduction loop. */
    float (*sum_f32)(const float *p, int64_t n);
    /* out[i] = sum of the 16 lanes of v[i] (fixed order), for i < n. */
    void (*conv_lanes_reduce)(const float *v, int64_t n, float *out);

    /* Winograd F(2x2, 3x3) for 3x3 stride-1 convolutions (AVX2 and AVX-512 tables; wino_ok is
     * false in the generic one). The 16 transformed matrices of a chunk are stored one after
     * another: V[ξ] is (C, ldv), M[ξ] (OC, ldm), U[ξ] (OC, C); one image's tiles are
     * dt__wino_tiles() consecutive columns (pass the pointer offset to its first column). `scr` is
     * dt__wino_scratch() floats. */
    bool (*wino_ok)(const dt__conv_geom *g);
    int64_t (*wino_tiles)(const dt__conv_geom *g);
    int64_t (*wino_scratch)(const dt__conv_geom *g);
    void (*wino_weights)(const dt__conv_geom *g, const float *w, float *U);
    void (*wino_input)(const dt__conv_geom *g, const float *x, float *V, int64_t ldv, float *scr);
    /* y (OC, OH, OW) of one image = A^T M A + b (b may be NULL) */
    void (*wino_output)(const dt__conv_geom *g, const float *M, int64_t ldm, const float *b,
                        float *y);
    void (*wino_dout)(const dt__conv_geom *g, const float *dy, float *dM, int64_t ldm);
    /* dx (C, H, W) of one image += B dV B^T */
    void (*wino_dinput)(const dt__conv_geom *g, const float *dV, int64_t ldv, float *dx,
                        float *scr);

    /* Pooling over planes [p0, p1) of x (planes of H*W) into y (planes of OH*OW). idx (int32,
     * the argmax's offset inside its input plane) may be NULL. */
    void (*max_pool_fwd)(const float *x, float *y, int32_t *idx, int64_t p0, int64_t p1, int64_t H,
                         int64_t W, int64_t OH, int64_t OW, int k, int s, int p);
    /* Backward of the 2x2 stride-2 unpadded max pool over planes [p0, p1): every element of gx
     * is written (add = false: gx needs no zeroing) or accumulated (add = true). */
    void (*max_pool_2x2_bwd)(const float *gy, const int32_t *idx, float *gx, int64_t p0, int64_t p1,
                             int64_t H, int64_t W, int64_t OH, int64_t OW, bool add);
    void (*avg_pool_fwd)(const float *x, float *y, int64_t p0, int64_t p1, int64_t H, int64_t W,
                         int64_t OH, int64_t OW, int k, int s, int p);
    void (*avg_pool_bwd)(const float *gy, float *gx, int64_t p0, int64_t p1, int64_t H, int64_t W,
                         int64_t OH, int64_t OW, int k, int s, int p);
} dt__conv_kernels;

extern const dt__conv_kernels dt__conv_generic, dt__conv_avx2, dt__conv_avx512;

/* The kernels of the CPU's level (DTRAIN_ISA caps it). */
static inline const dt__conv_kernels *dt__conv(void) {
    return dt__isa_avx512() ? &dt__conv_avx512
           : dt__isa_avx2() ? &dt__conv_avx2
                            : &dt__conv_generic;
}

#endif
