"""The tiny Llama-style decoder, in PyTorch, for training.

What it teaches: the whole architecture the C++ engine runs, in ~80 lines.
Conventions that must match the engine bit for bit in meaning:
  * RMSNorm: x * rsqrt(mean(x^2) + eps) * w
  * RoPE, Hugging Face *half-split* pairing: component i rotates with
    i + Dh/2, angle pos * theta^(-2i/Dh)
  * attention scale 1/sqrt(Dh), causal mask, grouped-query attention:
    query head h reads KV head h // (H / Hkv)
  * SwiGLU MLP: w_down(silu(w_gate x) * w_up x)
  * Linear weights stored (out, in), named like Hugging Face Llama.

What it leaves out: dropout, biases, KV cache (training sees whole sequences).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(max_seq_len, head_dim, theta):
    inv = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    ang = torch.arange(max_seq_len, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()  # (T, Dh/2) each


def apply_rope(x, cos, sin):
    """x: (B, H, T, Dh); half-split pairs (i, i + Dh/2)."""
    half = x.shape[-1] // 2
    x0, x1 = x[..., :half], x[..., half:]
    return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, h, hkv, dh, f = cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"], cfg["hidden_dim"]
        self.h, self.hkv, self.dh = h, hkv, dh
        self.input_layernorm = RMSNorm(d, cfg["norm_eps"])
        self.q_proj = nn.Linear(d, h * dh, bias=False)
        self.k_proj = nn.Linear(d, hkv * dh, bias=False)
        self.v_proj = nn.Linear(d, hkv * dh, bias=False)
        self.o_proj = nn.Linear(h * dh, d, bias=False)
        self.post_attention_layernorm = RMSNorm(d, cfg["norm_eps"])
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        xn = self.input_layernorm(x)
        q = self.q_proj(xn).view(b, t, self.h, self.dh).transpose(1, 2)
        k = self.k_proj(xn).view(b, t, self.hkv, self.dh).transpose(1, 2)
        v = self.v_proj(xn).view(b, t, self.hkv, self.dh).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        rep = self.h // self.hkv  # GQA: head h reads KV head h // rep
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(self.dh)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, self.h * self.dh)
        x = x + self.o_proj(y)
        xn = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(xn)) * self.up_proj(xn))


class TinyLlama(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["dim"])
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg["n_layers"]))
        self.norm = RMSNorm(cfg["dim"], cfg["norm_eps"])
        cos, sin = rope_tables(cfg["max_seq_len"], cfg["head_dim"], cfg["rope_theta"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens):
        t = tokens.shape[1]
        x = self.embed_tokens(tokens)
        cos, sin = self.cos[:t], self.sin[:t]
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        x = self.norm(x)
        return x @ self.embed_tokens.weight.t()  # tied classifier (lm_head = embed_tokens)
