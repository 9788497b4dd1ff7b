"""`python -m bench history FILE --html OUT` (bench/report.py): one self-contained page for a host,
built from records written by the real history.record() (plan results shaped like the engine's,
with and without intervals, a profile change, a release change, a failed and an inconclusive run,
one record from before the gate plan), then opened in headless Chromium: the DOM it parsed (the
SVG charts per case, the change markers, the comparison) and a screenshot that is not blank."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from bench import compare_plan, report
import resultutil
from benchrun import bench
from sglang_perf.judge import decision, verdict
from sglang_perf.record import history

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SETUP = ("run `make chromium` (scripts/host-packages.sh chromium: Debian's package; make test's and "
         "make check's set-up run it), or point CHROMIUM at a Chromium binary")
CHROMIUM_TIMEOUT = 120
THRESHOLDS = {"coding": {"min_tok_s": 45.0, "min_accept_len": 2.8},
              "long_context": {"min_tok_s": 30.0, "min_accept_len": 2.0},
              "concurrent": {"min_aggregate_tok_s": 200.0}}
CONCURRENCY = {"coding": 1, "long_context": 1, "concurrent": 4}


def interval(estimate, lower, upper, n, method):
    return {"estimate": estimate, "lower": lower, "upper": upper, "n": n, "method": method}


def case_result(name, decode, al, agg, positions, passed=True, intervals=None, verdict=None, share=75.0):
    """One case of a plan result (the figures the record keeps): five requests about ``decode``."""
    return resultutil.case_result(
        name, [decode * f for f in (0.985, 0.995, 1.0, 1.005, 1.015)], al, positions,
        [0.05, 0.051, 0.052, 0.05, 0.049], CONCURRENCY[name], aggregate=agg, thresholds=THRESHOLDS[name],
        passed=passed, failure={"threshold": "min_tok_s", "measured": decode,
                                "required": THRESHOLDS[name].get("min_tok_s"),
                                "message": "decode tok/s %.2f < required" % decode},
        verdict=verdict, intervals=intervals,
        prompt_tokens={"target": None, "n": 5, "min": 141, "median": 145.0, "max": 147},
        roofline={"ceiling_tok_s": decode * 100.0 / share, "share_pct": share})


def gate_record(hour, profile, release, cases, plan_verdict=None, version="0.5.23"):
    """A history line through the real verdict.judge_plan -> decision.decide -> history.record. The figures
    the gate adds to a case (``intervals``, ``verdict``) and to the record (``plan_verdict``) are
    set as the gate writes them where record() does not carry them."""
    capacity = {"failures": [], "notes": [], "passed": True}
    result = verdict.judge_plan(cases, capacity, {}, profile, "m", "http://127.0.0.1:30000", 120.0)
    d = decision.decide(result, "ab" * 32, "cd" * 32, lkg={"unit_sha256": "ef" * 32, "env_sha256": "01" * 32})
    rec = history.record(result, d, {"time": "2026-12-01T%02d:00:00Z" % hour, "host": "ct-report",
                                     "profile": profile, "sglang_version": version, "engine": "sglang",
                                     "release": release, "unit_sha256": "ab" * 32})
    for kept, measured in zip(rec["cases"], cases):
        for key in ("intervals", "verdict"):
            if key in measured:
                kept.setdefault(key, measured[key])
    if plan_verdict:
        rec.setdefault("plan_verdict", plan_verdict)
    return rec


DECODE_IV = "order statistics of the median"
AL_IV = "bootstrap: ratio of sums, resampled per request"


def ivs(decode, al, agg=None, n=5):
    out = {"level": 0.95, "decode_tok_s": interval(*decode, n, DECODE_IV),
           "accept_len": interval(*al, n, AL_IV)}
    if agg:
        out["aggregate_tok_s"] = interval(*agg, n, "bootstrap over waves")
    return out


POS3, POS1 = [0.81, 0.77, 0.73], [0.83]
R1, R2 = "0.5.23-1f2e3d4c5b", "0.5.24-9a8b7c6d5e"


def story():
    """Seven runs, oldest first."""
    old = {"time": "2026-12-01T05:00:00Z", "host": "ct-report", "profile": "nextn_3step",
           "sglang_version": "0.5.23", "passed": True, "action": "recorded as last-known-good",
           "decode_tok_s": {"median": 55.0, "min": 54.0, "max": 56.0}, "accept_len": 3.2,
           "aggregate_tok_s": 54.5, "thresholds": {"min_tok_s": 45, "min_accept_len": 2.8},
           "roofline": {"ceiling_tok_s": 73.4, "share_pct": 74.9}}
    return [
        old,  # before the gate plan: one case at the top level, no release
        gate_record(6, "nextn_3step", R1, [
            case_result("coding", 57.9, 3.32, 57.8, POS3),
            case_result("long_context", 40.8, 2.39, 14.9, [0.62, 0.45, 0.31]),
            case_result("concurrent", 57.7, 3.33, 225.3, POS3)]),
        gate_record(7, "nextn_3step", R1, [
            case_result("coding", 54.6, 3.31, 54.4, POS3, verdict="pass",
                        intervals=ivs((54.6, 53.9, 55.2), (3.31, 3.2, 3.41), n=9)),
            case_result("long_context", 40.1, 2.35, 14.7, [0.61, 0.44, 0.30],
                        intervals=ivs((40.1, None, None), (2.35, 2.1, 2.6), n=2), verdict="pass"),
            case_result("concurrent", 57.0, 3.30, 224.0, POS3, verdict="pass",
                        intervals=ivs((57.0, 56.1, 57.9), (3.30, 3.22, 3.38), (224.0, 219.0, 229.0), n=8))],
            plan_verdict="pass"),
        gate_record(8, "nextn_1step", R1, [  # the profile changes: fails
            case_result("coding", 39.2, 1.84, 39.1, POS1, passed=False, verdict="fail",
                        intervals=ivs((39.2, 38.8, 39.6), (1.84, 1.80, 1.88))),
            case_result("long_context", 33.6, 1.63, 13.8, [0.62], verdict="pass",
                        intervals=ivs((33.6, None, 34.1), (1.63, 1.5, 1.75), n=2)),
            case_result("concurrent", 38.9, 1.83, 153.4, POS1, passed=False, verdict="fail",
                        intervals=ivs((38.9, 38.4, 39.3), (1.83, 1.79, 1.87), (153.4, 150.0, 157.0)))],
            plan_verdict="fail"),
        gate_record(9, "nextn_3step", R1, [  # back to 3-step: the coding interval straddles 45
            case_result("coding", 45.3, 3.0, 45.1, POS3, verdict="inconclusive",
                        intervals=ivs((45.3, 44.1, 46.4), (3.0, 2.9, 3.1))),
            case_result("long_context", 39.0, 2.3, 14.5, [0.60, 0.43, 0.29], verdict="pass"),
            case_result("concurrent", 55.0, 3.2, 215.0, POS3, verdict="pass")],
            plan_verdict="inconclusive"),
        gate_record(10, "nextn_3step", R2, [  # the release changes
            case_result("coding", 58.4, 3.35, 58.2, [0.82, 0.78, 0.74], verdict="pass",
                        intervals=ivs((58.4, 57.6, 59.1), (3.35, 3.26, 3.44), n=9)),
            case_result("long_context", 41.2, 2.41, 15.0, [0.63, 0.46, 0.32], verdict="pass"),
            case_result("concurrent", 58.0, 3.34, 228.0, [0.82, 0.77, 0.73], verdict="pass")],
            plan_verdict="pass", version="0.5.24"),
    ]


def bench_history(*args):
    return bench("history", *args, timeout=120)


def write_lines(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def comparison(tmp_path):
    """A plan comparison written by bench.compare_plan (compare.json as compare-report writes it)."""
    def ci(x):
        return {"estimate": x, "lower": x * 0.99, "upper": x * 1.01, "n": 6}

    rows = []
    for profile, steps, decode, agg, al in (("nextn_3step", 3, 58.0, 225.0, 3.32),
                                            ("vllm_mtp_3", 3, 52.0, 228.0, 3.1)):
        engine = "vllm" if profile.startswith("vllm") else "sglang"
        for case, c in CONCURRENCY.items():
            rows.append({"profile": profile, "engine": engine,
                         "spec_steps": steps, "case": case, "url": None, "concurrency": c, "requests": 4,
                         "max_tokens": 512, "prompt_tokens": 145.0, "decode_tok_s_median": decode,
                         "decode_tok_s_min": decode * 0.99, "decode_tok_s_max": decode * 1.01,
                         "aggregate_tok_s": agg if c > 1 else decode, "accept_len": al,
                         "accept_by_position": [0.8, 0.7, 0.6], "ttft_p50_s": 0.05, "errors": 0,
                         "error": None, "judged": True, "thresholds": {},  # the gate judges them
                         "setting": [engine, "chain", steps, False, 0.88],
                         "intervals": {"level": 0.95, "decode_tok_s": ci(decode),
                                       "aggregate_tok_s": ci(agg)}})
    summary = compare_plan.analyse_plan(rows, current="nextn_3step")
    out = tmp_path / "compare"
    compare_plan.write_reports(rows, summary, out)
    return out / "compare.json", summary


class Dom(HTMLParser):
    """The elements of a page: (tag, attributes) in document order, and its text."""

    def __init__(self, text):
        super().__init__()
        self.elements, self.text = [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def having(self, tag, cls=None, **attrs):
        return [a for t, a in self.elements
                if t == tag and (cls is None or cls in (a.get("class") or "").split())
                and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())]


def chromium():
    """The Chromium binary (CHROMIUM, else chromium on PATH); a failure naming the set-up otherwise."""
    name = os.environ.get("CHROMIUM") or "chromium"
    path = shutil.which(name)
    if path is None:
        pytest.fail("headless Chromium is needed to check the page and %s is not installed: %s"
                    % (name, SETUP))
    return path


def browse(page, tmp_path, *mode):
    """Run headless Chromium on ``page`` with ``mode`` (--dump-dom, --screenshot=...)."""
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--window-size=1280,2400", "--user-data-dir=%s" % (tmp_path / "chromium-profile"),
           *mode, page.as_uri()]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT,
                           env=dict(os.environ, HOME=str(tmp_path)))
    except subprocess.TimeoutExpired:
        pytest.fail("chromium did not finish in %d s: %s" % (CHROMIUM_TIMEOUT, " ".join(cmd)))
    assert p.returncode == 0, "chromium exit %d: %s" % (p.returncode, p.stderr[-2000:])
    return p.stdout


def near(rgb, target, tol=24):
    return all(abs(a - b) <= tol for a, b in zip(rgb, target))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    hist = write_lines(tmp / "ct-report.jsonl", story())
    comp, summary = comparison(tmp)
    out = tmp / "site" / "ct-report.html"
    p = bench_history(str(hist), "--html", str(out), "--compare", str(comp))
    return tmp, out, p, summary


def test_the_page_is_written_self_contained_with_the_intervals(rendered):
    _tmp, out, p, _summary = rendered
    assert p.returncode == 0, p.stderr
    assert "wrote %s" % out in p.stderr
    text = out.read_text()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", text, re.I)
    assert "<script" not in text.lower() and "<link" not in text.lower() and "@import" not in text
    # the 07:00 run's coding case, the interval the gate recorded
    assert "54.6 tok/s [53.9, 55.2]" in text and "3.31 [3.20, 3.41]" in text
    # too few requests: no bounds; one bound only
    assert "40.1 tok/s [-, -]" in text and "33.6 tok/s [-, 34.1]" in text
    assert "95% interval, n=9: order statistics of the median" in text
    # the record from before the gate plan: its point, no interval
    assert "55.0 tok/s<br>accept 3.20</td>" in text and "55.0 tok/s [" not in text
    dom = Dom(text)
    assert [a["data-case"] for a in dom.having("section", "case")] == ["coding", "long_context", "concurrent"]


def test_chromium_renders_the_charts_markers_and_comparison(rendered):
    tmp, out, p, summary = rendered
    assert p.returncode == 0, p.stderr
    dom = Dom(browse(out, tmp, "--dump-dom"))
    charts = {}
    for a in dom.having("svg", "chart"):
        charts.setdefault(a["data-case"], []).append(a["data-metric"])
    assert charts == {"coding": ["decode_tok_s", "accept_len", "accept_by_position", "roofline_share_pct"],
                      "long_context": ["decode_tok_s", "accept_len", "accept_by_position"],
                      "concurrent": ["decode_tok_s", "accept_len", "aggregate_tok_s", "accept_by_position"]}
    # each time-series chart marks the two profile changes and the release change
    series = sum(len([m for m in ms if m != "accept_by_position"]) for ms in charts.values())
    assert len(dom.having("g", "profile-change", data_label="nextn_1step")) == series
    assert len(dom.having("g", "profile-change", data_label="nextn_3step")) == series
    assert len(dom.having("g", "release-change", data_label=R2)) == series
    assert dom.having("g", "verdict-inconclusive") and dom.having("g", "verdict-fail")
    assert len(dom.having("path", "interval")) >= 10 and dom.having("g", "threshold")
    # the comparison: its answer and a row per (setting, case)
    assert dom.having("section", id="comparison")
    text = " ".join(dom.text)
    assert "Deploy %s" % summary["winner"]["profile"] in text
    assert len(dom.having("table", "compare-rows")) == 1
    assert "no comparison yet" not in text
    rows = re.search(r'<table class="compare-rows">.*?</table>', out.read_text(), re.S).group(0)
    assert rows.count("<tr>") == 1 + 6


def test_the_screenshot_is_a_picture_of_charts(rendered):
    from PIL import Image

    tmp, out, p, _summary = rendered
    assert p.returncode == 0, p.stderr
    shot = tmp / "report.png"
    browse(out, tmp, "--screenshot=%s" % shot)
    assert shot.read_bytes()[:8] == PNG_MAGIC
    img = Image.open(str(shot)).convert("RGB")
    assert img.size == (1280, 2400)
    colours = img.getcolors(1 << 22)
    assert len(colours) > 300, "%d distinct colours: a blank page?" % len(colours)
    # the plot areas (their #fbfbfd fill): found, and what is drawn in them is not uniform
    pixels = img.load()
    area = [(x, y) for y in range(0, 2400, 2) for x in range(0, 1280, 2) if pixels[x, y] == (251, 251, 253)]
    assert len(area) > 5000, "no chart area in the screenshot"
    x0, y0 = min(x for x, _ in area), min(y for _, y in area)
    inside = img.crop((x0, y0, x0 + 500, y0 + 170)).getcolors(1 << 16)
    assert len(inside) > 40, "the first chart's area holds %d colours" % len(inside)
    # the verdict colours of the points and the legend
    for name in ("pass", "fail", "inconclusive"):
        hexa = report.STYLE[name][0]
        rgb = tuple(int(hexa[i:i + 2], 16) for i in (1, 3, 5))
        assert sum(n for n, c in colours if near(c, rgb)) > 50, "no %s marker drawn" % name


def test_no_comparison_says_where_one_comes_from(tmp_path):
    d = tmp_path / "history"
    d.mkdir()
    write_lines(d / "ct-report-nocompare.jsonl", story()[:2])
    out = tmp_path / "page.html"
    p = bench_history("ct-report-nocompare", "--dir", str(d), "--html", str(out))
    assert p.returncode == 0, p.stderr
    assert report.NO_COMPARISON in out.read_text()


def test_bad_inputs_exit_2_with_one_line(tmp_path):
    out = tmp_path / "page.html"
    p = bench_history(str(tmp_path / "gone.jsonl"), "--html", str(out))
    assert p.returncode == 2
    assert p.stderr.strip() == "bench history: no history file %s" % (tmp_path / "gone.jsonl")
    assert not out.exists()
    hist = write_lines(tmp_path / "h.jsonl", story()[:2])
    p = bench_history(str(hist), "--html", str(out), "--compare", str(tmp_path / "none.json"))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "no comparison file" in p.stderr and not out.exists()
    p = bench_history(str(hist), "--compare", str(tmp_path / "none.json"))
    assert p.returncode == 2 and p.stderr.strip() == "bench history: --compare is for --html"


def test_hostile_strings_are_escaped(tmp_path):
    evil = "<script>alert(1)</script>"
    recs = story()[:3]
    recs[1]["profile"] = evil
    recs[2]["release"] = '"><img src=x onerror=alert(2)>'
    recs[2]["reason"] = evil
    recs[2]["cases"][0]["case"] = evil
    recs[2]["cases"][0]["intervals"]["decode_tok_s"]["method"] = evil
    out = tmp_path / "page.html"
    p = bench_history(str(write_lines(tmp_path / "h.jsonl", recs)), "--html", str(out))
    assert p.returncode == 0, p.stderr
    text = out.read_text()
    assert "<script" not in text and "<img" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "&quot;&gt;&lt;img src=x" in text


def test_interval_text_and_records_of_every_age():
    fig = {"value": 54.6, "lower": 53.9, "upper": 55.2, "has_interval": True}
    assert report.interval_text(fig, ".1f", "tok/s") == "54.6 tok/s [53.9, 55.2]"
    assert report.interval_text(dict(fig, lower=None), ".1f", "tok/s") == "54.6 tok/s [-, 55.2]"
    assert report.interval_text(dict(fig, has_interval=False), ".1f", "tok/s") == "54.6 tok/s"
    old = {"raw": story()[0], "cases": []}
    f = report.figures(old, "coding", "coding")
    assert f["decode_tok_s"]["value"] == 55.0 and f["decode_tok_s"]["threshold"] == 45.0
    assert f["verdict"] == "pass" and not f["decode_tok_s"]["has_interval"]
    assert report.figures(old, "concurrent", "coding") is None
    # a run that failed before measuring anything: unmeasured in every case
    blind = {"raw": {"time": "x", "verdict": "fail", "decode_tok_s": None}, "cases": []}
    assert report.figures(blind, "concurrent", "coding")["unmeasured"] is True
