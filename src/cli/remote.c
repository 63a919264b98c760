/* remote.c — how the dtrain command reaches the master: the client for $DTRAIN_MASTER, the
 * embedded default (a master started in the background when none answers on loopback), API
 * calls with their errors printed one way, and the polling verbs share (logs, wait).
 *
 * A master that accepts the connection but sends nothing back is hung: an ordinary request
 * gives up after ANSWER_S with exit 3 and says so, rather than waiting for the client's whole
 * timeout. Requests whose handler works before it answers are listed in SLOW_ROUTES. (Log
 * following polls with ordinary requests, so it is covered by the same rule.) */
#define _GNU_SOURCE
#include "args.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define START_WAIT_S 15.0
/* A master answers an ordinary request's first byte within this: its handlers run one at a
 * time and each is a few store reads or writes. Longer means it is hung. */
#define ANSWER_S 5.0

/* Requests that may take longer than ANSWER_S before the first byte, and why. They keep only
 * the client's whole-call timeout. */
static const struct {
    const char *method, *path;
} SLOW_ROUTES[] = {
    {"POST", "/api/v1/experiments"}, /* builds the model directory before it answers */
};

static bool slow_route(const char *method, const char *path) {
    for (size_t i = 0; i < sizeof SLOW_ROUTES / sizeof SLOW_ROUTES[0]; i++)
        if (!strcmp(method, SLOW_ROUTES[i].method) && !strcmp(path, SLOW_ROUTES[i].path))
            return true;
    return false;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* mkdir -p; false with errno set. */
static bool make_dirs(const char *path) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return errno = ENAMETOOLONG, false;
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p) continue;
        char c = *p;
        *p = 0;
        if (mkdir(buf, 0755) && errno != EEXIST) return false;
        if (!c) return true;
        *p = c;
    }
}

/* The last line of the file at `path` into buf ("" when none). */
static const char *last_line(const char *path, char *buf, size_t n) {
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return buf;
    char line[1024];
    while (fgets(line, sizeof line, f))
        if (line[0] != '\n') {
            size_t l = strnlen(line, n - 1);
            memcpy(buf, line, l);
            buf[l] = 0;
        }
    fclose(f);
    buf[strcspn(buf, "\n")] = 0;
    return buf;
}

/* Start `<this binary> master --host H --port P` detached: its own session, stdin from
 * /dev/null, stdout and stderr appended to `log`. The pid, or -1 after printing why. */
static pid_t spawn_master(const char *who, const char *host, int port, const char *log) {
    char self[4096], port_s[16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n < 0) {
        fprintf(stderr, "%s: error: cannot find this program to start a master: %s\n", who,
                strerror(errno));
        return -1;
    }
    self[n] = 0;
    snprintf(port_s, sizeof port_s, "%d", port);
    int out = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (out < 0 || in < 0) {
        fprintf(stderr,
                "%s: error: cannot open %s to start a master: %s\nhint: check that "
                "DTRAIN_HOME is writable, or start one yourself: dtrain master\n",
                who, out < 0 ? log : "/dev/null", strerror(errno));
        if (out >= 0) close(out);
        if (in >= 0) close(in);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        dup2(in, 0);
        dup2(out, 1);
        dup2(out, 2);
        execl(self, self, "master", "--host", host, "--port", port_s, (char *)NULL);
        fprintf(stderr, "dtrain: cannot run %s: %s\n", self, strerror(errno));
        _exit(127);
    }
    int err = errno;
    close(out);
    close(in);
    if (pid < 0) fprintf(stderr, "%s: error: cannot start a master: %s\n", who, strerror(err));
    return pid;
}

/* Start the embedded master for `url` and wait for it to answer. */
static bool autostart(const char *who, dt_client *c, const char *url, const char *host, int port) {
    char home[4096], log[4200], line[512];
    if (!dt_master_home(home, sizeof home) || !make_dirs(home)) {
        fprintf(stderr,
                "%s: error: cannot create the dtrain home '%s': %s\nhint: set "
                "DTRAIN_HOME to a writable directory\n",
                who, home, strerror(errno));
        return false;
    }
    snprintf(log, sizeof log, "%s/master.log", home);
    pid_t pid = spawn_master(who, host, port, log);
    if (pid < 0) return false;
    bool exited = false;
    int status = 0;
    for (double t0 = now_s(); now_s() - t0 < START_WAIT_S;) {
        if (dt_client_ping(c)) {
            if (exited) return true; /* another master won the race to this address */
            fprintf(stderr,
                    "dtrain: started a master at %s (pid %d, log %s); stop it with: dtrain "
                    "master stop\n",
                    url, (int)pid, log);
            return true;
        }
        if (exited) break;
        exited = waitpid(pid, &status, WNOHANG) == pid;
        if (!exited) sleep_s(0.1);
    }
    if (exited) {
        fprintf(stderr, "%s: error: the master started at %s exited (%s %d): %s\nhint: see %s\n",
                who, url, WIFEXITED(status) ? "status" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                last_line(log, line, sizeof line), log);
    } else {
        fprintf(stderr,
                "%s: error: the master started at %s (pid %d) did not answer within "
                "%.0f s\nhint: see %s; stop it with: kill %d\n",
                who, url, (int)pid, START_WAIT_S, log, (int)pid);
    }
    return false;
}

dt_client *dt_cli_connect(const char *who, bool start) {
    const char *url = getenv("DTRAIN_MASTER");
    if (!url || !*url) url = DT_MASTER_DEFAULT_URL;
    char host[256], err[512];
    int port;
    bool loopback;
    if (!dt_cli_parse_url(url, host, sizeof host, &port, &loopback, err, sizeof err)) {
        fprintf(stderr, "%s: error: %s\n", who, err);
        return NULL;
    }
    dt_client *c = dt_client_new(url);
    if (!c) {
        fprintf(stderr, "%s: error: %s\n", who, dt_last_error());
        return NULL;
    }
    dt_client_set_answer_timeout(c, ANSWER_S);
    if (dt_client_ping(c)) return c;
    if (dt_client_hung(c)) { /* something holds the address: starting another master is no cure */
        fprintf(stderr, "%s: error: %s\n", who, dt_last_error());
        dt_client_free(c);
        return NULL;
    }
    if (start && loopback && autostart(who, c, url, host, port)) return c;
    if (!start || !loopback)
        fprintf(stderr, "%s: error: no master answers at %s\nhint: %s\n", who, url,
                !loopback ? "check that the master runs there and this machine can reach it, "
                            "or unset DTRAIN_MASTER to use a local one"
                          : "start one with: dtrain master (or any experiment command starts "
                            "one)");
    dt_client_free(c);
    return NULL;
}

int dt_cli_request(dt_client *c, const char *who, const char *method, const char *path,
                   const json_t *body, json_t **out, const char *hint) {
    long http = 0;
    json_t *ans = NULL;
    bool slow = slow_route(method, path);
    if (slow) dt_client_set_answer_timeout(c, 0);
    dt_status st = dt_client_call(c, method, path, body, &ans, &http);
    if (slow) dt_client_set_answer_timeout(c, ANSWER_S);
    if (st == DT_OK) {
        if (out)
            *out = ans ? ans : json_object();
        else
            json_decref(ans);
        return DT_EXIT_OK;
    }
    json_decref(ans);
    if (out) *out = NULL;
    const char *msg = dt_last_error();
    fprintf(stderr, "%s: error: %s\n", who, msg); /* (a hung master: the client's message) */
    if (!strstr(msg, "hint:") && hint && st != DT_ERR_COMM) fprintf(stderr, "hint: %s\n", hint);
    return st == DT_ERR_COMM ? DT_EXIT_UNREACHABLE : DT_EXIT_FAILED;
}

#define LOG_PAGE 1000

int dt_cli_print_logs(dt_client *c, const char *who, const char *path, bool follow,
                      bool with_trial) {
    long long after = 0;
    for (;;) {
        char q[512];
        snprintf(q, sizeof q, "%s?after=%lld&limit=%d", path, after, LOG_PAGE);
        json_t *ans;
        int rc = dt_cli_request(c, who, "GET", q, NULL, &ans, NULL);
        if (rc) return rc;
        json_t *logs = json_object_get(ans, "logs"), *l;
        size_t i, n = json_array_size(logs);
        json_array_foreach(logs, i, l) {
            const char *line = json_string_value(json_object_get(l, "line"));
            int len = line ? (int)strcspn(line, "\n") : 0;
            long long rank = json_integer_value(json_object_get(l, "rank"));
            if (with_trial)
                printf("[trial %lld, rank %lld] %.*s\n",
                       (long long)json_integer_value(json_object_get(l, "trial_id")), rank, len,
                       line ? line : "");
            else
                printf("[rank %lld] %.*s\n", rank, len, line ? line : "");
            after = json_integer_value(json_object_get(l, "id"));
        }
        bool done = json_is_true(json_object_get(ans, "done"));
        json_decref(ans);
        fflush(stdout);
        if (n == LOG_PAGE) continue;
        if (!follow || done) return DT_EXIT_OK;
        sleep_s(0.5);
    }
}

static bool terminal(const char *state) {
    return !strcmp(state, "COMPLETED") || !strcmp(state, "CANCELED") || !strcmp(state, "ERROR");
}

int dt_cli_wait_experiment(dt_client *c, const char *who, int64_t id, char **state) {
    char path[64];
    snprintf(path, sizeof path, "/api/v1/experiments/%lld", (long long)id);
    for (double delay = 0.2;; delay = delay < 2 ? delay * 1.5 : 2) {
        json_t *ans;
        int rc = dt_cli_request(c, who, "GET", path, NULL, &ans,
                                "dtrain experiment list shows the experiments");
        if (rc) return rc;
        const char *s =
            json_string_value(json_object_get(json_object_get(ans, "experiment"), "state"));
        if (!s || terminal(s)) {
            *state = strdup(s ? s : "UNKNOWN");
            json_decref(ans);
            if (!*state) return DT_EXIT_FAILED;
            return DT_EXIT_OK;
        }
        json_decref(ans);
        sleep_s(delay);
    }
}

int dt_cli_show(dt_client *c, const char *who, const char *path, const char *hint, const char *key,
                dt_cli_mode mode, void (*print)(const json_t *items, FILE *f, dt_cli_mode mode)) {
    json_t *ans;
    int rc = dt_cli_request(c, who, "GET", path, NULL, &ans, hint);
    if (rc) return rc;
    if (mode == DT_CLI_JSON)
        dt_cli_print_json(stdout, ans);
    else
        print(json_object_get(ans, key), stdout, mode);
    json_decref(ans);
    return DT_EXIT_OK;
}

int dt_cli_change(dt_client *c, const char *who, const char *path, const char *hint,
                  const char *kind, int64_t id) {
    json_t *ans;
    int rc = dt_cli_request(c, who, "POST", path, NULL, &ans, hint);
    if (rc) return rc;
    const char *state = json_string_value(json_object_get(json_object_get(ans, kind), "state"));
    printf("%s %lld: %s\n", kind, (long long)id, state ? state : "-");
    json_decref(ans);
    return DT_EXIT_OK;
}
