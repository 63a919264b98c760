/* bench_impl.h — internals shared by the bench module's files (src/bench/bench*.c): the
 * engine and pipeline steps that bench.c dispatches to, and small measuring helpers. */
#ifndef DT_BENCH_IMPL_H
#define DT_BENCH_IMPL_H

#include "bench/bench.h"
#include "dtrain/nn.h"

/* A result (root, world 1) holding a copy of `o` settled for `job` by dt_bench_resolve; NULL
 * with the error set. */
dt_bench_result *dt__bench_result_new(const dt_bench_opts *o, dt_bench_job job);
/* Sort n times ascending (the medians are read from the sorted array). */
void dt__bench_sort(double *ms, int n);
/* A field of /proc/self/status in bytes ("VmHWM:" = peak RSS, "VmRSS:" = current); -1 if
 * unreadable. */
int64_t dt__bench_proc_bytes(const char *field);

/* An engine step (dt_engine_*) of `net` on every rank of the job: fills r's times, per_s and
 * the ranks' figures on rank 0. `net` stays the caller's. Errors as dt_bench_train; after a
 * failed step in a job of several ranks the engine is not freed (that would wait for the
 * other ranks), the process is expected to exit. */
dt_status dt__bench_engine(const dt_bench_opts *o, dt_module *net, dt_tensor *x, dt_tensor *y,
                           bool gpt, int64_t rss0, dt_bench_result *r);
/* A gpt pipeline step over o->micro_batches micro-batches of (x, y) on every rank; errors as
 * dt__bench_engine. */
dt_status dt__bench_pipe(const dt_bench_opts *o, const dt_tensor *x, const dt_tensor *y,
                         dt_bench_result *r);

#endif
