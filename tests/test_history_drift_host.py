"""On the local container: the gate's history copied to the controller with roofline and
change from the last-known-good run, a regression failing the gate (and rolling back), and the
drift playbook against a hand-started server with the original hand launch's 1-step flags."""
from __future__ import annotations

import json
import re

import yaml

from bench.profiles import HAND_LAUNCH_ARGS
from hostutil import HOST, ensure_deployed, flat, needs_local_host, on_host, play

pytestmark = needs_local_host

HAND = ("{python} -m emulator --model-path /srv/models/Qwen3.6-27B "
        "--served-model-name Qwen3.6-27B --tp-size 2 --port 30001 " + " ".join(HAND_LAUNCH_ARGS))


def test_gate_copies_the_history_to_the_controller_with_roofline_and_change(tmp_path):
    ensure_deployed()
    p = play("deploy.yml", "-e", "sglang_gate_controller_history_dir=%s" % tmp_path)
    assert p.returncode == 0, p.stdout[-3000:]
    host_lines = on_host("cat /var/lib/sglang/gate-history.jsonl").splitlines()
    copy = (tmp_path / (HOST + ".jsonl")).read_text().splitlines()
    assert copy == host_lines and len(copy) >= 2
    last = json.loads(copy[-1])
    assert last["passed"] is True
    ro = last["roofline"]
    assert ro["spec_steps"] == 3 and ro["bytes_per_cycle_gb"] == 65.7384
    assert 0 < ro["share_pct"] < 100 and ro["accept_len"] == last["accept_len"]
    base = last["regression"]["baseline"]
    assert base["profile"] == "nextn_3step"
    earlier = [json.loads(x) for x in copy[:-1]]
    assert base["time"] == [r for r in earlier if r["passed"] and r["profile"] == "nextn_3step"][-1]["time"]
    out = flat(p.stdout)
    assert re.search(r"roofline \d+\.\d tok/s \(measured \d+% of it\); vs last-known-good \(", out)


def test_a_slower_deploy_of_the_same_profile_fails_on_max_regression_and_rolls_back():
    ensure_deployed()
    unit = on_host("sha256sum /etc/systemd/system/sglang.service")
    # 0.6x the speed: about -40% from the baseline, far outside the plumbing gate's run-to-run
    # spread under the suite's load (0.85x once measured only -4.8% against a baseline taken at a
    # busy moment). The speed threshold is lowered so the regression is the only failing figure.
    p = play("deploy.yml", "-e", json.dumps({
        "sglang_environment": {"SGLEMU_SPEED_SCALE": "0.6"}, "sglang_gate_max_regression_pct": 5,
        "sglang_gate_thresholds": {"nextn_3step": {"coding": {"min_tok_s": 10, "min_accept_len": 2.8}}}}))
    out = flat(p.stdout)
    assert p.returncode != 0
    assert re.search(r"decode tok/s \d+\.\d \[\d+\.\d, \d+\.\d\] dropped \d+\.\d% from the last-known-good "
                     r"\d+\.\d\d \(\S+\) \(allowed 5%: at least \d+\.\d\)", out), out[-3000:]
    assert "Rolled back to the last-known-good unit" in out
    assert "decode tok/s (per-request median)" not in out  # only the regression failed
    assert "SGLEMU_SPEED_SCALE" not in on_host("cat /etc/sglang/sglang.env")
    assert on_host("sha256sum /etc/systemd/system/sglang.service") == unit
    assert on_host("systemctl is-active sglang") == "active"
    last = json.loads(on_host("tail -n 1 /var/lib/sglang/gate-history.jsonl"))
    assert last["passed"] is False and last["max_regression_pct"] == 5
    assert last["regression"]["decode_tok_s_pct"] < -5


def test_drift_names_the_hand_launchs_differences_and_the_unmanaged_process():
    ensure_deployed()
    # the interpreter of the deployed release (the unit's ExecStart names it)
    python = re.search(r"path=(\S+)", on_host("systemctl show --property ExecStart --value sglang")).group(1)
    pid = on_host("sh -c 'nohup %s >/tmp/hand-launch.log 2>&1 & echo $!'" % HAND.format(python=python))
    try:
        on_host(python + " -c \"import time,urllib.request as u\n"
                "for i in range(200):\n"
                "    try: u.urlopen('http://127.0.0.1:30001/health', timeout=1); break\n"
                "    except Exception: time.sleep(0.1)\n\"")
        p = play("playbooks/drift.yml", "-e", "sglang_drift_url=http://127.0.0.1:30001",
                 "-e", "sglang_drift_fail=true")
        out = flat(p.stdout)
        assert p.returncode != 0
        for line in ("speculative_num_steps: intended 3, running 1",
                     "speculative_num_draft_tokens: intended 4, running 2",
                     "mem_fraction_static: intended 0.88, running 0.",
                     "context_length: intended 131072, running 262144",
                     "max_running_requests: intended 16, running 48",
                     "mamba_full_memory_ratio: intended 0.5, running 0.9",
                     "unmanaged SGLang process pid %s: " % pid):
            assert line in out, (line, out[-3000:])
        assert "speculative_algorithm" not in out.split("drifted from profile")[1]
    finally:
        on_host("kill %s" % pid, check=False)
        on_host("sh -c 'while kill -0 %s 2>/dev/null; do sleep 0.1; done'" % pid, check=False)
    p = play("playbooks/drift.yml", "-e", "sglang_drift_fail=true")
    assert p.returncode == 0, p.stdout[-3000:]
    assert "no difference; no unmanaged SGLang process" in flat(p.stdout)


def test_compare_playbook_runs_each_profile_as_a_transient_unit_and_writes_the_report(tmp_path):
    ensure_deployed()
    unit = on_host("sha256sum /etc/systemd/system/sglang.service")
    written = on_host("stat -c %Y /etc/systemd/system/sglang.service")
    # two profiles at two levels: the sweep's rows, report and restore (the answer's and the
    # crossing's decisions over any rows are tests/test_compare_cli.py's, in Python)
    p = play("playbooks/compare.yml", "-e", "compare_out_dir=%s" % tmp_path, "-e", "compare_max_tokens=128",
             "-e", '{"compare_levels": [1, 4], "compare_profiles": ["nextn_1step", "nextn_3step"]}',
             timeout=1200)
    assert p.returncode == 0, p.stdout[-4000:]
    for name in ("rows.json", "compare.md", "compare.csv", "compare.json", "compare.png"):
        assert (tmp_path / name).stat().st_size > 100, name
    assert (tmp_path / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert sorted((r["profile"], r["concurrency"]) for r in rows) == sorted(
        (p_, c) for p_ in ("nextn_1step", "nextn_3step") for c in (1, 4))
    assert all(r["error"] is None and r["errors"] == 0 for r in rows)
    at1 = {r["profile"]: r for r in rows if r["concurrency"] == 1}
    assert at1["nextn_3step"]["decode_tok_s_median"] > at1["nextn_1step"]["decode_tok_s_median"]
    assert at1["nextn_3step"]["accept_len"] > at1["nextn_1step"]["accept_len"] > 1
    assert at1["nextn_3step"]["spec_steps"] == 3
    md = (tmp_path / "compare.md").read_text()
    assert "nextn_3step beats nextn_1step at C=1 by" in md
    assert "crossing" in md  # where the lines cross, or that they do not
    assert "roofline ceiling" in md
    # the host's own profile is back: the same unit, never rewritten (each profile ran as a
    # transient unit), running, no drift
    assert on_host("sha256sum /etc/systemd/system/sglang.service") == unit
    assert on_host("stat -c %Y /etc/systemd/system/sglang.service") == written
    assert on_host("systemctl is-active sglang-compare", check=False) != "active"
    assert on_host("systemctl is-active sglang") == "active"
    d = play("playbooks/drift.yml", "-e", "sglang_drift_fail=true")
    assert d.returncode == 0 and "no difference" in flat(d.stdout)


def test_calibrate_writes_the_hosts_measured_thresholds_and_shows_the_diff(tmp_path):
    ensure_deployed()
    p = play("playbooks/calibrate.yml", "-e", "calibrate_runs=2", "-e", "calibrate_dir=%s" % tmp_path)
    assert p.returncode == 0, p.stdout[-3000:]
    written = tmp_path / HOST / "gate_calibration.yml"
    text = written.read_text()
    assert "the gate plan ran 2 times on %s" % HOST in text and "10% below the lowest" in text
    mine = yaml.safe_load(text)["sglang_gate_calibrated"]["nextn_3step"]
    # the plumbing plan's one case, about 10% below the ~58 tok/s and ~3.35 the emulator runs at
    assert list(mine) == ["coding"]
    assert 40 < mine["coding"]["min_tok_s"] < 60 and 2.5 < mine["coding"]["min_accept_len"] < 3.3
    assert "+    coding: {min_tok_s: " in p.stdout  # the diff of the host's vars file
    # the role takes them over its thresholds: a gate with them passes, and the preflight
    # refuses a broken calibration naming it
    bad = play("playbooks/preflight.yml", "-e", json.dumps(
        {"sglang_gate_calibrated": {"nextn_3step": {"coding": {"min_tok_s": "fast"}}}}))
    assert bad.returncode != 0
    assert "sglang_gate_calibrated.nextn_3step.coding.min_tok_s must be a number >= 0" in flat(bad.stdout)

