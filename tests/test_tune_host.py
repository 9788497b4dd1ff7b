"""On the local container: playbooks/tune.yml stops the service, runs each candidate as a
transient unit with the service's user and hardening from the host's release, measures it from
the controller (the host's GPUs read on the host, through tune_exec), and starts the host's own
server again; the report and tuned.yml come back, and -e tune_deploy_best=true deploys the winner
through the gate."""
from __future__ import annotations

import json
import os
import re
import shlex

import yaml

from conftest import DEFAULT_HOST
from hostutil import HOST, ensure_deployed, flat, needs_local_host, on_host, play

pytestmark = needs_local_host


def test_tune_playbook_launches_transient_units_puts_the_server_back_and_deploys_the_winner(tmp_path):
    ensure_deployed()
    unit = on_host("sha256sum /etc/systemd/system/sglang.service")
    history = on_host("wc -l /var/lib/sglang/gate-history.jsonl")
    main_pid = on_host("systemctl show -p MainPID --value sglang")
    # the 3-step profile beside the drafter staged on the container (trained for block 16), one
    # fraction: two launches; the emulator's calibration has the drafter well ahead on coding prompts
    space = tmp_path / "space.yml"
    space.write_text("chain_steps: [3]\nadaptive: [false]\nno_spec: false\nblocks: [16]\n"
                     "mem_fractions: [0.88]\n")
    out = tmp_path / "out"
    container = os.environ.get("LOCAL_HOST_NAME", DEFAULT_HOST)
    # The plan of the tuning and of the deploy after it: the plumbing plan's coding case at 256
    # tokens and up to 16 requests. At its 96 tokens a 16-token drafter's requests spread 18-24%
    # (stdev over mean, the gate's records on this container), and under CI's load one deploy's
    # lower bound (its 3rd slowest of 12) fell 27% under the tuning's: inconclusive at a 72.4 bar.
    plan = {"coding": {"prompts": "coding", "concurrency": 1, "requests": 6, "max_requests": 16,
                       "max_tokens": 256}}
    p = play("playbooks/tune.yml", "-e", "tune_out_dir=%s" % out, "-e", "tune_space_file=%s" % space,
             # the candidates start through podman exec and listen on the container's loopback, the
             # tuner in its network namespace: the local inventory's tune_exec, tune_runner_prefix
             "-e", json.dumps({"tune_budget_launches": 3,
                               "tune_budget_minutes": 10, "tune_host_vars_dir": str(tmp_path / "host_vars"),
                               "tune_confirm": False,
                               "tune_deploy_best": True, "sglang_gate_plan": plan}), timeout=900)
    assert p.returncode == 0, p.stdout[-4000:]
    data = json.loads((out / "tune.json").read_text())
    launches = data["launches"]
    assert [x["name"] for x in launches] == ["nextn_3step", "tune_sglang_block16_m88"], data["headline"]
    # the staged drafter's config.json (fetched from the host) says 16: no note on block 16
    assert data["observations"] == [] and data["refused"] == {}
    assert all(x["outcome"]["started"] and x["outcome"].get("tok_s") for x in launches)
    assert all(x["argv"][x["argv"].index("--port") + 1] == "30000" for x in launches)
    # the host's GPUs read through tune_exec (the gate's nvidia-smi there, the stand-in's 2 x A6000):
    # the run's identity, and each launch's clocks at its start and end
    assert [g["name"] for g in data["identity"]["gpus"]] == ["NVIDIA RTX A6000"] * 2
    assert all(x["clocks"]["how"] == "counters" and x["clocks_why"] is None for x in launches), launches
    assert data["winner"]["name"] == "tune_sglang_block16_m88" and data["winner"]["beats_current"]
    assert yaml.safe_load((out / "tuned.yml").read_text())["sglang_profile"] == "tune_sglang_block16_m88"
    # each candidate ran as the service does: a transient unit with the installed unit's [Service]
    # settings (systemd refuses to start one it cannot apply), from the host's release
    release = on_host("systemctl show -p ExecStart --value sglang").split("path=")[1].split(" ;")[0]
    for x in launches:
        command = x["command"]
        assert command.startswith("exec podman exec %s systemd-run --unit=sglang-tune " % container)
        for setting in ("User=sglang", "ProtectSystem=strict", "'DeviceAllow=char-nvidia-uvm rw'",
                        "EnvironmentFile=/etc/sglang/sglang.env", "UMask=0077"):
            assert " -p %s " % setting in command, setting
        words = shlex.split(command)  # from the release its plan names ({python} -m {module})
        at = words.index("-m", words.index("--pipe"))
        assert words[at - 1:at + 2] == [release, "-m", "emulator"], command
    assert on_host("systemctl is-active sglang-tune", check=False) != "active"
    # the host's own server came back after the tuning (the deploy below found it running) and the
    # winner went through the normal gated deploy: one more history record, its own, passing
    out_text = flat(p.stdout)
    # the outage said before the service stopped: the budget, one stop, the server's start again
    assert out_text.index("the service is down for at most") < out_text.index("Stop the host's server")
    assert "the budget (10 min)" in out_text
    assert "Deploying it through the gated deploy next." in out_text
    assert out_text.index("Start the host's own server again") \
        < out_text.index("PLAY [Deploy SGLang with a gated benchmark")
    assert "Rollout complete: every host passed its gate." in out_text
    assert on_host("systemctl is-active sglang") == "active"
    assert on_host("systemctl show -p MainPID --value sglang") != main_pid
    assert on_host("sha256sum /etc/systemd/system/sglang.service") != unit
    records = on_host("cat /var/lib/sglang/gate-history.jsonl").splitlines()
    assert len(records) == int(history.split()[0]) + 1
    last = json.loads(records[-1])
    assert (last["profile"], last["passed"]) == ("tune_sglang_block16_m88", True)
    # the winner passed its gate: kept in the host's own variables for the next plain deploy
    kept = yaml.safe_load((tmp_path / "host_vars" / HOST / "tuned.yml").read_text())
    assert kept["sglang_profile"] == "tune_sglang_block16_m88"
    assert kept["sglang_host_profiles"]["tune_sglang_block16_m88"]["base"] == "dflash"


def test_a_release_the_host_does_not_have_is_refused_before_the_service_stops():
    """The candidates run from the release the variables plan: one the host lacks (here its
    releases directory moved) is refused by name before the lock is taken or the service stops."""
    state = on_host("systemctl is-active sglang", check=False)
    main_pid = on_host("systemctl show -p MainPID --value sglang")
    p = play("playbooks/tune.yml", "-e", "sglang_releases_dir=/opt/sglang/elsewhere",
             "-e", "tune_budget_minutes=5")
    assert p.returncode == 2, p.stdout[-3000:]
    out = flat(p.stdout)
    assert "is not installed (/opt/sglang/elsewhere/" in out and "/release.json, written when its install " \
        "completes, is missing)" in out
    assert "deploy it first (ansible-playbook deploy.yml --limit %s), then tune" % HOST in out
    assert "Stop the host's server" not in out
    assert on_host("systemctl is-active sglang", check=False) == state
    assert on_host("systemctl show -p MainPID --value sglang") == main_pid


def test_a_tuning_without_a_budget_is_refused_before_the_service_stops():
    main_pid = on_host("systemctl show -p MainPID --value sglang")
    p = play("playbooks/tune.yml")
    assert p.returncode == 2, p.stdout[-3000:]
    out = flat(p.stdout)
    assert "tune_budget_minutes must be the minutes the service of %s may be down" % HOST in out
    assert "Stop the host's server" not in out
    assert on_host("systemctl show -p MainPID --value sglang") == main_pid


def test_listed_profiles_of_a_release_the_host_lacks_are_refused_before_the_service_stops():
    """tune_profiles naming a vLLM profile on a host with only its SGLang release: the tuner's
    check (bench tune --check: every setting planned, the releases they run from) names the vLLM
    release, and the play refuses it as not installed while the service still runs."""
    ensure_deployed()
    # the host with its SGLang release only (a comparison before this test installs vLLM's)
    on_host("sh -c 'rm -rf /opt/sglang/releases/vllm-*'")
    main_pid = on_host("systemctl show -p MainPID --value sglang")
    p = play("playbooks/tune.yml", "-e", "tune_budget_minutes=5",
             "-e", json.dumps({"tune_profiles": ["nextn_1step", "vllm_mtp_3"]}))
    assert p.returncode == 2, p.stdout[-3000:]
    out = flat(p.stdout)
    assert re.search(r"release vllm-0\.33\.0-\w+ \(vllm 0\.33\.0\) is not installed \(/opt/sglang/releases/"
                     r"vllm-0\.33\.0-\w+/release\.json", out), out[-3000:]
    assert "(a release of another engine: deploy one of its profiles, -e sglang_profile=NAME)" in out
    assert "Stop the host's server" not in out and "Check the tuning before the service stops" in out
    assert on_host("systemctl show -p MainPID --value sglang") == main_pid
