"""The rope assignment's C++ variant (starter.cpp), as harness.py calls it.

rope(x, pos0, theta) done by the student's extern "C" rope (README.md, "C++
variant"): x passed as a float32 row-major pointer with its sizes, the result
written into a NaN-poisoned buffer.
"""

import types

from cpp_call import DOUBLE, F32, INT, Function, floats, output, ptr


def bind(lib):
    fn = Function(lib, "rope", F32, INT, INT, INT, INT, DOUBLE, F32)

    def rope(x, pos0, theta):
        x = floats(x)
        c, h, dh = x.shape
        out = output((c, h, dh))
        fn(ptr(x), c, h, dh, int(pos0), float(theta), ptr(out))
        return out

    return types.SimpleNamespace(rope=rope)
