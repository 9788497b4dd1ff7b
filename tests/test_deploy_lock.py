"""The host's deploy lock and journal on a local container (docs/deploys.md): two deploys at once
(one refuses, naming the holder), a deploy killed with SIGKILL after writing its unit and during
its gate (the next deploy reclaims the lock, says where the dead one stopped, and ends green
with one engine process), a stale lock of another controller reclaimed, a live one refused and
broken on purpose, and a release whose pip install fails leaving the running release serving."""
from __future__ import annotations

import json
import os
import shlex
import signal
import time

import pytest

from hostutil import ensure_deployed, flat, needs_local_host, on_host, play, play_started

pytestmark = needs_local_host
LOCK = "/var/lib/sglang/deploy.lock"


def engine_processes():
    return int(on_host("pgrep -c -f -- '-m bench.emulator'", check=False) or 0)


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
    assert "another deploy holds this host's lock: root@" in refused
    assert "(pid %d, playbook deploy.yml) since " % runs[codes.index(0)].pid in refused
    assert "failed: at 'Take this host's deploy lock'" in refused
    assert "Rollout complete: every host passed its gate." in texts[codes.index(0)]
    healthy_3step()


def _kill_at(phase, tmp_path, *args):
    """A deploy (ARGS) killed with SIGKILL, its whole process group, once the host's journal says
    ``phase``; the lock it leaves behind."""
    with open(str(tmp_path / ("killed-%s.log" % phase.split(",")[0].replace(" ", "-"))), "w") as out:
        run = play_started("deploy.yml", *args, output=out)
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline and run.poll() is None:
            held = lock_held()
            if held and held.get("phase") == phase:
                break
            time.sleep(0.2)
        assert run.poll() is None, "the deploy ended before %s" % phase
        os.killpg(run.pid, signal.SIGKILL)
    finally:
        run.wait(timeout=60)
    held = lock_held()
    assert held and held["phase"] == phase and held["pid"] == run.pid
    return held


@pytest.mark.parametrize("phase", ["unit written, restarting", "gating"])
def test_a_deploy_killed_mid_way_is_followed_by_a_deploy_that_ends_green(phase, tmp_path):
    """The dead run deployed the 1-step profile (a new unit); the next run, the inventory's 3-step
    profile, reclaims its lock, says where it stopped, gates and records its own server."""
    ensure_deployed()
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


def test_a_live_lock_of_another_controller_refuses_until_broken_and_an_old_one_is_reclaimed():
    ensure_deployed()
    other = {"controller": "laptop-of-ana", "user": "ana", "pid": 4242, "pid_start": 1,
             "playbook": "deploy.yml", "started": time.time() - 300, "token": "a" * 32,
             "phase": "gating", "intent": {"profile": "nextn_3step"}}
    _write_lock(other)
    try:
        p = play("playbooks/rollback.yml")  # a rollback refuses as a deploy does, before any change
        said = flat(p.stdout + p.stderr)
        assert p.returncode == 2, said[-3000:]
        assert "another deploy holds this host's lock: ana@laptop-of-ana (pid 4242, playbook " \
               "deploy.yml) since " in said
        assert "5 min ago" in said and "-e sglang_break_lock=true takes the lock over" in said
        assert lock_held()["token"] == "a" * 32
        p = play("deploy.yml", "-e", "sglang_break_lock=true")
        assert p.returncode == 0, p.stdout[-3000:]
        assert "sglang_break_lock: took over the deploy lock held by ana@laptop-of-ana" in flat(p.stderr)
        healthy_3step()
        _write_lock(dict(other, started=time.time() - 7 * 3600))  # older than the 6 h bound
        p = play("deploy.yml")
        assert p.returncode == 0, p.stdout[-3000:]
        assert "older than sglang_deploy_lock_max_age (6.0 h); it stopped at gating" in flat(p.stderr)
        healthy_3step()
    finally:
        on_host("rm -f %s" % LOCK)


def test_check_mode_takes_no_lock_and_says_who_holds_one():
    ensure_deployed()
    _write_lock({"controller": "laptop-of-ana", "user": "ana", "pid": 4242, "playbook": "deploy.yml",
                 "started": time.time() - 60, "token": "b" * 32})
    try:
        p = play("deploy.yml", "--check")
        assert p.returncode == 0, p.stdout[-3000:]
        assert "check mode: ana@laptop-of-ana (pid 4242, playbook deploy.yml) since" in flat(p.stderr)
        assert lock_held()["token"] == "b" * 32
    finally:
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
            # the role's table of CUDA runtimes lists released SGLang versions only
            "_sglang_cuda_runtime_by_release": {"sglang-0.5.23": "13.0", "sglang-0.5.24": "13.0"}}
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
