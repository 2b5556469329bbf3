# Thin wrapper over CMake. `make run` and `make test` do all set-up on a fresh
# Debian machine: they install missing packages (deps), configure and build.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# libpcre2-dev: the Unicode regex engine of the GPT-2 pre-tokenizer (lib/data/pretokenize.cpp).
DEB_PACKAGES := cmake g++ make pkg-config libgtest-dev libgmock-dev libbenchmark-dev \
  libcli11-dev nlohmann-json3-dev libopenblas-dev libopenmpi-dev openmpi-bin clang-format \
  libtbb-dev libpcre2-dev clang libclang-rt-dev libomp-dev python3-venv mold
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# The CPU emulation of the CUDA code (docs/cuda-emulation.md): its own build
# folder; HIP_CPU_DIR overrides where the HIP CPU runtime is.
EMU_BUILD_DIR ?= build-emu
HIP_CPU_DIR ?=

# The libFuzzer harnesses of the readers (tests/fuzz, docs/reliability.md): clang
# (libclang-rt-dev has libFuzzer) with ASan and UBSan, in a build folder of
# their own; each runs FUZZ_SECONDS, two at a time on two CPUs, and a finding leaves its
# reproducer in $(FUZZ_BUILD_DIR)/crashes/NAME/ and fails the target.
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60

# AddressSanitizer + UndefinedBehaviorSanitizer (clang, -O1 -gline-tables-only; OpenMP (libomp),
# OpenBLAS and MPI as in the release build), CPU only, in a build folder of its own: the cpu
# and mpi tests, stopping at the first report (docs/reliability.md). Leaks in
# MPI's own libraries are suppressed (tests/sanitizers/lsan.supp says why); their
# stacks need full unwinding, so the mpi tests run with fast_unwind_on_malloc=0.
# Not run: the training-quality tests (500 steps per strategy, over 4 minutes
# under ASan), whose code paths the shorter trainer tests run too.
ASAN_BUILD_DIR ?= build-asan
ASAN_BASE := halt_on_error=1:detect_leaks=1:strict_string_checks=1
SANITIZER_ENV := LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitizers/lsan.supp:print_suppressions=0 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
ASAN_EXCLUDE := LossFallsClearlyOnTheSyntheticCorpus

.PHONY: all deps configure build test python-deps test-python test-gpu test-emu test-asan fuzz gpu-check gpu-bundle run bench format format-check clean

all: build

deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "srkit deps: installing$$missing"; \
	  if [ "$$(id -u)" != 0 ] && ! command -v sudo >/dev/null; then \
	    echo "srkit deps: need root (or sudo) to apt-get install:$$missing" >&2; exit 1; fi; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

$(BUILD_DIR)/CMakeCache.txt:
	$(MAKE) deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: $(BUILD_DIR)/CMakeCache.txt

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 900

# The Python package (python/, docs/python.md): a virtual environment in the
# build folder with torch, numpy and pytest from PyPI, the package installed
# with the build's libsrkit_capi.so, and its tests against the build's sr-train.
PYTHON ?= python3
PY_VENV := $(BUILD_DIR)/python-venv
# python-deps (the environment and its requirements) needs no build, so CI
# downloads torch while the code compiles.
python-deps:
	[ -x $(PY_VENV)/bin/python ] || $(PYTHON) -m venv $(PY_VENV)
	$(PY_VENV)/bin/pip install -q -r python/requirements-test.txt

test-python: build python-deps
	SRKIT_LIBRARY=$(CURDIR)/$(BUILD_DIR)/lib/libsrkit_capi.so $(PY_VENV)/bin/pip install -q ./python
	cd python/tests && SRKIT_SR_TRAIN=$(CURDIR)/$(BUILD_DIR)/bin/sr-train \
	  $(CURDIR)/$(PY_VENV)/bin/python -m pytest -q -p no:cacheprovider .

# GPU tests only (they skip with a message when no device is present).
test-gpu: build
	cd $(BUILD_DIR) && ctest --output-on-failure -L gpu

# The CUDA sources compiled as C++ and run on CPU threads: every GPU test and
# the emulation's self-test. The emulated device is always present, so a
# skipped test fails the target.
test-emu: deps
	cmake -S . -B $(EMU_BUILD_DIR) -DCMAKE_BUILD_TYPE=Release -DSRKIT_CUDA_EMU=ON \
	  $(if $(HIP_CPU_DIR),-DSRKIT_HIP_CPU_DIR=$(abspath $(HIP_CPU_DIR))) $(CMAKE_FLAGS)
	cmake --build $(EMU_BUILD_DIR) -j $(JOBS) --target srkit_gpu_tests
	cd $(EMU_BUILD_DIR) && ctest --output-on-failure -j $(JOBS) -L 'gpu|emu' --timeout 900 \
	  > ctest-emu.log 2>&1; rc=$$?; cat ctest-emu.log; [ $$rc = 0 ] || exit $$rc; \
	  if grep -qE '\*\*\*Skipped|\(Skipped\)' ctest-emu.log; then \
	    echo "test-emu: tests skipped in the emulation, where every GPU test must run" >&2; exit 1; fi

# mold (when installed; make deps installs it) links the ~80 sanitized
# programs in a fraction of GNU ld's time. Expanded when the recipe runs, after deps.
ASAN_LINKER = $(shell command -v mold >/dev/null 2>&1 && echo -fuse-ld=mold)

test-asan: deps
	cmake -S . -B $(ASAN_BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSRKIT_CUDA=OFF \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DSRKIT_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
	  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -Wno-pass-failed" \
	  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined $(ASAN_LINKER)"
	$(SANITIZER_ENV) ASAN_OPTIONS=$(ASAN_BASE) cmake --build $(ASAN_BUILD_DIR) -j $(JOBS)
	cd $(ASAN_BUILD_DIR) && $(SANITIZER_ENV) ASAN_OPTIONS=$(ASAN_BASE) \
	  ctest --output-on-failure -j $(JOBS) -L cpu -E '$(ASAN_EXCLUDE)' --timeout 900
	cd $(ASAN_BUILD_DIR) && $(SANITIZER_ENV) ASAN_OPTIONS=$(ASAN_BASE):fast_unwind_on_malloc=0 \
	  ctest --output-on-failure -j $(JOBS) -L mpi --timeout 900

fuzz: deps
	cmake -S . -B $(FUZZ_BUILD_DIR) -DSRKIT_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
	cmake --build $(FUZZ_BUILD_DIR) -j $(JOBS)
	bash tests/fuzz/run_fuzzers.sh $(FUZZ_BUILD_DIR) $(FUZZ_SECONDS)

# On a GPU machine: CUDA build, GPU tests, CUDA kernel benchmark, a table last.
gpu-check:
	bash bench/gpu/run_gpu_checks.sh

# On the build machine: the GPU checks as a portable folder (gpu-bundle/, at
# most 64 MiB) for a GPU node without srkit's build dependencies; there:
# bash gpu-bundle/run.sh (bench/gpu/README.md).
gpu-bundle: deps
	bash bench/gpu/make_bundle.sh

# The main job on a built-in default: every precision strategy trains the same
# small GPT on the built-in synthetic corpus with the same seed; the table shows
# vanilla bf16 falling behind while bf16-sr tracks fp32 master weights.
RUN_FLAGS ?= --model tiny --batch 8 --seq-len 64 --steps 500 --lr 1e-3 --eval-interval 100
run: build
	./$(BUILD_DIR)/bin/sr-train --compare fp32,amp,mixed,bf16,bf16-sr,bf16-kahan,bf16-rem16 \
	  $(RUN_FLAGS) --out runs/demo

bench: build
	for b in ./$(BUILD_DIR)/bin/bench_*; do $$b --benchmark_min_time=0.2; done

format:
	git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' | xargs clang-format -i

format-check:
	git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' | xargs clang-format --dry-run --Werror

clean:
	rm -rf $(BUILD_DIR) $(EMU_BUILD_DIR) $(FUZZ_BUILD_DIR) $(ASAN_BUILD_DIR)
