/*
 * expconf_entry.c — the entrypoint and the model directory.
 *
 * An entrypoint is "module:Symbol" (a C trial: module.c in the model directory defines `const
 * dt_trial_def Symbol`), or a command run in the model directory with the trial's environment,
 * the Core API way: a string with a space or a '/' ("python3 train.py", "./train"), any other
 * string without a ':' ("train.sh"), or a list of arguments (["python3", "train.py"], quoted
 * for /bin/sh). The model directory check is the one experiment create, train and config check
 * share: a directory of Python sources, a program that is not installed, a DeepSpeed config that
 * is missing or refused.
 */
#include "config_impl.h"
#include "dtrain/engine.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- parsing ------------------------------------------------------------------------------- */

/* s with every ' quoted for /bin/sh, in single quotes (plain words stay as they are). */
static bool sh_append(char **buf, size_t *len, const char *s) {
    bool plain = *s != 0;
    for (const char *p = s; *p && plain; p++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%",
                       *p) != NULL;
    size_t need = *len + 4 * strlen(s) + 4;
    char *b = realloc(*buf, need);
    if (!b) return false;
    *buf = b;
    if (*len) b[(*len)++] = ' ';
    if (!plain) b[(*len)++] = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'') { /* close, an escaped quote, reopen */
            memcpy(b + *len, "'\\''", 4);
            *len += 4;
        } else {
            b[(*len)++] = *p;
        }
    }
    if (!plain) b[(*len)++] = '\'';
    b[*len] = 0;
    return true;
}

/* A list entrypoint: every item a string, at least one; the command is their quoted join. */
static dt_status entry_list(vctx *v, const dt_conf_sec *root, const json_t *list) {
    dt_expconf *c = v->cfg;
    char d[64];
    if (json_array_size(list) == 0)
        return dt_conf_error(root, "entrypoint",
                             "entrypoint is an empty list; hint: give the program and its "
                             "arguments, e.g. [\"python3\", \"train.py\"]");
    char *cmd = NULL;
    size_t len = 0;
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *e = json_array_get(list, i);
        if (!json_is_string(e)) {
            free(cmd);
            return dt_conf_error_at(
                &v->conf, dt_yaml_item_pos(v->conf.doc, list, i),
                "entrypoint[%zu] must be a string (an argument of the command), "
                "got %s",
                i, dt__cfg_describe(v, e, d, sizeof d));
        }
        if (!sh_append(&cmd, &len, json_string_value(e))) {
            free(cmd);
            return OOM();
        }
    }
    c->entrypoint = cmd;
    c->entry_command = strdup(cmd);
    return c->entry_command ? DT_OK : OOM();
}

/* "module:Symbol" as dtrain names a C trial: module a file stem (letters, digits, _ - .), the
 * symbol a C identifier. */
static bool is_trial_ref(const char *s) {
    const char *colon = strchr(s, ':');
    bool ok = colon && colon > s && !strchr(colon + 1, ':');
    for (const char *p = s; ok && p < colon; p++)
        ok = *p == '_' || *p == '-' || *p == '.' || (*p >= 'a' && *p <= 'z') ||
             (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
    ok = ok && s[0] != '.' && colon[-1] != '.' && !strstr(s, "..");
    const char *sym = ok ? colon + 1 : "";
    ok = ok && ((*sym >= 'a' && *sym <= 'z') || (*sym >= 'A' && *sym <= 'Z') || *sym == '_');
    for (const char *p = sym; ok && *p; p++)
        ok = *p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
             (*p >= '0' && *p <= '9');
    return ok;
}

dt_status dt__cfg_entrypoint(vctx *v, const dt_conf_sec *root) {
    dt_expconf *c = v->cfg;
    const json_t *x = dt_conf_get(root, "entrypoint");
    if (json_is_array(x)) return entry_list(v, root, x);
    TRY(dt__cfg_get_str(root, "entrypoint", true, true,
                        "`entrypoint: model_def:MyTrial` compiles model_def.c from the model "
                        "directory and runs its `const dt_trial_def MyTrial`; a command such as "
                        "`entrypoint: python3 train.py` runs that program",
                        &c->entrypoint));
    const char *s = c->entrypoint, *colon = strchr(s, ':');
    if (strchr(s, '/') || strchr(s, ' ') || strchr(s, '\t') || !colon) {
        /* a command: run in the model directory, it uses the Core API */
        c->entry_command = strdup(s);
        return c->entry_command ? DT_OK : OOM();
    }
    if (!is_trial_ref(s)) {
        char d[64];
        return dt_conf_error(
            root, "entrypoint",
            "entrypoint must be \"<file stem>:<trial symbol>\" such as "
            "\"model_def:MyTrial\" (model_def.c defines `const dt_trial_def "
            "MyTrial`), or a command such as \"./train\" (a program using "
            "the Core API); got %s",
            dt__cfg_describe(v, json_object_get(root->obj, "entrypoint"), d, sizeof d));
    }
    if (!(c->entry_module = strndup(s, (size_t)(colon - s))) ||
        !(c->entry_symbol = strdup(colon + 1)))
        return OOM();
    return DT_OK;
}

/* ---- the model directory ------------------------------------------------------------------- */

/* "FILE:LINE:COL: " of pos in the config (a model directory error names the key it is about),
 * or "" for a config without positions. */
static const char *at(const dt_expconf *cfg, dt_yaml_pos pos, char *buf, size_t n) {
    char w[600];
    buf[0] = 0;
    if (cfg->doc) snprintf(buf, n, "%s: ", dt_yaml_where(cfg->doc, pos, w, sizeof w));
    return buf;
}

static dt_yaml_pos entry_pos(const dt_expconf *cfg) {
    return dt_yaml_value_pos(cfg->doc, cfg->json, "entrypoint");
}

static bool is_file_in(const char *dir, const char *name, bool exec) {
    char p[4096];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode) && (!exec || access(p, X_OK) == 0);
}

/* How many files in dir end with ext; the first (by readdir) into first. -1 if unreadable. */
static int count_ext(const char *dir, const char *ext, char *first, size_t n) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int k = 0;
    size_t el = strlen(ext);
    struct dirent *e;
    first[0] = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l <= el || strcmp(e->d_name + l - el, ext)) continue;
        if (!k++) snprintf(first, n, "%s", e->d_name);
    }
    closedir(d);
    return k;
}

/* A trial entrypoint needs C sources (or a Makefile); a directory of Python is named as such. */
static dt_status check_trial_sources(const dt_expconf *cfg, const char *dir) {
    char c_file[256], py_file[256], w[700];
    at(cfg, entry_pos(cfg), w, sizeof w);
    if (is_file_in(dir, "Makefile", false) || count_ext(dir, ".c", c_file, sizeof c_file) > 0)
        return DT_OK;
    if (count_ext(dir, ".py", py_file, sizeof py_file) > 0)
        return dt_error(DT_ERR_CONFIG,
                        "%smodel directory %s holds Python (%s) and no C sources: the entrypoint "
                        "\"%s\" names a Python trial class, and dtrain runs trials written in C; "
                        "hint: run the Python code as a command entrypoint (`entrypoint: python3 "
                        "%s`, reporting through the Core API: docs/core_api.md), or write the "
                        "trial in C (docs/trial.md)",
                        w, dir, py_file, cfg->entrypoint, py_file);
    return dt_error(DT_ERR_CONFIG,
                    "%smodel directory %s has no .c files and no Makefile; hint: the entrypoint "
                    "\"%s\" needs %s.c defining `const dt_trial_def %s` (docs/trial.md)",
                    w, dir, cfg->entrypoint, cfg->entry_module, cfg->entry_symbol);
}

/* The program a command entrypoint starts must exist: in the model directory for a path, on
 * PATH for a name (an interpreter such as python3); a relative path may be what the directory's
 * Makefile builds. Commands with shell syntax are left to sh. */
static dt_status check_command(const dt_expconf *cfg, const char *dir) {
    const char *cmd = cfg->entry_command;
    if (strpbrk(cmd, "&|;$`<>()\"'\\*?=")) return DT_OK;
    char prog[512], w[700];
    at(cfg, entry_pos(cfg), w, sizeof w);
    size_t n = strcspn(cmd, " \t");
    if (n == 0 || n >= sizeof prog) return DT_OK;
    memcpy(prog, cmd, n);
    prog[n] = 0;
    static const char *const builtins[] = {"cd",  "exec", "export", "source", ".",
                                           "env", "true", "exit",   NULL};
    if (dt_conf_in_list(prog, builtins)) return DT_OK;
    if (strchr(prog, '/')) {
        bool ok = prog[0] == '/' ? access(prog, X_OK) == 0 : is_file_in(dir, prog, true);
        if (ok || (prog[0] != '/' && is_file_in(dir, "Makefile", false))) return DT_OK; /* built */
        return dt_error(
            DT_ERR_CONFIG,
            "%sthe entrypoint runs %s, which is not an executable file%s%s; hint: build "
            "it or fix the path (a relative path is taken from the model directory)",
            w, prog, prog[0] == '/' ? "" : " in ", prog[0] == '/' ? "" : dir);
    }
    const char *path = getenv("PATH");
    char buf[4096];
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
        size_t l = strcspn(p, ":");
        snprintf(buf, sizeof buf, "%.*s", (int)l, p);
        if (is_file_in(l ? buf : ".", prog, true)) return DT_OK;
        p += l + (p[l] == ':');
    }
    return dt_error(
        DT_ERR_CONFIG,
        "%sthe entrypoint runs '%s', which is not installed on this host (not on PATH); "
        "hint: install it, or give the program's path",
        w, prog);
}

/* The DeepSpeed config a constant hyperparameters.deepspeed_config names: found, accepted by
 * the engine's reader, its warnings added to the experiment's. */
static dt_status check_ds_config(dt_expconf *cfg, const char *dir) {
    const dt_hparam *h = dt_expconf_hparam(cfg, "deepspeed_config");
    if (!h || h->type != DT_HP_CONST || !json_is_string(h->val)) return DT_OK;
    const char *rel = json_string_value(h->val);
    char path[4096];
    snprintf(path, sizeof path, "%s%s%s", rel[0] == '/' ? "" : dir, rel[0] == '/' ? "" : "/", rel);
    struct stat sb;
    char w[700];
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return dt_error(DT_ERR_CONFIG,
                        "%shyperparameters.deepspeed_config: cannot find %s; hint: the path is "
                        "relative to the model directory",
                        at(cfg, h->pos, w, sizeof w), path);
    json_t *j = dt_ds_config_load(path), *warnings = NULL;
    if (!j) return dt_last_status();
    const dt_hparam *o = dt_expconf_hparam(cfg, "overwrite_deepspeed_args");
    json_t *merged = o && o->type == DT_HP_CONST && json_is_object(o->val)
                         ? dt_overwrite_config(j, o->val)
                         : json_incref(j);
    json_decref(j);
    if (!merged) return dt_last_status();
    /* the data-parallel size is the slots, or a divisor of them when the trial also splits its
     * model (pipeline stages): batch sizes must multiply out for one of them */
    int slots = cfg->slots_per_trial > 0 && cfg->slots_per_trial < (1 << 20)
                    ? (int)cfg->slots_per_trial
                    : 1;
    dt_status st = dt_ds_config_check(merged, path, slots, &warnings);
    for (int dp = slots - 1; st == DT_ERR_CONFIG && dp >= 1; dp--) {
        if (slots % dp || !strstr(dt_last_error(), "batch")) continue;
        char first[2048];
        snprintf(first, sizeof first, "%s", dt_last_error());
        json_decref(warnings);
        warnings = NULL;
        st = dt_ds_config_check(merged, path, dp, &warnings);
        if (st != DT_OK) dt_error(DT_ERR_CONFIG, "%s", first); /* the slots' own message */
    }
    json_decref(merged);
    size_t i;
    json_t *wi;
    json_array_foreach(warnings, i, wi) {
        char **ws = realloc(cfg->warnings, (size_t)(cfg->n_warnings + 1) * sizeof *ws);
        if (!ws || !(ws[cfg->n_warnings] = strdup(json_string_value(wi)))) {
            if (ws) cfg->warnings = ws;
            st = st ? st : OOM();
            break;
        }
        cfg->warnings = ws;
        cfg->n_warnings++;
    }
    json_decref(warnings);
    return st;
}

dt_status dt_expconf_check_model_dir(dt_expconf *cfg, const char *model_dir) {
    struct stat sb;
    if (!cfg || !model_dir)
        return dt_error(DT_ERR_INVALID, "dt_expconf_check_model_dir: NULL argument");
    if (stat(model_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return dt_error(DT_ERR_CONFIG,
                        "model directory %s is not a directory; hint: give the directory that "
                        "holds the trial's sources",
                        model_dir);
    TRY(cfg->entry_command ? check_command(cfg, model_dir) : check_trial_sources(cfg, model_dir));
    return check_ds_config(cfg, model_dir);
}
