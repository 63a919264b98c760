/* launcher_local.c — the local launcher (launch/launcher.h): a trial run as child processes
 * of this one.
 *
 * start() prepares everything in the parent (the command's path, the environment, the core
 * set, the pipes), then forks; between fork and exec the child makes only async-signal-safe
 * calls: a process group of its own, PR_SET_PDEATHSIG(SIGKILL), default signal dispositions
 * and an empty mask, stdin from /dev/null, stdout / stderr into the pipes, every other
 * descriptor closed, chdir, sched_setaffinity, execve. A step that fails is written (step,
 * errno) to an error pipe that exec closes, so start() reports it as DT_ERR_IO naming the
 * command. PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, not the
 * process: the caller of start() must be a thread that lives as long as its runs (the
 * master's scheduler thread, or the main thread).
 *
 * One reader thread per launcher polls every run's two pipes (and a wake pipe that start()
 * and free() write to) and cuts the bytes into lines for on_log (loglines.c: mpirun's
 * --tag-output prefixes give the rank; a run whose command is mpirun / mpiexec has its
 * untagged lines at rank -1).
 *
 * Stopping a run: kill_wait SIGKILLs its group and the groups of its descendants
 * (proctree.c: mpirun's ranks have groups of their own), waits until none of those groups has
 * a live process and the pipes reached EOF, and only then reaps the main process. Until that
 * reap the main process is our zombie, which holds its pid and its group's id: no other
 * process can be given them, so a signal to the group reaches the run and nothing else.
 * exited() therefore looks at the main process with WNOWAIT; once it is reaped for real, the
 * run is never signalled again. A run an earlier process started is reclaimed only after its
 * leader's start time matches the recorded one (dt__proctree_is_run). */
#define _GNU_SOURCE
#include "launch/launcher.h"
#include "loglines_impl.h"
#include "proctree_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

typedef struct stream {
    int fd; /* -1 once at EOF */
    dt__lines lines;
} stream;

struct dt_launch_run {
    pid_t pid; /* the main process; also the group id */
    uint64_t start; /* its start time (dt__proc_start) */
    dt__line_sink sink;
    bool exited; /* the main process has exited (a zombie until reaped) */
    bool reaped; /* ... and is reaped: its pid may be another process's now */
    int code;
    int open; /* streams not at EOF yet */
    stream out[2];
    dt_launch_run *next;
};

typedef struct local {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a stream reached EOF */
    pthread_t reader;
    bool stop;
    int wake[2];
    dt_launch_run *runs;
} local;

#define LOCAL(l) ((local *)(l)->impl)

static void sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void wake(local *lo) {
    char c = 1;
    ssize_t k = write(lo->wake[1], &c, 1);
    (void)k; /* a full wake pipe already wakes the reader */
}

/* Read what stream `st` of run `r` has; at EOF (or a read error) close it and tell waiters. */
static void drain(local *lo, dt_launch_run *r, stream *st) {
    dt__lines *b = &st->lines;
    ssize_t k = read(st->fd, b->buf + b->len, DT__LINE_MAX - b->len);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (k > 0) {
        b->len += (size_t)k;
        dt__lines_split(&r->sink, b, false);
        return;
    }
    dt__lines_split(&r->sink, b, true);
    pthread_mutex_lock(&lo->mu);
    close(st->fd);
    st->fd = -1;
    r->open--; /* the last touch of r by this thread when it reaches 0 (release may free it) */
    pthread_cond_broadcast(&lo->cv);
    pthread_mutex_unlock(&lo->mu);
}

static void *reader_main(void *arg) {
    local *lo = arg;
    struct pollfd *pf = NULL;
    stream **sts = NULL;
    dt_launch_run **owners = NULL;
    size_t cap = 0;
    for (;;) {
        pthread_mutex_lock(&lo->mu);
        if (lo->stop) {
            pthread_mutex_unlock(&lo->mu);
            break;
        }
        size_t n = 1;
        for (dt_launch_run *r = lo->runs; r; r = r->next) n += 2;
        if (n > cap) {
            size_t c = n * 2;
            struct pollfd *p2 = realloc(pf, c * sizeof *pf);
            if (p2) pf = p2;
            stream **s2 = realloc(sts, c * sizeof *sts);
            if (s2) sts = s2;
            dt_launch_run **o2 = realloc(owners, c * sizeof *owners);
            if (o2) owners = o2;
            if (p2 && s2 && o2) cap = c;
        }
        if (n > cap) { /* out of memory: try again soon */
            pthread_mutex_unlock(&lo->mu);
            sleep_ms(10);
            continue;
        }
        size_t m = 0;
        pf[m++] = (struct pollfd){.fd = lo->wake[0], .events = POLLIN};
        for (dt_launch_run *r = lo->runs; r; r = r->next)
            for (int i = 0; i < 2; i++)
                if (r->out[i].fd >= 0) {
                    sts[m] = &r->out[i];
                    owners[m] = r;
                    pf[m++] = (struct pollfd){.fd = r->out[i].fd, .events = POLLIN};
                }
        pthread_mutex_unlock(&lo->mu);
        if (poll(pf, (nfds_t)m, -1) < 0) continue;
        if (pf[0].revents) {
            char sink[64];
            while (read(lo->wake[0], sink, sizeof sink) > 0) {
            }
        }
        for (size_t i = 1; i < m; i++)
            if (pf[i].revents) drain(lo, owners[i], sts[i]);
    }
    free(pf);
    free(sts);
    free(owners);
    return NULL;
}

/* ---- starting ---- */

enum { STEP_PGID = 1, STEP_PDEATH, STEP_FDS, STEP_CHDIR, STEP_CPUS, STEP_EXEC };

/* The path of `cmd` on `path_env` (or cmd itself when it has a slash); NULL when none is
 * executable. malloc'd. */
static char *find_command(const char *cmd, const char *path_env) {
    if (strchr(cmd, '/')) return access(cmd, X_OK) == 0 ? strdup(cmd) : NULL;
    const char *p = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
    size_t cl = strlen(cmd);
    while (*p) {
        const char *e = strchr(p, ':');
        size_t dl = e ? (size_t)(e - p) : strlen(p);
        char *full = malloc(dl + cl + 3);
        if (!full) return NULL;
        snprintf(full, dl + cl + 3, "%.*s/%s", (int)dl, dl ? p : ".", cmd);
        struct stat sb;
        if (stat(full, &sb) == 0 && S_ISREG(sb.st_mode) && access(full, X_OK) == 0) return full;
        free(full);
        if (!e) break;
        p = e + 1;
    }
    return NULL;
}

/* This process's environment with spec->env's entries replacing or adding (pointers into
 * both, the array malloc'd); the value of PATH in it in *path. */
static char **merged_env(char *const *add, const char **path) {
    size_t n = 0, na = 0;
    while (environ && environ[n]) n++;
    while (add && add[na]) na++;
    char **env = calloc(n + na + 1, sizeof *env);
    if (!env) return NULL;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t kl = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        bool replaced = false;
        for (size_t j = 0; j < na && !replaced; j++)
            replaced = !strncmp(add[j], environ[i], kl) && add[j][kl] == '=';
        if (!replaced) env[m++] = environ[i];
    }
    for (size_t j = 0; j < na; j++) env[m++] = add[j];
    *path = NULL;
    for (size_t i = 0; i < m; i++)
        if (!strncmp(env[i], "PATH=", 5)) *path = env[i] + 5;
    return env;
}

/* The child, between fork and exec: async-signal-safe calls only. Reports a failed step on
 * `err` (descriptor 3 once the others are closed) and exits 127. */
static void child(const char *exe, char *const *argv, char **env, const char *workdir,
                  const cpu_set_t *cpus, pid_t parent, int null_fd, int out_w, int err_w,
                  int err_pipe) {
    int fail[2] = {STEP_PGID, 0};
    if (setpgid(0, 0) != 0) goto fail;
    fail[0] = STEP_PDEATH;
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) goto fail;
    if (getppid() != parent) _exit(127); /* the launching thread is already gone */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++) sigaction(s, &dfl, NULL); /* SIGKILL / SIGSTOP: EINVAL */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    fail[0] = STEP_FDS;
    /* the error pipe to 3, then stdio; everything else of the parent's closed */
    if (err_pipe != 3 && (dup2(err_pipe, 3) != 3 || fcntl(3, F_SETFD, FD_CLOEXEC) != 0)) goto fail;
    err_pipe = 3;
    if (dup2(null_fd, 0) != 0 || dup2(out_w, 1) != 1 || dup2(err_w, 2) != 2) goto fail;
    if (syscall(SYS_close_range, 4u, ~0u, 0u) != 0) {
        for (int fd = 4; fd < 65536; fd++) close(fd);
    }
    fail[0] = STEP_CHDIR;
    if (workdir && chdir(workdir) != 0) goto fail;
    fail[0] = STEP_CPUS;
    if (cpus && sched_setaffinity(0, sizeof *cpus, cpus) != 0) goto fail;
    fail[0] = STEP_EXEC;
    execve(exe, argv, env);
fail:
    fail[1] = errno;
    ssize_t k = write(err_pipe, fail, sizeof fail);
    (void)k;
    _exit(127);
}

static dt_status start_error(const dt_launch_spec *spec, int step, int err) {
    const char *cmd = spec->argv[0];
    switch (step) {
    case STEP_CHDIR:
        return dt_error(DT_ERR_IO, "cannot start %s: cannot enter %s: %s", cmd, spec->workdir,
                        strerror(err));
    case STEP_CPUS:
        return dt_error(DT_ERR_IO,
                        "cannot start %s: cannot bind it to its %d core(s): %s; hint: give cores "
                        "this machine has",
                        cmd, spec->n_cpus, strerror(err));
    case STEP_EXEC:
        return dt_error(DT_ERR_IO, "cannot run %s: %s", cmd, strerror(err));
    default:
        return dt_error(DT_ERR_IO, "cannot start %s: process set-up (step %d) failed: %s", cmd,
                        step, strerror(err));
    }
}

/* `fd` moved to a descriptor >= 10 (close-on-exec), so that the child's dup2 onto 0..3
 * never overwrites a source; -1 (errno set) on failure, `fd` closed either way. */
static int high_fd(int fd) {
    if (fd < 0) return fd;
    int h = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    int e = errno;
    close(fd);
    errno = e;
    return h;
}

static void close_fds(int *fds, int n) {
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) close(fds[i]);
}

/* The spec's cores as a set; DT_ERR_INVALID for a core no machine has. */
static dt_status core_set(const dt_launch_spec *spec, cpu_set_t *cpus) {
    CPU_ZERO(cpus);
    for (int i = 0; spec->cpus && i < spec->n_cpus; i++) {
        if (spec->cpus[i] < 0 || spec->cpus[i] >= CPU_SETSIZE)
            return dt_error(DT_ERR_INVALID, "cannot start %s: core %d does not exist",
                            spec->argv[0], spec->cpus[i]);
        CPU_SET(spec->cpus[i], cpus);
    }
    return DT_OK;
}

/* A run's descriptors, each >= 10 and close-on-exec: out r/w, err r/w, errpipe r/w,
 * /dev/null. False (errno set) on failure; what was opened is in fds for close_fds. */
static bool open_fds(int fds[7]) {
    bool ok = pipe2(fds, O_CLOEXEC) == 0 && pipe2(fds + 2, O_CLOEXEC) == 0 &&
              pipe2(fds + 4, O_CLOEXEC) == 0 &&
              (fds[6] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;
    for (int i = 0; ok && i < 7; i++) ok = (fds[i] = high_fd(fds[i])) >= 0;
    return ok;
}

/* Is the command mpirun (its untagged lines are its own, rank -1)? */
static bool is_mpirun(const char *cmd) {
    const char *base = strrchr(cmd, '/');
    base = base ? base + 1 : cmd;
    return !strcmp(base, "mpirun") || !strcmp(base, "mpiexec") || !strcmp(base, "orterun");
}

/* After the fork: the child `pid` in a group of its own, and the error pipe (fds[4]) read
 * until exec closes it. A step the child failed is reaped and reported (start_error), the
 * output pipes closed. */
static dt_status await_exec(const dt_launch_spec *spec, pid_t pid, const int fds[7]) {
    setpgid(pid, pid); /* also here: a signal sent right after start() must reach the group */
    int fail[2];
    ssize_t k;
    while ((k = read(fds[4], fail, sizeof fail)) < 0 && errno == EINTR) {
    }
    close(fds[4]);
    if (k != (ssize_t)sizeof fail) return DT_OK;
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    close(fds[0]);
    close(fds[2]);
    return start_error(spec, fail[0], fail[1]);
}

static dt_status local_start(dt_launcher *l, const dt_launch_spec *spec, dt_launch_run **out) {
    *out = NULL;
    if (!spec || !spec->argv || !spec->argv[0] || (spec->n_cpus > 0 && !spec->cpus))
        return dt_error(DT_ERR_INVALID, "launcher start: no command");
    local *lo = LOCAL(l);
    cpu_set_t cpus;
    dt_status st = core_set(spec, &cpus);
    if (st != DT_OK) return st;
    const char *path_env = NULL;
    char **env = merged_env(spec->env, &path_env);
    char *exe = env ? find_command(spec->argv[0], path_env) : NULL;
    if (!env) return dt_error(DT_ERR_OOM, "out of memory");
    if (!exe) {
        free(env);
        return dt_error(DT_ERR_IO,
                        "cannot run %s: no such executable%s; hint: give its path, or install it",
                        spec->argv[0], strchr(spec->argv[0], '/') ? "" : " on PATH");
    }
    dt_launch_run *r = calloc(1, sizeof *r);
    int fds[7] = {-1, -1, -1, -1, -1, -1, -1};
    if (!r || !open_fds(fds)) {
        st = r ? dt_error(DT_ERR_IO, "cannot start %s: %s", spec->argv[0], strerror(errno))
               : dt_error(DT_ERR_OOM, "out of memory");
        close_fds(fds, 7);
        free(r);
        free(env);
        free(exe);
        return st;
    }
    r->sink = dt__line_sink_of(spec, is_mpirun(spec->argv[0]));
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        child(exe, spec->argv, env, spec->workdir, spec->n_cpus > 0 ? &cpus : NULL, parent, fds[6],
              fds[1], fds[3], fds[5]);
    int saved = errno;
    free(env);
    free(exe);
    close(fds[1]);
    close(fds[3]);
    close(fds[5]);
    close(fds[6]);
    if (pid < 0) {
        close(fds[0]);
        close(fds[2]);
        close(fds[4]);
        free(r);
        return dt_error(DT_ERR_IO, "cannot start %s: fork: %s", spec->argv[0], strerror(saved));
    }
    if ((st = await_exec(spec, pid, fds)) != DT_OK) {
        free(r);
        return st;
    }
    r->pid = pid;
    r->start = dt__proc_start(pid); /* our unreaped child: it is the run, exec'd or not */
    r->open = 2;
    r->out[0].fd = fds[0];
    r->out[1].fd = fds[2];
    pthread_mutex_lock(&lo->mu);
    r->next = lo->runs;
    lo->runs = r;
    pthread_mutex_unlock(&lo->mu);
    wake(lo);
    *out = r;
    return DT_OK;
}

/* ---- watching and stopping ---- */

/* Has the main process exited? It is left unreaped (a zombie holding the pid and the group
 * id) until reap_now; lock held. */
static bool reap(dt_launch_run *r) {
    if (r->exited) return true;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    int w = waitid(P_PID, (id_t)r->pid, &si, WEXITED | WNOHANG | WNOWAIT);
    if (w == 0 && si.si_pid == r->pid) {
        r->exited = true;
        r->code = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
    } else if (w < 0 && errno == ECHILD) {
        r->exited = r->reaped = true; /* reaped elsewhere: the code is unknown */
        r->code = 255;
    }
    return r->exited;
}

/* Reap the exited main process for real (lock held): from now on its pid is not ours. */
static void reap_now(dt_launch_run *r) {
    if (r->reaped || !r->exited) return;
    while (waitpid(r->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    r->reaped = true;
}

static bool local_exited(dt_launcher *l, dt_launch_run *r, int *code) {
    local *lo = LOCAL(l);
    pthread_mutex_lock(&lo->mu);
    bool done = reap(r);
    if (done && code) *code = r->code;
    pthread_mutex_unlock(&lo->mu);
    return done;
}

/* DT_ERR_INVALID for a signal number that is none; a run that is gone has nothing left to
 * signal (DT_OK). */
static dt_status local_signal(dt_launcher *l, dt_launch_run *r, int sig) {
    local *lo = LOCAL(l);
    if (sig <= 0 || sig >= NSIG) return dt_error(DT_ERR_INVALID, "no signal %d", sig);
    pthread_mutex_lock(&lo->mu);
    if (!r->reaped) dt__proctree_signal(r->pid, sig); /* (the zombie holds the group id) */
    pthread_mutex_unlock(&lo->mu);
    return DT_OK;
}

/* Wait until the main process has exited, no process of `t` is alive and both pipes reached
 * EOF; then reap the main process. */
static void wait_over(local *lo, dt_launch_run *r, const dt__proctree *t) {
    for (;;) {
        pthread_mutex_lock(&lo->mu);
        bool exited = reap(r);
        pthread_mutex_unlock(&lo->mu);
        if (exited && (!t || dt__proctree_gone(t))) break;
        sleep_ms(2);
    }
    pthread_mutex_lock(&lo->mu);
    while (r->open > 0) pthread_cond_wait(&lo->cv, &lo->mu);
    reap_now(r);
    pthread_mutex_unlock(&lo->mu);
}

static void local_kill_wait(dt_launcher *l, dt_launch_run *r) {
    local *lo = LOCAL(l);
    pthread_mutex_lock(&lo->mu);
    bool ours = !r->reaped; /* reaped: killed and waited for already; its pid is not ours */
    pthread_mutex_unlock(&lo->mu);
    if (!ours) return;
    dt__proctree t;
    dt__proctree_kill(r->pid, &t);
    wait_over(lo, r, &t);
}

static int64_t local_handle(dt_launcher *l, dt_launch_run *r) {
    (void)l;
    return r->pid;
}

static uint64_t local_handle_start(dt_launcher *l, dt_launch_run *r) {
    (void)l;
    return r->start;
}

static dt_status local_reclaim(dt_launcher *l, int64_t handle, uint64_t start, double timeout_s) {
    (void)l;
    if (handle <= 1 || handle > INT32_MAX)
        return dt_error(DT_ERR_INVALID, "will not kill process group %lld", (long long)handle);
    return dt_launch_kill_group_wait((pid_t)handle, start, timeout_s);
}

static void local_release(dt_launcher *l, dt_launch_run *r) {
    if (!r) return;
    local *lo = LOCAL(l);
    /* a run that has not exited is killed; processes its main process left behind (holding
     * the pipes) belong to a finished run and are killed too, while the unreaped main process
     * keeps the group's id ours (kill_wait does nothing once it is reaped) */
    local_kill_wait(l, r);
    wait_over(lo, r, NULL);
    pthread_mutex_lock(&lo->mu);
    for (dt_launch_run **p = &lo->runs; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            break;
        }
    pthread_mutex_unlock(&lo->mu);
    free(r);
}

static void local_free(dt_launcher *l) {
    if (!l) return;
    local *lo = LOCAL(l);
    while (lo->runs) local_release(l, lo->runs);
    pthread_mutex_lock(&lo->mu);
    lo->stop = true;
    pthread_mutex_unlock(&lo->mu);
    wake(lo);
    pthread_join(lo->reader, NULL);
    close(lo->wake[0]);
    close(lo->wake[1]);
    pthread_cond_destroy(&lo->cv);
    pthread_mutex_destroy(&lo->mu);
    free(lo);
    free(l);
}

static const dt_launcher_ops local_ops = {
    .name = "local",
    .start = local_start,
    .exited = local_exited,
    .signal = local_signal,
    .kill_wait = local_kill_wait,
    .handle = local_handle,
    .handle_start = local_handle_start,
    .reclaim = local_reclaim,
    .release = local_release,
    .free = local_free,
};

dt_launcher *dt_launcher_local_new(void) {
    dt_launcher *l = calloc(1, sizeof *l);
    local *lo = calloc(1, sizeof *lo);
    if (!l || !lo) goto oom;
    if (pipe2(lo->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        dt_error(DT_ERR_IO, "cannot create the launcher's wake pipe: %s", strerror(errno));
        free(lo);
        free(l);
        return NULL;
    }
    pthread_mutex_init(&lo->mu, NULL);
    pthread_cond_init(&lo->cv, NULL);
    l->ops = &local_ops;
    l->impl = lo;
    if (pthread_create(&lo->reader, NULL, reader_main, lo) != 0) {
        close(lo->wake[0]);
        close(lo->wake[1]);
        goto oom;
    }
    return l;
oom:
    free(lo);
    free(l);
    dt_error(DT_ERR_OOM, "out of memory");
    return NULL;
}

uint64_t dt_launch_proc_start(pid_t pid) {
    return dt__proc_start(pid);
}

dt_status dt_launch_kill_group_wait(pid_t pgid, uint64_t start, double timeout_s) {
    if (pgid <= 1 || pgid == getpgrp())
        return dt_error(DT_ERR_INVALID, "will not kill process group %d", (int)pgid);
    if (!dt__proctree_is_run(pgid, start)) {
        if (kill(-pgid, 0) == 0 || dt__proc_start(pgid))
            dt_log(DT_LOG_WARN,
                   "process group %d is not the run that was recorded (its leader's start time "
                   "is not %llu): a reused pid, left alone; the run is gone",
                   (int)pgid, (unsigned long long)start);
        return DT_OK;
    }
    dt__proctree t;
    dt__proctree_kill(pgid, &t);
    for (double waited = 0; !dt__proctree_gone(&t); waited += 0.005) {
        if (waited >= timeout_s)
            return dt_error(DT_ERR_STATE,
                            "process group %d still has processes %.1f s after SIGKILL; hint: "
                            "look for them with `ps -g %d` (a process stuck in the kernel, "
                            "state D, ends only when its I/O does)",
                            (int)pgid, timeout_s, (int)pgid);
        sleep_ms(5);
    }
    return DT_OK;
}
