/* gemm_pack.c — B packed once per GEMM for the f32 primitive tiles (gemm_f32_onednn.c).
 *
 * A primitive whose B is described as "any" takes it in its own blocked layout, and a GEMM
 * whose tiles all read the whole of B (several row tiles, one column tile) packs it once for
 * all of them, where each tile's primitive would otherwise pack B again: 6-18% faster per GEMM
 * measured alone at the GPT benchmark's sizes, about 2% of its step (there the tiles'
 * epilogues evict part of the packed B between tiles). Packing only moves values, so the tiles'
 * bits are those of the unpacked primitive, whatever the thread count. The layout oneDNN picks for
 * f32 on AVX-512 is panels of 64 columns, each Kp x 64 row-major (K padded to 16 and N to 64 with
 * zeros; its "BA16a64b"). The tile loop's own threads pack that one, 16 rows of a panel at a time,
 * before the tiles start; any other layout goes through a oneDNN reorder first (slower: 100 µs per
 * GEMM of the GPT step, against 75). */
#include "gemm_impl.h"
#include "simd_transpose.h"

bool dt__gemm_is_panel_layout(const dnnl_memory_desc_t *md, int64_t K, int64_t N) {
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    int64_t Kp = dt__gemm_round_up(K, PANEL_ROWS), Np = dt__gemm_round_up(N, PANEL);
    return md->ndims == 2 && md->format_kind == dnnl_blocked && md->data_type == dnnl_f32 &&
           md->offset0 == 0 && md->extra.flags == 0 && md->padded_dims[0] == Kp &&
           md->padded_dims[1] == Np && md->padded_offsets[0] == 0 && md->padded_offsets[1] == 0 &&
           b->inner_nblks == 2 && b->inner_blks[0] == PANEL_ROWS && b->inner_blks[1] == PANEL &&
           b->inner_idxs[0] == 0 && b->inner_idxs[1] == 1 && b->strides[0] == PANEL_ROWS * PANEL &&
           b->strides[1] == Kp * PANEL;
}

/* Unit u of the panel layout (panel u / (Kp / 16), its 16 rows u % (Kp / 16)) from B, stored
 * K x N (ldb) or, when tb, N x K. */
void dt__gemm_pack_panel_rows(const float *B, int64_t ldb, bool tb, int64_t K, int64_t N, float *P,
                              int64_t u) {
    int64_t Kp = dt__gemm_round_up(K, PANEL_ROWS), kb = Kp / PANEL_ROWS;
    int64_t n0 = u / kb * PANEL, k0 = u % kb * PANEL_ROWS;
    float *d = P + n0 * Kp + k0 * PANEL;
    int64_t nw = N - n0 < PANEL ? N - n0 : PANEL, kh = K - k0 < PANEL_ROWS ? K - k0 : PANEL_ROWS;
    if (!tb) {
        for (int64_t r = 0; r < PANEL_ROWS; r++) {
            float *dr = d + r * PANEL;
            int64_t w = r < kh ? nw : 0;
            if (w) memcpy(dr, B + (k0 + r) * ldb + n0, (size_t)w * sizeof(float));
            memset(dr + w, 0, (size_t)(PANEL - w) * sizeof(float));
        }
        return;
    }
    const bool avx512 = dt__isa_avx512();
    for (int64_t j = 0; j < PANEL; j += 16) {
        if (avx512 && kh == PANEL_ROWS && nw - j >= 16) {
            const float *rows[16];
            for (int i = 0; i < 16; i++) rows[i] = B + (n0 + j + i) * ldb + k0;
            dt__transpose16(rows, d + j, PANEL);
            continue;
        }
        for (int64_t r = 0; r < PANEL_ROWS; r++)
            for (int64_t i = j; i < j + 16; i++)
                d[r * PANEL + i] = r < kh && i < nw ? B[(n0 + i) * ldb + k0 + r] : 0.f;
    }
}

/* B in slot s's layout through a oneDNN reorder into c->bpack (the fallback for layouts other
 * than the panels). Returns false when oneDNN says no. */
bool dt__gemm_reorder_b(struct dt_gemm_cache *c, dt__gemm_slot *s, const void *B) {
    if (!s->reorder) {
        dnnl_primitive_desc_t rpd = NULL;
        bool ok = dnnl_reorder_primitive_desc_create(&rpd, &s->bp_md, c->engine, &s->b_md,
                                                     c->engine, NULL) == dnnl_success &&
                  dnnl_primitive_create(&s->reorder, rpd) == dnnl_success;
        if (rpd) dnnl_primitive_desc_destroy(rpd);
        ok = ok &&
             dnnl_memory_create(&s->rmem[0], &s->bp_md, c->engine, (void *)B) == dnnl_success &&
             dnnl_memory_create(&s->rmem[1], &s->b_md, c->engine, c->bpack) == dnnl_success;
        if (!ok) return false; /* what was made is released with the slot */
    }
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, s->rmem[0]}, {DNNL_ARG_TO, s->rmem[1]}};
    return dnnl_memory_set_data_handle(s->rmem[0], (void *)B) == dnnl_success &&
           dnnl_memory_set_data_handle(s->rmem[1], c->bpack) == dnnl_success &&
           dnnl_primitive_execute(s->reorder, c->stream[0], 2, args) == dnnl_success &&
           dnnl_stream_wait(c->stream[0]) == dnnl_success;
}
