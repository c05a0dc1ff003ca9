"""Runs one notebook of lessons/notebooks top to bottom and checks what it drew (ctest label
`notebooks`).

  1. The committed notebook is stripped: no outputs, execution counts or timestamps (a diff shows
     only what a person wrote, and no stale figure can pass for a fresh one).
  2. `jupyter nbconvert --to notebook --execute` runs it in the python3 kernel (Debian's
     /usr/bin/python3 with ipykernel); any cell that raises fails the run.
  3. Every code cell ran, and the executed notebook holds at least one figure; each
     figure (image/png) decodes, is at least 100x100 pixels and is not empty: matplotlib
     draws axes, ticks and text in greys, so a figure whose axes hold no data is all grey.
     At least 0.5% of its pixels must be coloured (channels differing by more than 40
     of 255), which every heatmap, line and bar of these notebooks is.

Usage: run_notebook.py NOTEBOOK OUTPUT_DIR [--jupyter PATH] [--keep-images]
Exit 0 when all holds; otherwise one line per problem and exit 1.
"""
import argparse
import base64
import io
import json
import os
import subprocess
import sys

MIN_SIDE = 100  # pixels: a figure smaller than this is a broken savefig, not a plot
MIN_COLOURED = 0.005  # share of pixels that must be coloured (see 3. above)
SATURATION = 40  # max - min over R, G, B above which a pixel counts as coloured


def stripped_problems(nb):
    problems = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        if cell.get("outputs"):
            problems.append(f"cell {i} has outputs committed; strip them (jupyter nbconvert "
                            "--clear-output --ClearMetadataPreprocessor.enabled=True --inplace)")
        if cell.get("execution_count") is not None:
            problems.append(f"cell {i} has an execution count committed; strip it")
        if "execution" in cell.get("metadata", {}):
            problems.append(f"cell {i} has execution timestamps committed; strip them "
                            "(--ClearMetadataPreprocessor.enabled=True)")
    return problems


def image_problems(png_bytes, where):
    from PIL import Image  # python3-pil, a dependency of python3-matplotlib

    img = Image.open(io.BytesIO(png_bytes)).convert("RGB")
    w, h = img.size
    if w < MIN_SIDE or h < MIN_SIDE:
        return [f"{where}: figure is {w}x{h} pixels, smaller than {MIN_SIDE}x{MIN_SIDE}"]
    pixels = img.getdata()
    coloured = sum(1 for r, g, b in pixels if max(r, g, b) - min(r, g, b) > SATURATION)
    share = coloured / (w * h)
    if share < MIN_COLOURED:
        return [f"{where}: figure {w}x{h} is empty: {share:.2%} of its pixels are coloured "
                f"(at least {MIN_COLOURED:.1%} expected: no data was drawn)"]
    return []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("notebook")
    ap.add_argument("output_dir")
    ap.add_argument("--jupyter", default="/usr/bin/jupyter")
    ap.add_argument("--keep-images", action="store_true", help="also write each figure as PNG")
    a = ap.parse_args()
    name = os.path.splitext(os.path.basename(a.notebook))[0]

    with open(a.notebook, encoding="utf-8") as f:
        problems = stripped_problems(json.load(f))

    if not os.access(a.jupyter, os.X_OK):
        print(f"{name}: {a.jupyter} not found; install Debian's jupyter-nbconvert and "
              "python3-ipykernel", file=sys.stderr)
        return 1
    os.makedirs(a.output_dir, exist_ok=True)
    executed = os.path.join(a.output_dir, name + ".ipynb")
    if os.path.exists(executed):
        os.remove(executed)  # never check a previous run's output
    run = subprocess.run([a.jupyter, "nbconvert", "--to", "notebook", "--execute",
                          "--ExecutePreprocessor.kernel_name=python3",
                          "--ExecutePreprocessor.timeout=300", "--output-dir", a.output_dir,
                          a.notebook], capture_output=True, text=True)
    if run.returncode != 0:
        # nbconvert prints the failing cell and its traceback; keep the end of it.
        print(run.stderr[-6000:], file=sys.stderr)
        print(f"{name}: nbconvert --execute failed (exit {run.returncode})", file=sys.stderr)
        return 1

    with open(executed, encoding="utf-8") as f:
        nb = json.load(f)
    figures = 0
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        if cell.get("execution_count") is None:
            problems.append(f"cell {i} did not run")
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                problems.append(f"cell {i} raised {out.get('ename')}: {out.get('evalue')}")
            png = out.get("data", {}).get("image/png")
            if png is None:
                continue
            figures += 1
            data = base64.b64decode(png)
            problems += image_problems(data, f"cell {i} figure {figures}")
            if a.keep_images:
                with open(os.path.join(a.output_dir, f"{name}-{figures}.png"), "wb") as f:
                    f.write(data)
    if figures == 0:
        problems.append("no figure (image/png output) in the executed notebook")
    for p in problems:
        print(f"{name}: {p}", file=sys.stderr)
    if not problems:
        print(f"{name}: ran, {figures} figures, none empty")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
