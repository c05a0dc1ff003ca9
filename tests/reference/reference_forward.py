"""An independent reference forward pass, written from the architecture's definition.

What it teaches: the whole Llama-style decoder as textbook formulas, in
float64, one head and one position at a time where that makes the math
plain. It was written from the definition below, not translated from the
C++ engine (src/runtime/forward.cpp) nor from the training code
(assets/recipe/model.py), so agreement between the three is evidence that
all of them implement the definition:

    x_0       = E[token]                                   E: (V, D)
    per layer l:
      h       = RMSNorm(x) = x / sqrt(mean(x^2) + eps) * g_attn
      q_h     = Wq[h] h,  k_j = Wk[j] h,  v_j = Wv[j] h    per head, Dh each
      RoPE on q, k: pairs (i, i + Dh/2) (half-split, HF) or (2i, 2i+1)
              (interleaved, llama2.c), angle pos * theta^(-2i/Dh)
      head h reads KV head j = h // (H / Hkv)               (grouped-query attention)
      a_h(t)  = sum_{s<=t} softmax_s(q_h(t).k_j(s) / sqrt(Dh)) v_j(s)
      x       = x + Wo concat_h a_h
      h       = RMSNorm(x) * g_ffn
      x       = x + Wdown (silu(Wgate h) * (Wup h))
    logits    = Wcls RMSNorm(x) * g_final                   Wcls = E when tied

What it leaves out: KV cache and chunking (a reference needs neither: it
recomputes everything for every prompt), batching, any speed.

It reads a model directory (config.json + model.safetensors, F32) with its
own minimal safetensors reader. Needs Debian's /usr/bin/python3 with torch.
"""

import json
import math
import os
import struct

import torch


def read_model_dir(path):
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(path, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        blob = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", f"{name}: {info['dtype']}"
        b, e = info["data_offsets"]
        t = torch.frombuffer(bytearray(blob[b:e]), dtype=torch.float32).reshape(info["shape"])
        tensors[name] = t.to(torch.float64)
    return cfg, tensors


def rms_norm(x, g, eps):
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * g


def rope(v, pos, theta, pairing):
    """Rotate one vector v (Dh) at position pos. Pair i (angle pos * theta^(-2i/Dh)) is
    (i, i + Dh/2) for "half" (Hugging Face) or (2i, 2i + 1) for "interleaved" (llama2.c, Meta)."""
    dh = v.shape[0]
    half = dh // 2
    out = v.clone()
    for i in range(half):
        a, b = (i, i + half) if pairing == "half" else (2 * i, 2 * i + 1)
        angle = pos * theta ** (-2.0 * i / dh)
        c, s = math.cos(angle), math.sin(angle)
        out[a] = v[a] * c - v[b] * s
        out[b] = v[a] * s + v[b] * c
    return out


def forward_all_logits(cfg, w, tokens, pairing="half"):
    """Logits (T, V) in float64 for every position of `tokens`; q/k rows of `w` follow `pairing`."""
    D = cfg["hidden_size"]
    L = cfg["num_hidden_layers"]
    H = cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads", H)
    Dh = cfg.get("head_dim") or D // H
    eps = cfg.get("rms_norm_eps", 1e-5)
    theta = cfg.get("rope_theta", 10000.0)
    tied = cfg.get("tie_word_embeddings", False)
    T = len(tokens)
    group = H // Hkv

    x = w["model.embed_tokens.weight"][torch.tensor(tokens)]  # (T, D)
    for l in range(L):
        p = f"model.layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q_all = h @ w[p + "self_attn.q_proj.weight"].T  # (T, H*Dh)
        k_all = h @ w[p + "self_attn.k_proj.weight"].T  # (T, Hkv*Dh)
        v_all = h @ w[p + "self_attn.v_proj.weight"].T
        q = torch.stack([torch.stack([rope(q_all[t, hh * Dh:(hh + 1) * Dh], t, theta, pairing)
                                      for hh in range(H)]) for t in range(T)])  # (T, H, Dh)
        k = torch.stack([torch.stack([rope(k_all[t, j * Dh:(j + 1) * Dh], t, theta, pairing)
                                      for j in range(Hkv)]) for t in range(T)])  # (T, Hkv, Dh)
        v = v_all.reshape(T, Hkv, Dh)
        heads = torch.zeros(T, H, Dh, dtype=torch.float64)
        for hh in range(H):
            j = hh // group
            for t in range(T):
                scores = torch.tensor([float(q[t, hh] @ k[s, j]) / math.sqrt(Dh) for s in range(t + 1)],
                                      dtype=torch.float64)
                p_attn = torch.exp(scores - scores.max())
                p_attn = p_attn / p_attn.sum()
                heads[t, hh] = (p_attn[:, None] * v[:t + 1, j]).sum(dim=0)
        x = x + heads.reshape(T, H * Dh) @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        silu = gate / (1.0 + torch.exp(-gate))
        x = x + (silu * up) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    cls = w["model.embed_tokens.weight"] if tied else w["lm_head.weight"]
    return x @ cls.T
