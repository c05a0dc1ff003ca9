"""Online softmax assignment: fill in tiled_attention() (lessons/assignments/online_softmax/README.md).

Grade with:  plab grade online_softmax starter.py
"""

import numpy as np


def tiled_attention(q, k, v, mask, tile):
    """Attention of one head, walking each query's keys one tile at a time.

    q, k, v: (T, Dh) float32. mask: (T, T) of 0/1, mask[i, j] == 1 when query i
    may see key j. tile: keys per tile; tile t holds keys t*tile .. t*tile+tile-1.
    Returns (out, m, l): out (T, Dh), and per query the running max m and the
    denominator l after its last tile, each (T,).
    """
    raise NotImplementedError("tiled_attention")
