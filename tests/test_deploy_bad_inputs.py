"""The bad-input matrix end to end: one case of each class of refusal (tests/bad_inputs.py
END_TO_END; every case is held against the deploy plan in tests/test_deploy_plan.py), and the
refusals only the host can tell, each run for real against the local container with
`ansible-playbook playbooks/preflight.yml -e ...`: the very play deploy.yml imports first
(tests/test_deploy.py shows deploy.yml itself refusing bad input the same way). Every case must
fail in the preflight, with a message that names the variable and says what would be valid, and
change nothing (recap changed=0; the unit's checksum and the service's MainPID are the same after
the whole matrix as before it). The cases run a few at a time: the preflight is read-only."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from bad_inputs import CASES as ALL_CASES
from bad_inputs import END_TO_END
from hostutil import ensure_deployed, flat, needs_local_host, on_host, play, recap_changed

pytestmark = needs_local_host

# The cases that run here: one of each class of refusal, and those only the host can tell.
CASES = [c for c in ALL_CASES if c[0] in END_TO_END]


# Preflight runs at a time. Measured on 2 cores: the 39 cases took 189 s, 3 at a time, inside a
# whole parallel pytest run; before (each case a whole deploy.yml run and four host checks, one
# at a time) about 15 s per case, 585 s.
PARALLEL = 3


def host_state():
    return (on_host("sha256sum /etc/systemd/system/sglang.service"),
            on_host("systemctl show -p MainPID --value sglang"))


@pytest.fixture(scope="module")
def matrix():
    """Every case's preflight run ({case id: CompletedProcess}), and the host before them."""
    ensure_deployed()
    before = host_state()

    def preflight(case):
        return case[0], play("playbooks/preflight.yml", "-e", json.dumps(case[1]), timeout=300)

    with ThreadPoolExecutor(PARALLEL) as pool:
        runs = dict(pool.map(preflight, CASES))
    return before, runs


@pytest.mark.parametrize("case, extra, words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_before_the_host_changes(matrix, case, extra, words):
    p = matrix[1][case]
    out = flat(p.stdout + p.stderr)
    assert p.returncode != 0, out[-2000:]
    for w in words:
        assert w in out, "%r not in: %s" % (w, out[-2500:])
    assert "Traceback" not in out
    if "PLAY RECAP" in p.stdout:
        assert recap_changed(p.stdout) == 0
    assert "Rollout not started: the preflight refused it" in out
    for key in ("sglang_api_key", "sglang_hf_token"):
        if key in extra:
            assert extra[key] not in out, "the rejected secret was echoed"


def test_the_matrix_changed_nothing_on_the_host(matrix):
    assert host_state() == matrix[0]


def test_the_preflight_alone_passes_good_input_and_says_nothing_was_deployed():
    ensure_deployed()
    before = host_state()
    p = play("playbooks/preflight.yml")
    assert p.returncode == 0, p.stdout[-3000:]
    assert recap_changed(p.stdout) == 0
    assert "Preflight passed on every host (playbooks/preflight.yml alone): nothing was deployed." in p.stdout
    assert host_state() == before


def test_every_end_to_end_case_is_in_the_matrix():
    assert len(CASES) == len(END_TO_END)
