"""Calling a student's compiled C++ from the harness: what every cpp_adapter.py uses.

A C++ variant's functions are extern "C", take plain pointers (float32 arrays,
int32 arrays) and sizes, write their result into an output buffer the caller
owns, and return 0 when done; the starter's bodies return -1 ("not written
yet"). An assignment's cpp_adapter.py turns each into the Python variant's
function with these helpers, so harness.py calls, and plab grades, both
variants the same way. Output buffers start as NaN, so an element the
student's code never writes shows as NaN, not as a plausible 0.
"""

import ctypes

import numpy as np

F32 = ctypes.POINTER(ctypes.c_float)
I32 = ctypes.POINTER(ctypes.c_int32)
INT = ctypes.c_int
DOUBLE = ctypes.c_double
HANDLE = ctypes.c_void_p

# The arrays ptr() handed out, by address: (bytes, bytes an element). With
# them harness.py names the array and the index a sanitizer's report points at.
pointed = {}
# harness.py's hook, called with (function name, [(argument index, address,
# bytes, bytes an element)]) just before the student's function runs; None
# outside the grader.
before_call = None


class Function:
    """One extern "C" function of the student's library that returns int (0 = done)."""

    def __init__(self, lib, name, *argtypes, restype=ctypes.c_int):
        self.name = name
        # A missing function fails when it is called, so the others still get graded.
        self.fn = getattr(lib, name, None)
        if self.fn is not None:
            self.fn.argtypes = argtypes
            self.fn.restype = restype

    def raw(self, *args):
        """The call, its return value as it is (for functions that return a handle)."""
        if self.fn is None:
            raise AttributeError(
                f'your file defines no extern "C" {self.name} (a C++ name without extern "C" '
                "is mangled and cannot be found)")
        if before_call is not None:
            addresses = [(i, ctypes.cast(a, ctypes.c_void_p).value) for i, a in enumerate(args)
                         if isinstance(a, ctypes._Pointer)]
            before_call(self.name, [(i, at, *pointed.get(at, (0, 1))) for i, at in addresses])
        return self.fn(*args)

    def __call__(self, *args):
        rc = self.raw(*args)
        if rc == -1:
            raise NotImplementedError(f"{self.name} returned -1, as the starter does")
        if rc != 0:
            raise RuntimeError(f"{self.name} returned {rc}; return 0 when done")


def floats(a):
    """A C-contiguous float32 array (a copy when `a` is not one already)."""
    return np.ascontiguousarray(a, dtype=np.float32)


def ints(a):
    """A C-contiguous int32 array."""
    return np.ascontiguousarray(a, dtype=np.int32)


def ptr(a):
    """The pointer to a's first element, for a float32 or int32 array."""
    pointed[a.ctypes.data] = (a.nbytes, a.itemsize)
    return a.ctypes.data_as(F32 if a.dtype == np.float32 else I32)


def output(shape):
    """An output buffer of float32, poisoned with NaN."""
    return np.full(shape, np.nan, dtype=np.float32)
