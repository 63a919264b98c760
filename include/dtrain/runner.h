/*
 * dtrain/runner.h — running trials from a model directory: building the user's C sources into
 * a shared object and loading the trial definition it exports.
 */
#ifndef DTRAIN_RUNNER_H
#define DTRAIN_RUNNER_H

#include "dtrain/trial.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where the dtrain headers and library are for building model directories: $DTRAIN_INCLUDE /
 * $DTRAIN_LIBDIR if set, else the install the running binary belongs to (<bin>/../include and
 * <bin>/../lib), else the build tree it was built in (recorded at configure time).
 * DT_ERR_CONFIG naming the places looked at, with a hint, if none holds both. */
DT_API dt_status dt_modeldir_toolchain(char *include_dir, size_t ni, char *lib_dir, size_t nl);

/* Build `model_dir` into a shared object whose path is written to so_path:
 *   - with a Makefile: `make -C model_dir DTRAIN_INCLUDE=... DTRAIN_LIBDIR=... <module>.so`
 *     and the object is model_dir/<module>.so;
 *   - without: every *.c of model_dir compiled with `cc -shared -fPIC -O2 -fopenmp` against
 *     the dtrain headers and library into out_dir/<module>.so.
 * The compiler's messages (file:line: ...) go to stderr as they are. DT_ERR_CONFIG when the
 * directory has no sources or the build fails (the message says which command failed). */
DT_API dt_status dt_modeldir_build(const char *model_dir, const char *module, const char *out_dir,
                                   char *so_path, size_t n);

/* dlopen so_path and find the `const dt_trial_def` named `symbol`. *handle receives the
 * dlopen handle (dlclose it when done). NULL with DT_ERR_CONFIG naming the file or symbol
 * (and listing the trial definitions the object does export, if any). */
DT_API const dt_trial_def *dt_modeldir_load(const char *so_path, const char *symbol,
                                            void **handle);

#ifdef __cplusplus
}
#endif
#endif
