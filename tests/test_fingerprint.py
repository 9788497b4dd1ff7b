"""The host's fingerprint (sglang_perf/fingerprint.py): nvidia-smi's answers in their real formats,
what changed between two runs named first, and the sglang_bench module taking it with the test
hosts' stand-in nvidia-smi (scripts/nvidia_smi_standin.py) against a real emulator."""
from __future__ import annotations

import json
import os
import stat

import pytest

from sglang_perf import fingerprint, history
from test_module import FAST, call, patched  # noqa: F401 (patched: the module exits as an exception)

STANDIN = os.path.join(os.path.dirname(__file__), "..", "scripts", "nvidia_smi_standin.py")

# nvidia-smi --query-gpu=<GPU_FIELDS> --format=csv,noheader,nounits on a 2 x A6000 host: comma and
# space between fields, power with two decimals, [N/A] where a board has no such figure.
QUERY = ("0, 00000000:01:00.0, NVIDIA RTX A6000, 580.95.05, 300.00, 2100, 8001, 4, 16, Enabled, Disabled\n"
         "1, 00000000:41:00.0, NVIDIA RTX A6000, 580.95.05, 250.00, 2100, 8001, 4, 8, Enabled, [N/A]\n")
# nvidia-smi topo -m as it prints on a terminal: the header underlined with escape codes, tabs
# between the columns, a NIC row, then the legend.
TOPO = ("\t\x1b[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
        "GPU0\t X \tNV4\tPHB\t0-63\t0\t\tN/A\n"
        "GPU1\tNV4\t X \tPHB\t0-63\t0\t\tN/A\n"
        "NIC0\tPHB\tPHB\t X \t\t\t\t\n\n"
        "Legend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n\n"
        "NIC Legend:\n\n  NIC0: mlx5_0\n")


def test_the_gpu_query_is_parsed_per_gpu_with_numbers_and_missing_values():
    gpus = fingerprint.parse_gpus(QUERY + "WARNING: infoROM is corrupted at gpu 0000:41:00.0\n")
    assert len(gpus) == 2
    assert gpus[0] == {"index": 0, "bus_id": "00000000:01:00.0", "name": "NVIDIA RTX A6000",
                       "driver": "580.95.05", "power_limit_w": 300, "max_sm_clock_mhz": 2100,
                       "max_memory_clock_mhz": 8001, "pcie_gen": 4, "pcie_width": 16,
                       "persistence_mode": "Enabled", "ecc": "Disabled"}
    assert gpus[1]["power_limit_w"] == 250 and gpus[1]["pcie_width"] == 8 and gpus[1]["ecc"] is None
    assert fingerprint.parse_gpus("") == [] and fingerprint.parse_gpus(None) == []


def link(a, b):
    return " X " if a == b else "NV4" if {a, b} == {"GPU0", "GPU1"} else "SYS"


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_the_topology_gives_each_pair_of_gpus_once(n):
    names = ["GPU%d" % i for i in range(n)]
    text = "\t" + "\t".join(names) + "\tCPU Affinity\tNUMA Affinity\n" + "".join(
        "%s\t%s\t0-31\t0\n" % (a, "\t".join(link(a, b) for b in names)) for a in names)
    links = fingerprint.parse_topo(text)
    assert len(links) == n * (n - 1) // 2
    if n >= 2:
        assert links["GPU0-GPU1"] == "NV4"
    if n >= 4:
        assert links["GPU2-GPU3"] == "SYS" and "GPU3-GPU2" not in links


def test_the_topology_as_a_terminal_prints_it():
    assert fingerprint.parse_topo(TOPO) == {"GPU0-GPU1": "NV4"}
    assert fingerprint.parse_topo("No devices were found\n") == {}


def fp(**kw):
    base = {"engine": "sglang", "version": "0.5.23", "release": "sglang-0.5.23-abc", "profile": "nextn_3step",
            "profile_sha256": "111111111111", "nvidia_smi": "ok",
            "gpus": fingerprint.parse_gpus(QUERY.replace("250.00", "300.00").replace(", 8, ", ", 16, ")),
            "topology": {"GPU0-GPU1": "NV4"}, "prompts": {"coding": "coding@aaa"}}
    base.update(kw)
    return base


def test_a_changed_power_limit_is_named_with_its_gpu():
    now = fp(gpus=fingerprint.parse_gpus(QUERY.replace(", 8, ", ", 16, ")))
    assert fingerprint.differences(fp(), now) == ["power limit 300 W -> 250 W on GPU 1"]
    assert fingerprint.text(["power limit 300 W -> 250 W on GPU 1"]) == \
        "host changed since the last-known-good: power limit 300 W -> 250 W on GPU 1"


def test_every_kind_of_change_is_named_the_host_first():
    now = fp(gpus=fingerprint.parse_gpus(QUERY)[:1], topology={"GPU0-GPU1": "PHB"},
             version="0.5.24", release="sglang-0.5.24-def", profile_sha256="222222222222",
             prompts={"coding": "coding@bbb"})
    changes = fingerprint.differences(fp(), now)
    assert changes == ["GPUs 2 -> 1", "GPU0-GPU1 link NV4 -> PHB", "engine version 0.5.23 -> 0.5.24",
                       "release sglang-0.5.23-abc -> sglang-0.5.24-def",
                       "profile settings 111111111111 -> 222222222222",
                       "prompts of coding coding@aaa -> coding@bbb"]


def test_nothing_is_named_when_nothing_changed_or_a_side_has_no_fingerprint():
    assert fingerprint.differences(fp(), fp()) == []
    assert fingerprint.differences(None, fp()) == [] and fingerprint.differences(fp(), None) == []
    # another profile: its name says it, not its settings' hash
    assert fingerprint.differences(fp(), fp(profile="nextn_1step", profile_sha256="333333333333")) == \
        ["profile nextn_3step -> nextn_1step"]
    # GPUs read on one side only: said once, not field by field
    assert fingerprint.differences(fp(), fp(gpus=[], nvidia_smi="nvidia-smi: not found")) == \
        ["GPUs read by nvidia-smi -> not (nvidia-smi: not found)"]


def test_the_fingerprint_says_why_it_has_no_gpus(tmp_path):
    assert fingerprint.take(fingerprint.run_argv, "", {"profile": "p"})["nvidia_smi"] == "not asked"
    missing = fingerprint.take(fingerprint.run_argv, str(tmp_path / "nvidia-smi"), {})
    assert missing["gpus"] == []
    assert str(tmp_path / "nvidia-smi") in missing["nvidia_smi"]
    failing = tmp_path / "failing-smi"
    failing.write_text("#!/bin/sh\n"
                       "echo 'NVIDIA-SMI has failed because it could not communicate' >&2\nexit 9\n")
    failing.chmod(failing.stat().st_mode | stat.S_IXUSR)
    out = fingerprint.take(fingerprint.run_argv, str(failing), {})
    assert out["gpus"] == [] and "exited 9: NVIDIA-SMI has failed" in out["nvidia_smi"]
    hanging = tmp_path / "hanging-smi"
    hanging.write_text("#!/bin/sh\nexec sleep 30\n")
    hanging.chmod(hanging.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(OSError, match="no answer in 0 s"):
        fingerprint.run_argv([str(hanging)], timeout=0.3)


def test_the_standin_answers_what_the_fingerprint_asks_and_can_vary(tmp_path, monkeypatch):
    state = tmp_path / "smi.json"
    monkeypatch.setenv("NVIDIA_SMI_STANDIN_STATE", str(state))
    before = fingerprint.take(fingerprint.run_argv, STANDIN, {})
    assert before["nvidia_smi"] == "ok" and len(before["gpus"]) == 2
    assert before["gpus"][1]["power_limit_w"] == 300 and before["topology"] == {"GPU0-GPU1": "NV4"}
    state.write_text(json.dumps({"gpus": [{}, {"power.limit": 250, "pcie.link.width.current": 8}],
                                 "topology": "PHB"}))
    now = fingerprint.take(fingerprint.run_argv, STANDIN, {})
    assert fingerprint.differences(before, now) == [
        "power limit 300 W -> 250 W on GPU 1", "PCIe width x16 -> x8 on GPU 1", "GPU0-GPU1 link NV4 -> PHB"]


PLAN = {"coding": {"prompts": "coding", "concurrency": 1, "requests": 6, "max_tokens": 64},
        "prose": {"prompts": "prose", "concurrency": 1, "requests": 6, "max_tokens": 64, "report_only": True}}
THRESHOLDS = {"nextn_3step": {"coding": {"min_tok_s": 1.0}}}


def test_the_gate_names_a_host_change_first_and_records_the_fingerprint(emulator, tmp_path, monkeypatch):
    """Two plan runs of the module against one emulator, the stand-in's power limit lowered on GPU 1
    between them: the second run's message says so before the figures; the history keeps both
    fingerprints and each case's prompt set; the report-only prose case is recorded, not judged."""
    state = tmp_path / "smi.json"
    monkeypatch.setenv("NVIDIA_SMI_STANDIN_STATE", str(state))
    emu = emulator("nextn_3step", env=FAST)
    hist = tmp_path / "history.jsonl"
    identity = {"engine": "sglang", "version": "0.5.23", "release": "r1", "profile": "nextn_3step",
                "profile_sha256": fingerprint.settings_sha256({"speculative_num_steps": 3})}
    args = dict(url=emu.url, plan=PLAN, thresholds=THRESHOLDS, profile="nextn_3step", warmup=2,
                per_request=False, nvidia_smi=STANDIN, identity=identity,
                baseline_history=str(hist), baseline_profile="nextn_3step")
    kind, first = call(args)
    assert kind == "exit" and first["fingerprint_changes"] == []
    assert [c["case"] for c in first["cases"]] == ["coding", "prose"]
    coding, prose = first["cases"]
    assert prose["report_only"] is True and prose["judged"] == [] and prose["threshold_source"] == {}
    # drafts are accepted less often on prose (the emulator's SGLEMU_PROSE_ACCEPT_FACTOR 0.80)
    assert prose["accept_len"] < coding["accept_len"] - 0.3
    assert coding["prompt_set"].startswith("coding@") and prose["prompt_set"].startswith("prose@")
    assert first["fingerprint"]["prompts"] == {"coding": coding["prompt_set"], "prose": prose["prompt_set"]}
    rec = history.record(first, {"verdict": "pass", "action": "record", "reason": "passed"},
                         {"time": "t1", "profile": "nextn_3step"})
    hist.write_text(json.dumps(rec) + "\n")
    assert [c["prompt_set"] for c in rec["cases"]] == [coding["prompt_set"], prose["prompt_set"]]

    state.write_text(json.dumps({"gpus": [{}, {"power.limit": 250}]}))
    kind, second = call(args)
    assert kind == "exit", second["msg"]
    assert second["fingerprint_changes"] == ["power limit 300 W -> 250 W on GPU 1"]
    assert second["msg"].startswith("passed in ") and \
        second["msg"].index("host changed since the last-known-good: power limit 300 W -> 250 W on GPU 1") \
        < second["msg"].index("coding (C=1")
    assert "prose (C=1, 6 x 64 tok)" in second["msg"] and "reported" in second["msg"]


def test_the_gate_without_nvidia_smi_says_so_and_runs(emulator, tmp_path):
    emu = emulator("nextn_3step", env=FAST)
    kind, r = call(dict(url=emu.url, plan={"coding": PLAN["coding"]}, thresholds=THRESHOLDS,
                        profile="nextn_3step", warmup=2, per_request=False,
                        nvidia_smi="nvidia-smi-that-is-not-here"))
    assert kind == "exit" and r["fingerprint"]["gpus"] == []
    assert r["fingerprint"]["nvidia_smi"] == \
        "nvidia-smi-that-is-not-here: not found on the host (no GPU figures)"
    # the server says what it runs where the caller did not
    assert r["fingerprint"]["engine"] == "sglang" and r["fingerprint"]["version"]
