"""Two containers serving one model: the units carry --nnodes 2, their ranks and rank 0's address
as --dist-init-addr; rank 0 serves the API and passed the gate; rank 1 serves only SGLang's dummy
health server; after the failing 1-step deploy both nodes run their last-known-good 3-step units
again, restarted together."""
from __future__ import annotations

import json

import testinfra
from conftest import LKG_DIR, UNIT, URL, assert_service_healthy, exec_start, history, main_pid

RANK0, RANK1 = "sglang-molecule-mn-rank0", "sglang-molecule-mn-rank1"


def container(name):
    return testinfra.get_host("podman://" + name)


def flag(argv, name):
    return argv[argv.index(name) + 1]


def test_units_carry_the_ranks_and_rank0s_address():
    rank0_ip = container(RANK0).check_output("hostname -I").split()[0]
    for rank, name in enumerate([RANK0, RANK1]):
        unit = container(name).file(UNIT).content_string
        argv = exec_start(unit)
        assert flag(argv, "--nnodes") == "2"
        assert flag(argv, "--node-rank") == str(rank)
        assert flag(argv, "--dist-init-addr") == "%s:20000" % rank0_ip
        assert flag(argv, "--tp-size") == "2"
        assert flag(argv, "--speculative-num-steps") == "3"
        assert ("Restart=always" if rank else "Restart=on-failure") in unit.splitlines()


def test_rank0_passed_the_gate_and_serves_the_api():
    host = container(RANK0)
    runs = history(host)
    assert [(r["profile"], r["passed"]) for r in runs] == [("nextn_3step", True), ("nextn_1step", False)]
    assert runs[0]["multinode"] == {"group": "qwen_pair", "nnodes": 2, "node_rank": 0, "rank0": RANK0}
    assert runs[0]["decode_tok_s"]["median"] >= 45 and runs[0]["accept_len"] >= 2.8
    assert (runs[1]["action"], runs[1]["reason"]) == (
        "restore", "the whole multi-node deployment is rolled back to its last-known-good units")
    assert_service_healthy(host)
    models = json.loads(host.check_output("curl -s --max-time 30 %s/v1/models" % URL))
    assert models["data"][0]["id"] == "Qwen3.6-27B"


def test_rank1_serves_only_the_dummy_health_server():
    host = container(RANK1)
    assert not host.file("/var/lib/sglang/gate-history.jsonl").exists  # only rank 0 is benchmarked
    assert host.file(LKG_DIR + "/sglang.json").exists
    assert host.service("sglang").is_running
    curl = "curl -s -o /dev/null -w '%%{http_code}' --max-time 30 %s%s"
    assert host.check_output(curl % (URL, "/health_generate")) == "200"
    assert host.check_output(curl % (URL, "/v1/models")) == "404"


def test_both_nodes_were_rolled_back_and_restarted_together():
    for name in (RANK0, RANK1):
        host = container(name)
        unit = host.file(UNIT).content_string
        assert unit == host.file(LKG_DIR + "/sglang.service").content_string
        assert flag(exec_start(unit), "--speculative-num-steps") == "3"
        passed = json.loads(host.file("/var/tmp/molecule/passed.json").content_string)
        assert host.check_output("sha256sum %s" % UNIT).split()[0] == passed["unit_sha256"]
        # the failing deploy restarted it twice (1-step, then the rollback): a new main process
        assert main_pid(host) != passed["main_pid"]
        assert host.check_output("systemctl show --property NeedDaemonReload --value sglang") == "no"
