/*
 * flops_profiler.c — the config's "flops_profiler": on global step `profile_step` the engine
 * measures every module's forward (FLOPs from the context's op counts, time, parameters) and
 * rank 0 prints DeepSpeed-style tables: the model totals, then per depth of the module tree the
 * `top_modules` modules with the most FLOPs (depth -1 in module_depth: every depth), to
 * `output_file` or standard output.
 *
 * The measurement chains itself in front of the module hooks already there (the engine's ZeRO
 * hooks, the user's) for that one step and takes itself out afterwards. A module's FLOPs and
 * time include its children's. Fused paths (a Linear followed by a ReLU) run unfused while
 * profiled, so the profile step computes the same values by slightly different kernels.
 */
#include "engine/engine_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct prof_entry {
    dt_module *m;
    char name[160];
    int depth;
    int64_t params;
    int64_t flops, calls;
    double seconds;
    int64_t f0; /* at the open call */
    double t0;
    dt_engine *e;
    dt_module_hook old_pre, old_post;
    void *old_user;
} prof_entry;

struct dt_engine_profile {
    prof_entry *ent;
    int n, cap;
    double t_fwd0, t_bwd0, t_step0;
    int64_t flops_fwd0, flops_bwd0;
};

static void prof_pre(dt_module *m, void *user) {
    prof_entry *p = user;
    if (p->old_pre) p->old_pre(m, p->old_user);
    p->f0 = dt_ctx_flops(p->e->ctx).forward;
    p->t0 = dt_now_sec();
}

static void prof_post(dt_module *m, void *user) {
    prof_entry *p = user;
    p->seconds += dt_now_sec() - p->t0;
    p->flops += dt_ctx_flops(p->e->ctx).forward - p->f0;
    p->calls++;
    if (p->old_post) p->old_post(m, p->old_user);
}

static int64_t subtree_params(const dt_module *m) {
    int64_t n = 0;
    for (int i = 0; i < m->n_params; i++) n += dt_numel(m->params[i].t);
    for (int i = 0; i < m->n_children; i++) n += subtree_params(m->children[i]);
    return n;
}

static int count(const dt_module *m) {
    int k = 1;
    for (int i = 0; i < m->n_children; i++) k += count(m->children[i]);
    return k;
}

static void install(struct dt_engine_profile *pr, dt_engine *e, dt_module *m, const char *name,
                    int depth) {
    prof_entry *p = &pr->ent[pr->n++];
    p->m = m;
    snprintf(p->name, sizeof p->name, "%s", name[0] ? name : "(model)");
    p->depth = depth;
    p->params = subtree_params(m);
    p->e = e;
    p->old_pre = m->pre_hook;
    p->old_post = m->post_hook;
    p->old_user = m->hook_user;
    m->pre_hook = prof_pre;
    m->post_hook = prof_post;
    m->hook_user = p;
    for (int i = 0; i < m->n_children; i++) {
        char sub[160];
        snprintf(sub, sizeof sub, "%s%s%s", name, name[0] ? "." : "", m->children[i]->name);
        install(pr, e, m->children[i], sub, depth + 1);
    }
}

dt_status dt__profiler_begin(dt_engine *e) {
    struct dt_engine_profile *pr = calloc(1, sizeof *pr);
    int n = count(e->model);
    if (!pr || !(pr->ent = calloc((size_t)n, sizeof *pr->ent))) {
        free(pr);
        return dt_error(DT_ERR_OOM, "flops profiler");
    }
    pr->cap = n;
    install(pr, e, e->model, "", 0);
    pr->t_fwd0 = e->t.forward_s;
    pr->t_bwd0 = e->t.backward_s;
    pr->t_step0 = e->t.step_s;
    dt_flops f = dt_ctx_flops(e->ctx);
    pr->flops_fwd0 = f.forward;
    pr->flops_bwd0 = f.backward;
    e->profile = pr;
    return DT_OK;
}

static int by_flops(const void *a, const void *b) {
    const prof_entry *x = *(prof_entry *const *)a, *y = *(prof_entry *const *)b;
    return x->flops < y->flops ? 1 : x->flops > y->flops ? -1 : strcmp(x->name, y->name);
}

static void human(char *buf, size_t n, double v, const char *unit) {
    const char *p[] = {"", "K", "M", "G", "T"};
    int k = 0;
    while (v >= 1000 && k < 4) v /= 1000, k++;
    snprintf(buf, n, "%.2f %s%s", v, p[k], unit);
}

static void report(const dt_engine *e, const struct dt_engine_profile *pr, FILE *f) {
    const dt_flops_profiler_config *c = &e->cfg.flops_profiler;
    double fwd = e->t.forward_s - pr->t_fwd0, bwd = e->t.backward_s - pr->t_bwd0;
    double step = e->t.step_s - pr->t_step0;
    dt_flops fl = dt_ctx_flops(e->ctx);
    /* the boundary reset the context's counters? then the hooks' sums are the forward total */
    int64_t ffwd = pr->ent[0].flops, fbwd = fl.backward - pr->flops_bwd0;
    if (fbwd < 0) fbwd = 2 * ffwd;
    char a[32], b[32], d[32];
    fprintf(f, "-------------------------- dtrain flops profiler --------------------------\n");
    fprintf(f, "profile step:                   %lld\n", (long long)c->profile_step);
    fprintf(f, "data-parallel ranks:            %d\n", e->W);
    fprintf(f, "micro-batch size per rank:      %lld\n",
            (long long)e->cfg.train_micro_batch_size_per_gpu);
    fprintf(f, "micro-batches in the step:      %lld\n",
            (long long)e->cfg.gradient_accumulation_steps);
    fprintf(f, "parameters:                     %lld\n", (long long)pr->ent[0].params);
    human(a, sizeof a, (double)ffwd, "FLOPs");
    human(b, sizeof b, (double)fbwd, "FLOPs");
    fprintf(f, "forward FLOPs (the step):       %s\n", a);
    fprintf(f, "backward FLOPs (the step):      %s\n", b);
    fprintf(f, "forward / backward / step time: %.2f / %.2f / %.2f ms\n", fwd * 1e3, bwd * 1e3,
            step * 1e3);
    human(d, sizeof d, (fwd + bwd) > 0 ? (double)(ffwd + fbwd) / (fwd + bwd) : 0, "FLOPS");
    fprintf(f, "forward + backward throughput:  %s\n\n", d);
    int maxdepth = 0;
    for (int i = 0; i < pr->n; i++)
        maxdepth = pr->ent[i].depth > maxdepth ? pr->ent[i].depth : maxdepth;
    int last = c->module_depth < 0 || c->module_depth > maxdepth ? maxdepth : (int)c->module_depth;
    const prof_entry **row = malloc((size_t)pr->n * sizeof *row);
    for (int depth = 0; row && depth <= last; depth++) {
        int k = 0;
        for (int i = 0; i < pr->n; i++)
            if (pr->ent[i].depth == depth && pr->ent[i].calls > 0) row[k++] = &pr->ent[i];
        if (!k) continue;
        qsort(row, (size_t)k, sizeof *row, by_flops);
        fprintf(f, "depth %d (top %lld by FLOPs):\n", depth, (long long)c->top_modules);
        for (int i = 0; i < k && i < c->top_modules; i++) {
            const prof_entry *p = row[i];
            human(a, sizeof a, (double)p->flops, "FLOPs");
            fprintf(f, "  %-40s %-12s params %10lld  %14s (%5.1f%%)  %8.3f ms  %lld calls\n",
                    p->name, p->m->type, (long long)p->params, a,
                    ffwd > 0 ? 100.0 * (double)p->flops / (double)ffwd : 0.0, p->seconds * 1e3,
                    (long long)p->calls);
        }
    }
    free(row);
    fprintf(f, "----------------------------------------------------------------------------\n");
}

void dt__profiler_end(dt_engine *e, bool print) {
    struct dt_engine_profile *pr = e->profile;
    if (!pr) return;
    const dt_flops_profiler_config *c = &e->cfg.flops_profiler;
    if (print && e->rank == 0) {
        FILE *f = c->output_file[0] ? fopen(c->output_file, "w") : stdout;
        if (!f) {
            dt_log(DT_LOG_WARN, "flops profiler: cannot write %s; printing instead",
                   c->output_file);
            f = stdout;
        }
        report(e, pr, f);
        if (f != stdout)
            fclose(f);
        else
            fflush(stdout);
    }
    /* out of the way again, in reverse order of installation */
    for (int i = pr->n - 1; i >= 0; i--) {
        prof_entry *p = &pr->ent[i];
        p->m->pre_hook = p->old_pre;
        p->m->post_hook = p->old_post;
        p->m->hook_user = p->old_user;
    }
    free(pr->ent);
    free(pr);
    e->profile = NULL;
}
