/* loglines_impl.h — a run's printed bytes cut into lines for on_log (loglines.c), shared by the
 * launchers: the local one reads pipes, the Slurm one tails the job's output file.
 *
 * A line that starts with mpirun's --tag-output prefix "[jobid,rank]<stdout>:" (or <stderr>,
 * <stddiag>) is given that rank, prefix stripped; an untagged line is rank 0 in a
 * single-process run and -1 (mpirun's own) in a run under mpirun (via_mpirun, set by the
 * launcher or by the first tagged line). A partial last line is delivered at EOF; a line longer
 * than DT__LINE_MAX is delivered in pieces, each with the rank of the first. */
#ifndef DT_RUNNER_LOGLINES_IMPL_H
#define DT_RUNNER_LOGLINES_IMPL_H

#include "launch/launcher.h"

#include <stdbool.h>
#include <stddef.h>

#define DT__LINE_MAX (16 * 1024)

/* Where a run's lines go. */
typedef struct dt__line_sink {
    int64_t trial_id;
    dt_log_fn on_log; /* NULL: lines are dropped */
    void *log_arg;
    bool via_mpirun; /* untagged lines are mpirun's own: rank -1 */
} dt__line_sink;

/* The sink of a run started from `spec` (its trial id and on_log). */
dt__line_sink dt__line_sink_of(const dt_launch_spec *spec, bool via_mpirun);

/* One output stream's bytes not delivered yet: append to buf[len ..DT__LINE_MAX). */
typedef struct dt__lines {
    size_t len;
    bool cont;     /* the last delivery was a piece of a longer line */
    int cont_rank; /* its rank, for the next piece */
    char buf[DT__LINE_MAX + 1];
} dt__lines;

/* Deliver the complete lines in b->buf to the sink (all of it at EOF, a piece when it is
 * full) and keep the rest. Cannot fail. */
void dt__lines_split(dt__line_sink *s, dt__lines *b, bool eof);

#endif
