"""The tuner's decisions (plugins/module_utils/sglang_perf/judge/tune.py): the space, the settings it
writes over the host's profiles, the acceptance and step-time model, and the search against
server families whose truth it never sees (tests/tune_families.py)."""
from __future__ import annotations

import random

import pytest
from sglang_perf.plan import drafter, profile
from sglang_perf.judge import selection, setting, tune
from sglang_perf.judge import tune_launch

from conftest import role_defaults
from tune_families import Family, run

SPACE = tune.space_of({})
KEYS = tune.candidates(SPACE, {"sglang"})
CURRENT = ("sglang", "chain", 3, False, 0.88)


# -------------------------------------------------------------------------------- space ------
def test_the_default_space_is_the_issues():
    # no speculation, NEXTN 1-6 with and without adaptive, DFLASH 4/8/16, seven fractions
    assert len(KEYS) == (1 + 12 + 3) * 7 == 112
    assert SPACE["mem_fractions"] == [0.8, 0.82, 0.84, 0.86, 0.88, 0.9, 0.92]
    assert len(tune.candidates(SPACE, set())) == (1 + 12) * 7  # no drafter profile: no blocks
    both = tune.candidates(tune.space_of({}, ["sglang", "vllm"]), {"sglang", "vllm"})
    # vLLM has no adaptive steps: 1 + 6 + 3 per fraction
    assert len(both) == 112 + (1 + 6 + 3) * 7
    assert not [k for k in both if k[0] == "vllm" and k[3]]


@pytest.mark.parametrize("data, message", [
    ([1, 2], "must be a mapping"),
    ({"steps": [1]}, "unknown key(s) steps"),
    ({"chain_steps": 3}, "chain_steps must be a list"),
    ({"chain_steps": [0, 2]}, "whole numbers of at least 1"),
    ({"blocks": [1]}, "at least 2 tokens"),
    ({"adaptive": ["yes"]}, "adaptive must list true and/or false"),
    ({"mem_fractions": [0.8, 1.2]}, "fractions between 0 and 1"),
    ({"mem_fractions": []}, "fractions between 0 and 1"),
    ({"engines": ["tgi"]}, "'tgi' is not an engine"),
])
def test_a_bad_space_is_refused_naming_the_key(data, message):
    with pytest.raises(tune.SpaceError, match=None) as e:
        tune.space_of(data)
    assert message in str(e.value)


def test_a_space_file_narrows_and_widens():
    s = tune.space_of({"chain_steps": [2, 3], "adaptive": [False], "blocks": [], "no_spec": False,
                       "mem_fractions": [0.9, 0.85, 0.9]})
    keys = tune.candidates(s, {"sglang"})
    assert sorted({k[2] for k in keys}) == [2, 3] and {k[4] for k in keys} == {0.85, 0.9}
    assert len(keys) == 4
    wide = tune.candidates(tune.space_of({"chain_steps": list(range(1, 9)), "adaptive": [False]}), set())
    assert max(k[2] for k in wide) == 8


# ----------------------------------------------------------------------------- settings ------
def _profiles():
    return role_defaults()["sglang_profiles"]  # flat, drafters placed (as the deploy plan has them)


def test_a_setting_is_written_over_the_hosts_own_profile_keeping_its_promises():
    profiles = _profiles()
    base, diff = tune.settings_of(("sglang", "chain", 5, True, 0.9), profiles, "nextn_3step")
    assert base == "nextn_3step"
    assert diff == {"speculative_num_steps": 5, "speculative_num_draft_tokens": 6,
                    "speculative_adaptive": True, "mem_fraction_static": 0.9}
    base, diff = tune.settings_of(("sglang", "none", 0, False, 0.88), profiles, "nextn_3step")
    flat = tune.flat(base, profiles[base], diff)
    assert not any(k.startswith("speculative_") for k in flat)
    assert (flat["context_length"], flat["max_running_requests"]) == (131072, 16)
    # a block: over the host's drafter profile, with the current profile's promises
    base, diff = tune.settings_of(("sglang", "block", 8, False, 0.9), profiles, "nextn_1step")
    flat = tune.flat(base, profiles[base], diff)
    assert base == "dflash" and flat["speculative_num_draft_tokens"] == 8
    assert flat["draft_model"]["repo"] == "z-lab/Qwen3.6-27B-DFlash"
    assert "max_running_requests" not in flat  # nextn_1step leaves it to the engine
    # each passes the profile checks the deploy plan runs (adaptive from 5 steps: a 0.5.23 candidate)
    for key in (("sglang", "chain", 5, True, 0.9), ("sglang", "block", 16, False, 0.92),
                ("vllm", "chain", 3, False, 0.9), ("vllm", "block", 16, False, 0.9)):
        base, diff = tune.settings_of(key, profiles, "nextn_3step")
        name = setting.key_name(key)
        flat = tune.flat(base, profiles[base], diff)
        assert profile.sglang_profile_errors({name: flat}, name, 2, version="0.5.23" if key[0] == "sglang"
                                             else "0.33.0", engine=key[0]) == [], key


def test_a_block_needs_a_drafter_profile_of_its_engine():
    profiles = {k: v for k, v in _profiles().items() if "dflash" not in k}
    assert tune.settings_of(("sglang", "block", 8, False, 0.9), profiles, "nextn_3step") is None


def test_a_profile_without_an_engine_runs_on_the_hosts():
    """As the deploy reads it (profile.profile_engine): a profile's own engine, else sglang_engine."""
    profiles = {"mine": {"context_length": 65536}, "theirs": {"engine": "sglang", "context_length": 65536}}
    assert tune.template_of(profiles, "vllm", "none", "mine", "vllm") == "mine"
    assert tune.template_of(profiles, "sglang", "none", "mine", "vllm") == "theirs"
    assert tune.template_of(profiles, "vllm", "none", "mine") is None
    assert tune.settings_of(("vllm", "none", 0, False, 0.9), profiles, "mine", "vllm") == (
        "mine", {"mem_fraction_static": 0.9})


def test_names_labels_and_cost():
    key = ("sglang", "chain", 4, True, 0.86)
    assert setting.key_name(key) == "tune_sglang_chain4_adaptive_m86"
    assert setting.key_label(key) == "SGLang NEXTN 4 steps adaptive, mem 0.86"
    assert setting.key_label(("vllm", "block", 16, False, 0.9)) == "vLLM DFLASH block 16, mem 0.90"
    ordered = sorted([("sglang", "block", 4, False, 0.8), ("sglang", "chain", 3, True, 0.8),
                      ("sglang", "chain", 3, False, 0.9), ("sglang", "chain", 3, False, 0.8),
                      ("sglang", "none", 0, False, 0.92)], key=selection.cost)
    assert ordered == [("sglang", "none", 0, False, 0.92), ("sglang", "chain", 3, False, 0.8),
                       ("sglang", "chain", 3, False, 0.9), ("sglang", "chain", 3, True, 0.8),
                       ("sglang", "block", 4, False, 0.8)]


def test_a_candidates_kind_comes_from_its_algorithm():
    """An EAGLE3 profile (a drafter's chain) is a kind of its own, not a DFLASH block of its size."""
    drafter_p = {"repo": "x/y", "revision": "main", "params_b": 1, "kv_bytes_per_token": 1}
    eagle3 = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
              "speculative_num_draft_tokens": 4, "draft_model": drafter_p}
    assert setting.profile_kind(eagle3, "sglang") == "eagle3"
    assert setting.profile_kind(dict(eagle3, speculative_algorithm="dflash"), "sglang") == "block"
    assert setting.profile_kind({"speculative_algorithm": "NEXTN"}, "sglang") == "chain"
    assert setting.profile_kind({"engine": "vllm", "speculative_algorithm": "mtp"}) == "chain"
    vllm_eagle3 = {"engine": "vllm", "speculative_algorithm": "eagle3", "draft_model": drafter_p}
    assert setting.profile_kind(vllm_eagle3) == "eagle3"
    assert setting.profile_kind({}, "sglang") == "none"
    key = ("sglang", "eagle3", 3, False, 0.88)
    assert setting.key_label(key) == "SGLang EAGLE3 3 steps, mem 0.88"
    assert setting.key_name(key) == "tune_sglang_eagle3_3_m88"
    assert setting.draft_tokens(key) == 4 and selection.cost(key)[0] is True  # a drafter


# -------------------------------------------------------------------------------- model ------
@pytest.mark.parametrize("n", [1, 6, 1024, 100000])
def test_the_step_time_line_at_any_size(n):
    rnd = random.Random(n)
    points = [(x % 7 + 1, 0.04 + 0.005 * (x % 7 + 1) + rnd.uniform(-1e-4, 1e-4)) for x in range(n)]
    a, b = tune.fit_line(points)
    if n == 1:  # one depth: its time, no slope
        assert (a, b) == (points[0][1], 0.0)
    else:
        assert a == pytest.approx(0.04, abs=2e-3) and b == pytest.approx(0.005, abs=5e-4)
    assert tune.fit_line([]) is None


def test_a_deep_launch_tells_every_shallower_accept_length():
    pos = [0.8, 0.6, 0.45, 0.3, 0.2, 0.1]
    assert tune.accept_from_positions(pos, 1) == pytest.approx(1.8)
    assert tune.accept_from_positions(pos, 6) == pytest.approx(3.45)
    assert tune.accept_from_positions(pos, 7) is None and tune.accept_from_positions(None, 1) is None
    assert tune.accept_from_positions(pos, 0) == 1.0


# ------------------------------------------------------------------------------- search ------
def _check(family, refused=None, budget=12, draws=(0, 1, 2)):
    for draw in draws:
        tuner, answer = run(family, KEYS, CURRENT, refused=refused, budget=budget, seed=draw)
        assert len(tuner.launches) <= budget
        best = family.best(KEYS, refused or {})
        assert answer["winner"] is not None
        assert family.truth(answer["winner"])["passes"]
        assert family.truth(answer["winner"])["tok_s"] >= 0.97 * family.truth(best)["tok_s"], (draw, answer)
        assert not [k for k, _ in tuner.launches if k in (refused or {})]
        assert set(answer["reasons"]) == set(KEYS) - {answer["winner"]}
    return tuner, answer


DEEPER = Family("deeper MTP pays", {"chain": [0.9, 0.92, 0.9, 0.85, 0.8, 0.7], "block": [0.7]},
                {"chain": (4, 2.5), "block": (12, 0.5)}, 37.5, drafter_frac=0.04, spread=0.01)
DRAFTER_MEMORY = Family("a drafter, at more memory",
                        {"chain": [0.8, 0.9, 0.85, 0.4, 0.35, 0.3], "block": [0.88]},
                        {"chain": (4, 5.2), "block": (10, 0.4)}, 37.5, drafter_frac=0.08, kv_zero=0.60,
                        spread=0.01)
CURRENT_BEST = Family("the current profile is best",
                      {"chain": [0.75, 0.96, 0.96, 0.40, 0.35, 0.3], "block": [0.6]},
                      {"chain": (4, 5.2), "block": (15, 0.8)}, 37.45, drafter_frac=0.04, kv_zero=0.66,
                      spread=0.015)
DRAFTER_OOM = Family("a drafter that does not start above 0.84",
                     {"chain": [0.8, 0.9, 0.85, 0.4, 0.35, 0.3], "block": [0.9]},
                     {"chain": (4, 5.2), "block": (9, 0.3)}, 37.5, drafter_frac=0.02,
                     oom_above={"block": 0.84},
                     kv_zero=0.55, spread=0.01)


def test_deeper_mtp_is_found_at_the_lowest_fraction_that_holds():
    tuner, answer = _check(DEEPER)
    engine, kind, depth, adaptive, mem = answer["winner"]
    assert (kind, adaptive) == ("chain", False) and depth >= 5 and mem < 0.88 and answer["beats_current"]
    # shallower depths were read off the deep launch's positions, not launched
    assert len(tuner.launches) <= 7
    above = (engine, kind, depth, adaptive, 0.92)
    assert answer["reasons"][above] == "not launched: a higher fraction than mem %.2f, which passed (speed " \
        "does not follow the fraction; the lower is the cheaper)" % mem
    assert answer["reasons"][CURRENT].startswith("slower: ")


def test_a_drafter_that_needs_more_memory_than_the_current_fraction():
    tuner, answer = _check(DRAFTER_MEMORY)
    assert answer["winner"][1] == "block" and answer["winner"][4] == 0.9
    # it failed capacity at the current fraction, and the reason says so for that launch
    first = next(o for k, o in tuner.launches if k[1] == "block")
    assert first["failed_cases"] == ["capacity"]
    # below the fraction that failed, the memory model (moved to the launch's report) says no
    assert answer["reasons"][("sglang", "block", 16, False, 0.84)].startswith(
        "not launched: the memory model, moved to what the launch at mem")


def test_a_drafter_that_runs_out_of_memory_is_moved_down():
    tuner, answer = _check(DRAFTER_OOM)
    assert answer["winner"][1] == "block" and answer["winner"][4] <= 0.84
    assert any(not o.get("started", True) for _, o in tuner.launches)
    assert tuner.answer()["reasons"][next(k for k, o in tuner.launches if not o.get("started", True))] \
        .startswith("did not start (out of memory): torch.OutOfMemoryError")


def test_a_start_failure_its_log_does_not_explain_is_tried_once_lower():
    family = Family("a drafter that dies above 0.84 without a word",
                    {"chain": [0.8, 0.9, 0.85, 0.4, 0.35, 0.3], "block": [0.9]},
                    {"chain": (4, 5.2), "block": (9, 0.3)}, 37.5, drafter_frac=0.02,
                    oom_above={"block": 0.84}, kv_zero=0.55, spread=0.01, oom_says=False)
    tuner, answer = _check(family)
    assert answer["winner"][1] == "block"
    assert [k[4] for k, o in tuner.launches if k[1] == "block"][:2] == [0.88, 0.8]


def test_a_smaller_block_is_launched_not_read_off_a_larger_one():
    """Block 8 accepts far more per position than block 16's first 7 positions: read off block
    16 it would look slower than 3-step MTP; launched, it wins."""
    family = Family("a drafter best at block 8",
                    {"chain": [0.8, 0.85, 0.8, 0.4, 0.35, 0.3], "block": {16: [0.62], 8: [0.95], 4: [0.9]}},
                    {"chain": (4, 5.2), "block": (9, 0.3)}, 37.5, drafter_frac=0.02, kv_zero=0.55,
                    spread=0.01)
    tuner, answer = _check(family)
    assert answer["winner"][1:3] == ("block", 8)
    launched = [k[2] for k, _ in tuner.launches if k[1] == "block"]
    assert launched[0] == 16 and 8 in launched


def test_a_block_that_cannot_beat_the_leader_even_fully_accepted_is_not_launched():
    family = Family("slow drafter", {"chain": [0.9, 0.92, 0.9, 0.85, 0.8, 0.7], "block": [0.7]},
                    {"chain": (4, 2.5), "block": (60, 0.5)}, 37.5, spread=0.01)
    tuner, answer = _check(family)
    four = ("sglang", "block", 4, False, 0.88)
    assert four not in [k for k, _ in tuner.launches]
    assert answer["reasons"][four].startswith("not launched: even with every draft accepted (4 tokens")


def test_nothing_beats_the_current_profile():
    tuner, answer = _check(CURRENT_BEST)
    assert answer["winner"] == CURRENT and not answer["beats_current"]


def test_refused_settings_are_never_launched_and_say_why():
    refused = {k: "the preflight's reason" for k in KEYS if k[1] == "chain" and k[2] == 6}
    tuner, answer = _check(DEEPER, refused=refused)
    assert all(answer["reasons"][k] == "refused: the preflight's reason" for k in refused)


@pytest.mark.parametrize("budget", [1, 2, 3, 5])
def test_the_budget_is_never_exceeded(budget):
    tuner, answer = run(DRAFTER_MEMORY, KEYS, CURRENT, budget=budget)
    assert len(tuner.launches) <= budget and tuner.next() is None
    if budget == 1:  # the current profile alone: it is the answer
        assert answer["winner"] == CURRENT and [k for k, _ in tuner.launches] == [CURRENT]


def test_held_out_families():
    """Random families (acceptance per position, step costs, drafter memory, start-up limits): the
    winner is within 3% of the best passing setting with 12 launches, whenever the intervals
    (here +-1%) can tell them apart."""
    misses, launches = [], []
    for i in range(60):
        r = random.Random(1000 + i)
        fam = Family("random %d" % i,
                     {"chain": [r.uniform(0.6, 0.95)] + [r.uniform(0.3, 0.97) for _ in range(5)],
                      "block": {n: [r.uniform(0.5, 0.92)] for n in SPACE["blocks"]}},
                     {"chain": (r.uniform(2, 6), r.uniform(1, 7)),
                      "block": (r.uniform(6, 20), r.uniform(0.1, 1.5))},
                     r.uniform(30, 45), kv_zero=r.uniform(0.55, 0.68), drafter_frac=r.uniform(0.0, 0.1),
                     oom_above={"block": r.choice([0.84, 0.86, 0.88, 0.9, 1.0]),
                                "chain": r.choice([0.9, 1.0])},
                     min_tok_s=r.uniform(20, 50), spread=0.01)
        if not fam.truth(CURRENT)["passes"]:
            continue
        tuner, answer = run(fam, KEYS, CURRENT, seed=i)
        launches.append(len(tuner.launches))
        best = fam.best(KEYS)
        if fam.truth(answer["winner"])["tok_s"] < 0.97 * fam.truth(best)["tok_s"]:
            misses.append((i, setting.key_name(best), setting.key_name(answer["winner"])))
    assert len(launches) >= 30 and max(launches) <= 12
    assert misses == []


@pytest.mark.parametrize("config, block", [
    ({"dflash_config": {"block_size": 16}}, 16), ({"block_size": 8}, 8),
    ({"dflash_config": {"block_size": 4}, "block_size": 8}, 4), ({"dflash_config": {}}, None),
    # SGLang's int(): a string of digits and a float count, True is 1; what it refuses says none
    ({}, None), ({"block_size": "16"}, 16), ({"block_size": 16.0}, 16), ({"block_size": True}, 1),
    ({"block_size": "16.0"}, None), ({"block_size": 0}, None), ({"block_size": [16]}, None),
    (None, None), ([16], None)])
def test_the_block_a_drafter_was_trained_for(config, block):
    assert drafter.trained_block(config) == block


def test_a_block_the_drafter_was_not_trained_for_is_named_as_the_engines_run_it():
    assert drafter.block_note("/m/d", 16, 16) is None and drafter.block_note("/m/d", None, 8) is None
    assert drafter.block_note("/m/d", 16, [16]) is None
    note = drafter.block_note("/m/d", 16, 8)
    assert note.startswith("the drafter at /m/d was trained for a block of 16 tokens (its config.json) and "
                           "this setting drafts 8: SGLang resizes the drafter to it")
    assert "'DFLASH block size mismatch'" in note  # SGLang's own log line
    assert "drafts 4, 8:" in drafter.block_note("/m/d", 16, {8, 4}, "the space")


@pytest.mark.parametrize("text, signal", [
    # SGLang 0.5.23 (model_executor/pool_configurator.py, mem_cache/kv_cache_configurator.py)
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", "under"),
    ("ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.8. "
     "Raise --mem-fraction-static above 0.812 (minimum viable = 1 - available/pre = 0.8113).", "under"),
    ("RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
     "max_mamba_cache_size=4, mamba_ratio=5, resulting max_num_reqs=0. Try: (1) reduce "
     "--max-running-requests, (2) increase --mem-fraction-static, or (3) use GPUs with more memory.",
     "under"),
    # vLLM 0.33 (v1/core/kv_cache_planning.py, v1/worker/utils.py)
    ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
     "initializing the engine.", "under"),
    ("ValueError: Free memory on device cuda:0 (40.1/47.5 GiB) on startup is less than desired GPU memory "
     "utilization (0.92, 43.7 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
     "processes.", "over"),
    # torch
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "over"),
    # SGLang's warning on a server that starts (managers/tp_worker.py), and other failures: no signal
    ("KV pool holds 19000 tokens, fewer than --context-length 131072. ... Lower --context-length, "
     "raise --mem-fraction-static, or free memory taken before the pool is sized.", None),
    ("OSError: Can't load the configuration of '/srv/models/Qwen3.6-27B-DFlash'", None),
])
def test_a_failed_starts_log_says_which_way_the_fraction_was_wrong(text, signal):
    assert tune_launch.memory_signal(text.lower()) == signal


@pytest.mark.parametrize("text, exited, kind", [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", True, "over"),
    ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`", True,
     "under"),
    # SGLang 0.5.23 utils/network.py; uvicorn's bind under both engines
    ("RuntimeError: The port 30000 is in use, but we could not find the process that uses it.", True, "port"),
    ("ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address already "
     "in use", True, "port"),
    # SGLang refusing adaptive steps outside its candidates (speculative_hook.py)
    ("ValueError: --speculative-num-steps=2 is not in the adaptive config candidate_steps [0, 1, 3, 5, 7]. "
     "Pass one of those values.", True, "refused"),
    ("launch_server.py: error: argument --speculative-algorithm: invalid choice: 'X'", True, "refused"),
    ("Loading safetensors checkpoint shards: 40% Completed", False, "timeout"),
    ("Killed", True, None),
    # "in use" about something else than a port is no busy port
    ("RuntimeError: the KV cache slot is in use", True, None),
])
def test_a_failure_is_classified_from_the_log_and_the_exit(text, exited, kind):
    assert tune_launch.failure_kind(text.lower(), exited) == kind
    assert kind in tune_launch.FAILURES


@pytest.mark.parametrize("kind", ["refused", "timeout", "port", "mismatch"])
def test_a_failure_another_fraction_does_not_mend_is_not_retried(kind):
    tuner = tune.Tuner(KEYS, CURRENT, budget=12)
    tuner.record(CURRENT, DEEPER.outcome(CURRENT))
    deep = tuner.next()
    assert deep[1:3] == ("chain", 6)
    tuner.record(deep, {"started": False, "memory": None, "failure": kind, "error": "why"})
    assert all(k[:4] != deep[:4] for k in [tuner.next()])  # not the same spec at another fraction
    assert tuner.answer()["reasons"][deep].startswith(
        "did not start (%s" % tune_launch.FAILURES[kind].split(":")[0])


def test_out_of_memory_during_a_case_tries_a_lower_fraction():
    """A server that dies in the 32K case (its activations found no room): the same setting at a
    lower fraction next, not a plain failure."""
    tuner = tune.Tuner(KEYS, CURRENT, budget=12)
    tuner.record(CURRENT, DEEPER.outcome(CURRENT))
    deep = tuner.next()
    tuner.record(deep, {"started": True, "passed": False, "memory": "over", "failure": "over",
                        "error": "torch.OutOfMemoryError during case long_context"})
    again = tuner.next()
    assert again[:4] == deep[:4] and again[4] < deep[4]
    assert tuner.answer()["reasons"][deep].startswith("ran out of memory during a case")


@pytest.mark.parametrize("n", [1, 6, 1024])
def test_the_outage_is_the_budget_one_stop_and_the_hosts_longest_recorded_start(n):
    launches = [{"ready_s": 30.0 + i, "outcome": {"started": True}} for i in range(n)]
    launches += [{"ready_s": 999.0, "outcome": {"started": False, "cut": "budget"}},
                 {"ready_s": "x", "outcome": {}}, "not a launch"]
    seconds, text = tune_launch.outage(60, launches, 900)
    assert seconds == 3600 + tune_launch.STOP_SECONDS + 30.0 + n - 1
    assert "the longest of the %d starts this host recorded" % n in text and "the budget (60 min)" in text
    seconds, text = tune_launch.outage(0.5, [], 900)
    assert seconds == 30 + tune_launch.STOP_SECONDS + 900 and "no start recorded on this host" in text


def test_the_outage_filter_refuses_a_budget_that_is_not_minutes():
    from ansible.errors import AnsibleFilterError

    from plugins.filter import sglang_tune
    assert sglang_tune.sglang_tune_outage(10, None, 60) == tune_launch.outage(10, [], 60)[1]
    for bad in (None, "soon", 0, -5):
        with pytest.raises(AnsibleFilterError):
            sglang_tune.sglang_tune_outage(bad)


def test_adaptive_steps_are_kept_where_they_win():
    """Adaptive steps follow each prompt's acceptance: where that beats every fixed depth (here
    10% over the best of its candidates), the adaptive twin of the leading chain is launched and
    wins; its ceiling (8) is no reason to refuse it."""
    family = Family("adaptive pays", {"chain": [0.9, 0.92, 0.9, 0.85, 0.8, 0.7], "block": [0.5]},
                    {"chain": (4, 2.5), "block": (30, 0.5)}, 37.5, adaptive_loss=1.10, spread=0.01)
    tuner, answer = _check(family)
    assert answer["winner"][1] == "chain" and answer["winner"][3] is True
    p = {"speculative_algorithm": "NEXTN", "speculative_num_steps": answer["winner"][2],
         "speculative_eagle_topk": 1, "speculative_num_draft_tokens": answer["winner"][2] + 1,
         "speculative_adaptive": True}
    assert profile.accept_ceiling(p, "sglang") == 8


# ------------------------------------------------------------------- listed profiles ------
# The host's own profiles as settings (bench tune --profiles): two of the same speculation and
# fraction are two settings, told apart by name.
LISTED = [setting.Named("sglang", "chain", 3, False, 0.88, "nextn_3step"),
          setting.Named("sglang", "none", 0, False, 0.88, "no_spec"),
          setting.Named("sglang", "chain", 1, False, 0.88, "nextn_1step"),
          setting.Named("sglang", "chain", 3, False, 0.88, "nextn_3step_graphs"),
          setting.Named("sglang", "block", 16, False, 0.9, "dflash"),
          setting.Named("sglang", "chain", 6, False, 0.88, "nextn_6step")]


def test_a_named_profile_is_a_setting_of_its_own_name():
    named = LISTED[3]
    assert setting.as_key(list(named)) == named
    assert setting.as_key(list(named[:5])) == setting.Setting(*named[:5])
    assert named != LISTED[0] and len({named, LISTED[0]}) == 2  # the same fields, two profiles
    assert setting.key_name(named) == "nextn_3step_graphs"
    assert setting.key_label(named) == "nextn_3step_graphs (SGLang NEXTN 3 steps, mem 0.88)"
    assert selection.cost(named) == selection.cost(named[:5]) and setting.draft_tokens(named) == 4


@pytest.mark.parametrize("n", [1, 2, 6])
def test_listed_profiles_are_each_launched_once_in_order_the_current_first(n):
    keys = LISTED[1:n] + LISTED[:1]  # the current listed last: launched first all the same
    tuner, answer = run(DRAFTER_MEMORY, keys, LISTED[0])
    assert [k for k, _ in tuner.launches] == LISTED[:n] and tuner.next() is None
    passed = {k for k, o in tuner.launches if o.get("passed")}
    assert answer["winner"] == DRAFTER_MEMORY.best(passed) and set(answer["reasons"]) == set(keys) - {
        answer["winner"]}


def test_a_listed_profile_that_does_not_start_is_not_tried_at_another_fraction():
    keys = LISTED[:3] + [setting.Named("sglang", "block", 16, False, 0.9, "dflash")]
    tuner, answer = run(DRAFTER_OOM, keys, LISTED[0])
    assert [k for k, _ in tuner.launches] == keys  # once each: a profile is launched as it stands
    assert answer["reasons"][keys[-1]].startswith("did not start (out of memory)")


@pytest.mark.parametrize("budget", [1, 3])
def test_a_budget_shorter_than_the_list_says_which_were_not_launched(budget):
    tuner, answer = run(DEEPER, LISTED, LISTED[0], budget=budget)
    assert [k for k, _ in tuner.launches] == LISTED[:budget]
    assert [answer["reasons"][k] for k in LISTED[budget:]] == [
        "not launched: the budget (%d launches) ran out before it" % budget] * (len(LISTED) - budget)
