/* lm.c — `dtrain lm <verb>`: language models from a Hugging Face model directory. Each verb is
 * a row of the table at the bottom (its name, its function, its usage line); the verbs only
 * parse, call the library and print. */
#include "cli.h"

#include "dtrain/tokenizer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define WHO "dtrain lm"

static void usage(FILE *f);

/* Read a whole file: *n bytes, malloc'd (NUL-terminated); NULL after printing why. */
static char *slurp(const char *who, const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, len = 0;
    if (f) {
        for (;;) {
            if (len + 65536 + 1 > cap) {
                cap = cap ? 2 * cap : 1 << 20;
                char *p = realloc(buf, cap);
                if (!p) break;
                buf = p;
            }
            size_t got = fread(buf + len, 1, cap - len - 1, f);
            len += got;
            if (got == 0) break;
        }
    }
    if (!f || ferror(f) || !buf) {
        fprintf(stderr, "%s: error: cannot read %s: %s\n", who, path,
                errno ? strerror(errno) : "out of memory");
        if (f) fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    buf[len] = 0;
    *n = len;
    return buf;
}

/* MODEL_DIR/tokenizer.json loaded; NULL after printing why. */
static dt_tokenizer *load_tokenizer(const char *who, const char *model_dir) {
    size_t n = strlen(model_dir);
    char *path = malloc(n + sizeof "/tokenizer.json");
    if (!path) return NULL;
    snprintf(path, n + sizeof "/tokenizer.json", "%s/tokenizer.json", model_dir);
    dt_tokenizer *t = NULL;
    if (dt_tokenizer_load(&t, path)) fprintf(stderr, "%s: error: %s\n", who, dt_last_error());
    free(path);
    return t;
}

/* Print ids space-separated on one line. */
static void print_ids(FILE *f, const int32_t *ids, size_t n) {
    char buf[1 << 16];
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (at > sizeof buf - 16) {
            fwrite(buf, 1, at, f);
            at = 0;
        }
        char tmp[12];
        int k = 0;
        uint32_t v = (uint32_t)ids[i];
        do tmp[k++] = (char)('0' + v % 10), v /= 10;
        while (v);
        if (i) buf[at++] = ' ';
        while (k) buf[at++] = tmp[--k];
    }
    buf[at++] = '\n';
    fwrite(buf, 1, at, f);
}

/* dtrain lm tokenize MODEL_DIR TEXT_FILE: the ids of the file's whole text, no BOS/EOS. */
static int lm_tokenize(int argc, char **argv) {
    const char *who = WHO " tokenize";
    if (argc != 2) return dt_cli_usage_error(who, "needs MODEL_DIR and TEXT_FILE", usage);
    dt_tokenizer *t = load_tokenizer(who, argv[0]);
    if (!t) return DT_EXIT_FAILED;
    size_t len = 0, n = 0;
    char *text = slurp(who, argv[1], &len);
    int32_t *ids = NULL;
    int rc = DT_EXIT_FAILED;
    if (text && dt_tokenizer_encode(t, text, len, &ids, &n) == DT_OK) {
        print_ids(stdout, ids, n);
        rc = fflush(stdout) ? DT_EXIT_FAILED : DT_EXIT_OK;
    } else if (text) {
        fprintf(stderr, "%s: error: %s\n", who, dt_last_error());
    }
    free(ids);
    free(text);
    dt_tokenizer_free(t);
    return rc;
}

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} verbs[] = {
    {"tokenize", lm_tokenize, "tokenize MODEL_DIR TEXT_FILE   print the ids of the file's text"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: dtrain lm <verb> [args]   (MODEL_DIR: a Hugging Face model directory)\n");
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++) fprintf(f, "  %s\n", verbs[i].help);
}

int dt_cli_lm(int argc, char **argv) {
    if (argc < 1) return dt_cli_usage_error(WHO, "needs a verb", usage);
    if (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h") || !strcmp(argv[0], "help")) {
        usage(stdout);
        return DT_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        if (!strcmp(argv[0], verbs[i].name)) return verbs[i].run(argc - 1, argv + 1);
    fprintf(stderr, "%s: error: unknown verb '%s'\n", WHO, argv[0]);
    usage(stderr);
    return DT_EXIT_USAGE;
}
