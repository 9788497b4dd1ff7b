"""`python -m bench history`: the table (rows, % changes vs the previous passing run of the same
profile, profile-change marks), the PNG, and exit 2 on a missing or empty file."""
from __future__ import annotations

import json
import re

from benchrun import bench

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(hour, **kw):
    return {"time": "2026-11-30T%02d:00:00.000000Z" % hour, "host": "ct-local",
            "sglang_version": "0.5.23", "concurrency": 1, "requests": 4, "max_tokens": 512, "errors": 0,
            "thresholds": {"min_tok_s": 45, "min_accept_len": 2.8}, "unit_sha256": "ab" * 32,
            "msg": "", **kw}


def decode(median, lo, hi):
    return {"median": median, "min": lo, "max": hi, "mean": median, "spread_pct": 1.0, "n": 4}


LKG, ROLLBACK = "recorded as last-known-good", "rolled back to the last-known-good unit"

# The story: two passing 3-step runs, a failed 1-step deploy (profile change), 3-step again
# (profile change), a broken line, a failed 3-step run that measured nothing, a passing 3-step run.
LINES = [
    json.dumps(run(hour=6, profile="nextn_3step", passed=True, action=LKG, accept_len=3.10,
                   aggregate_tok_s=53.0, decode_tok_s=decode(54.0, 53.0, 55.1),
                   roofline={"ceiling_tok_s": 73.4, "share_pct": 73.6})),
    json.dumps(run(hour=7, profile="nextn_3step", passed=True, action=LKG, accept_len=3.20,
                   aggregate_tok_s=54.0, decode_tok_s=decode(55.0, 54.0, 56.0),
                   regression={"baseline_time": "x", "decode_tok_s_pct": 1.9,
                               "accept_len_pct": 3.2})),
    json.dumps(run(hour=8, profile="nextn_1step", passed=False, action=ROLLBACK, accept_len=1.75,
                   aggregate_tok_s=36.5, decode_tok_s=decode(37.0, 36.0, 38.0))),
    json.dumps(run(hour=9, profile="nextn_3step", passed=True, action=LKG, accept_len=2.9,
                   aggregate_tok_s=51.0, decode_tok_s=decode(52.0, 50.0, 53.0))),
    '{"time": "2026-11-30T09:30:00Z", "profile": ',  # line 5: cut short
    json.dumps(run(hour=10, profile="nextn_3step", passed=False, action=ROLLBACK, accept_len=None,
                   aggregate_tok_s=None, decode_tok_s=None, sglang_version="0.5.24")),
    json.dumps(run(hour=11, profile="nextn_3step", passed=True, action=LKG, accept_len=3.3,
                   aggregate_tok_s=56.0, decode_tok_s=decode(57.2, 56.0, 58.0))),
]


def bench_history(*args):
    return bench("history", *args, timeout=120)


def table_rows(stdout):
    """{time: cells} for every table row (cells split on runs of 2+ spaces)."""
    rows = {}
    for line in stdout.splitlines():
        if re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", line):
            cells = re.split(r"\s{2,}", line.strip())
            rows[cells[0]] = cells
    return rows


def write_history(tmp_path, lines=LINES, host="ct-local"):
    d = tmp_path / "history"
    d.mkdir(exist_ok=True)
    path = d / ("%s.jsonl" % host)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_table_changes_marks_and_png(tmp_path):
    path = write_history(tmp_path)
    png = tmp_path / "charts" / "ct-local.png"
    p = bench_history("ct-local", "--dir", str(path.parent), "--png", str(png))
    assert p.returncode == 0, p.stderr
    rows = table_rows(p.stdout)
    # six runs: the cut-short line 5 is skipped, with a warning naming it
    assert sorted(rows) == ["2026-11-30 %02d:00:00" % h for h in (6, 7, 8, 9, 10, 11)]
    assert re.search(r"warning: .*ct-local\.jsonl line 5 skipped", p.stderr), p.stderr
    assert "line 5" in p.stderr and "line 4" not in p.stderr and "line 6" not in p.stderr
    head = ["time (UTC)", "profile", "version", "decode tok/s", "accept", "aggregate", "roofline",
            "decode vs prev", "AL vs prev", "gate", "action"]
    assert re.split(r"\s{2,}", [line for line in p.stdout.splitlines()
                                if line.startswith("time (UTC)")][0].strip()) == head
    r = {int(t[11:13]): cells for t, cells in rows.items()}
    # columns: time, profile, version, decode, AL, aggregate, roofline, d decode, d AL, gate, action
    assert r[6][1:] == ["nextn_3step", "0.5.23", "54.0", "3.10", "53.0", "73.6%", "-", "-",
                        "passed", LKG]
    # vs run 6: (55.0 - 54.0) / 54.0 = +1.85 %; (3.20 - 3.10) / 3.10 = +3.23 %
    assert r[7][1:] == ["nextn_3step", "0.5.23", "55.0", "3.20", "54.0", "-", "+1.9%", "+3.2%",
                        "passed", LKG]
    # profile changed; no earlier passing 1-step run: no change figures
    assert r[8][1:] == ["* nextn_1step", "0.5.23", "37.0", "1.75", "36.5", "-", "-", "-",
                        "FAILED", ROLLBACK]
    # back to 3-step (marked); vs run 7, the last passing 3-step run (the 1-step run in between
    # is another profile): (52.0 - 55.0) / 55.0 = -5.45 %; (2.90 - 3.20) / 3.20 = -9.375 %
    assert r[9][1:] == ["* nextn_3step", "0.5.23", "52.0", "2.90", "51.0", "-", "-5.5%", "-9.4%",
                        "passed", LKG]
    # failed, nothing measured
    assert r[10][1:] == ["nextn_3step", "0.5.24", "-", "-", "-", "-", "-", "-", "FAILED", ROLLBACK]
    # vs run 9 (run 10 failed): (57.2 - 52.0) / 52.0 = +10.0 %; (3.3 - 2.9) / 2.9 = +13.79 %
    assert r[11][1:] == ["nextn_3step", "0.5.23", "57.2", "3.30", "56.0", "-", "+10.0%", "+13.8%",
                         "passed", LKG]
    assert "* the profile changed from the run before" in p.stdout
    data = png.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 20000
    assert "wrote %s" % png in p.stderr


def test_last_n_keeps_the_changes_of_the_whole_history(tmp_path):
    path = write_history(tmp_path)
    p = bench_history(str(path), "--last", "2")
    assert p.returncode == 0, p.stderr
    rows = table_rows(p.stdout)
    assert sorted(rows) == ["2026-11-30 10:00:00", "2026-11-30 11:00:00"]
    assert rows["2026-11-30 11:00:00"][7:9] == ["+10.0%", "+13.8%"]
    assert "6 runs, last 2 shown" in p.stdout


def test_missing_file_exits_2_naming_the_path(tmp_path):
    p = bench_history("ct129", "--dir", str(tmp_path / "nowhere"))
    want = str(tmp_path / "nowhere" / "ct129.jsonl")
    assert p.returncode == 2
    assert p.stderr.strip() == "bench history: no history file %s" % want
    assert p.stdout == ""
    p = bench_history(str(tmp_path / "gone.jsonl"))
    assert p.returncode == 2 and str(tmp_path / "gone.jsonl") in p.stderr


def test_empty_or_all_malformed_file_exits_2(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    p = bench_history(str(empty))
    assert p.returncode == 2 and "holds no gate run (empty file)" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n[1, 2]\n")
    p = bench_history(str(bad))
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert "line 1 skipped" in lines[0] and "line 2 skipped: not a JSON object" in lines[1]
    assert lines[-1] == "bench history: %s holds no gate run (no valid line)" % bad
