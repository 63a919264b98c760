/* text_bytes.c — the bytes of a text corpus for a byte-level dataset (dt_dataset_text without a
 * tokenizer): one file, or a directory's regular files one after another in name order
 * (symlinks skipped, so an alias of another file in the directory counts once). */
#include "lm_tok_impl.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Append the bytes of file `path` to b. */
static dt_status append_file(dt__tbuf *b, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return dt_error(DT_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    char chunk[1 << 16];
    size_t got;
    dt_status st = DT_OK;
    while (!st && (got = fread(chunk, 1, sizeof chunk, f)) > 0) st = dt__tbuf_put(b, chunk, got);
    if (!st && ferror(f)) st = dt_error(DT_ERR_IO, "%s: read error: %s", path, strerror(errno));
    fclose(f);
    return st;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The regular files of directory `dir`, sorted, in *names (*n of them). */
static dt_status list_dir(const char *dir, char ***names, size_t *n) {
    DIR *d = opendir(dir);
    if (!d) return dt_error(DT_ERR_IO, "%s: cannot list: %s", dir, strerror(errno));
    dt_status st = DT_OK;
    for (struct dirent *e; !st && (e = readdir(d));) {
        char full[4096];
        struct stat sb;
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || lstat(full, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        char **grown = realloc(*names, (*n + 1) * sizeof **names);
        if (grown) *names = grown;
        if (!grown || !(grown[*n] = strdup(full)))
            st = dt_error(DT_ERR_OOM, "%s: out of memory listing it", dir);
        else
            (*n)++;
    }
    closedir(d);
    if (*n > 1) qsort(*names, *n, sizeof **names, by_name);
    return st;
}

dt_status dt__text_bytes(const char *path, char **out, size_t *n_out) {
    struct stat sb;
    dt__tbuf b = {0};
    dt_status st = DT_OK;
    if (stat(path, &sb) != 0)
        return dt_error(DT_ERR_IO,
                        "%s: cannot read: %s; hint: give a plain-text file or a directory of "
                        "them",
                        path, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) {
        st = append_file(&b, path);
    } else {
        char **names = NULL;
        size_t n = 0;
        st = list_dir(path, &names, &n);
        for (size_t i = 0; i < n; i++) {
            if (!st) st = append_file(&b, names[i]);
            free(names[i]);
        }
        free(names);
        if (!st && b.n == 0)
            st = dt_error(DT_ERR_IO, "%s: the directory holds no regular file with text", path);
    }
    if (st) {
        free(b.p);
        return st;
    }
    *out = b.p;
    *n_out = b.n;
    return DT_OK;
}
