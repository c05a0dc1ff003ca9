"""Reference solution of the attention assignment (instructors only: remove before handing out)."""

import numpy as np


def masked_attention(q, k, v, mask):
    """One head's attention under a 0/1 mask: mask[i, j] == 1 lets query i see key j.

    q, k, v: (T, Dh) float32; mask: (T, T) of 0/1. Returns (T, Dh).
    """
    dh = q.shape[1]
    scores = (q.astype(np.float64) @ k.astype(np.float64).T) / np.sqrt(dh)  # (T, T)
    scores = np.where(mask != 0, scores, -np.inf)
    scores -= scores.max(axis=1, keepdims=True)  # exp never overflows
    weights = np.exp(scores)  # exp(-inf) = 0: masked keys weigh nothing
    weights /= weights.sum(axis=1, keepdims=True)
    return weights @ v.astype(np.float64)


def causal_attention(q, k, v):
    """Causal attention for one head: query i sees keys 0..i. q, k, v: (T, Dh). Returns (T, Dh)."""
    t = q.shape[0]
    return masked_attention(q, k, v, np.tril(np.ones((t, t), dtype=np.int64)))


def gqa_attention(q, k, v):
    """Causal attention of H query heads over Hkv K/V heads (GQA, Ainslie et al. 2023).

    q: (T, H, Dh); k, v: (T, Hkv, Dh) float32, H a multiple of Hkv. Returns (T, H, Dh).
    """
    h, hkv = q.shape[1], k.shape[1]
    group = h // hkv  # query heads per K/V head
    out = np.empty(q.shape)
    for head in range(h):
        kv_head = head // group  # consecutive query heads share one K/V head
        out[:, head] = causal_attention(q[:, head], k[:, kv_head], v[:, kv_head])
    return out
