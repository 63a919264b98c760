/* Tests for src/launch/launcher_local.c (and proctree.c): a run's lines reach on_log with their
 * ranks (plain, mpirun-tagged, partial, over-long, through a real mpirun), exit codes
 * (including death by a signal), kill_wait leaving no process behind (a grandchild, one in a
 * session of its own, mpirun's ranks in their own groups), core binding, the environment and
 * working directory, PR_SET_PDEATHSIG when the launching process dies, a group left behind by
 * an earlier process, and the errors of commands that cannot start. Loopback only. */
#define _GNU_SOURCE
#include "launch/launcher.h"
#include "test.h"
#include "testproc.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_LINES 256

typedef struct line {
    int64_t trial;
    int rank;
    char *text;
} line;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static line g_lines[MAX_LINES];
static int g_n;

static void on_log(void *arg, int64_t trial_id, int rank, const char *text) {
    (void)arg;
    pthread_mutex_lock(&g_mu);
    if (g_n < MAX_LINES) g_lines[g_n++] = (line){trial_id, rank, strdup(text)};
    pthread_mutex_unlock(&g_mu);
}

static void clear_lines(void) {
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_n; i++) free(g_lines[i].text);
    g_n = 0;
    pthread_mutex_unlock(&g_mu);
}

static int n_lines(void) {
    pthread_mutex_lock(&g_mu);
    int n = g_n;
    pthread_mutex_unlock(&g_mu);
    return n;
}

/* The rank of the line `text` (-2 when there is none). */
static int rank_of(const char *text) {
    int r = -2;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_n; i++)
        if (!strcmp(g_lines[i].text, text)) r = g_lines[i].rank;
    pthread_mutex_unlock(&g_mu);
    return r;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Wait up to 20 s for `n` lines. */
static bool wait_lines(int n) {
    for (int i = 0; i < 10000 && n_lines() < n; i++) sleep_ms(2);
    return n_lines() >= n;
}

/* True while group `g` has a live process (zombies, left for init to reap, do not count). */
static bool group_live(pid_t g) {
    if (kill(-g, 0) != 0) return false;
    DIR *d = opendir("/proc");
    bool live = false;
    for (struct dirent *e; d && !live && (e = readdir(d));) {
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid > 1 && getpgid(pid) == g) live = test_pid_alive(pid);
    }
    if (d) closedir(d);
    return live;
}

static dt_launcher *g_l;

static dt_launch_run *run_sh(const char *script, char *const *env, const char *workdir,
                             const int *cpus, int n_cpus) {
    char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
    dt_launch_spec s = {.trial_id = 7,
                        .argv = argv,
                        .env = env,
                        .workdir = workdir,
                        .cpus = cpus,
                        .n_cpus = n_cpus,
                        .on_log = on_log};
    dt_launch_run *r = NULL;
    dt_status st = g_l->ops->start(g_l, &s, &r);
    CHECK_MSG(st == DT_OK && r, "start: %s", dt_last_error());
    return r;
}

/* Wait for the run's end; its exit code. */
static int finish(dt_launch_run *r) {
    int code = -1;
    for (int i = 0; i < 10000 && !g_l->ops->exited(g_l, r, &code); i++) sleep_ms(2);
    g_l->ops->release(g_l, r);
    return code;
}

static void test_lines(void) {
    clear_lines();
    dt_launch_run *r = run_sh("echo one; echo two >&2; printf partial", NULL, NULL, NULL, 0);
    if (!r) return;
    CHECK(finish(r) == 0);
    CHECK(n_lines() == 3);
    CHECK(rank_of("one") == 0 && rank_of("two") == 0 && rank_of("partial") == 0);
    CHECK(g_n > 0 && g_lines[0].trial == 7);

    /* mpirun's --tag-output prefixes give the rank; an untagged line then is mpirun's (-1) */
    clear_lines();
    r = run_sh("echo '[1,1]<stdout>:from one'; echo '[1,0]<stderr>:from zero';"
               "echo '[1,3]<stddiag>:diag'; echo mpirun says",
               NULL, NULL, NULL, 0);
    if (!r) return;
    CHECK(finish(r) == 0);
    CHECK(rank_of("from one") == 1 && rank_of("from zero") == 0 && rank_of("diag") == 3);
    CHECK(rank_of("mpirun says") == -1);

    /* a 40 000-byte line arrives in pieces of at most 16 KiB, all of rank 2 */
    clear_lines();
    r = run_sh("printf '[1,2]<stdout>:'; head -c 40000 /dev/zero | tr '\\0' x; echo; echo end",
               NULL, NULL, NULL, 0);
    if (!r) return;
    CHECK(finish(r) == 0);
    size_t total = 0;
    bool ranks_ok = true, sizes_ok = true;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_n; i++) {
        if (!strcmp(g_lines[i].text, "end")) continue;
        total += strlen(g_lines[i].text);
        ranks_ok &= g_lines[i].rank == 2;
        sizes_ok &= strlen(g_lines[i].text) <= 16 * 1024;
    }
    pthread_mutex_unlock(&g_mu);
    CHECK_MSG(total == 40000, "%zu bytes", total);
    CHECK(ranks_ok && sizes_ok && n_lines() >= 4);
    CHECK(rank_of("end") == 0 || rank_of("end") == -1);
}

static void test_exit_codes(void) {
    dt_launch_run *r = run_sh("exit 3", NULL, NULL, NULL, 0);
    if (r) CHECK(finish(r) == 3);
    r = run_sh("kill -TERM $$", NULL, NULL, NULL, 0);
    if (r) CHECK(finish(r) == 128 + SIGTERM);
    /* signal() reaches the run */
    r = run_sh("exec sleep 100", NULL, NULL, NULL, 0);
    if (!r) return;
    int code = 0;
    CHECK(!g_l->ops->exited(g_l, r, &code));
    CHECK((pid_t)g_l->ops->handle(g_l, r) > 1);
    CHECK(g_l->ops->signal(g_l, r, SIGINT) == DT_OK);
    CHECK(finish(r) == 128 + SIGINT);
}

/* The pids a run printed, one a line, into pids[n]. */
static int read_pids(pid_t *pids, int n) {
    int k = 0;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_n && k < n; i++) {
        char *end;
        long v = strtol(g_lines[i].text, &end, 10);
        if (!*end && v > 1) pids[k++] = (pid_t)v;
    }
    pthread_mutex_unlock(&g_mu);
    return k;
}

/* The pids the ranks of an mpirun printed as "rank-pid N", one per rank, into pids[n]: lines
 * are matched by what they say, never by position, since mpirun itself may print warnings
 * (hwloc's, where /sys is missing) before or between them. Waits up to 20 s. */
static int read_rank_pids(pid_t *pids, int n) {
    int k = 0;
    for (int tries = 0; tries < 10000 && k < n; tries++) {
        k = 0;
        pthread_mutex_lock(&g_mu);
        for (int i = 0; i < g_n && k < n; i++) {
            long v = 0;
            if (g_lines[i].rank >= 0 && sscanf(g_lines[i].text, "rank-pid %ld", &v) == 1 && v > 1)
                pids[k++] = (pid_t)v;
        }
        pthread_mutex_unlock(&g_mu);
        if (k < n) sleep_ms(2);
    }
    return k;
}

static void test_kill_wait(void) {
    clear_lines();
    /* a grandchild in the run's group, and one in a session (and group) of its own */
    dt_launch_run *r = run_sh("sleep 100 & echo $!; setsid sleep 100 & echo $!; echo $$; wait",
                              NULL, NULL, NULL, 0);
    if (!r) return;
    CHECK(wait_lines(3));
    pid_t pids[3] = {0};
    CHECK(read_pids(pids, 3) == 3);
    pid_t pg = (pid_t)g_l->ops->handle(g_l, r);
    g_l->ops->kill_wait(g_l, r);
    for (int i = 0; i < 3; i++)
        CHECK_MSG(pids[i] && !test_pid_alive(pids[i]), "pid %d lives", pids[i]);
    CHECK(!group_live(pg));
    int code = 0;
    CHECK(g_l->ops->exited(g_l, r, &code) && code == 128 + SIGKILL);
    g_l->ops->release(g_l, r);
}

static void test_cpus_env_workdir(void) {
    clear_lines();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int cpu = cores > 1 ? 1 : 0;
    char want[64];
    snprintf(want, sizeof want, "Cpus_allowed_list:\t%d", cpu);
    dt_launch_run *r = run_sh("grep Cpus_allowed_list /proc/self/status", NULL, NULL, &cpu, 1);
    if (r) CHECK(finish(r) == 0);
    CHECK_MSG(rank_of(want) == 0, "no line \"%s\"", want);

    clear_lines();
    char dir[] = "/tmp/dtrain-launcher-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char real[PATH_MAX];
    CHECK(realpath(dir, real) != NULL);
    setenv("DT_TEST_KEPT", "kept", 1);
    setenv("DT_TEST_X", "old", 1);
    char *env[] = {"DT_TEST_X=42", "DT_TEST_Y=y", NULL};
    r = run_sh("echo $DT_TEST_X $DT_TEST_Y $DT_TEST_KEPT; pwd", env, dir, NULL, 0);
    if (r) CHECK(finish(r) == 0);
    CHECK(rank_of("42 y kept") == 0);
    CHECK_MSG(rank_of(real) == 0, "no line %s", real);
    CHECK(!strcmp(getenv("DT_TEST_X"), "old")); /* ours unchanged */
    rmdir(dir);
}

static void test_start_errors(void) {
    char *argv[] = {"dtrain-no-such-command", NULL};
    dt_launch_spec s = {.argv = argv, .on_log = on_log};
    dt_launch_run *r = NULL;
    CHECK(g_l->ops->start(g_l, &s, &r) == DT_ERR_IO && !r);
    CHECK_MSG(strstr(dt_last_error(), "dtrain-no-such-command") != NULL, "%s", dt_last_error());
    char *argv2[] = {"/no/such/dir/cmd", NULL};
    s.argv = argv2;
    CHECK(g_l->ops->start(g_l, &s, &r) == DT_ERR_IO && !r);
    CHECK(strstr(dt_last_error(), "/no/such/dir/cmd") != NULL);
    char *argv3[] = {"/bin/true", NULL};
    s.argv = argv3;
    s.workdir = "/no/such/workdir";
    CHECK(g_l->ops->start(g_l, &s, &r) == DT_ERR_IO && !r);
    CHECK_MSG(strstr(dt_last_error(), "/no/such/workdir") != NULL, "%s", dt_last_error());
    s.workdir = NULL;
    int bad = 100000;
    s.cpus = &bad;
    s.n_cpus = 1;
    CHECK(g_l->ops->start(g_l, &s, &r) != DT_OK && !r);
}

/* The launching process dies: PR_SET_PDEATHSIG kills its run. */
static void test_pdeathsig(void) {
    int p[2];
    CHECK(pipe(p) == 0);
    pid_t helper = fork();
    if (helper == 0) {
        close(p[0]);
        dt_launcher *l = dt_launcher_local_new();
        char *argv[] = {"/bin/sleep", "100", NULL};
        dt_launch_spec s = {.argv = argv};
        dt_launch_run *r = NULL;
        pid_t pid = l && l->ops->start(l, &s, &r) == DT_OK ? (pid_t)l->ops->handle(l, r) : 0;
        if (write(p[1], &pid, sizeof pid) != sizeof pid) _exit(1);
        pause();
        _exit(0);
    }
    close(p[1]);
    pid_t pid = 0;
    CHECK(read(p[0], &pid, sizeof pid) == sizeof pid && pid > 1);
    close(p[0]);
    CHECK(pid > 1 && test_pid_alive(pid));
    kill(helper, SIGKILL);
    waitpid(helper, NULL, 0);
    CHECK_MSG(pid > 1 && test_pid_gone(pid), "the run of a dead launcher lives on (pid %d)",
              (int)pid);
}

/* A group left behind by an earlier process (not our child). */
static void test_kill_group_wait(void) {
    int p[2];
    CHECK(pipe(p) == 0);
    pid_t helper = fork();
    if (helper == 0) {
        pid_t g = fork();
        if (g == 0) {
            setpgid(0, 0);
            execl("/bin/sh", "sh", "-c", "sleep 100 & sleep 100", (char *)NULL);
            _exit(127);
        }
        setpgid(g, g);
        if (write(p[1], &g, sizeof g) != sizeof g) _exit(1);
        _exit(0); /* the group is orphaned: init adopts it */
    }
    close(p[1]);
    pid_t g = 0;
    CHECK(read(p[0], &g, sizeof g) == sizeof g && g > 1);
    close(p[0]);
    waitpid(helper, NULL, 0);
    sleep_ms(50);
    CHECK(g > 1 && kill(-g, 0) == 0);
    uint64_t start = dt_launch_proc_start(g);
    CHECK(start > 0);
    CHECK(dt_launch_kill_group_wait(g, start, 10) == DT_OK);
    CHECK(g > 1 && !group_live(g));
    CHECK(dt_launch_kill_group_wait(g, start, 1) == DT_OK); /* none there: fine */
    CHECK(dt_launch_kill_group_wait(1, start, 1) == DT_ERR_INVALID);
    CHECK(dt_launch_kill_group_wait(getpgrp(), start, 1) == DT_ERR_INVALID);
}

/* A recorded pid the kernel has given to another process: an unrelated `sleep 100` whose start
 * time is not the recorded one is never signalled, and the run counts as gone. */
static void test_reused_pid_left_alone(void) {
    pid_t p = fork();
    if (p == 0) {
        setpgid(0, 0);
        execl("/bin/sleep", "sleep", "100", (char *)NULL);
        _exit(127);
    }
    CHECK(p > 1);
    setpgid(p, p);
    sleep_ms(50);
    uint64_t start = dt_launch_proc_start(p);
    CHECK(start > 0);
    CHECK(dt_launch_proc_start(p) == start); /* the same process, the same time */
    /* a run recorded as started a tick earlier or later, or at an unknown time */
    CHECK(dt_launch_kill_group_wait(p, start - 1, 1) == DT_OK);
    CHECK(dt_launch_kill_group_wait(p, start + 1, 1) == DT_OK);
    CHECK(dt_launch_kill_group_wait(p, 0, 1) == DT_OK);
    sleep_ms(50);
    CHECK_MSG(group_live(p) && waitpid(p, NULL, WNOHANG) == 0,
              "an unrelated process (pid %d) was killed for a recorded run", (int)p);
    /* the launcher's reclaim checks the same way */
    dt_launcher *l = dt_launcher_local_new();
    CHECK(l && l->ops->reclaim(l, p, start + 7, 1) == DT_OK);
    CHECK(group_live(p) && waitpid(p, NULL, WNOHANG) == 0);
    /* with its own start time it is the run, and goes */
    CHECK(l && l->ops->reclaim(l, p, start, 10) == DT_OK);
    CHECK(!group_live(p));
    waitpid(p, NULL, 0);
    if (l) l->ops->free(l);
}

/* Through a real mpirun: tagged ranks, and kill_wait reaches the ranks in their own groups. */
static void test_mpirun(void) {
    clear_lines();
    char *argv[] = {"mpirun",
                    "-np",
                    "2",
                    "--oversubscribe",
                    "--tag-output",
                    "/bin/sh",
                    "-c",
                    "echo rank-pid $$; exec sleep 100",
                    NULL};
    char *env[] = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", NULL};
    dt_launch_spec s = {.trial_id = 9, .argv = argv, .env = env, .on_log = on_log};
    dt_launch_run *r = NULL;
    CHECK_MSG(g_l->ops->start(g_l, &s, &r) == DT_OK, "%s", dt_last_error());
    if (!r) return;
    pid_t pids[2] = {0};
    CHECK(read_rank_pids(pids, 2) == 2);
    bool r0 = false, r1 = false;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_n; i++) {
        r0 |= g_lines[i].rank == 0;
        r1 |= g_lines[i].rank == 1;
    }
    pthread_mutex_unlock(&g_mu);
    CHECK(r0 && r1);
    for (int i = 0; i < 2; i++)
        CHECK(pids[i] && getpgid(pids[i]) != (pid_t)g_l->ops->handle(g_l, r));
    g_l->ops->kill_wait(g_l, r);
    for (int i = 0; i < 2; i++)
        CHECK_MSG(pids[i] && !test_pid_alive(pids[i]), "rank pid %d", pids[i]);
    g_l->ops->release(g_l, r);
}

int main(void) {
    g_l = dt_launcher_local_new();
    CHECK(g_l && !strcmp(g_l->ops->name, "local"));
    if (!g_l) TEST_END();
    TEST_RUN(test_lines);
    TEST_RUN(test_exit_codes);
    TEST_RUN(test_kill_wait);
    TEST_RUN(test_cpus_env_workdir);
    TEST_RUN(test_start_errors);
    TEST_RUN(test_mpirun);
    g_l->ops->free(g_l);
    clear_lines();
    TEST_RUN(test_pdeathsig); /* forks: no launcher thread of ours alive */
    TEST_RUN(test_kill_group_wait);
    TEST_RUN(test_reused_pid_left_alone);
    TEST_END();
}
