#!/usr/bin/env bash
# kernels/device-check.sh: the GPU path on a real CUDA device, in under 5 minutes.
#
# What it does, in order (each step prints its wall time):
#   1. builds natively: Release, only this GPU's architecture (so ~1-2 minutes),
#   2. runs the GPU tests (ctest -L test_gpu): every kernel and whole prefills,
#      natively *and* emulated (tests/gpu/gpu_test_util.h runs both forms),
#   3. checks that the registry picked the native kernels ("gpu-ref (native)"),
#      and that gpu-ref stays bitwise equal to cpu-ref under chunked prefill,
#   4. prints the table last: per backend (cpu-ref, gpu-ref, gpu) and prompt
#      length (128, 512, 2048) on a random stories15M-shaped model (D=288, L=6,
#      H=6, Dh=48, F=768, V=32000, max_seq_len 2048): prefill tokens/s (median
#      of 3 runs after a warm-up), max |diff| of the last logits and of every
#      cached K/V against cpu-ref, and the bitwise flag (`plab compare`).
# `plab compare` exits non-zero if any row breaks its promise (reference rows
# bitwise, fast rows within relative 1e-5 with the same first token).
#
# Usage
#   on the GPU machine:   kernels/device-check.sh [--deps DIR]
#   on a dev machine:     kernels/device-check.sh --pack-deps DIR
# --pack-deps copies this machine's header-only build dependencies (Eigen 3,
# CLI11, nlohmann_json, Catch2 v2) with their CMake files into DIR, for a GPU
# machine that has CUDA and CMake but not these (pass the copy with --deps).
# Environment: PLAB_DEVICE_BUILD (build folder, default build-device),
# PLAB_CUDA_ARCHITECTURES (default: the GPU's own, from nvidia-smi).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="${PLAB_DEVICE_BUILD:-$root/build-device}"
deps=""

if [[ "${1:-}" == "--pack-deps" ]]; then
    dir="${2:?--pack-deps needs a folder}"
    mkdir -p "$dir"
    # Keep /usr's layout: the CMake config files find their headers relative to themselves.
    (cd /usr && cp -r --parents include/eigen3 share/eigen3/cmake include/CLI share/cmake/CLI11 \
        include/nlohmann share/cmake/nlohmann_json include/catch2 lib/cmake/Catch2 \
        lib/libCatch2WithMain.a "$dir"/)
    du -sh "$dir"
    exit 0
fi
if [[ "${1:-}" == "--deps" ]]; then
    deps="$(cd "${2:?--deps needs a folder}" && pwd)"
fi

step() { printf '\n=== %s (%s)\n' "$1" "$(date +%T)"; }
start=$(date +%s)

step "0. device"
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L; then
    echo "device-check: no NVIDIA GPU visible (nvidia-smi); this check needs one" >&2
    exit 2
fi
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
arch="${PLAB_CUDA_ARCHITECTURES:-}"
if [[ -z "$arch" ]]; then
    cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')"
    arch="${cap:-90}"
fi
echo "building for CUDA architecture(s): $arch"

step "1. native build (Release)"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DPLAB_CUDA=ON \
    -DPLAB_VIEWER=OFF -DPLAB_CUDA_ARCHITECTURES="$arch" ${deps:+-DCMAKE_PREFIX_PATH="$deps"} \
    >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
grep -E "native CUDA kernels" "$build.configure.log"
cmake --build "$build" -j "$(nproc)" --target plab_cli test_gpu

step "2. GPU tests, native and emulated"
# PLAB_CUDA_SYNC=1: every launch waits for its kernel, so a fault names the kernel.
PLAB_CUDA_SYNC=1 ctest --test-dir "$build" -L test_gpu -j 4 --output-on-failure

step "3. the registry runs the native kernels; chunked gpu-ref == cpu-ref"
plab="$build/plab"
"$plab" toy --backend gpu-ref | tee /dev/stderr | grep -q "gpu-ref (native)" ||
    { echo "device-check: gpu-ref did not run natively" >&2; exit 1; }
"$plab" compare --random stories15m --lengths 300 --backends gpu-ref,gpu \
    --plans "full;1;7;64;100,1,199" --block-size 16

step "4. prefill on a stories15M-shaped model: speed and difference from cpu-ref"
"$plab" compare --random stories15m --lengths 128,512,2048 --backends cpu-ref,gpu-ref,gpu \
    --plans full --repeats 3
echo
echo "device-check: done in $(($(date +%s) - start)) s"
