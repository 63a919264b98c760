#!/usr/bin/python3
"""make_goldens.py — PyTorch reference data for the parity tests in tests/golden/.

Run from anywhere with an interpreter that has torch and numpy (Debian's /usr/bin/python3 has
torch 1.13; any later PyTorch works too):

    /usr/bin/python3 tools/make_goldens.py            # writes tests/golden/data/
    /usr/bin/python3 tools/make_goldens.py rope swiglu  # only these ops' files

Everything is written in the safetensors format by a small encoder below (an 8-byte
little-endian header length, a JSON header, raw little-endian bytes), so the `safetensors`
package is not needed. The C tests read the files with dt_safetensors_open and never need
PyTorch. See docs/parity.md for what is compared and with which tolerance.

Files:
  format.safetensors       known values in every dtype (F32, BF16, F16, I32, I64), a 0-dim
                           and an empty tensor: the cross-language check of the format.
  ops/<op>.safetensors     one file per op of include/dtrain/tensor.h (named as the function
                           without "dt_"). Metadata "cases" lists the cases; for case c:
                             c.in<i>    inputs (f32, or i64/i32 ids and targets)
                             c.out<k>   outputs (split has several)
                             c.w<k>     fixed random output weights: loss = sum_k sum(out_k*w_k)
                             c.grad<i>  d loss / d in<i> for every float input
                           and metadata c.n_in, c.n_out, c.desc plus the op's parameters
                           (c.dim, c.keepdim, c.eps, c.stride, ...). "c.tr" = "0,1" means those
                           inputs are stored untransposed and the op gets in<i>.transpose(-1,-2)
                           (a strided operand); their grads are w.r.t. the stored tensor.
                           dropout stores only inputs, w and p: its mask comes from another RNG,
                           so the C test checks statistics instead of values.
  models/<m>.safetensors   mlp, cnn, gpt: init.<param>, data.x / data.y (one distinct batch per
                           step, stacked on a leading dim of 10), losses (10), final.<param>
                           after 10 AdamW steps (lr 1e-3, betas (0.9, 0.999), eps 1e-8,
                           weight_decay 0.01).

References are computed in float64 from float32 inputs and stored as float32, so a golden value
carries no float32 rounding of PyTorch's own: the tolerance in the C tests measures our error
alone. Inputs come from numpy's legacy RandomState (its streams never change between numpy
versions), seeded per op and case from a CRC of their names, so adding a case changes no other.
"""
import json
import os
import sys
import zlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "data")
GENERATOR = "tools/make_goldens.py (torch %s)" % torch.__version__
REF = torch.float64

# ---------------------------------------------------------------------------------------------
# safetensors writer


def _st_dtype(t):
    return {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16",
            torch.int32: "I32", torch.int64: "I64"}[t.dtype]


def _raw_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: reinterpret the bits
        return t.view(torch.int16).numpy().astype("<i2").tobytes()
    a = t.numpy()
    return a.astype(a.dtype.newbyteorder("<")).tobytes()


def save_safetensors(path, tensors, metadata):
    """tensors: list of (name, torch.Tensor) kept in order; metadata: dict str -> str."""
    header, blobs, pos = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, t in tensors:
        assert name not in header, name
        b = _raw_bytes(t)
        header[name] = {"dtype": _st_dtype(t), "shape": list(t.shape),
                        "data_offsets": [pos, pos + len(b)]}
        blobs.append(b)
        pos += len(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)  # data buffer 8-byte aligned
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as fp:
        fp.write(len(h).to_bytes(8, "little"))
        fp.write(h)
        for b in blobs:
            fp.write(b)
    os.replace(tmp, path)
    return 8 + len(h) + pos


# ---------------------------------------------------------------------------------------------
# inputs


def rng_for(*names):
    return np.random.RandomState(zlib.crc32("/".join(names).encode()) & 0x7FFFFFFF)


def randn(rng, *shape, std=1.0):
    return np.asarray(rng.standard_normal(shape) * std).astype(np.float32)


def uniform(rng, lo, hi, *shape):
    return np.asarray(rng.uniform(lo, hi, shape)).astype(np.float32)


def away_from_zero(rng, *shape):
    """|x| in [0.5, 2], random sign (for divisors)."""
    sign = np.where(np.asarray(rng.rand(*shape)) < 0.5, -1, 1)
    return np.asarray(uniform(rng, 0.5, 2.0, *shape) * sign).astype(np.float32)


def ids(rng, hi, *shape, dtype=np.int64):
    return rng.randint(0, hi, size=shape).astype(dtype)


# ---------------------------------------------------------------------------------------------
# op cases: each is (case name, inputs, params, fn(list of torch inputs) -> tensor or list)


def case(name, inputs, fn, desc, tr=(), **params):
    return dict(name=name, inputs=inputs, fn=fn, desc=desc, tr=tuple(tr), params=params)


def cases_matmul(r):
    mm = lambda x: torch.matmul(x[0], x[1])
    return [
        case("2d", [randn(r, 5, 7), randn(r, 7, 6)], mm, "(5,7)@(7,6)"),
        case("batched", [randn(r, 3, 5, 7), randn(r, 3, 7, 4)], mm, "(3,5,7)@(3,7,4)"),
        case("b2d", [randn(r, 2, 3, 5, 7), randn(r, 7, 4)], mm, "(2,3,5,7)@(7,4): b is 2-D"),
        case("bcast", [randn(r, 2, 1, 5, 7), randn(r, 3, 7, 4)], mm,
             "(2,1,5,7)@(3,7,4): batch dims broadcast"),
        case("strided", [randn(r, 3, 7, 5), randn(r, 7, 4)], mm,
             "a is a transposed (3,7,5) view", tr=[0]),
        case("big", [randn(r, 37, 70), randn(r, 70, 19)], mm, "(37,70)@(70,19)"),
    ]


def cases_matmul_t(r):
    def mt(ta, tb):
        return lambda x: torch.matmul(x[0].transpose(-1, -2) if ta else x[0],
                                      x[1].transpose(-1, -2) if tb else x[1])
    return [
        case("ta", [randn(r, 2, 7, 5), randn(r, 2, 7, 4)], mt(1, 0), "aᵀ b batched",
             ta=1, tb=0),
        case("tb", [randn(r, 5, 7), randn(r, 6, 7)], mt(0, 1), "a bᵀ", ta=0, tb=1),
        case("tatb", [randn(r, 3, 7, 5), randn(r, 4, 7)], mt(1, 1), "aᵀ bᵀ, b 2-D", ta=1, tb=1),
        case("none", [randn(r, 2, 5, 7), randn(r, 2, 7, 3)], mt(0, 0), "plain", ta=0, tb=0),
    ]


def cases_linear(r):
    return [
        case("bias", [randn(r, 2, 3, 8), randn(r, 5, 8), randn(r, 5)],
             lambda x: F.linear(x[0], x[1], x[2]), "(2,3,8)·(5,8)ᵀ + b"),
        case("nobias", [randn(r, 6, 8), randn(r, 4, 8)], lambda x: F.linear(x[0], x[1]),
             "(6,8)·(4,8)ᵀ, b NULL"),
        case("wide", [randn(r, 9, 40), randn(r, 33, 40), randn(r, 33)],
             lambda x: F.linear(x[0], x[1], x[2]), "(9,40)·(33,40)ᵀ + b"),
    ]


def binary_cases(r, fn, divisor=False):
    b = away_from_zero if divisor else randn
    return [
        case("same", [randn(r, 3, 4), b(r, 3, 4)], fn, "(3,4) op (3,4)"),
        case("row", [randn(r, 2, 3, 4), b(r, 4)], fn, "(2,3,4) op (4)"),
        case("both", [randn(r, 2, 1, 4), b(r, 3, 1)], fn, "(2,1,4) op (3,1): both broadcast"),
        case("left", [randn(r, 1, 5), b(r, 3, 5)], fn, "(1,5) op (3,5)"),
        case("scalar", [randn(r, 2, 3), b(r)], fn, "(2,3) op 0-dim"),
        case("strided", [randn(r, 4, 3), b(r, 3, 4)], fn, "a transposed (4,3) view", tr=[0]),
    ]


def unary_input(r):
    x = randn(r, 4, 33, std=2.0)
    x[0, :4] = [8.0, -8.0, 20.0, -20.0]  # saturation
    return x


def cases_softmax_like(r, f):
    return [
        case("last", [randn(r, 3, 5, 7, std=3.0)], lambda x: f(x[0], -1), "dim -1", dim=-1),
        case("dim1", [randn(r, 3, 5, 7, std=3.0)], lambda x: f(x[0], 1), "dim 1", dim=1),
        case("dim0", [randn(r, 4, 6)], lambda x: f(x[0], 0), "dim 0 of 2-D", dim=0),
        case("large", [randn(r, 2, 9, std=40.0)], lambda x: f(x[0], -1),
             "logits of size 40: stability", dim=-1),
    ]


def layer_norm_ref(x, w, b, eps):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def rms_norm_ref(x, w, eps):
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y * w if w is not None else y


def attention_ref(qkv, nh):
    B, T, C3 = qkv.shape
    C = C3 // 3
    hd = C // nh
    q, k, v = qkv.split(C, dim=-1)
    q = q.reshape(B, T, nh, hd).transpose(1, 2)  # (B, NH, T, HD)
    k = k.reshape(B, T, nh, hd).transpose(1, 2)
    v = v.reshape(B, T, nh, hd).transpose(1, 2)
    att = q @ k.transpose(-1, -2) / (hd ** 0.5)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    att = att.masked_fill(~mask, float("-inf")).softmax(-1)
    return (att @ v).transpose(1, 2).reshape(B, T, C)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope_ref(x, pos0, theta):
    """HF Llama's rotary embedding written out, x (B, T, H, D), positions pos0.. pos0+T-1."""
    B, T, H, D = x.shape
    inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=REF) / D))
    pos = torch.arange(pos0, pos0 + T, dtype=REF)
    freqs = torch.outer(pos, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, D)
    cos, sin = emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]
    return x * cos + rotate_half(x) * sin


def gqa_attention_ref(q, k, v, causal):
    """q (B, T, Hq, D), k, v (B, S, Hkv, D): kv heads repeated for their Hq/Hkv query heads;
    causal: query t at position S - T + t sees keys 0 .. S - T + t."""
    B, T, Hq, D = q.shape
    S, Hkv = k.shape[1], k.shape[2]
    k = k.repeat_interleave(Hq // Hkv, dim=2)
    v = v.repeat_interleave(Hq // Hkv, dim=2)
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))  # (B, H, T or S, D)
    att = q @ k.transpose(-1, -2) / (D ** 0.5)
    if causal:
        mask = torch.ones(T, S, dtype=torch.bool).tril(S - T)
        att = att.masked_fill(~mask, float("-inf"))
    return (att.softmax(-1) @ v).transpose(1, 2)


def op_cases(op, r):
    """The cases of `op` (seeded generator r)."""
    if op == "matmul":
        return cases_matmul(r)
    if op == "matmul_t":
        return cases_matmul_t(r)
    if op == "linear":
        return cases_linear(r)
    if op in ("add", "sub", "mul", "div"):
        f = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[op]
        return binary_cases(r, lambda x: f(x[0], x[1]), divisor=(op == "div"))
    if op == "scale":
        return [case("neg", [randn(r, 4, 5)], lambda x: x[0] * -2.5, "x * -2.5", s=-2.5),
                case("small", [randn(r, 2, 3, 4)], lambda x: x[0] * 0.125, "x * 0.125", s=0.125)]
    if op == "add_scalar":
        return [case("three", [randn(r, 7)], lambda x: x[0] + 3.0, "x + 3", s=3.0),
                case("neg", [randn(r, 2, 5)], lambda x: x[0] - 0.75, "x - 0.75", s=-0.75)]
    unary = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
             "silu": F.silu, "tanh": torch.tanh, "sigmoid": torch.sigmoid}
    if op in unary:
        f = unary[op]
        return [case("plain", [unary_input(r)], lambda x: f(x[0]), "(4,33), some saturating"),
                case("strided", [randn(r, 6, 5)], lambda x: f(x[0]), "transposed view", tr=[0])]
    if op == "softmax":
        return cases_softmax_like(r, torch.softmax)
    if op == "log_softmax":
        return cases_softmax_like(r, torch.log_softmax)
    if op == "layer_norm":
        def affine(r, shape, c):
            return [randn(r, *shape, std=2.0) + 1.0, 1.0 + randn(r, c, std=0.3),
                    randn(r, c, std=0.3)]
        return [
            case("affine", affine(r, (4, 6, 32), 32),
                 lambda x: layer_norm_ref(x[0], x[1], x[2], 1e-5), "(4,6,32) w, b", eps=1e-5),
            case("plain", [randn(r, 5, 16, std=3.0)],
                 lambda x: layer_norm_ref(x[0], None, None, 1e-5), "(5,16) no w, b", eps=1e-5),
            case("eps", affine(r, (3, 7), 7),
                 lambda x: layer_norm_ref(x[0], x[1], x[2], 1e-2), "(3,7) eps 1e-2", eps=1e-2),
        ]
    if op == "rms_norm":
        return [
            case("weight", [randn(r, 4, 5, 16), 1.0 + randn(r, 16, std=0.3)],
                 lambda x: rms_norm_ref(x[0], x[1], 1e-6), "(4,5,16) with w", eps=1e-6),
            case("plain", [randn(r, 6, 8, std=0.5)], lambda x: rms_norm_ref(x[0], None, 1e-5),
                 "(6,8) w NULL", eps=1e-5),
        ]
    if op == "embedding":
        i1 = ids(r, 10, 3, 5)
        i1[0, :3] = 7  # repeated ids accumulate gradients
        return [
            case("i64", [i1, randn(r, 10, 8)], lambda x: F.embedding(x[0], x[1]),
                 "ids (3,5) i64 with repeats into (10,8)"),
            case("i32", [ids(r, 6, 9, dtype=np.int32), randn(r, 6, 4)],
                 lambda x: F.embedding(x[0].long(), x[1]), "ids (9) i32 into (6,4)"),
        ]
    if op == "dropout":
        return [case("p25", [np.ones((64, 64), np.float32)], None, "stats only", p=0.25),
                case("p50", [randn(r, 32, 48)], None, "stats only", p=0.5)]
    if op == "conv2d":
        def conv(s, p, bias=True):
            if bias:
                return lambda x: F.conv2d(x[0], x[1], x[2], stride=s, padding=p)
            return lambda x: F.conv2d(x[0], x[1], None, stride=s, padding=p)
        return [
            case("s1p0", [randn(r, 2, 3, 7, 7), randn(r, 4, 3, 3, 3), randn(r, 4)], conv(1, 0),
                 "3x3 stride 1 pad 0", stride=1, padding=0),
            case("s2p1", [randn(r, 2, 3, 9, 9), randn(r, 5, 3, 3, 3), randn(r, 5)], conv(2, 1),
                 "3x3 stride 2 pad 1", stride=2, padding=1),
            case("nobias", [randn(r, 1, 2, 6, 5), randn(r, 3, 2, 3, 3)], conv(1, 1, False),
                 "3x3 pad 1 no bias, non-square", stride=1, padding=1),
            case("k1", [randn(r, 2, 4, 5, 5), randn(r, 6, 4, 1, 1), randn(r, 6)], conv(1, 0),
                 "1x1", stride=1, padding=0),
            case("k5", [randn(r, 1, 2, 8, 8), randn(r, 3, 2, 5, 5), randn(r, 3)], conv(1, 2),
                 "5x5 pad 2", stride=1, padding=2),
            case("cnn1", [uniform(r, 0, 1, 2, 1, 28, 28), randn(r, 32, 1, 3, 3, std=0.3),
                          randn(r, 32, std=0.1)], conv(1, 1),
                 "the CNN's first layer on 2 images", stride=1, padding=1),
        ]
    if op in ("max_pool2d", "avg_pool2d"):
        f = F.max_pool2d if op == "max_pool2d" else F.avg_pool2d
        extra = {} if op == "max_pool2d" else {"count_include_pad": 1}
        return [
            case("k2s2", [randn(r, 2, 3, 8, 8)], lambda x: f(x[0], 2, 2, 0), "k2 s2",
                 kernel=2, stride=2, padding=0, **extra),
            case("k3s2p1", [randn(r, 1, 2, 7, 9)], lambda x: f(x[0], 3, 2, 1),
                 "k3 s2 p1 (padding counts in avg: PyTorch's count_include_pad)",
                 kernel=3, stride=2, padding=1, **extra),
            case("k3s1", [randn(r, 2, 2, 6, 6)], lambda x: f(x[0], 3, 1, 0), "k3 s1 overlapping",
                 kernel=3, stride=1, padding=0, **extra),
            case("odd", [randn(r, 1, 3, 7, 7)], lambda x: f(x[0], 2, 2, 0),
                 "k2 s2 on 7x7 (last row/col dropped)", kernel=2, stride=2, padding=0, **extra),
        ]
    if op == "reshape":
        return [
            case("infer", [randn(r, 2, 3, 4)], lambda x: x[0].reshape(4, -1), "(2,3,4)->(4,-1)",
                 shape="4,-1"),
            case("split_dim", [randn(r, 6, 4)], lambda x: x[0].reshape(2, 3, 4), "(6,4)->(2,3,4)",
                 shape="2,3,4"),
            case("strided", [randn(r, 3, 4)], lambda x: x[0].reshape(-1), "transposed -> (12)",
                 tr=[0], shape="-1"),
        ]
    if op == "transpose":
        return [
            case("outer", [randn(r, 2, 3, 4)], lambda x: x[0].transpose(0, 2), "dims 0,2",
                 d0=0, d1=2),
            case("neg", [randn(r, 2, 3, 4)], lambda x: x[0].transpose(-1, -2), "dims -1,-2",
                 d0=-1, d1=-2),
        ]
    if op == "permute":
        return [
            case("4d", [randn(r, 2, 3, 4, 5)], lambda x: x[0].permute(2, 0, 3, 1), "(2,0,3,1)",
                 perm="2,0,3,1"),
            case("heads", [randn(r, 2, 5, 3, 4)], lambda x: x[0].permute(0, 2, 1, 3),
                 "(0,2,1,3): the attention head split", perm="0,2,1,3"),
        ]
    if op == "slice":
        return [
            case("mid", [randn(r, 4, 6, 5)], lambda x: x[0][:, 1:4], "dim 1 [1,4)",
                 dim=1, start=1, end=4),
            case("last", [randn(r, 4, 6, 5)], lambda x: x[0][..., 0:2], "dim -1 [0,2)",
                 dim=-1, start=0, end=2),
            case("first", [randn(r, 4, 3)], lambda x: x[0][2:4], "dim 0 [2,4)",
                 dim=0, start=2, end=4),
        ]
    if op == "contiguous":
        return [case("t", [randn(r, 3, 5, 4)], lambda x: x[0].contiguous(),
                     "of a transposed view", tr=[0])]
    if op == "concat":
        return [
            case("dim1", [randn(r, 2, 3, 4), randn(r, 2, 1, 4), randn(r, 2, 2, 4)],
                 lambda x: torch.cat(x, 1), "3 tensors along dim 1", dim=1),
            case("last", [randn(r, 3, 2), randn(r, 3, 5)], lambda x: torch.cat(x, -1),
                 "along dim -1", dim=-1),
            case("first", [randn(r, 1, 4), randn(r, 3, 4)], lambda x: torch.cat(x, 0),
                 "along dim 0", dim=0),
        ]
    if op == "split":
        return [
            case("dim1", [randn(r, 2, 7, 3)], lambda x: list(torch.split(x[0], [2, 4, 1], 1)),
                 "sizes 2,4,1 along dim 1", dim=1, sizes="2,4,1"),
            case("last", [randn(r, 4, 3)], lambda x: list(torch.split(x[0], [1, 2], -1)),
                 "sizes 1,2 along dim -1", dim=-1, sizes="1,2"),
        ]
    if op in ("sum", "mean", "max"):
        def red(dim, keep):
            if op == "max":
                return lambda x: torch.max(x[0], dim, keepdim=keep)[0]
            f = torch.sum if op == "sum" else torch.mean
            return lambda x: f(x[0], dim, keepdim=keep)
        return [
            case("dim1", [randn(r, 3, 4, 5)], red(1, False), "dim 1", dim=1, keepdim=0),
            case("dim1k", [randn(r, 3, 4, 5)], red(1, True), "dim 1 keepdim", dim=1, keepdim=1),
            case("last", [randn(r, 3, 4, 5)], red(-1, False), "dim -1", dim=-1, keepdim=0),
            case("first_k", [randn(r, 6, 2)], red(0, True), "dim 0 keepdim", dim=0, keepdim=1),
            case("long", [randn(r, 2, 300)], red(-1, False), "rows of 300", dim=-1, keepdim=0),
        ]
    if op in ("sum_all", "mean_all"):
        f = torch.sum if op == "sum_all" else torch.mean
        return [case("3d", [randn(r, 3, 4, 5)], lambda x: f(x[0]), "(3,4,5) -> 0-dim"),
                case("big", [randn(r, 1000)], lambda x: f(x[0]), "(1000) -> 0-dim")]
    if op == "cross_entropy":
        def ce(ii):
            return lambda x: F.cross_entropy(x[0].reshape(-1, x[0].shape[-1]), x[1].reshape(-1),
                                             ignore_index=ii)
        t1 = ids(r, 5, 6)
        t1[[1, 4]] = -100
        t3 = ids(r, 7, 2, 4)
        return [
            case("ignore", [randn(r, 6, 5, std=2.0), t1], ce(-100),
                 "(6,5), two targets = -100 ignored", ignore_index=-100),
            case("plain", [randn(r, 8, 10, std=3.0), ids(r, 10, 8)], ce(-100), "(8,10)",
                 ignore_index=-100),
            case("ii3", [randn(r, 2, 4, 7), t3], ce(3), "(2,4,7) logits, (2,4) targets, "
                 "ignore_index 3", ignore_index=3),
            case("large", [randn(r, 4, 6, std=30.0), ids(r, 6, 4)], ce(-100),
                 "logits of size 30: stability", ignore_index=-100),
        ]
    if op == "mse":
        return [case("2d", [randn(r, 3, 4), randn(r, 3, 4)], lambda x: F.mse_loss(x[0], x[1]),
                     "(3,4) mean"),
                case("3d", [randn(r, 2, 3, 4), randn(r, 2, 3, 4)],
                     lambda x: F.mse_loss(x[0], x[1]), "(2,3,4) mean")]
    if op == "causal_self_attention":
        return [
            case("nh2", [randn(r, 2, 5, 24)], lambda x: attention_ref(x[0], 2), "B2 T5 C8 NH2",
                 n_head=2),
            case("nh3", [randn(r, 1, 7, 36)], lambda x: attention_ref(x[0], 3), "B1 T7 C12 NH3",
                 n_head=3),
            case("gpt", [randn(r, 2, 16, 96)], lambda x: attention_ref(x[0], 4),
                 "B2 T16 C32 NH4 (the GPT golden's shape)", n_head=4),
            case("t1", [randn(r, 2, 1, 12)], lambda x: attention_ref(x[0], 1), "T1", n_head=1),
        ]
    if op == "rope":
        return [case("small", [randn(r, 2, 3, 2, 4)], lambda x: rope_ref(x[0], 0, 10000.0),
                     "B2 T3 H2 D4", pos0=0, theta=10000.0),
                case("llama", [randn(r, 1, 9, 2, 64)], lambda x: rope_ref(x[0], 0, 10000.0),
                     "B1 T9 H2 D64", pos0=0, theta=10000.0),
                case("pos", [randn(r, 2, 3, 1, 128)], lambda x: rope_ref(x[0], 1500, 500000.0),
                     "B2 T3 H1 D128 pos0 1500 theta 5e5", pos0=1500, theta=500000.0),
                case("turns", [randn(r, 1, 4, 3, 8)], lambda x: rope_ref(x[0], 2000, 10.0),
                     "B1 T4 H3 D8 pos0 2000 theta 10 (many turns)", pos0=2000, theta=10.0)]
    if op == "attention":
        def qkv(b, t, s_, hq, hkv, d):
            return [randn(r, b, t, hq, d), randn(r, b, s_, hkv, d), randn(r, b, s_, hkv, d)]
        causal = lambda x: gqa_attention_ref(x[0], x[1], x[2], True)
        full = lambda x: gqa_attention_ref(x[0], x[1], x[2], False)
        return [case("mha", qkv(2, 5, 5, 2, 2, 8), causal, "B2 T5 H2 D8 causal", causal=1),
                case("gqa2", qkv(1, 7, 7, 4, 2, 16), causal, "GQA 2: T7 Hq4 Hkv2 D16 causal",
                     causal=1),
                case("gqa4_cache", qkv(2, 3, 11, 8, 2, 8), causal,
                     "GQA 4 with a cache: T3 S11 Hq8 Hkv2 D8 causal", causal=1),
                case("decode", qkv(1, 1, 13, 4, 1, 32), causal,
                     "one step against a cache: T1 S13 Hq4 Hkv1 D32", causal=1),
                case("d64", qkv(1, 9, 9, 2, 1, 64), causal, "GQA 2: T9 Hq2 Hkv1 D64 causal",
                     causal=1),
                case("full", qkv(2, 4, 6, 4, 2, 8), full, "not causal: T4 S6 Hq4 Hkv2 D8",
                     causal=0)]
    if op == "swiglu":
        f = lambda x: F.silu(x[0]) * x[1]
        return [case("plain", [unary_input(r), randn(r, 4, 33)], f, "(4,33), gate saturating"),
                case("strided", [randn(r, 6, 5), randn(r, 5, 6)], f, "transposed gate view",
                     tr=[0])]
    raise KeyError(op)


OPS = ["matmul", "matmul_t", "linear", "add", "sub", "mul", "div", "scale", "add_scalar",
       "relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid", "softmax", "log_softmax",
       "layer_norm", "rms_norm", "embedding", "dropout", "conv2d", "max_pool2d", "avg_pool2d",
       "reshape", "transpose", "permute", "slice", "contiguous", "concat", "split", "sum",
       "mean", "max", "sum_all", "mean_all", "cross_entropy", "mse", "causal_self_attention",
       "swiglu", "rope", "attention"]


def make_op_file(op):
    tensors, meta = [], {"op": op, "generator": GENERATOR, "reference": "float64"}
    names = []
    for c in op_cases(op, rng_for(op)):
        cn = c["name"]
        names.append(cn)
        r = rng_for(op, cn, "w")
        ins = [torch.from_numpy(a.copy()) for a in c["inputs"]]
        for i, t in enumerate(ins):
            tensors.append(("%s.in%d" % (cn, i), t))
        meta["%s.n_in" % cn] = len(ins)
        meta["%s.desc" % cn] = c["desc"]
        if c["tr"]:
            meta["%s.tr" % cn] = ",".join(str(i) for i in c["tr"])
        for k, v in c["params"].items():
            meta["%s.%s" % (cn, k)] = v
        if c["fn"] is None:  # dropout: the weights for the gradient check only
            tensors.append(("%s.w0" % cn, torch.from_numpy(randn(r, *c["inputs"][0].shape))))
            meta["%s.n_out" % cn] = 1
            continue
        leaves = []
        for t in ins:
            if t.is_floating_point():
                t = t.to(REF).requires_grad_(True)
            leaves.append(t)
        args = [t.transpose(-1, -2) if i in c["tr"] else t for i, t in enumerate(leaves)]
        outs = c["fn"](args)
        outs = outs if isinstance(outs, list) else [outs]
        loss = 0
        for k, o in enumerate(outs):
            w = torch.from_numpy(randn(r, *o.shape))
            loss = loss + (o * w.to(REF)).sum()
            tensors.append(("%s.out%d" % (cn, k), o.detach().float()))
            tensors.append(("%s.w%d" % (cn, k), w))
        loss.backward()
        for i, t in enumerate(leaves):
            if t.is_floating_point():
                tensors.append(("%s.grad%d" % (cn, i), t.grad.float()))
        meta["%s.n_out" % cn] = len(outs)
    meta["cases"] = ",".join(names)
    return save_safetensors(os.path.join(ROOT, "ops", op + ".safetensors"), tensors, meta)


# ---------------------------------------------------------------------------------------------
# models


class GPTAttention(nn.Module):
    def __init__(self, d, nh):
        super().__init__()
        self.nh = nh
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x):
        return self.c_proj(attention_ref(self.c_attn(x), self.nh))


class GPTMLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GPTBlock(nn.Module):
    def __init__(self, d, nh):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = GPTAttention(d, nh)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = GPTMLP(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """GPT-2 style, pre-LN, as dt_model_gpt: wte, wpe, h.i, ln_f, lm_head (no bias, untied)."""

    def __init__(self, vocab, seq, d, nh, layers):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.h = nn.ModuleList([GPTBlock(d, nh) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):  # idx (B, T) -> logits (B, T, V)
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x)
        return self.lm_head(self.ln_f(x))


def mlp_model():
    H = 64
    return nn.Sequential(nn.Linear(784, H), nn.ReLU(), nn.Linear(H, H), nn.ReLU(),
                         nn.Linear(H, 10))


def cnn_model():
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


GPT_CFG = dict(vocab=64, seq=16, d=32, nh=4, layers=2)
STEPS = 10
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)


def gpt_init(model, r):
    """GPT-2's scheme, except biases and LayerNorm parameters get small random values so every
    parameter's gradient path is exercised."""
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            v = randn(r, *p.shape, std=0.02)
        elif ".ln_" in name or name.startswith("ln_"):
            v = 1.0 + randn(r, *p.shape, std=0.1)
        else:
            v = randn(r, *p.shape, std=0.02)
        with torch.no_grad():
            p.copy_(torch.from_numpy(v))


def make_model_file(kind):
    r = rng_for("model", kind)
    torch.manual_seed(zlib.crc32(kind.encode()))
    meta = {"model": kind, "generator": GENERATOR, "reference": "float64", "steps": STEPS,
            "optimizer": "torch.optim.AdamW", "lr": ADAMW["lr"], "beta1": ADAMW["betas"][0],
            "beta2": ADAMW["betas"][1], "eps": ADAMW["eps"],
            "weight_decay": ADAMW["weight_decay"],
            "batches": "one distinct batch per step: data.x[s], data.y[s] for step s"}
    if kind == "mlp":
        model, B = mlp_model(), 16
        x = uniform(r, 0, 1, STEPS, B, 784)
        y = ids(r, 10, STEPS, B)
        meta.update(hidden=64, layers=2, batch=B)
    elif kind == "cnn":
        model, B = cnn_model(), 8
        x = uniform(r, 0, 1, STEPS, B, 1, 28, 28)
        y = ids(r, 10, STEPS, B)
        meta.update(batch=B)
    else:
        c = GPT_CFG
        model, B = GPT(c["vocab"], c["seq"], c["d"], c["nh"], c["layers"]), 4
        gpt_init(model, r)
        toks = ids(r, c["vocab"], STEPS, B, c["seq"] + 1)
        x, y = toks[:, :, :-1].copy(), toks[:, :, 1:].copy()  # next-token targets
        meta.update(vocab=c["vocab"], seq=c["seq"], d_model=c["d"], n_head=c["nh"],
                    n_layer=c["layers"], batch=B, dropout=0.0, layer_norm_eps=1e-5,
                    mlp_hidden="4*d_model", gelu="tanh")
    # the initial weights, rounded to float32 first: that is exactly what the C side starts from
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.float())
    init = [("init." + n, p.detach().float().clone()) for n, p in model.named_parameters()]
    model = model.to(REF)
    opt = torch.optim.AdamW(model.parameters(), **ADAMW)
    losses = []
    for s in range(STEPS):
        opt.zero_grad()
        xs = torch.from_numpy(x[s])
        xs = xs.to(REF) if xs.is_floating_point() else xs
        logits = model(xs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               torch.from_numpy(y[s]).reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    final = [("final." + n, p.detach().float().clone()) for n, p in model.named_parameters()]
    meta["param_names"] = ",".join(n for n, _ in model.named_parameters())
    tensors = init + [("data.x", torch.from_numpy(x)), ("data.y", torch.from_numpy(y)),
                      ("losses", torch.tensor(losses, dtype=torch.float32))] + final
    print("  %s: losses %s" % (kind, " ".join("%.4f" % v for v in losses)))
    return save_safetensors(os.path.join(ROOT, "models", kind + ".safetensors"), tensors, meta)


def make_format_file():
    v = torch.arange(-6, 6, dtype=torch.float32).reshape(3, 4) * 0.25  # exact in every dtype
    tensors = [("f32", v), ("bf16", v.to(torch.bfloat16)), ("f16", v.to(torch.float16)),
               ("i32", torch.arange(-3, 3, dtype=torch.int32)),
               ("i64", torch.tensor([-(1 << 40), 0, (1 << 40) + 1], dtype=torch.int64)),
               ("scalar", torch.tensor(3.5)), ("empty", torch.zeros(2, 0))]
    return save_safetensors(os.path.join(ROOT, "format.safetensors"), tensors,
                            {"generator": GENERATOR})


def main():
    torch.set_num_threads(1)
    if len(sys.argv) > 1:  # only the named ops' files
        unknown = [op for op in sys.argv[1:] if op not in OPS]
        if unknown:
            print("unknown op(s) %s; the ops are: %s" % (" ".join(unknown), " ".join(OPS)))
            return 1
        total = sum(make_op_file(op) for op in sys.argv[1:])
        print("wrote %.2f MB to %s" % (total / 1e6, os.path.normpath(ROOT)))
        return 0
    total = make_format_file()
    for op in OPS:
        total += make_op_file(op)
    print("ops: %d files" % len(OPS))
    for kind in ("mlp", "cnn", "gpt"):
        total += make_model_file(kind)
    print("wrote %.2f MB to %s" % (total / 1e6, os.path.normpath(ROOT)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
