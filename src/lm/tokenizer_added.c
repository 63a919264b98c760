/* tokenizer_added.c — added tokens: read from tokenizer.json with the ids `tokenizers` gives
 * them, and split out of text first. The library ignores the ids written in the file: in file
 * order, a token takes the id of an earlier added token with the same content, else its id in
 * the model's vocabulary, else the next id after the vocabulary and the added tokens so far. A
 * token whose content is some special token's is matched as that special token; the flags
 * (single_word, lstrip, rstrip) of an id are those of the last token given it. Tokens marked
 * normalized are matched after the normalizer, in their normalized form. */
#include "lm_tok_impl.h"

#include <stdlib.h>
#include <string.h>

static bool is_space_at(const char *s, size_t n, size_t i, size_t *len) {
    uint32_t cp;
    *len = dt__utf8_char((const uint8_t *)s + i, n - i, &cp);
    return dt__uclass(cp) == DT__UC_SPACE;
}

static bool is_word_at(const char *s, size_t n, size_t i, size_t *len) {
    uint32_t cp;
    *len = dt__utf8_char((const uint8_t *)s + i, n - i, &cp);
    int c = dt__uclass(cp);
    return c == DT__UC_LETTER || c == DT__UC_NUMBER;
}

/* The longest added token of the set at s[i], -1 if none. */
static int match_at(const dt_tokenizer *t, bool norm, const char *s, size_t n, size_t i) {
    int best = -1;
    for (int k = 0; k < t->nadded; k++) {
        const dt__added *a = &t->added[k];
        if (a->matched && a->normalized == norm && a->mlen <= n - i &&
            (best < 0 || a->mlen > t->added[best].mlen) && !memcmp(s + i, a->match, a->mlen))
            best = k;
    }
    return best;
}

/* Whether the match [start, stop) of a single_word token stands alone: no letter or digit
 * just before or just after it. */
static bool single_word_ok(const char *s, size_t n, size_t start, size_t stop) {
    size_t len, j = start;
    while (j > 0 && start - j < 4 && ((uint8_t)s[j - 1] & 0xC0) == 0x80) j--;
    if (j > 0 && ((uint8_t)s[j - 1] & 0xC0) != 0x80) j--; /* the lead byte */
    bool before = start > 0 && is_word_at(s, n, j, &len) && j + len == start;
    return !before && !(stop < n && is_word_at(s, n, stop, &len));
}

/* `tokenizers`' find_matches: leftmost-longest matches of the set's added tokens, the
 * single_word / lstrip / rstrip rules, the text between matches handed to gap(). */
dt_status dt__split_added(dt__enc *e, const char *s, size_t n, bool norm, size_t head,
                          dt__gap_fn gap) {
    const dt_tokenizer *t = e->t;
    if (!t->has_added[norm]) return gap(e, s, n, head);
    size_t done = 0, i = 0, len;
    dt_status r = DT_OK;
    while (i < n && !r) {
        int k = t->added_first[norm][(uint8_t)s[i]] ? match_at(t, norm, s, n, i) : -1;
        if (k < 0) {
            i++;
            continue;
        }
        const dt__added *a = &t->added[k];
        size_t start = i, stop = i + a->mlen;
        if (a->single_word && !single_word_ok(s, n, start, stop)) {
            i = stop;
            continue;
        }
        if (a->lstrip) { /* back over the white space before it, not past the last match */
            size_t ws = done;
            for (size_t j = done; j < start; j += len)
                if (!is_space_at(s, n, j, &len)) ws = j + len;
            start = ws;
        }
        if (a->rstrip)
            while (stop < n && is_space_at(s, n, stop, &len)) stop += len;
        if (start > done) r = gap(e, s + done, start - done, head > done ? head - done : 0);
        if (!r && stop > start) r = dt__tids_put(e->out, &a->id, 1); /* empty: dropped */
        done = stop;  /* even where an rstrip ran past the next matches: */
        i += a->mlen; /* the library looks for them from the end of this one */
    }
    if (!r && done < n) r = gap(e, s + done, n - done, head > done ? head - done : 0);
    return r;
}

/* ---- loading ----------------------------------------------------------------------------- */

static bool flag_of(const json_t *o, const char *key) {
    return json_is_true(json_object_get(o, key));
}

static bool same_token(const dt__added *a, const dt__added *b) {
    return a->len == b->len && !memcmp(a->text, b->text, a->len) && a->special == b->special &&
           a->normalized == b->normalized && a->lstrip == b->lstrip && a->rstrip == b->rstrip &&
           a->single_word == b->single_word;
}

/* Entry i of the file as written (its id in a->id). */
static dt_status read_token(const json_t *o, size_t i, const char *file, dt__added *a) {
    const json_t *id = json_object_get(o, "id"), *content = json_object_get(o, "content");
    if (!json_is_integer(id) || json_integer_value(id) < 0 ||
        json_integer_value(id) >= INT32_MAX - 1 || !json_is_string(content) ||
        !json_string_length(content))
        return dt_error(DT_ERR_FORMAT, "%s: added_tokens[%zu] needs an id and a non-empty content",
                        file, i);
    a->len = json_string_length(content);
    if (!(a->text = malloc(a->len + 1))) return dt_error(DT_ERR_OOM, "%s: out of memory", file);
    memcpy(a->text, json_string_value(content), a->len + 1);
    a->match = a->text, a->mlen = a->len;
    a->id = (int32_t)json_integer_value(id);
    a->special = flag_of(o, "special");
    a->normalized = flag_of(o, "normalized");
    a->lstrip = flag_of(o, "lstrip");
    a->rstrip = flag_of(o, "rstrip");
    a->single_word = flag_of(o, "single_word");
    return DT_OK;
}

/* The id the library gives token k (the tokens before it have theirs). */
static int32_t library_id(const dt_tokenizer *t, int k, int32_t *max_id) {
    const dt__added *a = &t->added[k];
    for (int j = 0; j < k; j++)
        if (t->added[j].len == a->len && !memcmp(t->added[j].text, a->text, a->len))
            return t->added[j].id;
    int32_t id = dt__vocab_get(&t->bpe.vocab, a->text, a->len);
    if (id < 0) id = *max_id >= t->bpe.vocab.count ? *max_id + 1 : t->bpe.vocab.count;
    if (id > *max_id) *max_id = id;
    return id;
}

/* A normalized token is matched as the normalizer writes it. */
static dt_status normalized_form(const dt_tokenizer *t, dt__added *a, size_t i, const char *file) {
    if (!a->normalized || !t->nnorm) return DT_OK;
    dt__tbuf bufs[2] = {{0}, {0}};
    const char *m;
    size_t mlen = 0;
    dt_status r = dt__normalize(t, a->text, a->len, bufs, &m, &mlen);
    if (!r && !mlen)
        r = dt_error(DT_ERR_FORMAT, "%s: added_tokens[%zu] normalizes to nothing", file, i);
    if (!r && !(a->match = malloc(mlen))) r = dt_error(DT_ERR_OOM, "%s: out of memory", file);
    if (!r) memcpy(a->match, m, mlen), a->mlen = mlen;
    if (r) a->match = a->text;
    free(bufs[0].p);
    free(bufs[1].p);
    return r;
}

/* Whether some special token of the list has this content. */
static bool special_content(const dt_tokenizer *t, const dt__added *a) {
    for (int j = 0; j < t->nadded; j++)
        if (t->added[j].special && t->added[j].len == a->len &&
            !memcmp(t->added[j].text, a->text, a->len))
            return true;
    return false;
}

/* Index by id, each id's flags from the last token given it, the first-byte tables. */
static dt_status index_added(dt_tokenizer *t, const char *file) {
    if (!(t->added_of = malloc((size_t)t->vocab_size * sizeof *t->added_of)))
        return dt_error(DT_ERR_OOM, "%s: out of memory", file);
    memset(t->added_of, 0xFF, (size_t)t->vocab_size * sizeof *t->added_of);
    for (int k = 0; k < t->nadded; k++) t->added_of[t->added[k].id] = k;
    for (int k = 0; k < t->nadded; k++) {
        dt__added *a = &t->added[k];
        const dt__added *last = &t->added[t->added_of[a->id]];
        a->single_word = last->single_word, a->lstrip = last->lstrip, a->rstrip = last->rstrip;
        a->matched = a->special || !special_content(t, a); /* else as the special one */
        if (!a->matched) continue;
        t->added_first[a->normalized][(uint8_t)a->match[0]] = true;
        t->has_added[a->normalized] = true;
    }
    return DT_OK;
}

dt_status dt__added_load(dt_tokenizer *t, const json_t *list, const char *file) {
    size_t n = json_is_array(list) ? json_array_size(list) : 0;
    t->vocab_size = t->bpe.vocab.nid;
    if (list && !json_is_null(list) && !json_is_array(list))
        return dt_error(DT_ERR_FORMAT, "%s: added_tokens is not an array", file);
    if (!(t->added = calloc(n + 1, sizeof *t->added)))
        return dt_error(DT_ERR_OOM, "%s: out of memory", file);
    int32_t max_id = -1;
    dt_status r = DT_OK;
    for (size_t i = 0; i < n && !r; i++) {
        dt__added *a = &t->added[t->nadded];
        if ((r = read_token(json_array_get(list, i), i, file, a))) break;
        t->nadded++;
        bool dup = false;
        for (int j = 0; j + 1 < t->nadded && !dup; j++) dup = same_token(&t->added[j], a);
        if (dup) { /* the library ignores a repeated token */
            free(a->text);
            memset(a, 0, sizeof *a);
            t->nadded--;
            continue;
        }
        int32_t written = a->id;
        a->id = library_id(t, t->nadded - 1, &max_id);
        if (a->id != written)
            dt_log(DT_LOG_WARN,
                   "%s: added token \"%s\" is written with id %d; it has id %d, as "
                   "the tokenizers library gives it",
                   file, a->text, written, a->id);
        if (a->id >= t->vocab_size) t->vocab_size = a->id + 1;
        r = normalized_form(t, a, i, file);
    }
    return r ? r : index_added(t, file);
}
