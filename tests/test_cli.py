"""`python -m bench run` as users run it: exit codes 0/1/2, the table, --json, stderr reasons."""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

import benchrun
from conftest import ROOT, free_port

FAST = {"SGLEMU_SPEED_SCALE": "4"}


def bench(*args, python=sys.executable, env=None):
    """bench run, short: 2 requests of 96 tokens after one warmup (ARGS may override them)."""
    return benchrun.bench("run", "--requests", "2", "--warmup", "1", "--max-tokens", "96", *args,
                          python=python, env=env, timeout=120)


def test_exit_0_prints_the_table_and_writes_json(emulator, tmp_path):
    emu = emulator("nextn_3step", env=FAST)
    out = tmp_path / "r.json"
    # a median's 95% interval takes 6 requests
    p = bench("--url", emu.url, "--requests", "6", "--min-tok-s", "45", "--min-accept-len", "2.8",
              "--json", str(out))
    assert p.returncode == 0, p.stderr
    assert "decode tok/s" in p.stdout and "gate" in p.stdout and "PASSED" in p.stdout
    assert "intervals" in p.stdout and "order statistics" in p.stdout
    assert "measure" in p.stderr  # progress lines while it runs
    r = json.loads(out.read_text())
    for key in ("decode_tok_s", "accept_len", "aggregate_tok_s", "ttft_s", "requests", "errors",
                "passed"):
        assert key in r
    assert set(r["decode_tok_s"]) >= {"median", "min", "max"}
    assert set(r["ttft_s"]) >= {"p50", "p90"}
    assert r["passed"] is True and r["requests"] == 6 and r["errors"] == 0
    d = r["intervals"]["decode_tok_s"]
    assert d["lower"] <= d["estimate"] == r["decode_tok_s"]["median"] <= d["upper"]
    assert r["verdict"] == "pass" and r["sequential"]["measured"] == 6


def test_without_sample_flags_it_measures_the_roles_coding_case(emulator, tmp_path):
    """`bench run --url URL --min-tok-s 45 --min-accept-len 2.8`, as a new user types it, runs the
    gate's first case (roles/sglang_gate/defaults/main.yml: 6 requests, then up to 48 while an
    interval straddles a bar, 192 tokens): one set of case defaults for the role and the CLI."""
    from bench.gate import role_case
    case = role_case("coding")
    emu = emulator("nextn_3step", env=FAST)
    out = tmp_path / "r.json"
    p = benchrun.bench("run", "--url", emu.url, "--min-tok-s", "45", "--min-accept-len", "2.8", "--quiet",
                       "--json", out)
    assert p.returncode == 0, p.stderr
    r = json.loads(out.read_text())
    assert (r["concurrency"], r["max_tokens"], r["prompts"]) == (case["concurrency"], case["max_tokens"],
                                                                 case["prompts"])
    assert r["sequential"]["min_requests"] == case["requests"] == 6
    assert r["sequential"]["max_requests"] == case["max_requests"] == 48
    assert r["sequential"]["stopped"] == "decided" and r["requests"] == 6  # 3-step clears both bars at 6


def test_requests_given_alone_is_a_fixed_sample(emulator, tmp_path):
    emu = emulator("nextn_3step", env=FAST)
    out = tmp_path / "r.json"
    p = bench("--url", emu.url, "--requests", "3", "--quiet", "--json", str(out))
    assert p.returncode == 0, p.stderr
    r = json.loads(out.read_text())
    assert r["requests"] == 3 and r["sequential"]["max_requests"] == 3 and r["max_tokens"] == 96


def test_exit_1_when_a_threshold_fails(emulator):
    emu = emulator("nextn_1step", env=FAST)
    p = bench("--url", emu.url, "--min-accept-len", "2.8", "--quiet")
    assert p.returncode == 1
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith("bench: gate failed: accept length 1.") and "< required 2.80" in line


@pytest.mark.parametrize("args, words", [
    (["--url", "http://127.0.0.1:%d" % free_port()], "could not measure"),
    (["--url", "http://127.0.0.1:1", "--min-tok-s", "-1"], "invalid option --min-tok-s"),
    (["--url", "nonsense"], "invalid option --url"),
])
def test_exit_2_when_nothing_can_be_measured(args, words):
    p = bench(*args, "--quiet")
    assert p.returncode == 2 and words in p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_exit_2_on_wrong_key(emulator):
    emu = emulator("nextn_3step", env=FAST, extra=["--api-key", "k1"])
    p = bench("--url", emu.url, "--quiet", env={"SGLANG_API_KEY": "k2"})
    assert p.returncode == 2 and "authentication failed" in p.stderr and "k2" not in p.stderr
    p = bench("--url", emu.url, "--quiet", env={"SGLANG_API_KEY": "k1"})
    assert p.returncode == 0, p.stderr


def test_exit_2_when_accept_length_is_required_but_not_reported(emulator):
    emu = emulator("no_spec", env=FAST)
    p = bench("--url", emu.url, "--min-accept-len", "2.8", "--quiet")
    assert p.returncode == 2 and "accept length could not be measured" in p.stderr


def _python39():
    for path in glob.glob(os.path.expanduser("~/.pyenv/versions/3.9*/bin/python3.9")) + [
            shutil.which("python3.9")]:
        if path and subprocess.run([path, "-c", "import sys; assert sys.version_info[:2] == (3, 9)"],
                                   capture_output=True).returncode == 0:
            return path
    return None


PY39 = _python39()


@pytest.mark.skipif(PY39 is None, reason="no working Python 3.9 on this machine")
def test_engine_runs_under_python_3_9_stdlib_only(emulator):
    """The target host may only have Python 3.9 and the standard library. That Python has no venv
    with the project installed: the engine's directory goes on its path (PYTHONPATH), as AnsiballZ
    puts the package on a host's."""
    py = PY39
    emu = emulator("nextn_3step", env=FAST)
    p = bench("--url", emu.url, "--min-accept-len", "2.8", "--quiet", python=py,
              env={"PYTHONPATH": str(ROOT / "plugins" / "module_utils")})
    assert p.returncode == 0, p.stderr


def test_progress_is_a_bar_on_a_terminal_and_lines_otherwise():
    import io

    from bench.progress import Progress
    from sglang_perf.measure import config, engine

    cfg = config.validate({"url": "http://127.0.0.1:1", "case": "coding", "requests": 6,
                           "max_requests": 48, "max_tokens": 192, "min_tok_s": 45})
    rec = engine._Request("r0", "measure", "lru_cache")
    rec.t_send, rec.t_first, rec.t_last, rec.completion_tokens, rec.verify_ct = 0.0, 0.05, 3.3, 192, 57
    look = {"verdict": "undecided", "requests": 6, "intervals": {
        "decode_tok_s": {"estimate": 57.8, "lower": 54.6, "upper": 62.8},
        "accept_len": {"estimate": 3.31, "lower": 3.22, "upper": 3.42}}}
    for bar in (True, False):
        out = io.StringIO()
        p = Progress(out, bar=bar)
        p.start(cfg)
        p(rec)
        p.look(cfg, look, 20.0)
        p.close()
        text = out.getvalue()
        assert "undecided: decode 57.8 [54.6, 62.8] tok/s, accept 3.31 [3.22, 3.42]" in text
        if bar:  # tqdm's bar: the case, requests done of the most, its ETA
            assert "coding" in text and "1/48" in text and "req" in text
        else:
            assert "case coding: 6 requests, then one at a time up to 48, C=1, 192 tokens each" in text
            assert "lru_cache" in text and "coding after 6 requests, 20s" in text


def test_a_1024_request_load_run_ends_with_its_figures_and_keeps_the_raw_records(emulator, tmp_path):
    """The load run that died in the statistics (2.0 ** n overflowed from n = 1,024) after measuring
    every request: 512 streams, 1,024 requests, no warmup (short outputs and a fast emulator, so it
    takes seconds here; the statistics are what is tried)."""
    emu = emulator("nextn_3step", env={"SGLEMU_SPEED_SCALE": "40"})
    raw, out = tmp_path / "raw.jsonl", tmp_path / "r.json"
    p = benchrun.bench("run", "--url", emu.url, "--concurrency", "512", "--requests", "1024", "--warmup",
                       "0", "--max-tokens", "16", "--quiet", "--raw", raw, "--json", out, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads(out.read_text())
    assert r["requests"] == 1024 and r["errors"] == 0 and r["decode_tok_s"]["n"] == 1024
    iv = r["intervals"]
    assert iv["decode_tok_s"]["lower"] <= iv["decode_tok_s"]["estimate"] <= iv["decode_tok_s"]["upper"]
    assert iv["accept_len"]["lower"] < iv["accept_len"]["estimate"] < iv["accept_len"]["upper"]
    lines = raw.read_text().splitlines()
    assert len(lines) == 1024 and all(json.loads(x)["completion_tokens"] == 16 for x in lines)


def test_a_failure_in_the_figures_leaves_the_raw_records_and_names_them(emulator, tmp_path, monkeypatch,
                                                                       capsys):
    from bench import cli
    from sglang_perf.measure import engine

    def broken(*args, **kw):
        raise OverflowError(34, "Numerical result out of range")

    emu = emulator("nextn_3step", env=FAST)
    raw = tmp_path / "runs" / "raw.jsonl"
    monkeypatch.setattr(engine, "_result", broken)
    rc = cli.main(["run", "--url", emu.url, "--requests", "6", "--warmup", "1", "--max-tokens", "32",
                   "--quiet", "--raw", str(raw)])
    err = capsys.readouterr().err
    assert rc == 2
    assert ("the figures could not be computed (OverflowError: (34, 'Numerical result out of range')); "
            "the 7 requests' raw records are in %s" % raw) in err
    recs = [json.loads(x) for x in raw.read_text().splitlines()]
    assert [r["phase"] for r in recs] == ["warmup"] + ["measure"] * 6
    assert all(r["decode_tok_s"] > 0 for r in recs if r["phase"] == "measure")
