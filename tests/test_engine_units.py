"""The engine's parsing, statistics, validation and threshold messages, without a server."""
from __future__ import annotations

import pytest

from sglang_perf.measure import config, engine, metrics, stats
from sglang_perf.judge import verdict
from sglang_perf.measure.client import ConfigError
from sglang_perf.measure import prompts
from sglang_perf.measure.prompts import CODING_PROMPTS


def test_percentile_interpolates_like_numpy_linear():
    assert stats.percentile([1, 2, 3, 4], 50) == 2.5
    assert stats.percentile([10, 20, 30, 40, 50], 90) == pytest.approx(46.0)
    assert stats.percentile([], 50) is None
    assert stats.percentile([7], 99) == 7.0


def test_summarize_reports_spread_and_sample_stdev():
    s = stats.summarize([50.0, 55.0, 60.0])
    assert (s["median"], s["min"], s["max"], s["n"]) == (55.0, 50.0, 60.0, 3)
    assert s["spread_pct"] == pytest.approx(10 / 55 * 100)
    assert s["stdev"] == pytest.approx(5.0)
    assert stats.summarize([])["median"] is None


def test_metrics_parse_sums_label_sets_and_ignores_others():
    text = """# HELP sglang:generation_tokens_total x
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m",tp_rank="0"} 100.0
sglang:generation_tokens_total{model_name="m",tp_rank="1"} 50.0
sglang:spec_verify_calls_total{model_name="m"} 40
sglang:other_total 9
sglang:time_to_first_token_seconds_bucket{le="0.1"} 3
"""
    got = metrics.parse(text)
    assert got == {"sglang:generation_tokens_total": 150.0, "sglang:spec_verify_calls_total": 40.0}


def test_metrics_window_accept_length_and_mismatch_note():
    before = {"sglang:generation_tokens_total": 100.0, "sglang:spec_verify_calls_total": 40.0}
    after = {"sglang:generation_tokens_total": 420.0, "sglang:spec_verify_calls_total": 140.0}
    w = metrics.window(before, after, client_tokens=320)
    assert w["accept_len"] == pytest.approx(3.2) and w["matches_client"]
    w = metrics.window(before, after, client_tokens=300)
    assert w["matches_client"] is False and "other traffic" in w["note"]
    w = metrics.window(after, before, client_tokens=300)
    assert "restarted" in w["note"]


@pytest.mark.parametrize("options, option, words", [
    ({"url": "ftp://x"}, "url", "http://HOST"),
    ({"url": ""}, "url", "required"),
    ({"url": "http://h:99999"}, "url", "port"),
    ({"concurrency": 0}, "concurrency", "1 or more"),
    ({"requests": "many"}, "requests", "integer"),
    ({"requests": 2.5}, "requests", "integer"),
    ({"max_tokens": 1}, "max_tokens", "2 or more"),
    ({"min_tok_s": -1}, "min_tok_s", "0.0 or more"),
    ({"min_accept_len": -0.5}, "min_accept_len", "0.0 or more"),
    ({"min_accept_len": 0.5}, "min_accept_len", "bonus token"),
    ({"min_aggregate_tok_s": -3}, "min_aggregate_tok_s", "0.0 or more"),
    ({"stall_timeout": 0}, "stall_timeout", "greater than 0"),
    ({"api": "grpc"}, "api", "chat, completions, native"),
    ({"metrics": "yes"}, "metrics", "auto, always, never"),
    ({"concurrency": True}, "concurrency", "boolean"),
    ({"bogus": 1}, "bogus", "unknown option"),
])
def test_validate_names_the_option(options, option, words):
    opts = {"url": "http://127.0.0.1:1"}
    opts.update(options)
    with pytest.raises(ConfigError) as e:
        config.validate(opts)
    assert e.value.option == option
    assert words in str(e.value)


def _req(tokens, t):
    r = engine._Request("r", "measure", "c")
    r.t_send = 0.0
    for now, total in zip(t, tokens):
        r.on_tokens(now, total)
    return r


def test_decode_speed_counts_tokens_after_the_first_over_first_to_last():
    # first token at 1.0 s (prefill), then chunks of 3 tokens every 0.1 s up to 31 tokens
    times = [1.0 + 0.1 * k for k in range(11)]
    totals = [1] + [1 + 3 * k for k in range(1, 11)]
    r = _req(totals, times)
    r.completion_tokens = 31
    assert r.decode_tok_s() == pytest.approx(30 / 1.0)
    assert r.itl == [(pytest.approx(0.1 / 3), 3)] * 10
    d = r.as_dict(max_tokens=31)
    assert d["ttft_s"] == 1.0 and d["short"] is False


def test_native_and_openai_events_give_the_same_record():
    nat = engine._Request("a", "measure", "c")
    for k, now in enumerate([1.0, 1.1, 1.2]):
        meta = {"completion_tokens": 1 + 4 * k, "prompt_tokens": 7,
                "finish_reason": None if k < 2 else {"type": "length", "length": 9}}
        if k == 2:
            meta.update(spec_verify_ct=3, spec_correct_drafts_histogram=[0, 1, 0, 2])
        engine._consume_native(nat, now, {"text": "...", "meta_info": meta})
    oai = engine._Request("b", "measure", "c")
    for k, now in enumerate([1.0, 1.1, 1.2]):
        engine._consume_openai(oai, now, {"choices": [{"delta": {"reasoning_content": "t"},
                                                       "finish_reason": None if k < 2 else "length"}],
                                          "usage": {"completion_tokens": 1 + 4 * k}})
    engine._consume_openai(oai, 1.21, {"choices": [], "sglext": {"spec_tokens_details": {
        "spec_verify_ct": 3, "spec_correct_drafts_histogram": [0, 1, 0, 2]}}})
    engine._consume_openai(oai, 1.22, {"choices": [], "usage": {"completion_tokens": 9,
                                                                "prompt_tokens": 7}})
    for r in (nat, oai):
        assert (r.completion_tokens, r.verify_ct, r.finish, r.t_last) == (9, 3, "length", 1.2)
        assert r.decode_tok_s() == pytest.approx(8 / 0.2)
    acc = engine._acceptance([nat])
    assert acc["accept_len"] == 3.0
    # histogram [0,1,0,2]: 3 verify steps; >=1 draft accepted in 3, >=2 in 2, >=3 in 2
    assert acc["by_position"] == pytest.approx([1.0, 2 / 3, 2 / 3])


def _iv(estimate, lower, upper):
    return {"estimate": estimate, "lower": lower, "upper": upper, "n": 8}


def test_evaluate_states_measured_vs_required_for_every_failed_threshold():
    result = {"intervals": {"decode_tok_s": _iv(37.6, 36.9, 38.4), "accept_len": _iv(1.75, 1.7, 1.8),
                            "aggregate_tok_s": _iv(140.0, 136.0, 144.0)},
              "errors": 2, "error_kinds": {"http_500": 2}, "metrics": None, "requests": 8}
    cfg = config.validate({"url": "http://127.0.0.1:1", "min_tok_s": 45, "min_accept_len": 2.8,
                           "min_aggregate_tok_s": 150})
    failures = verdict.evaluate(result, cfg)
    msg = verdict.case_failure_message(result)
    assert [f["threshold"] for f in failures] == ["min_tok_s", "min_accept_len",
                                                 "min_aggregate_tok_s", "max_errors"]
    assert "decode tok/s (per-request median) 37.6 [36.9, 38.4] < required 45.0" in msg
    assert "accept length 1.75 [1.70, 1.80] < required 2.80" in msg
    assert "aggregate tok/s at C=1 140.0 [136.0, 144.0] < required 150.0" in msg
    assert "2 request(s) failed (allowed 0): 2 x http_500" in msg
    assert result["passed"] is False and result["verdict"] == "fail"


def test_evaluate_unmeasurable_accept_length_fails_with_reason():
    result = {"intervals": {"decode_tok_s": _iv(50.0, 48.0, 52.0), "accept_len": None},
              "errors": 0, "error_kinds": {}, "metrics": None, "requests": 8}
    cfg = config.validate({"url": "http://127.0.0.1:1", "min_accept_len": 2.8})
    verdict.evaluate(result, cfg)
    assert result["failures"][0]["message"] == \
        "accept length could not be measured (required >= 2.8)"


def test_prompt_set_is_realistic():
    names = [n for n, _ in CODING_PROMPTS]
    assert "red_black_tree" in names and len(set(names)) == len(names) >= 6
    assert all(len(p) > 400 for _, p in CODING_PROMPTS)


def test_warmup_prompts_are_never_measured_ones():
    measured = {p for _, p in CODING_PROMPTS}
    assert prompts.WARMUP_PROMPTS and not measured & set(prompts.WARMUP_PROMPTS)
    assert prompts.tagged("a1", "x") != prompts.tagged("a2", "x")
    assert prompts.tagged("a1", "x").startswith("Request a1.")


def test_long_context_prompts_are_the_size_asked_and_start_apart():
    texts = [prompts.long_context_prompt(32768, 4.0, i, "t-%d" % i) for i in range(3)]
    for t in texts:
        assert abs(len(t) - 32768 * 4.0) < 200
    # each starts with its own tag, then its slice from another document
    firsts = [t.split("===== ", 2)[1].split(" =====")[0] for t in texts]
    assert len(set(firsts)) == 3
    # real text, not one phrase: most lines of a prompt are distinct
    lines = [ln for ln in texts[0].splitlines() if len(ln.strip()) >= 25]
    assert len(set(lines)) / float(len(lines)) > 0.9
    with pytest.raises(ValueError, match="the corpus holds"):
        prompts.long_context_prompt(10 ** 6, 4.0, 0, "t")


def test_the_corpus_sample_learns_characters_per_token_apart_from_the_long_prompts():
    sample = prompts.corpus_sample(8000, "w-1")
    assert sample.startswith("Request w-1.") and 8000 <= len(sample) < 8200


def test_role_chunk_marks_the_first_token_under_a_reasoning_parser():
    """SGLang's first chat chunk (role, empty content) arrives with the prefill's token; with the
    qwen3 parser that token (<think>) has no delta of its own, so the role chunk is its arrival."""
    r = engine._Request("c", "measure", "c")
    r.t_send = 0.5
    engine._consume_openai(r, 1.0, {"choices": [{"delta": {"role": "assistant", "content": ""}}]})
    engine._consume_openai(r, 1.1, {"choices": [{"delta": {"reasoning_content": "a b c"}}],
                                    "usage": {"completion_tokens": 4}})
    engine._consume_openai(r, 1.2, {"choices": [{"delta": {"content": "d e"},
                                                 "finish_reason": "length"}],
                                    "usage": {"completion_tokens": 7}})
    engine._consume_openai(r, 1.21, {"choices": [], "usage": {"completion_tokens": 7}})
    assert r.t_first == 1.0 and r.completion_tokens == 7
    assert r.decode_tok_s() == pytest.approx(6 / 0.2)
    assert r.as_dict(7)["ttft_s"] == pytest.approx(0.5)
