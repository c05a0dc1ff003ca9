"""Attention assignment: fill in the three functions (lessons/assignments/attention/README.md).

Grade with:  plab grade attention starter.py
"""

import numpy as np


def causal_attention(q, k, v):
    """Causal attention for one head.

    q, k, v: (T, Dh) float32 arrays; row i is position i.
    Returns (T, Dh): row i is the softmax-weighted sum of v[0..i] with weights
    softmax_j(q[i] . k[j] / sqrt(Dh)) over the keys j <= i.
    """
    raise NotImplementedError("causal_attention")


def masked_attention(q, k, v, mask):
    """Attention for one head under any mask.

    mask: (T, T) array of 0/1; mask[i, j] == 1 lets query i see key j
    (every row has at least one 1). Returns (T, Dh).
    """
    raise NotImplementedError("masked_attention")


def gqa_attention(q, k, v):
    """Causal attention of H query heads sharing Hkv K/V heads (grouped-query attention).

    q: (T, H, Dh); k, v: (T, Hkv, Dh) float32, H a multiple of Hkv. Query head h
    reads K/V head h // (H // Hkv): consecutive query heads share one K/V head.
    Returns (T, H, Dh).
    """
    raise NotImplementedError("gqa_attention")
