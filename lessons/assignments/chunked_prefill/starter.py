"""Chunked prefill assignment: fill in Prefill.chunk() and Prefill.kv()
(lessons/assignments/chunked_prefill/README.md).

Grade with:  plab grade chunked_prefill starter.py
"""

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
        self.h, self.hkv = n_heads, n_kv_heads  # H query heads, Hkv KV heads
        self.theta, self.eps = rope_theta, norm_eps
        self.n_layers = self.w["wq"].shape[0]  # L
        self.dh = self.w["wq"].shape[1] // n_heads  # Dh
        # Your KV cache goes here: per layer, K (after RoPE) and V of every position so far.

    def chunk(self, tokens):
        """Appends one chunk of token ids (C,) after the tokens already cached.

        Runs every layer over the chunk — RMSNorm, Q/K/V projections, RoPE at the
        absolute positions pos0.. (pos0 = tokens cached), append K/V to the cache,
        causal attention over the cached and new keys (GQA), output projection, + x,
        RMSNorm, SwiGLU MLP, + x — then the final norm and the classifier.
        Returns the logits (V,) of the chunk's last position.
        """
        raise NotImplementedError("chunk")

    def kv(self, layer):
        """The cache of one layer: (K, V), each (T, Hkv, Dh), T = tokens so far; K after RoPE."""
        raise NotImplementedError("kv")
