#!/usr/bin/env python3
"""PyTorch counterpart of `dtrain bench train`: the same models and the same step (zero grads,
forward, cross-entropy, backward, AdamW step) on one fixed random batch; prints one JSON line
with the same keys. Run it with the interpreter whose torch you want to measure, e.g.
/usr/bin/python3 (Debian's 1.13) or a venv with the current PyPI release.

    torch_bench.py --model mlp|cnn|gpt [--batch N] [--layers L] [--hidden H] [--d-model D]
                   [--heads NH] [--seq T] [--vocab V] [--steps S] [--warmup W]
                   [--threads N] [--compile]
Set OMP_WAIT_POLICY in the environment before starting Python for the PASSIVE variant.
"""
import argparse
import json
import os
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, nh):
        super().__init__()
        self.nh = nh
        self.ln_1 = nn.LayerNorm(d)
        self.attn = nn.Module()
        self.attn.c_attn = nn.Linear(d, 3 * d)
        self.attn.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Module()
        self.mlp.c_fc = nn.Linear(d, 4 * d)
        self.mlp.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(C, dim=2)
        hd = C // self.nh
        q = q.view(B, T, self.nh, hd).transpose(1, 2)
        k = k.view(B, T, self.nh, hd).transpose(1, 2)
        v = v.view(B, T, self.nh, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.attn.c_proj(y)
        x = x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh"))
        return x


class GPT(nn.Module):
    def __init__(self, vocab, seq, d, nh, layers):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.h = nn.ModuleList([Block(d, nh) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.h:
            x = b(x)
        return self.lm_head(self.ln_f(x))


def build(a):
    if a.model == "mlp":
        layers, prev = [], 784
        for _ in range(a.layers):
            layers += [nn.Linear(prev, a.hidden), nn.ReLU()]
            prev = a.hidden
        layers.append(nn.Linear(prev, 10))
        return nn.Sequential(*layers)
    if a.model == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
    return GPT(a.vocab, a.seq, a.d_model, a.heads, a.layers)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True, choices=["mlp", "cnn", "gpt"])
    p.add_argument("--batch", type=int)
    p.add_argument("--layers", type=int)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--compile", action="store_true")
    a = p.parse_args()
    gpt = a.model == "gpt"
    a.batch = a.batch or (8 if gpt else 128)
    a.layers = a.layers or (4 if gpt else 2)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    net = build(a)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(7)
    if gpt:
        x = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
        y = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
    else:
        shape = (a.batch, 1, 28, 28) if a.model == "cnn" else (a.batch, 784)
        x = torch.randn(*shape, generator=g)
        y = torch.randint(0, 10, (a.batch,), generator=g)
    fwd = net
    if a.compile:
        fwd = torch.compile(net)

    def step():
        opt.zero_grad(set_to_none=True)
        out = fwd(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    times = []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        loss = step()
        t1 = time.perf_counter()
        if i >= a.warmup:
            times.append((t1 - t0) * 1e3)
    med = statistics.median(times)
    n = a.batch * a.seq if gpt else a.batch
    res = {
        "model": a.model, "impl": "torch " + torch.__version__ + (" compile" if a.compile else " eager"),
        "dtype": "fp32", "threads": a.threads, "batch": a.batch,
        "params": sum(p.numel() for p in net.parameters()),
        "step_ms_median": round(med, 3), "step_ms_min": round(min(times), 3),
        ("tokens_per_s" if gpt else "samples_per_s"): round(n / (med / 1e3), 1),
        "final_loss": round(float(loss.detach()), 6),
    }
    res["cpu_capability"] = cpu_capability()
    res["onednn_isa"] = onednn_isa()
    print(json.dumps(res))


def cpu_capability():
    """The kernel level ATen dispatches to (ATEN_CPU_CAPABILITY caps it)."""
    get = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    if get:
        return get()
    for line in torch.__config__.show().splitlines():  # 1.x: "CPU capability usage: AVX2"
        if "CPU capability usage:" in line:
            return line.split(":", 1)[1].strip()
    return "unknown"


def onednn_isa():
    """The ISA oneDNN reports for a small convolution (ONEDNN_MAX_CPU_ISA caps it): its verbose
    line is written to the C-level stdout, caught here in a temporary file."""
    import tempfile
    fd = sys.stdout.fileno()
    sys.stdout.flush()
    saved = os.dup(fd)
    try:
        with tempfile.TemporaryFile() as tf:
            os.dup2(tf.fileno(), fd)
            try:
                with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                    torch.nn.functional.conv2d(torch.randn(1, 8, 8, 8), torch.randn(8, 8, 3, 3))
            finally:
                sys.stdout.flush()
                os.dup2(saved, fd)
            tf.seek(0)
            text = tf.read().decode(errors="replace")
    except Exception as e:  # an old or odd build: say so rather than fail the benchmark
        return "unknown (%s)" % e
    finally:
        os.close(saved)
    for line in text.splitlines():
        if ",isa:" in line:
            return line.split(",isa:", 1)[1].strip()
    return "unknown"


if __name__ == "__main__":
    sys.exit(main())
