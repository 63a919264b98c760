/* loglines.c — a run's printed bytes cut into lines with their ranks (loglines_impl.h). */
#include "loglines_impl.h"

#include <string.h>

dt__line_sink dt__line_sink_of(const dt_launch_spec *spec, bool via_mpirun) {
    return (dt__line_sink){.trial_id = spec->trial_id,
                           .on_log = spec->on_log,
                           .log_arg = spec->log_arg,
                           .via_mpirun = via_mpirun};
}

/* The rank of mpirun's --tag-output prefix "[jobid,rank]<stdout>:" at the start of `s`, and
 * the prefix's length in *skip; -1 when `s` does not start with one. */
static int tag_rank(const char *s, size_t n, size_t *skip) {
    size_t i = 0;
    if (n < 2 || s[i++] != '[') return -1;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    if (i == 1 || i >= n || s[i++] != ',') return -1;
    size_t r0 = i;
    long rank = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9' && rank < 1000000000L)
        rank = rank * 10 + (s[i++] - '0');
    if (i == r0 || i >= n || s[i++] != ']') return -1;
    static const char *const kinds[] = {"<stdout>:", "<stderr>:", "<stddiag>:"};
    for (int k = 0; k < 3; k++) {
        size_t kl = strlen(kinds[k]);
        if (n - i >= kl && !memcmp(s + i, kinds[k], kl)) {
            *skip = i + kl;
            return (int)rank;
        }
    }
    return -1;
}

/* Hand one line (s[0..n), NUL-terminated by the caller) to on_log; `piece`: more of the same
 * line follows. */
static void deliver(dt__line_sink *sk, dt__lines *b, char *s, size_t n, bool piece) {
    int rank;
    size_t skip = 0;
    if (b->cont) {
        rank = b->cont_rank;
    } else {
        rank = tag_rank(s, n, &skip);
        if (rank >= 0)
            sk->via_mpirun = true;
        else
            rank = sk->via_mpirun ? -1 : 0;
    }
    b->cont = piece;
    b->cont_rank = rank;
    if (sk->on_log) sk->on_log(sk->log_arg, sk->trial_id, rank, s + skip);
}

void dt__lines_split(dt__line_sink *sk, dt__lines *b, bool eof) {
    size_t start = 0;
    for (size_t i = 0; i < b->len; i++) {
        if (b->buf[i] != '\n') continue;
        b->buf[i] = 0;
        deliver(sk, b, b->buf + start, i - start, false);
        start = i + 1;
    }
    size_t rest = b->len - start;
    if (rest && (eof || rest == DT__LINE_MAX)) {
        b->buf[start + rest] = 0;
        deliver(sk, b, b->buf + start, rest, !eof);
        start += rest;
    }
    memmove(b->buf, b->buf + start, b->len - start);
    b->len -= start;
}
