#!/bin/sh
# Rebuilds assets/model from nothing: installs what the recipe needs (Debian
# packages only), trains on 2 CPU threads, exports, and regenerates the golden
# files that depend on the shipped model. Not part of the build or of CI.
#
#   sh assets/recipe/run.sh            # ~20-30 min on 2 cores
#   STEPS=20 OUT=/tmp/m sh assets/recipe/run.sh   # smoke test
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PY=/usr/bin/python3   # Debian's python: python3-torch lives there, not in other pythons on PATH

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

OUT=${OUT:-$REPO/assets/model}
cd "$HERE"
OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=2 \
    $PY train.py --seed 1234 --steps "${STEPS:-1200}" --threads 2 --out "$OUT"
if [ "$OUT" = "$REPO/assets/model" ]; then
    $PY "$REPO/tests/reference/make_golden.py" --only shipped
fi
