/* test_cli_args.c — the dtrain command's argument parsing (src/cli/args.c): options and
 * positional arguments, ids, `--config KEY=VALUE` overrides, the master's URL. */
#include "cli/args.h"
#include "test.h"

#include <math.h>
#include <string.h>

typedef struct {
    bool follow, paused;
    const char *kind;
    dt_cli_list cfg;
    const char *pos[2];
    char err[256];
} parsed;

static int parse(parsed *p, int argc, const char **argv) {
    memset(p, 0, sizeof *p);
    dt_cli_opt opts[] = {{.name = "--follow", .flag = &p->follow},
                         {.name = "--paused", .flag = &p->paused},
                         {.name = "--kind", .value = &p->kind},
                         {.name = "--config", .list = &p->cfg}};
    return dt_cli_parse(argc, (char **)argv, opts, 4, p->pos, 2, 2, "CONFIG MODEL_DIR", p->err,
                        sizeof p->err);
}

static void test_parse(void) {
    parsed p;
    const char *a[] = {"c.yaml", "--config",     "x.y=1",          "--follow",
                       "dir",    "--config=z=2", "--kind=training"};
    CHECK(parse(&p, 7, a) == 2);
    CHECK(p.follow && !p.paused);
    CHECK(!strcmp(p.pos[0], "c.yaml") && !strcmp(p.pos[1], "dir"));
    CHECK(p.cfg.n == 2 && !strcmp(p.cfg.v[0], "x.y=1") && !strcmp(p.cfg.v[1], "z=2"));
    CHECK(!strcmp(p.kind, "training"));

    const char *help[] = {"c.yaml", "-h"};
    CHECK(parse(&p, 2, help) == DT_CLI_HELP);
    const char *dash[] = {"--", "-odd.yaml", "dir"};
    CHECK(parse(&p, 3, dash) == 2 && !strcmp(p.pos[0], "-odd.yaml"));
}

static void test_parse_errors(void) {
    parsed p;
    const char *unknown[] = {"c.yaml", "dir", "--folow"};
    CHECK(parse(&p, 3, unknown) == DT_CLI_BAD && strstr(p.err, "unknown option '--folow'"));
    const char *novalue[] = {"c.yaml", "dir", "--kind"};
    CHECK(parse(&p, 3, novalue) == DT_CLI_BAD && strstr(p.err, "--kind needs a value"));
    const char *twice[] = {"c.yaml", "dir", "--kind", "a", "--kind", "b"};
    CHECK(parse(&p, 6, twice) == DT_CLI_BAD && strstr(p.err, "--kind given twice"));
    const char *flagval[] = {"c.yaml", "dir", "--follow=yes"};
    CHECK(parse(&p, 3, flagval) == DT_CLI_BAD && strstr(p.err, "--follow takes no value"));
    const char *missing[] = {"c.yaml"};
    CHECK(parse(&p, 1, missing) == DT_CLI_BAD && !strcmp(p.err, "missing MODEL_DIR"));
    CHECK(parse(&p, 0, NULL) == DT_CLI_BAD && !strcmp(p.err, "missing CONFIG"));
    const char *extra[] = {"a", "b", "c"};
    CHECK(parse(&p, 3, extra) == DT_CLI_BAD && strstr(p.err, "unexpected argument 'c'"));
}

static void test_ids(void) {
    int64_t id = 0;
    char err[128];
    CHECK(dt_cli_parse_id("42", "ID", &id, err, sizeof err) && id == 42);
    CHECK(!dt_cli_parse_id("0", "ID", &id, err, sizeof err));
    CHECK(!dt_cli_parse_id("-3", "ID", &id, err, sizeof err));
    CHECK(!dt_cli_parse_id("4x", "ID", &id, err, sizeof err));
    CHECK(!dt_cli_parse_id("", "ID", &id, err, sizeof err));
    CHECK(!dt_cli_parse_id("99999999999999999999", "ID", &id, err, sizeof err));
    CHECK(strstr(err, "ID must be a positive integer") != NULL);
}

static void test_overrides(void) {
    char err[512];
    CHECK(dt_cli_check_override("searcher.max_trials=4", err, sizeof err));
    CHECK(dt_cli_check_override("hyperparameters.lr=1e-3", err, sizeof err));
    CHECK(dt_cli_check_override("description=a run", err, sizeof err));
    CHECK(dt_cli_check_override("searcher.metric=", err, sizeof err));
    CHECK(dt_cli_check_override("hyperparameters.sizes=[1, 2]", err, sizeof err));
    CHECK(dt_cli_check_override("name=\"x=y\"", err, sizeof err));

    CHECK(!dt_cli_check_override("searcher.max_trials", err, sizeof err));
    CHECK(strstr(err, "no '='") && strstr(err, "hint:"));
    CHECK(!dt_cli_check_override("=4", err, sizeof err) && strstr(err, "empty name"));
    CHECK(!dt_cli_check_override("searcher..max_trials=4", err, sizeof err));
    CHECK(!dt_cli_check_override("searcher.=4", err, sizeof err));
    CHECK(!dt_cli_check_override("searcher max=4", err, sizeof err) && strstr(err, "' '"));
    CHECK(!dt_cli_check_override("a.b=[1, 2", err, sizeof err));
    CHECK(strstr(err, "not valid YAML") && strstr(err, "hint:"));
    CHECK(!dt_cli_check_override("a.b={x: 1", err, sizeof err));
}

static void test_url(void) {
    char host[64], err[256];
    int port = 0;
    bool lo = false;
    CHECK(
        dt_cli_parse_url("http://127.0.0.1:8080", host, sizeof host, &port, &lo, err, sizeof err));
    CHECK(!strcmp(host, "127.0.0.1") && port == 8080 && lo);
    CHECK(dt_cli_parse_url("http://localhost:9/", host, sizeof host, &port, &lo, err, sizeof err));
    CHECK(lo && port == 9);
    CHECK(dt_cli_parse_url("http://[::1]:8081", host, sizeof host, &port, &lo, err, sizeof err));
    CHECK(!strcmp(host, "::1") && lo && port == 8081);
    CHECK(dt_cli_parse_url("http://10.0.0.5:8080", host, sizeof host, &port, &lo, err, sizeof err));
    CHECK(!lo);
    CHECK(dt_cli_parse_url("http://127.example.com:80", host, sizeof host, &port, &lo, err,
                           sizeof err));
    CHECK(!lo);
    CHECK(!dt_cli_parse_url("https://127.0.0.1:8080", host, sizeof host, &port, &lo, err,
                            sizeof err));
    CHECK(!dt_cli_parse_url("http://127.0.0.1", host, sizeof host, &port, &lo, err, sizeof err));
    CHECK(!dt_cli_parse_url("http://127.0.0.1:0", host, sizeof host, &port, &lo, err, sizeof err));
    CHECK(
        !dt_cli_parse_url("http://127.0.0.1:80/x", host, sizeof host, &port, &lo, err, sizeof err));
    CHECK(strstr(err, "is not http://HOST:PORT") && strstr(err, "hint:"));
}

/* Integer, number and word options: their values, their defaults, their ranges' messages. */
typedef struct {
    long long n;
    double x;
    const char *word;
    dt_cli_list stages;
    const char *pos[2];
    char err[256];
} typed;

static bool digits(const char *s) {
    return *s && !s[strspn(s, "0123456789")];
}

static int parse_typed(typed *t, int argc, const char **argv) {
    static const char *const WORDS[] = {"f32", "bf16", "f16", NULL};
    memset(t, 0, sizeof *t);
    t->n = 7;
    t->x = 0.5;
    t->word = "f32";
    dt_cli_opt opts[] = {
        {.name = "--n", .integer = &t->n, .lo = 1, .hi = 64},
        {.name = "--x", .number = &t->x, .lo = 0, .hi = INFINITY, .above_lo = true},
        {.name = "--dtype", .value = &t->word, .choices = WORDS},
        {.name = "--stages", .list = &t->stages, .more = digits}};
    return dt_cli_parse(argc, (char **)argv, opts, 4, t->pos, 0, 2, "A B", t->err, sizeof t->err);
}

static void test_typed(void) {
    typed t;
    const char *none[] = {"a"};
    CHECK(parse_typed(&t, 1, none) == 1 && t.n == 7 && t.x == 0.5 && !strcmp(t.word, "f32"));
    const char *all[] = {"--n", "64", "--x=1e-3", "--dtype", "bf16", "--stages", "0", "12", "b"};
    CHECK(parse_typed(&t, 9, all) == 1 && t.n == 64 && t.x == 1e-3 && !strcmp(t.word, "bf16"));
    CHECK(t.stages.n == 2 && !strcmp(t.stages.v[1], "12") && !strcmp(t.pos[0], "b"));
    /* a list with `more` stops at the first argument it does not accept */
    const char *stop[] = {"--stages", "x", "1", "--stages", "2", "dir"};
    CHECK(parse_typed(&t, 6, stop) == 1 && t.stages.n == 3 && !strcmp(t.stages.v[0], "x"));
    CHECK(!strcmp(t.stages.v[2], "2") && !strcmp(t.pos[0], "dir"));

    const char *n0[] = {"--n", "0"};
    CHECK(parse_typed(&t, 2, n0) == DT_CLI_BAD &&
          !strcmp(t.err, "--n must be an integer in [1, 64], got '0'"));
    const char *nfrac[] = {"--n", "2.5"};
    CHECK(parse_typed(&t, 2, nfrac) == DT_CLI_BAD && strstr(t.err, "got '2.5'"));
    const char *nbig[] = {"--n=99999999999999999999"};
    CHECK(parse_typed(&t, 1, nbig) == DT_CLI_BAD && strstr(t.err, "--n must be an integer"));
    const char *x0[] = {"--x", "0"};
    CHECK(parse_typed(&t, 2, x0) == DT_CLI_BAD &&
          !strcmp(t.err, "--x must be a number > 0, got '0'"));
    const char *xnan[] = {"--x", "nan"};
    CHECK(parse_typed(&t, 2, xnan) == DT_CLI_BAD && strstr(t.err, "got 'nan'"));
    const char *xempty[] = {"--x="};
    CHECK(parse_typed(&t, 1, xempty) == DT_CLI_BAD && strstr(t.err, "got ''"));
    const char *word[] = {"--dtype", "f64"};
    CHECK(parse_typed(&t, 2, word) == DT_CLI_BAD &&
          !strcmp(t.err, "--dtype must be f32, bf16 or f16, got 'f64'"));
    /* a default is not a first value: the option may be given once, not twice */
    const char *twice[] = {"--n", "2", "--n", "3"};
    CHECK(parse_typed(&t, 4, twice) == DT_CLI_BAD && !strcmp(t.err, "--n given twice"));
    const char *nov[] = {"--stages"};
    CHECK(parse_typed(&t, 1, nov) == DT_CLI_BAD && !strcmp(t.err, "--stages needs a value"));
}

/* A verb picked from a table of rows that start with their name. */
static void test_pick_verb(void) {
    static const struct row {
        const char *name;
        int k;
    } rows[] = {{"list", 1}, {"kill", 2}};
    char who[DT_CLI_WHO_MAX];
    int rc = -1;
    char *kill[] = {"kill", "3"};
    const struct row *r =
        dt_cli_pick_verb("dtrain x", NULL, 2, kill, rows, 2, sizeof *rows, who, &rc);
    CHECK(r && r->k == 2 && !strcmp(who, "dtrain x kill"));
}

int main(void) {
    TEST_RUN(test_parse);
    TEST_RUN(test_parse_errors);
    TEST_RUN(test_typed);
    TEST_RUN(test_pick_verb);
    TEST_RUN(test_ids);
    TEST_RUN(test_overrides);
    TEST_RUN(test_url);
    TEST_END();
}
