"""The repository's root: bench's default inputs and outputs are paths in it (the roles' defaults,
the production inventory, out/, history/)."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The sglang role's defaults: its profiles and version, the model's size figures.
SGLANG_DEFAULTS = ROOT / "roles" / "sglang" / "defaults" / "main.yml"
# bench run's raw per-request records, one file a run (bench run --raw names another).
RUNS_DIR = ROOT / "out" / "runs"
