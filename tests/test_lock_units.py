"""The deploy lock's decisions (sglang_perf/lock.py) as Python calls: who may take a lock, when a
lock is stale, what the messages say; the holder's process read from /proc."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sglang_perf import lock

NOW = 1_790_000_000.0
ME = {"controller": "ctl", "user": "root", "pid": 10, "token": "mine", "started": NOW}


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
    assert v["message"].startswith("another deploy holds this host's lock: ana@ctl (pid 4242, playbook "
                                   "deploy.yml) since %s, 5 min ago." % lock.when(NOW - 300))
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
