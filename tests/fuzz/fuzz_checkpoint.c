/*
 * fuzz_checkpoint.c — checkpoint verification (dt_ckpt_open, src/trial/checkpoint.c) with any
 * metadata.json. The input becomes the metadata.json of a scratch checkpoint made once per
 * process:
 *   <dir>/outside.bin                 a file beside the checkpoint, not in it
 *   <dir>/ck/model.bin, ck/sub/opt.bin   the checkpoint's files (contents below)
 *   <dir>/ck/alias.bin -> model.bin   a symlinked file
 *   <dir>/ck/ext -> ..                a symlinked directory leading out of the checkpoint
 * A checkpoint that opens must only name files inside its directory.
 */
#include "fuzz.h"

#include "dtrain/trialio.h"

#include <limits.h>
#include <sys/stat.h>

static const char k_model[] = "model weights\n", k_opt[] = "optimizer moments\n";

static const char *fixture(char *meta, size_t n) {
    static char ck[300];
    if (!ck[0]) {
        char p[400];
        snprintf(ck, sizeof ck, "%s/ck", fz_dir());
        snprintf(p, sizeof p, "%s/sub", ck);
        if (mkdir(ck, 0755) || mkdir(p, 0755)) abort();
        snprintf(p, sizeof p, "%s/outside.bin", fz_dir());
        fz_write(p, k_model, sizeof k_model - 1);
        snprintf(p, sizeof p, "%s/model.bin", ck);
        fz_write(p, k_model, sizeof k_model - 1);
        snprintf(p, sizeof p, "%s/sub/opt.bin", ck);
        fz_write(p, k_opt, sizeof k_opt - 1);
        snprintf(p, sizeof p, "%s/alias.bin", ck);
        if (symlink("model.bin", p)) abort();
        snprintf(p, sizeof p, "%s/ext", ck);
        if (symlink("..", p)) abort();
    }
    snprintf(meta, n, "%s/metadata.json", ck);
    return ck;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_init();
    char meta[400], root[PATH_MAX], real[PATH_MAX];
    const char *dir = fixture(meta, sizeof meta);
    fz_write(meta, data, size);
    dt_ckpt *ck = dt_ckpt_open(dir);
    if (!ck) {
        FZ_ASSERT(dt_last_error()[0]);
        return 0;
    }
    FZ_ASSERT(realpath(dir, root));
    size_t rl = strlen(root);
    for (int i = 0; i < dt_ckpt_file_count(ck); i++) {
        const char *p = dt_ckpt_path(ck, dt_ckpt_file_name(ck, i));
        FZ_ASSERT(p && dt_ckpt_file_size(ck, i) >= 0 && realpath(p, real));
        FZ_ASSERT(!strncmp(real, root, rl) && real[rl] == '/');
    }
    dt_ckpt_close(ck);
    return 0;
}
