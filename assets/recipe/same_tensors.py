"""Are two models the same bits? Compares the tensors of two safetensors files, not their headers.

What it teaches: "bit-for-bit reproducible" is a statement about the weights.
Two exports of the same weights can still differ as files (a newer train.py
records more metadata), so this compares tensor names, dtypes, shapes and raw
bytes, and for tensors that differ reports how far apart they are (max |a - b|
over F32 values), which tells "other bits, same training" from "another model".

What it leaves out: dtypes other than F32 in the distance report (bytes are still compared).
Standard library only.

  /usr/bin/python3 same_tensors.py A/model.safetensors B/model.safetensors   # exit 0: same bits
"""

import json
import struct
import sys
from array import array


def read(path):
    """(header without __metadata__, the data bytes after the header)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return header, data


def max_abs_diff(a, b):
    x, y = array("f"), array("f")
    x.frombytes(a)
    y.frombytes(b)
    if sys.byteorder != "little":
        x.byteswap()
        y.byteswap()
    return max(abs(p - q) for p, q in zip(x, y))


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: same_tensors.py A.safetensors B.safetensors")
    (ha, da), (hb, db) = read(sys.argv[1]), read(sys.argv[2])
    if sorted(ha) != sorted(hb):
        print(f"different tensor names: only in A {sorted(set(ha) - set(hb))}, "
              f"only in B {sorted(set(hb) - set(ha))}")
        return 1
    differ = 0
    for name in sorted(ha):
        ia, ib = ha[name], hb[name]
        if (ia["dtype"], ia["shape"]) != (ib["dtype"], ib["shape"]):
            print(f"{name}: {ia['dtype']}{ia['shape']} vs {ib['dtype']}{ib['shape']}")
            differ += 1
            continue
        a = da[ia["data_offsets"][0]:ia["data_offsets"][1]]
        b = db[ib["data_offsets"][0]:ib["data_offsets"][1]]
        if a != b:
            how = f"max |a - b| = {max_abs_diff(a, b):.3g}" if ia["dtype"] == "F32" else "bytes differ"
            print(f"{name}: {how}")
            differ += 1
    total = sum(i["data_offsets"][1] - i["data_offsets"][0] for i in ha.values())
    if differ:
        print(f"{differ} of {len(ha)} tensors differ")
        return 1
    print(f"same bits: {len(ha)} tensors, {total} bytes of tensor data identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
