#!/usr/bin/env bash
# kernels/device-check.sh: the GPU path on a real CUDA device, in under 10 minutes
# on an H200 including the build.
#
# Steps (each prints its wall time; each step's output is written to a log file
# first and checked afterwards, so a failing step shows what it printed):
#   0. prerequisites, one line each: bash, CMake >= 3.25, a C++ compiler, nvcc,
#      the header-only libraries (from --deps or the system), nvidia-smi and a
#      device; python3 for the recipe tests,
#   1. native build: Release, only this GPU's architecture, viewer off,
#   2. the GPU tests with PLAB_REQUIRE_NATIVE=1 (a machine whose CUDA cannot be
#      used fails here instead of passing in emulation), every kernel and whole
#      prefills natively *and* emulated (tests/gpu/gpu_test_util.h runs both),
#   3. every other test (lessons included: no "(emulated)" literal may remain),
#   4. the registry picked the native kernels; chunked gpu-ref == cpu-ref,
#   5. each kernel's registers, stack frame (local memory) and shared memory,
#      read from the compiled sm_XX code (cuobjdump),
#   6. `plab bench` of gpu-ref and gpu: prefill medians and their share of the
#      device's float32 GEMM peak (cuBLAS SGEMM, measured first), decode speed, and the
#      device time of every op of one prefill per length (CUDA events) against
#      its wall time — how much of a prefill the kernels themselves take; then
#      gpu on the stories110M shape at 2048 tokens (the GPU prefill target), and
#      kernels/bench/gemm_kernels.cu: matmul_tiled and matmul_blocked against
#      cuBLAS SGEMM on the products those prefills make (GFLOP/s, error), and
#      matmul_tiled, matmul_rows and cuBLAS on a decode step's one-row
#      products (us, weight GB/s); the decode rows and the op table of one
#      decode step (stories15M, then stories110M) against the bandwidth bound,
#   7. the table last: per backend (cpu-ref, cpu, gpu-ref, gpu) and prompt
#      length (128, 512, 2048) on a random stories15M-shaped model: prefill
#      time and tokens/s (median of 3 runs after a warm-up), max |diff| of the
#      last logits and of every cached K/V against cpu-ref, bitwise, the first
#      token, and whether the row kept its promise (`plab compare`, which exits
#      non-zero when a row breaks it). The cpu row is the fast CPU backend: the
#      gpu row's difference from cpu-ref can be read against it.
#
# Usage
#   on the GPU machine:   kernels/device-check.sh [--deps DIR] [--logs DIR]
#   anywhere:             kernels/device-check.sh --dry-run [--deps DIR]
#   on a dev machine:     kernels/device-check.sh --pack-deps DIR
# --dry-run prints the prerequisites found and the steps, builds and runs nothing.
# --pack-deps copies this machine's header-only build dependencies (Eigen 3,
# CLI11, nlohmann_json, Catch2 v2) with their CMake files into DIR, for a GPU
# machine that has CUDA and CMake but not these (pass the copy with --deps).
# --logs DIR keeps every step's log there (default: next to the build folder).
# Environment: PLAB_DEVICE_BUILD (build folder, default build-device),
# PLAB_CUDA_ARCHITECTURES (default: the GPU's own, from nvidia-smi),
# PLAB_DEVICE_LENGTHS (the table's prompt lengths, default 128,512,2048).
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="${PLAB_DEVICE_BUILD:-$root/build-device}"
lengths="${PLAB_DEVICE_LENGTHS:-128,512,2048}"
deps=""
logs=""
dry_run=0

while [[ $# -gt 0 ]]; do
    case "$1" in
    --pack-deps)
        mkdir -p "${2:?--pack-deps needs a folder}" || exit 2
        dir="$(cd "$2" && pwd)"
        # Keep /usr's layout: the CMake config files find their headers relative to themselves.
        (cd /usr && cp -r --parents include/eigen3 share/eigen3/cmake include/CLI share/cmake/CLI11 \
            include/nlohmann share/cmake/nlohmann_json include/catch2 lib/cmake/Catch2 include/stb \
            lib/libCatch2WithMain.a "$dir"/)
        du -sh "$dir"
        exit 0
        ;;
    --deps) deps="$(cd "${2:?--deps needs a folder}" && pwd)" || exit 2; shift 2 ;;
    --logs) logs="${2:?--logs needs a folder}"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    *)
        echo "device-check: unknown option '$1'; expected --deps DIR, --logs DIR, --dry-run or --pack-deps DIR" >&2
        exit 2
        ;;
    esac
done
logs="${logs:-$build-logs}"

step() { printf '\n=== %s (%s)\n' "$1" "$(date +%T)"; }
start=$(date +%s)
missing=0
found() { printf '  ok       %-22s %s\n' "$1" "$2"; }
lacking() { printf '  MISSING  %-22s %s\n' "$1" "$2"; missing=$((missing + 1)); }

# version_at_least A B: is dotted version A >= B?
version_at_least() { [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" == "$2" ]]; }

# header DIR-RELATIVE-PATH NAME: a header-only library, from --deps or the system.
header() {
    local rel="$1" name="$2" d
    for d in ${deps:+"$deps/include"} /usr/include /usr/local/include; do
        if [[ -e "$d/$rel" ]]; then found "$name" "$d/$rel"; return; fi
    done
    lacking "$name" "no $rel under ${deps:+$deps/include, }/usr/include or /usr/local/include (run --pack-deps DIR on a dev machine, pass --deps DIR)"
}

step "0. prerequisites"
if command -v cmake >/dev/null; then
    v="$(cmake --version | head -n 1 | awk '{print $3}')"
    if version_at_least "$v" 3.25; then found cmake "$v"; else lacking cmake "$v is older than 3.25 (CMakePresets.json version 6)"; fi
else
    lacking cmake "not on PATH (needs >= 3.25)"
fi
cxx="${CXX:-$(command -v g++ || command -v c++ || true)}"
if [[ -n "$cxx" ]]; then found "C++ compiler" "$cxx ($("$cxx" --version | head -n 1))"; else lacking "C++ compiler" "no g++ or c++ on PATH"; fi
nvcc_bin="$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)"
if [[ -n "$nvcc_bin" ]]; then found nvcc "$nvcc_bin ($("$nvcc_bin" --version | grep -o 'release [0-9.]*'))"; else lacking nvcc "not on PATH or in /usr/local/cuda/bin"; fi
header eigen3/Eigen/Core "Eigen 3"
header CLI/CLI.hpp CLI11
header nlohmann/json.hpp nlohmann_json
header catch2/catch.hpp "Catch2 v2"
if command -v python3 >/dev/null; then found python3 "$(python3 --version 2>&1) (recipe tests)"; else lacking python3 "not on PATH (tests/recipe need it)"; fi
device=""
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    device="$(nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader | head -n 1)"
    found "CUDA device" "$device"
else
    if ((dry_run)); then
        printf '  none     %-22s %s\n' "CUDA device" "no GPU visible to nvidia-smi (a real run stops here)"
    else
        lacking "CUDA device" "no GPU visible to nvidia-smi; this check needs one"
    fi
fi
arch="${PLAB_CUDA_ARCHITECTURES:-}"
if [[ -z "$arch" && -n "$device" ]]; then
    arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')"
fi
arch="${arch:-90}"
echo "  build for CUDA architecture(s): $arch; build folder $build; logs in $logs"

steps=(
    "1. native build (Release, PLAB_CUDA_ARCHITECTURES=$arch, viewer off)"
    "2. GPU tests with PLAB_REQUIRE_NATIVE=1 (ctest -L test_gpu|test_gpu_mask), native and emulated"
    "3. every other test (ctest -LE 'test_gpu|viewer')"
    "4. gpu-ref runs natively (plab toy); chunked gpu-ref and gpu against cpu-ref (plab compare, 5 plans)"
    "5. registers, stack frame and shared memory of every kernel (cuobjdump --dump-resource-usage)"
    "6. plab bench of gpu-ref and gpu at $lengths tokens: medians, share of the cuBLAS SGEMM peak, decode, device time by op; gpu on stories110m at 2048; decode without CUDA graphs (PLAB_GPU_GRAPHS=0); the GEMM kernels against cuBLAS"
    "7. table: cpu-ref, cpu, gpu-ref, gpu at $lengths tokens (plab compare --repeats 3)"
)
if ((dry_run)); then
    echo
    echo "steps a real run takes:"
    printf '  %s\n' "${steps[@]}"
    echo
    if ((missing)); then echo "device-check --dry-run: $missing prerequisite(s) missing"; else echo "device-check --dry-run: every prerequisite found"; fi
    exit 0
fi
if ((missing)); then
    echo "device-check: $missing prerequisite(s) missing (see above); nothing was built" >&2
    exit 2
fi
mkdir -p "$logs"

# run_step NAME COMMAND...: runs COMMAND with its output in LOGS/NAME.log, then
# shows the log's end and stops the check when COMMAND failed.
# test_step NAME COMMAND...: the same, but a failure is counted and the check
# goes on, so one failing test still leaves the speed table of the same run
# (device time is short); the check exits non-zero at the end.
failed_steps=()
test_step() {
    local log="$logs/$1.log" name="$1"
    shift
    "$@" >"$log" 2>&1
    local rc=$?
    if ((rc != 0)); then
        grep -E "FAILED|Failed|failed|error" "$log" | head -n 30
        echo "device-check: step '$name' FAILED (exit $rc); whole log: $log; going on" >&2
        failed_steps+=("$name")
    else
        tail -n 6 "$log"
    fi
}
run_step() {
    local log="$logs/$1.log"
    shift
    "$@" >"$log" 2>&1
    local rc=$?
    if ((rc != 0)); then
        tail -n 60 "$log"
        echo "device-check: step failed (exit $rc); whole log: $log" >&2
        exit 1
    fi
    tail -n 6 "$log"
}

step "${steps[0]}"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
run_step configure cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DPLAB_CUDA=ON \
    -DPLAB_VIEWER=OFF -DPLAB_CUDA_ARCHITECTURES="$arch" ${deps:+-DCMAKE_PREFIX_PATH="$deps"}
grep -q "native CUDA kernels ON" "$logs/configure.log" ||
    { echo "device-check: CMake did not enable the native CUDA kernels (see $logs/configure.log)" >&2; exit 1; }
run_step build cmake --build "$build" -j "$(nproc)"

step "${steps[1]}"
# PLAB_CUDA_SYNC=1: every launch waits for its kernel, so a fault names the kernel.
test_step gpu-tests env PLAB_REQUIRE_NATIVE=1 PLAB_CUDA_SYNC=1 \
    ctest --test-dir "$build" -L 'test_gpu|test_gpu_mask' -j 8 --output-on-failure

# CUDA graphs run natively in the tests above (tests/gpu/test_step_graph.cpp,
# tag [graph]). Should they fail there, the
# rest of the run launches kernel by kernel (PLAB_GPU_GRAPHS=0), so the
# speed figures still come back, and says so.
if ! "$build/tests/gpu/test_step_graph" "[graph]" >"$logs/graph-tests.log" 2>&1; then
    echo "device-check: CUDA graphs FAILED natively (see $logs/graph-tests.log); the rest of" \
        "this run uses PLAB_GPU_GRAPHS=0 (every kernel launched on its own)" >&2
    export PLAB_GPU_GRAPHS=0
    failed_steps+=("graph-tests")
fi

step "${steps[2]}"
test_step other-tests ctest --test-dir "$build" -LE 'test_gpu|viewer' -j "$(nproc)" --output-on-failure

step "${steps[3]}"
plab="$build/plab"
run_step toy "$plab" toy --backend gpu-ref
grep -q "gpu-ref (native)" "$logs/toy.log" ||
    { echo "device-check: gpu-ref did not run natively (see $logs/toy.log)" >&2; exit 1; }
run_step chunked "$plab" compare --random stories15m --lengths 300 --backends gpu-ref,gpu \
    --plans "full;1;7;64;100,1,199" --block-size 16

step "${steps[4]}"
if command -v cuobjdump >/dev/null; then
    cuobjdump --dump-resource-usage "$plab" >"$logs/resources.log" 2>&1
    # One line per kernel: its (demangled-enough) name and its resource line.
    awk '/Function/ {name=$2} /REG:/ {sub(/^[ \t]*/, ""); print name ": " $0}' "$logs/resources.log" |
        sed 's/^_Z[0-9]*//' | sort -u | head -n 60
else
    echo "(cuobjdump not on PATH: skipped)"
fi

step "${steps[5]}"
run_step bench "$plab" bench --backends gpu-ref,gpu --lengths "$lengths" --repeats 5
# The device's cuBLAS SGEMM peak (the gpu rows' "of peak"), then the rows.
grep -A 1 "^Device" "$logs/bench.log" | grep -v "Device time by op" | head -n 2
sed -n '/^  backend  *tokens  *runs/,/^  backend  *tokens  *worst/p' "$logs/bench.log" | head -n 12
grep -A 14 "Device time by op" "$logs/bench.log" | head -n 60
# Decode: the rows against the bandwidth bound, and the op
# table of one decode step (launches and device time per op).
decode_tables() {
    sed -n '/^Decode (one token per step/,/^$/p' "$1"
    sed -n '/one decode step after/,/every op/p' "$1"
}
decode_tables "$logs/bench.log"
# Its decode steps attend over ~2048 keys: split over 8 key segments of 256
# (kernels.h, kFlashSegmentKeys), 96 blocks a call instead of 12.
test_step bench-110m "$plab" bench --shape stories110m --backends gpu --lengths 2048 --repeats 3 \
    --decode-steps 16
grep -A 1 "^Device" "$logs/bench-110m.log" | grep -v "Device time by op" | head -n 2
sed -n '/^  backend  *tokens  *runs/,/^  backend  *tokens  *worst/p' "$logs/bench-110m.log" | head -n 4
grep -A 14 "Device time by op" "$logs/bench-110m.log" | head -n 16
decode_tables "$logs/bench-110m.log"
# CUDA graphs (kernels/step_graph.h): decode rows with the
# step replayed as one graph (the default) and with every kernel launched on
# its own (PLAB_GPU_GRAPHS=0), same shape, same steps, one after the other.
graph_settings="1 0"
[[ "${PLAB_GPU_GRAPHS:-1}" == 0 ]] && graph_settings="0"
for shape in stories15m stories110m; do
    for graphs in $graph_settings; do
        test_step "decode-graphs-$graphs-$shape" env PLAB_GPU_GRAPHS=$graphs "$plab" bench \
            --shape "$shape" --backends gpu --lengths 64 --repeats 1 --decode-steps 32
        echo "PLAB_GPU_GRAPHS=$graphs, $shape:"
        sed -n '/^Decode (one token per step/,/^$/p' "$logs/decode-graphs-$graphs-$shape.log"
    done
done
# The attention ladder (kernels/attention_ladder.h): each rung's GPU time and its
# speed-up over the rung before, beside the emulator's byte and operation counts
# (the GPU column of kernels/README.md's ladder table).
test_step attention-ladder "$plab" bench --attention-ladder --lengths 1024
cat "$logs/attention-ladder.log"
# The GEMM kernels alone against cuBLAS (the build's gemm_kernels target, made
# where CMake found cuBLAS).
if [[ -x "$build/gemm_kernels" ]]; then
    test_step gemm-kernels "$build/gemm_kernels"
    cat "$logs/gemm-kernels.log"
else
    echo "(no $build/gemm_kernels: CMake found no cuBLAS to link kernels/bench/gemm_kernels.cu)"
fi

step "${steps[6]}"
"$plab" compare --random stories15m --lengths "$lengths" --backends cpu-ref,cpu,gpu-ref,gpu \
    --plans full --repeats 3 >"$logs/table.log" 2>&1
rc=$?
cat "$logs/table.log"
echo
if ((${#failed_steps[@]})); then
    echo "device-check: FAILED steps: ${failed_steps[*]} (logs in $logs)"
    rc=1
fi
echo "device-check: done in $(($(date +%s) - start)) s (exit $rc)"
exit $rc
