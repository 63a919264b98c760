/* master_thread.h — a master running in a thread of the test process, on a free loopback port
 * (port 0: the master picks one and writes it to HOME/master.port, read back here), stopped
 * through its shutdown route. */
#ifndef DT_TEST_MASTER_THREAD_H
#define DT_TEST_MASTER_THREAD_H

#include "fixtures/http_raw.h"
#include "master/master.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

typedef struct master_thread {
    pthread_t thread;
    dt_master_opts opts; /* the caller's, with port 0 */
    int port;            /* where it listens, once started */
} master_thread;

static void *master_thread_run(void *arg) {
    if (dt_master_run(arg) != DT_OK) fprintf(stderr, "master: %s\n", dt_last_error());
    return NULL;
}

/* Start the master of `opts` (home, host, routes...) and wait up to 4 s for its port. */
static bool master_thread_start(master_thread *m, const dt_master_opts *opts) {
    char p[512];
    snprintf(p, sizeof p, "%s/master.port", opts->home);
    unlink(p);
    m->opts = *opts;
    m->opts.port = 0;
    if (pthread_create(&m->thread, NULL, master_thread_run, &m->opts)) return false;
    for (int i = 0; i < 200; i++) {
        FILE *f = fopen(p, "r");
        if (f) {
            bool ok = fscanf(f, "%d", &m->port) == 1;
            fclose(f);
            if (ok) return true;
        }
        usleep(20000);
    }
    return false;
}

/* Stop it through POST /api/v1/master/shutdown (with the home's token) and join its thread. */
static void master_thread_stop(master_thread *m, const char *token) {
    char hdr[200], ans[4096];
    snprintf(hdr, sizeof hdr, "Content-Type: application/json\r\nAuthorization: Bearer %s\r\n",
             token);
    fx_http(m->opts.host, m->port, "POST", "/api/v1/master/shutdown", hdr, NULL, ans, sizeof ans);
    pthread_join(m->thread, NULL);
}

#endif
