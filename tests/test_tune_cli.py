"""`python -m bench tune` end to end: every candidate started through --launch (the emulator, its
SGLEMU_* knobs in the command: the server family, which the tuner never sees), measured on the
host's gate plan, stopped; the report, the JSON, the chart and a tuned.yml the deploy accepts."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time

import yaml

from sglang_perf.judge.tune_launch import STOP_GRACE
from benchrun import bench
from conftest import ROOT
from planutil import plan_for

# A fast emulator (4x the modelled speed, no warm-up requests): the family is the emulator's own
# calibration (emulator/README.md), in which the DFLASH drafter leads NEXTN on coding prompts.
LAUNCH = "SGLEMU_SPEED_SCALE=4 SGLEMU_WARMUP_REQUESTS=0 exec %s -m emulator {args}" % sys.executable
# The host: 2 x A6000 whose bandwidth is scaled with the emulator's speed, so the roofline the
# deploy's preflight holds thresholds against is the emulated host's (as tests/test_compare_cli.py).
HARDWARE = {"gpu_count": 2, "gpu_bandwidth_gbs": 768 * 4, "gpu_memory_gib": 48, "compute_capability": 8.6}
# The objective's sample is the case's max_requests: 16, whose median interval is [x(4), x(13)] at
# 95% (at 8 it is the sample's min and max: one slow request under CI's load made a tie of a
# drafter 50% faster). 256 tokens a request: the drafter's lower bound 20-27% above the 3-step's
# upper bound in three runs beside the non-container tier (128: 3.5-21%).
PLAN = """sglang_gate_plan:
  coding: {prompts: coding, concurrency: 1, requests: 6, max_requests: 16, max_tokens: %d}
sglang_gate_thresholds:
  nextn_3step:
    coding: {min_tok_s: 45, min_accept_len: 2.8}
"""


def tune(*args, timeout=600, env=None):
    return bench("tune", "--quiet", *args, timeout=timeout, env=env)


def _vars(tmp_path, drafter=True, block=None, max_tokens=256):
    models = tmp_path / "models"
    if drafter:  # the host's drafter, a stand-in whose config.json leaves the block to the profile
        (models / "Qwen3.6-27B-DFlash").mkdir(parents=True)
        (models / "Qwen3.6-27B-DFlash" / "config.json").write_text(json.dumps(
            {"architectures": ["DFlashDraftModel"], "model_type": "qwen3",
             "dflash_config": {"block_size": block} if block else {}}))
    path = tmp_path / "host.yml"
    path.write_text("sglang_model_dir: %s\nsglang_hardware: %s\n%s" % (models, json.dumps(HARDWARE),
                                                                     PLAN % max_tokens))
    return path


def _left_running(launches):
    """Processes still serving on a launch's port (the tuner must have stopped every one)."""
    ports = {str(x["port"]).encode() for x in launches}
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = open("/proc/%s/cmdline" % d, "rb").read().split(b"\0")
            except OSError:
                continue
            at = cmd.index(b"--port") if b"--port" in cmd else None
            if at is not None and at + 1 < len(cmd) and cmd[at + 1] in ports:
                out.append(int(d))
    return out


def test_a_drafter_wins_and_its_tuned_vars_deploy(tmp_path):
    out = tmp_path / "out"
    p = tune("--vars", _vars(tmp_path), "--launch", LAUNCH, "--budget-launches", 6, "--out", out)
    assert p.returncode == 0, p.stderr[-3000:]
    data = json.loads((out / "tune.json").read_text())
    launches = data["launches"]
    search = [x for x in launches if x["phase"] == "search"]
    assert 3 <= len(search) <= 6
    # then the finalists again, the current profile last; the verdict uses both launches
    finals = [x for x in launches if x["phase"] == "finalists"]
    assert launches[len(search):] == finals and 2 <= len(finals) <= 3
    assert finals[0]["key"] == data["winner"]["key"] and finals[-1]["name"] == "nextn_3step"
    assert all(x["key"] in [s["key"] for s in search] for x in finals)
    # the current profile first, then the deepest chain and the largest block (acceptance per position)
    assert [tuple(x["key"][1:3]) for x in launches[:3]] == [("chain", 3), ("chain", 6), ("block", 16)]
    for x in launches:  # exactly the deploy's argv, on the port the tuner chose
        argv = x["argv"]
        assert argv[argv.index("--port") + 1] == str(x["port"]) and "--model-path" in argv
    win = data["winner"]
    assert win["key"][1] == "block" and win["beats_current"], data["headline"]
    assert "--speculative-algorithm" in win["argv"] and "DFLASH" in win["argv"]
    md = (out / "tune.md").read_text()
    assert md.index("## The answer") < md.index("## Why each other setting lost") < md.index("## Launches")
    assert "the winner is SGLang DFLASH block" in md
    assert "## Finalists, launched again" in md
    assert (out / "tune.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a vars file the deploy's preflight accepts as it is, running the winner
    tuned = yaml.safe_load((out / "tuned.yml").read_text())
    name = tuned["sglang_profile"]
    assert name == win["name"] and tuned["sglang_host_profiles"][name]["base"] == "dflash"
    assert "sglang_profiles" not in tuned  # the inventory's own stay whole: the winner merges by name
    bars = tuned["sglang_gate_host_thresholds"][name]
    assert set(bars) == {"coding"}
    # the stricter of the service bar (45) and its own figures less the margin
    assert bars["coding"]["min_tok_s"] >= 45 and bars["coding"]["min_accept_len"] > 2.8
    plan = plan_for(extra=dict(tuned, sglang_hardware=HARDWARE), review=True)
    assert plan["problems"] == [] and plan["profile"] == name
    argv = plan["server"]["argv"]
    assert argv[argv.index("--speculative-num-draft-tokens") + 1] == str(win["key"][2])
    assert _left_running(launches) == []  # every candidate stopped


def test_nothing_beats_the_current_profile_and_it_is_kept(tmp_path):
    space = tmp_path / "space.yml"  # no drafter, one fraction: the depths around the current one
    space.write_text("chain_steps: [2, 3]\nadaptive: [false]\nno_spec: false\nblocks: []\n"
                     "mem_fractions: [0.88]\n")
    out = tmp_path / "out"
    p = tune("--vars", _vars(tmp_path, drafter=False, max_tokens=128), "--launch", LAUNCH, "--space", space,
             "--out", out)
    assert p.returncode == 0, p.stderr[-3000:]
    data = json.loads((out / "tune.json").read_text())
    search = [x for x in data["launches"] if x["phase"] == "search"]
    assert search[0]["name"] == "nextn_3step" and len(search) <= 2
    assert data["headline"].startswith("nothing beats the current profile nextn_3step")
    assert yaml.safe_load((out / "tuned.yml").read_text()) == {"sglang_profile": "nextn_3step"}


def test_launches_that_never_start_are_findings_not_a_crash(tmp_path):
    out = tmp_path / "out"
    stops = tmp_path / "stops"
    p = tune("--vars", _vars(tmp_path), "--launch",
             "echo 'torch.OutOfMemoryError: CUDA out of memory' {args}; exit 1", "--budget-launches", 3,
             "--stop", "echo {port} >> %s" % stops, "--out", out)
    assert p.returncode == 1, p.stderr[-2000:]
    data = json.loads((out / "tune.json").read_text())
    assert len(data["launches"]) <= 3 and data["winner"] is None
    # --stop ran after each launch, with its port
    assert stops.read_text().split() == [str(x["port"]) for x in data["launches"]]
    assert all(x["outcome"]["started"] is False and x["outcome"]["memory"] == "over"
               for x in data["launches"])
    assert "no setting passed" in (out / "tune.md").read_text()


def test_bad_input_is_refused_before_any_launch(tmp_path):
    v = _vars(tmp_path)
    bad_space = tmp_path / "bad.yml"
    bad_space.write_text("blocks: [1]\n")
    bad_profile = tmp_path / "bad_profile.yml"
    bad_profile.write_text("sglang_host_profiles:\n  bad: {base: nextn_3step, speculative_num_steps: 0}\n")
    for args, message in (
            (["--launch", "python -m emulator"], "has no {args}"),
            (["--launch", LAUNCH, "--space", bad_space], "blocks must be at least 2 tokens"),
            (["--launch", LAUNCH, "--objective", "prose"], "--objective prose is not a case"),
            (["--launch", LAUNCH, "--budget-launches", 0], "--budget-launches must be 1 or more"),
            ([], "no --launch command for sglang"),
            (["--launch", LAUNCH, "--profiles", "no_spec,nextn_9step"], "--profiles: no profile nextn_9step"),
            (["--launch", LAUNCH, "--profiles", "no_spec,no_spec"],
             "--profiles names no_spec more than once"),
            (["--launch", LAUNCH, "--profiles", "no_spec", "--space", bad_space], "not with --space"),
            (["--launch", LAUNCH, "--profiles", " , "],
             "--profiles: names none (the host's profiles: dflash,"),
            (["--launch", "sglang=" + LAUNCH, "--profiles", "no_spec,vllm_mtp_3"],
             "no --launch command for vllm"),
            (["--vars", bad_profile, "--launch", LAUNCH, "--profiles", "bad"],
             "--profiles: the deploy's preflight refuses bad: sglang_profiles.bad.speculative_num_steps")):
        p = tune("--vars", v, *args, "--out", tmp_path / "never")
        assert p.returncode == 2 and message in p.stderr, (args, p.stderr)
    assert not (tmp_path / "never").exists()


def test_listed_profiles_are_launched_as_they_stand_and_the_winner_named(tmp_path):
    """--profiles: the host's own profiles, the current first, each launched with the deploy's argv
    for it; a winner that is one of them is named in tuned.yml, not written again. --check first:
    everything read and checked, nothing launched."""
    v = tmp_path / "no_spec.yml"  # the host serves without speculation; its bar is the service's
    v.write_text("sglang_profile: no_spec\n"
                 "sglang_gate_thresholds:\n  no_spec:\n    coding: {min_tok_s: 20}\n")
    host, out = _vars(tmp_path, drafter=False, max_tokens=128), tmp_path / "out"
    args = ("--vars", host, "--vars", v, "--launch", LAUNCH, "--profiles", "nextn_3step", "--no-confirm",
            "--out", out)
    p = tune(*args, "--check")
    assert p.returncode == 0, p.stderr[-2000:]
    check = json.loads(p.stdout)  # what playbooks/tune.yml reads: the releases the candidates run from
    assert (check["settings"], check["refused"]) == (2, 0)
    [release] = check["releases"]  # both profiles run on the role's one SGLang release
    assert (release["engine"], release["version"], release["launch_module"]) == (
        "sglang", "0.5.23", "sglang.launch_server")
    assert release["dir"] == "/opt/sglang/releases/" + release["name"]
    assert release["venv"] == release["dir"] + "/venv"
    assert not out.exists()
    p = tune(*args)
    assert p.returncode == 0, p.stderr[-3000:]
    data = json.loads((out / "tune.json").read_text())
    assert [x["name"] for x in data["launches"]] == ["no_spec", "nextn_3step"]
    extra = yaml.safe_load(host.read_text())
    for x in data["launches"]:
        planned = plan_for(extra=dict(extra, sglang_profile=x["name"], sglang_port=x["port"]), review=True)
        assert x["argv"] == planned["server"]["argv"][3:], x["name"]
    assert data["winner"]["name"] == "nextn_3step" and data["winner"]["beats_current"], data["headline"]
    assert data["headline"].startswith("the winner is nextn_3step (SGLang NEXTN 3 steps, mem 0.88): ")
    tuned = yaml.safe_load((out / "tuned.yml").read_text())
    assert sorted(tuned) == ["sglang_gate_host_thresholds", "sglang_profile"]
    assert tuned["sglang_profile"] == "nextn_3step"
    assert tuned["sglang_gate_host_thresholds"]["nextn_3step"]["coding"]["min_tok_s"] >= 20
    plan = plan_for(extra=dict(extra, **tuned), review=True)
    assert plan["problems"] == [] and plan["profile"] == "nextn_3step"
    assert _left_running(data["launches"]) == []


def test_cases_measure_each_listed_profile_on_them_and_write_compare_reports_results(tmp_path):
    """--profiles with --cases (playbooks/compare.yml's): these profiles and no other - the host's
    own, nextn_3step, is not added - launched once each in the order given as the tuner launches,
    every case measured without thresholds, the plan results written and the comparison's report
    from them; a profile that does not start is an error row, not the end of the run."""
    from bench import compare_plan
    host, out = _vars(tmp_path, drafter=False, max_tokens=64), tmp_path / "out"
    measured = {"coding": {"prompts": "coding", "concurrency": 1, "requests": 6, "max_tokens": 64},
                "c2": {"prompts": "coding", "concurrency": 2, "requests": 4, "max_tokens": 64}}
    cases = compare_plan.measure_only({"compare_plan": measured})
    given = tmp_path / "cases.json"
    given.write_text(json.dumps({"cases": cases, "options": {"warmup": 0},
                                 "report": {"by": "plan", "current": "nextn_1step"}}))
    # a profile whose launch exits at once; and a bar (the host's, nextn_3step's 200 tok/s) no_spec's
    # roofline cannot reach: measured without thresholds, no profile's bars refuse its launch
    broken = tmp_path / "broken.yml"
    broken.write_text("sglang_host_profiles:\n  nextn_2step_broken:\n    base: nextn_3step\n"
                      "    speculative_num_steps: 2\n    speculative_num_draft_tokens: 3\n"
                      "sglang_gate_host_thresholds:\n  nextn_3step:\n"
                      "    coding: {min_tok_s: 200, min_accept_len: 2.8}\n"
                      + yaml.safe_dump({"compare_plan": measured}))  # the measured plan, as compare.yml's
    launch = 'case "{args}" in *"--speculative-num-steps 2"*) exit 3;; esac; ' + LAUNCH
    results = tmp_path / "results.json"
    # the stand-in's GPU 0 held by a thermal slowdown from half a second after its first reading
    state = tmp_path / "smi.json"
    state.write_text(json.dumps({"gpus": [{"slowdown": {"reason": "sw_thermal_slowdown", "after_s": 0.5}},
                                          {}]}))
    p = tune("--vars", host, "--vars", broken, "--launch", launch,
             "--profiles", "nextn_2step_broken,nextn_1step,no_spec", "--cases", given, "--results", results,
             "--out", out, "--nvidia-smi", ROOT / "scripts" / "nvidia_smi_standin.py",
             env={"NVIDIA_SMI_STANDIN_STATE": str(state)})
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(results.read_text())
    assert [r["profile"] for r in got] == ["nextn_2step_broken", "nextn_1step", "no_spec"]
    assert got[0]["result"] is None and "exited with status 3 before it was ready" in got[0]["error"], got[0]
    for r in got[1:]:
        assert r["error"] is None and [c["case"] for c in r["result"]["cases"]] == ["coding", "c2"], r
        assert all(c["passed"] for c in r["result"]["cases"])  # measured, not judged
    assert got[1]["result"]["cases"][0]["accept_len"] > 1.5
    assert got[2]["result"]["cases"][0]["accept_len"] is None  # no speculation
    # what held the GPUs down while each was measured: none for the launch that never started
    assert got[0]["slowdowns"] == []
    assert all(r["slowdowns"][0].startswith("GPU 0 held by sw_thermal_slowdown for ") for r in got[1:]), got
    # the comparison's report, written by the tuner from them: a row per profile and case of the
    # measured plan, the slowdowns a section of their own, the answer on stdout
    report = json.loads((out / "compare.json").read_text())
    rows = {(r["profile"], r["case"]): r for r in report["rows"]}
    assert {k: r["error"] is None for k, r in rows.items()} == {
        ("nextn_2step_broken", "coding"): False, ("nextn_2step_broken", "c2"): False,
        ("nextn_1step", "coding"): True, ("nextn_1step", "c2"): True, ("no_spec", "coding"): True,
        ("no_spec", "c2"): True}
    assert all(rows[r["profile"], c["case"]]["decode_tok_s_median"] == c["decode_tok_s"]["median"] > 0
               for r in got[1:] for c in r["result"]["cases"])
    assert report["summary"]["slowdowns"] == {r["profile"]: r["slowdowns"] for r in got[1:]}
    assert {f.name for f in out.iterdir()} >= {"compare.md", "compare.csv", "compare.json", "compare.png"}
    md = (out / "compare.md").read_text()
    assert md.index("## GPU clocks held down during a measurement") < md.index("## Not measured")
    assert "- nextn_1step: %s" % got[1]["slowdowns"][0] in md
    assert report["summary"]["lines"] and p.stdout.startswith("- " + report["summary"]["lines"][0])
    assert not (out / "tune.json").exists()  # no search: the comparison answers
    # the sweep's report from the same results: a row per profile and level, kept as rows.json
    from bench import planner
    sweep = compare_plan.reporter(planner.host_for(None, "tune", {}, vars_files=[host, broken]),
                                  {"by": "sweep", "current": None}, cases)
    assert sweep(got, tmp_path / "sweep") == 0
    kept = json.loads((tmp_path / "sweep" / "rows.json").read_text())
    assert [(r["profile"], r["concurrency"], r["error"] is None) for r in kept] == [
        ("nextn_2step_broken", 1, False), ("nextn_2step_broken", 2, False), ("nextn_1step", 1, True),
        ("nextn_1step", 2, True), ("no_spec", 1, True), ("no_spec", 2, True)]
    swept = json.loads((tmp_path / "sweep" / "compare.json").read_text())["rows"]
    assert sorted(json.dumps({k: r[k] for k in kept[0]}) for r in swept) == sorted(map(json.dumps, kept))
    # --cases without --profiles, or with a case or option a run would refuse: refused before
    # any launch, naming what is wrong
    p = tune("--vars", host, "--launch", LAUNCH, "--cases", given)
    assert p.returncode == 2 and "--cases measures the profiles --profiles names" in p.stderr
    for bad, said in (({"cases": cases, "options": {"warmup": -1}}, "invalid warmup: must be 0 or more"),
                      ({"cases": [{k: v for k, v in cases[0].items() if k != "thresholds"}]},
                       "invalid cases: cases[0] (coding).thresholds must be a mapping"),
                      ({"cases": []}, "must be {\"cases\": [resolved cases"),
                      ({"cases": cases, "report": {"by": "table"}}, "report must be {\"by\": \"plan\" or"),
                      ({"cases": cases, "report": {"by": "plan", "current": "no_spec"}},
                       "the report's current profile no_spec is not one of --profiles (nextn_1step)"),
                      ({"cases": cases, "report": {"by": "plan", "current": None}},
                       "a report by the plan needs the measured plan, compare_plan")):
        given.write_text(json.dumps(bad))
        p = tune("--vars", host, "--launch", "exit 9 {args}", "--profiles", "nextn_1step", "--cases", given,
                 "--out", tmp_path / "never")
        assert p.returncode == 2 and said in p.stderr, (bad, p.stderr)
    # a report the host's figures cannot give (the roofline's sizes) is refused before a launch too
    given.write_text(json.dumps({"cases": cases, "report": {"by": "sweep", "current": None}}))
    no_sizes = tmp_path / "no_sizes.yml"
    no_sizes.write_text("sglang_hardware: null\n")
    p = tune("--vars", host, "--vars", no_sizes, "--launch", "exit 9 {args}", "--profiles", "nextn_1step",
             "--cases", given, "--out", tmp_path / "never")
    assert p.returncode == 2 and "--cases: size figures: " in p.stderr, p.stderr
    assert "sglang_hardware" in p.stderr
    assert not (tmp_path / "never").exists()


def test_args_remote_survive_a_second_shell(tmp_path):
    """{args_remote}: through a command that joins its words and hands them to a shell again (as
    ssh does), each argument arrives whole - vLLM's --speculative-config JSON too."""
    from bench.candidate import fill
    fake_ssh = tmp_path / "ssh"
    fake_ssh.write_text("#!/bin/sh\nexec sh -c \"$*\"\n")
    fake_ssh.chmod(0o755)
    argv = ["serve", "/srv/models/Qwen3.6-27B", "--speculative-config",
            '{"method": "mtp", "num_speculative_tokens": 3}', "--served-model-name", "a b$c"]
    script = tmp_path / "args.py"
    script.write_text("import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    done = subprocess.run(fill("%s %s %s {args_remote}" % (fake_ssh, sys.executable, script), argv, 1),
                          shell=True, capture_output=True, text=True, timeout=30)
    assert json.loads(done.stdout) == argv, done.stderr
    once = subprocess.run(fill("%s %s {args}" % (sys.executable, script), argv, 1), shell=True,
                          capture_output=True, text=True, timeout=30)
    assert json.loads(once.stdout) == argv
    # {python} and {module}: each candidate's own release, inside words quoted for both shells (as
    # playbooks/tune.yml quotes its systemd-run command)
    release = {"venv": str(tmp_path / "rel" / "venv"), "launch_module": "vllm.entrypoints.cli.main"}
    (tmp_path / "rel" / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "rel" / "venv" / "bin" / "python").symlink_to(sys.executable)
    words = " ".join(shlex.quote(shlex.quote(w)) for w in ("{python}", str(script), "{module}"))
    done = subprocess.run(fill("%s %s {args_remote}" % (fake_ssh, words), argv, 1, release), shell=True,
                          capture_output=True, text=True, timeout=30)
    assert json.loads(done.stdout) == ["vllm.entrypoints.cli.main"] + argv, done.stderr


def test_blocks_the_drafter_was_not_trained_for_are_searched_and_noted(tmp_path):
    """A drafter whose config.json says block 16: blocks 4 and 8 stay in the search (both engines
    run them, SGLang resizing the drafter) and the report notes them; --drafter-block says it for
    a drafter this machine cannot read (a bare N: every drafter)."""
    for extra, block, trained in (([], 16, 16), (["--drafter-block", "8"], None, 8)):
        out = tmp_path / ("out%d" % trained)
        p = tune("--vars", _vars(tmp_path / str(trained), block=block), "--launch", "exit 1 {args}",
                 "--budget-launches", 1, "--out", out, *extra)
        assert p.returncode == 1, p.stderr[-2000:]
        data = json.loads((out / "tune.json").read_text())
        assert not [n for n in data["refused"] if "block" in n], data["refused"]
        others = sorted({4, 8, 16} - {trained})
        assert [o.split(" and the space drafts ")[1].split(":")[0] for o in data["observations"]] == \
            [", ".join(map(str, others))]
        assert "trained for a block of %d tokens" % trained in data["observations"][0]
        assert "Note: the drafter at" in (out / "tune.md").read_text()


def test_the_space_is_the_hosts_engine_unless_told(tmp_path):
    """A host on vLLM is tuned on vLLM (no adaptive steps there: 10 settings a fraction);
    --engines sglang,vllm adds SGLang's 16."""
    v = tmp_path / "vllm.yml"  # over the host's file: its profile and that profile's thresholds
    v.write_text("sglang_profile: vllm_mtp_3\n"
                 "sglang_gate_thresholds:\n  vllm_mtp_3:\n    coding: {min_tok_s: 30}\n")
    host = _vars(tmp_path)
    for extra, settings in (([], 70), (["--engines", "sglang,vllm"], 70 + 112)):
        out = tmp_path / ("out%d" % settings)
        p = tune("--vars", host, "--vars", v, "--launch", "exit 1 {args}", "--budget-launches", 1,
                 "--out", out, *extra)
        assert p.returncode == 1, p.stderr[-2000:]
        data = json.loads((out / "tune.json").read_text())
        assert data["settings"] == settings and data["launches"][0]["name"] == "vllm_mtp_3"
        assert data["launches"][0]["argv"][0] == "serve"


def test_the_budget_is_one_end_for_every_wait_and_a_cut_launch_says_so(tmp_path):
    """--budget-minutes 0.25 (15 s) against a server that takes 40 s to be ready: its readiness
    wait ends with the budget (not the 900 s ready timeout), the launch is reported cut by the
    budget, the run ends within the budget plus one stop."""
    out = tmp_path / "out"
    slow = "sleep 40; " + LAUNCH
    started = time.monotonic()
    p = tune("--vars", _vars(tmp_path), "--launch", slow, "--budget-minutes", 0.25, "--out", out)
    took = time.monotonic() - started
    assert p.returncode == 1, p.stderr[-3000:]
    assert took < 15 + STOP_GRACE + 10, took  # the budget, then one stop (SIGTERM: sleep goes at once)
    data = json.loads((out / "tune.json").read_text())
    first = data["launches"][0]
    assert first["outcome"]["cut"] == "budget" and first["outcome"]["error"].startswith(
        "cut by the budget: not ready")
    assert "900" not in first["outcome"]["error"]
    assert any("budget (--budget-minutes 0.25) ended" in n for n in data["notes"]), data["notes"]
    assert "cut by the budget" in (out / "tune.md").read_text()
    assert _left_running(data["launches"]) == []


def test_a_port_held_on_the_host_stops_the_search_before_any_launch(tmp_path):
    """Something answers on the candidates' port where they run (the URL's host): nothing is
    launched, and the search stops naming it (every launch would meet it)."""
    import socket
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        out = tmp_path / "out"
        p = tune("--vars", _vars(tmp_path), "--launch", "touch %s/launched; exit 1 {args}" % tmp_path,
                 "--port", port, "--out", out)
    assert p.returncode == 1, p.stderr[-3000:]
    data = json.loads((out / "tune.json").read_text())
    assert len(data["launches"]) == 1 and data["launches"][0]["outcome"]["failure"] == "port"
    assert data["notes"] == ["stopped: port %d on 127.0.0.1 answers before the launch: another server "
                             "holds it there" % port]
    assert not (tmp_path / "launched").exists()


def test_candidates_are_asked_the_hosts_own_known_answers(tmp_path):
    """A host with its own known answers (sglang_gate_answers) has its candidates asked those, as
    its gate asks them, not the built-in rows: here a server that does not know them answers
    wrongly, at full speed, and the comparison's row says so."""
    from bench import compare_plan
    rows = [{"id": "own-%d" % i, "prompt": "What is %d times %d? Reply with the number." % (i, i + 7),
             "answer": i * (i + 7) + 1} for i in range(12)]  # each off by one: no server knows them
    own = tmp_path / "own.jsonl"
    own.write_text("".join(json.dumps(r) + "\n" for r in rows))
    extra = tmp_path / "answers.yml"
    extra.write_text("sglang_gate_answers: %s\n" % own)
    given = tmp_path / "cases.json"
    given.write_text(json.dumps({"cases": compare_plan.measure_only({"compare_plan": {"answers": {
        "check": "answers", "concurrency": 4, "requests": 12, "max_tokens": 64}}})}))
    p = tune("--vars", _vars(tmp_path, drafter=False), "--vars", extra, "--launch", LAUNCH,
             "--profiles", "nextn_3step", "--cases", given, "--results", tmp_path / "results.json",
             "--out", tmp_path / "out")
    assert p.returncode == 0, p.stderr[-3000:]
    (got,) = json.loads((tmp_path / "results.json").read_text())
    (case,) = got["result"]["cases"]
    assert case["rows_from"].startswith("sglang_gate_answers %s" % own), case["rows_from"]
    assert case["right"] == 0 and case["accuracy"]["estimate"] == 0, case  # measured, not judged here


def test_a_port_held_stops_a_comparisons_launches_and_each_profile_says_why(tmp_path):
    """--cases (compare's list): the first profile meets the held port, the rest are not launched,
    each row naming why; nothing launched, the results written for the report."""
    import socket
    from bench import compare_plan
    given = tmp_path / "cases.json"
    given.write_text(json.dumps({"cases": compare_plan.measure_only({"compare_plan": {
        "coding": {"prompts": "coding", "concurrency": 1, "requests": 6, "max_tokens": 64}}})}))
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        p = tune("--vars", _vars(tmp_path), "--launch", "touch %s/launched; exit 1 {args}" % tmp_path,
                 "--port", port, "--profiles", "nextn_1step,nextn_3step", "--cases", given,
                 "--results", tmp_path / "results.json", "--out", tmp_path / "out")
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads((tmp_path / "results.json").read_text())
    taken = "port %d on 127.0.0.1 answers before the launch: another server holds it there" % port
    assert [(r["profile"], r["result"], r["error"]) for r in got] == [
        ("nextn_1step", None, taken), ("nextn_3step", None, "not launched: " + taken)]
    assert not (tmp_path / "launched").exists()


def test_the_check_refuses_a_url_where_nothing_answers_before_the_service_stops(tmp_path):
    """--check with --port/--url (the plays' check, the host's server still running): nothing
    answering there means the candidates could not be measured from here either - refused, naming
    the URL and what to set; the running server answering passes."""
    import socket
    from bench.launch import free_port
    host = _vars(tmp_path, drafter=False)
    args = ("--vars", host, "--launch", LAUNCH, "--profiles", "nextn_1step", "--check")
    port = free_port()
    p = tune(*args, "--port", port)
    assert p.returncode == 2, p.stderr
    assert "nothing answers at http://127.0.0.1:%d, where the candidates would be measured" % port in p.stderr
    assert "set tune_url, and tune_runner_prefix" in p.stderr
    with socket.socket() as running:  # the host's own server, before the play stops it
        running.bind(("127.0.0.1", 0))
        running.listen(1)
        p = tune(*args, "--url", "http://127.0.0.1:%d" % running.getsockname()[1])
    assert p.returncode == 0, p.stderr


def test_a_server_ready_on_the_port_that_is_not_the_candidate_is_not_measured(tmp_path):
    """The launch command starts another server than the setting (here: no speculation, whatever
    the arguments say): /server_info, read as the drift check reads it, names the difference."""
    other = ("SGLEMU_SPEED_SCALE=4 SGLEMU_WARMUP_REQUESTS=0 exec %s -m emulator --model-path /m "
             "--tp-size 2 --port {port} # {args}" % sys.executable)
    out = tmp_path / "out"
    p = tune("--vars", _vars(tmp_path), "--launch", other, "--budget-launches", 1, "--out", out)
    assert p.returncode == 1, p.stderr[-3000:]
    o = json.loads((out / "tune.json").read_text())["launches"][0]["outcome"]
    assert o["failure"] == "mismatch" and o["error"].startswith("ready, but not this setting: ")
    assert "speculative" in o["error"], o["error"]


def test_an_interrupted_run_resumes_without_relaunching_what_it_measured(tmp_path):
    """The tuner killed as its second launch starts: its tune.json (complete: false) holds the
    first; the next run of the same host, release, space and plan resumes from it and launches
    the current profile no more; --fresh, or another plan, starts over."""
    space = tmp_path / "space.yml"
    space.write_text("chain_steps: [2, 3]\nadaptive: [false]\nno_spec: false\nblocks: []\n"
                     "mem_fractions: [0.88]\n")
    host = _vars(tmp_path, drafter=False, max_tokens=64)
    out, count = tmp_path / "out", tmp_path / "launched"
    killer = "echo x >> %s; [ $(wc -l < %s) -ge 2 ] && { kill -9 $PPID; exit 1; }; %s" % (
        count, count, LAUNCH)
    p = tune("--vars", host, "--launch", killer, "--space", space, "--no-confirm", "--out", out)
    assert p.returncode == -9, p.stderr[-2000:]
    partial = json.loads((out / "tune.json").read_text())
    assert partial["complete"] is False and [x["name"] for x in partial["launches"]] == ["nextn_3step"]
    count.unlink()
    again = "echo x >> %s; %s" % (count, LAUNCH)
    p = tune("--vars", host, "--launch", again, "--space", space, "--no-confirm", "--out", out)
    assert p.returncode == 0, p.stderr[-2000:]
    data = json.loads((out / "tune.json").read_text())
    assert data["complete"] is True and [x["name"] for x in data["launches"]][0] == "nextn_3step"
    assert data["launches"][0]["resumed"] is True and len(data["launches"]) == 2
    assert count.read_text().count("x") == 1  # only the setting not measured yet was launched
    # a complete run is not resumed: the next starts over
    count.unlink()
    p = tune("--vars", host, "--launch", again, "--space", space, "--no-confirm", "--out", out,
             "--budget-launches", 1)
    assert p.returncode == 0 and count.read_text().count("x") == 1
    assert not json.loads((out / "tune.json").read_text())["launches"][0].get("resumed")


def test_a_slowdown_that_held_the_gpus_during_a_launch_is_named(tmp_path):
    """The stand-in nvidia-smi's GPU 0 held by a thermal slowdown from half a second after the
    run's first reading (its identity's) on: the launch's clocks (the counters at its start and
    end) name it, in tune.json and tune.md."""
    state = tmp_path / "smi.json"
    state.write_text(json.dumps({"gpus": [{"slowdown": {"reason": "sw_thermal_slowdown", "after_s": 0.5}},
                                          {}]}))
    out = tmp_path / "out"
    p = tune("--vars", _vars(tmp_path, drafter=False, max_tokens=64), "--launch", LAUNCH,
             "--budget-launches", 1, "--no-confirm", "--out", out,
             "--nvidia-smi", ROOT / "scripts" / "nvidia_smi_standin.py",
             env={"NVIDIA_SMI_STANDIN_STATE": str(state)})
    assert p.returncode == 0, p.stderr[-3000:]
    launch = json.loads((out / "tune.json").read_text())["launches"][0]
    assert launch["clocks"]["how"] == "counters"
    (held,) = launch["clocks"]["held"]
    assert (held["gpu"], held["reason"]) == (0, "sw_thermal_slowdown") and 0.05 <= held["share"] <= 1.0
    (said,) = launch["slowdowns"]
    assert said.startswith("GPU 0 held by sw_thermal_slowdown for %.0f%% of the measurement ("
                           % (100 * held["share"]))
    md = (out / "tune.md").read_text()
    assert "## GPU clocks held down during a launch" in md and launch["slowdowns"][0] in md


def test_the_plays_checked_inputs_plan_as_the_vars_files_do(tmp_path):
    """playbooks/tasks/tune_host.yml hands the tuner the play's checked inputs (the
    sglang_deploy_plan action's, no secret in them) and the tuner reads no inventory again: the
    same candidates, the same command lines as from the files the inputs came from."""
    from bench import planner
    host = _vars(tmp_path)
    key = "k" * 20 + "-not-for-files"
    values = planner.host_for(None, "tune", {planner.SECRET: key, "sglang_hf_token": "hf_" + "t" * 24},
                              vars_files=[host]).values()
    given = planner.shareable(values)
    assert given[planner.SECRET] == planner.UNREAD and given["sglang_hf_token"] == ""
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps(given))
    assert key not in inputs.read_text()
    runs = {}
    for name, how in (("vars", ["--vars", host]), ("inputs", ["--inputs", inputs, "--host", "ct129"])):
        out = tmp_path / name
        p = tune(*how, "--launch", "exit 1 {args}", "--budget-launches", 2, "--out", out,
                 env={"SGLANG_API_KEY": key})
        assert p.returncode == 1, p.stderr[-2000:]
        runs[name] = json.loads((out / "tune.json").read_text())
    def argv(run):  # each launch's command line, its free port aside
        return [[w if i == 0 or x["argv"][i - 1] != "--port" else "PORT" for i, w in enumerate(x["argv"])]
                for x in run["launches"]]
    assert argv(runs["inputs"]) == argv(runs["vars"]) and len(argv(runs["vars"])) == 2
    assert runs["inputs"]["settings"] == runs["vars"]["settings"]
    # the key the environment gave names the engine's --config file, never the key itself
    assert "--config" in runs["inputs"]["launches"][0]["argv"] and key not in json.dumps(runs["inputs"])
    for bad, said in (({**given, "sglang_multinode_group": "pair"}, "serves with other nodes"),
                      ([], "not a mapping")):
        inputs.write_text(json.dumps(bad))
        p = tune("--inputs", inputs, "--launch", "exit 1 {args}", "--out", tmp_path / "never")
        assert p.returncode == 2 and said in p.stderr, p.stderr
    p = tune("--inputs", inputs, "--vars", host, "--launch", "exit 1 {args}", "--out", tmp_path / "never")
    assert p.returncode == 2 and "without -i or --vars" in p.stderr
    assert not (tmp_path / "never").exists()


def test_the_hosts_own_api_key_reaches_the_measurement(tmp_path):
    """A key the host's variables hold (a vault -i reads with its password, here a vars file) and
    no SGLANG_API_KEY in the environment: the candidate starts with it (its --config file, as the
    unit's) and is measured with it - the server check and the cases alike."""
    from bench import compare_plan
    key = "k" * 24
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "sglang-secrets.yaml").write_text("api-key: %s\n" % key)
    secret = tmp_path / "secret.yml"
    secret.write_text("sglang_api_key: %s\nsglang_config_dir: %s\n" % (key, etc))
    host = _vars(tmp_path, drafter=False, max_tokens=32)
    given = tmp_path / "cases.json"
    cases = compare_plan.measure_only({"compare_plan": {"coding": {
        "prompts": "coding", "concurrency": 1, "requests": 2, "max_tokens": 32}}})
    given.write_text(json.dumps({"cases": cases, "options": {"warmup": 0}}))
    p = tune("--vars", host, "--vars", secret, "--launch", LAUNCH, "--profiles", "nextn_1step",
             "--cases", given, "--out", tmp_path / "out")
    assert p.returncode == 0, p.stderr[-3000:]
    assert key not in p.stdout + p.stderr
    (got,) = json.loads((tmp_path / "out" / "results.json").read_text())
    assert got["error"] is None, got["error"]
    assert got["result"]["cases"][0]["requests"] == 2 and got["result"]["cases"][0]["errors"] == 0
