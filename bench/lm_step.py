#!/usr/bin/env python3
"""lm_step.py — dtrain against PyTorch + transformers on a Hugging Face GPT-2 124M-shaped model
(random weights): an AdamW fine-tuning step (B 4, T 256, fp32) and greedy generation of 128
tokens with the KV cache, each in its own process with 2 threads, with its peak RSS.

    /opt/lm-venv/bin/python bench/lm_step.py --build build [--iters 10] [--threads 2]
    /opt/lm-venv/bin/python bench/lm_step.py --generate-only --baseline-build OLD_BUILD

--baseline-build times generation with another build's libdtrain.so too (before / after a
change, in the same run).

Needs torch and transformers (the venv of tools/lm_fixtures/make_model_fixtures.py); compiles
bench/lm_step.c against BUILD's libdtrain.so. The model directory (about 500 MB) is made once
under --work. Prints one JSON line per measurement and a summary line, each with the CPU.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def make_model(d):
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return
    import torch
    import transformers as tf
    torch.manual_seed(0)
    model = tf.GPT2LMHeadModel(tf.GPT2Config())  # 124M: 12 x 768, 12 heads, 1024 positions
    model.save_pretrained(d, safe_serialization=True)


def torch_step(d, batch, seq, iters, compiled):
    import torch
    import torch.nn.functional as F
    import transformers as tf
    model = tf.GPT2LMHeadModel.from_pretrained(d, dtype=torch.float32)
    model.train()
    model.config.use_cache = False
    V = model.config.vocab_size
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, V, (batch, seq), generator=g)
    y = torch.randint(0, V, (batch * seq,), generator=g)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    fwd = torch.compile(model) if compiled else model

    def step():
        opt.zero_grad(set_to_none=True)
        logits = fwd(input_ids=x).logits
        loss = F.cross_entropy(logits.view(-1, V), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(3 if compiled else 2):
        step()
    times = []
    cpu0 = time.process_time()
    for _ in range(iters):
        t0 = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    cpu = (time.process_time() - cpu0) / iters
    return {"impl": "torch.compile" if compiled else "torch-eager", "what": "step",
            "batch": batch, "seq": seq, "step_ms": round(med * 1e3, 1),
            "cpu_s_per_step": round(cpu, 2),
            "tokens_per_s": round(batch * seq / med), "loss": round(loss, 4),
            "peak_rss_mb": peak_rss_mb(), "torch": torch.__version__,
            "transformers": tf.__version__}


def torch_generate(d, prompt_len, n):
    import torch
    import transformers as tf
    model = tf.GPT2LMHeadModel.from_pretrained(d, dtype=torch.float32).eval()
    prompt = torch.tensor([[(i * 7919 + 13) % 50000 for i in range(prompt_len)]])
    kw = dict(do_sample=False, pad_token_id=0, attention_mask=torch.ones_like(prompt))
    with torch.no_grad():
        model.generate(prompt, max_new_tokens=8, min_new_tokens=8, **kw)
        t0, c0 = time.perf_counter(), time.process_time()
        out = model.generate(prompt, max_new_tokens=n, min_new_tokens=n, **kw)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    new = out.shape[1] - prompt_len
    return {"impl": "transformers", "what": "generate", "prompt": prompt_len, "new_tokens": new,
            "seconds": round(dt, 3), "cpu_s": round(cpu, 3), "tokens_per_s": round(new / dt, 1),
            "peak_rss_mb": peak_rss_mb()}


def child(args):
    """One measurement in this process (its own peak RSS)."""
    import torch
    torch.set_num_threads(args.threads)
    if args.child == "generate":
        r = torch_generate(args.model, args.prompt, args.new_tokens)
    else:
        r = torch_step(args.model, args.batch, args.seq, args.iters, args.child == "compile")
    print(json.dumps(r))


def run(cmd, env):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"cmd": " ".join(cmd[:3]), "error": (p.stderr or p.stdout).strip()[-400:]}
    return json.loads(lines[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default="/tmp/dtrain-lm-bench")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--prompt", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--generate-only", action="store_true",
                    help="only the generation measurements")
    ap.add_argument("--baseline-build",
                    help="also time generation with this build's libdtrain.so (the 'before')")
    ap.add_argument("--child", choices=["eager", "compile", "generate"])
    ap.add_argument("--model")
    args = ap.parse_args()
    if args.child:
        return child(args)

    model = os.path.join(args.work, "gpt2-124m")
    os.makedirs(model, exist_ok=True)
    make_model(model)
    exe = os.path.join(args.work, "lm_step")
    build = os.path.abspath(args.build)
    def compile_against(lib_dir, out):
        subprocess.run(["gcc", "-O2", "-I" + os.path.join(ROOT, "include"),
                        os.path.join(HERE, "lm_step.c"), "-L" + lib_dir, "-ldtrain",
                        "-Wl,-rpath," + lib_dir, "-lm", "-o", out], check=True)
    compile_against(build, exe)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    cpu = cpu_model()
    t = str(args.threads)
    me = [sys.executable, os.path.abspath(__file__), "--model", model, "--threads", t,
          "--batch", str(args.batch), "--seq", str(args.seq), "--iters", str(args.iters),
          "--prompt", str(args.prompt), "--new-tokens", str(args.new_tokens), "--child"]
    results = []
    if not args.generate_only:
        results += [
            run([exe, "step", model, str(args.batch), str(args.seq), str(args.iters), t], env),
            run(me + ["eager"], env)]
        if not args.no_compile:
            results.append(run(me + ["compile"], env))
    gen = [str(args.prompt), str(args.new_tokens), t]
    if args.baseline_build:
        base = os.path.join(args.work, "lm_step_baseline")
        compile_against(os.path.abspath(args.baseline_build), base)
        r = run([base, "generate", model] + gen, env)
        r["impl"] = "dtrain-baseline"
        results.append(r)
    results += [run([exe, "generate", model] + gen, env), run(me + ["generate"], env)]
    for r in results:
        r.update(cpu=cpu, threads=args.threads)
        print(json.dumps(r), flush=True)
    by = {(r.get("impl"), r.get("what")): r for r in results if "error" not in r}
    d, e, c = (by.get((k, "step")) for k in ("dtrain", "torch-eager", "torch.compile"))
    dg, tg = by.get(("dtrain", "generate")), by.get(("transformers", "generate"))
    summary = {"summary": "lm_step", "cpu": cpu, "threads": args.threads}
    if d and e:
        summary["step_speedup_vs_eager"] = round(e["step_ms"] / d["step_ms"], 2)
        summary["rss_ratio_vs_eager"] = round(d["peak_rss_mb"] / e["peak_rss_mb"], 2)
    if d and c:
        summary["step_speedup_vs_compile"] = round(c["step_ms"] / d["step_ms"], 2)
        summary["rss_ratio_vs_compile"] = round(d["peak_rss_mb"] / c["peak_rss_mb"], 2)
    if d and e:
        summary["step_cpu_ratio_vs_eager"] = round(e["cpu_s_per_step"] / d["cpu_s_per_step"], 2)
    if dg and tg:
        summary["generate_speedup"] = round(dg["tokens_per_s"] / tg["tokens_per_s"], 2)
        summary["generate_cpu_ratio"] = round(tg["cpu_s"] / dg["cpu_s"], 2)
    bg = by.get(("dtrain-baseline", "generate"))
    if bg and tg:
        summary["baseline_generate_speedup"] = round(bg["tokens_per_s"] / tg["tokens_per_s"], 2)
    summary["load_average"] = os.getloadavg()
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
