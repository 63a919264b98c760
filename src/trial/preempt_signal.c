/* preempt_signal.c — SIGINT / SIGTERM as a request to stop, for the cores (local and
 * master-backed): the signal is recorded, the fit loop finishes its batch, checkpoints and
 * returns. Slurm's scancel and time limit, and a user's Ctrl-C, send these first. One process
 * runs one core at a time, so one record serves both. */
#include "dtrain/trialio.h"

#include <string.h>

static volatile sig_atomic_t g_signal;

static void on_signal(int sig) {
    g_signal = sig;
}

void dt_preempt_signals_catch(dt_preempt_signals *saved) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    g_signal = 0;
    sigaction(SIGINT, &sa, &saved->old_int);
    sigaction(SIGTERM, &sa, &saved->old_term);
}

void dt_preempt_signals_restore(const dt_preempt_signals *saved) {
    sigaction(SIGINT, &saved->old_int, NULL);
    sigaction(SIGTERM, &saved->old_term, NULL);
}

int dt_preempt_signal(void) {
    return g_signal;
}
