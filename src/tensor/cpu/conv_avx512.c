/* conv_avx512.c — conv.c's kernels compiled again for AVX-512 (the table dt__conv_avx512),
 * chosen at run time by dt__conv() on CPUs that have it. The headers come first, outside the
 * target region; inside it __AVX512F__ is defined and conv.c and the parts it includes
 * (conv_direct.h, conv_pool.h, conv_winograd.h) take their intrinsics paths. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "conv_impl.h"

DT__AVX512_BEGIN
#define DT__CONV_TABLE dt__conv_avx512
#include "conv.c"
DT__ISA_END
