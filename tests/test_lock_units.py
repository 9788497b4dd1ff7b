"""The deploy lock's decisions (sglang_perf/host/lock.py) as Python calls: who may take a lock, when a
lock is stale, what the messages say; the holder's process read from /proc, and only on the
controller that wrote the lock (its host name and identity); a run whose lock was taken over stops.
The host's half (the sglang_lock_file module) and the controller's (the sglang_deploy_lock action
plugin) in-process; the playbooks that change or measure a server take the lock."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest
import yaml

from conftest import ROOT
from sglang_perf.host import lock

NOW = 1_790_000_000.0
# a deploy (it names the release it installs)
ME = {"controller": "ctl", "user": "root", "pid": 10, "token": "mine", "started": NOW,
      "intent": {"profile": "nextn_3step", "release": "0.5.23-cd34"}}


def held(**kw):
    base = {"controller": "ctl", "user": "ana", "pid": 4242, "pid_start": 7, "playbook": "deploy.yml",
            "started": NOW - 300, "token": "theirs", "phase": "gating", "phase_at": NOW - 30,
            "intent": {"profile": "nextn_1step", "release": "0.5.23-ab12"}}
    base.update(kw)
    return base


def test_no_lock_is_taken():
    assert lock.judge(None, ME, NOW, 3600) == {"action": "acquire", "expect": None, "message": ""}


def test_a_live_holder_refuses_naming_it_and_since_when():
    v = lock.judge(held(), ME, NOW, 3600, holder_alive=True)
    assert v["action"] == "refuse" and v["expect"] == "theirs"
    assert v["message"].startswith("another run holds this host's deploy lock: ana@ctl (pid 4242, playbook "
                                   "deploy.yml) since %s, 5 min ago. A deploy, rollback, compare, "
                                   "calibrate or bench run" % lock.when(NOW - 300))
    # another controller's holder: not known to be gone, refused while young
    assert lock.judge(held(controller="laptop"), ME, NOW, 3600, holder_alive=None)["action"] == "refuse"


def test_a_holder_that_is_gone_is_reclaimed_saying_where_it_stopped():
    v = lock.judge(held(), ME, NOW, 3600, holder_alive=False)
    assert v["action"] == "reclaim" and v["expect"] == "theirs"
    assert "; its process is gone; it stopped at gating (%s), deploying profile nextn_1step, release " \
           "0.5.23-ab12: this run deploys from the start, and its gate decides" % lock.when(NOW - 30) \
        in v["message"]


@pytest.mark.parametrize("age, action", [(3599, "refuse"), (3601, "reclaim")])
def test_a_lock_older_than_the_bound_is_reclaimed(age, action):
    v = lock.judge(held(started=NOW - age, controller="laptop"), ME, NOW, 3600)
    assert v["action"] == action
    if action == "reclaim":
        assert "older than sglang_deploy_lock_max_age (60 min)" in v["message"]


def test_break_lock_takes_any_lock_over_and_this_runs_own_lock_is_its_own():
    v = lock.judge(held(), ME, NOW, 3600, break_lock=True, holder_alive=True)
    assert v["action"] == "break" and v["expect"] == "theirs"
    assert v["message"].startswith("sglang_break_lock: took over the deploy lock held by ana@ctl")
    assert lock.judge(held(token="mine"), ME, NOW, 3600, holder_alive=True)["action"] == "acquire"


@pytest.mark.parametrize("content", [{"unreadable": "garbage"}, {"controller": "x"},
                                     {"started": NOW, "pid": 1}])
def test_a_lock_that_cannot_be_read_or_has_no_token_is_reclaimed(content):
    v = lock.judge(content, ME, NOW, 3600, holder_alive=True)
    assert v["action"] == "reclaim" and v["expect"] == ""


@pytest.mark.parametrize("seconds, text", [(0, "0 s"), (119, "119 s"), (120, "2 min"), (7199, "119 min"),
                                           (7200, "2.0 h"), (21600, "6.0 h"), (-5, "0 s")])
def test_ages_read_as_people_say_them(seconds, text):
    assert lock.age_text(seconds) == text


def test_a_holders_process_is_told_apart_from_a_reused_pid():
    with open("/proc/self/stat") as fh:
        start = lock.process_start(fh.read())
    assert lock.process_alive(os.getpid(), start) is True
    assert lock.process_alive(os.getpid(), start + 1) is False  # the pid, but another process
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True)
    assert lock.process_alive(int(done.stdout)) is False  # gone
    assert lock.process_alive(1, None, proc="/no/such/proc") is None  # this machine cannot tell
    # a command with spaces and parentheses in /proc/PID/stat
    assert lock.process_start("77 (a b) c) S 1 77 77 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 1 2") \
        == 987654


def dead_pid():
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True)
    return int(done.stdout)


def fake_proc(root, boot_id, pidns):
    """A /proc of another controller: its boot id, and a pid namespace (a file: its own inode)."""
    (root / "sys" / "kernel" / "random").mkdir(parents=True)
    (root / "sys" / "kernel" / "random" / "boot_id").write_text(boot_id + "\n")
    (root / "self" / "ns").mkdir(parents=True)
    (root / "self" / "ns" / "pid").write_text(pidns)
    return str(root)


def test_the_controller_identity_is_its_boot_id_and_pid_namespace(tmp_path):
    with open("/proc/sys/kernel/random/boot_id") as fh:
        boot = fh.read().strip()
    assert lock.controller_identity() == "%s/%d" % (boot, os.stat("/proc/self/ns/pid").st_ino)
    a = lock.controller_identity(fake_proc(tmp_path / "a", "b00t", "ns-a"))
    b = lock.controller_identity(fake_proc(tmp_path / "b", "b00t", "ns-b"))
    c = lock.controller_identity(fake_proc(tmp_path / "c", "0ther", "ns-c"))
    # two containers on one kernel: one boot id, two pid namespaces; another machine: its boot id
    assert a.split("/")[0] == b.split("/")[0] == "b00t" and a != b
    assert c.startswith("0ther/")
    assert lock.controller_identity(str(tmp_path / "nowhere")) == ""  # no /proc: cannot tell


def test_a_holder_with_this_host_name_on_another_controller_is_judged_by_age():
    """Two containers (or CI images) with one host name: the other's pid means nothing here, so
    its live lock is refused while young, not reclaimed as if its process were gone."""
    me = dict(ME, controller_id=lock.controller_identity())
    boot, pidns = me["controller_id"].split("/")
    other = held(controller="ctl", controller_id="%s/%d" % (boot, int(pidns) + 1), pid=dead_pid(),
                 pid_start=None)
    assert lock.holder_alive(other, me) is None
    assert lock.judge(other, me, NOW, 3600, holder_alive=lock.holder_alive(other, me))["action"] == "refuse"
    old = dict(other, started=NOW - 3601)
    assert lock.judge(old, me, NOW, 3600, holder_alive=lock.holder_alive(old, me))["action"] == "reclaim"
    # another machine (or this one before a reboot), a lock written before controller_id was,
    # another host name: none is asked
    unknown = {k: v for k, v in other.items() if k != "controller_id"}
    for h in (dict(other, controller_id="0ther-boot/" + pidns), unknown,
              dict(other, controller="laptop", controller_id=me["controller_id"])):
        assert lock.holder_alive(h, me) is None
    assert lock.judge(unknown, me, NOW, 3600, holder_alive=None)["action"] == "refuse"


def test_a_holder_on_this_very_controller_is_asked_whether_its_process_runs():
    me = dict(ME, controller_id=lock.controller_identity())
    with open("/proc/self/stat") as fh:
        start = lock.process_start(fh.read())
    live = held(controller_id=me["controller_id"], pid=os.getpid(), pid_start=start)
    assert lock.holder_alive(live, me) is True
    gone = dict(live, pid=dead_pid(), pid_start=None)
    assert lock.holder_alive(gone, me) is False
    v = lock.judge(gone, me, NOW, 3600, holder_alive=False)
    assert v["action"] == "reclaim" and "its process is gone" in v["message"]
    assert lock.holder_alive(live, dict(me, controller_id="")) is None  # this one cannot tell


def test_a_run_that_does_not_deploy_says_it_does_not_finish_the_dead_one():
    bench = {k: v for k, v in ME.items() if k != "intent"}
    v = lock.judge(held(), bench, NOW, 3600, holder_alive=False)
    assert v["message"].endswith("release 0.5.23-ab12: this run does not finish it (playbooks/drift.yml "
                                 "tells whether what runs is the intended server)")


def test_a_lock_taken_over_or_gone_says_who_holds_the_host_now():
    assert lock.lost(held(token="mine"), "mine", NOW) == ""
    assert lock.lost(held(), "mine", NOW) == (
        "this run's deploy lock was taken over by ana@ctl (pid 4242, playbook deploy.yml) since %s, "
        "5 min ago, now at 'gating': the host is not this run's any more, so it stops here and changes "
        "nothing more" % lock.when(NOW - 300))
    assert lock.lost(None, "mine", NOW).startswith("this run's deploy lock is gone (taken over and given")
    assert "taken over by an unreadable lock" in lock.lost({"unreadable": "x"}, "mine", NOW)
    assert lock.lost(held(token=""), "", NOW) != ""  # no token is never this run's


# --- the host's half (sglang_lock_file) and the controller's (sglang_deploy_lock), in-process

class Exit(Exception):
    def __init__(self, kind, result):
        Exception.__init__(self, kind)
        self.kind, self.result = kind, result


@pytest.fixture
def patched(monkeypatch):
    from ansible.module_utils import basic

    def exit_json(self, **kw):
        raise Exit("exit", kw)

    def fail_json(self, msg, **kw):
        raise Exit("fail", dict(kw, msg=msg, failed=True))

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)


def lock_file(args, check=False):
    """sglang_lock_file with ``args``: its result (failed=True when it failed)."""
    from ansible.module_utils.testing import patch_module_args

    from plugins.modules import sglang_lock_file
    with patch_module_args(dict(args, _ansible_check_mode=check)):
        with pytest.raises(Exit) as e:
            sglang_lock_file.main()
    return e.value.result


def action(args, check=False):
    """The sglang_deploy_lock action plugin's result for a task with ``args``, its module run
    in-process against the lock file on this machine."""
    from types import SimpleNamespace

    from plugins.action.sglang_deploy_lock import ActionModule

    class Action(ActionModule):
        def _file(self, task_vars, **module_args):
            return lock_file(module_args, check=self._task.check_mode)

    task = SimpleNamespace(args=args, check_mode=check, async_val=0, action="sglang_deploy_lock")
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir="/tmp"))
    return Action(task, connection, None, None, None).run(task_vars={"ansible_play_name": "unit"})


def write_lock(path, holder):
    path.write_text(json.dumps(holder))


def test_the_phase_write_fails_naming_the_holder_when_the_lock_was_taken_over(tmp_path, patched):
    path = tmp_path / "deploy.lock"
    write_lock(path, held(started=time.time() - 60))
    r = lock_file({"path": str(path), "op": "phase", "token": "mine", "phase": "gating"})
    assert r["failed"] and r["lost"] and r["msg"].startswith(
        "this run's deploy lock was taken over by ana@ctl (pid 4242, playbook deploy.yml) since ")
    assert json.loads(path.read_text())["token"] == "theirs"  # left as it is
    r = lock_file({"path": str(path), "op": "phase", "token": "theirs", "phase": "decided"})
    assert not r.get("failed") and json.loads(path.read_text())["phase"] == "decided"
    # giving back a lock that is not this run's leaves it alone, and does not fail
    r = lock_file({"path": str(path), "op": "release", "token": "mine"})
    assert not r.get("failed") and r["released"] is False and path.exists()
    path.unlink()
    assert "deploy lock is gone" in lock_file({"path": str(path), "op": "phase", "token": "mine",
                                               "phase": "gating"})["msg"]


def test_a_run_whose_lock_was_broken_stops_at_its_next_step_naming_the_breaker(tmp_path, patched):
    path = str(tmp_path / "deploy.lock")
    mine = action({"path": path, "intent": {"profile": "nextn_1step", "release": "0.5.23-ab12"}})
    assert mine["acquired"] and mine["path"] == path and mine["holder"]["controller_id"]
    assert not action({"state": "check", "lock": mine}).get("failed")
    assert not action({"state": "phase", "phase": "gating", "lock": mine}).get("failed")
    assert json.loads(open(path).read())["phase"] == "gating"
    breaker = action({"path": path, "break_lock": True, "phase": "benchmarking"})
    assert breaker["acquired"] and "sglang_break_lock: took over the deploy lock" in breaker["warnings"][0]
    now = time.time()
    for step in ({"state": "check"}, {"state": "phase", "phase": "decided"}):
        r = action(dict(step, lock=mine))
        assert r["failed"] and r["lost"], r
        assert r["msg"].startswith("this run's deploy lock was taken over by %s" % lock.holder_text(
            breaker["holder"], now).split(" since ")[0]), r["msg"]
        assert "now at 'benchmarking': the host is not this run's any more, so it stops here" in r["msg"]
    r = action({"state": "absent", "lock": mine})
    assert not r.get("failed") and r["changed"] is False and r["lost"]
    assert r["msg"].startswith("the deploy lock is not this run's any more: left alone (this run's deploy "
                               "lock was taken over by ")
    assert json.loads(open(path).read())["token"] == breaker["token"]
    assert action({"state": "absent", "lock": breaker})["changed"] is True
    assert not os.path.exists(path)


def test_a_live_lock_of_another_controller_with_this_host_name_is_refused(tmp_path, patched):
    """The lock of a run in another container (or CI image) named like this controller: its pid,
    which is no process here, does not make it stale."""
    path = tmp_path / "deploy.lock"
    with open("/proc/sys/kernel/random/boot_id") as fh:
        boot, pidns = fh.read().strip(), os.stat("/proc/self/ns/pid").st_ino
    theirs = {"controller": socket.gethostname(), "controller_id": "%s/%d" % (boot, pidns + 1),
              "user": "ci", "pid": dead_pid(), "playbook": "deploy.yml", "started": time.time() - 60,
              "token": "theirs"}
    write_lock(path, theirs)
    r = action({"path": str(path)})
    assert r.get("failed") and not r["acquired"], r
    assert r["msg"].startswith("another run holds this host's deploy lock: ci@%s (pid %d, playbook "
                               "deploy.yml) since " % (theirs["controller"], theirs["pid"]))
    assert json.loads(path.read_text())["token"] == "theirs"
    # the same run on this very controller is gone: reclaimed
    write_lock(path, dict(theirs, controller_id="%s/%d" % (boot, pidns)))
    r = action({"path": str(path)})
    assert r["acquired"] and "its process is gone" in r["warnings"][0]


def test_check_mode_takes_no_lock_and_its_other_steps_do_nothing(tmp_path, patched):
    path = tmp_path / "deploy.lock"
    write_lock(path, held(started=time.time() - 60))
    r = action({"path": str(path)}, check=True)
    assert r["acquired"] is False and r["warnings"][0].startswith("check mode: ana@ctl (pid 4242")
    for step in ({"state": "check"}, {"state": "phase", "phase": "gating"}, {"state": "absent"}):
        done = action(dict(step, lock=r), check=True)
        assert not done.get("failed") and done["msg"] == "no deploy lock of this run"
        assert action(dict(step, lock=None))["msg"] == "no deploy lock of this run"  # a role run alone
    assert json.loads(path.read_text())["token"] == "theirs"


# --- the playbooks: what changes or measures a server runs under the lock

def load(path):
    return yaml.safe_load((ROOT / path).read_text())


def tasks_of(node):
    """Every task under ``node`` (blocks, rescue, always, and a playbook's plays' sections)."""
    found = []
    for item in node if isinstance(node, list) else [node]:
        if not isinstance(item, dict):
            continue
        for key in ("tasks", "pre_tasks", "post_tasks", "block", "rescue", "always"):
            found += tasks_of(item.get(key) or [])
        if not any(k in item for k in ("block", "hosts", "ansible.builtin.import_playbook")):
            found.append(item)
    return found


# each playbook that changes or measures a server, and its host's work (tasks/locked.yml's body;
# compare's and the tuner's with the server stopped, tasks/stopped.yml's body)
LOCKED = {"deploy.yml": "deploy_host.yml", "rollback.yml": "rollback_host.yml",
          "compare.yml": "stopped.yml:compare_profiles.yml", "calibrate.yml": "measure.yml",
          "bench.yml": "measure.yml", "tune.yml": "stopped.yml:tune_host.yml"}
# playbooks that neither change nor measure a server (preflight, render: no change; drift: reads)
UNLOCKED = {"drift.yml", "preflight.yml", "render.yml"}


def test_every_playbook_that_changes_or_measures_a_server_holds_the_lock():
    assert {p.name for p in (ROOT / "playbooks").glob("*.yml")} == set(LOCKED) | UNLOCKED
    for playbook, body in LOCKED.items():
        locked = [t for t in tasks_of(load("playbooks/" + playbook))
                  if t.get("ansible.builtin.include_tasks") == "tasks/locked.yml"]
        assert [":".join(filter(None, (t["vars"]["_locked_tasks"], t["vars"].get("_stopped_tasks"))))
                for t in locked] == [body], playbook
    for playbook in UNLOCKED:
        assert "locked.yml" not in (ROOT / "playbooks" / playbook).read_text()
    take = [t for t in tasks_of(load("playbooks/tasks/locked.yml")) if "sglang_deploy_lock" in t]
    assert [t["sglang_deploy_lock"].get("state", "present") for t in take] == ["present", "absent"]


def lock_steps(path):
    """(task name, whether it checks this run's lock) for each task of ``path``."""
    return [(t.get("name", ""), t.get("sglang_deploy_lock", {}).get("state") in ("check", "phase"))
            for t in tasks_of(load(path))]


@pytest.mark.parametrize("path, change", [
    ("roles/sglang/tasks/service.yml", "Take over the hand-made units"),
    ("roles/sglang/tasks/service.yml", "Apply a changed unit or environment now"),
    ("roles/sglang_gate/tasks/decide.yml", "Decide what the gate does"),
    ("roles/sglang_gate/tasks/restore.yml", "Restore the last-known-good unit and environment"),
    ("playbooks/tasks/compare_profile.yml", "Install the profile's release"),
    ("playbooks/tasks/stopped.yml", "Stop the host's server"),
    ("playbooks/tasks/stopped.yml", "Start the host's own server again"),
    ("playbooks/tasks/measure_run.yml", "Keep the run's figures"),
    ("playbooks/tasks/deploy_host.yml", "Gate"),
    ("playbooks/tasks/deploy_host.yml", "Watch on the running server"),
    ("playbooks/tasks/tune_host.yml", "Tune, launches at most"),
    ("playbooks/tasks/compare_profiles.yml", "Launch, measure and stop each profile"),
])
def test_a_lock_check_comes_before_each_step_that_changes_the_server(path, change):
    steps = lock_steps(path)
    at = [i for i, (name, _) in enumerate(steps) if name.startswith(change)]
    assert at, (path, change)
    assert any(checks for _, checks in steps[:at[0]]), "%s: no lock check before %r" % (path, change)


def test_a_rescue_restores_nothing_when_the_lock_is_another_runs():
    rescue = load("roles/sglang_gate/tasks/rescue.yml")
    check = [t for t in rescue if t.get("sglang_deploy_lock", {}).get("state") == "check"]
    assert check and check[0]["failed_when"] is False
    guarded = [t for t in rescue if "block" in t]
    assert len(guarded) == 1 and guarded[0]["when"] == "not %s.lost | default(false)" % check[0]["register"]
    inside = {t.get("ansible.builtin.include_tasks") for t in guarded[0]["block"]}
    assert {"restore.yml", "stop.yml", "import_lkg.yml"} <= inside


def test_the_server_is_started_again_only_while_this_run_holds_the_lock():
    """tasks/stopped.yml (compare's and the tuner's): the always: checks the lock before it stops
    a transient unit or starts the service - a run whose lock another took over leaves the host
    to that run."""
    [outer] = load("playbooks/tasks/stopped.yml")
    steps = [(t.get("name", ""), t.get("sglang_deploy_lock", {}).get("state")) for t in outer["always"]]
    assert steps[0][1] == "check"
    assert [n for n, _ in steps[1:] if n.startswith(("Stop a transient unit", "Start the host's own"))] == [
        "Stop a transient unit left behind ({{ _stopped_unit }})", "Start the host's own server again"]
