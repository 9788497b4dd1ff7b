# Every target creates what it needs itself (venv from requirements.txt), so the README's
# two commands work on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements.sha256
# Every podman call (scripts, Ansible's podman connection, Molecule) uses the repo's containers.conf
# (runtime runc, default ulimits), written by scripts/podman-setup.sh.
export CONTAINERS_CONF := $(CURDIR)/.podman/containers.conf

.PHONY: venv demo test molecule bench-engine clean podman local-host dist contract crosscheck

venv: $(STAMP)

$(STAMP): requirements.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	sha256sum requirements.txt > $(STAMP)

# Main job: the seeds' story on the local container (deploy 3-step -> gate passes; deploy 1-step
# -> gate fails -> rollback; gate again -> passes), ending with a table of the three gate runs.
demo: venv local-host dist
	$(PY) scripts/demo.py

# The emulator wheel the local inventory installs into the container's service venv.
EMULATOR_WHEEL := dist/sglang_emulator-0.5.23-py3-none-any.whl
dist: $(EMULATOR_WHEEL)
$(EMULATOR_WHEEL): pyproject.toml $(wildcard bench/emulator/*.py) $(STAMP)
	rm -f dist/sglang_emulator-*.whl
	$(PY) -m pip wheel --quiet --no-deps --wheel-dir dist .

# Host packages (podman, runc, mmdebstrap...), containers.conf and the Debian 12 systemd image.
podman:
	scripts/podman-setup.sh

# The embedded default host: container sglang-local (Ansible host ct-local), systemd as PID 1,
# port 30000 on 127.0.0.1:$${LOCAL_HOST_PORT:-30000}. Cheap when it already runs.
local-host:
	scripts/local-host.sh up

# The whole test suite: pytest, then every Molecule scenario. pytest's exit code 5 (nothing
# collected) is a failure here too.
test: venv local-host dist
	$(PY) -m pytest -p no:cacheprovider tests && scripts/molecule-all.sh

# Every Molecule scenario (molecule/*/), each in a systemd container of its own, from the image
# scripts/podman-setup.sh builds; the time each took and a summary at the end.
# `make molecule SCENARIOS="sglang nvidia_gpu"` runs only those.
molecule: venv podman dist
	scripts/molecule-all.sh $(SCENARIOS)

# Contract tier alone: rendered units and the emulator against SGLang's own parser (its venv is
# built and cached by scripts/contract-venv.sh). The version-bump drill, before any host:
#   make contract SGLANG_VERSION=0.5.24
contract: venv
	SGLANG_VERSION=$(SGLANG_VERSION) $(PY) -m pytest -p no:cacheprovider tests/test_contract.py

# Independent client cross-check: SGLang's own sglang.benchmark.serving and `bench run` against one
# emulator (3-step), C = 1 and 4, side by side with the emulator's exact counters (out/crosscheck/).
crosscheck: venv
	$(PY) -m bench.crosscheck

# Benchmark of the benchmark: engine against the emulator at C = 1, 16, 64, 256.
bench-engine: venv
	$(PY) -m bench selfcheck

clean:
	rm -rf $(VENV) dist build *.egg-info
