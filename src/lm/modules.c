/* modules.c — what the families' module trees share: the root that carries the model's state,
 * named children, numbered block lists, and the hooks of a child run around a fused op (what
 * dt_module_forward would do for it). */
#include "model_impl.h"

#include <stdio.h>
#include <stdlib.h>

void dt__lm_hook_pre(dt_module *m) {
    if (m->pre_hook) m->pre_hook(m, m->hook_user);
}

void dt__lm_hook_post(dt_module *m) {
    if (m->post_hook) m->post_hook(m, m->hook_user);
}

static dt_tensor *container_forward(dt_module *m, dt_tensor *x) {
    (void)x;
    dt_error(DT_ERR_STATE, "%s '%s' is a container and has no forward; hint: call its children",
             m->type, m->name);
    return NULL;
}

dt_module *dt__lm_container(const char *type) {
    return dt_module_new(type, container_forward);
}

dt_module *dt__lm_block_list(const dt_lm_config *cfg, int64_t n,
                             dt_module *(*make)(const dt_lm_config *)) {
    dt_module *list = dt__lm_container("ModuleList");
    for (int64_t i = 0; i < n && list; i++) {
        char name[24];
        snprintf(name, sizeof name, "%lld", (long long)i);
        dt_module *blk = make(cfg);
        if (blk) blk->iconf[0] = i; /* the layer's index, for its KV cache slot */
        if (dt_module_add_child(list, name, blk) < 0) {
            dt_module_free(blk);
            dt_module_free(list);
            list = NULL;
        }
    }
    return list;
}

dt__lm_state *dt__lm_state_of(dt_module *m) {
    while (m->parent) m = m->parent;
    return m->impl;
}

static void root_destroy(dt_module *m) {
    free(m->impl);
    m->impl = NULL;
}

dt_module *dt__lm_root(const char *type, dt_forward_fn forward, const dt_lm_config *cfg,
                       const dt__lm_arch *a) {
    dt_module *root = dt_module_new(type, forward);
    dt__lm_state *st = calloc(1, sizeof *st);
    if (!root || !st) {
        free(st);
        dt_module_free(root);
        dt_error(DT_ERR_OOM, "%s: out of memory", type);
        return NULL;
    }
    st->cfg = *cfg;
    st->arch = a;
    root->impl = st;
    root->destroy = root_destroy;
    return root;
}

dt_status dt__lm_check_ids(const dt_tensor *ids, int64_t p0, int64_t max_pos) {
    char s[96];
    if ((ids->dtype != DT_DTYPE_I32 && ids->dtype != DT_DTYPE_I64) || ids->ndim != 2)
        return dt_error(DT_ERR_INVALID, "lm: ids must be (B, T) i32 or i64, got %s",
                        dt_shape_str(ids, s, sizeof s));
    if (p0 + ids->shape[1] > max_pos)
        return dt_error(DT_ERR_INVALID,
                        "lm: %lld positions exceed the model's %lld; hint: use "
                        "shorter windows",
                        (long long)(p0 + ids->shape[1]), (long long)max_pos);
    return DT_OK;
}

dt_module *dt__lm_root_with(dt_module *root, const char *body_name, dt_module *body,
                            const dt_lm_config *c) {
    if (c->tied)
        return dt__module_with_children(root, 1, (const char *[]){body_name},
                                        (dt_module *[]){body});
    return dt__module_with_children(
        root, 2, (const char *[]){body_name, "lm_head"},
        (dt_module *[]){body, dt_nn_linear(c->d_model, c->vocab, false)});
}

dt_tensor *dt__lm_head(dt_module *root, dt_module *emb, dt_tensor *x) {
    if (!dt__lm_state_of(root)->cfg.tied) return dt_module_forward(root->children[1], x);
    if (!x) return NULL;
    dt__lm_hook_pre(emb); /* the embedding's hooks (a ZeRO-3 gather) cover its use as the head */
    dt_tensor *y = dt_linear(x, emb->params[0].t, NULL);
    dt__lm_hook_post(emb);
    return y;
}

dt_status dt__lm_check_vocab(const int32_t *ids, size_t n, int64_t vocab, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return dt_error(DT_ERR_INVALID, "%s: id %d at %zu is outside the vocabulary of %lld",
                            what, ids[i], i, (long long)vocab);
    return DT_OK;
}
