"""Why a figure moved (sglang_perf/attribution.py): decode tok/s = accept length / verify-step
time, so a change against a baseline splits into its acceptance part and its step-time part, and
the cause is named. Pure cases at their edges, then the engine against emulators whose acceptance
dropped (the demo's 1-step deploy after a 3-step baseline), whose step time rose (a slower GPU
clock), or neither."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from bench import history as history_table
from conftest import MODEL_ARGS, PROFILE_ARGS, ROOT, Emulator
from sglang_perf import attribution, engine, history

IV = {"lower": 3.30, "upper": 3.50}


def iv(lo, hi):
    return {"lower": lo, "upper": hi}


def test_the_parts_multiply_back_to_the_change():
    a = attribution.split({"tok_s": 40.0, "accept_len": 2.4}, {"tok_s": 56.0, "accept_len": 3.4})
    tok, al, step = (1 + a[k] / 100 for k in ("tok_s_pct", "accept_len_pct", "step_time_pct"))
    assert tok == pytest.approx(al / step)
    assert a["step_time_s"] == pytest.approx(2.4 / 40.0)
    assert a["step_time_s_before"] == pytest.approx(3.4 / 56.0)


@pytest.mark.parametrize("now, cause", [
    # accept length below its interval's reach of the baseline, step unchanged: the drafts
    ({"tok_s": 40.0, "accept_len": 2.4, "accept_len_interval": iv(2.3, 2.5),
      "step_time_interval": iv(0.058, 0.062)}, "acceptance"),
    # the same accept length, a longer step: clocks, power, PCIe, the release
    ({"tok_s": 46.0, "accept_len": 3.4, "accept_len_interval": IV, "step_time_interval": iv(0.071, 0.077)},
     "system"),
    ({"tok_s": 33.0, "accept_len": 2.4, "accept_len_interval": iv(2.3, 2.5),
      "step_time_interval": iv(0.070, 0.076)}, "both"),
    # within the intervals: noise
    ({"tok_s": 55.0, "accept_len": 3.38, "accept_len_interval": IV, "step_time_interval": iv(0.059, 0.064)},
     "none"),
    # a faster server: named by what made it faster
    ({"tok_s": 70.0, "accept_len": 3.4, "accept_len_interval": IV, "step_time_interval": iv(0.046, 0.051)},
     "system"),
])
def test_the_cause_is_the_part_that_moved_the_speed(now, cause):
    assert attribution.split(now, {"tok_s": 56.0, "accept_len": 3.4})["cause"] == cause


def test_a_part_that_moved_against_the_change_is_not_its_cause():
    """The 1-step profile after a 3-step baseline: accept length -46%, a verify step 22% shorter."""
    a = attribution.split({"tok_s": 39.0, "accept_len": 1.84, "accept_len_interval": iv(1.82, 1.88),
                           "step_time_interval": iv(0.0465, 0.0480)}, {"tok_s": 56.0, "accept_len": 3.4})
    assert a["cause"] == "acceptance" and a["step_time_pct"] < -15
    assert a["text"].startswith("decode -30.4% = accept length -45.9% and step time ")


def test_a_small_change_outside_the_interval_is_noise_between_runs():
    """Seen in CI: the same emulator profile measured twice on a loaded machine, the step 2.2% longer
    and outside the second run's (narrow) interval: the baseline's own noise is not in that interval."""
    before = {"tok_s": 245.0, "accept_len": 3.31}
    now = {"tok_s": 239.6, "accept_len": 3.31, "accept_len_interval": iv(3.25, 3.37),
           "step_time_interval": iv(0.01375, 0.01385)}
    a = attribution.split(now, before)
    assert 2 < a["step_time_pct"] < attribution.MIN_CHANGE_PCT and a["cause"] == "none"
    worse = attribution.split(dict(now, tok_s=225.0, step_time_interval=iv(0.0146, 0.0148)), before)
    assert worse["step_time_pct"] > attribution.MIN_CHANGE_PCT and worse["cause"] == "system"


def test_without_intervals_a_small_change_is_no_cause():
    before = {"tok_s": 56.0, "accept_len": 3.4}
    assert attribution.split({"tok_s": 55.0, "accept_len": 3.35}, before)["cause"] == "none"
    assert attribution.split({"tok_s": 50.0, "accept_len": 3.4}, before)["cause"] == "system"


@pytest.mark.parametrize("now, before", [({"tok_s": None}, {"tok_s": 56.0}), ({"tok_s": 40.0}, {"tok_s": 0}),
                                         ({"tok_s": 40.0}, {})])
def test_nothing_to_split_without_both_speeds(now, before):
    assert attribution.split(now, before) is None


def test_without_speculation_the_step_is_one_token():
    a = attribution.split({"tok_s": 20.0, "accept_len": None}, {"tok_s": 27.0, "accept_len": None})
    assert a["accept_len_pct"] == 0 and a["cause"] == "system"
    assert attribution.step_time_s(25.0, None) == pytest.approx(0.04)


# ------------------------------------------------------- the engine against the emulator ------
FAST = {"SGLEMU_SPEED_SCALE": "4"}


def measured(emulator, profile, env, baseline=None):
    emu = emulator(profile, env=env)
    return engine.run({"url": emu.url, "requests": 6, "warmup": 2, "max_tokens": 96, "baseline": baseline})


@pytest.fixture(scope="module")
def baseline():
    """A 3-step run's figures, as a history record keeps them (history.baseline)."""
    emu = Emulator(list(MODEL_ARGS) + list(PROFILE_ARGS["nextn_3step"]), env=FAST, wait=True)
    try:
        r = engine.run({"url": emu.url, "requests": 6, "warmup": 2, "max_tokens": 96})
    finally:
        emu.stop()
    return {"time": "t", "profile": "nextn_3step", "decode_tok_s": r["decode_tok_s"]["median"],
            "accept_len": r["accept_len"]}


@pytest.mark.parametrize("profile, env, cause", [
    ("nextn_1step", FAST, "acceptance"),            # the demo's rolled-back 1-step deploy
    ("nextn_3step", {"SGLEMU_SPEED_SCALE": "3"}, "system"),  # each verify step a third longer
    ("nextn_3step", FAST, "none"),                  # the same server again
])
def test_the_engine_names_the_cause_against_a_baseline(emulator, baseline, profile, env, cause):
    r = measured(emulator, profile, env, baseline)
    a = r["attribution"]
    assert a["cause"] == cause, a["text"]
    assert set(a) >= {"tok_s_pct", "accept_len_pct", "step_time_pct", "cause"}
    step = r["intervals"]["step_time_s"]
    assert step["lower"] <= a["step_time_s"] <= step["upper"]


def test_no_baseline_no_attribution(emulator):
    assert "attribution" not in measured(emulator, "nextn_3step", FAST)


def test_bench_gate_writes_the_roles_history_and_names_the_cause_against_it(emulator, tmp_path):
    """The CLI contract: `bench gate --url URL --history FILE` appends the run in the role's history
    format (bench history reads it); `--baseline-history FILE` compares with it, and the --json
    result holds per case its attribution (tok_s_pct, accept_len_pct, step_time_pct, cause)."""

    small = tmp_path / "small.yml"
    small.write_text(yaml.safe_dump({"sglang_gate_plan": {
        "coding": {"prompts": "coding", "concurrency": 1, "requests": 6, "max_requests": 6,
                   "max_tokens": 96}},
        "sglang_gate_thresholds": {p: {"coding": {}} for p in ("nextn_3step", "nextn_1step")}}))
    hist = tmp_path / "history" / "ct129.jsonl"

    def gate(url, *extra, rc=0):
        out = tmp_path / "r.json"
        p = subprocess.run([sys.executable, "-m", "bench", "gate", "--url", url, "--vars", str(small),
                            "--quiet", "--json", str(out), *extra], cwd=str(ROOT), capture_output=True,
                           text=True, timeout=300)
        assert p.returncode == rc, p.stderr
        return json.loads(out.read_text())

    base = emulator("nextn_3step", env=FAST)
    gate(base.url, "--profile", "nextn_3step", "--history", str(hist), "--host", "ct129")
    rec = history.read(str(hist))[-1]
    assert (rec["host"], rec["profile"], rec["verdict"], rec["action"]) == \
        ("ct129", "nextn_3step", "pass", "nothing")
    assert history.last_passing(history.read(str(hist)), "nextn_3step") == rec
    # the 1-step server also fails the capacity check (its KV pool holds less than the 3-step
    # profile's promised context): exit 1, the figures written all the same
    for profile, env, cause, rc in (("nextn_1step", FAST, "acceptance", 1),
                                    ("nextn_3step", {"SGLEMU_SPEED_SCALE": "3"}, "system", 0)):
        emu = emulator(profile, env=env)
        r = gate(emu.url, "--profile", "nextn_3step", "--baseline-history", str(hist), rc=rc)
        a = r["cases"][0]["attribution"]
        assert set(a) >= {"tok_s_pct", "accept_len_pct", "step_time_pct", "cause"} and a["cause"] == cause, a


def test_the_history_table_shows_each_cases_split_against_the_last_known_good():
    split = attribution.split({"tok_s": 39.0, "accept_len": 1.84}, {"tok_s": 56.0, "accept_len": 3.4})
    line = history_table.case_line({"case": "coding", "concurrency": 1, "decode_tok_s": {"median": 39.0},
                            "accept_len": 1.84, "passed": False, "attribution": split})
    assert line.endswith("FAILED  vs last-known-good: " + split["text"]) and "cause acceptance" in line
    plain = history_table.case_line({"case": "coding", "concurrency": 1, "passed": True})
    assert "last-known-good" not in plain
