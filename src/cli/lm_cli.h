/* lm_cli.h — what the `dtrain lm` verbs share (lm.c's usage, lm_finetune.c's verb). */
#ifndef DT_CLI_LM_CLI_H
#define DT_CLI_LM_CLI_H

#include <stdio.h>

/* The usage of every `dtrain lm` verb. */
void dt__cli_lm_usage(FILE *f);
/* dtrain lm finetune MODEL_DIR TEXT_FILE ... (lm_finetune.c). */
int dt__cli_lm_finetune(int argc, char **argv);

#endif
