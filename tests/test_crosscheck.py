"""bench/crosscheck.py: the tokenizer it makes for SGLang's benchmark client, and its arithmetic.

The full cross-check (both clients against one emulator) is a benchmark, not a test:
`.venv/bin/python -m bench.crosscheck`. Here: the tokenizer maker runs under the contract venv's
Python (scripts/contract-venv.sh; cached) and a separate process loads its output the way
sglang.benchmark.serving does; the table's differences are checked on hand-computed numbers.
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from bench import crosscheck as cc
from emulator.args import read_architecture
from conftest import ROOT

OFFLINE = dict(os.environ, **cc.OFFLINE_ENV)

# What sglang.benchmark.serving does with --tokenizer DIR (benchmark/utils.py get_tokenizer,
# serving.py check_chat_template, datasets/random.py sample_random_requests for random-ids,
# calculate_metrics' retokenization), in a process of its own.
LOAD = r"""
import json, sys
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=True)
text = " def lru_cache(self, key):\n        return self._map.get(key)  # émoji ✓"
ids = tok.encode(text, add_special_tokens=False)
random_ids = [(400 + j) % tok.vocab_size for j in range(128)]  # merged pieces
print(json.dumps({
    "vocab_size": tok.vocab_size,
    "special_to_add": tok.num_special_tokens_to_add(),
    "chat_template_in_init_kwargs": "chat_template" in tok.init_kwargs,
    "unseen_text_ids": len(ids),
    "roundtrip": tok.decode(ids) == text,
    "random_ids_text_len": len(tok.decode(random_ids)),
    "eos": tok.eos_token,
}))
"""


@pytest.fixture(scope="module")
def contract_python():
    try:
        p = subprocess.run(["bash", str(cc.CONTRACT_VENV)], capture_output=True, text=True,
                           timeout=3600)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip("scripts/contract-venv.sh could not build CONTRACT_PYTHON: %s" % e)
    out = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
    if p.returncode != 0 or "CONTRACT_PYTHON" not in out:
        pytest.skip("scripts/contract-venv.sh could not build CONTRACT_PYTHON (exit %d): %s"
                    % (p.returncode, p.stderr[-1500:]))
    return out["CONTRACT_PYTHON"]


@pytest.mark.contract
def test_tokenizer_maker_output_loads_like_bench_serving_loads_it(contract_python, tmp_path):
    tokdir, corpus = tmp_path / "tok", tmp_path / "corpus.json"
    corpus.write_text(json.dumps(cc.tokenizer_corpus()))
    p = subprocess.run(cc.contract_argv(contract_python, "tokenizer", str(tokdir), "--corpus", str(corpus)),
                       capture_output=True, text=True, env=OFFLINE, timeout=120, cwd=str(ROOT))
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    assert summary["roundtrip"] is True and summary["sglang_version"] == "0.5.23"
    assert {f.name for f in tokdir.iterdir()} >= {"tokenizer.json", "tokenizer_config.json",
                                                 "config.json"}

    p = subprocess.run([contract_python, "-c", LOAD, str(tokdir)], capture_output=True, text=True,
                       env=OFFLINE, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    # byte-level BPE: 256 byte symbols + 3 specials + merges learned from the coding prompts
    assert got["vocab_size"] > 259 + 100, got
    # random-ids asks for input_len tokens minus these: must be 0 so prompts keep --input-len
    assert got["special_to_add"] == 0
    # check_chat_template() is true: no "use a Chat model" warning, no hub lookup of the name
    assert got["chat_template_in_init_kwargs"] is True
    # text it never saw (non-ASCII included) encodes without an unknown token and decodes back
    assert got["roundtrip"] is True and got["unseen_text_ids"] > 10
    assert got["random_ids_text_len"] > 2 * 128  # random-ids prompts: multi-byte pieces
    assert got["eos"] == "<|im_end|>"
    # the emulator started with --model-path on this directory keeps the real architecture
    assert read_architecture(str(tokdir), "FallbackArch") == ["Qwen3_5ForConditionalGeneration"]


def test_pct_diff_and_cells():
    assert cc.pct_diff(110, 100) == pytest.approx(10.0)
    assert cc.pct_diff(90, 100) == pytest.approx(-10.0)
    assert cc.pct_diff(55.0, 55.0) == 0.0
    assert cc.pct_diff(None, 100) is None and cc.pct_diff(1.0, None) is None
    assert cc.pct_diff(5.0, 0) is None  # no reference, no percentage
    assert cc.cell(55.0, 50.0, ".1f") == "55.0 / 50.0 (+10.0%)"
    assert cc.cell(2.88, 3.2, ".2f") == "2.88 / 3.20 (-10.0%)"
    assert cc.cell(None, 3.2, ".2f") == "- / 3.20 (-)"


def test_tool_vs_tool_net_takes_the_runs_difference_out():
    # a overstates its truth by 10 %, b by 10 % too: the tools agree (net 0) although a's run
    # really was 11.1 % faster than b's
    d = cc.tool_vs_tool({"tool": {"out_tok_s": 110.0}, "truth": {"out_tok_s": 100.0}},
                        {"tool": {"out_tok_s": 99.0}, "truth": {"out_tok_s": 90.0}})
    assert d["out_tok_s"]["tool"] == pytest.approx(100.0 / 9.0)
    assert d["out_tok_s"]["truth"] == pytest.approx(100.0 / 9.0)
    assert d["out_tok_s"]["net"] == pytest.approx(0.0, abs=1e-9)
    # same runs (equal truths), tools 5 % apart: net = tool difference
    d = cc.tool_vs_tool({"tool": {"ttft_ms": 105.0}, "truth": {"ttft_ms": 50.0}},
                        {"tool": {"ttft_ms": 100.0}, "truth": {"ttft_ms": 50.0}})
    assert d["ttft_ms"]["net"] == pytest.approx(5.0) and d["ttft_ms"]["truth"] == 0.0
    assert d["accept_len"] == {"tool": None, "truth": None, "net": None}


def _rec(rid, arrival, first, last, tokens, verify, health=False, max_tokens=256):
    return {"rid": rid, "health": health, "t_arrival": arrival, "t_first_token": first,
            "t_last_token": last, "completion_tokens": tokens, "verify_ct": verify,
            "max_tokens": max_tokens, "finish_reason": "length",
            "decode_tok_s": (tokens - 1) / (last - first) if last > first else None}


def test_truth_of_is_the_emulators_exact_arithmetic():
    recs = [_rec("a", 10.0, 10.05, 15.05, 256, 80), _rec("b", 15.1, 15.2, 20.2, 256, 85),
            _rec("c", 20.3, 20.32, 22.82, 101, 25)]
    t = cc.truth_of(recs)
    assert t["n"] == 3 and t["tokens"] == 613 and t["verify_ct"] == 190
    assert t["duration_s"] == pytest.approx(12.82)                 # 22.82 - 10.0
    assert t["out_tok_s"] == pytest.approx(613 / 12.82)
    assert t["accept_len"] == pytest.approx(613 / 190)
    assert t["decode_tok_s"] == pytest.approx(51.0)                # median of 51, 51, 40
    assert t["ttft_ms"] == pytest.approx(50.0)                     # median of 50, 100, 20
    assert cc.truth_of([])["out_tok_s"] is None


def test_since_start_accept_len_leaves_out_prefill_tokens_and_health_checks():
    recs = [_rec("a", 0, 0.1, 1, 9, 2), _rec("b", 1, 1.1, 2, 17, 4),
            _rec("h", 2, 2.1, 2.1, 1, 0, health=True)]
    assert cc.since_start_accept_len(recs) == pytest.approx((8 + 16) / 6.0)


def test_measured_records_split():
    warm = _rec("w", 1.0, 1.1, 1.5, 32, 10, max_tokens=32)
    m1, m2 = _rec("m1", 3.0, 3.1, 8.0, 256, 80), _rec("m2", 3.01, 3.2, 8.1, 256, 81)
    health = _rec("h", 0.5, 0.6, 0.6, 1, 0, health=True)
    meas, w = cc.measured_records([m2, health, m1, warm], warmup=1)    # by arrival order
    assert [r["rid"] for r in w] == ["w"] and [r["rid"] for r in meas] == ["m1", "m2"]
    meas, _ = cc.measured_records([m2, health, m1, warm], rids={"m2"})   # by request id
    assert [r["rid"] for r in meas] == ["m2"]
