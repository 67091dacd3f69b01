#!/usr/bin/env python3
"""Build tests/data/gguf/quants.gguf: the fixture tessera's GGUF reader and
dequantizers are judged by.

The file holds, for every ggml type tessera dequantizes (F32, F16, BF16, Q8_0,
Q4_0, Q4_1, Q4_K, Q6_K):
  q.<TYPE>         a [2, 512] tensor of that type whose blocks are random bytes
                   (so every bit pattern of the packed integers and 6-bit scales
                   is exercised), with the f16 scale fields set to finite values
  expected.<TYPE>  F32 [2, 512]: gguf-py's dequantize() of the bytes read back
                   from the written file with GGUFReader
and metadata keys test.* of every GGUF value type, including arrays of strings
and a nested array, plus general.alignment = 64 (not the default 32).

Usage (in a virtualenv made from requirements-gguf.txt):
  python tools/reference/make_gguf_fixtures.py [--out tests/data/gguf/quants.gguf]
"""
import argparse
import pathlib

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

ROWS, COLS = 2, 512
SEED = 20261201

# Byte offsets of the f16 scale fields inside one block (gguf-py quants.py
# layouts): random bytes there could be NaN/inf, which would make every value
# of the block NaN and test nothing.
F16_FIELDS = {
    Q.Q8_0: [0],
    Q.Q4_0: [0],
    Q.Q4_1: [0, 2],
    Q.Q4_K: [0, 2],
    Q.Q6_K: [208],
}


def random_blocks(rng, qtype):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n_blocks = ROWS * COLS // block
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        scales = (rng.standard_normal(n_blocks) * 0.05).astype(np.float16)
        raw[:, off:off + 2] = scales.view(np.uint8).reshape(n_blocks, 2)
    return raw.reshape(ROWS, COLS // block * size)


def float_tensor(rng, qtype):
    x = (rng.standard_normal((ROWS, COLS)) * 3).astype(np.float32)
    # Edge values every float format must carry through exactly.
    x[0, :6] = [0.0, -0.0, np.inf, -np.inf, 6.0e-8, -65504.0]
    if qtype == Q.F32:
        return x, None
    if qtype == Q.F16:
        return x.astype(np.float16), None
    return gguf.quants.quantize(x, Q.BF16), Q.BF16


TYPES = (Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q4_K, Q.Q6_K)


def add_metadata(w):
    w.add_custom_alignment(64)  # sets the key and lays the data out by it
    w.add_key_value("test.u8", 200, V.UINT8)
    w.add_key_value("test.i8", -100, V.INT8)
    w.add_key_value("test.u16", 60000, V.UINT16)
    w.add_key_value("test.i16", -30000, V.INT16)
    w.add_key_value("test.u32", 4000000000, V.UINT32)
    w.add_key_value("test.i32", -2000000000, V.INT32)
    w.add_key_value("test.u64", 2**63 + 5, V.UINT64)
    w.add_key_value("test.i64", -(2**62), V.INT64)
    w.add_key_value("test.f32", 1e-5, V.FLOAT32)
    w.add_key_value("test.f64", 0.1, V.FLOAT64)
    w.add_key_value("test.bool", True, V.BOOL)
    w.add_key_value("test.string", "h\u00e9llo w\u00f6rld", V.STRING)
    w.add_key_value("test.array.i32", [1, -2, 3], V.ARRAY, sub_type=V.INT32)
    w.add_key_value("test.array.string", ["a", "", "\u0120the"], V.ARRAY, sub_type=V.STRING)
    w.add_key_value("test.array.nested", [[1, 2], [3]], V.ARRAY, sub_type=V.ARRAY)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/gguf/quants.gguf")
    out = pathlib.Path(ap.parse_args().out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    w = gguf.GGUFWriter(str(out), arch="test")
    add_metadata(w)
    expected = {}
    for qtype in TYPES:
        if qtype in F16_FIELDS:
            data, raw = random_blocks(rng, qtype), qtype
        else:
            data, raw = float_tensor(rng, qtype)
        w.add_tensor(f"q.{qtype.name}", data, raw_dtype=raw)
        expected[qtype.name] = gguf.quants.dequantize(data if raw else data.view(np.uint8),
                                                      qtype).reshape(ROWS, COLS)
    for name, values in expected.items():
        w.add_tensor(f"expected.{name}", values.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    # Read back: the expected values must be what gguf-py makes of the bytes
    # actually in the file.
    r = gguf.GGUFReader(str(out))
    tensors = {t.name: t for t in r.tensors}
    for name, values in expected.items():
        t = tensors[f"q.{name}"]
        again = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(ROWS, COLS)
        assert again.tobytes() == values.astype(np.float32).tobytes(), name
    print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
