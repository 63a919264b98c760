/* nn_iface.h — the nn layer's internal interface to the engine (not public API): moving a
 * built module onto buffers the engine owns. Only this header of the nn layer's internals may
 * be included outside src/nn/ (tools/check_layers.sh enforces it). */
#ifndef DT_NN_IFACE_H
#define DT_NN_IFACE_H

#include "dtrain/nn.h"
#include "base/base_impl.h"

/* Move a built module onto other flat buffers of the same length (dt_module_flat_params' n):
 * every parameter view and gradient view is re-pointed at the same offsets in `params` /
 * `grads`. The caller has already copied whatever values it wants there. The module's current
 * buffers are freed if it owns them. `owned` says whether the module frees the new ones (with
 * dt_mem_free on its device: PARAMS / GRADS, n floats each) or the caller keeps them and must
 * rebind again before freeing them. */
/* m with kids[0..n) added as children names[0..n) in order (all taken); on any failure
 * everything is freed and NULL returned. For builders of module trees (nn, lm). */
dt_module *dt__module_with_children(dt_module *m, int n, const char *const *names,
                                    dt_module **kids);
void dt__module_rebind(dt_module *root, float *params, float *grads, bool owned);

#endif
