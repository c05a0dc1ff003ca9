#!/usr/bin/python3
"""What `plab convert --to gguf` writes, read by an independent reader.

    gguf_writer_check.py PLAB SCRATCH_DIR

For the shipped model (GQA, tied, plab-bpe tokenizer) and tests/golden/gguf/bpe (untied,
head_dim 32 != D/H, a Hugging Face tokenizer.json), as F32 and as F16: the file must pass
every rule of tests/reference/gguf_reference.py's `check` (ggml's docs/gguf.md plus the
loader rules of ggml's gguf.cpp: magic, version, every key and value type, tensor infos,
alignment, offsets inside the file and not overlapping), its llama.* keys must state the
source's config.json, and every tensor must equal the source's safetensors tensor: bit for
bit (F32) or rounded to half by numpy (F16, 1-D norms F32), with q/k rows permuted to the
interleaved RoPE pairing the way llama.cpp's convert_hf_to_gguf.py LlamaModel.permute does
(written here again, independently of plab's rope_permute.h). Exit 1 with one line per
problem.
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import gguf_reference  # noqa: E402

problems = []


def fail(msg):
    problems.append(msg)
    print("FAIL " + msg)


def read_safetensors(path):
    with open(path, "rb") as fh:
        data = fh.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", name
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + b:8 + n + end], dtype="<f4").reshape(e["shape"])
    return out


def permute(w, n_head):
    # llama.cpp convert_hf_to_gguf.py, LlamaModel.permute: half-split -> interleaved rows.
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def expected_tensors(folder):
    cfg = json.load(open(os.path.join(folder, "config.json")))
    st = read_safetensors(os.path.join(folder, "model.safetensors"))
    h, hkv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    parts = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate",
             "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    out = {}
    for name, w in st.items():
        if name in names:
            out[names[name]] = w
            continue
        layer = name.split(".")[2]
        part = name[len("model.layers.%s." % layer):-len(".weight")]
        g = "blk.%s.%s.weight" % (layer, parts[part])
        if part == "self_attn.q_proj":
            w = permute(w, h)
        elif part == "self_attn.k_proj":
            w = permute(w, hkv)
        out[g] = w
    return cfg, out


def check(plab, folder, outtype, scratch):
    path = os.path.join(scratch, os.path.basename(folder.rstrip("/")) + "-" + outtype + ".gguf")
    r = subprocess.run([plab, "convert", folder, path, "--to", "gguf", "--outtype", outtype],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return fail("%s: plab convert failed: %s" % (path, r.stderr.strip()))
    f = gguf_reference.read(path)
    for tag, msg in f.violations:
        fail("%s: [%s] %s" % (path, tag, msg))
    cfg, expect = expected_tensors(folder)
    keys = {"llama.embedding_length": cfg["hidden_size"], "llama.block_count": cfg["num_hidden_layers"],
            "llama.feed_forward_length": cfg["intermediate_size"],
            "llama.attention.head_count": cfg["num_attention_heads"],
            "llama.attention.head_count_kv": cfg["num_key_value_heads"],
            "llama.context_length": cfg["max_position_embeddings"],
            "llama.attention.key_length": cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"],
            "llama.vocab_size": cfg["vocab_size"], "general.architecture": "llama"}
    for key, want in keys.items():
        got = f.kv(key)
        got = got.value if hasattr(got, "value") else got
        got = got.decode() if isinstance(got, bytes) else got
        if got != want:
            fail("%s: %s is %r, config.json says %r" % (path, key, got, want))
    theta = f.kv("llama.rope.freq_base")
    theta = theta.value if hasattr(theta, "value") else theta
    if not np.isclose(theta, cfg.get("rope_theta", 10000.0), rtol=1e-7):
        fail("%s: rope.freq_base %r vs rope_theta %r" % (path, theta, cfg.get("rope_theta")))
    names = {t.name for t in f.tensors}
    if names != set(expect):
        fail("%s: tensors %s, expected %s" % (path, sorted(names ^ set(expect)), "the source's"))
    for t in f.tensors:
        if t.name not in expect:
            continue
        got = gguf_reference.dequantize(f, t)
        want = expect[t.name]
        kind = gguf_reference.GGML_TYPES[t.type_id][0]
        if outtype == "f16" and want.ndim == 2:
            want, wkind = want.astype(np.float16).astype(np.float32), "F16"
        else:
            wkind = "F32"
        if kind != wkind:
            fail("%s: %s is %s, expected %s" % (path, t.name, kind, wkind))
        elif got.shape != want.shape or got.tobytes() != np.ascontiguousarray(want, dtype=np.float32).tobytes():
            fail("%s: %s differs from the source (shape %s vs %s)" % (path, t.name, got.shape, want.shape))
    print("checked %s: %d keys, %d tensors" % (path, len(f.kvs), len(f.tensors)))


def main():
    plab, scratch = sys.argv[1], sys.argv[2]
    os.makedirs(scratch, exist_ok=True)
    for folder in (os.path.join(ROOT, "assets", "model"), os.path.join(ROOT, "tests", "golden", "gguf", "bpe")):
        for outtype in ("f32", "f16"):
            check(plab, folder, outtype, scratch)
    if problems:
        print("%d problems" % len(problems))
        return 1
    print("ok: every file passes the independent reader's rules and holds the source's tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
