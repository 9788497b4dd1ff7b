"""The host's fingerprint (sglang_perf/record/fingerprint.py): nvidia-smi's answers in their real formats,
what changed between two runs named first, and the sglang_bench module taking it with the test
hosts' stand-in nvidia-smi (scripts/nvidia_smi_standin.py) against a real emulator."""
from __future__ import annotations

import json
import os
import stat
import time

import pytest

from bench import history as bench_history
from bench import report
from benchrun import bench
from conftest import bench_args
from sglang_perf.record import fingerprint, history
from sglang_perf.plan import gate as plan
from sglang_perf.judge import verdict
from test_module import FAST, call, patched  # noqa: F401 (patched: the module exits as an exception)

STANDIN = os.path.join(os.path.dirname(__file__), "..", "scripts", "nvidia_smi_standin.py")

# nvidia-smi --query-gpu=<fingerprint.query_fields()> --format=csv,noheader,nounits on a 2 x A6000
# host at idle: comma and space between fields, power with two decimals, the clock-event mask in
# hex, each reason "Active" / "Not Active", [N/A] where a board has no such figure.
IDLE = ("0x0000000000000001, Active, Not Active, Not Active, Not Active, Not Active, Not Active, "
        "Not Active, Not Active")
QUERY = ("0, 00000000:01:00.0, NVIDIA RTX A6000, 580.95.05, 300.00, 2100, 8001, 4, 16, Enabled, Disabled, "
         "300.00, 300.00, 1800, 1800, 8001, 8001, 210, 405, " + IDLE + "\n"
         "1, 00000000:41:00.0, NVIDIA RTX A6000, 580.95.05, 250.00, 2100, 8001, 4, 8, Enabled, [N/A], "
         "300.00, 250.00, 1800, 1800, 8001, 8001, 210, 405, " + IDLE + "\n")
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
                       "persistence_mode": "Enabled", "ecc": "Disabled", "default_power_limit_w": 300,
                       "enforced_power_limit_w": 300, "app_sm_clock_mhz": 1800,
                       "default_app_sm_clock_mhz": 1800, "app_memory_clock_mhz": 8001,
                       "default_app_memory_clock_mhz": 8001, "sm_clock_mhz": 210, "memory_clock_mhz": 405,
                       "clock_event_mask": "0x0000000000000001", "clock_events": ["gpu_idle"]}
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
    # the enforced limit follows the set one: named once
    assert fingerprint.differences(fp(), now) == ["GPU 1: power limit 300 W -> 250 W"]
    assert fingerprint.text(["GPU 1: power limit 300 W -> 250 W"]) == \
        "host changed since the last-known-good: GPU 1: power limit 300 W -> 250 W"


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


def test_an_nvidia_smi_of_several_words_is_the_program_asked_through_the_others(tmp_path):
    """--nvidia-smi 'ssh HOST nvidia-smi' (playbooks/tune.yml's tune_exec): the last word runs
    through the words before it; a terminal's line ends (ssh -tt) are read as plain ones."""
    import argparse
    from bench import gate
    tty = tmp_path / "as-a-tty"  # runs its arguments, each line ended as a terminal ends it
    tty.write_text("#!/bin/sh\n\"$@\" | sed 's/$/\\r/'\n")
    tty.chmod(tty.stat().st_mode | stat.S_IXUSR)
    args = argparse.Namespace(url="http://10.0.0.9:30000", nvidia_smi="%s %s" % (tty, STANDIN))
    run, program, why = gate.host_nvidia_smi(args)
    assert (program, why) == (STANDIN, None)
    fp = fingerprint.take(run, program, {})
    assert fp["nvidia_smi"] == "ok" and [g["name"] for g in fp["gpus"]] == ["NVIDIA RTX A6000"] * 2
    assert fp["gpus"][1]["power_limit_w"] == 300 and fp["topology"] == {"GPU0-GPU1": "NV4"}
    # an argument a remote shell would change is refused, not sent
    with pytest.raises(OSError, match="cannot pass"):
        run([STANDIN, "a b"])
    # the way to the host not found here: no GPU figures, and why
    args.nvidia_smi = "%s %s" % (tmp_path / "no-ssh", STANDIN)
    assert gate.host_nvidia_smi(args)[1:] == (None, "%s: not found (no GPU figures)" % (tmp_path / "no-ssh"))
    # auto: this machine's only for a server on loopback
    args.nvidia_smi = "auto"
    assert gate.host_nvidia_smi(args)[1] is None


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
        "GPU 1: power limit 300 W -> 250 W", "GPU 1: PCIe width x16 -> x8", "GPU0-GPU1 link NV4 -> PHB"]


# The stand-in's state for a busy GPU whose SM clock is locked at 1,400 MHz (nvidia-smi -lgc: the
# max stays 2,100, applications_clocks_setting is active), and one held by its power cap.
LOCKED = {"clocks.current.sm": 1400, "clocks.current.memory": 8001,
          "clocks_event_reasons": ["applications_clocks_setting"]}
CAPPED_BY_POWER = {"clocks.current.sm": 1650, "clocks.current.memory": 8001,
                   "clocks_event_reasons": ["sw_power_cap"]}


def reasons(*active):
    """The .active mask and the eight reasons' fields as nvidia-smi prints them."""
    bits = dict(fingerprint.REASONS)
    return ", ".join(["0x%016X" % sum(bits[r] for r in active)]
                     + ["Active" if r in active else "Not Active" for r, _ in fingerprint.REASONS])


def row(i, sm=210, mem=405, events=("gpu_idle",), limit="300.00", enforced="300.00", app_sm="1800",
        max_sm="2100"):
    """One GPU's line of the fingerprint's query, an A6000 by default (idle)."""
    return ("%d, 00000000:%02X:00.0, NVIDIA RTX A6000, 580.95.05, %s, %s, 8001, 4, 16, Enabled, Disabled, "
            "300.00, %s, %s, 1800, 8001, 8001, %s, %s, %s\n"
            % (i, i + 1, limit, max_sm, enforced, app_sm, sm, mem, reasons(*events)))


def gpus(*rows):
    return fingerprint.parse_gpus("".join(rows))


def test_the_clock_event_reasons_are_read_from_their_fields_or_the_mask():
    busy = gpus(row(0, sm=1650, mem=8001, events=("sw_power_cap", "hw_slowdown", "hw_thermal_slowdown")))[0]
    assert busy["clock_events"] == ["sw_power_cap", "hw_slowdown", "hw_thermal_slowdown"]
    assert busy["sm_clock_mhz"] == 1650 and busy["clock_event_mask"] == "0x000000000000004C"
    # a board that answers no reason of its own but the mask (0x4 | 0x2): the bits say them
    line = row(0, events=()).replace(reasons(), "0x0000000000000006" + ", [N/A]" * 8)
    assert gpus(line)[0]["clock_events"] == ["applications_clocks_setting", "sw_power_cap"]
    # neither: not read, which is not "none active"
    line = row(0, app_sm="[Not Supported]").replace(reasons("gpu_idle"), ", ".join(["[N/A]"] * 9))
    g = gpus(line)[0]
    assert g["clock_events"] is None and g["app_sm_clock_mhz"] is None
    assert fingerprint.limits(g) == []


def test_an_idle_gpu_is_not_capped_a_busy_locked_one_is():
    # locked at 1,400 MHz (-lgc): at idle the clock is low by design and says nothing
    idle_locked = gpus(row(0, sm=1400, events=("gpu_idle", "applications_clocks_setting")))[0]
    assert fingerprint.limits(idle_locked) == []
    busy_locked = gpus(row(0, sm=1400, mem=8001, events=("applications_clocks_setting",)))[0]
    assert fingerprint.limits(busy_locked) == [("sm_cap", "SM clock capped at 1,400 MHz", 1400)]
    # busy at its max: the setting holds nothing down
    at_max = gpus(row(0, sm=2100, mem=8001, events=("applications_clocks_setting",)))[0]
    assert fingerprint.limits(at_max) == []
    # busy, boosting under its max with no reason active: not capped
    assert fingerprint.limits(gpus(row(0, sm=1950, mem=8001, events=()))[0]) == []
    # application clocks below the default (-ac 8001,1400): a setting, capped at idle too
    assert fingerprint.limits(gpus(row(0, app_sm="1400"))[0]) == \
        [("sm_cap", "SM clock capped at 1,400 MHz", 1400)]


def test_the_reasons_that_hold_a_gpu_down_are_named():
    g = gpus(row(0, sm=1650, mem=8001, events=("sw_power_cap",)),
             row(1, sm=1200, mem=8001, events=("hw_slowdown", "hw_thermal_slowdown")),
             row(2, sm=900, mem=8001, events=("hw_slowdown",)),
             row(3, sm=1800, mem=8001, events=("sync_boost", "sw_thermal_slowdown")),
             row(4, events=("gpu_idle", "sw_power_cap")))
    assert [[p for _, p, _ in fingerprint.limits(x)] for x in g] == [
        ["power cap active (SM clock 1,650 of 2,100 MHz)"],
        ["thermal slowdown (SM clock 1,200 of 2,100 MHz)"],
        ["hardware slowdown (SM clock 900 of 2,100 MHz)"],
        ["thermal slowdown (SM clock 1,800 of 2,100 MHz)", "sync boost holds the clocks"],
        ["power cap active"]]


@pytest.mark.parametrize("n", [1, 2, 8])
def test_a_cap_is_named_on_its_gpu_among_n(n):
    before = fp(gpus=gpus(*(row(i, sm=1950, mem=8001, events=()) for i in range(n))), topology={})
    capped = [row(i, sm=1950, mem=8001, events=()) for i in range(n - 1)] + \
        [row(n - 1, sm=1400, mem=8001, events=("applications_clocks_setting", "sw_power_cap"))]
    assert fingerprint.differences(before, fp(gpus=gpus(*capped), topology={})) == [
        "GPU %d: SM clock capped at 1,400 MHz" % (n - 1),
        "GPU %d: power cap active (SM clock 1,400 of 2,100 MHz)" % (n - 1)]
    idle = [row(i) for i in range(n)]
    assert fingerprint.differences(before, fp(gpus=gpus(*idle), topology={})) == []


def test_clocks_are_compared_like_with_like():
    busy = gpus(row(0, sm=1950, mem=8001, events=()), row(1, sm=1950, mem=8001, events=()))
    idle = gpus(row(0), row(1))
    # a busy baseline and an idle run (or the reverse): the current clocks differ by design
    assert fingerprint.differences(fp(gpus=busy), fp(gpus=idle)) == []
    assert fingerprint.differences(fp(gpus=idle), fp(gpus=busy)) == []
    # the same power cap as the baseline's: no change; the same lock at a lower clock: named
    capped = gpus(row(0, sm=1650, mem=8001, events=("sw_power_cap",)),
                  row(1, sm=1400, mem=8001, events=("applications_clocks_setting",)))
    lower = gpus(row(0, sm=1600, mem=8001, events=("sw_power_cap",)),
                 row(1, sm=1200, mem=8001, events=("applications_clocks_setting",)))
    assert fingerprint.differences(fp(gpus=capped), fp(gpus=lower)) == ["GPU 1: SM clock capped at 1,200 MHz"]
    # an application clock below the baseline's (the default unread): capped; raised: said as such
    no_default = [g for g in gpus(row(0, app_sm="1600"))]
    no_default[0]["default_app_sm_clock_mhz"] = None
    assert fingerprint.differences(fp(gpus=gpus(row(0))), fp(gpus=no_default)) == \
        ["GPU 0: SM clock capped at 1,600 MHz"]
    assert fingerprint.differences(fp(gpus=no_default), fp(gpus=gpus(row(0)))) == \
        ["GPU 0: application SM clock 1,600 -> 1,800 MHz"]


def test_the_enforced_power_limit_is_named_where_it_does_not_follow_the_set_one():
    before = fp(gpus=gpus(row(0), row(1)))
    # something besides the set limit (a board or chassis limiter) lowered the ceiling
    assert fingerprint.differences(before, fp(gpus=gpus(row(0, enforced="250.00"), row(1)))) == \
        ["GPU 0: enforced power limit 300 W -> 250 W"]
    # nvidia-smi -pl 250: the set limit says it
    set_by_pl = gpus(row(0, limit="250.00", enforced="250.00"), row(1))
    assert fingerprint.differences(before, fp(gpus=set_by_pl)) == ["GPU 0: power limit 300 W -> 250 W"]
    assert fingerprint.differences(before, fp(gpus=gpus(row(0, enforced="[N/A]"), row(1)))) == \
        ["GPU 0: enforced power limit 300 W -> n/a"]


def test_a_baseline_recorded_before_the_clocks_were_asked_is_compared_on_what_it_has():
    old = fp(gpus=[{k: v for k, v in g.items() if k in {f[1] for f in fingerprint.GPU_FIELDS[:11]}}
                   for g in gpus(row(0), row(1))])
    assert fingerprint.differences(old, fp(gpus=gpus(row(0), row(1)))) == []
    now = gpus(row(0), row(1, sm=1400, mem=8001, events=("applications_clocks_setting",)))
    assert fingerprint.differences(old, fp(gpus=now)) == ["GPU 1: SM clock capped at 1,400 MHz"]


def test_an_older_driver_is_asked_the_older_names_or_left_without_the_field(tmp_path, monkeypatch):
    state = tmp_path / "smi.json"
    monkeypatch.setenv("NVIDIA_SMI_STANDIN_STATE", str(state))
    state.write_text(json.dumps({"gpus": [{}, LOCKED], "unknown_fields": ["clocks_event_reasons.*",
                                                                           "enforced.power.limit"]}))
    asked = []

    def run(argv):
        asked.append(argv)
        return fingerprint.run_argv(argv)

    out = fingerprint.take(run, STANDIN, {})
    assert out["nvidia_smi"] == "ok" and len(asked) == 4  # 3 queries and topo -m
    assert out["nvidia_smi_fields"] == [
        "enforced.power.limit left out: this driver does not know it",
        "clocks_throttle_reasons.* asked: this driver does not know clocks_event_reasons.*"]
    assert "clocks_throttle_reasons.sw_power_cap" in asked[2][1] and "enforced" not in asked[2][1]
    assert out["gpus"][1]["clock_events"] == ["applications_clocks_setting"]
    assert "enforced_power_limit_w" not in out["gpus"][1]
    assert fingerprint.limits(out["gpus"][1]) == [("sm_cap", "SM clock capped at 1,400 MHz", 1400)]
    # a driver that does not know the index (no GPU told apart): no GPU figures, and why
    state.write_text(json.dumps({"gpus": [{}], "unknown_fields": ["index"]}))
    failed = fingerprint.take(fingerprint.run_argv, STANDIN, {})
    assert failed["gpus"] == [] and 'Field "index" is not a valid field' in failed["nvidia_smi"]


def test_the_standin_shows_a_clock_cap_and_a_power_cap_as_the_gate_reads_them(tmp_path, monkeypatch):
    state = tmp_path / "smi.json"
    monkeypatch.setenv("NVIDIA_SMI_STANDIN_STATE", str(state))
    before = fingerprint.take(fingerprint.run_argv, STANDIN, {})
    assert [g["clock_events"] for g in before["gpus"]] == [["gpu_idle"], ["gpu_idle"]]
    state.write_text(json.dumps({"gpus": [CAPPED_BY_POWER, LOCKED]}))
    now = fingerprint.take(fingerprint.run_argv, STANDIN, {})
    assert fingerprint.differences(before, now) == [
        "GPU 0: power cap active (SM clock 1,650 of 2,100 MHz)", "GPU 1: SM clock capped at 1,400 MHz"]


PLAN = {"coding": {"prompts": "coding", "concurrency": 1, "requests": 6, "max_tokens": 64},
        "prose": {"prompts": "prose", "concurrency": 1, "requests": 6, "max_tokens": 64, "report_only": True}}
THRESHOLDS = {"nextn_3step": {"coding": {"min_tok_s": 1.0}}}


def test_the_gate_names_a_host_change_first_and_records_the_fingerprint(emulator, tmp_path, monkeypatch):
    """Two plan runs of the module against one emulator, the stand-in's power limit lowered, a clock
    locked and a power cap active between them: the second run's message says so before the
    figures; the history keeps both fingerprints and each case's prompt set; the report-only prose
    case is recorded, not judged."""
    state = tmp_path / "smi.json"
    monkeypatch.setenv("NVIDIA_SMI_STANDIN_STATE", str(state))
    emu = emulator("nextn_3step", env=FAST)
    hist = tmp_path / "history.jsonl"
    identity = {"engine": "sglang", "version": "0.5.23", "release": "r1", "profile": "nextn_3step",
                "profile_sha256": fingerprint.settings_sha256({"speculative_num_steps": 3})}
    args = bench_args(emu.url, plan.resolve(PLAN, THRESHOLDS, "nextn_3step"), "nextn_3step", {"warmup": 2},
                      per_request=False, nvidia_smi=STANDIN, identity=identity, history_path=str(hist))
    kind, first = call(args)
    assert kind == "exit" and first["fingerprint_changes"] == []
    # the clocks watched over the run: the stand-in's counters stood still
    assert first["fingerprint"]["held_down"]["how"] == "counters" and first["slowdowns"] == []
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

    # GPU 1's limit lowered and its SM clock locked at 1,400 MHz, GPU 0 held by its power cap, both
    # busy (a server's traffic beside the gate): named before the figures
    state.write_text(json.dumps({"gpus": [CAPPED_BY_POWER, dict(LOCKED, **{"power.limit": 250})]}))
    kind, second = call(args)
    assert kind == "exit", second["msg"]
    said = ["GPU 0: power cap active (SM clock 1,650 of 2,100 MHz)", "GPU 1: power limit 300 W -> 250 W",
            "GPU 1: SM clock capped at 1,400 MHz"]
    assert second["fingerprint_changes"] == said
    assert second["msg"].startswith("passed in ") and \
        second["msg"].index("host changed since the last-known-good: " + "; ".join(said)) \
        < second["msg"].index("coding (C=1")
    assert "prose (C=1, 6 x 64 tok)" in second["msg"] and "reported" in second["msg"]
    # bench history's line under the run and the HTML page's marker say the same
    passed = {"verdict": "pass", "action": "record", "reason": "ok"}
    runs = ((first, "2026-11-30T06:00:00Z"), (second, "2026-11-30T07:00:00Z"))
    hist.write_text("".join(json.dumps(history.record(r, passed, {"time": t, "profile": "nextn_3step"}))
                            + "\n" for r, t in runs))
    runs = bench_history.annotate(bench_history.read(hist))
    assert [r["host_changes"] for r in runs] == [[], said]
    assert "    host changed since the last-known-good: " + "; ".join(said) in bench_history.table(runs)
    assert 'title="host changed since the last-known-good: GPU 0: power cap active (SM clock 1,650 ' \
        'of 2,100 MHz); GPU 1: power limit' in report.page(runs, 2, "ct-local", str(hist))


def test_the_gate_without_nvidia_smi_says_so_and_runs(emulator, tmp_path):
    emu = emulator("nextn_3step", env=FAST)
    coding = plan.resolve({"coding": PLAN["coding"]}, THRESHOLDS, "nextn_3step")
    kind, r = call(bench_args(emu.url, coding, "nextn_3step", {"warmup": 2}, per_request=False,
                              nvidia_smi="nvidia-smi-that-is-not-here"))
    assert kind == "exit" and r["fingerprint"]["gpus"] == []
    assert r["fingerprint"]["nvidia_smi"] == \
        "nvidia-smi-that-is-not-here: not found on the host (no GPU figures)"
    # the server says what it runs where the caller did not
    assert r["fingerprint"]["engine"] == "sglang" and r["fingerprint"]["version"]


def _downloaded(directory, commit, files=("config.json", "model-00001-of-00002.safetensors")):
    """A directory as `hf download --local-dir` leaves it: one metadata file per file, the commit
    on its first line (huggingface_hub's _local_folder.py)."""
    meta = directory / ".cache" / "huggingface" / "download"
    meta.mkdir(parents=True)
    for name in files:
        (directory / name).write_text("x")
        (meta / (name + ".metadata")).write_text("%s\n%s\n1733300000.0\n" % (commit, "e" * 64))
    return str(directory)


A, B = "a" * 40, "b" * 40


def test_the_weights_commits_are_read_from_the_download_or_the_snapshot(tmp_path):
    model = _downloaded(tmp_path / "Qwen3.6-27B", A)
    snap = tmp_path / "hub" / "models--z-lab--Qwen3.6-27B-DFlash" / "snapshots" / B
    snap.mkdir(parents=True)
    copied = tmp_path / "copied"
    copied.mkdir()
    identity = {"profile": "dflash",
                "model": {"repo": "Qwen/Qwen3.6-27B", "revision": "main", "path": model},
                "drafter": {"repo": "z-lab/Qwen3.6-27B-DFlash", "revision": "main", "path": str(snap)}}
    fp = fingerprint.take(fingerprint.run_argv, "", identity)
    assert fp["model"] == {"repo": "Qwen/Qwen3.6-27B", "revision": "main", "path": model, "commit": A}
    assert fp["drafter"]["commit"] == B
    # a hand-copied tree records none: its revision is the commit only when it names one
    def commit(revision):
        model = {"repo": "Qwen/Qwen3.6-27B", "revision": revision, "path": str(copied)}
        return fingerprint.take(fingerprint.run_argv, "", {"model": model})["model"]["commit"]
    assert commit("main") is None and commit(A) == A
    # no drafter, no identity: nothing recorded
    assert fingerprint.take(fingerprint.run_argv, "", {"drafter": None})["drafter"] is None
    assert fingerprint.take(fingerprint.run_argv, "", None)["model"] is None


def test_a_moving_main_is_named_as_a_change_of_weights(tmp_path):
    """The same repository and revision whose files are at another commit: the weights changed
    under the same name, and the comparison with the baseline says so (and which repository)."""
    def weights(model_commit, drafter_commit, drafter_repo="z-lab/Qwen3.6-27B-DFlash"):
        return fp(model={"repo": "Qwen/Qwen3.6-27B", "revision": "main", "path": "/srv/models/Qwen3.6-27B",
                         "commit": model_commit},
                  drafter={"repo": drafter_repo, "revision": "main", "path": "/srv/models/d",
                           "commit": drafter_commit})
    assert fingerprint.differences(weights(A, A), weights(A, A)) == []
    assert fingerprint.differences(weights(A, A), weights(B, A)) == [
        "model Qwen/Qwen3.6-27B at commit aaaaaaaaaaaa -> bbbbbbbbbbbb (revision main)"]
    assert fingerprint.differences(weights(A, A), weights(A, B)) == [
        "drafter z-lab/Qwen3.6-27B-DFlash at commit aaaaaaaaaaaa -> bbbbbbbbbbbb (revision main)"]
    assert fingerprint.differences(weights(A, A), weights(A, A, "org/other-drafter")) == [
        "drafter z-lab/Qwen3.6-27B-DFlash -> org/other-drafter"]
    # a side that records no commit (a copied tree) is not compared; a baseline from before the
    # weights were recorded neither
    assert fingerprint.differences(weights(None, A), weights(B, A)) == []
    assert fingerprint.differences(fp(), weights(B, A)) == []
    # named in the gate's sentence, after the host's own changes
    assert fingerprint.text(fingerprint.differences(weights(A, A), weights(B, A))) == (
        "host changed since the last-known-good: model Qwen/Qwen3.6-27B at commit aaaaaaaaaaaa -> "
        "bbbbbbbbbbbb (revision main)")


# ------------------------------------------------- what held the clocks down during a measurement --
def reading(at, **gpus):
    """A clock reading (fingerprint.read_clocks') at ``at`` s: GPU n's counters as gN={reason: us}."""
    return {"at": at, "counters": {int(k[1:]): v for k, v in gpus.items()}}


def test_the_counters_difference_is_each_reasons_time_and_share():
    start = reading(100.0, g0={"sw_power_cap": 5_000_000, "sw_thermal_slowdown": 0},
                    g1={"sw_power_cap": 7_000_000, "sw_thermal_slowdown": 0})
    end = reading(150.0, g0={"sw_power_cap": 6_000_000, "sw_thermal_slowdown": 31_000_000},
                  g1={"sw_power_cap": 29_500_000, "sw_thermal_slowdown": 0})
    held = fingerprint.held_down(start, end)
    # GPU 0's power cap held it 1 s of 50 (2%): under the floor, not a slowdown of the measurement
    assert held == {"how": "counters", "seconds": 50.0, "floor": 0.05, "notes": [], "held": [
        {"gpu": 0, "reason": "sw_thermal_slowdown", "seconds": 31.0, "share": 0.62},
        {"gpu": 1, "reason": "sw_power_cap", "seconds": 22.5, "share": 0.45}]}
    assert fingerprint.held_text(held) == [
        "GPU 0 held by sw_thermal_slowdown for 62% of the measurement (31 of 50 s)",
        "GPU 1 held by sw_power_cap for 45% of the measurement (22 of 50 s)"]
    # one GPU: the same arithmetic
    one = fingerprint.held_down(reading(0.0, g0={"hw_thermal_slowdown": 0}),
                                reading(10.0, g0={"hw_thermal_slowdown": 10_000_000}))
    assert one["held"] == [{"gpu": 0, "reason": "hw_thermal_slowdown", "seconds": 10.0, "share": 1.0}]


def test_the_counters_at_their_edges():
    g0 = {"sw_power_cap": 1_000_000}
    # no time between the readings: nothing can be a share of it
    assert fingerprint.held_down(reading(5.0, g0=g0), reading(5.0, g0=g0)) == \
        {"how": None, "why": "no time passed between the two readings"}
    # a counter that went back (a GPU reset or driver reload between the readings): noted, not judged
    back = fingerprint.held_down(reading(0.0, g0={"sw_power_cap": 9_000_000, "sw_thermal_slowdown": 0}),
                                 reading(20.0, g0={"sw_power_cap": 2_000_000,
                                                   "sw_thermal_slowdown": 8_000_000}))
    assert back["held"] == [{"gpu": 0, "reason": "sw_thermal_slowdown", "seconds": 8.0, "share": 0.4}]
    assert back["notes"] == ["GPU 0: the sw_power_cap counter went back (9000000 -> 2000000 us: a driver "
                             "reload or a GPU reset?), not judged"]
    # more counted than the wall time between the readings (the query's own time): at most all of it
    assert fingerprint.held_down(reading(0.0, g0=g0), reading(2.0, g0={"sw_power_cap": 3_100_000}))["held"] \
        == [{"gpu": 0, "reason": "sw_power_cap", "seconds": 2.0, "share": 1.0}]
    # a GPU read at one end only: said, the other judged
    two = fingerprint.held_down(reading(0.0, g0=g0), reading(10.0, g0={"sw_power_cap": 6_000_000}, g1=g0))
    assert two["notes"] == ["GPU 1: read at the end only"] and [h["gpu"] for h in two["held"]] == [0]
    # a reason answered [N/A] at one end: not judged
    assert fingerprint.held_down(reading(0.0, g0={}), reading(10.0, g0=g0))["held"] == []
    # no counters at one end: nothing measured, and why
    none = fingerprint.held_down({"at": 0.0, "counters": None, "why": "this driver does not know x"},
                                 reading(10.0, g0=g0))
    assert none == {"how": None, "why": "this driver does not know x"}
    assert fingerprint.held_text(none) == [] and fingerprint.held_text(None) == []


def test_sampled_reasons_are_the_share_of_the_samples_each_was_active():
    idle, thermal = {0: [], 1: []}, {0: ["sw_thermal_slowdown"], 1: []}
    samples = [idle] * 4 + [thermal] * 6 + [{0: ["hw_slowdown"]}]  # GPU 1 missing from the last
    held = fingerprint.sampled(samples, 22.0)
    assert held["how"] == "sampled" and held["samples"] == 11
    assert held["held"] == [
        {"gpu": 0, "reason": "sw_thermal_slowdown", "seconds": 12.0, "share": 0.545, "samples": 6,
         "sampled": 11},
        {"gpu": 0, "reason": "hw_slowdown", "seconds": 2.0, "share": 0.091, "samples": 1, "sampled": 11}]
    assert fingerprint.held_text(held) == [
        "GPU 0 held by sw_thermal_slowdown for 55% of the measurement (6 of 11 samples)",
        "GPU 0 held by hw_slowdown for 9% of the measurement (1 of 11 samples)"]
    # one sample in 30 (3%): under the floor
    assert fingerprint.sampled([idle] * 29 + [thermal], 30.0)["held"] == []
    assert fingerprint.sampled([], 10.0)["how"] is None and fingerprint.sampled([idle], 0.0)["how"] is None


def mask_run(*masks):
    """A run() answering the .active query with ``masks`` per GPU (hex), as nvidia-smi prints it."""
    def run(argv):
        return 0, "".join("%d, %s\n" % (i, m) for i, m in enumerate(masks)), ""
    return run


def test_the_active_mask_names_the_slowdowns_only():
    # gpu_idle | applications_clocks_setting: no slowdown; hw_slowdown with its cause: the cause
    active, field = fingerprint.read_active(mask_run("0x0000000000000003", "0x0000000000000048",
                                                     "0x0000000000000008", "0x0000000000000014"), "smi")
    assert field == "clocks_event_reasons.active"
    assert active == {0: [], 1: ["hw_thermal_slowdown"], 2: ["hw_slowdown"],
                      3: ["sw_power_cap", "sync_boost"]}


def test_the_counters_as_nvidia_smi_answers_them():
    out = ("0, 4180250000, 0, 12500000, 0, 0\n"
           "1, [N/A], [N/A], [N/A], [N/A], [N/A]\n")
    asked = []

    def run(argv):
        asked.append(argv)
        return 0, out, ""
    r = fingerprint.read_clocks(run, "smi", clock=iter([10.0, 10.2]).__next__)
    assert asked == [["smi", "--query-gpu=index," + ",".join(fingerprint.COUNTER_FIELDS),
                      "--format=csv,noheader,nounits"]]
    assert r == {"at": 10.1, "counters": {0: {"sw_power_cap": 4180250000, "sync_boost": 0,
                                              "sw_thermal_slowdown": 12500000, "hw_thermal_slowdown": 0,
                                              "hw_power_brake_slowdown": 0}}}
    unknown = fingerprint.read_clocks(
        lambda argv: (2, 'Field "clocks_event_reasons_counters.sw_power_cap" is not a valid field to '
                         'query.\n', ""),
        "smi")
    assert unknown["counters"] is None
    assert unknown["unknown"] == "clocks_event_reasons_counters.sw_power_cap"


def standin_state(tmp_path, monkeypatch, data):
    state = tmp_path / "smi.json"
    monkeypatch.setenv("NVIDIA_SMI_STANDIN_STATE", str(state))
    state.write_text(json.dumps(data))
    return state


def thermal_from_now(state, **more):
    """The stand-in's GPU 0 held by a thermal slowdown from now on; the monotonic time it began."""
    began = time.monotonic()
    state.write_text(json.dumps(dict({"gpus": [{"slowdown": {"reason": "sw_thermal_slowdown",
                                                            "since": time.time()}}, {}]}, **more)))
    return began


def test_a_watch_reads_the_counters_at_both_ends(tmp_path, monkeypatch):
    """The stand-in's GPUs idle when the watch starts, GPU 0 held by a thermal slowdown a moment
    later: the time it was held is the counter's growth."""
    state = standin_state(tmp_path, monkeypatch, {})
    w = fingerprint.watch(fingerprint.run_argv, STANDIN)
    assert w.start["counters"][0]["sw_thermal_slowdown"] == 12500000
    # a second before the slowdown: a reading's time is halfway through its query, which a loaded
    # machine stretches (12 test workers on 2 cores: 0.3 s was not enough to leave the share under 1)
    time.sleep(1.0)
    began = thermal_from_now(state)
    time.sleep(1.0)
    held = w.stop()
    ended = time.monotonic()
    assert held["how"] == "counters" and held["notes"] == [] and w.stop() is held
    (h,) = held["held"]
    assert h["gpu"] == 0 and h["reason"] == "sw_thermal_slowdown"
    # held from the slowdown's start to the end reading: at least the second slept, at most until
    # the watch stopped; the share is of the time between the two readings
    assert 0.95 <= h["seconds"] <= ended - began + 0.05 and h["share"] < 1.0
    # the share is of the unrounded times; both seconds are rounded to 0.1 (each off by 0.05 at most)
    assert abs(h["share"] * held["seconds"] - h["seconds"]) <= 0.05 + 0.05 * h["share"] + 1e-9


def test_the_standin_starts_a_slowdown_after_its_first_query(tmp_path, monkeypatch):
    state = standin_state(tmp_path, monkeypatch, {"gpus": [
        {"slowdown": {"reason": "hw_thermal_slowdown", "after_s": 60}}, {}]})
    asked = time.time()
    fingerprint.take(fingerprint.run_argv, STANDIN, {})
    since = json.loads(state.read_text())["gpus"][0]["slowdown"]["since"]
    assert asked + 60 <= since <= time.time() + 60  # stamped by that first query
    assert fingerprint.read_active(fingerprint.run_argv, STANDIN)[0] == {0: [], 1: []}
    thermal_from_now(state)
    assert fingerprint.read_active(fingerprint.run_argv, STANDIN)[0] == {0: ["sw_thermal_slowdown"], 1: []}


def test_a_driver_without_counters_is_sampled(tmp_path, monkeypatch):
    old = {"unknown_fields": ["clocks_event_reasons_counters.*"]}
    state = standin_state(tmp_path, monkeypatch, old)
    w = fingerprint.Watch(fingerprint.run_argv, STANDIN, every_s=0.2)
    assert w.start["counters"] is None and w.thread is not None
    time.sleep(0.3)
    thermal_from_now(state, **old)
    time.sleep(1.2)
    held = w.stop()
    assert not w.thread.is_alive()
    assert held["how"] == "sampled" and held["why"] == \
        "this driver does not know clocks_event_reasons_counters.sw_power_cap"
    (h,) = held["held"]
    assert h["reason"] == "sw_thermal_slowdown" and 1 <= h["samples"] < h["sampled"]
    assert fingerprint.held_text(held)[0].startswith("GPU 0 held by sw_thermal_slowdown for ")
    # nor the .active mask by its newest name: the older one is sampled; neither: said
    standin_state(tmp_path, monkeypatch, {"gpus": [{"clocks_event_reasons": ["sw_power_cap"]}],
                                          "unknown_fields": ["clocks_event_reasons*"]})
    w = fingerprint.Watch(fingerprint.run_argv, STANDIN, every_s=0.2)
    assert w.fields == ("clocks_throttle_reasons.active",)
    assert w.stop()["held"][0]["reason"] == "sw_power_cap"
    standin_state(tmp_path, monkeypatch, {"gpus": [{}], "unknown_fields": ["clocks_*"]})
    none = fingerprint.Watch(fingerprint.run_argv, STANDIN).stop()
    assert none["how"] is None and "does not know clocks_throttle_reasons.active" in none["why"]
    assert fingerprint.watch(fingerprint.run_argv, "").stop() == {"how": None, "why": "no nvidia-smi asked"}


def watched(*held, seconds=50.0):
    """A watch's answer holding ``held`` = (gpu, reason, share)."""
    return {"how": "counters", "seconds": seconds, "floor": 0.05, "notes": [],
            "held": [{"gpu": g, "reason": r, "seconds": round(s * seconds, 1), "share": s}
                     for g, r, s in held]}


def test_a_slowdown_the_baseline_did_not_have_is_a_change_of_the_host():
    thermal = watched((0, "sw_thermal_slowdown", 0.62))
    # a baseline not held: the slowdown is what changed, with the power limit's kind of changes
    now = fp(held_down=thermal, gpus=fingerprint.parse_gpus(QUERY.replace(", 8, ", ", 16, ")))
    assert fingerprint.differences(fp(held_down=watched()), now) == [
        "GPU 1: power limit 300 W -> 250 W",
        "GPU 0: held by sw_thermal_slowdown for 62% of the measurement (31 of 50 s)"]
    assert fingerprint.held_text(thermal, watched()) == []
    # the baseline held by the same reason: no change, named with the baseline's share
    baseline = watched((0, "sw_thermal_slowdown", 0.4))
    assert fingerprint.differences(fp(held_down=baseline), fp(held_down=thermal)) == []
    assert fingerprint.held_text(thermal, watched((0, "sw_thermal_slowdown", 0.4))) == [
        "GPU 0 held by sw_thermal_slowdown for 62% of the measurement (31 of 50 s; 40% in the "
        "last-known-good's)"]
    # the baseline held, this run not: its slowdown is gone
    baseline = watched((1, "sw_power_cap", 0.41))
    assert fingerprint.differences(fp(held_down=baseline), fp(held_down=watched())) == \
        ["GPU 1: no longer held by sw_power_cap (41% of the last-known-good's measurement)"]
    # a baseline that measured nothing (an older record, no counters nor samples): not compared
    for before in (fp(), fp(held_down={"how": None, "why": "no nvidia-smi asked"})):
        assert fingerprint.differences(before, fp(held_down=thermal)) == []
        assert fingerprint.held_text(thermal, before.get("held_down")) == [
            "GPU 0 held by sw_thermal_slowdown for 62% of the measurement (31 of 50 s)"]


def test_the_gates_messages_name_the_slowdowns_the_changes_first():
    r = {"failed_cases": ["coding"], "time_to_verdict_s": 50.0, "cases": [],
         "failures": [{"message": "coding: decode tok/s 30.1 < 45"}],
         "fingerprint_changes": ["GPU 0: held by sw_thermal_slowdown for 62% of the measurement "
                                 "(31 of 50 s)"],
         "slowdowns": ["GPU 1 held by sw_power_cap for 45% of the measurement (22 of 50 s; 40% in the "
                       "last-known-good's)"]}
    assert verdict.failure_message(r) == (
        "gate failed (coding): host changed since the last-known-good: GPU 0: held by sw_thermal_slowdown "
        "for 62% of the measurement (31 of 50 s); GPU 1 held by sw_power_cap for 45% of the measurement "
        "(22 of 50 s; 40% in the last-known-good's); coding: decode tok/s 30.1 < 45")
    assert verdict.summary(dict(r, fingerprint_changes=[])).startswith(
        "passed in 50s: GPU 1 held by sw_power_cap for 45% of the measurement")
    assert verdict.host_changes({"slowdowns": []}) == ""


# a small plan for `bench gate`: one judged case, the role's warmup cut to one request
GATE_VARS = {"sglang_gate_plan": {"coding": dict(PLAN["coding"], max_tokens=256)}, "sglang_gate_warmup": 1,
             "sglang_gate_thresholds": {"nextn_3step": {"coding": {"min_tok_s": 1.0}}}}


def bench_gate(*args, state):
    return bench("gate", "--nvidia-smi", STANDIN, "--quiet", *args,
                 env={"NVIDIA_SMI_STANDIN_STATE": str(state)})


def test_bench_gate_names_a_slowdown_that_held_the_gpus_during_its_measurement(emulator, tmp_path):
    """A baseline taken while the stand-in's GPUs ran free; then a run whose GPU 0 is idle at the
    start and held by a thermal slowdown from 2 s after the fingerprint's query on: the gate's
    message, its table and the history name the slowdown as what changed on the host, with its
    share of the time."""
    emu = emulator("nextn_3step", env=FAST)
    state, hist = tmp_path / "smi.json", tmp_path / "history.jsonl"
    state.write_text("{}")
    vars_file = tmp_path / "gate.yml"
    vars_file.write_text(json.dumps(GATE_VARS))
    p = bench_gate("--url", emu.url, "--vars", vars_file, "--history", hist, state=state)
    assert p.returncode == 0, p.stderr
    base = json.loads(hist.read_text())
    assert base["fingerprint"]["held_down"]["how"] == "counters"
    assert base["fingerprint"]["held_down"]["held"] == [] and base["slowdowns"] == []

    state.write_text(json.dumps({"gpus": [{"slowdown": {"reason": "sw_thermal_slowdown", "after_s": 2.0}},
                                          {}]}))
    # a decode bar the server cannot reach: the failure message says what held the GPUs first
    vars_file.write_text(json.dumps(dict(GATE_VARS, sglang_gate_thresholds={
        "nextn_3step": {"coding": {"min_tok_s": 99999.0}}})))
    out = tmp_path / "r.json"
    p = bench_gate("--url", emu.url, "--vars", vars_file, "--baseline-history", hist, "--history", hist,
                   "--json", out, state=state)
    assert p.returncode == 1, p.stderr
    r = json.loads(out.read_text())
    # idle at the start: the fingerprint's own reading saw nothing hold GPU 0
    assert r["fingerprint"]["gpus"][0]["clock_events"] == ["gpu_idle"]
    held = r["fingerprint"]["held_down"]
    (h,) = held["held"]
    assert (h["gpu"], h["reason"]) == (0, "sw_thermal_slowdown")
    # from 2 s after the fingerprint's query (the watch started a moment after it) to the end
    assert 1.0 < h["seconds"] < held["seconds"] and h["share"] < 1.0
    (said,) = r["fingerprint_changes"]
    assert said.startswith("GPU 0: held by sw_thermal_slowdown for %.0f%% of the measurement ("
                           % (100 * h["share"])) and r["slowdowns"] == []
    assert "bench gate: gate failed (coding): host changed since the last-known-good: %s; coding: " % said \
        in p.stderr
    assert "host changed since the last-known-good: " + said in p.stdout  # the table
    runs = bench_history.annotate(bench_history.read(hist))
    assert [r["host_changes"] for r in runs] == [[], [said]]
