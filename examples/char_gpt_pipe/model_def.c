/* model_def.c — a character-level GPT trained with pipeline parallelism as an engine-based
 * trial (the reference's DeepSpeedTrial with a PipelineModule): the model is a list of layers
 * (token + position embedding, transformer blocks, final norm + LM head) cut into stages, and
 * each global batch flows through them with the 1F1B schedule in one dt_pipe_train_batch call.
 *
 *   dtrain train examples/char_gpt_pipe/const.yaml examples/char_gpt_pipe --slots 2  # 2 stages
 *   dtrain train examples/char_gpt_pipe/const.yaml examples/char_gpt_pipe --slots 4  # 2 x 2 DP
 *
 * The text is any plain-text file, or a directory of them read in name order (hyperparameter
 * `corpus`; default /usr/share/common-licenses, the ~250 kB of license texts every Debian
 * system ships in base-files); its bytes are the tokens (vocabulary 256). A training sample is a
 * window of seq + 1 bytes starting every `stride` bytes of the first (1 - val_fraction) of the
 * text: "x" the first seq bytes, "y" the seq bytes after each (next-byte targets); validation
 * windows come from the rest of the text. Metrics: loss (nats per byte), validation_loss, and
 * validation_bpc (bits per byte).
 *
 * Hyperparameters: deepspeed_config (+ overwrite_deepspeed_args), corpus, val_fraction, seq,
 * stride, d_model, n_head, n_layer, num_stages, partition_method. */
#include <dtrain/dtrain.h>
#include <dtrain/pipe.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- the corpus as a dataset of byte windows ---- */

typedef struct text_windows {
    const uint8_t *bytes; /* the split's bytes (borrowed from the trial's corpus) */
    int64_t n, seq, stride;
} text_windows;

static int64_t tw_len(const dt_dataset *ds) {
    const text_windows *w = ds->state;
    return w->n < w->seq + 1 ? 0 : (w->n - w->seq - 1) / w->stride + 1;
}

/* Sample i: x = bytes[i*stride, +seq), y = bytes[i*stride + 1, +seq). Read-only, so safe from
 * several loader threads at once. */
static dt_status tw_get(const dt_dataset *ds, int64_t i, void *const *out) {
    const text_windows *w = ds->state;
    const uint8_t *p = w->bytes + i * w->stride;
    int64_t *x = out[0], *y = out[1];
    for (int64_t t = 0; t < w->seq; t++) {
        x[t] = p[t];
        y[t] = p[t + 1];
    }
    return DT_OK;
}

static void tw_free(dt_dataset *ds) {
    free(ds->state);
    free(ds);
}

static dt_dataset *text_dataset(const uint8_t *bytes, int64_t n, int64_t seq, int64_t stride) {
    dt_dataset *ds = calloc(1, sizeof *ds);
    text_windows *w = calloc(1, sizeof *w);
    if (!ds || !w) {
        free(ds);
        free(w);
        dt_error(DT_ERR_OOM, "text dataset");
        return NULL;
    }
    *w = (text_windows){bytes, n, seq, stride};
    ds->len = tw_len;
    ds->get = tw_get;
    ds->free = tw_free;
    ds->state = w;
    ds->nfields = 2;
    ds->fields[0] = (dt_field){.name = "x", .dtype = DT_DTYPE_I64, .ndim = 1, .shape = {seq}};
    ds->fields[1] = (dt_field){.name = "y", .dtype = DT_DTYPE_I64, .ndim = 1, .shape = {seq}};
    return ds;
}

/* ---- the trial ---- */

typedef struct gpt_trial {
    dt_trial_ctx *ctx;
    dt_pipe_engine *pipe;
    dt_gpt_config cfg; /* the layers' builders read it */
    uint8_t *text;
    int64_t n_text, n_train, stride;
} gpt_trial;

static dt_module *build_embedding(void *cfg) {
    return dt_gpt_embedding(cfg);
}
static dt_module *build_block(void *cfg) {
    return dt_gpt_block(cfg);
}
static dt_module *build_head(void *cfg) {
    return dt_gpt_head(cfg);
}

/* The last stage's loss: logits (B, T, V) against next-byte targets (B, T). */
static dt_tensor *lm_loss(dt_tensor *logits, dt_tensor *targets, void *user) {
    (void)user;
    int64_t V = logits->shape[logits->ndim - 1];
    return dt_cross_entropy(dt_reshape(logits, 2, (int64_t[]){dt_numel(logits) / V, V}),
                            dt_reshape(targets, 1, (int64_t[]){dt_numel(targets)}), -100);
}

/* Append the bytes of file `path` to t->text. */
static dt_status append_file(gpt_trial *t, const char *path, size_t *cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return dt_error(DT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    for (;;) {
        if ((size_t)t->n_text == *cap) {
            size_t nc = *cap ? *cap * 2 : 1 << 16;
            uint8_t *nb = realloc(t->text, nc);
            if (!nb) {
                fclose(f);
                return dt_error(DT_ERR_OOM, "corpus %s", path);
            }
            t->text = nb;
            *cap = nc;
        }
        size_t k = fread(t->text + t->n_text, 1, *cap - (size_t)t->n_text, f);
        if (k == 0) break;
        t->n_text += (int64_t)k;
    }
    bool bad = ferror(f);
    fclose(f);
    return bad ? dt_error(DT_ERR_IO, "cannot read %s", path) : DT_OK;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The corpus: a text file, or a directory whose regular files (not symlinks, so an alias such
 * as common-licenses/GPL -> GPL-3 counts once) are read in name order, one after another. */
static dt_status read_corpus(gpt_trial *t, const char *path) {
    struct stat sb;
    size_t cap = 0;
    if (stat(path, &sb) != 0)
        return dt_error(DT_ERR_IO,
                        "cannot find the corpus %s; hint: set hyperparameters.corpus "
                        "to a plain-text file or a directory of them",
                        path);
    if (!S_ISDIR(sb.st_mode)) return append_file(t, path, &cap);
    DIR *d = opendir(path);
    if (!d) return dt_error(DT_ERR_IO, "cannot list %s: %s", path, strerror(errno));
    char **names = NULL;
    size_t n = 0;
    dt_status st = DT_OK;
    for (struct dirent *e; st == DT_OK && (e = readdir(d));) {
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        if (e->d_name[0] == '.' || lstat(full, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        char **nn = realloc(names, (n + 1) * sizeof *names);
        if (!nn || !(nn[n] = strdup(full))) st = dt_error(DT_ERR_OOM, "corpus listing");
        if (nn) names = nn;
        if (st == DT_OK) n++;
    }
    closedir(d);
    if (n > 1) qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        if (st == DT_OK) st = append_file(t, names[i], &cap);
        free(names[i]);
    }
    free(names);
    if (st == DT_OK && t->n_text == 0)
        st = dt_error(DT_ERR_IO, "the corpus directory %s holds no regular file", path);
    return st;
}

static void *gpt_init(dt_trial_ctx *c) {
    gpt_trial *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->ctx = c;
    t->cfg = (dt_gpt_config){.vocab = 256,
                             .seq = dt_hparam_int(c, "seq", 64),
                             .d_model = dt_hparam_int(c, "d_model", 96),
                             .n_head = dt_hparam_int(c, "n_head", 4),
                             .n_layer = dt_hparam_int(c, "n_layer", 4),
                             .dropout = 0.f};
    t->stride = dt_hparam_int(c, "stride", 16);
    const char *corpus = dt_hparam_str(c, "corpus", "/usr/share/common-licenses");
    double vf = dt_hparam_double(c, "val_fraction", 0.1);
    if (t->stride < 1 || !(vf > 0 && vf < 1)) {
        dt_error(DT_ERR_CONFIG, "stride must be >= 1 and val_fraction in (0, 1)");
        free(t);
        return NULL;
    }
    if (read_corpus(t, corpus) != DT_OK) {
        free(t->text);
        free(t);
        return NULL;
    }
    t->n_train = (int64_t)((double)t->n_text * (1 - vf));
    if (t->n_train < 4 * (t->cfg.seq + 1) || t->n_text - t->n_train < 4 * (t->cfg.seq + 1)) {
        dt_error(DT_ERR_CONFIG,
                 "the corpus %s has %lld bytes: too few for sequences of %lld; "
                 "hint: use a larger text file or a smaller seq",
                 corpus, (long long)t->n_text, (long long)t->cfg.seq);
        free(t->text);
        free(t);
        return NULL;
    }

    /* embedding, n_layer blocks, head: built only on the stage that owns them */
    int nl = (int)t->cfg.n_layer + 2;
    dt_pipe_layer *layers = calloc((size_t)nl, sizeof *layers);
    json_t *ds_cfg = layers ? dt_ds_config_from_hparams(c) : NULL;
    dt_pipe_engine *p = NULL;
    if (ds_cfg) {
        layers[0] =
            (dt_pipe_layer){.type = "GPTEmbedding", .build = build_embedding, .arg = &t->cfg};
        for (int i = 1; i < nl - 1; i++)
            layers[i] = (dt_pipe_layer){.type = "GPTBlock", .build = build_block, .arg = &t->cfg};
        layers[nl - 1] = (dt_pipe_layer){.type = "GPTHead", .build = build_head, .arg = &t->cfg};
        dt_pipe_opts o = dt_pipe_defaults();
        o.num_stages = (int)dt_hparam_int(c, "num_stages", 2);
        o.partition_method = dt_hparam_str(c, "partition_method", "parameters");
        o.loss = lm_loss;
        o.world = dt_dist_comm(dt_trial_distributed(c)); /* the trial's slots */
        o.seed = dt_trial_seed(c);
        p = dt_pipe_engine_init(nl, layers, &o, ds_cfg);
    }
    json_decref(ds_cfg);
    free(layers);
    /* from here the context owns the pipeline engine */
    t->pipe = dt_wrap_pipe_engine(c, p);
    if (!t->pipe) {
        free(t->text);
        free(t);
        return NULL;
    }
    if (dt_trial_rank(c) == 0) {
        int64_t params = dt_module_num_params(dt_pipe_stage_module(t->pipe));
        dt_log(DT_LOG_INFO,
               "char_gpt_pipe: %s, %lld bytes (%lld for training); %d stages x %d "
               "data-parallel; stage 0 holds %lld parameters",
               corpus, (long long)t->n_text, (long long)t->n_train, dt_pipe_num_stages(t->pipe),
               dt_pipe_dp_size(t->pipe), (long long)params);
    }
    return t;
}

/* Only the first and the last stage are asked for loaders (inputs there, labels here); both
 * read the same micro-batches of their data-parallel shard in the same order. */
static dt_loader *make_loader(gpt_trial *t, bool train) {
    const uint8_t *bytes = train ? t->text : t->text + t->n_train;
    int64_t n = train ? t->n_train : t->n_text - t->n_train;
    dt_dataset *ds = text_dataset(bytes, n, t->cfg.seq, t->stride);
    if (!ds) return NULL;
    dt_loader_opts o = {.batch_size = dt_trial_train_micro_batch_size(t->ctx),
                        .shuffle = train,
                        .drop_last = true,
                        .seed = dt_trial_seed(t->ctx),
                        .num_workers = 0,
                        .take_dataset = true};
    return dt_loader_new(dt_trial_runtime(t->ctx), ds, &o);
}

static dt_loader *gpt_train_loader(void *self) {
    return make_loader(self, true);
}
static dt_loader *gpt_val_loader(void *self) {
    return make_loader(self, false);
}

/* One GLOBAL batch: the pipeline pulls its gradient_accumulation_steps micro-batches from the
 * iterator itself (it is NULL on a middle stage, which reads no data). */
static dt_metrics gpt_train_batch(void *self, dt_batch_iter *it, int64_t epoch, int64_t batch) {
    (void)epoch, (void)batch;
    gpt_trial *t = self;
    dt_status st;
    float loss = dt_pipe_train_batch(t->pipe, dt_batch_iter_pipe_data, it, &st);
    if (st != DT_OK) return dt_metrics_error();
    dt_metrics m = dt_metrics_scalar("loss", loss);
    dt_metrics_set(&m, "lr", dt_engine_get_lr(dt_pipe_stage_engine(t->pipe)));
    return m;
}

static dt_metrics gpt_evaluate_batch(void *self, dt_batch_iter *it, int64_t batch) {
    (void)batch;
    gpt_trial *t = self;
    dt_status st;
    float loss = dt_pipe_eval_batch(t->pipe, dt_batch_iter_pipe_data, it, &st);
    if (st != DT_OK) return dt_metrics_error();
    dt_metrics m = dt_metrics_scalar("validation_loss", loss);
    dt_metrics_set(&m, "validation_bpc", loss / log(2.0));
    return m;
}

static void gpt_free(void *self) {
    gpt_trial *t = self;
    free(t->text); /* the loaders (and their datasets over it) are gone by now */
    free(t);
}

const dt_trial_def CharGPTPipeTrial = {
    .name = "CharGPTPipeTrial",
    .init = gpt_init,
    .build_training_data_loader = gpt_train_loader,
    .build_validation_data_loader = gpt_val_loader,
    .ds_train_batch = gpt_train_batch,
    .ds_evaluate_batch = gpt_evaluate_batch,
    .free = gpt_free,
};
