/* test_cpu_isa.c — the kernels' instruction-set level: the CPU's, capped by $DTRAIN_ISA.
 * The level is read once per process, so each cap runs in a child process (this binary with
 * --level) and the parent compares what it prints with the expected level. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/base.h"
#include "test.h"

/* The level a child prints under DTRAIN_ISA=cap (NULL: unset); "" when it could not run. */
static void child_level(const char *cap, char *out, size_t n) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s%s /proc/%d/exe --level 2>/dev/null", cap ? "DTRAIN_ISA=" : "",
             cap ? cap : "", (int)getpid());
    out[0] = 0;
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (!fgets(out, (int)n, p)) out[0] = 0;
    out[strcspn(out, "\n")] = 0;
    pclose(p);
}

static void test_caps(void) {
    dt_cpu_isa hw = dt_cpu_isa_level(); /* main unset DTRAIN_ISA first */
    char got[64];
    child_level(NULL, got, sizeof got);
    CHECK_MSG(!strcmp(got, dt_cpu_isa_name(hw)), "unset: got '%s'", got);
    for (int i = DT_CPU_GENERIC; i <= DT_CPU_AVX512_BF16; i++) {
        const char *cap = dt_cpu_isa_name((dt_cpu_isa)i);
        dt_cpu_isa want = (dt_cpu_isa)i < hw ? (dt_cpu_isa)i : hw; /* never above the CPU */
        child_level(cap, got, sizeof got);
        CHECK_MSG(!strcmp(got, dt_cpu_isa_name(want)), "DTRAIN_ISA=%s: got '%s', want '%s'", cap,
                  got, dt_cpu_isa_name(want));
    }
    child_level("sse9", got, sizeof got); /* not a level: a warning, the CPU's level */
    CHECK_MSG(!strcmp(got, dt_cpu_isa_name(hw)), "DTRAIN_ISA=sse9: got '%s'", got);
    CHECK(!strcmp(dt_cpu_isa_name((dt_cpu_isa)7), "?"));
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--level")) {
        printf("%s\n", dt_cpu_isa_name(dt_cpu_isa_level()));
        return 0;
    }
    unsetenv("DTRAIN_ISA");
    TEST_RUN(test_caps);
    TEST_END();
}
