#!/usr/bin/env python3
"""golden_f16.py — reference fp16 roundings for tests/tensor/test_f16.c, from numpy's float16.

numpy converts float32 to float16 with round to nearest even, subnormals and overflow to
infinity (npy_floatbits_to_halfbits), as PyTorch's .half() does on the CPU. Prints one C
initialiser per value, {f32 bits, f16 bits}; paste them into the GOLDEN block of the test.
The tests never need Python:

    build/venv/bin/python3 tools/golden_f16.py
"""
import numpy as np


def values():
    v = [0.0, -0.0, 1.0, -1.0, 0.1, 1 / 3, 65504.0, -65504.0, 65519.0, 65519.996, 65520.0,
         -65520.0, 65536.0, 1e5, 1e10, 3.0e38, np.inf, -np.inf,
         2.0 ** -14, 2.0 ** -14 * (1 - 2 ** -11), 2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0001,
         3 * 2.0 ** -25, 5 * 2.0 ** -25, 2.0 ** -26, -2.0 ** -24, 1e-8, 6e-8, 1e-30, 1.4e-45,
         1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 1 + 2.0 ** -11 + 2.0 ** -20, 2048.0 + 1, 2048.0 + 3,
         4095.5, 32768.0 + 16, 32768.0 + 48, 1.00048828125, 1.0009765625]
    rng = np.random.default_rng(1234)
    # every exponent range: normals, subnormals, overflow
    v += list(rng.standard_normal(48) * 10.0 ** rng.integers(-9, 6, 48))
    v += list(rng.uniform(-70000, 70000, 16))
    v += list(rng.uniform(0, 2.0 ** -14, 16))
    out = np.array(v, dtype=np.float32)
    return np.concatenate([out, np.array([np.nan], dtype=np.float32)])


def main():
    x = values()
    h = x.astype(np.float16)
    for xb, hb in zip(x.view(np.uint32), h.view(np.uint16)):
        print("    {0x%08xu, 0x%04x}," % (xb, hb))


if __name__ == "__main__":
    main()
