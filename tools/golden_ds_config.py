#!/usr/bin/env python3
"""golden_ds_config.py — DeepSpeed's own config code as the oracle for src/engine/ds_config.c.

Runs a table of DeepSpeed configs through DeepSpeed (PyPI `deepspeed`) and writes what it
resolves, or that it refuses the config, to tests/golden/ds_config/*.json:

  batch.json      every combination of train_batch_size / train_micro_batch_size_per_gpu /
                  gradient_accumulation_steps present or absent, with several values, for data-
                  parallel world sizes 1, 2, 3, 4 and 8, plus bad values (zero, negative,
                  fractional, wrong type) -> DeepSpeedConfig's resolved batch numbers or an error
  sections.json   fp16 / bf16 / zero_optimization / activation_checkpointing / flops_profiler
                  and the top-level scalars -> every resolved value DeepSpeedConfig keeps
  optimizer.json  "optimizer" sections -> the optimizer class DeepSpeed's engine builds and its
                  constructor arguments after defaults (DeepSpeedEngine._configure_basic_optimizer
                  with the fused CUDA classes replaced by recorders bound to their signatures)
  scheduler.json  "scheduler" sections -> DeepSpeed's LR scheduler constructed on a dummy
                  optimizer, with its arguments after defaults

The world size is mocked: DeepSpeedConfig asks deepspeed.comm for the rank and the mpu for the
data-parallel world size, so both are replaced by stubs.

A few rows carry "dtrain": {"differs": "error"|"accept", "why": ...}: there dtrain deliberately
refuses a config DeepSpeed's config code accepts (usually one DeepSpeed's engine refuses later or
silently ignores), or accepts with a warning one DeepSpeed refuses (an unknown key inside a
section). The script checks that DeepSpeed really does the opposite, so the notes stay true.

Usage (a venv with deepspeed; no GPU needed):
  /opt/torch-pypi/bin/python3 -m venv --system-site-packages /tmp/dsvenv
  DS_BUILD_OPS=0 /tmp/dsvenv/bin/pip install deepspeed
  /tmp/dsvenv/bin/python tools/golden_ds_config.py [OUT_DIR]
"""
import copy
import inspect
import itertools
import json
import logging
import os
import sys
import types

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import torch  # noqa: E402
import deepspeed  # noqa: E402
import deepspeed.runtime.config as ds_config_mod  # noqa: E402
from deepspeed.runtime.config import DeepSpeedConfig  # noqa: E402
from deepspeed.runtime.engine import DeepSpeedEngine  # noqa: E402
from deepspeed.runtime import lr_schedules  # noqa: E402
import deepspeed.ops.adam as ds_adam  # noqa: E402
import deepspeed.ops.lamb as ds_lamb  # noqa: E402
from deepspeed.utils import logger as ds_logger  # noqa: E402

ds_logger.setLevel(logging.ERROR)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "golden", "ds_config")

# ---- the mocked data-parallel world ------------------------------------------------------------

ds_config_mod.dist.get_rank = lambda *a, **k: 0


class FakeMpu:
    def __init__(self, ws):
        self.ws = ws

    def get_data_parallel_world_size(self):
        return self.ws


def ds_parse(cfg, ws):
    """DeepSpeedConfig for a copy of cfg on ws ranks; (config, None) or (None, error text)."""
    try:
        c = DeepSpeedConfig(copy.deepcopy(cfg), mpu=FakeMpu(ws))
    except Exception as e:  # DeepSpeed raises AssertionError, ValueError, ValidationError, ...
        return None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
    assert c.world_size == ws, "the mocked world size did not reach DeepSpeedConfig"
    return c, None


def offload_dev(o):
    if o is None:
        return "none"
    d = o.device
    return d.value if hasattr(d, "value") else str(d)


def resolved(c):
    z = c.zero_config
    f = c.float16_config
    a = c.activation_checkpointing_config
    p = c.flops_profiler_config
    return {
        "train_batch_size": c.train_batch_size,
        "train_micro_batch_size_per_gpu": c.train_micro_batch_size_per_gpu,
        "gradient_accumulation_steps": c.gradient_accumulation_steps,
        "gradient_clipping": c.gradient_clipping,
        "prescale_gradients": c.prescale_gradients,
        "gradient_predivide_factor": c.gradient_predivide_factor,
        "steps_per_print": c.steps_per_print,
        "wall_clock_breakdown": bool(c.wall_clock_breakdown),
        "fp16": {
            "enabled": f.enabled,
            "loss_scale": f.loss_scale,
            "initial_scale_power": f.initial_scale_power,
            "loss_scale_window": f.loss_scale_window,
            "hysteresis": f.hysteresis,
            "consecutive_hysteresis": f.consecutive_hysteresis,
            "min_loss_scale": f.min_loss_scale,
        },
        "bf16": c.bfloat16_config.enabled,
        "zero": {
            "stage": int(z.stage),
            "overlap_comm": z.overlap_comm,
            "contiguous_gradients": z.contiguous_gradients,
            "reduce_scatter": z.reduce_scatter,
            "reduce_bucket_size": int(z.reduce_bucket_size),
            "allgather_bucket_size": int(z.allgather_bucket_size),
            "offload_optimizer": offload_dev(z.offload_optimizer),
            "offload_optimizer_nvme_path":
            None if z.offload_optimizer is None or z.offload_optimizer.nvme_path is None else str(
                z.offload_optimizer.nvme_path),
            "offload_param": offload_dev(z.offload_param),
            "offload_param_nvme_path":
            None if z.offload_param is None or z.offload_param.nvme_path is None else str(z.offload_param.nvme_path),
            "param_persistence_threshold": int(z.param_persistence_threshold),
            "prefetch_bucket_size": int(z.prefetch_bucket_size),
            "max_live_parameters": int(z.max_live_parameters),
        },
        "activation_checkpointing": {
            "partition_activations": a.partition_activations,
            "cpu_checkpointing": a.cpu_checkpointing,
            "contiguous_memory_optimization": a.contiguous_memory_optimization,
            "number_checkpoints": a.number_checkpoints,
            "synchronize_checkpoint_boundary": a.synchronize_checkpoint_boundary,
            "profile": a.profile,
        },
        "flops_profiler": {
            "enabled": p.enabled,
            "profile_step": p.profile_step,
            "module_depth": p.module_depth,
            "top_modules": p.top_modules,
            "detailed": p.detailed,
            "output_file": p.output_file,
        },
    }


def check_differs(row, ok):
    d = row.get("dtrain")
    if not d:
        return
    if d["differs"] == "error" and not ok:
        raise SystemExit(f"row {row['name']}: marked 'dtrain refuses what DeepSpeed accepts' but DeepSpeed "
                         f"refuses it too: {row.get('error')}")
    if d["differs"] == "accept" and ok:
        raise SystemExit(f"row {row['name']}: marked 'dtrain accepts what DeepSpeed refuses' but DeepSpeed "
                         "accepts it")


def differs(kind, why):
    return {"differs": kind, "why": why}


# ---- batch.json ---------------------------------------------------------------------------------


def batch_rows():
    rows = []
    trains = [None, 8, 12, 16, 24, 32]
    micros = [None, 1, 2, 3, 4]
    gass = [None, 1, 2, 3]
    for ws, t, m, g in itertools.product([1, 2, 3, 4, 8], trains, micros, gass):
        cfg = {}
        if t is not None:
            cfg["train_batch_size"] = t
        if m is not None:
            cfg["train_micro_batch_size_per_gpu"] = m
        if g is not None:
            cfg["gradient_accumulation_steps"] = g
        rows.append({"name": f"t{t}_m{m}_g{g}_w{ws}", "world_size": ws, "config": cfg})
    odd = [
        ("zero_train", 1, {"train_batch_size": 0}),
        ("zero_micro", 1, {"train_micro_batch_size_per_gpu": 0}),
        ("zero_gas", 1, {"train_batch_size": 8, "gradient_accumulation_steps": 0}),
        ("neg_train", 2, {"train_batch_size": -8}),
        ("neg_micro", 1, {"train_micro_batch_size_per_gpu": -2, "gradient_accumulation_steps": 2}),
        ("neg_all", 1, {"train_batch_size": -4, "train_micro_batch_size_per_gpu": -2,
                        "gradient_accumulation_steps": 2}),
        ("real_integral", 2, {"train_batch_size": 32.0, "train_micro_batch_size_per_gpu": 4.0}),
        ("real_exponent", 4, {"train_batch_size": 1e2, "gradient_accumulation_steps": 5}),
        ("real_frac_mismatch", 1, {"train_batch_size": 12.5, "train_micro_batch_size_per_gpu": 4}),
        ("string_train", 1, {"train_batch_size": "32"}),
        ("only_gas", 2, {"gradient_accumulation_steps": 4}),
        ("none", 4, {}),
        ("train_lt_world", 8, {"train_batch_size": 4}),
        ("train_lt_micro", 1, {"train_batch_size": 2, "train_micro_batch_size_per_gpu": 4}),
        ("big", 8, {"train_batch_size": 65536, "train_micro_batch_size_per_gpu": 64}),
        ("null_micro", 2, {"train_batch_size": 16, "train_micro_batch_size_per_gpu": None}),
        ("frac_micro_only", 1, {"train_micro_batch_size_per_gpu": 2.5},
         differs("error", "DeepSpeed's config code does its batch arithmetic on whatever number it gets, "
                 "so a fractional micro-batch passes; dtrain requires integers")),
        ("bool_train", 1, {"train_batch_size": True},
         differs("error", "Python treats true as 1; dtrain requires an integer")),
    ]
    for o in odd:
        r = {"name": o[0], "world_size": o[1], "config": o[2]}
        if len(o) > 3:
            r["dtrain"] = o[3]
        rows.append(r)
    out = []
    for r in rows:
        c, err = ds_parse(r["config"], r["world_size"])
        if c is None:
            r["error"] = err
        else:
            r["expect"] = {
                "train_batch_size": c.train_batch_size,
                "train_micro_batch_size_per_gpu": c.train_micro_batch_size_per_gpu,
                "gradient_accumulation_steps": c.gradient_accumulation_steps,
            }
        check_differs(r, c is not None)
        out.append(r)
    return out


# ---- sections.json ------------------------------------------------------------------------------


def section_rows():
    T = [
        # defaults
        ("defaults", {}),
        ("defaults_w4", {}, None, 4),
        # fp16
        ("fp16_empty", {"fp16": {}}),
        ("fp16_enabled", {"fp16": {"enabled": True}}),
        ("fp16_disabled_overrides", {"fp16": {"enabled": False, "initial_scale_power": 8, "hysteresis": 3}}),
        ("fp16_overrides", {"fp16": {"enabled": True, "initial_scale_power": 12, "loss_scale_window": 500,
                                     "hysteresis": 1, "consecutive_hysteresis": True, "min_loss_scale": 4}}),
        ("fp16_static", {"fp16": {"enabled": True, "loss_scale": 128}}),
        ("fp16_static_real", {"fp16": {"enabled": True, "loss_scale": 0.5}}),
        ("fp16_static_window0", {"fp16": {"enabled": True, "loss_scale": 1024, "loss_scale_window": 0}}),
        ("fp16_loss_scale_neg", {"fp16": {"enabled": True, "loss_scale": -1}}),
        ("fp16_loss_scale_bool", {"fp16": {"enabled": True, "loss_scale": True}}),
        ("fp16_loss_scale_str", {"fp16": {"enabled": True, "loss_scale": "dynamic"}}),
        ("fp16_window0_dynamic", {"fp16": {"enabled": True, "loss_scale_window": 0}}),
        ("fp16_window_real", {"fp16": {"enabled": True, "loss_scale_window": 1e3}}),
        ("fp16_window_frac", {"fp16": {"enabled": True, "loss_scale_window": 10.5}}),
        ("fp16_min0_dynamic", {"fp16": {"enabled": True, "min_loss_scale": 0}}),
        ("fp16_min_frac", {"fp16": {"enabled": True, "min_loss_scale": 0.5}}),
        ("fp16_min_real_integral", {"fp16": {"enabled": True, "min_loss_scale": 2.0}}),
        ("fp16_min_bool", {"fp16": {"enabled": True, "min_loss_scale": True}}),
        ("fp16_power_frac", {"fp16": {"enabled": True, "initial_scale_power": 2.5}}),
        ("fp16_power_neg", {"fp16": {"enabled": True, "initial_scale_power": -2}}),
        ("fp16_enabled_int", {"fp16": {"enabled": 1}}),
        ("fp16_auto", {"fp16": {"enabled": True, "loss_scale_window": "auto", "initial_scale_power": "auto"}}),
        ("fp16_known_ignored", {"fp16": {"enabled": True, "auto_cast": False}}),
        ("fp16_master_stage0", {"fp16": {"enabled": True, "fp16_master_weights_and_grads": True}}),
        ("fp16_master_stage2", {"fp16": {"enabled": True, "fp16_master_weights_and_grads": True},
                                "zero_optimization": {"stage": 2}}),
        ("fp16_hysteresis0", {"fp16": {"enabled": True, "hysteresis": 0}}, differs(
            "error", "DeepSpeed's config accepts it, but its dynamic scaler then never lowers the scale; "
            "dtrain's loss scaler needs hysteresis >= 1")),
        ("fp16_power_huge", {"fp16": {"enabled": True, "initial_scale_power": 200}}, differs(
            "error", "2^200 is not a finite fp16/fp32 scale; dtrain refuses it when parsing")),
        ("fp16_unknown_key", {"fp16": {"enabled": True, "loss_scal": 0}}, differs(
            "accept", "DeepSpeed's pydantic sections forbid unknown keys; dtrain warns about them")),
        ("fp16_enabled_str", {"fp16": {"enabled": "yes"}}, differs(
            "error", "pydantic reads the string \"yes\" as true; dtrain wants a JSON boolean")),
        # bf16
        ("bf16_enabled", {"bf16": {"enabled": True}}),
        ("bf16_disabled", {"bf16": {"enabled": False}}),
        ("bfloat16_alias", {"bfloat16": {"enabled": True}}),
        ("bf16_wins_over_alias", {"bf16": {"enabled": False}, "bfloat16": {"enabled": True}}),
        ("bf16_null_alias", {"bf16": None, "bfloat16": {"enabled": True}}),
        ("bf16_and_fp16", {"bf16": {"enabled": True}, "fp16": {"enabled": True}}),
        ("bf16_fp16_one_disabled", {"bf16": {"enabled": True}, "fp16": {"enabled": False}}),
        ("bf16_known_ignored", {"bf16": {"enabled": True, "immediate_grad_update": True,
                                         "check_grad_overflow": False}}),
        ("bf16_master_stage0", {"bf16": {"enabled": True, "bf16_master_weights_and_grads": True}}),
        ("bf16_optstates_without_master", {"bf16": {"enabled": True, "bf16_optimizer_states": True},
                                           "zero_optimization": {"stage": 1}}),
        # zero
        ("zero_empty", {"zero_optimization": {}}),
        ("zero_stage1", {"zero_optimization": {"stage": 1}}),
        ("zero_stage2", {"zero_optimization": {"stage": 2}}),
        ("zero_stage3", {"zero_optimization": {"stage": 3}}),
        ("zero_stage3_no_overlap", {"zero_optimization": {"stage": 3, "overlap_comm": False}}),
        ("zero_stage1_overlap", {"zero_optimization": {"stage": 1, "overlap_comm": True}}),
        ("zero_stage4", {"zero_optimization": {"stage": 4}}),
        ("zero_stage_neg", {"zero_optimization": {"stage": -1}}),
        ("zero_stage_real", {"zero_optimization": {"stage": 2.0}}),
        ("zero_stage_frac", {"zero_optimization": {"stage": 1.5}}),
        ("zero_buckets", {"zero_optimization": {"stage": 2, "reduce_bucket_size": 5e7, "allgather_bucket_size": 2e8,
                                                "contiguous_gradients": False, "reduce_scatter": False}}),
        ("zero_reduce_bucket0", {"zero_optimization": {"stage": 2, "reduce_bucket_size": 0}}),
        ("zero_allgather_bucket0", {"zero_optimization": {"stage": 2, "allgather_bucket_size": 0}}),
        ("zero_bucket_frac", {"zero_optimization": {"stage": 2, "reduce_bucket_size": 1.5}}),
        ("zero_bucket_neg", {"zero_optimization": {"stage": 2, "allgather_bucket_size": -1}}),
        ("zero_stage3_keys", {"zero_optimization": {
            "stage": 3, "stage3_param_persistence_threshold": 1e4, "stage3_prefetch_bucket_size": 1e6,
            "stage3_max_live_parameters": 3e8, "stage3_max_reuse_distance": 1e8,
            "stage3_gather_16bit_weights_on_model_save": True, "sub_group_size": 1e8}}),
        ("zero_stage3_neg", {"zero_optimization": {"stage": 3, "stage3_max_live_parameters": -5}}),
        ("zero_auto", {"zero_optimization": {"stage": 3, "reduce_bucket_size": "auto",
                                             "stage3_prefetch_bucket_size": "auto",
                                             "stage3_param_persistence_threshold": "auto"}}),
        ("zero_offload_opt_cpu_s1", {"zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}}}),
        ("zero_offload_opt_cpu_s2", {"zero_optimization": {
            "stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": True, "buffer_count": 4}}}),
        ("zero_offload_opt_nvme", {"zero_optimization": {
            "stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": "/tmp/nvme", "buffer_count": 5,
                                              "pipeline_read": True}}}),
        ("zero_offload_both_s3", {"zero_optimization": {
            "stage": 3, "offload_optimizer": {"device": "cpu"},
            "offload_param": {"device": "nvme", "nvme_path": "/tmp/p", "buffer_count": 6, "buffer_size": 1e7,
                              "max_in_cpu": 1e8, "pin_memory": False}}}),
        ("zero_offload_none_s0", {"zero_optimization": {"stage": 0, "offload_optimizer": {"device": "none"}}}),
        ("zero_offload_empty_s2", {"zero_optimization": {"stage": 2, "offload_optimizer": {}}}),
        ("zero_offload_bad_device", {"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "gpu"}}}),
        ("zero_offload_param_bad_device", {"zero_optimization": {"stage": 3, "offload_param": {"device": "disk"}}}),
        ("zero_offload_ratio_s2", {"zero_optimization": {"stage": 2,
                                                         "offload_optimizer": {"device": "cpu", "ratio": 0.5}}}),
        ("zero_offload_ratio_s3", {"zero_optimization": {"stage": 3,
                                                         "offload_optimizer": {"device": "cpu", "ratio": 0.5}}}),
        ("zero_offload_bad_count", {"zero_optimization": {"stage": 3,
                                                          "offload_param": {"device": "cpu", "buffer_count": -1}}}),
        ("zero_deprecated_cpu_offload", {"zero_optimization": {"stage": 2, "cpu_offload": True}}),
        ("zero_deprecated_cpu_offload_param", {"zero_optimization": {"stage": 3, "cpu_offload_param": True}}),
        ("zero_bool_true", {"zero_optimization": True}),
        ("zero_bool_false", {"zero_optimization": False}),
        ("zero_known_ignored", {"zero_optimization": {
            "stage": 2, "allgather_partitions": True, "load_from_fp32_weights": True, "round_robin_gradients": False,
            "ignore_unused_parameters": True, "elastic_checkpoint": False, "use_multi_rank_bucket_allreduce": True,
            "zero_hpz_partition_size": 1, "zero_quantized_weights": False, "zero_quantized_gradients": False}}),
        ("zero_offload_param_s2", {"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}}),
        ("zero_offload_opt_s0", {"zero_optimization": {"stage": 0, "offload_optimizer": {"device": "cpu"}}}, differs(
            "error", "DeepSpeed's config accepts it; offloading the optimizer needs ZeRO stage 1-3 in dtrain")),
        ("zero_offload_nvme_no_path", {"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}},
         differs("error", "DeepSpeed's config accepts it and its engine fails later ('nvme_path ... cannot be "
                 "None'); dtrain refuses it when parsing")),
        ("zero_offload_opt_nvme_no_path", {"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme"}}},
         differs("error", "DeepSpeed's config accepts it and its engine fails later; dtrain refuses it when parsing")),
        ("zero_unknown_key", {"zero_optimization": {"stage": 2, "stag": 3}}, differs(
            "accept", "DeepSpeed's pydantic sections forbid unknown keys; dtrain warns about them")),
        ("zero_removed_key", {"zero_optimization": {"stage": 3, "mics_shard_size": 2}}),
        # top-level scalars
        ("clip", {"gradient_clipping": 0.5}),
        ("clip_off", {"gradient_clipping": 0}),
        ("clip_int", {"gradient_clipping": 2}),
        ("prescale", {"prescale_gradients": True, "gradient_predivide_factor": 8}),
        ("predivide_real", {"gradient_predivide_factor": 2.5}),
        ("steps_per_print", {"steps_per_print": 100}),
        ("steps_per_print_real", {"steps_per_print": 1e3}),
        ("wall_clock", {"wall_clock_breakdown": True}),
        ("flops_profiler_on", {"flops_profiler": {"enabled": True, "profile_step": 5, "module_depth": 2,
                                                  "top_modules": 3, "detailed": False, "output_file": "/tmp/f.txt"}}),
        ("flops_profiler_off", {"flops_profiler": {"enabled": False, "profile_step": 2}}),
        ("act_ckpt", {"activation_checkpointing": {"partition_activations": True, "cpu_checkpointing": True,
                                                   "contiguous_memory_optimization": True, "number_checkpoints": 4,
                                                   "synchronize_checkpoint_boundary": True, "profile": True}}),
        ("act_ckpt_empty", {"activation_checkpointing": {}}),
        ("known_ignored_top", {"communication_data_type": "fp32", "zero_allow_untested_optimizer": True,
                               "zero_force_ds_cpu_optimizer": False, "dump_state": False, "disable_allgather": False,
                               "memory_breakdown": False, "dataloader_drop_last": False,
                               "gradient_allreduce_op": "mean",
                               "tensorboard": {"enabled": False}, "wandb": {"enabled": False},
                               "csv_monitor": {"enabled": False}, "comms_logger": {"enabled": False},
                               "checkpoint": {"tag_validation": "Warn"}}),
        ("removed_amp", {"amp": {"enabled": True}}),
        ("removed_elasticity", {"elasticity": {"enabled": False}}),
        ("removed_sparse_gradients", {"sparse_gradients": False}),
        ("removed_curriculum", {"curriculum_learning": {"enabled": False}}),
        ("comm_dtype_bad", {"communication_data_type": "int8"}),
        ("allreduce_op_bad", {"gradient_allreduce_op": "max"}),
        ("allreduce_op_sum_s3", {"gradient_allreduce_op": "sum", "zero_optimization": {"stage": 3}}),
        ("allreduce_op_sum_s1", {"gradient_allreduce_op": "sum", "zero_optimization": {"stage": 1}}, differs(
            "error", "dtrain always averages gradients over the data-parallel group; summing is not supported")),
        ("unknown_top", {"train_batch_sizee": 4, "gradient_clippin": 1.0}),
        ("memory_budget_str", {"memory_budget": "2GiB"}),
    ]
    rows = []
    for t in T:
        name, extra = t[0], t[1]
        diff = t[2] if len(t) > 2 else None
        ws = t[3] if len(t) > 3 else 1
        cfg = {"train_batch_size": 8 * ws}
        cfg.update(extra)
        r = {"name": name, "world_size": ws, "config": cfg}
        if diff:
            r["dtrain"] = diff
        c, err = ds_parse(cfg, ws)
        if c is None:
            r["error"] = err
        else:
            r["expect"] = resolved(c)
        check_differs(r, c is not None)
        rows.append(r)
    return rows


# ---- optimizer.json -----------------------------------------------------------------------------


class Recorder:
    """Stands in for a fused CUDA optimizer: binds the call to the real class's signature."""
    real = None
    last = None

    def __init__(self, params, **kw):
        sig = inspect.signature(self.real.__init__)
        b = sig.bind(None, params, **kw)  # TypeError for a keyword the real class does not take
        b.apply_defaults()
        args = dict(b.arguments)
        args.pop("self", None)
        args.pop("params", None)
        if args.get("amsgrad"):
            raise RuntimeError(f"{self.real.__name__} does not support the AMSGrad variant.")
        type(self).last = (self.real.__name__, args)


class AdamRecorder(Recorder):
    real = ds_adam.FusedAdam


class LambRecorder(Recorder):
    real = ds_lamb.FusedLamb


ds_adam.FusedAdam = AdamRecorder
ds_lamb.FusedLamb = LambRecorder


def build_optimizer(cfg):
    c, err = ds_parse(cfg, 1)
    if c is None:
        return None, err
    fake = types.SimpleNamespace()
    fake.optimizer_params = lambda: c.optimizer_params
    fake.optimizer_name = lambda: c.optimizer_name
    fake.zero_use_cpu_optimizer = lambda: False
    fake.zenflow = False
    fake.bf16_optimizer_states = lambda: False
    fake.get_optimizer_configuration = types.MethodType(DeepSpeedEngine.get_optimizer_configuration, fake)
    p = torch.nn.Parameter(torch.zeros(2))
    AdamRecorder.last = LambRecorder.last = None
    try:
        opt = DeepSpeedEngine._configure_basic_optimizer(fake, [p])
    except Exception as e:
        return None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
    if isinstance(opt, Recorder):
        cls, a = type(opt).last
    else:
        cls = type(opt).__name__
        a = dict(opt.param_groups[0])
        a.pop("params", None)
        if cls in ("Adam", "AdamW"):
            a["adam_w_mode"] = cls == "AdamW"
            a["bias_correction"] = True
    out = {"name": c.optimizer_name, "class": cls}
    for k in ("lr", "eps", "weight_decay", "adam_w_mode", "bias_correction", "momentum", "dampening", "nesterov",
              "max_coeff", "min_coeff"):
        if k in a:
            v = a[k]
            out[k] = bool(v) if isinstance(v, bool) or k in ("adam_w_mode", "bias_correction", "nesterov") else v
    if "betas" in a:
        out["betas"] = list(a["betas"])
    return out, None


def optimizer_rows():
    T = [
        ("adam_defaults", {"type": "Adam"}),
        ("adam_params", {"type": "Adam", "params": {"lr": 3e-4, "betas": [0.8, 0.99], "eps": 1e-6,
                                                    "weight_decay": 0.1}}),
        ("adam_l2", {"type": "Adam", "params": {"lr": 1e-3, "weight_decay": 0.01, "adam_w_mode": False}}),
        ("adam_upper", {"type": "ADAM", "params": {"lr": 2e-3}}),
        ("adam_no_bias_correction", {"type": "adam", "params": {"bias_correction": False}}),
        ("adam_torch", {"type": "Adam", "params": {"torch_adam": True, "weight_decay": 0.05}}),
        ("adam_torch_l2", {"type": "Adam", "params": {"torch_adam": True, "adam_w_mode": False}}),
        ("adamw_defaults", {"type": "AdamW"}),
        ("adamw_params", {"type": "AdamW", "params": {"lr": 1e-4, "weight_decay": 0.01, "betas": [0.9, 0.95]}}),
        ("adamw_w_mode_false", {"type": "AdamW", "params": {"adam_w_mode": False}}),
        ("adamw_torch", {"type": "adamw", "params": {"torch_adam": True}}),
        ("adamw_amsgrad_false", {"type": "AdamW", "params": {"amsgrad": False}}),
        ("adamw_amsgrad_true", {"type": "AdamW", "params": {"amsgrad": True}}),
        ("lamb_defaults", {"type": "Lamb"}),
        ("lamb_params", {"type": "LAMB", "params": {"lr": 1e-2, "max_coeff": 5.0, "min_coeff": 0.1,
                                                    "weight_decay": 0.01, "bias_correction": False}}),
        ("sgd_defaults", {"type": "SGD"}),
        ("sgd_params", {"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4,
                                                  "dampening": 0.1}}),
        ("sgd_nesterov", {"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9, "nesterov": True}}),
        ("sgd_nesterov_no_momentum", {"type": "SGD", "params": {"nesterov": True}}),
        ("sgd_lower", {"type": "sgd"}),
        ("max_grad_norm", {"type": "Adam", "params": {"max_grad_norm": 1.0}}),
        ("unknown_type", {"type": "Adamm"}),
        ("torch_only_type", {"type": "RMSprop"}, differs(
            "error", "DeepSpeed falls back to torch.optim.<type>; dtrain has Adam, AdamW, SGD and Lamb only")),
        ("adam_unknown_param", {"type": "Adam", "params": {"lr": 1e-3, "momentm": 0.9}}, differs(
            "accept", "DeepSpeed passes every param to the optimizer's constructor, which refuses unknown ones; "
            "dtrain warns about them")),
    ]
    rows = []
    for t in T:
        r = {"name": t[0], "config": {"train_batch_size": 8, "optimizer": t[1]}}
        if len(t) > 2:
            r["dtrain"] = t[2]
        res, err = build_optimizer(r["config"])
        if res is None:
            r["error"] = err
        else:
            r["expect"] = res
        check_differs(r, res is not None)
        rows.append(r)
    return rows


# ---- scheduler.json -----------------------------------------------------------------------------


def build_scheduler(cfg):
    c, err = ds_parse(cfg, 1)
    if c is None:
        return None, err
    name = c.scheduler_name
    params = dict(c.scheduler_params or {})
    p = torch.nn.Parameter(torch.zeros(2))
    opt = torch.optim.AdamW([p], lr=c.optimizer_params["lr"])
    try:
        if hasattr(lr_schedules, name):
            cls = getattr(lr_schedules, name)
        else:
            assert hasattr(torch.optim.lr_scheduler, name), f"DeepSpeed does not recognize LR scheduler {name}"
            cls = getattr(torch.optim.lr_scheduler, name)
        sig = inspect.signature(cls.__init__)
        b = sig.bind(None, opt, **params)
        b.apply_defaults()
        cls(opt, **params)
    except Exception as e:
        return None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
    args = dict(b.arguments)
    for k in ("self", "optimizer", "last_batch_iteration", "last_epoch", "verbose"):
        args.pop(k, None)
    return {"type": name, "params": args}, None


def scheduler_rows():
    T = [
        ("warmup_defaults", {"type": "WarmupLR"}),
        ("warmup_params", {"type": "WarmupLR", "params": {"warmup_min_lr": 1e-5, "warmup_max_lr": 3e-4,
                                                          "warmup_num_steps": 50, "warmup_type": "linear"}}),
        ("warmup_bad_type", {"type": "WarmupLR", "params": {"warmup_type": "cosine"}}),
        ("warmup_zero_steps", {"type": "WarmupLR", "params": {"warmup_num_steps": 0}}),
        ("warmup_real_steps", {"type": "WarmupLR", "params": {"warmup_num_steps": 1e2}}, differs(
            "accept", "DeepSpeed's schedules want a Python int; dtrain reads 1e2 as the integer 100 as it "
            "does for every integer key")),
        ("warmup_decay", {"type": "WarmupDecayLR", "params": {"total_num_steps": 1000, "warmup_num_steps": 100,
                                                              "warmup_max_lr": 1e-3}}),
        ("warmup_decay_no_total", {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 100}}),
        ("warmup_decay_total_lt_warmup", {"type": "WarmupDecayLR", "params": {"total_num_steps": 10,
                                                                              "warmup_num_steps": 100}}),
        ("warmup_cosine", {"type": "WarmupCosineLR", "params": {"total_num_steps": 500, "warmup_min_ratio": 0.1,
                                                                "cos_min_ratio": 0.01, "warmup_num_steps": 20}}),
        ("warmup_cosine_defaults", {"type": "WarmupCosineLR", "params": {"total_num_steps": 500}}),
        ("one_cycle", {"type": "OneCycle", "params": {"cycle_min_lr": 1e-4, "cycle_max_lr": 1e-2,
                                                      "cycle_first_step_size": 100}}),
        ("one_cycle_full", {"type": "OneCycle", "params": {
            "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-2, "decay_lr_rate": 0.1, "cycle_first_step_size": 100,
            "cycle_second_step_size": 50, "cycle_first_stair_count": 4, "cycle_second_stair_count": 2,
            "decay_step_size": 10, "cycle_momentum": False, "cycle_min_mom": 0.85, "cycle_max_mom": 0.95,
            "decay_mom_rate": 0.01}}),
        ("one_cycle_no_lr", {"type": "OneCycle", "params": {"cycle_first_step_size": 100}}),
        ("one_cycle_zero_step", {"type": "OneCycle", "params": {"cycle_min_lr": 1e-4, "cycle_max_lr": 1e-2,
                                                                "cycle_first_step_size": 0}}),
        ("lr_range", {"type": "LRRangeTest", "params": {"lr_range_test_min_lr": 1e-5, "lr_range_test_step_size": 10,
                                                        "lr_range_test_step_rate": 2.0,
                                                        "lr_range_test_staircase": True}}),
        ("lr_range_defaults", {"type": "LRRangeTest"}),
        ("lr_range_zero_step", {"type": "LRRangeTest", "params": {"lr_range_test_step_size": 0}}),
        ("unknown_type", {"type": "WarmupLr"}),
        ("unknown_param", {"type": "WarmupLR", "params": {"warmup_max_lrr": 1e-3}}, differs(
            "accept", "DeepSpeed passes every param to the scheduler's constructor, which refuses unknown ones; "
            "dtrain warns about them")),
        ("torch_step_lr", {"type": "StepLR", "params": {"step_size": 10, "gamma": 0.5}}),
        ("torch_cosine", {"type": "CosineAnnealingLR", "params": {"T_max": 100, "eta_min": 1e-5}}),
        ("torch_other", {"type": "ExponentialLR", "params": {"gamma": 0.9}}, differs(
            "error", "DeepSpeed falls back to torch.optim.lr_scheduler.<type>; dtrain has DeepSpeed's five "
            "schedules plus StepLR and CosineAnnealingLR")),
    ]
    rows = []
    for t in T:
        # the optimizer's lr differs from WarmupLR's documented 0.001, so that the rows show
        # that WarmupLR warms up to the optimizer's lr when warmup_max_lr is not given
        r = {"name": t[0], "config": {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
                                      "scheduler": t[1]}}
        if len(t) > 2:
            r["dtrain"] = t[2]
        res, err = build_scheduler(r["config"])
        if res is None:
            r["error"] = err
        else:
            r["expect"] = res
        check_differs(r, res is not None)
        rows.append(r)
    return rows


def main():
    os.makedirs(OUT, exist_ok=True)
    meta = {"generator": "tools/golden_ds_config.py", "deepspeed": deepspeed.__version__,
            "torch": torch.__version__.split("+")[0]}
    counts = {}
    for name, fn in (("batch", batch_rows), ("sections", section_rows), ("optimizer", optimizer_rows),
                     ("scheduler", scheduler_rows)):
        rows = fn()
        doc = dict(meta)
        doc["rows"] = rows
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            # one row per line: small files, readable diffs
            head = json.dumps({k: v for k, v in doc.items() if k != "rows"})[:-1]
            f.write(head + ', "rows": [\n')
            f.write(",\n".join(json.dumps(r, allow_nan=False) for r in rows))
            f.write("\n]}\n")
        n_err = sum(1 for r in rows if "error" in r)
        n_diff = sum(1 for r in rows if "dtrain" in r)
        counts[name] = (len(rows), n_err, n_diff)
        print(f"{name}.json: {len(rows)} rows, {n_err} refused by DeepSpeed, {n_diff} where dtrain differs")
    return counts


if __name__ == "__main__":
    main()
