/*
 * args.h — argument parsing shared by the dtrain command's verbs.
 *
 * A verb describes its options as a table (dt_cli_opt) and gets its positional arguments
 * back; every error is a usage error (exit code 2) with a message naming the argument. Also
 * the checks of values whose syntax the command owns: ids, `--config KEY=VALUE` overrides,
 * the master's URL.
 */
#ifndef DT_CLI_ARGS_H
#define DT_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DT_CLI_MAX_LIST 64

/* Every value of a repeatable option, in order (borrowed from argv). */
typedef struct dt_cli_list {
    const char *v[DT_CLI_MAX_LIST];
    int n;
} dt_cli_list;

/* One option: exactly one of flag / value / list is set. */
typedef struct dt_cli_opt {
    const char *name;   /* "--follow" */
    bool *flag;         /* set to true when present */
    const char **value; /* the option's value (the next argument, or after '=') */
    dt_cli_list *list;  /* every value of a repeatable option */
} dt_cli_opt;

enum { DT_CLI_HELP = -2, DT_CLI_BAD = -1 };

/* Parse argv[0..argc) against `opts` (n_opts of them); positional arguments go to pos[0..).
 * "--" ends the options. Returns the number of positional arguments, DT_CLI_HELP for
 * --help / -h, or DT_CLI_BAD with `err` saying what was wrong: an unknown option, an option
 * without its value, a repeated single-valued option, fewer than min_pos or more than
 * max_pos positional arguments (`err` names the first missing one from pos_names, a
 * space-separated list such as "CONFIG MODEL_DIR"). */
int dt_cli_parse(int argc, char **argv, const dt_cli_opt *opts, int n_opts, const char **pos,
                 int min_pos, int max_pos, const char *pos_names, char *err, size_t errn);

/* A positive integer id (experiment, trial). False with `err` naming `what` otherwise. */
bool dt_cli_parse_id(const char *s, const char *what, int64_t *id, char *err, size_t errn);

/* A `--config` override "key.path=value": a key path of one or more dot-separated names
 * (letters, digits, '_', '-'), '=', and a value that parses as YAML (a scalar, or a flow
 * list or mapping). False with `err` saying what was wrong and what to write. */
bool dt_cli_check_override(const char *kv, char *err, size_t errn);

/* The master's URL "http://HOST:PORT[/]": host into host[0..hostn) (IPv6 without brackets),
 * the port, and whether the host is this machine's loopback (localhost, 127.0.0.0/8, ::1).
 * False with `err` for any other form. */
bool dt_cli_parse_url(const char *url, char *host, size_t hostn, int *port, bool *loopback,
                      char *err, size_t errn);

#endif
