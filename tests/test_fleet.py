"""Fleet pieces without hosts: the multi-node topology filter, the rollout plan (against Ansible's
own serial arithmetic), the profile's multi-node rules, the multi-node argv, the summary table."""

from __future__ import annotations

import sys

import pytest
from ansible.utils.helpers import pct_to_int

from ansiblerun import ansible
from conftest import ROOT
from plugins.callback import sglang_rollout as cb
from sglang_perf.plan import fleet
from sglang_perf.plan import profile as prof

GROUPS = {"all": ["a", "b", "c", "solo"], "pair": ["b", "a"], "trio": ["a", "b", "c"], "one": ["solo"]}


def hv(**per_host):
    base = {
        h: {"ansible_host": "ct-" + h, "ansible_default_ipv4": {"address": "10.88.0.%d" % i}}
        for i, h in enumerate(["a", "b", "c", "solo"], 2)
    }
    for host, extra in per_host.items():
        base[host].update(extra)
    return base


def topo(group, me, hostvars=None, play_hosts=None, port=20000):
    return fleet.sglang_topology(group, GROUPS, hostvars or hv(), me, play_hosts, port)


def test_single_node_is_the_default():
    t = topo("", "solo")
    assert t == {
        "enabled": False,
        "group": "",
        "nnodes": 1,
        "node_rank": 0,
        "rank0": "solo",
        "hosts": ["solo"],
        "dist_init_addr": None,
        "errors": [],
    }


def test_ranks_follow_inventory_order_and_the_init_address_is_rank0s():
    for me, rank in (("b", 0), ("a", 1)):
        t = topo("pair", me)
        assert (t["nnodes"], t["node_rank"], t["rank0"], t["hosts"]) == (2, rank, "b", ["b", "a"])
        assert t["dist_init_addr"] == "10.88.0.3:20000" and t["errors"] == []


def test_explicit_ranks_and_the_address_override():
    h = hv(a={"sglang_node_rank": 0, "sglang_node_address": "192.168.7.1"}, b={"sglang_node_rank": 1})
    t = topo("pair", "b", h, port=25000)
    assert (t["node_rank"], t["rank0"], t["dist_init_addr"], t["errors"]) == (1, "a", "192.168.7.1:25000", [])
    v6 = topo("pair", "a", hv(b={"sglang_node_address": "fd00::5"}))
    assert v6["dist_init_addr"] == "[fd00::5]:20000"
    no_facts = {"a": {"ansible_host": "10.1.230.172"}, "b": {"ansible_host": "10.1.230.173"}}
    assert topo("pair", "a", no_facts)["dist_init_addr"] == "10.1.230.173:20000"


@pytest.mark.parametrize(
    "hostvars_extra, group, me, play_hosts, expected",
    [
        (
            {"a": {"sglang_node_rank": 1}, "b": {"sglang_node_rank": 1}},
            "pair",
            "a",
            None,
            "duplicate node rank 1 on b, a",
        ),
        (
            {"a": {"sglang_node_rank": 1}, "b": {"sglang_node_rank": 2}},
            "pair",
            "a",
            None,
            "no host has node rank 0 (ranks: b=2, a=1)",
        ),
        ({"a": {"sglang_node_rank": 0}}, "pair", "a", None, "sglang_node_rank is set on a but not on b"),
        (
            {"a": {"sglang_node_rank": 0}, "b": {"sglang_node_rank": 2}, "c": {"sglang_node_rank": 1}},
            "trio",
            "a",
            None,
            "",
        ),
        (
            {"a": {"sglang_node_rank": 0}, "b": {"sglang_node_rank": 3}, "c": {"sglang_node_rank": 1}},
            "trio",
            "a",
            None,
            "node ranks must be 0..2, got 0, 1, 3",
        ),
        (
            {"a": {"sglang_node_rank": "first"}, "b": {"sglang_node_rank": 1}},
            "pair",
            "a",
            None,
            "sglang_node_rank must be an integer >= 0, got a='first'",
        ),
        ({}, "nope", "a", None, "sglang_multinode_group: 'nope' is not an inventory group"),
        ({}, "pair", "c", None, "c: sglang_multinode_group is pair but c is not in that group"),
        ({}, "one", "solo", None, "a multi-node deployment needs at least 2 hosts"),
        (
            {"a": {"sglang_profile": "nextn_1step"}, "b": {"sglang_profile": "nextn_3step"}},
            "pair",
            "a",
            None,
            "the nodes disagree on sglang_profile ('nextn_3step' on b; 'nextn_1step' on a)",
        ),
        ({}, "pair", "a", ["a", "solo"], "b is not in this run (--limit?)"),
        (
            {"b": {"ansible_host": None, "ansible_default_ipv4": {}}},
            "pair",
            "a",
            None,
            "cannot tell rank 0's address: set sglang_node_address for b",
        ),
    ],
)
def test_inconsistent_groups_are_refused_with_the_reason(hostvars_extra, group, me, play_hosts, expected):
    h = hv(**hostvars_extra)
    errors = topo(group, me, h, play_hosts)["errors"]
    if not expected:
        assert errors == []
        assert topo(group, "b", h)["node_rank"] == 2
    else:
        assert any(expected in e for e in errors), errors


def test_a_bad_port_is_refused():
    assert any(
        "sglang_dist_init_port must be a TCP port" in e for e in topo("pair", "a", port=70000)["errors"]
    )


@pytest.mark.parametrize(
    "hosts, serial",
    [
        (1, [1, "25%"]),
        (3, [1, "25%"]),
        (7, [1, "25%"]),
        (10, [2, "50%"]),
        (5, ["100%"]),
        (4, [1, 2]),
        (9, [3]),
        (2, [5, "10%"]),
    ],
)
def test_batches_match_ansibles_serial(hosts, serial):
    names = ["h%d" % i for i in range(hosts)]
    batches = fleet.sglang_rollout_batches(names, serial)
    assert sum(batches, []) == names
    # Ansible's own arithmetic for each batch size (the last serial item repeats)
    expected_sizes, left, i = [], hosts, 0
    while left > 0:
        size = min(pct_to_int(serial[i], hosts), left)
        expected_sizes.append(size)
        left -= size
        i = min(i + 1, len(serial) - 1)
    assert [len(b) for b in batches] == expected_sizes


def test_rollout_settings():
    assert fleet.sglang_rollout_serial(1, "25%") == [1, "25%"]
    assert fleet.sglang_rollout_serial(0, "3") == [3]
    assert fleet.sglang_rollout_serial("2", 4) == [2, 4]
    assert fleet.sglang_rollout_errors(1, "25%") == []
    for canary, batch, text in (
        (-1, 1, "sglang_rollout_canary must be"),
        (1, "0%", "sglang_rollout_batch must be"),
        (1, "150%", "sglang_rollout_batch must be"),
        (1, 0, "sglang_rollout_batch must be"),
        (True, 1, "sglang_rollout_canary must be"),
        (1, "half", "sglang_rollout_batch"),
    ):
        assert any(text in e for e in fleet.sglang_rollout_errors(canary, batch)), (canary, batch)
    with pytest.raises(Exception, match="sglang_rollout_batch"):
        fleet.sglang_rollout_serial(1, "lots")


def test_a_multinode_deployment_split_across_batches_is_refused():
    topos = [topo("pair", "b"), topo("pair", "a"), topo("", "solo")]
    assert fleet.sglang_split_deployments(topos, [["b"], ["a", "solo"]]) == [
        "multi-node deployment pair (hosts b, a) would be split across rollout batches 1 and 2: its nodes "
        "start and roll back together, so they must be in one batch (put the group first and set "
        "sglang_rollout_canary to 2, or raise sglang_rollout_batch)"
    ]
    assert fleet.sglang_split_deployments(topos, [["b", "a"], ["solo"]]) == []


PROFILES = {"tp2": {"tp_size": 2}, "tp3": {"tp_size": 3}, "tp8": {"tp_size": 8}, "none": {}}


def test_profile_rules_over_several_nodes():
    errs = prof.sglang_profile_errors
    assert errs(PROFILES, "tp2", 2, nnodes=2, group="pair") == []
    assert (
        "must be divisible by the 2 nodes of multi-node deployment pair"
        in errs(PROFILES, "tp3", 2, nnodes=2, group="pair")[0]
    )
    assert (
        "over 2 nodes puts 4 GPUs on each node, more than sglang_hardware.gpu_count = 2"
        in errs(PROFILES, "tp8", 2, nnodes=2, group="pair")[0]
    )
    assert errs(PROFILES, "tp8", 4, nnodes=2) == []
    assert "sets no tp_size" in errs(PROFILES, "none", 2, nnodes=2, group="pair")[0]
    assert "exceeds the GPUs the host is expected to have" in errs(PROFILES, "tp3", 2)[0]


def test_multinode_argv():
    argv = prof.sglang_argv(
        {"tp_size": 2},
        "0.5.23",
        {"model_path": "/m", "nnodes": 2, "node_rank": 0, "dist_init_addr": "10.88.0.3:20000"},
    )
    assert argv == [
        "--tp-size",
        "2",
        "--model-path",
        "/m",
        "--nnodes",
        "2",
        "--node-rank",
        "0",
        "--dist-init-addr",
        "10.88.0.3:20000",
    ]
    assert prof.sglang_argv(
        {"tp_size": 2}, "0.5.23", {"nnodes": None, "node_rank": None, "dist_init_addr": None}
    ) == ["--tp-size", "2"]


def test_summary_table_and_resume_hint():
    plan = {"batches": [["a"], ["b", "c"], ["d"]], "serial": [1, "25%"]}
    results = {
        "a": {
            "profile": "nextn_1step",
            "decode_tok_s": 37.13,
            "accept_len": 1.744,
            "gate": "FAILED",
            "rolled_back": True,
            "restored_profile": "nextn_3step",
            "node": "",
        }
    }
    rows = cb.summary_rows(plan, results, touched={"a"}, failed={})
    assert rows == [
        ["a", "", "nextn_1step", "37.1", "1.74", "FAILED", "yes, to nextn_3step", "no"],
        ["b", "", "-", "-", "-", "not run (batch 2)", "no", "yes"],
        ["c", "", "-", "-", "-", "not run (batch 2)", "no", "yes"],
        ["d", "", "-", "-", "-", "not run (batch 3)", "no", "yes"],
    ]
    table = cb.render_table(rows).splitlines()
    assert table[0].split("|")[1:-1] == [
        " host ",
        " profile     ",
        " decode tok/s ",
        " accept len ",
        " gate              ",
        " rolled back         ",
        " untouched ",
    ]
    assert cb.resume_hint(rows).endswith("--limit a,b,c,d")
    passed = {
        h: {
            "profile": "nextn_3step",
            "decode_tok_s": 55,
            "accept_len": 3.2,
            "gate": "passed",
            "rolled_back": False,
            "node": "rank %d of pair" % i,
        }
        for i, h in enumerate("abcd")
    }
    rows = cb.summary_rows(plan, passed, set("abcd"), {})
    assert "node" in cb.render_table(rows).splitlines()[0]
    assert cb.resume_hint(rows) == "Rollout complete: every host passed its gate."
    broken = cb.summary_rows(plan, {}, {"a"}, {"a": "unreachable"})
    assert broken[0][5] == "failed: unreachable" and broken[0][7] == "no"


class _Display(object):
    def __init__(self):
        self.lines = []

    def banner(self, text):
        self.lines.append("== " + text)

    def display(self, text):
        self.lines.append(text)


class _Play(object):
    def __init__(self, stage):
        self.stage = stage

    def get_vars(self):
        return {"_sglang_rollout_stage": self.stage} if self.stage else {}


class _Result(object):
    _result = {}
    _task = None

    class _host(object):
        @staticmethod
        def get_name():
            return "a"


def test_callback_says_when_the_rollout_never_started_and_stays_quiet_elsewhere():
    for plays, preflight_fails, expected in (
        (["preflight"], True, ["== SGLANG ROLLOUT SUMMARY", cb.NOT_STARTED]),
        (["preflight"], False, ["== SGLANG ROLLOUT SUMMARY", cb.PREFLIGHT_ONLY]),
        ([None], True, []),  # another playbook: nothing
    ):
        c = cb.CallbackModule()
        c._display = _Display()
        for stage in plays:
            c.v2_playbook_on_play_start(_Play(stage))
        if preflight_fails:
            c.v2_runner_on_failed(_Result())
        c.plan = {"batches": [["a"]], "serial": [1]}
        c.v2_playbook_on_stats(None)
        assert c._display.lines == expected


def test_an_unreachable_host_stops_the_rollout(tmp_path):
    """roles/sglang_gate/tasks/batch_guard.yml in a real rolling play: h3 (ssh to a closed
    loopback port) is unreachable in batch 2; Ansible's max_fail_percentage alone would go on to
    batch 3 (h4), the guard fails h2 and the run stops there."""
    py = sys.executable
    (tmp_path / "inv.yml").write_text(
        "all:\n  children:\n    g:\n      hosts:\n"
        "        h1: {ansible_connection: local, ansible_python_interpreter: %s}\n"
        "        h2: {ansible_connection: local, ansible_python_interpreter: %s}\n"
        "        h3: {ansible_connection: ssh, ansible_host: 127.0.0.1, ansible_port: 1,\n"
        "             ansible_ssh_common_args: '-o ConnectTimeout=5'}\n"
        "        h4: {ansible_connection: local, ansible_python_interpreter: %s}\n" % (py, py, py))
    (tmp_path / "play.yml").write_text(
        "- hosts: g\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.set_fact:\n"
        "        __sglang_rollout_plan: {batches: [[h1], [h2, h3], [h4]]}\n"
        "      run_once: true\n"
        "- hosts: g\n  gather_facts: false\n  serial: [1, 2]\n  max_fail_percentage: 0\n  tasks:\n"
        "    - ansible.builtin.ping:\n"
        "    - ansible.builtin.import_tasks: %s\n" % (ROOT / "roles/sglang_gate/tasks/batch_guard.yml"))
    p = ansible("ansible-playbook", "-i", str(tmp_path / "inv.yml"), str(tmp_path / "play.yml"),
                cwd=tmp_path, timeout=120, env={"ANSIBLE_HOST_KEY_CHECKING": "0"})
    out = " ".join(p.stdout.split())
    assert p.returncode != 0, p.stdout[-2000:]
    assert "h3 of this rollout batch became unreachable: the rollout stops here (h2 itself passed)" in out
    recap = p.stdout[p.stdout.index("PLAY RECAP"):]
    assert "h4" not in recap and "h1 " in recap


def test_the_summary_lists_each_gate_case_with_its_per_position_acceptance():
    plan = {"batches": [["a"], ["b", "c"]]}
    results = {"a": {"profile": "nextn_3step", "time_to_verdict_s": 101.2, "cases": [
        {"case": "coding", "concurrency": 1, "decode_tok_s": 55.04, "accept_len": 3.12,
         "accept_by_position": [0.75, 0.72, 0.69], "aggregate_tok_s": 54.9, "passed": True},
        {"case": "long_context", "concurrency": 1, "decode_tok_s": 26.1, "accept_len": 1.52,
         "accept_by_position": [0.4, 0.1, 0.02], "aggregate_tok_s": 20.0, "prompt_tokens": 32711,
         "passed": False}]},
        "b": {"profile": "nextn_3step", "cases": []}}
    lines = cb.case_lines(plan, results)
    assert lines[0] == "a (nextn_3step; verdict in 101 s):"
    assert lines[1].split() == ["coding", "C=1", "55.0", "tok/s", "accept", "3.12", "by", "position",
                                "75/72/69%", "aggregate", "54.9", "tok/s", "passed"]
    assert "prompt 32711 tok" in lines[2] and lines[2].endswith("FAILED") and "40/10/2%" in lines[2]
    assert len(lines) == 3  # a host without cases (check mode, not reached) adds nothing


def test_a_check_mode_run_says_nothing_was_deployed_rather_than_stopped():
    plan = {"batches": [["a"], ["b"]]}
    checked = {h: {"profile": "nextn_3step", "decode_tok_s": None, "accept_len": None, "gate": "check mode",
                   "rolled_back": False, "node": ""} for h in "ab"}
    rows = cb.summary_rows(plan, checked, set("ab"), {})
    assert cb.resume_hint(rows) == ("Check mode: nothing was changed and no gate judged; run it without "
                                    "--check to deploy.")
    checked["b"]["gate"] = "not reached"
    assert cb.resume_hint(cb.summary_rows(plan, checked, set("ab"), {})).startswith("Rollout stopped.")
