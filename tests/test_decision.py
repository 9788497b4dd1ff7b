"""The gate's decision (plugins/module_utils/sglang_perf/judge/decision.py): every action, and the one
reading of a history record's verdict (history.passed) that every reader shares."""
from __future__ import annotations

import json

import pytest

from sglang_perf.judge import decision
from sglang_perf.record import history

UNIT, ENV = "u" * 64, "e" * 64
OTHER = {"unit_sha256": "x" * 64, "env_sha256": ENV}
SAME = {"unit_sha256": UNIT, "env_sha256": ENV}
PASSED, FAILED = {"passed": True}, {"passed": False}


@pytest.mark.parametrize("result,lkg,kw,verdict,action,scope,reason", [
    (PASSED, None, {}, "pass", "record", "host", "recorded as last-known-good"),
    (PASSED, OTHER, {"node_rank": 1, "multinode": True}, "pass", "record", "deployment",
     "recorded as last-known-good"),
    (FAILED, OTHER, {}, "fail", "restore", "host", "rolled back to the last-known-good unit"),
    (None, OTHER, {}, "fail", "restore", "host", "rolled back to the last-known-good unit"),
    ({"msg": "could not measure"}, OTHER, {}, "fail", "restore", "host",
     "rolled back to the last-known-good unit"),
    (FAILED, None, {}, "fail", "stop", "host", "no last-known-good unit to restore: the failing server "
     "was stopped and disabled (sglang_gate_no_lkg: stop)"),
    (None, None, {}, "fail", "stop", "host", "no last-known-good unit to restore: the failing server "
     "was stopped"),
    (FAILED, None, {"no_lkg": "keep"}, "fail", "nothing", "host", "no last-known-good unit to restore: "
     "the failing server was left running (sglang_gate_no_lkg: keep)"),
    (FAILED, None, {"rollback": False}, "fail", "nothing", "host", "rollback disabled"),
    (FAILED, SAME, {}, "fail", "nothing", "host", "the failing unit is the last-known-good one"),
    (FAILED, {"unit_sha256": UNIT, "env_sha256": "y" * 64}, {}, "fail", "restore", "host",
     "rolled back"),
    (FAILED, OTHER, {"rollback": False}, "fail", "nothing", "host", "rollback disabled"),
    (FAILED, OTHER, {"multinode": True}, "fail", "restore", "deployment",
     "the whole multi-node deployment is rolled back"),
    (PASSED, OTHER, {"check_mode": True}, "not judged", "nothing", "host", "check mode"),
    (FAILED, OTHER, {"check_mode": True}, "not judged", "nothing", "host", "check mode"),
])
def test_every_action(result, lkg, kw, verdict, action, scope, reason):
    d = decision.decide(result, UNIT, ENV, lkg, **kw)
    assert (d["verdict"], d["action"], d["scope"]) == (verdict, action, scope)
    assert d["reason"].startswith(reason), d["reason"]


def test_a_deploy_that_failed_before_installing_a_unit_has_nothing_to_stop():
    d = decision.decide(None, None, None, None)
    assert (d["verdict"], d["action"], d["reason"]) == (
        "fail", "nothing", "no unit was installed: nothing to stop or restore")


def test_an_unknown_no_lkg_policy_is_refused_by_name():
    with pytest.raises(ValueError, match="sglang_gate_no_lkg must be one of stop, keep, got 'halt'"):
        decision.decide(FAILED, UNIT, ENV, None, no_lkg="halt")


@pytest.mark.parametrize("kw,writes", [({}, True), ({"node_rank": 1, "multinode": True}, False),
                                       ({"check_mode": True}, False)])
def test_only_rank_0_outside_check_mode_writes_the_history(kw, writes):
    assert decision.decide(PASSED, UNIT, ENV, None, **kw)["write_history"] is writes


def test_a_passed_value_that_is_not_true_fails():
    for result in ({"passed": "True"}, {"passed": 1}, {}):
        assert decision.decide(result, UNIT, ENV, OTHER)["verdict"] == "fail"


def test_the_record_carries_the_decision_the_cases_and_the_headline():
    result = {"passed": False, "msg": "gate failed (long_context): ...", "time_to_verdict_s": 101.5,
              "failed_cases": ["long_context"],
              "failures": [{"case": "long_context", "message": "long_context: accept length 1.52 < 2.00"}],
              "capacity": {"passed": True, "figures": {"context_length": 131072}},
              "decode_tok_s": {"median": 55.0}, "accept_len": 3.1, "accept_by_position": [0.75, 0.7],
              "cases": [{"case": "coding", "passed": True, "accept_by_position": [0.75, 0.7],
                         "per_request": [{"rid": "x"}]},
                        {"case": "long_context", "passed": False, "accept_len": 1.52}]}
    d = decision.decide(result, UNIT, ENV, OTHER)
    rec = history.record(result, d, {"host": "h", "profile": "nextn_3step", "time": "t"})
    assert rec["verdict"] == "fail" and rec["passed"] is False and rec["action"] == "restore"
    assert rec["reason"] == "rolled back to the last-known-good unit"
    assert [c["case"] for c in rec["cases"]] == ["coding", "long_context"]
    assert "per_request" not in rec["cases"][0]
    assert rec["cases"][0]["accept_by_position"] == [0.75, 0.7]
    assert rec["accept_by_position"] == [0.75, 0.7] and rec["decode_tok_s"] == {"median": 55.0}
    assert rec["failures"] == ["long_context: accept length 1.52 < 2.00"]
    json.dumps(rec)  # a JSON line


@pytest.mark.parametrize("rec,ok", [
    ({"verdict": "pass"}, True), ({"verdict": "fail", "passed": True}, False),
    ({"verdict": "not judged"}, False), ({"passed": True}, True), ({"passed": "True"}, True),
    ({"passed": "false"}, False), ({"passed": 1}, False), ({}, False),
])
def test_one_definition_of_passed(rec, ok):
    assert history.passed(rec) is ok


def test_the_cli_and_the_module_agree_on_the_last_known_good(tmp_path):
    from bench import history as cli
    lines = [{"time": "2026-12-01T10:00:00Z", "profile": "p", "passed": "True",
              "decode_tok_s": {"median": 50}},
             {"time": "2026-12-01T11:00:00Z", "profile": "p", "verdict": "fail", "passed": True,
              "decode_tok_s": {"median": 20}}]
    path = tmp_path / "h.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    runs = cli.annotate(cli.read(path))
    assert [r["passed"] for r in runs] == [True, False]
    assert history.last_passing(history.read(str(path)), "p")["decode_tok_s"]["median"] == 50


def test_a_case_baseline_comes_from_the_same_case():
    rec = {"time": "t", "profile": "p", "decode_tok_s": {"median": 55}, "accept_len": 3.1,
           "cases": [{"case": "coding", "decode_tok_s": {"median": 55}, "accept_len": 3.1},
                     {"case": "long_context", "decode_tok_s": {"median": 40}, "accept_len": 2.3}]}
    assert history.baseline(rec, "long_context", first=False)["decode_tok_s"] == 40
    assert history.baseline(rec, "concurrent", first=False) is None
    old = {"time": "t", "profile": "p", "decode_tok_s": {"median": 52}, "accept_len": 3.0}
    assert history.baseline(old, "coding", first=True)["decode_tok_s"] == 52
    assert history.baseline(old, "long_context", first=False) is None


# ---------------------------------------------------- multi-node judging and the messages ------
PAIR = {"enabled": True, "group": "qwen_pair", "node_rank": 0, "rank0": "node-a",
        "hosts": ["node-a", "node-b"]}
FOLLOWER = dict(PAIR, node_rank=1)
MEASURED = {"passed": True, "msg": "gate passed: coding 55.1 tok/s", "decode_tok_s": {"median": 55.1}}


def test_a_follower_is_judged_by_its_rank_0():
    d = decision.decide(None, UNIT, ENV, OTHER, topology=FOLLOWER, rank0_result=MEASURED, host="node-b",
                        profile="nextn_3step")
    assert d["verdict"] == "pass" and d["action"] == "record" and d["result"] is MEASURED
    assert d["write_history"] is False and d["scope"] == "deployment" and d["message"] == ""


def test_a_follower_whose_rank_0_gave_no_result_fails_naming_it():
    for rank0 in (None, {"changed": False, "skipped": True}):
        d = decision.decide(None, UNIT, ENV, OTHER, topology=FOLLOWER, rank0_result=rank0, host="node-b",
                            profile="nextn_3step")
        assert d["verdict"] == "fail" and d["action"] == "restore" and d["scope"] == "deployment"
        assert d["result"]["msg"] == \
            "rank 0 (node-a) of multi-node deployment qwen_pair failed before its gate"
        assert d["message"] == (
            "Gate failed on node-b (node rank 1 of multi-node deployment qwen_pair, judged by rank 0 "
            "node-a) for profile nextn_3step: rank 0 (node-a) of multi-node deployment qwen_pair failed "
            "before its gate. The whole multi-node deployment is rolled back to its last-known-good units")


def test_rank_0_fails_when_a_node_did_not_reach_the_gate():
    d = decision.decide(MEASURED, UNIT, ENV, OTHER, topology=PAIR, missing=["node-b"], host="node-a",
                        profile="nextn_3step")
    assert d["verdict"] == "fail" and d["write_history"] is True
    assert d["result"]["msg"] == ("node node-b of multi-node deployment qwen_pair failed before the gate; "
                                  "gate passed: coding 55.1 tok/s")
    assert d["result"]["decode_tok_s"] == {"median": 55.1}  # the figures stay for the record
    assert d["message"].startswith("Gate failed on node-a (rank 0 of multi-node deployment qwen_pair) for ")
    assert decision.decide(MEASURED, UNIT, ENV, OTHER, topology=PAIR, host="node-a")["verdict"] == "pass"


def test_a_single_host_message_and_what_it_restored():
    failed = {"passed": False, "msg": "coding: decode tok/s 37.4 [33.8, 41.5] < required 45.0"}
    d = decision.decide(failed, UNIT, ENV, OTHER, topology={"enabled": False, "node_rank": 0}, host="ct129",
                        profile="nextn_1step")
    assert d["message"] == ("Gate failed on ct129 for profile nextn_1step: coding: decode tok/s 37.4 "
                            "[33.8, 41.5] < required 45.0. Rolled back to the last-known-good unit")
    rec = {"profile": "nextn_3step", "time": "2026-12-03T06:33:45Z", "decode_tok_s": {"median": 54.54},
           "accept_len": 3.1649}
    text = decision.restored_text(rec)
    assert text == "profile nextn_3step, passed at 2026-12-03T06:33:45Z with 54.5 tok/s, accept length 3.16"
    assert decision.failure(d, text) == d["message"] + " (%s); the server is ready again." % text
    assert decision.failure(d) == d["message"] + "."
    adopted = decision.restored_text({"adopted": "sglang-qwen", "time": "2026-12-01T10:00:00Z",
                                       "profile": "?"})
    assert adopted == ("the hand-made unit sglang-qwen, adopted at 2026-12-01T10:00:00Z and imported as the "
                       "first last-known-good")
    assert decision.restored_text({"profile": "p", "time": "t", "decode_tok_s": None}) == \
        "profile p, passed at t"


def test_a_failed_deploy_says_where_and_what_was_done():
    assert decision.rescue_failure("boom", "Install", True, False) == "boom"  # the gate's own message
    assert decision.rescue_failure("boom", "Install", False, True) == "boom [deploy failed at 'Install']"
    assert decision.rescue_failure("boom", "Install", False, False, restored="profile p, passed at t") == (
        "boom [deploy failed at 'Install'; restored the last-known-good unit (profile p, passed at t); the "
        "server is ready again]")
    assert decision.rescue_failure("boom", "Install", False, False, reason="no unit was installed") == (
        "boom [deploy failed at 'Install'; no unit was installed]")


def test_a_failed_host_of_the_rollout_names_its_deployment():
    assert decision.outcome_failure("  boom  ", {"enabled": False}) == "boom"
    assert decision.outcome_failure(None, PAIR) == "A node of multi-node deployment qwen_pair failed."
    assert decision.outcome_failure(None, PAIR, restored="profile p") == (
        "A node of multi-node deployment qwen_pair failed. The multi-node deployment qwen_pair was rolled "
        "back to its last-known-good units (profile p); the server is ready again.")


@pytest.mark.parametrize("verdict, deployment_failed, check_mode, deploy_failed, word", [
    ("pass", False, False, False, "passed"),
    ("pass", True, False, False, "FAILED"),
    ("fail", False, False, False, "FAILED"),
    ("not judged", False, True, False, "check mode"),
    ("", False, True, True, "not reached"),
    ("", False, False, True, "not reached"),
    ("", False, False, False, "not reached"),
])
def test_the_rollout_summary_word(verdict, deployment_failed, check_mode, deploy_failed, word):
    assert decision.outcome(verdict, deployment_failed, check_mode, deploy_failed) == word


def test_a_last_known_good_that_cannot_be_restored_is_named_before_anything_changes():
    args = ("ct129", "/var/lib/sglang/last-known-good", "sglang")
    good = {"profile": "nextn_3step"}
    assert decision.lkg_problem(*args, [], good, 812) == ""
    assert decision.lkg_problem(*args, ["/var/lib/sglang/last-known-good/sglang.env"], good, 812) == (
        "Cannot roll back on ct129: the last-known-good in /var/lib/sglang/last-known-good is missing "
        "/var/lib/sglang/last-known-good/sglang.env; nothing was changed: the installed unit stays as it is")
    for record, size in ((None, 812), ({"time": "t"}, 812), (good, 0), ("not json", 812)):
        assert "is corrupt (sglang.json is not the JSON record a passing gate writes, or the unit is empty)" \
            in decision.lkg_problem(*args, [], record, size)
