#!/usr/bin/python3
"""An independent GGUF reader, written from the format's specification, for checking files
that other code (plab's C++ reader and writer, llama.cpp's gguf-py) reads or writes.

    gguf_reference.py dump FILE              a stable, line-per-item text dump
    gguf_reference.py tensors FILE OUT.npz   every tensor dequantised to float32
    gguf_reference.py check [--spec-only] FILE
                                             exit 0 and one "ok" line, or exit 1 and one line
                                             naming the first violation

Sources (read, not copied): ggml's docs/gguf.md (ggml-org/ggml 01f0d4da) for the layout —
header, key/value pairs of 13 value types (arrays may nest), tensor infos, general.alignment
(default 32), zero padding, tensor offsets relative to the aligned data section — and, for
what llama.cpp's loader refuses beyond the document, ggml's src/gguf.cpp (ggml-org/ggml
1312dffb, gguf_init_from_reader). Block sizes are ggml's type traits; the dequantisation of
F16, BF16 and Q8_0 is ggml's (a Q8_0 block is an fp16 scale d then 32 int8 q, x = q*d).
Only Python 3 and numpy; nothing from gguf-py is imported.

Rules are tagged [spec] (the document) or [ggml] (gguf.cpp, i.e. what llama.cpp refuses);
`check --spec-only` applies the [spec] ones only.

Dump format (version 1): see dump() below; tests/golden/gguf/README.md describes it.
"""
import hashlib
import json
import struct
import sys

import numpy as np

MAGIC = b"GGUF"

# gguf_metadata_value_type: id -> (name, struct format, size); STRING and ARRAY are variable.
VALUE_TYPES = {
    0: ("u8", "<B", 1), 1: ("i8", "<b", 1), 2: ("u16", "<H", 2), 3: ("i16", "<h", 2),
    4: ("u32", "<I", 4), 5: ("i32", "<i", 4), 6: ("f32", "<f", 4), 7: ("bool", "<B", 1),
    8: ("str", None, None), 9: ("arr", None, None), 10: ("u64", "<Q", 8), 11: ("i64", "<q", 8),
    12: ("f64", "<d", 8),
}
T_STRING, T_ARRAY, T_BOOL, T_U32 = 8, 9, 7, 4

QK_K = 256
# ggml_type: id -> (name, elements per block, bytes per block). Ids missing here are unknown
# or removed (4, 5: Q4_2/Q4_3; 31-33: Q4_0_4_4/4_8/8_8; 36-38: IQ4_NL_4_4/4_8/8_8).
GGML_TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 40),
    10: ("Q2_K", QK_K, 84), 11: ("Q3_K", QK_K, 110), 12: ("Q4_K", QK_K, 144),
    13: ("Q5_K", QK_K, 176), 14: ("Q6_K", QK_K, 210), 15: ("Q8_K", QK_K, 292),
    16: ("IQ2_XXS", QK_K, 66), 17: ("IQ2_XS", QK_K, 74), 18: ("IQ3_XXS", QK_K, 98),
    19: ("IQ1_S", QK_K, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", QK_K, 110),
    22: ("IQ2_S", QK_K, 82), 23: ("IQ4_XS", QK_K, 136), 24: ("I8", 1, 1), 25: ("I16", 1, 2),
    26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8), 29: ("IQ1_M", QK_K, 56),
    30: ("BF16", 1, 2), 34: ("TQ1_0", QK_K, 54), 35: ("TQ2_0", QK_K, 66),
    39: ("MXFP4", 32, 17), 40: ("NVFP4", 64, 36), 41: ("Q1_0", 128, 18),
}
UNQUANTIZED = {"F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64"}

GGML_MAX_DIMS = 4
GGML_MAX_NAME = 64                 # gguf.cpp: name.length() >= GGML_MAX_NAME is refused
GGUF_MAX_STRING_LENGTH = 64 << 20  # gguf.cpp
GGUF_MAX_ARRAY_ELEMENTS = 64 << 20
GGUF_MAX_ALIGNMENT = 1 << 20
INT64_MAX = (1 << 63) - 1


class GGUFError(Exception):
    """A file this reader cannot or must not accept; str() is the one-line reason."""


class Value:
    """A metadata value: type id, Python value (bytes for strings, a list of Value for
    arrays), and for arrays the element type and the raw encoding (element type, count,
    elements: the bytes exactly as stored)."""

    def __init__(self, vtype, value, elem_type=None, raw=b""):
        self.vtype, self.value, self.elem_type, self.raw = vtype, value, elem_type, raw


class KV:
    def __init__(self, key, value, offset):
        self.key, self.value, self.offset = key, value, offset


class TensorInfo:
    def __init__(self, name, ne, type_id, offset):
        self.name, self.ne, self.type_id, self.offset = name, ne, type_id, offset
        self.nbytes = 0


class GGUFFile:
    def __init__(self):
        self.size = 0
        self.version = 0
        self.kvs = []
        self.tensors = []
        self.alignment = 32
        self.alignment_from_key = False
        self.data_offset = 0
        self.violations = []  # (tag, message), in the order found
        self.unreadable = None  # set when the tensor data cannot be read (outside the file, overlap)
        self.data = b""

    def kv(self, key):
        return next((kv.value for kv in self.kvs if kv.key == key), None)


class Cursor:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def need(self, n, what):
        if n > len(self.data) - self.pos:
            raise GGUFError(f"[spec] truncated: {what} needs {n} bytes at offset {self.pos} but the "
                            f"file has {len(self.data) - self.pos} left")

    def unpack(self, fmt, size, what):
        self.need(size, what)
        v = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += size
        return v

    def u32(self, what):
        return self.unpack("<I", 4, what)

    def u64(self, what):
        return self.unpack("<Q", 8, what)

    def string(self, what):
        n = self.u64(f"the length of {what}")
        if n > len(self.data) - self.pos:
            raise GGUFError(f"[spec] truncated string: {what} claims {n} bytes at offset {self.pos} "
                            f"but the file has {len(self.data) - self.pos} left")
        s = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return s


def _is_utf8(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _read_value(cur, vtype, where, f, depth=0):
    if vtype not in VALUE_TYPES:
        raise GGUFError(f"[spec] {where}: unknown value type {vtype}")
    if vtype == T_STRING:
        s = cur.string(where)
        if not _is_utf8(s):
            f.violations.append(("spec", f"{where}: string is not valid UTF-8"))
        if len(s) > GGUF_MAX_STRING_LENGTH:
            f.violations.append(("ggml", f"{where}: string of {len(s)} bytes exceeds gguf.cpp's "
                                         f"{GGUF_MAX_STRING_LENGTH}"))
        return Value(vtype, s)
    if vtype == T_ARRAY:
        start = cur.pos
        et = cur.u32(f"the element type of {where}")
        n = cur.u64(f"the element count of {where}")
        if et not in VALUE_TYPES:
            raise GGUFError(f"[spec] {where}: array of unknown value type {et}")
        if et == T_ARRAY:
            f.violations.append(("ggml", f"{where}: nested array (allowed by the spec, refused by "
                                         f"gguf.cpp)"))
        min_size = 8 if et in (T_STRING, T_ARRAY) else VALUE_TYPES[et][2]
        if n * min_size > len(cur.data) - cur.pos:
            raise GGUFError(f"[spec] truncated array: {where} claims {n} elements at offset {cur.pos} "
                            f"but the file has {len(cur.data) - cur.pos} bytes left")
        if n > GGUF_MAX_ARRAY_ELEMENTS:
            f.violations.append(("ggml", f"{where}: {n} elements exceed gguf.cpp's {GGUF_MAX_ARRAY_ELEMENTS}"))
        if et not in (T_STRING, T_ARRAY):
            name, fmt, size = VALUE_TYPES[et]
            raw = bytes(cur.data[cur.pos:cur.pos + n * size])
            cur.pos += n * size
            items = [Value(et, v[0]) for v in struct.iter_unpack(fmt, raw)] if n else []
            if et == T_BOOL and any(v.value > 1 for v in items):
                f.violations.append(("spec", f"{where}: bool element other than 0 or 1"))
        else:
            items = [_read_value(cur, et, f"{where}[{i}]", f, depth + 1) for i in range(n)]
        return Value(vtype, items, et, bytes(cur.data[start:cur.pos]))
    name, fmt, size = VALUE_TYPES[vtype]
    v = cur.unpack(fmt, size, where)
    if vtype == T_BOOL and v > 1:
        f.violations.append(("spec", f"{where}: bool value {v} is neither 0 nor 1"))
    return Value(vtype, v)


def _valid_key(key):
    """[spec] ASCII, '.'-separated lower_snake_case segments, at most 65535 bytes."""
    if not key or len(key) > 65535:
        return False
    try:
        text = key.decode("ascii")
    except UnicodeDecodeError:
        return False
    return all(seg and all(c.islower() or c.isdigit() or c == "_" for c in seg)
               for seg in text.split("."))


def parse(data):
    """Parses a whole GGUF file held in memory. Raises GGUFError for what cannot be read past
    (bad magic, unsupported version, truncated header or metadata, unknown types);
    records every other violation in GGUFFile.violations, in file order (tensor data
    outside the file or overlapping also sets GGUFFile.unreadable)."""
    f = GGUFFile()
    f.data, f.size = data, len(data)
    cur = Cursor(data)
    cur.need(4, "the magic")
    if bytes(data[:4]) != MAGIC:
        raise GGUFError(f"[spec] bad magic {bytes(data[:4])!r}, expected b'GGUF'")
    cur.pos = 4
    f.version = cur.u32("the version")
    if f.version != 0 and (f.version & 0xFFFF) == 0:
        raise GGUFError(f"[spec] version {f.version:#x} looks byte-swapped (a big-endian file?); "
                        f"only little-endian files are read")
    if f.version not in (2, 3):
        raise GGUFError(f"[spec] version {f.version} is not supported (2 or 3; version 1 used 32-bit "
                        f"counts)")
    n_tensors = cur.u64("the tensor count")
    n_kv = cur.u64("the key/value count")
    if n_tensors > INT64_MAX or n_kv > INT64_MAX:
        raise GGUFError(f"[ggml] tensor count {n_tensors} or key count {n_kv} does not fit int64")
    left = len(data) - cur.pos
    if n_kv * 12 > left or n_tensors * 24 > left:  # smallest KV: 8+0 key, 4 type; smallest info: 8+4+4+8
        raise GGUFError(f"[spec] truncated: {n_kv} keys and {n_tensors} tensor infos cannot fit in the "
                        f"{left} bytes after the header")

    seen = set()
    for i in range(n_kv):
        off = cur.pos
        key = cur.string(f"key {i}")
        if not _valid_key(key):
            f.violations.append(("spec", f"key {i} {key!r} is not an ASCII lower_snake_case "
                                         f"dotted name of 1..65535 bytes"))
        keytext = key.decode("utf-8", "surrogateescape")
        if key in seen:
            f.violations.append(("ggml", f"duplicate key '{keytext}'"))
        seen.add(key)
        vtype = cur.u32(f"the type of key '{keytext}'")
        f.kvs.append(KV(keytext, _read_value(cur, vtype, f"key '{keytext}'", f), off))

    al = f.kv("general.alignment")
    if al is not None:
        f.alignment_from_key = True
        if al.vtype != T_U32:
            raise GGUFError(f"[spec] general.alignment has type {VALUE_TYPES[al.vtype][0]}, expected u32")
        f.alignment = al.value
        if f.alignment == 0:
            raise GGUFError("[spec] general.alignment is 0")
        if f.alignment & (f.alignment - 1):
            f.violations.append(("ggml", f"general.alignment {f.alignment} is not a power of two"))
        if f.alignment % 8:
            f.violations.append(("spec", f"general.alignment {f.alignment} is not a multiple of 8"))
        if f.alignment > GGUF_MAX_ALIGNMENT:
            f.violations.append(("ggml", f"general.alignment {f.alignment} exceeds gguf.cpp's {GGUF_MAX_ALIGNMENT}"))
    arch = f.kv("general.architecture")
    if arch is None or arch.vtype != T_STRING:
        f.violations.append(("spec", "general.architecture (a string) is required"))

    names = set()
    for i in range(n_tensors):
        name = cur.string(f"the name of tensor {i}")
        nametext = name.decode("utf-8", "surrogateescape")
        if len(name) >= GGML_MAX_NAME:
            f.violations.append(("ggml", f"tensor name '{nametext}' is {len(name)} bytes; gguf.cpp "
                                         f"takes at most {GGML_MAX_NAME - 1}"))
        if not _is_utf8(name):
            f.violations.append(("spec", f"tensor {i} name is not valid UTF-8"))
        if name in names:
            f.violations.append(("ggml", f"duplicate tensor name '{nametext}'"))
        names.add(name)
        n_dims = cur.u32(f"n_dimensions of tensor '{nametext}'")
        if n_dims > GGML_MAX_DIMS:
            raise GGUFError(f"[ggml] tensor '{nametext}' has {n_dims} dimensions; at most {GGML_MAX_DIMS}")
        ne = [cur.u64(f"dimension {j} of tensor '{nametext}'") for j in range(n_dims)]
        type_id = cur.u32(f"the type of tensor '{nametext}'")
        offset = cur.u64(f"the offset of tensor '{nametext}'")
        t = TensorInfo(nametext, ne, type_id, offset)
        if any(d > INT64_MAX for d in ne):
            raise GGUFError(f"[ggml] tensor '{nametext}' has a dimension that does not fit int64: {ne}")
        n_elem = 1
        for d in ne:
            n_elem *= d
        if n_elem > INT64_MAX:
            raise GGUFError(f"[ggml] tensor '{nametext}' with dimensions {ne} has too many elements")
        if type_id not in GGML_TYPES:
            raise GGUFError(f"[spec] tensor '{nametext}' has unknown or removed type {type_id}")
        tname, blck, tsize = GGML_TYPES[type_id]
        ne0 = ne[0] if ne else 1
        if ne0 % blck:
            raise GGUFError(f"[ggml] tensor '{nametext}' of type {tname} has {ne0} elements per row, "
                            f"not a multiple of the block size {blck}")
        t.nbytes = n_elem // blck * tsize
        if offset % f.alignment:
            f.violations.append(("spec", f"tensor '{nametext}' offset {offset} is not a multiple of "
                                         f"the alignment {f.alignment}"))
        f.tensors.append(t)

    end_infos = cur.pos
    f.data_offset = _align(end_infos, f.alignment) if n_tensors else end_infos
    if f.data_offset > f.size:
        raise GGUFError(f"[spec] truncated: the data section would start at {f.data_offset} "
                        f"but the file has {f.size} bytes")
    if any(data[end_infos:f.data_offset]):
        f.violations.append(("spec", f"the padding before the data section ({end_infos}..{f.data_offset}) "
                                     f"is not all zero bytes"))
    _check_tensor_data(f)

    if any(GGML_TYPES[t.type_id][0] not in UNQUANTIZED for t in f.tensors):
        qv = f.kv("general.quantization_version")
        if qv is None or qv.vtype != T_U32:
            f.violations.append(("spec", "general.quantization_version (u32) is required when a "
                                         "tensor is quantized"))
    return f


def _align(x, a):
    return x + (a - x % a) % a


def _fatal(f, msg):
    """A [spec] violation after which the tensor data cannot be read (dump and tensors refuse)."""
    f.violations.append(("spec", msg))
    if f.unreadable is None:
        f.unreadable = f"[spec] {msg}"


def _check_tensor_data(f):
    spans = []
    expected = 0
    for t in f.tensors:
        start = f.data_offset + t.offset
        if start + t.nbytes > f.size:
            _fatal(f, f"tensor '{t.name}' ({t.nbytes} bytes at data offset {t.offset}, file offset "
                      f"{start}) lies outside the file of {f.size} bytes")
        if t.offset != expected:
            f.violations.append(("ggml", f"tensor '{t.name}' has offset {t.offset}; gguf.cpp expects "
                                         f"{expected} (tensors packed in order, each padded to the "
                                         f"alignment)"))
        expected = t.offset + _align(t.nbytes, f.alignment)
        spans.append((t.offset, t.offset + t.nbytes, t.name))
    spans.sort()
    for (a0, a1, an), (b0, b1, bn) in zip(spans, spans[1:]):
        if b0 < a1:
            _fatal(f, f"tensors '{an}' ({a0}..{a1}) and '{bn}' ({b0}..{b1}) overlap")
    if f.unreadable:
        return
    # zero padding between tensors and after the last one (up to the file's end)
    for (a0, a1, an), nxt in zip(spans, spans[1:] + [None]):
        stop = min(f.data_offset + (nxt[0] if nxt else _align(a1, f.alignment)), f.size)
        if any(f.data[f.data_offset + a1:stop]):
            f.violations.append(("spec", f"the padding after tensor '{an}' is not all zero bytes"))
            break
    if f.tensors and f.data_offset + expected > f.size:
        f.violations.append(("ggml", f"the data section, each tensor padded to the alignment, ends at "
                                     f"{f.data_offset + expected} but the file has {f.size} bytes "
                                     f"(gguf.cpp reads the padded section; pad after the last tensor)"))


def read(path):
    with open(path, "rb") as fh:
        return parse(memoryview(fh.read()))


# ---------------------------------------------------------------------------------------
# dequantisation
# ---------------------------------------------------------------------------------------

def raw_bytes(f, t):
    start = f.data_offset + t.offset
    return bytes(f.data[start:start + t.nbytes])


def dequantize(f, t):
    """float32 values of tensor t, shaped [ne[n-1], ..., ne[0]] (numpy row-major: the last
    GGUF dimension first). F32/F16/BF16/Q8_0 and the plain integer/F64 types."""
    name = GGML_TYPES[t.type_id][0]
    raw = raw_bytes(f, t)
    if name == "F32":
        v = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    elif name == "F16":
        v = np.frombuffer(raw, dtype="<f2").astype(np.float32)
    elif name == "BF16":  # the upper 16 bits of a float32
        v = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    elif name == "Q8_0":  # blocks of 34 bytes: fp16 d, then 32 x int8 q; x = q * d
        blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 34)
        d = blocks[:, :2].copy().view("<f2").astype(np.float32)
        q = blocks[:, 2:].copy().view(np.int8).astype(np.float32)
        v = (q * d).reshape(-1)
    elif name in ("F64", "I8", "I16", "I32", "I64"):
        dt = {"F64": "<f8", "I8": "i1", "I16": "<i2", "I32": "<i4", "I64": "<i8"}[name]
        v = np.frombuffer(raw, dtype=dt).astype(np.float32)
    else:
        raise GGUFError(f"tensor '{t.name}': dequantising {name} is not implemented here")
    shape = tuple(reversed(t.ne)) if t.ne else ()
    return v.reshape(shape)


# ---------------------------------------------------------------------------------------
# dump
# ---------------------------------------------------------------------------------------

def _fmt_float32(x):
    return f"{str(np.float32(x))} bits=0x{struct.unpack('<I', struct.pack('<f', x))[0]:08x}"


def _fmt_scalar(v, short=False):
    name = VALUE_TYPES[v.vtype][0]
    if v.vtype == T_STRING:
        return json.dumps(v.value.decode("utf-8", "surrogateescape"), ensure_ascii=True)
    if v.vtype == T_BOOL:
        return "true" if v.value == 1 else "false" if v.value == 0 else f"bad({v.value})"
    if name == "f32":
        return str(np.float32(v.value)) if short else _fmt_float32(v.value)
    if name == "f64":
        return repr(float(v.value))
    return str(v.value)


def _fmt_value(v, short=False):
    if v.vtype != T_ARRAY:
        return _fmt_scalar(v, short)
    et = VALUE_TYPES[v.elem_type][0]
    n = len(v.value)
    sha = hashlib.sha256(v.raw).hexdigest()
    head = f"arr[{et}] n={n} sha256={sha}"
    if n <= 8:
        return f"{head} items=[{', '.join(_fmt_value(x, True) for x in v.value)}]"
    return f"{head} first3=[{', '.join(_fmt_value(x, True) for x in v.value[:3])}]"


def dump(f):
    """One item per line:
      gguf-reference-dump 1
      file.size N / header.version V / header.tensor_count T / header.kv_count K
      alignment A (default|general.alignment) / data.offset D
      kv KEY TYPE VALUE           scalars; strings JSON-quoted (ASCII escapes); f32 also as bits
      kv KEY arr[T] n=N sha256=H items=[...] | first3=[...]
                                  H: sha256 of the array's stored encoding (element type u32,
                                  count u64, elements; strings as u64 length + bytes)
      tensor NAME TYPE ne=[ne0,ne1,..] offset=O nbytes=B sha256=H [f32.sha256=H2 first4=[...]]
                                  H: sha256 of the stored bytes; H2: of the dequantised values as
                                  little-endian float32 (F32/F16/BF16/Q8_0 and integer types)"""
    lines = ["gguf-reference-dump 1", f"file.size {f.size}", f"header.version {f.version}",
             f"header.tensor_count {len(f.tensors)}", f"header.kv_count {len(f.kvs)}",
             f"alignment {f.alignment} ({'general.alignment' if f.alignment_from_key else 'default'})",
             f"data.offset {f.data_offset}"]
    for kv in f.kvs:
        v = kv.value
        if v.vtype == T_ARRAY:
            lines.append(f"kv {kv.key} {_fmt_value(v)}")
        else:
            lines.append(f"kv {kv.key} {VALUE_TYPES[v.vtype][0]} {_fmt_value(v)}")
    for t in f.tensors:
        tname = GGML_TYPES[t.type_id][0]
        line = (f"tensor {t.name} {tname} ne=[{','.join(str(d) for d in t.ne)}] offset={t.offset} "
                f"nbytes={t.nbytes} sha256={hashlib.sha256(raw_bytes(f, t)).hexdigest()}")
        try:
            v = dequantize(f, t).astype("<f4").reshape(-1)
            line += (f" f32.sha256={hashlib.sha256(v.tobytes()).hexdigest()} "
                     f"first4=[{', '.join(str(np.float32(x)) for x in v[:4])}]")
        except GGUFError:
            pass
        lines.append(line)
    return "\n".join(lines) + "\n"


def main(argv):
    usage = ("usage: gguf_reference.py dump FILE | tensors FILE OUT.npz | "
             "check [--spec-only] FILE")
    if len(argv) < 2:
        print(usage, file=sys.stderr)
        return 2
    cmd, args = argv[1], argv[2:]
    spec_only = "--spec-only" in args
    args = [a for a in args if a != "--spec-only"]
    if cmd not in ("dump", "tensors", "check") or len(args) != (2 if cmd == "tensors" else 1):
        print(usage, file=sys.stderr)
        return 2
    path = args[0]
    try:
        f = read(path)
    except GGUFError as e:
        print(f"{path}: {e}")
        return 1
    except OSError as e:
        print(f"{path}: cannot read ({e.strerror})")
        return 1
    if cmd == "check":
        bad = [(tag, msg) for tag, msg in f.violations if not spec_only or tag == "spec"]
        if bad:
            print(f"{path}: [{bad[0][0]}] {bad[0][1]}")
            return 1
        print(f"ok {path}: GGUF v{f.version}, {len(f.kvs)} keys, {len(f.tensors)} tensors, "
              f"alignment {f.alignment}, data at {f.data_offset}, {f.size} bytes")
        return 0
    if f.unreadable:
        print(f"{path}: {f.unreadable}")
        return 1
    if cmd == "dump":
        sys.stdout.write(dump(f))
        return 0
    try:
        arrays = {t.name: dequantize(f, t) for t in f.tensors}
    except GGUFError as e:
        print(f"{path}: {e}")
        return 1
    np.savez(args[1], **arrays)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
