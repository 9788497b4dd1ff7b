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
# Python writes its bytecode here even where the environment says not to (PYTHONDONTWRITEBYTECODE;
# __pycache__ is git-ignored): without it every pytest worker rewrites every test module's asserts
# (collection 4.7 s of CPU instead of 1.5) and every ansible-playbook, bench or emulator process
# compiles the repository's modules again.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: venv demo test check check-long molecule molecule-changed bench-engine clean podman local-host dist contract \
	crosscheck chromium promtool prometheus

# The venv: the pinned tooling (requirements.txt) and the repository's own project (pyproject.toml)
# installed editable, which gives the engine its one import path, `import sglang_perf`.
venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps --editable .
	sha256sum requirements.txt pyproject.toml > $(STAMP)

# Main job: the gate's story on the local container (deploy 3-step -> gate passes; deploy 1-step
# -> gate fails -> rollback; gate again -> passes), ending with a table of the three gate runs.
demo: venv local-host dist
	$(PY) scripts/demo.py

# The emulator wheel the local inventory installs into the container's service venv, and a second
# release of the same code as version 0.5.24 (the release-rollback test bumps to it). The vLLM side
# (python -m emulator.vllm) is the same package released as vllm-emulator 0.33.0, so an
# installed copy reports vLLM's version (server.py reads its own distribution's metadata). Each is
# built from a temporary directory holding only emulator/ and its own pyproject.toml.
EMULATOR_VERSION := 0.5.23
EMULATOR_WHEEL := dist/sglang_emulator-$(EMULATOR_VERSION)-py3-none-any.whl
EMULATOR_NEXT := 0.5.24
EMULATOR_WHEEL_NEXT := dist/sglang_emulator-$(EMULATOR_NEXT)-py3-none-any.whl
VLLM_EMULATOR_VERSION := 0.33.0
VLLM_EMULATOR_WHEEL := dist/vllm_emulator-$(VLLM_EMULATOR_VERSION)-py3-none-any.whl
EMULATOR_PYPROJECT := emulator/pyproject.toml
EMULATOR_SOURCES := $(EMULATOR_PYPROJECT) $(wildcard emulator/*.py emulator/vllm/*.py) $(STAMP)
dist: $(EMULATOR_WHEEL) $(EMULATOR_WHEEL_NEXT) $(VLLM_EMULATOR_WHEEL)
# $(call emulator_release,NAME,VERSION): the emulator's sources built as that distribution/version.
define emulator_release
	d="$$(mktemp -d)" && mkdir -p "$$d/emulator/vllm" \
	  && cp emulator/*.py "$$d/emulator/" && cp emulator/vllm/*.py "$$d/emulator/vllm/" \
	  && sed -e 's/^version = .*/version = "$(2)"/' -e 's/^name = .*/name = "$(1)"/' $(EMULATOR_PYPROJECT) \
	    > "$$d/pyproject.toml" \
	  && $(PY) -m pip wheel --quiet --no-deps --wheel-dir dist "$$d"; rc=$$?; rm -rf "$$d"; exit $$rc
endef
$(EMULATOR_WHEEL): $(EMULATOR_SOURCES)
	rm -f $@
	$(call emulator_release,sglang-emulator,$(EMULATOR_VERSION))
$(EMULATOR_WHEEL_NEXT): $(EMULATOR_SOURCES)
	rm -f $@
	$(call emulator_release,sglang-emulator,$(EMULATOR_NEXT))
$(VLLM_EMULATOR_WHEEL): $(EMULATOR_SOURCES)
	rm -f $@
	$(call emulator_release,vllm-emulator,$(VLLM_EMULATOR_VERSION))

# Host packages (podman, runc, mmdebstrap...), containers.conf and the Debian 12 systemd image.
podman:
	scripts/podman-setup.sh

# The headless browser tests/test_report_html.py opens the history page in: Debian's chromium
# (apt-get as root, once). CHROMIUM names another Chromium binary on PATH instead (the test uses it).
CHROMIUM ?= chromium
export CHROMIUM
chromium:
	@command -v $(CHROMIUM) >/dev/null || scripts/host-packages.sh chromium

# Prometheus' promtool for tests/test_monitoring.py (the alert rules in monitoring/): from Debian's
# prometheus package, unpacked into .tools/bin/ (git-ignored), nothing installed on the system.
promtool:
	@scripts/promtool.sh

# Prometheus and node_exporter themselves for tests/test_watch_prometheus.py (the container tier:
# the alerts and the dashboard's queries on the watch's textfile and the engine's /metrics,
# scraped for real), from Debian's packages the same way, into .tools/bin/.
prometheus:
	@scripts/prometheus.sh

# The embedded default host: container sglang-local (Ansible host ct-local), systemd as PID 1,
# port 30000 on 127.0.0.1:30000; and the container tier's three more (sglang-local-2 to -4: the
# test files run side by side). Cheap when they already run.
local-host:
	scripts/local-host.sh up-all

# The whole test suite (scripts/suite.py): set-up, pytest (every tier, --no-skips, in xdist
# workers), every Molecule scenario (several at a time); phase times at the end. pytest's exit
# code 5 (nothing collected) is a failure here too. PYTEST_JOBS / MOLECULE_JOBS override the jobs.
test:
	$(PYTHON) scripts/suite.py

# The inner loop: lint (inside pytest: ruff, yamllint, ansible-lint, the workflow's schema, the
# pre-commit hooks) and every test that needs neither the local container nor the contract venv
# (headless Chromium for the history page, make chromium; promtool for the alert rules, make
# promtool; the emulator's wheels, make dist, which the local inventory names and
# playbooks/render.yml checks), but the `long` ones: whole commands against emulators in real
# time, 11 s or more each (tests/conftest.py LONG_TESTS), which make test runs and
# `make check-long` runs alone. Their times: docs/testing.md. 8 workers on 2 cores: many of
# these tests wait on an emulator's real-time tokens.
CHECK_JOBS ?= 8
CHECK_TIER := not container and not contract
check: venv chromium promtool dist
	$(PY) -m pytest -p no:cacheprovider -n $(CHECK_JOBS) --no-skips -m "$(CHECK_TIER) and not long" tests

check-long: venv chromium promtool dist
	$(PY) -m pytest -p no:cacheprovider -n $(CHECK_JOBS) --no-skips -m "$(CHECK_TIER) and long" tests

# Every Molecule scenario (molecule/*/), each in systemd containers of its own, from the image
# scripts/podman-setup.sh builds, MOLECULE_JOBS at a time; the time each took and a summary.
# `make molecule SCENARIOS="sglang nvidia_gpu"` runs only those.
molecule: venv podman dist
	$(PY) scripts/molecule_run.py $(SCENARIOS)

# Only the scenarios that exercise what changed since BASE (default HEAD: uncommitted and
# untracked files), by the one mapping molecule/scenarios.yml.  make molecule-changed BASE=main~3
BASE ?= HEAD
molecule-changed: venv
	@scenarios="$$($(PY) scripts/molecule_changed.py --base '$(BASE)')" || exit 2; \
	if [ -z "$$scenarios" ]; then echo "molecule-changed: nothing to run"; \
	else $(MAKE) --no-print-directory molecule SCENARIOS="$$(echo $$scenarios)"; fi

# Contract tier alone: rendered units and the emulators against SGLang's and vLLM's own parsers
# (their venvs are built and cached by scripts/contract-venv.sh and scripts/contract-venv-vllm.sh).
# The version-bump drill, before any host:
#   make contract SGLANG_VERSION=0.5.24      make contract VLLM_VERSION=0.33.1
contract: venv dist
	SGLANG_VERSION=$(SGLANG_VERSION) VLLM_VERSION=$(VLLM_VERSION) $(PY) -m pytest -p no:cacheprovider \
	    tests/test_contract.py tests/test_contract_vllm.py

# Independent client cross-check: SGLang's own sglang.benchmark.serving and `bench run` against one
# emulator (3-step), C = 1 and 4, side by side with the emulator's exact counters (out/crosscheck/).
crosscheck: venv
	$(PY) -m bench.crosscheck

# Benchmark of the benchmark: engine against the emulator at C = 1, 16, 64, 256.
bench-engine: venv
	$(PY) -m bench selfcheck

clean:
	rm -rf $(VENV) dist build *.egg-info
