/* text_dataset.c — a language-model dataset over a text file or a JSON-lines file: the text is
 * tokenized once into a flat i32 token file (the EOS token after every document), cached under
 * a name that carries a key of everything the tokens depend on, and read back through
 * dt_dataset_tokens. The key (hex in the name) hashes the format version, the text file's size
 * and modification time, the JSON field and the tokenizer.json's bytes, so a changed input
 * makes a new file rather than reusing a stale one. */
#include "lm_tok_impl.h"

#include "base/durable.h"
#include "data/data_iface.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TEXT_TOKENS_VERSION "dtrain-text-tokens-1"

/* Append a document's tokens and the EOS to the output file. */
static dt_status put_doc(dt_tokenizer *tok, dt_file_out *f, const char *s, size_t n,
                         int64_t *count) {
    int32_t *ids = NULL;
    size_t nids = 0;
    dt_status st = dt_tokenizer_encode(tok, s, n, &ids, &nids);
    int32_t eos = dt_tokenizer_eos(tok);
    if (!st && eos >= 0) {
        int32_t *grown = realloc(ids, (nids + 1) * sizeof *ids);
        if (!grown)
            st = dt_error(DT_ERR_OOM, "text dataset: out of memory");
        else
            (ids = grown)[nids++] = eos;
    }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t i = 0; i < nids; i++) ids[i] = (int32_t)__builtin_bswap32((uint32_t)ids[i]);
#endif
    if (!st && nids) st = dt_file_out_write(f, ids, nids * sizeof *ids);
    *count += (int64_t)nids;
    free(ids);
    return st;
}

/* JSON lines: each non-blank line an object whose member `field` is a string document. */
static dt_status tokenize_jsonl(dt_tokenizer *tok, FILE *in, const char *path, const char *field,
                                dt_file_out *f, int64_t *count) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int64_t lineno = 0;
    dt_status st = DT_OK;
    while (!st && (len = getline(&line, &cap, in)) >= 0) {
        lineno++;
        size_t k = 0;
        while (k < (size_t)len &&
               (line[k] == ' ' || line[k] == '\t' || line[k] == '\r' || line[k] == '\n'))
            k++;
        if (k == (size_t)len) continue;
        json_error_t je;
        json_t *o = json_loadb(line, (size_t)len, JSON_DECODE_ANY, &je);
        const json_t *v = json_object_get(o, field);
        if (!json_is_string(v))
            st = dt_error(DT_ERR_FORMAT,
                          "%s:%lld: %s; hint: every line must be a JSON object "
                          "with a string member \"%s\"",
                          path, (long long)lineno,
                          !o                  ? je.text
                          : json_is_object(o) ? "no string member of that name"
                                              : "not a JSON object",
                          field);
        else
            st = put_doc(tok, f, json_string_value(v), json_string_length(v), count);
        json_decref(o);
    }
    if (!st && ferror(in)) st = dt_error(DT_ERR_IO, "%s: read error: %s", path, strerror(errno));
    free(line);
    return st;
}

/* Plain text: the whole file one document. */
static dt_status tokenize_text(dt_tokenizer *tok, FILE *in, const char *path, dt_file_out *f,
                               int64_t *count) {
    dt__tbuf b = {0};
    char chunk[1 << 16];
    size_t got;
    dt_status st = DT_OK;
    while (!st && (got = fread(chunk, 1, sizeof chunk, in)) > 0) st = dt__tbuf_put(&b, chunk, got);
    if (!st && ferror(in)) st = dt_error(DT_ERR_IO, "%s: read error: %s", path, strerror(errno));
    if (!st) st = put_doc(tok, f, b.p ? b.p : "", b.n, count);
    free(b.p);
    return st;
}

static dt_status write_tokens(dt_tokenizer *tok, const char *text_path, const char *field,
                              const char *out_path) {
    FILE *in = fopen(text_path, "rb");
    if (!in) return dt_error(DT_ERR_IO, "%s: cannot read: %s", text_path, strerror(errno));
    dt_file_out *f = dt_file_out_open(out_path);
    int64_t count = 0;
    dt_status st = !f      ? dt_last_status()
                   : field ? tokenize_jsonl(tok, in, text_path, field, f, &count)
                           : tokenize_text(tok, in, text_path, f, &count);
    fclose(in);
    if (st) {
        dt_file_out_abort(f);
        return st;
    }
    dt_log(DT_LOG_INFO, "text dataset: %s tokenized to %lld tokens in %s", text_path,
           (long long)count, out_path);
    return dt_file_out_commit(f);
}

/* cache_dir/<text file name>.<key>.tok.i32 */
static char *cache_path(const char *text_path, const struct stat *sb, const char *field,
                        const dt_tokenizer *tok, const char *cache_dir) {
    char keytext[256];
    snprintf(keytext, sizeof keytext, "%s|%lld|%lld.%09ld|%s|%016llx", TEXT_TOKENS_VERSION,
             (long long)sb->st_size, (long long)sb->st_mtim.tv_sec, (long)sb->st_mtim.tv_nsec,
             field ? field : "", (unsigned long long)tok->digest);
    uint64_t key = dt__tok_hash(keytext, strlen(keytext));
    const char *slash = strrchr(text_path, '/'), *base = slash ? slash + 1 : text_path;
    int dirlen = cache_dir ? (int)strlen(cache_dir) : slash ? (int)(slash - text_path) : 1;
    const char *dir = cache_dir ? cache_dir : slash ? text_path : ".";
    size_t n = (size_t)dirlen + strlen(base) + 48;
    char *out = malloc(n);
    if (out)
        snprintf(out, n, "%.*s/%s.%016llx.tok.i32", dirlen, dir, base, (unsigned long long)key);
    return out;
}

dt_dataset *dt_dataset_text(const char *text_path, dt_tokenizer *tok,
                            const dt_text_dataset_opts *opts) {
    struct stat sb;
    if (!text_path || !opts || opts->block_size < 1) {
        dt_error(DT_ERR_INVALID, "dt_dataset_text: needs a text file and a block_size >= 1");
        return NULL;
    }
    double begin = opts->begin, end = opts->begin == 0 && opts->end == 0 ? 1 : opts->end;
    if (!tok) { /* bytes as tokens */
        char *bytes = NULL;
        size_t n = 0;
        if (dt__text_bytes(text_path, &bytes, &n)) return NULL;
        return dt__dataset_tokens_part(NULL, bytes, n, DT_TOKENS_U8, opts->block_size,
                                       opts->stride, 0, begin, end, text_path);
    }
    if (stat(text_path, &sb)) {
        dt_error(DT_ERR_IO, "%s: cannot read: %s", text_path, strerror(errno));
        return NULL;
    }
    char *path = cache_path(text_path, &sb, opts->jsonl_field, tok, opts->cache_dir);
    if (!path) {
        dt_error(DT_ERR_OOM, "dt_dataset_text: out of memory");
        return NULL;
    }
    struct stat cached;
    dt_status st = DT_OK;
    if (stat(path, &cached)) st = write_tokens(tok, text_path, opts->jsonl_field, path);
    dt_dataset *ds = st ? NULL
                        : dt__dataset_tokens_part(path, NULL, 0, DT_TOKENS_I32, opts->block_size,
                                                  opts->stride, dt_tokenizer_vocab_size(tok),
                                                  begin, end, path);
    free(path);
    return ds;
}
