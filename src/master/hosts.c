/*
 * hosts.c — the master's slots over an MPI hostfile (`dtrain master --hostfile FILE`): the
 * master's slots are the hostfile's, slot i on host slot_host[i]; each run of a trial gets the
 * hosts of the slots the scheduler gave it as a hostfile of its own
 * (<home>/runs/trial-<id>.hosts, rewritten for every run), so two trials never place ranks on
 * the same slot. The run's mpirun (`dtrain worker --hostfile`) starts on this machine and
 * reaches those hosts; the ranks reach the master at its address with the token.
 */
#include "master_impl.h"

#include "base/base_impl.h"
#include "launch/launch.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

dt_status m_hosts_load(master *m) {
    if (!m->o.hostfile) return DT_OK;
    if (m->o.slots > 0)
        return dt_error(DT_ERR_CONFIG, "--slots and --hostfile: the slots are the hostfile's "
                                       "(slots=N per host); hint: pass one of them");
    if (dt_hostfile_load(m->o.hostfile, &m->hosts) != DT_OK) return dt_last_status();
    m->slots = m->hosts->total;
    if (!(m->slot_host = calloc((size_t)m->slots, sizeof *m->slot_host)))
        return dt_error(DT_ERR_OOM, "out of memory");
    for (int h = 0, i = 0; h < m->hosts->n_hosts; h++)
        for (int k = 0; k < m->hosts->slots[h]; k++) m->slot_host[i++] = h;
    return DT_OK;
}

/* <home>/runs/trial-<id>.hosts, absolute when `dir` is (the worker runs in the model dir) */
static void run_path(const char *dir, int64_t trial, char *path, size_t n) {
    snprintf(path, n, "%s/trial-%lld.hosts", dir, (long long)trial);
}

dt_status m_hosts_write_run(master *m, const m_trial *t, char *path, size_t n) {
    int *count = calloc((size_t)m->hosts->n_hosts, sizeof *count);
    char **names = calloc((size_t)m->hosts->n_hosts, sizeof *names);
    int *counts = calloc((size_t)m->hosts->n_hosts, sizeof *counts);
    if (!count || !names || !counts) {
        free(count), free(names), free(counts);
        return dt_error(DT_ERR_OOM, "out of memory");
    }
    for (int i = 0; i < m->slots; i++)
        if (m->slot_busy[i] == t->id) count[m->slot_host[i]]++;
    int used = 0; /* the hosts in hostfile order: ranks fill the first one first */
    for (int h = 0; h < m->hosts->n_hosts; h++)
        if (count[h]) {
            names[used] = m->hosts->hosts[h];
            counts[used++] = count[h];
        }
    char dir[4200], failed[4200], abs[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/runs", m->home);
    int err = dt__mkdir_p(dir, failed, sizeof failed);
    if (!err && !realpath(dir, abs)) snprintf(failed, sizeof failed, "%s", dir), err = errno;
    if (!err) run_path(abs, t->id, path, n);
    dt_status st = err ? dt_error(DT_ERR_IO, "cannot create %s: %s", failed, strerror(err))
                       : dt_hostfile_write(path, names, counts, used);
    free(count), free(names), free(counts);
    return st;
}

void m_hosts_run_done(master *m, const m_trial *t) {
    if (!m->hosts) return;
    char dir[4200], abs[PATH_MAX], path[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/runs", m->home);
    if (!realpath(dir, abs)) return;
    run_path(abs, t->id, path, sizeof path);
    unlink(path);
}

void m_hosts_free(master *m) {
    dt_hostfile_free(m->hosts);
    free(m->slot_host);
}
