"""The host's deploy lock and journal on a local container (docs/deploys.md): two deploys at once
(one refuses, naming the holder), a deploy killed with SIGKILL after writing its unit (the next
deploy reclaims the lock, says where the dead one stopped, and ends green with one engine
process), a deploy whose lock another controller takes over while it gates (it stops naming the
taker and restores nothing; a rollback refuses beside the taker; sglang_break_lock takes it over),
and a release whose pip install fails leaving the running release serving. The lock's decisions
(an old lock reclaimed by age, check mode taking none, every playbook that changes a server
holding it, a kill at any phase reclaimed) are tests/test_lock_units.py's, in Python."""
from __future__ import annotations

import json
import os
import shlex
import signal
import time

from hostutil import ensure_deployed, flat, needs_local_host, on_host, play, play_started

pytestmark = needs_local_host
LOCK = "/var/lib/sglang/deploy.lock"


def engine_processes():
    return int(on_host("pgrep -c -f -- '-m emulator'", check=False) or 0)


def lock_held():
    text = on_host("cat %s" % LOCK, check=False)
    return json.loads(text) if text.startswith("{") else None


def healthy_3step():
    assert on_host("systemctl is-active sglang") == "active"
    assert "--speculative-num-steps 3" in on_host("systemctl show -p ExecStart --value sglang")
    assert engine_processes() == 1
    assert lock_held() is None  # given back


def test_two_deploys_at_once_one_refuses_naming_the_holder(tmp_path):
    ensure_deployed()
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    runs = []
    for log in logs:
        with open(str(log), "w") as out:
            runs.append(play_started("deploy.yml", output=out))
    codes = [r.wait(timeout=900) for r in runs]
    texts = [flat(log.read_text()) for log in logs]
    assert sorted(codes) == [0, 2], texts
    refused = texts[codes.index(2)]
    assert "another run holds this host's deploy lock: root@" in refused
    assert "(pid %d, playbook deploy.yml) since " % runs[codes.index(0)].pid in refused
    assert "failed: at 'Take this host's deploy lock'" in refused
    assert "Rollout complete: every host passed its gate." in texts[codes.index(0)]
    healthy_3step()


def _wait_for_phase(run, phase):
    """Until the host's journal says the running deploy ``run`` is at ``phase``."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and run.poll() is None and (lock_held() or {}).get("phase") != phase:
        time.sleep(0.2)
    assert run.poll() is None, "the deploy ended before %s" % phase


def _kill_at(phase, tmp_path, *args):
    """A deploy (ARGS) killed with SIGKILL, its whole process group, once the host's journal says
    ``phase``; the lock it leaves behind."""
    with open(str(tmp_path / ("killed-%s.log" % phase.split(",")[0].replace(" ", "-"))), "w") as out:
        run = play_started("deploy.yml", *args, output=out)
    try:
        _wait_for_phase(run, phase)
        os.killpg(run.pid, signal.SIGKILL)
    finally:
        run.wait(timeout=60)
    held = lock_held()
    assert held and held["phase"] == phase and held["pid"] == run.pid
    return held


def test_a_deploy_killed_mid_way_is_followed_by_a_deploy_that_ends_green(tmp_path):
    """The dead run deployed the 1-step profile (a new unit); the next run, the inventory's 3-step
    profile, reclaims its lock, says where it stopped, gates and records its own server."""
    ensure_deployed()
    phase = "unit written, restarting"  # the unit changed, the server restarting: the worst moment
    before = len(on_host("cat /var/lib/sglang/gate-history.jsonl").splitlines())
    held = _kill_at(phase, tmp_path, "-e", "sglang_profile=nextn_1step")
    p = play("deploy.yml")
    out = flat(p.stdout + p.stderr)  # the reclaim is a warning (stderr)
    assert p.returncode == 0, p.stdout[-3000:]
    assert ("reclaimed a stale deploy lock: root@%s (pid %d, playbook deploy.yml) since "
            % (held["controller"], held["pid"])) in out
    assert "its process is gone; it stopped at %s (" % phase in out
    assert "deploying profile nextn_1step, release " in out
    healthy_3step()
    runs = [json.loads(x) for x in on_host("cat /var/lib/sglang/gate-history.jsonl").splitlines()[before:]]
    # the dead run recorded nothing; the next one its own passing server
    assert [(r["profile"], r["passed"]) for r in runs] == [("nextn_3step", True)]


def _write_lock(holder):
    """A lock file as another run left it."""
    script = "mkdir -p /var/lib/sglang && echo %s > %s" % (shlex.quote(json.dumps(holder)), LOCK)
    on_host("sh -c %s" % shlex.quote(script))


# a run of another controller, at its gate
TAKER = {"controller": "laptop-of-ana", "user": "ana", "pid": 4242, "pid_start": 1, "playbook": "deploy.yml",
         "token": "a" * 32, "phase": "gating", "intent": {"profile": "nextn_3step"}}
TAKER_TEXT = "ana@laptop-of-ana (pid 4242, playbook deploy.yml) since "


def test_a_deploy_whose_lock_is_taken_over_stops_and_other_runs_refuse_beside_the_taker(tmp_path):
    """A 1-step deploy (its gate would fail and restore the last-known-good) whose lock another
    controller takes over while it gates stops at its next step, naming the taker, and restores,
    records and gives back nothing. Beside the taker's live lock a rollback refuses before any
    change (compare and calibrate take the same lock: test_lock_units); sglang_break_lock takes
    it over."""
    ensure_deployed()
    history = on_host("cat /var/lib/sglang/gate-history.jsonl")
    lkg = on_host("cat /var/lib/sglang/last-known-good/sglang.json")
    log = tmp_path / "taken.log"
    with open(str(log), "w") as out:
        run = play_started("deploy.yml", "-e", "sglang_profile=nextn_1step", output=out)
    try:
        _wait_for_phase(run, "gating")
        _write_lock(dict(TAKER, started=time.time()))
        code = run.wait(timeout=600)
        said = flat(log.read_text())
        assert code == 2, said[-3000:]
        assert "this run's deploy lock was taken over by " + TAKER_TEXT in said
        assert ", now at 'gating': the host is not this run's any more, so it stops here and changes " \
               "nothing more [deploy failed at 'Check that this run still holds the host's deploy lock'; " \
               "nothing restored: another run holds the host now]" in said
        # the 1-step server its gate judged still runs: nothing restored or recorded; the lock is the taker's
        assert "--speculative-num-steps 1" in on_host("systemctl show -p ExecStart --value sglang")
        assert on_host("cat /var/lib/sglang/gate-history.jsonl") == history
        assert on_host("cat /var/lib/sglang/last-known-good/sglang.json") == lkg
        p = play("playbooks/rollback.yml")
        out = flat(p.stdout + p.stderr)
        assert p.returncode == 2, out[-3000:]
        assert "another run holds this host's deploy lock: " + TAKER_TEXT in out
        assert "-e sglang_break_lock=true takes the lock over" in out
        assert lock_held()["token"] == "a" * 32
        assert "--speculative-num-steps 1" in on_host("systemctl show -p ExecStart --value sglang")
        p = play("deploy.yml", "-e", "sglang_break_lock=true")
        assert p.returncode == 0, p.stdout[-3000:]
        assert "sglang_break_lock: took over the deploy lock held by " + TAKER_TEXT in flat(p.stderr)
        healthy_3step()
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(timeout=60)
        on_host("rm -f %s" % LOCK)


def test_a_failed_release_install_leaves_the_running_release_serving():
    """A new release (the emulator's 0.5.24) whose pip install fails (no index: its requirements
    cannot be found): the deploy fails before the unit, the 0.5.23 server keeps serving with the
    same MainPID, and no record names the half-made release."""
    ensure_deployed()
    pid = on_host("systemctl show -p MainPID --value sglang")
    unit = on_host("cat /etc/systemd/system/sglang.service")
    before = len(on_host("cat /var/lib/sglang/gate-history.jsonl").splitlines())
    bump = {"sglang_version": "0.5.24", "sglang_pip_extra_args": "--no-index",
            # the engine module's CUDA runtimes list released SGLang versions only
            "sglang_cuda_runtime": "13.0"}
    p = play("deploy.yml", "-e", json.dumps(bump))
    out = flat(p.stdout + p.stderr)
    assert p.returncode == 2, out[-3000:]
    assert "Install the requirements and the local wheels into the release's venv" in out
    assert on_host("systemctl show -p MainPID --value sglang") == pid
    assert on_host("cat /etc/systemd/system/sglang.service") == unit
    assert on_host("systemctl is-active sglang") == "active" and engine_processes() == 1
    half = [d for d in on_host("ls /opt/sglang/releases").split() if d.startswith("0.5.24-")]
    assert half
    on_host("test ! -e /opt/sglang/releases/%s/release.json" % half[0])  # never marked complete
    history = on_host("cat /var/lib/sglang/gate-history.jsonl").splitlines()[before:]
    assert all(half[0] not in line for line in history)
    assert half[0] not in on_host("cat /var/lib/sglang/last-known-good/sglang.json")
    assert lock_held() is None
