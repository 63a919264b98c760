/*
 * cpu.c — which instruction-set level the kernels may use.
 *
 * The level is the highest of generic < avx2 < avx512 < avx512_bf16 that the CPU supports,
 * capped by $DTRAIN_ISA (generic | avx2 | avx512 | avx512_bf16) so tests and benchmarks can run
 * the paths of a smaller CPU on a bigger one. It is read once per process: every caller sees
 * the same level, so a run never mixes two kernel families. A cap above what the CPU supports,
 * or a value that is not a level, is reported once as a warning and changes nothing.
 *
 * The kernels are compiled in one variant per level (the AVX-512 ones for their own target, see
 * base_impl.h's DT__TARGET_*) and ask for the level at each call, so the binary built for
 * x86-64-v3 runs on both kinds of CPU. dt__cpu_isa_override lets a test run each variant in one
 * process.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base_impl.h"

static const char *const ISA_NAMES[] = {"generic", "avx2", "avx512", "avx512_bf16"};

static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
static dt_cpu_isa isa_level;
static dt_cpu_isa isa_hw; /* what the CPU supports: the override's cap */

static dt_cpu_isa detect(void) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return __builtin_cpu_supports("avx512bf16") ? DT_CPU_AVX512_BF16 : DT_CPU_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return DT_CPU_AVX2;
#endif
    return DT_CPU_GENERIC;
}

static void isa_init(void) {
    dt_cpu_isa hw = detect();
    isa_hw = hw;
    isa_level = hw;
    const char *cap = getenv("DTRAIN_ISA");
    if (!cap || !*cap) return;
    for (int i = 0; i <= DT_CPU_AVX512_BF16; i++) {
        if (strcmp(cap, ISA_NAMES[i]) != 0) continue;
        if ((dt_cpu_isa)i > hw)
            dt_log(DT_LOG_WARN, "DTRAIN_ISA=%s: this CPU supports only %s; using %s", cap,
                   ISA_NAMES[hw], ISA_NAMES[hw]);
        else
            isa_level = (dt_cpu_isa)i;
        return;
    }
    dt_log(DT_LOG_WARN,
           "DTRAIN_ISA=%s is not a level (valid: generic, avx2, avx512, avx512_bf16); using %s",
           cap, ISA_NAMES[hw]);
}

dt_cpu_isa dt_cpu_isa_level(void) {
    pthread_once(&isa_once, isa_init);
    return isa_level;
}

/* Never above the CPU's level: a variant the CPU cannot run is never chosen. */
dt_cpu_isa dt__cpu_isa_override(dt_cpu_isa isa) {
    dt_cpu_isa prev = dt_cpu_isa_level();
    isa_level = isa < isa_hw ? isa : isa_hw;
    return prev;
}

const char *dt_cpu_isa_name(dt_cpu_isa isa) {
    return (unsigned)isa <= DT_CPU_AVX512_BF16 ? ISA_NAMES[isa] : "?";
}
