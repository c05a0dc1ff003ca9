"""The grader's Python side: runs a student's file on the cases `plab grade` generated.

`plab grade ASSIGNMENT FILE` starts this script in the grading sandbox (no
network, nothing of the machine but /usr, /etc, a private /tmp and the stage
/grade: the submission and this script), writes the cases as JSON on its stdin
and reads the results, one JSON line per case, from its stdout; all the grading
(the reference tensors, the comparison, the hints) is done by plab, from the
engine's own code. This script only calls the student's functions, so it knows
no assignment.

  stdin:  {"cases": [{"calls": [CALL, ...], "check": i}, ...], "checks": [name, ...],
           "limits": {"check_timeout_s": S, "memory_mib": M, "processes": N, "cpu_s": C}}
  CALL:   {"fn": "name" | "obj.method" | "obj.attribute", "args": {...}, "as": "obj"}
          args are keyword arguments; an array is {"array": [flat values], "shape": [...],
          "dtype": "float32" | "int64"}
  stdout: one line per case, in order: {"case": k, "results": [RESULT, ...]}, one RESULT per call
          RESULT: {"value": V} or {"error": "one line"}, with "limit": L when a limit of the
          sandbox stopped it (timeout, memory, processes, network, files, cpu, sanitizer, crash);
          V an array as above (float64), a list of values (a tuple returned), a number, or null
          or a first and only line {"import_error": "one line"} when the file cannot be imported.

Each check runs in a forked child with its own time limit (a check past it
fails, with "limit": "timeout", and the next check starts), so an endless loop
in one function costs that function's check only. A call that raises gives
{"error": ...}; the rest of that case is skipped (its later calls depend on the
state it left). What the student prints goes to stderr, so it cannot corrupt
the results. Run with Debian's /usr/bin/python3, whose numpy plab expects.

A C++ variant (`plab grade attention my_attention.cpp`): plab compiles the file
(with AddressSanitizer and UBSan unless --no-sanitize) into a shared library
and runs

  harness.py FILE.cpp --library LIB.so --adapter ASSIGNMENT/cpp_adapter.py

with the ASan runtime preloaded. The adapter's bind(library) returns an object
with the Python variant's functions, each calling the student's extern "C"
function through ctypes (cpp_call.py), so the same calls, the same comparisons
and the same hints grade both. Each case then runs in a forked child: a crash
or a sanitizer's finding is that case's failed call — the report's first line,
with the array and the index it points at named by the student's own
parameter names ("WRITE of size 4 at out[12], one past the end of out (12
elements)") — and the other cases still run.
"""

import errno
import importlib.util
import json
import math
import os
import re
import select
import signal
import socket
import sys
import tempfile
import time
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
LIMITS = {"check_timeout_s": 10, "memory_mib": 1024, "processes": 64, "cpu_s": 60}


def not_visible(err, filename):
    """A file the sandbox forbids: any write outside /tmp, or a path whose folder is not there."""
    if err in (errno.EROFS, errno.EACCES, errno.EPERM):
        return True
    return (err == errno.ENOENT and isinstance(filename, str) and os.path.isabs(filename)
            and not os.path.isdir(os.path.dirname(filename)))


def classify(exc, path):
    """The call's result for an exception: its one line, and the limit it ran into if any."""
    text = one_line(exc, path)
    err = getattr(exc, "errno", None)
    if isinstance(exc, MemoryError):
        return {"error": f"memory limit {LIMITS['memory_mib']} MiB exceeded ({text})",
                "limit": "memory"}
    if (isinstance(exc, BlockingIOError) and err == errno.EAGAIN) or (
            isinstance(exc, RuntimeError) and "can't start new thread" in str(exc)):
        return {"error": f"process limit {LIMITS['processes']} reached ({text})",
                "limit": "processes"}
    if isinstance(exc, (ConnectionError, socket.gaierror, socket.timeout)) or err in (
            errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL):
        return {"error": f"network is not available while grading ({text})", "limit": "network"}
    if isinstance(exc, OSError) and not_visible(err, exc.filename):
        return {"error": "only /tmp can be written, and nothing of the machine but /usr and "
                         f"/etc can be read, while grading ({text})", "limit": "files"}
    return {"error": text}


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
        except BaseException as exc:  # the student's mistake (even sys.exit) is a failed check
            results.append(classify(exc, path))
        if on_result:
            on_result(results[-1])
    return results


def parameter_names(path):
    """{function: [parameter names]} of the extern "C" functions in the student's C++ file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            source = re.sub(r"//[^\n]*|/\*.*?\*/", "", f.read(), flags=re.S)
    except OSError:
        return {}
    names = {}
    for m in re.finditer(r'extern\s+"C"\s+[^;{(]*?\b(\w+)\s*\(([^)]*)\)', source):
        params = [p.strip() for p in m.group(2).split(",") if p.strip()]
        names[m.group(1)] = [(re.findall(r"\w+", p) or ["?"])[-1] for p in params]
    return names


def where_in_arrays(address, pointers, names, fn):
    """'out[12], one past the end of out (12 elements)' for an address in or beside an array."""
    best = None
    for index, base, size, item in pointers:
        distance = 0 if base <= address < base + size else min(abs(address - base),
                                                                abs(address - base - size))
        if best is None or distance < best[0]:
            best = (distance, index, base, size, item)
    if best is None or best[0] > 4096:
        return None
    _, index, base, size, item = best
    param = names.get(fn, [])
    name = param[index] if index < len(param) else f"argument {index + 1}"
    n, at = size // item, (address - base) // item
    elements = f"{n} element" + ("" if n == 1 else "s")
    if at < 0:
        return f"{name}[{at}], before the start of {name} ({elements})"
    if at >= n:
        past = "one" if at == n else str(at - n + 1)
        return f"{name}[{at}], {past} past the end of {name} ({elements})"
    return f"{name}[{at}] ({elements})"


def sanitizer_finding(report, pointers, names, fn, shown_path, path):
    """The report's first line as the student can act on it, and its limit; None if none."""
    for line in report.splitlines():
        if "runtime error:" in line:  # UBSan: file:line:column: runtime error: ...
            return {"error": "UndefinedBehaviorSanitizer: " + line.strip().replace(
                os.path.dirname(path) + "/", shown_path), "limit": "sanitizer"}
        m = re.search(r"(?:ERROR: )?AddressSanitizer: (.*)", line)
        if not m:
            continue
        what = m.group(1)
        if ("allocation size" in what or "rss limit" in what or "out of memory" in what
                or "allocation-size-too-big" in what):
            return {"error": f"memory limit {LIMITS['memory_mib']} MiB exceeded "
                             f"(AddressSanitizer: {what.split(' (')[0]})", "limit": "memory"}
        kind = what.split(" on ")[0]
        access = re.search(r"(READ|WRITE) of size (\d+) at (0x[0-9a-f]+)", report)
        address = re.search(r"address (0x[0-9a-f]+)", what)
        if kind == "SEGV":
            return {"error": f"AddressSanitizer: SEGV on address {address.group(1) if address else '?'}"
                             f" in {fn}: a null or wild pointer?", "limit": "sanitizer"}
        at = access.group(3) if access else address.group(1) if address else None
        where = where_in_arrays(int(at, 16), pointers, names, fn) if at else None
        rw = f"{access.group(1)} of size {access.group(2)}" if access else "access"
        return {"error": f"AddressSanitizer: {kind}: {rw} at " + (where or at or "?") +
                         f", in {fn}", "limit": "sanitizer"}
    return None


def run_case_forked(module, calls, path, names):
    """run_case in a child process, for compiled code: a crash ends the child, not the grading.

    The child sends each call's result as one JSON line as soon as it has it,
    and before each call of the student's code the pointers it passes, so the
    parent knows which call crashed and which array a sanitizer's report is
    about. The child's stderr (the student's prints, the report) goes to a
    file in the private /tmp, read back when the child ends.
    """
    import cpp_call

    read_end, write_end = os.pipe()
    log = tempfile.TemporaryFile(dir="/tmp" if os.path.isdir("/tmp") else None)
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        out = os.fdopen(write_end, "w")
        me = os.getpid()

        def send(result):
            if os.getpid() != me:  # a process the student's code forked: not ours
                os._exit(0)
            out.write(json.dumps(result) + "\n")
            out.flush()

        cpp_call.before_call = lambda fn, ptrs: send({"pointers": ptrs, "fn": fn})
        try:
            run_case(module, calls, path, send)
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as inp:
        lines = [json.loads(line) for line in inp.read().splitlines()]
    _, status = os.waitpid(pid, 0)
    results = [x for x in lines if "pointers" not in x]
    last = ([x for x in lines if "pointers" in x] or [{"pointers": [], "fn": "?"}])[-1]
    log.seek(0)
    report = log.read().decode("utf-8", "replace")
    sys.stderr.write(report[:65536])
    if len(results) < len(calls):
        finding = sanitizer_finding(report, last["pointers"], names, last["fn"],
                                    SHOWN_DIR, path)
        if finding is None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
            finding = {"error": f"CPU time limit {LIMITS['cpu_s']} s exceeded in {last['fn']}",
                       "limit": "cpu"}
        if finding is None:
            how = (signal.Signals(os.WTERMSIG(status)).name if os.WIFSIGNALED(status)
                   else f"exit {os.WEXITSTATUS(status)}")
            finding = {"error": f"your code crashed ({how}) in {calls[len(results)]['fn']}: a "
                                "read or write out of bounds, or a null pointer?", "limit": "crash"}
        results.append(finding)
        results += [SKIPPED] * (len(calls) - len(results))
    return results


def run_check(run, module, cases, path, first_case, name, out):
    """One check's cases in a forked child under the check's time limit; lines to `out`.

    A check past its limit is killed with everything it started; its cases
    without a result get the time-out as their error, and the next check runs.
    """
    timeout = LIMITS["check_timeout_s"]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        os.setpgid(0, 0)
        me = os.getpid()
        try:
            with os.fdopen(write_end, "w") as pipe:
                for calls in cases:
                    results = run(module, calls, path)
                    if os.getpid() != me:  # a process the student's code forked: not ours
                        os._exit(0)
                    pipe.write(json.dumps(results) + "\n")
                    pipe.flush()
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # the child has set it already, or has ended
    deadline = time.monotonic() + timeout
    buffer, done, timed_out = b"", 0, False
    while done < len(cases):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([read_end], [], [], left)[0]:
            timed_out = True
            break
        chunk = os.read(read_end, 1 << 16)
        if not chunk:
            break
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            emit(out, first_case + done, json.loads(line))
            done += 1
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    _, status = os.waitpid(pid, 0)
    os.close(read_end)
    for k in range(done, len(cases)):
        if timed_out:
            why = {"error": f"timed out: check '{name}' ran past its {timeout} s limit "
                            "(--timeout S)", "limit": "timeout"}
        else:
            how = (signal.Signals(os.WTERMSIG(status)).name if os.WIFSIGNALED(status)
                   else f"exit {os.WEXITSTATUS(status)}")
            why = {"error": f"your code ended the grader's process ({how})", "limit": "crash"}
        emit(out, first_case + k, [why] * len(cases[k]))


def emit(out, case, results):
    out.write(json.dumps({"case": case, "results": results}) + "\n")
    out.flush()


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


SHOWN_DIR = ""  # the folder a sanitizer's line names the student's file in


def main():
    path = sys.argv[1]
    options = dict(zip(sys.argv[2::2], sys.argv[3::2]))  # --library LIB --adapter ADAPTER
    request = json.load(sys.stdin)
    LIMITS.update(request.get("limits", {}))
    # The student's prints go to stderr, Python's and C++'s (printf writes to fd 1) alike.
    real_stdout = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    run = run_case
    harness = os.getpid()
    try:
        if "--library" in options:
            module = load_cpp(options["--library"], options["--adapter"])
            names = parameter_names(path)
            run = lambda m, calls, p: run_case_forked(m, calls, p, names)  # noqa: E731
        else:
            spec = importlib.util.spec_from_file_location("student", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
    except SyntaxError as exc:
        emit_import_error(real_stdout, f"SyntaxError: {exc.msg} (line {exc.lineno})")
        return
    except BaseException as exc:  # an import that raises, exits or runs out of a limit
        if os.getpid() == harness:
            emit_import_error(real_stdout, classify(exc, path)["error"])
        return
    if os.getpid() != harness:  # the student's import forked: that copy stops here
        os._exit(0)
    cases = request["cases"]
    first = 0
    for check, name in enumerate(request.get("checks", ["all"])):
        mine = [c["calls"] for c in cases if c.get("check", 0) == check]
        run_check(run, module, mine, path, first, name, real_stdout)
        first += len(mine)


def emit_import_error(out, text):
    out.write(json.dumps({"import_error": text}) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
