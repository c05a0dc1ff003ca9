"""The grader's Python side: runs a student's file on the cases `plab grade` generated.

`plab grade ASSIGNMENT FILE` writes the cases as JSON on this script's stdin and
reads the results as JSON from its stdout; all the grading (the reference
tensors, the comparison, the hints) is done by plab, from the engine's own code.
This script only calls the student's functions, so it knows no assignment.

  stdin:  {"cases": [{"calls": [CALL, ...]}, ...]}
  CALL:   {"fn": "name" | "obj.method" | "obj.attribute", "args": {...}, "as": "obj"}
          args are keyword arguments; an array is {"array": [flat values], "shape": [...],
          "dtype": "float32" | "int64"}
  stdout: {"results": [[RESULT, ...], ...]}   one RESULT per call
          RESULT: {"value": V} or {"error": "one line"}; V an array as above (float64),
          a list of values (a tuple returned), a number, or null
          or {"import_error": "one line"} when the file cannot be imported.

A call that raises gives {"error": ...}; the rest of that case is skipped (its
later calls depend on the state it left). What the student prints goes to
stderr, so it cannot corrupt the results. Run with Debian's /usr/bin/python3,
whose numpy plab expects.

A C++ variant (`plab grade attention my_attention.cpp`): plab compiles the file
into a shared library and runs

  harness.py FILE.cpp --library LIB.so --adapter ASSIGNMENT/cpp_adapter.py

The adapter's bind(library) returns an object with the Python variant's
functions, each calling the student's extern "C" function through ctypes
(cpp_call.py), so the same calls, the same comparisons and the same hints grade
both. Each case then runs in a forked child: a crash (a write out of bounds) is
that case's failed call, named by its signal, and the other cases still run.
"""

import importlib.util
import json
import math
import os
import signal
import sys
import traceback

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ beside the student's file or the adapters


def decode(x):
    if isinstance(x, dict) and "array" in x:
        dtype = np.int64 if x.get("dtype") == "int64" else np.float32
        return np.array(x["array"], dtype=dtype).reshape(x["shape"])
    if isinstance(x, list):
        return [decode(e) for e in x]
    return x


def number(v):
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def encode(x):
    if x is None:
        return None
    if isinstance(x, tuple):
        return [encode(e) for e in x]
    if isinstance(x, (bool, int, float, np.generic)):
        return {"array": [number(x)], "shape": []}
    a = np.asarray(x)  # a list, an ndarray, ...: ragged or non-numeric raises
    if a.dtype == object or not np.issubdtype(a.dtype, np.number) and a.dtype != bool:
        raise TypeError(f"returned {type(x).__name__} that is not an array of numbers")
    return {"array": [number(v) for v in a.astype(np.float64).ravel()], "shape": list(a.shape)}


def where_in_student(exc, path):
    """The line of the student's file the exception came from, if any."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if os.path.abspath(frame.filename) == os.path.abspath(path):
            return f" (line {frame.lineno}: {frame.line})"
    return ""


def one_line(exc, path):
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text[:300] + where_in_student(exc, path)


SKIPPED = {"error": "skipped: an earlier call of this case failed"}


def run_case(module, calls, path, on_result=None):
    """The results of one case's calls; on_result(result), if given, sees each as it comes."""
    objects = {}
    results = []
    for call in calls:
        if results and "error" in results[-1]:
            results.append(SKIPPED)
            if on_result:
                on_result(results[-1])
            continue
        try:
            name = call["fn"]
            if "." in name:
                obj_name, attr = name.split(".", 1)
                target = getattr(objects[obj_name], attr)
            else:
                target = getattr(module, name, None)
                if target is None:
                    raise AttributeError(f"your file defines no '{name}'")
            args = {k: decode(v) for k, v in call.get("args", {}).items()}
            value = target(**args) if callable(target) else target
            if "as" in call:
                objects[call["as"]] = value
                value = None
            results.append({"value": encode(value)})
        except Exception as exc:  # the student's mistake is a failed check, never a crash
            results.append({"error": one_line(exc, path)})
        if on_result:
            on_result(results[-1])
    return results


def run_case_forked(module, calls, path):
    """run_case in a child process, for compiled code: a crash ends the child, not the grading.

    The child sends each call's result as one JSON line as soon as it has it, so
    the parent knows which call crashed: that one gets the signal as its error.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        out = os.fdopen(write_end, "w")

        def send(result):
            out.write(json.dumps(result) + "\n")
            out.flush()

        try:
            run_case(module, calls, path, send)
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as inp:
        results = [json.loads(line) for line in inp.read().splitlines()]
    _, status = os.waitpid(pid, 0)
    if len(results) < len(calls):
        if os.WIFSIGNALED(status):
            how = signal.Signals(os.WTERMSIG(status)).name
        else:
            how = f"exit {os.WEXITSTATUS(status)}"
        fn = calls[len(results)]["fn"]
        results.append({"error": f"your code crashed ({how}) in {fn}: a read or write out of "
                                 "bounds, or a null pointer?"})
        results += [SKIPPED] * (len(calls) - len(results))
    return results


def load_cpp(library, adapter_path):
    """The compiled student's functions, as the Python variant's (see the adapter)."""
    import ctypes

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # cpp_call
    spec = importlib.util.spec_from_file_location("cpp_adapter", adapter_path)
    adapter = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(adapter)
    try:
        lib = ctypes.CDLL(library)
    except OSError as exc:  # an undefined symbol: a function declared but never written
        raise ImportError(str(exc).replace(library + ": ", "")) from None
    return adapter.bind(lib)


def main():
    path = sys.argv[1]
    options = dict(zip(sys.argv[2::2], sys.argv[3::2]))  # --library LIB --adapter ADAPTER
    request = json.load(sys.stdin)
    # The student's prints go to stderr, Python's and C++'s (printf writes to fd 1) alike.
    real_stdout = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    run = run_case
    try:
        if "--library" in options:
            module = load_cpp(options["--library"], options["--adapter"])
            run = run_case_forked
        else:
            spec = importlib.util.spec_from_file_location("student", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
    except SyntaxError as exc:
        reply = {"import_error": f"SyntaxError: {exc.msg} (line {exc.lineno})"}
    except Exception as exc:
        reply = {"import_error": one_line(exc, path)}
    else:
        reply = {"results": [run(module, c["calls"], path) for c in request["cases"]]}
    sys.stdout = real_stdout
    json.dump(reply, real_stdout)
    real_stdout.flush()


if __name__ == "__main__":
    main()
