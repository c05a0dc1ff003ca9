"""RoPE assignment: fill in rope() (lessons/assignments/rope/README.md).

Grade with:  plab grade rope starter.py
"""

import numpy as np


def rope(x, pos0, theta):
    """Rotary position embedding of one prefill chunk.

    x: (C, H, Dh) float32 — C rows (queries or keys) of H heads; row i sits at
    absolute position pos0 + i (pos0 = tokens already in the KV cache).
    theta: the base, e.g. 10000.0.
    Returns (C, H, Dh): each pair (x[..., i], x[..., i + Dh//2]), i < Dh//2,
    rotated by the angle pos * theta**(-2*i/Dh); an odd Dh's last component
    is left as it is.
    """
    raise NotImplementedError("rope")
