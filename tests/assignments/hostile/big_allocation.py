# 10 GB in one allocation. Contained by the memory limit.
# expect: causal, small shapes +0/4 +FAIL \(memory limit\)
# expect: memory limit 1024 MiB exceeded \(.*MemoryError
import numpy as np


def causal_attention(q, k, v):
    return np.ones(10 * 2**30 // 8)
