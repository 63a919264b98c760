/* Tests for src/launch/hostfile.c and the hostfile form of launch.c's mpirun command line:
 * OpenMPI's hostfile lines (slots, max_slots, comments, repeated hosts), the errors a bad file
 * gives, the check that a trial's slots fit, writing a run's hostfile, and the mpirun argv over
 * a hostfile (the options dropped for the ranks, the DTRAIN_* variables sent by name, the
 * launcher's host, threads per rank from the busiest host). */
#define _GNU_SOURCE
#include "launch/launch.h"
#include "fixtures/files.h"
#include "test.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_tmp[PATH_MAX];

/* `text` written to <tmp>/name; the path in a static buffer. */
static const char *file_with(const char *name, const char *text) {
    static char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", g_tmp, name);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return p;
}

static void test_load(void) {
    dt_hostfile *h = NULL;
    const char *p = file_with("hf", "# two hosts\n"
                                    "node-a slots=2\n"
                                    "\n"
                                    "node-b slots=3 max_slots=4   # the big one\n"
                                    "node-c\n"
                                    "node-a slots=1\n");
    CHECK(dt_hostfile_load(p, &h) == DT_OK && h);
    if (!h) return;
    CHECK(h->n_hosts == 3 && h->total == 7);
    CHECK(!strcmp(h->hosts[0], "node-a") && h->slots[0] == 3); /* named twice: added up */
    CHECK(!strcmp(h->hosts[1], "node-b") && h->slots[1] == 3);
    CHECK(!strcmp(h->hosts[2], "node-c") && h->slots[2] == 1); /* no slots=: one */
    CHECK(dt_hostfile_check(h, p, 7) == DT_OK);
    CHECK(dt_hostfile_check(h, p, 8) == DT_ERR_CONFIG);
    CHECK_MSG(strstr(dt_last_error(), "needs 8 slots but hostfile") &&
                  strstr(dt_last_error(), "has 7 (on 3 hosts)"),
              "%s", dt_last_error());
    dt_hostfile_free(h);
    dt_hostfile_free(NULL);
}

static void test_errors(void) {
    dt_hostfile *h = NULL;
    const char *p = file_with("bad1", "node-a slots=2\nnode-b slots=0\n");
    CHECK(dt_hostfile_load(p, &h) == DT_ERR_CONFIG && !h);
    CHECK_MSG(strstr(dt_last_error(), "bad1:2:") && strstr(dt_last_error(), "slots=0"), "%s",
              dt_last_error());
    p = file_with("bad2", "node-a cpus=2\n");
    CHECK(dt_hostfile_load(p, &h) == DT_ERR_CONFIG && !h);
    CHECK_MSG(strstr(dt_last_error(), "unknown word 'cpus=2'"), "%s", dt_last_error());
    p = file_with("bad3", "node-a slots=2x\n");
    CHECK(dt_hostfile_load(p, &h) == DT_ERR_CONFIG && !h);
    p = file_with("empty", "# nothing\n\n");
    CHECK(dt_hostfile_load(p, &h) == DT_ERR_CONFIG && !h);
    CHECK_MSG(strstr(dt_last_error(), "names no host"), "%s", dt_last_error());
    char missing[PATH_MAX + 16];
    snprintf(missing, sizeof missing, "%s/missing", g_tmp);
    CHECK(dt_hostfile_load(missing, &h) == DT_ERR_IO && !h);
    CHECK_MSG(strstr(dt_last_error(), "cannot read hostfile"), "%s", dt_last_error());
}

static void test_write(void) {
    char p[PATH_MAX + 16];
    snprintf(p, sizeof p, "%s/run.hosts", g_tmp);
    char *hosts[] = {"10.0.0.1", "10.0.0.2"};
    int slots[] = {2, 1};
    CHECK(dt_hostfile_write(p, hosts, slots, 2) == DT_OK);
    dt_hostfile *h = NULL;
    CHECK(dt_hostfile_load(p, &h) == DT_OK && h && h->total == 3 && h->n_hosts == 2);
    if (h) CHECK(!strcmp(h->hosts[1], "10.0.0.2") && h->slots[1] == 1);
    dt_hostfile_free(h);
    snprintf(p, sizeof p, "%s/no/such/dir", g_tmp);
    CHECK(dt_hostfile_write(p, hosts, slots, 2) == DT_ERR_IO);
}

static int find(char **av, const char *s) {
    for (int i = 0; av && av[i]; i++)
        if (!strcmp(av[i], s)) return i;
    return -1;
}

static void test_mpirun_hosts_argv(void) {
    const char *hf = file_with("argv.hosts", "h1 slots=2\nh2 slots=2\n");
    char hfc[PATH_MAX + 64];
    snprintf(hfc, sizeof hfc, "%s", hf);
    setenv("DTRAIN_MASTER", "http://10.0.0.9:8080", 1);
    setenv("DTRAIN_TOKEN", "abc", 1);
    setenv("DTRAIN_LAUNCHER_PID", "1", 1); /* the launcher's own are set anew, never forwarded */
    char *args[] = {"a.yaml", "--hostfile", hfc, "--slots", "4", "dir"};
    char **av = NULL;
    CHECK(dt_launch_mpirun_hosts_argv(4, hfc, "train", 6, args, &av) == DT_OK && av);
    if (!av) return;
    CHECK(!strcmp(av[0], "mpirun") && !strcmp(av[1], "-np") && !strcmp(av[2], "4"));
    CHECK(!strcmp(av[3], "--hostfile") && !strcmp(av[4], hfc));
    CHECK(find(av, "--oversubscribe") < 0); /* the hostfile's slots say where ranks go */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char omp[64], lpid[64], lhost[300], host[256] = "";
    snprintf(omp, sizeof omp, "OMP_NUM_THREADS=%ld", cores / 2 > 0 ? cores / 2 : 1);
    snprintf(lpid, sizeof lpid, "DTRAIN_LAUNCHER_PID=%ld", (long)getpid());
    gethostname(host, sizeof host - 1);
    snprintf(lhost, sizeof lhost, "DTRAIN_LAUNCHER_HOST=%s", host);
    CHECK_MSG(find(av, omp) > 0, "no %s", omp); /* 2 ranks per host share its cores */
    CHECK(find(av, lpid) > 0 && !strcmp(av[find(av, lpid) - 1], "-x"));
    CHECK(find(av, lhost) > 0 && !strcmp(av[find(av, lhost) - 1], "-x"));
    int m = find(av, "DTRAIN_MASTER"), t = find(av, "DTRAIN_TOKEN");
    CHECK(m > 0 && !strcmp(av[m - 1], "-x") && t > 0 && !strcmp(av[t - 1], "-x"));
    CHECK(find(av, "DTRAIN_LAUNCHER_PID") < 0);
    int e = find(av, "train");
    CHECK(e > 0 && av[e + 1] && !strcmp(av[e + 1], "a.yaml") && av[e + 2] &&
          !strcmp(av[e + 2], "dir") && !av[e + 3]);
    dt_launch_argv_free(av);

    /* too few slots: refused before mpirun, saying both counts */
    CHECK(dt_launch_mpirun_hosts_argv(5, hfc, "train", 0, NULL, &av) == DT_ERR_CONFIG && !av);
    CHECK_MSG(strstr(dt_last_error(), "needs 5 slots"), "%s", dt_last_error());
    unsetenv("DTRAIN_MASTER");
    unsetenv("DTRAIN_TOKEN");
    unsetenv("DTRAIN_LAUNCHER_PID");
}

int main(void) {
    if (!fx_tmpdir(g_tmp, sizeof g_tmp, "test-hostfile")) return 1;
    TEST_RUN(test_load);
    TEST_RUN(test_errors);
    TEST_RUN(test_write);
    TEST_RUN(test_mpirun_hosts_argv);
    if (!fx_rmtree(g_tmp)) fprintf(stderr, "could not remove %s\n", g_tmp);
    TEST_END();
}
