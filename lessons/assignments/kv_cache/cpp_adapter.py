"""The kv_cache assignment's C++ variant (starter.cpp), as harness.py calls it.

The Python variant's class PagedKVCache, each method done by the student's
extern "C" function (README.md, "C++ variant"): the cache is the C++ struct,
held by its pointer; block_table, k_pool and v_pool are read through the
starter's given functions, copied into numpy each time the grader reads them.
"""

import ctypes
import types

import numpy as np

from cpp_call import F32, HANDLE, I32, INT, Function, floats, ints, output, ptr


def bind(lib):
    new = Function(lib, "kv_cache_new", INT, INT, INT, INT, I32, INT, restype=HANDLE)
    delete = Function(lib, "kv_cache_delete", HANDLE, restype=None)
    append = Function(lib, "kv_cache_append", HANDLE, F32, F32, INT)
    gather = Function(lib, "kv_cache_gather", HANDLE, F32, F32)
    length = Function(lib, "kv_cache_length", HANDLE)
    table_size = Function(lib, "kv_cache_table_size", HANDLE)
    table = Function(lib, "kv_cache_block_table", HANDLE, restype=I32)
    k_pool = Function(lib, "kv_cache_k_pool", HANDLE, restype=F32)
    v_pool = Function(lib, "kv_cache_v_pool", HANDLE, restype=F32)

    class PagedKVCache:
        def __init__(self, num_blocks, block_size, n_kv_heads, head_dim, free_blocks):
            free = ints(free_blocks)
            self.shape = (num_blocks, block_size, n_kv_heads, head_dim)
            self.handle = new.raw(num_blocks, block_size, n_kv_heads, head_dim, ptr(free),
                                  len(free))

        def __del__(self):
            if getattr(self, "handle", None):
                delete.raw(self.handle)

        def append(self, k, v):
            k, v = floats(k), floats(v)
            append(self.handle, ptr(k), ptr(v), k.shape[0])

        def gather(self):
            t = length.raw(self.handle)
            k = output((t,) + self.shape[2:])
            v = output((t,) + self.shape[2:])
            gather(self.handle, ptr(k), ptr(v))
            return k, v

        @property
        def block_table(self):
            n = table_size.raw(self.handle)
            return [int(table.raw(self.handle)[i]) for i in range(n)]

        @property
        def k_pool(self):
            return self._pool(k_pool)

        @property
        def v_pool(self):
            return self._pool(v_pool)

        def _pool(self, fn):
            n = int(np.prod(self.shape))
            data = ctypes.cast(fn.raw(self.handle), ctypes.POINTER(ctypes.c_float * n)).contents
            return np.frombuffer(data, dtype=np.float32).reshape(self.shape).copy()

    return types.SimpleNamespace(PagedKVCache=PagedKVCache)
