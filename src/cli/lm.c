/* lm.c — `dtrain lm <verb>`: language models from a Hugging Face model directory (tokenize,
 * eval, generate). Each verb is a row of the table at the bottom (its name, its function,
 * its usage line); the verbs parse their options as tables (args.h), call the library and
 * print. */
#include "args.h"
#include "cli.h"
#include "lm_cli.h"

#include "dtrain/lm.h"
#include "dtrain/tokenizer.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define WHO "dtrain lm"

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
    const char *who = WHO " tokenize", *pos[2];
    int rc;
    if (dt_cli_parse_verb(who, dt__cli_lm_usage, argc, argv, NULL, 0, pos, 2, 2,
                          "MODEL_DIR TEXT_FILE", &rc) < 0)
        return rc;
    dt_tokenizer *t = load_tokenizer(who, pos[0]);
    if (!t) return DT_EXIT_FAILED;
    size_t len = 0, n = 0;
    char *text = slurp(who, pos[1], &len);
    int32_t *ids = NULL;
    rc = DT_EXIT_FAILED;
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

/* The model and its tokenizer from MODEL_DIR; false after printing why. */
static bool open_model(const char *who, const char *dir, dt_lm **m, dt_tokenizer **t) {
    *m = NULL;
    *t = load_tokenizer(who, dir);
    if (*t && dt_lm_load(m, dir) == DT_OK) return true;
    if (*t) fprintf(stderr, "%s: error: %s\n", who, dt_last_error());
    dt_tokenizer_free(*t);
    *t = NULL;
    return false;
}

/* dtrain lm eval MODEL_DIR TEXT_FILE [--seq N] [--json]: the mean next-token cross-entropy
 * over the text cut into windows (dt_lm_eval_ids). */
static int lm_eval(int argc, char **argv) {
    const char *who = WHO " eval", *pos[2];
    long long seq = 0;
    bool json = false;
    dt_cli_opt opts[] = {{.name = "--seq", .integer = &seq, .lo = 2, .hi = INFINITY},
                         {.name = "--json", .flag = &json}};
    int rc;
    if (dt_cli_parse_verb(who, dt__cli_lm_usage, argc, argv, opts, 2, pos, 2, 2,
                          "MODEL_DIR TEXT_FILE", &rc) < 0)
        return rc;
    dt_lm *m;
    dt_tokenizer *t;
    if (!open_model(who, pos[0], &m, &t)) return DT_EXIT_FAILED;
    size_t len = 0, n = 0;
    char *text = slurp(who, pos[1], &len);
    int32_t *ids = NULL;
    double loss = 0;
    int64_t predicted = 0;
    rc = DT_EXIT_FAILED;
    if (text && dt_tokenizer_encode(t, text, len, &ids, &n) == DT_OK &&
        dt_lm_eval_ids(m, ids, n, seq, &loss, &predicted) == DT_OK) {
        if (json)
            printf("{\"loss\": %.17g, \"tokens\": %lld, \"windows_seq\": %lld, \"text_tokens\": "
                   "%zu}\n",
                   loss, (long long)predicted,
                   (long long)(seq ? seq : dt_lm_get_config(m)->max_pos), n);
        else
            printf("loss %.6f over %lld predicted tokens (perplexity %.4g)\n", loss,
                   (long long)predicted, exp(loss));
        rc = fflush(stdout) ? DT_EXIT_FAILED : DT_EXIT_OK;
    } else if (text) {
        fprintf(stderr, "%s: error: %s\n", who, dt_last_error());
    }
    free(ids);
    free(text);
    dt_lm_free(m);
    dt_tokenizer_free(t);
    return rc;
}

/* generate's MODEL_DIR into pos and its flags into o and *prompt / *k / *json: true to go on,
 * else false with *rc, the exit code after printing the usage (--help) or the usage error. */
static bool generate_flags(const char *who, int argc, char **argv, const char **pos,
                           dt_lm_gen_opts *o, const char **prompt, long long *k, bool *json,
                           int *rc) {
    long long top_k = o->top_k, seed = (long long)o->seed;
    double temp = o->temperature, top_p = o->top_p;
    dt_cli_opt opts[] = {
        {.name = "--prompt", .value = prompt},
        {.name = "--max-new-tokens", .integer = k, .lo = 1, .hi = INFINITY},
        {.name = "--temperature", .number = &temp, .lo = 0, .hi = 100},
        {.name = "--top-k", .integer = &top_k, .lo = 0, .hi = INT32_MAX},
        {.name = "--top-p", .number = &top_p, .lo = 0, .hi = 1},
        {.name = "--seed", .integer = &seed, .lo = 0, .hi = INFINITY},
        {.name = "--json", .flag = json},
    };
    if (dt_cli_parse_verb(who, dt__cli_lm_usage, argc, argv, opts, 7, pos, 1, 1, "MODEL_DIR", rc) <
        0)
        return false;
    if (!*prompt || *k <= 0)
        return *rc = dt_cli_usage_error(who, "needs --prompt TEXT and --max-new-tokens K",
                                        dt__cli_lm_usage),
               false;
    *o = (dt_lm_gen_opts){.temperature = (float)temp,
                          .top_k = top_k,
                          .top_p = (float)top_p,
                          .seed = (uint64_t)seed,
                          .eos_id = o->eos_id};
    return true;
}

/* Print the generation: its text, or (--json) a JSON object with ids and text last. */
static int print_generation(const char *who, dt_tokenizer *t, const int32_t *ids, size_t n,
                            size_t n_prompt, bool json) {
    char *text = NULL;
    if (dt_tokenizer_decode(t, ids, n, &text) != DT_OK) {
        fprintf(stderr, "%s: error: %s\n", who, dt_last_error());
        return DT_EXIT_FAILED;
    }
    if (json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) json_array_append_new(arr, json_integer(ids[i]));
        json_t *o = json_pack("{sosssIsI}", "ids", arr, "text", text, "prompt_tokens",
                              (json_int_t)n_prompt, "new_tokens", (json_int_t)(n - n_prompt));
        char *s = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        json_decref(o);
        if (!s) {
            fprintf(stderr, "%s: error: out of memory writing the JSON line\n", who);
            free(text);
            return DT_EXIT_FAILED;
        }
        printf("%s\n", s);
        free(s);
    } else {
        printf("%s\n", text);
    }
    free(text);
    return fflush(stdout) ? DT_EXIT_FAILED : DT_EXIT_OK;
}

/* dtrain lm generate MODEL_DIR --prompt TEXT --max-new-tokens K [--temperature T] [--top-k K]
 * [--top-p P] [--seed S] [--json]: greedy by default, with a KV cache, stopping at EOS. */
static int lm_generate(int argc, char **argv) {
    const char *who = WHO " generate", *prompt = NULL, *pos[1];
    dt_lm_gen_opts o = dt_lm_gen_defaults();
    long long k = 0;
    bool json = false;
    int rc;
    if (!generate_flags(who, argc, argv, pos, &o, &prompt, &k, &json, &rc)) return rc;
    dt_lm *m;
    dt_tokenizer *t;
    if (!open_model(who, pos[0], &m, &t)) return DT_EXIT_FAILED;
    /* the model config's eos_token_id, as transformers stops at it; else the tokenizer's */
    o.eos_id = dt_lm_get_config(m)->eos_id >= 0 ? dt_lm_get_config(m)->eos_id : dt_tokenizer_eos(t);
    int32_t *ids = NULL, *out = NULL;
    size_t n = 0, out_n = 0;
    rc = DT_EXIT_FAILED;
    if (dt_tokenizer_encode(t, prompt, strlen(prompt), &ids, &n) == DT_OK &&
        dt_lm_generate(m, ids, n, (size_t)k, &o, &out, &out_n) == DT_OK)
        rc = print_generation(who, t, out, out_n, n, json);
    else
        fprintf(stderr, "%s: error: %s\n", who, dt_last_error());
    free(ids);
    free(out);
    dt_lm_free(m);
    dt_tokenizer_free(t);
    return rc;
}

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} verbs[] = {
    {"tokenize", lm_tokenize, "tokenize MODEL_DIR TEXT_FILE   print the ids of the file's text"},
    {"eval", lm_eval,
     "eval MODEL_DIR TEXT_FILE [--seq N] [--json]   mean next-token loss over the text"},
    {"generate", lm_generate,
     "generate MODEL_DIR --prompt TEXT --max-new-tokens K [--temperature T] [--top-k K]\n"
     "           [--top-p P] [--seed S] [--json]   continue a prompt (greedy by default)"},
    {"finetune", dt__cli_lm_finetune,
     "finetune MODEL_DIR TEXT_FILE --steps S --out OUT_DIR [--lr LR] [--seq N] [--batch B]\n"
     "           [--dtype f32|bf16] [--weight-decay W] [--seed N] [--json]\n"
     "           AdamW fine-tuning, OUT_DIR written as a Hugging Face directory"},
};

void dt__cli_lm_usage(FILE *f) {
    fprintf(f, "usage: dtrain lm <verb> [args]   (MODEL_DIR: a Hugging Face model directory)\n");
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++) fprintf(f, "  %s\n", verbs[i].help);
}

int dt_cli_lm(int argc, char **argv) {
    if (argc < 1) return dt_cli_usage_error(WHO, "needs a verb", dt__cli_lm_usage);
    if (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h") || !strcmp(argv[0], "help")) {
        dt__cli_lm_usage(stdout);
        return DT_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        if (!strcmp(argv[0], verbs[i].name)) return verbs[i].run(argc - 1, argv + 1);
    fprintf(stderr, "%s: error: unknown verb '%s'\n", WHO, argv[0]);
    dt__cli_lm_usage(stderr);
    return DT_EXIT_USAGE;
}
