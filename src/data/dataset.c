/* dataset.c — the dt_dataset vtable helpers and two generic datasets: in-memory arrays
 * (borrowed or copied) and subsets (an index range or an index list over another dataset). */
#include "data_impl.h"
#include "data/data_iface.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

void *dt__sample_store_alloc(size_t n) {
    if (n < HUGE_PAGE) return malloc(n ? n : 1);
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE, n)) return NULL;
    (void)madvise(p, n, MADV_HUGEPAGE); /* a hint: refused (no THP) changes nothing else */
    return p;
}

size_t dt_field_nbytes(const dt_field *f) {
    size_t n = dt_dtype_size(f->dtype);
    for (int d = 0; d < f->ndim; d++) n *= (size_t)f->shape[d];
    return n;
}

dt_status dt__field_check(const dt_field *f, const char *who) {
    if (!f) return dt_error(DT_ERR_INVALID, "%s: NULL field", who);
    if (memchr(f->name, 0, DT_FIELD_NAME_MAX) == NULL || f->name[0] == 0)
        return dt_error(DT_ERR_INVALID, "%s: a field name must be 1..%d characters", who,
                        DT_FIELD_NAME_MAX - 1);
    if ((unsigned)f->dtype >= DT_DTYPE_COUNT)
        return dt_error(DT_ERR_INVALID, "%s: field '%s' has an unknown dtype %d", who, f->name,
                        (int)f->dtype);
    if (f->ndim < 0 || f->ndim > DT_MAX_DIMS - 1)
        return dt_error(DT_ERR_INVALID, "%s: field '%s' has ndim %d (a sample may have 0..%d dims)",
                        who, f->name, f->ndim, DT_MAX_DIMS - 1);
    for (int d = 0; d < f->ndim; d++)
        if (f->shape[d] < 1)
            return dt_error(DT_ERR_INVALID, "%s: field '%s' has dim %d of size %lld", who, f->name,
                            d, (long long)f->shape[d]);
    return DT_OK;
}

int64_t dt_dataset_len(const dt_dataset *ds) {
    return ds ? ds->len(ds) : 0;
}

dt_status dt_dataset_get(const dt_dataset *ds, int64_t index, void *const *out) {
    if (!ds) return dt_error(DT_ERR_INVALID, "dt_dataset_get: NULL dataset");
    int64_t n = ds->len(ds);
    if (index < 0 || index >= n)
        return dt_error(DT_ERR_INVALID, "dataset index %lld is outside [0, %lld)", (long long)index,
                        (long long)n);
    return ds->get(ds, index, out);
}

int dt_dataset_find(const dt_dataset *ds, const char *name) {
    if (!ds || !name) return -1;
    for (int f = 0; f < ds->nfields; f++)
        if (strcmp(ds->fields[f].name, name) == 0) return f;
    return -1;
}

void dt_dataset_free(dt_dataset *ds) {
    if (ds && ds->free) ds->free(ds);
}

/* ---- in-memory arrays ------------------------------------------------------------------ */

typedef struct arrays_state {
    int64_t n;
    const uint8_t *data[DT_DATASET_MAX_FIELDS];
    size_t nbytes[DT_DATASET_MAX_FIELDS];
    bool owned;
} arrays_state;

static int64_t arrays_len(const dt_dataset *self) {
    return ((const arrays_state *)self->state)->n;
}

static dt_status arrays_get(const dt_dataset *self, int64_t i, void *const *out) {
    const arrays_state *s = self->state;
    for (int f = 0; f < self->nfields; f++)
        memcpy(out[f], s->data[f] + (size_t)i * s->nbytes[f], s->nbytes[f]);
    return DT_OK;
}

static void arrays_prefetch(const dt_dataset *self, int64_t i) {
    const arrays_state *s = self->state;
    for (int f = 0; f < self->nfields; f++)
        dt__prefetch_bytes(s->data[f] + (size_t)i * s->nbytes[f], s->nbytes[f]);
}

static void arrays_free(dt_dataset *self) {
    arrays_state *s = self->state;
    if (s && s->owned)
        for (int f = 0; f < self->nfields; f++) free((void *)s->data[f]);
    free(s);
    free(self);
}

dt_dataset *dt_dataset_from_arrays(int nfields, const dt_array_field *arrays, int64_t n,
                                   bool copy) {
    const char *who = "dt_dataset_from_arrays";
    if (nfields < 1 || nfields > DT_DATASET_MAX_FIELDS || !arrays) {
        dt_error(DT_ERR_INVALID, "%s: %d fields (1..%d allowed)", who, nfields,
                 DT_DATASET_MAX_FIELDS);
        return NULL;
    }
    if (n < 0) {
        dt_error(DT_ERR_INVALID, "%s: negative sample count %lld", who, (long long)n);
        return NULL;
    }
    for (int f = 0; f < nfields; f++) {
        if (dt__field_check(&arrays[f].field, who) != DT_OK) return NULL;
        if (!arrays[f].data && n > 0) {
            dt_error(DT_ERR_INVALID, "%s: field '%s' has NULL data", who, arrays[f].field.name);
            return NULL;
        }
        for (int g = 0; g < f; g++)
            if (strcmp(arrays[f].field.name, arrays[g].field.name) == 0) {
                dt_error(DT_ERR_INVALID, "%s: field name '%s' appears twice", who,
                         arrays[f].field.name);
                return NULL;
            }
    }
    dt_dataset *ds = calloc(1, sizeof *ds);
    arrays_state *s = calloc(1, sizeof *s);
    if (!ds || !s) {
        free(ds);
        free(s);
        dt_error(DT_ERR_OOM, "%s: dataset header", who);
        return NULL;
    }
    s->n = n;
    s->owned = copy;
    ds->len = arrays_len;
    ds->get = arrays_get;
    ds->prefetch = arrays_prefetch;
    ds->free = arrays_free;
    ds->state = s;
    ds->nfields = nfields;
    for (int f = 0; f < nfields; f++) {
        ds->fields[f] = arrays[f].field;
        s->nbytes[f] = dt_field_nbytes(&arrays[f].field);
        if (!copy) {
            s->data[f] = arrays[f].data;
            continue;
        }
        size_t total = s->nbytes[f] * (size_t)n;
        void *p = dt__sample_store_alloc(total);
        if (!p) {
            ds->nfields = f; /* free the copies made so far */
            arrays_free(ds);
            dt_error(DT_ERR_OOM, "%s: copying field '%s' (%zu bytes)", who, arrays[f].field.name,
                     total);
            return NULL;
        }
        if (total) memcpy(p, arrays[f].data, total);
        s->data[f] = p;
    }
    return ds;
}

/* ---- subsets --------------------------------------------------------------------------- */

typedef struct subset_state {
    dt_dataset *base;
    bool own_base;
    int64_t start, n;
    int64_t *idx; /* NULL for a range */
} subset_state;

static int64_t subset_len(const dt_dataset *self) {
    return ((const subset_state *)self->state)->n;
}

static dt_status subset_get(const dt_dataset *self, int64_t i, void *const *out) {
    const subset_state *s = self->state;
    int64_t j = s->idx ? s->idx[i] : s->start + i;
    return s->base->get(s->base, j, out);
}

static void subset_prefetch(const dt_dataset *self, int64_t i) {
    const subset_state *s = self->state;
    if (s->base->prefetch) s->base->prefetch(s->base, s->idx ? s->idx[i] : s->start + i);
}

static void subset_free(dt_dataset *self) {
    subset_state *s = self->state;
    if (s) {
        if (s->own_base) dt_dataset_free(s->base);
        free(s->idx);
        free(s);
    }
    free(self);
}

static dt_dataset *subset_make(dt_dataset *base, int64_t start, int64_t n, int64_t *idx,
                               bool take_base) {
    dt_dataset *ds = calloc(1, sizeof *ds);
    subset_state *s = calloc(1, sizeof *s);
    if (!ds || !s) {
        free(ds);
        free(s);
        free(idx);
        if (take_base) dt_dataset_free(base);
        dt_error(DT_ERR_OOM, "dt_dataset_subset: dataset header");
        return NULL;
    }
    *s = (subset_state){.base = base, .own_base = take_base, .start = start, .n = n, .idx = idx};
    ds->len = subset_len;
    ds->get = subset_get;
    ds->prefetch = subset_prefetch;
    ds->free = subset_free;
    ds->state = s;
    ds->nfields = base->nfields;
    memcpy(ds->fields, base->fields, sizeof ds->fields);
    return ds;
}

dt_dataset *dt_dataset_subset(dt_dataset *base, int64_t start, int64_t end, bool take_base) {
    if (!base) {
        dt_error(DT_ERR_INVALID, "dt_dataset_subset: NULL base dataset");
        return NULL;
    }
    int64_t n = base->len(base);
    if (start < 0 || start > end || end > n) {
        dt_error(DT_ERR_INVALID, "dt_dataset_subset: range [%lld, %lld) is not inside [0, %lld)",
                 (long long)start, (long long)end, (long long)n);
        if (take_base) dt_dataset_free(base);
        return NULL;
    }
    return subset_make(base, start, end - start, NULL, take_base);
}

dt_dataset *dt_dataset_subset_indices(dt_dataset *base, const int64_t *indices, int64_t n,
                                      bool take_base) {
    if (!base || n < 0 || (!indices && n > 0)) {
        dt_error(DT_ERR_INVALID, "dt_dataset_subset_indices: NULL base, NULL indices or n < 0");
        if (take_base) dt_dataset_free(base);
        return NULL;
    }
    int64_t len = base->len(base);
    for (int64_t i = 0; i < n; i++)
        if (indices[i] < 0 || indices[i] >= len) {
            dt_error(DT_ERR_INVALID,
                     "dt_dataset_subset_indices: index %lld (position %lld) is outside [0, %lld)",
                     (long long)indices[i], (long long)i, (long long)len);
            if (take_base) dt_dataset_free(base);
            return NULL;
        }
    int64_t *idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
    if (!idx) {
        dt_error(DT_ERR_OOM, "dt_dataset_subset_indices: %lld indices", (long long)n);
        if (take_base) dt_dataset_free(base);
        return NULL;
    }
    if (n) memcpy(idx, indices, (size_t)n * sizeof *idx);
    return subset_make(base, 0, n, idx, take_base);
}
