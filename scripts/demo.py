#!/usr/bin/env python3
"""Main job until the deploy exists: the seeds' story against a locally started emulator.

Starts the emulated SGLang server with the 3-step NEXTN profile's command line and gates it with
the bench CLI (decode median >= 45 tok/s, accept length >= 2.8): it passes. Then the seeds' 1-step
hand launch: the same gate fails with the measured figures. Ends with a summary table.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.launch import EmulatorProcess  # noqa: E402
from bench.profiles import MODEL_ARGS, PROFILE_ARGS  # noqa: E402

GATE = ["--min-tok-s", "45", "--min-accept-len", "2.8"]
RUN = ["--concurrency", "1", "--requests", "4", "--warmup", "2", "--max-tokens", "512"]


def gate(profile):
    print("\n=== %s: %s" % (profile, " ".join(PROFILE_ARGS[profile]) or "(no speculation)"),
          flush=True)
    with tempfile.TemporaryFile() as log, tempfile.NamedTemporaryFile(suffix=".json") as out:
        emu = EmulatorProcess(MODEL_ARGS + PROFILE_ARGS[profile], log)
        try:
            emu.wait_ready("/health_generate", timeout=120)
            rc = subprocess.call([sys.executable, "-m", "bench", "run", "--url", emu.url, *RUN,
                                  *GATE, "--json", out.name], cwd=str(ROOT))
        finally:
            emu.stop()
        result = json.loads(Path(out.name).read_text() or "{}") if rc in (0, 1) else {}
    return profile, rc, result


def main():
    runs = [gate("nextn_3step"), gate("nextn_1step")]
    print("\nsummary (gate: decode median >= 45 tok/s, accept length >= 2.8)")
    print("%-12s %10s %10s %10s  %s" % ("profile", "tok/s med", "accept", "agg tok/s", "gate"))
    for profile, rc, r in runs:
        print("%-12s %10.1f %10.2f %10.1f  %s" % (
            profile, r["decode_tok_s"]["median"], r["accept_len"] or 0, r["aggregate_tok_s"],
            {0: "passed", 1: "FAILED (as expected for 1-step)"}.get(rc, "could not measure")))
    ok = [rc for _, rc, _ in runs] == [0, 1]
    print("\ndemo %s" % ("as expected: 3-step passes, 1-step is caught" if ok else "UNEXPECTED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
