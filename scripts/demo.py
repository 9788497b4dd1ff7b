#!/usr/bin/env python3
"""The main job: the gate's story, played by Ansible on the local container (the embedded default
inventory), with the emulated engine standing in for the 2 x A6000 host.

  1. ansible-playbook deploy.yml                          3-step NEXTN -> gate passes, recorded
  2. ansible-playbook deploy.yml -e sglang_profile=nextn_1step
                                                          the original hand launch -> gate fails
                                                          -> last-known-good 3-step unit restored
  3. ansible-playbook deploy.yml -e @VARS -e sglang_profile=nextn_3step_hermes
                                                          the 3-step profile with a tool-call
                                                          parser of another model family (hermes:
                                                          JSON inside <tool_call>, not Qwen3.6's
                                                          <function=...> markup): as fast, but
                                                          the gate's tool_calls check fails ->
                                                          last-known-good restored
  4. ansible-playbook playbooks/bench.yml                 the restored server passes again

The host starts fresh (scripts/local-host.sh down + up), so every run tells the same story.
Ends with each gate run's cases (figures, per-position acceptance, verdict) and its time to
verdict, read from the host's gate history and the bench report.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from sglang_perf.judge import verdict

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


# The profile of step 3: the recorded one with SGLang's hermes tool-call parser (a real choice
# of 0.5.23; docs/quality.md). sglang_profiles given with -e replaces the role's whole, so the
# file holds the role's profiles and this one.
HERMES = "nextn_3step_hermes"


def hermes_vars(directory):
    """An extra-vars file: the role's profiles plus HERMES (base nextn_3step: its thresholds)."""
    defaults = ROOT / "roles" / "sglang" / "defaults" / "main.yml"
    profiles = yaml.safe_load(defaults.read_text())["sglang_profiles"]
    profiles[HERMES] = {"base": "nextn_3step", "tool_call_parser": "hermes"}
    path = Path(directory) / "hermes.json"
    path.write_text(json.dumps({"sglang_profiles": profiles}))
    return str(path)


def main():
    subprocess.check_call(["scripts/local-host.sh", "down"], cwd=str(ROOT))
    subprocess.check_call(["scripts/local-host.sh", "up"], cwd=str(ROOT))
    playbook = str(BIN / "ansible-playbook")
    report_dir = tempfile.mkdtemp(prefix="sglang-bench-")
    times = [
        run("1. deploy the 3-step NEXTN profile (expect: gate passes)", [playbook, "deploy.yml"],
            True),
        run("2. deploy the original 1-step hand launch (expect: gate fails, rollback to 3-step)",
            [playbook, "deploy.yml", "-e", "sglang_profile=nextn_1step"], False),
        run("3. deploy the 3-step profile with another family's tool-call parser (expect: as fast, "
            "the tool_calls check fails, rollback to 3-step)",
            [playbook, "deploy.yml", "-e", "@" + hermes_vars(report_dir), "-e", "sglang_profile=" + HERMES],
            False),
        run("4. gate the restored server (expect: passes on the 3-step unit)",
            [playbook, "playbooks/bench.yml", "-e", "bench_report_dir=" + report_dir], True),
    ]
    runs = history()[-3:]
    bench = json.loads(Path(report_dir, HOST + ".json").read_text())
    runs.append(bench)
    print("\nThe four gate runs on %s, each the whole gate plan (coding at C=1, a 32K-token long "
          "context, C=4; then what the server says: known answers, tool calls and reasoning as "
          "clients parse them, agreement with the last-known-good, and, when the engine, release, "
          "profile or weights changed, the answers again under a 60%%-full KV cache), every case "
          "judged on its own with the profile's thresholds, on 95%% intervals [lower, upper]; 'in' "
          "is each case's time to verdict (the first case's with the warmup):" % HOST)
    tables = [[verdict.TABLE_HEAD] + verdict.table_rows(r) for r in runs]
    widths = [max(len(str(row[k])) for t in tables for row in t) for k in range(len(verdict.TABLE_HEAD))]
    for i, r in enumerate(runs, 1):
        print("\n%d. %s: gate %s, verdict in %s s; %s" % (
            i, r["profile"], "passed" if r["passed"] else "FAILED",
            "%.0f" % r["time_to_verdict_s"] if r.get("time_to_verdict_s") else "-",
            r.get("reason") or "bench only, nothing changed"))
        for row in tables[i - 1]:
            print("   " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
        for c in r.get("cases") or []:
            if c.get("check"):
                print("   quality %s (%ss)" % (verdict.case_line(c), "%.0f" % c["time_to_verdict_s"]
                                                    if c.get("time_to_verdict_s") is not None else "-"))
        for f in r.get("failures") or []:
            print("   FAILED " + (f if isinstance(f, str) else f.get("message", "")))
    print("\nsteps took %s s" % ", ".join("%.0f" % t for t in times))
    ok = [r["passed"] for r in runs] == [True, False, False, True] and runs[3]["profile"] == "nextn_3step" \
        and runs[2].get("failed_cases") == ["tool_calls"]
    print("demo %s" % ("as expected: the slow deploy and the one whose tool calls clients cannot read "
                       "were caught and rolled back" if ok else "NOT as expected"))
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("ANSIBLE_NOCOLOR", "1")
    sys.exit(main())
