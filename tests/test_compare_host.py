"""On the local container: "more MTP or vLLM?" answered by playbooks/compare.yml on the
gate plan across both engines, and the winner deployed through the gated deploy."""
from __future__ import annotations

import json

from hostutil import ensure_deployed, flat, needs_local_host, on_host, play

pytestmark = needs_local_host


def test_compare_engines_answers_on_the_plan_and_deploys_the_winner_through_the_gate(tmp_path):
    """`compare.yml -e compare_engines=sglang,vllm -e compare_deploy_best=true` (a setting per
    engine here): the plan's cases and a context depth on each, the answer first, the host's own
    profile back after the sweep, then the winner deployed by the normal gated deploy - it passes
    (this emulated host's calibration of vLLM n=3) and becomes the host's profile, with a history
    record of its own. What the answer says over more settings and depths (one more step, by
    context) is tests/test_compare_answer.py's, in Python."""
    ensure_deployed()
    before = len(on_host("cat /var/lib/sglang/gate-history.jsonl").splitlines())
    # one context depth (the default is 1K, 8K and 32K: 57 s more per setting here)
    settings = {"compare_engine_profiles": {"sglang": ["nextn_1step"], "vllm": ["vllm_mtp_3"]},
                "compare_context_tokens": [1024], "compare_context_requests": 3,
                "sglang_gate_calibrated": {"vllm_mtp_3": {
                    "coding": {"min_tok_s": 36, "min_accept_len": 2.3}}}}  # molecule/engine_switch: why 36
    # the winner stays deployed: a test that needs the 3-step profile deploys it (ensure_deployed)
    p = play("playbooks/compare.yml", "-e", "compare_out_dir=%s" % tmp_path,
             "-e", "compare_engines=sglang,vllm", "-e", "compare_deploy_best=true",
             "-e", json.dumps(settings), timeout=1500)
    assert p.returncode == 0, p.stdout[-4000:]
    for name in ("results.json", "inputs.json", "compare.md", "compare.csv", "compare.json", "compare.png"):
        assert (tmp_path / name).stat().st_size > 100, name
    summary = json.loads((tmp_path / "compare.json").read_text())["summary"]
    assert summary["profiles"] == ["nextn_1step", "vllm_mtp_3"]
    # the (plumbing) gate plan, its one case, then the context depth
    assert summary["plan_cases"] == ["coding", "context_1k"]
    assert summary["winner"]["profile"] == "vllm_mtp_3"
    decided = summary["winner"]["decided_by"]
    assert decided in summary["plan_cases"]
    md = (tmp_path / "compare.md").read_text()
    assert md.index("## The answer") < md.index("| profile | engine |")
    assert "roofline share" in md and "| nextn_1step | sglang |" in md and "| vllm_mtp_3 | vllm |" in md
    out = flat(p.stdout)
    assert "the winner is vllm_mtp_3 (vllm), decided by %s" % decided in out
    assert "| vllm_mtp_3 | vllm |" in out  # the tuner's report, shown by the play
    assert "Rollout complete: every host passed its gate." in out
    lines = on_host("cat /var/lib/sglang/gate-history.jsonl").splitlines()
    runs = [json.loads(x) for x in lines[before:]]
    assert [(r["profile"], r["engine"], r["passed"]) for r in runs] == [("vllm_mtp_3", "vllm", True)]
    assert "-m emulator.vllm serve" in on_host("systemctl show -p ExecStart --value sglang")


def test_a_port_the_controller_cannot_reach_is_refused_before_the_service_stops():
    """The profiles are measured from the controller (the tuner's launches): where the host's own
    server does not answer at tune_url, neither would they - refused by name while it still runs."""
    main_pid = on_host("systemctl show -p MainPID --value sglang")
    p = play("playbooks/compare.yml", "-e", "tune_url=http://127.0.0.1:1")
    assert p.returncode == 2, p.stdout[-3000:]
    out = flat(p.stdout)
    assert "nothing answers at http://127.0.0.1:1, where the candidates would be measured" in out
    assert "Stop the host's server" not in out
    assert on_host("systemctl show -p MainPID --value sglang") == main_pid
