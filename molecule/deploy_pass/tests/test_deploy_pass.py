"""The gated deploy passed: one history line, the unit recorded as last-known-good."""
from __future__ import annotations

import json

from conftest import LKG_DIR, UNIT, assert_service_healthy, history


def test_history_has_one_passing_run(host):
    runs = history(host)
    assert len(runs) == 1, runs
    run = runs[0]
    assert run["passed"] is True and run["profile"] == "nextn_3step"
    assert (run["action"], run["reason"]) == ("record", "recorded as last-known-good")
    # the plumbing plan's one case, with the production thresholds of its case
    assert [c["case"] for c in run["cases"]] == ["coding"] and run["cases"][0]["passed"] is True
    t = run["cases"][0]["thresholds"]
    assert (t["min_tok_s"], t["min_accept_len"]) == (45, 2.8)
    assert run["decode_tok_s"]["median"] >= 45 and run["accept_len"] >= 2.8
    assert run["errors"] == 0


def test_last_known_good_is_the_deployed_unit(host, rendered_unit):
    unit = host.file(UNIT).content_string
    assert unit == rendered_unit("nextn_3step")
    assert host.file(LKG_DIR + "/sglang.service").content_string == unit
    env = host.file("/etc/sglang/sglang.env").content_string
    assert host.file(LKG_DIR + "/sglang.env").content_string == env
    meta = json.loads(host.file(LKG_DIR + "/sglang.json").content_string)
    assert meta["passed"] is True and meta["profile"] == "nextn_3step"
    assert meta["unit_sha256"] == host.file(UNIT).sha256sum == history(host)[0]["unit_sha256"]


def test_service_is_healthy(host):
    assert_service_healthy(host)
