/* validate.c — a classifier's validation pass for a hand-written loop: loss and accuracy over
 * a loader's epoch, in evaluation mode and without gradients. */
#include "dtrain/trial.h"

dt_metrics dt_validate_classifier(dt_module *net, dt_loader *val) {
    dt_ctx *ctx = dt_module_ctx(net);
    if (!ctx || !val) {
        dt_error(DT_ERR_INVALID, "dt_validate_classifier: needs a built module and a loader");
        return dt_metrics_error();
    }
    bool training = dt_ctx_training(ctx), grad = dt_set_grad_enabled(ctx, false);
    dt_ctx_set_training(ctx, false);
    double loss = 0, right = 0, n = 0; /* sums weighted by each batch's records */
    dt_batch *b = NULL;
    dt_status st = dt_loader_start_epoch(val, 0, 0);
    while (!st && !(st = dt_loader_next(val, &b)) && b) {
        dt_ctx_reset(ctx);
        dt_tensor *x = dt_batch_get(b, "x"), *y = dt_batch_get(b, "y");
        dt_tensor *logits = x && y ? dt_module_forward(net, x) : NULL;
        dt_tensor *l = logits ? dt_cross_entropy(logits, y, -100) : NULL;
        if (!l) {
            st = x && y ? dt_last_status()
                        : dt_error(DT_ERR_INVALID, "dt_validate_classifier: the batches need "
                                                   "fields \"x\" and \"y\"");
            break;
        }
        loss += dt_item(l) * b->records;
        right += dt_accuracy(logits, y) * b->records;
        n += b->records;
    }
    dt_set_grad_enabled(ctx, grad);
    dt_ctx_set_training(ctx, training);
    if (st) return dt_metrics_error();
    dt_metrics m = dt_metrics_scalar("validation_loss", loss / n);
    dt_metrics_set(&m, "accuracy", right / n);
    return m;
}
