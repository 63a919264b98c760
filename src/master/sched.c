/*
 * sched.c — the master's scheduler: a pool of slots (each a share of the machine's cores),
 * trials started on free slots as processes of this binary (`dtrain worker`, under mpirun
 * for several slots) through the launcher, their ends turned into trial events, and their
 * printed lines collected into the store.
 *
 * A run is over only when every process of it is gone (the launcher's kill_wait after the
 * main process exits), and only then are its slots free and can the trial run again — so a
 * relaunch never races the run it replaces; the checkpoint directory's lock (trial layer)
 * guards the same from the other side.
 *
 * Each experiment runs its trials through its launcher: the master's local one (on the slot
 * pool) or a Slurm launcher of its own, whose jobs Slurm places — they take no local slots,
 * and reach the master at cluster_url.
 *
 * A run that hangs (a deadlock, a collective that never completes) holds its slots for ever:
 * every report of a run, and the heartbeats the fit loop sends between them (api_trial.c), set
 * its last_heard; a run silent for longer than its experiment's resources.max_silence is killed
 * like any run that failed — the trial restarts from its latest checkpoint while max_restarts
 * allows — with the reason in its logs and as its exit reason.
 */
#define _GNU_SOURCE
#include "master_impl.h"

#include "launch/launch.h"
#include "trial_env.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOG_BATCH 4096 /* lines per store transaction */

/* ---- logs ---- */

void m_sched_on_log(void *arg, int64_t trial_id, int rank, const char *line) {
    master *m = arg;
    pthread_mutex_lock(&m->log_lock);
    if (m->n_logs == m->cap_logs) {
        int cap = m->cap_logs ? 2 * m->cap_logs : 256;
        m_log *v = realloc(m->logs, (size_t)cap * sizeof *v);
        if (!v) goto out; /* the line is lost; the trial is not */
        m->logs = v;
        m->cap_logs = cap;
    }
    char *copy = strdup(line);
    if (copy) m->logs[m->n_logs++] = (m_log){trial_id, rank < 0 ? 0 : rank, copy};
out:
    pthread_mutex_unlock(&m->log_lock);
}

/* Write the collected lines, grouped by trial, in one transaction per batch. */
static void flush_logs(master *m) {
    pthread_mutex_lock(&m->log_lock);
    m_log *logs = m->logs;
    int n = m->n_logs;
    m->logs = NULL;
    m->n_logs = m->cap_logs = 0;
    pthread_mutex_unlock(&m->log_lock);
    int *ranks = malloc((size_t)(n ? n : 1) * sizeof *ranks);
    const char **lines = malloc((size_t)(n ? n : 1) * sizeof *lines);
    for (int i = 0; ranks && lines && i < n;) {
        int j = i;
        while (j < n && j - i < LOG_BATCH && logs[j].trial_id == logs[i].trial_id) {
            ranks[j - i] = logs[j].rank;
            lines[j - i] = logs[j].line;
            j++;
        }
        if (dt_store_logs_insert(m->store, logs[i].trial_id, ranks, lines, j - i) != DT_OK)
            dt_log(DT_LOG_ERROR, "trial %lld: logs: %s", (long long)logs[i].trial_id,
                   dt_last_error());
        i = j;
    }
    for (int i = 0; i < n; i++) free(logs[i].line);
    free(logs);
    free(ranks);
    free(lines);
}

/* ---- slots ---- */

static int free_slots(const master *m) {
    int n = 0;
    for (int i = 0; i < m->slots; i++) n += m->slot_busy[i] == 0;
    return n;
}

static int slots_of(const m_trial *t) {
    return (int)t->exp->cfg->slots_per_trial;
}

/* The trial's launcher, and does it run on this machine's slots? */
static dt_launcher *lau(const m_trial *t) {
    return t->exp->launcher;
}
static bool on_slots(const master *m, const m_trial *t) {
    return t->exp->launcher == m->launcher;
}

static void release_slots(master *m, m_trial *t) {
    for (int i = 0; i < m->slots; i++)
        if (m->slot_busy[i] == t->id) m->slot_busy[i] = 0;
}

/* The cores of slot i: slots share the machine's cores evenly. */
static int cores_per_slot(const master *m) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int c = cores > 0 ? (int)(cores / m->slots) : 1;
    return c < 1 ? 1 : c;
}

/* ---- launching ---- */

/* `dtrain worker --slots N [--hostfile F]`: with several slots, or a hostfile (the run's hosts),
 * the worker re-runs itself under mpirun (src/cli/worker.c), so the process this master starts
 * is mpirun itself. */
static char **worker_argv(const m_trial *t, const char *hostfile) {
    char exe[PATH_MAX], slots[32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return NULL;
    exe[n] = 0;
    snprintf(slots, sizeof slots, "%d", slots_of(t));
    const char *args[] = {exe, "worker", "--slots", slots, "--hostfile", hostfile};
    int k = hostfile ? 6 : 4;
    char **argv = calloc(7, sizeof *argv);
    for (int i = 0; argv && i < k; i++)
        if (!(argv[i] = strdup(args[i]))) {
            dt_launch_argv_free(argv);
            return NULL;
        }
    return argv;
}

/* How often a run sends heartbeats: four per max_silence (so one late heartbeat, or a slow
 * answer, is not silence), between HEARTBEAT_MIN_S and HEARTBEAT_MAX_S. */
#define HEARTBEAT_MIN_S 0.25
#define HEARTBEAT_MAX_S 30.0
static double heartbeat_s(const dt_expconf *cfg) {
    double s = cfg->max_silence > 0 ? cfg->max_silence / 4 : HEARTBEAT_MAX_S;
    return s < HEARTBEAT_MIN_S ? HEARTBEAT_MIN_S : s > HEARTBEAT_MAX_S ? HEARTBEAT_MAX_S : s;
}

static dt_status launch(master *m, m_trial *t) {
    int slots = slots_of(t), cps = cores_per_slot(m);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    free(t->cpus);
    t->cpus = calloc((size_t)(slots * cps), sizeof *t->cpus);
    if (!t->cpus) return dt_error(DT_ERR_OOM, "out of memory");
    int n_cpus = 0;
    for (int i = 0, got = 0; on_slots(m, t) && i < m->slots && got < slots; i++)
        if (m->slot_busy[i] == 0) {
            m->slot_busy[i] = t->id;
            got++;
            for (int c = 0; c < cps; c++) t->cpus[n_cpus++] = (int)((i * cps + c) % cores);
        }
    char hostfile[4300];
    bool hosts = m->hosts && on_slots(m, t); /* the master's hosts, not a Slurm allocation */
    if (hosts && m_hosts_write_run(m, t, hostfile, sizeof hostfile) != DT_OK) {
        release_slots(m, t);
        return dt_last_status();
    }
    char **argv = worker_argv(t, hosts ? hostfile : NULL);
    if (!argv) {
        release_slots(m, t);
        return dt_error(DT_ERR_IO, "cannot build the trial's command line");
    }
    t->run_id++;
    char e_master[300], e_trial[64], e_run[64], e_omp[64], e_token[128], e_beat[64];
    snprintf(e_master, sizeof e_master, "DTRAIN_MASTER=%s",
             on_slots(m, t) ? m->url : m->cluster_url);
    snprintf(e_trial, sizeof e_trial, "DTRAIN_TRIAL_ID=%lld", (long long)t->id);
    snprintf(e_run, sizeof e_run, "DTRAIN_TRIAL_RUN=%lld", (long long)t->run_id);
    snprintf(e_omp, sizeof e_omp, "OMP_NUM_THREADS=%d", cps);
    snprintf(e_token, sizeof e_token, "DTRAIN_TOKEN=%s", m->token);
    snprintf(e_beat, sizeof e_beat, DT__HEARTBEAT_ENV "=%g", heartbeat_s(t->exp->cfg));
    char *env[] = {e_master, e_trial, e_run, e_omp, e_token, e_beat, NULL};
    dt_launch_spec spec = {.trial_id = t->id,
                           .argv = argv,
                           .env = env,
                           .workdir = t->exp->model_dir,
                           .cpus = n_cpus && !m->hosts ? t->cpus : NULL, /* not other hosts' */
                           .n_cpus = m->hosts ? 0 : n_cpus,
                           .slots = slots,
                           .on_log = m_sched_on_log,
                           .log_arg = m};
    dt_status st = lau(t)->ops->start(lau(t), &spec, &t->run);
    dt_launch_argv_free(argv);
    if (st != DT_OK) {
        t->run = NULL;
        release_slots(m, t);
        return st;
    }
    t->started = dt_now_sec();
    t->first_batch_seen = false;
    free(t->silence_reason); /* (about the run before) */
    t->silence_reason = NULL;
    t->last_heard = t->started; /* silence counts from the launch */
    int64_t handle = lau(t)->ops->handle(lau(t), t->run);
    uint64_t start = lau(t)->ops->handle_start(lau(t), t->run);
    if (dt_store_trial_set_run_handle(m->store, t->id, t->run_id, handle, start) != DT_OK)
        dt_log(DT_LOG_ERROR, "trial %lld: %s", (long long)t->id, dt_last_error());
    dt_log(DT_LOG_INFO, "trial %lld (experiment %lld) run %lld started on %d slot(s)",
           (long long)t->id, (long long)t->exp->id, (long long)t->run_id, slots);
    return DT_OK;
}

/* The run's processes are all gone: free its slots and tell the experiment. */
static void run_over(master *m, m_trial *t, int code) {
    char line[160];
    snprintf(line, sizeof line, "dtrain master: run %lld ended with exit code %d after %.3f s",
             (long long)t->run_id, code, dt_now_sec() - t->started);
    m_sched_on_log(m, t->id, 0, line);
    lau(t)->ops->release(lau(t), t->run);
    t->run = NULL;
    release_slots(m, t);
    m_hosts_run_done(m, t);
    if (dt_store_trial_set_run(m->store, t->id, t->run_id, 0) != DT_OK ||
        dt_store_trial_set_progress(m->store, t->id, t->batches, t->total_batches) != DT_OK)
        dt_log(DT_LOG_ERROR, "trial %lld: %s", (long long)t->id, dt_last_error());
    flush_logs(m); /* the run's last lines before its end is recorded */
    m->events.run_ended(m, t, code);
}

dt_status m_sched_exp_launcher(master *m, m_exp *e) {
    dt_expconf *cfg = e->cfg;
    if (!cfg->launcher) { /* the master's default, recorded: a restarted master uses the same */
        json_t *r = json_object_get(cfg->json, "resources");
        if (!json_is_object(r)) json_object_set_new(cfg->json, "resources", r = json_object());
        if (!(cfg->launcher = strdup(m->o.launcher)) ||
            json_object_set_new(r, "launcher", json_string(m->o.launcher)))
            return dt_error(DT_ERR_OOM, "out of memory");
    }
    if (!strcmp(cfg->launcher, "local")) {
        e->launcher = m->launcher;
        return DT_OK;
    }
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/slurm", m->home);
    const dt_slurm_conf *sc = &cfg->slurm;
    dt_slurm_opts so = {.job_dir = dir,
                        .partition = sc->partition,
                        .account = sc->account,
                        .time = sc->time,
                        .sbatch_args = (const char *const *)sc->sbatch_args,
                        .n_sbatch_args = sc->n_sbatch_args,
                        .slots_per_node = (int)sc->slots_per_node,
                        .cpus_per_slot = (int)sc->cpus_per_slot,
                        .poll_s = m->o.slurm_poll_s};
    if (!(e->launcher = dt_launcher_slurm_new(&so))) return dt_last_status();
    e->own_launcher = true;
    return DT_OK;
}

void m_sched_kill(master *m, m_trial *t) {
    if (!t->run) return;
    t->killing = true;
    lau(t)->ops->kill_wait(lau(t), t->run);
    run_over(m, t, 128 + SIGKILL);
}

/* "checkpoint UUID" of the trial's latest completed checkpoint, or "its start" without one. */
static void restart_point(master *m, const m_trial *t, char *out, size_t n) {
    json_t *row = NULL;
    const char *uuid = NULL;
    if (dt_store_trial_get(m->store, t->id, &row) == DT_OK)
        uuid = json_string_value(json_object_get(row, "latest_checkpoint"));
    if (uuid)
        snprintf(out, n, "checkpoint %s", uuid);
    else
        snprintf(out, n, "its start (no checkpoint yet)");
    json_decref(row);
}

/* Kill t's run when it has been silent for longer than its experiment's max_silence: a hang.
 * The run ends as a failed one (m_trial_run_ended restarts it or ends the trial). */
static void check_silence(master *m, m_trial *t) {
    double limit = t->exp->cfg->max_silence, silent = dt_now_sec() - t->last_heard;
    if (!t->run || limit <= 0 || silent <= limit || t->killing) return;
    char point[128], line[400];
    restart_point(m, t, point, sizeof point);
    if (t->restarts < t->exp->cfg->max_restarts)
        snprintf(line, sizeof line,
                 "no heartbeat for %.0f s (resources.max_silence %g); killed, restarting from %s",
                 silent, limit, point);
    else
        snprintf(line, sizeof line,
                 "no heartbeat for %.0f s (resources.max_silence %g); killed, no restart left "
                 "(max_restarts %lld)",
                 silent, limit, (long long)t->exp->cfg->max_restarts);
    char logged[440];
    snprintf(logged, sizeof logged, "dtrain master: run %lld: %s", (long long)t->run_id, line);
    dt_log(DT_LOG_WARN, "trial %lld: %s", (long long)t->id, logged);
    m_sched_on_log(m, t->id, 0, logged);
    free(t->silence_reason);
    t->silence_reason = strdup(line);
    if (dt_store_trial_set_state(m->store, t->id, m_state_name(t->state), line) != DT_OK)
        dt_log(DT_LOG_ERROR, "trial %lld: %s", (long long)t->id, dt_last_error());
    lau(t)->ops->kill_wait(lau(t), t->run);
    run_over(m, t, 128 + SIGKILL);
}

/* Slots the experiment's runs hold now. */
static int64_t exp_slots_used(const m_exp *e) {
    int64_t n = 0;
    for (int i = 0; i < e->n_trials; i++)
        if (e->trials[i]->run) n += e->cfg->slots_per_trial;
    return n;
}

static bool wants_to_run(const m_trial *t) {
    const m_exp *e = t->exp;
    /* an operation to do, or (a command entrypoint without max_length) closed before its first
     * run: it runs once to its own end */
    return !t->run && e->state == M_ACTIVE && t->state == M_ACTIVE &&
           (t->n_ops > 0 || (t->closed && t->run_id == 0));
}

void m_sched_tick(master *m) {
    flush_logs(m);
    for (int i = 0; i < m->n_exps; i++) {
        m_exp *e = m->exps[i];
        for (int j = 0; j < e->n_trials; j++) {
            m_trial *t = e->trials[j];
            int code;
            if (t->run && !lau(t)->ops->exited(lau(t), t->run, &code)) check_silence(m, t);
            if (!t->run || !lau(t)->ops->exited(lau(t), t->run, &code)) continue;
            /* the main process is gone; whatever else of the run is left goes too */
            lau(t)->ops->kill_wait(lau(t), t->run);
            run_over(m, t, code);
            e = m->exps[i]; /* (an experiment is never removed by a run's end) */
        }
    }
    for (int i = 0; i < m->n_exps; i++) {
        m_exp *e = m->exps[i];
        for (int j = 0; j < e->n_trials; j++) {
            m_trial *t = e->trials[j];
            if (!wants_to_run(t) || (on_slots(m, t) && slots_of(t) > free_slots(m))) continue;
            if (e->cfg->max_slots && exp_slots_used(e) + slots_of(t) > e->cfg->max_slots) break;
            if (launch(m, t) != DT_OK) {
                char line[1200];
                snprintf(line, sizeof line, "dtrain master: trial %lld cannot start: %s",
                         (long long)t->id, dt_last_error());
                dt_log(DT_LOG_ERROR, "%s", line);
                m_sched_on_log(m, t->id, 0, line); /* the trial's logs say why */
                flush_logs(m);
                m->events.start_failed(m, t);
            }
        }
    }
}

void m_sched_stop_all(master *m, double grace_s) {
    pthread_mutex_lock(&m->lock);
    int running = 0;
    for (int i = 0; i < m->n_exps; i++)
        for (int j = 0; j < m->exps[i]->n_trials; j++)
            if (m->exps[i]->trials[j]->run) {
                m->exps[i]->trials[j]->preempt = true;
                running++;
            }
    pthread_mutex_unlock(&m->lock);
    double until = dt_now_sec() + grace_s;
    while (running > 0) {
        pthread_mutex_lock(&m->lock);
        running = 0;
        bool late = dt_now_sec() > until;
        for (int i = 0; i < m->n_exps; i++)
            for (int j = 0; j < m->exps[i]->n_trials; j++) {
                m_trial *t = m->exps[i]->trials[j];
                int code;
                if (!t->run) continue;
                if (late || lau(t)->ops->exited(lau(t), t->run, &code)) {
                    lau(t)->ops->kill_wait(lau(t), t->run);
                    lau(t)->ops->release(lau(t), t->run);
                    t->run = NULL;
                    release_slots(m, t);
                    dt_store_trial_set_run(m->store, t->id, t->run_id, 0);
                } else {
                    running++;
                }
            }
        flush_logs(m);
        pthread_mutex_unlock(&m->lock);
        if (running) usleep(50000);
    }
}
