"""After SGLang 3-step (passed), vLLM n=1 (failed: back on SGLang), vLLM n=3 (passed) and vLLM
n=1 again (failed: back on vLLM n=3): the vLLM n=3 unit of its own release runs, alone, and the
history holds the four runs with their engines."""
from __future__ import annotations

import json
import shlex

from conftest import LKG_DIR, UNIT, URL, assert_service_healthy, history


def test_history_holds_the_four_runs_and_their_engines(host):
    runs = history(host)
    assert [(r["profile"], r.get("engine"), r["sglang_version"], r["passed"], r["action"]) for r in runs] == [
        ("nextn_3step", "sglang", "0.5.23", True, "record"),
        ("vllm_mtp_1", "vllm", "0.33.0", False, "restore"),
        ("vllm_mtp_3", "vllm", "0.33.0", True, "record"),
        ("vllm_mtp_1", "vllm", "0.33.0", False, "restore")]
    # the two engines are releases of their own; the vLLM profiles share theirs
    assert runs[0]["release"].startswith("0.5.23-") and runs[1]["release"].startswith("vllm-0.33.0-")
    assert runs[1]["release"] == runs[2]["release"] == runs[3]["release"]
    # vLLM's figures mean what SGLang's mean: tokens per verify step, per-position acceptance
    passed = runs[2]
    assert passed["decode_tok_s"]["median"] >= 40 and passed["accept_len"] >= 2.3
    positions = passed["cases"][0]["accept_by_position"]
    assert len(positions) == 3 and positions[0] > positions[1] > positions[2] > 0
    assert runs[1]["decode_tok_s"]["median"] < 45  # why n=1 failed: the role's threshold


def test_the_vllm_unit_runs_its_release_and_is_the_last_known_good(host):
    runs = history(host)
    unit = host.file(UNIT).content_string
    # systemd's quoting of the JSON argument is shell-like (plugins/filter systemd_exec_args)
    argv = shlex.split(next(x for x in unit.splitlines() if x.startswith("ExecStart="))[len("ExecStart="):])
    assert argv[0] == runs[2]["venv"] + "/bin/python"
    assert argv[1:5] == ["-m", "emulator.vllm", "serve", "/srv/models/Qwen3.6-27B"]
    assert argv[argv.index("--speculative-config") + 1] == '{"method": "mtp", "num_speculative_tokens": 3}'
    assert "Description=vLLM server for Qwen3.6-27B (profile vllm_mtp_3)" in unit
    meta = json.loads(host.file(LKG_DIR + "/sglang.json").content_string)
    assert (meta["profile"], meta["release"]) == ("vllm_mtp_3", runs[2]["release"])
    assert meta["unit_sha256"] == host.file(UNIT).sha256sum
    assert json.loads(host.check_output("curl -sf %s/version" % URL)) == {"version": "0.33.0"}
    assert_service_healthy(host, ready="/health")


def test_both_engines_releases_stay_installed_side_by_side(host):
    runs = history(host)
    for run, package, version in ((runs[0], "sglang-emulator", "0.5.23"),
                                  (runs[2], "vllm-emulator", "0.33.0")):
        meta = json.loads(host.file("/opt/sglang/releases/%s/release.json" % run["release"]).content_string)
        assert (meta["engine"], meta["version"]) == (run["engine"], version)
        shown = host.check_output("%s/bin/python -m pip show %s" % (run["venv"], package))
        assert "Version: %s" % version in shown


def test_one_engine_owns_the_host(host):
    procs = host.check_output("pgrep -a -f -- '-m [e]mulator' || true").splitlines()
    assert len(procs) == 1 and "emulator.vllm serve" in procs[0], procs
    assert host.check_output("systemctl list-units --type=service --state=running --no-legend 'sglang*' "
                             "| wc -l").strip() == "1"
