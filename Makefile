# Every target creates what it needs itself (venv from requirements.txt), so the README's
# two commands work on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements.sha256

.PHONY: venv demo test test-unit lint bench-engine clean

venv: $(STAMP)

$(STAMP): requirements.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	sha256sum requirements.txt > $(STAMP)

# Main job (until the deploy exists): start the emulator locally and gate it with the bench CLI.
demo: venv
	$(PY) scripts/demo.py

# The whole test suite. pytest's exit code 5 (nothing collected) is a failure here too.
test: venv
	$(PY) -m pytest -p no:cacheprovider tests

# Benchmark of the benchmark: engine against the emulator at C = 1, 16, 64, 256.
bench-engine: venv
	$(PY) -m bench selfcheck

clean:
	rm -rf $(VENV)
