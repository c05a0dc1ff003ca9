#!/bin/sh
# Rebuilds assets/model from nothing: installs what the recipe needs (Debian
# packages only), trains with the settings in recipe.json, exports, and
# regenerates the golden files that depend on the shipped model. Not part of
# the build or of CI.
#
#   sh assets/recipe/run.sh                       # the shipped model, ~25 min on 2 cores
#   STEPS=40 OUT=/tmp/m sh assets/recipe/run.sh   # a smoke test in /tmp/m, ~1 min
#   SHAPE=draft OUT=assets/draft sh assets/recipe/run.sh   # the one-layer draft (lesson 18)
#
# Every setting comes from recipe.json, through train.py's defaults: this script
# passes only what you ask for, STEPS (another schedule length) and OUT (another
# directory; then assets/model and the goldens are left alone). STEPS without
# OUT is refused: assets/model must stay the model recipe.json describes
# (tests/recipe checks that).
# PLAB_RECIPE_DRY_RUN=1 installs and trains nothing: train.py prints the
# settings it would use (this is how tests/recipe reads them).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
SHIPPED="$REPO/assets/model"
PY=/usr/bin/python3   # Debian's python: python3-torch lives there, not in other pythons on PATH
DRY_RUN=${PLAB_RECIPE_DRY_RUN:-}

# 1. Where to write. A relative OUT is relative to where you ran the script.
if [ -n "${OUT:-}" ]; then
    case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac
    if [ -d "$OUT" ] && [ "$(cd "$OUT" && pwd -P)" = "$(cd "$SHIPPED" && pwd -P)" ]; then
        echo "run.sh: OUT=$OUT is the shipped model; leave OUT unset to rebuild it (and its goldens)" >&2
        exit 2
    fi
elif [ -n "${STEPS:-}" ]; then
    echo "run.sh: STEPS=$STEPS needs OUT=DIR too: assets/model is rebuilt only with recipe.json's" \
        "settings (change recipe.json to change the recipe)" >&2
    exit 2
fi

# 2. What the recipe needs (Debian packages only; nothing else is downloaded).
if [ -z "$DRY_RUN" ]; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
    if ! $PY -c "import torch, numpy" 2>/dev/null; then
        $SUDO apt-get update
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y python3-torch python3-numpy
    fi
    # Optional: OpenBLAS makes Debian's torch ~10x faster on the CPU than the reference BLAS.
    if ! ls /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 >/dev/null 2>&1; then
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y libopenblas0-pthread || true
    fi
fi

# 3. Train and export. Only what you asked for goes on the command line.
set -- --out "${OUT:-$SHIPPED}"
if [ -n "${STEPS:-}" ]; then set -- "$@" --steps "$STEPS"; fi
if [ -n "${SHAPE:-}" ]; then set -- "$@" --shape "$SHAPE"; fi
cd "$HERE"
$PY train.py "$@"
if [ -n "$DRY_RUN" ]; then exit 0; fi

# 4. The shipped model's goldens follow the shipped model, and only it.
if [ -z "${OUT:-}" ]; then
    $PY "$REPO/tests/reference/make_golden.py" --only shipped
fi
