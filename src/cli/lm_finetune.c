/* lm_finetune.c — `dtrain lm finetune MODEL_DIR TEXT_FILE --steps S --out OUT_DIR ...`: a thin
 * front over the trial of examples/hf_finetune (HFFinetuneTrial, compiled into this program),
 * run in this process by the trial API's local runner (dt_trainer_fit) for S batches of AdamW
 * on the text's windows. The trial writes OUT_DIR in Hugging Face format when it ends
 * (dt_lm_save); its checkpoints, metrics and the text's token cache go to a temporary
 * directory that is removed afterwards. The training losses are read back from the metrics. */
#include "args.h"
#include "cli.h"
#include "lm_cli.h"

#include "base/path.h"
#include "dtrain/lm.h"
#include "dtrain/tensor.h"
#include "dtrain/trial.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define WHO "dtrain lm finetune"

/* examples/hf_finetune/model_def.c */
extern const dt_trial_def HFFinetuneTrial;

typedef struct ft_args {
    const char *model, *text, *out, *dtype;
    long long steps, seq, batch, seed;
    double lr, weight_decay;
    bool json;
} ft_args;

/* The arguments into a: true to go on, else false with *rc, the exit code after printing
 * the usage (--help) or the usage error. */
static bool parse(int argc, char **argv, ft_args *a, int *rc) {
    static const char *const DTYPES[] = {"f32", "bf16", NULL};
    *a = (ft_args){.dtype = "f32", .batch = 4, .lr = 1e-4, .steps = 0, .seq = 0};
    const char *pos[2];
    dt_cli_opt opts[] = {
        {.name = "--steps", .integer = &a->steps, .lo = 1, .hi = INFINITY},
        {.name = "--out", .value = &a->out},
        {.name = "--lr", .number = &a->lr, .lo = 0, .hi = 10},
        {.name = "--seq", .integer = &a->seq, .lo = 2, .hi = INFINITY},
        {.name = "--batch", .integer = &a->batch, .lo = 1, .hi = INFINITY},
        {.name = "--dtype", .value = &a->dtype, .choices = DTYPES},
        {.name = "--weight-decay", .number = &a->weight_decay, .lo = 0, .hi = 10},
        {.name = "--seed", .integer = &a->seed, .lo = 0, .hi = INFINITY},
        {.name = "--json", .flag = &a->json},
    };
    if (dt_cli_parse_verb(WHO, dt__cli_lm_usage, argc, argv, opts, sizeof opts / sizeof *opts, pos,
                          2, 2, "MODEL_DIR TEXT_FILE", rc) < 0)
        return false;
    a->model = pos[0];
    a->text = pos[1];
    if (!a->steps || !a->out)
        return *rc = dt_cli_usage_error(WHO, "needs MODEL_DIR TEXT_FILE --steps S --out OUT_DIR",
                                        dt__cli_lm_usage),
               false;
    return true;
}

/* OUT_DIR must not exist, or be an empty directory. */
static bool out_is_free(const char *out) {
    struct stat sb;
    if (stat(out, &sb) != 0) return errno == ENOENT;
    DIR *d = S_ISDIR(sb.st_mode) ? opendir(out) : NULL;
    bool empty = d != NULL;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = false;
    if (d) closedir(d);
    return empty;
}

/* The inputs checked before training; the model's and text's absolute paths into model_abs,
 * text_abs. false after printing why. */
static bool check_inputs(ft_args *a, char *model_abs, char *text_abs) {
    dt_lm *m = NULL;
    struct stat sb;
    if (dt_lm_open(&m, a->model) != DT_OK) {
        fprintf(stderr, "%s: error: %s\n", WHO, dt_last_error());
        return false;
    }
    int64_t max_pos = dt_lm_get_config(m)->max_pos;
    dt_lm_free(m);
    if (!a->seq) a->seq = max_pos < 256 ? max_pos : 256;
    if (a->seq > max_pos) {
        fprintf(stderr, "%s: error: --seq %lld is longer than the model's %lld positions (%s)\n",
                WHO, a->seq, (long long)max_pos, a->model);
        return false;
    }
    if (stat(a->text, &sb) != 0 || !S_ISREG(sb.st_mode) || !realpath(a->text, text_abs)) {
        fprintf(stderr, "%s: error: cannot read the text file %s: %s\n", WHO, a->text,
                errno ? strerror(errno) : "not a regular file");
        return false;
    }
    if (!realpath(a->model, model_abs)) {
        fprintf(stderr, "%s: error: %s: %s\n", WHO, a->model, strerror(errno));
        return false;
    }
    if (!out_is_free(a->out)) {
        fprintf(stderr,
                "%s: error: --out %s exists and is not an empty directory; hint: "
                "name a new directory\n",
                WHO, a->out);
        return false;
    }
    return true;
}

/* The experiment config the trial runs under. */
static json_t *trial_config(const ft_args *a, const char *model, const char *text,
                            const char *work) {
    json_t *h =
        json_pack("{sssssssIsIsfsfsIssss}", "model_dir", model, "train_text", text, "text_cache",
                  work, "seq", (json_int_t)a->seq, "stride", (json_int_t)a->seq, "lr", a->lr,
                  "weight_decay", a->weight_decay, "global_batch_size", (json_int_t)a->batch,
                  "dtype", a->dtype, "out_dir", a->out);
    return h ? json_pack("{so}", "hyperparameters", h) : NULL;
}

/* The training losses of the metrics file: the last batch's and their mean; the validation
 * loss (the text's, after training). false when there is no training line. */
static bool read_losses(const char *path, double *last, double *mean, double *val) {
    FILE *f = fopen(path, "r");
    char line[8192];
    double sum = 0;
    long long n = 0;
    *val = NAN;
    while (f && fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        json_t *mt = json_object_get(j, "metrics");
        const char *kind = json_string_value(json_object_get(j, "kind"));
        if (kind && !strcmp(kind, "training") && json_is_number(json_object_get(mt, "loss")))
            *last = json_number_value(json_object_get(mt, "loss")), sum += *last, n++;
        if (kind && !strcmp(kind, "validation") &&
            json_is_number(json_object_get(mt, "validation_loss")))
            *val = json_number_value(json_object_get(mt, "validation_loss"));
        json_decref(j);
    }
    if (f) fclose(f);
    *mean = n ? sum / (double)n : NAN;
    return n > 0;
}

/* Train in this process; the metrics go to work/metrics.jsonl. */
static dt_status run(const ft_args *a, const char *model, const char *text, const char *work) {
    char ckpt[PATH_MAX + 64], metrics[PATH_MAX + 64];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", work);
    snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", work);
    json_t *cfg = trial_config(a, model, text, work);
    if (!cfg) return dt_error(DT_ERR_OOM, "out of memory");
    dt_fit_opts o = {.max_length = {DT_UNIT_BATCHES, a->steps},
                     .reporting_period = {DT_UNIT_BATCHES, 1},
                     .checkpoint_policy = DT_CKPT_NONE,
                     .checkpoint_dir = ckpt,
                     .metrics_out = metrics,
                     .quiet = a->json,
                     .save_trial_latest = 1};
    dt_status st = dt_trainer_fit(&HFFinetuneTrial, cfg, (uint64_t)a->seed, &o);
    json_decref(cfg);
    return st;
}

/* The result: a line for people, or (--json) a JSON object. */
static int report(const ft_args *a, const char *work) {
    char metrics[PATH_MAX + 64], weights[PATH_MAX + 32];
    double last = NAN, mean = NAN, val = NAN;
    snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", work);
    snprintf(weights, sizeof weights, "%s/model.safetensors", a->out);
    struct stat sb;
    if (!read_losses(metrics, &last, &mean, &val) || stat(weights, &sb) != 0) {
        fprintf(stderr, "%s: error: the run wrote no %s\n", WHO,
                isnan(last) ? "training loss" : weights);
        return DT_EXIT_FAILED;
    }
    const char *bf16 = strcmp(a->dtype, "bf16") ? NULL : dt_bf16_path();
    if (a->json) {
        json_t *o =
            json_pack("{sfsfsfsIsssssIsI}", "loss", last, "mean_loss", mean, "text_loss",
                      isnan(val) ? -1.0 : val, "steps", (json_int_t)a->steps, "out", a->out,
                      "dtype", a->dtype, "seq", (json_int_t)a->seq, "batch", (json_int_t)a->batch);
        if (o && bf16) json_object_set_new(o, "bf16_path", json_string(bf16));
        char *s = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
        json_decref(o);
        if (!s) return DT_EXIT_FAILED;
        printf("%s\n", s);
        free(s);
    } else {
        printf("fine-tuned %lld steps: loss %.6f (mean %.6f)%s%s; wrote %s\n", a->steps, last, mean,
               bf16 ? ", bf16 path " : "", bf16 ? bf16 : "", a->out);
    }
    return fflush(stdout) ? DT_EXIT_FAILED : DT_EXIT_OK;
}

int dt__cli_lm_finetune(int argc, char **argv) {
    ft_args a;
    int rc;
    if (!parse(argc, argv, &a, &rc)) return rc;
    char model[PATH_MAX], text[PATH_MAX], tmp[PATH_MAX], work[PATH_MAX + 32];
    if (!check_inputs(&a, model, text)) return DT_EXIT_FAILED;
    const char *tdir = getenv("TMPDIR");
    if (!realpath(tdir && *tdir ? tdir : "/tmp", tmp)) snprintf(tmp, sizeof tmp, "/tmp");
    snprintf(work, sizeof work, "%s/dtrain-finetune.XXXXXX", tmp);
    if (!mkdtemp(work)) {
        fprintf(stderr, "%s: error: cannot make a directory in %s: %s\n", WHO, tmp,
                strerror(errno));
        return DT_EXIT_FAILED;
    }
    if (run(&a, model, text, work) != DT_OK) {
        fprintf(stderr, "%s: error: fine-tuning on %s: %s\n", WHO, a.text, dt_last_error());
        rc = DT_EXIT_FAILED;
    } else {
        rc = report(&a, work);
    }
    if (dt_path_remove_tree(tmp, work + strlen(tmp) + 1) != DT_OK)
        fprintf(stderr, "%s: warning: %s\n", WHO, dt_last_error());
    return rc;
}
