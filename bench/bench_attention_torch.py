"""bench_attention_torch.py — PyTorch counterpart of bench_attention.c: eager attention written as
transformers' Llama eager path computes it (kv heads repeated with repeat_interleave, q kᵀ / sqrt(D),
causal mask, softmax, P v), forward and forward + backward, process CPU time in ms, median of 10 runs
after 2 warm-up runs. Run with /usr/bin/python3 (Debian's PyTorch) and the same OMP_NUM_THREADS."""
import os
import statistics
import time

import torch

SHAPES = [("GPT-2 124M layer (MHA)", 4, 256, 256, 12, 12, 64),
          ("Llama GQA 4, T 512", 1, 512, 512, 32, 8, 64),
          ("GQA 4, T 1024, D 128", 1, 1024, 1024, 8, 2, 128),
          ("GPT-2 decode T 1, S 512 (MHA)", 1, 1, 512, 12, 12, 64),
          ("decode T 1, S 2048, GQA 8", 1, 1, 2048, 32, 4, 64),
          ("decode T 1, S 2048, GQA 4, D 128", 1, 1, 2048, 32, 8, 128)]


def attention(q, k, v):
    B, T, Hq, D = q.shape
    S, Hkv = k.shape[1], k.shape[2]
    k = k.repeat_interleave(Hq // Hkv, dim=2)
    v = v.repeat_interleave(Hq // Hkv, dim=2)
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    att = q @ k.transpose(-1, -2) / D ** 0.5
    if T > 1:
        mask = torch.ones(T, S, dtype=torch.bool).tril(S - T)
        att = att.masked_fill(~mask, float("-inf"))
    return (att.softmax(-1) @ v).transpose(1, 2)


def run(B, T, S, Hq, Hkv, D, bwd, runs=10, warmup=2):
    times = []
    for i in range(warmup + runs):
        q = torch.rand(B, T, Hq, D, requires_grad=bwd)
        k = torch.rand(B, S, Hkv, D, requires_grad=bwd)
        v = torch.rand(B, S, Hkv, D, requires_grad=bwd)
        t0 = time.process_time()
        with torch.set_grad_enabled(bwd):
            y = attention(q, k, v)
            if bwd:
                y.backward(y.detach())
        times.append((time.process_time() - t0) * 1e3)
    return statistics.median(times[warmup:])


def main():
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    print("torch %s threads %d (CPU ms of all threads)" % (torch.__version__,
                                                           torch.get_num_threads()))
    print("%-34s %10s %10s" % ("shape", "fwd ms", "fwd+bwd ms"))
    for name, B, T, S, Hq, Hkv, D in SHAPES:
        f = run(B, T, S, Hq, Hkv, D, False)
        fb = run(B, T, S, Hq, Hkv, D, True) if T > 1 else 0.0
        print("%-34s %10.3f %10.3f" % (name, f, fb))


if __name__ == "__main__":
    main()
