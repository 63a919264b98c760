/* master.c — `dtrain master [--host H] [--port P] [--slots N | --hostfile FILE] [--launcher L]`
 * (the master, in the foreground, serving the web UI's routes too), `dtrain master stop` and
 * `dtrain master status` (of the master at $DTRAIN_MASTER), `dtrain master token` (the access
 * token of $DTRAIN_HOME). */
#include "args.h"
#include "cli.h"

#include "web/web.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WHO "dtrain master"
#define STOP_WAIT_S 30

static void usage(FILE *f) {
    fprintf(f,
            "usage: dtrain master [--host 127.0.0.1] [--port 8080] [--slots N | --hostfile FILE]\n"
            "                     [--launcher local|slurm]\n"
            "                            run the master in the foreground (state in\n"
            "                            $DTRAIN_HOME, default ~/.dtrain); with an MPI hostfile\n"
            "                            trials run on its hosts (docs/clusters.md); --launcher:\n"
            "                            how experiments without resources.launcher run trials\n"
            "       dtrain master stop    stop the master at $DTRAIN_MASTER\n"
            "       dtrain master status [--json]\n"
            "       dtrain master token   print the token a master bound to a non-loopback\n"
            "                            address wants (open the UI once as URL/?token=TOKEN)\n");
}

/* A whole number in [lo, hi] for option `name`; false with err. */
static bool parse_int(const char *s, const char *name, long lo, long hi, int *out, char *err,
                      size_t errn) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) {
        snprintf(err, errn, "%s must be a whole number from %ld to %ld, got '%s'", name, lo, hi, s);
        return false;
    }
    *out = (int)v;
    return true;
}

static int run(int argc, char **argv) {
    const char *host = NULL, *port_s = NULL, *slots_s = NULL, *hostfile = NULL, *launcher = NULL;
    char err[256];
    dt_cli_opt opts[] = {{.name = "--host", .value = &host},
                         {.name = "--port", .value = &port_s},
                         {.name = "--slots", .value = &slots_s},
                         {.name = "--hostfile", .value = &hostfile},
                         {.name = "--launcher", .value = &launcher}};
    int n = dt_cli_parse(argc, argv, opts, 5, NULL, 0, 0, "", err, sizeof err);
    if (n == DT_CLI_HELP) return usage(stdout), DT_EXIT_OK;
    if (n < 0) return dt_cli_usage_error(WHO, err, usage);
    dt_master_opts o = {.host = host ? host : "127.0.0.1",
                        .port = 8080,
                        .launcher = launcher,
                        .hostfile = hostfile};
    if (launcher && strcmp(launcher, "local") && strcmp(launcher, "slurm")) {
        snprintf(err, sizeof err, "--launcher must be local or slurm, got '%s'", launcher);
        return dt_cli_usage_error(WHO, err, usage);
    }
    o.routes = dt_web_routes(&o.n_routes);
    if (port_s && !parse_int(port_s, "--port", 0, 65535, &o.port, err, sizeof err))
        return dt_cli_usage_error(WHO, err, usage);
    if (slots_s && !parse_int(slots_s, "--slots", 1, 1 << 20, &o.slots, err, sizeof err))
        return dt_cli_usage_error(WHO, err, usage);
    if (dt_master_run(&o) != DT_OK) {
        fprintf(stderr, WHO ": error: %s\n", dt_last_error());
        return DT_EXIT_FAILED;
    }
    return DT_EXIT_OK;
}

static int stop(dt_client *c) {
    json_t *info = NULL;
    int rc = dt_cli_request(c, WHO " stop", "GET", "/api/v1/master", NULL, &info, NULL);
    if (!rc)
        rc = dt_cli_request(c, WHO " stop", "POST", "/api/v1/master/shutdown", NULL, NULL, NULL);
    long long pid = json_integer_value(json_object_get(info, "pid"));
    json_decref(info);
    if (rc) return rc;
    dt_client_set_timeout(c, 2);
    for (int i = 0; i < STOP_WAIT_S * 10; i++) {
        if (!dt_client_ping(c)) {
            printf("stopped the master at %s (pid %lld)\n", dt_client_url(c), pid);
            return DT_EXIT_OK;
        }
        nanosleep(&(struct timespec){0, 100000000}, NULL);
    }
    fprintf(stderr,
            WHO " stop: error: the master at %s (pid %lld) still answers after %d s\n"
                "hint: see $DTRAIN_HOME/master.log; end it with: kill %lld\n",
            dt_client_url(c), pid, STOP_WAIT_S, pid);
    return DT_EXIT_FAILED;
}

static int status(dt_client *c, bool json) {
    json_t *info;
    int rc = dt_cli_request(c, WHO " status", "GET", "/api/v1/master", NULL, &info, NULL);
    if (rc) return rc;
    dt_cli_mode mode = dt_cli_mode_for(json, stdout);
    if (mode == DT_CLI_JSON) {
        dt_cli_print_json(stdout, info);
    } else {
        static const char *const keys[] = {"version", "pid", "slots", "slots_used", "store"};
        dt_cli_table *t = dt_cli_table_new(2, NULL);
        char buf[32];
        const char *started = json_string_value(json_object_get(info, "started"));
        dt_cli_field(t, "url", dt_client_url(c));
        dt_cli_fields(t, info, keys, sizeof keys / sizeof *keys);
        dt_cli_field(t, "started", dt_cli_fmt_time(started, buf, sizeof buf));
        dt_cli_field(t, "uptime", dt_cli_fmt_span(started, NULL, buf, sizeof buf));
        dt_cli_table_print(t, stdout, mode, false);
        dt_cli_table_free(t);
    }
    json_decref(info);
    return DT_EXIT_OK;
}

static int token(int argc, char **argv) {
    int rc;
    if (dt_cli_parse_verb(WHO " token", usage, argc - 1, argv + 1, NULL, 0, NULL, 0, 0, "", &rc) <
        0)
        return rc;
    char tok[80];
    if (dt_master_token(NULL, tok, sizeof tok) != DT_OK) {
        fprintf(stderr, WHO " token: error: %s\n", dt_last_error());
        return DT_EXIT_FAILED;
    }
    printf("%s\n", tok);
    return DT_EXIT_OK;
}

int dt_cli_master(int argc, char **argv) {
    if (argc >= 1 && !strcmp(argv[0], "token")) return token(argc, argv);
    if (argc < 1 || (strcmp(argv[0], "stop") && strcmp(argv[0], "status"))) return run(argc, argv);
    bool is_stop = !strcmp(argv[0], "stop"), json = false;
    char err[256], who[32];
    snprintf(who, sizeof who, WHO " %s", argv[0]);
    dt_cli_opt opts[] = {{.name = "--json", .flag = &json}};
    int n = dt_cli_parse(argc - 1, argv + 1, opts, !is_stop, NULL, 0, 0, "", err, sizeof err);
    if (n == DT_CLI_HELP) return usage(stdout), DT_EXIT_OK;
    if (n < 0) return dt_cli_usage_error(who, err, usage);
    dt_client *c = dt_cli_connect(who, false);
    if (!c) return DT_EXIT_UNREACHABLE;
    int rc = is_stop ? stop(c) : status(c, json);
    dt_client_free(c);
    return rc;
}
