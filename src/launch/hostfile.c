/* hostfile.c — MPI hostfiles: which hosts a trial's slots may use and how many on each.
 *
 * The format is OpenMPI's, the subset dtrain reads: one host per line, `HOST [slots=N]
 * [max_slots=M]`, `#` starts a comment, blank lines are skipped; a host without `slots=` is
 * one slot, and a host named twice adds up. dtrain reads it to check a trial's slots fit
 * before mpirun starts and to hand each run of the master its own hosts; mpirun reads the
 * same file (or the one dt_hostfile_write makes) to place the ranks. */
#define _GNU_SOURCE
#include "launch/launch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Add `slots` slots on `host` (merged with an earlier line of the same host). */
static dt_status add_host(dt_hostfile *h, const char *host, int slots) {
    for (int i = 0; i < h->n_hosts; i++)
        if (!strcmp(h->hosts[i], host)) {
            h->slots[i] += slots;
            h->total += slots;
            return DT_OK;
        }
    char **hosts = realloc(h->hosts, (size_t)(h->n_hosts + 1) * sizeof *hosts);
    if (hosts) h->hosts = hosts;
    int *counts = hosts ? realloc(h->slots, (size_t)(h->n_hosts + 1) * sizeof *counts) : NULL;
    if (counts) h->slots = counts;
    char *name = counts ? strdup(host) : NULL;
    if (!name) return dt_error(DT_ERR_OOM, "out of memory");
    h->hosts[h->n_hosts] = name;
    h->slots[h->n_hosts++] = slots;
    h->total += slots;
    return DT_OK;
}

/* One line (comment stripped): its host and slots, or an error naming path:line. */
static dt_status parse_line(dt_hostfile *h, char *line, const char *path, int ln) {
    char *save = NULL, *host = strtok_r(line, " \t\r\n", &save);
    if (!host) return DT_OK;
    long slots = 1;
    for (char *w; (w = strtok_r(NULL, " \t\r\n", &save));) {
        const char *v = NULL;
        if (!strncmp(w, "slots=", 6))
            v = w + 6;
        else if (!strncmp(w, "max_slots=", 10) || !strncmp(w, "max-slots=", 10))
            v = w + 10;
        else
            return dt_error(DT_ERR_CONFIG,
                            "%s:%d: unknown word '%s' after host %s; hint: a line is "
                            "'HOST slots=N' (OpenMPI's hostfile format)",
                            path, ln, w, host);
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (*end || end == v || errno || n < 1 || n > 1 << 20)
            return dt_error(DT_ERR_CONFIG, "%s:%d: '%s' needs a positive whole number", path, ln,
                            w);
        if (w[0] == 's') slots = n;
    }
    return add_host(h, host, (int)slots);
}

dt_status dt_hostfile_load(const char *path, dt_hostfile **out) {
    *out = NULL;
    if (!path) return dt_error(DT_ERR_INVALID, "dt_hostfile_load: NULL path");
    FILE *f = fopen(path, "r");
    if (!f)
        return dt_error(DT_ERR_IO,
                        "cannot read hostfile %s: %s; hint: give a file of lines "
                        "'HOST slots=N'",
                        path, strerror(errno));
    dt_hostfile *h = calloc(1, sizeof *h);
    dt_status st = h ? DT_OK : dt_error(DT_ERR_OOM, "out of memory");
    char *line = NULL;
    size_t cap = 0;
    for (int ln = 1; st == DT_OK && getline(&line, &cap, f) >= 0; ln++) {
        line[strcspn(line, "#")] = 0;
        st = parse_line(h, line, path, ln);
    }
    free(line);
    fclose(f);
    if (st == DT_OK && h->total == 0)
        st = dt_error(DT_ERR_CONFIG,
                      "hostfile %s names no host; hint: one line 'HOST slots=N' "
                      "per host",
                      path);
    if (st != DT_OK) {
        dt_hostfile_free(h);
        return st;
    }
    *out = h;
    return DT_OK;
}

dt_status dt_hostfile_check(const dt_hostfile *h, const char *path, int64_t slots) {
    if (slots <= h->total) return DT_OK;
    return dt_error(DT_ERR_CONFIG,
                    "the trial needs %lld slots but hostfile %s has %d (on %d host%s); hint: add "
                    "hosts or slots=N to it, or lower resources.slots_per_trial / --slots",
                    (long long)slots, path, h->total, h->n_hosts, h->n_hosts == 1 ? "" : "s");
}

dt_status dt_hostfile_write(const char *path, char *const *hosts, const int *slots, int n) {
    FILE *f = fopen(path, "w");
    if (!f) return dt_error(DT_ERR_IO, "cannot write hostfile %s: %s", path, strerror(errno));
    for (int i = 0; i < n; i++) fprintf(f, "%s slots=%d\n", hosts[i], slots[i]);
    if (ferror(f) | (fclose(f) != 0))
        return dt_error(DT_ERR_IO, "cannot write hostfile %s: %s", path, strerror(errno));
    return DT_OK;
}

void dt_hostfile_free(dt_hostfile *h) {
    if (!h) return;
    for (int i = 0; i < h->n_hosts; i++) free(h->hosts[i]);
    free(h->hosts);
    free(h->slots);
    free(h);
}
