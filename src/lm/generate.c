/* generate.c — generation with a KV cache: the prompt in one forward, then one token per
 * forward, each layer's keys and values kept in the cache so a step computes only the newest
 * position; the next token greedy (temperature 0) or sampled after temperature, top-k and
 * top-p, in transformers' order, from dtrain's counter RNG. */
#include "model_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

dt_tensor *dt__lm_cached_attention(dt__lm_cache *c, int layer, dt_tensor *q, dt_tensor *k,
                                   dt_tensor *v) {
    k = dt_contiguous(k), v = dt_contiguous(v);
    if (!q || !k || !v) return NULL;
    // q (1, T, Hq, hd); k, v (1, T, Hkv, hd) go to the cache (1, cap, Hkv, hd) at len
    int64_t T = k->shape[1], Hkv = k->shape[2], hd = k->shape[3], S = c->len + T;
    if (k->shape[0] != 1 || S > c->cap) {
        dt_error(DT_ERR_INVALID, "lm: the KV cache holds one sequence of %lld positions",
                 (long long)c->cap);
        return NULL;
    }
    size_t row = (size_t)(Hkv * hd), bytes = (size_t)T * row * sizeof(float);
    memcpy((float *)c->k[layer]->data + c->len * row, k->data, bytes);
    memcpy((float *)c->v[layer]->data + c->len * row, v->data, bytes);
    // the first S positions of the cache as (1, S, Hkv, hd); query t sits at position len + t
    int64_t shape[4] = {1, S, Hkv, hd};
    dt_tensor *ks = dt_tensor_wrap(q->ctx, DT_DTYPE_F32, 4, shape, c->k[layer]->data);
    dt_tensor *vs = dt_tensor_wrap(q->ctx, DT_DTYPE_F32, 4, shape, c->v[layer]->data);
    dt_tensor *y = dt_attention(q, ks, vs, true); // (1, T, Hq, hd)
    return y ? dt_reshape(y, 3, (int64_t[]){1, T, y->shape[2] * hd}) : NULL;
}

dt_lm_gen_opts dt_lm_gen_defaults(void) {
    return (dt_lm_gen_opts){.temperature = 0.f, .top_k = 0, .top_p = 0.f, .seed = 0, .eos_id = -1};
}

typedef struct scored {
    float l;
    int32_t i;
} scored;

static int by_logit_desc(const void *a, const void *b) {
    const scored *x = a, *y = b;
    return x->l < y->l ? 1 : x->l > y->l ? -1 : (x->i > y->i) - (x->i < y->i);
}

/* The next token from logits (V): argmax, or a draw after temperature, top-k, top-p. */
static int32_t choose(const float *logits, int64_t V, const dt_lm_gen_opts *o, dt_rng *rng,
                      scored *buf) {
    int64_t best = 0;
    for (int64_t i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    if (o->temperature <= 0.f) return (int32_t)best;
    for (int64_t i = 0; i < V; i++) buf[i] = (scored){logits[i] / o->temperature, (int32_t)i};
    qsort(buf, (size_t)V, sizeof *buf, by_logit_desc);
    int64_t keep = o->top_k > 0 && o->top_k < V ? o->top_k : V;
    double sum = 0;
    for (int64_t i = 0; i < keep; i++) sum += exp((double)(buf[i].l - buf[0].l));
    if (o->top_p > 0.f && o->top_p < 1.f) { /* the fewest tokens whose mass reaches top_p */
        double acc = 0;
        int64_t n = 0;
        while (n < keep && acc < o->top_p * sum) acc += exp((double)(buf[n++].l - buf[0].l));
        keep = n > 0 ? n : 1, sum = acc > 0 ? acc : 1;
    }
    double u = dt_rng_uniform(rng) * sum, acc = 0;
    for (int64_t i = 0; i < keep; i++) {
        acc += exp((double)(buf[i].l - buf[0].l));
        if (u < acc) return buf[i].i;
    }
    return buf[keep - 1].i;
}

static void cache_free(dt__lm_cache *c, int64_t layers) {
    for (int64_t i = 0; i < layers && c->k; i++) {
        dt_tensor_free(c->k[i]);
        dt_tensor_free(c->v[i]);
    }
    free(c->k);
    free(c->v);
}

static dt_status cache_new(dt__lm_cache *c, dt_ctx *ctx, const dt_lm_config *cfg, int64_t cap) {
    int64_t L = cfg->n_layer, shape[4] = {1, cap, cfg->n_kv_head, cfg->head_dim};
    *c = (dt__lm_cache){.cap = cap};
    c->k = calloc((size_t)L + 1, sizeof *c->k);
    c->v = calloc((size_t)L + 1, sizeof *c->v);
    for (int64_t i = 0; i < L && c->k && c->v; i++) {
        c->k[i] = dt_tensor_new_heap(ctx, DT_DTYPE_F32, 4, shape, DT_MEM_ACTIVATIONS);
        c->v[i] = dt_tensor_new_heap(ctx, DT_DTYPE_F32, 4, shape, DT_MEM_ACTIVATIONS);
        if (!c->k[i] || !c->v[i]) return dt_last_status();
    }
    return c->k && c->v ? DT_OK : dt_error(DT_ERR_OOM, "lm: out of memory for the KV cache");
}

/* One forward of feed[0..T) through the cache: the next token into *next. A single token
 * goes through the decoder when there is one. */
static dt_status step(dt_lm *m, dt__lm_decoder *dec, dt__lm_cache *cache, const int32_t *feed,
                      int64_t T, const dt_lm_gen_opts *o, dt_rng *rng, scored *buf,
                      int32_t *next) {
    if (dec && T == 1) {
        *next = choose(dt__lm_decode(dec, cache, feed[0]), m->cfg.vocab, o, rng, buf);
        return DT_OK;
    }
    dt_ctx *ctx = dt_module_ctx(m->root);
    dt_tensor *ids = dt_tensor_new(ctx, DT_DTYPE_I32, 2, (int64_t[]){1, T});
    if (ids) memcpy(ids->data, feed, (size_t)T * sizeof *feed);
    dt_tensor *logits = dt_contiguous(dt_module_forward(m->root, ids)); // (1, T, V)
    if (!logits) return dt_last_status();
    int64_t V = logits->shape[2];
    *next = choose((const float *)logits->data + (T - 1) * V, V, o, rng, buf);
    dt_ctx_reset(ctx);
    return DT_OK;
}

static dt_status check_args(const dt_lm *m, const int32_t *prompt, size_t n_prompt, size_t n,
                            const dt_lm_gen_opts *o) {
    if (!m || !prompt || n_prompt == 0 || !o)
        return dt_error(DT_ERR_INVALID, "lm generate: needs a model and a prompt of >= 1 token");
    if (!dt_module_ctx(m->root))
        return dt_error(DT_ERR_STATE, "lm generate: the model is not built");
    if (n_prompt + n > (size_t)m->cfg.max_pos)
        return dt_error(DT_ERR_INVALID,
                        "lm generate: %zu prompt + %zu new tokens exceed the "
                        "model's %lld positions; hint: generate fewer tokens",
                        n_prompt, n, (long long)m->cfg.max_pos);
    return dt__lm_check_vocab(prompt, n_prompt, m->cfg.vocab, "lm generate: prompt");
}

dt_status dt_lm_generate(dt_lm *m, const int32_t *prompt, size_t n_prompt, size_t n,
                         const dt_lm_gen_opts *opts, int32_t **out, size_t *out_n) {
    dt_lm_gen_opts def = dt_lm_gen_defaults();
    const dt_lm_gen_opts *o = opts ? opts : &def;
    dt_status st = check_args(m, prompt, n_prompt, n, o);
    if (st) return st;
    dt_ctx *ctx = dt_module_ctx(m->root);
    int32_t *ids = malloc((n_prompt + n + 1) * sizeof *ids);
    scored *buf = malloc((size_t)m->cfg.vocab * sizeof *buf);
    dt__lm_cache cache = {0};
    st = !ids || !buf ? dt_error(DT_ERR_OOM, "lm generate: out of memory")
                      : cache_new(&cache, ctx, &m->cfg, (int64_t)(n_prompt + n));
    bool grad = dt_set_grad_enabled(ctx, false), training = dt_ctx_training(ctx);
    dt_ctx_set_training(ctx, false);
    dt_rng rng;
    dt_rng_init(&rng, o->seed);
    size_t len = n_prompt;
    if (!st) memcpy(ids, prompt, n_prompt * sizeof *ids);
    dt__lm_state_of(m->root)->cache = &cache;
    /* the decoding steps on the library's threads (dt_set_num_threads / OMP_NUM_THREADS): a
     * step reads every weight once, split by rows over the threads */
    dt__lm_decoder *dec =
        st ? NULL : dt__lm_decoder_new(m->root, (int64_t)(n_prompt + n), dt_get_num_threads());
    for (size_t i = 0; !st && i < n; i++) {
        const int32_t *feed = i == 0 ? ids : ids + len - 1;
        st = step(m, dec, &cache, feed, i == 0 ? (int64_t)n_prompt : 1, o, &rng, buf, &ids[len]);
        if (!st && ids[len++] == o->eos_id) break;
    }
    dt__lm_decoder_free(dec);
    dt__lm_state_of(m->root)->cache = NULL;
    cache_free(&cache, m->cfg.n_layer);
    dt_set_grad_enabled(ctx, grad);
    dt_ctx_set_training(ctx, training);
    free(buf);
    if (st) {
        free(ids);
        return st;
    }
    *out = ids;
    *out_n = len;
    return DT_OK;
}
