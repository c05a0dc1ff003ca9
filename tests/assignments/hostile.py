"""Grades one hostile submission (tests/assignments/hostile/NAME) and checks it was contained.

  hostile.py --plab PLAB --source REPO --scratch DIR NAME

The submission's header says what grading must show: `expect: REGEX` lines
(each must match plab's output, stdout and stderr together), `args: ...` (more
arguments of plab grade), `exit: N` (default 1). Its @NAMES@ are filled in
with this run's decoys: @DECOY@ a folder of the grader's, @HOME@ a home with a
.bashrc, @SOLUTION@ / @SOLUTION_CPP@ the assignment's solutions, @PORT@ a TCP
port this script listens on at 127.0.0.1, @MARKER@ a word to find a leftover
process by. Afterwards every decoy, the repository's lessons/assignments/ and
the submission must be unchanged, nobody may have connected, no process may
be left, no core file written and TMPDIR must be empty again.
"""

import argparse
import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time


def tree_hash(root):
    h = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            h.update(path.encode())
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def processes_with(marker):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found


def header(text, key):
    return [m.group(1) for m in re.finditer(rf"^(?:#|//) {key}: (.*)$", text, re.M)]


def fail(name, why, output=""):
    sys.exit(f"hostile {name}: {why}\n--- plab's output ---\n{output}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--plab", required=True)
    p.add_argument("--source", required=True)
    p.add_argument("--scratch", required=True)
    p.add_argument("name")
    a = p.parse_args()
    src = os.path.join(a.source, "tests", "assignments", "hostile", a.name)
    text = open(src).read()
    work = os.path.join(a.scratch, "hostile", os.path.splitext(a.name)[0])
    shutil.rmtree(work, ignore_errors=True)
    decoy, home, tmp, sub = (os.path.join(work, d) for d in ("decoy", "home", "tmp", "submission"))
    for d in (os.path.join(decoy, "inner"), home, tmp, sub):
        os.makedirs(d)
    open(os.path.join(decoy, "grades.csv"), "w").write("alice,1.0\n")
    open(os.path.join(decoy, "inner", "notes.txt"), "w").write("keep me\n")
    open(os.path.join(home, ".bashrc"), "w").write("export PS1='$ '\n")

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    connections = []
    threading.Thread(target=lambda: connections.append(listener.accept()), daemon=True).start()

    assignments = os.path.join(a.source, "lessons", "assignments")
    marker = f"plab-hostile-{os.getpid()}-{a.name}"
    for key, value in {"DECOY": decoy, "HOME": home, "PORT": str(listener.getsockname()[1]),
                       "SOLUTION": os.path.join(assignments, "attention", "solution.py"),
                       "SOLUTION_CPP": os.path.join(assignments, "attention", "solution.cpp"),
                       "MARKER": marker}.items():
        text = text.replace(f"@{key}@", value)
    file = os.path.join(sub, a.name)
    open(file, "w").write(text)
    before = {d: tree_hash(d) for d in (decoy, home, assignments, sub)}

    args = sum((x.split() for x in header(text, "args")), [])
    env = dict(os.environ, TMPDIR=tmp)
    start = time.monotonic()
    run = subprocess.run([a.plab, "grade", "attention", file] + args, env=env, cwd=work,
                         capture_output=True, text=True, errors="replace", timeout=180)
    output = run.stdout + run.stderr
    expected_exit = int((header(text, "exit") or ["1"])[0])
    if run.returncode != expected_exit:
        fail(a.name, f"exit {run.returncode}, expected {expected_exit}", output)
    for regex in header(text, "expect"):
        if not re.search(regex.replace("\\n", "\n"), output):
            fail(a.name, f"no match for '{regex}'", output)
    for d, h in before.items():
        if tree_hash(d) != h:
            fail(a.name, f"{d} changed while grading", output)
    if connections:
        fail(a.name, "a connection reached 127.0.0.1 from the sandbox", output)
    left = processes_with(marker)
    if left:
        fail(a.name, f"processes left behind: {left}", output)
    cores = [f for f in os.listdir(work) if f.startswith("core")]
    if cores or os.listdir(tmp):
        fail(a.name, f"files left: cores {cores}, TMPDIR {os.listdir(tmp)}", output)
    print(f"hostile {a.name}: contained in {time.monotonic() - start:.1f} s\n{output}")


if __name__ == "__main__":
    main()
