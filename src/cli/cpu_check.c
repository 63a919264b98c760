/* cpu_check.c — a clear refusal on a CPU below the build's baseline. The rest of the binary is
 * compiled for DT_BASELINE_ISA (the portable build's -march level, x86-64-v3 by default) and
 * would otherwise die of SIGILL at its first wider instruction; this file alone is compiled
 * for plain x86-64 (CMakeLists.txt) and runs before main. */
#include <stdio.h>
#include <unistd.h>

#ifdef DT_BASELINE_ISA
__attribute__((constructor)) static void cpu_check(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports(DT_BASELINE_ISA)) return;
    fprintf(stderr,
            "dtrain: this build needs an %s CPU or newer (the -march level it was compiled "
            "for), and this CPU lacks some of that level's instructions\n"
            "hint: build for this CPU with cmake -DDT_MARCH=x86-64-v2 (or -DDT_NATIVE=ON on "
            "it)\n",
            DT_BASELINE_ISA);
    _exit(1);
}
#endif
