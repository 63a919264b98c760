#!/usr/bin/env python3
"""Side-by-side benchmark: dtrain against PyTorch on the same models, measured alternately in
one run (round-robin over every configuration, several rounds, best median kept per config).

    bench/side_by_side.py [--dtrain build/dtrain] [--rounds 3] [--steps 20]
                          [--torch /usr/bin/python3] [--torch /opt/torch-pypi/bin/python3]
                          [--models mlp,cnn,gpt] [--no-compile] [--avx2]

PyTorch configurations: each given interpreter, eager and torch.compile (where it works), at
1 intra-op thread, 2 threads, and 2 threads with OMP_WAIT_POLICY=PASSIVE. dtrain runs fp32
at 1 and 2 threads, and the gpt model in bf16 at 2 threads. Prints one JSON line per
measurement and a summary of the ratios against the fastest PyTorch configuration.

It first prints the CPU model, and every line names the ISA each side ran: dtrain's kernel
level and matmul path ("isa", "matmul"), PyTorch's ATen capability ("cpu_capability") and
oneDNN's ISA ("onednn_isa"). --avx2 holds every side to AVX2 (DTRAIN_ISA, ATEN_CPU_CAPABILITY,
ONEDNN_MAX_CPU_ISA, OPENBLAS_CORETYPE), to measure the AVX2 path on an AVX-512 machine.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
AVX2_ENV = {"DTRAIN_ISA": "avx2", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
            "DNNL_MAX_CPU_ISA": "AVX2", "OPENBLAS_CORETYPE": "Haswell"}


def cpu_model():
    """"model name" (family / model) from /proc/cpuinfo, and whether it has AVX-512."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                info.setdefault(k.strip(), v.strip())
    except OSError:
        return {"cpu": "unknown"}
    return {"cpu": info.get("model name", "unknown"), "family": info.get("cpu family"),
            "model": info.get("model"), "avx512f": "avx512f" in info.get("flags", "").split(),
            "cores": os.cpu_count()}


def run(cmd, env=None):
    e = dict(os.environ)
    e.update(env or {})
    try:
        out = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    if out.returncode != 0:
        return None, (out.stderr or out.stdout).strip().splitlines()[-1:] or ["failed"]
    for line in reversed(out.stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line), None
    return None, "no JSON output"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dtrain", default=os.path.join(HERE, "..", "build", "dtrain"))
    p.add_argument("--torch", action="append")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--models", default="mlp,cnn,gpt")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--avx2", action="store_true", help="hold every side to AVX2")
    a = p.parse_args()
    if a.avx2:
        os.environ.update(AVX2_ENV)
    print(json.dumps(dict(cpu_model(), forced=AVX2_ENV if a.avx2 else None)), flush=True)
    pythons = a.torch or ["/usr/bin/python3"]
    models = a.models.split(",")
    configs = []  # (key, cmd, env)
    for m in models:
        for t in (1, 2):
            configs.append(((m, "dtrain", "fp32", t, ""),
                            [a.dtrain, "bench", "train", "--model", m, "--threads", str(t),
                             "--steps", str(a.steps), "--json"], {"OMP_NUM_THREADS": str(t)}))
        if m == "gpt":
            configs.append(((m, "dtrain", "bf16", 2, ""),
                            [a.dtrain, "bench", "train", "--model", m, "--threads", "2",
                             "--dtype", "bf16", "--steps", str(a.steps), "--json"], {}))
        for py in pythons:
            for comp in ([False] if a.no_compile else [False, True]):
                for t, passive in ((1, False), (2, False), (2, True)):
                    env = {"OMP_NUM_THREADS": str(t)}
                    if passive:
                        env["OMP_WAIT_POLICY"] = "PASSIVE"
                    cmd = [py, os.path.join(HERE, "torch_bench.py"), "--model", m,
                           "--threads", str(t), "--steps", str(a.steps)]
                    if comp:
                        cmd.append("--compile")
                    configs.append(((m, py + (" compile" if comp else " eager"), "fp32", t,
                                     "passive" if passive else ""), cmd, env))
    best = {}
    broken = set()
    for r in range(a.rounds):
        for key, cmd, env in configs:
            if key in broken:
                continue
            res, err = run(cmd, env)
            if res is None:
                broken.add(key)
                print(json.dumps({"config": list(key), "error": str(err)}), flush=True)
                continue
            res["config"] = list(key)
            res["round"] = r
            print(json.dumps(res), flush=True)
            if key not in best or res["step_ms_median"] < best[key]["step_ms_median"]:
                best[key] = res
    print("summary (best median step time per configuration):")
    for m in models:
        rows = {k: v for k, v in best.items() if k[0] == m}
        torch_rows = {k: v for k, v in rows.items() if k[1] != "dtrain"}
        tk, tv = (min(torch_rows.items(), key=lambda kv: kv[1]["step_ms_median"]) if torch_rows
                  else (None, None))  # no PyTorch ran: dtrain's rows alone, without ratios
        for k, v in sorted(rows.items(), key=lambda kv: kv[1]["step_ms_median"]):
            ratio = tv["step_ms_median"] / v["step_ms_median"] if tv else None
            isa = ({"isa": v.get("isa"), "matmul": v.get("matmul"), "bf16": v.get("bf16")}
                   if k[1] == "dtrain" else
                   {"cpu_capability": v.get("cpu_capability"), "onednn_isa": v.get("onednn_isa")})
            print(json.dumps(dict({"model": m, "impl": k[1], "dtype": k[2], "threads": k[3],
                                   "variant": k[4], "step_ms": v["step_ms_median"],
                                   "speedup_vs_fastest_torch": ratio and round(ratio, 3)},
                                  **isa)))
        if tv:
            print(json.dumps({"model": m, "fastest_torch": list(tk),
                              "step_ms": tv["step_ms_median"]}))


if __name__ == "__main__":
    sys.exit(main())
