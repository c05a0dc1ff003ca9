"""Planted mistake: a new block for every chunk, full or not."""

import numpy as np


class PagedKVCache:
    """One sequence's paged KV cache (PagedAttention, Kwon et al. 2023), one layer.

    The pools are (num_blocks, B, Hkv, Dh), as the engine's (src/core/kv_layout.h):
    position p lives in block block_table[p // B] at offset p % B.
    """

    def __init__(self, num_blocks, block_size, n_kv_heads, head_dim, free_blocks):
        shape = (num_blocks, block_size, n_kv_heads, head_dim)
        self.k_pool = np.zeros(shape, dtype=np.float32)
        self.v_pool = np.zeros(shape, dtype=np.float32)
        self.block_size = block_size
        self.free_blocks = [int(b) for b in free_blocks]  # taken from the front
        self.block_table = []  # logical block i -> physical block
        self.length = 0  # positions cached

    def append(self, k, v):
        """Stores a chunk's K and V, (C, Hkv, Dh) each, at positions length..length+C-1."""
        self.block_table.append(self.free_blocks.pop(0))
        for i in range(k.shape[0]):
            p = self.length + i
            block = self.block_table[p // self.block_size]
            self.k_pool[block, p % self.block_size] = k[i]
            self.v_pool[block, p % self.block_size] = v[i]
        self.length += k.shape[0]

    def gather(self):
        """K and V of positions 0..length-1 in position order, (T, Hkv, Dh) each."""
        p = np.arange(self.length)
        blocks = np.asarray(self.block_table, dtype=np.int64)[p // self.block_size]
        return self.k_pool[blocks, p % self.block_size], self.v_pool[blocks, p % self.block_size]
