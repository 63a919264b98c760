/* Tests for src/trial/ckpt_lock.c and launcher_watch.c: the checkpoint directory's lock (made with the directory,
 * names its holder, refuses a second run with the holder's pid and host, released with its
 * file, free again once the holder is gone however it ended) and the launcher watch (a process
 * whose launcher is gone commits and removes no checkpoint; one tied to a launcher dies with
 * it). */
#define _GNU_SOURCE
#include "dtrain/trialio.h"
#include "fixtures/files.h"
#include "test.h"
#include "testproc.h"
#include "trial/trial_impl.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char g_tmp[64];

static bool exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* In a child process: lock `dir`; its status, and the message through pipe `p`. */
static dt_status lock_in_child(const char *dir, char *msg, size_t n) {
    int p[2];
    if (pipe(p) != 0) return DT_ERR_IO;
    pid_t c = fork();
    if (c == 0) {
        close(p[0]);
        int fd = -1;
        dt_status st = dt__ckpt_dir_lock(dir, &fd);
        const char *m = dt_last_error();
        if (write(p[1], m, strlen(m) + 1) < 0) _exit(100);
        dt__ckpt_dir_unlock(dir, fd);
        _exit((int)st);
    }
    close(p[1]);
    ssize_t k = read(p[0], msg, n - 1);
    msg[k > 0 ? k : 0] = 0;
    close(p[0]);
    int status = 0;
    waitpid(c, &status, 0);
    return WIFEXITED(status) ? (dt_status)WEXITSTATUS(status) : DT_ERR_IO;
}

static void test_lock(void) {
    char dir[512], lock[600], msg[1024];
    snprintf(dir, sizeof dir, "%s/a/ck", g_tmp);
    snprintf(lock, sizeof lock, "%s/.lock", dir);
    int fd = -1;
    CHECK_MSG(dt__ckpt_dir_lock(dir, &fd) == DT_OK && fd >= 0, "%s", dt_last_error());
    CHECK(exists(lock));
    FILE *f = fopen(lock, "r");
    long pid = 0;
    char host[256] = "", ours[256] = "";
    CHECK(f && fscanf(f, "%ld %255s", &pid, host) == 2);
    if (f) fclose(f);
    gethostname(ours, sizeof ours - 1);
    CHECK(pid == getpid() && !strcmp(host, ours));

    /* a second run: refused after the grace, naming this process and host */
    CHECK(lock_in_child(dir, msg, sizeof msg) == DT_ERR_STATE);
    char want[400];
    snprintf(want, sizeof want, "in use by pid %ld on host %s", (long)getpid(), ours);
    CHECK_MSG(strstr(msg, want) && strstr(msg, dir) && strstr(msg, "hint:"), "%s", msg);

    /* released: the file goes, and the next run gets the lock */
    dt__ckpt_dir_unlock(dir, fd);
    CHECK(!exists(lock));
    CHECK_MSG(lock_in_child(dir, msg, sizeof msg) == DT_OK, "%s", msg);

    /* a holder killed with SIGKILL leaves the file but not the lock */
    pid_t c = fork();
    if (c == 0) {
        int cfd = -1;
        if (dt__ckpt_dir_lock(dir, &cfd) != DT_OK) _exit(1);
        pause();
        _exit(0);
    }
    for (int i = 0; i < 2000 && !exists(lock); i++) usleep(1000);
    usleep(20000);
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    CHECK(exists(lock));
    CHECK(dt__ckpt_dir_lock(dir, &fd) == DT_OK);
    dt__ckpt_dir_unlock(dir, fd);

    /* a path that cannot be a directory */
    char file[300];
    snprintf(file, sizeof file, "%s/afile", g_tmp);
    FILE *af = fopen(file, "w");
    if (af) fclose(af);
    snprintf(dir, sizeof dir, "%s/sub", file);
    CHECK(dt__ckpt_dir_lock(dir, &fd) == DT_ERR_IO && fd == -1);
    CHECK(strstr(dt_last_error(), "afile") != NULL);
}

static dt_status write_ckpt(const char *name) {
    dt_ckpt_writer *w = dt_ckpt_begin(g_tmp, name);
    if (!w) return dt_last_status();
    dt_status st = dt_ckpt_add_bytes(w, "x.bin", "abc", 3);
    if (st != DT_OK) {
        dt_ckpt_abort(w);
        return st;
    }
    return dt_ckpt_commit(w, NULL);
}

/* The lock's new holder removes what an earlier run left half-written, and nothing else. */
static void test_partial_removed(void) {
    char dir[512], p[700];
    snprintf(dir, sizeof dir, "%s/partial", g_tmp);
    const char *dirs[] = {"batch_30.tmp.6807", "batch_20", "notes.tmp.x", "batch_10.tmp."};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, dirs[i]);
        CHECK(dt__ckpt_mkdir(p) == DT_OK);
    }
    snprintf(p, sizeof p, "%s/batch_30.tmp.6807/model.safetensors", dir);
    FILE *f = fopen(p, "w");
    CHECK(f && fputs("half", f) >= 0 && fclose(f) == 0);
    int fd = -1;
    CHECK(dt__ckpt_dir_lock(dir, &fd) == DT_OK);
    bool want[] = {false, true, true, true};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, dirs[i]);
        CHECK_MSG(exists(p) == want[i], "%s %s", dirs[i], want[i] ? "removed" : "kept");
    }
    dt__ckpt_dir_unlock(dir, fd);
}

static void test_launcher_gone(void) {
    char p[300];
    CHECK(write_ckpt("kept") == DT_OK);
    char ppid[32];
    snprintf(ppid, sizeof ppid, "%ld", (long)getppid());
    setenv("DTRAIN_LAUNCHER_PID", ppid, 1); /* our launcher is alive */
    CHECK(dt__ckpt_launcher_alive("x") == DT_OK);
    CHECK(write_ckpt("while_alive") == DT_OK);
    /* a launcher that is not our parent any more: gone */
    setenv("DTRAIN_LAUNCHER_PID", "999999999", 1);
    CHECK(dt_ckpt_watch_launcher() == DT_ERR_STATE);
    CHECK(write_ckpt("after") == DT_ERR_STATE);
    CHECK_MSG(strstr(dt_last_error(), "launcher") && strstr(dt_last_error(), "999999999"), "%s",
              dt_last_error());
    snprintf(p, sizeof p, "%s/after", g_tmp);
    CHECK(!exists(p));
    snprintf(p, sizeof p, "%s/kept", g_tmp);
    CHECK(dt_ckpt_remove(p) == DT_ERR_STATE && exists(p));
    unsetenv("DTRAIN_LAUNCHER_PID");
    CHECK(dt_ckpt_remove(p) == DT_OK && !exists(p));
    snprintf(p, sizeof p, "%s/while_alive", g_tmp);
    CHECK(dt_ckpt_remove(p) == DT_OK);
}

/* A process tied to its launcher (its parent) dies when the launcher does. */
static void test_watch_dies_with_launcher(void) {
    int p[2];
    CHECK(pipe(p) == 0);
    pid_t launcher = fork();
    if (launcher == 0) {
        pid_t me = getpid();
        pid_t rank = fork();
        if (rank == 0) {
            char v[32];
            snprintf(v, sizeof v, "%ld", (long)me);
            setenv("DTRAIN_LAUNCHER_PID", v, 1);
            pid_t self = dt_ckpt_watch_launcher() == DT_OK ? getpid() : 0;
            if (write(p[1], &self, sizeof self) != sizeof self) _exit(1);
            for (;;) pause();
        }
        pause();
        _exit(0);
    }
    close(p[1]);
    pid_t rank = 0;
    CHECK(read(p[0], &rank, sizeof rank) == sizeof rank && rank > 1);
    close(p[0]);
    kill(launcher, SIGKILL);
    waitpid(launcher, NULL, 0);
    bool dead = rank > 1 && test_pid_gone(rank);
    CHECK_MSG(dead, "the process outlived its launcher (pid %d)", (int)rank);
    if (!dead && rank > 1) kill(rank, SIGKILL);
}

int main(void) {
    CHECK(fx_tmpdir(g_tmp, sizeof g_tmp, "guard"));
    TEST_RUN(test_lock);
    TEST_RUN(test_partial_removed);
    TEST_RUN(test_launcher_gone);
    TEST_RUN(test_watch_dies_with_launcher);
    if (!fx_rmtree(g_tmp)) fprintf(stderr, "could not remove %s\n", g_tmp);
    TEST_END();
}
