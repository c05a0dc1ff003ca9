"""The attention assignment's C++ variant (starter.cpp), as harness.py calls it.

Each function of the Python variant, done by the student's extern "C" function
of the same name (README.md, "C++ variant"): the arrays passed as float32 (the
mask as int32) row-major pointers with their sizes, the output written into a
NaN-poisoned buffer.
"""

import types

from cpp_call import F32, I32, INT, Function, floats, ints, output, ptr


def bind(lib):
    causal = Function(lib, "causal_attention", F32, F32, F32, INT, INT, F32)
    masked = Function(lib, "masked_attention", F32, F32, F32, I32, INT, INT, F32)
    gqa = Function(lib, "gqa_attention", F32, F32, F32, INT, INT, INT, INT, F32)

    def causal_attention(q, k, v):
        q, k, v = floats(q), floats(k), floats(v)
        t, dh = q.shape
        out = output((t, dh))
        causal(ptr(q), ptr(k), ptr(v), t, dh, ptr(out))
        return out

    def masked_attention(q, k, v, mask):
        q, k, v, mask = floats(q), floats(k), floats(v), ints(mask)
        t, dh = q.shape
        out = output((t, dh))
        masked(ptr(q), ptr(k), ptr(v), ptr(mask), t, dh, ptr(out))
        return out

    def gqa_attention(q, k, v):
        q, k, v = floats(q), floats(k), floats(v)
        t, h, dh = q.shape
        out = output((t, h, dh))
        gqa(ptr(q), ptr(k), ptr(v), t, h, k.shape[1], dh, ptr(out))
        return out

    return types.SimpleNamespace(causal_attention=causal_attention,
                                 masked_attention=masked_attention, gqa_attention=gqa_attention)
