"""Online softmax assignment: the reference solution (lessons/assignments/online_softmax/README.md).

Grade with:  plab grade online_softmax solution.py
"""

import numpy as np


def tiled_attention(q, k, v, mask, tile):
    """Attention of one head, walking each query's keys one tile at a time.

    q, k, v: (T, Dh) float32. mask: (T, T) of 0/1, mask[i, j] == 1 when query i
    may see key j. tile: keys per tile; tile t holds keys t*tile .. t*tile+tile-1.
    Returns (out, m, l): out (T, Dh), and per query the running max m and the
    denominator l after its last tile, each (T,).
    """
    T, Dh = q.shape
    scale = np.float32(1.0 / np.sqrt(Dh))
    out = np.zeros((T, Dh), dtype=np.float32)
    ms = np.zeros(T, dtype=np.float32)
    ls = np.zeros(T, dtype=np.float32)
    for i in range(T):
        m = np.float32(-np.inf)
        l = np.float32(0.0)
        acc = np.zeros(Dh, dtype=np.float32)
        for t0 in range(0, T, tile):
            keys = np.arange(t0, min(T, t0 + tile))
            keys = keys[mask[i, keys] == 1]
            if len(keys) == 0:
                continue  # a tile the mask hides entirely adds nothing
            s = (k[keys] @ q[i]) * scale
            m_new = np.maximum(m, s.max())
            r = np.exp(m - m_new)  # exp(-inf) = 0 on the first tile
            e = np.exp(s - m_new)
            l = l * r + e.sum()
            acc = acc * r + e @ v[keys]
            m = m_new
        out[i] = acc / l
        ms[i] = m
        ls[i] = l
    return out, ms, ls
