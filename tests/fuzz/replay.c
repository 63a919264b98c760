/*
 * replay.c — runs a fuzz harness over files, without libFuzzer: each argument is a file or a
 * directory whose regular files (sorted by name, dotfiles skipped) are fed one by one to
 * LLVMFuzzerTestOneInput, from a buffer of exactly their size. The ctest fuzz_replay_<target>
 * replays the committed corpus this way in every build (under ASan+UBSan in build-asan).
 * Exits 1 if a file cannot be read or no file was found; a finding aborts in the harness.
 */
#include "fuzz.h"

#include <dirent.h>
#include <sys/stat.h>

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    struct stat sb;
    if (!f || fstat(fileno(f), &sb) != 0) {
        perror(path);
        if (f) fclose(f);
        return -1;
    }
    size_t n = (size_t)sb.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf || fread(buf, 1, n, f) != n) {
        fprintf(stderr, "%s: cannot read\n", path);
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    fprintf(stderr, "replay %s (%zu bytes)\n", path, n);
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

static int skip_dotfiles(const struct dirent *e) {
    return e->d_name[0] != '.';
}

int main(int argc, char **argv) {
    int files = 0;
    for (int a = 1; a < argc; a++) {
        struct stat sb;
        if (stat(argv[a], &sb) != 0) {
            perror(argv[a]);
            return 1;
        }
        if (!S_ISDIR(sb.st_mode)) {
            if (replay_file(argv[a])) return 1;
            files++;
            continue;
        }
        struct dirent **list;
        int n = scandir(argv[a], &list, skip_dotfiles, alphasort);
        if (n < 0) {
            perror(argv[a]);
            return 1;
        }
        int bad = 0;
        for (int i = 0; i < n; i++) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", argv[a], list[i]->d_name);
            if (!bad && stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) {
                bad = replay_file(p) != 0;
                files++;
            }
            free(list[i]);
        }
        free(list);
        if (bad) return 1;
    }
    printf("replayed %d file%s\n", files, files == 1 ? "" : "s");
    return files ? 0 : 1;
}
