"""Planted mistake: the rotation by -angle."""

import numpy as np


def rope(x, pos0, theta):
    """Rotary position embedding of one chunk, as the engine does it (src/core/rope.h).

    x: (C, H, Dh) float32, row i at absolute position pos0 + i. Returns (C, H, Dh).
    Pair i is (x[..., i], x[..., i + Dh//2]) for i < Dh//2 (half-split); it turns by
    the angle pos * theta**(-2i/Dh). An odd Dh's last component stays as it is.
    """
    c, _, dh = x.shape
    half = dh // 2
    pos = pos0 + np.arange(c, dtype=np.float64)  # absolute positions, not 0..C-1
    freq = theta ** (-2.0 * np.arange(half) / dh)  # (half,)
    angle = pos[:, None] * freq[None, :]  # (C, half)
    cos = np.cos(angle)[:, None, :]  # (C, 1, half): the same for every head
    sin = np.sin(angle)[:, None, :]
    out = x.astype(np.float64).copy()
    a = out[..., :half].copy()
    b = out[..., half : 2 * half].copy()
    out[..., :half] = a * cos + b * sin
    out[..., half : 2 * half] = -a * sin + b * cos
    return out
