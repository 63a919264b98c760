/* conv_avx2.c — conv.c's kernels compiled again for AVX2 + FMA (the table dt__conv_avx2), chosen
 * at run time by dt__conv() on CPUs that have AVX2 but not AVX-512. The headers come first,
 * outside the target region; inside it DT__CONV_AVX2 makes conv.c and the parts it includes take
 * their 256-bit intrinsics paths (masked im2col in conv.c, conv_direct.h, conv_pool.h,
 * conv_winograd.h). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "conv_impl.h"

DT__AVX2_BEGIN
#define DT__CONV_AVX2 1
#define DT__CONV_TABLE dt__conv_avx2
#include "conv.c"
DT__ISA_END
