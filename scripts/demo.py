#!/usr/bin/env python3
"""The main job: the seeds' story, played by Ansible on the local container (the embedded default
inventory), with the emulated engine standing in for the 2 x A6000 host.

  1. ansible-playbook deploy.yml                          3-step NEXTN -> gate passes, recorded
  2. ansible-playbook deploy.yml -e sglang_profile=nextn_1step
                                                          the seeds' hand launch -> gate fails
                                                          -> last-known-good 3-step unit restored
  3. ansible-playbook playbooks/bench.yml                 the restored server passes again

The host starts fresh (scripts/local-host.sh down + up), so every run tells the same story.
Ends with a table of the three gate runs, read from the host's gate history and bench report.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
HOST = "ct-local"


def run(title, cmd, expect):
    print("\n" + "=" * 100 + "\n== %s\n== $ %s\n" % (title, " ".join(cmd)) + "=" * 100, flush=True)
    t0 = time.monotonic()
    rc = subprocess.call(cmd, cwd=str(ROOT))
    took = time.monotonic() - t0
    print("== exit status %d (%s expected), %.0f s" % (rc, "0" if expect else "non-zero", took),
          flush=True)
    if (rc == 0) != expect:
        raise SystemExit("demo: step '%s' ended with %d, which is not what the story expects" % (
            title, rc))
    return took


def history():
    """The host's gate history, read with Ansible (no podman specifics)."""
    out = subprocess.run([str(BIN / "ansible"), HOST, "-m", "ansible.builtin.slurp", "-a",
                          "src=/var/lib/sglang/gate-history.jsonl", "-o"],
                         cwd=str(ROOT), capture_output=True, text=True, check=True).stdout
    import base64
    content = json.loads(out.split("=>", 1)[1])["content"]
    return [json.loads(line) for line in base64.b64decode(content).decode().splitlines() if line]


def main():
    subprocess.check_call(["scripts/local-host.sh", "down"], cwd=str(ROOT))
    subprocess.check_call(["scripts/local-host.sh", "up"], cwd=str(ROOT))
    playbook = str(BIN / "ansible-playbook")
    report_dir = tempfile.mkdtemp(prefix="sglang-bench-")
    times = [
        run("1. deploy the 3-step NEXTN profile (expect: gate passes)", [playbook, "deploy.yml"],
            True),
        run("2. deploy the seeds' 1-step hand launch (expect: gate fails, rollback to 3-step)",
            [playbook, "deploy.yml", "-e", "sglang_profile=nextn_1step"], False),
        run("3. gate the restored server (expect: passes on the 3-step unit)",
            [playbook, "playbooks/bench.yml", "-e", "bench_report_dir=" + report_dir], True),
    ]
    runs = history()[-2:]
    bench = json.loads(Path(report_dir, HOST + ".json").read_text())
    runs.append(bench)
    print("\nThe three gate runs on %s (thresholds: 3-step decode median >= 45 tok/s and accept "
          "length >= 2.8; 1-step decode >= 45, accept >= 1.6):" % HOST)
    print("%-3s %-12s %10s %10s %7s %7s  %-8s %s" % ("#", "profile", "tok/s med", "tok/s min",
                                                   "accept", "errors", "gate", "then"))
    for i, r in enumerate(runs, 1):
        d = r.get("decode_tok_s") or {}
        print("%-3d %-12s %10.1f %10.1f %7.2f %7s  %-8s %s" % (
            i, r["profile"], d.get("median") or 0, d.get("min") or 0, r.get("accept_len") or 0,
            r.get("errors"), "passed" if r["passed"] else "FAILED",
            r.get("action", "no change (bench only)")))
    print("\nsteps took %s s" % ", ".join("%.0f" % t for t in times))
    ok = [r["passed"] for r in runs] == [True, False, True] and runs[2]["profile"] == "nextn_3step"
    print("demo %s" % ("as expected: the slow deploy was caught and rolled back" if ok
                       else "NOT as expected"))
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("ANSIBLE_NOCOLOR", "1")
    sys.exit(main())
