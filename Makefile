# Prefill Lab — the two commands of the README's quick start:
#   make run    install missing Debian packages, build, run the main demo
#   make test   install missing Debian packages, build, run every test (ctest)
# Other targets: deps, build, bench, notebooks, format, format-check, screenshots, clean,
#   web         the viewer and the engine as one static page in build-web/site/ (viewer/web/README.md)
#   test-web    that page in headless Chromium (ctest label web; make test runs it too)
#   test-other-machines  the lessons and engine tests as on two other CPUs (tests/README.md)
#   test-asan   the suite again under AddressSanitizer + UBSan (preset asan, build-asan/)
#   fuzz        every parser's libFuzzer harness FUZZ_SECONDS each (preset fuzz, build-fuzz/)
#   handout DIR=PATH    the assignments for students, no solution.* (lessons/INSTRUCTORS.md)
#   longest-functions   the ten longest functions of src/ and viewer/ (limit 100 lines)

BUILD_DIR ?= build
JOBS ?= $(shell nproc)
# One list of Debian package names, shared by humans and CI; `make run` needs
# only the part above the "---- for `make test`" line.
PACKAGES := $(shell grep -v '^\s*\#' .ci/debian-packages.txt | grep -v '^\s*$$')
RUN_PACKAGES := $(shell sed '/^\# ---- for `make test`/,$$d' .ci/debian-packages.txt | grep -v '^\s*\#' | grep -v '^\s*$$')
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# CI (which sets CI=true) treats warnings as errors, and compiles the native
# CUDA kernels for sm_90 only: CI has no GPU, so the native build there proves
# that nvcc compiles them warning-free; the flash kernel's 11 head_dim
# instantiations for all five default architectures took most of CI's build.
CMAKE_FLAGS ?= $(if $(CI),-DPLAB_WERROR=ON -DPLAB_CUDA_ARCHITECTURES=90,)
PLAB := $(BUILD_DIR)/plab
VIEWER := $(BUILD_DIR)/plab-viewer

.PHONY: web deps-web test-web test-other-machines run test test-asan test-asan-gpu fuzz deps deps-run install-packages build build-run configure configure-run bench notebooks format format-check screenshots clean handout longest-functions

# `make run` builds only what the demo and the viewer need (plab, plab-viewer):
# the tests, the Python module and the fuzz harnesses wait for `make test`. With
# no GPU present no native CUDA object is compiled (CMakeLists.txt), so a first
# run on a fresh 2-core machine starts in minutes (tests/README.md has the figure).

build-run: configure-run
	cmake --build $(BUILD_DIR) -j$(JOBS) --target plab_cli $$(cmake --build $(BUILD_DIR) --target help | grep -o '^plab-viewer' | head -n 1)

run: build-run
	@echo "== plab toy: the [2,4,8,10] example, full and chunked"
	$(PLAB) toy
	@echo
	@echo "== plab prefill: the built-in prompt on the built-in model, in chunks of 4"
	$(PLAB) prefill --chunks 4
	@echo
	@echo "== plab generate: prefill, first token, decode"
	$(PLAB) generate -n 40
	@if [ -n "$$DISPLAY" ] && [ -x $(VIEWER) ]; then \
	  echo "== opening the viewer (plab-viewer)"; $(VIEWER); \
	else \
	  echo "(no display: run $(VIEWER) on a desktop, or see the screenshots in viewer/README.md)"; \
	fi

test: build web
	ctest --test-dir $(BUILD_DIR) -j$(JOBS) --output-on-failure --timeout 900

# The lab in a browser (issue 51; viewer/web/README.md): plab-viewer and the engine
# compiled to WebAssembly by Debian's emscripten into build-web/ (index.html,
# plab-viewer.js/.wasm/.data: any static file server serves the folder). The set-up
# step fetches Dear ImGui's sources (Debian's source package imgui) into
# build-web/deps. Debian's emscripten ships its system libraries prebuilt (a frozen
# cache), so nothing is built or written outside build-web/. `make test` runs the web
# tests too (about 4-5 minutes of CI: viewer/web/README.md has the figures).
WEB_DIR := build-web
# Debian's emscripten reads its prebuilt, frozen cache; an emscripten whose cache is not
# frozen (emsdk, a newer package) builds its system libraries on first use: into
# build-web/emcache then, not outside the tree (about 3 min on 2 cores, measured).
# Expanded when the recipe runs, after deps-web has installed emscripten.
WEB_ENV = NODE_PATH=/usr/share/nodejs $(if $(filter True,$(shell NODE_PATH=/usr/share/nodejs \
  em-config FROZEN_CACHE 2>/dev/null)),,EM_CACHE=$(abspath $(WEB_DIR))/emcache)
deps-web:
	@$(MAKE) -s install-packages WANT="$(RUN_PACKAGES) emscripten"
	viewer/web/fetch_deps.sh $(WEB_DIR)/deps

web: deps-web
	$(WEB_ENV) emcmake cmake -S viewer/web -B $(WEB_DIR)/cmake -G Ninja
	$(WEB_ENV) cmake --build $(WEB_DIR)/cmake -j$(JOBS) --target plab-viewer
	@ls -l $(WEB_DIR)/site/index.html $(WEB_DIR)/site/plab-viewer.*

# The checks of the numbers that follow the machine (tests/README.md, "Machine-dependent
# numbers"), as on two other machines. .ci/run runs it after `make test`:
#  1. the lessons and the engine's tests again with the fast CPU kernels blocking for
#     other caches and planning for one CPU (core/machine_override.h; more CPUs than
#     this machine's cores would run, but spinning threads make its timings meaningless);
#  2. plab and the lesson runner built for plain x86-64 (PLAB_NATIVE=OFF: SSE2, no FMA,
#     4-float vectors: another order of the fast kernels' adds) into build-portable/,
#     and the lessons run on it.
OTHER_MACHINE ?= PLAB_CPU_CACHES=16K,256K,4M PLAB_CPU_THREADS=1
PORTABLE_DIR ?= build-portable
test-other-machines: build
	env $(OTHER_MACHINE) ctest --test-dir $(BUILD_DIR) -j$(JOBS) -L '^(lessons|test_engine)$$' \
	  --output-on-failure --timeout 900
	cmake -S . -B $(PORTABLE_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release -DPLAB_NATIVE=OFF \
	  -DPLAB_CUDA=OFF -DPLAB_VIEWER=OFF $(if $(CI),-DPLAB_WERROR=ON,)
	cmake --build $(PORTABLE_DIR) -j$(JOBS) --target plab_cli lesson_runner near_tie_search
	ctest --test-dir $(PORTABLE_DIR) -j$(JOBS) -L '^lessons$$' --output-on-failure --timeout 900

# The ten longest functions of src/ and viewer/, in lines of code (comments and blank
# lines not counted): the house's limit is 100 (tests/layering/function_lengths.py).
longest-functions:
	@/usr/bin/python3 tests/layering/function_lengths.py . --top 10

# The assignments for students (lessons/INSTRUCTORS.md, "Handing out the assignments"):
# lessons/assignments/ without any solution.* file, into DIR (new or empty).
handout:
	@lessons/assignments/handout.sh "$(DIR)"

test-web: build web
	ctest --test-dir $(BUILD_DIR) -L '^web$$' --output-on-failure --timeout 900

# The sanitizer suite (.ci/run runs it after `make test`): the engine, mask,
# model, stress and serving tests (KV cache paging, chunk plans, masks, every loader, the
# limits, random schedules through one block pool; batch invariance, the prefix
# cache, preemption, the scheduler, plab serve) and every fuzz replay, built
# with ASan + UBSan (preset asan, build-asan/). Left out,
# for CI time and for what ASan would find there: the viewer (GL driver
# allocations), lessons and recipe (they rerun CLI commands test_engine runs), the
# bench --load rows (timing, 3 minutes under ASan), the emulated-gpu bench
# plab serve --validate-cost (it times this machine: a real-clock replay),
# and the two evaluations of the shipped model (30, 33 and 45 s of ASan test
# time: the forward pass, sampler and bench paths they take run under ASan in
# other tests; their figures are checked in the release run), and test_gpu,
# which has its own target below (its ASan build and run add ~12 minutes to
# CI on 2 cores).
# An area is a ctest label and a build target, area_<label>, holding the area's test
# executables (one per test file; tests/CMakeLists.txt's plab_add_test).
# ASAN_CTEST_ARGS='' runs every test of the subset's binaries; more targets, more tests.
ASAN_TARGETS ?= plab_cli area_test_engine area_test_mask area_test_model area_test_stress \
  area_test_serving fuzz_replays
ASAN_CTEST_ARGS ?= -L '^(test_engine|test_mask|test_model|test_stress|test_serving|fuzz_replay)$$' \
  -E 'bench --load|bench holds gpu rows|plab eval --json: the shipped|plab eval --mask on the shipped|--validate-cost'
# No -Werror here even in CI: GCC 12's flow analysis under -fsanitize reports
# false -W(maybe-)uninitialized inside libstdc++ and its AVX-512 intrinsics
# (GCC bug 105593); warnings are the normal build's job.
test-asan: deps
	cmake --preset asan -DPLAB_WERROR=OFF
	cmake --build --preset asan -j$(JOBS) --target $(ASAN_TARGETS)
	ctest --preset asan -j$(JOBS) --timeout 900 $(ASAN_CTEST_ARGS)

# Every GPU kernel under ASan + UBSan, run by the SIMT emulator, which announces
# each fiber switch to ASan: an index past a device buffer (host memory here) is
# caught. Not in CI (time); run it after changing a kernel. The two sweeps over
# all 512 chunk plans are left out (minutes each under ASan).
test-asan-gpu: deps
	cmake --preset asan -DPLAB_WERROR=OFF
	cmake --build --preset asan -j$(JOBS) --target area_test_gpu
	ctest --preset asan -j$(JOBS) --timeout 900 -L '^test_gpu$$' -E 'all 512 chunk plans'

# Fuzzing (tests/fuzz/CMakeLists.txt): each harness FUZZ_SECONDS, crashers first.
# CI runs FUZZ_SECONDS=20; a longer run finds deeper bugs.
FUZZ_SECONDS ?= 300
fuzz: deps
	cmake --preset fuzz
	cmake --build --preset fuzz -j$(JOBS)
	PLAB_FUZZ_SECONDS=$(FUZZ_SECONDS) ctest --preset fuzz -j$(JOBS) --timeout $$(( $(FUZZ_SECONDS) + 300 ))

deps:
	@$(MAKE) -s install-packages WANT="$(PACKAGES)"

deps-run:
	@$(MAKE) -s install-packages WANT="$(RUN_PACKAGES)"

install-packages:
	@missing=""; for p in $(WANT); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing missing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

CONFIGURE := cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: deps
	$(CONFIGURE)

configure-run: deps-run
	$(CONFIGURE)

build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS)

# assets/bench/README.md (performance) comes from one run of this: both shapes the
# issue names, prefill at three lengths, decode alone and batched, the roofline.
# Run it on a quiet machine; it prints what the machine is.
bench: build
	@lscpu | grep -E '^(Model name|CPU\(s\)):' || true
	$(PLAB) bench --backends cpu,cpu-ref --lengths 128,512,2048 --repeats 5 --decode-steps 64 \
	  --batch 1,4,16,64 --plot assets/bench/roofline.png
	$(PLAB) bench --shape stories110m --backends cpu --lengths 128,512,2048 --repeats 3 \
	  --decode-steps 32 --batch 1,16,64
	$(PLAB) bench --backends cpu --lengths 128,512 --repeats 9 --decode-steps 64 --load

# The notebooks of lessons/notebooks in Jupyter (Debian's jupyter-notebook), with
# the prefill_lab module built and on the path of the kernel (/usr/bin/python3,
# Debian's python3-ipykernel), whichever python3 comes first on PATH.
# NOTEBOOK_ARGS passes options, e.g. NOTEBOOK_ARGS=--no-browser.
# As root (a container, a fresh VM) Jupyter refuses to start without --allow-root.
NOTEBOOK_ARGS ?=
NOTEBOOK_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
notebooks: configure
	cmake --build $(BUILD_DIR) -j$(JOBS) --target prefill_lab_python
	PYTHONPATH=$(abspath $(BUILD_DIR))/python /usr/bin/jupyter-notebook --notebook-dir=lessons/notebooks $(NOTEBOOK_ROOT) $(NOTEBOOK_ARGS)

# README pictures of every viewer panel, rendered headless (Xvfb) into assets/screenshots/.
screenshots: build
	cmake --build $(BUILD_DIR) --target screenshots

format:
	git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | xargs clang-format -i

format-check:
	git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | xargs clang-format --dry-run --Werror

clean:
	rm -rf $(BUILD_DIR) build-asan build-fuzz $(PORTABLE_DIR) $(WEB_DIR)
