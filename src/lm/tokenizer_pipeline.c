/* tokenizer_pipeline.c — a tokenizer.json's normalizer, pre_tokenizer and decoder sections
 * (a stage or a Sequence of them) loaded into stage lists, each stage found by its JSON type
 * in its kind's table (tokenizer_stages.c, tokenizer_decode.c); an unknown type is refused by
 * name. */
#include "lm_tok_impl.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_STAGES = 8 };

static const char *const kind_key[] = {"normalizer", "pre_tokenizer", "decoder"};
static const char *const seq_key[] = {"normalizers", "pretokenizers", "decoders"};

static dt_status add_stage(dt__stage **out, int *n, const json_t *node, dt__stage_kind kind,
                           const char *file, int depth) {
    const char *where = kind_key[kind], *type = json_string_value(json_object_get(node, "type"));
    if (!json_is_object(node) || !type)
        return dt_error(DT_ERR_FORMAT, "%s: %s is not an object with a type", file, where);
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(node, seq_key[kind]);
        if (!json_is_array(list) || depth > 4)
            return dt_error(DT_ERR_FORMAT, "%s: %s Sequence has no %s list", file, where,
                            seq_key[kind]);
        for (size_t i = 0; i < json_array_size(list); i++) {
            dt_status r = add_stage(out, n, json_array_get(list, i), kind, file, depth + 1);
            if (r) return r;
        }
        return DT_OK;
    }
    size_t nrows;
    const dt__stage_row *rows = kind == DT__STAGE_NORM     ? dt__norm_rows(&nrows)
                                : kind == DT__STAGE_PRETOK ? dt__pretok_rows(&nrows)
                                                           : dt__dec_rows(&nrows);
    const dt__stage_row *row = NULL;
    for (size_t i = 0; i < nrows && !row; i++)
        if (!strcmp(rows[i].type, type)) row = &rows[i];
    if (!row)
        return dt_error(DT_ERR_FORMAT,
                        "%s: %s type %s is not supported; hint: dtrain reads "
                        "GPT-2 and Llama style tokenizers (docs/lm.md)",
                        file, where, type);
    if (*n >= MAX_STAGES)
        return dt_error(DT_ERR_FORMAT, "%s: more than %d %s stages", file, MAX_STAGES, where);
    dt__stage *st = &(*out)[(*n)++];
    st->type = row->type, st->norm = row->norm, st->pretok = row->pretok, st->dec = row->dec;
    return row->parse(st, node, where, file);
}

dt_status dt__stages_load(dt__stage **out, int *n, const json_t *node, dt__stage_kind kind,
                          const char *file) {
    *n = 0;
    *out = calloc(MAX_STAGES, sizeof **out);
    if (!*out) return dt_error(DT_ERR_OOM, "%s: out of memory", file);
    if (!node || json_is_null(node)) return DT_OK;
    dt_status r = add_stage(out, n, node, kind, file, 0);
    if (!r && kind == DT__STAGE_PRETOK)
        for (int i = 0; i + 1 < *n; i++)
            if (!strcmp((*out)[i].type, "ByteLevel"))
                return dt_error(DT_ERR_FORMAT,
                                "%s: pre_tokenizer ByteLevel is supported only "
                                "as the last pre-tokenizer of a Sequence",
                                file);
    return r;
}

void dt__stages_free(dt__stage *s, int n) {
    for (int i = 0; s && i < n; i++) {
        free(s[i].a);
        free(s[i].b);
    }
    free(s);
}
