#!/usr/bin/python3
"""Writes the small seed inputs of tests/fuzz/corpus/ that are not copies of
files in the repository (those are copied by this script too, so one run
regenerates every seed). Seeds must be small (a few KB): libFuzzer mutates
faster and reaches deeper when its inputs are short.

    /usr/bin/python3 tests/fuzz/make_seeds.py     (from the repository root)

Layouts follow the parsers' headers: model/safetensors.h, model/llama2c.h,
model/tokenizers/tokenizer_llama2c.h, and the harnesses' own prefixes (fuzz_*.cpp).
"""
import json
import os
import random
import shutil
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
rng = random.Random(18)


def out(harness, name, data):
    os.makedirs(os.path.join(CORPUS, harness), exist_ok=True)
    with open(os.path.join(CORPUS, harness, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def floats(n):
    return [rng.uniform(-1, 1) for _ in range(n)]


# ---- a tiny Llama config: D=4 L=1 H=2 Hkv=1 Dh=2 F=6 V=5 T=3 ----------------
D, L, H, HKV, DH, F, V, T = 4, 1, 2, 1, 2, 6, 5, 3
Q, KV = H * DH, HKV * DH

# ---- safetensors: F32, F16 and BF16 tensors, with __metadata__ --------------
def safetensors(dtype):
    size = {"F32": 4, "F16": 2, "BF16": 2}[dtype]
    tensors = {"model.embed_tokens.weight": [V, D], "model.norm.weight": [D],
               "model.layers.0.self_attn.k_proj.weight": [KV, D]}
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name, shape in tensors.items():
        n = 1
        for d in shape:
            n *= d
        if dtype == "F32":
            raw = struct.pack("<%df" % n, *floats(n))
        elif dtype == "F16":
            raw = struct.pack("<%de" % n, *floats(n))
        else:  # BF16: the top half of a float32
            raw = b"".join(struct.pack("<f", x)[2:] for x in floats(n))
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + size * n]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + data


for dtype in ("F32", "F16", "BF16"):
    out("safetensors", "tiny_%s.safetensors" % dtype.lower(), safetensors(dtype))

# ---- llama2.c checkpoints: legacy tied, legacy separate classifier, v1 ------
def checkpoint(version, shared):
    per_layer = 2 * D + Q * D + 2 * KV * D + D * Q + 3 * F * D
    n = V * D + L * per_layer + D + (0 if shared else V * D)
    if version == 0:
        n += 2 * T * (DH // 2)
        head = struct.pack("<7i", D, F, L, H, HKV, V if shared else -V, T)
    else:
        head = struct.pack("<Ii7iB", 0x616B3432, 1, D, F, L, H, HKV, V, T, 1 if shared else 0)
        head += b"\0" * (256 - len(head))
    return head + struct.pack("<%df" % n, *floats(n))


out("llama2c_checkpoint", "tiny_legacy_tied.bin", checkpoint(0, True))
out("llama2c_checkpoint", "tiny_legacy_separate.bin", checkpoint(0, False))
out("llama2c_checkpoint", "tiny_v1_tied.bin", checkpoint(1, True))

# ---- tokenizer.bin: <unk> <s> </s>, the 256 byte tokens, then a few pieces --
pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
pieces += [" ", "a", "e", "n", "t", " a", "an", "en", "te", " t", "Once", " time"]
blob = struct.pack("<i", max(len(p.encode()) for p in pieces))
for i, p in enumerate(pieces):
    raw = p.encode()
    blob += struct.pack("<fi", -float(i), len(raw)) + raw
# The harness's first two bytes: vocab_size - 1, little-endian.
out("llama2c_tokenizer", "tiny_tokenizer.bin", struct.pack("<H", len(pieces) - 1) + blob)

# ---- copies of real files ----------------------------------------------------
model = os.path.join(ROOT, "assets", "model")
shutil.copy(os.path.join(model, "config.json"), os.path.join(CORPUS, "config_json", "shipped.json"))
golden = os.path.join(ROOT, "tests", "golden", "models")
for d in sorted(os.listdir(golden)):
    cfg = os.path.join(golden, d, "config.json")
    if os.path.isfile(cfg):
        shutil.copy(cfg, os.path.join(CORPUS, "config_json", d + ".json"))
os.makedirs(os.path.join(CORPUS, "bpe_tokenizer"), exist_ok=True)
shutil.copy(os.path.join(model, "tokenizer.bpe"),
            os.path.join(CORPUS, "bpe_tokenizer", "shipped.bpe"))
out("bpe_tokenizer", "three_merges.bpe",
    "plab-bpe 1\nvocab_size 261\nbos 256\neos 257\nmerges 3\n116 104\n258 101\n32 259\n")

# ---- tokenizer.json: the test tokenizers, minified; NUL + tokenizer_config.json -
hf = os.path.join(ROOT, "tests", "golden", "hf_tokenizers")
for d in sorted(os.listdir(hf)):
    if not os.path.isdir(os.path.join(hf, d)):
        continue
    with open(os.path.join(hf, d, "tokenizer.json"), encoding="utf-8") as f:
        seed = json.dumps(json.load(f), ensure_ascii=False, separators=(",", ":")).encode()
    cfg = os.path.join(hf, d, "tokenizer_config.json")
    if os.path.exists(cfg):
        with open(cfg, "rb") as f:
            seed += b"\0" + f.read()
    out("hf_tokenizer", d + ".json", seed)
# Hand-written, tiny: three byte-level merges over the 256 byte characters ...
def byte_chars():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]
vocab = {c: i for i, c in enumerate(byte_chars())}
vocab.update({"th": 256, "the": 257, "\u0120the": 258})
out("hf_tokenizer", "tiny_byte_level.json", json.dumps(
    {"added_tokens": [{"id": 259, "content": "<|eot|>", "special": True, "lstrip": True}],
     "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True},
     "model": {"type": "BPE", "vocab": vocab, "merges": ["t h", "th e", ["\u0120", "the"]]}},
    ensure_ascii=False, separators=(",", ":")))
# ... and a SentencePiece-style file with byte fallback and a Metaspace split.
sp = {"<unk>": 0, "<s>": 1, "</s>": 2}
sp.update({"<0x%02X>" % b: 3 + b for b in range(256)})
sp.update({"\u2581": 259, "a": 260, "b": 261, "\u2581a": 262, "\u2581ab": 263})
out("hf_tokenizer", "tiny_sentencepiece.json", json.dumps(
    {"added_tokens": [{"id": 1, "content": "<s>", "special": True}],
     "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                       "split": True},
     "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"},
     "model": {"type": "BPE", "byte_fallback": True, "unk_token": "<unk>", "fuse_unk": True,
               "vocab": sp, "merges": ["\u2581 a", "\u2581a b"]}},
    ensure_ascii=False, separators=(",", ":")).encode() + b'\0{"bos_token": "<s>"}')

# ---- chunk plans: two bytes of prompt length, then the plan ------------------
for t, plan in [(10, "full"), (10, "4"), (8, "3,1,4"), (5, "1,1,1,1,1"), (3, "7")]:
    out("chunk_plan", "t%d_%s" % (t, plan.replace(",", "_")), struct.pack("<H", t) + plan.encode())

# ---- mask specs: T, heads, the spec, and after a newline a mask file --------
specs = ["causal", "window:8+sink:2", "dilated:4,2", "chunked:4", "prefix:6", "docs:5,7,4",
         "docs:bos", "window:4|prefix:3", "window:8+alibi", "causal+softcap:30",
         "chunked:4+sink:1+window:3|docs:8,8+alibi"]
for i, spec in enumerate(specs):
    out("mask_spec", "spec%02d" % i, bytes([15, 4]) + spec.encode())
matrix = "\n".join(" ".join("1" if k <= q else "0" for k in range(4)) for q in range(4))
out("mask_spec", "file_4x4", bytes([3, 2]) + b"file:m.txt\n# lower triangle\n" + matrix.encode())

# ---- JSON Lines: byte 0 even = a workload, odd = a prompts file --------------
out("json_lines", "workload", b"\x00" + b'{"arrival_s": 0, "prompt_tokens": 5}\r\n\r\n'
    b'{"arrival_s": 0.25, "prompt": "Once upon a time", "max_new_tokens": 32}\n')
out("json_lines", "workload_bom", b"\x02\xef\xbb\xbf" + b'{"arrival_s": 1.5, "prompt_tokens": 300}\n')
out("json_lines", "prompts_jsonl", b"\x01" + b'{"prompt": "Tom had a dog", "max_new_tokens": 8}\n'
    b'\n{"prompt": "The sun"}\n')
out("json_lines", "prompts_text", b"\x03" + b"Once upon a time\r\n  \nLily saw a {bird}\n")

# ---- GGUF: tiny Llama models (layout: model/gguf.h, names: model/gguf_model.h) --
# F32 with no tokenizer (V=5 -> ids), a "llama" vocabulary, a "gpt2" one, and a
# Q8_0 + F16 file (rows of 32 values: whole Q8_0 blocks).
grng = random.Random(49)
GGUF_TYPES = {"u32": 4, "f32": 6, "bool": 7, "string": 8, "array": 9, "i32": 5}


def gguf_str(s):
    raw = s.encode()
    return struct.pack("<Q", len(raw)) + raw


def gguf_value(kind, v):
    if kind == "u32":
        return struct.pack("<I", v)
    if kind == "i32":
        return struct.pack("<i", v)
    if kind == "f32":
        return struct.pack("<f", v)
    if kind == "bool":
        return struct.pack("<B", 1 if v else 0)
    if kind == "string":
        return gguf_str(v)
    elem, items = v  # ("string", [...]) etc.
    return struct.pack("<IQ", GGUF_TYPES[elem], len(items)) + b"".join(
        gguf_value(elem, x) for x in items)


def f16_bits(x):
    return struct.unpack("<H", struct.pack("<e", x))[0]


def gguf_tensor_bytes(shape, ggml_type):
    n = 1
    for d in shape:
        n *= d
    vals = [grng.uniform(-0.5, 0.5) for _ in range(n)]
    if ggml_type == 0:
        return struct.pack("<%df" % n, *vals)
    if ggml_type == 1:
        return struct.pack("<%de" % n, *vals)
    out_b = b""  # Q8_0: per 32 values, an f16 scale d = max|x| / 127 and int8 round(x / d)
    for b in range(0, n, 32):
        blk = vals[b:b + 32]
        d = max(abs(x) for x in blk) / 127 or 1.0
        out_b += struct.pack("<e", d) + struct.pack("<32b", *[round(x / d) for x in blk])
    return out_b


def gguf_model(d, layers, heads, kv_heads, ff, vocab, kv, matrix_type=0):
    dh = d // heads
    names = [("token_embd.weight", [vocab, d], matrix_type)]
    for i in range(layers):
        b = "blk.%d." % i
        names += [(b + "attn_norm.weight", [d], 0), (b + "attn_q.weight", [heads * dh, d], matrix_type),
                  (b + "attn_k.weight", [kv_heads * dh, d], matrix_type),
                  (b + "attn_v.weight", [kv_heads * dh, d], matrix_type),
                  (b + "attn_output.weight", [d, heads * dh], matrix_type),
                  (b + "ffn_norm.weight", [d], 0), (b + "ffn_gate.weight", [ff, d], matrix_type),
                  (b + "ffn_up.weight", [ff, d], matrix_type), (b + "ffn_down.weight", [d, ff], 1 if matrix_type else 0)]
    names.append(("output_norm.weight", [d], 0))
    meta = [("general.architecture", "string", "llama"), ("llama.context_length", "u32", 16),
            ("llama.embedding_length", "u32", d), ("llama.block_count", "u32", layers),
            ("llama.feed_forward_length", "u32", ff), ("llama.attention.head_count", "u32", heads),
            ("llama.attention.head_count_kv", "u32", kv_heads),
            ("llama.rope.freq_base", "f32", 10000.0),
            ("llama.attention.layer_norm_rms_epsilon", "f32", 1e-5)] + kv
    head = b"GGUF" + struct.pack("<IQQ", 3, len(names), len(meta))
    for key, kind, v in meta:
        head += gguf_str(key) + struct.pack("<I", GGUF_TYPES[kind]) + gguf_value(kind, v)
    data, offset = b"", 0
    for name, shape, t in names:
        raw = gguf_tensor_bytes(shape, t)
        head += gguf_str(name) + struct.pack("<I", len(shape))
        head += b"".join(struct.pack("<Q", x) for x in reversed(shape))
        head += struct.pack("<IQ", t, len(data))
        data += raw + b"\0" * (-len(raw) % 32)
    return head + b"\0" * (-len(head) % 32) + data


out("gguf", "tiny_no_vocab.gguf", gguf_model(4, 1, 2, 1, 6, 5, []))
spm = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + ["\u2581", "a", "\u2581a"]
out("gguf", "tiny_llama_vocab.gguf", gguf_model(4, 1, 2, 1, 6, len(spm), [
    ("tokenizer.ggml.model", "string", "llama"), ("tokenizer.ggml.tokens", "array", ("string", spm)),
    ("tokenizer.ggml.scores", "array", ("f32", [0.0] * 259 + [-1.0, -2.0, -3.0])),
    ("tokenizer.ggml.token_type", "array", ("i32", [2, 3, 3] + [6] * 256 + [1, 1, 1])),
    ("tokenizer.ggml.bos_token_id", "u32", 1), ("tokenizer.ggml.eos_token_id", "u32", 2)]))
bl = byte_chars() + ["th", "\u0120t", "<|endoftext|>"]
out("gguf", "tiny_gpt2_vocab.gguf", gguf_model(4, 1, 2, 1, 6, len(bl), [
    ("tokenizer.ggml.model", "string", "gpt2"), ("tokenizer.ggml.pre", "string", "gpt-2"),
    ("tokenizer.ggml.tokens", "array", ("string", bl)),
    ("tokenizer.ggml.token_type", "array", ("i32", [1] * 258 + [3])),
    ("tokenizer.ggml.merges", "array", ("string", ["t h", "\u0120 t"])),
    ("tokenizer.ggml.eos_token_id", "u32", 258)]))
out("gguf", "tiny_q8_0_f16.gguf", gguf_model(32, 1, 2, 1, 32, 5, [], matrix_type=8))
