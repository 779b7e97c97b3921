# The two set-up commands (README): `make run` and `make test`. Both build ./.venv.
# `make run` installs only what a run needs; `make test` adds the test tools (pytest,
# mypy, ruff, import-linter), scikit-learn (the parameter build) and Ray.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA ?= ../shared/data
MODEL ?= auto
BENCH ?= minilongbench
# Parallel test workers: one per core (pytest-xdist); 0 runs in one process.
JOBS ?= auto

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.run-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[report]'
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test,build,report,bamboo,ray]'
	touch $@ $(VENV)/.run-installed

.PHONY: install run test test-all test-servers
install: $(VENV)/.test-installed

# The main job: an evaluation on the embedded DuckDB store. MODEL=auto uses a real API
# when OPENAI_API_KEY / ANTHROPIC_API_KEY is set, else the built-in simulator.
run: $(VENV)/.run-installed
	ASYNCBENCH_DATA_DIR=$(DATA) $(BIN)/asyncbench run $(BENCH) --model $(MODEL)

# The everyday suite: everything but the tests marked `slow` (each over ~10 s: real
# Ray clusters, full-benchmark runs, load tests), in parallel. CI runs them all.
test: $(VENV)/.test-installed
	$(BIN)/python -m pytest -q -n $(JOBS) --dist loadgroup -m 'not slow'

# Everything, the static gates (mypy, ruff, import-linter) included: what CI runs.
test-all: $(VENV)/.test-installed
	$(BIN)/python -m pytest -q -n $(JOBS) --dist loadgroup

# Real servers in the loop (README): build llama.cpp's llama-server from its PyPI sdist once
# (cached outside the checkout, 588 CPU-s measured with /usr/bin/time -v, ~5 min on 2 idle cores,
# 29 min beside other jobs; skipped when built), then
# run the tests that talk to it, slow ones included.
test-servers: $(VENV)/.test-installed
	$(BIN)/python tests/servers/llama_build.py
	$(BIN)/python -m pytest -q tests/test_llama_server.py
