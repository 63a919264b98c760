/* rng.c — Philox4x32-10 counter-based generator (Salmon et al., SC'11). */
#include "dtrain/base.h"
#include "base/base_impl.h"

#include <math.h>

void dt_philox(uint64_t seed, uint64_t ctr, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int i = 0; i < 10; i++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

void dt_rng_init(dt_rng *r, uint64_t seed) {
    r->seed = seed;
    r->counter = 0;
}

uint32_t dt_rng_u32(dt_rng *r) {
    uint32_t o[4];
    dt_philox(r->seed, r->counter++, o);
    return o[0];
}

uint64_t dt_rng_u64(dt_rng *r) {
    uint32_t o[4];
    dt_philox(r->seed, r->counter++, o);
    return ((uint64_t)o[0] << 32) | o[1];
}

static inline double u32_to_unit(uint32_t x) { return (x >> 8) * (1.0 / 16777216.0); }

double dt_rng_uniform(dt_rng *r) {
    return (double)(dt_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

uint64_t dt_rng_below(dt_rng *r, uint64_t n) {
    if (n <= 1) return 0;
    /* rejection sampling: unbiased */
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    for (;;) {
        uint64_t x = dt_rng_u64(r);
        if (x < lim) return x % n;
    }
}

void dt_rng_fill_uniform(dt_rng *r, float *out, int64_t n, float lo, float hi) {
    uint64_t base = r->counter;
    int64_t nb = (n + 3) / 4;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t b = 0; b < nb; b++) {
        uint32_t o[4];
        dt_philox(r->seed, base + (uint64_t)b, o);
        for (int j = 0; j < 4 && b * 4 + j < n; j++)
            out[b * 4 + j] = lo + (hi - lo) * (float)u32_to_unit(o[j]);
    }
    r->counter = base + (uint64_t)nb;
}

void dt_rng_fill_normal(dt_rng *r, float *out, int64_t n, float mean, float std) {
    uint64_t base = r->counter;
    int64_t nb = (n + 3) / 4;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t b = 0; b < nb; b++) {
        uint32_t o[4];
        dt_philox(r->seed, base + (uint64_t)b, o);
        for (int j = 0; j < 4; j += 2) {
            double u1 = ((o[j] >> 8) + 1.0) * (1.0 / 16777217.0); /* (0, 1] */
            double u2 = u32_to_unit(o[j + 1]);
            double rad = sqrt(-2.0 * log(u1));
            double z0 = rad * cos(2 * M_PI * u2), z1 = rad * sin(2 * M_PI * u2);
            if (b * 4 + j < n) out[b * 4 + j] = mean + std * (float)z0;
            if (b * 4 + j + 1 < n) out[b * 4 + j + 1] = mean + std * (float)z1;
        }
    }
    r->counter = base + (uint64_t)nb;
}
