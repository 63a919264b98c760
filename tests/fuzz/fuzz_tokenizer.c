/*
 * fuzz_tokenizer.c — the tokenizer.json reader and the tokenizer (dtrain/tokenizer.h): the input
 * is a tokenizer.json, then a NUL byte, then text (no NUL: the input itself is the text too).
 * A tokenizer that loads encodes the text; every id must be in [0, vocab size); the ids are
 * decoded and the decoding encoded again.
 */
#include "fuzz.h"

#include "dtrain/tokenizer.h"

static void run(dt_tokenizer *t, const char *text, size_t n) {
    int32_t *ids = NULL, *again = NULL;
    size_t nids = 0, nagain = 0;
    char *back = NULL;
    if (dt_tokenizer_encode(t, text, n, &ids, &nids) == DT_OK) {
        for (size_t i = 0; i < nids; i++)
            FZ_ASSERT(ids[i] >= 0 && ids[i] < dt_tokenizer_vocab_size(t));
        if (dt_tokenizer_decode(t, ids, nids, &back) == DT_OK) {
            FZ_ASSERT(back);
            (void)dt_tokenizer_encode(t, back, strlen(back), &again, &nagain);
        }
    }
    free(ids);
    free(again);
    free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_init();
    static char path[300];
    if (!path[0]) snprintf(path, sizeof path, "%s/tokenizer.json", fz_dir());
    const uint8_t *nul = memchr(data, 0, size);
    size_t json_len = nul ? (size_t)(nul - data) : size;
    fz_write(path, data, json_len);
    dt_tokenizer *t = NULL;
    if (dt_tokenizer_load(&t, path) != DT_OK) {
        FZ_ASSERT(!t && dt_last_error()[0]);
        return 0;
    }
    if (nul)
        run(t, (const char *)nul + 1, size - json_len - 1);
    else
        run(t, (const char *)data, size);
    dt_tokenizer_free(t);
    return 0;
}
