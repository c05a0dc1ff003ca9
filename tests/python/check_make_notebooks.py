"""The README's way into the notebooks, `make notebooks`, works (issue 43, part 6).

Runs the very command `make notebooks` runs (read from `make -n`, so the test and the
Makefile cannot drift apart) with a fixed token, on a free loopback port, without a
browser, and checks through Jupyter's REST API on 127.0.0.1 that
  1. the server lists every notebook of lessons/notebooks,
  2. its python3 kernel is an interpreter that imports the prefill_lab module with the
     environment the command set (PYTHONPATH to the build's module), whichever python3
     comes first on PATH.
The server is stopped at the end; every wait is bounded.

Usage: check_make_notebooks.py REPO_ROOT BUILD_DIR
"""
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    root, build = sys.argv[1], sys.argv[2]
    port, token = free_port(), "plab-notebook-check"
    args = f"--no-browser --ip=127.0.0.1 --port={port} --NotebookApp.token={token}"
    dry = subprocess.run(["make", "-s", "-n", "notebooks", f"BUILD_DIR={build}",
                          f"NOTEBOOK_ARGS={args}"], cwd=root, capture_output=True, text=True,
                         check=True).stdout
    lines = [l for l in dry.splitlines() if "/usr/bin/jupyter-notebook " in l]
    if len(lines) != 1:
        sys.exit(f"make -n notebooks printed {len(lines)} jupyter-notebook lines:\n{dry}")
    words = shlex.split(lines[0])
    env = dict(os.environ)
    while "=" in words[0]:  # leading VAR=value assignments of the recipe line
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    # A python3 first on PATH that is not Debian's must not matter.
    env["PATH"] = "/nonexistent-python-first:" + env.get("PATH", "")
    server = subprocess.Popen(words, cwd=root, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    base = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.time() + 60
        contents = None
        while time.time() < deadline and contents is None:
            if server.poll() is not None:
                sys.exit(f"jupyter-notebook exited with {server.returncode}:\n{server.stdout.read()}")
            try:
                with urllib.request.urlopen(f"{base}/contents?token={token}", timeout=5) as r:
                    contents = json.load(r)
            except OSError:
                time.sleep(0.5)
        if contents is None:
            sys.exit("jupyter-notebook did not answer on 127.0.0.1 within 60 s")
        listed = sorted(c["name"] for c in contents["content"] if c["type"] == "notebook")
        shipped = sorted(n for n in os.listdir(os.path.join(root, "lessons", "notebooks"))
                         if n.endswith(".ipynb"))
        if listed != shipped:
            sys.exit(f"the server lists {listed}, lessons/notebooks holds {shipped}")
        with urllib.request.urlopen(f"{base}/kernelspecs?token={token}", timeout=10) as r:
            specs = json.load(r)
        argv = specs["kernelspecs"]["python3"]["spec"]["argv"]
        probe = "import prefill_lab as pl; print(pl.__file__)"
        done = subprocess.run([argv[0], "-c", probe], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"the notebooks' kernel {argv[0]} cannot import prefill_lab with "
                     f"PYTHONPATH={env.get('PYTHONPATH')}:\n{done.stderr}")
        print(f"ok: make notebooks serves {len(listed)} notebooks on 127.0.0.1:{port}; "
              f"its kernel {argv[0]} imports {done.stdout.strip()}")
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
