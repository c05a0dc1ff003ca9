"""Paged KV cache assignment: fill in PagedKVCache (lessons/assignments/kv_cache/README.md).

Grade with:  plab grade kv_cache starter.py
"""

import numpy as np


class PagedKVCache:
    """One sequence's paged KV cache, for one layer.

    k_pool, v_pool: (num_blocks, B, Hkv, Dh) arrays (B = block_size).
    block_table: a list; entry i is the physical block holding positions i*B .. i*B+B-1.
    free_blocks: the pool's free list; take blocks from its front, one each time a
    position needs a new block.
    """

    def __init__(self, num_blocks, block_size, n_kv_heads, head_dim, free_blocks):
        shape = (num_blocks, block_size, n_kv_heads, head_dim)
        self.k_pool = np.zeros(shape, dtype=np.float32)
        self.v_pool = np.zeros(shape, dtype=np.float32)
        self.block_size = block_size
        self.free_blocks = list(free_blocks)
        self.block_table = []
        self.length = 0

    def append(self, k, v):
        """Stores one chunk's K and V, each (C, Hkv, Dh), at positions length .. length+C-1."""
        raise NotImplementedError("append")

    def gather(self):
        """Returns (K, V): positions 0..length-1 in position order, each (T, Hkv, Dh)."""
        raise NotImplementedError("gather")
