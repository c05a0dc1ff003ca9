"""Does the recipe still rebuild the shipped model? (issue 19)

What it teaches: "reproducible" is a claim a test can hold. The recipe's settings
live in assets/recipe/recipe.json; this script checks, without torch or numpy:

  settings     the shipped model's recorded settings (its safetensors metadata,
               plus assets/model/settings_recorded_later.json for what the run did
               not record) equal recipe.json, equal what `sh run.sh` would really
               pass to train.py (run.sh is run in its dry-run mode, so a flag it
               adds or a default it invents is seen), and equal the README's copy
               of recipe.json; train.py's model shape gives the shipped config.json.
  regenerate   recipe.json's seed and corpus/tokenizer settings rebuild the shipped
               tokenizer.bpe and eval/ files byte for byte (corpus + BPE in pure
               Python, ~6 s of CPU). It pins the seed; bpe_stories only as far as
               it changes the merges (7999 stories give the same 254 merges as 8000).
  run-sh       run.sh's guards: STEPS without OUT is refused, OUT naming the shipped
               model is refused, a relative OUT is taken from the caller's directory.
  self-test    the test of the test: scratch copies of the recipe that ask for
               another number of steps (or drift otherwise) must make `settings`
               fail, naming the setting; an unmodified copy must pass.

What it leaves out: training (minutes, needs torch). Bit-for-bit training is
checked by hand; see "Reproducible" in assets/recipe/README.md.

Usage: /usr/bin/python3 check_recipe.py {settings,regenerate,run-sh,self-test} --repo DIR
       [--recipe DIR] [--model DIR]   (defaults: DIR/assets/recipe, DIR/assets/model)
"""

import argparse
import ast
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

SIDECAR = "settings_recorded_later.json"
# Variables run.sh reads; cleared so the caller's environment cannot change what is checked.
RUN_SH_ENV = ("STEPS", "OUT", "PLAB_RECIPE_DRY_RUN")


def fail(msg):
    print(f"FAIL: {msg}", flush=True)


# --- reading the pieces ----------------------------------------------------------------

def safetensors_metadata(path):
    """The __metadata__ of a safetensors file: 8 bytes little-endian header size, JSON header."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return header.get("__metadata__", {})


def shipped_settings(model_dir, log_path, problems):
    """name -> (value as text, where it was recorded). Metadata first, then the sidecar."""
    out = {k: (v, "safetensors metadata") for k, v in
           safetensors_metadata(os.path.join(model_dir, "model.safetensors")).items()}
    sidecar_path = os.path.join(model_dir, SIDECAR)
    if not os.path.exists(sidecar_path):
        return out
    with open(sidecar_path, encoding="utf-8") as f:
        sidecar = json.load(f)
    with open(log_path, encoding="utf-8") as f:
        log = f.read()
    for k, entry in sidecar["settings"].items():
        v = entry["value"]
        if k in out:
            problems.append(f"{k}: both the metadata ({out[k][0]}) and {SIDECAR} ({v}) record it; "
                            f"the metadata is what the run wrote, drop it from {SIDECAR}")
            continue
        if "log" in entry:
            # An after-the-fact value must be backed by its quote: in the log, and showing the value.
            quote = entry["log"]
            shows = str(v) in quote or (isinstance(v, float) and f"{v:.2e}" in quote)
            if quote not in log or not shows:
                problems.append(f"{k}: {SIDECAR} cites the log line '{quote}', which "
                                f"{'is not in ' + log_path if quote not in log else 'does not show ' + str(v)}")
        elif not entry.get("why"):
            problems.append(f"{k}: {SIDECAR} records {v} without a 'log' quote or a 'why'")
        out[k] = (str(v), f"{SIDECAR} (recorded after the fact)")
    return out


def readme_settings(readme_path):
    """The ```json block under '## Settings' in the recipe README: its copy of recipe.json."""
    with open(readme_path, encoding="utf-8") as f:
        text = f.read()
    start = text.find("## Settings")
    block = text.find("```json\n", start)
    end = text.find("```", block + 8)
    if start < 0 or block < 0 or end < 0:
        return None
    return json.loads(text[block + 8:end])


def run_sh_dry_run(recipe_dir, extra_env=None, cwd=None):
    """Runs run.sh with PLAB_RECIPE_DRY_RUN=1: nothing installed or trained; train.py prints
    the settings it would train with. Returns (exit code, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if k not in RUN_SH_ENV}
    env["PLAB_RECIPE_DRY_RUN"] = "1"
    env.update(extra_env or {})
    r = subprocess.run(["sh", os.path.join(recipe_dir, "run.sh")], env=env, cwd=cwd,
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def train_py_config(recipe_dir, shape="main"):
    """train.py's SHAPES[shape] = dict(...) (a model shape; "main" is assets/model's), read with
    ast: importing train.py needs torch."""
    with open(os.path.join(recipe_dir, "train.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["SHAPES"]:
            for key, value in zip(node.value.keys, node.value.values):
                if ast.literal_eval(key) == shape:
                    return {kw.arg: ast.literal_eval(kw.value) for kw in value.keywords}
    raise SystemExit(f"{recipe_dir}/train.py: no SHAPES = {{\"{shape}\": dict(...)}} found")


def import_recipe(recipe_dir):
    """The recipe's torch-free modules (settings, data, export, bpe, corpus)."""
    sys.path.insert(0, recipe_dir)
    import data  # noqa: E402
    import export  # noqa: E402
    import settings  # noqa: E402
    return settings, data, export


def same(a, b):
    """Settings compare as numbers: the metadata stores text ('0.003'), recipe.json numbers."""
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


# --- the checks -----------------------------------------------------------------------

def check_settings(recipe_dir, model_dir):
    problems = []
    with open(os.path.join(recipe_dir, "recipe.json"), encoding="utf-8") as f:
        recipe = json.load(f)
    shipped = shipped_settings(model_dir, os.path.join(recipe_dir, "train_log.txt"), problems)

    # 1. recipe.json == what the shipped model was trained with, setting by setting.
    for k, v in recipe.items():
        if k not in shipped:
            problems.append(f"{k}: the shipped model does not record it (metadata or {SIDECAR})")
        elif not same(v, shipped[k][0]):
            problems.append(f"{k}: recipe.json says {v}, the shipped model was trained with "
                            f"{shipped[k][0]} ({shipped[k][1]})")
    if "steps_done" in shipped and not same(shipped["steps_done"][0], shipped.get("steps", ("?",))[0]):
        problems.append(f"the shipped model is a snapshot: steps_done {shipped['steps_done'][0]} of "
                        f"steps {shipped['steps'][0]}")

    # 2. What `sh run.sh` really passes: run it dry, with no STEPS or OUT in the environment.
    rc, out, err = run_sh_dry_run(recipe_dir)
    if rc != 0:
        problems.append(f"run.sh (dry run, no STEPS/OUT) exited {rc}: {err.strip()}")
    else:
        dry = json.loads(out)
        for k, v in dry["settings"].items():
            if k in shipped and not same(v, shipped[k][0]):
                problems.append(f"{k}: `sh run.sh` would train with {v}, the shipped model was "
                                f"trained with {shipped[k][0]} ({shipped[k][1]})")
        if dry["stop_at"] != 0:
            problems.append(f"`sh run.sh` would stop at step {dry['stop_at']}, not run the schedule")
        want_out = os.path.realpath(os.path.join(recipe_dir, "..", "model"))
        if os.path.realpath(dry["out"]) != want_out:
            problems.append(f"`sh run.sh` would write to {dry['out']}, not {want_out}")

    # 3. The README quotes recipe.json; the quote must be the file.
    quoted = readme_settings(os.path.join(recipe_dir, "README.md"))
    if quoted != recipe:
        problems.append(f"README.md's '## Settings' json block {quoted} is not recipe.json {recipe}")

    # 4. The model shape: train.py's CONFIG, exported as export.py does, is the shipped config.json.
    _, _, export = import_recipe(recipe_dir)
    want = export.hf_config(train_py_config(recipe_dir), "tokenizer.bpe", True)
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        have = json.load(f)
    if want != have:
        diff = {k: (want.get(k), have.get(k)) for k in set(want) | set(have) if want.get(k) != have.get(k)}
        problems.append(f"train.py's CONFIG gives a config.json that differs (recipe, shipped): {diff}")

    for p in problems:
        fail(p)
    if not problems:
        print(f"ok: recipe.json, `sh run.sh` and README.md agree with the shipped model on "
              f"{len(recipe)} settings: {json.dumps(recipe)}")
    return 1 if problems else 0


def check_regenerate(recipe_dir, model_dir):
    """recipe.json's seed + corpus/tokenizer settings -> the shipped tokenizer and eval files."""
    settings, data, _ = import_recipe(recipe_dir)
    s = settings.load(os.path.join(recipe_dir, "recipe.json"))
    vocab = train_py_config(recipe_dir)["vocab_size"]
    # Only the first bpe_stories training stories reach the tokenizer; the stories are drawn
    # one after another from one generator, so the first N do not depend on train_stories.
    train_texts, held_texts, held_completions = data.splits(
        s["seed"], min(s["bpe_stories"], s["train_stories"]), s["heldout_stories"])
    tok = data.tokenizer(train_texts, s["bpe_stories"], vocab)
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        data.write_tokenizer_and_eval(tmp, tok, held_texts, held_completions)
        for rel in ("tokenizer.bpe", "eval/heldout.txt", "eval/completions.tsv"):
            with open(os.path.join(tmp, rel), "rb") as f:
                mine = f.read()
            with open(os.path.join(model_dir, rel), "rb") as f:
                shipped = f.read()
            if mine != shipped:
                first = next((i for i, (a, b) in enumerate(zip(mine, shipped)) if a != b),
                             min(len(mine), len(shipped)))
                fail(f"{rel}: rebuilt from recipe.json ({len(mine)} bytes) differs from the shipped "
                     f"file ({len(shipped)} bytes) from byte {first}")
                bad += 1
            else:
                print(f"ok: {rel} rebuilt byte for byte ({len(mine)} bytes)")
    return 1 if bad else 0


def check_run_sh(recipe_dir):
    problems = []
    rc, _, err = run_sh_dry_run(recipe_dir, {"STEPS": "40"})
    if rc == 0 or "OUT" not in err:
        problems.append(f"STEPS=40 without OUT must be refused (it would replace the shipped "
                        f"model); got exit {rc}, stderr '{err.strip()}'")
    rc, _, err = run_sh_dry_run(recipe_dir, {"OUT": os.path.join(recipe_dir, "..", "model")})
    if rc == 0 or "shipped model" not in err:
        problems.append(f"OUT naming assets/model must be refused; got exit {rc}, stderr '{err.strip()}'")
    with tempfile.TemporaryDirectory() as tmp:
        rc, out, err = run_sh_dry_run(recipe_dir, {"STEPS": "40", "OUT": "m40"}, cwd=tmp)
        if rc != 0:
            problems.append(f"STEPS=40 OUT=m40 exited {rc}: {err.strip()}")
        else:
            dry = json.loads(out)
            if os.path.realpath(dry["out"]) != os.path.realpath(os.path.join(tmp, "m40")):
                problems.append(f"OUT=m40 run from {tmp} writes to {dry['out']}, not {tmp}/m40")
            if dry["settings"]["steps"] != 40:
                problems.append(f"STEPS=40 gives steps {dry['settings']['steps']}")
    for p in problems:
        fail(p)
    if not problems:
        print("ok: STEPS without OUT refused, OUT=assets/model refused, relative OUT from the caller's dir")
    return 1 if problems else 0


def self_test(recipe_dir, model_dir):
    """Scratch copies of the recipe that drift from the shipped model must fail `settings`."""
    def edit_file(name, old, new):
        """name: relative to the scratch copy's root, e.g. assets/recipe/run.sh."""
        def apply(d):
            p = os.path.join(d, name)
            with open(p, encoding="utf-8") as f:
                text = f.read()
            if old not in text:
                raise SystemExit(f"self-test: {name} has no '{old}' to edit; update the self-test")
            with open(p, "w", encoding="utf-8") as f:
                f.write(text.replace(old, new, 1))
        return apply

    def edit_recipe_json(key, value):
        """recipe.json and the README's copy of it, so that only the shipped model disagrees."""
        def apply(d):
            p = os.path.join(d, "assets", "recipe", "recipe.json")
            with open(p, encoding="utf-8") as f:
                j = json.load(f)
            old = f'"{key}": {json.dumps(j[key])}'
            j[key] = value
            with open(p, "w", encoding="utf-8") as f:
                json.dump(j, f, indent=2)
            edit_file("assets/recipe/README.md", old, f'"{key}": {json.dumps(value)}')(d)
        return apply

    # (what the scratch copy does, its edit, words the failure must contain; None: must pass)
    cases = [
        ("an unmodified copy", lambda d: None, None),
        ("run.sh asks train.py for 1200 steps",
         edit_file("assets/recipe/run.sh", "$PY train.py ", "$PY train.py --steps 1200 "), ["steps", "1200", "3000"]),
        ("run.sh defaults STEPS to 1200 (the bug of issue 19)",
         edit_file("assets/recipe/run.sh", "set -eu\n", "set -eu\nSTEPS=${STEPS:-1200}\n"), ["1200"]),
        ("run.sh passes another seed",
         edit_file("assets/recipe/run.sh", "$PY train.py ", "$PY train.py --seed 7 "), ["seed", "7", "1234"]),
        ("recipe.json (and its README copy) say 1200 steps", edit_recipe_json("steps", 1200),
         ["steps", "1200", "3000"]),
        ("the README's copy says 1200 steps", edit_file("assets/recipe/README.md", '"steps": 3000', '"steps": 1200'),
         ["README", "1200"]),
        ("train.py's model is wider", edit_file("assets/recipe/train.py", "dim=128", "dim=192"), ["hidden_size"]),
        ("the after-the-fact record says 4 threads",
         edit_file(f"assets/model/{SIDECAR}", '"threads": {"value": 2,', '"threads": {"value": 4,'),
         ["threads", "4", "2"]),
        ("the after-the-fact record cites a log line that is not in the log",
         edit_file(f"assets/model/{SIDECAR}", '"log": "corpus: 60000', '"log": "corpus: 70000'),
         ["train_stories", "log line"]),
    ]
    bad = 0
    me = os.path.abspath(__file__)
    for what, edit, expect in cases:
        with tempfile.TemporaryDirectory() as tmp:
            scratch = os.path.join(tmp, "assets", "recipe")
            shutil.copytree(recipe_dir, scratch, ignore=shutil.ignore_patterns("__pycache__"))
            shutil.copytree(model_dir, os.path.join(tmp, "assets", "model"))
            edit(tmp)
            r = subprocess.run([sys.executable, me, "settings", "--repo", tmp], capture_output=True,
                               text=True, timeout=300)
            text = r.stdout + r.stderr
            if expect is None:
                ok = r.returncode == 0
            else:
                ok = r.returncode != 0 and all(w in text for w in expect)
            print(f"{'ok' if ok else 'FAIL'}: {what}: settings check exited {r.returncode}"
                  f"{'' if expect is None else ', expected non-zero naming ' + str(expect)}")
            if not ok or expect is not None:
                print("    " + text.strip().replace("\n", "\n    "))
            bad += not ok
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("check", choices=["settings", "regenerate", "run-sh", "self-test"])
    ap.add_argument("--repo", required=True)
    ap.add_argument("--recipe", help="recipe directory (default: REPO/assets/recipe)")
    ap.add_argument("--model", help="shipped model directory (default: REPO/assets/model)")
    a = ap.parse_args()
    repo = os.path.abspath(a.repo)
    recipe_dir = os.path.abspath(a.recipe or os.path.join(repo, "assets", "recipe"))
    model_dir = os.path.abspath(a.model or os.path.join(repo, "assets", "model"))
    if a.check == "settings":
        return check_settings(recipe_dir, model_dir)
    if a.check == "regenerate":
        return check_regenerate(recipe_dir, model_dir)
    if a.check == "run-sh":
        return check_run_sh(recipe_dir)
    return self_test(recipe_dir, model_dir)


if __name__ == "__main__":
    sys.exit(main())
