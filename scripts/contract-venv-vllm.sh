#!/usr/bin/env bash
# The contract tier's vLLM venv: vLLM's own `vllm serve` argument parser, EngineArgs.from_cli_args
# and create_engine_config (on vLLM's CPU platform) on a CPU machine.
#
#   scripts/contract-venv-vllm.sh                 build (or reuse) it; prints VLLM_CONTRACT_PYTHON=<path>
#   VLLM_VERSION=0.33.1 scripts/contract-venv-vllm.sh    the version-bump drill: that release instead
#
# vLLM is installed with --no-deps beside exactly what those import (requirements-contract-vllm.txt,
# also --no-deps: CPU torch 2.13.0 from this machine's disk instead of the release's CUDA 2.14.0,
# no torchvision, no triton, none of the CUDA kernels packages). tests/contract/vllm_parse.py stubs
# torchvision. Cached under ~/.cache/sglang-deploy/ keyed on the requirements and the version
# (~2.2 GB: torch 0.75, vllm 0.88).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${SGLANG_DEPLOY_CACHE:-$HOME/.cache/sglang-deploy}"
PYTHON="${CONTRACT_PYTHON_BASE:-python3.11}"
REQ="$ROOT/requirements-contract-vllm.txt"
default_version="$(sed -n 's/^sglang_vllm_version: *"\{0,1\}\([0-9.a-z]*\)"\{0,1\}.*/\1/p' "$ROOT/roles/sglang/defaults/main.yml")"
VERSION="${VLLM_VERSION:-$default_version}"

log() { printf '[contract-venv-vllm] %s\n' "$*" >&2; }
die() { printf '[contract-venv-vllm] ERROR: %s\n' "$*" >&2; exit 1; }

case "$VERSION" in ''|*[!0-9a-z.]*) die "the version must look like 0.33.0 (got '$VERSION')" ;; esac
command -v "$PYTHON" >/dev/null || PYTHON=python3
"$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))' \
    || die "$PYTHON is older than 3.11 (vLLM $VERSION requires >= 3.11); set CONTRACT_PYTHON_BASE"

key="$( (cat "$REQ"; echo "vllm $VERSION"; "$PYTHON" -V) | sha256sum | cut -c1-12)"
VENV="$CACHE/contract-vllm-$key"
LOCK=contract-vllm.lock PRUNE='contract-vllm-*'
answer() { echo "VLLM_CONTRACT_PYTHON=$VENV/bin/python"; }
# shellcheck source=scripts/contract-venv-lib.sh
. "$ROOT/scripts/contract-venv-lib.sh"
venv_begin
log "building $VENV (vllm $VERSION --no-deps, $(basename "$REQ") --no-deps)"
PIP=("$VENV/bin/pip" --quiet --disable-pip-version-check)
"${PIP[@]}" install --no-deps -r "$REQ" || die "pip install -r $REQ failed"
"${PIP[@]}" install --no-deps "vllm==$VERSION" || die "pip install vllm==$VERSION failed (is it on PyPI?)"
for mod in torchvision triton; do
    if "$VENV/bin/python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$mod') is None)"; then
        die "$mod got into $VENV: check $(basename "$REQ")"
    fi
done
"$VENV/bin/python" -c 'import torch; assert not torch.cuda.is_available(); print("torch", torch.__version__)' >&2
venv_end
