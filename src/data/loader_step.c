/* loader_step.c — a loader read by global step, for a hand-written loop that counts steps
 * across epochs and may resume at any of them. */
#include "dtrain/data.h"

dt_status dt_loader_next_step(dt_loader *l, int64_t step, dt_batch **out) {
    if (out) *out = NULL;
    if (!l || !out || step < 0)
        return dt_error(DT_ERR_INVALID, "dt_loader_next_step: needs a loader, a batch pointer "
                                        "and a step >= 0");
    int64_t nb = dt_loader_num_batches(l);
    if (nb < 0) return dt_last_status();
    if (nb == 0)
        return dt_error(DT_ERR_STATE, "dt_loader_next_step: the loader has no batch per epoch; "
                                      "hint: a dataset of at least one batch");
    int64_t epoch, pos;
    dt_loader_position(l, &epoch, &pos);
    dt_status st = DT_OK;
    if (epoch != step / nb || pos != step % nb) st = dt_loader_start_epoch(l, step / nb, step % nb);
    return st ? st : dt_loader_next(l, out);
}
