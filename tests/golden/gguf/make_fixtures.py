#!/usr/bin/python3
"""Writes the GGUF fixtures of tests/golden/gguf/ and the small models they are converted from.

    PYTHONPATH=/tmp/gguf-py /usr/bin/python3 tests/golden/gguf/make_fixtures.py   (repo root)

/tmp/gguf-py is llama.cpp's gguf-py package (the GGUFWriter, quants, SpecialVocab and
utility modules, copied from llama.cpp; README.md says which commit and what was left
out). Only numpy is needed besides it. Every byte of every .gguf here is written by that
GGUFWriter; this script decides *what* it is given, the way llama.cpp's
convert_hf_to_gguf.py (class LlamaModel, same commit) would for these models:

  spm/  a llama2.c model (model.bin, legacy header, shared classifier, GQA) and its
        tokenizer.bin (SentencePiece-style pieces and scores). No llama.cpp converter
        reads llama2.c files through convert_hf_to_gguf.py, so the fixtures are what that
        script writes for the Hugging Face folder equivalent to them: the weights with
        Hugging Face's half-split q/k rows (transformers' convert_llama_weights_to_hf.py
        permutation of the .bin rows), a config.json, a tokenizer.model holding the same
        pieces/scores, and a Llama-2-style tokenizer.json/tokenizer_config.json
        (SPM_HF_FILES below). convert's permutation takes the q/k rows back to the .bin's.
  bpe/  a Hugging Face folder (config.json, model.safetensors with half-split q/k rows,
        untied lm_head, 3 heads / 1 kv head, head_dim 32 != hidden/heads) with the byte-level
        BPE tokenizer of tests/golden/hf_tokenizers/gpt2/.

The sources are regenerated too, from fixed seeds (numpy's RandomState), so the script
reproduces every committed file byte for byte; it finishes by running
tests/reference/gguf_reference.py check on each fixture and writing its dump beside it.
"""
import collections
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

import gguf  # llama.cpp's gguf-py (see the docstring)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
REFERENCE = os.path.join(REPO, "tests", "reference", "gguf_reference.py")
GPT2_TOKENIZER = os.path.join(REPO, "tests", "golden", "hf_tokenizers", "gpt2")

LLAMA_CPP_COMMIT = "0024aa7417efd50a7c2a79e049dfbbbceb0beaaf"  # convert_hf_to_gguf.py, gguf_writer.py, constants.py
SP_SPACE = "\u2581"  # SentencePiece's '▁'

# ---------------------------------------------------------------------------------------
# 1. The source models
# ---------------------------------------------------------------------------------------

SPM = dict(dim=32, hidden_dim=96, n_layers=2, n_heads=4, n_kv_heads=2, seq_len=128, seed=4901,
           n_merges=150)
BPE = dict(dim=32, hidden_dim=64, n_layers=2, n_heads=3, n_kv_heads=1, head_dim=32,
           max_pos=256, rope_theta=500000.0, eps=1e-6, seed=4902)

# Words the SentencePiece-style vocabulary is trained on: English three times as often as
# Russian, so an English word takes fewer pieces than a Russian one.
ENGLISH = """Once upon a time there was a little girl named Lily . She liked to play in the park
with her friends . The sun was warm and the sky was blue . They ran and played all day long ,
then they went home to eat dinner with their mother and father . The little dog was happy too .
It is a good day to learn how a model reads text , one token at a time ! What is the name of
the dog ? The girl and the dog like to run in the park"""
RUSSIAN = """Жила была маленькая девочка . Она любила играть в парке с друзьями . Солнце было
тёплым , а небо голубым . Они бегали и играли весь день , а потом пошли домой ужинать ."""
EXTRA_CHARS = "?!,.'-:;"


def train_pieces(n_merges):
    """SentencePiece-style BPE over the words above ('▁' marks a word start, as SentencePiece
    writes a space): the most frequent adjacent pair is merged first, ties by the pair's
    text. Returns the merged pieces in merge order and the characters by frequency."""
    words = collections.Counter()
    for text, weight in ((ENGLISH, 3), (RUSSIAN, 1)):
        for w in text.split():
            words[tuple(SP_SPACE + w)] += weight
    chars = collections.Counter()
    for w, c in words.items():
        for ch in w:
            chars[ch] += c
    for ch in EXTRA_CHARS:
        chars[ch] += 0
    merged = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        (a, b), c = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        if c < 2:
            break
        new = collections.Counter()
        for w, cnt in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] += cnt
        words = new
        if a + b not in merged:
            merged.append(a + b)
    by_freq = sorted(chars, key=lambda ch: (-chars[ch], ch))
    return merged, by_freq


def spm_vocabulary():
    """The SentencePiece model's pieces, scores and kinds, id order: <unk> <s> </s>, the 256
    byte pieces <0x00>..<0xFF>, the merged pieces (score -k for the k-th merge), then the
    single characters (lower scores), as a SentencePiece BPE model lays them out."""
    merged, chars = train_pieces(SPM["n_merges"])
    pieces = [("<unk>", 0.0, "unknown"), ("<s>", 0.0, "control"), ("</s>", 0.0, "control")]
    pieces += [("<0x%02X>" % b, 0.0, "byte") for b in range(256)]
    pieces += [(p, float(-k), "normal") for k, p in enumerate(merged)]
    pieces += [(ch, float(-(len(merged) + k)), "normal") for k, ch in enumerate(chars)]
    assert len({p for p, _, _ in pieces}) == len(pieces), "duplicate piece"
    return pieces


def write_tokenizer_bin(path, pieces):
    """llama2.c's tokenizer.bin as its tokenizer.py exports it: int32 max_token_length, then
    per piece float32 score, int32 byte length, bytes; '▁' is written as ' ', and <s>/</s>
    as '\\n<s>\\n'/'\\n</s>\\n' (llama2.c's export does that)."""
    texts = []
    for i, (p, _, _) in enumerate(pieces):
        t = "\n<s>\n" if i == 1 else "\n</s>\n" if i == 2 else p
        texts.append(t.replace(SP_SPACE, " ").encode("utf-8"))
    out = [struct.pack("<i", max(len(t) for t in texts))]
    for t, (_, score, _) in zip(texts, pieces):
        out.append(struct.pack("<fi", score, len(t)) + t)
    with open(path, "wb") as f:
        f.write(b"".join(out))


def random_weights(rng, dim, hidden, n_layers, q_rows, kv_rows, vocab, tied):
    """Hugging Face names and layout (q/k rows half-split). The recipe of
    tests/reference/make_golden.py (std 1/sqrt(fan_in) matrices, embeddings N(0,1), norms
    1+0.2·N(0,1): activations and logits stay O(1)) without its doubled q/k, whose sharper
    attention made Q8_0's rounding reorder the top tokens more often. Nothing is zero."""
    def mat(rows, cols):
        return rng.normal(0.0, 1.0 / np.sqrt(cols), size=(rows, cols))

    def norm(n):
        return 1.0 + 0.2 * rng.normal(size=n)

    t = {"model.embed_tokens.weight": rng.normal(size=(vocab, dim))}
    for l in range(n_layers):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = norm(dim)
        t[p + "self_attn.q_proj.weight"] = mat(q_rows, dim)
        t[p + "self_attn.k_proj.weight"] = mat(kv_rows, dim)
        t[p + "self_attn.v_proj.weight"] = mat(kv_rows, dim)
        t[p + "self_attn.o_proj.weight"] = mat(dim, q_rows)
        t[p + "post_attention_layernorm.weight"] = norm(dim)
        t[p + "mlp.gate_proj.weight"] = mat(hidden, dim)
        t[p + "mlp.up_proj.weight"] = mat(hidden, dim)
        t[p + "mlp.down_proj.weight"] = mat(dim, hidden)
    t["model.norm.weight"] = norm(dim)
    if not tied:
        t["lm_head.weight"] = mat(vocab, dim)
    return {k: v.astype(np.float32) for k, v in t.items()}


def hf_from_interleaved(w, n_heads):
    """transformers' convert_llama_weights_to_hf.py permute(): Meta/llama2.c interleaved q/k
    rows -> Hugging Face half-split rows (w.view(n_heads, dim1 // n_heads // 2, 2, dim2)
    .transpose(1, 2).reshape(dim1, dim2))."""
    rows, cols = w.shape
    return w.reshape(n_heads, rows // n_heads // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def make_spm_sources(out_dir):
    """spm/model.bin (llama2.c legacy header, shared classifier) and spm/tokenizer.bin.
    Returns the .bin's tensors by Hugging Face name (q/k rows still interleaved, as in the
    file), the pieces and the config."""
    c = SPM
    pieces = spm_vocabulary()
    V, D, F, L, H, Hkv = len(pieces), c["dim"], c["hidden_dim"], c["n_layers"], c["n_heads"], c["n_kv_heads"]
    Dh, T = D // H, c["seq_len"]
    rng = np.random.RandomState(c["seed"])
    hf = random_weights(rng, D, F, L, H * Dh, Hkv * Dh, V, tied=True)
    # The .bin holds interleaved q/k rows (llama2.c's layout); make them from the half-split
    # ones with the inverse of hf_from_interleaved.
    t = dict(hf)
    for l in range(L):
        for proj, heads in (("q_proj", H), ("k_proj", Hkv)):
            k = f"model.layers.{l}.self_attn.{proj}.weight"
            w = hf[k]
            rows = w.shape[0]
            t[k] = w.reshape(heads, 2, rows // heads // 2, D).swapaxes(1, 2).reshape(rows, D)
            assert np.array_equal(hf_from_interleaved(t[k], heads), w)
    lay = [f"model.layers.{l}." for l in range(L)]
    order = [t["model.embed_tokens.weight"]]                       # token_embedding_table
    order += [t[p + "input_layernorm.weight"] for p in lay]          # rms_att_weight
    order += [t[p + "self_attn.q_proj.weight"] for p in lay]         # wq
    order += [t[p + "self_attn.k_proj.weight"] for p in lay]         # wk
    order += [t[p + "self_attn.v_proj.weight"] for p in lay]         # wv
    order += [t[p + "self_attn.o_proj.weight"] for p in lay]         # wo
    order += [t[p + "post_attention_layernorm.weight"] for p in lay]  # rms_ffn_weight
    order += [t[p + "mlp.gate_proj.weight"] for p in lay]            # w1
    order += [t[p + "mlp.down_proj.weight"] for p in lay]            # w2
    order += [t[p + "mlp.up_proj.weight"] for p in lay]              # w3
    order += [t["model.norm.weight"]]                                # rms_final_weight
    ang = np.arange(T)[:, None] * 10000.0 ** (-np.arange(0, Dh, 2) / Dh)[None, :]
    order += [np.cos(ang), np.sin(ang)]                              # freq_cis_real, freq_cis_imag
    with open(os.path.join(out_dir, "model.bin"), "wb") as f:
        f.write(struct.pack("<7i", D, F, L, H, Hkv, V, T))  # positive vocab_size: shared classifier
        for a in order:
            f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())
    write_tokenizer_bin(os.path.join(out_dir, "tokenizer.bin"), pieces)
    return t, pieces


def read_spm_sources(out_dir):
    """Reads model.bin and tokenizer.bin back (independently of how they were written) and
    returns the Hugging Face folder convert_hf_to_gguf.py would be given for them: tensors
    (q/k rows half-split), hparams, and the SentencePiece model (pieces, scores, kinds)."""
    with open(os.path.join(out_dir, "model.bin"), "rb") as f:
        data = f.read()
    D, F, L, H, Hkv, V, T = struct.unpack_from("<7i", data, 0)
    assert V > 0, "shared classifier expected"
    Dh = D // H
    fl = np.frombuffer(data, dtype="<f4", offset=28)
    pos = 0

    def take(*shape):
        nonlocal pos
        n = int(np.prod(shape))
        a = fl[pos:pos + n].reshape(shape).copy()
        pos += n
        return a

    t = {"model.embed_tokens.weight": take(V, D)}
    lay = [f"model.layers.{l}." for l in range(L)]
    for name, shape in (("input_layernorm.weight", (D,)), ("self_attn.q_proj.weight", (H * Dh, D)),
                        ("self_attn.k_proj.weight", (Hkv * Dh, D)), ("self_attn.v_proj.weight", (Hkv * Dh, D)),
                        ("self_attn.o_proj.weight", (D, H * Dh)), ("post_attention_layernorm.weight", (D,)),
                        ("mlp.gate_proj.weight", (F, D)), ("mlp.down_proj.weight", (D, F)),
                        ("mlp.up_proj.weight", (F, D))):
        for p in lay:
            t[p + name] = take(*shape)
    t["model.norm.weight"] = take(D)
    take(T, Dh // 2)
    take(T, Dh // 2)
    assert pos == fl.size, "model.bin has trailing data"
    interleaved = dict(t)
    for p in lay:
        t[p + "self_attn.q_proj.weight"] = hf_from_interleaved(t[p + "self_attn.q_proj.weight"], H)
        t[p + "self_attn.k_proj.weight"] = hf_from_interleaved(t[p + "self_attn.k_proj.weight"], Hkv)

    with open(os.path.join(out_dir, "tokenizer.bin"), "rb") as f:
        tb = f.read()
    off, pieces = 4, []
    for i in range(V):
        score, n = struct.unpack_from("<fi", tb, off)
        text = tb[off + 8:off + 8 + n].decode("utf-8")
        off += 8 + n
        text = "<s>" if i == 1 else "</s>" if i == 2 else text.replace(" ", SP_SPACE)
        kind = ("unknown" if i == 0 else "control" if i in (1, 2) else
                "byte" if 3 <= i < 259 else "normal")
        pieces.append((text, score, kind))
    assert off == len(tb)
    hparams = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": D, "intermediate_size": F, "num_hidden_layers": L,
        "num_attention_heads": H, "num_key_value_heads": Hkv, "head_dim": Dh,
        "vocab_size": V, "max_position_embeddings": T, "rope_theta": 10000.0,
        "rms_norm_eps": 1e-05, "tie_word_embeddings": True, "hidden_act": "silu",
        "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2,
    }
    return t, interleaved, hparams, pieces


# The rest of the Hugging Face folder equivalent to spm/ (convert reads these with
# gguf.SpecialVocab): Llama 2's tokenizer_config.json as first published (no
# added_tokens_decoder) and the parts of its tokenizer.json that SpecialVocab reads.
SPM_TOKENIZER_CONFIG = {
    "add_bos_token": True, "add_eos_token": False,
    "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": False, "normalized": False,
                  "rstrip": False, "single_word": False},
    "clean_up_tokenization_spaces": False,
    "eos_token": {"__type": "AddedToken", "content": "</s>", "lstrip": False, "normalized": False,
                  "rstrip": False, "single_word": False},
    "legacy": False, "model_max_length": 1000000000000000019884624838656, "pad_token": None,
    "padding_side": "right", "sp_model_kwargs": {}, "tokenizer_class": "LlamaTokenizer",
    "unk_token": {"__type": "AddedToken", "content": "<unk>", "lstrip": False, "normalized": False,
                  "rstrip": False, "single_word": False},
}


def spm_tokenizer_json():
    added = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>"])]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SP_SPACE},
            {"type": "Replace", "pattern": {"String": " "}, "content": SP_SPACE}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<s>", "type_id": 1}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SP_SPACE}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                  "vocab": {}, "merges": []},  # (the vocabulary itself is not read by SpecialVocab)
    }


def write_safetensors(path, tensors):
    """F32 safetensors as the safetensors library writes them: tensors sorted by name,
    header padded with spaces to a multiple of 8 bytes."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        raw = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def make_bpe_sources(out_dir):
    c = BPE
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(GPT2_TOKENIZER, name), os.path.join(out_dir, name))
    with open(os.path.join(out_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    V = max(list(tok["model"]["vocab"].values()) + [a["id"] for a in tok["added_tokens"]]) + 1
    eot = next(a["id"] for a in tok["added_tokens"] if a["content"] == "<|endoftext|>")
    D, F, L, H, Hkv, Dh = c["dim"], c["hidden_dim"], c["n_layers"], c["n_heads"], c["n_kv_heads"], c["head_dim"]
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": D, "intermediate_size": F, "num_hidden_layers": L,
        "num_attention_heads": H, "num_key_value_heads": Hkv, "head_dim": Dh,
        "vocab_size": V, "max_position_embeddings": c["max_pos"], "rope_theta": c["rope_theta"],
        "rms_norm_eps": c["eps"], "tie_word_embeddings": False, "hidden_act": "silu",
        "torch_dtype": "float32", "bos_token_id": eot, "eos_token_id": eot,
    }
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    rng = np.random.RandomState(c["seed"])
    write_safetensors(os.path.join(out_dir, "model.safetensors"),
                      random_weights(rng, D, F, L, H * Dh, Hkv * Dh, V, tied=False))


def read_safetensors_f32(path):
    """Read through gguf-py's SafetensorsLocal, as convert_hf_to_gguf.py's index_tensors does
    (which orders the tensors by name)."""
    out = {}
    with gguf.utility.SafetensorsLocal(path) as tensors:
        for name, lt in tensors.items():
            assert lt.dtype == "F32"
            out[name] = np.frombuffer(lt.mmap_bytes().tobytes(), dtype="<f4").reshape(lt.shape).copy()
    return out


# ---------------------------------------------------------------------------------------
# 2. convert_hf_to_gguf.py (llama.cpp LLAMA_CPP_COMMIT), class LlamaModel, reduced to the
#    path these two folders take. Method names and order follow the script; comments name
#    the code each step reproduces.
# ---------------------------------------------------------------------------------------

# gguf-py tensor_mapping.py's names for MODEL_ARCH.LLAMA (constants.py TENSOR_NAMES).
HF_TO_GGUF = {
    "model.embed_tokens": "token_embd", "lm_head": "output", "model.norm": "output_norm",
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
}


def map_tensor_name(name):
    """ModelBase.map_tensor_name -> TensorNameMap.get_name(key, try_suffixes=('.weight', '.bias'))."""
    base, suffix = name.rsplit(".", 1)
    assert suffix == "weight"
    if base in HF_TO_GGUF:
        return HF_TO_GGUF[base] + ".weight"
    parts = base.split(".")
    assert parts[:2] == ["model", "layers"], name
    return f"blk.{int(parts[2])}.{HF_TO_GGUF['.'.join(parts[3:])]}.weight"


def id_to_title(string):
    """gguf-py metadata.py Metadata.id_to_title."""
    import re
    return ' '.join([w.title() if w.islower() and not re.match(r'^(v\d+(?:\.\d+)*|\d.*)$', w) else w
                     for w in string.strip().replace('-', ' ').split()])


class LlamaConvert:
    def __init__(self, dir_name, hparams, tensors, ftype, vocab):
        # ModelBase.__init__: GGUFWriter(path=None, arch=MODEL_ARCH_NAMES[LLAMA], ...) adds
        # general.architecture; TextModel.__init__ fills rope_parameters.
        self.dir_name = dir_name  # the folder's name: Metadata's last-resort name heuristic
        self.hparams = hparams
        self.model_tensors = dict(sorted(tensors.items()))  # SafetensorsLocal: by name
        self.ftype = ftype
        self.vocab = vocab  # callable(self) -> writes the tokenizer keys (set_vocab)
        self.gguf_writer = gguf.GGUFWriter(path=None, arch="llama", endianess=gguf.GGUFEndian.LITTLE,
                                           use_temp_file=False, split_max_tensors=0, split_max_size=0,
                                           dry_run=False, small_first_shard=False)
        self.block_count = self.find_hparam(["n_layers", "num_hidden_layers", "n_layer", "num_layers"])
        self.rope_parameters = self.hparams.get("rope_parameters", self.hparams.get("rope_scaling")) or {}
        rope_theta = self.find_hparam(["global_rope_theta", "rope_global_theta", "rope_theta_global",
                                       "rope_theta", "rotary_emb_base"], optional=True)
        assert self.find_hparam(["local_rope_theta", "rope_local_theta", "rope_theta_local",
                                 "swa_rope_theta", "rope_local_base_freq"], optional=True) is None
        if "rope_theta" not in self.rope_parameters and rope_theta is not None:
            self.rope_parameters["rope_theta"] = rope_theta

    def find_hparam(self, keys, optional=False):
        key = next((k for k in keys if k in self.hparams), None)
        if key is not None:
            return self.hparams[key]
        if optional:
            return None
        raise KeyError(f"could not find any of: {keys}")

    @staticmethod
    def permute(weights, n_head, n_head_kv):
        """LlamaModel.permute: Hugging Face half-split q/k rows -> GGUF (Meta) interleaved rows."""
        if n_head_kv is not None and n_head != n_head_kv:
            n_head = n_head_kv
        return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
                .swapaxes(1, 2)
                .reshape(weights.shape))

    def modify_tensors(self, data, name, bid):
        """LlamaModel.modify_tensors (undo_permute = True), then ModelBase.modify_tensors."""
        n_head = self.find_hparam(["n_heads", "num_attention_heads"])
        n_kv_head = self.find_hparam(["n_kv_heads", "num_key_value_heads"])
        if name.endswith(("q_proj.weight", "q_proj.bias")):
            data = LlamaConvert.permute(data, n_head, n_head)
        if name.endswith(("k_proj.weight", "k_proj.bias")):
            data = LlamaConvert.permute(data, n_head, n_kv_head)
        return [(map_tensor_name(name), data)]

    def prepare_tensors(self):
        """ModelBase.prepare_tensors, for float32 inputs and ftypes F32/F16/BF16/Q8_0."""
        for name, data in self.model_tensors.items():
            assert data.dtype == np.float32
            bid = None
            for part in name.split("."):
                if part.isdecimal():
                    bid = int(part)
                    break
            for new_name, data in self.modify_tensors(data, name, bid):
                n_dims = len(data.shape)
                data_qtype = False  # tensor_force_quant
                # "Most of the codebase that takes in 1D tensors or norms only handles F32 tensors"
                if n_dims <= 1 or new_name.endswith("_norm.weight"):
                    data_qtype = gguf.GGMLQuantizationType.F32
                # (the always-F32 list — ffn_gate_inp, pos_embd, ssm_conv1d, ... — names none
                # of a Llama's tensors, and every name here ends in ".weight")
                if isinstance(data_qtype, bool):
                    data_qtype = {
                        gguf.LlamaFileType.ALL_F32: gguf.GGMLQuantizationType.F32,
                        gguf.LlamaFileType.MOSTLY_F16: gguf.GGMLQuantizationType.F16,
                        gguf.LlamaFileType.MOSTLY_BF16: gguf.GGMLQuantizationType.BF16,
                        gguf.LlamaFileType.MOSTLY_Q8_0: gguf.GGMLQuantizationType.Q8_0,
                    }[self.ftype]
                try:
                    data = gguf.quants.quantize(data, data_qtype)
                except gguf.QuantError:
                    # "falling back to F16" (never taken here: every row is a multiple of 32)
                    data_qtype = gguf.GGMLQuantizationType.F16
                    data = gguf.quants.quantize(data, data_qtype)
                self.gguf_writer.add_tensor(new_name, data, raw_dtype=data_qtype)

    def prepare_metadata(self):
        """ModelBase.prepare_metadata then TextModel.prepare_metadata (which ends in set_vocab)."""
        total_params, shared_params, expert_params, expert_count = self.gguf_writer.get_total_parameter_count()
        # gguf.Metadata.load(None, dir_model, None, total_params): no README.md model card, no
        # generation_config.json, no "_name_or_path" in config.json, so only the folder-name
        # heuristic applies; for a one-word lower-case name ("spm", "bpe") it yields only
        # name = id_to_title(folder name) (get_model_id_components finds no size, finetune or
        # version, and then drops the basename as "too ambiguous").
        assert self.dir_name.isalpha() and self.dir_name.islower()
        name = id_to_title(self.dir_name)
        size_label = gguf.size_label(total_params, shared_params, expert_params, expert_count)
        self.gguf_writer.add_type(gguf.GGUFType.MODEL)             # set_type
        self.gguf_writer.add_name(name)                             # Metadata.set_gguf_meta_model
        self.gguf_writer.add_size_label(size_label)
        self.set_gguf_parameters()
        self.gguf_writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
        self.vocab(self)                                            # set_vocab

    def set_gguf_parameters(self):
        """TextModel.set_gguf_parameters, then LlamaModel's additions."""
        w, h = self.gguf_writer, self.hparams
        w.add_block_count(self.block_count)
        if (n_ctx := self.find_hparam(["max_position_embeddings", "n_ctx", "n_positions", "max_length",
                                       "max_sequence_length", "model_max_length"], optional=True)) is not None:
            w.add_context_length(n_ctx)
        if (n_embd := self.find_hparam(["hidden_size", "n_embd", "dim"], optional=True)) is not None:
            w.add_embedding_length(n_embd)
        if (n_ff := self.find_hparam(["intermediate_size", "n_inner", "hidden_dim"], optional=True)) is not None:
            w.add_feed_forward_length(n_ff)
        if (n_head := self.find_hparam(["num_attention_heads", "n_head", "n_heads"], optional=True)) is not None:
            w.add_head_count(n_head)
        if (n_head_kv := self.find_hparam(["num_key_value_heads", "n_kv_heads"], optional=True)) is not None:
            w.add_head_count_kv(n_head_kv)
        assert h.get("is_causal") is not False
        rope_params = self.rope_parameters.get("full_attention", self.rope_parameters)
        assert rope_params.get("rope_type") is None and "mrope_section" not in self.rope_parameters
        if (rope_theta := rope_params.get("rope_theta")) is not None:
            w.add_rope_freq_base(rope_theta)
        if (f_rms_eps := self.find_hparam(["rms_norm_eps", "norm_eps"], optional=True)) is not None:
            w.add_layer_norm_rms_eps(f_rms_eps)
        assert self.find_hparam(["layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"], optional=True) is None
        assert self.find_hparam(["num_local_experts", "num_experts"], optional=True) is None
        if (head_dim := h.get("head_dim")) is not None:
            w.add_key_length(head_dim)
            w.add_value_length(head_dim)
        w.add_file_type(self.ftype)
        # LlamaModel.set_gguf_parameters
        w.add_vocab_size(h["vocab_size"])
        if (rope_dim := h.get("head_dim")) is None:
            rope_dim = h["hidden_size"] // h["num_attention_heads"]
        w.add_rope_dimension_count(rope_dim)

    def write(self, path):
        """ModelBase.write (progress=False: tqdm is not installed; it only draws a bar)."""
        self.prepare_tensors()
        self.prepare_metadata()
        self.gguf_writer.write_header_to_file(path=path)
        self.gguf_writer.write_kv_data_to_file()
        self.gguf_writer.write_tensors_to_file(progress=False)
        self.gguf_writer.close()


def sentencepiece_vocab(pieces, hf_dir):
    """LlamaModel.set_vocab -> TextModel._set_vocab_sentencepiece, with the SentencePiece
    model being `pieces` (IdToPiece, GetScore, IsUnknown/IsControl/IsByte), no
    added_tokens.json and a tokenizer_config.json without added_tokens_decoder."""
    kinds = {"normal": 1, "unknown": 2, "control": 3, "byte": 6}  # SentencePieceTokenTypes

    def set_vocab(model):
        vocab_size = model.find_hparam(["vocab_size_per_layer_input", "vocab_size"], optional=True)
        assert vocab_size == len(pieces)
        tokens = [p.encode("utf-8") for p, _, _ in pieces]
        scores = [float(s) for _, s, _ in pieces]
        toktypes = [kinds[k] for _, _, k in pieces]
        w = model.gguf_writer
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_scores(scores)
        w.add_token_types(toktypes)
        special_vocab = gguf.SpecialVocab(hf_dir, n_vocab=len(tokens))
        special_vocab.add_to_gguf(w)
        # LlamaModel.set_vocab afterwards: vocab_size 32016 (CodeLlama) no; tokenizer_config
        # has no "add_prefix_space"; vocab_size 49152 (granite) no.
    return set_vocab


def gpt2_vocab(hf_dir):
    """LlamaModel.set_vocab: no tokenizer.model; LlamaHfVocab refuses a tokenizer.json whose BPE
    model has no byte_fallback (FileNotFoundError) -> TextModel._set_vocab_gpt2, whose
    get_vocab_base reads the vocabulary through transformers' AutoTokenizer; here the same
    list is read from tokenizer.json: model.vocab plus added_tokens, by id."""
    def set_vocab(model):
        with open(os.path.join(hf_dir, "tokenizer.json"), encoding="utf-8") as f:
            tj = json.load(f)
        assert tj["model"]["type"] == "BPE" and not tj["model"].get("byte_fallback", False)
        vocab = dict(tj["model"]["vocab"])
        added = {a["content"]: a for a in tj["added_tokens"]}
        for a in tj["added_tokens"]:
            vocab[a["content"]] = a["id"]
        vocab_size = model.hparams.get("vocab_size", len(vocab))
        assert max(vocab.values()) < vocab_size
        reverse_vocab = {id_: tok for tok, id_ in vocab.items()}
        tokens, toktypes = [], []
        for i in range(vocab_size):
            if i not in reverse_vocab:
                tokens.append(f"[PAD{i}]")
                toktypes.append(gguf.TokenType.UNUSED)
                continue
            token = reverse_vocab[i]
            if token in added:
                assert added[token]["normalized"]  # else convert re-encodes it first
                looks_special = token.startswith("<|") and token.endswith("|>")
                assert added[token]["special"] or looks_special
                toktypes.append(gguf.TokenType.CONTROL)
            else:
                toktypes.append(gguf.TokenType.NORMAL)
            tokens.append(token)
        # get_vocab_base_pre hashes AutoTokenizer's ids for a fixed test string against the
        # pre-tokenizers it knows and raises NotImplementedError for an unknown hash; this
        # small tokenizer's hash is not registered, so convert itself would stop here. It has
        # GPT-2's pre-tokenizer (ByteLevel, GPT-2's split regex), for which convert writes
        # "gpt-2" (openai-community/gpt2's hash).
        tokpre = "gpt-2"
        w = model.gguf_writer
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(tokpre)
        w.add_token_list(tokens)
        w.add_token_types(toktypes)
        special_vocab = gguf.SpecialVocab(hf_dir, load_merges=True)
        special_vocab.add_to_gguf(w)
        with open(os.path.join(hf_dir, "tokenizer_config.json"), encoding="utf-8") as f:
            assert "add_prefix_space" not in json.load(f)
    return set_vocab


# ---------------------------------------------------------------------------------------
# 3. Writing everything
# ---------------------------------------------------------------------------------------

FTYPES = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
          "bf16": gguf.LlamaFileType.MOSTLY_BF16, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}


def reference(*args):
    return subprocess.run([sys.executable, REFERENCE, *args], check=True, capture_output=True,
                          text=True).stdout


def finish(path):
    reference("check", path)
    dump = reference("dump", path)
    with open(os.path.splitext(path)[0] + ".dump.txt", "w", encoding="utf-8") as f:
        f.write(dump)
    print(f"{os.path.relpath(path, REPO)}: {os.path.getsize(path)} bytes, "
          f"sha256 {hashlib.sha256(open(path, 'rb').read()).hexdigest()[:16]}")


def main():
    spm_dir, bpe_dir = os.path.join(HERE, "spm"), os.path.join(HERE, "bpe")
    os.makedirs(spm_dir, exist_ok=True)
    os.makedirs(bpe_dir, exist_ok=True)

    # spm: the llama2.c files, then their Hugging Face twin in a scratch folder named "spm".
    written, _ = make_spm_sources(spm_dir)
    tensors, interleaved, hparams, pieces = read_spm_sources(spm_dir)
    for k in written:
        assert np.array_equal(written[k], interleaved[k]), k
    with tempfile.TemporaryDirectory() as tmp:
        hf_dir = os.path.join(tmp, "spm")
        os.makedirs(hf_dir)
        for name, obj in (("config.json", hparams), ("tokenizer_config.json", SPM_TOKENIZER_CONFIG),
                          ("tokenizer.json", spm_tokenizer_json())):
            with open(os.path.join(hf_dir, name), "w", encoding="utf-8") as f:
                json.dump(obj, f, indent=2, ensure_ascii=False)
        for tag, ftype in FTYPES.items():
            out = os.path.join(spm_dir, f"model-{tag}.gguf")
            LlamaConvert("spm", dict(hparams), tensors, ftype, sentencepiece_vocab(pieces, hf_dir)).write(out)
            finish(out)
    # convert's permutation of the half-split rows gives back the .bin's interleaved rows
    for k, v in tensors.items():
        if k.endswith(("q_proj.weight", "k_proj.weight")):
            heads = hparams["num_attention_heads"] if "q_proj" in k else hparams["num_key_value_heads"]
            assert np.array_equal(LlamaConvert.permute(v, hparams["num_attention_heads"], heads), interleaved[k])

    # bpe: a real Hugging Face folder.
    make_bpe_sources(bpe_dir)
    with open(os.path.join(bpe_dir, "config.json")) as f:
        hparams = json.load(f)
    tensors = read_safetensors_f32(os.path.join(bpe_dir, "model.safetensors"))
    for tag in ("f32", "q8_0"):
        out = os.path.join(bpe_dir, f"model-{tag}.gguf")
        LlamaConvert("bpe", dict(hparams), tensors, FTYPES[tag], gpt2_vocab(bpe_dir)).write(out)
        finish(out)

    for d in (spm_dir, bpe_dir):
        for name in sorted(os.listdir(d)):
            if not name.endswith((".gguf", ".txt")):
                print(f"{os.path.relpath(os.path.join(d, name), REPO)}: {os.path.getsize(os.path.join(d, name))} bytes")


if __name__ == "__main__":
    main()
