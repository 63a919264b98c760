/*
 * dtrain/data.h — the data layer: datasets, samplers, collate, and the reproducible, resumable,
 * sharded data loader (a C take on determined.pytorch.DataLoader); IDX and token-file readers.
 *
 * The pieces (docs/data.md has the one-page tour):
 *   dt_dataset   a vtable: len, get(index) -> one sample's fields, field descriptions, free.
 *                Built in: in-memory arrays, IDX image/label pairs (MNIST / Fashion-MNIST),
 *                flat token files (nanoGPT's train.bin), and subsets of another dataset.
 *   dt_loader    batches a dataset: batch_size, shuffle, drop_last, a user sampler or batch
 *                sampler, a default stacking collate or a user collate, worker threads with
 *                prefetch, sharding over (rank, world), resume mid-epoch.
 *   dt_batch     what the loader hands out: named tensors (B, ...), the record count, and the
 *                dataset indices it holds.
 *
 * Reproducibility contract. The batches of epoch e depend only on (dataset, options, seed, e,
 * rank, world): not on num_workers, thread timing, or how the epoch was reached (a loader
 * resumed with dt_loader_start_epoch(e, k) hands out exactly the batches k, k+1, ... that an
 * uninterrupted run hands out). Shuffling draws a Philox permutation keyed by (seed, epoch)
 * that is the same on every rank.
 *
 * Sharding rule (dt_loader_set_shard(rank, world); B = batch_size, the per-rank batch size).
 * The epoch's global sample order o[0..M) (M = dataset length, or the sampler's length) is cut
 * into rounds of B*W samples. In full round j, rank r gets o[j*B*W + r*B, j*B*W + (r+1)*B):
 * i.e. with the order cut into batches of B, rank r gets global batches r, r+W, r+2W, ...
 * The remainder R = M mod (B*W) (the last, partial round):
 *   - drop_last = true:  dropped. Every rank gets floor(M / (B*W)) batches, all full; each
 *                        sample of the first M - R positions is seen exactly once, the R tail
 *                        samples (a different set every epoch when shuffling) not at all.
 *   - drop_last = false: split evenly: rank r gets the r-th of W contiguous chunks of sizes
 *                        ceil(R/W) or floor(R/W) (the first R mod W ranks get one more). Every
 *                        rank gets ceil(M / (B*W)) batches and every sample is seen exactly once
 *                        per epoch. If R < W, ranks r >= R get an EMPTY last batch (records 0,
 *                        tensors of shape (0, ...)) so batch counts stay equal: a trial loop
 *                        must take part in collectives for it but compute nothing.
 * With W = 1 this is the plain PyTorch behaviour (the last batch holds M mod B samples).
 * A batch sampler's batches are never split: rank r gets global batches r, r+W, ...; a rank
 * left short when the count is not a multiple of W gets an empty batch at the end, so every
 * rank has ceil(nb / W) batches and every listed batch is used exactly once.
 *
 * Threads. dt_dataset.get may be called from several loader worker threads at once (for
 * different indices): a dataset must be safe for concurrent get calls. The built-in datasets
 * are. A dt_loader itself is used from one thread.
 */
#ifndef DTRAIN_DATA_H
#define DTRAIN_DATA_H

#include "dtrain/base.h"
#include "dtrain/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- IDX files -------------------------------------------------------------------------- */

/* An IDX array (the MNIST format): `ndim` dims, u8 data (the only element type MNIST uses;
 * other IDX element types are refused with DT_ERR_FORMAT). */
typedef struct dt_idx {
    int ndim;
    int64_t dims[4];
    uint8_t *data; /* dims[0] * ... bytes, heap; free with dt_idx_free */
} dt_idx;

/* Read an IDX file, gzip'd (".gz", detected by magic) or raw. On error returns DT_ERR_IO
 * (cannot open/read) or DT_ERR_FORMAT (bad magic, sizes that do not match the file) and
 * leaves *out empty. */
DT_API dt_status dt_idx_read(const char *path, dt_idx *out);
DT_API void dt_idx_free(dt_idx *x);

/* ---- datasets --------------------------------------------------------------------------- */

#define DT_DATASET_MAX_FIELDS 8
#define DT_FIELD_NAME_MAX 32

/* One field of a sample: its name ("x", "y", ...), dtype and per-sample shape (ndim 0 = a
 * scalar; a batch of it is then (B)). A sample's field occupies numel(shape) * dtype size
 * contiguous bytes. */
typedef struct dt_field {
    char name[DT_FIELD_NAME_MAX];
    dt_dtype dtype;
    int ndim; /* 0 .. DT_MAX_DIMS - 1 */
    int64_t shape[DT_MAX_DIMS - 1];
} dt_field;


/* A map-style dataset. Anyone may implement one by filling this struct (statically or on the
 * heap) — the built-in constructors below return heap ones.
 *   len(self)             number of samples (constant for the dataset's lifetime).
 *   get(self, i, out)     write sample i (0 <= i < len) into the caller's buffers: out[f] points
 *                         to dt_field_nbytes(&fields[f]) writable bytes for field f; every byte
 *                         must be written. Returns DT_OK, or an error status with dt_error()
 *                         set (the loader adds which index failed). Must be safe to call from
 *                         several threads at once.
 *   free(self)            release everything (including the struct itself if it was
 *                         allocated); may be NULL (nothing to free). Called by dt_dataset_free.
 *   fields[0..nfields)    the field descriptions, in the order of get's `out`.
 *   state                 the implementation's data.
 *   prefetch(self, i)     optional (may be NULL): a hint that get(self, i, ...) follows soon,
 *                         e.g. start the memory reads of sample i. Must not fail or block;
 *                         the loader calls it a few samples ahead when it builds a batch
 *                         of shuffled indices. Same thread-safety as get. */
typedef struct dt_dataset dt_dataset;
struct dt_dataset {
    int64_t (*len)(const dt_dataset *self);
    dt_status (*get)(const dt_dataset *self, int64_t index, void *const *out);
    void (*free)(dt_dataset *self);
    int nfields;
    dt_field fields[DT_DATASET_MAX_FIELDS];
    void *state;
    void (*prefetch)(const dt_dataset *self, int64_t index);
};

/* Convenience wrappers. dt_dataset_get checks 0 <= index < len (DT_ERR_INVALID otherwise).
 * dt_dataset_find returns the field's position or -1. dt_dataset_free(NULL) is fine. */
DT_API int64_t dt_dataset_len(const dt_dataset *ds);
DT_API dt_status dt_dataset_get(const dt_dataset *ds, int64_t index, void *const *out);
DT_API void dt_dataset_free(dt_dataset *ds);

/* One in-memory field for dt_dataset_from_arrays: `data` holds n samples back to back, each
 * of dt_field_nbytes(&field) bytes (i.e. a contiguous (n, shape...) array). */
typedef struct dt_array_field {
    dt_field field;
    const void *data;
} dt_array_field;

/* A dataset of n samples over 1..DT_DATASET_MAX_FIELDS in-memory arrays. copy = true copies
 * the arrays into the dataset (the caller may free its buffers at once); copy = false BORROWS
 * them (they must stay alive and unchanged until dt_dataset_free). Field names must be
 * distinct and non-empty. On error returns NULL with DT_ERR_INVALID (bad field, n < 0, NULL
 * data) or DT_ERR_OOM. */
DT_API dt_dataset *dt_dataset_from_arrays(int nfields, const dt_array_field *arrays, int64_t n,
                                          bool copy);

/* A view of `base` over indices [start, end) (sample i of the view = sample start + i of the
 * base), e.g. a validation split. The base is borrowed (must outlive the subset) unless
 * take_base is true, in which case dt_dataset_free(subset) also frees the base (also when this
 * call fails). DT_ERR_INVALID unless 0 <= start <= end <= len(base). */
DT_API dt_dataset *dt_dataset_subset(dt_dataset *base, int64_t start, int64_t end, bool take_base);

/* How dt_dataset_idx lays out an image. */
typedef enum dt_image_layout {
    DT_IMAGE_FLAT = 0, /* "x" is (H*W): 784 for MNIST, for an MLP */
    DT_IMAGE_HW,       /* "x" is (H, W) */
    DT_IMAGE_CHW,      /* "x" is (1, H, W): a channel dim for conv2d */
} dt_image_layout;

/* An image/label pair of IDX files (gzip'd or raw), e.g. Fashion-MNIST's
 * train-images-idx3-ubyte.gz + train-labels-idx1-ubyte.gz. Images must be u8 (N, H, W),
 * labels u8 (N). Fields: "x" f32 with value (pixel / 255 - mean) / std (torchvision's ToTensor
 * + Normalize; mean 0, std 1 gives [0, 1]), laid out per `layout`; "y" i64 scalar (the
 * label). Both files are read into memory (N*H*W + N bytes); pixels are converted on get.
 * Errors: DT_ERR_IO / DT_ERR_FORMAT from reading (the message names the file), DT_ERR_FORMAT
 * when the shapes do not fit (not 3-D images, not 1-D labels, counts differ), DT_ERR_INVALID
 * for std <= 0 or a bad layout. */
DT_API dt_dataset *dt_dataset_idx(const char *images_path, const char *labels_path, float mean,
                                  float std, dt_image_layout layout);
/* The same for the MNIST family's names in dir: <split>-images-idx3-ubyte.gz and
 * <split>-labels-idx1-ubyte.gz (split "train" or "t10k"; without .gz when only that exists). */
DT_API dt_dataset *dt_dataset_idx_split(const char *dir, const char *split, float mean, float std,
                                        dt_image_layout layout);

/* Element type of a flat token file (little-endian, no header). */
typedef enum dt_token_type {
    DT_TOKENS_U16 = 0, /* nanoGPT's train.bin / val.bin */
    DT_TOKENS_I32,
    DT_TOKENS_U32,
    DT_TOKENS_U8, /* bytes: a character-level model's text as it is (vocabulary 256) */
} dt_token_type;

/* A language-model dataset over a flat token file (memory-mapped read-only, so files larger
 * than memory work). With n tokens, block size T and stride S (S <= 0 means S = T, i.e.
 * non-overlapping windows) there are floor((n - T - 1) / S) + 1 samples; sample i has
 *   "x" i64 (T) = tokens[i*S     .. i*S + T)
 *   "y" i64 (T) = tokens[i*S + 1 .. i*S + T + 1)   (x shifted by one: next-token targets)
 * If vocab_size > 0 (and always for i32 files, for negative tokens) the whole file is scanned
 * once at open and a token >= vocab_size or < 0 is refused. Errors: DT_ERR_IO (cannot open / map),
 * DT_ERR_FORMAT (size not a multiple of the token size, fewer than T + 1 tokens, a token out of
 * range — the message names the file and the position), DT_ERR_INVALID (T < 1, bad type). */
DT_API dt_dataset *dt_dataset_tokens(const char *path, dt_token_type type, int64_t block_size,
                                     int64_t stride, int64_t vocab_size);

/* ---- batches ---------------------------------------------------------------------------- */

/* A batch handed out by dt_loader_next. Owned by the loader; valid until the next
 * dt_loader_next, dt_loader_start_epoch / _start_unsharded, or dt_loader_free on its loader.
 * Never free its tensors.
 *   tensors[f]   default collate: field f of the dataset stacked to (records, shape...), a
 *                contiguous heap tensor (dt_tensor_new_heap on the loader's ctx, charged to
 *                DT_MEM_OTHER) whose storage is reused from batch to batch; tensors[f]->name
 *                is the field name. NULL fields with a user collate.
 *   records      the number of records (get_batch_length): the number of samples with the
 *                default collate; a user collate may set it (e.g. to a graph count).
 *   indices      the dataset indices in this batch, in order (n_indices of them; 0 for an
 *                empty shard-padding batch).
 *   epoch, batch the epoch and this shard's batch index within it (0-based).
 *   custom       a user collate's batch object (see dt_collate); NULL otherwise. */
typedef struct dt_batch {
    int nfields;
    dt_tensor *tensors[DT_DATASET_MAX_FIELDS];
    int64_t records;
    const int64_t *indices;
    int64_t n_indices;
    int64_t epoch;
    int64_t batch;
    void *custom;
} dt_batch;

/* The tensor of field `name`, or NULL (no error is raised) if the batch has no such field. */
DT_API dt_tensor *dt_batch_get(const dt_batch *b, const char *name);

/* ---- samplers and collate --------------------------------------------------------------- */

/* A user sampler: the epoch's sample order (a list of dataset indices, repeats allowed). Either
 * a fixed list (indices/n, copied by dt_loader_new) or callbacks; with callbacks `len` and
 * `fill` must be deterministic in (epoch, seed) — every rank calls them and must get the same
 * list; fill writes len(epoch) indices, each in [0, len(dataset)). The loader then cuts the
 * list into batches and shards it exactly like its own order. Mutually exclusive with
 * shuffle. */
typedef struct dt_sampler {
    const int64_t *indices; /* a fixed list, or NULL to use the callbacks */
    int64_t n;
    int64_t (*len)(void *user, int64_t epoch);
    dt_status (*fill)(void *user, int64_t epoch, uint64_t seed, int64_t *out);
    void *user;
} dt_sampler;

/* A list of batches being built by a batch sampler (opaque). */
typedef struct dt_batch_plan dt_batch_plan;
/* Append one batch of n >= 1 dataset indices (copied). DT_ERR_INVALID for n < 1; DT_ERR_OOM. */
DT_API dt_status dt_batch_plan_add(dt_batch_plan *p, const int64_t *indices, int64_t n);

/* A user batch sampler: `epoch` is called from dt_loader_start_epoch (and from the count
 * queries) on the loader's thread and appends the epoch's global batches with
 * dt_batch_plan_add; it must be deterministic in (epoch, seed) — every rank builds the same
 * list, the loader shards it. Mutually exclusive with batch_size, shuffle, sampler and
 * drop_last (dt_loader_new fails with DT_ERR_CONFIG otherwise). */
typedef struct dt_batch_sampler {
    dt_status (*epoch)(void *user, int64_t epoch, uint64_t seed, dt_batch_plan *out);
    void *user;
} dt_batch_sampler;

/* A user collate, for custom batch types. The loader keeps one batch object per ring slot:
 *   slot_new(user, max_batch)   make one batch object able to hold up to max_batch samples;
 *                               called on the loader's thread (at dt_loader_new, and again
 *                               at start_epoch for every slot if a batch sampler's largest
 *                               batch grows: slot_free then slot_new). NULL -> no object.
 *   fill(user, ds, idx, n, b)   build batch b from the n samples idx[0..n): b->custom is the
 *                               slot's object; b->records is preset to n and may be changed.
 *                               Called from worker threads (for different slots at once) —
 *                               read samples with dt_dataset_get into your own buffers.
 *                               n may be 0 (an empty shard-padding batch).
 *   slot_free(user, obj)        free one object (may be NULL). */
typedef struct dt_collate {
    void *(*slot_new)(void *user, int64_t max_batch);
    dt_status (*fill)(void *user, const dt_dataset *ds, const int64_t *idx, int64_t n, dt_batch *b);
    void (*slot_free)(void *user, void *obj);
    void *user;
} dt_collate;

/* ---- the loader ------------------------------------------------------------------------- */

typedef struct dt_loader dt_loader;

/* Loader options; zero-initialise and set what you need ({0} is invalid: batch_size is
 * required unless a batch sampler is given).
 *   batch_size       samples per batch on each rank (>= 1); must be 0 with a batch sampler.
 *   shuffle          a new Philox permutation per epoch, keyed by (seed, epoch).
 *   drop_last        drop the final partial round (see the sharding rule at the top).
 *   seed             the trial seed (shuffle seed; passed to user samplers).
 *   num_workers      0: batches are built in dt_loader_next on the caller's thread; N > 0
 *                    (at most 256): N pthreads build batches ahead into a ring of slots.
 *   prefetch_factor  batches per worker built ahead of the consumer (0 means 2; at most 64):
 *                    up to prefetch_factor*N batches wait ready besides the one handed out.
 *   sampler          a user sampler (borrowed for the loader's life) or NULL.
 *   batch_sampler    a user batch sampler (borrowed) or NULL.
 *   collate          a user collate (borrowed) or NULL for the default stacking collate.
 *   take_dataset     dt_loader_free also frees the dataset (also if dt_loader_new fails). */
typedef struct dt_loader_opts {
    int64_t batch_size;
    bool shuffle;
    bool drop_last;
    uint64_t seed;
    int num_workers;
    int prefetch_factor;
    const dt_sampler *sampler;
    const dt_batch_sampler *batch_sampler;
    const dt_collate *collate;
    bool take_dataset;
} dt_loader_opts;

/* Make a loader over `ds` (borrowed unless opts->take_dataset). `ctx` supplies the batch
 * tensors (heap, DT_MEM_OTHER; allocated here, once per ring slot — none per batch; a batch
 * sampler's slots are sized at the first start_epoch and grow only when a larger batch comes);
 * it must outlive the loader, and may be NULL only with a user collate. The loader starts
 * unsharded (rank 0 of 1) and idle: call dt_loader_start_epoch before dt_loader_next. No
 * threads run until an epoch starts; with N workers the ring has prefetch_factor*N + 1 slots
 * (one is the batch the caller holds).
 * Errors (NULL returned): DT_ERR_CONFIG for inconsistent options (batch_size < 1 without a
 * batch sampler, a batch sampler combined with batch_size / shuffle / sampler / drop_last,
 * sampler with shuffle, num_workers or prefetch_factor < 0 or too large, a dataset with no
 * fields and no user collate); DT_ERR_INVALID for a NULL dataset or a bad sampler index list;
 * DT_ERR_OOM (the device budget). */
DT_API dt_loader *dt_loader_new(dt_ctx *ctx, dt_dataset *ds, const dt_loader_opts *opts);

/* Stop the workers (waits for each to finish the sample it is on), free every slot tensor and
 * the loader (and the dataset if taken). NULL is fine. */
DT_API void dt_loader_free(dt_loader *l);

/* Shard the loader: this process is `rank` of `world` (see the sharding rule above). Takes
 * effect at the next start_epoch; a new (rank, world) given mid-epoch ends the running epoch
 * (workers are stopped; dt_loader_next then fails with DT_ERR_STATE until a start). DT_ERR_INVALID
 * unless 0 <= rank < world. */
DT_API dt_status dt_loader_set_shard(dt_loader *l, int rank, int world);

/* Batches per epoch on this shard (equal on every rank), and records per epoch on this shard
 * (the number of dataset indices its batches hold; a user collate's own `records` is not
 * consulted). For the built-in samplers these do not depend on the epoch; with a user sampler
 * or batch sampler they are for the epoch last started (epoch 0 before any start; the sampler
 * is asked then). Returns -1 with the error set if a user sampler fails. */
DT_API int64_t dt_loader_num_batches(dt_loader *l);
DT_API int64_t dt_loader_num_records(dt_loader *l);
/* The same for the whole dataset as one shard (what dt_loader_start_unsharded iterates). */
DT_API int64_t dt_loader_num_batches_unsharded(dt_loader *l);
DT_API int64_t dt_loader_num_records_unsharded(dt_loader *l);

/* Start epoch `epoch` (>= 0) on this shard, skipping its first `skip_batches` batches (the
 * batches already trained, to resume mid-epoch): the next dt_loader_next returns this shard's
 * batch `skip_batches` of the epoch, bit for bit the batch an uninterrupted run gets there.
 * skip_batches == num_batches starts an epoch that is already over. Any epoch in progress is
 * abandoned (its workers stopped and joined). Errors: DT_ERR_INVALID for epoch < 0 or
 * skip_batches outside [0, num_batches]; a user sampler's error; DT_ERR_OOM. */
DT_API dt_status dt_loader_start_epoch(dt_loader *l, int64_t epoch, int64_t skip_batches);

/* Start a pass over the whole dataset ignoring the shard (rank 0 of 1) and with no skip — for
 * evaluation on one process (evaluate_full_dataset). Same order rules as start_epoch. */
DT_API dt_status dt_loader_start_unsharded(dt_loader *l, int64_t epoch);

/* The next batch of the epoch: DT_OK with *out set, or DT_OK with *out == NULL at the end of
 * the epoch (and at every call after it). On error *out is NULL and the status is returned:
 * DT_ERR_STATE when no epoch was started; a dataset get() or collate error with the message
 * "loading batch B of epoch E: dataset index I: <the dataset's message>" (the same error again
 * on every later call until the next start_epoch). */
DT_API dt_status dt_loader_next(dt_loader *l, dt_batch **out);
/* The batch of global step `step`, counting across epochs (epoch step / num_batches, its
 * batch step % num_batches): starts that epoch there unless it is the next batch in line, so a
 * loop resumed at any step reads the batches of an uninterrupted run. */
DT_API dt_status dt_loader_next_step(dt_loader *l, int64_t step, dt_batch **out);

/* Where the loader is: the epoch last started and the number of this shard's batches of it
 * handed out so far (counting skipped ones) — what a checkpoint stores to resume with
 * dt_loader_start_epoch(epoch, batch). -1, 0 before any start. Either pointer may be NULL. */
DT_API void dt_loader_position(const dt_loader *l, int64_t *epoch, int64_t *batch);


/* ---- user loaders (disable_dataset_reproducibility_checks) ----------------------------------
 * A trial that opts out of the reproducibility checks returns a loader of its own: these
 * callbacks behind the same dt_loader calls (dt_loader_next, start_epoch, counts, free). The
 * user is responsible for reproducibility, resume and sharding: set_shard may be NULL (the
 * call is then accepted and ignored); num_records may be NULL (then -1 is reported). The
 * unsharded calls map to start_epoch(epoch, 0) and num_batches / num_records. */
typedef struct dt_loader_ops {
    dt_status (*start_epoch)(void *user, int64_t epoch, int64_t skip_batches);
    dt_status (*next)(void *user, dt_batch **out);
    int64_t (*num_batches)(void *user);
    int64_t (*num_records)(void *user);
    dt_status (*set_shard)(void *user, int rank, int world);
    void (*free)(void *user);
} dt_loader_ops;

/* Wrap user callbacks (ops borrowed, must stay valid; user freed via ops->free by
 * dt_loader_free). DT_ERR_INVALID (NULL returned) if start_epoch, next or num_batches is
 * missing. */
DT_API dt_loader *dt_loader_new_custom(const dt_loader_ops *ops, void *user);

#ifdef __cplusplus
}
#endif
#endif
