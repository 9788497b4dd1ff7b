"""The repository's root: bench's default inputs and outputs are paths in it (the production
inventory, out/, history/)."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The production inventory: the roofline's size figures when no host is named (bench/sizes.py).
PRODUCTION = ROOT / "inventories" / "production" / "hosts.yml"
# bench run's raw per-request records, one file a run (bench run --raw names another).
RUNS_DIR = ROOT / "out" / "runs"
