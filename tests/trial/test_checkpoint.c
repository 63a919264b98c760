/* Tests for src/trial/checkpoint.c: a round trip (tensors, JSON, bytes, a save hook's own
 * files, extra metadata), overwrite rules, every kind of corruption refused with a message
 * naming the file (flipped byte, truncation, growth, deleted file, deleted / broken / future
 * metadata.json, unsafe names, a listed file under a symlinked directory), failures while writing
 * (RLIMIT_FSIZE, a symlink, reserved names, a checkpoint appearing meanwhile, a crash) that leave
 * no temporary directory and an existing checkpoint untouched, an unwritable parent, removal and
 * listing. */
#include "dtrain/trialio.h"
#include "fixtures/files.h"
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_dir[64];

static const char *P(const char *rel) {
    return fx_path(g_dir, rel);
}

static bool msg_has(const char *needle) {
    return strstr(dt_last_error(), needle) != NULL;
}

static char *read_text(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    buf[n] = 0;
    fclose(fp);
    return buf;
}

/* A small checkpoint "<parent>/<name>" whose state.json holds {"tag": tag}. */
static dt_status make_ckpt(const char *parent, const char *name, int tag, unsigned flags) {
    dt_ckpt_writer *w = dt_ckpt_begin_ex(parent, name, flags);
    if (!w) return dt_last_status();
    unsigned char bytes[3000];
    for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (unsigned char)(i * 7 + tag);
    json_t *state = json_pack("{s:i}", "tag", tag);
    dt_status st = dt_ckpt_add_bytes(w, "model.bin", bytes, sizeof bytes);
    if (st == DT_OK) st = dt_ckpt_add_json(w, "state.json", state);
    json_decref(state);
    if (st != DT_OK) {
        dt_ckpt_abort(w);
        return st;
    }
    return dt_ckpt_commit(w, NULL);
}

/* state.json's "tag" of the checkpoint at path (verified), or -1. */
static int ckpt_tag(const char *path) {
    dt_ckpt *ck = dt_ckpt_open(path);
    if (!ck) return -1;
    json_t *s = json_load_file(dt_ckpt_path(ck, "state.json"), 0, NULL);
    int tag = s ? (int)json_integer_value(json_object_get(s, "tag")) : -1;
    json_decref(s);
    dt_ckpt_close(ck);
    return tag;
}

static void test_roundtrip(void) {
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    float f[6] = {1.5f, -2.25f, 3.f, 0.f, -0.f, 1e-3f};
    dt_tensor *a = dt_tensor_from_f32(ctx, 2, (int64_t[]){2, 3}, f);
    dt_tensor *b = dt_tensor_from_i64(ctx, 1, (int64_t[]){3}, (int64_t[]){-1, 0, 1LL << 40});
    char parent[512]; /* a copy: P() reuses its buffers; created by begin (mkdir -p) */
    snprintf(parent, sizeof parent, "%s", P("ckpts/exp1"));
    dt_ckpt_writer *w = dt_ckpt_begin(parent, "step_10");
    CHECK_MSG(w != NULL, "%s", dt_last_error());
    if (!w) {
        dt_ctx_free(ctx);
        return;
    }
    /* while it is written: a temporary directory only, nothing that looks like a checkpoint */
    CHECK(strstr(dt_ckpt_dir(w), "step_10.tmp.") != NULL && fx_exists(dt_ckpt_dir(w)));
    CHECK(!fx_exists(P("ckpts/exp1/step_10")));
    CHECK(dt_ckpt_add_tensors(w, "model.safetensors", 2, (const char *[]){"w", "idx"},
                              (dt_tensor *[]){a, b}, 1, (const char *[]){"format", "pt"}) == DT_OK);
    json_t *state = json_pack("{s:i,s:{s:I,s:I}}", "batches", 10, "rng", "seed", (json_int_t)1,
                              "counter", (json_int_t)77);
    CHECK(dt_ckpt_add_json(w, "state.json", state) == DT_OK);
    CHECK(dt_ckpt_add_bytes(w, "optim/rank0.bin", "\x01\x02\x03", 3) == DT_OK);
    CHECK(dt_ckpt_add_bytes(w, "empty.bin", NULL, 0) == DT_OK);
    /* a save hook writes its own files */
    char hook[600];
    snprintf(hook, sizeof hook, "%s/user", dt_ckpt_dir(w));
    CHECK(mkdir(hook, 0755) == 0);
    snprintf(hook, sizeof hook, "%s/user/notes.txt", dt_ckpt_dir(w));
    fx_write(hook, "my own state\n");
    char **names = NULL;
    int n = -1;
    CHECK(dt_ckpt_list(parent, &names, &n) == DT_OK && n == 0 && names && !names[0]);
    dt_ckpt_list_free(names);
    json_t *extra =
        json_pack("{s:i,s:i,s:s}", "steps_completed", 10, "world_size", 1, "uuid", "abc");
    CHECK_MSG(dt_ckpt_commit(w, extra) == DT_OK, "%s", dt_last_error());
    json_decref(extra);
    CHECK(fx_count_named(parent, ".tmp.") == 0);
    CHECK(fx_exists(P("ckpts/exp1/step_10/metadata.json")));

    dt_ckpt *ck = dt_ckpt_open(P("ckpts/exp1/step_10"));
    CHECK_MSG(ck != NULL, "%s", dt_last_error());
    if (ck) {
        CHECK(dt_ckpt_file_count(ck) == 5);
        const char *want[] = {"empty.bin", "model.safetensors", "optim/rank0.bin", "state.json",
                              "user/notes.txt"}; /* sorted walk */
        for (int i = 0; i < 5; i++) {
            CHECK_MSG(dt_ckpt_file_name(ck, i) && !strcmp(dt_ckpt_file_name(ck, i), want[i]),
                      "file %d is %s", i, dt_ckpt_file_name(ck, i));
            CHECK(dt_ckpt_file_size(ck, i) == fx_size(dt_ckpt_path(ck, want[i])));
        }
        CHECK(dt_ckpt_file_name(ck, 5) == NULL && dt_ckpt_file_size(ck, -1) == -1);
        CHECK(!strcmp(dt_ckpt_path(ck, NULL), P("ckpts/exp1/step_10")));
        CHECK(dt_ckpt_path(ck, "nope.bin") == NULL && dt_last_status() == DT_ERR_INVALID &&
              msg_has("model.safetensors"));
        const json_t *m = dt_ckpt_metadata(ck);
        CHECK(json_integer_value(json_object_get(m, "format_version")) == 1);
        CHECK(json_integer_value(json_object_get(m, "steps_completed")) == 10);
        CHECK(!strcmp(json_string_value(json_object_get(m, "uuid")), "abc"));
        /* the listed crc32c is the file's (computed here independently) */
        json_t *e = json_object_get(json_object_get(m, "files"), "optim/rank0.bin");
        CHECK(json_integer_value(json_object_get(e, "size")) == 3);
        CHECK((uint32_t)json_integer_value(json_object_get(e, "crc32c")) ==
              dt_crc32c(0, "\x01\x02\x03", 3));
        e = json_object_get(json_object_get(m, "files"), "empty.bin");
        CHECK(json_integer_value(json_object_get(e, "size")) == 0 &&
              json_integer_value(json_object_get(e, "crc32c")) == 0);
        /* the metadata's first key is format_version */
        CHECK(strstr(read_text(P("ckpts/exp1/step_10/metadata.json")), "{\n  \"format_version\""));
        /* contents */
        dt_safetensors *sf = dt_safetensors_open(dt_ckpt_path(ck, "model.safetensors"));
        CHECK(sf != NULL);
        if (sf) {
            dt_tensor *a2 = dt_safetensors_get(sf, ctx, "w");
            dt_tensor *b2 = dt_safetensors_get(sf, ctx, "idx");
            CHECK(a2 && !memcmp(a2->data, f, sizeof f));
            CHECK(b2 && ((int64_t *)b2->data)[2] == 1LL << 40);
            CHECK(!strcmp(dt_safetensors_metadata(sf, "format"), "pt"));
            dt_safetensors_close(sf);
        }
        json_t *s2 = json_load_file(dt_ckpt_path(ck, "state.json"), 0, NULL);
        CHECK(s2 && json_equal(s2, state));
        json_decref(s2);
        CHECK(!strcmp(read_text(dt_ckpt_path(ck, "user/notes.txt")), "my own state\n"));
        dt_ckpt_close(ck);
    }
    json_decref(state);
    dt_ctx_free(ctx);
}

static void test_overwrite(void) {
    char parent[512]; /* a copy: P() reuses its buffers */
    snprintf(parent, sizeof parent, "%s", P("ow"));
    CHECK(make_ckpt(parent, "c", 1, 0) == DT_OK);
    /* refused without the flag, at begin */
    CHECK(dt_ckpt_begin(parent, "c") == NULL && dt_last_status() == DT_ERR_STATE &&
          msg_has("DT_CKPT_OVERWRITE") && msg_has(P("ow/c")));
    CHECK(fx_count_named(parent, ".tmp.") == 0);
    /* replaced with it; files of the old checkpoint do not survive */
    fx_write(P("ow/c/stray.txt"), "old"); /* not listed: ignored by the reader */
    CHECK(ckpt_tag(P("ow/c")) == 1);
    CHECK(make_ckpt(parent, "c", 2, DT_CKPT_OVERWRITE) == DT_OK);
    CHECK(ckpt_tag(P("ow/c")) == 2);
    CHECK(!fx_exists(P("ow/c/stray.txt")));
    CHECK(fx_count_named(parent, ".tmp.") == 0);
    /* a checkpoint appears while one is written: commit refuses, the other stays */
    dt_ckpt_writer *w = dt_ckpt_begin(parent, "race");
    CHECK(w != NULL);
    CHECK(dt_ckpt_add_bytes(w, "x", "new", 3) == DT_OK);
    CHECK(mkdir(P("ow/race"), 0755) == 0);
    fx_write(P("ow/race/metadata.json"), "{\"format_version\": 1, \"files\": {}}");
    CHECK(dt_ckpt_commit(w, NULL) == DT_ERR_STATE);
    CHECK(fx_count_named(parent, ".tmp.") == 0);
    CHECK(fx_exists(P("ow/race/metadata.json")) && !fx_exists(P("ow/race/x")));
    /* overwrite never replaces something that is not a checkpoint */
    CHECK(mkdir(P("ow/plain"), 0755) == 0);
    fx_write(P("ow/plain/precious.txt"), "keep me");
    CHECK_MSG(make_ckpt(parent, "plain", 3, DT_CKPT_OVERWRITE) == DT_ERR_STATE &&
                  msg_has("not a checkpoint"),
              "%s", dt_last_error());
    CHECK(fx_exists(P("ow/plain/precious.txt")) && fx_count_named(parent, ".tmp.") == 0);
    /* ... also when it appears while the checkpoint is written */
    dt_ckpt_writer *w2 = dt_ckpt_begin_ex(parent, "plain2", DT_CKPT_OVERWRITE);
    CHECK(w2 != NULL);
    CHECK(mkdir(P("ow/plain2"), 0755) == 0);
    fx_write(P("ow/plain2/precious.txt"), "keep me");
    CHECK(dt_ckpt_commit(w2, NULL) == DT_ERR_STATE && msg_has("not a checkpoint"));
    CHECK(fx_exists(P("ow/plain2/precious.txt")) && fx_count_named(parent, ".tmp.") == 0);
}

/* A fresh checkpoint "corrupt/<name>" for one corruption case. */
static const char *fresh(const char *name) {
    const char *path = P(name);
    fx_rmtree(path);
    char parent[512];
    snprintf(parent, sizeof parent, "%s", path);
    *strrchr(parent, '/') = 0;
    CHECK(make_ckpt(parent, strrchr(path, '/') + 1, 5, 0) == DT_OK);
    return path;
}

static void expect_format_error(const char *path, const char *a, const char *b) {
    dt_ckpt *ck = dt_ckpt_open(path);
    CHECK(ck == NULL);
    CHECK(dt_last_status() == DT_ERR_FORMAT);
    CHECK_MSG(msg_has(a) && (!b || msg_has(b)), "message: %s", dt_last_error());
    dt_ckpt_close(ck);
}

static void rewrite_metadata(const char *path, const char *key, json_t *value) {
    char mp[600];
    snprintf(mp, sizeof mp, "%s/metadata.json", path);
    json_t *m = json_load_file(mp, 0, NULL);
    json_object_set_new(m, key, value);
    json_dump_file(m, mp, JSON_INDENT(2));
    json_decref(m);
}

static void test_corruption(void) {
    const char *p = fresh("corrupt/flip");
    CHECK(ckpt_tag(p) == 5);
    char f[600];
    snprintf(f, sizeof f, "%s/model.bin", p);
    FILE *fp = fopen(f, "r+b");
    fseek(fp, 1234, SEEK_SET);
    int c = fgetc(fp);
    fseek(fp, 1234, SEEK_SET);
    fputc(c ^ 0x10, fp);
    fclose(fp);
    expect_format_error(p, "model.bin: crc32c 0x", "metadata says 0x");
    CHECK(msg_has("corrupted"));

    p = fresh("corrupt/trunc");
    snprintf(f, sizeof f, "%s/model.bin", p);
    CHECK(truncate(f, 1000) == 0);
    expect_format_error(p, "model.bin: size 1000, metadata says 3000: the checkpoint is truncated",
                        NULL);

    p = fresh("corrupt/grow");
    snprintf(f, sizeof f, "%s/model.bin", p);
    fp = fopen(f, "ab");
    fputs("more", fp);
    fclose(fp);
    expect_format_error(p, "model.bin: size 3004, metadata says 3000", "changed");

    p = fresh("corrupt/deleted");
    snprintf(f, sizeof f, "%s/state.json", p);
    CHECK(unlink(f) == 0);
    expect_format_error(p, "state.json: listed in metadata.json but missing", "incomplete");

    p = fresh("corrupt/nometa");
    snprintf(f, sizeof f, "%s/metadata.json", p);
    CHECK(unlink(f) == 0);
    expect_format_error(p, "metadata.json: missing", "not a dtrain checkpoint");

    p = fresh("corrupt/badjson");
    snprintf(f, sizeof f, "%s/metadata.json", p);
    fx_write(f, "{\"format_version\": 1, \"files\": {\"model.bin\": ");
    expect_format_error(p, "metadata.json: invalid JSON (line", "corrupted");

    p = fresh("corrupt/array");
    snprintf(f, sizeof f, "%s/metadata.json", p);
    fx_write(f, "[1, 2]");
    expect_format_error(p, "not a JSON object", NULL);

    p = fresh("corrupt/future");
    rewrite_metadata(p, "format_version", json_integer(2));
    expect_format_error(p, "format_version 2 is newer than this dtrain reads (up to 1)",
                        "hint: load it with a newer dtrain");

    p = fresh("corrupt/zero");
    rewrite_metadata(p, "format_version", json_integer(0));
    expect_format_error(p, "format_version 0 is not supported", NULL);

    p = fresh("corrupt/noversion");
    rewrite_metadata(p, "format_version", json_string("1"));
    expect_format_error(p, "no integer \"format_version\"", NULL);

    p = fresh("corrupt/nofiles");
    rewrite_metadata(p, "files", json_array());
    expect_format_error(p, "no \"files\" object", NULL);

    p = fresh("corrupt/unsafe");
    rewrite_metadata(p, "files",
                     json_pack("{s:{s:i,s:i}}", "../../etc/passwd", "size", 1, "crc32c", 0));
    expect_format_error(p, "unsafe file name \"../../etc/passwd\"", NULL);

    p = fresh("corrupt/absolute");
    rewrite_metadata(p, "files",
                     json_pack("{s:{s:i,s:i}}", "/etc/hostname", "size", 1, "crc32c", 0));
    expect_format_error(p, "unsafe file name \"/etc/hostname\" (absolute", NULL);

    p = fresh("corrupt/entry");
    rewrite_metadata(p, "files",
                     json_pack("{s:{s:s,s:i}}", "model.bin", "size", "3000", "crc32c", 0));
    expect_format_error(p, "the entry of \"model.bin\" is malformed", NULL);

    p = fresh("corrupt/bigcrc");
    rewrite_metadata(
        p, "files",
        json_pack("{s:{s:i,s:I}}", "model.bin", "size", 3000, "crc32c", (json_int_t)1 << 33));
    expect_format_error(p, "malformed", NULL);

    /* not there at all: an I/O error, not a format error */
    CHECK(dt_ckpt_open(P("corrupt/none")) == NULL && dt_last_status() == DT_ERR_IO &&
          msg_has(P("corrupt/none")));
    fx_write(P("corrupt/afile"), "x");
    CHECK(dt_ckpt_open(P("corrupt/afile")) == NULL && dt_last_status() == DT_ERR_IO);
    CHECK(dt_ckpt_open(NULL) == NULL && dt_last_status() == DT_ERR_INVALID);
}

/* A listed file reached through a symbolic link to a directory outside the checkpoint, with
 * the right size and crc32c: refused, naming the file and the link (every component of a
 * listed name is checked, not only the last). */
static void test_symlinked_component(void) {
    const char *p = fresh("corrupt/symdir");
    CHECK(mkdir(P("corrupt/outside"), 0755) == 0 || errno == EEXIST);
    const char *text = "secret-host\n";
    fx_write(P("corrupt/outside/hostname"), text);
    char link[600];
    snprintf(link, sizeof link, "%s/ext", p);
    CHECK(symlink(P("corrupt/outside"), link) == 0);
    char mp[600];
    snprintf(mp, sizeof mp, "%s/metadata.json", p);
    json_t *m = json_load_file(mp, 0, NULL);
    json_object_set_new(json_object_get(m, "files"), "ext/hostname",
                        json_pack("{s:I,s:I}", "size", (json_int_t)strlen(text), "crc32c",
                                  (json_int_t)dt_crc32c(0, text, strlen(text))));
    CHECK(json_dump_file(m, mp, JSON_INDENT(2)) == 0);
    json_decref(m);
    expect_format_error(p,
                        "metadata.json: lists \"ext/hostname\", which is not a file inside the "
                        "checkpoint",
                        "ext is a symbolic link (component 1)");
    CHECK(msg_has("the checkpoint was modified"));
    /* a link to a directory inside the checkpoint is refused too: names are never followed */
    CHECK(unlink(link) == 0 && symlink(".", link) == 0);
    expect_format_error(p, "\"ext/hostname\", which is not a file inside", "symbolic link");
    /* the same file as a real directory verifies */
    CHECK(unlink(link) == 0 && mkdir(link, 0755) == 0);
    snprintf(link, sizeof link, "%s/ext/hostname", p);
    fx_write(link, text);
    dt_ckpt *ck = dt_ckpt_open(p);
    CHECK_MSG(ck != NULL, "%s", dt_last_error());
    const char *fp = ck ? dt_ckpt_path(ck, "ext/hostname") : NULL;
    CHECK(fp && !strcmp(fp, link));
    dt_ckpt_close(ck);
}

/* Failures while a checkpoint is written leave nothing behind and the old one untouched. */
static void test_write_failures(void) {
    char parent[512]; /* a copy: P() reuses its buffers */
    snprintf(parent, sizeof parent, "%s", P("fail"));
    CHECK(make_ckpt(parent, "c", 7, 0) == DT_OK);
    long meta_size = fx_size(P("fail/c/metadata.json"));

    /* a file size limit: the write fails with EFBIG */
    dt_ctx *ctx = dt_ctx_new(NULL, 1);
    dt_tensor *big = dt_tensor_new(ctx, DT_DTYPE_F32, 1, (int64_t[]){65536}); /* 256 KiB */
    for (int i = 0; i < 65536; i++) ((float *)big->data)[i] = (float)i;
    for (int variant = 0; variant < 2; variant++) {
        dt_ckpt_writer *w = dt_ckpt_begin_ex(parent, "c", DT_CKPT_OVERWRITE);
        CHECK(w != NULL);
        if (!w) break;
        CHECK(dt_ckpt_add_bytes(w, "small.bin", "abc", 3) == DT_OK);
        struct rlimit old;
        getrlimit(RLIMIT_FSIZE, &old);
        void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {.rlim_cur = 64 * 1024, .rlim_max = old.rlim_max};
        CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
        dt_status st;
        if (variant == 0)
            st = dt_ckpt_add_tensors(w, "model.safetensors", 1, (const char *[]){"big"}, &big, 0,
                                     NULL);
        else
            st = dt_ckpt_add_bytes(w, "model.bin", big->data, 65536 * sizeof(float));
        setrlimit(RLIMIT_FSIZE, &old);
        signal(SIGXFSZ, prev);
        CHECK(st == DT_ERR_IO);
        CHECK_MSG(msg_has("write failed") && msg_has("/c.tmp."), "%s", dt_last_error());
        CHECK(fx_count_named(parent, ".tmp.") == 0); /* removed at once */
        CHECK(dt_ckpt_add_bytes(w, "later.bin", "x", 1) == DT_ERR_STATE);
        CHECK(dt_ckpt_commit(w, NULL) == DT_ERR_STATE); /* frees w */
        CHECK(fx_count_named(parent, ".tmp.") == 0);
        CHECK(ckpt_tag(P("fail/c")) == 7 && fx_size(P("fail/c/metadata.json")) == meta_size);
    }
    dt_ctx_free(ctx);

    /* a symlink (or metadata.json) put in by a save hook: commit refuses, cleans up */
    for (int variant = 0; variant < 2; variant++) {
        dt_ckpt_writer *w = dt_ckpt_begin_ex(parent, "c", DT_CKPT_OVERWRITE);
        CHECK(dt_ckpt_add_bytes(w, "model.bin", "new", 3) == DT_OK);
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dt_ckpt_dir(w), variant ? "metadata.json" : "link");
        if (variant)
            fx_write(p, "{}");
        else
            CHECK(symlink("/etc/passwd", p) == 0);
        CHECK(dt_ckpt_commit(w, NULL) == DT_ERR_INVALID);
        CHECK_MSG(msg_has(variant ? "metadata.json is written by" : "not a regular file"), "%s",
                  dt_last_error());
        CHECK(fx_count_named(parent, ".tmp.") == 0 && ckpt_tag(P("fail/c")) == 7);
    }

    /* bad extra metadata */
    dt_ckpt_writer *w = dt_ckpt_begin_ex(parent, "c", DT_CKPT_OVERWRITE);
    json_t *bad = json_pack("{s:i}", "files", 1);
    CHECK(dt_ckpt_commit(w, bad) == DT_ERR_INVALID);
    json_decref(bad);
    CHECK(fx_count_named(parent, ".tmp.") == 0 && ckpt_tag(P("fail/c")) == 7);

    /* bad names: refused, the writer stays usable */
    CHECK(dt_ckpt_begin(parent, "a/b") == NULL && dt_last_status() == DT_ERR_INVALID);
    CHECK(dt_ckpt_begin(parent, "..") == NULL && dt_last_status() == DT_ERR_INVALID);
    CHECK(dt_ckpt_begin(parent, "") == NULL && dt_last_status() == DT_ERR_INVALID);
    CHECK(dt_ckpt_begin(parent, "x.tmp.1") == NULL && dt_last_status() == DT_ERR_INVALID);
    w = dt_ckpt_begin(parent, "names");
    CHECK(w != NULL);
    const char *bad_rel[] = {"../x", "/abs", "a//b", "a/./b", "metadata.json", "", "d/"};
    for (int i = 0; i < 7; i++)
        CHECK_MSG(dt_ckpt_add_bytes(w, bad_rel[i], "x", 1) == DT_ERR_INVALID, "%s", bad_rel[i]);
    CHECK_MSG(dt_ckpt_add_tensors(w, "t.safetensors", 1, (const char *[]){""}, &big, 0, NULL) ==
                  DT_ERR_INVALID,
              "%s", dt_last_error()); /* dt_safetensors_write's own argument check */
    CHECK(dt_ckpt_add_bytes(w, "sub/dir/ok.bin", "x", 1) == DT_OK);
    CHECK_MSG(dt_ckpt_commit(w, NULL) == DT_OK, "%s", dt_last_error());
    dt_ckpt *ck = dt_ckpt_open(P("fail/names"));
    CHECK(ck && dt_ckpt_file_count(ck) == 1 && dt_ckpt_path(ck, "sub/dir/ok.bin"));
    dt_ckpt_close(ck);

    /* abort removes the temporary directory */
    w = dt_ckpt_begin(parent, "aborted");
    CHECK(dt_ckpt_add_bytes(w, "x", "x", 1) == DT_OK);
    dt_ckpt_abort(w);
    CHECK(fx_count_named(parent, ".tmp.") == 0 && !fx_exists(P("fail/aborted")));
    dt_ckpt_abort(NULL);

    /* a crash while writing: the temporary directory stays, but nothing looks like a
     * checkpoint, and it can be removed */
    pid_t pid = fork();
    if (pid == 0) {
        dt_ckpt_writer *cw = dt_ckpt_begin_ex(parent, "c", DT_CKPT_OVERWRITE);
        dt_ckpt_add_bytes(cw, "model.bin", "half", 4);
        _exit(cw ? 0 : 1); /* no commit, no abort */
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char crashed[600];
    snprintf(crashed, sizeof crashed, "%s/c.tmp.%ld", parent, (long)pid);
    CHECK(fx_exists(crashed) && fx_count_named(parent, ".tmp.") == 1);
    CHECK(ckpt_tag(P("fail/c")) == 7);
    char **names = NULL;
    int n = 0;
    CHECK(dt_ckpt_list(parent, &names, &n) == DT_OK && n == 2);
    CHECK(n == 2 && !strcmp(names[0], "c") && !strcmp(names[1], "names"));
    dt_ckpt_list_free(names);
    CHECK(dt_ckpt_open(crashed) == NULL && dt_last_status() == DT_ERR_FORMAT);
    CHECK(dt_ckpt_remove(crashed) == DT_OK && !fx_exists(crashed));
}

static void test_unwritable_parent(void) {
    /* below a regular file */
    fx_write(P("regular"), "x");
    CHECK(dt_ckpt_begin(P("regular/ckpts"), "c") == NULL);
    CHECK(dt_last_status() == DT_ERR_IO);
    CHECK_MSG(msg_has(P("regular")) && msg_has("hint"), "%s", dt_last_error());

    /* a read-only directory (root ignores permissions: the check runs as "nobody") */
    CHECK(mkdir(P("ro"), 0555) == 0);
    chmod(g_dir, 0755);
    pid_t pid = fork();
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(10);
        dt_ckpt_writer *w = dt_ckpt_begin(P("ro"), "c");
        int bad = 0;
        if (w) bad |= 1;
        if (dt_last_status() != DT_ERR_IO) bad |= 2;
        if (!msg_has(P("ro")) || !msg_has("Permission denied") || !msg_has("hint")) bad |= 4;
        if (bad) fprintf(stderr, "child: %s\n", dt_last_error());
        w = dt_ckpt_begin(P("ro/sub"), "c"); /* the parent cannot be created either */
        if (w || dt_last_status() != DT_ERR_IO || !msg_has(P("ro/sub"))) bad |= 8;
        _exit(bad);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d",
              WEXITSTATUS(status));
    chmod(g_dir, 0700);
    CHECK(fx_count_named(P("ro"), ".tmp.") == 0);
}

static void test_remove_and_list(void) {
    char parent[512]; /* a copy: P() reuses its buffers */
    snprintf(parent, sizeof parent, "%s", P("list"));
    char **names = NULL;
    int n = -1;
    /* a missing directory has no checkpoints */
    CHECK(dt_ckpt_list(parent, &names, &n) == DT_OK && n == 0 && names && names[0] == NULL);
    dt_ckpt_list_free(names);
    const char *made[] = {"step_100", "step_2", "step_10", "best"};
    for (int i = 0; i < 4; i++) CHECK(make_ckpt(parent, made[i], i, 0) == DT_OK);
    CHECK(mkdir(P("list/junk"), 0755) == 0); /* no metadata.json */
    fx_write(P("list/junk/keep.txt"), "x");
    fx_write(P("list/file.txt"), "x");
    CHECK(mkdir(P("list/step_5.tmp.123"), 0755) == 0);
    fx_write(P("list/step_5.tmp.123/metadata.json"), "{}");
    CHECK(symlink(P("list/step_2"), P("list/alias")) == 0);
    CHECK(dt_ckpt_list(parent, &names, &n) == DT_OK && n == 4);
    const char *want[] = {"best", "step_2", "step_10", "step_100"}; /* version order */
    for (int i = 0; i < 4 && i < n; i++)
        CHECK_MSG(!strcmp(names[i], want[i]), "%d: %s", i, names[i]);
    CHECK(names[n] == NULL);
    dt_ckpt_list_free(names);

    /* removal refuses what is not a checkpoint */
    CHECK(dt_ckpt_remove(P("list/junk")) == DT_ERR_INVALID && fx_exists(P("list/junk/keep.txt")));
    CHECK(dt_ckpt_remove(P("list/file.txt")) == DT_ERR_INVALID && fx_exists(P("list/file.txt")));
    CHECK(dt_ckpt_remove(P("list/alias")) == DT_ERR_INVALID && fx_exists(P("list/step_2")));
    CHECK(dt_ckpt_remove(P("list/missing")) == DT_ERR_IO && msg_has(P("list/missing")));
    CHECK(dt_ckpt_remove(P("list/.")) == DT_ERR_INVALID);
    /* a checkpoint with a symlink inside: removed, the link's target is not */
    CHECK(symlink(P("list/junk/keep.txt"), P("list/step_10/link")) == 0);
    CHECK(dt_ckpt_remove(P("list/step_10/")) == DT_OK); /* trailing slash is fine */
    CHECK(!fx_exists(P("list/step_10")) && fx_exists(P("list/junk/keep.txt")));
    CHECK(fx_count_named(parent, ".tmp.") == 1); /* only the stray step_5.tmp.123 */
    CHECK(dt_ckpt_remove(P("list/step_5.tmp.123")) == DT_OK &&
          fx_count_named(parent, ".tmp.") == 0);
    CHECK(dt_ckpt_list(parent, &names, &n) == DT_OK && n == 3);
    dt_ckpt_list_free(names);
    /* a corrupted checkpoint can still be removed */
    fx_write(P("list/best/model.bin"), "garbage");
    CHECK(dt_ckpt_open(P("list/best")) == NULL);
    CHECK(dt_ckpt_remove(P("list/best")) == DT_OK && !fx_exists(P("list/best")));
    /* an unreadable list */
    CHECK(dt_ckpt_list(P("list/file.txt"), &names, &n) == DT_ERR_IO && names == NULL);
}

int main(void) {
    if (!fx_tmpdir(g_dir, sizeof g_dir, "ckpt")) return 1;
    TEST_RUN(test_roundtrip);
    TEST_RUN(test_overwrite);
    TEST_RUN(test_corruption);
    TEST_RUN(test_symlinked_component);
    TEST_RUN(test_write_failures);
    TEST_RUN(test_unwritable_parent);
    TEST_RUN(test_remove_and_list);
    chmod(P("ro"), 0755);
    fx_rmtree(g_dir);
    TEST_END();
}
