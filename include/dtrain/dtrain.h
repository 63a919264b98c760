/* dtrain/dtrain.h — the umbrella header: everything a trial or a tool needs. */
#ifndef DTRAIN_H
#define DTRAIN_H

#include "dtrain/base.h"
#include "dtrain/tensor.h"
#include "dtrain/nn.h"
#include "dtrain/optim.h"
#include "dtrain/dist.h"
#include "dtrain/engine.h"
#include "dtrain/data.h"
#include "dtrain/trial.h"
#include "dtrain/trialio.h"

#endif
