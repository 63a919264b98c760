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
#include <stdio.h>

#define DT_CLI_MAX_LIST 64

/* Every value of a repeatable option, in order (borrowed from argv). */
typedef struct dt_cli_list {
    const char *v[DT_CLI_MAX_LIST];
    int n;
} dt_cli_list;

/* One option: exactly one of flag / value / list / integer / number is set. A value,
 * integer or number option given twice is an error; whatever the caller stored in its target
 * beforehand is the default. */
typedef struct dt_cli_opt {
    const char *name;   /* "--follow" */
    bool *flag;         /* set to true when present */
    const char **value; /* the option's value (the next argument, or after '=') */
    dt_cli_list *list;  /* every value of a repeatable option */
    long long *integer; /* a whole number in [lo, hi] */
    double *number;     /* a finite number in [lo, hi] (lo itself refused with above_lo) */
    double lo, hi;      /* integer / number bounds; hi = INFINITY: none */
    bool above_lo;
    const char *const *choices; /* value: the words it may be, NULL-terminated */
    /* list: the arguments after its value that this accepts are its values too
     * (`--zero-stages 1 2 3`) */
    bool (*more)(const char *arg);
} dt_cli_opt;

/* The most options one table may have. */
#define DT_CLI_MAX_OPTS 64

enum { DT_CLI_HELP = -2, DT_CLI_BAD = -1 };

/* Parse argv[0..argc) against `opts` (n_opts of them); positional arguments go to pos[0..).
 * "--" ends the options. Returns the number of positional arguments, DT_CLI_HELP for
 * --help / -h, or DT_CLI_BAD with `err` saying what was wrong: an unknown option, an option
 * without its value, a repeated single-valued option, an integer, number or word out of its
 * range (the message says what it must be), fewer than min_pos or more than
 * max_pos positional arguments (`err` names the first missing one from pos_names, a
 * space-separated list such as "CONFIG MODEL_DIR"). */
int dt_cli_parse(int argc, char **argv, const dt_cli_opt *opts, int n_opts, const char **pos,
                 int min_pos, int max_pos, const char *pos_names, char *err, size_t errn);

/* dt_cli_parse for the verb `who` (argv after the verb): the number of positional arguments,
 * or -1 when the command ends here with *rc: 0 after printing `usage` on stdout for --help,
 * 2 after printing the usage error (as `who`) and `usage` on stderr. */
int dt_cli_parse_verb(const char *who, void (*usage)(FILE *), int argc, char **argv,
                      const dt_cli_opt *opts, int n_opts, const char **pos, int min_pos,
                      int max_pos, const char *pos_names, int *rc);

/* The row of `table` (n rows of `size` bytes, each starting with its name, a const char *)
 * that argv[0] names: NULL when the command ends here with *rc, 0 after printing `usage` for
 * "--help", "-h" or "help", else 2 after printing the usage error (a missing or unknown
 * verb) as `who`. verb_who gets "WHO VERB", the name the verb's messages go under. */
#define DT_CLI_WHO_MAX 64
const void *dt_cli_pick_verb(const char *who, void (*usage)(FILE *), int argc, char **argv,
                             const void *table, size_t n, size_t size,
                             char verb_who[DT_CLI_WHO_MAX], int *rc);

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
