/*
 * master.c — the `dtrain master` process, in the order it runs:
 *   1. claim the home directory (a lock file: one master per store) and write the pid file;
 *   2. open the store (migrating it) and load the live experiments (exp.c, m_exp_recover);
 *   3. serve the REST API (http.c, the routes of api.c, then the caller's: the web UI) on its
 *      own thread, with the token (any address but loopback) and the CSRF check of http.h;
 *   4. run the scheduler (sched.c) on this thread until a signal or the shutdown route —
 *      this thread also launches every trial run, so a run's PR_SET_PDEATHSIG fires only
 *      when the master itself is gone;
 *   5. preempt the running trials (they checkpoint and stay ACTIVE for the next start),
 *      stop serving, close the store.
 */
#define _GNU_SOURCE
#include "master_impl.h"
#include "det_impl.h"

#include "base/base_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS 10 /* between scheduler passes; a child's exit wakes the scheduler at once */
#define STOP_GRACE_S 20.0
#define TOKEN_HEX 64 /* the master token: 32 random bytes as hex, one line in master.token */

static volatile sig_atomic_t g_signal;
static int g_wake[2] = {-1, -1}; /* SIGCHLD writes here: a run ended, schedule now */

static void on_signal(int sig) {
    g_signal = sig;
}

static void on_child(int sig) {
    (void)sig;
    int saved = errno;
    if (g_wake[1] >= 0) (void)!write(g_wake[1], "c", 1);
    errno = saved;
}

/* Sleep until the next tick or a child's exit, whichever comes first. */
static void wait_tick(void) {
    struct pollfd p = {.fd = g_wake[0], .events = POLLIN};
    char buf[64];
    if (g_wake[0] < 0) {
        usleep(TICK_MS * 1000);
        return;
    }
    if (poll(&p, 1, TICK_MS) > 0)
        while (read(g_wake[0], buf, sizeof buf) > 0) {
        }
}

const char *dt_master_home(char *buf, size_t n) {
    const char *h = getenv("DTRAIN_HOME");
    if (h && *h)
        snprintf(buf, n, "%s", h);
    else
        snprintf(buf, n, "%s/.dtrain", getenv("HOME") && *getenv("HOME") ? getenv("HOME") : ".");
    return buf;
}

/* Hold <home>/master.lock for the master's life: a second master on the same store is
 * refused with the holder's pid. Returns the descriptor, -1 with an error. */
static int claim_home(const char *home) {
    char p[4200];
    snprintf(p, sizeof p, "%s/master.lock", home);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return dt_error(DT_ERR_IO, "cannot open %s: %s; hint: check DTRAIN_HOME (%s)", p,
                        strerror(errno), home),
               -1;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char pid[32] = "?";
        ssize_t r = pread(fd, pid, sizeof pid - 1, 0);
        pid[r > 0 ? r : 1] = 0;
        pid[strcspn(pid, "\n")] = 0;
        close(fd);
        return dt_error(DT_ERR_STATE,
                        "another master (pid %s) is running on %s; hint: use it (set "
                        "DTRAIN_MASTER to its address), stop it with `dtrain master stop`, or "
                        "set DTRAIN_HOME to another directory",
                        pid, home),
               -1;
    }
    char line[32];
    int n = snprintf(line, sizeof line, "%d\n", (int)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)n, 0) != n) {
        close(fd);
        return dt_error(DT_ERR_IO, "cannot write %s: %s", p, strerror(errno)), -1;
    }
    return fd;
}

/* <home>/master.port and master.pid: how the CLI finds the master it started. */
static void write_file(const char *home, const char *name, long v) {
    char p[4200], tmp[4300];
    snprintf(p, sizeof p, "%s/%s", home, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    fprintf(f, "%ld\n", v);
    if (fclose(f) == 0) rename(tmp, p);
}

static void remove_file(const char *home, const char *name) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", home, name);
    unlink(p);
}

dt_status dt_master_token(const char *home, char *buf, size_t n) {
    char h[4096], p[4200];
    if (!home) home = dt_master_home(h, sizeof h);
    snprintf(p, sizeof p, "%s/master.token", home);
    if (n < TOKEN_HEX + 1)
        return dt_error(DT_ERR_INVALID, "the token needs a %d-byte buffer", TOKEN_HEX + 1);
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t r = read(fd, buf, TOKEN_HEX);
            close(fd);
            buf[r > 0 ? r : 0] = 0;
            if (r == TOKEN_HEX && strspn(buf, "0123456789abcdef") == TOKEN_HEX) return DT_OK;
            return dt_error(DT_ERR_IO,
                            "%s is not a token (%d hex digits); hint: delete it and "
                            "restart the master to make a new one",
                            p, TOKEN_HEX);
        }
        if (errno != ENOENT)
            return dt_error(DT_ERR_IO, "cannot read %s: %s; hint: check DTRAIN_HOME", p,
                            strerror(errno));
        char tok[TOKEN_HEX + 1];
        dt_status st = m_random_hex(tok);
        if (st != DT_OK) return st;
        fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno == EEXIST) continue; /* made meanwhile: read it */
        if (fd < 0 || write(fd, tok, TOKEN_HEX) != TOKEN_HEX || fsync(fd) != 0) {
            int e = errno;
            if (fd >= 0) close(fd), unlink(p);
            return dt_error(DT_ERR_IO, "cannot write %s: %s; hint: check DTRAIN_HOME", p,
                            strerror(e));
        }
        close(fd);
        snprintf(buf, n, "%s", tok);
        return DT_OK;
    }
    return dt_error(DT_ERR_IO, "cannot read %s", p);
}

/* How a trial on another host (a Slurm job) reaches us: the bound address, or this host's
 * name when bound to every address. */
static void cluster_url(master *m, int port) {
    char name[200] = "127.0.0.1";
    const char *h = m->o.host;
    if (!strcmp(h, "0.0.0.0") || !strcmp(h, "::")) {
        if (gethostname(name, sizeof name - 1) != 0) snprintf(name, sizeof name, "127.0.0.1");
        h = name;
    }
    snprintf(m->cluster_url, sizeof m->cluster_url,
             strchr(h, ':') ? "http://[%s]:%d" : "http://%s:%d", h, port);
}

static void master_free(master *m) {
    for (int i = 0; i < m->n_exps; i++) m_exp_free(m->exps[i]);
    free(m->exps);
    for (int i = 0; i < m->n_logs; i++) free(m->logs[i].line);
    free(m->logs);
    free(m->slot_busy);
    m_hosts_free(m);
    if (m->launcher) m->launcher->ops->free(m->launcher);
    m_charts_free(m);
    dt_store_close(m->store);
    pthread_mutex_destroy(&m->lock);
    pthread_mutex_destroy(&m->log_lock);
}

/* Defaults and checks on the options, the slot count, and the home directory made.
 * Runs before anything needs freeing: on error nothing is held. */
static dt_status master_setup(master *m, const dt_master_opts *o) {
    m->o = *o;
    m->events =
        (m_sched_events){.run_ended = m_trial_run_ended, .start_failed = m_trial_start_failed};
    if (!m->o.host) m->o.host = "127.0.0.1";
    if (!m->o.launcher) m->o.launcher = "local";
    if (strcmp(m->o.launcher, "local") && strcmp(m->o.launcher, "slurm"))
        return dt_error(DT_ERR_CONFIG, "no launcher '%s'; hint: pass --launcher local or slurm",
                        m->o.launcher);
    if (m->o.port < 0 || m->o.port > 65535)
        return dt_error(DT_ERR_CONFIG, "port %d is out of range; hint: pass --port 1..65535",
                        m->o.port);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    m->slots = m->o.slots > 0 ? m->o.slots : (int)(cores > 0 ? cores : 1);
    if (m->o.home)
        snprintf(m->home, sizeof m->home, "%s", m->o.home);
    else
        dt_master_home(m->home, sizeof m->home);
    char failed[4200];
    int err = dt__mkdir_p(m->home, failed, sizeof failed);
    if (err)
        return dt_error(DT_ERR_IO,
                        "cannot create %s: %s; hint: set DTRAIN_HOME to a writable "
                        "directory",
                        failed, strerror(err));
    return DT_OK;
}

/* The store, the hosts, the slots, the launcher, the live experiments and the token, in
 * that order. On error what was opened stays in *m for master_free. */
static dt_status master_open(master *m) {
    dt_status st;
    snprintf(m->store_path, sizeof m->store_path, "%s/store.db", m->home);
    if ((st = dt_store_open(m->store_path, &m->store)) != DT_OK) return st;
    if ((st = m_hosts_load(m)) != DT_OK) return st;
    if (!(m->slot_busy = calloc((size_t)m->slots, sizeof *m->slot_busy)) ||
        !(m->launcher = dt_launcher_local_new()))
        return dt_error(DT_ERR_OOM, "out of memory starting the master");
    if ((st = m_exp_recover(m)) != DT_OK) return st;
    char token[80];
    if ((st = dt_master_token(m->home, token, sizeof token)) != DT_OK) return st;
    snprintf(m->token, sizeof m->token, "%s", token);
    return DT_OK;
}

/* The reference client's routes (det_impl.h) first: on a path both use, theirs answers;
 * then ours, then the caller's. A malloc'd table, NULL when out of memory. */
static dt_http_route *master_routes(const master *m, int *n_routes) {
    *n_routes = m_det_n_routes + m_n_routes + m->o.n_routes;
    dt_http_route *routes = malloc((size_t)*n_routes * sizeof *routes);
    if (!routes) return NULL;
    memcpy(routes, m_det_routes, (size_t)m_det_n_routes * sizeof *routes);
    memcpy(routes + m_det_n_routes, m_routes, (size_t)m_n_routes * sizeof *routes);
    if (m->o.n_routes > 0)
        memcpy(routes + m_det_n_routes + m_n_routes, m->o.routes,
               (size_t)m->o.n_routes * sizeof *routes);
    return routes;
}

typedef struct {
    struct sigaction old_int, old_term, old_pipe, old_chld;
} saved_signals;

/* SIGINT/SIGTERM stop the loop, SIGPIPE is ignored, SIGCHLD wakes the scheduler. */
static void signals_install(saved_signals *sv) {
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &sv->old_int);
    sigaction(SIGTERM, &sa, &sv->old_term);
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigaction(SIGPIPE, &ign, &sv->old_pipe);
    struct sigaction chld = {.sa_handler = on_child, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
    sigemptyset(&chld.sa_mask);
    if (pipe2(g_wake, O_NONBLOCK | O_CLOEXEC) != 0) g_wake[0] = g_wake[1] = -1;
    sigaction(SIGCHLD, &chld, &sv->old_chld);
}

static void signals_restore(const saved_signals *sv) {
    sigaction(SIGINT, &sv->old_int, NULL);
    sigaction(SIGTERM, &sv->old_term, NULL);
    sigaction(SIGPIPE, &sv->old_pipe, NULL);
    sigaction(SIGCHLD, &sv->old_chld, NULL);
    for (int i = 0; i < 2; i++)
        if (g_wake[i] >= 0) close(g_wake[i]), g_wake[i] = -1;
}

/* Serve the API and run the scheduler on this thread until a signal or the shutdown route;
 * then preempt the trials and stop serving. */
static dt_status master_serve(master *m, const dt_http_opts *hopts, const dt_http_route *routes,
                              int n_routes) {
    dt_status st = dt_http_start_opts(hopts, routes, n_routes, m, &m->http);
    if (st != DT_OK) return st;
    int port = dt_http_port(m->http);
    const char *h = strcmp(m->o.host, "0.0.0.0") ? m->o.host : "127.0.0.1";
    snprintf(m->url, sizeof m->url, "http://%s:%d", h, port);
    cluster_url(m, port);
    write_file(m->home, "master.port", port);
    write_file(m->home, "master.pid", (long)getpid());
    if (!m->o.quiet)
        fprintf(stderr, "dtrain master: serving %s (pid %d, %d slots, store %s)\n", m->url,
                (int)getpid(), m->slots, m->store_path);
    while (!g_signal && !m->stop) {
        pthread_mutex_lock(&m->lock);
        m_sched_tick(m);
        pthread_mutex_unlock(&m->lock);
        wait_tick();
    }
    if (!m->o.quiet) fprintf(stderr, "dtrain master: stopping\n");
    m->stop = 1;
    m_sched_stop_all(m, STOP_GRACE_S);
    dt_http_stop(m->http);
    remove_file(m->home, "master.pid");
    remove_file(m->home, "master.port");
    return DT_OK;
}

dt_status dt_master_run(const dt_master_opts *o) {
    master m;
    memset(&m, 0, sizeof m);
    dt_status st = master_setup(&m, o);
    if (st != DT_OK) return st;
    pthread_mutex_init(&m.lock, NULL);
    pthread_mutex_init(&m.log_lock, NULL);
    m.started = dt_now_sec();
    time_t wall = time(NULL);
    struct tm utc;
    strftime(m.started_utc, sizeof m.started_utc, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&wall, &utc));
    char form_token[80];
    dt_http_route *routes = NULL;
    int n_routes = 0;
    int lock_fd = claim_home(m.home);
    if (lock_fd < 0) {
        st = dt_last_status();
        goto out;
    }
    if ((st = master_open(&m)) != DT_OK || (st = m_random_hex(form_token)) != DT_OK) goto out;
    if (!(routes = master_routes(&m, &n_routes))) {
        st = dt_error(DT_ERR_OOM, "out of memory starting the master");
        goto out;
    }
    dt_http_opts hopts = {.host = m.o.host,
                          .port = m.o.port,
                          .token = m_loopback(m.o.host) ? NULL : m.token,
                          .csrf = true,
                          .form_csrf = form_token,
                          .token_ok = m_det_token_ok,
                          .open_paths = m_det_open_paths,
                          .filter = m_det_filter};
    saved_signals sv;
    signals_install(&sv);
    st = master_serve(&m, &hopts, routes, n_routes);
    signals_restore(&sv);
out:
    free(routes);
    DT_KEEP_ERROR(master_free(&m));
    if (lock_fd >= 0) close(lock_fd);
    g_signal = 0;
    return st;
}
