/*
 * data/data_iface.h — the data layer's interface to the layers above (not public API): dataset
 * and loader introspection the trial layer uses beyond dtrain/data.h.
 */
#ifndef DT_DATA_IFACE_H
#define DT_DATA_IFACE_H

#include "dtrain/data.h"

/* Bytes of one sample of field `f`. */
DT_API size_t dt_field_nbytes(const dt_field *f);
DT_API int dt_dataset_find(const dt_dataset *ds, const char *name);
/* Like dt_dataset_subset over an explicit index list (copied; each in [0, len(base))). */
DT_API dt_dataset *dt_dataset_subset_indices(dt_dataset *base, const int64_t *indices, int64_t n,
                                             bool take_base);
DT_API const dt_dataset *dt_loader_dataset(const dt_loader *l);
DT_API const dt_loader_opts *dt_loader_options(const dt_loader *l);
/* dt_dataset_tokens over part [begin, end) of the tokens (fractions of their count n: tokens
 * floor(begin*n) .. floor(end*n)), read from the file `path` (mapped) or, with path NULL, from
 * `buf` (`bytes` long, heap memory the dataset takes: freed with it, or here on error). `what`
 * names the source in errors. */
DT_API dt_dataset *dt__dataset_tokens_part(const char *path, void *buf, size_t bytes,
                                           dt_token_type type, int64_t block_size, int64_t stride,
                                           int64_t vocab_size, double begin, double end,
                                           const char *what);

#endif
