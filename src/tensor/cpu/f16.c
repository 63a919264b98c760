/* f16.c — fp16 rounding for fp16 autocast (dt_ctx_set_autocast(ctx, DT_DTYPE_F16)).
 *
 * Under fp16 autocast a GEMM's operands are rounded to fp16 precision and its output too (see
 * gemm_bf16_storage.c), so values the way a GPU's fp16 tensors hold them: 11 significant bits,
 * round to nearest even, subnormals down to 2^-24, and anything at or above 65520 in magnitude
 * overflows to infinity — which is what makes fp16's loss scaler skip steps. The products and
 * their sums stay f32, as fp16 GEMMs accumulate in f32 on GPUs.
 *
 * The rounding is F16C's vcvtps2ph (round to nearest even, exceptions masked) and back with
 * vcvtph2ps, eight floats at a time; neither is affected by MXCSR's flush-to-zero or
 * denormals-are-zero for the half side, so fp16 subnormals come out right. The tail and a CPU
 * without F16C use dt_f32_to_f16 / dt_f16_to_f32, the same bits (tests/tensor/test_f16.c checks
 * both against numpy's float16). fp16 autocast needs F16C (an AVX2 kernel level or above):
 * without it dt_ctx_set_autocast refuses, rather than run the scalar rounding on every GEMM. */
#include "../tensor_impl.h"
#include "base/base_impl.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

bool dt__f16_autocast_ok(void) {
    return dt__isa_avx2() && __builtin_cpu_supports("f16c");
}

DT__AVX2_BEGIN
/* The first n / 8 * 8 elements; returns how many. */
static int64_t round_f16_f16c(const float *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    return i;
}
DT__ISA_END

void dt__f32_round_f16_seq(const float *src, float *dst, int64_t n) {
    int64_t i = dt__f16_autocast_ok() ? round_f16_f16c(src, dst, n) : 0;
    for (; i < n; i++) {
        uint16_t h;
        dt_f32_to_f16(src + i, &h, 1);
        dt_f16_to_f32(&h, dst + i, 1);
    }
}

void dt__f32_round_f16_rows(float *C, int64_t ldc, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    for (int64_t r = r0; r < r1; r++)
        dt__f32_round_f16_seq(C + r * ldc + c0, C + r * ldc + c0, c1 - c0);
}
