"""The recipe's settings: their values live in recipe.json, and only there.

What it teaches: a training run can be reproduced only if everything that chose
its numbers is written down, once. recipe.json holds the settings the shipped
model was trained with; train.py takes its defaults from it (this module), run.sh
passes nothing unless you ask (STEPS=, OUT=), the README quotes the file, and the
exported model records the settings it was really trained with, plus the library
versions, BLAS and CPU, in its safetensors metadata. tests/recipe checks that all
of these agree with the shipped model.

What it leaves out on purpose: hyper-parameters that are code rather than
settings (model shape in train.py's CONFIG, AdamW betas and weight decay, the 5 %
warm-up, the corpus grammar in corpus.py). They change only with the code, which
git versions.

Standard library only: `PLAB_RECIPE_DRY_RUN=1` must print the resolved settings
on a machine without numpy or torch (CI), and the BLAS thread count must be set
before numpy or torch load their BLAS.
"""

import argparse
import json
import os
import platform
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SETTINGS_FILE = os.path.join(HERE, "recipe.json")
DRY_RUN_ENV = "PLAB_RECIPE_DRY_RUN"

# name -> (type, what it sets). The values are in recipe.json; this table only
# says what each one means, so the file can stay plain JSON.
SPEC = {
    "seed": (int, "seeds Python, NumPy, torch and the corpus (training split: seed, held-out: seed + 1)"),
    "steps": (int, "length of the learning-rate schedule, in optimizer steps"),
    "threads": (int, "torch intra-op threads and OpenBLAS threads (the bits depend on it)"),
    "train_stories": (int, "stories in the training split (corpus)"),
    "heldout_stories": (int, "stories in the held-out split (corpus)"),
    "bpe_stories": (int, "the first N training stories the BPE tokenizer is learned on"),
    "batch": (int, "rows per optimizer step"),
    "copy_rows": (int, "rows per batch of random repeated tokens (induction food)"),
    "copy_warmup": (int, "first steps on repeated tokens only"),
    "seq_len": (int, "tokens per training row"),
    "lr": (float, "peak learning rate (warm-up over the first twentieth, cosine decay to a tenth)"),
}


def load(path=SETTINGS_FILE):
    """recipe.json as a dict, checked against SPEC: every setting present, no unknown one."""
    with open(path, encoding="utf-8") as f:
        values = json.load(f)
    missing = [k for k in SPEC if k not in values]
    unknown = [k for k in values if k not in SPEC]
    if missing or unknown:
        sys.exit(f"{path}: missing settings {missing}, unknown settings {unknown}; "
                 f"expected exactly {list(SPEC)}")
    for k, (kind, _) in SPEC.items():
        v = values[k]
        is_number = isinstance(v, (int, float)) and not isinstance(v, bool)
        if not is_number or (kind is int and not isinstance(v, int)) or v < 0 or \
                (v == 0 and k != "copy_warmup"):
            sys.exit(f"{path}: {k} is {v!r}, expected a positive {kind.__name__}"
                     f"{' (or 0)' if k == 'copy_warmup' else ''}")
    return values


def parse_args(argv=None):
    """Command line over recipe.json: a flag given wins, otherwise the file's value."""
    values = load()
    ap = argparse.ArgumentParser(description="Train the Prefill Lab tiny model. Defaults: recipe.json.")
    for k, (kind, what) in SPEC.items():
        ap.add_argument("--" + k.replace("_", "-"), type=kind, default=values[k],
                        help=f"{what} (recipe.json: {values[k]})")
    ap.add_argument("--stop-at", type=int, default=0,
                    help="export and stop after this many steps of the --steps schedule (0: run all)")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "model"))
    ap.add_argument("--shape", choices=["main", "draft"], default="main",
                    help="the model's shape (train.py SHAPES): main = assets/model, draft = "
                         "assets/draft, its one-layer speculative-decoding draft")
    args = ap.parse_args(argv)
    args.out = os.path.abspath(args.out)
    return args


def settings_of(args):
    """The recipe settings of a run, in SPEC order (what recipe.json would need to say)."""
    return {k: getattr(args, k) for k in SPEC}


def dry_run_requested():
    return os.environ.get(DRY_RUN_ENV, "") == "1"


def print_dry_run(args):
    """What run.sh / train.py would train with, as JSON on stdout (read by tests/recipe)."""
    print(json.dumps({"settings": settings_of(args), "stop_at": args.stop_at, "out": args.out},
                     indent=2))


def pin_threads(threads):
    """One thread count for torch and its BLAS, set before either is loaded.

    OpenBLAS reads OPENBLAS_NUM_THREADS once, when the library is loaded (by numpy
    or torch), so setting it later does nothing, silently. The thread count can
    change how sums are split, hence the last bits of the trained weights.
    """
    assert "numpy" not in sys.modules and "torch" not in sys.modules, \
        "pin_threads must run before numpy/torch are imported"
    os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # idle threads sleep: speed only, not bits


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def blas_library():
    """Which BLAS Debian's libblas.so.3 alternative points at (OpenBLAS or the reference)."""
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib"):
        p = os.path.join(d, "libblas.so.3")
        if os.path.exists(p):
            return os.path.realpath(p)
    return "unknown"


def metadata(args, steps_done, torch_version, numpy_version):
    """Everything needed to rerun this export: settings, how far it got, software, machine.

    No time stamps or host names: two runs of the same recipe on one machine must
    give identical files. safetensors metadata maps strings to strings.
    """
    meta = {"recipe": "assets/recipe/train.py", "settings_file": "assets/recipe/recipe.json"}
    meta.update(settings_of(args))
    meta["shape"] = getattr(args, "shape", "main")
    meta.update({
        "steps_done": steps_done,  # < steps for a snapshot or --stop-at; reproduce with --stop-at
        "python": platform.python_version(),
        "torch": torch_version,
        "numpy": numpy_version,
        "blas": blas_library(),
        "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS", ""),
        "cpu": cpu_model(),
    })
    return {k: str(v) for k, v in meta.items()}
