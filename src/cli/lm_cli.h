/* lm_cli.h — what the `dtrain lm` verbs share (lm.c's flag parsing and usage, lm_finetune.c's
 * verb). */
#ifndef DT_CLI_LM_CLI_H
#define DT_CLI_LM_CLI_H

#include <stdio.h>

/* The usage of every `dtrain lm` verb. */
void dt__cli_lm_usage(FILE *f);
/* A flag's value after argv[*i] (advanced), or NULL after printing the usage error. */
const char *dt__cli_lm_flag_value(const char *who, int argc, char **argv, int *i);
/* A whole number >= lo from a flag's text, or -1 after printing why. */
long long dt__cli_lm_flag_int(const char *who, const char *flag, const char *v, long long lo);
/* A number in [lo, hi] from a flag's text, or NAN after printing why. */
double dt__cli_lm_flag_num(const char *who, const char *flag, const char *v, double lo, double hi);
/* dtrain lm finetune MODEL_DIR TEXT_FILE ... (lm_finetune.c). */
int dt__cli_lm_finetune(int argc, char **argv);

#endif
