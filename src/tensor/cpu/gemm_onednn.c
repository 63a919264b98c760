/* gemm_onednn.c — the per-context cache of oneDNN matmul primitives behind the GEMM's tiles.
 *
 * A primitive is made once per tile geometry (dt__gemm_key: shape, strides, transposes, scales,
 * dtype, packed B) with oneDNN capped to one thread, so its plan never depends on the thread
 * count, and kept in the context's cache (CACHE_SLOTS, round-robin eviction). Each thread of
 * a tile loop runs its tiles on its own stream with its own user-managed scratchpad, both kept
 * here; so are the work buffers the tile loops grow on demand (dt__gemm_grow: operand copies,
 * per-thread blocks, packed B), all charged to DT_MEM_OTHER and freed with the context
 * (dt__gemm_cache_free). The tile loops themselves are in gemm_f32_onednn.c and gemm_bf16.c. */
#include "gemm_impl.h"
#include "base/base_impl.h"

#include <omp.h>
#include <stdlib.h>

static void slot_release(dt__gemm_slot *s) {
    dnnl_primitive_destroy(s->prim);
    if (s->mem)
        for (int t = 0; t < MAX_THREADS; t++)
            for (int j = 0; j < 4; j++)
                if (s->mem[t][j]) dnnl_memory_destroy(s->mem[t][j]);
    free(s->mem);
    s->mem = NULL;
    if (s->reorder) dnnl_primitive_destroy(s->reorder);
    for (int j = 0; j < 2; j++)
        if (s->rmem[j]) dnnl_memory_destroy(s->rmem[j]);
    s->reorder = NULL;
    s->rmem[0] = s->rmem[1] = NULL;
    s->used = false;
}

void dt__gemm_cache_free(dt_ctx *ctx) {
    struct dt_gemm_cache *c = ctx->gemm_cache;
    if (!c) return;
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (c->slot[i].used) slot_release(&c->slot[i]);
    for (int i = 0; i < MAX_THREADS; i++)
        if (c->stream[i]) dnnl_stream_destroy(c->stream[i]);
    if (c->engine) dnnl_engine_destroy(c->engine);
    dt_mem_free(ctx->dev, DT_MEM_OTHER, c->abuf, c->acap);
    dt_mem_free(ctx->dev, DT_MEM_OTHER, c->bbuf, c->bcap);
    dt_mem_free(ctx->dev, DT_MEM_OTHER, c->tblk, c->tcap);
    dt_mem_free(ctx->dev, DT_MEM_OTHER, c->bpack, c->bpcap);
    dt_mem_free(ctx->dev, DT_MEM_OTHER, c->scratch, c->scratch_cap);
    dt_mem_release(ctx->dev, DT_MEM_OTHER, c->blas_charged);
    free(c);
    ctx->gemm_cache = NULL;
}

/* Made once per context; threads of a parallel region (a convolution's per-image GEMMs on
 * OpenBLAS) may ask for it at the same time, so the first one makes it under a lock. */
struct dt_gemm_cache *dt__gemm_cache_of(dt_ctx *ctx) {
    struct dt_gemm_cache *c;
#pragma omp atomic read
    c = ctx->gemm_cache;
    if (c) return c;
#pragma omp critical(dt_gemm_cache_make)
    {
        c = ctx->gemm_cache;
        if (!c && (c = calloc(1, sizeof *c)) != NULL) {
            if (dnnl_engine_create(&c->engine, dnnl_cpu, 0) != dnnl_success) c->broken = true;
#pragma omp atomic write
            ctx->gemm_cache = c;
        }
    }
    return c;
}

/* *buf with room for `need` bytes (*cap bytes now); what it held is not kept. NULL when out of
 * memory (the old buffer stays). */
void *dt__gemm_grow(dt_ctx *ctx, void **buf, size_t *cap, size_t need) {
    if (need <= *cap) return *buf;
    void *nb = dt_mem_alloc(ctx->dev, DT_MEM_OTHER, need);
    if (!nb) return NULL;
    dt_mem_free(ctx->dev, DT_MEM_OTHER, *buf, *cap);
    *buf = nb;
    *cap = need;
    return nb;
}

/* The primitive for one tile geometry, made on first use. It is created with oneDNN capped to
 * one thread, so its plan (blocking, no split of K across threads) is the same whatever the
 * thread count, and it runs sequentially inside the tile loop's parallel region. */
static dt__gemm_slot *get_prim(struct dt_gemm_cache *c, const dt__gemm_key *k) {
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (c->slot[i].used && !memcmp(&c->slot[i].key, k, sizeof *k)) return &c->slot[i];
    dt__gemm_slot *s = &c->slot[c->next];
    c->next = (c->next + 1) % CACHE_SLOTS;
    if (s->used) slot_release(s);
    dnnl_data_type_t ot = k->f32 ? dnnl_f32 : dnnl_bf16;
    dnnl_dims_t ad = {k->M, k->K}, bd = {k->K, k->N}, cd = {k->M, k->N};
    /* a stored row-major operand, or its transpose read in place */
    dnnl_dims_t as = {k->ta ? 1 : k->lda, k->ta ? k->lda : 1};
    dnnl_dims_t bs = {k->tb ? 1 : k->ldb, k->tb ? k->ldb : 1}, cs = {k->ldc, 1};
    dnnl_memory_desc_init_by_strides(&s->a_md, 2, ad, ot, as);
    dnnl_memory_desc_init_by_strides(&s->b_md, 2, bd, ot, bs);
    s->bp_md = s->b_md;
    if (k->packed_b) dnnl_memory_desc_init_by_tag(&s->b_md, 2, bd, ot, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_strides(&s->c_md, 2, cd, dnnl_f32, cs);
    dnnl_matmul_desc_t md;
    dnnl_primitive_attr_t attr;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    bool ok = dnnl_matmul_desc_init(&md, &s->a_md, &s->b_md, NULL, &s->c_md) == dnnl_success &&
              dnnl_primitive_attr_create(&attr) == dnnl_success;
    if (!ok) return NULL;
    dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (k->alpha != 1.f) dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha);
    if (k->beta != 0.f) {
        dnnl_post_ops_create(&po);
        dnnl_post_ops_append_sum(po, k->beta);
        dnnl_primitive_attr_set_post_ops(attr, po);
    }
    int outer = omp_get_max_threads();
    omp_set_num_threads(1);
    ok = dnnl_primitive_desc_create(&pd, &md, attr, c->engine, NULL) == dnnl_success &&
         dnnl_primitive_create(&s->prim, pd) == dnnl_success;
    omp_set_num_threads(outer);
    if (ok) {
        if (k->packed_b) s->b_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        s->s_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        s->scratch_bytes = dnnl_memory_desc_get_size(&s->s_md);
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    if (ok && !(s->mem = calloc(MAX_THREADS, sizeof *s->mem))) {
        dnnl_primitive_destroy(s->prim);
        ok = false;
    }
    if (!ok) return NULL;
    s->key = *k;
    s->used = true;
    return s;
}

/* Per-thread streams and scratchpads of at least `bytes` for nthr threads. */
bool dt__gemm_thread_resources(dt_ctx *ctx, struct dt_gemm_cache *c, int nthr, size_t bytes) {
    for (int t = 0; t < nthr; t++)
        if (!c->stream[t] &&
            dnnl_stream_create(&c->stream[t], c->engine, dnnl_stream_default_flags) != dnnl_success)
            return false;
    bytes = (bytes + 4095) / 4096 * 4096;
    if (bytes > c->scratch_each || (size_t)nthr * c->scratch_each > c->scratch_cap) {
        size_t each = bytes > c->scratch_each ? bytes : c->scratch_each;
        char *nb = dt_mem_alloc(ctx->dev, DT_MEM_OTHER, (size_t)nthr * each);
        if (!nb) return false;
        dt_mem_free(ctx->dev, DT_MEM_OTHER, c->scratch, c->scratch_cap);
        c->scratch = nb;
        c->scratch_each = each;
        c->scratch_cap = (size_t)nthr * each;
    }
    return true;
}

/* One tile GEMM on thread `tid`'s stream and scratchpad. The slot's memory objects of this
 * thread are made on first use and re-pointed after (creating four per tile cost more than
 * small tiles' arithmetic). */
bool dt__gemm_run_tile(struct dt_gemm_cache *c, dt__gemm_slot *s, int tid, const void *a,
                       const void *b, float *C) {
    dnnl_memory_t *m = s->mem[tid];
    const dnnl_memory_desc_t *md[4] = {&s->a_md, &s->b_md, &s->c_md, &s->s_md};
    void *h[4] = {(void *)a, (void *)b, C, c->scratch + (size_t)tid * c->scratch_each};
    for (int j = 0; j < 4; j++) {
        if (!m[j] && dnnl_memory_create(&m[j], md[j], c->engine, h[j]) != dnnl_success) {
            m[j] = NULL;
            return false;
        }
        if (dnnl_memory_set_data_handle(m[j], h[j]) != dnnl_success) return false;
    }
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, m[0]},
                               {DNNL_ARG_WEIGHTS, m[1]},
                               {DNNL_ARG_DST, m[2]},
                               {DNNL_ARG_SCRATCHPAD, m[3]}};
    return dnnl_primitive_execute(s->prim, c->stream[tid], 4, args) == dnnl_success &&
           dnnl_stream_wait(c->stream[tid]) == dnnl_success;
}

/* The primitives of a tile plan's (up to four) tile shapes: full or last along each dim.
 * `base` (memset before it was filled: padding takes part in the lookup's memcmp) gives K,
 * the strides, transposes, scales and dtype; each shape sets M and N, and lda / ldb / ldc
 * become the tile's own size when that operand is copied to a dense per-thread block. Also
 * returns the largest scratchpad. */
bool dt__gemm_tile_prims(struct dt_gemm_cache *c, const dt__gemm_plan *p, int64_t M, int64_t N,
                         const dt__gemm_key *base, bool lda_is_tm, bool ldb_is_tn, bool ldc_is_tn,
                         dt__gemm_slot *ps[2][2], size_t *scratch) {
    *scratch = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            dt__gemm_key k;
            memcpy(&k, base, sizeof k);
            k.M = i ? M - (p->mt - 1) * p->tm : p->tm;
            k.N = j ? N - (p->nt - 1) * p->tn : p->tn;
            if (lda_is_tm) k.lda = k.M;
            if (ldb_is_tn) k.ldb = k.N;
            if (ldc_is_tn) k.ldc = k.N;
            if (!(ps[i][j] = get_prim(c, &k))) return false;
            if (ps[i][j]->scratch_bytes > *scratch) *scratch = ps[i][j]->scratch_bytes;
        }
    return true;
}
