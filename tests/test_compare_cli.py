"""`python -m bench compare` / `compare-report` and bench.compare.analyse, bench.sizes: the
profile comparison against three emulators, crossings by hand, the roofline column, error rows."""
from __future__ import annotations

import csv
import json
import math
import re
import tempfile

import pytest

from bench import compare
from bench import sizes as bench_sizes
from bench.sizes import load_sizes
from sglang_perf.plan import comparison
from bench.launch import EmulatorProcess
from benchrun import bench
from conftest import free_port
from sglang_perf.plan import capacity

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# Fast and reproducible: 4x speed, no slow first requests. Batch slowdown 0.02 (a step 30 %
# slower at 16 running requests) so per-request speed falls with C while the aggregate rises, as
# on a GPU; the emulator's default 0.005 barely shows at C=16.
FAST = {"SGLEMU_SPEED_SCALE": "4", "SGLEMU_WARMUP_REQUESTS": "0", "SGLEMU_BATCH_SLOWDOWN": "0.02"}
QUICK = ["--requests", "2", "--warmup", "1", "--warmup-max-tokens", "16", "--max-tokens", "64"]

MODEL = {"params_b": 27.78, "dtype_bytes": 2, "lm_head_params_b": 1.2714,
         "mtp_layer_params_b": 0.425}
HARDWARE = {"gpu_count": 2, "gpu_bandwidth_gbs": 768, "gpu_memory_gib": 48}


def sizes_file(tmp_path):
    path = tmp_path / "sizes.yml"
    path.write_text("model:\n" + "".join("  %s: %s\n" % kv for kv in MODEL.items())
                    + "hardware:\n" + "".join("  %s: %s\n" % kv for kv in HARDWARE.items()))
    return path


def md_rows(text):
    """{(profile, C): cells} of the Markdown table."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) > 2 and cells[1].isdigit():
            out[(cells[0], int(cells[1]))] = cells
    return out


# --- analyse: pure ------------------------------------------------------------------------------

def row(profile, c, decode, aggregate, al=None, steps=0, error=None):
    r = dict.fromkeys(comparison.ROW_KEYS)
    r.update(profile=profile, url="http://x", concurrency=c, requests=max(8, 2 * c),
             decode_tok_s_median=decode, decode_tok_s_min=decode, decode_tok_s_max=decode,
             aggregate_tok_s=aggregate, accept_len=al, ttft_p50_s=0.1, errors=0,
             spec_steps=steps, error=error)
    return r


def test_analyse_interpolates_the_crossing_in_log2_c():
    # per-request decode: A 100, 60, 30; B 80, 70, 40 at C = 1, 4, 16.
    # A - B = +20 at C=1, -10 at C=4: in x = log2 C from 0 to 2, zero at x = 2 * 20 / 30 = 4/3,
    # C = 2 ** (4/3) = 2.5198...; then -10 at C=16: no second crossing.
    # aggregate: A 100, 300, 500; B 90, 250, 480: A ahead everywhere.
    rows = [row("A", 1, 100.0, 100.0), row("A", 4, 60.0, 300.0), row("A", 16, 30.0, 500.0),
            row("B", 1, 80.0, 90.0), row("B", 4, 70.0, 250.0), row("B", 16, 40.0, 480.0)]
    s = compare.analyse(rows)
    assert len(s["crossings"]) == 1
    x = s["crossings"][0]
    assert x["metric"] == "decode" and {x["a"], x["b"]} == {"A", "B"}
    assert x["between"] == [1, 4]
    assert x["at_c"] == pytest.approx(2 ** (4.0 / 3.0), rel=1e-12)
    assert x["ahead_below"] == "A" and x["ahead_above"] == "B"
    assert s["leaders"]["decode"] == {1: "A", 4: "B", 16: "B"}
    assert s["leaders"]["aggregate"] == {1: "A", 4: "A", 16: "A"}
    st = s["statements"]
    assert "A beats B at C=1 by 25% per-request decode" in st           # 100 / 80
    assert "B beats A at C=4 by 17%, at C=16 by 33% per-request decode" in st  # 70/60, 40/30
    assert ("A and B cross at C=2.5 (interpolated in log2 C between C=1 and C=4, per-request "
            "decode): A ahead below, B ahead above") in st
    assert "no crossing between A and B in C=1..16 (aggregate)" in st
    assert not any("no crossing" in t and "per-request" in t for t in st)
    assert all(r["roofline"] is None for r in rows)  # no sizes given


def test_analyse_no_crossing_ties_and_error_rows():
    # decode: C 50, 40 at C=2, 4; D 40, 40: C ahead, then a tie: touching is not crossing.
    # D failed at C=8: an error row, left out of the comparison.
    rows = [row("C", 2, 50.0, 100.0), row("C", 4, 40.0, 160.0), row("C", 8, 30.0, 240.0),
            row("D", 2, 40.0, 110.0), row("D", 4, 40.0, 170.0),
            row("D", 8, None, None, error="connection refused")]
    s = compare.analyse(rows)
    assert s["crossings"] == []
    assert "C and D tie at C=4 (40.0) on per-request decode" in s["statements"]
    assert "no crossing between C and D in C=2..4 (per-request decode)" in s["statements"]
    assert "no crossing between D and C in C=2..4 (aggregate)" in s["statements"]
    assert "D at C=8 not measured: connection refused" in s["statements"]
    assert s["leaders"]["decode"] == {2: "C", 4: "C", 8: "C"}  # max() keeps the first on a tie
    # at C=16: decode C 20, D 10 (C - D = +10, 0, +10: still no crossing); aggregate C 280,
    # D 260: D - C = +10 at 4, -20 at 16 (no D at 8): x = log2 C from 2 to 4, zero at
    # 2 + 2 * 10 / 30, C = 2 ** (8/3) = 6.35
    rows += [row("D", 16, 10.0, 260.0), row("C", 16, 20.0, 280.0)]
    s = compare.analyse(rows)
    assert [x for x in s["crossings"] if x["metric"] == "decode"] == []
    agg = [x for x in s["crossings"] if x["metric"] == "aggregate"]
    assert len(agg) == 1 and agg[0]["between"] == [4, 16]
    assert (agg[0]["a"], agg[0]["b"]) == ("D", "C")
    assert agg[0]["at_c"] == pytest.approx(2 ** (8.0 / 3.0), rel=1e-12)
    # a tie between opposite signs is the crossing itself: E - F = +10, 0, -10 at C = 2, 4, 8
    s = compare.analyse([row("E", 2, 50.0, 1.0), row("E", 4, 40.0, 1.0), row("E", 8, 30.0, 1.0),
                         row("F", 2, 40.0, 1.0), row("F", 4, 40.0, 1.0), row("F", 8, 40.0, 1.0)])
    x = [x for x in s["crossings"] if x["metric"] == "decode"]
    assert len(x) == 1 and x[0]["between"] == [2, 8] and x[0]["at_c"] == 4.0
    assert "E and F tie at C=2 (1.0), C=4 (1.0), C=8 (1.0) on aggregate" in s["statements"]


def test_analyse_roofline_per_row_is_capacity_roofline():
    rows = [row("nextn_3step", 1, 55.2, 55.0, al=3.14, steps=3), row("no_spec", 1, 26.7, 26.6)]
    compare.analyse(rows, MODEL, HARDWARE)
    want = capacity.roofline(MODEL, HARDWARE, 3, 3.14, 55.2)
    assert rows[0]["roofline"]["ceiling_tok_s"] == want["ceiling_tok_s"]
    assert rows[0]["roofline"]["share_pct"] == want["share_pct"]
    assert rows[1]["roofline"]["ceiling_tok_s"] == capacity.roofline(MODEL, HARDWARE, 0)[
        "ceiling_tok_s"]
    with pytest.raises(ValueError, match="two rows for profile no_spec at C=1"):
        compare.analyse(rows + [row("no_spec", 1, 1.0, 1.0)])
    # without the MTP figures the speculative row gets no roofline, and a statement says why
    bare = {"params_b": 27.78, "dtype_bytes": 2}
    s = compare.analyse(rows, bare, HARDWARE)
    assert rows[0]["roofline"] is None and rows[1]["roofline"]["ceiling_tok_s"] == pytest.approx(
        2 * 768 / (27.78 * 2))
    assert s["statements"][-1].startswith("no roofline for nextn_3step at C=1: model.mtp_layer")


# --- sizes --------------------------------------------------------------------------------------

def test_load_sizes_later_files_override_and_errors_name_the_file(tmp_path):
    base = tmp_path / "defaults.yml"
    base.write_text("sglang_model_size:\n  params_b: 27.78\n  dtype_bytes: 2\n"
                    "sglang_hardware: null\nother: '{{ not read }}'\n")
    inv = tmp_path / "inventory.yml"
    inv.write_text("sglang_hardware:\n  gpu_count: 2\n  gpu_bandwidth_gbs: 768\n")
    over = tmp_path / "override.yml"
    over.write_text("hardware:\n  gpu_count: 1\n  gpu_bandwidth_gbs: 936\n")
    assert load_sizes([base, inv]) == ({"params_b": 27.78, "dtype_bytes": 2},
                                       {"gpu_count": 2, "gpu_bandwidth_gbs": 768})
    assert load_sizes([base, inv, over])[1] == {"gpu_count": 1, "gpu_bandwidth_gbs": 936}
    with pytest.raises(ValueError, match=re.escape(str(tmp_path / "nope.yml")) + ": size file not"):
        load_sizes([base, tmp_path / "nope.yml"])
    templ = tmp_path / "templated.yml"
    templ.write_text("sglang_hardware:\n  gpu_count: '{{ nvidia_gpu_expected_count }}'\n")
    with pytest.raises(ValueError, match=re.escape(str(templ)) + r": sglang_hardware.gpu_count "
                                         r"is a Jinja template"):
        load_sizes([base, templ])
    word = tmp_path / "word.yml"
    word.write_text("hardware:\n  gpu_count: two\n")
    with pytest.raises(ValueError, match=re.escape(str(word)) + ": hardware.gpu_count must be a "
                                                                "number, got 'two'"):
        load_sizes([word])
    with pytest.raises(ValueError, match="no size file sets sglang_hardware"):
        load_sizes([base])


def test_sizes_without_pyyaml_are_refused_by_name(monkeypatch, tmp_path):
    monkeypatch.setattr(bench_sizes, "yaml", None)
    with pytest.raises(bench_sizes.NoYAML, match="PyYAML is not installed"):
        load_sizes([sizes_file(tmp_path)])
    with pytest.raises(ValueError, match="no size file given"):
        load_sizes([])


def test_the_default_sizes_are_the_production_servers_as_its_plays_see_them():
    """No host, no --sizes: ct129's figures through the planner (role defaults, then the
    production group_vars), not a reading of YAML files of its own."""
    from bench import planner
    model, hardware = bench_sizes.default()
    host = planner.host_for(bench_sizes.PRODUCTION, planner.hosts_of(bench_sizes.PRODUCTION)[0])
    assert (model, hardware) == (host.values()["sglang_model_size"], host.values()["sglang_hardware"])
    assert hardware["gpu_count"] == 2 and hardware["gpu_memory_gib"] == 48  # 2x RTX A6000
    assert capacity.roofline(model, hardware, 3, 3.0)["ceiling_tok_s"] > 0


def test_the_default_sizes_skip_the_production_vault_without_a_word(tmp_path, monkeypatch, capfd):
    """The operator's vault beside the production group_vars (the README's step 1): `bench run`
    without -i has no password to give and needs nothing secret; it reads the sizes and says
    nothing of the vault (its one stderr line stays the verdict)."""
    import shutil
    inv = tmp_path / "production"
    shutil.copytree(bench_sizes.PRODUCTION.parent, inv)
    shutil.copy(inv / "vault.example.vault", inv / "group_vars" / "sglang_servers" / "vault.yml")
    monkeypatch.setattr(bench_sizes, "PRODUCTION", inv / "hosts.yml")
    assert bench_sizes.default()[1]["gpu_count"] == 2
    assert capfd.readouterr().err == ""


# --- the command line against emulators ----------------------------------------------------------

def test_compare_three_profiles_and_compare_report(emulator, tmp_path):
    emus = {p: emulator(p, env=FAST) for p in ("no_spec", "nextn_1step", "nextn_3step")}
    sizes = sizes_file(tmp_path)
    out = tmp_path / "out"
    p = bench("compare", *QUICK, "--concurrency", "1,4,16", "--out", str(out), "--sizes",
              str(sizes), *sum((["--target", "%s=%s" % (name, e.url)] for name, e in emus.items()),
                               []))
    assert p.returncode == 0, p.stderr
    for name in compare.FILES:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    assert (out / "compare.png").read_bytes()[:8] == PNG_MAGIC
    assert (out / "compare.png").stat().st_size > 20000

    with open(str(out / "compare.csv"), newline="") as f:
        csv_rows = list(csv.DictReader(f))
    assert len(csv_rows) == 9
    assert [(r["profile"], r["concurrency"]) for r in csv_rows] == [
        (name, c) for name in emus for c in ("1", "4", "16")]
    assert [r["requests"] for r in csv_rows[:3]] == ["2", "8", "32"]  # max(2, 2 x C)

    doc = json.loads((out / "compare.json").read_text())
    assert set(doc) == {"rows", "summary", "created", "levels"} and doc["levels"] == [1, 4, 16]
    rows = {(r["profile"], r["concurrency"]): r for r in doc["rows"]}
    assert all(r["error"] is None and r["errors"] == 0 for r in rows.values())
    d = {k: r["decode_tok_s_median"] for k, r in rows.items()}
    al = {k: r["accept_len"] for k, r in rows.items()}
    agg = {k: r["aggregate_tok_s"] for k, r in rows.items()}
    # the original logs' order at C=1: 3-step > 1-step > no speculation, per request
    assert d[("nextn_3step", 1)] > d[("nextn_1step", 1)] > d[("no_spec", 1)]
    for c in (1, 4, 16):
        assert al[("nextn_3step", c)] > al[("nextn_1step", c)] > 1.0
        assert al[("no_spec", c)] is None
    ttft = {k: r["ttft_p50_s"] for k, r in rows.items()}
    for name in emus:  # each level really ran at its concurrency
        # SGLang's pools on 2x A6000 run 4 (3-step) to 11 (no speculation) requests at once, so
        # C=16 queues the rest. At most 4 at once with the per-batch slowdown gave 2.9x C=1's
        # aggregate for the 3-step on a loaded CI machine (604 vs 209 tok/s): twice is the bound
        # that still tells several running requests from one (a serial server gives about 1x).
        # The queued requests wait for their first token (about 0.015 s at C=1, 0.14-1.1 s at
        # C=16 when measured). The per-request decode speed is not compared: 2 requests of 64
        # tokens at C=1 are within the noise of the emulator's small per-batch slowdown.
        assert agg[(name, 16)] > 2 * agg[(name, 1)]
        assert ttft[(name, 16)] > 3 * ttft[(name, 1)]
    assert {k[0]: r["spec_steps"] for k, r in rows.items()} == {
        "no_spec": 0, "nextn_1step": 1, "nextn_3step": 3}

    statements = doc["summary"]["statements"]
    assert any(s.startswith("nextn_3step beats nextn_1step at C=1 by ") and "per-request decode" in s
               for s in statements), statements
    assert doc["summary"]["leaders"]["decode"]["1"] == "nextn_3step"
    assert "nextn_3step beats nextn_1step at C=1 by" in p.stdout  # printed too

    # the roofline column is capacity.roofline for the row's own figures
    md = (out / "compare.md").read_text()
    table = md_rows(md)
    assert len(table) == 9
    for key, r in rows.items():
        want = capacity.roofline(MODEL, HARDWARE, r["spec_steps"], r["accept_len"],
                                 r["decode_tok_s_median"])
        assert r["roofline"]["ceiling_tok_s"] == want["ceiling_tok_s"]
        assert table[key][8] == "%.1f (%.1f%%)" % (want["ceiling_tok_s"], want["share_pct"])
        assert table[key][3].startswith("%.1f (" % r["decode_tok_s_median"])
    assert md_rows(p.stdout) == table

    # compare-report from the rows as a playbook would write them: the same reports
    rows_json = tmp_path / "rows.json"
    plain = [{k: r[k] for k in comparison.ROW_KEYS} for r in doc["rows"]]
    rows_json.write_text(json.dumps(plain))
    out2 = tmp_path / "report"
    p2 = bench("compare-report", str(rows_json), "--out", str(out2), "--sizes", str(sizes))
    assert p2.returncode == 0, p2.stderr
    for name in compare.FILES:
        assert (out2 / name).is_file() and (out2 / name).stat().st_size > 0, name
    assert (out2 / "compare.csv").read_text() == (out / "compare.csv").read_text()
    assert md_rows((out2 / "compare.md").read_text()) == table
    doc2 = json.loads((out2 / "compare.json").read_text())
    assert doc2["summary"] == doc["summary"] and doc2["rows"] == doc["rows"]


def test_unreachable_target_is_an_error_row_and_all_failing_exits_2(emulator, tmp_path):
    emu = emulator("nextn_3step", env=FAST)
    ghost = "http://127.0.0.1:%d" % free_port()
    out = tmp_path / "out"
    p = bench("compare", *QUICK, "--concurrency", "1,2", "--no-roofline", "--quiet",
              "--out", str(out), "--target", "ghost=" + ghost, "--target", "nextn_3step=" + emu.url)
    assert p.returncode == 0, p.stderr
    with open(str(out / "compare.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["profile"], r["concurrency"]) for r in rows] == [
        ("ghost", "1"), ("ghost", "2"), ("nextn_3step", "1"), ("nextn_3step", "2")]
    for r in rows[:2]:
        assert "is the server up and listening at %s" % ghost in r["error"]
        assert r["decode_tok_s_median"] == "" and r["aggregate_tok_s"] == ""
    for r in rows[2:]:
        assert r["error"] == "" and float(r["decode_tok_s_median"]) > 100
        assert float(r["accept_len"]) > 2 and r["roofline_ceiling_tok_s"] == ""
    assert "ghost at C=1 not measured" in p.stderr and "ghost at C=2 not measured" in p.stderr
    assert "not measured: " in (out / "compare.md").read_text()

    other = "http://127.0.0.1:%d" % free_port()
    out2 = tmp_path / "none"
    p = bench("compare", *QUICK, "--concurrency", "1", "--no-roofline", "--quiet",
              "--out", str(out2), "--target", "a=" + ghost, "--target", "b=" + other)
    assert p.returncode == 2
    assert p.stderr.startswith("bench compare: nothing measurable: 2 point(s), none measured; "
                               "first: a C=1: ")
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert not out2.exists()


@pytest.mark.parametrize("args, message", [
    (["--target", "nourl"], "--target wants NAME=URL, got 'nourl'"),
    (["--target", "a=http://127.0.0.1:1", "--target", "a=http://127.0.0.1:2"],
     "--target name a given twice"),
    (["--target", "a=nonsense"], "invalid URL for target a: expected http://HOST[:PORT]"),
    (["--target", "a=http://127.0.0.1:1", "--concurrency", "1,x"],
     "--concurrency wants integers separated by commas"),
    (["--target", "a=http://127.0.0.1:1", "--concurrency", "0,4"], "levels of 1 or more"),
    (["--target", "a=http://127.0.0.1:1", "--max-tokens", "1"], "invalid option --max-tokens"),
])
def test_compare_bad_input_exits_2_before_measuring(args, message):
    p = bench("compare", "--no-roofline", "--quiet", *args)
    assert p.returncode == 2 and message in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_compare_refuses_templated_sizes_before_measuring(tmp_path):
    bad = tmp_path / "hw.yml"
    bad.write_text("sglang_hardware:\n  gpu_count: '{{ nvidia_gpu_expected_count }}'\n"
                   "  gpu_bandwidth_gbs: 768\n")
    p = bench("compare", "--quiet", "--target", "a=http://127.0.0.1:%d" % free_port(),
              "--sizes", str(sizes_file(tmp_path)), str(bad))
    assert p.returncode == 2
    assert p.stderr.strip().startswith("bench compare: size figures: %s: sglang_hardware.gpu_count "
                                       "is a Jinja template" % bad)
    assert p.stderr.strip().endswith("(or --no-roofline)")


def test_compare_report_bad_input_exits_2(tmp_path):
    p = bench("compare-report", str(tmp_path / "missing.json"), "--out", str(tmp_path / "o"))
    assert p.returncode == 2 and "no such file %s" % (tmp_path / "missing.json") in p.stderr
    f = tmp_path / "rows.json"
    for content, message in [
        ("{", "is not JSON"),
        ("[]", "expected a non-empty JSON list of rows"),
        ('[{"concurrency": 1}]', "row 1: profile is missing"),
        ('[{"profile": "a", "concurrency": "x"}]', "row 1: concurrency: expected a number, got 'x'"),
        ('[{"profile": "a", "concurrency": 1, "error": "refused"}]',
         "nothing measurable: 1 point(s), none measured; first: a C=1: refused"),
    ]:
        f.write_text(content)
        p = bench("compare-report", str(f), "--out", str(tmp_path / "o"), "--no-roofline")
        assert p.returncode == 2 and message in p.stderr, (content, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_compare_report_accepts_string_numbers_and_a_compare_json(tmp_path):
    rows = [row("nextn_3step", 1, 55.0, 54.0, al=3.1, steps=3), row("no_spec", 1, 26.5, 26.0)]
    rows[1]["decode_tok_s_median"] = "26.5"  # a playbook's templating may stringify
    rows[1]["concurrency"] = "1"
    f = tmp_path / "rows.json"
    f.write_text(json.dumps({"rows": rows}))
    p = bench("compare-report", str(f), "--out", str(tmp_path / "o"), "--sizes", str(sizes_file(
        tmp_path)))
    assert p.returncode == 0, p.stderr
    table = md_rows((tmp_path / "o" / "compare.md").read_text())
    want = capacity.roofline(MODEL, HARDWARE, 0, None, 26.5)
    assert table[("no_spec", 1)][8] == "%.1f (%.1f%%)" % (want["ceiling_tok_s"], want["share_pct"])
    assert not math.isnan(float(table[("nextn_3step", 1)][8].split()[0]))
    assert "nextn_3step beats no_spec at C=1 by 108% per-request decode" in p.stdout  # 55/26.5


# --- --plan: the gate plan against several depths, and the answer -------------------------------

# 6 requests a case: the fewest whose median has the gate's 95% interval, which the answer decides on
SMALL_PLAN = """\
sglang_gate_warmup: 1
sglang_gate_plan:
  coding: {prompts: coding, concurrency: 1, requests: 6, max_tokens: 192}
  long_context: {prompts: long_context, prompt_tokens: 4096, concurrency: 1, requests: 6, max_tokens: 128}
  concurrent: {prompts: coding, concurrency: 4, requests: 8, max_tokens: 128}
"""
PLAN_SCALE = 8  # emulator speed; the sizes file's bandwidth is scaled with it (shares near 100 %)


@pytest.fixture
def vllm_emus():
    started = []
    yield started
    for emu, log in started:
        emu.stop()
        log.close()


def test_compare_plan_answers_whether_more_steps_pay(emulator, vllm_emus, tmp_path):
    from conftest import MODEL_ARGS, role_defaults
    from sglang_perf.plan import profile as flt
    defaults = role_defaults()
    env = dict(FAST, SGLEMU_SPEED_SCALE=str(PLAN_SCALE))
    names = ("nextn_1step", "nextn_3step", "nextn_5step")
    emus = {n: emulator(MODEL_ARGS + flt.sglang_argv(defaults["sglang_profiles"][n],
                                                     defaults["sglang_version"]), env=env) for n in names}
    # the vLLM targets: python -m emulator.vllm serve MODEL ..., as the role renders it
    server = {"model_path": "/models/Qwen3.6-27B", "served_model_name": "Qwen3.6-27B",
              "trust_remote_code": True}
    for n in ("vllm_mtp_1", "vllm_mtp_3"):
        log = tempfile.TemporaryFile()
        emu = EmulatorProcess(flt.sglang_argv(defaults["sglang_profiles"][n], defaults["sglang_vllm_version"],
                                              server), log, env=dict(env, SGLEMU_SEED="0"),
                              module="emulator.vllm")
        vllm_emus.append((emu, log))
        emus[n] = emu
    for emu, _log in vllm_emus:
        emu.wait_ready("/health", 60)
    names += ("vllm_mtp_1", "vllm_mtp_3")
    plan_vars = tmp_path / "plan.yml"
    plan_vars.write_text(SMALL_PLAN)
    sizes = tmp_path / "sizes.yml"
    sizes.write_text("model:\n" + "".join("  %s: %s\n" % kv for kv in MODEL.items()) + "hardware:\n"
                     + "".join("  %s: %s\n" % (k, v * PLAN_SCALE if k == "gpu_bandwidth_gbs" else v)
                               for k, v in HARDWARE.items()))
    out = tmp_path / "out"
    # the plan's own cases ('' - no context depths: the by-context answer is a pure test, and
    # playbooks/compare.yml's default runs the depths in tests/test_compare_host.py)
    p = bench("compare", "--plan", "--quiet", "--vars", str(plan_vars), "--sizes", str(sizes),
              "--out", str(out), "--current", "nextn_1step", "--context-tokens", "",
              *sum((["--target", "%s=%s" % (n, e.url)] for n, e in emus.items()), []))
    assert p.returncode == 0, p.stderr
    for name in compare.FILES:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    assert (out / "compare.png").read_bytes()[:8] == PNG_MAGIC
    doc = json.loads((out / "compare.json").read_text())
    rows = {(r["profile"], r["case"]): r for r in doc["rows"]}
    assert set(rows) == {(n, c) for n in names for c in ("coding", "long_context", "concurrent")}
    assert all(r["error"] is None for r in rows.values()), [r["error"] for r in rows.values()]
    assert {n: (rows[(n, "coding")]["engine"], rows[(n, "coding")]["spec_steps"]) for n in names} == dict(
        zip(names, (("sglang", 1), ("sglang", 3), ("sglang", 5), ("vllm", 1), ("vllm", 3))))
    assert len(rows[("nextn_5step", "coding")]["accept_by_position"]) == 5
    s = doc["summary"]
    print("\n".join(s["lines"]))  # the answer, for the log
    # the answer opens the report
    md = (out / "compare.md").read_text()
    assert md.index("## The answer") < md.index("| profile | engine |")
    assert md.splitlines()[4] == "- " + s["lines"][0]
    assert p.stdout.startswith("- " + s["lines"][0])
    # 1 step is never the best at coding or C=4 (long context: below)
    for a in s["cases"]:
        assert a["case"] == "long_context" or a["best"] != "nextn_1step", a["sentence"]
    pairs = {(p_["from_steps"], p_["to_steps"], p_["case"]): p_ for p_ in s["depth"]
             if p_["engine"] == "sglang"}
    # 1 -> 3 steps gains about half at coding and C=4, the intervals apart; at long context the
    # calibration's gain is small (acceptance falls with context) and a loaded machine can widen
    # the intervals past it: there, 3 steps are not shown behind
    assert pairs[(1, 3, "coding")]["pays"] and pairs[(1, 3, "concurrent")]["pays"]
    long13 = pairs[(1, 3, "long_context")]
    assert long13["outcome"] != "costs", long13["sentence"]
    # the emulator is calibrated so that steps 4-5 stop paying
    verdicts = {(v["from_steps"], v["to_steps"]): v for v in s["depth_verdicts"] if v["engine"] == "sglang"}
    # vLLM's depths are compared among themselves: 1 -> 3 steps (0.80 / 0.52 / 0.35 per position)
    vllm_pairs = [(v["from_steps"], v["to_steps"]) for v in s["depth_verdicts"] if v["engine"] == "vllm"]
    assert vllm_pairs == [(1, 3)]
    assert verdicts[(1, 3)]["verdict"] in ("pays", "mixed")
    # 4-5 steps lose at coding and C=4; at long context they come near 3 steps: never "pays" in
    # every case
    assert verdicts[(3, 5)]["verdict"] != "pays", verdicts[(3, 5)]
    coding35 = pairs[(3, 5, "coding")]
    # (the break-even follows the measured speeds, which a loaded machine moves: not asserted)
    assert not coding35["pays"] and coding35["marginal_accept"] < 0.5
    line35 = [x for x in s["lines"] if x.startswith("SGLang 3 -> 5 steps (judged cases): ")]
    assert line35 and "2 more steps: pays (" not in line35[0], s["lines"]
    # the winner, like the gate: every case of this plan is judged (the role's thresholds pass at
    # this speed); 5 steps behind or tied with 3 steps, a tie going to fewer steps
    w = s["winner"]
    assert (w["profile"], w["engine"]) == ("nextn_3step", "sglang"), w["reason"]
    assert w["voted"] == ["coding", "long_context", "concurrent"] and w["informed"] == []
    assert w["decided_by"] in ("coding", "long_context", "concurrent", "tie: fewer draft tokens")
    assert [e["profile"] for e in s["roofline"]] == list(names)
    assert all(0 < share < 150 for e in s["roofline"] for share in e["shares"].values())
    with open(str(out / "compare.csv"), newline="") as f:
        assert len(list(csv.DictReader(f))) == 15


def test_compare_plan_refuses_unknown_profiles_and_sweep_options(tmp_path):
    url = "http://127.0.0.1:%d" % free_port()
    for args, message in [
        (["--target", "nextn_9step=" + url], "--target nextn_9step: no such profile in sglang_profiles"),
        (["--target", "nextn_3step=" + url, "--concurrency", "1,4"], "--concurrency is set by the plan"),
        (["--target", "nextn_3step=" + url, "--current", "no_spec"], "--current no_spec is not one of"),
    ]:
        p = bench("compare", "--plan", "--quiet", "--no-roofline", "--out", str(tmp_path / "o"), *args)
        assert p.returncode == 2 and message in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
    p = bench("compare", "--quiet", "--no-roofline", "--current", "x", "--target", "x=" + url)
    assert p.returncode == 2 and "--vars, --current and --context-tokens are for --plan" in p.stderr


DRAFTER_PLAN = """\
sglang_gate_warmup: 1
sglang_gate_plan:
  coding: {prompts: coding, concurrency: 1, requests: 6, max_tokens: 192}
  long_context: {prompts: long_context, prompt_tokens: 32768, concurrency: 1, requests: 6, max_tokens: 128}
  thinking: {prompts: coding, thinking: true, concurrency: 1, requests: 6, max_tokens: 96, report_only: true}
"""


def test_compare_plan_sets_the_drafter_beside_mtp_per_context_and_with_thinking(emulator, tmp_path):
    """DFLASH (the role's dflash profile, a stand-in drafter whose config.json gives its block)
    beside NEXTN 3 steps on the gate plan at two context depths and with thinking on: the
    answer sets it beside the best MTP depth in each case. The emulator's calibration (its README,
    Drafters) has it far ahead on short coding prompts and its lead shrinking with context and with
    thinking; the figures are the emulator's, not a finding about the real drafter."""
    from conftest import MODEL_ARGS, role_defaults
    from sglang_perf.plan import profile as flt
    defaults = role_defaults()
    drafter = tmp_path / "Qwen3.6-27B-DFlash"
    drafter.mkdir()
    (drafter / "config.json").write_text(json.dumps({"architectures": ["DFlashDraftModel"],
                                                     "dflash_config": {"block_size": 16}}))
    env = dict(FAST, SGLEMU_SPEED_SCALE=str(PLAN_SCALE))
    emus = {}
    for n in ("nextn_3step", "dflash"):
        p = dict(defaults["sglang_profiles"][n])
        if n == "dflash":
            p["speculative_draft_model_path"] = str(drafter)
        emus[n] = emulator(MODEL_ARGS + flt.sglang_argv(p, defaults["sglang_version"]), env=env)
    plan_vars = tmp_path / "plan.yml"
    plan_vars.write_text(DRAFTER_PLAN)
    out = tmp_path / "out"
    p = bench("compare", "--plan", "--quiet", "--vars", str(plan_vars), "--out", str(out),
              "--context-tokens", "1024,32768",
              *sum((["--target", "%s=%s" % (n, e.url)] for n, e in emus.items()), []))
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "compare.json").read_text())
    rows = {(r["profile"], r["case"]): r for r in doc["rows"]}
    assert all(r["error"] is None for r in rows.values()), [r["error"] for r in rows.values()]
    coding, thinking = rows[("dflash", "coding")], rows[("dflash", "thinking")]
    assert (coding["drafter"], coding["spec_steps"]) == ("DFLASH", 15)
    assert thinking["thinking"] is True and coding["thinking"] is False
    s = doc["summary"]
    print("\n".join(s["lines"]))  # the answer, for the log
    (d,) = s["drafters"]
    by = {c["case"]: c for c in d["cases"]}
    assert list(by) == ["coding", "context_1k", "context_32k", "thinking"]
    assert by["coding"]["outcome"] == "beats" and by["coding"]["margin_pct"] > 30
    # its lead shrinks with the context and with thinking (the calibration: 1.53x at coding,
    # 0.98x at 32K; thinking cuts a block's drafts to 25/60)
    assert by["context_32k"]["margin_pct"] < by["context_1k"]["margin_pct"] < by["coding"]["margin_pct"]
    assert by["thinking"]["margin_pct"] < by["coding"]["margin_pct"] - 20
    assert d["sentence"] in s["lines"] and "with thinking on (thinking)" in d["sentence"]
    # the drafter is no MTP depth: no 3 -> 15 step pair
    assert s["depth"] == []
    md = (out / "compare.md").read_text()
    assert "SGLang DFLASH (dflash) against the best MTP depth of each case: in coding +" in md
