# Two entry points do everything on a fresh Debian 12 machine:
#   make test   installs what is missing, builds, runs ctest and pytest
#   make demo   installs what is missing, builds, runs the DLRM example against eager
# Re-runs are incremental: packages are installed once, the build is redone only when sources change.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BUILD_DIR := build/dev
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

APT_PACKAGES := cmake ninja-build g++ libzip-dev zipcmp zipmerge ziptool nlohmann-json3-dev libgtest-dev
PY_PACKAGES := torch pytest numpy pybind11 "scikit-build-core>=0.10" ninja
# Optional: when they install, the Hugging Face, torchvision and timm model tests run; otherwise they skip.
OPTIONAL_PY_PACKAGES := transformers torchvision timm

APT_STAMP := build/.apt-installed
VENV_STAMP := $(VENV)/.installed
BUILD_STAMP := $(BUILD_DIR)/.installed
SOURCES := $(shell find csrc -name '*.cpp' -o -name '*.h' -o -name '*.inc' 2>/dev/null) \
           $(wildcard tests/cpp/*.cpp) CMakeLists.txt pyproject.toml

.PHONY: all deps build test test-cpp test-py demo lint wheel clean

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
	$(PYTHON) -m venv $(VENV)
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
	  -Cbuild-dir=$(BUILD_DIR) -Ccmake.define.LUMINAL_BUILD_TESTS=ON -Ccmake.build-type=Release
	@touch $@

build: $(BUILD_STAMP)

test-cpp: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j2

test-py: build
	$(PY) -m pytest -q tests

test: test-cpp test-py

demo: build
	$(PY) examples/dlrm/dlrm_example.py

lint: $(VENV_STAMP)
	$(PY) -m pip install -q ruff
	$(PY) -m ruff check python tests examples benchmarks
	$(PY) -m ruff format --check python tests examples benchmarks

wheel: deps
	$(PY) -m pip wheel --no-build-isolation --no-deps . -w dist

clean:
	rm -rf build dist
