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
"""

import importlib.util
import json
import math
import os
import sys
import traceback

import numpy as np


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


def run_case(module, calls, path):
    objects = {}
    results = []
    for call in calls:
        if results and "error" in results[-1]:
            results.append({"error": "skipped: an earlier call of this case failed"})
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
    return results


def main():
    path = sys.argv[1]
    request = json.load(sys.stdin)
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # the student's prints
    try:
        spec = importlib.util.spec_from_file_location("student", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        reply = {"import_error": f"SyntaxError: {exc.msg} (line {exc.lineno})"}
    except Exception as exc:
        reply = {"import_error": one_line(exc, path)}
    else:
        reply = {"results": [run_case(module, c["calls"], path) for c in request["cases"]]}
    sys.stdout = real_stdout
    json.dump(reply, sys.stdout)


if __name__ == "__main__":
    main()
