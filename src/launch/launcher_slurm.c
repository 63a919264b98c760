/* launcher_slurm.c — the Slurm launcher (launch/launcher.h): a trial run as one sbatch job.
 *
 * start() writes a batch script into job_dir (the spec's environment exported, shell-quoted;
 * OMP_NUM_THREADS from the job's cpus per task; cd to the workdir; exec the command) and
 * submits it with `sbatch --parsable`, the job's stdout and stderr into one output file next to
 * the script. A refused submission is DT_ERR_IO with sbatch's own message.
 *
 * One poller thread per launcher, every poll_s: one `squeue -t all` for every live job's state;
 * for a job that ended, `scontrol show job` (slurmctld keeps ended jobs MinJobAge seconds) or,
 * when slurmctld has forgotten it, `sacct` for its state and exit code; then it reads what the
 * output files gained (the compute node writes them; a shared file system offers no change
 * notification) and cuts it into lines (loglines.c). A run has exited once Slurm calls its job
 * ended and its output is read to the end. Exit codes: the batch script's status for COMPLETED
 * and FAILED; 128 + SIGKILL for a job this launcher cancelled; 128 + the signal (SIGTERM when
 * Slurm does not say) for one cancelled by someone else or out of time, so the master restarts
 * the trial from its checkpoint; 255 when Slurm cannot tell. An ended job other than COMPLETED
 * adds a line naming its state and reason.
 *
 * A squeue that fails for any reason but unknown job ids (slurmctld unreachable) changes
 * nothing: the jobs are asked about again at the next poll. */
#define _GNU_SOURCE
#include "launch/launcher.h"
#include "cmdrun_impl.h"
#include "loglines_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CMD_OUT 8192      /* bytes of a helper command's output kept */
#define KILL_WAIT_S 120.0 /* kill_wait gives up waiting for Slurm after this */

struct dt_launch_run {
    int64_t job;
    dt__line_sink sink;
    dt__lines lines;
    char *script, *out_path;
    off_t off;      /* output read so far */
    bool ended;     /* Slurm says the job ended */
    bool done;      /* ... and its output is read to the end */
    bool cancelled; /* by this launcher */
    bool polling;   /* the poller is reading it (release waits) */
    int code;
    dt_launch_run *next;
};

typedef struct slurm {
    dt_slurm_opts o; /* strings owned */
    char **args;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a run is done */
    pthread_t poller;
    bool stop;
    long seq;
    dt_launch_run *runs;
} slurm;

#define SLURM(l) ((slurm *)(l)->impl)

static void sleep_s(double s) {
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Run a Slurm command given as a NULL-terminated list of strings; its output in out. */
static int slurm_cmd(char *out, size_t n, const char *const *argv) {
    return dt__cmd_run((char *const *)argv, out, n);
}

/* The last line of `s` with text (trailing newlines cut off), for error messages. */
static const char *last_line(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ')) s[--n] = 0;
    char *nl = strrchr(s, '\n');
    return nl ? nl + 1 : s;
}

/* ---- the batch script ---- */

/* `s` single-quoted for sh. */
static void put_quoted(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++)
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    fputc('\'', f);
}

static dt_status write_script(const char *path, const dt_launch_spec *spec) {
    FILE *f = fopen(path, "w");
    if (!f) return dt_error(DT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    fprintf(f, "#!/bin/sh\n# dtrain trial %lld (written by the master's Slurm launcher)\n",
            (long long)spec->trial_id);
    for (char *const *e = spec->env; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || eq == *e) continue;
        fprintf(f, "export %.*s=", (int)(eq - *e), *e);
        put_quoted(f, eq + 1);
        fputc('\n', f);
    }
    fputs("export OMP_NUM_THREADS=\"${SLURM_CPUS_PER_TASK:-1}\"\n", f);
    if (spec->workdir) {
        fputs("cd ", f);
        put_quoted(f, spec->workdir);
        fputs(" || exit 1\n", f);
    }
    fputs("exec", f);
    for (char *const *a = spec->argv; *a; a++) fputc(' ', f), put_quoted(f, *a);
    fputc('\n', f);
    bool ok = !ferror(f);
    if (fclose(f) != 0) ok = false;
    if (!ok) return dt_error(DT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return DT_OK;
}

/* ---- starting ---- */

/* sbatch's command line and the strings it points into. */
typedef struct sbatch_cmd {
    char name[64], output[PATH_MAX + 16], ntasks[32], cpt[32], nodes[32], per_node[32];
    char partition[256], account[256], time_arg[128];
    const char *argv[32 + 64];
} sbatch_cmd;

/* sbatch's arguments: ours, then the config's extra ones, then the script. */
static void sbatch_args(const slurm *s, const dt_launch_spec *spec, const dt_launch_run *r,
                        int slots, sbatch_cmd *c) {
    int cpus = s->o.cpus_per_slot > 0 ? s->o.cpus_per_slot : 1;
    snprintf(c->name, sizeof c->name, "--job-name=dtrain-trial-%lld", (long long)spec->trial_id);
    snprintf(c->output, sizeof c->output, "--output=%s", r->out_path);
    snprintf(c->ntasks, sizeof c->ntasks, "--ntasks=%d", slots);
    snprintf(c->cpt, sizeof c->cpt, "--cpus-per-task=%d", cpus);
    const char **argv = c->argv;
    int n = 0;
    argv[n++] = "sbatch";
    argv[n++] = "--parsable";
    argv[n++] = c->name;
    argv[n++] = c->output;
    argv[n++] = c->ntasks;
    argv[n++] = c->cpt;
    if (s->o.slots_per_node > 0) {
        snprintf(c->nodes, sizeof c->nodes, "--nodes=%d",
                 (slots + s->o.slots_per_node - 1) / s->o.slots_per_node);
        snprintf(c->per_node, sizeof c->per_node, "--ntasks-per-node=%d",
                 slots < s->o.slots_per_node ? slots : s->o.slots_per_node);
        argv[n++] = c->nodes;
        argv[n++] = c->per_node;
    }
    if (s->o.partition)
        snprintf(c->partition, sizeof c->partition, "--partition=%s", s->o.partition),
            argv[n++] = c->partition;
    if (s->o.account)
        snprintf(c->account, sizeof c->account, "--account=%s", s->o.account),
            argv[n++] = c->account;
    if (s->o.time)
        snprintf(c->time_arg, sizeof c->time_arg, "--time=%s", s->o.time), argv[n++] = c->time_arg;
    for (int i = 0; i < s->o.n_sbatch_args && n < 32 + 62; i++) argv[n++] = s->args[i];
    argv[n++] = r->script;
    argv[n] = NULL;
}

/* Run sbatch --parsable; the job id it answers in *job. DT_ERR_IO with sbatch's own message
 * when it cannot run, refuses the job or answers something else. */
static dt_status sbatch_submit(const char *const *argv, long long *job) {
    char msg[CMD_OUT];
    int rc = slurm_cmd(msg, sizeof msg, argv);
    char *end = NULL;
    if (rc == 0) {
        const char *id = last_line(msg);
        errno = 0;
        *job = strtoll(id, &end, 10);
        if (errno || *job <= 0 || (*end && *end != ';')) rc = -2;
    }
    if (rc == 0) return DT_OK;
    if (rc == -1)
        return dt_error(DT_ERR_IO,
                        "cannot run sbatch: %s; hint: install Slurm's client commands "
                        "(slurm-client) on the master's host",
                        strerror(errno));
    if (rc == -2) return dt_error(DT_ERR_IO, "sbatch answered '%s', not a job id", last_line(msg));
    return dt_error(DT_ERR_IO,
                    "Slurm refused the trial's job: %s; hint: check slurm.partition, account, "
                    "time and sbatch_args in the experiment config",
                    last_line(msg));
}

static dt_status slurm_start(dt_launcher *l, const dt_launch_spec *spec, dt_launch_run **out) {
    *out = NULL;
    if (!spec || !spec->argv || !spec->argv[0])
        return dt_error(DT_ERR_INVALID, "launcher start: no command");
    slurm *s = SLURM(l);
    dt_launch_run *r = calloc(1, sizeof *r);
    if (!r) return dt_error(DT_ERR_OOM, "out of memory");
    pthread_mutex_lock(&s->mu);
    long seq = ++s->seq;
    pthread_mutex_unlock(&s->mu);
    int slots = spec->slots > 0 ? spec->slots : 1;
    if (asprintf(&r->script, "%s/trial-%lld.%ld.%ld.sh", s->o.job_dir, (long long)spec->trial_id,
                 (long)getpid(), seq) < 0)
        r->script = NULL;
    if (!r->script || asprintf(&r->out_path, "%s.out", r->script) < 0) {
        free(r->script);
        free(r);
        return dt_error(DT_ERR_OOM, "out of memory");
    }
    long long job = 0;
    dt_status st = write_script(r->script, spec);
    if (st == DT_OK) {
        sbatch_cmd c;
        sbatch_args(s, spec, r, slots, &c);
        st = sbatch_submit(c.argv, &job);
    }
    if (st != DT_OK) {
        unlink(r->script);
        free(r->script);
        free(r->out_path);
        free(r);
        return st;
    }
    r->job = job;
    r->sink = dt__line_sink_of(spec, slots > 1);
    pthread_mutex_lock(&s->mu);
    r->next = s->runs;
    s->runs = r;
    pthread_mutex_unlock(&s->mu);
    *out = r;
    return DT_OK;
}

/* ---- watching ---- */

/* Is a Slurm job state one of an ended job? */
static bool state_ended(const char *st) {
    static const char *const live[] = {"PENDING",       "RUNNING",      "SUSPENDED", "COMPLETING",
                                       "CONFIGURING",   "RESIZING",     "REQUEUED",  "REQUEUE_FED",
                                       "REQUEUE_HOLD",  "STOPPED",      "SIGNALING", "STAGE_OUT",
                                       "RESV_DEL_HOLD", "SPECIAL_EXIT", NULL};
    for (int i = 0; live[i]; i++)
        if (!strcmp(st, live[i])) return false;
    return st[0] != 0;
}

/* The value after `key` in scontrol's one-line "Key=Value Key=Value" output, copied. */
static bool field(const char *s, const char *key, char *buf, size_t n) {
    size_t kl = strlen(key);
    for (const char *p = s; (p = strstr(p, key)); p += kl)
        if ((p == s || p[-1] == ' ') && p[kl] == '=') {
            p += kl + 1;
            size_t len = strcspn(p, " \n");
            snprintf(buf, n, "%.*s", (int)(len < n ? len : n - 1), p);
            return true;
        }
    return false;
}

/* The ended job's state, reason and exit code ("rc:signal"): scontrol, else sacct. False
 * when Slurm no longer knows the job. */
static bool ended_info(int64_t job, char *state, char *reason, char *exitcode, size_t n) {
    char id[32], out[CMD_OUT];
    snprintf(id, sizeof id, "%lld", (long long)job);
    reason[0] = 0;
    const char *sc[] = {"scontrol", "show", "job", "-o", id, NULL};
    if (slurm_cmd(out, sizeof out, sc) == 0 && field(out, "JobState", state, n) &&
        field(out, "ExitCode", exitcode, n)) {
        field(out, "Reason", reason, n);
        return true;
    }
    const char *sa[] = {"sacct", "-n", "-X", "-P", "-o", "State,ExitCode", "-j", id, NULL};
    if (slurm_cmd(out, sizeof out, sa) != 0) return false;
    char *bar = strchr(out, '|');
    if (!bar) return false;
    *bar = 0;
    snprintf(state, n, "%.*s", (int)strcspn(out, " "), out); /* "CANCELLED by 0" */
    snprintf(exitcode, n, "%.*s", (int)strcspn(bar + 1, "\n"), bar + 1);
    return true;
}

/* Decide the exit code of run r whose job ended (lock not held). */
static int ended_code(slurm *s, dt_launch_run *r) {
    pthread_mutex_lock(&s->mu);
    bool cancelled = r->cancelled;
    pthread_mutex_unlock(&s->mu);
    char state[64] = "", reason[128] = "", exitcode[64] = "";
    if (!ended_info(r->job, state, reason, exitcode, sizeof state)) {
        char line[160];
        snprintf(line, sizeof line,
                 "dtrain master: Slurm job %lld ended, and Slurm no longer says how (no "
                 "accounting?)",
                 (long long)r->job);
        if (r->sink.on_log) r->sink.on_log(r->sink.log_arg, r->sink.trial_id, -1, line);
        return cancelled ? 128 + SIGKILL : 255;
    }
    int rc = 0, sig = 0;
    sscanf(exitcode, "%d:%d", &rc, &sig);
    if (strcmp(state, "COMPLETED")) {
        char line[400];
        snprintf(line, sizeof line,
                 "dtrain master: Slurm job %lld ended %s (reason %s, exit code %s)",
                 (long long)r->job, state, reason[0] ? reason : "none", exitcode);
        if (r->sink.on_log) r->sink.on_log(r->sink.log_arg, r->sink.trial_id, -1, line);
    }
    if (cancelled) return 128 + SIGKILL;
    if (!strcmp(state, "COMPLETED")) return rc;
    if (!strcmp(state, "FAILED")) return rc ? rc : sig ? 128 + sig : 1;
    if (!strcmp(state, "CANCELLED") || !strcmp(state, "TIMEOUT") || !strcmp(state, "PREEMPTED") ||
        !strcmp(state, "DEADLINE"))
        return 128 + (sig ? sig : SIGTERM);
    return sig ? 128 + sig : 255;
}

/* Read what run r's output file gained; at `eof` deliver the partial last line too. */
static void read_output(dt_launch_run *r, bool eof) {
    int fd = open(r->out_path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        for (;;) {
            dt__lines *b = &r->lines;
            ssize_t k = pread(fd, b->buf + b->len, DT__LINE_MAX - b->len, r->off);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) break;
            r->off += k;
            b->len += (size_t)k;
            dt__lines_split(&r->sink, b, false);
        }
        close(fd);
    }
    if (eof) dt__lines_split(&r->sink, &r->lines, true);
}

/* The states of the jobs ids[0..n) from one squeue, into states[i] ("" when squeue does not
 * list it). False when squeue failed for another reason than unknown ids. */
static bool query_states(const int64_t *ids, int n, char (*states)[32]) {
    size_t cap = (size_t)n * 21 + 1;
    char *list = calloc(cap, 1), *out = malloc(CMD_OUT * 4);
    bool ok = list && out;
    for (int i = 0, len = 0; ok && i < n; i++)
        len += snprintf(list + len, cap - (size_t)len, "%s%lld", i ? "," : "", (long long)ids[i]);
    for (int i = 0; i < n; i++) states[i][0] = 0;
    if (ok) {
        const char *argv[] = {"squeue", "-h", "-t", "all", "-o", "%i|%T", "-j", list, NULL};
        int rc = slurm_cmd(out, CMD_OUT * 4, argv);
        if (rc != 0) {
            ok = strstr(out, "Invalid job id") != NULL;
        } else {
            for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
                long long id;
                char st[32];
                if (sscanf(line, "%lld|%31s", &id, st) != 2) continue;
                for (int i = 0; i < n; i++)
                    if (ids[i] == id) snprintf(states[i], sizeof states[i], "%s", st);
            }
        }
    }
    free(list);
    free(out);
    return ok;
}

/* One poll: states of the live runs, exit codes of the ended ones, their new output. The
 * runs are not freed meanwhile: release() takes them out only once they are done. */
static void poll_once(slurm *s) {
    pthread_mutex_lock(&s->mu);
    int n = 0;
    for (dt_launch_run *r = s->runs; r; r = r->next) n += !r->done;
    dt_launch_run **rs = calloc((size_t)(n ? n : 1), sizeof *rs);
    int64_t *ids = calloc((size_t)(n ? n : 1), sizeof *ids);
    char(*states)[32] = calloc((size_t)(n ? n : 1), sizeof *states);
    int m = 0;
    for (dt_launch_run *r = s->runs; rs && ids && r; r = r->next)
        if (!r->done) r->polling = true, rs[m] = r, ids[m++] = r->job;
    pthread_mutex_unlock(&s->mu);
    if (m > 0 && states && query_states(ids, m, states)) {
        for (int i = 0; i < m; i++) {
            dt_launch_run *r = rs[i];
            bool ended = !states[i][0] || state_ended(states[i]);
            read_output(r, ended);
            if (!ended) continue;
            int code = ended_code(s, r);
            pthread_mutex_lock(&s->mu);
            r->ended = r->done = true;
            r->code = code;
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
        }
    } else {
        for (int i = 0; i < m; i++) read_output(rs[i], false);
    }
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < m; i++) rs[i]->polling = false;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    free(rs);
    free(ids);
    free(states);
}

static void *poller_main(void *arg) {
    slurm *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        bool stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (stop) break;
        poll_once(s);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        double t = (double)until.tv_nsec * 1e-9 + s->o.poll_s;
        until.tv_sec += (time_t)t;
        until.tv_nsec = (long)((t - (double)(time_t)t) * 1e9);
        pthread_mutex_lock(&s->mu);
        if (!s->stop) pthread_cond_timedwait(&s->cv, &s->mu, &until);
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

static bool slurm_exited(dt_launcher *l, dt_launch_run *r, int *code) {
    slurm *s = SLURM(l);
    pthread_mutex_lock(&s->mu);
    bool done = r->done;
    if (done && code) *code = r->code;
    pthread_mutex_unlock(&s->mu);
    return done;
}

/* ---- signalling and stopping ---- */

/* scancel [--full --signal=SIG] JOB; DT_ERR_IO with scancel's message. */
static dt_status scancel(int64_t job, int sig) {
    char id[32], sigarg[32], out[CMD_OUT];
    snprintf(id, sizeof id, "%lld", (long long)job);
    snprintf(sigarg, sizeof sigarg, "--signal=%d", sig);
    const char *with[] = {"scancel", "--full", sigarg, id, NULL};
    const char *plain[] = {"scancel", id, NULL};
    if (slurm_cmd(out, sizeof out, sig ? with : plain) != 0)
        return dt_error(DT_ERR_IO, "scancel of Slurm job %s failed: %s", id, last_line(out));
    return DT_OK;
}

static dt_status slurm_signal(dt_launcher *l, dt_launch_run *r, int sig) {
    (void)l;
    if (sig <= 0 || sig >= NSIG) return dt_error(DT_ERR_INVALID, "no signal %d", sig);
    if (slurm_exited(l, r, NULL)) return DT_OK;
    return scancel(r->job, sig);
}

/* SIGKILL the job's processes, end the job. */
static void cancel_job(int64_t job) {
    if (scancel(job, SIGKILL) != DT_OK) dt_log(DT_LOG_DEBUG, "%s", dt_last_error());
    if (scancel(job, 0) != DT_OK) dt_log(DT_LOG_DEBUG, "%s", dt_last_error());
}

static void slurm_kill_wait(dt_launcher *l, dt_launch_run *r) {
    slurm *s = SLURM(l);
    pthread_mutex_lock(&s->mu);
    bool done = r->done;
    if (!done) r->cancelled = true;
    pthread_mutex_unlock(&s->mu);
    if (done) return;
    cancel_job(r->job);
    double until = now_s() + KILL_WAIT_S;
    pthread_mutex_lock(&s->mu);
    pthread_cond_broadcast(&s->cv); /* poll now */
    while (!r->done && now_s() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    if (!r->done) {
        dt_log(DT_LOG_ERROR,
               "Slurm job %lld: not ended %.0f s after scancel; hint: look at it with `squeue -j "
               "%lld` and `scontrol show job %lld`",
               (long long)r->job, KILL_WAIT_S, (long long)r->job, (long long)r->job);
        r->ended = r->done = true;
        r->code = 128 + SIGKILL;
    }
    pthread_mutex_unlock(&s->mu);
}

static int64_t slurm_handle(dt_launcher *l, dt_launch_run *r) {
    (void)l;
    return r->job;
}

/* Job ids are not given again soon: the id alone names the job. */
static uint64_t slurm_handle_start(dt_launcher *l, dt_launch_run *r) {
    (void)l, (void)r;
    return 0;
}

static dt_status slurm_reclaim(dt_launcher *l, int64_t handle, uint64_t handle_start,
                               double timeout_s) {
    (void)l, (void)handle_start;
    if (handle <= 0) return dt_error(DT_ERR_INVALID, "%lld is no Slurm job id", (long long)handle);
    cancel_job(handle);
    for (double until = now_s() + timeout_s;;) {
        char state[32];
        if (query_states(&handle, 1, &state) && (!state[0] || state_ended(state))) return DT_OK;
        if (now_s() > until)
            return dt_error(DT_ERR_STATE,
                            "Slurm job %lld has not ended %.0f s after scancel; hint: look at it "
                            "with `squeue -j %lld`",
                            (long long)handle, timeout_s, (long long)handle);
        sleep_s(0.5);
    }
}

static void slurm_release(dt_launcher *l, dt_launch_run *r) {
    if (!r) return;
    slurm *s = SLURM(l);
    slurm_kill_wait(l, r);
    pthread_mutex_lock(&s->mu);
    while (r->polling) pthread_cond_wait(&s->cv, &s->mu);
    for (dt_launch_run **p = &s->runs; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            break;
        }
    pthread_mutex_unlock(&s->mu);
    unlink(r->script);
    unlink(r->out_path);
    free(r->script);
    free(r->out_path);
    free(r);
}

static void opts_free(slurm *s) {
    free((char *)s->o.job_dir);
    free((char *)s->o.partition);
    free((char *)s->o.account);
    free((char *)s->o.time);
    for (int i = 0; s->args && i < s->o.n_sbatch_args; i++) free(s->args[i]);
    free(s->args);
}

static void slurm_free(dt_launcher *l) {
    if (!l) return;
    slurm *s = SLURM(l);
    while (s->runs) slurm_release(l, s->runs);
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->poller, NULL);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    opts_free(s);
    free(s);
    free(l);
}

static const dt_launcher_ops slurm_ops = {
    .name = "slurm",
    .start = slurm_start,
    .exited = slurm_exited,
    .signal = slurm_signal,
    .kill_wait = slurm_kill_wait,
    .handle = slurm_handle,
    .handle_start = slurm_handle_start,
    .reclaim = slurm_reclaim,
    .release = slurm_release,
    .free = slurm_free,
};

static char *dup_opt(const char *s, bool *ok) {
    char *d = s ? strdup(s) : NULL;
    if (s && !d) *ok = false;
    return d;
}

dt_launcher *dt_launcher_slurm_new(const dt_slurm_opts *o) {
    if (!o || !o->job_dir || o->n_sbatch_args < 0 || o->n_sbatch_args > 60) {
        dt_error(DT_ERR_INVALID, "dt_launcher_slurm_new: no job_dir, or more than 60 sbatch_args");
        return NULL;
    }
    char out[CMD_OUT];
    const char *v[] = {"sbatch", "--version", NULL};
    if (slurm_cmd(out, sizeof out, v) != 0) {
        dt_error(DT_ERR_IO,
                 "the slurm launcher cannot run sbatch (%s); hint: install Slurm's client "
                 "commands on the master's host and put them on PATH",
                 out[0] ? last_line(out) : "not found");
        return NULL;
    }
    if (mkdir(o->job_dir, 0700) != 0 && errno != EEXIST) {
        dt_error(DT_ERR_IO, "cannot create the Slurm job directory %s: %s", o->job_dir,
                 strerror(errno));
        return NULL;
    }
    dt_launcher *l = calloc(1, sizeof *l);
    slurm *s = calloc(1, sizeof *s);
    bool ok = l && s;
    if (ok) {
        s->o = *o;
        s->o.job_dir = dup_opt(o->job_dir, &ok);
        s->o.partition = dup_opt(o->partition, &ok);
        s->o.account = dup_opt(o->account, &ok);
        s->o.time = dup_opt(o->time, &ok);
        s->o.sbatch_args = NULL;
        if (s->o.poll_s <= 0) s->o.poll_s = 1;
        s->args = calloc((size_t)o->n_sbatch_args + 1, sizeof *s->args);
        ok = ok && s->args;
        for (int i = 0; ok && i < o->n_sbatch_args; i++)
            s->args[i] = dup_opt(o->sbatch_args[i], &ok);
    }
    if (ok) {
        pthread_mutex_init(&s->mu, NULL);
        pthread_cond_init(&s->cv, NULL);
        if (pthread_create(&s->poller, NULL, poller_main, s) != 0) {
            pthread_cond_destroy(&s->cv);
            pthread_mutex_destroy(&s->mu);
            ok = false;
        }
    }
    if (!ok) {
        if (s) opts_free(s);
        free(s);
        free(l);
        dt_error(DT_ERR_OOM, "out of memory");
        return NULL;
    }
    l->ops = &slurm_ops;
    l->impl = s;
    return l;
}
