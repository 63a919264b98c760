/* test_models.c — the model registry in the store (src/master/store_models.c) and the one
 * protection rule of gc.c: create, register, list and describe; duplicates, unknown names and
 * uuids, checkpoints not COMPLETED; what holds a checkpoint (a model version, an active
 * experiment's source_checkpoint_uuid or source_trial_id); GC with a policy that keeps nothing
 * leaving held checkpoints on disk; delete refused for a held checkpoint, done for a free one;
 * a store from before the registry migrated to it. */
#define _GNU_SOURCE
#include "master/gc.h"
#include "master/store_impl.h"
#include "master/store_models.h"
#include "fixtures/files.h"
#include "fixtures/store_rows.h"
#include "test.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[64];
static char g_root[300];

static bool exists(const char *name) {
    return fx_exists(fx_path(g_root, name));
}

/* A checkpoint directory g_root/name with a file, and its row at `batches` of trial t. */
static void add_ckpt(dt_store *st, int64_t t, const char *name, int batches) {
    char path[512], file[600];
    snprintf(path, sizeof path, "%s/%s", g_root, name);
    CHECK(mkdir(path, 0755) == 0);
    snprintf(file, sizeof file, "%s/metadata.json", path);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    if (f) fputs("{}\n", f), fclose(f);
    CHECK_MSG(dt_store_ckpt_insert(st, t, name, path, batches, NULL, NULL) == DT_OK, "%s",
              dt_last_error());
}

static bool err_has(const char *text) {
    return strstr(dt_last_error(), text) != NULL;
}

static int64_t new_exp(dt_store *st, json_t *searcher) {
    json_object_set_new(searcher, "metric", json_string("loss"));
    json_t *cfg = json_pack("{s:o}", "searcher", searcher);
    int64_t id = 0;
    CHECK(dt_store_exp_insert(st, cfg, "", "/m", &id) == DT_OK);
    json_decref(cfg);
    return id;
}

/* The holder text of `uuid` (static). */
static const char *held(dt_store *st, const char *uuid) {
    static char why[512];
    CHECK_MSG(dt_gc_ckpt_holder(st, uuid, why, sizeof why) == DT_OK, "%s", dt_last_error());
    return why;
}

static void registry(dt_store *st, int64_t t1) {
    int64_t id = 0, v = 0;
    CHECK(dt_store_model_create(st, "mnist-cnn", "a small one", NULL, &id) == DT_OK && id > 0);
    CHECK(dt_store_model_create(st, "mnist-cnn", "", NULL, NULL) == DT_ERR_STATE);
    CHECK(err_has("already exists") && err_has("hint:"));
    CHECK(dt_store_model_create(st, "a/b", "", NULL, NULL) == DT_ERR_INVALID && err_has("hint:"));
    CHECK(dt_store_model_create(st, "", "", NULL, NULL) == DT_ERR_INVALID);
    json_t *bad = json_pack("[i]", 3);
    CHECK(dt_store_model_create(st, "other", "", bad, NULL) == DT_ERR_INVALID);
    json_decref(bad);
    json_t *labels = json_pack("[s,s]", "vision", "small");
    CHECK(dt_store_model_create(st, "other", "", labels, NULL) == DT_OK);
    json_decref(labels);

    CHECK(dt_store_model_register(st, "nope", "c10", &v) == DT_ERR_INVALID && err_has("no model"));
    CHECK(dt_store_model_register(st, "mnist-cnn", "zzz", &v) == DT_ERR_INVALID &&
          err_has("no checkpoint") && err_has("hint:"));
    CHECK(dt_store_ckpt_set_state(st, "c50", "DELETED") == DT_OK);
    CHECK(dt_store_model_register(st, "mnist-cnn", "c50", &v) == DT_ERR_STATE &&
          err_has("not COMPLETED"));
    CHECK(dt_store_model_register(st, "mnist-cnn", "c10", &v) == DT_OK && v == 1);
    CHECK(dt_store_model_register(st, "mnist-cnn", "c20", &v) == DT_OK && v == 2);

    json_t *list = NULL, *vers = NULL, *m = NULL;
    CHECK(dt_store_model_list(st, &list) == DT_OK && json_array_size(list) == 2);
    json_t *first = json_array_get(list, 0), *second = json_array_get(list, 1);
    CHECK(!strcmp(json_string_value(json_object_get(first, "name")), "mnist-cnn"));
    CHECK(json_integer_value(json_object_get(first, "num_versions")) == 2);
    CHECK(json_array_size(json_object_get(second, "labels")) == 2);
    CHECK(dt_store_model_get(st, "nope", &m) == DT_ERR_INVALID && !m);
    CHECK(dt_store_model_get(st, "mnist-cnn", &m) == DT_OK &&
          !strcmp(json_string_value(json_object_get(m, "description")), "a small one"));
    CHECK(dt_store_model_versions(st, "nope", &vers) == DT_ERR_INVALID);
    CHECK(dt_store_model_versions(st, "mnist-cnn", &vers) == DT_OK && json_array_size(vers) == 2);
    json_t *v1 = json_array_get(vers, 0);
    CHECK(!strcmp(json_string_value(json_object_get(v1, "checkpoint_uuid")), "c10"));
    CHECK(json_integer_value(json_object_get(v1, "trial_id")) == t1);
    CHECK(json_integer_value(json_object_get(v1, "batches")) == 10);
    CHECK(!strcmp(json_string_value(json_object_get(v1, "checkpoint_state")), "COMPLETED"));
    CHECK(json_real_value(json_object_get(json_object_get(v1, "metrics"), "loss")) == 0.5);
    CHECK(json_integer_value(json_object_get(json_array_get(vers, 1), "version")) == 2);
    json_decref(list);
    json_decref(vers);
    json_decref(m);
}

static void protection(dt_store *st, int64_t exp1, int64_t t1) {
    CHECK(!strcmp(held(st, "c10"), "model mnist-cnn version 1"));
    CHECK(!strcmp(held(st, "c30"), ""));
    /* an active experiment warm-starting from c30, one from trial t1 (its latest: c40) */
    int64_t e2 = new_exp(st, json_pack("{s:s}", "source_checkpoint_uuid", "c30"));
    int64_t e3 = new_exp(st, json_pack("{s:I}", "source_trial_id", (json_int_t)t1));
    char want[128];
    snprintf(want, sizeof want, "experiment %lld (searcher.source_checkpoint_uuid)", (long long)e2);
    CHECK_MSG(!strcmp(held(st, "c30"), want), "%s", held(st, "c30"));
    snprintf(want, sizeof want, "experiment %lld (searcher.source_trial_id)", (long long)e3);
    CHECK_MSG(!strcmp(held(st, "c40"), want), "%s", held(st, "c40"));
    CHECK(!strcmp(held(st, "c20"), "model mnist-cnn version 2")); /* not t1's latest */
    CHECK(dt_store_exp_set_state(st, e2, "COMPLETED") == DT_OK);
    CHECK(!strcmp(held(st, "c30"), ""));

    /* GC keeping nothing on its own account: only the held ones stay */
    dt_gc_policy none = {0, 0, 0, true};
    CHECK_MSG(dt_gc_run(st, exp1, &none, g_root) == DT_OK, "%s", dt_last_error());
    CHECK(exists("c10") && !strcmp(fx_ckpt_state(st, "c10"), "COMPLETED"));
    CHECK(exists("c20") && !strcmp(fx_ckpt_state(st, "c20"), "COMPLETED"));
    CHECK(!exists("c30") && !strcmp(fx_ckpt_state(st, "c30"), "DELETED"));
    CHECK(exists("c40") && !strcmp(fx_ckpt_state(st, "c40"), "COMPLETED"));

    /* delete: refused for the held, done for the free */
    CHECK(dt_gc_delete_ckpt(st, "c10", g_root) == DT_ERR_STATE &&
          err_has("model mnist-cnn version 1") && err_has("hint:"));
    CHECK(exists("c10") && !strcmp(fx_ckpt_state(st, "c10"), "COMPLETED"));
    CHECK(dt_gc_delete_ckpt(st, "c40", g_root) == DT_ERR_STATE && err_has("experiment"));
    CHECK(dt_store_exp_set_state(st, e3, "CANCELED") == DT_OK);
    CHECK_MSG(dt_gc_delete_ckpt(st, "c40", g_root) == DT_OK, "%s", dt_last_error());
    CHECK(!exists("c40") && !strcmp(fx_ckpt_state(st, "c40"), "(no row)"));
    CHECK(dt_gc_delete_ckpt(st, "c30", g_root) == DT_OK); /* files already gone: the row goes */
    CHECK(!strcmp(fx_ckpt_state(st, "c30"), "(no row)"));
    CHECK(dt_gc_delete_ckpt(st, "c40", g_root) == DT_ERR_INVALID && err_has("no checkpoint"));
    /* a path outside the storage root is refused and nothing changes */
    char other[600];
    snprintf(other, sizeof other, "%s/elsewhere", g_dir);
    CHECK(dt_gc_delete_ckpt(st, "c50", other) == DT_ERR_INVALID);
    CHECK(exists("c50") && !strcmp(fx_ckpt_state(st, "c50"), "DELETED"));
}

static void test_registry_and_protection(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/store.db", g_dir);
    snprintf(g_root, sizeof g_root, "%s/storage", g_dir);
    CHECK(mkdir(g_root, 0755) == 0);
    dt_store *st = NULL;
    CHECK(dt_store_open(path, &st) == DT_OK);
    if (!st) return;
    int64_t exp1 = new_exp(st, json_object()), t1 = 0, nw = 0;
    json_t *hp = json_object();
    CHECK(dt_store_trial_insert(st, exp1, 1, hp, 1, &t1) == DT_OK);
    json_t *val = json_pack("[{s:s,s:i,s:{s:f}},{s:s,s:i,s:{s:f}}]", "kind", "validation",
                            "batches", 10, "metrics", "loss", 0.5, "kind", "validation", "batches",
                            20, "metrics", "loss", 0.25);
    CHECK(dt_store_metrics_insert(st, t1, val, &nw) == DT_OK);
    static const char *const names[] = {"c10", "c20", "c30", "c40", "c50"};
    for (int k = 0; k < 5; k++) add_ckpt(st, t1, names[k], 10 * (k + 1));
    /* c50, the latest, is marked DELETED by registry(): the warm start's latest is then c40 */
    registry(st, t1);
    protection(st, exp1, t1);
    CHECK(dt_store_check(st) == DT_OK);
    json_decref(val);
    json_decref(hp);
    dt_store_close(st);
}

/* A store at schema 4 (before the registry) with a checkpoint: migrated when opened again, its
 * checkpoint can be registered. */
static void test_migration_from_4(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/old.db", g_dir);
    dt_store *st = NULL;
    CHECK(dt__store_open_at_version(path, 4, &st) == DT_OK);
    if (!st) return;
    int64_t e = new_exp(st, json_object()), t = 0;
    json_t *hp = json_object();
    CHECK(dt_store_trial_insert(st, e, 1, hp, 1, &t) == DT_OK);
    CHECK(dt_store_ckpt_insert(st, t, "old-ck", "/nowhere/old-ck", 5, NULL, NULL) == DT_OK);
    CHECK(dt_store_model_create(st, "early", "", NULL, NULL) != DT_OK); /* no table yet */
    dt_store_close(st);
    st = NULL;
    CHECK(dt_store_open(path, &st) == DT_OK);
    if (st) {
        int64_t v = 0;
        CHECK(dt_store_model_create(st, "late", "", NULL, NULL) == DT_OK);
        CHECK(dt_store_model_register(st, "late", "old-ck", &v) == DT_OK && v == 1);
        CHECK(!strcmp(held(st, "old-ck"), "model late version 1"));
        dt_store_close(st);
    }
    json_decref(hp);
}

int main(void) {
    if (!fx_tmpdir(g_dir, sizeof g_dir, "test-models")) return 1;
    dt_log_set_level(DT_LOG_ERROR);
    TEST_RUN(test_registry_and_protection);
    TEST_RUN(test_migration_from_4);
    if (!fx_rmtree(g_dir)) fprintf(stderr, "could not remove %s\n", g_dir);
    TEST_END();
}
