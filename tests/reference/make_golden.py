"""Generates the golden files under tests/golden/ from the independent reference.

What it teaches: golden data pins behaviour down across languages. The C++
tests (tests/model/test_golden.cpp) read these files without PyTorch and
compare the cpu-ref and cpu backends with the reference's logits.

Regenerate (needs Debian's python3-torch; takes a minute or two):
    /usr/bin/python3 tests/reference/make_golden.py
It rewrites
    tests/golden/models/<name>/     random models: config.json + model.safetensors
                                    (byte tokenizer, weights from fixed seeds)
    tests/golden/models/rand_llama2c_gqa.bin   a llama2.c legacy .bin written here (interleaved
                                    q/k rows), golden logits from the interleaved-pairing reference
    tests/golden/<name>.golden      logits of every position for fixed prompts
    tests/golden/tokenizer_bpe.json the shipped BPE's ids for fixed strings
for the random models and for the shipped model in assets/model.

Golden file format, version 1 (little-endian):
    8 bytes  magic "PLABGOLD"
    u32      version (1)
    u32      n = length of the JSON text that follows
    n bytes  JSON: {"model": repo-relative model dir, "vocab": V, "regenerate": "...",
                    "cases": [{"name", "text" (or null), "tokens": [ids], "offset": k}]}
    floats   f32 logits, case after case; case c is (T_c, V) row-major at float index offset_c
The logits are computed in float64 and rounded to f32 once.

What it leaves out: golden K/V or attention maps (the engine's own tests
prove those equal across chunkings; logits here check the whole pass).
"""

import json
import os
import struct
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "assets", "recipe"))

import reference_forward  # noqa: E402

GOLDEN = os.path.join(REPO, "tests", "golden")
REGENERATE = "/usr/bin/python3 tests/reference/make_golden.py"

# Random models: grouped-query attention, odd head counts, head_dim that is
# not a power of two (RoPE needs it even), non-default rope_theta and eps,
# tied and separate classifiers. Vocabulary 258 = the byte tokenizer's.
RANDOM_MODELS = {
    "rand_gqa_h3_dh10": dict(dim=40, n_layers=2, n_heads=3, n_kv_heads=1, head_dim=10,
                             hidden_dim=72, rope_theta=500000.0, eps=1e-6, tied=False, seed=11),
    "rand_gqa_h6_dh6": dict(dim=48, n_layers=3, n_heads=6, n_kv_heads=2, head_dim=6,
                            hidden_dim=100, rope_theta=10000.0, eps=1e-5, tied=True, seed=12),
    "rand_mha_h5_dh8": dict(dim=40, n_layers=2, n_heads=5, n_kv_heads=5, head_dim=8,
                            hidden_dim=64, rope_theta=1000000.0, eps=1e-5, tied=False, seed=13),
}
VOCAB = 258
MAX_SEQ = 64


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        raw = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = {"generator": REGENERATE}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def make_random_model(name, spec):
    rng = np.random.RandomState(spec["seed"])
    d, f, dh = spec["dim"], spec["hidden_dim"], spec["head_dim"]
    hq, hkv = spec["n_heads"] * dh, spec["n_kv_heads"] * dh

    def mat(rows, cols):  # std 1/sqrt(fan_in): activations stay O(1) through the layers
        return rng.normal(0.0, 1.0 / np.sqrt(cols), size=(rows, cols))

    def norm(n):
        return 1.0 + 0.2 * rng.normal(size=n)

    t = {"model.embed_tokens.weight": rng.normal(size=(VOCAB, d))}
    for l in range(spec["n_layers"]):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = norm(d)
        t[p + "self_attn.q_proj.weight"] = mat(hq, d) * 2.0  # sharper attention than uniform
        t[p + "self_attn.k_proj.weight"] = mat(hkv, d) * 2.0
        t[p + "self_attn.v_proj.weight"] = mat(hkv, d)
        t[p + "self_attn.o_proj.weight"] = mat(d, hq)
        t[p + "post_attention_layernorm.weight"] = norm(d)
        t[p + "mlp.gate_proj.weight"] = mat(f, d)
        t[p + "mlp.up_proj.weight"] = mat(f, d)
        t[p + "mlp.down_proj.weight"] = mat(d, f)
    t["model.norm.weight"] = norm(d)
    if not spec["tied"]:
        t["lm_head.weight"] = mat(VOCAB, d)
    cfg = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": d, "num_hidden_layers": spec["n_layers"],
        "num_attention_heads": spec["n_heads"], "num_key_value_heads": spec["n_kv_heads"],
        "head_dim": dh, "intermediate_size": f, "vocab_size": VOCAB,
        "max_position_embeddings": MAX_SEQ, "rope_theta": spec["rope_theta"],
        "rms_norm_eps": spec["eps"], "tie_word_embeddings": spec["tied"],
        "hidden_act": "silu", "torch_dtype": "float32", "plab_tokenizer": "byte",
    }
    out = os.path.join(GOLDEN, "models", name)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as fh:
        json.dump(cfg, fh, indent=2)
        fh.write("\n")
    write_safetensors(os.path.join(out, "model.safetensors"), t)
    return os.path.relpath(out, REPO)


def model_dir(model_rel):
    """Repo-relative model path -> directory; $PLAB_MODEL stands in for assets/model."""
    if model_rel == os.path.join("assets", "model") and os.environ.get("PLAB_MODEL"):
        return os.environ["PLAB_MODEL"]
    return os.path.join(REPO, model_rel)


def write_golden(path, model_rel, cases, cfg_override=None):
    """cases: list of (name, text or None, tokens). Computes logits with the reference."""
    pairing = "half"
    if cfg_override is None:
        cfg, w = reference_forward.read_model_dir(model_dir(model_rel))
    else:
        cfg, w, pairing = cfg_override
    vocab = cfg["vocab_size"]
    meta = {"model": model_rel, "vocab": vocab, "regenerate": REGENERATE, "cases": []}
    data, offset = [], 0
    for name, text, tokens in cases:
        logits = reference_forward.forward_all_logits(cfg, w, tokens, pairing).numpy().astype("<f4")
        assert logits.shape == (len(tokens), vocab)
        meta["cases"].append({"name": name, "text": text, "tokens": list(map(int, tokens)),
                              "offset": offset, "argmax_last": int(logits[-1].argmax())})
        data.append(logits.tobytes())
        offset += logits.size
    text = json.dumps(meta, indent=1).encode()
    with open(path, "wb") as f:
        f.write(b"PLABGOLD" + struct.pack("<II", 1, len(text)) + text + b"".join(data))
    print(f"wrote {os.path.relpath(path, REPO)}: {len(cases)} cases")


def main():
    import argparse
    ap = argparse.ArgumentParser(description="Regenerate tests/golden/ from the reference.")
    ap.add_argument("--only", choices=["random", "shipped"], help="regenerate one half only")
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(GOLDEN, exist_ok=True)
    if args.only != "shipped":
        make_random_goldens()
        make_llama2c_golden()
    if args.only != "random":
        make_shipped_goldens()


def make_random_goldens():
    # 1. Random models, prompts of random byte ids (BOS first) of odd lengths.
    for i, (name, spec) in enumerate(RANDOM_MODELS.items()):
        rel = make_random_model(name, spec)
        rng = np.random.RandomState(100 + i)
        cases = [(f"random_{n}", None, [256] + list(rng.randint(0, 256, size=n - 1)))
                 for n in (1, 7, 33)]
        cases.append(("text", "Prefill Lab", [256] + list("Prefill Lab".encode())))
        write_golden(os.path.join(GOLDEN, f"{name}.golden"), rel, cases)


def write_llama2c_legacy(path, cfg, t):
    """A llama2.c legacy (v0) .bin, separate classifier, written from HF-layout tensors `t`.
    q/k rows go from half-split to interleaved order, done here independently of the C++
    (src/model/rope_permute.h): interleaved row 2i+s of a head = half-split row s*Dh/2+i."""
    D, L, H, Hkv = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    Dh, F, V, T = D // H, cfg["intermediate_size"], cfg["vocab_size"], cfg["max_position_embeddings"]

    def to_interleaved(w, heads):
        w = w.reshape(heads, 2, Dh // 2, D)        # [head][s][i]
        return w.transpose(0, 2, 1, 3).reshape(heads * Dh, D)  # [head][i][s]

    lay = [f"model.layers.{l}." for l in range(L)]
    il = {}
    for p in lay:
        il[p + "self_attn.q_proj.weight"] = to_interleaved(t[p + "self_attn.q_proj.weight"], H)
        il[p + "self_attn.k_proj.weight"] = to_interleaved(t[p + "self_attn.k_proj.weight"], Hkv)
    order = [t["model.embed_tokens.weight"]]
    order += [t[p + "input_layernorm.weight"] for p in lay]
    order += [il[p + "self_attn.q_proj.weight"] for p in lay]
    order += [il[p + "self_attn.k_proj.weight"] for p in lay]
    order += [t[p + "self_attn.v_proj.weight"] for p in lay]
    order += [t[p + "self_attn.o_proj.weight"] for p in lay]
    order += [t[p + "post_attention_layernorm.weight"] for p in lay]
    order += [t[p + "mlp.gate_proj.weight"] for p in lay]   # w1
    order += [t[p + "mlp.down_proj.weight"] for p in lay]   # w2
    order += [t[p + "mlp.up_proj.weight"] for p in lay]     # w3
    order += [t["model.norm.weight"]]
    ang = np.arange(T)[:, None] * 10000.0 ** (-np.arange(0, Dh, 2) / Dh)[None, :]
    order += [np.cos(ang), np.sin(ang), t["lm_head.weight"]]
    with open(path, "wb") as f:
        f.write(struct.pack("<7i", D, F, L, H, Hkv, -V, T))  # negative vocab: separate classifier
        for a in order:
            f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())
    # The weights as a reader of this file sees them: q/k rows interleaved.
    w = {k: torch.from_numpy(np.asarray(v, dtype=np.float32).astype(np.float64)) for k, v in t.items()}
    for k, v in il.items():
        w[k] = torch.from_numpy(np.asarray(v, dtype=np.float32).astype(np.float64))
    return w


def make_llama2c_golden():
    """A random GQA model written as a llama2.c .bin by Python, with golden logits from the
    reference run with the *interleaved* pairing on the file's own rows."""
    name = "rand_llama2c_gqa"
    rel = make_random_model(name, dict(dim=48, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=12,
                                       hidden_dim=80, rope_theta=10000.0, eps=1e-5, tied=False,
                                       seed=14))
    cfg, w_hf = reference_forward.read_model_dir(os.path.join(REPO, rel))
    t = {k: v.numpy() for k, v in w_hf.items()}
    bin_rel = os.path.join("tests", "golden", "models", f"{name}.bin")
    w_il = write_llama2c_legacy(os.path.join(REPO, bin_rel), cfg, t)
    tokens = [256] + list(np.random.RandomState(200).randint(0, 256, size=20))
    logits = reference_forward.forward_all_logits(cfg, w_il, tokens, pairing="interleaved")
    logits_hf = reference_forward.forward_all_logits(cfg, w_hf, tokens, pairing="half")
    err = float((logits - logits_hf).abs().max())
    assert err < 1e-9, f"interleaved and half-split forwards disagree by {err}"
    # The .bin golden: same model, read through the llama2.c path.
    write_golden(os.path.join(GOLDEN, f"{name}.golden"), bin_rel, [("random_21", None, tokens)],
                 cfg_override=(cfg, w_il, "interleaved"))


def make_shipped_goldens():
    # 2. The shipped model with its BPE tokenizer, on held-out story prompts.
    import bpe  # assets/recipe/bpe.py: the tokenizer's Python definition
    model_rel = os.path.join("assets", "model")
    tok = bpe.Tokenizer.load(os.path.join(model_dir(model_rel), "tokenizer.bpe"))
    with open(os.path.join(model_dir(model_rel), "eval", "completions.tsv")) as f:
        rows = [line.rstrip("\n").split("\t") for line in f if not line.startswith("#")]
    prompts = [("heldout_give_back", next(r[1] for r in rows if r[0] == "give_back")),
               ("heldout_thanks", next(r[1] for r in rows if r[0] == "thanks")),
               ("free_text", "Once upon a time, Lily went to the park with a red kite.")]
    cases = [(n, t, tok.encode(t, add_bos=True)) for n, t in prompts]
    write_golden(os.path.join(GOLDEN, "shipped_model.golden"), model_rel, cases)

    # 3. Tokenizer ids for fixed strings (ASCII, UTF-8, odd bytes, the corpus).
    strings = [p[1] for p in prompts] + [
        "", " ", "  two  spaces", "Hello, World! 123 4567", "tab\there\nnew line",
        "héllo wörld — 日本語 🎉", "Mia wrote a secret list: zup kel mo. Ben read it again: zup kel mo.",
    ]
    with open(os.path.join(GOLDEN, "tokenizer_bpe.json"), "w") as f:
        json.dump({"magic": "PLABTOKGOLD", "version": 1, "tokenizer": f"{model_rel}/tokenizer.bpe",
                   "regenerate": REGENERATE,
                   "cases": [{"text": s, "ids": tok.encode(s)} for s in strings]},
                  f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("wrote tests/golden/tokenizer_bpe.json")


if __name__ == "__main__":
    main()
