#!/usr/bin/env bash
# The contract tier's venv: SGLang's own argument parser, resolution pipeline and benchmark client
# on a CPU machine.
#
#   scripts/contract-venv.sh            build (or reuse) it; prints CONTRACT_PYTHON=<path>
#   SGLANG_VERSION=0.5.24 scripts/contract-venv.sh    the version-bump drill: that release instead
#
# SGLang is installed with --no-deps beside exactly what parsing, ServerArgs.resolve_once
# (tests/contract/sglang_resolve.py) and sglang.benchmark.serving import (requirements-contract.txt:
# CPU torch 2.13.0, transformers, dill, openai, ...; never torchvision, which would pull CUDA
# torch). Triton is SGLang's own stub (tests/contract/sglang_parse.py). The older
# release the flag table is checked against (SGLANG_OLD_VERSION, default 0.5.19: it parses both
# mamba spellings) goes --no-deps with requirements-contract-old.txt into <venv>/old/<version>,
# used via PYTHONPATH; the 0.5.13 wheel (the last with only --mamba-scheduler-strategy, which needs
# a real torchvision to import) is downloaded into <venv>/wheels for a source check.
# Cached under ~/.cache/sglang-deploy/ keyed on the requirements and the versions (~2 GB).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${SGLANG_DEPLOY_CACHE:-$HOME/.cache/sglang-deploy}"
PYTHON="${CONTRACT_PYTHON_BASE:-python3.11}"
REQ="$ROOT/requirements-contract.txt"
default_version="$(sed -n 's/^sglang_version: *"\{0,1\}\([0-9.a-z]*\)"\{0,1\}.*/\1/p' "$ROOT/roles/sglang/defaults/main.yml")"
VERSION="${SGLANG_VERSION:-$default_version}"
OLD="${SGLANG_OLD_VERSION:-0.5.19}"
SOURCE_ONLY="0.5.13"
REQ_OLD="$ROOT/requirements-contract-old.txt"

log() { printf '[contract-venv] %s\n' "$*" >&2; }
die() { printf '[contract-venv] ERROR: %s\n' "$*" >&2; exit 1; }

case "$VERSION$OLD" in *[!0-9a-z.]*) die "versions must look like 0.5.23 (got '$VERSION', '$OLD')" ;; esac
command -v "$PYTHON" >/dev/null || PYTHON=python3
"$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))' \
    || die "$PYTHON is older than 3.11 (SGLang $VERSION requires >= 3.11); set CONTRACT_PYTHON_BASE"

key="$( (cat "$REQ" "$REQ_OLD"; echo "$VERSION $OLD $SOURCE_ONLY"; "$PYTHON" -V) | sha256sum | cut -c1-12)"
VENV="$CACHE/contract-$key"
LOCK=contract.lock PRUNE='contract-*' PRUNE_KEEP='contract-vllm-*'
answer() {
    echo "CONTRACT_PYTHON=$VENV/bin/python"
    echo "CONTRACT_OLD_PATH=$VENV/old/$OLD"
    echo "CONTRACT_WHEELS=$VENV/wheels"
}
# shellcheck source=scripts/contract-venv-lib.sh
. "$ROOT/scripts/contract-venv-lib.sh"
venv_begin
log "building $VENV (sglang $VERSION --no-deps, old $OLD, $(basename "$REQ"))"
PIP=("$VENV/bin/pip" --quiet --disable-pip-version-check)
"${PIP[@]}" install -r "$REQ" || die "pip install -r $REQ failed"
"${PIP[@]}" install --no-deps "sglang==$VERSION" || die "pip install sglang==$VERSION failed (is it on PyPI?)"
"${PIP[@]}" install --no-deps --target "$VENV/old/$OLD" "sglang==$OLD" -r "$REQ_OLD" \
    || die "pip install sglang==$OLD -r $(basename "$REQ_OLD") failed"
"${PIP[@]}" download --no-deps --dest "$VENV/wheels" "sglang==$SOURCE_ONLY" \
    || die "pip download sglang==$SOURCE_ONLY failed"
if "$VENV/bin/python" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torchvision") is None)'; then
    die "torchvision got into $VENV (it pulls CUDA torch): check requirements-contract.txt"
fi
"$VENV/bin/python" -c 'import torch; assert not torch.cuda.is_available(); print("torch", torch.__version__)' >&2
venv_end
