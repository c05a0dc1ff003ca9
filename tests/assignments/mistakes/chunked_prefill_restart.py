"""Planted mistake: RoPE positions restart at 0 in every chunk."""

import numpy as np


class Prefill:
    """One sequence's prefill over the model's weights, chunk by chunk, with a KV cache.

    Weights (float32, Hugging Face Llama layout: a matrix is (out, in), y = W @ x),
    stacked over the L layers: tok_embeddings (V, D); attn_norm (L, D); wq (L, H*Dh, D);
    wk, wv (L, Hkv*Dh, D); wo (L, D, H*Dh); ffn_norm (L, D); w_gate, w_up (L, F, D);
    w_down (L, D, F); final_norm (D); classifier (V, D).
    """

    def __init__(self, n_heads, n_kv_heads, rope_theta, norm_eps, **weights):
        self.w = {name: np.asarray(a, dtype=np.float64) for name, a in weights.items()}
        self.h, self.hkv = n_heads, n_kv_heads
        self.theta, self.eps = rope_theta, norm_eps
        self.n_layers = self.w["wq"].shape[0]
        self.dh = self.w["wq"].shape[1] // n_heads
        # The KV cache: per layer, K (after RoPE) and V of every position so far.
        self.k = [np.zeros((0, n_kv_heads, self.dh)) for _ in range(self.n_layers)]
        self.v = [np.zeros((0, n_kv_heads, self.dh)) for _ in range(self.n_layers)]

    def rmsnorm(self, x, weight):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * weight

    def rope(self, x, pos):
        """x (C, heads, Dh) at absolute positions pos (C,): half-split pairs (i, i + Dh/2)."""
        half = self.dh // 2
        angle = pos[:, None] * self.theta ** (-2.0 * np.arange(half) / self.dh)  # (C, half)
        cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
        a, b = x[..., :half], x[..., half : 2 * half]
        out = x.copy()
        out[..., :half] = a * cos - b * sin
        out[..., half : 2 * half] = a * sin + b * cos
        return out

    def attention(self, q, k, v, pos):
        """q (C, H, Dh) at positions pos; k, v (T, Hkv, Dh) the whole cache. Returns (C, H*Dh)."""
        group = self.h // self.hkv
        k = np.repeat(k, group, axis=1)  # query head h reads KV head h // group
        v = np.repeat(v, group, axis=1)
        s = np.einsum("chd,thd->hct", q, k) / np.sqrt(self.dh)  # (H, C, T)
        visible = np.arange(k.shape[0])[None, :] <= pos[:, None]  # (C, T): cached keys and the chunk's own up to p
        s = np.where(visible[None], s, -np.inf)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        return np.einsum("hct,thd->chd", p, v).reshape(q.shape[0], -1)

    def chunk(self, tokens):
        """Appends one chunk (C,) of token ids; returns the logits (V,) of its last position."""
        w, c = self.w, len(tokens)
        pos0 = self.k[0].shape[0]  # tokens already cached
        pos = pos0 + np.arange(c, dtype=np.float64)
        x = w["tok_embeddings"][np.asarray(tokens)]  # (C, D)
        for l in range(self.n_layers):
            xn = self.rmsnorm(x, w["attn_norm"][l])
            q = (xn @ w["wq"][l].T).reshape(c, self.h, self.dh)
            k = (xn @ w["wk"][l].T).reshape(c, self.hkv, self.dh)
            v = (xn @ w["wv"][l].T).reshape(c, self.hkv, self.dh)
            q, k = self.rope(q, pos - pos0), self.rope(k, pos - pos0)
            self.k[l] = np.concatenate([self.k[l], k])
            self.v[l] = np.concatenate([self.v[l], v])
            x = x + self.attention(q, self.k[l], self.v[l], pos) @ w["wo"][l].T
            xn = self.rmsnorm(x, w["ffn_norm"][l])
            gate, up = xn @ w["w_gate"][l].T, xn @ w["w_up"][l].T
            x = x + (gate / (1.0 + np.exp(-gate)) * up) @ w["w_down"][l].T
        return self.rmsnorm(x[-1], w["final_norm"]) @ w["classifier"].T

    def kv(self, layer):
        """The cache of one layer: (K, V), each (T, Hkv, Dh); K after RoPE."""
        return self.k[layer], self.v[layer]
