/* eval.c — the evaluation rule of `dtrain lm eval`, on token ids: consecutive non-overlapping
 * windows of seq tokens (0: the model's positions), a last shorter window kept when it has at
 * least 2 tokens; each window predicts its tokens 2..len from those before; the loss is the
 * mean natural-log cross-entropy over every predicted token, summed in double. */
#include "model_impl.h"

#include <math.h>
#include <string.h>

/* Sum over the window's predictions of -log softmax(logits)[target], in double. */
static dt_status window(dt_lm *m, const int32_t *w, int64_t len, double *sum) {
    dt_ctx *ctx = dt_module_ctx(m->root);
    // ids (1, len-1): every token but the last; targets are w[1..len)
    dt_tensor *ids = dt_tensor_new(ctx, DT_DTYPE_I32, 2, (int64_t[]){1, len - 1});
    if (ids) memcpy(ids->data, w, (size_t)(len - 1) * sizeof *w);
    dt_tensor *logits = dt_contiguous(dt_module_forward(m->root, ids)); // (1, len-1, V)
    if (!logits) return dt_last_status();
    int64_t V = logits->shape[2];
    for (int64_t t = 0; t < len - 1; t++) {
        const float *row = (const float *)logits->data + t * V;
        float mx = row[0];
        for (int64_t v = 1; v < V; v++) mx = row[v] > mx ? row[v] : mx;
        double z = 0;
        for (int64_t v = 0; v < V; v++) z += exp((double)row[v] - mx);
        *sum += log(z) + mx - (double)row[w[t + 1]];
    }
    dt_ctx_reset(ctx);
    return DT_OK;
}

dt_status dt_lm_eval_ids(dt_lm *m, const int32_t *ids, size_t n, int64_t seq, double *mean_loss,
                         int64_t *predicted) {
    if (!m || (!ids && n) || !mean_loss || seq < 0)
        return dt_error(DT_ERR_INVALID, "lm eval: needs a model, ids and seq >= 0");
    if (!dt_module_ctx(m->root)) return dt_error(DT_ERR_STATE, "lm eval: the model is not built");
    if (seq == 0) seq = m->cfg.max_pos;
    if (seq > m->cfg.max_pos || seq < 2)
        return dt_error(DT_ERR_INVALID,
                        "lm eval: windows of %lld tokens; the model takes 2 .. "
                        "%lld",
                        (long long)seq, (long long)m->cfg.max_pos);
    if (dt__lm_check_vocab(ids, n, m->cfg.vocab, "lm eval") != DT_OK) return dt_last_status();
    dt_ctx *ctx = dt_module_ctx(m->root);
    bool grad = dt_set_grad_enabled(ctx, false), training = dt_ctx_training(ctx);
    dt_ctx_set_training(ctx, false);
    double sum = 0;
    int64_t count = 0;
    dt_status st = DT_OK;
    for (size_t s = 0; s < n && !st; s += (size_t)seq) {
        int64_t len = (int64_t)(n - s) < seq ? (int64_t)(n - s) : seq;
        if (len < 2) break;
        st = window(m, ids + s, len, &sum);
        count += len - 1;
    }
    dt_set_grad_enabled(ctx, grad);
    dt_ctx_set_training(ctx, training);
    if (st) return st;
    if (!count)
        return dt_error(DT_ERR_INVALID,
                        "lm eval: %zu tokens make no window of 2 or more; hint: "
                        "evaluate a longer text",
                        n);
    *mean_loss = sum / (double)count;
    if (predicted) *predicted = count;
    return DT_OK;
}
