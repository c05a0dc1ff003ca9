"""The flash_kernel assignment (a CUDA file run on the SIMT emulator), as harness.py calls it.

tiled_attention(q, k, v, mask, tile) -> (out, m, l), the online_softmax
assignment's function, done by the student's kernel through its extern "C"
flash_attention (README.md): the arrays passed as float32 (the mask as int32)
row-major pointers with their sizes, out, m and l written into NaN-poisoned
buffers. A launch the emulator stops (a race on a shared tile, an index outside
one) returns -2 with the emulator's message in flash_error(), raised here.
"""

import ctypes
import types

from cpp_call import F32, I32, INT, Function, floats, ints, output, ptr


def bind(lib):
    fn = Function(lib, "flash_attention", F32, F32, F32, I32, INT, INT, INT, F32, F32, F32)
    error = getattr(lib, "flash_error", None)
    if error is not None:
        error.restype = ctypes.c_char_p

    def tiled_attention(q, k, v, mask, tile):
        q, k, v, mask = floats(q), floats(k), floats(v), ints(mask)
        t, dh = q.shape
        out, m, l = output((t, dh)), output((t,)), output((t,))
        rc = fn.raw(ptr(q), ptr(k), ptr(v), ptr(mask), t, dh, int(tile), ptr(out), ptr(m), ptr(l))
        if rc == -1:
            raise NotImplementedError("flash_attention returned -1, as the starter does")
        if rc == -2:
            raise RuntimeError(error().decode("utf-8", "replace") if error else "launch failed")
        if rc != 0:
            raise RuntimeError(f"flash_attention returned {rc}; return 0 when done")
        return out, m, l

    return types.SimpleNamespace(tiled_attention=tiled_attention)
