/* tokenizer_split.c — the split regexes of byte-level tokenizers, written out by hand over
 * UTF-8 (the alternatives tried in order at each position, as a backtracking engine tries
 * them), each found by its exact pattern text:
 *   GPT-2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *            ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   Qwen2:   Llama 3's with \p{N} (one digit a piece) for \p{N}{1,3}
 * A byte that is not UTF-8 is a character of its own, of neither class nor white space. */
#include "lm_tok_impl.h"

#include <string.h>

static size_t char_at(const char *s, size_t n, size_t i, int *cls) {
    uint32_t cp;
    size_t len = dt__utf8_char((const uint8_t *)s + i, n - i, &cp);
    *cls = dt__uclass(cp);
    return len;
}

/* The end of the run of characters of class cls starting at i (at most max of them). */
static size_t run_of(const char *s, size_t n, size_t i, int cls, int max) {
    int c, k = 0;
    size_t len;
    while (i < n && k < max && (len = char_at(s, n, i, &c), c == cls)) i += len, k++;
    return i;
}

/* 's 't 're 've 'm 'll 'd at i (s[i] == '\''): the length, 0 if none. */
static size_t contraction(const char *s, size_t n, size_t i, bool fold) {
    if (i + 1 >= n) return 0;
    char a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
    if (fold) a = (char)(a | 0x20), b = (char)(b | 0x20); /* ASCII letters only */
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* `\s+(?!\S)|\s+` at i (s[i] white space): a run before a non-space leaves its last one. */
static size_t spaces(const char *s, size_t n, size_t i) {
    size_t j = i, last = i, len;
    int cls;
    while (j < n && (len = char_at(s, n, j, &cls), cls == DT__UC_SPACE)) last = j, j += len;
    return j == n || last == i ? j : last;
}

size_t dt__split_gpt2(const char *s, size_t n, size_t i) {
    if (s[i] == '\'') {
        size_t c = contraction(s, n, i, false);
        if (c) return i + c;
    }
    size_t k = s[i] == ' ' ? i + 1 : i;
    int cls;
    if (k < n) {
        size_t len = char_at(s, n, k, &cls);
        if (cls != DT__UC_SPACE) return run_of(s, n, k + len, cls, 1 << 30);
    }
    return spaces(s, n, i);
}

static bool is_crlf(const char *s, size_t n, size_t i) {
    return i < n && (s[i] == '\r' || s[i] == '\n');
}

/* Llama 3's alternatives, a number being a run of at most `digits` digits. */
static size_t split_llama(const char *s, size_t n, size_t i, int digits) {
    if (s[i] == '\'') {
        size_t c = contraction(s, n, i, true);
        if (c) return i + c;
    }
    int cls, c2;
    size_t len = char_at(s, n, i, &cls);
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (cls == DT__UC_LETTER) return run_of(s, n, i, DT__UC_LETTER, 1 << 30);
    if (cls != DT__UC_NUMBER && !is_crlf(s, n, i) && i + len < n &&
        (char_at(s, n, i + len, &c2), c2 == DT__UC_LETTER))
        return run_of(s, n, i + len, DT__UC_LETTER, 1 << 30);
    if (cls == DT__UC_NUMBER) return run_of(s, n, i, DT__UC_NUMBER, digits); /* \p{N}{1,digits} */
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    size_t k = s[i] == ' ' ? i + 1 : i;
    if (k < n && (k == i ? cls : (char_at(s, n, k, &c2), c2)) == DT__UC_OTHER) {
        size_t j = run_of(s, n, k, DT__UC_OTHER, 1 << 30);
        while (is_crlf(s, n, j)) j++;
        return j;
    }
    /* \s*[\r\n]+ : up to the last CR / LF of the white space run */
    size_t j = i, end = 0;
    while (j < n && (len = char_at(s, n, j, &c2), c2 == DT__UC_SPACE)) {
        if (is_crlf(s, n, j)) end = j + 1;
        j += len;
    }
    return end ? end : spaces(s, n, i);
}

static size_t split_llama3(const char *s, size_t n, size_t i) {
    return split_llama(s, n, i, 3);
}

static size_t split_qwen2(const char *s, size_t n, size_t i) {
    return split_llama(s, n, i, 1);
}

static const struct {
    const char *pattern;
    dt__split_fn fn;
} known[] = {
    {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
     dt__split_gpt2},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
     "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     split_llama3},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
     "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     split_qwen2},
};

dt__split_fn dt__split_find(const char *regex) {
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(regex, known[i].pattern)) return known[i].fn;
    return NULL;
}
