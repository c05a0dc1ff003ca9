#!/usr/bin/env python3
"""The web build (issue 51, viewer/web) tested in a real browser: Debian's chromium.

Serves the page folder (build-web/) on a loopback port (http.server), starts headless
Chromium with a DevTools port, and drives the page through the DevTools protocol (a
small WebSocket client below: the standard library has none). Each case opens the page
with the viewer's flags in its address, reads window.plab (viewer/web/shell.html: the
frames drawn, every line the viewer printed, JavaScript errors, the exit code), presses
keys as a person would (Input.dispatchKeyEvent), and takes screenshots of the page
(Page.captureScreenshot). A case fails on a self-check line that is missing or not
"yes", a JavaScript error or abort, a non-zero exit, or a blank canvas; the picture
must also hold the fixed colours the native viewer tests ask of each scene.

Cases (tests/web/CMakeLists.txt registers each as a ctest entry, label `web`):
  scenes    toy, then keys 2..7: mask, kv, equivalence, timeline, serving, flash; one
            screenshot each, each scene's self-check as native
  input     the Mask panel's chunk slider clicked and its prompt typed into: each
            change runs the engine again (new token count, new plan), screenshots
  bitwise   the Mask panel's first token and top-5 probabilities (--print-command,
            hex floats) against the printed `plab prefill` command run natively
            (build/plab), through tests/viewer's plab_view_command_check: bit for bit
  toy       the toy's outputs: the page's self-check finds them equal to the means
            known by hand bitwise, and native `plab toy --json` gives the same floats
  lesson    lesson mode: lesson 3's text beside its panel, Try 1 clicked
  speed     a 256-token prefill on cpu-ref and cpu in the page (the timeline's prefill
            span) against native `plab prefill` on the same tokens; printed only

Exit 77 (ctest: skipped) when chromium or the built page is missing.
"""
import argparse
import base64
import functools
import http.server
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import zlib

SKIP = 77


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


# ---- a minimal WebSocket client (RFC 6455), enough for the DevTools protocol -------------
class WebSocket:
    def __init__(self, url):
        u = urllib.parse.urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=120)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
             f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
             "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("DevTools closed the connection during the handshake")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError("WebSocket handshake refused: " + head.decode(errors="replace"))
        self.buf = head.split(b"\r\n\r\n", 1)[1]

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("DevTools connection closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, text):
        data = text.encode()
        mask = os.urandom(4)
        n = len(data)
        if n < 126:
            head = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 65536:
            head = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            payload = self._read(n)
            opcode = b0 & 0x0F
            if opcode == 8:
                raise ConnectionError("DevTools closed the WebSocket")
            if opcode in (9, 10):  # ping/pong: not sent by DevTools in practice
                continue
            message += payload
            if b0 & 0x80:
                return message.decode()


class DevTools:
    """One page's DevTools session: commands, and the events that arrive meanwhile."""

    def __init__(self, ws_url):
        self.ws = WebSocket(ws_url)
        self.next_id = 0
        self.events = []

    def call(self, method, **params):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"evaluating {expression}: {r['exceptionDetails']}")
        return r["result"].get("value")


# ---- PNG: the screenshot's pixels, to tell a drawn canvas from a blank one -------------------
def png_pixels(data):
    """(width, height, list of rows of (r, g, b)) of an 8-bit RGB/RGBA, non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack("!I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack("!IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, "unexpected PNG format"
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, [[(r[x], r[x + 1], r[x + 2]) for x in range(0, stride, bpp)] for r in rows]


def check_picture(path, canvas_w, canvas_h, colours):
    """The canvas part of a page screenshot: not blank, and the named colours present.

    Blank: fewer than 16 distinct colours, or one colour over 97 % of the canvas (the
    native tests' rule, tests/viewer/png_check.cpp). colours: NAME=RRGGBB:MIN_PIXELS."""
    with open(path, "rb") as f:
        w, h, rows = png_pixels(f.read())
    counts = {}
    for row in rows[:min(h, canvas_h)]:
        for px in row[:min(w, canvas_w)]:
            counts[px] = counts.get(px, 0) + 1
    total = sum(counts.values())
    top = max(counts.values()) if counts else 0
    report = f"{os.path.basename(path)}: {w}x{h}, canvas {canvas_w}x{canvas_h}, " \
             f"{len(counts)} distinct colours, the commonest {100.0 * top / max(total, 1):.1f} %"
    ok = len(counts) >= 16 and top <= 0.97 * total
    for spec in colours:
        name, rest = spec.split("=")
        rgb, need = rest.split(":")
        px = tuple(int(rgb[i:i + 2], 16) for i in (0, 2, 4))
        have = counts.get(px, 0)
        report += f"; {name} {have} px (>= {need})"
        ok = ok and have >= int(need)
    print(report + (": yes" if ok else ": NO (a blank canvas or a panel part missing)"), flush=True)
    return ok


# ---- the browser and the server ------------------------------------------------------------
class Quiet(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".wasm": "application/wasm", ".js": "text/javascript",
                      ".data": "application/octet-stream"}

    def log_message(self, *args):
        pass


class Lab:
    def __init__(self, args):
        self.args = args
        handler = functools.partial(Quiet, directory=args.site)
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/index.html"
        self.profile = tempfile.mkdtemp(prefix="plab-chromium-")
        # SwiftShader: WebGL2 on the CPU, so the test needs no GPU and no display.
        cmd = [args.chromium, "--headless=new", "--no-sandbox", "--use-gl=angle",
               "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--no-first-run",
               "--no-default-browser-check", "--disable-extensions", "--mute-audio",
               "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
               "--disable-backgrounding-occluded-windows",
               f"--window-size={args.width},{args.height}", f"--user-data-dir={self.profile}",
               "--remote-debugging-port=0", "about:blank"]
        self.browser = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.time() + 60
        while not os.path.exists(port_file) or os.path.getsize(port_file) == 0:
            if self.browser.poll() is not None or time.time() > deadline:
                fail("chromium did not start: " + self.browser.stderr.read().decode(errors="replace")[-2000:])
            time.sleep(0.1)
        time.sleep(0.2)
        port = open(port_file).read().split()[0]
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
        page = next(t for t in targets if t["type"] == "page")
        self.dt = DevTools(page["webSocketDebuggerUrl"])
        self.dt.call("Runtime.enable")
        self.dt.call("Page.enable")
        self.dt.call("Emulation.setDeviceMetricsOverride", width=args.width, height=args.height,
                     deviceScaleFactor=1, mobile=False)

    def close(self):
        self.browser.terminate()
        try:
            self.browser.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.browser.kill()
        self.server.shutdown()
        shutil.rmtree(self.profile, ignore_errors=True)

    def open(self, params):
        """Loads the page with these viewer flags ([(name, value)], value '' for a switch)."""
        self.dt.events.clear()
        url = self.base + "?" + urllib.parse.urlencode(params)
        print(f"open {url}", flush=True)
        self.dt.call("Page.navigate", url=url)
        self.seen = 0

    def state(self):
        return self.dt.evaluate(
            "window.plab ? JSON.stringify({frames: plab.frames, lines: plab.lines, "
            "errors: plab.errors, exit: plab.exit}) : null")

    def js_errors(self, st):
        errs = list(st["errors"]) if st else []
        for e in self.dt.events:
            if e["method"] == "Runtime.exceptionThrown":
                d = e["params"]["exceptionDetails"]
                errs.append(d.get("exception", {}).get("description") or d.get("text"))
        return errs

    def wait(self, what, done, timeout):
        """Polls window.plab until done(state) is true; fails on a JavaScript error."""
        deadline = time.time() + timeout
        while True:
            raw = self.state()
            st = json.loads(raw) if raw else None
            if st:
                for line in st["lines"][self.seen:]:
                    print("  page: " + line, flush=True)
                self.seen = len(st["lines"])
            errs = self.js_errors(st)
            if errs:
                fail(f"JavaScript error while waiting for {what}: {errs}")
            if st and done(st):
                return st
            if st and st["exit"] not in (None, 0):
                fail(f"the viewer exited with {st['exit']} while waiting for {what}")
            if time.time() > deadline:
                fail(f"timed out after {timeout} s waiting for {what}")
            time.sleep(0.25)

    def wait_line(self, pattern, timeout, since=0):
        rx = re.compile(pattern)
        st = self.wait(f"a line matching /{pattern}/",
                       lambda s: any(rx.search(l) for l in s["lines"][since:]), timeout)
        return next(l for l in st["lines"][since:] if rx.search(l)), st

    def wait_frames(self, n, timeout):
        start = json.loads(self.state())["frames"]
        return self.wait(f"{n} more frames", lambda s: s["frames"] >= start + n, timeout)

    def press(self, key):
        """A key down and up, as a keyboard sends it (emscripten's GLFW reads keyCode)."""
        if key == "Enter":
            code, name, extra_down = 13, "Enter", {"text": "\r"}
        else:
            code = ord(key.upper())
            name = ("Digit" + key) if key.isdigit() else "Key" + key.upper()
            extra_down = {"text": key}
        for kind in ("keyDown", "keyUp"):
            extra = extra_down if kind == "keyDown" else {}
            self.dt.call("Input.dispatchKeyEvent", type=kind, key=key, code=name,
                         windowsVirtualKeyCode=code, nativeVirtualKeyCode=code, **extra)
            # Held over a few frames: ImGui 1.86 reads the key's state once a frame, so a
            # key down and up between two frames would never be seen down.
            if kind == "keyDown":
                self.wait_frames(3, 30)

    def click(self, x, y):
        """The left button pressed and released at (x, y), each held over a few frames."""
        self.dt.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        self.wait_frames(2, 30)
        for kind in ("mousePressed", "mouseReleased"):
            self.dt.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
                         buttons=1 if kind == "mousePressed" else 0, clickCount=1)
            self.wait_frames(3, 30)

    def type_text(self, text):
        """Characters typed one by one (a keypress each: GLFW's character callback)."""
        for ch in text:
            self.dt.call("Input.dispatchKeyEvent", type="keyDown", text=ch, key=ch,
                         unmodifiedText=ch)
            self.dt.call("Input.dispatchKeyEvent", type="keyUp", key=ch)
            self.wait_frames(1, 30)

    def screenshot(self, name):
        data = base64.b64decode(self.dt.call("Page.captureScreenshot", format="png")["data"])
        path = os.path.join(self.args.out, name)
        with open(path, "wb") as f:
            f.write(data)
        print(f"wrote {path}", flush=True)
        return path


# Each scene's self-check line, as tests/viewer/CMakeLists.txt asks of the native viewer,
# and colours its picture must hold (fewer pixels than there: the page's canvas is the
# same 1280x800, but a screenshot is taken while the scene may still be settling).
SCENES = [
    ("1", "toy", r"toy: outputs equal the means known by hand .2, 3, 14/3, 6. bitwise, future "
                 r"probabilities 0, chunked == full bitwise: yes. all kept: yes",
     ["bitwise-badge=3caa50:800", "masked-cell=46464e:1500"]),
    ("2", "mask", r"mask: rows sum to 1, hidden cells have probability 0 and score -inf, the "
                  r"tile map agrees with the mask on every cell: yes .mask causal,.*chunked == "
                  r"full bitwise on cpu-ref: yes",
     ["masked-cell=46464e:15000", "chunk-outline=ffbe3c:250"]),
    ("3", "kv", r"kv: session length, block tables and 'kv append' positions and slots match the "
                r"plan and B after every call: yes",
     ["earlier-chunk=3c78be:5000"]),
    ("4", "equivalence", r"equivalence: reference rows bitwise, fast rows within 1e-5 of max "
                         r".logit. with the same greedy token: yes",
     ["bitwise-badge=3caa50:800", "close-badge=c89628:600"]),
    ("5", "timeline", r"timeline: TTFT .* >= prefill .*different spans: yes",
     ["prefill-span=ffbe3c:1000", "request-span=828296:2500"]),
    ("6", "serving", r"serving replay: .*summary: yes .policy chunked",
     ["prefill-chunk=ffbe3c:12000", "decode-token=78dc78:7000"]),
    ("7", "flash", r"flash: .*known by hand .2, 3, 14/3, 6. within the ulps the walk reports: "
                   r"yes .toy, tile 2, mask causal, 6 steps",
     ["tile-full=50a0dc:3000", "tile-partial=966ec8:700", "masked-cell=46464e:1700"]),
]


def case_scenes(lab, args):
    lab.open([("scene", "toy"), ("width", args.width), ("height", args.height)])
    ok = True
    for key, scene, expect, colours in SCENES:
        since = len(json.loads(lab.state() or '{"lines": []}')["lines"]) if key != "1" else 0
        if key != "1":
            lab.press(key)
        line, _ = lab.wait_line(expect, args.timeout, since)
        lab.wait_frames(10, args.timeout)  # the panel drawn from the new snapshot
        print(f"scene {scene} (key {key}): {line}", flush=True)
        shot = lab.screenshot(f"web_{scene}.png")
        ok = check_picture(shot, args.width, args.height, colours) and ok
    st = json.loads(lab.state())
    if lab.js_errors(st):
        fail(f"JavaScript errors: {lab.js_errors(st)}")
    if not ok:
        fail("a screenshot is blank or misses a colour its scene draws")
    print(f"{len(SCENES)} scenes driven by keys, {st['frames']} frames, no JavaScript error: yes")


def case_input(lab, args):
    """The Mask panel's prompt typed into and its chunk slider dragged, as a person does:
    each change runs the engine again (a new self-check line with the new numbers)."""
    lab.open([("scene", "mask"), ("width", 1280), ("height", 800)])
    rx = r"mask: rows sum to 1, .*: yes .mask causal, ([0-9]+) tokens, plan ([0-9,]+),"
    line, st = lab.wait_line(rx, args.timeout)
    tokens0, plan0 = re.search(rx, line).groups()
    lab.wait_frames(5, args.timeout)
    # The chunk-size slider (0..64, x 308..497, y 36..54 at 1280x800, scale 1): a click
    # near its right end sets a chunk larger than the prompt.
    since = len(json.loads(lab.state())["lines"])
    lab.click(490, 45)
    line, st = lab.wait_line(rx, args.timeout, since)
    tokens1, plan1 = re.search(rx, line).groups()
    print(f"chunk slider moved: plan {plan0} -> {plan1}", flush=True)
    if plan1 == plan0 or tokens1 != tokens0:
        fail("the chunk slider did not change the plan of the same prompt")
    shot = lab.screenshot("web_mask_slider.png")
    ok = check_picture(shot, 1280, 800, ["masked-cell=46464e:15000"])
    # The prompt box spans the window's width under the control bar (y 61..81): a click
    # right of the text puts the cursor at its end; Enter runs the prefill again.
    lab.click(1100, 71)
    since = len(json.loads(lab.state())["lines"])
    lab.type_text(" The end.")
    lab.press("Enter")
    line, st = lab.wait_line(rx, args.timeout, since)
    tokens2, plan2 = re.search(rx, line).groups()
    print(f"prompt typed: {tokens1} -> {tokens2} tokens (plan {plan1} -> {plan2})", flush=True)
    if int(tokens2) <= int(tokens1):
        fail("typing into the prompt did not lengthen it")
    lab.wait_frames(10, args.timeout)
    shot = lab.screenshot("web_mask_typed.png")
    ok = check_picture(shot, 1280, 800, ["masked-cell=46464e:15000"]) and ok
    if not ok:
        fail("a screenshot is blank or misses a colour its scene draws")
    st = json.loads(lab.state())
    if lab.js_errors(st):
        fail(f"JavaScript errors: {lab.js_errors(st)}")
    print("prompt editable and chunk slider live in the page: yes")


def run_to_exit(lab, args, params, timeout=None):
    """Opens the page with --frames/--screenshot style flags and waits for the exit code."""
    lab.open(params)
    st = lab.wait("the viewer's exit", lambda s: s["exit"] is not None, timeout or args.timeout)
    if st["exit"] != 0:
        fail(f"the viewer exited with {st['exit']}")
    return st


def native_command(line, args):
    """The page's `command: plab ...` line, run natively (build/plab, the repo's model)."""
    cmd = line[len("command: "):]
    cmd = cmd.replace("--model /assets/model", "--model " + os.path.join(args.root, "assets/model"))
    cmd = cmd.replace("/prompts/prompt_story.txt",
                      os.path.join(args.root, "tests/viewer/prompt_story.txt"))
    env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(args.plab)) + ":" + os.environ["PATH"])
    print(f"native: {cmd}", flush=True)
    r = subprocess.run(["/bin/sh", "-c", cmd], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"the native command exited with {r.returncode}: {r.stderr}")
    return r.stdout


def check_against_native(lab, args, scene, command_prefix, numbers_prefix, name):
    """Runs `scene` in the page with --print-command, runs its command natively and has
    plab_view_command_check compare the page's "viewer computed:" line with the JSON;
    returns whether they agree bit for bit."""
    st = run_to_exit(lab, args, [("scene", scene), ("frames", "8"), ("print-command", ""),
                                 ("width", args.width), ("height", args.height)])
    lines = st["lines"]
    command = next((l for l in lines if l.startswith(command_prefix)), None)
    numbers = next((l for l in lines if l.startswith(numbers_prefix)), None)
    if not command or not numbers:
        fail(f"no '{command_prefix}' and '{numbers_prefix}' lines from the page")
    viewer_out = os.path.join(args.out, f"web_{name}_out.txt")
    with open(viewer_out, "w") as f:
        f.write("\n".join(lines) + "\n")
    native_json = os.path.join(args.out, f"web_native_{name}.json")
    with open(native_json, "w") as f:
        f.write(native_command(command, args))
    r = subprocess.run([args.command_check, viewer_out, native_json], capture_output=True, text=True)
    print(r.stdout + r.stderr, flush=True)
    return r.returncode == 0


def case_bitwise(lab, args):
    if not check_against_native(lab, args, "mask", "command: plab prefill", "viewer computed: ",
                                "plab"):
        fail("the page's first token and top-5 are not native cpu-ref's, bit for bit")
    print("page (WebAssembly) == native cpu-ref: first token and top-5 probabilities, bitwise: yes")


def case_serving(lab, args):
    """The serving scene's seeded workload and result == native `plab serve --json`'s, bit
    for bit (the page, built with libc++, once drew other prompts from the same seed while
    the generator used <random>'s distributions)."""
    if not check_against_native(lab, args, "serving", "command: plab serve",
                                "viewer computed: serving: ", "serve"):
        fail("the page's serving workload and result are not native plab serve's, bit for bit")
    print("page (WebAssembly) == native plab serve: steps, preemptions, prompts, arrivals and "
          "TTFTs, bitwise: yes")


def case_file_url(lab, args):
    """Opened as a file, the page must say how to serve it instead of waiting at Loading..."""
    url = "file://" + os.path.join(os.path.abspath(args.site), "index.html")
    print(f"open {url}", flush=True)
    lab.dt.call("Page.navigate", url=url)
    deadline = time.time() + 30
    text = ""
    while time.time() < deadline:
        text = lab.dt.evaluate("document.getElementById('status') ? "
                               "document.getElementById('status').textContent : ''") or ""
        if "http.server" in text:
            break
        time.sleep(0.25)
    if "opened as a file" not in text or "python3 -m http.server -d build-web/site" not in text:
        fail(f"the page opened from file:// says {text!r}, not how to serve it")
    loaded = lab.dt.evaluate("typeof Module !== 'undefined' && !!Module.asm")
    if loaded:
        fail("the page opened from file:// went on to load the WebAssembly")
    print(f"opened from file://, the page says: {text}")


def case_toy(lab, args):
    st = run_to_exit(lab, args, [("scene", "toy"), ("frames", "6"), ("print-command", ""),
                                 ("width", args.width), ("height", args.height)])
    toy = next((l for l in st["lines"] if l.startswith("toy: ")), "")
    if not re.search(r"means known by hand \(2, 3, 14/3, 6\) bitwise.*: yes", toy):
        fail("the page's toy outputs are not the means known by hand, bitwise: " + toy)
    command = next((l for l in st["lines"] if l.startswith("command: plab toy")), None)
    if not command:
        fail("no 'command: plab toy' line from the page")
    native = json.loads(native_command(command, args))
    # The float32 nearest each mean: what the page's self-check found its outputs equal to.
    means = [struct.unpack("f", struct.pack("f", v))[0] for v in (2.0, 3.0, 14.0 / 3.0, 6.0)]
    f32 = lambda xs: [struct.pack("f", x) for x in xs]
    runs = [native["full"]] + [c["outputs"] for c in native["chunked"]]
    if any(f32(r) != f32(means) for r in runs):
        fail(f"native plab toy's outputs {runs} are not {means} bit for bit")
    print(f"toy outputs, full and chunked: page == the means bitwise == native plab toy's "
          f"({means}): yes")


def case_lesson(lab, args):
    st = run_to_exit(lab, args, [("lesson", "3"), ("click-try", "1"), ("screenshot", "/tmp/lesson.png"),
                                 ("width", args.width), ("height", args.height)])
    text = "\n".join(st["lines"])
    for expect in (r"lesson 3: .*lessons/03-chunked-prefill.md, [0-9]+ lines -> [0-9]+ blocks.*: yes",
                   r"lesson 3: Try 1 clicked: set: chunks 8 -> 3,5,2",
                   r"readable: .*: yes"):
        if not re.search(expect, text):
            fail(f"no line matching /{expect}/")
    print("lesson 3 in the page: its text laid out, Try 1 clicked, readable: yes")


def case_speed(lab, args):
    """A 256-token prefill (tests/viewer/prompt_story.txt's first 256 tokens) in the page
    and natively; printed, not asserted (timing on a shared machine)."""
    rx = r"timeline: TTFT \(([0-9]+) us\) >= prefill \(([0-9]+) us\)"
    tokens = None
    for backend in ("cpu-ref", "cpu"):
        params = [("scene", "timeline"), ("prompt-file", "/prompts/prompt_story.txt"),
                  ("prompt-tokens", "256"), ("backend", backend), ("frames", "4"),
                  ("print-command", ""), ("width", args.width), ("height", args.height)]
        page = []
        for _ in range(3):
            st = run_to_exit(lab, args, params)
            m = next(re.search(rx, l) for l in st["lines"] if re.search(rx, l))
            page.append(int(m.group(2)) / 1000)
            cmd = next(l for l in st["lines"] if l.startswith("command: "))
            tokens = re.search(r"--tokens ([0-9,]+)", cmd).group(1)
        print(f"SPEED page {backend}: 256-token prefill (the timeline's prefill span, one run a "
              f"load, one thread), 3 loads: {', '.join(f'{t:.1f}' for t in page)} ms; median "
              f"{sorted(page)[1]:.1f} ms", flush=True)
    if len(tokens.split(",")) != 256:
        fail(f"the page's command has {len(tokens.split(','))} tokens, not 256")
    if not args.plab:
        return
    for backend in ("cpu-ref", "cpu"):
        for pin in ([], ["taskset", "-c", "0"]):
            if pin and not shutil.which("taskset"):
                continue
            r = subprocess.run(pin + [args.plab, "prefill", "--model",
                                      os.path.join(args.root, "assets/model"), "--tokens", tokens,
                                      "--backend", backend, "--repeats", "5", "--json"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                fail(f"native plab prefill failed: {r.stderr}")
            d = json.loads(r.stdout)
            where = "one CPU (taskset -c 0)" if pin else f"{os.cpu_count()} CPUs"
            print(f"SPEED native {backend}, {where}: plab prefill, 256 tokens: cold "
                  f"{d['cold_prefill_ms']:.1f} ms, median of 5 warm {d['prefill_ms']:.1f} ms",
                  flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("case", choices=["scenes", "input", "bitwise", "serving", "file_url", "toy", "lesson", "speed"])
    p.add_argument("--root", required=True, help="the repository")
    p.add_argument("--site", required=True, help="the page's folder (build-web)")
    p.add_argument("--out", required=True, help="where screenshots go")
    p.add_argument("--chromium", default=shutil.which("chromium") or "")
    p.add_argument("--plab", help="native plab (bitwise, toy)")
    p.add_argument("--command-check", help="tests/viewer's plab_view_command_check (bitwise)")
    p.add_argument("--width", type=int, default=1280)
    p.add_argument("--height", type=int, default=800)
    p.add_argument("--timeout", type=float, default=120)
    args = p.parse_args()
    if not args.chromium or not os.path.exists(args.chromium):
        print("SKIP: chromium not found (apt install chromium; .ci/debian-packages.txt)")
        sys.exit(SKIP)
    missing = [f for f in ("index.html", "plab-viewer.js", "plab-viewer.wasm", "plab-viewer.data")
               if not os.path.exists(os.path.join(args.site, f))]
    if missing:
        print(f"SKIP: the page is not built in {args.site} (missing {', '.join(missing)}): "
              "run `make web` (needs emscripten)")
        sys.exit(SKIP)
    os.makedirs(args.out, exist_ok=True)
    lab = Lab(args)
    try:
        {"scenes": case_scenes, "input": case_input, "bitwise": case_bitwise, "serving": case_serving, "file_url": case_file_url,
         "toy": case_toy, "lesson": case_lesson,
         "speed": case_speed}[args.case](lab, args)
    finally:
        lab.close()


if __name__ == "__main__":
    main()
