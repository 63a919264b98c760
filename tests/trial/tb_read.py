#!/usr/bin/env python3
"""Read the event files written by test_tensorboard with TensorBoard's own reader.

Usage: tb_read.py DIR   (DIR is $DT_TB_OUT of test_tensorboard; ctest passes it)

Checks, independently of dtrain's C code:
  * the TFRecord framing and masked crc32c of every record (crc32c computed here in Python),
  * every record parses as a tensorboard.Event protobuf, the first one with file_version
    "brain.Event:2",
  * EventAccumulator (what the TensorBoard UI uses) finds the expected tags, steps and values.
The values mirror write_for_python() in test_tensorboard.c: change both together.

A missing Python package is a failure with a hint, never a silent skip.
"""
import math
import os
import struct
import sys
import time

passed = 0
failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {what}", file=sys.stderr)


def finish():
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


try:
    import numpy as np
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.compat.proto import event_pb2
except ImportError as e:
    print(f"FAIL: {e}: this test needs the Python packages 'tensorboard' and 'numpy' for "
          f"{sys.executable}; hint: run `make test-deps` (it sets up build/venv with them)",
          file=sys.stderr)
    failed += 1
    finish()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_records(path):
    with open(path, "rb") as f:
        buf = f.read()
    off, out = 0, []
    while off < len(buf):
        if len(buf) - off < 12:
            check(False, f"{path}: trailing {len(buf) - off} bytes at offset {off}")
            break
        header = buf[off:off + 8]
        (n,) = struct.unpack("<Q", header)
        (hcrc,) = struct.unpack("<I", buf[off + 8:off + 12])
        check(hcrc == masked(header), f"{path}: length crc of the record at offset {off}")
        data = buf[off + 12:off + 12 + n]
        check(len(data) == n, f"{path}: record at offset {off} is truncated")
        (dcrc,) = struct.unpack("<I", buf[off + 12 + n:off + 16 + n])
        check(dcrc == masked(data), f"{path}: data crc of the record at offset {off}")
        out.append(data)
        off += 16 + n
    return out


def event_files(d):
    return sorted(os.path.join(d, f) for f in os.listdir(d) if "tfevents" in f)


def check_framing(d):
    files = event_files(d)
    check(len(files) == 1, f"{d}: expected one event file, found {files}")
    for path in files:
        recs = read_records(path)
        events = [event_pb2.Event.FromString(r) for r in recs]
        check(len(events) > 1, f"{path}: no summary events")
        check(events[0].file_version == "brain.Event:2",
              f"{path}: first event's file_version is {events[0].file_version!r}")
        now = time.time()
        for ev in events:
            check(now - 86400 < ev.wall_time < now + 60, f"{path}: wall_time {ev.wall_time}")
        check(all(ev.HasField("summary") for ev in events[1:]),
              f"{path}: every event after the first carries a summary")


def load(d):
    acc = ea.EventAccumulator(d, size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
    acc.Reload()
    return acc


def scalar_events(acc, tag):
    """The scalar events of tag, or [] (a failed check, not an exception) when it is absent."""
    return acc.Scalars(tag) if tag in acc.Tags()["scalars"] else []


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print(f"FAIL: usage: {sys.argv[0]} DIR (the directory test_tensorboard wrote)",
              file=sys.stderr)
        global failed
        failed += 1
        finish()
    d = sys.argv[1]
    check(crc32c(b"123456789") == 0xE3069283, "crc32c check value")
    check_framing(d)
    check_framing(os.path.join(d, "run2"))

    acc = load(d)
    scalars = set(acc.Tags()["scalars"])
    want = {"train/loss", "val/loss", "val/accuracy", "special/nan", "special/inf", "big/step"}
    check(scalars == want, f"scalar tags {sorted(scalars)}, expected {sorted(want)}")

    f32 = np.float32
    loss = scalar_events(acc, "train/loss")
    check([e.step for e in loss] == list(range(200)), "train/loss steps 0..199")
    check(all(e.value == float(f32(2.0) - f32(e.step) / f32(128.0)) for e in loss),
          "train/loss values")
    for tag, fn in [("val/loss", lambda s: f32(s) / f32(1000.0)),
                    ("val/accuracy", lambda s: f32(0.5) + f32(s) / f32(400.0))]:
        ev = scalar_events(acc, tag)
        check([e.step for e in ev] == [0, 50, 100, 150], f"{tag} steps")
        check(all(e.value == float(fn(e.step)) for e in ev),
              f"{tag} values {[e.value for e in ev]}")
        check(all(e.wall_time > 0 for e in ev), f"{tag} wall times")
    nan = scalar_events(acc, "special/nan")
    check(len(nan) == 1 and nan[0].step == 1 and math.isnan(nan[0].value), "special/nan")
    inf = scalar_events(acc, "special/inf")
    check(len(inf) == 1 and inf[0].step == 2 and math.isinf(inf[0].value) and inf[0].value > 0,
          "special/inf")
    big = scalar_events(acc, "big/step")
    check(len(big) == 1 and big[0].step == 1 << 40 and big[0].value == 1.0, "big/step")

    tensors = acc.Tags()["tensors"]
    check("notes" in tensors, f"text tag 'notes' among tensors {tensors}")
    if "notes" in tensors:
        t = acc.Tensors("notes")
        check(len(t) == 1 and t[0].step == 0, "notes step")
        check(list(t[0].tensor_proto.string_val) == [b"hello **dtrain**"],
              f"notes text {list(t[0].tensor_proto.string_val)}")
        meta = acc.SummaryMetadata("notes")
        check(meta.plugin_data.plugin_name == "text",
              f"notes plugin {meta.plugin_data.plugin_name!r}")

    acc2 = load(os.path.join(d, "run2"))
    x = scalar_events(acc2, "run2/x")
    check([(e.step, e.value) for e in x] == [(7, 3.0)], "run2/x")
    finish()


if __name__ == "__main__":
    main()
